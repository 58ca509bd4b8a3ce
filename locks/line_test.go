package locks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// The waiting line and claims of many (PROTOCOL.md §9, §11, §12): on miniredis, a
// real redis-server and the 6-node cluster, with two stores as two hub instances.
func TestLine(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("order and hand-off", func(t *testing.T) { testLineHandoff(t, b) })
			t.Run("every way free", func(t *testing.T) { testLineEveryWay(t, b) })
			t.Run("quota passes over", func(t *testing.T) { testLineQuota(t, b) })
			t.Run("two tabs and intent", func(t *testing.T) { testLineTabs(t, b) })
			t.Run("waiter gone", func(t *testing.T) { testLineWaiterGone(t, b) })
			t.Run("claim many", func(t *testing.T) { testClaimMany(t, b) })
		})
	}
}

// bee is a fourth person.
var bee = protocol.Holder{OID: "u-bee", Name: "Bee"}

// lineFixture is two stores on one backend, a clock driving both and the server's,
// and a feed recorder for a tenant of its own.
type lineFixture struct {
	a, s    *Store
	clk     *clock
	rec     *recorder
	tenant  string
	ctx     context.Context
	markers int
}

func newLineFixture(t *testing.T, b backend, name string, cfg Config) *lineFixture {
	clk := newClock()
	cfg.Now = clk.Now
	a, _ := newStore(t, b.client(t), cfg)
	s, _ := newStore(t, b.client(t), cfg)
	clk.drive(a, s)
	tenant := fmt.Sprintf("line-%s-%d", name, time.Now().UnixNano())
	return &lineFixture{a: a, s: s, clk: clk, rec: runFeed(t, s, a, tenant), tenant: tenant, ctx: ctxT(t)}
}

func (f *lineFixture) ref(uid string) Ref { return Ref{f.tenant, "ApprovalRequest", uid} }

