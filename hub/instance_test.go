package hub

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestHoldingsWrittenAgain: an instance taken for dead while it lived (another reaped
// its record and its holdings, as after a partition of it alone) finds its record gone
// at its next heartbeat, says so, and writes its holdings again: if it dies later, its
// locks are released as any dead instance's are.
func TestHoldingsWrittenAgain(t *testing.T) {
	th, srv := startReal(t, hubOptions{hub: func(c *Config) { c.InstanceTimeout = 300 * time.Millisecond }})
	ctx := tctx(t)
	rdb := srv.Client(t)
	held := claimHeld(t, th, rdb)

	// What a reaper does in the end (locks.Store.Reap, then FinishReap), at once: a
	// heartbeat between the two would write the holdings before they were deleted.
	if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, "lockhub:instances", th.hub.instance)
		p.Del(ctx, held)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, "the holdings written again", func() bool { return rdb.SCard(ctx, held).Val() == 1 })
	if got := th.metric("lockhub_hub_taken_for_dead_total"); got != 1 {
		t.Fatalf("lockhub_hub_taken_for_dead_total = %v, want 1", got)
	}
	want := locks.Holding{Ref: locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}, Holder: "u-ada"}
	ms := rdb.SMembers(ctx, held).Val()
	if len(ms) != 1 || !holdingIs(ms[0], want) {
		t.Fatalf("holdings %q, want Ada's r-1", ms)
	}
}

// claimHeld has Ada claim r-1 through th and waits until th's holdings, read through
// rdb, list it; it returns the holdings' key.
func claimHeld(t *testing.T, th *testHub, rdb redis.UniversalClient) string {
	t.Helper()
	ctx := tctx(t)
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	held := "lockhub:held:{" + th.hub.instance + "}"
	redistest.Eventually(t, "the holding written", func() bool { return rdb.SCard(ctx, held).Val() == 1 })
	return held
}

// holdingIs reports whether a holdings member names want's lock and holder.
func holdingIs(member string, want locks.Holding) bool {
	prefix := want.Ref.Tenant + " " + want.Ref.Type + " " + want.Ref.UID + " " + want.Holder + " "
	return len(member) > len(prefix) && member[:len(prefix)] == prefix
}

// failingHoldings fails the first n holdings writes, as a Redis failing open would.
type failingHoldings struct {
	Instances
	n      atomic.Int32 // writes still to fail
	failed atomic.Int32
}

func (s *failingHoldings) UpdateHoldings(ctx context.Context, instance string, add, remove []locks.Holding) error {
	if s.n.Add(-1) >= 0 {
		s.failed.Add(1)
		return errors.New("holdings write failed (test)")
	}
	return s.Instances.UpdateHoldings(ctx, instance, add, remove)
}

// TestHoldingsWriteRetried: a holdings write that fails is not lost: the holdings are
// written whole at the next liveness tick, with no other change to prompt it.
func TestHoldingsWriteRetried(t *testing.T) {
	fs := &failingHoldings{}
	fs.n.Store(1)
	th, srv := startReal(t, hubOptions{hub: func(c *Config) {
		c.InstanceTimeout = 300 * time.Millisecond
		fs.Instances = c.Store.Instances
		c.Store.Instances = fs
	}})
	claimHeld(t, th, srv.Client(t)) // written whole after the failed write
	if fs.failed.Load() != 1 {
		t.Fatalf("%d holdings writes failed, want 1: the test proved nothing", fs.failed.Load())
	}
}

