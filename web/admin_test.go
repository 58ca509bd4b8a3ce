package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/web"
)

// TestAdminAPI drives the lock console of PROTOCOL.md §10 over HTTP: every route with
// and without the admin role, another tenant's entities, the audit trail's filters,
// cursor and limits, and a configured role.
func TestAdminAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	boss := e.token("acme", "u-boss", "Grace Hopper", "Locks.TakeOver") // takeover is not admin
	root := e.token("acme", "u-root", "Rita Root", "Locks.Admin")
	globex := e.token("globex", "u-g", "Gus Globex", "Locks.Admin")

	wantOutcome(t, e.do(req{method: "POST", path: lockPath, token: ada}), 200, "acquired")
	wantOutcome(t, e.do(req{method: "POST", path: "/api/locks/ApprovalRequest/r-1002", token: boss}), 200, "acquired")
	wantOutcome(t, e.do(req{method: "POST", path: lockPath, token: globex}), 200, "acquired") // globex's own r-1001

	for _, tok := range []string{ada, boss} {
		for _, q := range []req{
			{method: "GET", path: "/api/admin/locks"},
			{method: "DELETE", path: "/api/admin/" + strings.TrimPrefix(lockPath, "/api/")},
			{method: "GET", path: "/api/admin/audit"},
		} {
			q.token = tok
			r := e.do(q)
			wantStatus(t, r, 403, "forbidden")
			if r.str("message") == "" {
				t.Fatalf("%s %s: 403 without a message: %s", q.method, q.path, r.raw)
			}
		}
	}
	wantStatus(t, e.do(req{method: "GET", path: "/api/admin/locks"}), 401, "unauthorized")
	if l, _ := e.store.Locks.Get(t.Context(), ref("acme", "r-1001")); l == nil || l.HolderOID != "u-ada" {
		t.Fatalf("a refused force release changed the lock: %+v", l)
	}

	r := e.do(req{method: "GET", path: "/api/admin/locks", token: root})
	wantStatus(t, r, 200, "")
	if got := holders(r.list("locks")); got != "r-1001:u-ada r-1002:u-boss " {
		t.Fatalf("acme's locks: %s (%s)", got, r.raw)
	}
	r = e.do(req{method: "GET", path: "/api/admin/locks", token: globex})
	if got := holders(r.list("locks")); got != "r-1001:u-g " {
		t.Fatalf("globex's locks: %s", got)
	}

	// Another tenant's admin finds acme's r-1002 free in its own tenant.
	wantStatus(t, e.do(req{method: "DELETE", path: "/api/admin/locks/ApprovalRequest/r-1002", token: globex}), 404, "not_found")
	r = e.do(req{method: "DELETE", path: "/api/admin/locks/ApprovalRequest/r-1001", token: root})
	wantOutcome(t, r, 200, "released")
	equal(t, "the released lock's holder", r.obj("lock")["holderOid"], any("u-ada"))
	wantStatus(t, e.do(req{method: "DELETE", path: "/api/admin/locks/ApprovalRequest/r-1001", token: root}), 404, "not_found")
	wantStatus(t, e.do(req{method: "DELETE", path: "/api/admin/locks/ApprovalRequest/r%201", token: root}), 400, "invalid_entity")
	wantStatus(t, e.do(req{method: "DELETE", path: "/api/admin/locks/Invoice/i-1", token: root}), 400, "not_lockable")
	if l, _ := e.store.Locks.Get(t.Context(), ref("globex", "r-1001")); l == nil {
		t.Fatal("acme's force release freed globex's r-1001")
	}
	// Ada's lock is gone: her renewal is lost, and she may claim again.
	wantOutcome(t, e.do(req{method: "PUT", path: lockPath, token: ada}), 409, "lost")

	audit := func(tok string, q url.Values) resp {
		return e.do(req{method: "GET", path: "/api/admin/audit?" + q.Encode(), token: tok})
	}
	r = audit(root, nil)
	wantStatus(t, r, 200, "")
	entries := r.list("entries")
	if got := ops(entries); got != "ForceReleased:r-1001:u-root Acquired:r-1002:u-boss Acquired:r-1001:u-ada " {
		t.Fatalf("acme's audit: %s (%s)", got, r.raw)
	}
	if r.body["next"] != nil {
		t.Fatalf("next on the only page: %s", r.raw)
	}
	first := entries[0].(map[string]any)
	for _, k := range []string{"id", "op", "entityType", "entityUid", "holder", "actor", "reason", "at"} {
		if _, ok := first[k]; !ok {
			t.Fatalf("entry without %s: %v", k, first)
		}
	}
	equal(t, "reason", first["reason"], any("admin"))
	equal(t, "holder", first["holder"].(map[string]any)["oid"], any("u-ada"))
	// A force release says whose lock it was (PROTOCOL.md §10, version 3); an
	// acquisition carries no previous.
	equal(t, "previous", fmt.Sprint(first["previous"]), "map[name:Ada Lovelace oid:u-ada]")
	if p, ok := entries[1].(map[string]any)["previous"]; ok {
		t.Fatalf("an Acquired entry with previous %v: %s", p, r.raw)
	}

	// A page of one, then the cursor.
	r = audit(root, url.Values{"limit": {"1"}})
	next := r.str("next")
	if len(r.list("entries")) != 1 || next == "" {
		t.Fatalf("limit 1: %s", r.raw)
	}
	r = audit(root, url.Values{"limit": {"1"}, "before": {next}})
	if got := ops(r.list("entries")); got != "Acquired:r-1002:u-boss " || r.str("next") == "" {
		t.Fatalf("the second page: %s", r.raw)
	}
	r = audit(root, url.Values{"entityType": {"ApprovalRequest"}, "entityUid": {"r-1001"}})
	if got := ops(r.list("entries")); got != "ForceReleased:r-1001:u-root Acquired:r-1001:u-ada " {
		t.Fatalf("r-1001's trail: %s", got)
	}
	// globex's admin sees globex's entry only, even asking for acme's entity.
	r = audit(globex, url.Values{"entityUid": {"r-1002"}})
	if got := ops(r.list("entries")); got != "" {
		t.Fatalf("globex sees %s", got)
	}
	if got := ops(audit(globex, nil).list("entries")); got != "Acquired:r-1001:u-g " {
		t.Fatalf("globex's audit: %s", got)
	}

	for name, q := range map[string]url.Values{
		"limit 0":           {"limit": {"0"}},
		"limit -1":          {"limit": {"-1"}},
		"limit 501":         {"limit": {"501"}},
		"limit not a count": {"limit": {"ten"}},
		"limit 1.5":         {"limit": {"1.5"}},
		"limit +5":          {"limit": {"+5"}},
		"cursor garbage":    {"before": {"abc"}},
		"cursor half":       {"before": {"17"}},
		"cursor exclusive":  {"before": {"(1-1"}},
	} {
		t.Run(name, func(t *testing.T) { wantStatus(t, audit(root, q), 400, "bad_request") })
	}
	for name, q := range map[string]url.Values{
		"uid with a space":  {"entityUid": {"r 1"}},
		"type with a brace": {"entityType": {"a{b"}},
	} {
		t.Run(name, func(t *testing.T) { wantStatus(t, audit(root, q), 400, "invalid_entity") })
	}
	wantStatus(t, audit(root, url.Values{"limit": {"500"}}), 200, "")

	metrics := e.do(req{method: "GET", path: "/metrics"})
	for _, m := range []string{
		`lockhub_admin_force_releases_total{outcome="released"} 1`,
		`lockhub_admin_force_releases_total{outcome="notHeld"} 2`,
		`lockhub_audit_entries_written_total{op="ForceReleased"} 1`,
		`lockhub_audit_reads_total{outcome="read"}`,
	} {
		if !strings.Contains(string(metrics.raw), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

// TestAdminRoleConfigured: with Roles.Admin set, that role opens the console and the
// default one does not.
func TestAdminRoleConfigured(t *testing.T) {
	e := newEnvWith(t, func(c *web.Config) { c.Roles.Admin = "Ops.Locks" })
	wantStatus(t, e.do(req{method: "GET", path: "/api/admin/locks", token: e.token("acme", "u-a", "A", "Locks.Admin")}), 403, "forbidden")
	wantStatus(t, e.do(req{method: "GET", path: "/api/admin/locks", token: e.token("acme", "u-b", "B", "Ops.Locks")}), http.StatusOK, "")
}

// holders lists "uid:holderOid " of each lock, sorted by uid.
func holders(ls []any) string {
	var out []string
	for _, l := range ls {
		m := l.(map[string]any)
		out = append(out, m["entityUid"].(string)+":"+m["holderOid"].(string)+" ")
	}
	slices.Sort(out)
	return strings.Join(out, "")
}

// ops lists "op:uid:actorOid " of each audit entry, in order.
func ops(entries []any) string {
	var b strings.Builder
	for _, x := range entries {
		m := x.(map[string]any)
		actor, _ := m["actor"].(map[string]any)
		oid, _ := actor["oid"].(string)
		b.WriteString(m["op"].(string) + ":" + m["entityUid"].(string) + ":" + oid + " ")
	}
	return b.String()
}

func ref(tenant, uid string) locks.Ref {
	return locks.Ref{Tenant: tenant, Type: "ApprovalRequest", UID: uid}
}
