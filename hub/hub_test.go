package hub

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

const typ = "ApprovalRequest"

func TestWelcome(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.RenewEvery = 90 * time.Second }})
	before := time.Now().Add(-time.Second)
	_, w := th.dial("acme", "u-ada")
	if w.ConnectionID == "" || w.Tenant != "acme" || w.Holder.OID != "u-ada" || w.Holder.Name != "Name of u-ada" {
		t.Fatalf("welcome = %+v", w)
	}
	if w.LeaseMs != 300000 || w.RenewMs != 90000 {
		t.Fatalf("leaseMs, renewMs = %d, %d; want 300000, 90000", w.LeaseMs, w.RenewMs)
	}
	if w.ServerTime.Before(before) || w.ServerTime.After(time.Now().Add(time.Second)) {
		t.Fatalf("serverTime = %s", w.ServerTime)
	}
	if !slices.Equal(w.Lockable, []string{"ApprovalRequest", "Invoice"}) || w.CanTakeOver {
		t.Fatalf("lockable, canTakeOver = %v, %v", w.Lockable, w.CanTakeOver)
	}
	_, w2 := th.dial("acme", "u-boss", "Locks.TakeOver")
	if !w2.CanTakeOver || w2.ConnectionID == w.ConnectionID {
		t.Fatalf("second welcome = %+v", w2)
	}
}

func TestLockOperations(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	ada, _ := th.dial("acme", "u-ada")
	bob, _ := th.dial("acme", "u-bob")
	boss, _ := th.dial("acme", "u-boss", "Locks.TakeOver")

	r := expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1001"))
	if r.Lock == nil || r.Lock.HolderOID != "u-ada" || r.Lock.HolderName != "Name of u-ada" || r.Lock.EntityUID != "r-1001" {
		t.Fatalf("acquired lock = %+v", r.Lock)
	}
	acquired := r.Lock.AcquiredAt

	r = expect(t, protocol.OutcomeLocked)(bob.Claim(ctx, typ, "r-1001"))
	if r.Lock == nil || r.Lock.HolderOID != "u-ada" {
		t.Fatalf("locked answer = %+v", r)
	}
	r = expect(t, protocol.OutcomeRenewed)(ada.Claim(ctx, typ, "r-1001"))
	if !r.Lock.AcquiredAt.Equal(acquired.Time) {
		t.Fatalf("re-claim moved acquiredAtUtc: %s -> %s", acquired, r.Lock.AcquiredAt)
	}
	expect(t, protocol.OutcomeRenewed)(ada.Renew(ctx, typ, "r-1001"))
	r = expect(t, protocol.OutcomeLost)(bob.Renew(ctx, typ, "r-1001"))
	if r.Lock == nil || r.Lock.HolderOID != "u-ada" {
		t.Fatalf("lost answer = %+v", r)
	}
	r = expect(t, protocol.OutcomeNotHeld)(bob.Release(ctx, typ, "r-1001"))
	if r.Lock == nil || r.Lock.HolderOID != "u-ada" {
		t.Fatalf("notHeld answer = %+v", r)
	}
	r = expect(t, protocol.OutcomeForbidden)(bob.Takeover(ctx, typ, "r-1001"))
	if r.Lock == nil || r.Lock.HolderOID != "u-ada" {
		t.Fatalf("forbidden answer = %+v", r)
	}
	r = expect(t, protocol.OutcomeTakenOver)(boss.Takeover(ctx, typ, "r-1001"))
	if r.Lock.HolderOID != "u-boss" || r.PreviousHolder == nil || r.PreviousHolder.OID != "u-ada" {
		t.Fatalf("takenOver answer = %+v", r)
	}
	taken := r.Lock.AcquiredAt
	r = expect(t, protocol.OutcomeTakenOver)(boss.Takeover(ctx, typ, "r-1001")) // from oneself
	if r.Lock.HolderOID != "u-boss" || r.PreviousHolder == nil || r.PreviousHolder.OID != "u-boss" || !r.Lock.AcquiredAt.Equal(taken.Time) {
		t.Fatalf("takenOver of one's own lock = %+v", r)
	}
	expect(t, protocol.OutcomeLost)(ada.Renew(ctx, typ, "r-1001"))
	r = expect(t, protocol.OutcomeReleased)(boss.Release(ctx, typ, "r-1001"))
	if r.Lock == nil || r.Lock.HolderOID != "u-boss" {
		t.Fatalf("released answer = %+v", r)
	}
	r = expect(t, protocol.OutcomeNotHeld)(boss.Release(ctx, typ, "r-1001"))
	if r.Lock != nil {
		t.Fatalf("notHeld of a free lock carries %+v", r.Lock)
	}
	r = expect(t, protocol.OutcomeLost)(ada.Renew(ctx, typ, "r-1001"))
	if r.Lock != nil {
		t.Fatalf("lost of a free lock carries %+v", r.Lock)
	}
	r = expect(t, protocol.OutcomeAcquired)(boss.Takeover(ctx, typ, "r-1002"))
	if r.Lock.HolderOID != "u-boss" || r.PreviousHolder != nil {
		t.Fatalf("takeover of a free lock = %+v", r)
	}

	for op, n := range map[string]int{"claim": 3, "renew": 4, "release": 3, "takeover": 4} {
		var sum float64
		for _, o := range []protocol.Outcome{"acquired", "renewed", "locked", "lost", "released", "notHeld", "takenOver", "forbidden"} {
			sum += th.metric("lockhub_hub_outcomes_total", "op="+op, "outcome="+string(o))
		}
		if int(sum) != n {
			t.Errorf("outcomes counted for %s = %v, want %d", op, sum, n)
		}
	}
}