// hubThrough starts a hub whose Redis, reached with the production client, is behind
// part: cutting part cuts that hub off.
func hubThrough(t *testing.T, part *redistest.Partition, o hubOptions) *testHub {
	t.Helper()
	rdb, err := locks.NewClient(part.URL(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return startHub(t, rdb, o)
}

// TestNoReapAfterOutage: when Redis was out of reach longer than the instance timeout,
// every liveness record is stale when it comes back, the live instances' too. Neither
// of two live instances takes the other for dead then: the lock a socket holds
// through one of them stays, and so do its holdings, over several timeouts and the
// grace.
func TestNoReapAfterOutage(t *testing.T) {
	srv := redistest.StartServer(t)
	// A timeout long enough that a busy machine does not starve a heartbeat that long.
	const timeout, grace = 600 * time.Millisecond, 200 * time.Millisecond
	o := hubOptions{
		hub:   func(c *Config) { c.InstanceTimeout, c.ReleaseGrace = timeout, grace },
		store: func(c *locks.Config) { c.Timeout = 200 * time.Millisecond },
	}
	part := redistest.StartPartition(t, srv.Addr())
	a, b := hubThrough(t, part, o), hubThrough(t, part, o)
	ctx := tctx(t)
	check := srv.Client(t)
	held := claimHeld(t, a, check)

	part.Cut()
	// Redis itself sees the records grow older than the timeout.
	redistest.Eventually(t, "both records stale", func() bool {
		now, err := check.Time(ctx).Result() // the server's clock scores them
		if err != nil {
			return false
		}
		old := now.Add(-timeout).UnixMilli()
		n, _ := check.ZCount(ctx, "lockhub:instances", "-inf", strconv.FormatInt(old, 10)).Result()
		return n == 2
	})
	part.Heal(t)
	ref := locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}
	// A false reap would come at the first tick after Redis is back and release the
	// lock a grace later: watch over several timeouts past that.
	for end := time.Now().Add(3*timeout + grace + 500*time.Millisecond); time.Now().Before(end); {
		if n := a.metric("lockhub_hub_dead_instances_total") + b.metric("lockhub_hub_dead_instances_total"); n != 0 {
			t.Fatalf("after the outage a live instance took another for dead (%v reaps)", n)
		}
		if v, err := check.Exists(ctx, locks.LockKey(ref)).Result(); err != nil || v != 1 {
			t.Fatalf("Ada's lock, held by a live socket on a live instance, is gone after the outage (%v)", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond): // the pace of the checks over the window
		}
	}
	if n := check.SCard(ctx, held).Val(); n != 1 {
		t.Fatalf("A's holdings = %d after the outage, want 1", n)
	}
	if a.metric("lockhub_store_fail_open_total", "op=instances") == 0 {
		t.Fatal("no heartbeat failed during the cut: the test proved nothing")
	}
}

// cutOffPair starts, on one redis-server, hub A behind a partition and hub B on the
// server itself, both with a 300 ms instance timeout and grace, and has Ada claim r-1
// through A. It returns the partition, the hubs, a client of the server, A's holdings
// key, and the hubs' options.
func cutOffPair(t *testing.T, grace time.Duration) (part *redistest.Partition, a, b *testHub, check redis.UniversalClient, held string, o hubOptions) {
	t.Helper()
	srv := redistest.StartServer(t)
	o = hubOptions{
		hub:   func(c *Config) { c.InstanceTimeout, c.ReleaseGrace = 300*time.Millisecond, grace },
		store: func(c *locks.Config) { c.Timeout = 100 * time.Millisecond },
	}
	part = redistest.StartPartition(t, srv.Addr())
	a = hubThrough(t, part, o)
	check = srv.Client(t)
	b = startHub(t, check, o)
	return part, a, b, check, claimHeld(t, a, check), o
}

// TestReaperStopsWithinGrace: the instance that reaps a dead one and then stops (a
// rolling restart) before the grace has ended leaves the dead one's holdings in Redis:
// a third instance detaches them, and the lock held only through the dead instance
// goes.
func TestReaperStopsWithinGrace(t *testing.T) {
	// B must be stopped within the grace after it reaped A: a grace of seconds.
	part, _, b, check, held, o := cutOffPair(t, 3*time.Second)
	ctx := tctx(t)

	part.Cut() // A is gone, as far as Redis can tell
	redistest.Eventually(t, "B reaps A", func() bool { return b.metric("lockhub_hub_dead_instances_total") == 1 })
	b.stop() // within the grace
	c := startHub(t, check, o)
	ref := locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}
	redistest.Eventually(t, "the dead instance's lock released by the third instance", func() bool {
		return check.Exists(ctx, locks.LockKey(ref)).Val() == 0
	})
	if got := c.metric("lockhub_hub_reaped_locks_total"); got != 1 {
		t.Fatalf("the third instance detached %v locks of the dead one, want 1", got)
	}
	redistest.Eventually(t, "the reap finished", func() bool {
		return check.Exists(ctx, held).Val() == 0 && check.ZCard(ctx, "lockhub:reaped").Val() == 0
	})
}

