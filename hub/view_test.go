package hub

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

var (
	adaH     = protocol.Holder{OID: "u-ada", Name: "Ada Lovelace"}
	graceH   = protocol.Holder{OID: "u-grace", Name: "Grace Hopper"}
	edsgerH  = protocol.Holder{OID: "u-edsger", Name: "Edsger Dijkstra"}
	margretH = protocol.Holder{OID: "u-margaret", Name: "Margaret Hamilton"}
	linusH   = protocol.Holder{OID: "u-linus", Name: "Linus Torvalds"}
)

// viewerList is a presence's viewers as "oid oid ...", in order.
func viewerList(p protocol.Presence) string {
	var out []string
	for _, v := range p.Viewers {
		out = append(out, v.OID)
	}
	return strings.Join(out, " ")
}

// nextFrame waits for the next frame of c that answers no call (an unsolicited one).
func nextFrame(t testing.TB, c *protocol.Client) protocol.ServerFrame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	f, err := c.NextFrame(ctx)
	if err != nil {
		t.Fatalf("no frame in time: %v", err)
	}
	return f
}

// wantPresence waits for the next unsolicited frame of c and checks that it is the
// presence of uid with the viewers want ("oid oid", in order).
func wantPresence(t testing.TB, c *protocol.Client, uid, want string) protocol.Presence {
	t.Helper()
	f := nextFrame(t, c)
	if f.Presence == nil || f.ID != "" || f.HasID || f.Presence.EntityType != typ || f.Presence.EntityUID != uid {
		t.Fatalf("got %s, want an unsolicited presence of %s", f.Raw, uid)
	}
	if got := viewerList(*f.Presence); got != want {
		t.Fatalf("presence of %s lists %q, want %q (%s)", uid, got, want, f.Raw)
	}
	return *f.Presence
}

// wantNudge waits for the next unsolicited frame of c and checks that it is a nudge
// about uid from from.
func wantNudge(t testing.TB, c *protocol.Client, uid string, from protocol.Holder) {
	t.Helper()
	f := nextFrame(t, c)
	if f.Nudge == nil || f.Nudge.EntityUID != uid || f.Nudge.EntityType != typ || f.Nudge.From != from || f.Nudge.At.IsZero() {
		t.Fatalf("got %s, want a nudge about %s from %s", f.Raw, uid, from.OID)
	}
	if strings.Contains(string(f.Raw), `"to"`) {
		t.Errorf("the nudge frame carries the feed's \"to\": %s", f.Raw)
	}
}

// noFrame checks that c has no unsolicited frame queued. Call it after a barrier: the
// client routes frames in order, so one sent before the barrier's answer is queued.
func noFrame(t testing.TB, c *protocol.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if f, err := c.NextFrame(ctx); err == nil {
		t.Fatalf("unexpected frame %s", f.Raw)
	}
}

// view views uid and checks the answer's viewers.
func view(t testing.TB, c *protocol.Client, uid, want string) protocol.Presence {
	t.Helper()
	p, err := c.View(tctx(t), typ, uid)
	if err != nil {
		t.Fatalf("view %s: %v", uid, err)
	}
	if p.ID == "" || p.EntityUID != uid || viewerList(p) != want {
		t.Fatalf("view %s answered %+v, want the viewers %q and the request's id", uid, p, want)
	}
	return p
}

// TestPresence: people viewing one entity through two instances see each other, on a
// real redis-server and a real cluster (PROTOCOL.md §9): one entry per person, ordered
// by since, every change sent to every viewer on both instances and to nobody else
// (not grids, not another tenant); nudges reach only the holder's viewing sockets, at
// most one per person per entity per interval; a socket that closes stops viewing
// after the grace.
func TestPresence(t *testing.T) { onRealRedis(t, testPresence) }

