package main

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jwt"
)

// TestRunWithJWKS runs in production mode: tokens are checked against a JWKS, with the
// configured claim names, and there is no /dev/token.
func TestRunWithJWKS(t *testing.T) {
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := jwk.FromRaw(raw)
	if err != nil {
		t.Fatal(err)
	}
	_ = priv.Set(jwk.KeyIDKey, "k1")
	_ = priv.Set(jwk.AlgorithmKey, jwa.RS256)
	pub, err := jwk.PublicKeyOf(priv)
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	_ = set.AddKey(pub)
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(idp.Close)

	sign := func(aud string, roles ...string) string {
		tok, err := jwt.NewBuilder().Issuer("https://login.example.com/").Audience([]string{aud}).
			Expiration(time.Now().Add(time.Hour)).Claim("org", "acme").Claim("oid", "u-ada").
			Claim("name", "Ada Lovelace").Claim("roles", roles).Build()
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256, priv))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	r := start(t, []string{"--jwks-url", idp.URL, "--issuer", "https://login.example.com/", "--claim-tenant", "org"},
		env("LOCKHUB_AUDIENCE", "api://lockhub"))
	if a := call(t, "POST", r.url+"/dev/token", "", `{"tenant":"acme","oid":"u-ada"}`); a.status != 404 {
		t.Fatalf("/dev/token in production: %d %s", a.status, a.raw)
	}
	good := sign("api://lockhub", "Locks.TakeOver")
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-1001/takeover", good, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("takeover with a JWKS token: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", r.url+"/api/me/locks", sign("api://other"), ""); a.status != 401 {
		t.Fatalf("another audience: %d %s", a.status, a.raw)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if logs := r.logs.String(); strings.Contains(logs, "DEVELOPMENT") || strings.Contains(logs, good[:40]) {
		t.Fatalf("logs:\n%s", logs)
	}
}

// TestRunJWKSUnreachable: a JWKS that cannot be fetched stops the start, naming the
// setting, before anything listens.
func TestRunJWKSUnreachable(t *testing.T) {
	idp := httptest.NewServer(http.NotFoundHandler())
	url := idp.URL + "/keys"
	idp.Close()
	m := &Main{Args: []string{"--listen", "127.0.0.1:0", "--jwks-url", url, "--issuer", "i", "--audience", "a"}, LookupEnv: env(), Stdout: &syncBuffer{}}
	err := m.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "--jwks-url") {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-m.Ready():
		t.Fatal("listening without its keys")
	default:
	}
}
