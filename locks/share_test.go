package locks

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestFairShare proves the fair share of PROTOCOL.md §4 (version 3) on miniredis, a
// real redis-server and the 6-node cluster: the quotas and the rate are counted in
// Redis, so two stores (two instances) share them, and a refusal writes nothing.
func TestFairShare(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("locks per person", func(t *testing.T) { testLocksPerPerson(t, b) })
			t.Run("locks per tenant", func(t *testing.T) { testLocksPerTenant(t, b) })
			t.Run("changes per person", func(t *testing.T) { testChangesPerPerson(t, b) })
			t.Run("mine reads the person's index", func(t *testing.T) { testMineIndex(t, b) })
		})
	}
}

// isLimit reports whether err is the *LimitError of setting.
func isLimit(err error, setting string) bool {
	var le *LimitError
	return errors.As(err, &le) && le.Setting == setting && le.ErrorCode() == protocol.CodeTooManyLocks
}

func testLocksPerPerson(t *testing.T, b backend) {
	c := b.client(t)
	tenant := "share-person-" + b.name
	reg := prometheus.NewRegistry()
	a, logs := newStore(t, c, Config{MaxLocksPerPerson: 3, Timeout: 10 * time.Second, Registerer: reg})
	other, _ := newStore(t, c, Config{MaxLocksPerPerson: 3, Timeout: 10 * time.Second}) // another instance
	ctx := ctxT(t)
	r := func(uid string) Ref { return Ref{tenant, "ApprovalRequest", uid} }

	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, r("r-1"), ada, "c-1"))
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, r("r-2"), ada, "c-2"))
	expect(t, protocol.OutcomeAcquired)(other.Locks.Claim(ctx, r("r-3"), ada, "")) // over HTTP, elsewhere

	// A fourth, through either instance, is refused and writes nothing.
	for _, s := range []*Store{a, other} {
		if _, err := s.Locks.Claim(ctx, r("r-4"), ada, "c-9"); !isLimit(err, SettingLocksPerPerson) {
			t.Fatalf("a fourth claim answered %v, want a LimitError of %s", err, SettingLocksPerPerson)
		}
	}
	if l := must1(a.Locks.Get(ctx, r("r-4"))); l != nil {
		t.Fatalf("a refused claim wrote %+v", l)
	}
	if _, err := a.Locks.Takeover(ctx, r("r-5"), ada, "", true); !isLimit(err, SettingLocksPerPerson) {
		t.Fatalf("a takeover beyond the quota answered %v, want a LimitError", err)
	}
	// Grace holds one; Ada may not take it over either, and Grace keeps it.
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, r("g-1"), grace, ""))
	if _, err := a.Locks.Takeover(ctx, r("g-1"), ada, "", true); !isLimit(err, SettingLocksPerPerson) {
		t.Fatalf("a takeover beyond the quota answered %v, want a LimitError", err)
	}
	if l := must1(a.Locks.Get(ctx, r("g-1"))); l == nil || l.HolderOID != grace.OID {
		t.Fatalf("a refused takeover changed the lock: %+v", l)
	}
	// A lock she holds may always be claimed again (another tab) and renewed.
	expect(t, protocol.OutcomeRenewed)(a.Locks.Claim(ctx, r("r-1"), ada, "c-tab2"))
	expect(t, protocol.OutcomeRenewed)(a.Locks.Renew(ctx, r("r-2"), ada, "c-2"))
	// One released anywhere makes room.
	expect(t, protocol.OutcomeReleased)(other.Locks.Release(ctx, r("r-3"), ada, ""))
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, r("r-4"), ada, "c-9"))

	if n := testutil.ToFloat64(a.core.met.limits.WithLabelValues(SettingLocksPerPerson)); n != 3 {
		t.Fatalf("lockhub_store_limit_hits_total{limit=%q} = %v, want 3", SettingLocksPerPerson, n)
	}
	if got := strings.Count(logs.String(), "raise --"+SettingLocksPerPerson); got != 1 {
		t.Fatalf("%d warnings naming --%s for 3 refusals in a row, want 1:\n%s", got, SettingLocksPerPerson, logs.String())
	}

	// Another program releases one of hers (the .NET API deciding the request), and no
	// sweep has looked since: her index still lists it, but a claim at the quota finds
	// the lock gone and is allowed. Her count is what she holds, not what lockhub saw.
	net := redistest.DotNet{C: c}
	if ok, err := net.Release(ctx, tenant, "ApprovalRequest", "r-4", ada.OID); err != nil || !ok {
		t.Fatalf(".NET release: %v %v", ok, err)
	}
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, r("r-6"), ada, "c-9"))
	if _, err := a.Locks.Claim(ctx, r("r-7"), ada, "c-9"); !isLimit(err, SettingLocksPerPerson) {
		t.Fatalf("a claim past the quota again answered %v, want a LimitError", err)
	}
	// A bulk claim counts the same way.
	if ok, err := net.Release(ctx, tenant, "ApprovalRequest", "r-6", ada.OID); err != nil || !ok {
		t.Fatalf(".NET release: %v %v", ok, err)
	}
	if res, err := a.Locks.ClaimMany(ctx, tenant, "ApprovalRequest", []string{"r-8"}, ada, "c-9"); err != nil || res.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("a bulk claim after another program released one of hers: %+v, %v; want acquired", res, err)
	}
}

