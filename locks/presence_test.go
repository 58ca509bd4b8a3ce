package locks

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// clock is a clock the test moves: the stores' (Config.Now), and the server's as the
// stores it drives read it (Store.shift; presence entries run out by the server's
// clock), so expiry is driven, not waited for.
type clock struct {
	*redistest.Clock
	stores []*Store
}

func newClock() *clock { return &clock{Clock: redistest.NewClock()} }

// drive makes advance move the server's clock for ss too. Before ss is used.
func (c *clock) drive(ss ...*Store) { c.stores = append(c.stores, ss...) }

func (c *clock) advance(d time.Duration) {
	c.Advance(d)
	for _, s := range c.stores {
		s.core.shift += d
	}
}
func (c *clock) view(h protocol.Holder, conn string) View {
	return View{Conn: conn, Viewer: protocol.Viewer{OID: h.OID, Name: h.Name, Since: protocol.NewTime(c.Now())}}
}

// oids lists the viewers' oids in order.
func oids(vs Viewers) string {
	var out []string
	for _, v := range vs.List {
		out = append(out, v.OID)
	}
	return strings.Join(out, " ")
}

// announced returns the viewers of each presence change the recorder received for ref,
// in order, as oids.
func (r *recorder) announced(t *testing.T, ref Ref) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	var last int64
	for _, p := range r.presence {
		if p.Ref != ref {
			continue
		}
		f, err := protocol.DecodeServerFrame(p.Frame)
		if err != nil || f.Presence == nil {
			t.Fatalf("presence message %s does not decode as a presence frame: %v", p.Frame, err)
		}
		if f.Presence.ID != "" || f.Presence.HasID || f.Presence.EntityType != ref.Type || f.Presence.EntityUID != ref.UID {
			t.Fatalf("presence message %s: want no id and entity %s/%s", p.Frame, ref.Type, ref.UID)
		}
		out = append(out, oids(Viewers{List: f.Presence.Viewers}))
		if p.Version <= last {
			t.Errorf("presence %s announced with version %d, not after %d", p.Frame, p.Version, last)
		}
		last = p.Version
	}
	return out
}

