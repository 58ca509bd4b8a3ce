package locks

import (
	"slices"
	"testing"
	"time"
)

// testReap drives the reap of dead instances by the store's clock: a stale record is
// taken once and marked; its holdings are due only once the grace has ended, then to
// one taker per turn, and to the next one when a turn ends unfinished; FinishReap
// forgets it, holdings and all. An instance whose record is back before its holdings
// are due (it lived) is dropped from the reaped, not detached.
func testReap(t *testing.T, b backend) {
	c := b.client(t)
	clk := newClock()
	s, _ := newStore(t, c, Config{Now: clk.Now})
	ctx := ctxT(t)
	const timeout, grace, turn = time.Second, 2 * time.Second, 3 * time.Second
	h := Holding{Ref: Ref{"acme", "ApprovalRequest", "r-1"}, Holder: "u-ada", Conn: "c-1"}
	for _, id := range []string{"i-dead", "i-back"} {
		if _, err := s.Heartbeat(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := s.UpdateHoldings(ctx, id, []Holding{h}, nil); err != nil {
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
	if got := ids(s.Reap(ctx, timeout, grace)); len(got) != 0 {
		t.Fatalf("fresh records reaped: %v", got)
	}
	clk.advance(timeout + time.Millisecond)
	if got := ids(s.Reap(ctx, timeout, grace)); !slices.Equal(got, []string{"i-back", "i-dead"}) {
		t.Fatalf("Reap = %v, want both stale records", got)
	}
	if got := ids(s.Reap(ctx, timeout, grace)); len(got) != 0 {
		t.Fatalf("a record taken twice: %v", got)
	}
	// i-back lives: its next heartbeat finds its record gone.
	if l, err := s.Heartbeat(ctx, "i-back"); err != nil || !l.RecordMissing || l.HoldingsMissing {
		t.Fatalf("Heartbeat of a reaped instance = %+v, %v; want its record missing, its holdings kept", l, err)
	}
	if got := ids(s.DueReaped(ctx, turn)); len(got) != 0 {
		t.Fatalf("due within the grace: %v", got)
	}
	clk.advance(grace)
	due, err := s.DueReaped(ctx, turn)
	if got := ids(due, err); !slices.Equal(got, []string{"i-dead"}) {
		t.Fatalf("DueReaped after the grace = %v, want i-dead alone (i-back lives)", got)
	}
	if !slices.Equal(due[0].Holdings, []Holding{h}) {
		t.Fatalf("holdings %+v, want %+v", due[0].Holdings, h)
	}
	if got := ids(s.DueReaped(ctx, turn)); len(got) != 0 {
		t.Fatalf("taken again within its turn: %v", got)
	}
	clk.advance(turn)
	if got := ids(s.DueReaped(ctx, turn)); !slices.Equal(got, []string{"i-dead"}) {
		t.Fatalf("after an unfinished turn DueReaped = %v, want i-dead again", got)
	}
	if err := s.FinishReap(ctx, "i-dead"); err != nil {
		t.Fatal(err)
	}
	clk.advance(10 * turn)
	if got := ids(s.DueReaped(ctx, turn)); len(got) != 0 {
		t.Fatalf("a finished reap is due again: %v", got)
	}
	if n := c.Exists(ctx, heldKey("i-dead")).Val(); n != 0 {
		t.Fatal("a finished reap left the dead instance's holdings")
	}
	if l, err := s.Heartbeat(ctx, "i-dead"); err != nil || !l.RecordMissing || !l.HoldingsMissing {
		t.Fatalf("Heartbeat after a finished reap = %+v, %v; want the record and the holdings missing", l, err)
	}
	if n := c.SCard(ctx, heldKey("i-back")).Val(); n != 1 {
		t.Fatalf("the live instance's holdings = %d, want 1", n)
	}
}