func testLocksPerTenant(t *testing.T, b backend) {
	c := b.client(t)
	tenant := "share-tenant-" + b.name
	s, logs := newStore(t, c, Config{MaxLocksPerTenant: 3, Timeout: 10 * time.Second, Registerer: prometheus.NewRegistry()})
	ctx := ctxT(t)
	r := func(uid string) Ref { return Ref{tenant, "ApprovalRequest", uid} }
	net := redistest.DotNet{C: c}

	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-1"), ada, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-2"), grace, ""))
	// The .NET API's lock counts toward the tenant, and lockhub never refuses it.
	if ok, _, err := net.Claim(ctx, tenant, "ApprovalRequest", "n-1", margot.OID, margot.Name); err != nil || !ok {
		t.Fatalf(".NET claim: %v %v", ok, err)
	}
	if ok, _, err := net.Claim(ctx, tenant, "ApprovalRequest", "n-2", margot.OID, margot.Name); err != nil || !ok {
		t.Fatalf(".NET claim over the quota: %v %v, want it written (other programs are never refused)", ok, err)
	}
	if _, err := s.Locks.Claim(ctx, r("r-3"), margot, ""); !isLimit(err, SettingLocksPerTenant) {
		t.Fatalf("a claim with the tenant full answered %v, want a LimitError of %s", err, SettingLocksPerTenant)
	}
	if _, err := s.Locks.ClaimMany(ctx, tenant, "ApprovalRequest", []string{"r-3", "r-4"}, margot, ""); !isLimit(err, SettingLocksPerTenant) {
		t.Fatalf("a bulk claim with the tenant full answered %v, want a LimitError of %s", err, SettingLocksPerTenant)
	}
	if !strings.Contains((&LimitError{Setting: SettingLocksPerTenant, Limit: 3}).ClientMessage(), "max-locks-per-tenant") {
		t.Fatal("the message does not name the limit")
	}
	if n := testutil.ToFloat64(s.core.met.limits.WithLabelValues(SettingLocksPerTenant)); n != 2 {
		t.Fatalf("lockhub_store_limit_hits_total{limit=%q} = %v, want 2", SettingLocksPerTenant, n)
	}
	if got := strings.Count(logs.String(), "raise --"+SettingLocksPerTenant); got != 1 {
		t.Fatalf("%d warnings naming --%s for 2 refusals in a row, want 1:\n%s", got, SettingLocksPerTenant, logs.String())
	}
	// A takeover adds no lock to the tenant: it stays allowed.
	expect(t, protocol.OutcomeTakenOver)(s.Locks.Takeover(ctx, r("r-2"), ada, "", true))
	// Another tenant is not affected.
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant + "-x", "ApprovalRequest", "r-3"}, margot, ""))
	if _, err := net.Release(ctx, tenant, "ApprovalRequest", "n-1", margot.OID); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Release(ctx, tenant, "ApprovalRequest", "n-2", margot.OID); err != nil {
		t.Fatal(err)
	}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-3"), margot, ""))
}

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func testChangesPerPerson(t *testing.T, b backend) {
	c := b.client(t)
	tenant := "share-rate-" + b.name
	clk := &fakeClock{t: time.Now()}
	cfg := Config{MaxChangesPerPerson: 2, ChangesBurst: 4, Now: clk.Now, Timeout: 10 * time.Second}
	s, logs := newStore(t, c, Config{MaxChangesPerPerson: 2, ChangesBurst: 4, Now: clk.Now, Timeout: 10 * time.Second, Registerer: prometheus.NewRegistry()})
	other, _ := newStore(t, c, cfg)
	ctx := ctxT(t)
	r := func(uid string) Ref { return Ref{tenant, "ApprovalRequest", uid} }

	// Four changes (the burst), over two instances; renewals and refusals do not count.
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-1"), ada, "c-1"))
	for range 10 {
		expect(t, protocol.OutcomeRenewed)(other.Locks.Renew(ctx, r("r-1"), ada, "c-1"))
		expect(t, protocol.OutcomeLocked)(other.Locks.Claim(ctx, r("r-1"), grace, ""))
	}
	expect(t, protocol.OutcomeReleased)(other.Locks.Release(ctx, r("r-1"), ada, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("r-2"), ada, ""))
	expect(t, protocol.OutcomeAcquired)(other.Locks.Takeover(ctx, r("r-3"), ada, "", true))

	var re *RateError
	if _, err := s.Locks.Claim(ctx, r("r-4"), ada, ""); !errors.As(err, &re) || re.ErrorCode() != protocol.CodeRateLimited ||
		re.RetryAfter <= 0 || re.RetryAfter > 500*time.Millisecond {
		t.Fatalf("a fifth change answered %v, want a RateError within the 500 ms a change refills", err)
	}
	if _, err := other.Locks.Release(ctx, r("r-2"), ada, ""); !errors.As(err, &re) {
		t.Fatalf("a release over the rate answered %v, want a RateError", err)
	}
	if l := must1(s.Locks.Get(ctx, r("r-2"))); l == nil {
		t.Fatal("a refused release dropped the lock")
	}
	if l := must1(s.Locks.Get(ctx, r("r-4"))); l != nil {
		t.Fatalf("a refused claim wrote %+v", l)
	}
	// Grace has her own budget.
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("g-1"), grace, ""))
	// Half a second gives Ada one change again, and one only.
	clk.add(500 * time.Millisecond)
	expect(t, protocol.OutcomeReleased)(other.Locks.Release(ctx, r("r-2"), ada, ""))
	if _, err := s.Locks.Claim(ctx, r("r-4"), ada, ""); !errors.As(err, &re) {
		t.Fatalf("a second change after 500 ms answered %v, want a RateError", err)
	}
	// A force release is the administrator's change.
	admin := protocol.Holder{OID: "u-admin", Name: "Admin"}
	for i := range 4 {
		expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r(fmt.Sprintf("m-%d", i)), margot, ""))
		expect(t, protocol.OutcomeReleased)(s.Console.ForceRelease(ctx, r(fmt.Sprintf("m-%d", i)), admin))
	}
	if _, err := s.Console.ForceRelease(ctx, r("g-1"), admin); !errors.As(err, &re) {
		t.Fatalf("a fifth force release answered %v, want a RateError", err)
	}
	if n := testutil.ToFloat64(s.core.met.limits.WithLabelValues(SettingChangesPerPerson)); n != 3 {
		t.Fatalf("lockhub_store_limit_hits_total{limit=%q} = %v, want 3", SettingChangesPerPerson, n)
	}
	if got := strings.Count(logs.String(), "raise --"+SettingChangesPerPerson); got != 1 {
		t.Fatalf("%d warnings naming --%s for 3 refusals within 10 s, want 1:\n%s", got, SettingChangesPerPerson, logs.String())
	}
}

