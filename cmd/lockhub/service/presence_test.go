package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestPresenceOnTheBinary: presence and nudges through two built lockhub binaries on
// one Redis, on redis-server and on the 6-node cluster (PROTOCOL.md §9): the frames,
// across instances, and each bad input answered with its error while the socket stays.
func TestPresenceOnTheBinary(t *testing.T) {
	bin := buildBinary(t)
	t.Run("standalone", func(t *testing.T) {
		srv := redistest.StartServer(t)
		testPresenceOnTheBinary(t, bin, []string{"--redis-url", srv.URL()})
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		testPresenceOnTheBinary(t, bin, []string{"--redis-url", "redis://" + cl.MasterAddrs()[0], "--redis-cluster"})
	})
}

// waitFrame bounds a wait for a frame from a binary.
const waitFrame = 10 * time.Second

func testPresenceOnTheBinary(t *testing.T, bin string, redisArgs []string) {
	args := append([]string{"--dev", "--listen", "127.0.0.1:0", "--release-grace", "200ms"}, redisArgs...)
	a := startBinary(t, bin, args)
	b := startBinary(t, bin, args)
	ctx := t.Context()
	const typ, uid = "ApprovalRequest", "r-1001"
	as := func(p *process, tenant, oid, name string) *protocol.Client {
		t.Helper()
		base := "http://" + p.addr
		body, _ := json.Marshal(map[string]any{"tenant": tenant, "oid": oid, "name": name, "roles": []string{}})
		tok, _ := call(t, "POST", base+"/dev/token", "", string(body)).body["token"].(string)
		return dialAuth(t, "ws://"+p.addr+"/ws", tok)
	}
	list := func(p protocol.Presence) string {
		var out []string
		for _, v := range p.Viewers {
			out = append(out, v.Name)
		}
		return strings.Join(out, ", ")
	}
	// next waits for the next unsolicited presence listing want.
	next := func(c *protocol.Client, want string) {
		t.Helper()
		redistest.Within(t, waitFrame, "presence "+want, func() error {
			f, err := c.NextFrame(ctx)
			if err != nil {
				return err
			}
			if f.Presence == nil || list(*f.Presence) != want {
				return fmt.Errorf("got %s", f.Raw)
			}
			return nil
		})
	}
	// Each binary subscribes to the feed once it runs, on a cluster one slot at a time:
	// wait until each delivers the changes of both tenants.
	for _, p := range []*process{a, b} {
		for _, tenant := range []string{"acme", "globex"} {
			probe := as(p, tenant, "u-probe", "Feed probe")
			if _, err := probe.Watch(ctx, "ApprovalRequest"); err != nil {
				t.Fatal(err)
			}
			redistest.Eventually(t, "the feed of "+p.addr+" to deliver "+tenant, func() bool {
				_, _ = probe.Claim(ctx, typ, "feed-probe")
				_, _ = probe.Release(ctx, typ, "feed-probe")
				select {
				case <-probe.Events():
					return true
				default:
					return false
				}
			})
			_ = probe.Close() // a probe: its end is of no interest
		}
	}
	ada := as(a, "acme", "u-ada", "Ada Lovelace")
	grace := as(b, "acme", "u-grace", "Grace Hopper")
	if _, err := ada.View(ctx, typ, uid); err != nil {
		t.Fatal(err)
	}
	p, err := grace.View(ctx, typ, uid)
	if err != nil || list(p) != "Ada Lovelace, Grace Hopper" {
		t.Fatalf("Grace's view on the other instance answered %q, %v", list(p), err)
	}
	next(ada, "Ada Lovelace, Grace Hopper")

	// Another tenant's entity of the same name has its own viewers, and hears nothing.
	linus := as(b, "globex", "u-linus", "Linus Torvalds")
	if p, err := linus.View(ctx, typ, uid); err != nil || list(p) != "Linus Torvalds" {
		t.Fatalf("another tenant's view answered %q, %v", list(p), err)
	}

	if r, err := grace.Nudge(ctx, typ, uid); err != nil || r.Outcome != protocol.OutcomeNotHeld {
		t.Fatalf("nudging a free entity answered %+v, %v; want notHeld", r, err)
	}
	if r, err := ada.Claim(ctx, typ, uid); err != nil || r.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("claim: %+v %v", r, err)
	}
	if r, err := grace.Nudge(ctx, typ, uid); err != nil || r.Outcome != protocol.OutcomeNudged {
		t.Fatalf("nudge: %+v %v", r, err)
	}
	redistest.Within(t, waitFrame, "Ada's nudge from Grace", func() error {
		f, err := ada.NextFrame(ctx)
		if err != nil {
			return err
		}
		if f.Nudge == nil || f.Nudge.From.OID != "u-grace" || f.Nudge.EntityUID != uid {
			return fmt.Errorf("got %s", f.Raw)
		}
		return nil
	})

	edsger := as(a, "acme", "u-edsger", "Edsger Dijkstra")
	for _, tc := range []struct {
		name string
		do   func() error
		code protocol.ErrorCode
	}{
		{"nudge again within 30 s", func() error { _, err := grace.Nudge(ctx, typ, uid); return err }, protocol.CodeRateLimited},
		{"nudge without viewing", func() error { _, err := edsger.Nudge(ctx, typ, uid); return err }, protocol.CodeForbidden},
		{"unknown entity type", func() error { _, err := edsger.View(ctx, "Payroll", uid); return err }, protocol.CodeNotLockable},
		{"hostile uid", func() error { _, err := edsger.View(ctx, typ, "r-1}:{globex"); return err }, protocol.CodeInvalidEntity},
		{"more than 50 views", func() error {
			for i := range protocol.MaxViewsPerSocket {
				if _, err := edsger.View(ctx, typ, fmt.Sprintf("r-%d", i)); err != nil {
					return fmt.Errorf("view %d: %w", i, err)
				}
			}
			_, err := edsger.View(ctx, typ, "r-51")
			return err
		}, protocol.CodeTooManyViews},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pe *protocol.Error
			if err := tc.do(); !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("answered %v, want an error %s", err, tc.code)
			}
		})
	}
	// Every socket is still served, and Linus never heard of acme's viewers.
	for _, c := range []*protocol.Client{ada, grace, edsger, linus} {
		if _, err := c.Ping(ctx); err != nil {
			t.Fatalf("a socket stopped being served: %v", err)
		}
	}
	// The pings answered: every frame sent to Linus before is queued on his client.
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if f, err := linus.NextFrame(wctx); err == nil {
		t.Fatalf("Linus, of another tenant, got %s", f.Raw)
	}
	_ = grace.Close() // her end is of no interest
	next(ada, "Ada Lovelace")
}
