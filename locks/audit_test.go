package locks

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
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
// the reads with their filters and cursors, the retention by count and by age, the
// takeover entry that survives another person's flood, and that the scripts run by
// another program with the keys documented before the audit still work.
func TestAudit(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("entries", func(t *testing.T) { testAuditEntries(t, b) })
			t.Run("reads", func(t *testing.T) { testAuditReads(t, b) })
			t.Run("max entries", func(t *testing.T) { testAuditMaxEntries(t, b) })
			t.Run("retention", func(t *testing.T) { testAuditRetention(t, b) })
			t.Run("evidence", func(t *testing.T) { testAuditEvidence(t, b) })
			t.Run("five keys", func(t *testing.T) { testAuditOptional(t, b) })
			t.Run("admin locks", func(t *testing.T) { testAdminLocks(t, b) })
		})
	}
}

// entry is what a test compares of an audit entry: all but its id, at and previous.
func entry(op protocol.Op, uid string, holder, actor *protocol.Holder, reason AuditReason) string {
	return fmt.Sprintf("%s %s holder=%s actor=%s %s", op, uid, who(holder), who(actor), reason)
}

// taken is entry for the ops that carry previous: TakenOver and ForceReleased.
func taken(op protocol.Op, uid string, holder, previous, actor *protocol.Holder, reason AuditReason) string {
	return entry(op, uid, holder, actor, reason) + " previous=" + who(previous)
}

func who(h *protocol.Holder) string {
	if h == nil {
		return "null"
	}
	return h.OID + "/" + h.Name
}

