package locks

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lockhub/lockhub/protocol"
)

// ErrInvalidEntity is protocol.ErrInvalidEntity, matched (errors.Is) by every
// *InvalidEntityError.
var ErrInvalidEntity = protocol.ErrInvalidEntity

// ErrNotLockable is matched (errors.Is) by every *NotLockableError.
var ErrNotLockable = errors.New("locks: type is not lockable")

// InvalidEntityError says which part of a request failed the rules of PROTOCOL.md §1.
// Nothing was written. Transports answer it as invalid_entity. It is
// protocol.InvalidEntityError, where the rules live, so that token checks use them
// without this package.
type InvalidEntityError = protocol.InvalidEntityError

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

var _ protocol.ClientError = (*NotLockableError)(nil)
