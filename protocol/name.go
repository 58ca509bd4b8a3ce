package protocol

import (
	"errors"
	"fmt"
)

// The names of PROTOCOL.md §1, checked before any key is built: tenant and entity type
// [A-Za-z0-9_.-]{1,64}, entity uid [A-Za-z0-9_.:-]{1,128}, and the holder's oid by
// the uid rule. No accepted name holds a brace or whitespace, so the tenant is always
// the whole hash tag of every key built from it. The store, the socket, HTTP and token
// checks all use these, so a name reads as valid or not the same everywhere.
const (
	MaxTenantLength = 64  // bytes; every accepted byte is ASCII
	MaxTypeLength   = 64  // bytes
	MaxUIDLength    = 128 // bytes, of an entity uid or a holder's oid
)

// The rules as PROTOCOL.md §1 writes them, for messages that say which one a name
// breaks; a test checks them against the contract and the functions below.
const (
	NameRule = "[A-Za-z0-9_.-]{1,64}"   // a tenant or an entity type
	UIDRule  = "[A-Za-z0-9_.:-]{1,128}" // an entity uid or a holder's oid
)

// ValidTenant reports whether s may be a tenant: [A-Za-z0-9_.-]{1,64}.
func ValidTenant(s string) bool { return validName(s, MaxTenantLength, false) }

// ValidType reports whether s may be an entity type: [A-Za-z0-9_.-]{1,64}.
func ValidType(s string) bool { return validName(s, MaxTypeLength, false) }

// ValidUID reports whether s may be an entity uid: [A-Za-z0-9_.:-]{1,128}.
func ValidUID(s string) bool { return validName(s, MaxUIDLength, true) }

// ValidOID reports whether s may be a holder's oid: it follows the uid rule.
func ValidOID(s string) bool { return validName(s, MaxUIDLength, true) }

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

// ErrInvalidEntity is matched (errors.Is) by every *InvalidEntityError.
var ErrInvalidEntity = errors.New("protocol: invalid entity")

// InvalidEntityError says which name of a request or token fails the rules of
// PROTOCOL.md §1. Nothing was written. Transports answer it as CodeInvalidEntity.
type InvalidEntityError struct {
	Field string // the member named: "tenant", "entityType", "entityUid" or "holderOid"
	Value string
}

func (e *InvalidEntityError) Error() string { return "protocol: " + e.ClientMessage() }

// ErrorCode returns CodeInvalidEntity.
func (e *InvalidEntityError) ErrorCode() ErrorCode { return CodeInvalidEntity }

// ClientMessage says which name breaks which rule.
func (e *InvalidEntityError) ClientMessage() string {
	v := e.Value
	if len(v) > 80 {
		v = v[:80] + "…"
	}
	rule := NameRule
	if e.Field == "entityUid" || e.Field == "holderOid" {
		rule = UIDRule
	}
	return fmt.Sprintf("invalid %s %q: must match %s", e.Field, v, rule)
}

// Is makes errors.Is(err, ErrInvalidEntity) true.
func (e *InvalidEntityError) Is(target error) bool { return target == ErrInvalidEntity }

var _ ClientError = (*InvalidEntityError)(nil)