func entriesOf(t *testing.T, page AuditPage) []string {
	t.Helper()
	var out []string
	for _, e := range page.Entries {
		if e.EntityType != "ApprovalRequest" {
			t.Errorf("entry %s of type %q", e.ID, e.EntityType)
		}
		if hasPrevious(e.Op) {
			out = append(out, taken(e.Op, e.EntityUID, e.Holder, e.Previous, e.Actor, e.Reason))
			continue
		}
		if e.Previous != nil {
			t.Errorf("entry %s (%s) has previous %+v", e.ID, e.Op, e.Previous)
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
		taken(protocol.OpTakenOver, "r-1", &margot, &ada, &margot, AuditTakeover),
		entry(protocol.OpReleased, "r-1", &margot, &margot, AuditRelease),
		entry(protocol.OpAcquired, "r-2", &margot, &margot, AuditTakeover),
		entry(protocol.OpReleased, "r-2", &margot, &margot, AuditDecision),
		entry(protocol.OpAcquired, "r-3", &grace, &grace, AuditClaim),
		entry(protocol.OpReleased, "r-3", &grace, &grace, AuditDisconnect),
		entry(protocol.OpAcquired, "r-4", &ada, &ada, AuditClaim),
		taken(OpForceReleased, "r-4", &ada, &ada, &admin, AuditAdmin),
		entry(protocol.OpAcquired, "r-5", &ada, &ada, AuditClaim),
		entry(protocol.OpExpired, "r-5", &ada, nil, AuditExpiry),
		entry(protocol.OpAcquired, "r-6", &grace, nil, AuditForeign),
		taken(protocol.OpTakenOver, "r-6", &margot, &grace, nil, AuditForeign),
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
		"holder": `{"oid":"u-ada","name":"Ada Lovelace"}`, "previous": `{"oid":"u-ada","name":"Ada Lovelace"}`,
		"actor": `{"oid":"u-root","name":"Rita Root"}`, "reason": "admin", "at": got[8].At.String(),
	}
	if fmt.Sprint(raw) != fmt.Sprint(wantRaw) {
		t.Fatalf("raw entry %v, want %v", raw, wantRaw)
	}
	// The admin API's JSON (PROTOCOL.md §10): previous on TakenOver and ForceReleased
	// only, in the order the contract shows.
	for i, want := range map[int]string{
		0: `{"id":"%s","op":"Acquired","entityType":"ApprovalRequest","entityUid":"r-1",` +
			`"holder":{"oid":"u-ada","name":"Ada Lovelace"},"actor":{"oid":"u-ada","name":"Ada Lovelace"},"reason":"claim","at":"%s"}`,
		1: `{"id":"%s","op":"TakenOver","entityType":"ApprovalRequest","entityUid":"r-1",` +
			`"holder":{"oid":"u-margaret","name":"Margaret Hamilton"},"previous":{"oid":"u-ada","name":"Ada Lovelace"},` +
			`"actor":{"oid":"u-margaret","name":"Margaret Hamilton"},"reason":"takeover","at":"%s"}`,
		12: `{"id":"%s","op":"TakenOver","entityType":"ApprovalRequest","entityUid":"r-6",` +
			`"holder":{"oid":"u-margaret","name":"Margaret Hamilton"},"previous":{"oid":"u-grace","name":"Grace Hopper"},` +
			`"actor":null,"reason":"foreign","at":"%s"}`,
	} {
		b, err := json.Marshal(got[i])
		if err != nil {
			t.Fatal(err)
		}
		if w := fmt.Sprintf(want, got[i].ID, got[i].At); string(b) != w {
			t.Errorf("entry %d as JSON:\n%s\nwant:\n%s", i, b, w)
		}
	}
	if b, _ := json.Marshal(AuditEntry{Op: protocol.OpTakenOver}); !strings.Contains(string(b), `"previous":null`) {
		t.Errorf("a TakenOver of nobody known: %s, want previous null", b)
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

// testAuditMaxEntries: the trail never holds more than its cap, exactly, the newest
// kept; what the cap drops before the retention is counted and warned of at most once
// per 10 s per tenant, naming --audit-max-entries.
func testAuditMaxEntries(t *testing.T, b backend) {
	c := b.client(t)
	const max = 100
	// A rate of changes that lets one person fill the cap at once (the default would
	// refuse the 201st change: PROTOCOL.md §4).
	s, logs := newStore(t, c, Config{AuditMaxEntries: max, MaxChangesPerPerson: 1e6, ChangesBurst: 1e6})
	tenant := fmt.Sprintf("audc-%d", time.Now().UnixNano())
	ctx := ctxT(t)
	ref := Ref{tenant, "ApprovalRequest", "r-1"}
	start := time.Now()
	for range 3 * max { // 6 * max entries
		expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, ""))
		expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, ref, ada, ""))
	}
	// A second tenant over its cap by two: its own warning.
	other := tenant + "-other"
	oref := Ref{other, "ApprovalRequest", "r-1"}
	for range max/2 + 1 {
		expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, oref, grace, ""))
		expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, oref, grace, ""))
	}
	elapsed := time.Since(start)

	msgs, err := c.XRange(ctx, AuditKey(tenant), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != max {
		t.Fatalf("the trail holds %d entries after %d, want exactly the cap %d", len(msgs), 6*max, max)
	}
	if msgs[0].Values["op"] != "Acquired" || msgs[max-1].Values["op"] != "Released" {
		t.Fatalf("the trail keeps %v .. %v, want the newest pairs", msgs[0].Values, msgs[max-1].Values)
	}
	if n, _ := c.XLen(ctx, AuditKey(other)).Result(); n != max {
		t.Fatalf("the other tenant's trail holds %d entries, want %d", n, max)
	}
	// Every entry dropped was minutes old, far younger than the default 720h.
	if n := testutil.ToFloat64(s.core.amet.trimmedEarly); n != 5*max+2 {
		t.Fatalf("lockhub_audit_trimmed_early_total %v, want %d", n, 5*max+2)
	}
	for _, tn := range []string{tenant, other} {
		var warned int
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "level=WARN") && strings.Contains(line, "raise --audit-max-entries") &&
				strings.Contains(line, "tenant="+tn+" ") {
				warned++
			}
		}
		if most := 1 + int(elapsed/limitWarnEvery); warned < 1 || warned > most {
			t.Errorf("%d warnings for tenant %s in %s, want 1 to %d:\n%s", warned, tn, elapsed, most, logs.String())
		}
	}

	d, _ := newStore(t, c, Config{})
	if got := d.core.auditArgs(time.Now(), nil, "")[1]; got != DefaultAuditMaxEntries {
		t.Fatalf("default cap %v, want %d", got, DefaultAuditMaxEntries)
	}
	if got, want := d.core.retentionArg(), (720 * time.Hour).Milliseconds(); got != want {
		t.Fatalf("default retention %v ms, want %d", got, want)
	}
	for name, tc := range map[string]struct {
		cfg     Config
		setting string
	}{
		"negative cap":         {Config{AuditMaxEntries: -1}, SettingAuditMaxEntries},
		"negative retention":   {Config{AuditRetention: -time.Hour}, SettingAuditRetention},
		"retention under a ms": {Config{AuditRetention: time.Microsecond}, SettingAuditRetention},
	} {
		tc.cfg.Client = c
		var se *protocol.SettingError
		if _, err := NewStore(tc.cfg); !errors.As(err, &se) || se.Setting != tc.setting {
			t.Errorf("%s: NewStore = %v, want a SettingError for %s", name, err, tc.setting)
		}
	}
}

