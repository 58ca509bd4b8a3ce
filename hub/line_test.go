package hub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestLine: the waiting line across two instances (PROTOCOL.md §9, §11) and claims of
// many over the socket (§12), on miniredis, a real redis-server and the 6-node cluster.
func TestLine(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		client := func() redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: mr.Addr(), DialTimeout: 2 * time.Second,
				ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, MaxRetries: -1})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		a := startHub(t, client(), hubOptions{})
		b := startHub(t, client(), hubOptions{dev: a.dev})
		testLineTwoInstances(t, a, b)
	})
	onRealRedis(t, func(t *testing.T, ca, cb redis.UniversalClient) {
		a := startHub(t, ca, hubOptions{})
		b := startHub(t, cb, hubOptions{dev: a.dev})
		testLineTwoInstances(t, a, b)
	})
}

var (
	lineAda    = protocol.Holder{OID: "u-ada", Name: "Ada Lovelace"}
	lineGrace  = protocol.Holder{OID: "u-grace", Name: "Grace Hopper"}
	lineEdsger = protocol.Holder{OID: "u-edsger", Name: "Edsger Dijkstra"}
	lineBee    = protocol.Holder{OID: "u-bee", Name: "Bee"}
)

// viewStates writes a presence's viewers as "oid:state" (with a waiting one's position).
func viewStates(vs []protocol.Viewer) string {
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

// nextHandoff waits for c's next handoff frame, skipping the presence frames before it.
func nextHandoff(t testing.TB, c *protocol.Client) protocol.Handoff {
	t.Helper()
	ctx := tctx(t)
	for {
		f, err := c.NextFrame(ctx)
		if err != nil {
			t.Fatalf("no handoff: %v", err)
		}
		if f.Handoff != nil {
			return *f.Handoff
		}
		if f.Presence == nil {
			t.Fatalf("frame %s while waiting for a handoff", f.Raw)
		}
	}
}

// waitPresence waits until c is sent the viewers want, and reports every handoff it
// skipped on the way.
func waitPresence(t testing.TB, c *protocol.Client, want string) (handoffs int) {
	t.Helper()
	ctx := tctx(t)
	var seen []string
	for {
		f, err := c.NextFrame(ctx)
		if err != nil {
			t.Fatalf("viewers %q never came (saw %q): %v", want, seen, err)
		}
		if f.Handoff != nil {
			handoffs++
			continue
		}
		if f.Presence == nil {
			t.Fatalf("frame %s while waiting for viewers", f.Raw)
		}
		got := viewStates(f.Presence.Viewers)
		if got == want {
			return handoffs
		}
		seen = append(seen, got)
	}
}

// noHandoff checks that c was queued no handoff frame before a barrier: every frame
// queued before the barrier's answer is in c's queue by then.
func noHandoff(t testing.TB, c *protocol.Client) {
	t.Helper()
	barrier(t, c)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		f, err := c.NextFrame(ctx)
		cancel()
		if err != nil {
			return // the queue is empty
		}
		if f.Handoff != nil {
			t.Fatalf("unexpected handoff %s", f.Raw)
		}
	}
}

