package auth

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/lockhub/lockhub/protocol"
)

// DevConfig configures a Dev. The zero value works.
type DevConfig struct {
	// Claims names the claims tokens carry. Zero fields mean the defaults of ClaimNames.
	Claims ClaimNames
	// TTL is how long an issued token is valid. Zero means one hour.
	TTL time.Duration
	// Now is the clock, for issuing and checking. Nil means time.Now.
	Now func() time.Time
	// Key is the signing key. Nil means a fresh key made by NewDev and never written
	// anywhere, so tokens die with the process; tests that forge tokens set it.
	Key ed25519.PrivateKey
}

// Issuer and audience of development tokens; Verify requires both.
const (
	DevIssuer   = "lockhub-dev"
	DevAudience = "lockhub"
)

// Dev issues and verifies development tokens (PROTOCOL.md §6, "Development"):
// EdDSA JWTs signed with a key made at start and never written anywhere, so tokens
// die with the process. It is a Verifier. Safe for concurrent use.
type Dev struct {
	names ClaimNames
	ttl   time.Duration
	now   func() time.Time
	priv  jwk.Key
	pub   jwk.Key
}

var _ Verifier = (*Dev)(nil)

// NewDev returns a Dev signing with cfg.Key, or with a fresh key.
func NewDev(cfg DevConfig) (*Dev, error) {
	if err := cfg.Claims.check(); err != nil {
		return nil, err
	}
	if cfg.TTL < 0 {
		return nil, errors.New("auth: DevConfig.TTL must not be negative")
	}
	raw := cfg.Key
	if raw == nil {
		var err error
		if _, raw, err = ed25519.GenerateKey(rand.Reader); err != nil {
			return nil, fmt.Errorf("auth: dev signing key: %w", err)
		}
	}
	priv, err := jwk.FromRaw(raw)
	if err != nil {
		return nil, fmt.Errorf("auth: dev signing key: %w", err)
	}
	// The kid is only informative: Verify knows its one key.
	if err := priv.Set(jwk.KeyIDKey, "dev-"+rand.Text()[:8]); err != nil {
		return nil, fmt.Errorf("auth: dev signing key: %w", err)
	}
	if err := priv.Set(jwk.AlgorithmKey, jwa.EdDSA); err != nil {
		return nil, fmt.Errorf("auth: dev signing key: %w", err)
	}
	pub, err := jwk.PublicKeyOf(priv)
	if err != nil {
		return nil, fmt.Errorf("auth: dev signing key: %w", err)
	}
	d := &Dev{names: cfg.Claims.withDefaults(), ttl: cmp.Or(cfg.TTL, time.Hour), now: cfg.Now, priv: priv, pub: pub}
	if d.now == nil {
		d.now = time.Now
	}
	return d, nil
}

// Issue returns a token for the given identity, valid for the configured TTL. A tenant
// or oid that fails the rules of PROTOCOL.md §1 is a *protocol.InvalidEntityError.
func (d *Dev) Issue(tenant, oid, name string, roles []string) (string, error) {
	return d.IssueWithExpiry(tenant, oid, name, roles, d.now().Add(d.ttl))
}

// IssueWithExpiry is Issue with an explicit expiry, which may be in the past: for tests
// of expiry. JWT times have one-second precision (RFC 7519 §2, NumericDate), so exp is
// exp truncated to the second.
func (d *Dev) IssueWithExpiry(tenant, oid, name string, roles []string, exp time.Time) (string, error) {
	if !protocol.ValidTenant(tenant) {
		return "", &protocol.InvalidEntityError{Field: "tenant", Value: tenant}
	}
	if !protocol.ValidOID(oid) {
		return "", &protocol.InvalidEntityError{Field: "holderOid", Value: oid}
	}
	if roles == nil {
		roles = []string{}
	}
	now := d.now()
	tok, err := jwt.NewBuilder().
		Issuer(DevIssuer).
		Audience([]string{DevAudience}).
		IssuedAt(earlier(now, exp)).
		Expiration(exp).
		Claim(d.names.Tenant, tenant).
		Claim(d.names.OID, oid).
		Claim(d.names.Name, name).
		Claim(d.names.Roles, roles).
		Build()
	if err != nil {
		return "", fmt.Errorf("auth: building a dev token: %w", err)
	}
	b, err := jwt.Sign(tok, jwt.WithKey(jwa.EdDSA, d.priv))
	if err != nil {
		return "", fmt.Errorf("auth: signing a dev token: %w", err)
	}
	return string(b), nil
}

// Verify checks a token issued by this Dev: its signature (EdDSA with this key,
// whatever alg the token names), issuer, audience and times, with protocol.TokenLeeway
// of skew.
func (d *Dev) Verify(_ context.Context, token string) (Identity, error) {
	if token == "" {
		return Identity{}, unauthorized("empty token")
	}
	payload, err := jws.Verify([]byte(token), jws.WithKey(jwa.EdDSA, d.pub)) // the algorithm is ours, never the token's
	if err != nil {
		return Identity{}, unauthorized("%v", err)
	}
	return identityOf(payload, checks{issuer: DevIssuer, audience: DevAudience, leeway: maxLeeway, now: d.now, names: d.names})
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
