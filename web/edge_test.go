package web_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/hub"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
	"github.com/lockhub/lockhub/web"
)

// wantHardened fails unless h carries nosniff and the CSP (PROTOCOL.md §5, version 3).
func wantHardened(t testing.TB, what string, h http.Header) {
	t.Helper()
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != web.ContentSecurityPolicy {
		t.Errorf("%s: nosniff %q, CSP %q", what, h.Get("X-Content-Type-Options"), h.Get("Content-Security-Policy"))
	}
}

// TestSecurityHeadersOnEveryAnswer: 404, 405, HEAD and refused WebSocket handshakes
// carry nosniff and the CSP too (PROTOCOL.md §5, "Hardening (version 3)").
func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	e := newEnv(t, envOpts{config: func(c *web.Config) {
		// A hub of its own store: only its refusals are asked for, before any socket.
		store, err := locks.NewStore(locks.Config{Client: clientMini(t)})
		if err != nil {
			t.Fatal(err)
		}
		h, err := hub.New(hub.Config{Store: hub.StoreOf(store), Verifier: c.Verifier})
		if err != nil {
			t.Fatal(err)
		}
		c.Hub = h
	}})
	for _, tc := range []struct {
		name   string
		q      req
		status int
	}{
		{"404", req{method: "GET", path: "/no/such/route"}, 404},
		{"405", req{method: "PATCH", path: "/healthz"}, 405},
		{"405 of the lock API", req{method: "PATCH", path: "/api/me/locks"}, 405},
		{"HEAD", req{method: "HEAD", path: "/static/lockhub.js"}, 200},
		{"/ws without the subprotocol", req{method: "GET", path: "/ws", header: map[string]string{"Connection": "Upgrade", "Upgrade": "websocket",
			"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}}, 400},
		{"/ws from a foreign origin", req{method: "GET", path: "/ws", header: map[string]string{"Origin": "https://evil.example",
			"Sec-WebSocket-Protocol": protocol.Subprotocol}}, 403},
		{"/ws with another method", req{method: "POST", path: "/ws"}, 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.doT(t, tc.q)
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.raw, tc.status)
			}
			wantHardened(t, tc.name, r.header)
		})
	}
}

// TestBodyDeadlineOnEveryRoute: a request that declares a body and never sends it is
// closed within the body timeout on every route, not only those that read a body
// (issue 25: GET /healthz with Content-Length: 1000 and no body stayed open for good).
func TestBodyDeadlineOnEveryRoute(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := newEnvWith(t, func(c *web.Config) { c.BodyTimeout = timeout })
	for _, target := range []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /static/lockhub.js", "GET /", "GET /no/such/route", "PATCH /healthz", "GET /api/approval-requests"} {
		t.Run(target, func(t *testing.T) { wantBodyCut(t, e, target, timeout, false) })
	}
}

// TestBodyDripCut: a body that drips (a byte every 50 ms, never finished) is cut at the
// body deadline like one that never comes: the deadline runs from the headers and is not
// renewed by each byte (PROTOCOL.md §5, "Hardening (version 3)"), on a route that reads
// no body and on one that does.
func TestBodyDripCut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := newEnvWith(t, func(c *web.Config) { c.BodyTimeout = timeout })
	for _, target := range []string{"GET /healthz", "POST /dev/token"} {
		t.Run(target, func(t *testing.T) { wantBodyCut(t, e, target, timeout, true) })
	}
}

// wantBodyCut sends target ("METHOD /path") with a declared body of 1,000 bytes of which
// one comes, then, with drip, a byte every 50 ms; the server must close the connection
// at its body timeout, not before and not long after.
func wantBodyCut(t *testing.T, e *env, target string, timeout time.Duration, drip bool) {
	t.Helper()
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, target+" HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	if drip {
		stop, dripped := make(chan struct{}), make(chan struct{})
		go func() { // the drip: one byte every 50 ms until the server cuts it off
			defer close(dripped)
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		defer func() { close(stop); <-dripped }()
	}
	// The test's own bound, far beyond the timeout: a connection still open then is
	// the bug.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("still open after %s (drip %v); the body timeout is %s", time.Since(start).Round(time.Millisecond), drip, timeout)
	}
	if d := time.Since(start); d < timeout {
		t.Fatalf("closed after %s, before the body timeout %s", d, timeout)
	}
}

