package hub

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/lockhub/lockhub/protocol"
)

// Coalesced snapshot reads: when an instance goes away its clients reconnect to the
// others at once, and each of them watches. Read one by one, a crowd of 10,000 watches
// of one type would be 10,000 reads (ListJSON) of the same index; here the watches of
// one (tenant, type) that overlap share reads, so Redis sees at most one read of a key
// in flight from this hub, and a crowd costs about (crowd duration / read time) of them.
//
// A read is valid for a watcher only if it began after the watcher was registered
// (holding its events, see beginSnapshot): an event published between an earlier read
// and the registration would reach neither the snapshot nor the watcher. A watcher
// therefore never joins a read already in flight. It joins the next read of its key,
// which starts when the one in flight ends and serves every watcher that queued while
// it was waiting. The watcher that queues first on a next read is its leader and makes
// the call; the others wait for its result. Every wait is bounded by the store's own
// timeout on ListJSON, so none needs a ctx.

// snapshotReads coalesces the snapshot reads of a hub's watches. Its zero value is
// ready to use. All methods may be called concurrently.
type snapshotReads struct {
	mu   sync.Mutex
	keys map[watchKey]*snapshotKey // guarded by mu; keys with a read in flight or queued
}

// snapshotKey is the reads of one (tenant, type).
type snapshotKey struct {
	reading *snapshotRead // in flight; nil when none
	next    *snapshotRead // queued behind reading, serving the watchers that came meanwhile
}

// snapshotRead is one ListJSON call and the watchers it serves.
type snapshotRead struct {
	start   chan struct{} // closed when the read may begin (the one before it ended)
	done    chan struct{} // closed when locks and err are set
	locks   []byte        // the locks, encoded once as the "locks" member, for every watcher it serves
	err     error
	waiters int // guarded by snapshotReads.mu; watchers served, the leader included
}

// list returns a snapshot of key read after this call began, sharing the read with
// other callers where that is valid (see above), as the JSON array of its locks: read
// (the store's ListJSON, which reads the keys every time and encodes only what changed
// since its last read of the type) is called once for all who share it. It is made by
// one of the callers sharing it, with that caller's ctx. The bytes are shared: do not
// modify them.
func (s *snapshotReads) list(ctx context.Context, key watchKey, read func(context.Context) ([]byte, error)) ([]byte, error) {
	s.mu.Lock()
	if s.keys == nil {
		s.keys = map[watchKey]*snapshotKey{}
	}
	k := s.keys[key]
	if k == nil {
		k = &snapshotKey{}
		s.keys[key] = k
	}
	var r *snapshotRead
	leader := false
	switch {
	case k.reading == nil: // nothing in flight: read now
		r = newSnapshotRead()
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
		return r.locks, r.err
	}
	<-r.start
	r.locks, r.err = read(ctx)

	s.mu.Lock()
	k.reading, k.next = k.next, nil
	if k.reading != nil {
		close(k.reading.start) // its leader reads now; watchers coming later queue behind it
	} else {
		delete(s.keys, key)
		if len(s.keys) == 0 {
			s.keys = nil // an idle hub keeps no map
		}
	}
	s.mu.Unlock()
	close(r.done)
	return r.locks, r.err
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

// snapshotFrame is the snapshot of typ answering req, its locks already encoded (a
// JSON array, see encodeLocks); an unsolicited one answers protocol.Request{} and
// carries no id. The bytes are protocol.Snapshot's, built around the shared locks
// rather than encoded for each watcher.
func snapshotFrame(req protocol.Request, typ string, locks []byte) outFrame {
	return outFrame{b: appendSnapshot(nil, req, typ, locks), typ: protocol.FrameSnapshot}
}

// appendSnapshot appends snapshotFrame's bytes to b.
func appendSnapshot(b []byte, req protocol.Request, typ string, locks []byte) []byte {
	b = slices.Grow(b, len(locks)+len(typ)+len(req.ID)+64)
	b = append(b, '{')
	if req.ID != "" || req.HasID {
		id, _ := json.Marshal(req.ID) // a string always encodes
		b = append(b, `"id":`...)
		b = append(b, id...)
		b = append(b, ',')
	}
	b = append(b, `"type":"`+string(protocol.FrameSnapshot)+`","entityType":`...)
	t, _ := json.Marshal(typ) // a checked name; encoded all the same
	b = append(b, t...)
	b = append(b, `,"locks":`...)
	b = append(b, locks...)
	return append(b, '}')
}
