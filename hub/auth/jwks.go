package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/lockhub/lockhub/protocol"
)

// JWKSConfig configures a JWKS. URL, Issuer and Audience are required.
type JWKSConfig struct {
	// URL is where the signing keys are, http or https: setting "jwks-url". Required.
	// It is the only URL ever fetched: none is derived from a token (no jku, no x5u).
	URL string
	// Issuer is the required "iss" of every token: setting "issuer". Required.
	Issuer string
	// Audience must be one of the "aud" of every token: setting "audience". Required.
	Audience string
	// Claims names the claims an Identity is read from. Zero fields mean the defaults
	// of ClaimNames.
	Claims ClaimNames
	// Leeway is the clock skew allowed on exp, nbf and iat. Zero means 5s; more than
	// 5s is an error (PROTOCOL.md §4).
	Leeway time.Duration
	// HTTPClient fetches the key set. Nil means a client with a 10s timeout.
	HTTPClient *http.Client
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// JWKS verifies production tokens against a JWKS (PROTOCOL.md §6): the signature
// with the key the token's kid names in the set, the algorithm taken from that key
// (never from the token), then issuer, audience, exp and nbf. The set is cached and
// refreshed in the background (jwx jwk.Cache); a kid the cache does not know triggers
// one refetch, at most every unknownKidRefetch, so rotated keys are picked up without
// letting random kids hammer the identity provider. Safe for concurrent use.
type JWKS struct {
	cfg   JWKSConfig
	names ClaimNames
	cache *jwk.Cache

	mu          sync.Mutex
	lastRefetch time.Time // guarded by mu
}

var _ Verifier = (*JWKS)(nil)

// unknownKidRefetch spaces the refetches an unknown kid triggers.
const unknownKidRefetch = 30 * time.Second

// NewJWKS fetches the key set once, so a wrong URL fails at start, and returns a
// JWKS that keeps it fresh until ctx is done. The cache's goroutines belong to jwx:
// they end when ctx is done.
func NewJWKS(ctx context.Context, cfg JWKSConfig) (*JWKS, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, &protocol.SettingError{Setting: "jwks-url", Err: fmt.Errorf("%q is not an http or https URL", cfg.URL)}
	}
	if cfg.Issuer == "" {
		return nil, &protocol.SettingError{Setting: "issuer", Err: errors.New("is required with a JWKS: tokens of any issuer would pass")}
	}
	if cfg.Audience == "" {
		return nil, &protocol.SettingError{Setting: "audience", Err: errors.New("is required with a JWKS: tokens for any service would pass")}
	}
	if cfg.Leeway < 0 || cfg.Leeway > maxLeeway {
		return nil, fmt.Errorf("auth: JWKSConfig.Leeway %s must be between 0 and %s", cfg.Leeway, maxLeeway)
	}
	cfg.Leeway = cmp.Or(cfg.Leeway, maxLeeway)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &JWKS{cfg: cfg, names: cfg.Claims.withDefaults(), cache: jwk.NewCache(ctx)}
	if err := a.cache.Register(cfg.URL, jwk.WithHTTPClient(cfg.HTTPClient)); err != nil {
		return nil, fmt.Errorf("auth: JWKS %s: %w", cfg.URL, err)
	}
	if _, err := a.cache.Refresh(ctx, cfg.URL); err != nil {
		return nil, fmt.Errorf("auth: fetching the JWKS %s: %w", cfg.URL, err)
	}
	return a, nil
}

// Verify checks token against the key set, the issuer, the audience and the clock.
func (a *JWKS) Verify(ctx context.Context, token string) (Identity, error) {
	if token == "" {
		return Identity{}, unauthorized("empty token")
	}
	tok, err := jwt.Parse([]byte(token),
		jwt.WithKeyProvider(&jwksKeys{a: a, ctx: ctx}),
		jwt.WithValidate(true),
		jwt.WithIssuer(a.cfg.Issuer),
		jwt.WithAudience(a.cfg.Audience),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithAcceptableSkew(a.cfg.Leeway),
		jwt.WithClock(jwt.ClockFunc(a.cfg.Now)),
	)
	if err != nil {
		return Identity{}, unauthorized("%v", err)
	}
	return identityOf(tok, a.names)
}

