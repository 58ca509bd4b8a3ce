package web_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/web"
)

// TestTokenBeforeBody: without a valid token the answer is 401 whatever the body, and
// it comes before the body is read: here the body never ends.
func TestTokenBeforeBody(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, q := range []req{
		{method: "POST", path: "/api/locks/ApprovalRequest/r-1001"},
		{method: "PUT", path: "/api/entities/ApprovalRequest/r-1001", token: "not.a.token"},
		{method: "POST", path: "/api/approval-requests/r-1001/approve"},
	} {
		t.Run(q.method+" "+q.path, func(t *testing.T) {
			pr, pw := io.Pipe()
			t.Cleanup(func() { _ = pw.Close() })
			go func() { _, _ = pw.Write([]byte(`{"title":"`)) }() // and then nothing
			q.body = pr
			wantStatus(t, e.doT(t, q), 401, "unauthorized")
		})
	}
}

// TestBodyTimeout: a body that drips slower than the body timeout answers 408 and
// the request is not served.
func TestBodyTimeout(t *testing.T) {
	e := newEnvWith(t, func(c *web.Config) { c.BodyTimeout = 200 * time.Millisecond })
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	go func() { _, _ = pw.Write([]byte(`{"comment":"`)) }() // the rest never comes
	r := e.do(req{method: "POST", path: "/dev/token", body: pr})
	wantStatus(t, r, 408, "request_timeout")

	ada := e.token("acme", "u-ada", "Ada")
	pr2, pw2 := io.Pipe()
	t.Cleanup(func() { _ = pw2.Close() })
	go func() { _, _ = pw2.Write([]byte(`{"comment":"`)) }()
	r = e.do(req{method: "POST", path: "/api/approval-requests/r-1001/approve", token: ada, body: pr2})
	wantStatus(t, r, 408, "request_timeout")
	row := e.do(req{method: "GET", path: "/api/approval-requests/r-1001", token: ada})
	equal(t, "status of a request whose decision timed out", row.str("status"), "pending")
}

// TestSecurityHeaders: every answer carries nosniff, a Content-Security-Policy
// without 'unsafe-inline' or 'unsafe-eval' and no-referrer (PROTOCOL.md §5).
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, path := range []string{"/", "/demo/app.js", "/static/lockhub.js", "/healthz", "/no/such/route", "/api/me/locks"} {
		r := e.do(req{method: "GET", path: path})
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "frame-ancestors 'none'", "script-src 'self'", "style-src 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("%s: CSP %q allows unsafe sources", path, csp)
		}
		equal(t, path+" Referrer-Policy", r.header.Get("Referrer-Policy"), "no-referrer")
		equal(t, path+" nosniff", r.header.Get("X-Content-Type-Options"), "nosniff")
	}
}
