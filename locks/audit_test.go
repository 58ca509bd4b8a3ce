package locks

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestAudit proves the audit trail of PROTOCOL.md §10 on miniredis, a real
// redis-server and a real Redis Cluster: the exact entries of a scripted sequence,
// the reads with their filters and cursors, the cap, and that the scripts run by
// another program with the keys documented before the audit still work.
func TestAudit(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("entries", func(t *testing.T) { testAuditEntries(t, b) })
			t.Run("reads", func(t *testing.T) { testAuditReads(t, b) })
			t.Run("cap", func(t *testing.T) { testAuditCap(t, b) })
			t.Run("five keys", func(t *testing.T) { testAuditOptional(t, b) })
			t.Run("admin locks", func(t *testing.T) { testAdminLocks(t, b) })
		})
	}
}

// entry is what a test compares of an audit entry: all but its id and at.
func entry(op protocol.Op, uid string, holder, actor *protocol.Holder, reason AuditReason) string {
	who := func(h *protocol.Holder) string {
		if h == nil {
			return "null"
		}
		return h.OID + "/" + h.Name
	}
	return fmt.Sprintf("%s %s holder=%s actor=%s %s", op, uid, who(holder), who(actor), reason)
}

func entriesOf(t *testing.T, page AuditPage) []string {
	t.Helper()
	var out []string
	for _, e := range page.Entries {
		if e.EntityType != "ApprovalRequest" {
			t.Errorf("entry %s of type %q", e.ID, e.EntityType)
		}
		out = append(out, entry(e.Op, e.EntityUID, e.Holder, e.Actor, e.Reason))
	}
	return out
}

// all reads every entry of a tenant, oldest first, through the cursor.
func all(t *testing.T, s *Store, tenant string, q AuditQuery) []AuditEntry {
	t.Helper()
	var out []AuditEntry
	for range 1000 {
		page, err := s.Console.Audit(ctxT(t), tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Entries...)
		if page.Next == "" {
			slices.Reverse(out)
			return out
		}
		q.Before = page.Next
	}
	t.Fatal("the cursor never ended")
	return nil
}

