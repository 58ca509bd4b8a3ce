package auth

import (
	"bytes"
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

	"github.com/lockhub/lockhub/hub/auth/authtest"
	"github.com/lockhub/lockhub/protocol"
)

// testNow is the fixed clock of the token tests: expiry is decided by it, not by the
// time the test runs.
var testNow = time.Date(2026, 12, 2, 9, 15, 0, 0, time.UTC)

// newTestDev is a Dev on testNow's clock, and its signing key, to forge tokens with.
func newTestDev(t *testing.T) (*Dev, ed25519.PrivateKey) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDev(DevConfig{Key: key, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	return d, key
}

func goodClaims(iss, aud string) authtest.Claims { return authtest.GoodClaims(testNow, iss, aud) }

func TestDevVerify(t *testing.T) {
	d, key := newTestDev(t)
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

	for _, tc := range authtest.DevBadTokens(t, key, DevIssuer, DevAudience, testNow) {
		t.Run(tc.Name, func(t *testing.T) {
			id, err := d.Verify(context.Background(), tc.Token)
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("Verify = %+v, %v; want ErrUnauthorized", id, err)
			}
			t.Log(err) // the reason, for logs
		})
	}
}

func TestDevIssueValidates(t *testing.T) {
	d, err := NewDev(DevConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tenant, oid string }{{"acme}", "u-ada"}, {"acme", "a}b"}, {"", "u"}, {"acme", ""}} {
		_, err := d.Issue(tc.tenant, tc.oid, "x", nil)
		if !errors.Is(err, protocol.ErrInvalidEntity) {
			t.Errorf("Issue(%q, %q) = %v, want an invalid entity error", tc.tenant, tc.oid, err)
		}
	}
	if _, err := NewDev(DevConfig{TTL: -time.Second}); err == nil {
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
func (f *jwksFixture) publish(t testing.TB, keys ...jwk.Key) {
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

func newJWKSFixture(t testing.TB) *jwksFixture {
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

func newJWKSForTest(t testing.TB, f *jwksFixture) *JWKS {
	t.Helper()
	a, err := NewJWKS(context.Background(), JWKSConfig{
		URL: f.srv.URL, Issuer: "https://login.example/tenant/v2.0", Audience: "api://lockhub",
		HTTPClient: f.srv.Client(), Now: func() time.Time { return testNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close) // joins the background refresh
	return a
}

func TestJWKSVerify(t *testing.T) {
	f := newJWKSFixture(t)
	a := newJWKSForTest(t, f)
	const iss, aud = "https://login.example/tenant/v2.0", "api://lockhub"
	gc := goodClaims(iss, aud)

	for _, tc := range []struct{ Name, Token string }{
		{"RSA key with alg", authtest.Sign(t, gc, jwa.RS256, f.rsa, "rsa-1")},
		{"EC key without alg (inferred ES256)", authtest.Sign(t, gc, jwa.ES256, f.ec, "ec-1")},
		{"audience in a list", authtest.Sign(t, gc.With("aud", []string{"other", aud}), jwa.RS256, f.rsa, "rsa-1")},
		{"expired within the leeway", authtest.Sign(t, gc.With("exp", testNow.Add(-4*time.Second).Unix()), jwa.RS256, f.rsa, "rsa-1")},
	} {
		t.Run("good/"+tc.Name, func(t *testing.T) {
			id, err := a.Verify(context.Background(), tc.Token)
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

	for _, tc := range []struct{ Name, Token string }{
		{"expired", authtest.Sign(t, gc.With("exp", testNow.Add(-6*time.Second).Unix()), jwa.RS256, f.rsa, "rsa-1")},
		{"roles as a string, not an array (version 3)", authtest.Sign(t, gc.With("roles", "Locks.TakeOver"), jwa.RS256, f.rsa, "rsa-1")},
		{"not yet valid", authtest.Sign(t, gc.With("nbf", testNow.Add(time.Minute).Unix()), jwa.RS256, f.rsa, "rsa-1")},
		{"wrong issuer", authtest.Sign(t, gc.With("iss", "https://evil.example"), jwa.RS256, f.rsa, "rsa-1")},
		{"wrong audience", authtest.Sign(t, gc.With("aud", "api://other"), jwa.RS256, f.rsa, "rsa-1")},
		{"alg none", authtest.Unsigned(t, gc, "rsa-1")},
		{"HS256 signed with the public key DER", authtest.Sign(t, gc, jwa.HS256, f.pubDER, "rsa-1")},
		{"HS256 signed with the public key base64", authtest.Sign(t, gc, jwa.HS256, pemLike, "rsa-1")},
		{"RS512 where the key says RS256", authtest.Sign(t, gc, jwa.RS512, f.rsa, "rsa-1")},
		{"ES256 token naming the RSA kid", authtest.Sign(t, gc, jwa.ES256, f.ec, "rsa-1")},
		{"unknown kid", authtest.Sign(t, gc, jwa.RS256, otherKey, "rsa-2")},
		{"no kid", authtest.Sign(t, gc, jwa.RS256, f.rsa, "")},
		{"another key's signature", authtest.Sign(t, gc, jwa.RS256, otherKey, "rsa-1")},
		{"garbage", "garbage"},
		{"three garbage parts", "a.b.c"},
		{"empty", ""},
		{"missing exp", authtest.Sign(t, gc.With("exp", nil), jwa.RS256, f.rsa, "rsa-1")},
		{"missing tid", authtest.Sign(t, gc.With("tid", nil), jwa.RS256, f.rsa, "rsa-1")},
		{"missing oid", authtest.Sign(t, gc.With("oid", nil), jwa.RS256, f.rsa, "rsa-1")},
		{"hostile oid", authtest.Sign(t, gc.With("oid", "a}b"), jwa.RS256, f.rsa, "rsa-1")},
		{"hostile tenant", authtest.Sign(t, gc.With("tid", "{acme}"), jwa.RS256, f.rsa, "rsa-1")},
	} {
		t.Run("bad/"+tc.Name, func(t *testing.T) {
			id, err := a.Verify(context.Background(), tc.Token)
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("Verify = %+v, %v; want ErrUnauthorized", id, err)
			}
		})
	}

	// An unknown kid refetches the set once, then not again for a while.
	before := f.fetches.Load()
	for range 5 {
		_, _ = a.Verify(context.Background(), authtest.Sign(t, gc, jwa.RS256, otherKey, "rsa-9"))
	}
	if got := f.fetches.Load() - before; got > 1 {
		t.Errorf("5 tokens with an unknown kid fetched the JWKS %d times, want at most 1", got)
	}
}

// TestJWKSKeyRotation: a token signed with a key published after start is accepted:
// its unknown kid refetches the set.
func TestJWKSKeyRotation(t *testing.T) {
	f := newJWKSFixture(t)
	a := newJWKSForTest(t, f)
	nk, _ := rsa.GenerateKey(rand.Reader, 2048)
	next, _ := jwk.FromRaw(nk)
	_ = next.Set(jwk.KeyIDKey, "rsa-2")
	_ = next.Set(jwk.AlgorithmKey, jwa.RS256)
	f.publish(t, next) // the old keys are retired
	tok := authtest.Sign(t, goodClaims("https://login.example/tenant/v2.0", "api://lockhub"), jwa.RS256, next, "rsa-2")
	if _, err := a.Verify(context.Background(), tok); err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
	old := authtest.Sign(t, goodClaims("https://login.example/tenant/v2.0", "api://lockhub"), jwa.RS256, f.rsa, "rsa-1")
	if _, err := a.Verify(context.Background(), old); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("token of a retired key = %v, want ErrUnauthorized", err)
	}
}

func TestJWKSIgnoresJKU(t *testing.T) {
	f := newJWKSFixture(t)
	a := newJWKSForTest(t, f)
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

func TestNewJWKSConfig(t *testing.T) {
	f := newJWKSFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		name string
		cfg  JWKSConfig
	}{
		{"no URL", JWKSConfig{Issuer: "i", Audience: "a"}},
		{"not http", JWKSConfig{URL: "file:///etc/passwd", Issuer: "i", Audience: "a"}},
		{"http, not loopback", JWKSConfig{URL: "http://login.example/keys", Issuer: "i", Audience: "a"}},
		{"no issuer", JWKSConfig{URL: f.srv.URL, Audience: "a"}},
		{"no audience", JWKSConfig{URL: f.srv.URL, Issuer: "i"}},
		{"leeway over 5s", JWKSConfig{URL: f.srv.URL, Issuer: "i", Audience: "a", Leeway: 6 * time.Second}},
		{"refresh over an hour", JWKSConfig{URL: f.srv.URL, Issuer: "i", Audience: "a", RefreshInterval: time.Hour + time.Second}},
		{"unknown-kid wait over 5s", JWKSConfig{URL: f.srv.URL, Issuer: "i", Audience: "a", UnknownKidWait: 6 * time.Second}},
		{"negative fetch timeout", JWKSConfig{URL: f.srv.URL, Issuer: "i", Audience: "a", FetchTimeout: -time.Second}},
		{"unreachable", JWKSConfig{URL: "http://127.0.0.1:1/jwks", Issuer: "i", Audience: "a"}},
		{"no signing key", JWKSConfig{URL: emptySet(t), Issuer: "i", Audience: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewJWKS(ctx, tc.cfg); err == nil {
				t.Fatal("NewJWKS accepted it")
			}
		})
	}
}

// emptySet serves a JWKS without keys until t ends, and returns its URL.
func emptySet(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestClaimNames(t *testing.T) {
	d, err := NewDev(DevConfig{Claims: ClaimNames{Tenant: "tenant_id", OID: "sub", Roles: "groups"}})
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

// TestClaimsRead: the claims are read from the payload as issuers write them: a time
// with a fraction of a second, null roles, and claims lockhub does not read, nested or
// not, skipped.
func TestClaimsRead(t *testing.T) {
	d, key := newTestDev(t)
	exp := float64(testNow.Add(time.Hour).Unix()) + 0.25
	gc := authtest.GoodClaims(testNow, DevIssuer, DevAudience).With("exp", exp).
		With("xms_st", map[string]any{"sub": "x", "roles": []any{1, map[string]any{}}}).With("ver", 2.0)
	payload, _ := json.Marshal(gc) // a map of plain values
	payload = bytes.Replace(payload, []byte(`"roles":["Locks.TakeOver"]`), []byte(`"roles":null`), 1)
	if !bytes.Contains(payload, []byte(`"roles":null`)) {
		t.Fatalf("payload %s", payload)
	}
	id, err := d.Verify(context.Background(), authtest.SignPayload(t, payload, jwa.EdDSA, key, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(int64(exp), 25e7).UTC(); !id.Expires.Equal(want) || id.Roles != nil || id.OID != "u-ada" || id.Tenant != "acme" {
		t.Fatalf("Verify = %+v, want exp %v, no roles, u-ada of acme", id, want)
	}
}

// FuzzReadClaims: no payload makes the claim reader panic, and what it reads as a
// tenant or oid is what the payload holds under that name.
func FuzzReadClaims(f *testing.F) {
	for _, s := range []string{`{"tid":"acme","oid":"u-ada","roles":["a"],"exp":1.5}`, `{"aud":[1]}`, `[]`, `{"a":{"b":[{}]}}`,
		`{"oid":"a","oid":"b"}`, `{"exp":"1"}`, `{"roles":null,"name":"\ud800"}`, `{`} {
		f.Add([]byte(s))
	}
	names := ClaimNames{}.withDefaults()
	f.Fuzz(func(t *testing.T, payload []byte) {
		cl, err := readClaims(payload, names)
		if err != nil {
			return
		}
		var m map[string]any
		if json.Unmarshal(payload, &m) != nil {
			return // jsontext is stricter in places; nothing to compare
		}
		if s, ok := m["oid"].(string); ok && s != cl.oid {
			t.Fatalf("oid %q, the payload holds %q", cl.oid, s)
		}
		if s, ok := m["tid"].(string); ok && s != cl.tenant {
			t.Fatalf("tid %q, the payload holds %q", cl.tenant, s)
		}
	})
}

// TestClaimNamesDiffer: the four claim names must differ (PROTOCOL.md §6, version 3);
// both verifiers refuse names that collide, naming the later setting, before anything
// is fetched.
func TestClaimNamesDiffer(t *testing.T) {
	for _, tc := range []struct {
		claims ClaimNames
		want   string
	}{
		{ClaimNames{Roles: "name"}, "claim-roles"},
		{ClaimNames{Name: "oid"}, "claim-name"},
		{ClaimNames{OID: "tid"}, "claim-oid"},
		{ClaimNames{Tenant: "x", Roles: "x"}, "claim-roles"},
	} {
		_, err := NewDev(DevConfig{Claims: tc.claims})
		var se *protocol.SettingError
		if !errors.As(err, &se) || se.Setting != tc.want {
			t.Errorf("NewDev(%+v) = %v, want a setting error of %s", tc.claims, err, tc.want)
		}
		_, err = NewJWKS(context.Background(), JWKSConfig{URL: "http://127.0.0.1:1/keys", Issuer: "i", Audience: "a", Claims: tc.claims})
		if !errors.As(err, &se) || se.Setting != tc.want {
			t.Errorf("NewJWKS(%+v) = %v, want a setting error of %s", tc.claims, err, tc.want)
		}
	}
	if _, err := NewDev(DevConfig{Claims: ClaimNames{Tenant: "tenant_id", OID: "sub", Name: "preferred_username", Roles: "groups"}}); err != nil {
		t.Fatalf("four different names: %v", err)
	}
}