// TestHoldingsDeletedWrittenAgain: holdings that vanish from Redis while the instance's
// record stays (a reap of it that ended after it came back, eviction) are written
// again at the next heartbeat.
func TestHoldingsDeletedWrittenAgain(t *testing.T) {
	th, srv := startReal(t, hubOptions{hub: func(c *Config) { c.InstanceTimeout = 300 * time.Millisecond }})
	rdb := srv.Client(t)
	held := claimHeld(t, th, rdb)
	ctx := tctx(t)
	rdb.Del(ctx, held) // what FinishReap does
	redistest.Eventually(t, "the holdings written again", func() bool { return rdb.SCard(ctx, held).Val() == 1 })
}

// beatLog records the liveness calls of a hub and fails the heartbeats it is told to.
type beatLog struct {
	Instances
	fail  atomic.Int32 // heartbeats still to fail
	mu    sync.Mutex
	calls []string // "beat", "beat failed", "reap"
}

func (s *beatLog) note(c string) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *beatLog) Heartbeat(ctx context.Context, instance string) (locks.Liveness, error) {
	if s.fail.Add(-1) >= 0 {
		s.note("beat failed")
		return locks.Liveness{}, errors.New("heartbeat failed (test)")
	}
	s.note("beat")
	return s.Instances.Heartbeat(ctx, instance)
}

func (s *beatLog) Reap(ctx context.Context, timeout, grace time.Duration) ([]locks.DeadInstance, error) {
	s.note("reap")
	return s.Instances.Reap(ctx, timeout, grace)
}

// TestOneFailedHeartbeatKeepsReaping: an instance that reaps goes on reaping at the tick
// right after one failed heartbeat. A single gap cannot let a live instance's record go
// stale, so it does not wait a whole timeout again, which would push a dead
// instance's release past the contract's bound.
func TestOneFailedHeartbeatKeepsReaping(t *testing.T) {
	bl := &beatLog{}
	startReal(t, hubOptions{hub: func(c *Config) {
		c.InstanceTimeout = 300 * time.Millisecond
		bl.Instances = c.Store.Instances
		c.Store.Instances = bl
	}})
	calls := func() []string {
		bl.mu.Lock()
		defer bl.mu.Unlock()
		return slices.Clone(bl.calls)
	}
	redistest.Eventually(t, "the hub reaps", func() bool { return slices.Contains(calls(), "reap") })
	bl.fail.Store(1)
	redistest.Eventually(t, "a heartbeat fails, and two more ticks pass", func() bool {
		c := calls()
		i := slices.Index(c, "beat failed")
		beats := 0
		for _, call := range c[i+1:] {
			if i >= 0 && call == "beat" {
				beats++
			}
		}
		return beats >= 2
	})
	c := calls()
	i := slices.Index(c, "beat failed")
	after := c[i+1:]
	if len(after) < 2 || after[0] != "beat" || after[1] != "reap" {
		t.Fatalf("after a failed heartbeat the hub called %v; want a heartbeat and a reap at the next tick", after)
	}
}