func testAuditEntries(t *testing.T, b backend) {
	c := b.client(t)
	start := time.Now().Add(-time.Millisecond)
	s, _ := newStore(t, c, Config{})
	short, _ := newStore(t, c, Config{Lease: 300 * time.Millisecond})
	tenant := fmt.Sprintf("aud-%d", time.Now().UnixNano())
	ctx := ctxT(t)
	r := func(uid string) Ref { return Ref{tenant, "ApprovalRequest", uid} }
	admin := protocol.Holder{OID: "u-root", Name: "Rita Root"}

	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-1"), ada, "c-ada"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Renew(ctx, r("r-1"), ada, "c-ada"))  // not audited
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, r("r-1"), ada, "c-ada2")) // another tab: a renewal
	expect(t, protocol.OutcomeLocked)(s.Locks.Claim(ctx, r("r-1"), grace, ""))      // changes nothing
	expect(t, protocol.OutcomeTakenOver)(s.Locks.Takeover(ctx, r("r-1"), margot, "", true))
	expect(t, protocol.OutcomeForbidden)(s.Locks.Takeover(ctx, r("r-1"), grace, "", false))
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, r("r-1"), margot, ""))
	expect(t, protocol.OutcomeNotHeld)(s.Locks.Release(ctx, r("r-1"), margot, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Takeover(ctx, r("r-2"), margot, "", true))
	expect(t, protocol.OutcomeReleased)(s.Locks.ReleaseBecause(ctx, r("r-2"), margot, "", AuditDecision))
	// Two sockets of grace: the first to close keeps the lock, the last releases it.
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-3"), grace, "c-1"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, r("r-3"), grace, "c-2"))
	expect(t, protocol.OutcomeNotHeld)(s.Locks.Detach(ctx, r("r-3"), grace, "c-1", true))
	expect(t, protocol.OutcomeReleased)(s.Locks.Detach(ctx, r("r-3"), protocol.Holder{OID: grace.OID}, "c-2", true))
	// A release from one of two tabs lets go of that tab's share only.
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-4"), ada, "c-a"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, r("r-4"), ada, "c-b"))
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, r("r-4"), ada, "c-a"))
	res := expect(t, protocol.OutcomeReleased)(s.Console.ForceRelease(ctx, r("r-4"), admin))
	if res.Lock == nil || res.Lock.HolderOID != ada.OID {
		t.Fatalf("force release answered lock %+v, want ada's", res.Lock)
	}
	expect(t, protocol.OutcomeNotHeld)(s.Console.ForceRelease(ctx, r("r-4"), admin))
	if l, _ := s.Locks.Get(ctx, r("r-4")); l != nil {
		t.Fatalf("r-4 still locked after a force release: %+v", l)
	}
	// A lease that runs out, found by the sweep.
	expect(t, protocol.OutcomeAcquired)(short.Locks.Claim(ctx, r("r-5"), ada, ""))
	gone(t, b, c, LockKey(r("r-5")))
	if err := s.Locks.Sweep(ctx, tenant, "ApprovalRequest", 0); err != nil {
		t.Fatal(err)
	}
	// Another writer's claim, takeover (an overwrite by another holder) and release,
	// each found by the next lockhub script or sweep.
	net := redistest.DotNet{C: c}
	if ok, _, err := net.Claim(ctx, tenant, "ApprovalRequest", "r-6", grace.OID, grace.Name); err != nil || !ok {
		t.Fatalf(".NET claim = %v, %v", ok, err)
	}
	expect(t, protocol.OutcomeLocked)(s.Locks.Claim(ctx, r("r-6"), ada, "")) // catchup: Acquired
	// Its own lease: an overwrite in the very millisecond of the claim with the same
	// lease would leave the index score as it was (the README's documented limit).
	if _, err := (redistest.DotNet{C: c, Lease: 4 * time.Minute}).Overwrite(ctx, tenant, "ApprovalRequest", "r-6", margot.OID, margot.Name); err != nil {
		t.Fatal(err)
	}
	if err := s.Locks.Sweep(ctx, tenant, "ApprovalRequest", 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := net.Release(ctx, tenant, "ApprovalRequest", "r-6", margot.OID); err != nil || !ok {
		t.Fatalf(".NET release = %v, %v", ok, err)
	}
	if err := s.Locks.Sweep(ctx, tenant, "ApprovalRequest", 0); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(time.Millisecond)

	want := []string{
		entry(protocol.OpAcquired, "r-1", &ada, &ada, AuditClaim),
		entry(protocol.OpTakenOver, "r-1", &margot, &margot, AuditTakeover),
		entry(protocol.OpReleased, "r-1", &margot, &margot, AuditRelease),
		entry(protocol.OpAcquired, "r-2", &margot, &margot, AuditTakeover),
		entry(protocol.OpReleased, "r-2", &margot, &margot, AuditDecision),
		entry(protocol.OpAcquired, "r-3", &grace, &grace, AuditClaim),
		entry(protocol.OpReleased, "r-3", &grace, &grace, AuditDisconnect),
		entry(protocol.OpAcquired, "r-4", &ada, &ada, AuditClaim),
		entry(OpForceReleased, "r-4", &ada, &admin, AuditAdmin),
		entry(protocol.OpAcquired, "r-5", &ada, &ada, AuditClaim),
		entry(protocol.OpExpired, "r-5", &ada, nil, AuditExpiry),
		entry(protocol.OpAcquired, "r-6", &grace, nil, AuditForeign),
		entry(protocol.OpTakenOver, "r-6", &margot, nil, AuditForeign),
		entry(protocol.OpReleased, "r-6", &margot, nil, AuditForeign),
	}
	got := all(t, s, tenant, AuditQuery{})
	if g := entriesOf(t, AuditPage{Entries: got}); !slices.Equal(g, want) {
		t.Fatalf("audit entries, oldest first:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range got {
		if e.At.Before(start) || e.At.After(end) {
			t.Errorf("entry %s at %s, outside the run [%s, %s]", e.ID, e.At, start, end)
		}
	}
	// The stream as a backend reads it (XRANGE), the fields exactly as the README says.
	msgs, err := c.XRange(ctx, AuditKey(tenant), "-", "+").Result()
	if err != nil || len(msgs) != len(want) {
		t.Fatalf("XRANGE = %d entries, %v", len(msgs), err)
	}
	raw := msgs[8].Values // the force release
	wantRaw := map[string]any{
		"op": "ForceReleased", "entityType": "ApprovalRequest", "entityUid": "r-4",
		"holder": `{"oid":"u-ada","name":"Ada Lovelace"}`, "actor": `{"oid":"u-root","name":"Rita Root"}`,
		"reason": "admin", "at": got[8].At.String(),
	}
	if fmt.Sprint(raw) != fmt.Sprint(wantRaw) {
		t.Fatalf("raw entry %v, want %v", raw, wantRaw)
	}
	if v := msgs[10].Values["actor"]; v != "null" {
		t.Fatalf("the expiry's actor field is %q, want null", v)
	}
	if n := testutil.ToFloat64(s.core.amet.written.WithLabelValues(string(OpForceReleased))); n != 1 {
		t.Fatalf("force releases audited: %v, want 1", n)
	}
	if n := testutil.ToFloat64(s.core.amet.forced.WithLabelValues(string(protocol.OutcomeNotHeld))); n != 1 {
		t.Fatalf("force releases notHeld: %v, want 1", n)
	}
}

// gone waits until Redis has dropped key (its TTL ran out), driving miniredis's clock.
func gone(t *testing.T, b backend, c redis.UniversalClient, key string) {
	t.Helper()
	redistest.Eventually(t, key+" expired", func() bool {
		if b.advance != nil {
			b.advance(100 * time.Millisecond)
		}
		n, err := c.Exists(ctxT(t), key).Result()
		return err == nil && n == 0
	})
}

func testAuditReads(t *testing.T, b backend) {
	c := b.client(t)
	s, _ := newStore(t, c, Config{})
	tenant := fmt.Sprintf("audr-%d", time.Now().UnixNano())
	other := tenant + "-other"
	ctx := ctxT(t)
	for range 7 { // 28 entries, 14 of each entity
		for _, uid := range []string{"r-a", "r-b"} {
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", uid}, ada, ""))
			expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, Ref{tenant, "ApprovalRequest", uid}, ada, ""))
		}
	}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{other, "ApprovalRequest", "r-a"}, grace, ""))

	page, err := s.Console.Audit(ctx, tenant, AuditQuery{})
	if err != nil || len(page.Entries) != 28 || page.Next != "" {
		t.Fatalf("default read: %d entries, next %q, %v; want 28, no next", len(page.Entries), page.Next, err)
	}
	if page.Entries[0].Op != protocol.OpReleased || page.Entries[0].EntityUID != "r-b" {
		t.Fatalf("newest first: the first entry is %+v", page.Entries[0])
	}
	// Pages of 5 through the cursor give every entry once, in order.
	var paged []string
	q := AuditQuery{Limit: 5}
	for pages := 0; ; pages++ {
		p, err := s.Console.Audit(ctx, tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) > 5 || (p.Next != "" && len(p.Entries) != 5) {
			t.Fatalf("a page of %d entries, next %q", len(p.Entries), p.Next)
		}
		for _, e := range p.Entries {
			paged = append(paged, e.ID)
		}
		if p.Next == "" {
			break
		}
		q.Before = p.Next
	}
	var ids []string
	for _, e := range page.Entries {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(paged, ids) {
		t.Fatalf("paged ids %v, want %v", paged, ids)
	}
	// An entity's trail, in pages of 4: 14 entries, 4 pages.
	var trail []AuditEntry
	q = AuditQuery{EntityType: "ApprovalRequest", EntityUID: "r-a", Limit: 4}
	for {
		p, err := s.Console.Audit(ctx, tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		trail = append(trail, p.Entries...)
		if p.Next == "" {
			break
		}
		q.Before = p.Next
	}
	if len(trail) != 14 {
		t.Fatalf("r-a's trail: %d entries, want 14", len(trail))
	}
	for _, e := range trail {
		if e.EntityUID != "r-a" {
			t.Fatalf("r-a's trail holds %+v", e)
		}
	}
	if p, _ := s.Console.Audit(ctx, tenant, AuditQuery{EntityUID: "r-none"}); len(p.Entries) != 0 || p.Next != "" {
		t.Fatalf("an entity without entries: %+v", p)
	}
	if p, _ := s.Console.Audit(ctx, tenant, AuditQuery{EntityType: "Other"}); len(p.Entries) != 0 {
		t.Fatalf("a type without entries: %+v", p)
	}
	// Another tenant's stream holds only its own entry.
	if p, _ := s.Console.Audit(ctx, other, AuditQuery{}); len(p.Entries) != 1 || p.Entries[0].Holder.OID != grace.OID {
		t.Fatalf("the other tenant's trail: %+v", p)
	}

	for name, q := range map[string]AuditQuery{
		"limit 0 is the default, -1 is not": {Limit: -1},
		"limit over 500":                    {Limit: 501},
		"cursor not an id":                  {Before: "abc"},
		"cursor half an id":                 {Before: "123"},
		"cursor with a sign":                {Before: "+1-0"},
		"cursor of a range":                 {Before: "(1-0"},
	} {
		if _, err := s.Console.Audit(ctx, tenant, q); !isCode(err, protocol.CodeBadRequest) {
			t.Errorf("%s: error %v, want bad_request", name, err)
		}
	}
	for name, q := range map[string]AuditQuery{
		"type with a brace": {EntityType: "A}b"},
		"uid with a space":  {EntityUID: "r 1"},
	} {
		if _, err := s.Console.Audit(ctx, tenant, q); !isCode(err, protocol.CodeInvalidEntity) {
			t.Errorf("%s: error %v, want invalid_entity", name, err)
		}
	}
	if _, err := s.Console.Audit(ctx, "a{b", AuditQuery{}); !isCode(err, protocol.CodeInvalidEntity) {
		t.Errorf("a bad tenant: error %v, want invalid_entity", err)
	}
	if p, err := s.Console.Audit(ctx, tenant, AuditQuery{Before: "0-0"}); err != nil || len(p.Entries) != 0 {
		t.Fatalf("before the first id: %+v, %v", p, err)
	}
}

func isCode(err error, code protocol.ErrorCode) bool {
	ce, ok := err.(protocol.ClientError)
	return ok && ce.ErrorCode() == code
}

func testAuditCap(t *testing.T, b backend) {
	c := b.client(t)
	const cap = 100
	// A rate of changes that lets one person fill the cap at once (the default would
	// refuse the 201st change: PROTOCOL.md §4).
	s, _ := newStore(t, c, Config{AuditCap: cap, MaxChangesPerPerson: 1e6, ChangesBurst: 1e6})
	tenant := fmt.Sprintf("audc-%d", time.Now().UnixNano())
	ctx := ctxT(t)
	ref := Ref{tenant, "ApprovalRequest", "r-1"}
	for range 3 * cap {
		expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, ""))
		expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, ref, ada, ""))
	}
	n, err := c.XLen(ctx, AuditKey(tenant)).Result()
	if err != nil {
		t.Fatal(err)
	}
	// MAXLEN ~ trims whole macro nodes (stream-node-max-entries, 100 by default): at
	// least the cap is kept, and less than a node more.
	if n < cap || n >= 2*cap {
		t.Fatalf("XLEN %d after %d entries, want about the cap %d", n, 6*cap, cap)
	}
	p, _ := s.Console.Audit(ctx, tenant, AuditQuery{Limit: 1})
	if len(p.Entries) != 1 || p.Entries[0].Op != protocol.OpReleased {
		t.Fatalf("the newest entry %+v", p.Entries)
	}
	d, _ := newStore(t, c, Config{})
	if got := d.core.auditArgs(time.Now(), nil, "")[1]; got != DefaultAuditCap {
		t.Fatalf("default cap %v, want %d", got, DefaultAuditCap)
	}
	if _, err := NewStore(Config{Client: c, AuditCap: -1}); err == nil {
		t.Fatal("a negative AuditCap was accepted")
	}
}