// view views ref as h through conn with intent, and returns the viewers' states.
func (f *lineFixture) view(t *testing.T, st *Store, ref Ref, h protocol.Holder, conn string, intent protocol.Intent) string {
	t.Helper()
	v := f.clk.view(h, conn)
	v.Intent = intent
	got, err := st.Presence.View(f.ctx, ref, v, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f.clk.advance(time.Second) // the next view comes a second later: a later place in line
	return states(got.List)
}

// now reads the viewers' states through st.
func (f *lineFixture) now(t *testing.T, st *Store, ref Ref) string {
	t.Helper()
	got, _, err := st.Presence.RefreshViews(f.ctx, ref, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return states(got.List)
}

// states writes viewers as "oid:state" (and the position of a waiting one), in order.
func states(vs []protocol.Viewer) string {
	var out []string
	for _, v := range vs {
		s := v.OID + ":" + string(v.State)
		if v.Position > 0 {
			s += fmt.Sprint(v.Position)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// holder is who holds ref now ("" for nobody).
func (f *lineFixture) holder(t *testing.T, ref Ref) string {
	t.Helper()
	l, err := f.a.Locks.Lookup(f.ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if l == nil {
		return ""
	}
	return l.HolderOID
}

// events waits until the feed carried want's number of events of ref and checks them,
// as "Op:holder" in order.
func (f *lineFixture) events(t *testing.T, ref Ref, want string) {
	t.Helper()
	n := len(strings.Fields(want))
	got := func() string {
		var out []string
		for _, e := range f.rec.of(ref.Tenant, ref.UID) {
			out = append(out, string(e.Op)+":"+e.Lock.HolderOID)
		}
		return strings.Join(out, " ")
	}
	redistest.Eventually(t, "the events of "+ref.UID, func() bool { return len(strings.Fields(got())) >= n })
	// A marker published now arrives after everything published before it.
	f.markers++
	marker := f.ref(fmt.Sprintf("marker-%d", f.markers))
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, marker, bee, ""))
	redistest.Eventually(t, "the marker", func() bool { return len(f.rec.of(ref.Tenant, marker.UID)) > 0 })
	if g := got(); g != want {
		t.Fatalf("events of %s:\n got %s\nwant %s", ref.UID, g, want)
	}
}

// handoffs are the hand-offs of ref the feed carried, as "oid@conn".
func (f *lineFixture) handoffs(ref Ref) string {
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	var out []string
	for _, h := range f.rec.handoffs {
		if h.Ref == ref {
			out = append(out, h.To+"@"+h.Conn)
		}
	}
	return strings.Join(out, " ")
}

// testLineHandoff: people who view with intent edit wait in the order they started,
// across instances; a release hands the lock to the first, through their socket, with
// Released then Acquired, a handoff on the feed and an audit entry of reason handoff;
// the viewers say who edits and who waits where; a release with nobody left in line
// leaves the lock free.
func testLineHandoff(t *testing.T, b backend) {
	f := newLineFixture(t, b, "order", Config{})
	ref := f.ref("r-1001")
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, ref, ada, "c-ada"))
	if got := f.view(t, f.a, ref, ada, "c-ada", protocol.IntentEdit); got != "u-ada:editing" {
		t.Fatalf("the holder viewing: %q", got)
	}
	if got := f.view(t, f.s, ref, grace, "c-grace", protocol.IntentEdit); got != "u-ada:editing u-grace:waiting1" {
		t.Fatalf("Grace waiting: %q", got)
	}
	if got := f.view(t, f.s, ref, bee, "c-bee", protocol.IntentLook); got != "u-ada:editing u-grace:waiting1 u-bee:looking" {
		t.Fatalf("Bee looking: %q", got)
	}
	if got := f.view(t, f.a, ref, margot, "c-margot", ""); got != "u-ada:editing u-grace:waiting1 u-bee:looking u-margaret:looking" {
		t.Fatalf("no intent is look: %q", got)
	}
	// Margaret changes her mind: a view again, with intent edit, puts her in line now.
	if got := f.view(t, f.a, ref, margot, "c-margot", protocol.IntentEdit); got != "u-ada:editing u-grace:waiting1 u-bee:looking u-margaret:waiting2" {
		t.Fatalf("Margaret waiting: %q", got)
	}

	res := expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, ref, ada, "c-ada"))
	if res.Lock == nil || res.Lock.HolderOID != ada.OID {
		t.Fatalf("the release answered the lock %+v, want Ada's", res.Lock)
	}
	if h := f.holder(t, ref); h != grace.OID {
		t.Fatalf("after Ada's release the lock is %q's, want Grace's, the first in line", h)
	}
	// Ada still views with intent edit: she waits now, at the back.
	if got := f.now(t, f.s, ref); got != "u-ada:waiting2 u-grace:editing u-bee:looking u-margaret:waiting1" {
		t.Fatalf("after the hand-off: %q", got)
	}
	f.events(t, ref, "Acquired:u-ada Released:u-ada Acquired:u-grace")
	if got := f.handoffs(ref); got != "u-grace@c-grace" {
		t.Fatalf("hand-offs on the feed: %q, want one to Grace through c-grace", got)
	}
	// line.lua builds the keys of handKey and ConnsKey from the lock key: the same keys.
	if got := must1(f.a.core.rdb.Get(f.ctx, handKey(ref)).Result()); got != "c-grace" {
		t.Errorf("%s = %q, want c-grace", handKey(ref), got)
	}
	if got := must1(f.a.core.rdb.SMembers(f.ctx, ConnsKey(ref)).Result()); len(got) != 1 || got[0] != "c-grace" {
		t.Errorf("%s = %q, want c-grace alone", ConnsKey(ref), got)
	}
	// The lock is Grace's through her socket, as if it had claimed: her socket's close
	// releases it, to Margaret, the next.
	expect(t, protocol.OutcomeReleased)(f.s.Locks.Detach(f.ctx, ref, grace, "c-grace", true))
	if h := f.holder(t, ref); h != margot.OID {
		t.Fatalf("after Grace's socket went the lock is %q's, want Margaret's", h)
	}
	if err := f.s.Presence.Unview(f.ctx, ref, "c-grace"); err != nil { // her view ends with it
		t.Fatal(err)
	}
	// An administrator's force release hands it on too, to Ada, back in line.
	if _, err := f.a.Console.ForceRelease(f.ctx, ref, bee); err != nil {
		t.Fatal(err)
	}
	if h := f.holder(t, ref); h != ada.OID {
		t.Fatalf("after the force release the lock is %q's, want Ada's", h)
	}
	// Ada leaves the line (look) and releases: Margaret, the force released, waits again
	// at the back, so she is the only one; she gets it. She releases with nobody left.
	f.view(t, f.a, ref, ada, "c-ada", protocol.IntentLook)
	expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, ref, ada, "c-ada"))
	if h := f.holder(t, ref); h != margot.OID {
		t.Fatalf("the lock is %q's, want Margaret's", h)
	}
	expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, ref, margot, ""))
	if h := f.holder(t, ref); h != "" {
		t.Fatalf("with nobody in line the lock is %q's, want free", h)
	}
	f.events(t, ref, "Acquired:u-ada Released:u-ada Acquired:u-grace Released:u-grace Acquired:u-margaret "+
		"Released:u-margaret Acquired:u-ada Released:u-ada Acquired:u-margaret Released:u-margaret")
	if got := f.handoffs(ref); got != "u-grace@c-grace u-margaret@c-margot u-ada@c-ada u-margaret@c-margot" {
		t.Fatalf("hand-offs %q", got)
	}

	// Audited: each hand-off an Acquired of reason handoff, no actor.
	page, err := f.a.Console.Audit(f.ctx, f.tenant, AuditQuery{EntityType: ref.Type, EntityUID: ref.UID})
	if err != nil {
		t.Fatal(err)
	}
	var handed []string
	for _, e := range page.Entries {
		if e.Reason == AuditHandoff {
			if e.Op != protocol.OpAcquired || e.Actor != nil || e.Holder == nil {
				t.Errorf("hand-off entry %+v: want Acquired, no actor, the new holder", e)
				continue
			}
			handed = append([]string{e.Holder.OID}, handed...) // newest first
		}
	}
	if got := strings.Join(handed, " "); got != "u-grace u-margaret u-ada u-margaret" {
		t.Errorf("hand-offs audited: %q", got)
	}
	if got := testutil.ToFloat64(f.a.core.met.handoffs) + testutil.ToFloat64(f.s.core.met.handoffs); got != 4 {
		t.Errorf("lockhub_store_handoffs_total counts %v, want 4", got)
	}
}

