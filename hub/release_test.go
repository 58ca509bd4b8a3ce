package hub

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// Release on disconnect, on one instance and on two instances sharing one Redis.

func TestReleaseOnDisconnect(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.ReleaseGrace = 300 * time.Millisecond }})
	ctx := tctx(t)
	w, _ := th.dial("acme", "u-watcher")
	if _, err := w.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-2"))
	expect(t, protocol.OutcomeReleased)(ada.Release(ctx, typ, "r-2")) // released by hand: nothing to detach
	wantEvent(t, w, protocol.OpAcquired, "r-1")
	wantEvent(t, w, protocol.OpAcquired, "r-2")
	wantEvent(t, w, protocol.OpReleased, "r-2")

	closed := time.Now()
	_ = ada.Close()
	ev := wantEvent(t, w, protocol.OpReleased, "r-1")
	if d := time.Since(closed); d < 300*time.Millisecond {
		t.Fatalf("released %s after the close, within the grace", d)
	}
	if ev.Lock.HolderOID != "u-ada" {
		t.Fatalf("Released event = %+v", ev)
	}
	redistest.Eventually(t, "the detach to be counted", func() bool {
		return th.metric("lockhub_hub_detaches_total", "why=grace", "outcome=released") == 1
	})
}

// twoTabs has Ada claim r-1 from two sockets while w watches, and takes the two
// events that makes.
func twoTabs(t *testing.T, th *testHub) (w, tab1, tab2 *protocol.Client) {
	t.Helper()
	ctx := tctx(t)
	w, _ = th.dial("acme", "u-watcher")
	if _, err := w.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	tab1, _ = th.dial("acme", "u-ada")
	tab2, _ = th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(tab1.Claim(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeRenewed)(tab2.Claim(ctx, typ, "r-1"))
	wantEvent(t, w, protocol.OpAcquired, "r-1")
	wantEvent(t, w, protocol.OpRenewed, "r-1")
	return w, tab1, tab2
}

func TestReleaseOnDisconnectTwoTabs(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	w, tab1, tab2 := twoTabs(t, th)

	_ = tab1.Close()
	redistest.Eventually(t, "tab 1's detach", func() bool {
		return th.metric("lockhub_hub_detaches_total", "why=grace", "outcome=notHeld") == 1
	})
	l, _ := th.store.Locks.Get(ctx, locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"})
	if l == nil {
		t.Fatal("closing one tab released the lock the other tab holds")
	}

	_ = tab2.Close()
	wantEvent(t, w, protocol.OpReleased, "r-1")
}

// TestReleaseFromOneTab: the browser client releases its locks on pagehide, and a
// form releases when it closes; with the same person editing in another tab, that
// release lets go of the closing tab's share only. The lock stays, the watcher hears
// nothing, until the last tab releases.
func TestReleaseFromOneTab(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	w, tab1, tab2 := twoTabs(t, th)
	grace, _ := th.dial("acme", "u-grace")

	expect(t, protocol.OutcomeReleased)(tab1.Release(ctx, typ, "r-1"))
	if r := expect(t, protocol.OutcomeLocked)(grace.Claim(ctx, typ, "r-1")); r.Lock.HolderOID != "u-ada" {
		t.Fatalf("after tab 1's release the lock is %+v, want Ada's for tab 2", r.Lock)
	}
	expect(t, protocol.OutcomeReleased)(tab2.Release(ctx, typ, "r-1"))
	// The first event after the two Ada events is tab 2's release: tab 1's announced
	// nothing.
	wantEvent(t, w, protocol.OpReleased, "r-1")
	expect(t, protocol.OutcomeAcquired)(grace.Claim(ctx, typ, "r-1"))
}

// TestReloadKeepsLock: a page reload is a new socket that re-claims within the grace.
func TestReloadKeepsLock(t *testing.T) {
	// A grace the reload fits in on a loaded machine: the test is about a reload
	// keeping its lock, not about how quickly a page reloads.
	th := startMini(t, hubOptions{hub: func(c *Config) { c.ReleaseGrace = 2 * time.Second }})
	ctx := tctx(t)
	old, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(old.Claim(ctx, typ, "r-1"))
	_ = old.Close()
	reloaded, _ := th.dial("acme", "u-ada")
	// The hub saw the close before the re-claim: a reload, not a second tab.
	redistest.Eventually(t, "the old socket to close", func() bool { return th.metric("lockhub_hub_sockets") == 1 })
	expect(t, protocol.OutcomeRenewed)(reloaded.Claim(ctx, typ, "r-1"))
	redistest.Eventually(t, "the old socket's detach", func() bool {
		return th.metric("lockhub_hub_detaches_total", "why=grace") == 1
	})
	if got := th.metric("lockhub_hub_detaches_total", "why=grace", "outcome=released"); got != 0 {
		t.Fatal("the reload lost its lock")
	}
}

// TestReleaseTakenOverLock: a socket whose lock was taken over releases nothing of the
// new holder's when it closes.
func TestReleaseTakenOverLock(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	ada, _ := th.dial("acme", "u-ada")
	boss, _ := th.dial("acme", "u-boss", "Locks.TakeOver")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeTakenOver)(boss.Takeover(ctx, typ, "r-1"))
	_ = ada.Close()
	redistest.Eventually(t, "ada's detach", func() bool { return th.metric("lockhub_hub_detaches_total", "why=grace") == 1 })
	l, _ := th.store.Locks.Get(ctx, locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"})
	if l == nil || l.HolderOID != "u-boss" {
		t.Fatalf("lock after the previous holder's socket closed = %+v", l)
	}
}

// TestTwoInstances runs two hubs (two stores) on one Redis: an event caused on one
// reaches watchers on the other, and two tabs of one person on the two instances keep
// their lock until both are closed.
func TestTwoInstances(t *testing.T) {
	a := startMini(t, hubOptions{})
	rdb := redis.NewClient(&redis.Options{Addr: a.mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	b := startHub(t, rdb, hubOptions{dev: a.dev})
	testTwoInstances(t, a, b)
}

func testTwoInstances(t *testing.T, a, b *testHub) {
	a.waitFeed("acme")
	b.waitFeed("acme", "globex")
	t.Run("events cross instances", func(t *testing.T) {
		ctx := tctx(t)
		wa, _ := a.dial("acme", "u-wa")
		wb, _ := b.dial("acme", "u-wb")
		gb, _ := b.dial("globex", "u-g")
		for _, c := range []*protocol.Client{wa, wb, gb} {
			if _, err := c.Watch(ctx, typ); err != nil {
				t.Fatal(err)
			}
		}
		ada, _ := a.dial("acme", "u-ada")
		bob, _ := b.dial("acme", "u-bob")
		expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "x-1"))
		wantEvent(t, wb, protocol.OpAcquired, "x-1")
		wantEvent(t, wa, protocol.OpAcquired, "x-1")
		expect(t, protocol.OutcomeLocked)(bob.Claim(ctx, typ, "x-1"))
		expect(t, protocol.OutcomeAcquired)(bob.Claim(ctx, typ, "x-2"))
		wantEvent(t, wa, protocol.OpAcquired, "x-2")
		wantEvent(t, wb, protocol.OpAcquired, "x-2")
		expect(t, protocol.OutcomeReleased)(ada.Release(ctx, typ, "x-1"))
		wantEvent(t, wb, protocol.OpReleased, "x-1")
		wantEvent(t, wa, protocol.OpReleased, "x-1")
		barrier(t, gb) // wb, on gb's instance, has every acme event: any leak was queued
		noEvent(t, gb)
	})
	t.Run("two tabs on two instances", func(t *testing.T) {
		ctx := tctx(t)
		w, _ := a.dial("acme", "u-w")
		if _, err := w.Watch(ctx, typ); err != nil {
			t.Fatal(err)
		}
		tab1, _ := a.dial("acme", "u-ada")
		tab2, _ := b.dial("acme", "u-ada")
		expect(t, protocol.OutcomeAcquired)(tab1.Claim(ctx, typ, "t-1"))
		expect(t, protocol.OutcomeRenewed)(tab2.Claim(ctx, typ, "t-1"))
		wantEvent(t, w, protocol.OpAcquired, "t-1")
		wantEvent(t, w, protocol.OpRenewed, "t-1")

		before := a.metric("lockhub_hub_detaches_total", "why=grace", "outcome=notHeld")
		_ = tab1.Close()
		redistest.Eventually(t, "tab 1's detach on instance a", func() bool {
			return a.metric("lockhub_hub_detaches_total", "why=grace", "outcome=notHeld") == before+1
		})
		if l, _ := a.store.Locks.Get(ctx, locks.Ref{Tenant: "acme", Type: typ, UID: "t-1"}); l == nil {
			t.Fatal("closing the tab on instance a released the lock the tab on instance b holds")
		}
		_ = tab2.Close()
		wantEvent(t, w, protocol.OpReleased, "t-1")
	})
}

// TestShutdownKeepsLocksInGrace: a socket closed shortly before a graceful shutdown is
// still in its grace when the hub stops. Nobody is left to wait it out, and a graceful
// shutdown releases nothing (PROTOCOL.md §4): its client may be reconnecting to another
// instance right now. The socket is only forgotten; the lease stands.
func TestShutdownKeepsLocksInGrace(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.ReleaseGrace = time.Minute }})
	ctx := tctx(t)
	ref := locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	_ = ada.Close()
	// The hub saw the close: the socket's locks wait in the releaser, not in Shutdown.
	redistest.Eventually(t, "the socket to close", func() bool { return th.metric("lockhub_hub_sockets") == 0 })
	th.stop()
	if l, _ := th.store.Locks.Get(ctx, ref); l == nil || l.HolderOID != "u-ada" {
		t.Fatalf("lock after a shutdown within the grace = %+v, want Ada's", l)
	}
	if got := th.metric("lockhub_hub_detaches_total", "why=shutdown", "outcome=notHeld"); got != 1 {
		t.Fatalf("shutdown detaches = %v, want 1", got)
	}
	if members, _ := th.mr.SMembers(locks.ConnsKey(ref)); len(members) != 0 {
		t.Fatalf("the closed socket is still attached: %v", members)
	}
}