func testLineTwoInstances(t *testing.T, a, b *testHub) {
	tenant := fmt.Sprintf("line-%d", time.Now().UnixNano())
	a.waitFeed(tenant)
	b.waitFeed(tenant)
	ctx := tctx(t)

	w := b.dialAs(tenant, lineBee)
	if _, err := w.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	ada := a.dialAs(tenant, lineAda)
	grace := b.dialAs(tenant, lineGrace)
	graceTab := a.dialAs(tenant, lineGrace)  // her second tab, on the other instance, waits too
	graceLook := a.dialAs(tenant, lineGrace) // a third only looks
	edsger := a.dialAs(tenant, lineEdsger)

	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1001"))
	wantEventBy(t, w, protocol.OpAcquired, "r-1001", lineAda)
	view := func(c *protocol.Client, intent protocol.Intent, want string) {
		t.Helper()
		p, err := c.ViewWith(ctx, typ, "r-1001", intent)
		if err != nil {
			t.Fatal(err)
		}
		if got := viewStates(p.Viewers); got != want {
			t.Fatalf("view answered %q, want %q", got, want)
		}
	}
	view(ada, protocol.IntentEdit, "u-ada:editing")
	view(grace, protocol.IntentEdit, "u-ada:editing u-grace:waiting1")
	view(graceLook, protocol.IntentLook, "u-ada:editing u-grace:waiting1")
	view(edsger, protocol.IntentLook, "u-ada:editing u-grace:waiting1 u-edsger:looking")
	view(edsger, protocol.IntentEdit, "u-ada:editing u-grace:waiting1 u-edsger:waiting2") // the intent changes
	view(graceTab, protocol.IntentEdit, "u-ada:editing u-grace:waiting1 u-edsger:waiting2")
	waitPresence(t, ada, "u-ada:editing u-grace:waiting1 u-edsger:waiting2")

	// Ada releases: Grace, first in line, gets it through her first socket (on b).
	rel := expect(t, protocol.OutcomeReleased)(ada.Release(ctx, typ, "r-1001"))
	if rel.Lock == nil || rel.Lock.HolderOID != lineAda.OID {
		t.Fatalf("release answered %+v", rel.Lock)
	}
	wantEventBy(t, w, protocol.OpReleased, "r-1001", lineAda)
	wantEventBy(t, w, protocol.OpAcquired, "r-1001", lineGrace)
	for _, c := range []*protocol.Client{grace, graceTab} {
		h := nextHandoff(t, c)
		if h.EntityType != typ || h.EntityUID != "r-1001" || h.Lock.HolderOID != lineGrace.OID || h.Lock.HolderName != lineGrace.Name {
			t.Fatalf("handoff %+v", h)
		}
	}
	if n := waitPresence(t, edsger, "u-ada:waiting2 u-grace:editing u-edsger:waiting1"); n != 0 {
		t.Fatalf("Edsger, still waiting, was sent %d handoffs", n)
	}
	noHandoff(t, graceLook) // only the sockets that view with intent edit
	noHandoff(t, edsger)
	// A hub counts a hand-off after it queued the frame (feed.Handoff), and b took hers
	// up after that: wait for the counts, not the frames.
	redistest.Eventually(t, "the hand-offs counted", func() bool {
		return a.metric("lockhub_hub_handoffs_delivered_total")+b.metric("lockhub_hub_handoffs_delivered_total") >= 2 &&
			b.metric("lockhub_hub_handoffs_taken_total") >= 1
	})
	if got := a.metric("lockhub_hub_handoffs_delivered_total") + b.metric("lockhub_hub_handoffs_delivered_total"); got != 2 {
		t.Errorf("handoffs delivered %v, want 2", got)
	}
	if got := b.metric("lockhub_hub_handoffs_taken_total"); got != 1 {
		t.Errorf("hand-offs taken up on b %v, want 1 (Grace's first socket is there)", got)
	}
	// It is hers as if she had claimed it: her socket renews it, and its close releases
	// it after the grace, to Edsger, now the first (Ada is back in line behind him).
	expect(t, protocol.OutcomeRenewed)(grace.Renew(ctx, typ, "r-1001"))
	wantEventBy(t, w, protocol.OpRenewed, "r-1001", lineGrace)
	_ = grace.Close()
	_ = graceTab.Close() // both her waiting tabs go: she leaves the line
	wantEventBy(t, w, protocol.OpReleased, "r-1001", lineGrace)
	wantEventBy(t, w, protocol.OpAcquired, "r-1001", lineEdsger)
	if h := nextHandoff(t, edsger); h.Lock.HolderOID != lineEdsger.OID {
		t.Fatalf("Edsger's handoff %+v", h)
	}
	barrier(t, w)
	noEvent(t, w) // each once

	// Claims of many over the socket: all or nothing.
	expect(t, protocol.OutcomeAcquired)(graceLook.Claim(ctx, typ, "r-1003"))
	wantEventBy(t, w, protocol.OpAcquired, "r-1003", lineGrace)
	got, err := ada.ClaimMany(ctx, typ, []string{"r-1002", "r-1003", "r-1004"})
	if err != nil || got.Outcome != protocol.OutcomeLocked || len(got.Locks) != 1 || got.Locks[0].EntityUID != "r-1003" {
		t.Fatalf("claimMany over Grace's lock: %+v, %v", got, err)
	}
	barrier(t, w)
	noEvent(t, w) // nothing written
	got, err = ada.ClaimMany(ctx, typ, []string{"r-1002", "r-1004"})
	if err != nil || got.Outcome != protocol.OutcomeAcquired || len(got.Locks) != 2 || got.Locks[1].EntityUID != "r-1004" {
		t.Fatalf("claimMany: %+v, %v", got, err)
	}
	wantEventBy(t, w, protocol.OpAcquired, "r-1002", lineAda)
	wantEventBy(t, w, protocol.OpAcquired, "r-1004", lineAda)
	many := make([]string, protocol.MaxBulk+1)
	for i := range many {
		many[i] = fmt.Sprintf("r-%d", i)
	}
	_, err = ada.ClaimMany(ctx, typ, many)
	wantCode(t, err, protocol.CodeBadRequest)
	_, err = ada.ClaimMany(ctx, typ, []string{"r-1", "r-1"})
	wantCode(t, err, protocol.CodeBadRequest)
	_, err = ada.ClaimMany(ctx, typ, []string{"r-1", "r}{"})
	wantCode(t, err, protocol.CodeInvalidEntity)
	_, err = ada.ClaimMany(ctx, "Nope", []string{"r-1"})
	wantCode(t, err, protocol.CodeNotLockable)
	mine, err := ada.Mine(ctx)
	if err != nil || len(mine) != 2 {
		t.Fatalf("Ada's locks %+v, %v; want the two she claimed", mine, err)
	}
	r, err := ada.ReleaseMany(ctx, typ, []string{"r-1002", "r-1004", "r-1003"})
	if err != nil || r.Outcome != protocol.OutcomeReleased || r.Count == nil || *r.Count != 2 {
		t.Fatalf("releaseMany: %+v, %v", r, err)
	}
	var released []string
	for range 2 {
		ev := nextEvent(t, w)
		if ev.Op != protocol.OpReleased {
			t.Fatalf("event %s %s, want Released", ev.Op, ev.Lock.EntityUID)
		}
		released = append(released, ev.Lock.EntityUID)
	}
	slices.Sort(released)
	if !slices.Equal(released, []string{"r-1002", "r-1004"}) {
		t.Errorf("released %q", released)
	}
}

