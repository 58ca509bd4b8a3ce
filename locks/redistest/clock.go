package redistest

import (
	"sync/atomic"
	"time"
)

// Clock is a clock that moves only when told, for the Now of a store or a verifier
// under test: time is driven, not waited for. It starts at the real time, so tokens
// and leases made against it hold. All methods may be called concurrently.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a Clock at the real time.
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