func TestUnknownWhenStoreFails(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	th.mr.SetError("LOADING Redis is loading the dataset in memory")
	for _, call := range []func() (protocol.Result, error){
		func() (protocol.Result, error) { return ada.Claim(ctx, typ, "r-2") },
		func() (protocol.Result, error) { return ada.Renew(ctx, typ, "r-1") },
		func() (protocol.Result, error) { return ada.Release(ctx, typ, "r-1") },
	} {
		r := expect(t, protocol.OutcomeUnknown)(call())
		if r.Lock != nil {
			t.Fatalf("unknown carries a lock: %+v", r.Lock)
		}
	}
	snap, err := ada.Watch(ctx, typ)
	if err != nil || len(snap.Locks) != 0 {
		t.Fatalf("watch while the store fails = %+v, %v; want an empty snapshot", snap, err)
	}
	mine, err := ada.Mine(ctx)
	if err != nil || len(mine) != 0 {
		t.Fatalf("mine while the store fails = %v, %v", mine, err)
	}
	th.mr.SetError("")
	expect(t, protocol.OutcomeRenewed)(ada.Renew(ctx, typ, "r-1"))
}

func TestWatch(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	ada, _ := th.dial("acme", "u-ada")
	boss, _ := th.dial("acme", "u-boss", "Locks.TakeOver")
	w, _ := th.dial("acme", "u-watcher")
	// An event whose change came before a watch may still be on its way through Redis
	// when the watch's snapshot is read; the watcher then gets it after the snapshot,
	// a harmless repeat. Wait until the hub has fanned r-1 out (to an earlier watcher),
	// so that w's first event is the next change.
	early, _ := th.dial("acme", "u-early")
	if _, err := early.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, "Invoice", "i-1"))
	wantEvent(t, early, protocol.OpAcquired, "r-1")

	snap, err := w.Watch(ctx, typ)
	if err != nil {
		t.Fatal(err)
	}
	if snap.EntityType != typ || len(snap.Locks) != 1 || snap.Locks[0].EntityUID != "r-1" {
		t.Fatalf("snapshot = %+v", snap)
	}

	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-2"))
	ev := wantEvent(t, w, protocol.OpAcquired, "r-2")
	if ev.Lock.HolderOID != "u-ada" || ev.At.IsZero() || ev.PreviousHolder != nil {
		t.Fatalf("Acquired event = %+v", ev)
	}
	expect(t, protocol.OutcomeRenewed)(ada.Claim(ctx, typ, "r-2"))
	wantEvent(t, w, protocol.OpRenewed, "r-2")
	expect(t, protocol.OutcomeRenewed)(ada.Renew(ctx, typ, "r-2"))
	wantEvent(t, w, protocol.OpRenewed, "r-2")
	expect(t, protocol.OutcomeTakenOver)(boss.Takeover(ctx, typ, "r-2"))
	ev = wantEvent(t, w, protocol.OpTakenOver, "r-2")
	if ev.PreviousHolder == nil || ev.PreviousHolder.OID != "u-ada" || ev.Lock.HolderOID != "u-boss" {
		t.Fatalf("TakenOver event = %+v", ev)
	}
	expect(t, protocol.OutcomeReleased)(boss.Release(ctx, typ, "r-2"))
	wantEvent(t, w, protocol.OpReleased, "r-2")
	expect(t, protocol.OutcomeAcquired)(boss.Takeover(ctx, typ, "r-3"))
	wantEvent(t, w, protocol.OpAcquired, "r-3")

	// Not watched: Invoice. Watching it again answers a fresh snapshot and no duplicate
	// events.
	expect(t, protocol.OutcomeReleased)(ada.Release(ctx, "Invoice", "i-1"))
	if snap, err = w.Watch(ctx, typ); err != nil || len(snap.Locks) != 2 {
		t.Fatalf("second watch = %+v, %v", snap, err)
	}

	// After unwatch, no more events of the type.
	r, err := w.Unwatch(ctx, typ)
	wantOutcome(t, r, err, protocol.OutcomeUnwatched)
	other, _ := th.dial("acme", "u-other")
	if _, err := other.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	expect(t, protocol.OutcomeReleased)(ada.Release(ctx, typ, "r-1"))
	wantEvent(t, other, protocol.OpReleased, "r-1")
	barrier(t, w) // other has its event: had w one too, it would be queued before the answer
	noEvent(t, w)
	r, err = w.Unwatch(ctx, typ)
	wantOutcome(t, r, err, protocol.OutcomeUnwatched) // unwatching twice is fine

	_, err = w.Watch(ctx, "Nope")
	wantCode(t, err, protocol.CodeNotLockable)
	_, err = w.Watch(ctx, "bad type")
	wantCode(t, err, protocol.CodeInvalidEntity)
	_, err = w.Unwatch(ctx, "a}b")
	wantCode(t, err, protocol.CodeInvalidEntity)

	if got := th.metric("lockhub_hub_events_delivered_total"); got < 7 {
		t.Errorf("events delivered = %v, want at least 7", got)
	}
}