// key returns the key of the set named kid, refetching the set once when it does not
// know kid (keys rotate) unless it did so moments ago.
func (a *JWKS) key(ctx context.Context, kid string) (jwk.Key, error) {
	set, err := a.cache.Get(ctx, a.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("key set unavailable: %w", err)
	}
	if k, ok := set.LookupKeyID(kid); ok {
		return k, nil
	}
	a.mu.Lock()
	refetch := a.cfg.Now().Sub(a.lastRefetch) >= unknownKidRefetch
	if refetch {
		a.lastRefetch = a.cfg.Now()
	}
	a.mu.Unlock()
	if refetch {
		if set, err = a.cache.Refresh(ctx, a.cfg.URL); err == nil {
			if k, ok := set.LookupKeyID(kid); ok {
				return k, nil
			}
		}
	}
	return nil, fmt.Errorf("no key with kid %q in the key set", kid)
}

// jwksKeys is the jws.KeyProvider of one Verify: it offers exactly one key, the one the
// kid names, with the algorithm that key fixes.
type jwksKeys struct {
	a   *JWKS
	ctx context.Context
}

func (p *jwksKeys) FetchKeys(_ context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
	hdr := sig.ProtectedHeaders()
	kid := hdr.KeyID()
	if kid == "" {
		return errors.New("token has no kid")
	}
	key, err := p.a.key(p.ctx, kid)
	if err != nil {
		return err
	}
	alg, err := keyAlgorithm(key)
	if err != nil {
		return err
	}
	// The token's alg is not trusted to choose anything; a mismatch is refused outright
	// rather than left to fail verification.
	if hdr.Algorithm() != alg {
		return fmt.Errorf("token alg %q does not match key %q (%s)", hdr.Algorithm(), kid, alg)
	}
	sink.Key(alg, key)
	return nil
}

// keyAlgorithm returns the one signature algorithm key may verify: its "alg" when the
// JWKS gives one (Azure AD's does not), else the one its type and curve imply. Symmetric
// keys and keys for encryption are refused: a public key set has no business holding
// them, and HS256 with a public key is the classic forgery.
func keyAlgorithm(key jwk.Key) (jwa.SignatureAlgorithm, error) {
	if use := key.KeyUsage(); use != "" && use != jwk.ForSignature.String() {
		return "", fmt.Errorf("key %q is not for signatures (use %q)", key.KeyID(), use)
	}
	if key.KeyType() == jwa.OctetSeq {
		return "", fmt.Errorf("key %q is symmetric", key.KeyID())
	}
	if v := key.Algorithm(); v != nil && v.String() != "" {
		var alg jwa.SignatureAlgorithm
		if err := alg.Accept(v.String()); err != nil {
			return "", fmt.Errorf("key %q: %w", key.KeyID(), err)
		}
		switch alg {
		case jwa.NoSignature, jwa.HS256, jwa.HS384, jwa.HS512:
			return "", fmt.Errorf("key %q names alg %s", key.KeyID(), alg)
		}
		return alg, nil
	}
	switch k := key.(type) {
	case jwk.RSAPublicKey:
		return jwa.RS256, nil
	case jwk.ECDSAPublicKey:
		switch k.Crv() {
		case jwa.P256:
			return jwa.ES256, nil
		case jwa.P384:
			return jwa.ES384, nil
		case jwa.P521:
			return jwa.ES512, nil
		}
	case jwk.OKPPublicKey:
		if k.Crv() == jwa.Ed25519 {
			return jwa.EdDSA, nil
		}
	}
	return "", fmt.Errorf("key %q has no alg and none can be inferred from its type %s", key.KeyID(), key.KeyType())
}
