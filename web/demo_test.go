package web_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/web/demo"
)

const rowPath = "/api/approval-requests/r-1001"
const entityPath = "/api/entities/ApprovalRequest/r-1001"

func TestDemoRows(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")

	r := e.do(req{method: "GET", path: "/api/approval-requests", token: ada})
	wantStatus(t, r, 200, "")
	rows := r.list("rows")
	if len(rows) < 40 {
		t.Fatalf("%d rows, want at least 40", len(rows))
	}
	for i, x := range rows {
		row := x.(map[string]any)
		equal(t, "uid", row["uid"], any(fmt.Sprintf("r-%d", 1001+i)))
		equal(t, "status", row["status"], any("pending"))
		equal(t, "currency", row["currency"], any("EUR"))
		equal(t, "decidedBy", row["decidedBy"], nil)
		equal(t, "decidedAtUtc", row["decidedAtUtc"], nil)
		for _, k := range []string{"title", "requester"} {
			if s, _ := row[k].(string); s == "" {
				t.Fatalf("row %d lacks %s: %v", i, k, row)
			}
		}
		if a, _ := row["amount"].(float64); a <= 0 {
			t.Fatalf("row %d amount %v", i, row["amount"])
		}
	}

	r = e.do(req{method: "GET", path: rowPath, token: ada})
	wantStatus(t, r, 200, "")
	equal(t, "ETag", r.header.Get("ETag"), `"1"`)
	equal(t, "version", r.body["version"], any(1.0))

	// Every tenant starts with the same set.
	r = e.do(req{method: "GET", path: "/api/approval-requests", token: e.token("globex", "u-x", "X")})
	equal(t, "globex rows", len(r.list("rows")), len(rows))
}

func TestDemoUpdate(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")

	r := e.do(req{method: "PUT", path: entityPath, token: ada, body: `{"title":"Detention, 7 h","amount":612.5}`})
	wantStatus(t, r, 200, "")
	equal(t, "title", r.str("title"), "Detention, 7 h")
	equal(t, "amount", r.body["amount"], any(612.5))
	equal(t, "version", r.body["version"], any(2.0))
	equal(t, "ETag", r.header.Get("ETag"), `"2"`)
	equal(t, "updatedBy", r.obj("updatedBy")["oid"], any("u-ada"))

	// If-Match: a stale version answers 412 and writes nothing; the current one writes.
	r = e.do(req{method: "PUT", path: entityPath, token: ada, body: `{"amount":1}`, header: map[string]string{"If-Match": `"1"`}})
	wantStatus(t, r, 412, "stale")
	equal(t, "stale shows the row", r.obj("row")["version"], any(2.0))
	r = e.do(req{method: "PUT", path: entityPath, token: ada, body: `{"amount":1}`, header: map[string]string{"If-Match": `"7", "2"`}})
	wantStatus(t, r, 200, "")
	equal(t, "amount", r.body["amount"], any(1.0))
	r = e.do(req{method: "PUT", path: entityPath, token: ada, body: `{"amount":2}`, header: map[string]string{"If-Match": `W/"3"`}})
	wantStatus(t, r, 412, "stale") // a weak tag never matches (RFC 9110 §13.1.1)
	r = e.do(req{method: "PUT", path: entityPath, token: ada, body: `{"amount":2}`, header: map[string]string{"If-Match": `*`}})
	wantStatus(t, r, 200, "")

	r = e.do(req{method: "GET", path: rowPath, token: ada})
	equal(t, "persisted", r.body["amount"], any(2.0))
	equal(t, "ETag", r.header.Get("ETag"), `"4"`)
}

