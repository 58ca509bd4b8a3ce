package hub

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// claimHeld has Ada claim r-1 through th and waits until th's holdings, read through
// rdb, list it; it returns the holdings' key.
func claimHeld(t *testing.T, th *testHub, rdb redis.UniversalClient) string {
	t.Helper()
	ctx := tctx(t)
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	held := "lockhub:held:{" + th.hub.member.ID() + "}"
	redistest.Eventually(t, "the holding written", func() bool { return rdb.SCard(ctx, held).Val() == 1 })
	return held
}

// holdingIs reports whether a holdings member names want's lock and holder.
func holdingIs(member string, want locks.Holding) bool {
	prefix := want.Ref.Tenant + " " + want.Ref.Type + " " + want.Ref.UID + " " + want.Holder + " "
	return len(member) > len(prefix) && member[:len(prefix)] == prefix
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
	part, a, b, check, held, _ := cutOffPair(t, time.Minute)
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
	want := locks.Holding{Ref: ref, Holder: "u-ada"}
	redistest.Eventually(t, "A's holdings written again", func() bool {
		ms := check.SMembers(ctx, held).Val()
		return len(ms) == 1 && holdingIs(ms[0], want)
	})
	expect(t, protocol.OutcomeReleased)(onB.Release(ctx, typ, "r-1"))
	if n := check.Exists(ctx, locks.LockKey(ref)).Val(); n != 1 {
		t.Fatal("r-1 dropped by the tab on B while Ada's tab on A, alive, holds it")
	}
}

// releaseHook runs after its store's Release, before the hub hears the answer, and
// tells of every Detach without release.
type releaseHook struct {
	Locks
	after    func(conn string)
	detached func(conn string)
}

func (s *releaseHook) Release(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string) (locks.Result, error) {
	res, err := s.Locks.Release(ctx, ref, h, conn)
	if s.after != nil {
		s.after(conn)
	}
	return res, err
}

func (s *releaseHook) Detach(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string, release bool) (locks.Result, error) {
	res, err := s.Locks.Detach(ctx, ref, h, conn, release)
	if !release && s.detached != nil {
		s.detached(conn)
	}
	return res, err
}

// TestReattachLosesNoRelease: the instance finds it was taken for dead while one of its
// sockets releases its lock (here: between the store's release and the hub hearing of
// it, the worst moment). Its reattach does not leave the released socket's id in the
// lock's sockets: the socket's release marked it leaving first, so the reattach takes
// it out again. Were it left, the holder's other tab releasing next would be told
// released and leave the lock to its lease. (locks.TestMemberReattachLosesNoRelease
// proves the Member's side; this proves the socket marks its release.)
func TestReattachLosesNoRelease(t *testing.T) {
	hook := &releaseHook{}
	th, srv := startReal(t, hubOptions{hub: func(c *Config) {
		c.InstanceTimeout = 300 * time.Millisecond
		hook.Locks = c.Store.Locks
		c.Store.Locks = hook
	}})
	ctx := tctx(t)
	rdb := srv.Client(t)
	ref := locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}
	ada := protocol.Holder{OID: "u-ada", Name: "Ada"}
	tab, w := th.dial("acme", "u-ada") // Ada's tab on th, and another elsewhere
	expect(t, protocol.OutcomeAcquired)(tab.Claim(ctx, typ, "r-1"))
	if res, err := th.store.Locks.Claim(ctx, ref, ada, "c-other"); err != nil || res.Outcome != protocol.OutcomeRenewed {
		t.Fatalf("Ada's other tab: %v %v", res.Outcome, err)
	}
	takenOut := make(chan struct{}) // the reattach detached the tab's socket again
	var once sync.Once
	hook.detached = func(conn string) {
		if conn == w.ConnectionID {
			once.Do(func() { close(takenOut) })
		}
	}
	var ran atomic.Bool
	hook.after = func(conn string) {
		if conn != w.ConnectionID || !ran.CompareAndSwap(false, true) {
			return
		}
		// Taken for dead: the next heartbeat finds the record gone, and reattaches
		// while the tab's holding is still listed, and marked leaving.
		if err := rdb.ZRem(ctx, "lockhub:instances", th.hub.member.ID()).Err(); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-takenOut:
		case <-time.After(waitTimeout): // the reattach left the socket in: checked below
		}
	}
	expect(t, protocol.OutcomeReleased)(tab.Release(ctx, typ, "r-1")) // the other tab keeps it
	if !ran.Load() {
		t.Fatal("the release hook did not run: the test proved nothing")
	}
	select {
	case <-takenOut:
	default:
		t.Fatal("the reattach did not take the released socket out again")
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
