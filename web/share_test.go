package web_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
)

// TestFairShareHTTP: the fair share of PROTOCOL.md §4 over HTTP, on two instances
// sharing one real redis-server: the person's quota and rate are counted across them,
// and a refusal is 429 with the code, a message naming the setting and Retry-After.
func TestFairShareHTTP(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		rdb := redistest.StartServer(t).Client(t)
		testPersonShareHTTP(t, rdb)
		testTenantQuotaHTTP(t, rdb)
	})
	t.Run("cluster", func(t *testing.T) {
		rdb := redistest.StartCluster(t).Client(t)
		testPersonShareHTTP(t, rdb)
		testTenantQuotaHTTP(t, rdb)
	})
}

func testPersonShareHTTP(t *testing.T, rdb redis.UniversalClient) {
	share := func(c *locks.Config) { c.MaxLocksPerPerson, c.MaxChangesPerPerson, c.ChangesBurst = 2, 0.01, 4 }
	a := newEnv(t, envOpts{lockRDB: rdb, noDemo: true, store: share})
	b := newEnv(t, envOpts{lockRDB: rdb, noDemo: true, store: share})
	// Each instance signs development tokens of its own: the same person twice.
	adaA, adaB := a.token("share", "u-ada", "Ada Lovelace"), b.token("share", "u-ada", "Ada Lovelace")
	path := func(uid string) string { return "/api/locks/ApprovalRequest/" + uid }

	wantOutcome(t, a.do(req{method: "POST", path: path("r-1"), token: adaA}), 200, "acquired")
	wantOutcome(t, b.do(req{method: "POST", path: path("r-2"), token: adaB}), 200, "acquired")
	r := b.do(req{method: "POST", path: path("r-3"), token: adaB})
	wantStatus(t, r, 429, "too_many_locks")
	if !strings.Contains(r.str("message"), locks.SettingLocksPerPerson) {
		t.Fatalf("the refusal does not name the limit: %s", r.raw)
	}
	// PROTOCOL.md §5 (version 3): every fair-share refusal over HTTP carries
	// Retry-After; for the quota it is the lease, within which a lock nobody renews is
	// gone.
	if got, want := r.header.Get("Retry-After"), strconv.Itoa(int(locks.DefaultLease.Seconds())); got != want {
		t.Fatalf("too_many_locks: Retry-After %q, want %s (the lease)", got, want)
	}
	// A lock she holds may be claimed again: a renewal is never refused.
	wantOutcome(t, b.do(req{method: "POST", path: path("r-1"), token: adaB}), 200, "renewed")
	wantStatus(t, a.do(req{method: "GET", path: path("r-3"), token: adaA}), 404, "")

	// Two changes are left of the burst of 4: a release and a claim; the next is refused.
	wantOutcome(t, a.do(req{method: "DELETE", path: path("r-2"), token: adaA}), 200, "released")
	wantOutcome(t, a.do(req{method: "POST", path: path("r-3"), token: adaA}), 200, "acquired")
	r = b.do(req{method: "DELETE", path: path("r-3"), token: adaB})
	wantStatus(t, r, 429, "rate_limited")
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q, want whole seconds, at least 1", r.header.Get("Retry-After"))
	}
	wantStatus(t, a.do(req{method: "GET", path: path("r-3"), token: adaA}), 200, "")
}

// testTenantQuotaHTTP: the tenant's quota over HTTP, the .NET API's locks counted toward
// it and never refused; the refusal names the tenant's limit.
func testTenantQuotaHTTP(t *testing.T, rdb redis.UniversalClient) {
	e := newEnv(t, envOpts{lockRDB: rdb, noDemo: true, store: func(c *locks.Config) { c.MaxLocksPerTenant = 2 }})
	path := func(uid string) string { return "/api/locks/ApprovalRequest/" + uid }
	wantOutcome(t, e.do(req{method: "POST", path: path("r-1"), token: e.token("quota", "u-ada", "Ada Lovelace")}), 200, "acquired")
	net := redistest.DotNet{C: rdb}
	for _, uid := range []string{"n-1", "n-2"} { // the second is over the quota: written all the same
		if ok, _, err := net.Claim(t.Context(), "quota", "ApprovalRequest", uid, "u-margot", "Margot Hamilton"); err != nil || !ok {
			t.Fatalf(".NET claim of %s: %v %v, want it written (other programs are never refused)", uid, ok, err)
		}
	}
	r := e.do(req{method: "POST", path: path("r-2"), token: e.token("quota", "u-grace", "Grace Hopper")})
	wantStatus(t, r, 429, "too_many_locks")
	if !strings.Contains(r.str("message"), locks.SettingLocksPerTenant) {
		t.Fatalf("the refusal does not name the tenant's limit: %s", r.raw)
	}
	if r.header.Get("Retry-After") == "" {
		t.Fatal("too_many_locks without Retry-After")
	}
	// Another tenant is not affected.
	wantOutcome(t, e.do(req{method: "POST", path: path("r-2"), token: e.token("quota-other", "u-grace", "Grace Hopper")}), 200, "acquired")
}
