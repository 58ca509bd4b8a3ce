package web_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
)

// TestFairShareHTTP: the fair share of PROTOCOL.md §4 over HTTP, on two instances
// sharing one real redis-server: the person's quota and rate are counted across them,
// and a refusal is 429 with the code, a message naming the setting and Retry-After.
func TestFairShareHTTP(t *testing.T) {
	rdb := redistest.StartServer(t).Client(t)
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
