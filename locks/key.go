package locks

// Ref names one lockable entity of one tenant. Build keys from a Ref only after
// Validate has accepted it.
type Ref struct {
	Tenant string
	Type   string
	UID    string
}

// String returns "tenant/Type/uid", for logs.
func (r Ref) String() string { return r.Tenant + "/" + r.Type + "/" + r.UID }

// Validate checks r against PROTOCOL.md §1: tenant and type [A-Za-z0-9_.-]{1,64},
// uid [A-Za-z0-9_.:-]{1,128}. No accepted part can hold a brace, so the tenant is
// always the whole hash tag of every key built from it.
func (r Ref) Validate() error {
	if !validName(r.Tenant, 64, false) {
		return &InvalidEntityError{Field: "tenant", Value: r.Tenant}
	}
	if !validName(r.Type, 64, false) {
		return &InvalidEntityError{Field: "entityType", Value: r.Type}
	}
	if !validName(r.UID, 128, true) {
		return &InvalidEntityError{Field: "entityUid", Value: r.UID}
	}
	return nil
}

// ValidTenant reports whether s may be a tenant (PROTOCOL.md §1).
func ValidTenant(s string) bool { return validName(s, 64, false) }

// ValidOID reports whether s may be a holder's oid: it follows the uid rule.
func ValidOID(s string) bool { return validName(s, 128, true) }

// ValidType reports whether s may be an entity type name.
func ValidType(s string) bool { return validName(s, 64, false) }

// validName is a hand-written [A-Za-z0-9_.-] (plus ':' when colon) check: it runs on
// every request, and a loop over bytes is several times faster than a regexp.
func validName(s string, max int, colon bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == '-':
		case c == ':' && colon:
		default:
			return false
		}
	}
	return true
}
