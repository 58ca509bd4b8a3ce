package web

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/protocol"
)

// identityKey is the context key of the caller's auth.Identity.
type identityKey struct{}

// IdentityFrom returns the identity of the request's bearer token, as set by the
// Server for every /api route.
func IdentityFrom(ctx context.Context) (auth.Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(auth.Identity)
	return id, ok
}

// WithIdentity returns a copy of ctx carrying id, for handlers and tests that run
// outside a Server.
func WithIdentity(ctx context.Context, id auth.Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// Authenticate returns middleware that checks the bearer token of every request it
// wraps with v, the same Verifier as the hub's sockets (PROTOCOL.md §5): without a
// valid one it answers 401 unauthorized; with one, the handler finds the caller with
// IdentityFrom. The token is never logged; why it was refused goes to log (nil means
// slog.Default()) at DEBUG, and a count at INFO at most every 10 s (auth.RefusalLog).
func Authenticate(v auth.Verifier, log *slog.Logger) func(http.Handler) http.Handler {
	log = cmp.Or(log, slog.Default())
	return authenticate(v, log, auth.NewRefusalLog(log))
}

// authenticate is Authenticate logging refusals to refusals, which a Server shares
// with the hub.
func authenticate(v auth.Verifier, log *slog.Logger, refusals *auth.RefusalLog) func(http.Handler) http.Handler {
	if v == nil {
		panic("web: Authenticate needs a Verifier")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, err := verify(r, v, refusals)
			if err != nil {
				closeUnread(w, r)
				WriteError(w, r, log, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
		})
	}
}

func verify(r *http.Request, v auth.Verifier, refusals *auth.RefusalLog) (auth.Identity, error) {
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return auth.Identity{}, &Error{Code: protocol.CodeUnauthorized, Message: "an Authorization: Bearer <token> header is required"}
	}
	id, err := v.Verify(r.Context(), token)
	if err == nil && (!protocol.ValidTenant(id.Tenant) || !protocol.ValidOID(id.OID)) {
		// PROTOCOL.md §4: a token whose tenant or oid fails §1 is refused like any bad
		// token, whatever Verifier let it through.
		err = fmt.Errorf("%w: the token's tenant or oid is not a valid name", auth.ErrUnauthorized)
	}
	if err != nil {
		// The reason (expired, bad signature, unknown key) goes to the log, not to the
		// client: PROTOCOL.md §5 "Hardening" names no internals in a 401.
		refusals.Refused(r.Context(), err, slog.String("transport", "http"), slog.String("path", r.URL.Path))
		return auth.Identity{}, &Error{Code: protocol.CodeUnauthorized, Message: "the bearer token is not valid", Err: err}
	}
	return id, nil
}

// bearer returns the token of an "Authorization: Bearer <token>" header (RFC 6750 §2.1;
// the scheme is case-insensitive).
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// identity returns the caller of a request that passed authenticate.
func identity(r *http.Request) auth.Identity {
	id, ok := IdentityFrom(r.Context())
	if !ok {
		panic("web: a handler of an authenticated route ran without an identity")
	}
	return id
}