// testPresence: views of two stores (two instances) on one entity make one list of
// people, ordered by since, two tabs counting once; every change of the people, and
// only a change, is announced once on the feed; views that run out are dropped; a view
// Redis lost is reported missing; presence never crosses tenants.
func testPresence(t *testing.T, b backend) {
	clk := newClock()
	a, _ := newStore(t, b.client(t), Config{Now: clk.Now})
	s, _ := newStore(t, b.client(t), Config{Now: clk.Now})
	clk.drive(a, s)
	ctx := ctxT(t)
	tenant := "presence-" + strings.ReplaceAll(b.name, "/", "-")
	rec := runFeed(t, s, a, tenant, tenant+"-b")
	ref := Ref{tenant, "ApprovalRequest", "r-1001"}
	const ttl = 30 * time.Second

	view := func(st *Store, v View, want string) {
		t.Helper()
		got, err := st.Presence.View(ctx, ref, v, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if oids(got) != want {
			t.Fatalf("view by %s answered viewers %q, want %q", v.Conn, oids(got), want)
		}
	}
	adaTab1 := clk.view(ada, "c-ada-1")
	view(a, adaTab1, "u-ada")
	clk.advance(time.Second)
	view(s, clk.view(grace, "c-grace"), "u-ada u-grace")
	clk.advance(time.Second)
	view(s, clk.view(ada, "c-ada-2"), "u-ada u-grace") // a second tab, on the other instance
	view(a, adaTab1, "u-ada u-grace")                  // viewing again changes nothing

	// Another tenant's entity of the same type and uid has viewers of its own.
	other := Ref{tenant + "-b", ref.Type, ref.UID} // its feed probed by runFeed
	if got, err := a.Presence.View(ctx, other, clk.view(margot, "c-margot"), ttl); err != nil || oids(got) != "u-margaret" {
		t.Fatalf("a view in another tenant answered %q, %v; want only its own viewer", oids(got), err)
	}

	// Ada's first tab goes: her second keeps her there, since its own since now.
	if err := a.Presence.Unview(ctx, ref, "c-ada-1"); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Presence.RefreshViews(ctx, ref, ttl)
	if err != nil || oids(got) != "u-grace u-ada" {
		t.Fatalf("after Ada's first tab left, viewers %q (%v), want Grace then Ada (her second tab came later)", oids(got), err)
	}
	if got.List[1].Since.UnixMilli() != adaTab1.Viewer.Since.UnixMilli()+2000 {
		t.Errorf("Ada's since is %v, want her second tab's", got.List[1].Since)
	}

	// A refresh keeps the views it names and reports one Redis no longer has.
	clk.advance(20 * time.Second)
	_, missing, _ := s.Presence.RefreshViews(ctx, ref, ttl, "c-grace", "c-lost")
	if !slices.Equal(missing, []string{"c-lost"}) {
		t.Fatalf("refresh reported missing %q, want only c-lost", missing)
	}
	// Ada's second tab was not refreshed: it runs out 30 s after its view; Grace's stays.
	clk.advance(15 * time.Second)
	if got, _, _ := a.Presence.RefreshViews(ctx, ref, ttl); oids(got) != "u-grace" {
		t.Fatalf("after Ada's view ran out, viewers %q, want Grace only", oids(got))
	}
	// Leaving (a shutting-down instance) ends the view later, not now.
	if err := s.Presence.LeaveViews(ctx, ref, clk.Now().Add(5*time.Second), "c-grace"); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := a.Presence.RefreshViews(ctx, ref, ttl); oids(got) != "u-grace" {
		t.Fatalf("right after leaving, viewers %q, want Grace still", oids(got))
	}
	clk.advance(6 * time.Second)
	if got, _, _ := a.Presence.RefreshViews(ctx, ref, ttl); len(got.List) != 0 {
		t.Fatalf("after the leave time, viewers %q, want none", oids(got))
	}
	if n := must1(b.client(t).Exists(ctx, ViewsKey(ref), ViewersKey(ref)).Result()); n != 0 {
		t.Errorf("%d presence keys left for an entity nobody views", n)
	}

	want := []string{"u-ada", "u-ada u-grace", "u-grace u-ada", "u-grace", ""}
	// On a cluster the two tenants may live on two masters, each feed on a connection of
	// its own: wait for both.
	redistest.Eventually(t, "every change of the viewers announced once, in order", func() bool {
		return len(rec.announced(t, ref)) >= len(want) && len(rec.announced(t, other)) >= 1
	})
	if got := rec.announced(t, ref); !slices.Equal(got, want) {
		t.Errorf("announced viewers %q, want %q", got, want)
	}
	// The other tenant's change is its own: the feed names its tenant, and only its
	// viewer, never one of the first tenant's (nor they hers, above).
	if got := rec.announced(t, other); !slices.Equal(got, []string{"u-margaret"}) {
		t.Errorf("announced for the other tenant %q, want only its own viewer", got)
	}
}

// testNudge: a nudge reaches the holder named in the feed, at most once per person per
// entity per interval; a free entity, or one the caller holds, has nobody to nudge.
func testNudge(t *testing.T, b backend) {
	a, _ := newStore(t, b.client(t), Config{})
	s, _ := newStore(t, b.client(t), Config{})
	ctx := ctxT(t)
	tenant := "nudge-" + b.name
	rec := runFeed(t, s, a, tenant)
	ref := Ref{tenant, "ApprovalRequest", "r-1002"}
	const every = time.Minute

	nudge := func(from protocol.Holder, want protocol.Outcome) {
		t.Helper()
		got, err := a.Presence.Nudge(ctx, ref, from, every)
		if err != nil || got != want {
			t.Fatalf("%s's nudge answered %q, %v; want %q", from.OID, got, err, want)
		}
	}
	nudge(grace, protocol.OutcomeNotHeld) // free
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, ref, ada, "c-ada"))
	nudge(ada, protocol.OutcomeNotHeld) // her own
	nudge(grace, protocol.OutcomeNudged)
	_, err := s.Presence.Nudge(ctx, ref, grace, every) // again, through the other instance
	var soon *TooSoonError
	if !errors.As(err, &soon) || soon.Wait <= 0 || soon.Wait > every {
		t.Fatalf("a second nudge answered %v, want a TooSoonError with the wait left", err)
	}
	if pe := errorCode(err); pe != protocol.CodeRateLimited {
		t.Errorf("a second nudge's error code is %q, want rate_limited", pe)
	}
	nudge(margot, protocol.OutcomeNudged) // another person has a nudge of her own

	redistest.Eventually(t, "both nudges reach the feed", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.nudges) >= 2
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.nudges) != 2 {
		t.Fatalf("the feed carried %d nudges, want 2", len(rec.nudges))
	}
	for i, from := range []protocol.Holder{grace, margot} {
		n := rec.nudges[i]
		if n.Ref != ref || n.To != ada.OID || n.Nudge.From != from || n.Nudge.EntityUID != ref.UID || n.Nudge.At.IsZero() {
			t.Errorf("nudge %d is %+v, want from %s to u-ada about %s", i, n, from.OID, ref)
		}
		// The frame sent to the holder is the contract's, without the feed's "to".
		b, _ := json.Marshal(n.Nudge)
		if strings.Contains(string(b), `"to"`) || !strings.HasPrefix(string(b), `{"type":"nudge",`) {
			t.Errorf("nudge frame %s", b)
		}
	}
}

