package auth

import "cmp"

// DefaultTakeoverRole is the role that may take a lock over (PROTOCOL.md §6) when none
// is configured: setting "takeover-role".
const DefaultTakeoverRole = "Locks.TakeOver"

// DefaultAdminRole is the role of the lock console (PROTOCOL.md §10) when none is
// configured: setting "admin-role".
const DefaultAdminRole = "Locks.Admin"

// Roles is the role policy: which role of a token grants what beyond holding locks.
// The socket (package hub) and HTTP (package web) both check their callers with it, so
// one setting means the same over either. The zero value is the default policy.
type Roles struct {
	// Takeover is the role that may take a lock over (PROTOCOL.md §6): setting
	// "takeover-role". Zero means DefaultTakeoverRole.
	Takeover string
	// Admin is the role of the lock console (PROTOCOL.md §10): setting "admin-role".
	// Zero means DefaultAdminRole.
	Admin string
}

// WithDefaults returns r with each zero field set to its default: the one place the
// defaults of the roles are applied.
func (r Roles) WithDefaults() Roles {
	return Roles{
		Takeover: cmp.Or(r.Takeover, DefaultTakeoverRole),
		Admin:    cmp.Or(r.Admin, DefaultAdminRole),
	}
}

// CanTakeOver reports whether id may take a lock over.
func (r Roles) CanTakeOver(id Identity) bool { return id.HasRole(r.WithDefaults().Takeover) }

// IsAdmin reports whether id may use the lock console.
func (r Roles) IsAdmin(id Identity) bool { return id.HasRole(r.WithDefaults().Admin) }
