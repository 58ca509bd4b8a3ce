package web_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lockhub/lockhub/protocol"
	"github.com/lockhub/lockhub/web"
)

// TestBulkLockAPI: POST and DELETE /api/locks/{type} (PROTOCOL.md §12): all or
// nothing, the locks of others in the way on 409, bad lists refused, another tenant's
// locks never in the way nor shown.
func TestBulkLockAPI(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	bob := e.token("acme", "u-bob", "Bob Marley")
	other := e.token("globex", "u-eve", "Eve")
	const path = "/api/locks/ApprovalRequest"

	wantOutcome(t, e.do(req{method: "POST", path: path + "/r-1002", token: bob}), 200, "acquired")
	wantOutcome(t, e.do(req{method: "POST", path: path + "/r-1001", token: other}), 200, "acquired") // globex's

	r := e.do(req{method: "POST", path: path, token: ada, body: `{"uids":["r-1001","r-1002","r-1003"]}`})
	wantOutcome(t, r, 409, "locked")
	if l := r.list("locks"); len(l) != 1 || l[0].(map[string]any)["holderOid"] != "u-bob" {
		t.Fatalf("the locks in the way: %s, want Bob's alone (never globex's)", r.raw)
	}
	wantStatus(t, e.do(req{method: "GET", path: path + "/r-1001", token: ada}), 404, "not_found") // nothing written

	r = e.do(req{method: "POST", path: path, token: ada, body: `{"uids":["r-1001","r-1003"]}`})
	wantOutcome(t, r, 200, "acquired")
	if l := r.list("locks"); len(l) != 2 || l[0].(map[string]any)["entityUid"] != "r-1001" || l[1].(map[string]any)["holderOid"] != "u-ada" {
		t.Fatalf("claimed: %s", r.raw)
	}

	many := make([]string, protocol.MaxBulk+1)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("r-%d", i))
	}
	for _, tc := range []struct {
		name, body, code string
	}{
		{"101 uids", `{"uids":[` + strings.Join(many, ",") + `]}`, "bad_request"},
		{"duplicates", `{"uids":["r-1","r-1"]}`, "bad_request"},
		{"none", `{"uids":[]}`, "bad_request"},
		{"no uids member", `{"uid":"r-1"}`, "bad_request"},
		{"uids not strings", `{"uids":[1,2]}`, "bad_request"},
		{"not JSON", `uids=r-1`, "bad_request"},
		{"a hostile uid", `{"uids":["r-1","r}{2"]}`, "invalid_entity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus(t, e.doT(t, req{method: "POST", path: path, token: ada, body: tc.body}), 400, tc.code)
		})
	}
	wantStatus(t, e.do(req{method: "POST", path: "/api/locks/Payroll", token: ada, body: `{"uids":["r-1"]}`}), 400, "not_lockable")
	wantStatus(t, e.do(req{method: "DELETE", path: path + "?uid=r-1&uid=r-1", token: ada}), 400, "bad_request")
	wantStatus(t, e.do(req{method: "DELETE", path: path, token: ada}), 400, "bad_request")

	r = e.do(req{method: "DELETE", path: path + "?uid=r-1001&uid=r-1002&uid=r-1003", token: ada})
	wantOutcome(t, r, 200, "released")
	equal(t, "count", r.body["count"], any(2.0)) // r-1002 is Bob's
	wantStatus(t, e.do(req{method: "GET", path: path + "/r-1001", token: ada}), 404, "not_found")
	wantStatus(t, e.do(req{method: "GET", path: path + "/r-1001", token: other}), 200, "") // globex's stays
}

