package authtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jwt"
)

// Issuer and Audience are the iss and aud of every token an IDP signs unless the
// claims say otherwise.
const (
	Issuer   = "https://login.example.com/"
	Audience = "api://lockhub"
)

// IDP is an identity provider owned by a test: an Ed25519 key (kid "k1") whose public
// half is served as a JWKS at URL until the test ends.
type IDP struct {
	URL    string       // where the JWKS is served
	Client *http.Client // an HTTP client for URL
	key    jwk.Key
}

// NewIDP starts an identity provider that lives until t ends.
func NewIDP(t testing.TB) *IDP {
	t.Helper()
	_, raw, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwk.FromRaw(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Set(jwk.KeyIDKey, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := key.Set(jwk.AlgorithmKey, jwa.EdDSA); err != nil {
		t.Fatal(err)
	}
	pub, err := jwk.PublicKeyOf(key)
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set) // a cut response fails the verifier's fetch loudly
	}))
	t.Cleanup(srv.Close)
	return &IDP{URL: srv.URL, Client: srv.Client(), key: key}
}

// Token signs a token with claims on top of iss Issuer, aud Audience and exp an hour
// from now; a claim given replaces its default. Times may be time.Time.
func (p *IDP) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	b := jwt.NewBuilder().Issuer(Issuer).Audience([]string{Audience}).Expiration(time.Now().Add(time.Hour))
	for k, v := range claims {
		b = b.Claim(k, v)
	}
	tok, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.EdDSA, p.key))
	if err != nil {
		t.Fatal(err)
	}
	return string(signed)
}
