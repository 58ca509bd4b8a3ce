package locks

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// recorder is a FeedHandler that keeps what it receives.
type recorder struct {
	mu      sync.Mutex
	changes []Change
	resyncs int
	// resynced are the tenants each Resync named (nil: every tenant).
	resynced []func(tenant string) bool
	presence []PresenceChange
	nudges   []NudgeChange
	handoffs []HandoffChange
}

func (r *recorder) Handoff(h HandoffChange) {
	r.mu.Lock()
	r.handoffs = append(r.handoffs, h)
	r.mu.Unlock()
}

func (r *recorder) Presence(p PresenceChange) {
	r.mu.Lock()
	r.presence = append(r.presence, p)
	r.mu.Unlock()
}

func (r *recorder) Nudge(n NudgeChange) {
	r.mu.Lock()
	r.nudges = append(r.nudges, n)
	r.mu.Unlock()
}

func (r *recorder) Change(c Change) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}

func (r *recorder) Resync(affected func(tenant string) bool) {
	r.mu.Lock()
	r.resyncs++
	r.resynced = append(r.resynced, affected)
	r.mu.Unlock()
}

// resyncedFor reports whether a Resync named tenant.
func (r *recorder) resyncedFor(tenant string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.resynced {
		if f == nil || f(tenant) {
			return true
		}
	}
	return false
}

// of returns the events received for one entity, in order.
func (r *recorder) of(tenant, uid string) []protocol.LockEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []protocol.LockEvent
	for _, c := range r.changes {
		if c.Tenant == tenant && c.Event.Lock.EntityUID == uid {
			out = append(out, c.Event)
		}
	}
	return out
}

// runFeed runs s's feed into a new recorder until the test ends, and waits until it
// is subscribed for each of tenants: it claims and releases a probe entity of each
// until the feed sees it.
func runFeed(t *testing.T, s *Store, via *Store, tenants ...string) *recorder {
	t.Helper()
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Locks.RunFeed(ctx, rec)
	}()
	t.Cleanup(func() { cancel(); <-done })
	// On a cluster each master's channels have a connection of their own: every
	// tenant's is probed.
	for _, tenant := range tenants {
		probe := Ref{tenant, "ApprovalRequest", "probe"}
		redistest.Eventually(t, "the feed of "+tenant+" is subscribed", func() bool {
			via.Locks.Claim(ctx, probe, ada, "")
			via.Locks.Release(ctx, probe, ada, "")
			return len(rec.of(tenant, "probe")) > 0
		})
	}
	return rec
}

func ops(evs []protocol.LockEvent) string {
	s := ""
	for _, e := range evs {
		s += string(e.Op) + " "
	}
	return s
}

// testFeed: a change made through one store (one process) reaches the feed of
// another, in order, for its tenant only, with the lock as stored.
func testFeed(t *testing.T, newClient func(t *testing.T) redis.UniversalClient) {
	a, _ := newStore(t, newClient(t), Config{})
	b, _ := newStore(t, newClient(t), Config{})
	tenant := fmt.Sprintf("feed-%d", time.Now().UnixNano())
	rec := runFeed(t, b, a, tenant)
	ctx := ctxT(t)
	counted := map[protocol.Op]int{}
	for _, op := range []protocol.Op{protocol.OpAcquired, protocol.OpRenewed, protocol.OpTakenOver, protocol.OpReleased} {
		counted[op] = published(a, op) + published(b, op)
	}

	ref := Ref{tenant, "ApprovalRequest", "r-1"}
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, ref, ada, ""))
	expect(t, protocol.OutcomeRenewed)(a.Locks.Claim(ctx, ref, ada, ""))
	expect(t, protocol.OutcomeRenewed)(a.Locks.Renew(ctx, ref, ada, ""))
	expect(t, protocol.OutcomeTakenOver)(b.Locks.Takeover(ctx, ref, margot, "", true))
	expect(t, protocol.OutcomeReleased)(a.Locks.Release(ctx, ref, margot, ""))
	want := "Acquired Renewed Renewed TakenOver Released "
	redistest.Eventually(t, "five events in order", func() bool { return len(rec.of(tenant, "r-1")) >= 5 })
	evs := rec.of(tenant, "r-1")
	if got := ops(evs); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if evs[3].PreviousHolder == nil || *evs[3].PreviousHolder != ada || evs[3].Lock.HolderOID != margot.OID {
		t.Fatalf("TakenOver event %+v", evs[3])
	}
	for _, e := range evs {
		if e.Type != protocol.FrameLock || e.At.IsZero() || e.Lock.EntityType != "ApprovalRequest" {
			t.Fatalf("malformed event %+v", e)
		}
	}
	// The scripts build each frame from the stored bytes; it must read exactly as the
	// Go encoding of the same event, the shape sockets are promised.
	rec.mu.Lock()
	for _, c := range rec.changes {
		want, err := json.Marshal(c.Event)
		if err != nil {
			t.Fatal(err)
		}
		if string(c.Frame) != string(want) {
			t.Errorf("frame from Redis\n %s\nGo encodes it\n %s", c.Frame, want)
		}
	}
	rec.mu.Unlock()
	if other := rec.of("other-"+tenant, "r-1"); len(other) != 0 {
		t.Fatalf("events leaked to another tenant: %+v", other)
	}
	// Each store counted what its scripts published since the feed was up: the events
	// of r-1, by op (runFeed's probes before the subscription may not have arrived).
	received := map[protocol.Op]int{}
	for _, e := range evs {
		received[e.Op]++
	}
	for op, before := range counted {
		if got := published(a, op) + published(b, op) - before; got != received[op] {
			t.Errorf("%s: the stores counted %d published, the feed delivered %d", op, got, received[op])
		}
	}
}