// TestLineWaiterClosed: a waiter whose socket closed is still in line during its grace;
// a hand-off that reaches it then is released when the grace ends, like any lock of a
// closed socket, and goes on to the next in line (PROTOCOL.md §11).
func TestLineWaiterClosed(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	w := th.dialAs("acme", lineBee)
	if _, err := w.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	ada := th.dialAs("acme", lineAda)
	grace := th.dialAs("acme", lineGrace)
	edsger := th.dialAs("acme", lineEdsger)
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	wantEventBy(t, w, protocol.OpAcquired, "r-1", lineAda)
	for _, c := range []*protocol.Client{grace, edsger} {
		if _, err := c.ViewWith(ctx, typ, "r-1", protocol.IntentEdit); err != nil {
			t.Fatal(err)
		}
	}
	_ = grace.Close() // her view stays for the grace
	expect(t, protocol.OutcomeReleased)(ada.Release(ctx, typ, "r-1"))
	wantEventBy(t, w, protocol.OpReleased, "r-1", lineAda)
	wantEventBy(t, w, protocol.OpAcquired, "r-1", lineGrace)
	// The grace ends: released, and handed to Edsger.
	wantEventBy(t, w, protocol.OpReleased, "r-1", lineGrace)
	wantEventBy(t, w, protocol.OpAcquired, "r-1", lineEdsger)
	if h := nextHandoff(t, edsger); h.Lock.HolderOID != lineEdsger.OID {
		t.Fatalf("Edsger's handoff %+v", h)
	}
	barrier(t, w)
	noEvent(t, w)
}