// streamIDs are the ids of the tenant's audit entries, oldest first.
func streamIDs(t *testing.T, c redis.UniversalClient, tenant string) []string {
	t.Helper()
	msgs, err := c.XRange(ctxT(t), AuditKey(tenant), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// idMs is the ms part of a stream id.
func idMs(t *testing.T, id string) int64 {
	t.Helper()
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		t.Fatalf("stream id %q: %v", id, err)
	}
	return n
}

// testAuditRetention drives the store's clock (Config.Now) past the retention of
// entries whose ids Redis gave them: exactly the entries older than now minus the
// retention go as the next entry is added, an entry exactly that old stays, a read
// shows none older, the stream expires a retention after its newest entry, and a
// clock far ahead never drops the entry it adds. None of it counts as dropped early.
func testAuditRetention(t *testing.T, b backend) {
	c := b.client(t)
	const keep = time.Hour
	s, _ := newStore(t, c, Config{AuditRetention: keep})
	tenant := fmt.Sprintf("audt-%d", time.Now().UnixNano())
	ctx := ctxT(t)
	r := func(uid string) Ref { return Ref{tenant, "ApprovalRequest", uid} }
	at := func(ms int64) Config { // a store whose clock reads ms + the retention
		return Config{AuditRetention: keep, Now: func() time.Time { return time.UnixMilli(ms).Add(keep) }}
	}
	// kept checks that do, run at bound + the retention, dropped exactly the entries
	// with ids before bound and added one, and returns the ids left.
	kept := func(name string, bound int64, do func(*Store)) []string {
		t.Helper()
		before := streamIDs(t, c, tenant)
		st, _ := newStore(t, c, at(bound))
		do(st)
		after := streamIDs(t, c, tenant)
		var want []string
		for _, id := range before {
			if idMs(t, id) >= bound {
				want = append(want, id)
			}
		}
		if len(after) != len(want)+1 || !slices.Equal(after[:len(want)], want) || (len(before) > 0 && after[len(want)] <= before[len(before)-1]) {
			t.Fatalf("%s: ids %v, then %v after a change at bound %d + %s; want %v and one new", name, before, after, bound, keep, want)
		}
		if n := testutil.ToFloat64(st.core.amet.trimmedEarly); n != 0 {
			t.Fatalf("%s: %v entries counted as dropped early, want 0", name, n)
		}
		return after
	}

	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-1"), grace, ""))
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, r("r-1"), grace, ""))
	old := streamIDs(t, c, tenant)
	last := idMs(t, old[len(old)-1])
	// The next id starts a new millisecond, so old and young differ by their ms.
	redistest.Eventually(t, "the server's clock past the old entries", func() bool {
		now, err := c.Time(ctx).Result()
		return err == nil && now.UnixMilli() > last
	})
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-2"), ada, ""))
	young := streamIDs(t, c, tenant)[len(old)]

	// The young entry exactly a retention old: kept, the older ones dropped.
	ids := kept("at the young entry's age", idMs(t, young), func(st *Store) {
		expect(t, protocol.OutcomeAcquired)(st.Locks.Claim(ctx, r("r-3"), margot, ""))
	})
	if len(ids) != 2 || ids[0] != young {
		t.Fatalf("after the trim by age: %v, want the young entry %s and the new one", ids, young)
	}
	got := entriesOf(t, AuditPage{Entries: all(t, s, tenant, AuditQuery{})})
	want := []string{
		entry(protocol.OpAcquired, "r-2", &ada, &ada, AuditClaim),
		entry(protocol.OpAcquired, "r-3", &margot, &margot, AuditClaim),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the trail after the trim by age:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The stream goes a retention after its newest entry, when all of it is too old.
	if ttl, err := c.PTTL(ctx, AuditKey(tenant)).Result(); err != nil || ttl <= keep-time.Minute || ttl > keep {
		t.Fatalf("the stream's PTTL %s (%v), want about %s", ttl, err, keep)
	}
	// A read a ms later, before any change drops the young entry, no longer shows it.
	reader, _ := newStore(t, c, at(idMs(t, young)+1))
	var shown, newer []string
	for _, e := range all(t, reader, tenant, AuditQuery{}) {
		shown = append(shown, e.ID)
	}
	for _, id := range ids {
		if idMs(t, id) > idMs(t, young) {
			newer = append(newer, id)
		}
	}
	if !slices.Equal(shown, newer) {
		t.Fatalf("a read a ms past the young entry's age shows %v, want %v", shown, newer)
	}
	// A millisecond later the young entry is older than the retention: gone.
	kept("a ms past the young entry's age", idMs(t, young)+1, func(st *Store) {
		expect(t, protocol.OutcomeReleased)(st.Locks.Release(ctx, r("r-3"), margot, ""))
	})
	// A clock far ahead drops everything before it, but never the entry it adds.
	ids = kept("a clock far ahead", time.Now().Add(100*keep).UnixMilli(), func(st *Store) {
		expect(t, protocol.OutcomeAcquired)(st.Locks.Claim(ctx, r("r-4"), ada, ""))
	})
	if len(ids) != 1 {
		t.Fatalf("after a clock far ahead: %v, want only its own entry", ids)
	}
	if n := testutil.ToFloat64(s.core.amet.trimmedEarly); n != 0 {
		t.Fatalf("%v entries counted as dropped early, want 0", n)
	}
}