// TestDeadSocketsForgottenWhenFound: as soon as an instance is found dead, its sockets
// stop counting for the two-tab rule wherever a live socket of the holder uses the
// lock, a whole release grace before the reaper detaches the rest: the live tab's
// release then drops the lock at once. A lock held through the dead socket alone
// waits out the grace (its holder may come back on another instance).
func TestDeadSocketsForgottenWhenFound(t *testing.T) {
	const grace = time.Minute // longer than the test: nothing here waits for it
	th, srv := startReal(t, hubOptions{hub: func(c *Config) {
		c.InstanceTimeout = 600 * time.Millisecond
		c.ReleaseGrace = grace
	}})
	ctx := tctx(t)
	rdb := srv.Client(t)
	ada := protocol.Holder{OID: "u-ada", Name: "Ada"}
	r1 := locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"} // Ada also has it open on th
	r2 := locks.Ref{Tenant: "acme", Type: typ, UID: "r-2"} // through the dead socket alone
	// The dead instance: Ada's socket on it claimed both, and its holdings say so.
	var held []locks.Holding
	for _, r := range []locks.Ref{r1, r2} {
		if res, err := th.store.Locks.Claim(ctx, r, ada, "c-dead"); err != nil || res.Outcome != protocol.OutcomeAcquired {
			t.Fatalf("claim %s through the dead socket: %v %v", r.UID, res.Outcome, err)
		}
		held = append(held, locks.Holding{Ref: r, Holder: ada.OID, Conn: "c-dead"})
	}
	if err := th.store.Instances.UpdateHoldings(ctx, "i-dead", held, nil); err != nil {
		t.Fatal(err)
	}
	tab, w := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeRenewed)(tab.Claim(ctx, typ, "r-1"))
	sockets := func(r locks.Ref) []string {
		ids := rdb.SMembers(ctx, locks.ConnsKey(r)).Val()
		slices.Sort(ids)
		return ids
	}
	if got, want := sockets(r1), slices.Sorted(slices.Values([]string{"c-dead", w.ConnectionID})); !slices.Equal(got, want) {
		t.Fatalf("sockets of r-1: %v, want %v", got, want)
	}
	// It stopped an hour ago.
	if err := rdb.ZAdd(ctx, "lockhub:instances", redis.Z{Score: float64(time.Now().Add(-time.Hour).UnixMilli()), Member: "i-dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, "the dead socket forgotten on r-1", func() bool {
		return slices.Equal(sockets(r1), []string{w.ConnectionID})
	})
	if got := th.metric("lockhub_hub_dead_instances_total"); got != 1 {
		t.Fatalf("lockhub_hub_dead_instances_total = %v, want 1", got)
	}
	// Counted once Forget has answered, a moment after the set changed.
	redistest.Eventually(t, "r-1's forgotten socket counted", func() bool {
		return th.metric("lockhub_hub_dead_sockets_forgotten_total") == 1
	})
	expect(t, protocol.OutcomeReleased)(tab.Release(ctx, typ, "r-1"))
	if n := rdb.Exists(ctx, locks.LockKey(r1)).Val(); n != 0 {
		t.Fatal("r-1 kept after the holder's last live tab released it")
	}
	if n := rdb.Exists(ctx, locks.LockKey(r2)).Val(); n != 1 {
		t.Fatal("r-2 released before the grace ended")
	}
	if got := sockets(r2); !slices.Equal(got, []string{"c-dead"}) {
		t.Fatalf("sockets of r-2: %v, want the dead one kept for the detach after the grace", got)
	}
	if got := th.metric("lockhub_hub_dead_sockets_forgotten_total"); got != 1 {
		t.Fatalf("lockhub_hub_dead_sockets_forgotten_total = %v, want 1 (r-1 alone)", got)
	}
}