func testPresence(t *testing.T, ca, cb redis.UniversalClient) {
	a := startHub(t, ca, hubOptions{})
	b := startHub(t, cb, hubOptions{dev: a.dev})
	a.waitFeed("acme", "globex")
	b.waitFeed("acme", "globex")
	ctx := tctx(t)
	const uid = "r-1"

	grid := a.dialAs("acme", margretH) // watches the type, views nothing
	if _, err := grid.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	adaA := a.dialAs("acme", adaH)
	view(t, adaA, uid, "u-ada") // her own change: answered, and not sent again

	graceB := b.dialAs("acme", graceH)
	start := time.Now()
	view(t, graceB, uid, "u-ada u-grace")
	wantPresence(t, adaA, uid, "u-ada u-grace")
	t.Logf("a view on one instance reached a viewer on the other in %v", time.Since(start))

	// Ada's second tab, on the other instance: she is there already, nothing changes.
	adaB := b.dialAs("acme", adaH)
	p := view(t, adaB, uid, "u-ada u-grace")
	if p.Viewers[0].Since.After(time.Now()) || !p.Viewers[0].Since.Before(p.Viewers[1].Since.Time) {
		t.Errorf("Ada's since %v is not her first tab's, before Grace's %v", p.Viewers[0].Since, p.Viewers[1].Since)
	}
	// Another tenant's entity of the same uid is another entity.
	linus := b.dialAs("globex", linusH)
	view(t, linus, uid, "u-linus")

	// The next change everyone sees is Edsger's: the second tab and the other tenant
	// announced nothing to them.
	edsgerA := a.dialAs("acme", edsgerH)
	view(t, edsgerA, uid, "u-ada u-grace u-edsger")
	for _, c := range []*protocol.Client{adaA, graceB, adaB} {
		wantPresence(t, c, uid, "u-ada u-grace u-edsger")
	}

	// Nudges: only a viewer may, only while someone else holds the lock; they reach the
	// holder's viewing sockets on both instances, once per person per interval.
	nudge := func(c *protocol.Client, want protocol.Outcome) {
		t.Helper()
		expect(t, want)(c.Nudge(ctx, typ, uid))
	}
	nudge(graceB, protocol.OutcomeNotHeld) // free
	expect(t, protocol.OutcomeAcquired)(adaA.Claim(ctx, typ, uid))
	// The claim changes the viewers (version 3, §9): Ada is editing now.
	for _, c := range []*protocol.Client{adaA, graceB, adaB, edsgerA} {
		if p := wantPresence(t, c, uid, "u-ada u-grace u-edsger"); p.Viewers[0].State != protocol.StateEditing {
			t.Fatalf("after Ada's claim her state is %q, want editing", p.Viewers[0].State)
		}
	}
	nudge(adaA, protocol.OutcomeNotHeld) // her own
	nudge(graceB, protocol.OutcomeNudged)
	wantNudge(t, adaA, uid, graceH)
	wantNudge(t, adaB, uid, graceH)
	_, err := graceB.Nudge(ctx, typ, uid)
	wantCode(t, err, protocol.CodeRateLimited)
	margretB := b.dialAs("acme", margretH) // not viewing; a grid on the other instance
	if _, err := margretB.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	_, err = margretB.Nudge(ctx, typ, uid)
	wantCode(t, err, protocol.CodeForbidden)
	nudge(edsgerA, protocol.OutcomeNudged) // a person of his own: a nudge of his own
	wantNudge(t, adaA, uid, edsgerH)
	wantNudge(t, adaB, uid, edsgerH)

	// Edsger leaves; then Grace's socket closes: she goes after the grace, not before.
	expect(t, protocol.OutcomeUnviewed)(edsgerA.Unview(ctx, typ, uid))
	for _, c := range []*protocol.Client{adaA, graceB, adaB} {
		wantPresence(t, c, uid, "u-ada u-grace")
	}
	closed := time.Now()
	_ = graceB.Close() // the test's end is of no interest
	wantPresence(t, adaA, uid, "u-ada")
	if waited := time.Since(closed); waited < a.hub.cfg.ReleaseGrace {
		t.Errorf("Grace's view ended %v after her socket closed, before the %v grace", waited, a.hub.cfg.ReleaseGrace)
	}
	wantPresence(t, adaB, uid, "u-ada")

	// The grids on both instances heard none of it: a lock event published after it all,
	// on the same channel of the feed, reaches them with nothing before it.
	expect(t, protocol.OutcomeAcquired)(adaA.Claim(ctx, typ, "r-fence"))
	for name, c := range map[string]*protocol.Client{"grid": grid, "grid on the other instance": margretB} {
		for ev := nextEvent(t, c); ev.Lock.EntityUID != "r-fence"; ev = nextEvent(t, c) {
		}
		t.Run(name+" heard nothing", func(t *testing.T) { noFrame(t, c) })
	}
	// Nor Edsger once he left, nor the other tenant.
	for name, c := range map[string]*protocol.Client{"Edsger": edsgerA, "Linus": linus} {
		barrier(t, c)
		t.Run(name+" heard nothing", func(t *testing.T) { noFrame(t, c) })
	}
	for _, c := range []*protocol.Client{adaA, adaB} {
		barrier(t, c)
		noFrame(t, c)
	}
	if got := a.metric("lockhub_hub_nudges_total", "outcome=nudged") + b.metric("lockhub_hub_nudges_total", "outcome=nudged"); got != 2 {
		t.Errorf("nudged counted %v times, want 2", got)
	}
	if got := b.metric("lockhub_hub_nudges_total", "outcome=rate_limited"); got != 1 {
		t.Errorf("rate-limited nudges counted %v, want 1", got)
	}
	if got := a.metric("lockhub_hub_views") + b.metric("lockhub_hub_views"); got != 3 {
		t.Errorf("lockhub_hub_views = %v, want 3 (Ada's two tabs, Linus)", got)
	}
}

