package hub

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/lockhub/lockhub/locks"
)

// testNow is the fixed clock of the token tests: expiry is decided by it, not by the
// time the test runs.
var testNow = time.Date(2026, 12, 2, 9, 15, 0, 0, time.UTC)

// claims is a token payload under construction.
type claims map[string]any

func goodClaims(iss, aud string) claims { return goodClaimsAt(testNow, iss, aud) }

func goodClaimsAt(now time.Time, iss, aud string) claims {
	return claims{
		"iss": iss, "aud": aud, "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
		"tid": "acme", "oid": "u-ada", "name": "Ada Lovelace", "roles": []string{"Locks.TakeOver"},
	}
}

func (c claims) with(k string, v any) claims {
	out := claims{}
	for kk, vv := range c {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// sign signs payload c with key under alg, putting kid in the header when not empty.
// A jwk.Key is signed with as its raw key: jwx would put the key's own kid in the header.
func sign(t *testing.T, c claims, alg jwa.SignatureAlgorithm, key any, kid string) string {
	t.Helper()
	if k, ok := key.(jwk.Key); ok {
		var raw any
		if err := k.Raw(&raw); err != nil {
			t.Fatal(err)
		}
		key = raw
	}
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	if kid != "" {
		_ = hdr.Set(jws.KeyIDKey, kid)
	}
	_ = hdr.Set(jws.TypeKey, "JWT")
	b, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unsigned builds an alg:none token by hand: jwx refuses to make one.
func unsigned(t *testing.T, c claims, kid string) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": kid})
	p, _ := json.Marshal(c)
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(p) + "."
}

// badToken is one entry of the bad-token list of the issue.
type badToken struct {
	name  string
	token string
}

func TestDevAuthVerify(t *testing.T) {
	d, err := NewDevAuth(DevAuthConfig{Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	good, err := d.Issue("acme", "u-ada", "Ada Lovelace", []string{"Locks.TakeOver"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := d.Verify(context.Background(), good)
	if err != nil {
		t.Fatalf("Verify(good) = %v", err)
	}
	want := Identity{Tenant: "acme", OID: "u-ada", Name: "Ada Lovelace", Roles: []string{"Locks.TakeOver"}, Expires: testNow.Add(time.Hour)}
	if id.Tenant != want.Tenant || id.OID != want.OID || id.Name != want.Name || !id.Expires.Equal(want.Expires) || !id.HasRole("Locks.TakeOver") {
		t.Fatalf("Verify(good) = %+v, want %+v", id, want)
	}
	if h := id.Holder(); h.OID != "u-ada" || h.Name != "Ada Lovelace" {
		t.Fatalf("Holder() = %+v", h)
	}

	// Within the 5 s leeway, and just past it.
	skewed, _ := d.IssueWithExpiry("acme", "u-ada", "Ada", nil, testNow.Add(-4*time.Second))
	if _, err := d.Verify(context.Background(), skewed); err != nil {
		t.Fatalf("a token expired 4s ago (leeway 5s) was refused: %v", err)
	}

	for _, tc := range devBadTokens(t, d, testNow) {
		t.Run(tc.name, func(t *testing.T) {
			id, err := d.Verify(context.Background(), tc.token)
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("Verify = %+v, %v; want ErrUnauthorized", id, err)
			}
		})
	}
}

func TestDevAuthIssueValidates(t *testing.T) {
	d, err := NewDevAuth(DevAuthConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tenant, oid string }{{"acme}", "u-ada"}, {"acme", "a}b"}, {"", "u"}, {"acme", ""}} {
		_, err := d.Issue(tc.tenant, tc.oid, "x", nil)
		if !errors.Is(err, locks.ErrInvalidEntity) {
			t.Errorf("Issue(%q, %q) = %v, want an invalid entity error", tc.tenant, tc.oid, err)
		}
	}
	if _, err := NewDevAuth(DevAuthConfig{TTL: -time.Second}); err == nil {
		t.Error("a negative TTL was accepted")
	}
}

// jwksFixture serves a JWKS of an RSA key with "alg" and an EC key without it (as
// Azure AD serves them), and counts fetches.
type jwksFixture struct {
	srv     *httptest.Server
	rsa     jwk.Key // private, kid "rsa-1", alg RS256
	ec      jwk.Key // private, kid "ec-1", no alg
	fetches atomic.Int32
	pubDER  []byte // the RSA public key, as an attacker could fetch it
	body    atomic.Pointer[[]byte]
}

// publish serves the public parts of keys as the JWKS from now on.
func (f *jwksFixture) publish(t *testing.T, keys ...jwk.Key) {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		pk, _ := jwk.PublicKeyOf(k)
		_ = set.AddKey(pk)
	}
	body, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	f.body.Store(&body)
}

func newJWKSFixture(t *testing.T) *jwksFixture {
	t.Helper()
	f := &jwksFixture{}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f.rsa, _ = jwk.FromRaw(rk)
	_ = f.rsa.Set(jwk.KeyIDKey, "rsa-1")
	_ = f.rsa.Set(jwk.AlgorithmKey, jwa.RS256)
	f.pubDER, _ = x509.MarshalPKIXPublicKey(&rk.PublicKey)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	f.ec, _ = jwk.FromRaw(ek)
	_ = f.ec.Set(jwk.KeyIDKey, "ec-1")

	f.publish(t, f.rsa, f.ec)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*f.body.Load())
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func newJWKSAuthForTest(t *testing.T, f *jwksFixture) *JWKSAuth {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // ends the cache's refresh goroutines
	a, err := NewJWKSAuth(ctx, JWKSConfig{
		URL: f.srv.URL, Issuer: "https://login.example/tenant/v2.0", Audience: "api://lockhub",
		HTTPClient: f.srv.Client(), Now: func() time.Time { return testNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestJWKSAuthVerify(t *testing.T) {
	f := newJWKSFixture(t)
	a := newJWKSAuthForTest(t, f)
	const iss, aud = "https://login.example/tenant/v2.0", "api://lockhub"
	gc := goodClaims(iss, aud)

	for _, tc := range []struct {
		name  string
		token string
	}{
		{"RSA key with alg", sign(t, gc, jwa.RS256, f.rsa, "rsa-1")},
		{"EC key without alg (inferred ES256)", sign(t, gc, jwa.ES256, f.ec, "ec-1")},
		{"audience in a list", sign(t, gc.with("aud", []string{"other", aud}), jwa.RS256, f.rsa, "rsa-1")},
		{"single role as a string", sign(t, gc.with("roles", "Locks.TakeOver"), jwa.RS256, f.rsa, "rsa-1")},
		{"expired within the leeway", sign(t, gc.with("exp", testNow.Add(-4*time.Second).Unix()), jwa.RS256, f.rsa, "rsa-1")},
	} {
		t.Run("good/"+tc.name, func(t *testing.T) {
			id, err := a.Verify(context.Background(), tc.token)
			if err != nil {
				t.Fatalf("Verify = %v", err)
			}
			if id.Tenant != "acme" || id.OID != "u-ada" || !id.HasRole("Locks.TakeOver") {
				t.Fatalf("Verify = %+v", id)
			}
		})
	}

	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	otherKey, _ := jwk.FromRaw(otherRSA)
	pemLike := []byte(base64.StdEncoding.EncodeToString(f.pubDER))

	for _, tc := range []badToken{
		{"expired", sign(t, gc.with("exp", testNow.Add(-6*time.Second).Unix()), jwa.RS256, f.rsa, "rsa-1")},
		{"not yet valid", sign(t, gc.with("nbf", testNow.Add(time.Minute).Unix()), jwa.RS256, f.rsa, "rsa-1")},
		{"wrong issuer", sign(t, gc.with("iss", "https://evil.example"), jwa.RS256, f.rsa, "rsa-1")},
		{"wrong audience", sign(t, gc.with("aud", "api://other"), jwa.RS256, f.rsa, "rsa-1")},
		{"alg none", unsigned(t, gc, "rsa-1")},
		{"HS256 signed with the public key DER", sign(t, gc, jwa.HS256, f.pubDER, "rsa-1")},
		{"HS256 signed with the public key base64", sign(t, gc, jwa.HS256, pemLike, "rsa-1")},
		{"RS512 where the key says RS256", sign(t, gc, jwa.RS512, f.rsa, "rsa-1")},
		{"ES256 token naming the RSA kid", sign(t, gc, jwa.ES256, f.ec, "rsa-1")},
		{"unknown kid", sign(t, gc, jwa.RS256, otherKey, "rsa-2")},
		{"no kid", sign(t, gc, jwa.RS256, f.rsa, "")},
		{"another key's signature", sign(t, gc, jwa.RS256, otherKey, "rsa-1")},
		{"garbage", "garbage"},
		{"three garbage parts", "a.b.c"},
		{"empty", ""},
		{"missing exp", sign(t, gc.with("exp", nil), jwa.RS256, f.rsa, "rsa-1")},
		{"missing tid", sign(t, gc.with("tid", nil), jwa.RS256, f.rsa, "rsa-1")},
		{"missing oid", sign(t, gc.with("oid", nil), jwa.RS256, f.rsa, "rsa-1")},
		{"hostile oid", sign(t, gc.with("oid", "a}b"), jwa.RS256, f.rsa, "rsa-1")},
		{"hostile tenant", sign(t, gc.with("tid", "{acme}"), jwa.RS256, f.rsa, "rsa-1")},
	} {
		t.Run("bad/"+tc.name, func(t *testing.T) {
			id, err := a.Verify(context.Background(), tc.token)
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("Verify = %+v, %v; want ErrUnauthorized", id, err)
			}
		})
	}

	// An unknown kid refetches the set once, then not again for a while.
	before := f.fetches.Load()
	for range 5 {
		_, _ = a.Verify(context.Background(), sign(t, gc, jwa.RS256, otherKey, "rsa-9"))
	}
	if got := f.fetches.Load() - before; got > 1 {
		t.Errorf("5 tokens with an unknown kid fetched the JWKS %d times, want at most 1", got)
	}
}

// TestJWKSAuthKeyRotation: a token signed with a key published after start is accepted:
// its unknown kid refetches the set.
func TestJWKSAuthKeyRotation(t *testing.T) {
	f := newJWKSFixture(t)
	a := newJWKSAuthForTest(t, f)
	nk, _ := rsa.GenerateKey(rand.Reader, 2048)
	next, _ := jwk.FromRaw(nk)
	_ = next.Set(jwk.KeyIDKey, "rsa-2")
	_ = next.Set(jwk.AlgorithmKey, jwa.RS256)
	f.publish(t, next) // the old keys are retired
	tok := sign(t, goodClaims("https://login.example/tenant/v2.0", "api://lockhub"), jwa.RS256, next, "rsa-2")
	if _, err := a.Verify(context.Background(), tok); err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
	old := sign(t, goodClaims("https://login.example/tenant/v2.0", "api://lockhub"), jwa.RS256, f.rsa, "rsa-1")
	if _, err := a.Verify(context.Background(), old); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("token of a retired key = %v, want ErrUnauthorized", err)
	}
}

func TestJWKSAuthIgnoresJKU(t *testing.T) {
	f := newJWKSFixture(t)
	a := newJWKSAuthForTest(t, f)
	var hits atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer evil.Close()
	evilKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	k, _ := jwk.FromRaw(evilKey)
	_ = k.Set(jwk.KeyIDKey, "evil")
	payload, _ := json.Marshal(goodClaims("https://login.example/tenant/v2.0", "api://lockhub"))
	hdr := jws.NewHeaders()
	_ = hdr.Set(jws.KeyIDKey, "evil")
	_ = hdr.Set(jws.JWKSetURLKey, evil.URL)
	tok, err := jws.Sign(payload, jws.WithKey(jwa.RS256, k, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(context.Background(), string(tok)); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Verify = %v, want ErrUnauthorized", err)
	}
	if hits.Load() != 0 {
		t.Fatal("Verify fetched the URL named by the token's jku")
	}
}

func TestNewJWKSAuthConfig(t *testing.T) {
	f := newJWKSFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		name string
		cfg  JWKSConfig
	}{
		{"no URL", JWKSConfig{Issuer: "i", Audience: "a"}},
		{"not http", JWKSConfig{URL: "file:///etc/passwd", Issuer: "i", Audience: "a"}},
		{"no issuer", JWKSConfig{URL: f.srv.URL, Audience: "a"}},
		{"no audience", JWKSConfig{URL: f.srv.URL, Issuer: "i"}},
		{"leeway over 5s", JWKSConfig{URL: f.srv.URL, Issuer: "i", Audience: "a", Leeway: 6 * time.Second}},
		{"unreachable", JWKSConfig{URL: "http://127.0.0.1:1/jwks", Issuer: "i", Audience: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewJWKSAuth(ctx, tc.cfg); err == nil {
				t.Fatal("NewJWKSAuth accepted it")
			}
		})
	}
}

func TestClaimNames(t *testing.T) {
	d, err := NewDevAuth(DevAuthConfig{Claims: ClaimNames{Tenant: "tenant_id", OID: "sub", Roles: "groups"}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := d.Issue("globex", "u-bob", "Bob", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.ParseInsecure([]byte(tok))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := parsed.Get("tenant_id"); v != "globex" {
		t.Fatalf("tenant_id = %v", v)
	}
	if parsed.Subject() != "u-bob" {
		t.Fatalf("sub = %q", parsed.Subject())
	}
	id, err := d.Verify(context.Background(), tok)
	if err != nil || id.Tenant != "globex" || id.OID != "u-bob" || strings.Join(id.Roles, ",") != "a,b" {
		t.Fatalf("Verify = %+v, %v", id, err)
	}
}

// devBadTokens is the bad-token list of the issue for d, whose clock reads now.
func devBadTokens(t *testing.T, d *DevAuth, now time.Time) []badToken {
	t.Helper()
	var rawPub ed25519.PublicKey
	if err := d.pub.Raw(&rawPub); err != nil {
		t.Fatal(err)
	}
	other, _ := NewDevAuth(DevAuthConfig{Now: func() time.Time { return now }})
	otherTok, _ := other.Issue("acme", "u-ada", "Ada", nil)
	expired, _ := d.IssueWithExpiry("acme", "u-ada", "Ada", nil, now.Add(-6*time.Second))
	gc := goodClaimsAt(now, devIssuer, devAudience)
	kid := d.priv.KeyID()
	return []badToken{
		{"expired", expired},
		{"not yet valid", sign(t, gc.with("nbf", now.Add(time.Minute).Unix()), jwa.EdDSA, d.priv, kid)},
		{"wrong issuer", sign(t, gc.with("iss", "https://evil.example"), jwa.EdDSA, d.priv, kid)},
		{"wrong audience", sign(t, gc.with("aud", "someone-else"), jwa.EdDSA, d.priv, kid)},
		{"alg none", unsigned(t, gc, kid)},
		{"HS256 signed with the public key bytes", sign(t, gc, jwa.HS256, []byte(rawPub), kid)},
		{"unknown kid", sign(t, gc, jwa.EdDSA, other.priv, "no-such-kid")},
		{"another key's signature", otherTok},
		{"garbage", "not.a.token"},
		{"garbage base64", "eyJhbGciOiJFZERTQSJ9.eyJ$$$.AAAA"},
		{"empty", ""},
		{"missing exp", sign(t, gc.with("exp", nil), jwa.EdDSA, d.priv, kid)},
		{"missing tid", sign(t, gc.with("tid", nil), jwa.EdDSA, d.priv, kid)},
		{"missing oid", sign(t, gc.with("oid", nil), jwa.EdDSA, d.priv, kid)},
		{"hostile oid", sign(t, gc.with("oid", "a}b"), jwa.EdDSA, d.priv, kid)},
		{"hostile tenant", sign(t, gc.with("tid", "acme}:x"), jwa.EdDSA, d.priv, kid)},
		{"oid of the wrong type", sign(t, gc.with("oid", 42), jwa.EdDSA, d.priv, kid)},
		{"roles of the wrong type", sign(t, gc.with("roles", map[string]any{"a": 1}), jwa.EdDSA, d.priv, kid)},
	}
}
