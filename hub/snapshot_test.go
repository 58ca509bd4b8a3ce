package hub

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// gatedStore is a Store whose snapshot reads (ListJSON) are counted and, while gate is set, held
// after reading until the gate opens: a read in flight that the test controls.
type gatedStore struct {
	Feed
	lists   atomic.Int64
	mu      sync.Mutex
	gate    chan struct{} // nil: no gate
	entered chan struct{} // one send per gated List, after its read
}

func (s *gatedStore) ListJSON(ctx context.Context, tenant, entityType string) ([]byte, error) {
	s.lists.Add(1)
	list, err := s.Feed.ListJSON(ctx, tenant, entityType)
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		s.entered <- struct{}{}
		<-gate
	}
	return list, err
}

// setGate makes the next Lists wait on a new gate, and returns its opener.
func (s *gatedStore) setGate() (open func()) {
	g := make(chan struct{})
	s.mu.Lock()
	s.gate, s.entered = g, make(chan struct{}, 64)
	s.mu.Unlock()
	return sync.OnceFunc(func() {
		s.mu.Lock()
		s.gate = nil
		s.mu.Unlock()
		close(g)
	})
}

// startGated starts a hub on miniredis whose store is a gatedStore.
func startGated(t *testing.T) (*testHub, *gatedStore) {
	t.Helper()
	gs := &gatedStore{}
	th := startMini(t, hubOptions{hub: func(c *Config) {
		gs.Feed = c.Store.Feed
		c.Store.Feed = gs
	}})
	return th, gs
}

// rawSocket is an authenticated socket read frame by frame, in the order the hub wrote
// them: protocol.Client routes answers and events apart, which hides their order.
type rawSocket struct {
	t  testing.TB
	ws *websocket.Conn
}

func (th *testHub) dialOrdered(tenant, oid string) *rawSocket {
	th.t.Helper()
	s := th.dialUnauthed()
	s.send(map[string]string{"type": "auth", "token": th.token(tenant, oid)})
	if f := s.next(); f.Type != protocol.FrameWelcome {
		th.t.Fatalf("auth answered %s", f.Type)
	}
	return s
}

// dialUnauthed opens a rawSocket that has sent nothing yet.
func (th *testHub) dialUnauthed() *rawSocket {
	th.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, th.url, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		th.t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(16 << 20)
	th.t.Cleanup(func() { _ = ws.CloseNow() }) // the test is over; no handshake needed
	return &rawSocket{th.t, ws}
}

func (s *rawSocket) send(v any) {
	s.t.Helper()
	b, _ := json.Marshal(v) // maps of strings always encode
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.ws.Write(ctx, websocket.MessageText, b); err != nil {
		s.t.Fatalf("write: %v", err)
	}
}

func (s *rawSocket) next() protocol.ServerFrame {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, data, err := s.ws.Read(ctx)
	if err != nil {
		s.t.Fatalf("read: %v", err)
	}
	f, err := protocol.DecodeServerFrame(data)
	if err != nil {
		s.t.Fatalf("decode: %v", err)
	}
	return f
}

// apply reads s's frames until the event of the lock "end": its watch's snapshot
// first, then events, applied to the model it returns. It calls snapped once the
// snapshot is in. It runs on its own goroutine, so it reports with t.Error.
func (s *rawSocket) apply(t *testing.T, i int, snapped func()) map[string]string {
	var m map[string]string
	defer func() {
		if m == nil {
			snapped()
		}
	}()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		_, data, err := s.ws.Read(ctx)
		cancel()
		if err != nil {
			t.Errorf("watcher %d: read: %v", i, err)
			return m
		}
		f, err := protocol.DecodeServerFrame(data)
		switch {
		case err != nil:
			t.Errorf("watcher %d: decode: %v", i, err)
			return m
		case f.Type == protocol.FrameSnapshot && m == nil:
			m = map[string]string{}
			for _, l := range f.Snapshot.Locks {
				m[l.EntityUID] = l.HolderOID
			}
			snapped()
			continue
		case f.Type != protocol.FrameLock:
			t.Errorf("watcher %d: unexpected %s frame", i, f.Type)
			return m
		case m == nil:
			t.Errorf("watcher %d: event %s %s before its snapshot", i, f.Event.Op, f.Event.Lock.EntityUID)
			return m
		}
		ev := f.Event
		switch ev.Op {
		case protocol.OpAcquired, protocol.OpRenewed, protocol.OpTakenOver:
			m[ev.Lock.EntityUID] = ev.Lock.HolderOID
		case protocol.OpReleased, protocol.OpExpired:
			delete(m, ev.Lock.EntityUID)
		}
		if ev.Lock.EntityUID == "end" { // the changes use o-N only
			return m
		}
	}
}

func lockUIDs(ls []protocol.Lock) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.EntityUID)
	}
	slices.Sort(out)
	return out
}