func testMineIndex(t *testing.T, b backend) {
	c := b.client(t)
	tenant := "share-mine-" + b.name
	reg, err := NewRegistry("ApprovalRequest", "Order")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newStore(t, c, Config{Registry: reg, Timeout: 10 * time.Second})
	ctx := ctxT(t)
	r := func(typ, uid string) Ref { return Ref{tenant, typ, uid} }
	uids := func(ls []protocol.Lock) string {
		var out []string
		for _, l := range ls {
			out = append(out, l.EntityType+"/"+l.EntityUID)
		}
		return strings.Join(out, " ")
	}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("ApprovalRequest", "r-1"), ada, ""))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("Order", "o-1"), ada, "c-1"))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r("ApprovalRequest", "r-2"), grace, ""))
	if got := uids(must1(s.Locks.Mine(ctx, tenant, ada.OID))); got != "ApprovalRequest/r-1 Order/o-1" {
		t.Fatalf("Ada's locks %q", got)
	}
	// Taken over: it is Margaret's now, no longer Ada's.
	expect(t, protocol.OutcomeTakenOver)(s.Locks.Takeover(ctx, r("ApprovalRequest", "r-1"), margot, "", true))
	if got := uids(must1(s.Locks.Mine(ctx, tenant, ada.OID))); got != "Order/o-1" {
		t.Fatalf("Ada's locks after a takeover %q", got)
	}
	if got := uids(must1(s.Locks.Mine(ctx, tenant, margot.OID))); got != "ApprovalRequest/r-1" {
		t.Fatalf("Margaret's locks after her takeover %q", got)
	}
	// Released on detach, and written by the .NET API: the index follows once lockhub
	// has seen the change (a sweep of the type).
	expect(t, protocol.OutcomeReleased)(s.Locks.Detach(ctx, r("Order", "o-1"), ada, "c-1", true))
	net := redistest.DotNet{C: c}
	if ok, _, err := net.Claim(ctx, tenant, "ApprovalRequest", "n-1", ada.OID, ada.Name); err != nil || !ok {
		t.Fatalf(".NET claim: %v %v", ok, err)
	}
	if err := s.Locks.Sweep(ctx, tenant, "ApprovalRequest", 0); err != nil {
		t.Fatal(err)
	}
	if got := uids(must1(s.Locks.Mine(ctx, tenant, ada.OID))); got != "ApprovalRequest/n-1" {
		t.Fatalf("Ada's locks after a detach and a .NET claim %q", got)
	}
	if _, err := net.Release(ctx, tenant, "ApprovalRequest", "n-1", ada.OID); err != nil {
		t.Fatal(err)
	}
	if got := uids(must1(s.Locks.Mine(ctx, tenant, ada.OID))); got != "" {
		t.Fatalf("Ada's locks after the .NET release %q, want none: the value says so at once", got)
	}
}