// TestDemoApproveMany: the demo's bulk approve claims every row, approves the pending
// ones, releases them, and answers the rows; a row someone else holds makes it 409
// with their lock, and nothing is decided.
func TestDemoApproveMany(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	bob := e.token("acme", "u-bob", "Bob Marley")
	const approve = "/api/approval-requests/approve"

	wantOutcome(t, e.do(req{method: "POST", path: "/api/locks/ApprovalRequest/r-1002", token: bob}), 200, "acquired")
	r := e.do(req{method: "POST", path: approve, token: ada, body: `{"uids":["r-1001","r-1002","r-1003"]}`})
	wantStatus(t, r, 409, "locked")
	if l := r.list("locks"); len(l) != 1 || l[0].(map[string]any)["holderName"] != "Bob Marley" {
		t.Fatalf("409 names %s, want Bob's lock", r.raw)
	}
	equal(t, "r-1001 still pending", e.do(req{method: "GET", path: "/api/approval-requests/r-1001", token: ada}).str("status"), "pending")
	wantStatus(t, e.do(req{method: "GET", path: "/api/locks/ApprovalRequest/r-1001", token: ada}), 404, "not_found")

	// r-1004 is decided already: it comes back as it stands.
	wantStatus(t, e.do(req{method: "POST", path: "/api/approval-requests/r-1004/reject", token: bob}), 200, "")
	r = e.do(req{method: "POST", path: approve, token: ada, body: `{"uids":["r-1001","r-1003","r-1004"]}`})
	wantStatus(t, r, 200, "")
	rows := r.list("rows")
	if len(rows) != 3 {
		t.Fatalf("rows %s", r.raw)
	}
	for i, want := range []string{"approved", "approved", "rejected"} {
		if got := rows[i].(map[string]any)["status"]; got != want {
			t.Errorf("row %d is %v, want %s", i, got, want)
		}
	}
	// Released, as a decision.
	wantStatus(t, e.do(req{method: "GET", path: "/api/locks/ApprovalRequest/r-1001", token: ada}), 404, "not_found")
	wantStatus(t, e.do(req{method: "POST", path: approve, token: ada, body: `{"uids":["r-9999"]}`}), 404, "not_found")
	wantStatus(t, e.do(req{method: "POST", path: approve, token: ada, body: `{"uids":["r-1","r-1"]}`}), 400, "bad_request")
}

// manyReader is a web.ManyReader with fixed answers.
type manyReader struct {
	locks []*protocol.Lock
	err   error
}

func (m manyReader) LookupMany(context.Context, string, string, []string) ([]*protocol.Lock, error) {
	return m.locks, m.err
}

// TestGuardMany: the bulk guard lets free and own entities through, stops a write
// when anyone else holds one with every lock in the way, passes when the store fails
// (counted), and refuses a bad list.
func TestGuardMany(t *testing.T) {
	mine := &protocol.Lock{EntityType: "ApprovalRequest", EntityUID: "r-1", HolderOID: "u-ada", HolderName: "Ada"}
	theirs := &protocol.Lock{EntityType: "ApprovalRequest", EntityUID: "r-2", HolderOID: "u-bob", HolderName: "Bob"}
	for _, tc := range []struct {
		name   string
		store  manyReader
		status int
		body   string
	}{
		{"free", manyReader{locks: []*protocol.Lock{nil, nil}}, 200, "ran"},
		{"mine", manyReader{locks: []*protocol.Lock{mine, nil}}, 200, "ran"},
		{"locked", manyReader{locks: []*protocol.Lock{mine, theirs}}, 409, `"locks":[{"entityType":"ApprovalRequest","entityUid":"r-2"`},
		{"store down", manyReader{err: errors.New("locks: store unavailable")}, 200, "ran"},
		{"bad list", manyReader{err: protocol.CheckEntityUIDs("the uids", nil)}, 400, `"code":"bad_request"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := web.GuardMany(web.GuardManyConfig{
				Store:    tc.store,
				Identify: func(*http.Request) (string, string, error) { return "acme", "u-ada", nil },
				Entities: func(r *http.Request) (string, []string, bool, error) {
					uids, err := web.ReadUIDs(r)
					return "ApprovalRequest", uids, err == nil, err
				},
			})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				uids, err := web.ReadUIDs(r) // the body is still there for the handler
				if err != nil || len(uids) != 2 {
					t.Errorf("the handler read %q, %v", uids, err)
				}
				_, _ = w.Write([]byte("ran"))
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/x", strings.NewReader(`{"uids":["r-1","r-2"]}`)))
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
				t.Fatalf("answered %d %s, want %d with %s", rec.Code, rec.Body, tc.status, tc.body)
			}
		})
	}
}
