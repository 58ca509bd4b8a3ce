package auth

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lockhub/lockhub/hub/auth/authtest"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// idpJWKS is a JWKS checking the tokens of an authtest.IDP, on a test clock.
type idpJWKS struct {
	*JWKS
	idp   *authtest.IDP
	clock *redistest.Clock
	reg   *prometheus.Registry
	logs  *redistest.LogBuffer
}

// newIDPJWKS starts an IDP and a JWKS on it, configured by cfg on top; the JWKS is
// closed, and its goroutines joined, when t ends.
func newIDPJWKS(t *testing.T, cfg JWKSConfig) *idpJWKS {
	t.Helper()
	f := &idpJWKS{idp: authtest.NewIDP(t), clock: redistest.NewClock(), reg: prometheus.NewRegistry(), logs: &redistest.LogBuffer{}}
	cfg.URL, cfg.Issuer, cfg.Audience, cfg.HTTPClient = f.idp.URL, authtest.Issuer, authtest.Audience, f.idp.Client
	cfg.Now, cfg.Registerer = f.clock.Now, f.reg
	cfg.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	var err error
	if f.JWKS, err = NewJWKS(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close) // before the IDP's cleanups: a hung fetch is canceled, not waited for
	return f
}

// token is a good token of the IDP's key kid.
func (f *idpJWKS) token(t *testing.T, kid string) string {
	t.Helper()
	return f.idp.TokenOf(t, kid, map[string]any{"tid": "acme", "oid": "u-ada", "name": "Ada"})
}

// fetches is lockhub_jwks_fetches_total for trigger and result.
func (f *idpJWKS) fetches(trigger, result string) int {
	m, err := f.m.fetches.GetMetricWithLabelValues(trigger, result)
	if err != nil {
		panic(err) // two labels, always
	}
	return int(testutil.ToFloat64(m))
}

func (f *idpJWKS) mustVerify(t *testing.T, tok, what string) {
	t.Helper()
	if _, err := f.Verify(context.Background(), tok); err != nil {
		t.Fatalf("%s: Verify = %v", what, err)
	}
}

func (f *idpJWKS) mustRefuse(t *testing.T, tok, what string) {
	t.Helper()
	if id, err := f.Verify(context.Background(), tok); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("%s: Verify = %+v, %v; want ErrUnauthorized", what, id, err)
	}
}

// verifyWithin runs Verify and fails the test if it has not returned within d: the
// proof that it did not wait on a fetch the IDP holds.
func verifyWithin(t *testing.T, a Verifier, tok string, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := a.Verify(context.Background(), tok)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Verify did not return within %s", d)
		return nil
	}
}

// TestJWKSKnownKidNeverWaits: while the endpoint holds a fetch unanswered (a
// background refresh, or the refetch of an unknown kid), a token whose kid the set
// holds verifies at once. jwx's jwk.Cache made it wait for the fetch.
func TestJWKSKnownKidNeverWaits(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  JWKSConfig
		// fetch starts a fetch that the IDP will hold, and returns a wait for what it
		// started to end.
		fetch func(t *testing.T, f *idpJWKS) (wait func())
	}{
		{"background refresh", JWKSConfig{RefreshInterval: time.Millisecond}, func(*testing.T, *idpJWKS) func() { return func() {} }},
		{"unknown-kid refetch", JWKSConfig{}, func(t *testing.T, f *idpJWKS) func() {
			f.idp.AddKey(t, "k2")
			tok := f.token(t, "k2")
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = f.Verify(context.Background(), tok) // waits for the held fetch, up to 5s
			}()
			return func() { <-done }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newIDPJWKS(t, tc.cfg)
			good := f.token(t, "k1")
			arrived, release := f.idp.Hang()
			wait := tc.fetch(t, f)
			<-arrived // a fetch is in the IDP's hands, and stays there until release
			err := verifyWithin(t, f, good, 2*time.Second)
			release()
			wait()
			if err != nil {
				t.Fatalf("known kid while the JWKS hangs: %v", err)
			}
		})
	}
}

