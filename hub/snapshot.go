package hub

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/lockhub/lockhub/protocol"
)

// Shared snapshot reads: when an instance goes away its clients reconnect to the
// others at once, and each of them watches. Read one by one, a crowd of 10,000 watches
// of one type would be 10,000 List calls of the same index; here the watches of one
// (tenant, type) share reads, so Redis sees at most one List of a key in flight from
// this hub, and a quiet type is read about once a snapshotReuse however many watch it.
//
// A read is valid for a watcher only if it reflects every change the watcher will not
// receive as an event. A watcher receives every change whose event reaches the hub
// after the watcher was registered (holding its events, see beginSnapshot). So a read
// serves a watcher when it began after the watcher's registration, or when no event of
// the key has reached the hub since the read began: each change the read missed was
// announced after it began (a script publishes in the same step as its change), and its
// event, not yet arrived at the registration, reaches the watcher.
//
// A watcher therefore joins no read in flight: one may have begun before its
// registration, and its changes' events may still arrive. It reuses the last read when
// that one is current (no event of the key since it began, no Resync since, younger
// than snapshotReuse, and Redis answered it); otherwise it joins the next read of its
// key, which starts when the one in flight ends and serves every watcher that queued
// while it waited. The watcher that queues first on a next read is its leader and makes
// the call; the others wait for its result. Every wait is bounded by the store's own
// timeout on List, so none needs a ctx.
//
// Changes no event announces yet (a lease that ran out, a write of another program)
// are announced by the next sweep, within SweepInterval, to the watchers registered by
// then, a reused read's included; snapshotReuse bounds what a reused read may miss of
// them besides.

// snapshotReuse is how long a read stays current for later watches of its key, at most.
const snapshotReuse = time.Second

// snapshotReads shares the snapshot reads of a hub's watches. Its zero value is ready to
// use. All methods may be called concurrently.
type snapshotReads struct {
	mu     sync.Mutex
	keys   map[watchKey]*snapshotKey // guarded by mu; keys with a read in flight, queued, or current
	pruned time.Time                 // guarded by mu; when keys was last cleared of reads no longer current
	now    func() time.Time          // nil: time.Now; tests drive it
}

// snapshotKey is the reads of one (tenant, type).
type snapshotKey struct {
	reading *snapshotRead // in flight; nil when none
	next    *snapshotRead // queued behind reading, serving the watchers that came meanwhile
	last    *snapshotRead // the newest read done, while current; nil when none
}

// snapshotRead is one List call and the watchers it serves.
type snapshotRead struct {
	start    chan struct{} // closed when the read may begin (the one before it ended)
	done     chan struct{} // closed when locks and err are set
	locks    []byte        // the locks encoded once, as the "locks" member, for every watcher it serves
	err      error
	answered bool      // Redis answered: an empty list of a store failing open is never reused
	waiters  int       // guarded by snapshotReads.mu; watchers served, the leader included
	began    time.Time // guarded by snapshotReads.mu; when the read was let begin
	changed  bool      // guarded by snapshotReads.mu; an event of its key reached the hub after it began
}

// snapshotSource tells where a watch's snapshot came from, for the metric.
type snapshotSource string

const (
	snapshotOwn    snapshotSource = "read"   // the watcher's own List call, shared with those who queued behind it
	snapshotShared snapshotSource = "shared" // another watcher's call, that began after this watcher queued
	snapshotReused snapshotSource = "reused" // a call done before, still current
)

// listFunc reads a snapshot: the live locks, and whether Redis answered.
type listFunc func(context.Context) ([]protocol.Lock, bool, error)