// testAuditEvidence is issue 25's case: Grace's lock taken over by an administrator,
// then Ada changes locks as fast as the store lets her. The per-person rate (default 5
// a second, bursts of 200) refuses her past the burst, so the TakenOver entry, naming
// Grace as previous, stays in a trail of 400 entries. The same flood through a store
// without the rate pushes it out, dropped early and warned of: the test tells the two
// apart. At the defaults one person needs 100,000 / 5 = 20,000 s, over five hours of
// changes, to fill a tenant's trail of 720h.
func testAuditEvidence(t *testing.T, b backend) {
	if d := time.Duration(DefaultAuditMaxEntries/DefaultMaxChangesPerPerson) * time.Second; d <= 5*time.Hour {
		t.Fatalf("at the defaults one person fills the trail in %s, want over five hours", d)
	}
	c := b.client(t)
	const max = 400
	admin := protocol.Holder{OID: "u-root", Name: "Rita Root"}
	for _, tc := range []struct {
		name     string
		rate     float64 // changes a second; 0: the default
		burst    int
		survives bool
	}{
		{"the default rate", 0, 0, true},
		{"no rate", 1e9, 1e9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := newStore(t, c, Config{AuditMaxEntries: max, MaxChangesPerPerson: tc.rate, ChangesBurst: tc.burst})
			tenant := fmt.Sprintf("aude-%d", time.Now().UnixNano())
			ctx := ctxT(t)
			ref := Ref{tenant, "ApprovalRequest", "r-1"}
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, grace, ""))
			expect(t, protocol.OutcomeTakenOver)(s.Locks.Takeover(ctx, ref, admin, "", true))

			// Ada claims and releases her own entity, 2*max times as fast as she can.
			flood := Ref{tenant, "ApprovalRequest", "r-2"}
			changes, refused, held := 0, 0, false
			for range 2 * max {
				var res Result
				var err error
				if held {
					res, err = s.Locks.Release(ctx, flood, ada, "")
				} else {
					res, err = s.Locks.Claim(ctx, flood, ada, "")
				}
				var re *RateError
				switch {
				case errors.As(err, &re):
					refused++
				case err != nil:
					t.Fatal(err)
				case res.Outcome != protocol.OutcomeAcquired && res.Outcome != protocol.OutcomeReleased:
					t.Fatalf("Ada's change %d answered %s", changes, res.Outcome)
				default:
					changes++
					held = !held
				}
			}
			trail, err := s.Console.Audit(ctx, tenant, AuditQuery{EntityUID: "r-1"})
			if err != nil {
				t.Fatal(err)
			}
			got := entriesOf(t, trail)
			takeover := taken(protocol.OpTakenOver, "r-1", &admin, &grace, &admin, AuditTakeover)
			early := testutil.ToFloat64(s.core.amet.trimmedEarly)
			warned := strings.Contains(logs.String(), "raise --audit-max-entries")
			t.Logf("Ada: %d changes written, %d refused; the trail of r-1: %q; %v dropped early", changes, refused, got, early)
			if tc.survives {
				if refused == 0 || changes >= max {
					t.Fatalf("the rate let Ada write %d changes and refused %d; want refusals past the burst", changes, refused)
				}
				if !slices.Contains(got, takeover) || early != 0 || warned {
					t.Fatalf("the takeover entry is gone after Ada's flood (dropped early %v, warned %v): %q", early, warned, got)
				}
				return
			}
			if refused != 0 || changes != 2*max {
				t.Fatalf("without a rate Ada wrote %d changes, %d refused; want %d", changes, refused, 2*max)
			}
			if slices.Contains(got, takeover) || early != float64(2+changes-max) || !warned {
				t.Fatalf("without a rate the flood of %d kept the takeover (dropped early %v, warned %v): %q", changes, early, warned, got)
			}
		})
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
	ls := adminLocks(t, s, tenant)
	var got []string
	for _, l := range ls {
		got = append(got, l.EntityType+"/"+l.EntityUID+"/"+l.HolderOID)
	}
	slices.Sort(got)
	want := []string{"ApprovalRequest/r-1/u-ada", "ApprovalRequest/r-2/u-grace", "Shipment/s-1/u-margaret"}
	if !slices.Equal(got, want) {
		t.Fatalf("AdminLocksJSON = %v, want %v", got, want)
	}
	if got := adminLocks(t, s, tenant+"-none"); len(got) != 0 {
		t.Fatalf("AdminLocksJSON of a tenant without locks = %v", got)
	}
	if _, err := s.Console.AdminLocksJSON(ctx, "a b"); !isCode(err, protocol.CodeInvalidEntity) {
		t.Fatalf("a bad tenant: %v", err)
	}
	if _, err := s.Console.ForceRelease(ctx, Ref{tenant, "Nope", "x"}, ada); !isCode(err, protocol.CodeNotLockable) {
		t.Fatalf("force release of an unlockable type: %v", err)
	}
}

// adminLocks is the console's list of tenant, decoded: it must be a JSON array of locks.
func adminLocks(t *testing.T, s *Store, tenant string) []protocol.Lock {
	t.Helper()
	b, err := s.Console.AdminLocksJSON(ctxT(t), tenant)
	if err != nil {
		t.Fatal(err)
	}
	var ls []protocol.Lock
	if err := json.Unmarshal(b, &ls); err != nil {
		t.Fatalf("AdminLocksJSON answered %q: %v", b, err)
	}
	return ls
}