func TestDemoDecisions(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	bob := e.token("acme", "u-bob", "Bob Marley")

	r := e.do(req{method: "POST", path: "/api/approval-requests/r-1001/approve", token: ada, header: map[string]string{"If-Match": `"0"`}})
	wantStatus(t, r, 412, "stale")

	r = e.do(req{method: "POST", path: "/api/approval-requests/r-1001/approve", token: ada, body: `{"comment":"ok, agreed with carrier"}`})
	wantStatus(t, r, 200, "")
	equal(t, "status", r.str("status"), "approved")
	equal(t, "decidedBy", r.obj("decidedBy")["oid"], any("u-ada"))
	equal(t, "decidedBy name", r.obj("decidedBy")["name"], any("Ada Lovelace"))
	if r.str("decidedAtUtc") == "" {
		t.Fatalf("no decidedAtUtc: %s", r.raw)
	}
	equal(t, "version", r.body["version"], any(2.0))

	for _, q := range []req{
		{method: "POST", path: "/api/approval-requests/r-1001/approve", token: bob},
		{method: "POST", path: "/api/approval-requests/r-1001/reject", token: bob},
		{method: "POST", path: "/api/approval-requests/r-1001/reject", token: ada},
		{method: "PUT", path: entityPath, token: bob, body: `{"amount":99999}`},
	} {
		r = e.do(q)
		wantStatus(t, r, 409, "already_decided")
		equal(t, "already decided by", r.obj("row")["decidedBy"].(map[string]any)["oid"], any("u-ada"))
	}

	r = e.do(req{method: "POST", path: "/api/approval-requests/r-1002/reject", token: bob})
	wantStatus(t, r, 200, "")
	equal(t, "status", r.str("status"), "rejected")
}

// TestDemoDelete runs on miniredis and on a real redis-server: seeding and deleting
// are Lua scripts whose keys must behave the same on both.
func TestDemoDelete(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) { testDemoDelete(t, envOpts{}) })
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		testDemoDelete(t, envOpts{lockRDB: client(t, redistest.StartServer(t).URL())})
	})
}

func testDemoDelete(t *testing.T, opts envOpts) {
	e := newEnv(t, opts)
	ada := e.token("acme", "u-ada", "Ada Lovelace")

	r := e.do(req{method: "DELETE", path: entityPath, token: ada, header: map[string]string{"If-Match": `"5"`}})
	wantStatus(t, r, 412, "stale")
	r = e.do(req{method: "DELETE", path: entityPath, token: ada})
	wantStatus(t, r, 204, "")
	wantStatus(t, e.do(req{method: "GET", path: rowPath, token: ada}), 404, "not_found")
	wantStatus(t, e.do(req{method: "DELETE", path: entityPath, token: ada}), 404, "not_found")
	wantStatus(t, e.do(req{method: "POST", path: rowPath + "/approve", token: ada}), 404, "not_found")
	r = e.do(req{method: "GET", path: "/api/approval-requests", token: ada})
	for _, x := range r.list("rows") {
		if x.(map[string]any)["uid"] == "r-1001" {
			t.Fatal("a deleted row is listed")
		}
	}
	n := len(r.list("rows"))

	// The index lost alone (an eviction, a hand-made DEL) is not the set gone: it is
	// rebuilt from the rows that survived, and the deleted row stays deleted.
	if err := e.demoRDB.Del(t.Context(), demo.RowIndexKey("acme")).Err(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.do(req{method: "GET", path: rowPath, token: ada}), 404, "not_found")
	r = e.do(req{method: "GET", path: "/api/approval-requests", token: ada})
	equal(t, "rows after losing the index", len(r.list("rows")), n)
	if got := e.demoRDB.SCard(t.Context(), demo.RowIndexKey("acme")).Val(); got != int64(n+1) {
		t.Fatalf("rebuilt index holds %d uids, want %d", got, n+1)
	}

	// A deleted row stays deleted, even when every other row is gone too...
	for _, x := range r.list("rows") {
		uid := x.(map[string]any)["uid"].(string)
		wantStatus(t, e.do(req{method: "DELETE", path: "/api/entities/ApprovalRequest/" + uid, token: ada}), 204, "")
	}
	r = e.do(req{method: "GET", path: "/api/approval-requests", token: ada})
	wantStatus(t, r, 200, "")
	if l := r.list("rows"); l == nil || len(l) != 0 {
		t.Fatalf("rows after deleting all: %s", r.raw)
	}
	wantStatus(t, e.do(req{method: "GET", path: rowPath, token: ada}), 404, "not_found")

	// ...but a Redis that restarted empty seeds the tenant again.
	if err := e.demoRDB.FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, e.do(req{method: "GET", path: rowPath, token: ada}), 200, "")
	r = e.do(req{method: "GET", path: "/api/approval-requests", token: ada})
	equal(t, "reseeded", len(r.list("rows")), n+1)
}

