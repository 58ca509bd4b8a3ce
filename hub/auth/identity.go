package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Identity is who a verified token says the caller is (PROTOCOL.md §6).
type Identity struct {
	Tenant  string    // the tenant claim ("tid"); valid per locks.ValidTenant
	OID     string    // the holder's object id ("oid"); valid per locks.ValidOID
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

// DefaultTakeoverRole is the role that may take a lock over (PROTOCOL.md §6) when none
// is configured: setting "takeover-role".
const DefaultTakeoverRole = "Locks.TakeOver"

// DefaultAdminRole is the role of the lock console (PROTOCOL.md §10) when none is
// configured: setting "admin-role".
const DefaultAdminRole = "Locks.Admin"

// The default claim names of ClaimNames.
const (
	DefaultTenantClaim = "tid"
	DefaultOIDClaim    = "oid"
	DefaultNameClaim   = "name"
	DefaultRolesClaim  = "roles"
)

// ClaimNames names the token claims an Identity is read from. Each zero field means
// its default: Tenant "tid", OID "oid", Name "name", Roles "roles".
type ClaimNames struct {
	Tenant, OID, Name, Roles string
}

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

// identityOf reads an Identity from a verified, validated token.
func identityOf(tok jwt.Token, names ClaimNames) (Identity, error) {
	id := Identity{Expires: tok.Expiration()}
	if id.Expires.IsZero() {
		return Identity{}, unauthorized("token has no exp")
	}
	var ok bool
	if id.Tenant, ok = stringClaim(tok, names.Tenant); !ok || !locks.ValidTenant(id.Tenant) {
		return Identity{}, unauthorized("claim %q is missing or not a valid tenant", names.Tenant)
	}
	if id.OID, ok = stringClaim(tok, names.OID); !ok || !locks.ValidOID(id.OID) {
		return Identity{}, unauthorized("claim %q is missing or not a valid oid", names.OID)
	}
	// Optional: a holder without a name is shown by its oid. Cleaned here, the one
	// place every verifier's Identity passes, so no caller sees a raw name.
	name, _ := stringClaim(tok, names.Name)
	id.Name = cmp.Or(CleanName(name), id.OID)
	roles, err := rolesClaim(tok, names.Roles)
	if err != nil {
		return Identity{}, err
	}
	id.Roles = roles
	return id, nil
}

func stringClaim(tok jwt.Token, name string) (string, bool) {
	v, ok := tok.Get(name)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// rolesClaim reads the roles claim: an array of strings, or one string (some issuers
// flatten a single-element array). Absent means no roles.
func rolesClaim(tok jwt.Token, name string) ([]string, error) {
	v, ok := tok.Get(name)
	if !ok || v == nil {
		return nil, nil
	}
	switch r := v.(type) {
	case string:
		return []string{r}, nil
	case []string:
		return r, nil
	case []any:
		out := make([]string, 0, len(r))
		for _, e := range r {
			s, ok := e.(string)
			if !ok {
				return nil, unauthorized("claim %q holds a non-string role", name)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, unauthorized("claim %q is not a list of roles", name)
}