// testLineEveryWay: a lock found free by the sweep (a lease that ran out, the .NET
// API's release) goes to the first in line too, Expired or Released before Acquired.
func testLineEveryWay(t *testing.T, b backend) {
	f := newLineFixture(t, b, "sweep", Config{Lease: 2 * time.Second})
	sweep := func() {
		if b.advance != nil {
			b.advance(300 * time.Millisecond)
		}
		if err := f.s.Locks.Sweep(f.ctx, f.tenant, "ApprovalRequest", 0); err != nil {
			t.Fatal(err)
		}
	}

	// A lease that runs out, found by a sweep.
	ref := f.ref("r-exp")
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, ref, ada, "c-ada"))
	f.view(t, f.a, ref, grace, "c-grace", protocol.IntentEdit)
	redistest.Eventually(t, "the lease runs out and the sweep hands it on", func() bool {
		sweep()
		return f.holder(t, ref) == grace.OID
	})
	f.events(t, ref, "Acquired:u-ada Expired:u-ada Acquired:u-grace")

	// A lease that runs out, found by a claim before any sweep: the line comes first,
	// and the claim meets Grace's lock.
	ref = f.ref("r-claim")
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, ref, ada, "c-ada"))
	f.view(t, f.a, ref, grace, "c-grace", protocol.IntentEdit)
	redistest.Eventually(t, "the lease runs out", func() bool {
		if b.advance != nil {
			b.advance(300 * time.Millisecond)
		}
		return f.holder(t, ref) == ""
	})
	res := expect(t, protocol.OutcomeLocked)(f.s.Locks.Claim(f.ctx, ref, margot, "c-margot"))
	if res.Lock.HolderOID != grace.OID {
		t.Fatalf("Margaret's claim met %+v, want Grace's lock", res.Lock)
	}
	f.events(t, ref, "Acquired:u-ada Expired:u-ada Acquired:u-grace")

	// The .NET API's release, found by a sweep (PROTOCOL.md §8).
	ref = f.ref("r-net")
	dn := redistest.DotNet{C: b.client(t)}
	if ok, _, err := dn.Claim(f.ctx, f.tenant, ref.Type, ref.UID, ada.OID, ada.Name); err != nil || !ok {
		t.Fatalf(".NET claim: %v, %v", ok, err)
	}
	sweep() // lockhub sees the .NET lock: Acquired
	f.view(t, f.s, ref, margot, "c-margot", protocol.IntentEdit)
	if ok, err := dn.Release(f.ctx, f.tenant, ref.Type, ref.UID, ada.OID); err != nil || !ok {
		t.Fatalf(".NET release: %v, %v", ok, err)
	}
	redistest.Eventually(t, "the sweep finds the release and hands it on", func() bool {
		sweep()
		return f.holder(t, ref) == margot.OID
	})
	f.events(t, ref, "Acquired:u-ada Released:u-ada Acquired:u-margaret")
	if got := f.handoffs(f.ref("r-net")); got != "u-margaret@c-margot" {
		t.Errorf("hand-offs %q", got)
	}
}

