package web_test

import (
	"testing"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestOnCluster runs the lock API, the guard and the demo domain on a real Redis
// Cluster: every key of a tenant carries its hash tag, so the demo's scripts (seeding
// touches every row), pipelines and MGETs stay in one slot.
func TestOnCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	e := newEnv(t, envOpts{lockRDB: c.Client(t)})
	for _, tenant := range []string{"acme", "globex", "initech"} { // tenants on different slots
		ada := e.token(tenant, "u-ada", "Ada Lovelace")
		bob := e.token(tenant, "u-bob", "Bob Marley")
		r := e.do(req{method: "GET", path: "/api/approval-requests", token: ada})
		wantStatus(t, r, 200, "")
		if len(r.list("rows")) < 40 {
			t.Fatalf("%s: %d rows", tenant, len(r.list("rows")))
		}
		wantOutcome(t, e.do(req{method: "POST", path: lockPath, token: ada}), 200, "acquired")
		wantStatus(t, e.do(req{method: "PUT", path: entityPath, token: bob, body: `{"title":"x"}`}), 409, "locked")
		wantStatus(t, e.do(req{method: "PUT", path: entityPath, token: ada, body: `{"title":"checked"}`}), 200, "")
		wantStatus(t, e.do(req{method: "POST", path: rowPath + "/approve", token: ada}), 200, "")
		wantStatus(t, e.do(req{method: "POST", path: rowPath + "/reject", token: bob}), 409, "already_decided")
		wantStatus(t, e.do(req{method: "DELETE", path: "/api/entities/ApprovalRequest/r-1002", token: bob}), 204, "")
		r = e.do(req{method: "GET", path: "/api/me/locks", token: ada})
		equal(t, tenant+": lock released by approve", len(r.list("locks")), 0)
		wantStatus(t, e.do(req{method: "GET", path: "/readyz"}), 200, "")
	}
}