// TestWatchCrowdSharesReads: watches of one type that arrive while its snapshot is
// read wait for one next read together, never for the read in flight, which may have
// begun before they were registered. A change made while they wait reaches each of
// them exactly once, after its snapshot.
func TestWatchCrowdSharesReads(t *testing.T) {
	const n = 40
	th, gs := startGated(t)
	ctx := tctx(t)
	claimer, _ := th.dial("acme", "u-c")
	expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "before"))
	th.waitFeed("acme")
	watchers := make([]*rawSocket, n)
	for i := range watchers {
		watchers[i] = th.dialOrdered("acme", "u-w"+itoa(i))
	}
	key := watchKey{"acme", typ}

	// The first watch's read is in flight, done reading and held back.
	lists := gs.lists.Load() // waitFeed's
	open := gs.setGate()
	defer open()
	watchers[0].send(map[string]string{"id": "w", "type": "watch", "entityType": typ})
	select {
	case <-gs.entered:
	case <-time.After(waitTimeout):
		t.Fatal("the first watch did not read")
	}
	// The others arrive meanwhile and queue for one next read.
	for _, w := range watchers[1:] {
		w.send(map[string]string{"id": "w", "type": "watch", "entityType": typ})
	}
	redistest.Eventually(t, "the other watches queue behind the read in flight", func() bool { return th.hub.snaps.Queued(key) == n-1 })
	// A change now: after the first read, before the next.
	expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "during"))
	redistest.Eventually(t, "the event reaches every watcher, held", func() bool { return th.metric("lockhub_hub_events_delivered_total") >= n })
	open()

	for i, w := range watchers {
		f := w.next()
		if f.Type != protocol.FrameSnapshot || f.ID != "w" {
			t.Fatalf("watcher %d: first frame %s %q, want its snapshot", i, f.Type, f.ID)
		}
		want := []string{"before", "during"}
		if i == 0 {
			want = want[:1] // read before the change
		}
		if got := lockUIDs(f.Snapshot.Locks); !slices.Equal(got, want) {
			t.Fatalf("watcher %d: snapshot %v, want %v", i, got, want)
		}
	}
	// A last change: once a watcher has it, it has every earlier event.
	expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "end"))
	for i, w := range watchers {
		var seen []string
		for {
			f := w.next()
			if f.Type != protocol.FrameLock {
				t.Fatalf("watcher %d: %s frame after its snapshot", i, f.Type)
			}
			seen = append(seen, string(f.Event.Op)+" "+f.Event.Lock.EntityUID)
			if f.Event.Lock.EntityUID == "end" {
				break
			}
		}
		if want := []string{"Acquired during", "Acquired end"}; !slices.Equal(seen, want) {
			t.Fatalf("watcher %d: events after its snapshot %v, want %v", i, seen, want)
		}
	}
	if got := gs.lists.Load() - lists; got != 2 {
		t.Fatalf("%d watches made %d List calls, want 2 (the one in flight, and one shared)", n, got)
	}
}

// TestWatchCrowdFewerReads: a crowd of watches of one type, sent at once on many
// sockets, costs far fewer List calls than watches, and each gets its snapshot. The
// store's own count of List operations is the measure.
func TestWatchCrowdFewerReads(t *testing.T) {
	const n = 200
	th, gs := startGated(t)
	ctx := tctx(t)
	claimer, _ := th.dial("acme", "u-c")
	for i := range 5 {
		expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "r-"+itoa(i)))
	}
	clients := make([]*protocol.Client, n)
	for i := range clients {
		clients[i], _ = th.dial("acme", "u-w"+itoa(i))
	}
	before := th.metric("lockhub_store_operations_total", "op=list")
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			<-start
			snap, err := c.Watch(ctx, typ)
			if err != nil {
				t.Errorf("watcher %d: %v", i, err)
				return
			}
			if len(snap.Locks) != 5 {
				t.Errorf("watcher %d: snapshot of %d locks, want 5", i, len(snap.Locks))
			}
		})
	}
	close(start)
	wg.Wait()
	lists := th.metric("lockhub_store_operations_total", "op=list") - before
	t.Logf("%d watches, %.0f List calls (%d seen by the hub)", n, lists, gs.lists.Load())
	if lists > n/4 {
		t.Fatalf("%d concurrent watches made %.0f List calls, want at most %d", n, lists, n/4)
	}
}

// TestWatchCrowdWhileChanging is TestWatchWhileChanging with the watchers arriving
// together, so that they share reads while locks change all the time: each ends up
// with exactly the store's state.
func TestWatchCrowdWhileChanging(t *testing.T) {
	th, _ := startReal(t, hubOptions{})
	ctx := tctx(t)
	stop := churn(t, th, 2)

	const n = 30
	watchers := make([]*rawSocket, n)
	for i := range watchers {
		watchers[i] = th.dialOrdered("acme", "u-w"+itoa(i))
	}
	models := make([]model, n)
	var snapped, ended sync.WaitGroup
	for i, w := range watchers {
		snapped.Add(1)
		ended.Go(func() {
			models[i] = w.apply(t, i, snapped.Done)
		})
	}
	for _, w := range watchers { // together: the crowd
		w.send(map[string]string{"id": "w", "type": "watch", "entityType": typ})
	}
	snapped.Wait() // every watch answered while the changes ran
	stop()
	last, _ := th.dial("acme", "u-last")
	expect(t, protocol.OutcomeAcquired)(last.Claim(ctx, typ, "end"))
	ended.Wait()
	if t.Failed() {
		return
	}
	wantStore(t, th, models)
}