// TestViewBadInput: every bad view, unview or nudge gets its error and the socket
// stays (PROTOCOL.md §4, §9).
func TestViewBadInput(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	c := th.dialAs("acme", adaH)
	for _, tc := range []struct {
		name, frame string
		code        protocol.ErrorCode
	}{
		{"unknown type", `{"id":"1","type":"view","entityType":"Payroll","entityUid":"r-1"}`, protocol.CodeNotLockable},
		{"hostile uid", `{"id":"2","type":"view","entityType":"ApprovalRequest","entityUid":"r-1}{acme"}`, protocol.CodeInvalidEntity},
		{"uid too long", `{"id":"3","type":"view","entityType":"ApprovalRequest","entityUid":"` + strings.Repeat("x", 129) + `"}`, protocol.CodeInvalidEntity},
		{"missing uid", `{"id":"4","type":"view","entityType":"ApprovalRequest"}`, protocol.CodeBadRequest},
		{"uid not a string", `{"id":"5","type":"unview","entityType":"ApprovalRequest","entityUid":7}`, protocol.CodeBadRequest},
		{"nudge without viewing", `{"id":"6","type":"nudge","entityType":"ApprovalRequest","entityUid":"r-1"}`, protocol.CodeForbidden},
		{"nudge of an unknown type", `{"id":"7","type":"nudge","entityType":"Payroll","entityUid":"r-1"}`, protocol.CodeNotLockable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.SendRaw(ctx, 1, []byte(tc.frame)); err != nil {
				t.Fatal(err)
			}
			f := nextFrame(t, c)
			if f.Error == nil || f.Error.Code != tc.code || f.ID == "" {
				t.Fatalf("got %s, want an error %s echoing the id", f.Raw, tc.code)
			}
		})
	}
	// Fifty views, then too_many_views, writing nothing; unviewing one makes room.
	for i := range protocol.MaxViewsPerSocket {
		view(t, c, fmt.Sprintf("r-%d", i), "u-ada")
	}
	_, err := c.View(ctx, typ, "r-one-too-many")
	wantCode(t, err, protocol.CodeTooManyViews)
	if th.metric("lockhub_hub_limit_hits_total", "limit=max_views_per_socket") != 1 {
		t.Error("the views limit is not counted")
	}
	for _, k := range th.mr.Keys() {
		if strings.Contains(k, "r-one-too-many") {
			t.Errorf("a refused view wrote %s", k)
		}
	}
	view(t, c, "r-0", "u-ada") // viewing again what it views is no new view
	expect(t, protocol.OutcomeUnviewed)(c.Unview(ctx, typ, "r-0"))
	expect(t, protocol.OutcomeUnviewed)(c.Unview(ctx, typ, "r-0")) // not an error
	view(t, c, "r-one-too-many", "u-ada")
	barrier(t, c) // still served
}

