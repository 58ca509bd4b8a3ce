package auth

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/lockhub/lockhub/protocol"
)

// Identity is who a verified token says the caller is (PROTOCOL.md §6).
type Identity struct {
	Tenant  string    // the tenant claim ("tid"); valid per protocol.ValidTenant
	OID     string    // the holder's object id ("oid"); valid per protocol.ValidOID
	Name    string    // display name ("name"), cleaned by CleanName; the oid when that leaves nothing
	Roles   []string  // roles ("roles")
	Expires time.Time // the token's exp; never zero for a verified token
}

// Holder returns the lock holder the identity stands for.
func (id Identity) Holder() protocol.Holder { return protocol.Holder{OID: id.OID, Name: id.Name} }

// HasRole reports whether the identity carries role, compared exactly.
func (id Identity) HasRole(role string) bool { return role != "" && slices.Contains(id.Roles, role) }

// Verifier checks a bearer token and says whose it is. Implementations are safe for
// concurrent use. Every failure, whatever its cause, wraps ErrUnauthorized.
type Verifier interface {
	Verify(ctx context.Context, token string) (Identity, error)
}

// ErrUnauthorized is wrapped by every error of a Verifier: a token that is missing,
// malformed, badly signed, expired, not yet valid, for another issuer or audience, or
// whose tenant or oid fails the rules of PROTOCOL.md §1. Transports answer it with
// close code 4401 or HTTP 401.
var ErrUnauthorized = errors.New("auth: unauthorized")

// The default claim names of ClaimNames.
const (
	DefaultTenantClaim = "tid"
	DefaultOIDClaim    = "oid"
	DefaultNameClaim   = "name"
	DefaultRolesClaim  = "roles"
)

// ClaimNames names the token claims an Identity is read from. Each zero field means
// its default: Tenant "tid", OID "oid", Name "name", Roles "roles". The four names
// must differ (PROTOCOL.md §6): one claim read as two would make a display name a
// role, or an oid a tenant.
type ClaimNames struct {
	Tenant, OID, Name, Roles string
}

// check refuses claim names that are not four different names, naming the setting of
// the later of two equal ones ("claim-roles" for Roles equal to Name).
func (c ClaimNames) check() error {
	c = c.withDefaults()
	names := [...]named{{"claim-tenant", c.Tenant}, {"claim-oid", c.OID}, {"claim-name", c.Name}, {"claim-roles", c.Roles}}
	for i, n := range names {
		for _, earlier := range names[:i] {
			if n.value == earlier.value {
				return &protocol.SettingError{Setting: n.setting, Err: fmt.Errorf("%q is also --%s: the four claim names must differ", n.value, earlier.setting)}
			}
		}
	}
	return nil
}

// named is a setting and its value.
type named struct{ setting, value string }

func (c ClaimNames) withDefaults() ClaimNames {
	return ClaimNames{
		Tenant: cmp.Or(c.Tenant, DefaultTenantClaim),
		OID:    cmp.Or(c.OID, DefaultOIDClaim),
		Name:   cmp.Or(c.Name, DefaultNameClaim),
		Roles:  cmp.Or(c.Roles, DefaultRolesClaim),
	}
}

// maxLeeway is the most clock skew a token's time claims are allowed (PROTOCOL.md §4).
const maxLeeway = protocol.TokenLeeway

// unauthorized wraps ErrUnauthorized with why. The reason is for logs: it names the
// failed check, never the token.
func unauthorized(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnauthorized, fmt.Sprintf(format, args...))
}

// checks are the claim checks of one verifier: PROTOCOL.md §6.
type checks struct {
	issuer, audience string
	leeway           time.Duration
	now              func() time.Time
	names            ClaimNames // with defaults
}

// identityOf checks the claims of a token whose signature was verified (payload is
// its JWS payload) and reads the Identity they name. The payload is read once, for the
// few claims lockhub uses, rather than into a jwt.Token of every claim (about 40 µs and
// 11 KB per token, a tenth of a socket's setup); the checks of issuer, audience and
// times are jwt.Validate's, on a token of those claims.
func identityOf(payload []byte, c checks) (Identity, error) {
	cl, err := readClaims(payload, c.names)
	if err != nil {
		return Identity{}, unauthorized("claims: %v", err)
	}
	tok := jwt.New()
	for _, claim := range [...]struct {
		name  string
		value any
	}{{jwt.IssuerKey, cl.iss}, {jwt.AudienceKey, cl.aud}, {jwt.ExpirationKey, cl.exp}, {jwt.NotBeforeKey, cl.nbf}, {jwt.IssuedAtKey, cl.iat}} {
		if claim.value == nil {
			continue // absent
		}
		if err := tok.Set(claim.name, claim.value); err != nil {
			return Identity{}, unauthorized("claim %q: %v", claim.name, err)
		}
	}
	if err := jwt.Validate(tok,
		jwt.WithIssuer(c.issuer),
		jwt.WithAudience(c.audience),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithAcceptableSkew(c.leeway),
		jwt.WithClock(jwt.ClockFunc(c.now)),
	); err != nil {
		return Identity{}, unauthorized("%v", err)
	}
	id := Identity{Expires: tok.Expiration()}
	if id.Expires.IsZero() {
		return Identity{}, unauthorized("token has no exp")
	}
	if id.Tenant = cl.tenant; !protocol.ValidTenant(id.Tenant) {
		return Identity{}, unauthorized("claim %q is missing or not a valid tenant", c.names.Tenant)
	}
	if id.OID = cl.oid; !protocol.ValidOID(id.OID) {
		return Identity{}, unauthorized("claim %q is missing or not a valid oid", c.names.OID)
	}
	// Optional: a holder without a name is shown by its oid. Cleaned here, the one
	// place every verifier's Identity passes, so no caller sees a raw name.
	id.Name = cmp.Or(CleanName(cl.name), id.OID)
	id.Roles = cl.roles
	return id, nil
}

