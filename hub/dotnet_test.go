package hub

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestOtherWriters: the .NET API writes locks on the same Redis with the story's
// scripts (byte for byte, values in its own format) and publishes nothing. Two hub
// instances with the production sweep interval show each of its changes to watchers
// on both, as the op it was, once, in order with the changes lockhub's sockets make to
// the same entity (PROTOCOL.md §8), on a real redis-server and a real cluster.
func TestOtherWriters(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := redistest.StartServer(t)
		testOtherWriters(t, srv.Client(t), srv.Client(t), srv.Client(t))
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		testOtherWriters(t, cl.Client(t), cl.Client(t), cl.Client(t))
	})
}

func testOtherWriters(t *testing.T, ca, cb redis.UniversalClient, cnet redis.Scripter) {
	production := func(c *Config) { c.SweepInterval = DefaultSweepInterval }
	a := startHub(t, ca, hubOptions{hub: production})
	b := startHub(t, cb, hubOptions{hub: production, dev: a.dev})
	a.waitFeed("acme")
	b.waitFeed("acme")
	ctx := tctx(t)
	var watchers []*protocol.Client
	for _, th := range []*testHub{a, b} {
		w, _ := th.dial("acme", "u-w")
		if _, err := w.Watch(ctx, typ); err != nil {
			t.Fatal(err)
		}
		watchers = append(watchers, w)
	}
	// want checks the next event on every watcher: op, entity, holder and, for a
	// TakenOver, the previous holder.
	want := func(op protocol.Op, holder protocol.Holder, prev *protocol.Holder) {
		t.Helper()
		for _, w := range watchers {
			ev := wantEventBy(t, w, op, "r-1", holder)
			if (prev == nil) != (ev.PreviousHolder == nil) || prev != nil && *prev != *ev.PreviousHolder {
				t.Fatalf("%s previousHolder = %+v, want %+v", op, ev.PreviousHolder, prev)
			}
		}
	}
	var (
		adaH     = protocol.Holder{OID: "u-ada", Name: "Ada Lovelace"}
		graceH   = protocol.Holder{OID: "u-grace", Name: "Grace Hopper"}
		edsger   = protocol.Holder{OID: "u-edsger", Name: "Edsger Dijkstra"}
		margaret = protocol.Holder{OID: "u-margaret", Name: "Margaret Hamilton"}
	)
	net := redistest.DotNet{C: cnet}
	netRelease := func(h protocol.Holder) {
		t.Helper()
		if ok, err := net.Release(ctx, "acme", typ, "r-1", h.OID); err != nil || !ok {
			t.Fatalf(".NET release of %s's lock = %v, %v", h.Name, ok, err)
		}
	}
	grace := b.dialAs("acme", graceH)
	admin := a.dialAs("acme", margaret, auth.DefaultTakeoverRole)

	// The .NET API claims for Ada; Grace's claim from lockhub finds it.
	if ok, _, err := net.Claim(ctx, "acme", typ, "r-1", adaH.OID, adaH.Name); err != nil || !ok {
		t.Fatalf(".NET claim = %v, %v", ok, err)
	}
	want(protocol.OpAcquired, adaH, nil)
	r := expect(t, protocol.OutcomeLocked)(grace.Claim(ctx, typ, "r-1"))
	if r.Lock == nil || r.Lock.HolderOID != adaH.OID {
		t.Fatalf("Grace's claim found %+v", r.Lock)
	}
	// Ada approves in the .NET app, which releases; Grace's form claims at once.
	netRelease(adaH)
	expect(t, protocol.OutcomeAcquired)(grace.Claim(ctx, typ, "r-1"))
	want(protocol.OpReleased, adaH, nil)
	want(protocol.OpAcquired, graceH, nil)
	// Another program puts Edsger in Grace's place; an admin takes it over in lockhub.
	// Its own lease, 4 minutes: lockhub finds a change by the index score it moves, and
	// one written in the very millisecond of lockhub's last change, with the same
	// lease, would leave the score as it was (the README's documented limit).
	if _, err := (redistest.DotNet{C: net.C, Lease: 4 * time.Minute}).Overwrite(ctx, "acme", typ, "r-1", edsger.OID, edsger.Name); err != nil {
		t.Fatal(err)
	}
	want(protocol.OpTakenOver, edsger, &graceH)
	expect(t, protocol.OutcomeTakenOver)(admin.Takeover(ctx, typ, "r-1"))
	want(protocol.OpTakenOver, margaret, &edsger)
	// Grace no longer holds it; the admin's lock ends in the .NET app.
	expect(t, protocol.OutcomeNotHeld)(grace.Release(ctx, typ, "r-1"))
	netRelease(margaret)
	want(protocol.OpReleased, margaret, nil)

	// Nothing more: a change lockhub makes now is the next event on both, so any
	// second announcement, queued before it, would be seen first.
	expect(t, protocol.OutcomeAcquired)(grace.Claim(ctx, typ, "r-2"))
	for _, w := range watchers {
		wantEventBy(t, w, protocol.OpAcquired, "r-2", graceH)
		barrier(t, w)
		noEvent(t, w)
	}
	found := a.metric("lockhub_store_foreign_changes_total") + b.metric("lockhub_store_foreign_changes_total")
	if found != 4 { // Acquired, Released, TakenOver, Released
		t.Fatalf("the instances counted %v changes of other programs, want 4", found)
	}
}
