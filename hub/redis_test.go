package hub

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// Tests against real redis-server processes: a standalone server killed and restarted
// under a live watcher, leases that run out, and two instances on a real cluster.

// TestRedisRestart: while Redis is down claims answer unknown (fail open), on the
// refused connection or at the latest on the store's own timeout; when it is back the
// watcher receives a fresh, unsolicited snapshot.
func TestRedisRestart(t *testing.T) {
	srv := redistest.StartServer(t)
	// A client of our own with short timeouts and no retries: the test is about the
	// hub noticing, not about go-redis backoff.
	o := srv.Options()
	o.MaxRetries = -1
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	th := startHub(t, rdb, hubOptions{store: func(c *locks.Config) { c.Timeout = 500 * time.Millisecond }})
	th.waitFeed("acme") // the first event below needs the feed listening
	ctx := tctx(t)

	w, _ := th.dial("acme", "u-w")
	if _, err := w.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	wantEvent(t, w, protocol.OpAcquired, "r-1")

	srv.Kill(t)
	r := expect(t, protocol.OutcomeUnknown)(ada.Claim(ctx, typ, "r-2"))
	if r.Lock != nil {
		t.Fatalf("claim with Redis down answered %+v", r)
	}
	// The store gave up on Redis, not the socket on the hub: go-redis may retry its
	// dials past the store's timeout, so either reason will do.
	refused := th.metric("lockhub_store_fail_open_total", "op=claim", "reason=connection")
	timedOut := th.metric("lockhub_store_fail_open_total", "op=claim", "reason=timeout")
	if refused+timedOut != 1 {
		t.Fatalf("claims failed open: %v for the connection, %v on the store's timeout, %v in all; want 1",
			refused, timedOut, th.metric("lockhub_store_fail_open_total", "op=claim"))
	}

	srv.Restart(t) // empty: the server had no persistence
	f, err := w.NextFrame(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if f.Snapshot == nil || f.ID != "" || f.Snapshot.EntityType != typ {
		t.Fatalf("after the restart got %s, want an unsolicited snapshot", f.Raw)
	}
	for _, l := range f.Snapshot.Locks {
		if l.EntityUID == "r-1" {
			t.Fatalf("snapshot of an empty Redis holds %+v", l)
		}
	}
	if th.metric("lockhub_hub_resyncs_total") < 1 {
		t.Error("resync not counted")
	}
	// And it works again, events included.
	redistest.Eventually(t, "a claim to succeed after the restart", func() bool {
		r, err := ada.Claim(ctx, typ, "r-3")
		return err == nil && r.Outcome == protocol.OutcomeAcquired
	})
	wantEvent(t, w, protocol.OpAcquired, "r-3")
}

// TestExpired: a lease that runs out without release is announced as Expired by the
// hub's sweeper.
func TestExpired(t *testing.T) {
	th, _ := startReal(t, hubOptions{store: func(c *locks.Config) { c.Lease = 300 * time.Millisecond }})
	ctx := tctx(t)
	w, _ := th.dial("acme", "u-w")
	if _, err := w.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	wantEvent(t, w, protocol.OpAcquired, "r-1")
	ev := wantEvent(t, w, protocol.OpExpired, "r-1")
	if ev.Lock.EntityType != typ {
		t.Fatalf("Expired event = %+v", ev)
	}
	// Exactly once.
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-2"))
	wantEvent(t, w, protocol.OpAcquired, "r-2")
}

// TestCluster runs two instances, each with its own Store and cluster client, on a real
// Redis Cluster: events cross instances (sharded pub/sub), tenants stay apart, and two
// tabs on two instances keep their lock until both close.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	a := startHub(t, cl.Client(t), hubOptions{})
	b := startHub(t, cl.Client(t), hubOptions{dev: a.dev})
	testTwoInstances(t, a, b)

	t.Run("many tenants, many slots", func(t *testing.T) {
		ctx := tctx(t)
		tenants := []string{"acme", "globex", "initech", "umbrella", "hooli", "stark"}
		b.waitFeed(tenants...)
		watchers := map[string]*protocol.Client{}
		for _, tn := range tenants {
			w, _ := b.dial(tn, "u-w")
			if _, err := w.Watch(ctx, typ); err != nil {
				t.Fatal(err)
			}
			watchers[tn] = w
		}
		for _, tn := range tenants {
			c, _ := a.dial(tn, "u-c")
			expect(t, protocol.OutcomeAcquired)(c.Claim(ctx, typ, "m-"+tn))
		}
		for _, tn := range tenants {
			ev := wantEvent(t, watchers[tn], protocol.OpAcquired, "m-"+tn)
			if ev.Lock.HolderOID != "u-c" {
				t.Fatalf("%s got %+v", tn, ev)
			}
		}
		for _, tn := range tenants {
			barrier(t, watchers[tn]) // every tenant's watcher has its event: any leak was queued
			noEvent(t, watchers[tn])
		}
	})
}

// TestResyncOfSomeTenants: when the feed was lost for some tenants only (one cluster
// master failed over), only their watchers get fresh snapshots; the others' events
// kept flowing and they are left alone.
func TestResyncOfSomeTenants(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	acme, _ := th.dial("acme", "u-w")
	globex, _ := th.dial("globex", "u-w")
	for _, w := range []*protocol.Client{acme, globex} {
		if _, err := w.Watch(ctx, typ); err != nil {
			t.Fatal(err)
		}
	}
	th.hub.resyncTenants(ctx, func(tenant string) bool { return tenant == "acme" })
	f, err := acme.NextFrame(ctx)
	if err != nil || f.Snapshot == nil || f.ID != "" {
		t.Fatalf("acme's watcher got %s, %v; want an unsolicited snapshot", f.Raw, err)
	}
	// Every snapshot of the resync is queued; one for globex would be read before the
	// barrier's answer, and be waiting now.
	barrier(t, globex)
	quick, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if f, err := globex.NextFrame(quick); err == nil {
		t.Fatalf("globex's watcher got %s; its tenant's feed was never lost", f.Raw)
	}
}
