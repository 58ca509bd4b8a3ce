package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestBadInput sends what a hostile or broken client sends, and checks each answer and
// that nothing was written: no lock key, no row changed.
func TestBadInput(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	// Seed the demo rows first, so "nothing written" compares like with like.
	wantStatus(t, e.do(req{method: "GET", path: "/api/approval-requests", token: ada}), 200, "")
	before := snapshot(t, e)

	long := strings.Repeat("a", 200)
	huge := `{"title":"` + strings.Repeat("x", 70<<10) + `"}`
	cases := []struct {
		name   string
		q      req
		status int
		code   string
	}{
		{"closing brace in uid", req{method: "POST", path: "/api/locks/ApprovalRequest/a%7Db"}, 400, "invalid_entity"},
		{"raw braces in uid", req{method: "POST", path: "/api/locks/ApprovalRequest/{x}"}, 400, "invalid_entity"},
		{"escaped braces in uid", req{method: "POST", path: "/api/locks/ApprovalRequest/%7Bx%7D"}, 400, "invalid_entity"},
		{"200-char uid", req{method: "POST", path: "/api/locks/ApprovalRequest/" + long}, 400, "invalid_entity"},
		{"unicode uid", req{method: "POST", path: "/api/locks/ApprovalRequest/r-%C3%A9t%C3%A9"}, 400, "invalid_entity"},
		{"space in uid", req{method: "POST", path: "/api/locks/ApprovalRequest/a%20b"}, 400, "invalid_entity"},
		{"slash in uid", req{method: "POST", path: "/api/locks/ApprovalRequest/a%2Fb"}, 400, "invalid_entity"},
		{"NUL in uid", req{method: "POST", path: "/api/locks/ApprovalRequest/a%00b"}, 400, "invalid_entity"},
		{"unknown type", req{method: "POST", path: "/api/locks/Invoice/i-1"}, 400, "not_lockable"},
		{"brace in type", req{method: "POST", path: "/api/locks/A%7Db/r-1"}, 400, "invalid_entity"},
		{"unknown type listed", req{method: "GET", path: "/api/locks/Invoice"}, 400, "not_lockable"},
		{"unknown type read", req{method: "GET", path: "/api/locks/Invoice/i-1"}, 400, "not_lockable"},
		{"renew hostile", req{method: "PUT", path: "/api/locks/ApprovalRequest/%7Bx%7D"}, 400, "invalid_entity"},
		{"release hostile", req{method: "DELETE", path: "/api/locks/ApprovalRequest/" + long}, 400, "invalid_entity"},
		{"takeover hostile", req{method: "POST", path: "/api/locks/ApprovalRequest/a%7Db/takeover"}, 400, "invalid_entity"},
		{"takeover unknown type", req{method: "POST", path: "/api/locks/Invoice/i-1/takeover"}, 400, "not_lockable"},
		{"huge claim body", req{method: "POST", path: lockPath, body: huge}, 413, "too_large"},
		{"huge chunked body", req{method: "POST", path: lockPath, body: strings.NewReader(huge)}, 413, "too_large"},

		{"row hostile uid", req{method: "GET", path: "/api/approval-requests/a%7Db"}, 400, "invalid_entity"},
		{"row unknown", req{method: "GET", path: "/api/approval-requests/r-9999"}, 404, "not_found"},
		{"update hostile uid", req{method: "PUT", path: "/api/entities/ApprovalRequest/%7Bx%7D", body: `{"title":"x"}`}, 400, "invalid_entity"},
		{"update unknown row", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-9999", body: `{"title":"x"}`}, 404, "not_found"},
		{"update unknown type", req{method: "PUT", path: "/api/entities/Invoice/i-1", body: `{"title":"x"}`}, 404, "not_found"},
		{"update not JSON", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `title=x`}, 400, "bad_request"},
		{"update truncated JSON", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `{"title":"x"`}, 400, "bad_request"},
		{"update array", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `["x"]`}, 400, "bad_request"},
		{"update two objects", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `{"title":"x"}{}`}, 400, "bad_request"},
		{"update no body", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001"}, 400, "bad_request"},
		{"update nothing", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `{}`}, 400, "bad_request"},
		{"update title mistyped", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `{"title":5}`}, 400, "bad_request"},
		{"update empty title", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `{"title":"  "}`}, 400, "bad_request"},
		{"update negative amount", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `{"amount":-1}`}, 400, "bad_request"},
		{"update fractional cents", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `{"amount":1.001}`}, 400, "bad_request"},
		{"update amount string", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: `{"amount":"12"}`}, 400, "bad_request"},
		{"update huge", req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", body: huge}, 413, "too_large"},
		{"delete hostile uid", req{method: "DELETE", path: "/api/entities/ApprovalRequest/" + long}, 400, "invalid_entity"},
		{"delete unknown row", req{method: "DELETE", path: "/api/entities/ApprovalRequest/r-9999"}, 404, "not_found"},
		{"approve hostile uid", req{method: "POST", path: "/api/approval-requests/a%7Db/approve"}, 400, "invalid_entity"},
		{"approve unknown row", req{method: "POST", path: "/api/approval-requests/r-9999/approve"}, 404, "not_found"},
		{"approve not JSON", req{method: "POST", path: "/api/approval-requests/r-1001/approve", body: "yes"}, 400, "bad_request"},
		{"approve comment mistyped", req{method: "POST", path: "/api/approval-requests/r-1001/approve", body: `{"comment":1}`}, 400, "bad_request"},
		{"approve huge", req{method: "POST", path: "/api/approval-requests/r-1001/approve", body: huge}, 413, "too_large"},
		{"reject huge comment", req{method: "POST", path: "/api/approval-requests/r-1001/reject", body: `{"comment":"` + strings.Repeat("é", 1001) + `"}`}, 400, "bad_request"},

		{"dev token not JSON", req{method: "POST", path: "/dev/token", body: "x"}, 400, "bad_request"},
		{"dev token hostile tenant", req{method: "POST", path: "/dev/token", body: `{"tenant":"a}b","oid":"u-1"}`}, 400, "invalid_entity"},
		{"dev token hostile oid", req{method: "POST", path: "/dev/token", body: `{"tenant":"acme","oid":"{u}"}`}, 400, "invalid_entity"},
		{"dev token long name", req{method: "POST", path: "/dev/token", body: `{"tenant":"acme","oid":"u-1","name":"` + long + `a"}`}, 400, "bad_request"},
		{"dev token roles mistyped", req{method: "POST", path: "/dev/token", body: `{"tenant":"acme","oid":"u-1","roles":"admin"}`}, 400, "bad_request"},
		{"dev token huge", req{method: "POST", path: "/dev/token", body: huge}, 413, "too_large"},

		{"PATCH a lock", req{method: "PATCH", path: lockPath}, 405, "method_not_allowed"},
		{"PUT the list", req{method: "PUT", path: "/api/locks/ApprovalRequest"}, 405, "method_not_allowed"},
		{"DELETE the list without uids", req{method: "DELETE", path: "/api/locks/ApprovalRequest"}, 400, "bad_request"},
		{"POST the list without a body", req{method: "POST", path: "/api/locks/ApprovalRequest"}, 400, "bad_request"},
		{"GET takeover", req{method: "GET", path: lockPath + "/takeover"}, 405, "method_not_allowed"},
		{"POST mine", req{method: "POST", path: "/api/me/locks"}, 405, "method_not_allowed"},
		{"GET approve", req{method: "GET", path: "/api/approval-requests/r-1001/approve"}, 405, "method_not_allowed"},
		{"POST a row", req{method: "POST", path: "/api/approval-requests/r-1001"}, 405, "method_not_allowed"},
		{"GET an entity", req{method: "GET", path: "/api/entities/ApprovalRequest/r-1001"}, 405, "method_not_allowed"},
		{"GET dev token", req{method: "GET", path: "/dev/token"}, 405, "method_not_allowed"},
		{"POST healthz", req{method: "POST", path: "/healthz"}, 405, "method_not_allowed"},
		{"unknown route", req{method: "GET", path: "/api/nope"}, 404, "not_found"},
		{"empty uid", req{method: "POST", path: "/api/locks/ApprovalRequest/"}, 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := c.q
			q.token = ada
			r := e.doT(t, q)
			wantStatus(t, r, c.status, c.code)
			if r.str("message") == "" {
				t.Fatalf("no message: %s", r.raw)
			}
			if c.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
		})
	}
	if after := snapshot(t, e); after != before {
		t.Fatalf("bad input wrote to Redis:\nbefore %s\nafter  %s", before, after)
	}
}

// snapshot returns every key and value of the env's Redis, for comparisons.
func snapshot(t *testing.T, e *env) string {
	t.Helper()
	var b strings.Builder
	for _, k := range keys(t, e.lockRDB, "*") {
		typ := e.lockRDB.Type(t.Context(), k).Val()
		b.WriteString(k + " " + typ + "=")
		switch typ {
		case "string":
			b.WriteString(e.lockRDB.Get(t.Context(), k).Val())
		case "set":
			b.WriteString(strings.Join(e.lockRDB.SMembers(t.Context(), k).Val(), ","))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestMethodNotAllowedNamesAllowed(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.do(req{method: "PATCH", path: lockPath, token: e.token("acme", "u-ada", "Ada")})
	wantStatus(t, r, 405, "method_not_allowed")
	got := strings.Join(r.header.Values("Allow"), ",")
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		if !strings.Contains(got, m) {
			t.Fatalf("Allow %q lacks %s", got, m)
		}
	}
}
