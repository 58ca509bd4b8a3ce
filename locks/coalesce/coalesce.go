// Package coalesce shares reads that arrive together (PROTOCOL.md §4, "Bounded work per
// Redis command": identical reads may share one read).
//
// When an instance goes away its clients reconnect to the others at once, and each of
// them watches; a tenant's people may list one big type, or the console, many times a
// second. Read one by one, each is a read of the same keys and an encoding of the same
// locks. Here the reads of one key that overlap share one read, so Redis sees at most
// one read of a key in flight from this process, and a crowd costs about (crowd
// duration / read time) of them.
//
// A read is valid for a caller only if it began after the caller's call began: a change
// made just before the call (the caller's own claim, or an event published before a
// watcher was registered) may be missing from a read already in flight. A caller
// therefore never joins a read in flight. It joins the next read of its key, which
// starts when the one in flight ends and serves every caller that queued while it was
// waiting. The caller that queues first on a next read is its leader and makes the
// call, with its own ctx; the others wait for its result.
//
// All methods may be called concurrently. A waiting caller is released when the
// leader's read returns, so every wait is bounded by the read's own timeout.
package coalesce

import (
	"context"
	"sync"
)

// Reads coalesces the reads of keys K, each answering a V that callers share and must
// not modify. Its zero value is ready to use.
type Reads[K comparable, V any] struct {
	mu   sync.Mutex
	keys map[K]*reads[V] // guarded by mu; keys with a read in flight or queued
}

// reads is the reads of one key.
type reads[V any] struct {
	reading *read[V] // in flight; nil when none
	next    *read[V] // queued behind reading, serving the callers that came meanwhile
}

// read is one call of the read function and the callers it serves.
type read[V any] struct {
	start   chan struct{} // closed when the read may begin (the one before it ended)
	done    chan struct{} // closed when v and err are set
	v       V
	err     error
	waiters int // guarded by Reads.mu; callers served, the leader included
}

// Read returns what read answers for key, read after this call began, sharing the read
// with other callers of key where that is valid (see the package comment): read is
// called once for all who share it, by one of them, with that caller's ctx.
func (s *Reads[K, V]) Read(ctx context.Context, key K, readFn func(context.Context) (V, error)) (V, error) {
	s.mu.Lock()
	if s.keys == nil {
		s.keys = map[K]*reads[V]{}
	}
	k := s.keys[key]
	if k == nil {
		k = &reads[V]{}
		s.keys[key] = k
	}
	var r *read[V]
	leader := false
	switch {
	case k.reading == nil: // nothing in flight: read now
		r = newRead[V]()
		close(r.start)
		k.reading, leader = r, true
	case k.next == nil: // one in flight, begun maybe before this call: queue
		r = newRead[V]()
		k.next, leader = r, true
	default: // join the queued read, which has not begun
		r = k.next
	}
	r.waiters++
	s.mu.Unlock()

	if !leader {
		<-r.done
		return r.v, r.err
	}
	<-r.start
	r.v, r.err = readFn(ctx)

	s.mu.Lock()
	k.reading, k.next = k.next, nil
	if k.reading != nil {
		close(k.reading.start) // its leader reads now; callers coming later queue behind it
	} else {
		delete(s.keys, key)
		if len(s.keys) == 0 {
			s.keys = nil // an idle process keeps no map
		}
	}
	s.mu.Unlock()
	close(r.done)
	return r.v, r.err
}

// Queued reports how many callers of key wait for the read queued behind the one in
// flight: for tests.
func (s *Reads[K, V]) Queued(key K) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil && k.next != nil {
		return k.next.waiters
	}
	return 0
}

func newRead[V any]() *read[V] {
	return &read[V]{start: make(chan struct{}), done: make(chan struct{})}
}