// testAuditOptional runs claim.lua and release.lua as a program would that knows the
// five keys and the arguments documented before the audit: they still work, and
// record nothing.
func testAuditOptional(t *testing.T, b backend) {
	c := b.client(t)
	s, _ := newStore(t, c, Config{noAudit: true})
	tenant := fmt.Sprintf("aud5-%d", time.Now().UnixNano())
	ctx := ctxT(t)
	ref := Ref{tenant, "ApprovalRequest", "r-1"}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "c-1"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Renew(ctx, ref, ada, "c-1"))
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, ref, ada, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Takeover(ctx, ref, ada, "", true))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, ref, ada, "c-2"))
	expect(t, protocol.OutcomeReleased)(s.Locks.Detach(ctx, ref, ada, "c-2", true))
	if err := s.Locks.Sweep(ctx, tenant, "ApprovalRequest", 0); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, AuditKey(tenant)).Result(); err != nil || n != 0 {
		t.Fatalf("the audit stream exists (%d, %v) though no script got its key", n, err)
	}
	// ...and the same store with the audit records the same sequence.
	a, _ := newStore(t, c, Config{})
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, ref, ada, "c-1"))
	if n, _ := c.XLen(ctx, AuditKey(tenant)).Result(); n != 1 {
		t.Fatalf("XLEN %d after one audited claim", n)
	}
}

