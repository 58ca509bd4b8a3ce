package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/web"
	"github.com/lockhub/lockhub/web/demo"
)

// env is a web.Server on a real HTTP server, with its lock store and demo store.
type env struct {
	t       *testing.T
	srv     *httptest.Server
	dev     *auth.Dev
	store   *locks.Store
	lockRDB redis.UniversalClient
	demoRDB redis.UniversalClient
	reg     *prometheus.Registry
	server  *web.Server
}

type envOpts struct {
	lockRDB redis.UniversalClient // nil: a fresh miniredis
	demoRDB redis.UniversalClient // nil: the lock Redis
	noDev   bool
	noDemo  bool                // no demo domain mounted
	config  func(*web.Config)   // changes the Server's config
	store   func(*locks.Config) // changes the lock store's config
}

// newEnvWith is newEnv with a change to the Server's config.
func newEnvWith(t *testing.T, f func(*web.Config)) *env {
	t.Helper()
	return newEnv(t, envOpts{config: f})
}

// newEnv starts a Server over miniredis (or the clients given) and an httptest server.
func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t, reg: prometheus.NewRegistry()}
	if o.lockRDB == nil {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		o.lockRDB = c
	}
	if o.demoRDB == nil {
		o.demoRDB = o.lockRDB
	}
	e.lockRDB, e.demoRDB = o.lockRDB, o.demoRDB
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	var err error
	scfg := locks.Config{Client: o.lockRDB, Logger: log, Registerer: e.reg}
	if o.store != nil {
		o.store(&scfg)
	}
	e.store, err = locks.NewStore(scfg)
	if err != nil {
		t.Fatal(err)
	}
	if e.dev, err = auth.NewDev(auth.DevConfig{}); err != nil {
		t.Fatal(err)
	}
	cfg := web.Config{Store: e.store.Locks, Console: e.store.Console, Verifier: e.dev, Logger: log, Registerer: e.reg}
	if !o.noDev {
		cfg.DevTokens = e.dev
	}
	if o.config != nil {
		o.config(&cfg)
	}
	if !o.noDemo {
		// The demo domain is mounted as cmd/lockhub mounts it: an adopter of web beside
		// the lock API, with the same body timeout.
		app, err := demo.New(demo.Config{Rows: o.demoRDB, Locks: e.store.Locks, Verifier: e.dev, BodyTimeout: cfg.BodyTimeout, Logger: log, Registerer: e.reg})
		if err != nil {
			t.Fatal(err)
		}
		cfg.App = app
	}
	s, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.server = s
	e.srv = httptest.NewServer(s)
	t.Cleanup(e.srv.Close)
	return e
}

// tWriter sends logs to the test's log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// token issues a development token.
func (e *env) token(tenant, oid, name string, roles ...string) string {
	e.t.Helper()
	tok, err := e.dev.Issue(tenant, oid, name, roles)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// resp is an answer, its body decoded when it is JSON.
type resp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r resp) code() string { s, _ := r.body["code"].(string); return s }

func (r resp) str(key string) string { s, _ := r.body[key].(string); return s }

// obj returns a JSON object member.
func (r resp) obj(key string) map[string]any { m, _ := r.body[key].(map[string]any); return m }

// list returns a JSON array member.
func (r resp) list(key string) []any { l, _ := r.body[key].([]any); return l }

// req is one request.
type req struct {
	method, path, token string
	body                any // string, []byte, or a value to encode
	header              map[string]string
}

func (e *env) do(q req) resp {
	e.t.Helper()
	return doHTTP(e.t, e.srv.Client(), e.srv.URL, q)
}

// doT is do for a subtest.
func (e *env) doT(t testing.TB, q req) resp {
	t.Helper()
	return doHTTP(t, e.srv.Client(), e.srv.URL, q)
}

func doHTTP(t testing.TB, c *http.Client, base string, q req) resp {
	t.Helper()
	r, err := tryHTTP(t.Context(), c, base, q)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryHTTP is doHTTP for goroutines that must not call t.Fatal.
func tryHTTP(ctx context.Context, c *http.Client, base string, q req) (resp, error) {
	var body io.Reader
	switch b := q.body.(type) {
	case nil:
	case io.Reader:
		body = io.NopCloser(b) // no length known: sent chunked
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return resp{}, err
		}
		body = bytes.NewReader(j)
	}
	r, err := http.NewRequestWithContext(ctx, q.method, base+q.path, body)
	if err != nil {
		return resp{}, err
	}
	if q.token != "" {
		r.Header.Set("Authorization", "Bearer "+q.token)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	res, err := c.Do(r)
	if err != nil {
		return resp{}, fmt.Errorf("%s %s: %w", q.method, q.path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return resp{}, fmt.Errorf("%s %s: %w", q.method, q.path, err)
	}
	out := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			return resp{}, fmt.Errorf("%s %s: answer is not a JSON object: %w: %s", q.method, q.path, err, raw)
		}
	}
	return out, nil
}

// wantStatus fails unless r has status and, when code is not empty, that error code.
func wantStatus(t testing.TB, r resp, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.code() != code) {
		t.Fatalf("got %d %s, want %d %s", r.status, r.raw, status, code)
	}
}

// wantOutcome fails unless r is a lock result with status and outcome.
func wantOutcome(t testing.TB, r resp, status int, outcome string) {
	t.Helper()
	if r.status != status || r.str("outcome") != outcome {
		t.Fatalf("got %d %s, want %d outcome %s", r.status, r.raw, status, outcome)
	}
}

func equal[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// keys returns the keys of rdb matching pattern, sorted.
func keys(t testing.TB, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	ks, err := rdb.Keys(t.Context(), pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ks)
	return ks
}

// newEnvDev makes a DevAuth with its own key: its tokens are foreign to any env.
func newEnvDev(t *testing.T) (*auth.Dev, error) {
	t.Helper()
	return auth.NewDev(auth.DevConfig{})
}

// clientMini returns a client of a fresh miniredis.
func clientMini(t *testing.T) redis.UniversalClient {
	t.Helper()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
