package locks

import (
	"slices"
	"testing"
	"time"

	"github.com/lockhub/lockhub/protocol"
)

// testReap drives the reap of dead instances by the server's clock, shifted (Store.shift):
// a stale record is
// taken once and marked; its holdings are due only once the grace has ended, then to
// one taker per turn, and to the next one when a turn ends unfinished; FinishReap
// forgets it, holdings and all. An instance whose record is back before its holdings
// are due (it lived) is dropped from the reaped, not detached.
func testReap(t *testing.T, b backend) {
	c := b.client(t)
	s, _ := newStore(t, c, Config{})
	advance := func(d time.Duration) { s.core.shift += d }
	ctx := ctxT(t)
	const timeout, grace, turn = time.Second, 2 * time.Second, 3 * time.Second
	h := Holding{Ref: Ref{"acme", "ApprovalRequest", "r-1"}, Holder: "u-ada", Conn: "c-1"}
	for _, id := range []string{"i-dead", "i-back"} {
		if _, err := s.Instances.Heartbeat(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := s.Instances.UpdateHoldings(ctx, id, []Holding{h}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ds []DeadInstance, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		slices.Sort(out)
		return out
	}
	if got := ids(s.Instances.Reap(ctx, timeout, grace)); len(got) != 0 {
		t.Fatalf("fresh records reaped: %v", got)
	}
	advance(timeout + time.Millisecond)
	reaped, err := s.Instances.Reap(ctx, timeout, grace)
	if got := ids(reaped, err); !slices.Equal(got, []string{"i-back", "i-dead"}) {
		t.Fatalf("Reap = %v, want both stale records", got)
	}
	for _, d := range reaped {
		if !slices.Equal(d.Holdings, []Holding{h}) {
			t.Fatalf("Reap gave %s's holdings as %+v, want %+v", d.ID, d.Holdings, h)
		}
	}
	if got := ids(s.Instances.Reap(ctx, timeout, grace)); len(got) != 0 {
		t.Fatalf("a record taken twice: %v", got)
	}
	if alive, err := s.Instances.Alive(ctx, "i-back"); err != nil || alive {
		t.Fatalf("Alive of a reaped instance = %v, %v; want false", alive, err)
	}
	// i-back lives: its next heartbeat finds its record gone.
	if l, err := s.Instances.Heartbeat(ctx, "i-back"); err != nil || !l.RecordMissing || l.HoldingsMissing {
		t.Fatalf("Heartbeat of a reaped instance = %+v, %v; want its record missing, its holdings kept", l, err)
	}
	if alive, err := s.Instances.Alive(ctx, "i-back"); err != nil || !alive {
		t.Fatalf("Alive after its heartbeat = %v, %v; want true", alive, err)
	}
	if got := ids(s.Instances.DueReaped(ctx, turn)); len(got) != 0 {
		t.Fatalf("due within the grace: %v", got)
	}
	advance(grace)
	due, err := s.Instances.DueReaped(ctx, turn)
	if got := ids(due, err); !slices.Equal(got, []string{"i-dead"}) {
		t.Fatalf("DueReaped after the grace = %v, want i-dead alone (i-back lives)", got)
	}
	if !slices.Equal(due[0].Holdings, []Holding{h}) {
		t.Fatalf("holdings %+v, want %+v", due[0].Holdings, h)
	}
	if got := ids(s.Instances.DueReaped(ctx, turn)); len(got) != 0 {
		t.Fatalf("taken again within its turn: %v", got)
	}
	advance(turn)
	if got := ids(s.Instances.DueReaped(ctx, turn)); !slices.Equal(got, []string{"i-dead"}) {
		t.Fatalf("after an unfinished turn DueReaped = %v, want i-dead again", got)
	}
	if err := s.Instances.FinishReap(ctx, "i-dead"); err != nil {
		t.Fatal(err)
	}
	advance(10 * turn)
	if got := ids(s.Instances.DueReaped(ctx, turn)); len(got) != 0 {
		t.Fatalf("a finished reap is due again: %v", got)
	}
	if n := c.Exists(ctx, heldKey("i-dead")).Val(); n != 0 {
		t.Fatal("a finished reap left the dead instance's holdings")
	}
	if l, err := s.Instances.Heartbeat(ctx, "i-dead"); err != nil || !l.RecordMissing || !l.HoldingsMissing {
		t.Fatalf("Heartbeat after a finished reap = %+v, %v; want the record and the holdings missing", l, err)
	}
	if n := c.SCard(ctx, heldKey("i-back")).Val(); n != 1 {
		t.Fatalf("the live instance's holdings = %d, want 1", n)
	}
}

// testForget: a dead socket is dropped from a lock's sockets where another socket is
// left, and kept where it is the last (for the detach after the grace); Forget changes
// nothing else: the lock, its events, a socket that is not there.
func testForget(t *testing.T, b backend) {
	c := b.client(t)
	s, _ := newStore(t, c, Config{})
	ctx := ctxT(t)
	two := Ref{"acme", "ApprovalRequest", "r-forget-1"} // the dead tab and a live one
	one := Ref{"acme", "ApprovalRequest", "r-forget-2"} // the dead tab alone
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, two, ada, "c-dead"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, two, ada, "c-live"))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, one, ada, "c-dead"))
	// The dead instance was last seen an hour ago: nothing let go of these since
	// (no socket released one while another kept it).
	seen := time.Now().Add(-time.Hour)
	forget := func(r Ref, conn string, want Forgotten) {
		t.Helper()
		if got, err := s.Instances.Forget(ctx, Holding{Ref: r, Holder: ada.OID, Conn: conn}, seen); err != nil || got != want {
			t.Fatalf("Forget(%s, %s) = %v, %v; want %v", r.UID, conn, got, err, want)
		}
	}
	forget(two, "c-dead", ForgetDropped)
	forget(two, "c-dead", ForgetKept) // not there any more
	forget(one, "c-dead", ForgetKept) // the last
	forget(two, "c-live", ForgetKept) // the last now
	if got := c.SMembers(ctx, ConnsKey(two)).Val(); !slices.Equal(got, []string{"c-live"}) {
		t.Fatalf("sockets of %s: %v, want c-live alone", two.UID, got)
	}
	if got := c.SMembers(ctx, ConnsKey(one)).Val(); !slices.Equal(got, []string{"c-dead"}) {
		t.Fatalf("sockets of %s: %v, want c-dead kept", one.UID, got)
	}
	// An instance taken for dead that lived puts its socket back, once, while the
	// lock is its holder's; the sockets then live as long as the lease.
	reattach := func(r Ref, oid, conn string, want bool) {
		t.Helper()
		if got, err := s.Instances.Reattach(ctx, Holding{Ref: r, Holder: oid, Conn: conn}); err != nil || got != want {
			t.Fatalf("Reattach(%s, %s, %s) = %v, %v; want %v", r.UID, oid, conn, got, err, want)
		}
	}
	reattach(two, ada.OID, "c-dead", true)
	reattach(two, ada.OID, "c-dead", false)    // there already
	reattach(two, grace.OID, "c-grace", false) // not Grace's lock
	reattach(Ref{"acme", "ApprovalRequest", "r-forget-none"}, ada.OID, "c-dead", false)
	if got := c.SCard(ctx, ConnsKey(two)).Val(); got != 2 {
		t.Fatalf("sockets of %s after Reattach: %d, want 2", two.UID, got)
	}
	if set, lock := c.PTTL(ctx, ConnsKey(two)).Val(), c.PTTL(ctx, LockKey(two)).Val(); set <= 0 || set > lock+time.Second {
		t.Fatalf("sockets of %s expire in %v, the lock in %v: want about the lease", two.UID, set, lock)
	}
	forget(two, "c-dead", ForgetDropped)
	// The live tab's release is now the last: the lock goes.
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, two, ada, "c-live"))
	if n := c.Exists(ctx, LockKey(two)).Val(); n != 0 {
		t.Fatalf("%s kept after its last live socket released it", two.UID)
	}
	if l, err := s.Locks.Get(ctx, one); err != nil || l == nil || l.HolderOID != ada.OID {
		t.Fatalf("%s after Forget: %+v, %v; want Ada's lock untouched", one.UID, l, err)
	}
	// A release that left the lock to a dead socket alone, made after its instance was
	// last seen, takes effect when the death is found: Forget says to detach it now.
	// One made before the instance's last heartbeat (the socket lived after it) waits
	// the grace, as a socket that closed does.
	pend := Ref{"acme", "ApprovalRequest", "r-forget-3"}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, pend, ada, "c-dead"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, pend, ada, "c-live"))
	if res, err := s.Locks.Release(ctx, pend, ada, "c-live"); err != nil || res.Outcome != protocol.OutcomeReleased || !res.Kept {
		t.Fatalf("release from the live tab = %+v, %v; want released, kept by the other", res, err)
	}
	if set, note := c.PTTL(ctx, ConnsKey(pend)).Val(), c.PTTL(ctx, leftKey(pend)).Val(); note <= 0 || note > set {
		t.Fatalf("the release noted for %v, the sockets live %v: want the note to go with them", note, set)
	}
	forget = func(r Ref, conn string, want Forgotten) {
		t.Helper()
		if got, err := s.Instances.Forget(ctx, Holding{Ref: r, Holder: ada.OID, Conn: conn}, seen); err != nil || got != want {
			t.Fatalf("Forget(%s, %s, seen %v) = %v, %v; want %v", r.UID, conn, seen, got, err, want)
		}
	}
	seen = time.Now().Add(time.Hour) // a heartbeat after the release
	forget(pend, "c-dead", ForgetKept)
	seen = time.Now().Add(-time.Hour)
	forget(pend, "c-dead", ForgetNow)
	forget(pend, "c-live", ForgetKept) // not there
	expect(t, protocol.OutcomeReleased)(s.Locks.Detach(ctx, pend, ada, "c-dead", true))
	if n := c.Exists(ctx, LockKey(pend), leftKey(pend)).Val(); n != 0 {
		t.Fatalf("%d of the lock and its note left after the last socket's detach", n)
	}
	// So does a live tab that closed, its grace over: its detach leaves the lock to the
	// dead socket alone. A detach without release (a shutdown) notes nothing.
	closed := Ref{"acme", "ApprovalRequest", "r-forget-4"}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, closed, ada, "c-dead"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, closed, ada, "c-live"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, closed, ada, "c-moved"))
	expect(t, protocol.OutcomeNotHeld)(s.Locks.Detach(ctx, closed, ada, "c-moved", false))
	if n := c.Exists(ctx, leftKey(closed)).Val(); n != 0 {
		t.Fatal("a detach without release noted a release")
	}
	expect(t, protocol.OutcomeNotHeld)(s.Locks.Detach(ctx, closed, ada, "c-live", true)) // kept by c-dead
	forget(closed, "c-dead", ForgetNow)
	if _, err := s.Instances.Forget(ctx, Holding{Ref: Ref{"acme", "ApprovalRequest", "bad uid"}, Conn: "c-dead"}, seen); err == nil {
		t.Fatal("Forget took an invalid ref")
	}
}