// list returns a snapshot of key valid for a watcher registered before this call (see
// above), as the JSON array of its locks, and where it came from. read is the List
// call; it is made by one of the callers sharing it, with that caller's ctx. The bytes
// are shared: do not modify them.
func (s *snapshotReads) list(ctx context.Context, key watchKey, read listFunc) ([]byte, snapshotSource, error) {
	s.mu.Lock()
	now := s.clock()
	s.pruneLocked(now)
	if s.keys == nil {
		s.keys = map[watchKey]*snapshotKey{}
	}
	k := s.keys[key]
	if k == nil {
		k = &snapshotKey{}
		s.keys[key] = k
	}
	if r := k.last; r != nil && now.Sub(r.began) < snapshotReuse {
		s.mu.Unlock()
		return r.locks, snapshotReused, r.err
	}
	k.last = nil
	var r *snapshotRead
	leader := false
	switch {
	case k.reading == nil: // nothing in flight: read now
		r = newSnapshotRead()
		r.began = now
		close(r.start)
		k.reading, leader = r, true
	case k.next == nil: // one in flight, begun maybe before our registration: queue
		r = newSnapshotRead()
		k.next, leader = r, true
	default: // join the queued read, which has not begun
		r = k.next
	}
	r.waiters++
	s.mu.Unlock()

	if !leader {
		<-r.done
		return r.locks, snapshotShared, r.err
	}
	<-r.start
	list, answered, err := read(ctx)
	r.locks, r.answered, r.err = encodeLocks(list), answered, err

	s.mu.Lock()
	if r.answered && r.err == nil && !r.changed {
		k.last = r
	}
	k.reading, k.next = k.next, nil
	if k.reading != nil {
		k.reading.began = s.clock()
		close(k.reading.start) // its leader reads now; watchers coming later queue behind it
	} else if k.last == nil {
		s.deleteLocked(key)
	}
	s.mu.Unlock()
	close(r.done)
	return r.locks, snapshotOwn, r.err
}

// changed notes that an event of key reached the hub: no read begun before it is
// current any more. Called before the event is queued to the watchers.
func (s *snapshotReads) changed(key watchKey) {
	s.mu.Lock()
	if k := s.keys[key]; k != nil {
		if k.reading != nil {
			k.reading.changed = true
		}
		k.last = nil
		if k.reading == nil && k.next == nil {
			s.deleteLocked(key)
		}
	}
	s.mu.Unlock()
}

// forget makes every read begun so far not current: the feed was lost, and the events
// of that time with it.
func (s *snapshotReads) forget() {
	s.mu.Lock()
	for key, k := range s.keys {
		if k.reading != nil {
			k.reading.changed = true
		}
		k.last = nil
		if k.reading == nil && k.next == nil {
			s.deleteLocked(key)
		}
	}
	s.mu.Unlock()
}

// pruneLocked drops the keys whose only read is no longer current, once a
// snapshotReuse, so a hub keeps no entry for the types nobody watches any more.
func (s *snapshotReads) pruneLocked(now time.Time) {
	if now.Sub(s.pruned) < snapshotReuse {
		return
	}
	s.pruned = now
	for key, k := range s.keys {
		if k.reading == nil && k.next == nil && (k.last == nil || now.Sub(k.last.began) >= snapshotReuse) {
			s.deleteLocked(key)
		}
	}
}

func (s *snapshotReads) deleteLocked(key watchKey) {
	delete(s.keys, key)
	if len(s.keys) == 0 {
		s.keys = nil // an idle hub keeps no map
	}
}

func (s *snapshotReads) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// encodeLocks encodes locks as a snapshot's "locks" member: [] when there are none.
func encodeLocks(locks []protocol.Lock) []byte {
	if locks == nil {
		locks = []protocol.Lock{}
	}
	b, err := json.Marshal(locks)
	if err != nil {
		panic("hub: encoding locks cannot fail: " + err.Error())
	}
	return b
}

func newSnapshotRead() *snapshotRead {
	return &snapshotRead{start: make(chan struct{}), done: make(chan struct{})}
}

// queued reports how many watchers of key wait for the read queued behind the one in
// flight: for tests.
func (s *snapshotReads) queued(key watchKey) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.keys[key]; k != nil && k.next != nil {
		return k.next.waiters
	}
	return 0
}