// TestJWKSUnknownKidRefetch: an unknown kid causes one fetch, shared by the tokens
// that wait for it; another unknown kid within 30 s causes none, and one 30 s later
// does.
func TestJWKSUnknownKidRefetch(t *testing.T) {
	f := newIDPJWKS(t, JWKSConfig{})
	f.idp.AddKey(t, "k2")
	before := f.idp.Fetches()

	// Five tokens of the new key at once: held by the IDP until all wait, they share
	// one fetch, and all pass once it ends.
	arrived, release := f.idp.Hang()
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		tok := f.token(t, "k2")
		wg.Go(func() {
			_, err := f.Verify(context.Background(), tok)
			errs <- err
		})
	}
	<-arrived
	redistest.Eventually(t, "five tokens waiting on the refetch", func() bool { return f.waiters.Load() == 5 })
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a token of the new key, waiting on the refetch: %v", err)
		}
	}
	if got := f.idp.Fetches() - before; got != 1 {
		t.Fatalf("5 tokens of a new key fetched the JWKS %d times, want 1", got)
	}

	f.idp.AddKey(t, "k3")
	f.clock.Advance(29 * time.Second)
	f.mustRefuse(t, f.token(t, "k3"), "another new key 29s later")
	if got := f.idp.Fetches() - before; got != 1 {
		t.Fatalf("an unknown kid 29s after a refetch fetched again (%d fetches)", got)
	}
	f.clock.Advance(time.Second)
	f.mustVerify(t, f.token(t, "k3"), "another new key 30s later")
	if got := f.idp.Fetches() - before; got != 2 {
		t.Fatalf("an unknown kid 30s after a refetch: %d fetches, want 2", got)
	}
	if got := f.fetches(fetchUnknownKid, "ok"); got != 2 {
		t.Fatalf("lockhub_jwks_fetches_total{trigger=unknown_kid,result=ok} = %d, want 2", got)
	}
}

// waiting reports whether an unknown-kid refetch is in flight.
func waiting(a *JWKS) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inflight != nil
}

// TestJWKSUnknownKidWaitBounded: a token of an unknown kid, while the endpoint
// hangs, is refused once UnknownKidWait has passed, without waiting for the fetch;
// the fetch goes on, and a token that comes after it finds the key.
func TestJWKSUnknownKidWaitBounded(t *testing.T) {
	const wait = 50 * time.Millisecond
	f := newIDPJWKS(t, JWKSConfig{UnknownKidWait: wait, FetchTimeout: time.Minute})
	f.idp.AddKey(t, "k2")
	tok := f.token(t, "k2")
	_, release := f.idp.Hang()
	start := time.Now()
	err := verifyWithin(t, f, tok, 10*time.Second)
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("unknown kid while the JWKS hangs: %v, want ErrUnauthorized", err)
	}
	if el := time.Since(start); el < wait {
		t.Fatalf("refused after %s, before the %s wait", el, wait)
	}
	if got := testutil.ToFloat64(f.m.unknownKids.WithLabelValues(unknownKidTimeout)); got != 1 {
		t.Fatalf("lockhub_jwks_unknown_kids_total{outcome=timeout} = %v, want 1", got)
	}
	release()
	redistest.Eventually(t, "the refetch to end", func() bool { return !waiting(f.JWKS) })
	f.mustVerify(t, tok, "the same token once the refetch ended") // throttled, but the set has it
}

// TestJWKSKeyRotationIDP: a key published after start is picked up by the refetch its
// kid causes, and a key no longer published is refused once the set is refetched.
func TestJWKSKeyRotationIDP(t *testing.T) {
	f := newIDPJWKS(t, JWKSConfig{})
	old := f.token(t, "k1")
	f.idp.AddKey(t, "k2")
	f.idp.RemoveKey("k1")
	f.mustVerify(t, f.token(t, "k2"), "the rotated key")
	f.mustRefuse(t, old, "the retired key")
}

// TestJWKSWithoutKid: a token without a kid verifies when the set has exactly one
// signing key, and is refused when it has two.
func TestJWKSWithoutKid(t *testing.T) {
	f := newIDPJWKS(t, JWKSConfig{})
	claims := map[string]any{"tid": "acme", "oid": "u-ada"}
	f.mustVerify(t, f.idp.TokenWithoutKid(t, claims), "no kid, one key")

	f.idp.AddKey(t, "k2")
	f.mustVerify(t, f.token(t, "k2"), "the second key") // refetches: the set has two keys
	before := f.idp.Fetches()
	f.mustRefuse(t, f.idp.TokenWithoutKid(t, claims), "no kid, two keys")
	if f.idp.Fetches() != before {
		t.Fatal("a token without a kid fetched the JWKS")
	}
}