func testAdminLocks(t *testing.T, b backend) {
	c := b.client(t)
	reg, err := NewRegistry("ApprovalRequest", "Shipment")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newStore(t, c, Config{Registry: reg})
	tenant := fmt.Sprintf("adm-%d", time.Now().UnixNano())
	ctx := ctxT(t)
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", "r-1"}, ada, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", "r-2"}, grace, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "Shipment", "s-1"}, margot, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant + "-x", "Shipment", "s-2"}, margot, ""))
	ls, err := s.Console.AdminLocks(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.EntityType+"/"+l.EntityUID+"/"+l.HolderOID)
	}
	slices.Sort(got)
	want := []string{"ApprovalRequest/r-1/u-ada", "ApprovalRequest/r-2/u-grace", "Shipment/s-1/u-margaret"}
	if !slices.Equal(got, want) {
		t.Fatalf("AdminLocks = %v, want %v", got, want)
	}
	if _, err := s.Console.AdminLocks(ctx, "a b"); !isCode(err, protocol.CodeInvalidEntity) {
		t.Fatalf("a bad tenant: %v", err)
	}
	if _, err := s.Console.ForceRelease(ctx, Ref{tenant, "Nope", "x"}, ada); !isCode(err, protocol.CodeNotLockable) {
		t.Fatalf("force release of an unlockable type: %v", err)
	}
}
