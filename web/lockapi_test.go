package web_test

import (
	"net/http"
	"testing"
	"time"
)

const lockPath = "/api/locks/ApprovalRequest/r-1001"

func TestLockAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	bob := e.token("acme", "u-bob", "Bob Marley")
	boss := e.token("acme", "u-boss", "Grace Hopper", "Locks.TakeOver")

	r := e.do(req{method: "POST", path: lockPath, token: ada})
	wantOutcome(t, r, 200, "acquired")
	lock := r.obj("lock")
	equal(t, "holderOid", lock["holderOid"], any("u-ada"))
	equal(t, "holderName", lock["holderName"], any("Ada Lovelace"))
	equal(t, "entityUid", lock["entityUid"], any("r-1001"))
	if _, ok := r.body["previousHolder"]; ok {
		t.Fatalf("previousHolder on a claim: %s", r.raw)
	}
	acquired := lock["acquiredAtUtc"]

	// The same holder again (another tab): renewed, acquiredAtUtc kept.
	r = e.do(req{method: "POST", path: lockPath, token: ada})
	wantOutcome(t, r, 200, "renewed")
	equal(t, "acquiredAtUtc kept", r.obj("lock")["acquiredAtUtc"], acquired)

	// Someone else: 409 with the lock in the body.
	r = e.do(req{method: "POST", path: lockPath, token: bob})
	wantOutcome(t, r, 409, "locked")
	equal(t, "the lock in the way", r.obj("lock")["holderOid"], any("u-ada"))

	r = e.do(req{method: "GET", path: lockPath, token: bob})
	wantStatus(t, r, 200, "")
	equal(t, "one lock", r.str("holderOid"), "u-ada")
	if _, err := time.Parse(time.RFC3339, r.str("expiresAtUtc")); err != nil {
		t.Fatalf("expiresAtUtc: %v", err)
	}

	r = e.do(req{method: "GET", path: "/api/locks/ApprovalRequest", token: bob})
	wantStatus(t, r, 200, "")
	equal(t, "listed", len(r.list("locks")), 1)

	r = e.do(req{method: "GET", path: "/api/me/locks", token: ada})
	equal(t, "ada's locks", len(r.list("locks")), 1)
	r = e.do(req{method: "GET", path: "/api/me/locks", token: bob})
	wantStatus(t, r, 200, "")
	if l := r.list("locks"); l == nil || len(l) != 0 {
		t.Fatalf("bob's locks: %s, want []", r.raw)
	}

	wantOutcome(t, e.do(req{method: "PUT", path: lockPath, token: ada}), 200, "renewed")
	r = e.do(req{method: "PUT", path: lockPath, token: bob})
	wantOutcome(t, r, 409, "lost")
	equal(t, "lost to", r.obj("lock")["holderOid"], any("u-ada"))
	r = e.do(req{method: "DELETE", path: lockPath, token: bob})
	wantOutcome(t, r, 409, "notHeld")

	// Takeover without the role: 403 with the current lock.
	r = e.do(req{method: "POST", path: lockPath + "/takeover", token: bob})
	wantOutcome(t, r, 403, "forbidden")
	equal(t, "forbidden shows the lock", r.obj("lock")["holderOid"], any("u-ada"))

	r = e.do(req{method: "POST", path: lockPath + "/takeover", token: boss})
	wantOutcome(t, r, 200, "takenOver")
	equal(t, "previous holder", r.obj("previousHolder")["oid"], any("u-ada"))
	equal(t, "new holder", r.obj("lock")["holderOid"], any("u-boss"))
	r = e.do(req{method: "POST", path: lockPath + "/takeover", token: boss}) // from oneself
	wantOutcome(t, r, 200, "takenOver")
	equal(t, "previous holder of one's own lock", r.obj("previousHolder")["oid"], any("u-boss"))

	// Ada lost it.
	wantOutcome(t, e.do(req{method: "PUT", path: lockPath, token: ada}), 409, "lost")

	r = e.do(req{method: "DELETE", path: lockPath, token: boss})
	wantOutcome(t, r, 200, "released")
	equal(t, "released lock", r.obj("lock")["holderOid"], any("u-boss"))
	wantStatus(t, e.do(req{method: "GET", path: lockPath, token: bob}), 404, "not_found")
	r = e.do(req{method: "DELETE", path: lockPath, token: boss})
	wantOutcome(t, r, 409, "notHeld")
	if r.body["lock"] != nil {
		t.Fatalf("notHeld of a free lock carries a lock: %s", r.raw)
	}
	wantOutcome(t, e.do(req{method: "PUT", path: lockPath, token: ada}), 409, "lost")

	// Takeover of a free entity is a claim.
	wantOutcome(t, e.do(req{method: "POST", path: lockPath + "/takeover", token: boss}), 200, "acquired")
}

func TestLockAPITenantsAreApart(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	other := e.token("globex", "u-bob", "Bob")
	wantOutcome(t, e.do(req{method: "POST", path: lockPath, token: ada}), 200, "acquired")
	// The same uid in another tenant is another entity.
	wantOutcome(t, e.do(req{method: "POST", path: lockPath, token: other}), 200, "acquired")
	r := e.do(req{method: "GET", path: "/api/locks/ApprovalRequest", token: other})
	equal(t, "globex sees its own", len(r.list("locks")), 1)
	equal(t, "holder", r.list("locks")[0].(map[string]any)["holderOid"], any("u-bob"))
}

func TestUnauthorized(t *testing.T) {
	e := newEnv(t, envOpts{})
	expired, err := e.dev.IssueWithExpiry("acme", "u-ada", "Ada", nil, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	other, err := newEnvDev(t)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issue("acme", "u-ada", "Ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	auths := map[string]string{
		"none":         "",
		"empty bearer": "Bearer ",
		"basic":        "Basic dTpw",
		"garbage":      "Bearer not.a.jwt",
		"expired":      "Bearer " + expired,
		"foreign key":  "Bearer " + foreign,
		"no scheme":    e.token("acme", "u-ada", "Ada"),
		"bearer twice": "Bearer Bearer x",
	}
	routes := []struct{ method, path string }{
		{"POST", lockPath}, {"PUT", lockPath}, {"DELETE", lockPath}, {"POST", lockPath + "/takeover"},
		{"GET", lockPath}, {"GET", "/api/locks/ApprovalRequest"}, {"GET", "/api/me/locks"},
		{"GET", "/api/approval-requests"}, {"GET", "/api/approval-requests/r-1001"},
		{"PUT", "/api/entities/ApprovalRequest/r-1001"}, {"DELETE", "/api/entities/ApprovalRequest/r-1001"},
		{"POST", "/api/approval-requests/r-1001/approve"}, {"POST", "/api/approval-requests/r-1001/reject"},
	}
	for name, auth := range auths {
		for _, rt := range routes {
			t.Run(name+" "+rt.method+" "+rt.path, func(t *testing.T) {
				r := e.doT(t, req{method: rt.method, path: rt.path, header: map[string]string{"Authorization": auth}, body: `{"title":"x"}`})
				wantStatus(t, r, http.StatusUnauthorized, "unauthorized")
				if r.str("message") == "" {
					t.Fatalf("no message: %s", r.raw)
				}
				if r.header.Get("WWW-Authenticate") == "" {
					t.Fatal("401 without WWW-Authenticate")
				}
			})
		}
	}
	if ks := keys(t, e.lockRDB, "*"); len(ks) != 0 {
		t.Fatalf("unauthorized requests wrote %v", ks)
	}
}
