package web_test

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/lockhub/lockhub/web"
)

func TestStatic(t *testing.T) {
	e := newEnv(t, envOpts{})
	cases := []struct {
		path, contentType string
		status            int
	}{
		{"/", "text/html; charset=utf-8", 200},
		{"/static/lockhub.js", "text/javascript; charset=utf-8", 200},
		{"/demo/app.js", "text/javascript; charset=utf-8", 200},
		{"/demo/style.css", "text/css; charset=utf-8", 200},
		{"/demo/nope.js", "application/json; charset=utf-8", 404},
		{"/static/index.html", "application/json; charset=utf-8", 404},
		{"/static/nope.js", "application/json; charset=utf-8", 404},
		{"/static/", "application/json; charset=utf-8", 404},
		{"/static/../web.go", "application/json; charset=utf-8", 404},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			r := e.doT(t, req{method: "GET", path: c.path})
			equal(t, "status", r.status, c.status)
			equal(t, "Content-Type", r.header.Get("Content-Type"), c.contentType)
			equal(t, "nosniff", r.header.Get("X-Content-Type-Options"), "nosniff")
		})
	}
	r := e.do(req{method: "GET", path: "/"})
	if !strings.Contains(strings.ToLower(string(r.raw)), "<html") {
		t.Fatalf("/ is not the page: %.200s", r.raw)
	}
	r = e.do(req{method: "HEAD", path: "/static/lockhub.js"})
	equal(t, "HEAD", r.status, 200)
	equal(t, "HEAD body", len(r.raw), 0)

	// The page and its files are the demo's: without the demo mounted, / is not found.
	bare := newEnv(t, envOpts{noDemo: true})
	wantStatus(t, bare.do(req{method: "GET", path: "/"}), 404, "not_found")
	wantStatus(t, bare.do(req{method: "GET", path: "/demo/app.js"}), 404, "not_found")
	wantStatus(t, bare.do(req{method: "GET", path: "/api/approval-requests", token: bare.token("acme", "u-ada", "Ada")}), 404, "not_found")
	wantStatus(t, bare.do(req{method: "GET", path: "/static/lockhub.js"}), 200, "")
}

// TestStaticFS serves a given file system, and pins content types the system's MIME
// table could get wrong.
func TestStaticFS(t *testing.T) {
	files := fstest.MapFS{
		"index.html":     {Data: []byte("<!doctype html><html></html>")},
		"css/style.css":  {Data: []byte("body{}")},
		"module.mjs":     {Data: []byte("export {}")},
		"data/rows.json": {Data: []byte(`{"rows":[]}`)},
	}
	e := newEnvWith(t, func(c *web.Config) { c.Static = files })
	for path, ct := range map[string]string{
		"/static/index.html":     "text/html; charset=utf-8",
		"/static/css/style.css":  "text/css; charset=utf-8",
		"/static/module.mjs":     "text/javascript; charset=utf-8",
		"/static/data/rows.json": "application/json",
	} {
		r := e.do(req{method: "GET", path: path})
		equal(t, path, r.status, 200)
		equal(t, path, r.header.Get("Content-Type"), ct)
	}
	wantStatus(t, e.do(req{method: "GET", path: "/static/css"}), 404, "not_found")
	var _ fs.FS = files
}

func TestHealthAndMetrics(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.do(req{method: "GET", path: "/healthz"})
	wantStatus(t, r, 200, "")
	equal(t, "healthz", r.str("status"), "ok")
	r = e.do(req{method: "GET", path: "/readyz"})
	wantStatus(t, r, 200, "")
	equal(t, "readyz", r.str("status"), "ready")

	ada := e.token("acme", "u-ada", "Ada Lovelace")
	e.do(req{method: "POST", path: lockPath, token: ada})
	e.do(req{method: "PUT", path: entityPath, token: ada, body: `{"title":"x"}`})
	r = e.do(req{method: "GET", path: "/metrics"})
	equal(t, "metrics", r.status, 200)
	text := string(r.raw)
	for _, want := range []string{
		`lockhub_http_request_duration_seconds_count{code="200",method="POST",route="/api/locks/{type}/{uid}"} 1`,
		`lockhub_store_operations_total{op="claim",outcome="acquired"} 1`,
		`lockhub_guard_decisions_total{decision="mine"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "r-1001") {
		t.Error("/metrics names a uid: labels must stay bounded")
	}
}

func TestDevToken(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.do(req{method: "POST", path: "/dev/token", body: `{"tenant":"acme","oid":"u-ada","name":"Ada Lovelace","roles":["Locks.TakeOver"]}`})
	wantStatus(t, r, 200, "")
	tok := r.str("token")
	if tok == "" {
		t.Fatalf("no token: %s", r.raw)
	}
	r = e.do(req{method: "POST", path: lockPath + "/takeover", token: tok})
	wantOutcome(t, r, 200, "acquired")
	equal(t, "holder name", r.obj("lock")["holderName"], any("Ada Lovelace"))

	// Production (no DevTokens): the route does not exist.
	p := newEnv(t, envOpts{noDev: true})
	wantStatus(t, p.do(req{method: "POST", path: "/dev/token", body: `{"tenant":"acme","oid":"u-ada"}`}), 404, "not_found")
}

func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := web.New(web.Config{}); err == nil {
		t.Fatal("New without a store")
	}
	e := newEnv(t, envOpts{})
	if _, err := web.New(web.Config{Store: e.store.Locks, Console: e.store.Console}); err == nil {
		t.Fatal("New without a verifier")
	}
}