// published is how many events of op s counted as published.
func published(s *Store, op protocol.Op) int {
	return int(testutil.ToFloat64(s.core.met.published.WithLabelValues(string(op))))
}

// testExpiredOnce: two instances sweep the same tenant; each lease that runs out is
// announced exactly once, with the lock as it was stored.
func testExpiredOnce(t *testing.T, be backend) {
	a, _ := newStore(t, be.client(t), Config{Lease: 300 * time.Millisecond})
	b, _ := newStore(t, be.client(t), Config{Lease: 300 * time.Millisecond})
	tenant := fmt.Sprintf("exp-%d", time.Now().UnixNano())
	rec := runFeed(t, b, a, tenant)
	ctx := ctxT(t)

	sweepCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		// Each instance sweeps as the hub does for the types it watches.
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-sweepCtx.Done():
					return
				case <-tick.C:
					s.Locks.Sweep(sweepCtx, tenant, "ApprovalRequest", 0)
				}
			}
		})
	}
	const n = 5
	for i := range n {
		expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", fmt.Sprintf("r-%d", i)}, grace, ""))
	}
	expired := func() int {
		total := 0
		for i := range n {
			for _, e := range rec.of(tenant, fmt.Sprintf("r-%d", i)) {
				if e.Op == protocol.OpExpired {
					total++
					if e.Lock.HolderOID != grace.OID || e.Lock.HolderName != grace.Name {
						t.Errorf("Expired event without its holder: %+v", e.Lock)
					}
				}
			}
		}
		return total
	}
	redistest.Eventually(t, "every lease announced as expired", func() bool {
		if be.advance != nil {
			be.advance(50 * time.Millisecond)
		}
		return expired() >= n
	})
	stop()
	wg.Wait()
	// Every sweeper's publish is done; a marker published now arrives after all of them.
	marker := Ref{tenant, "ApprovalRequest", "marker"}
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, marker, ada, ""))
	redistest.Eventually(t, "the marker arrives", func() bool { return len(rec.of(tenant, "marker")) > 0 })
	if got := expired(); got != n {
		t.Fatalf("%d Expired events for %d leases", got, n)
	}
	if got := published(a, protocol.OpExpired) + published(b, protocol.OpExpired); got != n {
		t.Fatalf("the sweepers counted %d Expired published for %d leases", got, n)
	}
	if left := must1(a.Locks.List(ctx, tenant, "ApprovalRequest")); len(left) != 1 {
		t.Fatalf("List after expiry = %+v, want only the marker", left)
	}
}