func TestDemoKeyLayout(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	wantStatus(t, e.do(req{method: "GET", path: rowPath, token: ada}), 200, "")
	equal(t, "row key", demo.RowKey("acme", "r-1001"), "demo:{acme}:ApprovalRequest:r-1001")
	equal(t, "index key", demo.RowIndexKey("acme"), "demoidx:{acme}:ApprovalRequest")
	for _, k := range []string{demo.RowKey("acme", "r-1001"), demo.RowIndexKey("acme")} {
		if n := e.demoRDB.Exists(t.Context(), k).Val(); n != 1 {
			t.Fatalf("%s does not exist", k)
		}
	}
	// Nothing of the demo domain is a lock key.
	if ks := keys(t, e.lockRDB, "lock*"); len(ks) != 0 {
		t.Fatalf("lock keys after reading rows: %v", ks)
	}
}

// TestGuardedWrites: the demo's writes answer 409 locked when another user holds the
// lock, pass for the holder and for anyone on a free entity, and approve releases the
// caller's lock.
func TestGuardedWrites(t *testing.T) {
	e := newEnv(t, envOpts{})
	ada := e.token("acme", "u-ada", "Ada Lovelace")
	bob := e.token("acme", "u-bob", "Bob Marley")
	driver := e.token("acme", "svc-driver-app", "Driver app") // automation: never claims

	wantOutcome(t, e.do(req{method: "POST", path: lockPath, token: ada}), 200, "acquired")
	for _, q := range []req{
		{method: "PUT", path: entityPath, token: bob, body: `{"title":"mine now"}`},
		{method: "DELETE", path: entityPath, token: bob},
		{method: "POST", path: rowPath + "/approve", token: bob},
		{method: "POST", path: rowPath + "/reject", token: driver},
	} {
		r := e.do(q)
		wantStatus(t, r, http.StatusConflict, "locked")
		equal(t, "the lock in the body", r.obj("lock")["holderOid"], any("u-ada"))
		equal(t, "the lock's entity", r.obj("lock")["entityUid"], any("r-1001"))
	}
	r := e.do(req{method: "GET", path: rowPath, token: ada})
	equal(t, "nothing written while locked", r.body["version"], any(1.0))

	// The holder writes.
	wantStatus(t, e.do(req{method: "PUT", path: entityPath, token: ada, body: `{"title":"checked"}`}), 200, "")
	// The lock is still Ada's after an update; approve releases it.
	wantStatus(t, e.do(req{method: "GET", path: lockPath, token: ada}), 200, "")
	r = e.do(req{method: "POST", path: rowPath + "/approve", token: ada})
	wantStatus(t, r, 200, "")
	wantStatus(t, e.do(req{method: "GET", path: lockPath, token: ada}), 404, "not_found")

	// A free entity is writable by anyone, without a lock: automation is never blocked.
	wantStatus(t, e.do(req{method: "PUT", path: "/api/entities/ApprovalRequest/r-1002", token: driver, body: `{"amount":10}`}), 200, "")
	wantStatus(t, e.do(req{method: "POST", path: "/api/approval-requests/r-1002/approve", token: driver}), 200, "")
	wantStatus(t, e.do(req{method: "DELETE", path: "/api/entities/ApprovalRequest/r-1003", token: driver}), 204, "")
	if ks := keys(t, e.lockRDB, "lock:*"); len(ks) != 0 {
		t.Fatalf("the driver app claimed: %v", ks)
	}
}