// TestReattachAfterTakenForDead: an instance cut off from Redis longer than the
// instance timeout is taken for dead, and the reaper drops its socket from a lock its
// holder also uses from a live instance. Back, it puts the socket back: the other tab's
// release then leaves the lock to it, as the two-tab rule says.
func TestReattachAfterTakenForDead(t *testing.T) {
	// A grace longer than the test: no reaped holding is detached meanwhile.
	part, a, b, check, _, _ := cutOffPair(t, time.Minute)
	ctx := tctx(t)
	onB, w := b.dial("acme", "u-ada")
	expect(t, protocol.OutcomeRenewed)(onB.Claim(ctx, typ, "r-1"))
	ref := locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}

	part.Cut()
	redistest.Eventually(t, "B takes A for dead and forgets its socket on r-1", func() bool {
		return b.metric("lockhub_hub_dead_sockets_forgotten_total") == 1
	})
	if ids := check.SMembers(ctx, locks.ConnsKey(ref)).Val(); !slices.Equal(ids, []string{w.ConnectionID}) {
		t.Fatalf("sockets of r-1 while A is cut off: %v, want B's alone", ids)
	}
	part.Heal(t)
	redistest.Eventually(t, "A puts its socket back", func() bool {
		return a.metric("lockhub_hub_sockets_reattached_total") >= 1 && check.SCard(ctx, locks.ConnsKey(ref)).Val() == 2
	})
	if got := a.metric("lockhub_hub_taken_for_dead_total"); got != 1 {
		t.Fatalf("lockhub_hub_taken_for_dead_total = %v, want 1", got)
	}
	expect(t, protocol.OutcomeReleased)(onB.Release(ctx, typ, "r-1"))
	if n := check.Exists(ctx, locks.LockKey(ref)).Val(); n != 1 {
		t.Fatal("r-1 dropped by the tab on B while Ada's tab on A, alive, holds it")
	}
}

// releaseHook runs after its store's Release, before the hub hears the answer.
type releaseHook struct {
	Locks
	after func()
}

func (s *releaseHook) Release(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string) (locks.Result, error) {
	res, err := s.Locks.Release(ctx, ref, h, conn)
	if s.after != nil {
		s.after()
	}
	return res, err
}

// TestReattachLosesNoRelease: a reattach that runs while a socket releases its lock
// (here: between the store's release and the hub hearing of it, the worst moment) does
// not put the released socket's id back; if it did, the holder's other tab releasing
// next would be told released and leave the lock to its lease.
func TestReattachLosesNoRelease(t *testing.T) {
	hook := &releaseHook{}
	th, srv := startReal(t, hubOptions{hub: func(c *Config) {
		hook.Locks = c.Store.Locks
		c.Store.Locks = hook
	}})
	ctx := tctx(t)
	rdb := srv.Client(t)
	ref := locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}
	ada := protocol.Holder{OID: "u-ada", Name: "Ada"}
	tab, _ := th.dial("acme", "u-ada") // Ada's tab on th, and another elsewhere
	expect(t, protocol.OutcomeAcquired)(tab.Claim(ctx, typ, "r-1"))
	if res, err := th.store.Locks.Claim(ctx, ref, ada, "c-other"); err != nil || res.Outcome != protocol.OutcomeRenewed {
		t.Fatalf("Ada's other tab: %v %v", res.Outcome, err)
	}
	var ran atomic.Bool
	hook.after = func() {
		if ran.CompareAndSwap(false, true) {
			th.hub.reattach(ctx) // the tab's holding is still listed, and marked leaving
		}
	}
	expect(t, protocol.OutcomeReleased)(tab.Release(ctx, typ, "r-1")) // the other tab keeps it
	if !ran.Load() {
		t.Fatal("the reattach did not run: the test proved nothing")
	}
	if got := rdb.SMembers(ctx, locks.ConnsKey(ref)).Val(); !slices.Equal(got, []string{"c-other"}) {
		t.Fatalf("sockets of r-1 after the release and the reattach: %v, want c-other alone", got)
	}
	if res, err := th.store.Locks.Release(ctx, ref, ada, "c-other"); err != nil || res.Outcome != protocol.OutcomeReleased {
		t.Fatalf("the other tab's release: %v %v", res.Outcome, err)
	}
	if n := rdb.Exists(ctx, locks.LockKey(ref)).Val(); n != 0 {
		t.Fatal("r-1 kept after the holder's last socket released it")
	}
}