// testSkewedClocks: liveness and presence are judged by the Redis server's clock, not
// the instances': an instance whose clock runs an hour ahead takes no live instance for
// dead, and one whose clock runs an hour behind is not taken for dead; a view made
// through either runs out when its time to live has passed on the server, and one
// does not drop the other's views.
func testSkewedClocks(t *testing.T, b backend) {
	c := b.client(t)
	ahead, _ := newStore(t, c, Config{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	behind, _ := newStore(t, c, Config{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	ctx := ctxT(t)
	for _, s := range []*Store{ahead, behind} {
		if _, err := s.Instances.Heartbeat(ctx, "i-skewed"); err != nil {
			t.Fatal(err)
		}
		for _, r := range []*Store{ahead, behind} {
			if dead, err := r.Instances.Reap(ctx, time.Minute, time.Second); err != nil || len(dead) != 0 {
				t.Fatalf("Reap by a skewed clock = %+v, %v; want no live instance taken", dead, err)
			}
		}
	}

	ref := Ref{"skew-" + b.name, "ApprovalRequest", "r-1"}
	viewers := func(s *Store, want string) {
		t.Helper()
		got, _, err := s.Presence.RefreshViews(ctx, ref, time.Minute)
		if err != nil || oids(got) != want {
			t.Fatalf("viewers %q (%v), want %q", oids(got), err, want)
		}
	}
	for _, v := range []struct {
		s    *Store
		who  protocol.Holder
		conn string
	}{{ahead, ada, "c-ada"}, {behind, grace, "c-grace"}} {
		if _, err := v.s.Presence.View(ctx, ref, View{Conn: v.conn, Viewer: protocol.Viewer{OID: v.who.OID, Name: v.who.Name, Since: protocol.NewTime(time.Now())}}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	viewers(ahead, "u-ada u-grace")
	viewers(behind, "u-ada u-grace")
	for _, s := range []*Store{ahead, behind} {
		s.core.shift = 2 * time.Minute // both views ran out on the server
	}
	viewers(ahead, "")
}