// testLineQuota: a person at a limit of the fair share is passed over, stays in line,
// and the limit is counted.
func testLineQuota(t *testing.T, b backend) {
	f := newLineFixture(t, b, "quota", Config{MaxLocksPerPerson: 1})
	ref := f.ref("r-1")
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, ref, ada, "c-ada"))
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, f.ref("r-2"), grace, "c-grace")) // her one lock
	f.view(t, f.s, ref, grace, "c-grace", protocol.IntentEdit)
	f.view(t, f.a, ref, margot, "c-margot", protocol.IntentEdit)
	expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, ref, ada, "c-ada"))
	if h := f.holder(t, ref); h != margot.OID {
		t.Fatalf("the lock went to %q, want Margaret: Grace holds her quota", h)
	}
	if got := f.now(t, f.a, ref); got != "u-grace:waiting1 u-margaret:editing" {
		t.Fatalf("Grace stays first in line: %q", got)
	}
	if got := testutil.ToFloat64(f.a.core.met.passedOver.WithLabelValues(SettingLocksPerPerson)); got != 1 {
		t.Errorf("passed over counted %v, want 1", got)
	}
	// Grace lets her other lock go: the next release is hers.
	expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, f.ref("r-2"), grace, "c-grace"))
	expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, ref, margot, "c-margot"))
	if h := f.holder(t, ref); h != grace.OID {
		t.Fatalf("the lock went to %q, want Grace", h)
	}
}

