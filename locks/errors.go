package locks

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lockhub/lockhub/protocol"
)

// ErrInvalidEntity is matched (errors.Is) by every *InvalidEntityError.
var ErrInvalidEntity = errors.New("locks: invalid entity")

// ErrNotLockable is matched (errors.Is) by every *NotLockableError.
var ErrNotLockable = errors.New("locks: type is not lockable")

// InvalidEntityError says which part of a request failed the rules of PROTOCOL.md §1.
// Nothing was written. Transports answer it as invalid_entity.
type InvalidEntityError struct {
	Field string // "tenant", "entityType", "entityUid" or "holderOid"
	Value string
}

func (e *InvalidEntityError) Error() string { return "locks: " + e.ClientMessage() }

// ErrorCode returns protocol.CodeInvalidEntity.
func (e *InvalidEntityError) ErrorCode() protocol.ErrorCode { return protocol.CodeInvalidEntity }

// ClientMessage says which name breaks which rule.
func (e *InvalidEntityError) ClientMessage() string {
	v := e.Value
	if len(v) > 80 {
		v = v[:80] + "…"
	}
	rule := "[A-Za-z0-9_.-]{1,64}"
	if e.Field == "entityUid" || e.Field == "holderOid" {
		rule = "[A-Za-z0-9_.:-]{1,128}"
	}
	return fmt.Sprintf("invalid %s %q: must match %s", e.Field, v, rule)
}

// Is makes errors.Is(err, ErrInvalidEntity) true.
func (e *InvalidEntityError) Is(target error) bool { return target == ErrInvalidEntity }

// NotLockableError refuses an entity type that is not registered as lockable, naming
// the types that are, so a frontend that names an unmarked entity fails loudly.
// Transports answer it as not_lockable.
type NotLockableError struct {
	Type       string
	Registered []string
}

func (e *NotLockableError) Error() string { return "locks: " + e.ClientMessage() }

// ErrorCode returns protocol.CodeNotLockable.
func (e *NotLockableError) ErrorCode() protocol.ErrorCode { return protocol.CodeNotLockable }

// ClientMessage names the type and the types that are lockable.
func (e *NotLockableError) ClientMessage() string {
	return fmt.Sprintf("type %q is not lockable; lockable types: %s", e.Type, strings.Join(e.Registered, ", "))
}

// Is makes errors.Is(err, ErrNotLockable) true.
func (e *NotLockableError) Is(target error) bool { return target == ErrNotLockable }

var (
	_ protocol.ClientError = (*InvalidEntityError)(nil)
	_ protocol.ClientError = (*NotLockableError)(nil)
)