// testDetach: a closing socket releases its locks only when no other socket of the
// holder uses them; a graceful shutdown releases nothing.
func testDetach(t *testing.T, newClient func(t *testing.T) redis.UniversalClient) {
	s, _ := newStore(t, newClient(t), Config{})
	ctx := ctxT(t)
	tenant := fmt.Sprintf("detach-%d", time.Now().UnixNano())
	ref := Ref{tenant, "ApprovalRequest", "r-1"}

	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "tab-1"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, ref, ada, "tab-2"))
	expect(t, protocol.OutcomeNotHeld)(s.Locks.Detach(ctx, ref, ada, "tab-1", true))
	if must1(s.Locks.Get(ctx, ref)) == nil {
		t.Fatal("closing one tab freed the lock the other tab holds")
	}
	r := expect(t, protocol.OutcomeReleased)(s.Locks.Detach(ctx, ref, ada, "tab-2", true))
	if r.Lock == nil || r.Lock.HolderOID != ada.OID {
		t.Fatalf("released lock %+v", r.Lock)
	}

	// Shutdown: forget the socket, keep the lock; the client reconnects and claims again.
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "old"))
	expect(t, protocol.OutcomeNotHeld)(s.Locks.Detach(ctx, ref, ada, "old", false))
	if must1(s.Locks.Get(ctx, ref)) == nil {
		t.Fatal("a graceful shutdown released a lock")
	}
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, ref, ada, "new"))
	expect(t, protocol.OutcomeReleased)(s.Locks.Detach(ctx, ref, ada, "new", true))

	// A socket of another user never releases Ada's lock, and a taken-over lock forgets
	// the previous holder's sockets.
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "ada-tab"))
	expect(t, protocol.OutcomeNotHeld)(s.Locks.Detach(ctx, ref, grace, "grace-tab", true))
	expect(t, protocol.OutcomeTakenOver)(s.Locks.Takeover(ctx, ref, margot, "margot-tab", true))
	expect(t, protocol.OutcomeNotHeld)(s.Locks.Detach(ctx, ref, ada, "ada-tab", true))
	expect(t, protocol.OutcomeReleased)(s.Locks.Detach(ctx, ref, margot, "margot-tab", true))

	// A stale socket has no say over a lock claimed afresh since, here over HTTP.
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "stale"))
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, ref, ada, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, ""))
	expect(t, protocol.OutcomeNotHeld)(s.Locks.Detach(ctx, ref, ada, "stale", true))
	if must1(s.Locks.Get(ctx, ref)) == nil {
		t.Fatal("a stale socket's detach released a lock claimed afresh")
	}
}

// testReleaseFromTab: a release from one socket lets go of that socket's share: the
// same person's other tab keeps the lock, and nothing is announced, until the last tab
// lets go. A release over HTTP (no socket) drops the lock whoever uses it.
func testReleaseFromTab(t *testing.T, newClient func(t *testing.T) redis.UniversalClient) {
	s, _ := newStore(t, newClient(t), Config{})
	tenant := fmt.Sprintf("tabs-%d", time.Now().UnixNano())
	rec := runFeed(t, s, s, tenant)
	ctx := ctxT(t)
	ref := Ref{tenant, "ApprovalRequest", "r-1"}

	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "tab-1"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, ref, ada, "tab-2"))
	if r := expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, ref, ada, "tab-1")); r.Lock == nil || r.Lock.HolderOID != ada.OID {
		t.Fatalf("tab 1's release answered %+v", r.Lock)
	}
	expect(t, protocol.OutcomeLocked)(s.Locks.Claim(ctx, ref, grace, "grace-tab")) // still Ada's, for tab 2
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, ref, ada, "tab-1"))   // tab 1 again: it has no share
	expect(t, protocol.OutcomeRenewed)(s.Locks.Renew(ctx, ref, ada, "tab-2"))
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, ref, ada, "tab-2"))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, grace, "grace-tab"))

	// Over HTTP the holder drops it whatever tabs use it.
	http := Ref{tenant, "ApprovalRequest", "r-2"}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, http, ada, "tab-1"))
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, http, ada, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, http, grace, ""))

	redistest.Eventually(t, "the events of r-1 and r-2", func() bool {
		return len(rec.of(tenant, "r-1")) >= 5 && len(rec.of(tenant, "r-2")) >= 3
	})
	if got, want := ops(rec.of(tenant, "r-1")), "Acquired Renewed Renewed Released Acquired "; got != want {
		t.Fatalf("r-1 events %q, want %q: a tab's release must announce nothing while another tab holds it", got, want)
	}
	if got, want := ops(rec.of(tenant, "r-2")), "Acquired Released Acquired "; got != want {
		t.Fatalf("r-2 events %q, want %q", got, want)
	}
}