// testLineTabs: one person with two sockets counts once, at the earliest place of the
// sockets that wait, with the strongest intent; the hand-off goes through the earliest
// waiting socket; a view with intent look leaves the line.
func testLineTabs(t *testing.T, b backend) {
	f := newLineFixture(t, b, "tabs", Config{})
	ref := f.ref("r-1")
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, ref, ada, "c-ada"))
	f.view(t, f.a, ref, grace, "c-grace-1", protocol.IntentLook) // her first tab only looks
	f.view(t, f.s, ref, margot, "c-margot", protocol.IntentEdit)
	f.view(t, f.s, ref, grace, "c-grace-2", protocol.IntentEdit) // her second waits, after Margaret
	if got := f.now(t, f.a, ref); got != "u-grace:waiting2 u-margaret:waiting1" {
		t.Fatalf("two tabs: %q", got)
	}
	f.view(t, f.a, ref, grace, "c-grace-1", protocol.IntentEdit) // now both wait; the second is earlier
	f.view(t, f.s, ref, margot, "c-margot", protocol.IntentLook) // Margaret leaves the line
	if got := f.now(t, f.a, ref); got != "u-grace:waiting1 u-margaret:looking" {
		t.Fatalf("after Margaret looks: %q", got)
	}
	expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, ref, ada, "c-ada"))
	if h := f.holder(t, ref); h != grace.OID {
		t.Fatalf("the lock went to %q, want Grace", h)
	}
	redistest.Eventually(t, "the hand-off on the feed", func() bool { return f.handoffs(ref) != "" })
	if got := f.handoffs(ref); got != "u-grace@c-grace-2" {
		t.Fatalf("hand-off %q, want through Grace's earliest waiting socket, c-grace-2", got)
	}
	// The two-tab rule: her first tab's claim shares the lock; the second's close keeps it.
	expect(t, protocol.OutcomeRenewed)(f.a.Locks.Claim(f.ctx, ref, grace, "c-grace-1"))
	expect(t, protocol.OutcomeNotHeld)(f.s.Locks.Detach(f.ctx, ref, grace, "c-grace-2", true))
	if h := f.holder(t, ref); h != grace.OID {
		t.Fatalf("after one tab closed the lock is %q's, want Grace's still", h)
	}
}

// testLineWaiterGone: a waiter whose view ran out (a socket of a dead instance) is
// passed over; a lock handed to a socket whose view then runs out before any hub took
// it up is released, and handed on, once the view is found run out; a socket that
// closed in its grace is released by its detach job (ReleaseHanded).
func testLineWaiterGone(t *testing.T, b backend) {
	f := newLineFixture(t, b, "gone", Config{})
	ref := f.ref("r-1")
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, ref, ada, "c-ada"))
	f.view(t, f.s, ref, grace, "c-grace", protocol.IntentEdit) // its instance dies: never refreshed
	f.view(t, f.a, ref, margot, "c-margot", protocol.IntentEdit)
	f.clk.advance(25 * time.Second)
	if _, _, err := f.a.Presence.RefreshViews(f.ctx, ref, 30*time.Second, "c-margot"); err != nil {
		t.Fatal(err)
	}
	// Grace's view is still there (30 s): she is handed the lock.
	expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, ref, ada, "c-ada"))
	if h := f.holder(t, ref); h != grace.OID {
		t.Fatalf("the lock went to %q, want Grace, whose view has not run out", h)
	}
	// Nobody takes it up; her view runs out and Margaret's hub's refresh finds it so.
	f.clk.advance(10 * time.Second)
	if _, _, err := f.a.Presence.RefreshViews(f.ctx, ref, 30*time.Second, "c-margot"); err != nil {
		t.Fatal(err)
	}
	if h := f.holder(t, ref); h != margot.OID {
		t.Fatalf("after Grace's view ran out the lock is %q's, want Margaret's", h)
	}
	f.events(t, ref, "Acquired:u-ada Released:u-ada Acquired:u-grace Released:u-grace Acquired:u-margaret")

	// A waiter whose view already ran out is passed over.
	ref2 := f.ref("r-2")
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, ref2, ada, "c-ada"))
	f.view(t, f.s, ref2, grace, "c-grace-2", protocol.IntentEdit)
	f.clk.advance(31 * time.Second)
	expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, ref2, ada, "c-ada"))
	if h := f.holder(t, ref2); h != "" {
		t.Fatalf("the lock went to %q, want nobody: the only waiter's view ran out", h)
	}

	// A closed socket in its grace is handed the lock; its detach job releases it.
	ref3 := f.ref("r-3")
	expect(t, protocol.OutcomeAcquired)(f.a.Locks.Claim(f.ctx, ref3, ada, "c-ada"))
	f.view(t, f.s, ref3, grace, "c-grace-3", protocol.IntentEdit)
	expect(t, protocol.OutcomeReleased)(f.a.Locks.Release(f.ctx, ref3, ada, "c-ada"))
	expect(t, protocol.OutcomeNotHeld)(f.s.Locks.ReleaseHanded(f.ctx, ref3, "c-other")) // not the one it went to
	expect(t, protocol.OutcomeReleased)(f.s.Locks.ReleaseHanded(f.ctx, ref3, "c-grace-3"))
	if h := f.holder(t, ref3); h != "" {
		t.Fatalf("after the detach job the lock is %q's, want free", h)
	}
}

