package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// The demo page (web/demo/static) on the fake hub: the page's own files, a stand-in
// for the few calls of the demo's HTTP API it makes (PROTOCOL.md §5), and the scripted
// /ws. TestStory runs the page against the real binary; this runs it under the strict
// Content-Security-Policy of strictCSP, which the real binary is not asked to send yet.

// demoRows are the approval requests of the stand-in API.
var demoRows = []map[string]any{
	{"uid": "r-1001", "title": "Fuel card top-up, truck 12", "requester": "Edsger Dijkstra", "amount": 1250.5, "currency": "EUR",
		"status": "pending", "decidedBy": nil, "decidedAtUtc": nil, "version": 1, "carrier": "Nordic Haulage", "origin": "Rotterdam", "destination": "Hamburg"},
	{"uid": "r-1002", "title": "Tyres, trailer 4", "requester": "Grace Hopper", "amount": 980, "currency": "EUR",
		"status": "pending", "decidedBy": nil, "decidedAtUtc": nil, "version": 1},
}

// serveDemo adds the demo page and the stand-in API to mux, at the paths the real
// binary serves them: / and /demo/<file> from web/demo/static.
func serveDemo(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, "../demo/static/index.html")
	})
	mux.Handle("GET /demo/", http.StripPrefix("/demo/", http.FileServer(http.Dir("../demo/static"))))
	mux.HandleFunc("POST /dev/token", func(w http.ResponseWriter, r *http.Request) {
		// JWT-shaped and unsigned: the page only reads its exp (none here), and the
		// fake hub takes any token.
		enc := base64.RawURLEncoding.EncodeToString
		writeJSON(w, http.StatusOK, map[string]any{"token": enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`{"sub":"demo"}`)) + ".sig"})
	})
	mux.HandleFunc("GET /api/approval-requests", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"rows": demoRows})
	})
	mux.HandleFunc("GET /api/approval-requests/{uid}", func(w http.ResponseWriter, r *http.Request) {
		for _, row := range demoRows {
			if row["uid"] == r.PathValue("uid") {
				w.Header().Set("ETag", strconv.Quote(strconv.Itoa(row["version"].(int))))
				writeJSON(w, http.StatusOK, row)
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"code": "not_found", "message": "no such request"})
	})
	// The bulk approve of PROTOCOL.md §12, as the grid's "Approve selected" calls it:
	// r-1002 is Grace's, so a batch with it is refused whole, naming her lock.
	mux.HandleFunc("POST /api/approval-requests/approve", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			UIDs []string `json:"uids"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.UIDs) == 0 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"code": "bad_request", "message": "uids"})
			return
		}
		var rows []map[string]any
		for _, uid := range in.UIDs {
			if uid == "r-1002" {
				writeJSON(w, http.StatusConflict, map[string]any{"code": "locked", "locks": []any{lock("r-1002", "u-grace", "Grace Hopper", time.Minute)}})
				return
			}
			for _, row := range demoRows {
				if row["uid"] == uid {
					done := maps.Clone(row)
					done["status"], done["decidedBy"], done["version"] = "approved", map[string]any{"oid": "u-ada", "name": "Ada Lovelace"}, 2
					rows = append(rows, done)
				}
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"rows": rows})
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the browser sees a cut body if the write fails
}

// testDemoPageUnderStrictCSP opens the demo page as Ada, with a row locked by Grace in
// the grid and a form blocked by her, then claimed when she lets go: every part of the
// page and of the client that draws something. None of it may be refused by the
// Content-Security-Policy, and the page writes no error to the console.
func testDemoPageUnderStrictCSP(t *testing.T, browser context.Context) {
	h := newFakeHub(t)
	tb := newTab(t, browser, "demo", h.srv.URL+"/?user=u-ada")
	c := h.accept(t)
	c.handshake(t, welcomeOpts{oid: "u-ada", name: "Ada Lovelace"})
	req := c.expect(t, "watch")
	c.reply(t, req, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{lock("r-1002", "u-grace", "Grace Hopper", time.Minute)}})
	waitFor(t, tb, "the page live", sel("conn")+`.dataset.state === 'open' && `+sel("grid")+`.dataset.loaded === 'true' && `+
		rowLockedBy("r-1002", "other", "Grace Hopper"), 5*time.Second, rowDiag("r-1002"))

	click(t, tb, "open-r-1001")
	req = c.waitFrame(t, "claim", 2*time.Second)
	c.reply(t, req, "result", map[string]any{"outcome": "locked", "lock": lock("r-1001", "u-grace", "Grace Hopper", time.Minute)})
	waitFor(t, tb, "the form blocked by Grace", formState("locked")+` && `+sel("form-body")+`.inert && !`+sel("lock-banner")+`.hidden && `+
		sel("lock-banner")+`.getBoundingClientRect().height > 0 && `+sel("field-title")+`.value === 'Fuel card top-up, truck 12'`, 5*time.Second, formDiag)
	c.send(t, event("Released", lock("r-1001", "u-grace", "Grace Hopper", time.Minute), nil))
	req = c.waitFrame(t, "claim", 2*time.Second)
	c.reply(t, req, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1001", "u-ada", "Ada Lovelace", 5*time.Minute)})
	c.send(t, event("Acquired", lock("r-1001", "u-ada", "Ada Lovelace", 5*time.Minute), nil)) // as the hub broadcasts it
	waitFor(t, tb, "the form held", formState("held")+` && !`+sel("form-body")+`.inert && `+sel("lock-banner")+`.hidden && `+
		rowLockedBy("r-1001", "mine", "Ada Lovelace"), 5*time.Second, formDiag)

	checks := map[string]string{
		"lockhub.css is linked": `[...document.styleSheets].some((s) => s.href && new URL(s.href).pathname === '/static/lockhub.css')`,
		"no <style> element":    `document.querySelectorAll('style').length === 0`,
		"no style attribute":    `document.querySelectorAll('[style]').length === 0`,
		"no inline script":      `[...document.scripts].every((s) => s.src !== '')`,
		"the lock icon drawn": `(() => { const h = document.querySelector('tr[data-uid=r-1002] .lockhub-holder');
			return getComputedStyle(h, '::before').backgroundImage.includes('/demo/lock.svg'); })()`,
	}
	checkAll(t, tb, checks, "")
	noConsole(t, tb, "a fault", isFault)
}