// claims are the claims of a payload lockhub reads. A nil standard claim is absent; a
// claim of the wrong type is an error, but for tenant, oid and name, which read as
// missing (and are refused, or left out, as missing).
type claims struct {
	iss, aud, exp, nbf, iat any // string; []string; time.Time each
	tenant, oid, name       string
	roles                   []string
}

// readClaims reads payload, a JSON object, once: the claims it names are decoded, the
// others skipped. A duplicate name, or invalid JSON or UTF-8, is an error.
func readClaims(payload []byte, names ClaimNames) (claims, error) {
	var cl claims
	d := jsontext.NewDecoder(bytes.NewReader(payload))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return cl, errors.New("the payload is not a JSON object")
	}
	read := [...]string{jwt.IssuerKey, jwt.AudienceKey, jwt.ExpirationKey, jwt.NotBeforeKey, jwt.IssuedAtKey,
		names.Tenant, names.OID, names.Name, names.Roles}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return cl, err
		}
		name := tok.String()
		if !slices.Contains(read[:], name) {
			if err := d.SkipValue(); err != nil {
				return cl, err
			}
			continue
		}
		v, err := d.ReadValue()
		if err != nil {
			return cl, err
		}
		// A standard claim may also be one of lockhub's (claim-oid=sub is common); the
		// four of lockhub's differ (ClaimNames.check).
		switch name {
		case jwt.IssuerKey:
			var iss string
			if err := json.Unmarshal(v, &iss); err != nil {
				return cl, fmt.Errorf("claim %q is not a string", name)
			}
			cl.iss = iss
		case jwt.AudienceKey:
			aud, ok := stringOrStrings(v)
			if !ok {
				return cl, fmt.Errorf("claim %q is not a string or a list of strings", name)
			}
			cl.aud = aud
		case jwt.ExpirationKey, jwt.NotBeforeKey, jwt.IssuedAtKey:
			var sec float64
			if v.Kind() != '0' || json.Unmarshal(v, &sec) != nil {
				return cl, fmt.Errorf("claim %q is not a number of seconds", name)
			}
			whole, frac := math.Modf(sec)
			t := time.Unix(int64(whole), int64(frac*1e9)).UTC()
			switch name {
			case jwt.ExpirationKey:
				cl.exp = t
			case jwt.NotBeforeKey:
				cl.nbf = t
			default:
				cl.iat = t
			}
		}
		if name == names.Tenant {
			cl.tenant = stringValue(v)
		}
		if name == names.OID {
			cl.oid = stringValue(v)
		}
		if name == names.Name {
			cl.name = stringValue(v)
		}
		if name == names.Roles && v.Kind() != 'n' { // null: no roles
			// An array only (PROTOCOL.md §6): a string would let a claim meant for
			// something else, such as a display name, pass for a role.
			roles, ok := stringOrStrings(v)
			if !ok || v.Kind() != '[' {
				return cl, fmt.Errorf("claim %q is not an array of roles", name)
			}
			cl.roles = roles
		}
	}
	return cl, nil
}

// stringValue is v's string, or "" when v is not a string.
func stringValue(v jsontext.Value) string {
	var s string
	if v.Kind() != '"' || json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// stringOrStrings reads a string or an array of strings (some issuers flatten a
// single-element array) as a list.
func stringOrStrings(v jsontext.Value) ([]string, bool) {
	switch v.Kind() {
	case '"':
		return []string{stringValue(v)}, true
	case '[':
	default:
		return nil, false
	}
	d := jsontext.NewDecoder(bytes.NewReader(v))
	if _, err := d.ReadToken(); err != nil { // the '['
		return nil, false
	}
	out := []string{}
	for d.PeekKind() != ']' {
		tok, err := d.ReadToken()
		if err != nil || tok.Kind() != '"' {
			return nil, false
		}
		out = append(out, tok.String())
	}
	return out, true
}