// TestRequestsPerPerson: over HTTP one person is served RequestRate a second with
// bursts of RequestBurst; beyond, 429 rate_limited with Retry-After, counted; other
// people are not slowed (PROTOCOL.md §4, "Fair share").
func TestRequestsPerPerson(t *testing.T) {
	e := newEnvWith(t, func(c *web.Config) { c.RequestRate, c.RequestBurst = 0.01, 3 })
	ada, grace := e.token("acme", "u-ada", "Ada"), e.token("acme", "u-grace", "Grace")
	for range 3 {
		wantStatus(t, e.do(req{method: "GET", path: "/api/me/locks", token: ada}), 200, "")
	}
	r := e.do(req{method: "POST", path: lockPath, token: ada})
	wantStatus(t, r, 429, "rate_limited")
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("Retry-After %q, want whole seconds", r.header.Get("Retry-After"))
	}
	wantHardened(t, "429", r.header)
	wantStatus(t, e.do(req{method: "GET", path: "/api/me/locks", token: grace}), 200, "")
	wantStatus(t, e.do(req{method: "GET", path: "/api/me/locks", token: e.token("globex", "u-ada", "Ada")}), 200, "")
	equal(t, "lockhub_http_limit_hits_total", metric(t, e, "lockhub_http_limit_hits_total"), 1)
	// No token, no rate: a refused token answers 401, never 429.
	wantStatus(t, e.do(req{method: "GET", path: "/api/me/locks", token: "not.a.token"}), 401, "unauthorized")
}

// TestHostCheck: in development mode only loopback Hosts and the --listen host are
// answered, on every route (PROTOCOL.md §6: no DNS rebinding of /dev/token).
func TestHostCheck(t *testing.T) {
	e := newEnvWith(t, func(c *web.Config) { c.LocalHosts, c.Hosts = true, []string{"LockHub.Test"} })
	do := func(t *testing.T, method, path, host string) *http.Response {
		t.Helper()
		r, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, strings.NewReader(`{"tenant":"acme","oid":"u-ada"}`))
		if err != nil {
			t.Fatal(err)
		}
		r.Host = host
		res, err := e.srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res
	}
	for _, host := range []string{"localhost", "localhost:8080", "LOCALHOST.", "app.localhost:8080", "127.0.0.1:8080", "127.1.2.3", "[::1]:8080", "lockhub.test:8080"} {
		if res := do(t, "POST", "/dev/token", host); res.StatusCode != 200 {
			t.Errorf("Host %s: /dev/token answered %d", host, res.StatusCode)
		}
	}
	for _, host := range []string{"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example", "10.0.0.1", "[::ffff:10.0.0.1]"} {
		for _, path := range []string{"/dev/token", "/healthz", "/ws", "/"} {
			res := do(t, "POST", path, host)
			if res.StatusCode != 403 {
				t.Errorf("Host %s: POST %s answered %d, want 403", host, path, res.StatusCode)
			}
			wantHardened(t, host+" "+path, res.Header)
		}
	}
	// Outside development mode any Host is served.
	open := newEnv(t, envOpts{})
	r, _ := http.NewRequestWithContext(t.Context(), "GET", open.srv.URL+"/healthz", nil)
	r.Host = "lockhub.example.com"
	res, err := open.srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	equal(t, "production Host", res.StatusCode, 200)
}

// TestConsoleListStoreDown: with the lock Redis dead, the console's list answers 503
// store_unavailable, never "no locks" (PROTOCOL.md §5, version 3); the lock API still
// fails open.
func TestConsoleListStoreDown(t *testing.T) {
	lock := redistest.StartServer(t)
	e := newEnv(t, envOpts{lockRDB: client(t, lock.URL()), demoRDB: clientMini(t)})
	root := e.token("acme", "u-root", "Root", "Locks.Admin")
	wantOutcome(t, e.do(req{method: "POST", path: lockPath, token: root}), 200, "acquired")
	r := e.do(req{method: "GET", path: "/api/admin/locks", token: root})
	wantStatus(t, r, 200, "")
	equal(t, "locks listed while Redis is up", len(r.list("locks")), 1)
	lock.Kill(t)
	wantStatus(t, e.do(req{method: "GET", path: "/api/admin/locks", token: root}), 503, "store_unavailable")
	wantStatus(t, e.do(req{method: "GET", path: "/api/me/locks", token: root}), 200, "")
}