// testClaimMany: all or nothing, one event and one audit entry per entity, renewals of
// the caller's own, the batch refused whole at a quota, bad lists refused before Redis,
// another tenant's lock never in the way, release of many.
func testClaimMany(t *testing.T, b backend) {
	f := newLineFixture(t, b, "many", Config{MaxLocksPerPerson: 5})
	ctx, L := f.ctx, f.a.Locks
	uids := []string{"r-1", "r-2", "r-3"}

	// Held by someone else: nothing written, the lock in the way answered.
	expect(t, protocol.OutcomeAcquired)(f.s.Locks.Claim(ctx, f.ref("r-2"), grace, ""))
	res, err := L.ClaimMany(ctx, f.tenant, "ApprovalRequest", uids, ada, "c-ada")
	if err != nil || res.Outcome != protocol.OutcomeLocked || len(res.Locks) != 1 || res.Locks[0].HolderOID != grace.OID {
		t.Fatalf("claimMany over Grace's lock: %+v, %v", res, err)
	}
	for _, uid := range []string{"r-1", "r-3"} {
		if h := f.holder(t, f.ref(uid)); h != "" {
			t.Fatalf("%s is %q's after a refused claimMany: something was written", uid, h)
		}
	}
	expect(t, protocol.OutcomeReleased)(f.s.Locks.Release(ctx, f.ref("r-2"), grace, ""))

	// Another tenant's lock on the same uid is not in the way, nor ever shown.
	other := Ref{f.tenant + "-b", "ApprovalRequest", "r-1"}
	expect(t, protocol.OutcomeAcquired)(f.s.Locks.Claim(ctx, other, grace, ""))

	// Ada holds r-1 already: it is renewed, keeping acquiredAtUtc.
	first := expect(t, protocol.OutcomeAcquired)(L.Claim(ctx, f.ref("r-1"), ada, "c-ada"))
	f.clk.advance(time.Second)
	res, err = L.ClaimMany(ctx, f.tenant, "ApprovalRequest", uids, ada, "c-ada")
	if err != nil || res.Outcome != protocol.OutcomeAcquired || len(res.Locks) != 3 {
		t.Fatalf("claimMany: %+v, %v", res, err)
	}
	for i, l := range res.Locks {
		if l.EntityUID != uids[i] || l.HolderOID != ada.OID {
			t.Errorf("lock %d is %+v, want Ada's %s, in the order asked", i, l, uids[i])
		}
		if h := f.holder(t, f.ref(uids[i])); h != ada.OID {
			t.Errorf("%s is %q's, want Ada's", uids[i], h)
		}
	}
	if !res.Locks[0].AcquiredAt.Equal(first.Lock.AcquiredAt.Time) || !res.Locks[0].ExpiresAt.After(first.Lock.ExpiresAt.Time) {
		t.Errorf("the renewed lock %+v: want acquiredAtUtc kept and a later expiry than %+v", res.Locks[0], first.Lock)
	}
	f.events(t, f.ref("r-3"), "Acquired:u-ada")
	f.events(t, f.ref("r-1"), "Acquired:u-ada Renewed:u-ada")
	page, err := f.a.Console.Audit(ctx, f.tenant, AuditQuery{EntityType: "ApprovalRequest"})
	if err != nil {
		t.Fatal(err)
	}
	claimed := map[string]int{}
	for _, e := range page.Entries {
		if e.Op == protocol.OpAcquired && e.Holder != nil && e.Holder.OID == ada.OID && e.Reason == AuditClaim {
			claimed[e.EntityUID]++
		}
	}
	if claimed["r-1"] != 1 || claimed["r-2"] != 1 || claimed["r-3"] != 1 {
		t.Errorf("Acquired entries by entity %v, want one each (r-1's from its single claim)", claimed)
	}
	// Another tenant's lock is untouched.
	if l := must1(f.s.Locks.Get(ctx, other)); l == nil || l.HolderOID != grace.OID {
		t.Errorf("the other tenant's lock is %+v", l)
	}

	// A batch that would pass the person's quota is refused whole.
	_, err = L.ClaimMany(ctx, f.tenant, "ApprovalRequest", []string{"r-4", "r-5", "r-6"}, ada, "c-ada")
	var le *LimitError
	if !errors.As(err, &le) || le.Setting != SettingLocksPerPerson {
		t.Fatalf("claimMany past the quota: %v, want a LimitError naming %s", err, SettingLocksPerPerson)
	}
	if h := f.holder(t, f.ref("r-4")); h != "" {
		t.Fatalf("r-4 is %q's after a refused batch", h)
	}

	// Bad lists, refused before Redis.
	many := make([]string, protocol.MaxBulk+1)
	for i := range many {
		many[i] = fmt.Sprintf("r-%d", i)
	}
	for _, tc := range []struct {
		name string
		uids []string
		code protocol.ErrorCode
	}{
		{"none", nil, protocol.CodeBadRequest},
		{"101", many, protocol.CodeBadRequest},
		{"duplicates", []string{"r-1", "r-1"}, protocol.CodeBadRequest},
		{"invalid uid", []string{"r-1", "r}{2"}, protocol.CodeInvalidEntity},
	} {
		_, err := L.ClaimMany(ctx, f.tenant, "ApprovalRequest", tc.uids, ada, "")
		if code := errorCode(err); code != tc.code {
			t.Errorf("claimMany of %s: %v (code %q), want %q", tc.name, err, code, tc.code)
		}
		if _, err := L.ReleaseMany(ctx, f.tenant, "ApprovalRequest", tc.uids, ada, ""); errorCode(err) != tc.code {
			t.Errorf("releaseMany of %s: %v, want %q", tc.name, err, tc.code)
		}
	}
	if _, err := L.ClaimMany(ctx, f.tenant, "Invoice", uids, ada, ""); !errors.Is(err, ErrNotLockable) {
		t.Errorf("claimMany of a type not lockable: %v", err)
	}

	// Release of many: those Ada holds, each announced; r-9 she never held.
	rel, err := L.ReleaseMany(ctx, f.tenant, "ApprovalRequest", append(uids, "r-9"), ada, "c-ada")
	if err != nil || rel.Outcome != protocol.OutcomeReleased || rel.Count != 3 {
		t.Fatalf("releaseMany: %+v, %v; want released, 3", rel, err)
	}
	f.events(t, f.ref("r-3"), "Acquired:u-ada Released:u-ada")
	if l := must1(f.s.Locks.Get(ctx, other)); l == nil {
		t.Errorf("the other tenant's lock went with Ada's release")
	}
}

