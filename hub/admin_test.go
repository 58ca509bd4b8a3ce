package hub

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestAdminFrames drives the lock console's frames (PROTOCOL.md §10) with and without
// the admin role: a force release reaches the holder's watch as Released with "by",
// and another tenant's admin touches nothing of this one.
func TestAdminFrames(t *testing.T) {
	th := startMini(t, hubOptions{})
	th.waitFeed("acme", "globex")
	ctx := tctx(t)
	const typ = "ApprovalRequest"
	adaH := protocol.Holder{OID: "u-ada", Name: "Ada Lovelace"}
	rootH := protocol.Holder{OID: "u-root", Name: "Rita Root"}
	ada := th.dialAs("acme", adaH)
	if _, err := ada.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	wantEventBy(t, ada, protocol.OpAcquired, "r-1", adaH)

	for name, c := range map[string]*protocol.Client{
		"no role":       th.dialAs("acme", protocol.Holder{OID: "u-grace", Name: "Grace Hopper"}),
		"takeover role": th.dialAs("acme", protocol.Holder{OID: "u-boss", Name: "Boss"}, auth.DefaultTakeoverRole),
	} {
		_, err := c.AdminLocks(ctx)
		wantCode(t, err, protocol.CodeForbidden)
		_, err = c.ForceRelease(ctx, typ, "r-1")
		if pe := wantCode(t, err, protocol.CodeForbidden); pe.Message == "" {
			t.Fatalf("%s: forbidden without a message", name)
		}
		// The socket stays open and served.
		if _, err := c.Mine(ctx); err != nil {
			t.Fatalf("%s: after forbidden: %v", name, err)
		}
	}
	if l, _ := th.store.Locks.Get(ctx, locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}); l == nil || l.HolderOID != adaH.OID {
		t.Fatalf("a refused force release changed the lock: %+v", l)
	}

	// Another tenant's admin: its own tenant's locks, and acme's r-1 is not its to see.
	globex := th.dialAs("globex", protocol.Holder{OID: "u-g", Name: "Gus"}, auth.DefaultAdminRole)
	if ls, err := globex.AdminLocks(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("globex's admin sees %+v, %v", ls, err)
	}
	expect(t, protocol.OutcomeNotHeld)(globex.ForceRelease(ctx, typ, "r-1"))

	root := th.dialAs("acme", rootH, auth.DefaultAdminRole)
	ls, err := root.AdminLocks(ctx)
	if err != nil || len(ls) != 1 || ls[0].HolderOID != adaH.OID || ls[0].EntityUID != "r-1" {
		t.Fatalf("acme's admin sees %+v, %v", ls, err)
	}
	r := expect(t, protocol.OutcomeReleased)(root.ForceRelease(ctx, typ, "r-1"))
	if r.Lock == nil || r.Lock.HolderOID != adaH.OID {
		t.Fatalf("force release answered lock %+v", r.Lock)
	}
	ev := wantEventBy(t, ada, protocol.OpReleased, "r-1", adaH)
	if ev.By == nil || *ev.By != rootH {
		t.Fatalf("Released by %+v, want %+v", ev.By, rootH)
	}
	expect(t, protocol.OutcomeLost)(ada.Renew(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeNotHeld)(root.ForceRelease(ctx, typ, "r-1"))
	_, err = root.ForceRelease(ctx, typ, "r 1")
	wantCode(t, err, protocol.CodeInvalidEntity)
	_, err = root.ForceRelease(ctx, "Shipment", "s-1")
	wantCode(t, err, protocol.CodeNotLockable)
	// An ordinary release carries no "by".
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-2"))
	wantEvent(t, ada, protocol.OpAcquired, "r-2")
	expect(t, protocol.OutcomeReleased)(ada.Release(ctx, typ, "r-2"))
	if ev := wantEvent(t, ada, protocol.OpReleased, "r-2"); ev.By != nil {
		t.Fatalf("a release by the holder says by %+v", ev.By)
	}

	page, err := th.store.Console.Audit(ctx, "acme", locks.AuditQuery{EntityUID: "r-1"})
	if err != nil || len(page.Entries) != 2 {
		t.Fatalf("r-1's trail: %+v, %v", page, err)
	}
	if e := page.Entries[0]; e.Op != locks.OpForceReleased || e.Actor == nil || *e.Actor != rootH || e.Reason != locks.AuditAdmin {
		t.Fatalf("the force release's entry: %+v", e)
	}
	if n := th.metric("lockhub_hub_outcomes_total", "op=forceRelease", "outcome=notHeld"); n != 2 {
		t.Fatalf("forceRelease notHeld counted %v times, want 2", n)
	}
}