func TestMine(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	ada, _ := th.dial("acme", "u-ada")
	bob, _ := th.dial("acme", "u-bob")
	mine, err := ada.Mine(ctx)
	if err != nil || len(mine) != 0 {
		t.Fatalf("mine = %v, %v", mine, err)
	}
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, "Invoice", "i-9"))
	expect(t, protocol.OutcomeAcquired)(bob.Claim(ctx, typ, "r-2"))
	mine, err = ada.Mine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, l := range mine {
		uids = append(uids, l.EntityUID)
	}
	slices.Sort(uids)
	if !slices.Equal(uids, []string{"i-9", "r-1"}) {
		t.Fatalf("mine = %v, want i-9, r-1", uids)
	}
}

func TestTenantIsolation(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	// The same oid in another tenant is another person; the names tell their locks and
	// events apart, since both tenants lock the same uid.
	acmeAda := protocol.Holder{OID: "u-ada", Name: "Ada of acme"}
	globexAda := protocol.Holder{OID: "u-ada", Name: "Ada of globex"}
	ada := th.dialAs("acme", acmeAda)
	mallory := th.dialAs("globex", globexAda, "Locks.TakeOver")
	acmeWatch, _ := th.dial("acme", "u-w1")
	globexWatch, _ := th.dial("globex", "u-w2")
	for _, c := range []*protocol.Client{acmeWatch, globexWatch} {
		if _, err := c.Watch(ctx, typ); err != nil {
			t.Fatal(err)
		}
	}
	// The events of both tenants reach this hub in order, over its one feed connection
	// (miniredis): an event of the other tenant, leaked, would come before the next
	// event of a watcher's own, which wantEventBy would then refuse.
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	wantEventBy(t, acmeWatch, protocol.OpAcquired, "r-1", acmeAda)

	// globex cannot see, release, renew nor take over acme's lock: its r-1 is its own.
	r := expect(t, protocol.OutcomeNotHeld)(mallory.Release(ctx, typ, "r-1"))
	if r.Lock != nil {
		t.Fatalf("globex release saw acme's lock: %+v", r.Lock)
	}
	expect(t, protocol.OutcomeLost)(mallory.Renew(ctx, typ, "r-1"))
	if mine, _ := mallory.Mine(ctx); len(mine) != 0 {
		t.Fatalf("globex mine = %+v", mine)
	}
	snap, err := globexWatch.Watch(ctx, typ)
	if err != nil || len(snap.Locks) != 0 {
		t.Fatalf("globex snapshot = %+v, %v", snap, err)
	}
	expect(t, protocol.OutcomeAcquired)(mallory.Takeover(ctx, typ, "r-1"))
	wantEventBy(t, globexWatch, protocol.OpAcquired, "r-1", globexAda)
	barrier(t, globexWatch)
	noEvent(t, globexWatch) // acme's Acquired never came

	l, err := th.store.Locks.Get(ctx, locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"})
	if err != nil || l == nil || l.Holder() != acmeAda {
		t.Fatalf("acme's lock after globex's attempts = %+v, %v", l, err)
	}
	expect(t, protocol.OutcomeReleased)(ada.Release(ctx, typ, "r-1"))
	wantEventBy(t, acmeWatch, protocol.OpReleased, "r-1", acmeAda)
	barrier(t, acmeWatch)
	noEvent(t, acmeWatch) // globex's Acquired never came
	expect(t, protocol.OutcomeReleased)(mallory.Release(ctx, typ, "r-1"))
	wantEventBy(t, globexWatch, protocol.OpReleased, "r-1", globexAda)
	barrier(t, globexWatch)
	noEvent(t, globexWatch) // nor acme's Released
	barrier(t, acmeWatch)
	noEvent(t, acmeWatch) // nor globex's Released
}

func TestPipelinedRequests(t *testing.T) {
	th := startMini(t, hubOptions{})
	ada, _ := th.dial("acme", "u-ada")
	ctx := tctx(t)
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			_, err := ada.Claim(ctx, typ, "r-"+string(rune('a'+i)))
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mine, _ := ada.Mine(ctx)
	if len(mine) != 20 {
		t.Fatalf("mine = %d locks, want 20", len(mine))
	}
}

func TestConfigDefaults(t *testing.T) {
	d, _ := auth.NewDev(auth.DevConfig{})
	th := startMini(t, hubOptions{})
	c, err := Config{Store: StoreOf(th.store), Verifier: d}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Roles != (auth.Roles{Takeover: "Locks.TakeOver", Admin: "Locks.Admin"}) || c.ReleaseGrace != 10*time.Second || c.RenewEvery != 2*time.Minute ||
		c.AuthTimeout != 10*time.Second || c.TokenLeeway != 5*time.Second || c.SendQueue != 256 ||
		c.RateLimit != 50 || c.RateBurst != 100 || c.OverRateGrace != 10*time.Second || c.SweepInterval != time.Second {
		t.Fatalf("defaults = %+v", c)
	}
	for name, bad := range map[string]Config{
		"no store":           {Verifier: d},
		"no presence":        {Store: Store{Locks: th.store.Locks, Feed: th.store.Locks, Instances: th.store.Instances, Console: th.store.Console}, Verifier: d},
		"no verifier":        {Store: StoreOf(th.store)},
		"negative grace":     {Store: StoreOf(th.store), Verifier: d, ReleaseGrace: -1},
		"leeway over 5s":     {Store: StoreOf(th.store), Verifier: d, TokenLeeway: 6 * time.Second},
		"negative queue":     {Store: StoreOf(th.store), Verifier: d, SendQueue: -1},
		"bad origin pattern": {Store: StoreOf(th.store), Verifier: d, AllowedOrigins: []string{"ftp://x"}},
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	h, err := New(Config{Store: StoreOf(th.store), Verifier: d})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Shutdown(ctx); err != nil { // nothing to wait for
		t.Fatal(err)
	}
}