// TestClaimManyFailOpen: a store that cannot reach Redis answers unknown.
func TestClaimManyFailOpen(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	s, logs := newStore(t, c, Config{})
	mr.Close()
	ctx := ctxT(t)
	res, err := s.Locks.ClaimMany(ctx, "acme", "ApprovalRequest", []string{"r-1", "r-2"}, ada, "")
	if err != nil || res.Outcome != protocol.OutcomeUnknown {
		t.Fatalf("claimMany with Redis down: %+v, %v; want unknown", res, err)
	}
	rel, err := s.Locks.ReleaseMany(ctx, "acme", "ApprovalRequest", []string{"r-1"}, ada, "")
	if err != nil || rel.Outcome != protocol.OutcomeUnknown {
		t.Fatalf("releaseMany with Redis down: %+v, %v; want unknown", rel, err)
	}
	if !strings.Contains(logs.String(), "op=claim_many") {
		t.Errorf("no fail-open warning for claim_many in:\n%s", logs.String())
	}
}

// TestClaimManyRate: a bulk claim spends one change per entity it claims (PROTOCOL.md
// §4, §12): a batch beyond the changes left is refused whole, rate_limited.
func TestClaimManyRate(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			tenant := "many-rate-" + b.name
			s, _ := newStore(t, c, Config{MaxChangesPerPerson: 0.01, ChangesBurst: 5, Timeout: 10 * time.Second})
			ctx := ctxT(t)
			if r, err := s.Locks.ClaimMany(ctx, tenant, "ApprovalRequest", []string{"r-1", "r-2", "r-3"}, ada, ""); err != nil || r.Outcome != protocol.OutcomeAcquired {
				t.Fatalf("3 of 5: %+v, %v", r, err)
			}
			_, err := s.Locks.ClaimMany(ctx, tenant, "ApprovalRequest", []string{"r-4", "r-5", "r-6"}, ada, "")
			var re *RateError
			if !errors.As(err, &re) || errorCode(err) != protocol.CodeRateLimited {
				t.Fatalf("3 more with 2 left: %v, want a RateError", err)
			}
			if l, _ := s.Locks.Get(ctx, Ref{tenant, "ApprovalRequest", "r-4"}); l != nil {
				t.Fatalf("r-4 is %+v after a refused batch", l)
			}
			// Renewing her own spends nothing.
			if r, err := s.Locks.ClaimMany(ctx, tenant, "ApprovalRequest", []string{"r-1", "r-2", "r-3"}, ada, ""); err != nil || r.Outcome != protocol.OutcomeAcquired {
				t.Fatalf("renewing 3: %+v, %v", r, err)
			}
			// A bulk release counts one per lock it drops: 3 with 2 left is refused and
			// drops none; 2 of them pass, and the third waits for the rate.
			if _, err := s.Locks.ReleaseMany(ctx, tenant, "ApprovalRequest", []string{"r-1", "r-2", "r-3"}, ada, ""); !errors.As(err, &re) {
				t.Fatalf("releasing 3 with 2 left: %v, want a RateError", err)
			}
			for _, uid := range []string{"r-1", "r-2", "r-3"} {
				if l, _ := s.Locks.Get(ctx, Ref{tenant, "ApprovalRequest", uid}); l == nil || l.HolderOID != ada.OID {
					t.Fatalf("%s is %+v after a refused bulk release, want it still Ada's", uid, l)
				}
			}
			if r, err := s.Locks.ReleaseMany(ctx, tenant, "ApprovalRequest", []string{"r-1", "r-2"}, ada, ""); err != nil || r.Count != 2 {
				t.Fatalf("releasing 2 with 2 left: %+v, %v", r, err)
			}
			if _, err := s.Locks.ReleaseMany(ctx, tenant, "ApprovalRequest", []string{"r-3"}, ada, ""); !errors.As(err, &re) {
				t.Fatalf("releasing a third with none left: %v, want a RateError", err)
			}
		})
	}
}
