package locks

import (
	"fmt"
	"slices"
)

// DefaultLockable is the lockable type list when none is configured.
var defaultLockable = []string{"ApprovalRequest"}

// Registry is the set of entity types that may be locked: the Go counterpart of the
// story's [Lockable] attribute. It is immutable and safe for concurrent use.
type Registry struct {
	types []string // sorted, unique
}

// NewRegistry returns a registry of the given types. Zero types means ApprovalRequest.
// A name that fails the entity type rule of PROTOCOL.md §1 is an error.
func NewRegistry(types ...string) (*Registry, error) {
	if len(types) == 0 {
		types = defaultLockable
	}
	r := &Registry{}
	for _, t := range types {
		if !ValidType(t) {
			return nil, fmt.Errorf("locks: lockable type %q: must match [A-Za-z0-9_.-]{1,64}", t)
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