func errorCode(err error) protocol.ErrorCode {
	var ce protocol.ClientError
	if errors.As(err, &ce) {
		return ce.ErrorCode()
	}
	return ""
}

// TestPresenceBadInput: what no view could be is refused before Redis is asked.
func TestPresenceBadInput(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	s, _ := newStore(t, c, Config{})
	ctx := ctxT(t)
	v := View{Conn: "c-1", Viewer: protocol.Viewer{OID: ada.OID, Name: ada.Name}}
	for _, tc := range []struct {
		name string
		ref  Ref
		v    View
		want error
	}{
		{"unknown type", Ref{"acme", "Invoice", "r-1"}, v, ErrNotLockable},
		{"hostile uid", Ref{"acme", "ApprovalRequest", "r}{1"}, v, ErrInvalidEntity},
		{"hostile tenant", Ref{"ac{me", "ApprovalRequest", "r-1"}, v, ErrInvalidEntity},
		{"bad oid", Ref{"acme", "ApprovalRequest", "r-1"}, View{Conn: "c-1", Viewer: protocol.Viewer{OID: "u ada"}}, ErrInvalidEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Presence.View(ctx, tc.ref, tc.v, time.Minute); !errors.Is(err, tc.want) {
				t.Errorf("View: %v, want %v", err, tc.want)
			}
			if _, err := s.Presence.Nudge(ctx, tc.ref, protocol.Holder{OID: tc.v.Viewer.OID}, time.Minute); !errors.Is(err, tc.want) {
				t.Errorf("Nudge: %v, want %v", err, tc.want)
			}
		})
	}
}

// testPresenceOddData: a leave never extends a view, and one presence key lost without
// the other (evicted, restored alone) neither breaks the script nor leaves a ghost.
func testPresenceOddData(t *testing.T, b backend) {
	clk := newClock()
	c := b.client(t)
	s, _ := newStore(t, c, Config{Now: clk.Now})
	clk.drive(s)
	ctx := ctxT(t)
	ref := Ref{"odd-" + b.name, "ApprovalRequest", "r-1"}

	if _, err := s.Presence.View(ctx, ref, clk.view(ada, "c-ada"), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Presence.LeaveViews(ctx, ref, clk.Now().Add(time.Minute), "c-ada"); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Second)
	if got, _, err := s.Presence.RefreshViews(ctx, ref, time.Minute); err != nil || len(got.List) != 0 {
		t.Fatalf("a view that ran out before its leave time is still there: %q (%v)", oids(got), err)
	}

	// The sorted set of views goes, the hash of who they are stays.
	for _, v := range []View{clk.view(ada, "c-ada"), clk.view(grace, "c-grace")} {
		if _, err := s.Presence.View(ctx, ref, v, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Del(ctx, ViewsKey(ref)).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Presence.View(ctx, ref, clk.view(margot, "c-margot"), time.Minute)
	if err != nil || oids(got) != "u-margaret" || got.Version == 0 {
		t.Fatalf("a view after the views key went answered %q (version %d), %v; want Margaret alone", oids(got), got.Version, err)
	}
	if n := must1(c.HLen(ctx, ViewersKey(ref)).Result()); n != 3 { // Margaret, "viewers", "version"
		t.Errorf("the viewers hash holds %d fields, want Margaret's and the two of the list", n)
	}
	// And the other way round: the hash goes, the views stay; nobody is listed, and the
	// views are dropped, for their hubs to find missing and make again.
	if err := c.Del(ctx, ViewersKey(ref)).Err(); err != nil {
		t.Fatal(err)
	}
	got, missing, err := s.Presence.RefreshViews(ctx, ref, time.Minute, "c-margot")
	if err != nil || len(got.List) != 0 || len(missing) != 0 {
		t.Fatalf("a refresh after the viewers key went answered %q, missing %q, %v", oids(got), missing, err)
	}
	if _, missing, _ = s.Presence.RefreshViews(ctx, ref, time.Minute, "c-margot"); !slices.Equal(missing, []string{"c-margot"}) {
		t.Errorf("the next refresh reported missing %q, want c-margot, to be viewed again", missing)
	}
}