// TestPresenceRedisRestart: with Redis down a view answers no viewers and nothing
// breaks (fail open, counted); when Redis comes back empty the viewers are announced
// again by their instances, and viewers get the list afresh.
func TestPresenceRedisRestart(t *testing.T) {
	srv := redistest.StartServer(t)
	o := srv.Options()
	o.MaxRetries = -1
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	th := startHub(t, rdb, hubOptions{
		store: func(c *locks.Config) { c.Timeout = 500 * time.Millisecond },
		hub:   func(c *Config) { c.ViewTTL = 3 * time.Second },
	})
	th.waitFeed("acme") // changes are announced on the feed: wait until it listens
	ctx := tctx(t)
	adaC := th.dialAs("acme", adaH)
	view(t, adaC, "r-1", "u-ada")
	graceC := th.dialAs("acme", graceH)
	view(t, graceC, "r-1", "u-ada u-grace")
	wantPresence(t, adaC, "r-1", "u-ada u-grace")

	srv.Kill(t)
	edsger := th.dialAs("acme", edsgerH)
	p, err := edsger.View(ctx, typ, "r-1")
	if err != nil || len(p.Viewers) != 0 {
		t.Fatalf("a view with Redis down answered %+v, %v; want no viewers", p, err)
	}
	if th.metric("lockhub_store_fail_open_total", "op=view") != 1 {
		t.Error("the view's fail-open is not counted")
	}
	expect(t, protocol.OutcomeUnknown)(graceC.Nudge(ctx, typ, "r-1"))

	srv.Restart(t) // empty
	// Each viewer gets the viewers afresh, all three of them (Edsger's view, made while
	// Redis was down, is made again too), once their instance has announced them again.
	for _, c := range []*protocol.Client{adaC, graceC, edsger} {
		redistest.Within(t, 10*time.Second, "the viewers announced again after the restart", func() error {
			f := nextFrame(t, c)
			if f.Presence == nil {
				return fmt.Errorf("got %s", f.Raw)
			}
			if got := viewerList(*f.Presence); got != "u-ada u-grace u-edsger" {
				return fmt.Errorf("viewers %q", got)
			}
			return nil
		})
	}
	if th.metric("lockhub_hub_views_restored_total") < 3 {
		t.Errorf("views restored: %v, want 3", th.metric("lockhub_hub_views_restored_total"))
	}
}

// TestPresenceOlderListDropped: a socket is never sent a list of an entity's viewers
// older than one it was sent: the feed's lists of one entity may reach a hub behind
// the answer to a view, or behind a resend after a resync.
func TestPresenceOlderListDropped(t *testing.T) {
	th := startMini(t, hubOptions{})
	c := th.dialAs("acme", adaH)
	p, err := th.store.Presence.View(tctx(t), locks.Ref{Tenant: "acme", Type: typ, UID: "r-seed"},
		locks.View{Conn: "c-other", Viewer: protocol.Viewer{OID: "u-grace", Name: "Grace Hopper"}}, time.Minute)
	if err != nil || p.Version == 0 {
		t.Fatalf("seeding a viewer: %+v, %v", p, err)
	}
	view(t, c, "r-seed", "u-grace u-ada")
	ref := locks.Ref{Tenant: "acme", Type: typ, UID: "r-seed"}
	frame := func(oid string) []byte {
		return []byte(`{"type":"presence","entityType":"` + typ + `","entityUid":"r-seed","viewers":[{"oid":"` + oid + `","name":"N","since":null}]}`)
	}
	// What the socket was answered has the version of its own view, the entity's
	// latest: anything older, or the same again, is dropped; a newer list goes through.
	now, _, err := th.store.Presence.RefreshViews(tctx(t), ref, time.Minute)
	if err != nil || now.Version <= p.Version {
		t.Fatalf("the viewers' version: %+v %v, want one after the seed's %d", now, err, p.Version)
	}
	answered := now.Version
	f := feed{th.hub}
	f.Presence(locks.PresenceChange{Ref: ref, Frame: frame("u-older"), Version: answered - 1})
	f.Presence(locks.PresenceChange{Ref: ref, Frame: frame("u-same"), Version: answered})
	f.Presence(locks.PresenceChange{Ref: ref, Frame: frame("u-newer"), Version: answered + 1})
	f.Presence(locks.PresenceChange{Ref: ref, Frame: frame("u-older-again"), Version: answered})
	wantPresence(t, c, "r-seed", "u-newer")
	barrier(t, c)
	noFrame(t, c)
}
