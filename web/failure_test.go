package web_test

import (
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestLockRedisDown: with the lock Redis dead, everything fails open and answers fast:
// operations answer unknown, reads show no lock, guarded writes proceed, /readyz says
// not ready; when Redis is back, so is readiness.
func TestLockRedisDown(t *testing.T) {
	lock := redistest.StartServer(t)
	e := newEnv(t, envOpts{lockRDB: client(t, lock.URL()), demoRDB: clientMini(t)})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	boss := e.token("acme", "u-boss", "Grace Hopper", "Locks.TakeOver")

	wantStatus(t, e.do(req{method: "GET", path: "/readyz"}), 200, "")
	wantOutcome(t, e.do(req{method: "POST", path: lockPath, token: ada}), 200, "acquired")
	lock.Kill(t)

	cases := []struct {
		name    string
		q       req
		status  int
		outcome string
	}{
		{"claim", req{method: "POST", path: "/api/locks/ApprovalRequest/r-1002", token: ada}, 200, "unknown"},
		{"renew", req{method: "PUT", path: lockPath, token: ada}, 200, "unknown"},
		{"release", req{method: "DELETE", path: lockPath, token: ada}, 200, "unknown"},
		{"takeover", req{method: "POST", path: lockPath + "/takeover", token: boss}, 200, "unknown"},
		{"takeover without the role", req{method: "POST", path: lockPath + "/takeover", token: ada}, 403, "forbidden"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			r := e.doT(t, c.q)
			wantOutcome(t, r, c.status, c.outcome)
			if r.body["lock"] != nil {
				t.Fatalf("a lock from a dead Redis: %s", r.raw)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %s; PROTOCOL.md §2 allows 2s", d)
			}
		})
	}
	wantStatus(t, e.do(req{method: "GET", path: lockPath, token: ada}), 404, "not_found")
	r := e.do(req{method: "GET", path: "/api/locks/ApprovalRequest", token: ada})
	wantStatus(t, r, 200, "")
	equal(t, "no locks listed", len(r.list("locks")), 0)
	r = e.do(req{method: "GET", path: "/api/me/locks", token: ada})
	wantStatus(t, r, 200, "")
	equal(t, "no locks of mine", len(r.list("locks")), 0)

	// Guarded writes proceed: Bob writes what Ada had locked before Redis died.
	bob := e.token("acme", "u-bob", "Bob Marley")
	wantStatus(t, e.do(req{method: "PUT", path: entityPath, token: bob, body: `{"title":"edited during the outage"}`}), 200, "")
	wantStatus(t, e.do(req{method: "POST", path: rowPath + "/approve", token: bob}), 200, "")
	if metric(t, e, "lockhub_store_fail_open_total") == 0 {
		t.Fatal("no fail-open was counted")
	}

	r = e.do(req{method: "GET", path: "/readyz"})
	wantStatus(t, r, 503, "not_ready")
	wantStatus(t, e.do(req{method: "GET", path: "/healthz"}), 200, "")

	lock.Restart(t)
	// go-redis re-dials on its own.
	redistest.Eventually(t, "ready once Redis came back", func() bool {
		return e.do(req{method: "GET", path: "/readyz"}).status == 200
	})
	wantOutcome(t, e.do(req{method: "POST", path: "/api/locks/ApprovalRequest/r-1003", token: ada}), 200, "acquired")
}

// TestDemoStoreDown: the rows are the application's database, not a cache: with their
// Redis dead the demo answers 503 store_unavailable, while the lock API and /readyz,
// which speak of the lock Redis only, carry on.
func TestDemoStoreDown(t *testing.T) {
	rows := redistest.StartServer(t)
	e := newEnv(t, envOpts{lockRDB: clientMini(t), demoRDB: client(t, rows.URL())})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	wantStatus(t, e.do(req{method: "GET", path: rowPath, token: ada}), 200, "")
	rows.Kill(t)

	for _, q := range []req{
		{method: "GET", path: "/api/approval-requests"},
		{method: "GET", path: rowPath},
		{method: "PUT", path: entityPath, body: `{"title":"x"}`},
		{method: "DELETE", path: entityPath},
		{method: "POST", path: rowPath + "/approve"},
		{method: "POST", path: rowPath + "/reject"},
	} {
		t.Run(q.method+" "+q.path, func(t *testing.T) {
			q.token = ada
			wantStatus(t, e.doT(t, q), 503, "store_unavailable")
		})
	}
	wantOutcome(t, e.do(req{method: "POST", path: lockPath, token: ada}), 200, "acquired")
	wantStatus(t, e.do(req{method: "GET", path: "/readyz"}), 200, "")
	if metric(t, e, "lockhub_demo_store_failures_total") < 6 {
		t.Fatal("demo store failures were not counted")
	}

	// A Redis that restarted empty: the tenant is seeded afresh.
	rows.Restart(t)
	redistest.Eventually(t, "rows back once their Redis came back", func() bool {
		return e.do(req{method: "GET", path: rowPath, token: ada}).status == 200
	})
}
