package locks

import (
	"fmt"
	"slices"

	"github.com/lockhub/lockhub/protocol"
)

// DefaultLockable is the lockable type of a registry made without types.
const DefaultLockable = "ApprovalRequest"

// Registry is the set of entity types that may be locked: the Go counterpart of the
// story's [Lockable] attribute. It is immutable and safe for concurrent use.
type Registry struct {
	types []string // sorted, unique
}

// NewRegistry returns a registry of the given types: setting "lockable" (PROTOCOL.md
// §7). Zero types means DefaultLockable. A name that fails the entity type rule of
// PROTOCOL.md §1 is an error.
func NewRegistry(types ...string) (*Registry, error) {
	if len(types) == 0 {
		types = []string{DefaultLockable}
	}
	r := &Registry{}
	for _, t := range types {
		if !ValidType(t) {
			return nil, &protocol.SettingError{Setting: "lockable", Err: fmt.Errorf("type %q must match %s", t, protocol.NameRule)}
		}
		r.types = append(r.types, t)
	}
	slices.Sort(r.types)
	r.types = slices.Compact(r.types)
	return r, nil
}

// Types returns the registered types, sorted. The caller must not modify the slice.
func (r *Registry) Types() []string { return r.types }

// Check returns a *NotLockableError unless t is registered.
func (r *Registry) Check(t string) error {
	if _, ok := slices.BinarySearch(r.types, t); ok {
		return nil
	}
	return &NotLockableError{Type: t, Registered: slices.Clone(r.types)}
}
