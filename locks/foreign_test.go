package locks

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

var edsger = protocol.Holder{OID: "u-edsger", Name: "Edsger Dijkstra"}

// testOtherWriters: the .NET service writes locks on the same Redis with its own
// scripts (byte for byte from the story) and publishes nothing; two stores that sweep
// the type, as two hub instances do, announce each of its changes as the op it was,
// once, in order with lockhub's own changes of the same entity (PROTOCOL.md §8).
func testOtherWriters(t *testing.T, b backend) {
	a, _ := newStore(t, b.client(t), Config{})
	bb, _ := newStore(t, b.client(t), Config{})
	tenant := fmt.Sprintf("net-%d", time.Now().UnixNano())
	rec := runFeed(t, bb, a, tenant)
	ctx := ctxT(t)
	net := redistest.DotNet{C: b.client(t)}
	const typ = "ApprovalRequest"
	ref := Ref{tenant, typ, "r-1"}
	sweep := func() {
		t.Helper()
		for _, s := range []*Store{a, bb} {
			if err := s.Locks.Sweep(ctx, tenant, typ, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// step runs what, then waits for the entity's events to number n, and checks the
	// last ones are want (op and holder), in order.
	type ev struct {
		op     protocol.Op
		holder string
		prev   string // TakenOver: the previous holder's oid
	}
	var seen []ev
	step := func(name string, what func(), want ...ev) {
		t.Helper()
		what()
		seen = append(seen, want...)
		redistest.Eventually(t, name+": the events", func() bool { return len(rec.of(tenant, ref.UID)) >= len(seen) })
	}
	netClaim := func(h protocol.Holder) func() string {
		return func() string {
			t.Helper()
			ok, v, err := net.Claim(ctx, tenant, typ, ref.UID, h.OID, h.Name)
			if err != nil || !ok {
				t.Fatalf(".NET claim for %s = %v, %v", h.Name, ok, err)
			}
			return v
		}
	}
	netRelease := func(h protocol.Holder) {
		t.Helper()
		if ok, err := net.Release(ctx, tenant, typ, ref.UID, h.OID); err != nil || !ok {
			t.Fatalf(".NET release for %s = %v, %v", h.Name, ok, err)
		}
	}

	var adaValue string
	step(".NET claims for Ada", func() { adaValue = netClaim(ada)(); sweep() }, ev{protocol.OpAcquired, ada.OID, ""})
	if l := must1(a.Locks.Get(ctx, ref)); l == nil || l.HolderOID != ada.OID {
		t.Fatalf("Get after the .NET claim = %+v", l)
	}
	step(".NET renews Ada's lock", func() {
		l := must1(a.Locks.Get(ctx, ref))
		if _, err := net.Renew(ctx, tenant, typ, ref.UID, ada.OID, ada.Name, l.AcquiredAt.Time); err != nil {
			t.Fatal(err)
		}
		sweep()
	}, ev{protocol.OpRenewed, ada.OID, ""})
	expect(t, protocol.OutcomeLocked)(a.Locks.Claim(ctx, ref, grace, "tab-g")) // no change, no event
	step(".NET approves (releases)", func() { netRelease(ada); sweep() }, ev{protocol.OpReleased, ada.OID, ""})
	step(".NET claims for Edsger, lockhub takes over at once", func() {
		netClaim(edsger)()
		expect(t, protocol.OutcomeTakenOver)(a.Locks.Takeover(ctx, ref, margot, "tab-m", true))
	}, ev{protocol.OpAcquired, edsger.OID, ""}, ev{protocol.OpTakenOver, margot.OID, edsger.OID})
	step("another program puts Grace in Margaret's place", func() {
		// Its own lease, 4 minutes: lockhub finds a change by the index score it moves, and
		// one written in the very millisecond of lockhub's last change, with the same
		// lease, would leave the score as it was (the README's documented limit).
		if _, err := (redistest.DotNet{C: net.C, Lease: 4 * time.Minute}).Overwrite(ctx, tenant, typ, ref.UID, grace.OID, grace.Name); err != nil {
			t.Fatal(err)
		}
		sweep()
	}, ev{protocol.OpTakenOver, grace.OID, margot.OID})
	step(".NET releases Grace's, lockhub claims for Ada at once", func() {
		netRelease(grace)
		expect(t, protocol.OutcomeAcquired)(bb.Locks.Claim(ctx, ref, ada, "tab-a"))
		sweep()
	}, ev{protocol.OpReleased, grace.OID, ""}, ev{protocol.OpAcquired, ada.OID, ""})
	step("lockhub renews and releases", func() {
		expect(t, protocol.OutcomeRenewed)(a.Locks.Renew(ctx, ref, ada, "tab-a"))
		sweep()
		expect(t, protocol.OutcomeReleased)(a.Locks.Release(ctx, ref, ada, "tab-a"))
		sweep()
	}, ev{protocol.OpRenewed, ada.OID, ""}, ev{protocol.OpReleased, ada.OID, ""})

	// Every sweep's publish is done; a marker published now arrives after all of them,
	// so nothing announced twice is still on its way.
	marker := Ref{tenant, typ, "marker"}
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, marker, ada, ""))
	redistest.Eventually(t, "the marker arrives", func() bool { return len(rec.of(tenant, "marker")) > 0 })
	evs := rec.of(tenant, ref.UID)
	var got []ev
	for _, e := range evs {
		g := ev{e.Op, e.Lock.HolderOID, ""}
		if e.PreviousHolder != nil {
			g.prev = e.PreviousHolder.OID
		}
		got = append(got, g)
	}
	if fmt.Sprint(got) != fmt.Sprint(seen) {
		t.Fatalf("events\n %v\nwant\n %v", got, seen)
	}
	if evs[0].Lock.HolderName != ada.Name || evs[0].Lock.ExpiresAt.IsZero() {
		t.Fatalf("the Acquired of a .NET claim carries its lock: %+v", evs[0].Lock)
	}
	// The first event carries the lock as the .NET service stored it, byte for byte.
	rec.mu.Lock()
	for _, c := range rec.changes {
		if c.Event.Lock.EntityUID == ref.UID {
			if !strings.Contains(string(c.Frame), `"lock":`+adaValue+`,`) {
				t.Errorf("frame %s does not carry the stored value %s", c.Frame, adaValue)
			}
			break
		}
	}
	rec.mu.Unlock()
	// Counted as found: the five changes of other programs, each once.
	var foreign int
	for _, s := range []*Store{a, bb} {
		foreign += int(testutil.ToFloat64(s.core.met.foreign.WithLabelValues("Acquired")) +
			testutil.ToFloat64(s.core.met.foreign.WithLabelValues("Renewed")) +
			testutil.ToFloat64(s.core.met.foreign.WithLabelValues("TakenOver")) +
			testutil.ToFloat64(s.core.met.foreign.WithLabelValues("Released")))
	}
	if foreign != 6 {
		t.Fatalf("the stores counted %d changes of other programs, want 6", foreign)
	}

	// A .NET lock that runs out: its claim gives the index the bare lease, so the index
	// may go with it; the copy still says whose it was and when it ended.
	short := redistest.DotNet{C: b.client(t), Lease: 300 * time.Millisecond}
	exp := Ref{tenant, typ, "r-2"}
	if ok, _, err := short.Claim(ctx, tenant, typ, exp.UID, grace.OID, grace.Name); err != nil || !ok {
		t.Fatalf(".NET claim = %v, %v", ok, err)
	}
	sweep()
	redistest.Eventually(t, "the short lock announced", func() bool { return len(rec.of(tenant, exp.UID)) == 1 })
	if b.advance != nil {
		b.advance(time.Second)
	} else {
		redistest.Eventually(t, "the .NET lock runs out", func() bool { return must1(a.Locks.Get(ctx, exp)) == nil })
	}
	redistest.Eventually(t, "Expired", func() bool {
		sweep()
		return len(rec.of(tenant, exp.UID)) >= 2
	})
	if got := ops(rec.of(tenant, exp.UID)); got != "Acquired Expired " {
		t.Fatalf("events of the short lock: %s", got)
	}
	if e := rec.of(tenant, exp.UID)[1]; e.Lock.HolderOID != grace.OID {
		t.Fatalf("Expired without its holder: %+v", e.Lock)
	}
}

// testFeedExample: the integrators' example of another program announcing its change
// at once (protocol/examples/release-and-announce.lua, which locks/README.md quotes whole)
// reaches the feed without a sweep, and no sweep announces it a second time.
func testFeedExample(t *testing.T, b backend) {
	src, err := os.ReadFile("../protocol/examples/release-and-announce.lua")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), string(src)) {
		t.Fatal("locks/README.md does not quote protocol/examples/release-and-announce.lua whole")
	}
	s, _ := newStore(t, b.client(t), Config{})
	tenant := fmt.Sprintf("ex-%d", time.Now().UnixNano())
	rec := runFeed(t, s, s, tenant)
	ctx := ctxT(t)
	const typ = "ApprovalRequest"
	c := b.client(t)
	net := redistest.DotNet{C: c}
	if ok, _, err := net.Claim(ctx, tenant, typ, "r-1", ada.OID, ada.Name); err != nil || !ok {
		t.Fatalf(".NET claim = %v, %v", ok, err)
	}
	// A watched tenant: the sweeper has run, which keeps the feed key.
	if err := s.Locks.Sweep(ctx, tenant, typ, 0); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, "the .NET claim announced", func() bool { return len(rec.of(tenant, "r-1")) == 1 })

	lock, index := redistest.DotNetKeys(tenant, typ, "r-1")
	at := protocol.NewTime(time.Now()).String()
	n, err := redis.NewScript(string(src)).Run(ctx, c, []string{lock, index, ValuesKey(tenant, typ), FeedKey(tenant)}, ada.OID, tenant, at).Int()
	if err != nil || n != 1 {
		t.Fatalf("the example = %d, %v", n, err)
	}
	redistest.Eventually(t, "Released, without a sweep", func() bool { return len(rec.of(tenant, "r-1")) == 2 })
	if err := s.Locks.Sweep(ctx, tenant, typ, 0); err != nil {
		t.Fatal(err)
	}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, typ, "marker"}, ada, ""))
	redistest.Eventually(t, "the marker", func() bool { return len(rec.of(tenant, "marker")) == 1 })
	evs := rec.of(tenant, "r-1")
	if got := ops(evs); got != "Acquired Released " {
		t.Fatalf("events %s, want Acquired Released", got)
	}
	if evs[1].Lock.HolderOID != ada.OID || evs[1].At.String() != at {
		t.Fatalf("Released event %+v", evs[1])
	}
}