// TestSnapshotFrameBytes: the snapshot frame built around shared locks is, byte for
// byte, protocol.Snapshot's encoding, for every kind of id.
func TestSnapshotFrameBytes(t *testing.T) {
	now := protocol.NewTime(time.Date(2026, 12, 2, 9, 15, 0, 123e6, time.UTC))
	l := protocol.Lock{EntityType: typ, EntityUID: "r-1", HolderOID: "u-ada", HolderName: `Ada "<Lovelace>"`, AcquiredAt: now, ExpiresAt: now}
	for _, tc := range []struct {
		name  string
		req   protocol.Request
		locks []protocol.Lock
	}{
		{"answer", protocol.Request{ID: "9"}, []protocol.Lock{l, l}},
		{"empty id", protocol.Request{HasID: true}, []protocol.Lock{l}},
		{"id to escape", protocol.Request{ID: "a\"b\\c</script>\u2028é"}, nil},
		{"unsolicited", protocol.Request{}, nil},
		{"big: the locks are the frame's shared body", protocol.Request{ID: "10"}, slices.Repeat([]protocol.Lock{l}, 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := json.Marshal(protocol.Snapshot{ID: tc.req.ID, HasID: tc.req.HasID, EntityType: typ, Locks: tc.locks})
			f := snapshotFrame(tc.req, typ, encodeLocks(tc.locks))
			if big := len(f.body) > 0; big != (len(tc.locks) == 200) {
				t.Errorf("%d locks: the body is shared: %v", len(tc.locks), big)
			}
			if got := f.payload(); string(got) != string(want) {
				t.Errorf("snapshot frame\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestAuthPipelined: a client may send its requests right after its auth, without
// waiting for the welcome (a page re-watching after a reconnect saves a round trip):
// they are answered in order after the welcome. After a bad token none is answered:
// the socket closes with 4401.
func TestAuthPipelined(t *testing.T) {
	th := startMini(t, hubOptions{})
	s := th.dialUnauthed()
	s.send(map[string]string{"type": "auth", "token": th.token("acme", "u-ada")})
	s.send(map[string]string{"id": "w", "type": "watch", "entityType": typ})
	s.send(map[string]string{"id": "c", "type": "claim", "entityType": typ, "entityUid": "r-1"})
	if f := s.next(); f.Type != protocol.FrameWelcome {
		t.Fatalf("first answer %s, want the welcome", f.Type)
	}
	if f := s.next(); f.Type != protocol.FrameSnapshot || f.ID != "w" {
		t.Fatalf("second answer %s %q, want the snapshot of the watch", f.Type, f.ID)
	}
	// The claim's answer and its own event, in either order.
	got := map[protocol.FrameType]bool{}
	for range 2 {
		got[s.next().Type] = true
	}
	if !got[protocol.FrameResult] || !got[protocol.FrameLock] {
		t.Fatalf("after the snapshot got %v, want the claim's result and its event", got)
	}

	bad := th.dialUnauthed()
	token := th.token("acme", "u-mallory")
	forged := token[:len(token)-4] + "AAAA" // the signature's end changed
	if forged == token {
		forged = token[:len(token)-4] + "BBBB"
	}
	bad.send(map[string]string{"type": "auth", "token": forged})
	bad.send(map[string]string{"id": "w", "type": "watch", "entityType": typ})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, data, err := bad.ws.Read(ctx)
	if code := websocket.CloseStatus(err); code != protocol.CloseNotAuthenticated {
		t.Fatalf("a forged token followed by a watch: read %s, %v; want close 4401 and nothing else", data, err)
	}
}

// TestResultLocksBytes: the console's answer built around a shared array is, byte for
// byte, protocol.Result's encoding of a list.
func TestResultLocksBytes(t *testing.T) {
	now := protocol.NewTime(time.Date(2026, 12, 4, 9, 15, 0, 123e6, time.UTC))
	l := protocol.Lock{EntityType: typ, EntityUID: "r-1", HolderOID: "u-ada", HolderName: `Ada "<Lovelace>"`, AcquiredAt: now, ExpiresAt: now}
	for _, tc := range []struct {
		name  string
		id    string
		locks []protocol.Lock
	}{
		{"two", "9", []protocol.Lock{l, l}},
		{"none", "a\"b\\c</script>\u2028é", nil},
		{"big: the locks are the frame's shared body", "11", slices.Repeat([]protocol.Lock{l}, 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := json.Marshal(protocol.Result{ID: tc.id, Locks: tc.locks})
			f := resultLocksFrame(protocol.Request{ID: tc.id}, encodeLocks(tc.locks))
			if big := len(f.body) > 0; big != (len(tc.locks) == 200) {
				t.Errorf("%d locks: the body is shared: %v", len(tc.locks), big)
			}
			if got := f.payload(); string(got) != string(want) {
				t.Errorf("result\n%s\nwant\n%s", got, want)
			}
		})
	}
}
