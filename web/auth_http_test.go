package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/hub/auth/authtest"
	"github.com/lockhub/lockhub/web"
)

// The token rules of PROTOCOL.md §4 and §6 over HTTP: a token whose tenant or oid fails
// §1 is refused like any bad token (401), and expiry has 5 s of leeway.

// authRoutes are the lock API routes these tests call: a read and a write.
var authRoutes = []struct{ method, path string }{
	{"GET", "/api/me/locks"},
	{"POST", lockPath},
}

// tokenClock is the verifiers' clock in these tests, so expiry does not depend on when
// the test runs or how long it takes.
var tokenClock = time.Date(2026, 12, 2, 9, 15, 0, 0, time.UTC)

// idp checks tokens of a authtest.IDP with the real auth.JWKS, on tokenClock.
// Development tokens cannot carry an invalid tenant or oid (DevAuth.Issue refuses
// them); a JWKS token can.
type idp struct {
	*authtest.IDP
	auth *auth.JWKS
}

func newIDP(t *testing.T) *idp {
	t.Helper()
	p := authtest.NewIDP(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // ends the JWKS cache's goroutines
	auth, err := auth.NewJWKS(ctx, auth.JWKSConfig{URL: p.URL, Issuer: authtest.Issuer, Audience: authtest.Audience,
		HTTPClient: p.Client, Now: func() time.Time { return tokenClock }})
	if err != nil {
		t.Fatal(err)
	}
	return &idp{p, auth}
}

// token signs a token for tenant and oid that expires at exp.
func (p *idp) token(t testing.TB, tenant, oid string, exp time.Time) string {
	t.Helper()
	return p.Token(t, map[string]any{"iat": tokenClock.Add(-time.Minute), "exp": exp,
		"tid": tenant, "oid": oid, "name": "Ada Lovelace", "roles": []string{}})
}

// wantUnauthorized checks a 401 {"code":"unauthorized","message":".."}.
func wantUnauthorized(t testing.TB, r resp) {
	t.Helper()
	wantStatus(t, r, http.StatusUnauthorized, "unauthorized")
	if r.str("message") == "" {
		t.Fatalf("401 without a message: %s", r.raw)
	}
}

// TestInvalidIdentityRefused: a validly signed token whose tenant or oid fails §1 is
// answered 401 unauthorized on the lock API, and nothing is written.
func TestInvalidIdentityRefused(t *testing.T) {
	p := newIDP(t)
	e := newEnv(t, envOpts{config: func(c *web.Config) { c.Verifier = p.auth }})
	exp := tokenClock.Add(time.Hour)

	for _, tc := range []struct{ name, tenant, oid string }{
		{"tenant with a space", "acme corp", "u-ada"},
		{"tenant in braces", "{acme}", "u-ada"},
		{"tenant with a brace", "acme}", "u-ada"},
		{"tenant of 65 characters", strings.Repeat("a", 65), "u-ada"},
		{"tenant with a colon", "acme:x", "u-ada"}, // the uid rule allows ':', the tenant rule does not
		{"empty tenant", "", "u-ada"},
		{"oid with a brace", "acme", "u-{ada}"},
		{"oid with a space", "acme", "u ada"},
		{"oid of 129 characters", "acme", strings.Repeat("u", 129)},
		{"empty oid", "acme", ""},
	} {
		tok := p.token(t, tc.tenant, tc.oid, exp)
		for _, rt := range authRoutes {
			t.Run(tc.name+" "+rt.method+" "+rt.path, func(t *testing.T) {
				wantUnauthorized(t, e.doT(t, req{method: rt.method, path: rt.path, token: tok}))
			})
		}
	}
	if ks := keys(t, e.lockRDB, "*"); len(ks) != 0 {
		t.Fatalf("refused requests wrote %v", ks)
	}

	// The same IdP's tokens pass at the edges of the rules, and then do write: the
	// refusals above are the names', not the setup's.
	for _, tc := range []struct{ name, tenant, oid string }{
		{"tenant of 64 characters", strings.Repeat("a", 64), "u-ada"},
		{"oid with a colon, 128 characters", "acme", "u:" + strings.Repeat("u", 126)},
	} {
		t.Run("accepted "+tc.name, func(t *testing.T) {
			tok := p.token(t, tc.tenant, tc.oid, exp)
			wantStatus(t, e.doT(t, req{method: "GET", path: "/api/me/locks", token: tok}), http.StatusOK, "")
			wantOutcome(t, e.doT(t, req{method: "POST", path: lockPath, token: tok}), http.StatusOK, "acquired")
		})
	}
	if ks := keys(t, e.lockRDB, "lock:*"); len(ks) != 2 {
		t.Fatalf("accepted claims wrote locks %v, want 2", ks)
	}
}

// TestInvalidIdentityRefusedWhateverTheVerifier: the Server checks the identity a
// Verifier returns against §1 itself, so a Verifier of another Go API that does not
// (web.Config takes any auth.Verifier) cannot smuggle a hostile tenant into a key.
func TestInvalidIdentityRefusedWhateverTheVerifier(t *testing.T) {
	for _, id := range []auth.Identity{
		{Tenant: "{acme}", OID: "u-ada"},
		{Tenant: "acme corp", OID: "u-ada"},
		{Tenant: strings.Repeat("a", 65), OID: "u-ada"},
		{Tenant: "acme", OID: "u-{ada}"},
		{Tenant: "acme", OID: "u ada"},
	} {
		t.Run(id.Tenant+" "+id.OID, func(t *testing.T) {
			id.Expires = time.Now().Add(time.Hour)
			e := newEnv(t, envOpts{config: func(c *web.Config) { c.Verifier = lenientVerifier{id} }})
			for _, rt := range authRoutes {
				wantUnauthorized(t, e.doT(t, req{method: rt.method, path: rt.path, token: "any"}))
			}
			if ks := keys(t, e.lockRDB, "*"); len(ks) != 0 {
				t.Fatalf("refused requests wrote %v", ks)
			}
		})
	}
}

// lenientVerifier accepts every token as id, without checking id against §1.
type lenientVerifier struct{ id auth.Identity }

func (v lenientVerifier) Verify(context.Context, string) (auth.Identity, error) { return v.id, nil }

// TestTokenLeewayOverHTTP: a token that expired 3 s ago is still accepted (5 s of
// leeway for clock skew), one that expired 10 s ago is refused with 401, with
// development tokens and with JWKS tokens alike.
func TestTokenLeewayOverHTTP(t *testing.T) {
	p := newIDP(t)
	dev, err := auth.NewDev(auth.DevConfig{Now: func() time.Time { return tokenClock }})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name     string
		verifier auth.Verifier
		token    func(t *testing.T, exp time.Time) string
	}{
		{"development", dev, func(t *testing.T, exp time.Time) string {
			tok, err := dev.IssueWithExpiry("acme", "u-ada", "Ada Lovelace", nil, exp)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}},
		{"JWKS", p.auth, func(t *testing.T, exp time.Time) string { return p.token(t, "acme", "u-ada", exp) }},
	} {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, envOpts{config: func(c *web.Config) { c.Verifier = v.verifier }})
			stale := v.token(t, tokenClock.Add(-10*time.Second))
			for _, rt := range authRoutes {
				wantUnauthorized(t, e.doT(t, req{method: rt.method, path: rt.path, token: stale}))
			}
			if ks := keys(t, e.lockRDB, "*"); len(ks) != 0 {
				t.Fatalf("an expired token wrote %v", ks)
			}
			skewed := v.token(t, tokenClock.Add(-3*time.Second))
			wantStatus(t, e.doT(t, req{method: "GET", path: "/api/me/locks", token: skewed}), http.StatusOK, "")
			wantOutcome(t, e.doT(t, req{method: "POST", path: lockPath, token: skewed}), http.StatusOK, "acquired")
		})
	}
}