// TestJWKSBackgroundRefresh: the set is replaced in the background, and a refresh
// that fails keeps the set in use, with a warning, and is retried.
func TestJWKSBackgroundRefresh(t *testing.T) {
	f := newIDPJWKS(t, JWKSConfig{RefreshInterval: 5 * time.Millisecond})
	f.idp.AddKey(t, "k2")
	redistest.Eventually(t, "the background refresh to bring k2", func() bool {
		_, ok := f.keys.Load().set.LookupKeyID("k2")
		return ok
	})
	f.mustVerify(t, f.token(t, "k2"), "a key the background refresh brought")
	if n := testutil.CollectAndCount(f.m.unknownKids); n != 0 {
		t.Fatalf("k2 was an unknown kid: the background refresh did not bring it (%d outcomes)", n)
	}

	f.idp.Fail(http.StatusServiceUnavailable)
	failed := f.fetches(fetchBackground, "error")
	redistest.Eventually(t, "two background refreshes to fail", func() bool {
		return f.fetches(fetchBackground, "error") >= failed+2
	})
	f.mustVerify(t, f.token(t, "k1"), "a key of the set kept while refreshes fail")
	f.mustVerify(t, f.token(t, "k2"), "a key of the set kept while refreshes fail")
	if logs := f.logs.String(); !strings.Contains(logs, "keeping the key set in use") || !strings.Contains(logs, "503") {
		t.Fatalf("no warning of the failed refresh:\n%s", logs)
	}
	if testutil.ToFloat64(f.m.lastGood) == 0 {
		t.Fatal("lockhub_jwks_last_success_timestamp_seconds is not set")
	}

	f.idp.Fail(0)
	f.idp.RemoveKey("k1")
	redistest.Eventually(t, "a refresh to succeed again and drop k1", func() bool {
		_, ok := f.keys.Load().set.LookupKeyID("k1")
		return !ok
	})
}

func TestNextRefresh(t *testing.T) {
	const interval = 15 * time.Minute
	for _, tc := range []struct {
		failures int
		want     time.Duration
	}{
		{0, interval}, {1, 5 * time.Second}, {2, 10 * time.Second}, {3, 20 * time.Second},
		{8, 640 * time.Second}, {9, interval}, {1000, interval},
	} {
		got := nextRefresh(interval, tc.failures)
		if got > tc.want || got < tc.want-tc.want/10 {
			t.Errorf("nextRefresh(%s, %d) = %s, want %s less at most a tenth", interval, tc.failures, got, tc.want)
		}
	}
	if got := nextRefresh(time.Millisecond, 3); got > time.Millisecond {
		t.Errorf("a failure backs off past a short interval: %s", got)
	}
}

// TestJWKSURL: the JWKS is fetched over https, or over http from loopback only
// (PROTOCOL.md §6); anything else is a setting error naming jwks-url.
func TestJWKSURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://login.microsoftonline.com/common/discovery/v2.0/keys", true},
		{"https://127.0.0.1:8443/keys", true},
		{"http://127.0.0.1:8080/keys", true},
		{"http://[::1]:8080/keys", true},
		{"http://localhost:8080/keys", true},
		{"http://LOCALHOST/keys", true},
		{"http://login.example/keys", false},
		{"http://10.0.0.1/keys", false},
		{"http://127.0.0.1.evil.example/keys", false},
		{"http://localhost.evil.example/keys", false},
		{"http://127.0.0.1@evil.example/keys", false},
		{"ftp://127.0.0.1/keys", false},
		{"file:///etc/passwd", false},
		{"//login.example/keys", false},
		{"", false},
	} {
		err := checkJWKSURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("checkJWKSURL(%q) = %v, want ok %v", tc.url, err, tc.ok)
		}
	}

	_, err := NewJWKS(context.Background(), JWKSConfig{URL: "http://login.example/keys", Issuer: "i", Audience: "a"})
	var se *protocol.SettingError
	if !errors.As(err, &se) || se.Setting != "jwks-url" || !strings.Contains(err.Error(), "https") {
		t.Fatalf("NewJWKS(http, not loopback) = %v, want a *protocol.SettingError for jwks-url", err)
	}
}

// TestJWKSRedirectToHTTP: an https endpoint (here a loopback http one standing in
// for it) may not redirect the fetch to a non-loopback http URL.
func TestJWKSRedirectToHTTP(t *testing.T) {
	srv := httptest.NewServer(http.RedirectHandler("http://login.example/keys", http.StatusFound))
	defer srv.Close()
	_, err := NewJWKS(context.Background(), JWKSConfig{URL: srv.URL, Issuer: "i", Audience: "a", HTTPClient: srv.Client()})
	if err == nil || !strings.Contains(err.Error(), "must be https") {
		t.Fatalf("NewJWKS followed a redirect to http: %v", err)
	}
}

// TestJWKSCloseJoins: Close ends the background refresh and a refetch held by a hung
// endpoint, and returns; goleak in TestMain checks nothing is left.
func TestJWKSCloseJoins(t *testing.T) {
	f := newIDPJWKS(t, JWKSConfig{UnknownKidWait: time.Millisecond, FetchTimeout: time.Hour})
	f.idp.AddKey(t, "k2")
	arrived, release := f.idp.Hang()
	defer release()
	f.mustRefuse(t, f.token(t, "k2"), "unknown kid while the JWKS hangs")
	<-arrived
	f.Close()
	if waiting(f.JWKS) {
		t.Fatal("Close returned with a refetch in flight")
	}
	f.clock.Advance(time.Minute)
	f.mustRefuse(t, f.token(t, "k2"), "unknown kid after Close") // no refetch starts
	f.mustVerify(t, f.token(t, "k1"), "known kid after Close")
	f.Close() // again: a no-op
}
