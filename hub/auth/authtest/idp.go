package authtest

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
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

// IDP is an identity provider owned by a test: Ed25519 keys, at first one with kid
// "k1", whose public halves are served as a JWKS at URL until the test ends. Its
// endpoint can be made to fail or hang, and counts the requests it gets.
type IDP struct {
	URL    string       // where the JWKS is served
	Client *http.Client // an HTTP client for URL

	fetches atomic.Int64
	stop    chan struct{} // closed when the test ends: frees every hung request

	mu      sync.Mutex
	keys    map[string]jwk.Key // guarded by mu: the published keys, private, by kid
	retired map[string]jwk.Key // guarded by mu: keys no longer published, for TokenOf
	current string             // guarded by mu: the kid Token signs with
	status  int                // guarded by mu: the status to fail with; 0 serves the set
	hang    chan struct{}      // guarded by mu: requests wait for it to close; nil means none
	arrived chan struct{}      // guarded by mu: told of each request that hangs
}

// NewIDP starts an identity provider that lives until t ends.
func NewIDP(t testing.TB) *IDP {
	t.Helper()
	p := &IDP{keys: map[string]jwk.Key{}, retired: map[string]jwk.Key{}, stop: make(chan struct{})}
	p.AddKey(t, "k1")
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(p.stop) }) // runs first: a hung handler would block srv.Close
	p.URL, p.Client = srv.URL, srv.Client()
	return p
}

func (p *IDP) serve(w http.ResponseWriter, r *http.Request) {
	p.fetches.Add(1)
	p.mu.Lock()
	hang, arrived := p.hang, p.arrived
	p.mu.Unlock()
	if hang != nil {
		select {
		case arrived <- struct{}{}:
		default: // nobody counts past the buffer
		}
		select {
		case <-hang:
		case <-r.Context().Done(): // the client gave up
			return
		case <-p.stop:
			return
		}
	}
	p.mu.Lock()
	status := p.status
	body, err := p.setLocked()
	p.mu.Unlock()
	if err != nil || status != 0 {
		http.Error(w, "failing as told", cmp.Or(status, http.StatusInternalServerError))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body) // a cut response fails the verifier's fetch loudly
}

// setLocked is the JWKS body of the published keys. p.mu is held.
func (p *IDP) setLocked() ([]byte, error) {
	set := jwk.NewSet()
	for _, k := range p.keys {
		pub, err := jwk.PublicKeyOf(k)
		if err != nil {
			return nil, err
		}
		if err := set.AddKey(pub); err != nil {
			return nil, err
		}
	}
	return json.Marshal(set)
}

// AddKey makes a new key named kid and publishes it alongside the others; Token signs
// with it from now on.
func (p *IDP) AddKey(t testing.TB, kid string) {
	t.Helper()
	_, raw, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwk.FromRaw(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Set(jwk.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	if err := key.Set(jwk.AlgorithmKey, jwa.EdDSA); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys[kid] = key
	delete(p.retired, kid)
	p.current = kid
}

// RemoveKey stops publishing the key named kid, as after a rotation. TokenOf still
// signs with it.
func (p *IDP) RemoveKey(kid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k, ok := p.keys[kid]; ok {
		p.retired[kid] = k
		delete(p.keys, kid)
	}
}

// Fail makes the endpoint answer status from now on instead of the key set; 0 serves
// the set again.
func (p *IDP) Fail(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = status
}

// Hang makes the endpoint hold every request from now on, unanswered, until release
// is called, the client gives up or the test ends; then it answers as it would have.
// arrived receives once for each request held (up to 64 unreceived). release may be
// called more than once.
func (p *IDP) Hang() (arrived <-chan struct{}, release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hang, ch := make(chan struct{}), make(chan struct{}, 64)
	p.hang, p.arrived = hang, ch
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			p.mu.Lock()
			if p.hang == hang {
				p.hang, p.arrived = nil, nil
			}
			p.mu.Unlock()
			close(hang)
		})
	}
}

// Fetches is how many requests the endpoint has had.
func (p *IDP) Fetches() int { return int(p.fetches.Load()) }

// Token signs a token with the current key (the one last added), its kid in the
// header, with claims on top of iss Issuer, aud Audience and exp an hour from now; a
// claim given replaces its default. Times may be time.Time.
func (p *IDP) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	p.mu.Lock()
	kid := p.current
	p.mu.Unlock()
	return p.TokenOf(t, kid, claims)
}

// TokenOf is Token signed with the key named kid, published or removed.
func (p *IDP) TokenOf(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	return p.sign(t, p.keyOf(t, kid), claims)
}

// TokenWithoutKid is Token with no kid in the header.
func (p *IDP) TokenWithoutKid(t testing.TB, claims map[string]any) string {
	t.Helper()
	p.mu.Lock()
	kid := p.current
	p.mu.Unlock()
	var raw ed25519.PrivateKey
	if err := p.keyOf(t, kid).Raw(&raw); err != nil {
		t.Fatal(err)
	}
	return p.sign(t, raw, claims) // a raw key has no kid for jwx to put in the header
}

func (p *IDP) keyOf(t testing.TB, kid string) jwk.Key {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.keys[kid]
	if !ok {
		k, ok = p.retired[kid]
	}
	if !ok {
		t.Fatalf("authtest: the IDP has no key %q", kid)
	}
	return k
}

func (p *IDP) sign(t testing.TB, key any, claims map[string]any) string {
	t.Helper()
	b := jwt.NewBuilder().Issuer(Issuer).Audience([]string{Audience}).Expiration(time.Now().Add(time.Hour))
	for k, v := range claims {
		b = b.Claim(k, v)
	}
	tok, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.EdDSA, key))
	if err != nil {
		t.Fatal(err)
	}
	return string(signed)
}