// TestAdminRoleConfigured: the console's frames follow Config.Roles.Admin.
func TestAdminRoleConfigured(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.Roles.Admin = "Ops.Locks" }})
	ctx := tctx(t)
	_, err := th.dialAs("acme", protocol.Holder{OID: "u-a", Name: "A"}, auth.DefaultAdminRole).AdminLocks(ctx)
	wantCode(t, err, protocol.CodeForbidden)
	if _, err := th.dialAs("acme", protocol.Holder{OID: "u-b", Name: "B"}, "Ops.Locks").AdminLocks(ctx); err != nil {
		t.Fatalf("the configured role: %v", err)
	}
}

// TestForceReleaseAcrossInstances: the holder's socket is on one instance, the
// administrator's on another, on a real redis-server and a real cluster. The holder
// gets Released with "by" through the change feed, its later renewal is lost, and its
// socket's close releases nothing more (the audit trail holds one Released).
func TestForceReleaseAcrossInstances(t *testing.T) { onRealRedis(t, testForceReleaseAcross) }

func testForceReleaseAcross(t *testing.T, ca, cb redis.UniversalClient) {
	grace := func(c *Config) { c.ReleaseGrace = time.Millisecond }
	a := startHub(t, ca, hubOptions{hub: grace})
	b := startHub(t, cb, hubOptions{hub: grace, dev: a.dev})
	a.waitFeed("acme")
	b.waitFeed("acme")
	ctx := tctx(t)
	adaH := protocol.Holder{OID: "u-ada", Name: "Ada Lovelace"}
	rootH := protocol.Holder{OID: "u-root", Name: "Rita Root"}
	ada := a.dialAs("acme", adaH)
	if _, err := ada.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-9"))
	wantEventBy(t, ada, protocol.OpAcquired, "r-9", adaH)

	root := b.dialAs("acme", rootH, auth.DefaultAdminRole)
	ls, err := root.AdminLocks(ctx)
	if err != nil || len(ls) != 1 || ls[0].HolderOID != adaH.OID {
		t.Fatalf("the other instance's admin sees %+v, %v", ls, err)
	}
	expect(t, protocol.OutcomeReleased)(root.ForceRelease(ctx, typ, "r-9"))
	ev := wantEventBy(t, ada, protocol.OpReleased, "r-9", adaH)
	if ev.By == nil || *ev.By != rootH {
		t.Fatalf("Released by %+v, want %+v", ev.By, rootH)
	}
	// Ada's other tab finds it gone (her first socket still counts it as claimed).
	expect(t, protocol.OutcomeLost)(a.dialAs("acme", adaH).Renew(ctx, typ, "r-9"))
	// Ada's socket closes: after the grace its detach finds nothing of hers to release.
	_ = ada.Close() // the close itself is not under test
	redistest.Eventually(t, "the detach of Ada's socket", func() bool {
		return a.metric("lockhub_hub_detaches_total", "outcome=notHeld") >= 1
	})
	page, err := b.store.Console.Audit(ctx, "acme", locks.AuditQuery{EntityUID: "r-9"})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, e := range page.Entries {
		ops = append(ops, string(e.Op)+"/"+string(e.Reason))
	}
	if got := strings.Join(ops, " "); got != "ForceReleased/admin Acquired/claim" {
		t.Fatalf("r-9's trail: %s", got)
	}
}
