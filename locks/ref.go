package locks

import "github.com/lockhub/lockhub/protocol"

// Ref names one lockable entity of one tenant. Build keys from a Ref only after
// Validate has accepted it.
type Ref struct {
	Tenant string
	Type   string
	UID    string
}

// String returns "tenant/Type/uid", for logs.
func (r Ref) String() string { return r.Tenant + "/" + r.Type + "/" + r.UID }

// Validate checks r against the names of PROTOCOL.md §1 (protocol.ValidTenant,
// ValidType, ValidUID): the first part that fails, in the order tenant, type, uid, is
// the *InvalidEntityError. No accepted part can hold a brace, so the tenant is always
// the whole hash tag of every key built from it.
func (r Ref) Validate() error {
	if !protocol.ValidTenant(r.Tenant) {
		return &InvalidEntityError{Field: "tenant", Value: r.Tenant}
	}
	if !protocol.ValidType(r.Type) {
		return &InvalidEntityError{Field: "entityType", Value: r.Type}
	}
	if !protocol.ValidUID(r.UID) {
		return &InvalidEntityError{Field: "entityUid", Value: r.UID}
	}
	return nil
}

// ValidTenant is protocol.ValidTenant, kept for this package's callers.
func ValidTenant(s string) bool { return protocol.ValidTenant(s) }

// ValidOID is protocol.ValidOID, kept for this package's callers.
func ValidOID(s string) bool { return protocol.ValidOID(s) }

// ValidType is protocol.ValidType, kept for this package's callers.
func ValidType(s string) bool { return protocol.ValidType(s) }
