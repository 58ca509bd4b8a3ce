package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockhub/lockhub/protocol"
)

// JWKSConfig configures a JWKS. URL, Issuer and Audience are required.
type JWKSConfig struct {
	// URL is where the signing keys are: setting "jwks-url". Required. It must be
	// https, except on a loopback host (127.0.0.1, [::1], localhost), and so must every
	// redirect it leads to (PROTOCOL.md §6, "JWKS"). It is the only URL ever fetched:
	// none is derived from a token (no jku, no x5u).
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
	// HTTPClient fetches the key set. Nil means a client with a 10s timeout. Its
	// CheckRedirect is wrapped to refuse a redirect to a URL that URL could not be.
	HTTPClient *http.Client
	// Now is the clock of token times and of the spacing of unknown-kid refetches.
	// Nil means time.Now.
	Now func() time.Time

	// RefreshInterval is how often the key set is fetched in the background. Zero
	// means 15m; more than an hour is an error (PROTOCOL.md §6: at least hourly). A
	// failed refresh keeps the set in use and is retried sooner, backing off from 5s
	// (or RefreshInterval, if shorter) up to RefreshInterval.
	RefreshInterval time.Duration
	// UnknownKidWait is the longest a token whose kid the set lacks waits for the
	// refetch it causes; past it, the token is refused and the fetch goes on. Zero
	// means 5s; more than 5s is an error (PROTOCOL.md §6).
	UnknownKidWait time.Duration
	// FetchTimeout bounds every fetch of the key set, the first one in NewJWKS
	// included. Zero means 10s.
	FetchTimeout time.Duration
	// Logger receives a warning for every failed refresh, which keeps the set in use.
	// Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the JWKS's metrics: lockhub_jwks_fetches_total,
	// lockhub_jwks_unknown_kids_total, lockhub_jwks_last_success_timestamp_seconds.
	// Nil means they are not registered. One JWKS per Registerer.
	Registerer prometheus.Registerer
}

// Defaults and bounds of JWKSConfig (PROTOCOL.md §6, "JWKS").
const (
	DefaultJWKSRefresh    = 15 * time.Minute
	MaxJWKSRefresh        = time.Hour
	DefaultUnknownKidWait = 5 * time.Second
	DefaultJWKSFetch      = 10 * time.Second
	// unknownKidRefetch spaces the refetches unknown kids cause, so that random kids
	// cannot hammer the identity provider.
	unknownKidRefetch = 30 * time.Second
)

// JWKS verifies production tokens against a JWKS (PROTOCOL.md §6): the signature
// with the key the token's kid names in the set, the algorithm taken from that key
// (never from the token), then issuer, audience, exp and nbf.
//
// The key set is held in memory and replaced by a background refresh; a failed
// refresh keeps it. A token whose kid the set holds never waits on a fetch, even while
// the endpoint hangs. A kid the set lacks causes one refetch, at most every 30 s,
// shared by every token that waits for it, and a token waits at most UnknownKidWait
// for it: rotated keys are picked up without letting random kids hammer the identity
// provider. A set with exactly one signing key also verifies tokens without a kid.
//
// jwx's jwk.Cache (httprc v1) is not used: its Get takes a per-URL semaphore that a
// Refresh holds across the HTTP fetch, and a background fetch holds the entry's lock
// across it too, so every token waited on a slow endpoint, up to the client's
// timeout; its fetch ignores the context, a Cache-Control max-age may push its
// refresh past an hour, and its goroutines cannot be joined.
//
// All methods may be called concurrently. The background refresh runs until ctx
// given to NewJWKS is done or Close is called; Close waits for it.
type JWKS struct {
	cfg   JWKSConfig
	names ClaimNames
	log   *slog.Logger
	m     *jwksMetrics

	keys atomic.Pointer[keySet] // the set in use; never nil after NewJWKS

	// Owned by NewJWKS and Close.
	ctx    context.Context // the background's: canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the refresh loop and unknown-kid refetches

	fetchSeq atomic.Uint64 // numbers fetches in the order they start
	waiters  atomic.Int32  // tokens waiting on an unknown-kid refetch; read by tests

	storeMu   sync.Mutex
	storedSeq uint64 // guarded by storeMu: the fetch whose set is in use

	mu          sync.Mutex
	lastRefetch time.Time     // guarded by mu: when an unknown kid last caused a refetch
	inflight    chan struct{} // guarded by mu: closed when that refetch ends; nil once it has
	closed      bool          // guarded by mu: Close was called, start no refetch
}

var _ Verifier = (*JWKS)(nil)

// NewJWKS fetches the key set once, within FetchTimeout, so a wrong URL fails at
// start, and returns a JWKS that refreshes it until ctx is done or Close is called.
// A URL that is not https (but for loopback) is a *protocol.SettingError for
// "jwks-url".
func NewJWKS(ctx context.Context, cfg JWKSConfig) (*JWKS, error) {
	if err := cfg.Claims.check(); err != nil {
		return nil, err
	}
	if err := checkJWKSURL(cfg.URL); err != nil {
		return nil, &protocol.SettingError{Setting: "jwks-url", Err: err}
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
	if cfg.RefreshInterval < 0 || cfg.RefreshInterval > MaxJWKSRefresh {
		return nil, fmt.Errorf("auth: JWKSConfig.RefreshInterval %s must be between 0 and %s", cfg.RefreshInterval, MaxJWKSRefresh)
	}
	if cfg.UnknownKidWait < 0 || cfg.UnknownKidWait > DefaultUnknownKidWait {
		return nil, fmt.Errorf("auth: JWKSConfig.UnknownKidWait %s must be between 0 and %s", cfg.UnknownKidWait, DefaultUnknownKidWait)
	}
	if cfg.FetchTimeout < 0 {
		return nil, fmt.Errorf("auth: JWKSConfig.FetchTimeout %s must not be negative", cfg.FetchTimeout)
	}
	cfg.Leeway = cmp.Or(cfg.Leeway, maxLeeway)
	cfg.RefreshInterval = cmp.Or(cfg.RefreshInterval, DefaultJWKSRefresh)
	cfg.UnknownKidWait = cmp.Or(cfg.UnknownKidWait, DefaultUnknownKidWait)
	cfg.FetchTimeout = cmp.Or(cfg.FetchTimeout, DefaultJWKSFetch)
	cfg.HTTPClient = httpsOnly(cmp.Or(cfg.HTTPClient, &http.Client{Timeout: DefaultJWKSFetch}))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &JWKS{cfg: cfg, names: cfg.Claims.withDefaults(), log: cmp.Or(cfg.Logger, slog.Default()), m: newJWKSMetrics(cfg.Registerer)}
	if err := a.refresh(ctx, fetchStart); err != nil {
		return nil, fmt.Errorf("auth: fetching the JWKS %s: %w", cfg.URL, err)
	}
	a.ctx, a.cancel = context.WithCancel(ctx)
	a.wg.Add(1)
	go a.refreshLoop(a.ctx)
	return a, nil
}

// Close stops the background refresh and waits for it and for any unknown-kid
// refetch to end. Verify goes on with the set last fetched, without refetching.
// Close may be called more than once.
func (a *JWKS) Close() {
	a.mu.Lock()
	a.closed = true // no refetch starts after this: wg.Add never races wg.Wait
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}

// Verify checks token against the key set, the issuer, the audience and the clock.
func (a *JWKS) Verify(ctx context.Context, token string) (Identity, error) {
	if token == "" {
		return Identity{}, unauthorized("empty token")
	}
	payload, err := jws.Verify([]byte(token), jws.WithKeyProvider(&jwksKeys{a: a, ctx: ctx}))
	if err != nil {
		return Identity{}, unauthorized("%v", err)
	}
	return identityOf(payload, checks{issuer: a.cfg.Issuer, audience: a.cfg.Audience, leeway: a.cfg.Leeway, now: a.cfg.Now, names: a.names})
}

// key returns the key of the set named kid. One the held set lacks (keys rotate)
// waits, at most UnknownKidWait, for a refetch: the one in flight, or a new one unless
// one started less than unknownKidRefetch ago.
func (a *JWKS) key(ctx context.Context, kid string) (jwk.Key, error) {
	if k, ok := a.keys.Load().set.LookupKeyID(kid); ok {
		return k, nil
	}
	done := a.refetch()
	if done == nil {
		// Throttled; the set may have changed since the lookup above all the same.
		if k, ok := a.keys.Load().set.LookupKeyID(kid); ok {
			a.m.unknownKids.WithLabelValues(unknownKidFound).Inc()
			return k, nil
		}
		a.m.unknownKids.WithLabelValues(unknownKidThrottled).Inc()
		return nil, fmt.Errorf("no key with kid %q in the key set (refetched less than %s ago)", kid, unknownKidRefetch)
	}
	a.waiters.Add(1)
	defer a.waiters.Add(-1)
	wait := time.NewTimer(a.cfg.UnknownKidWait)
	defer wait.Stop()
	select {
	case <-done:
	case <-wait.C:
		a.m.unknownKids.WithLabelValues(unknownKidTimeout).Inc()
		return nil, fmt.Errorf("no key with kid %q in the key set, and refetching it took over %s", kid, a.cfg.UnknownKidWait)
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the key set to name kid %q: %w", kid, ctx.Err())
	}
	if k, ok := a.keys.Load().set.LookupKeyID(kid); ok {
		a.m.unknownKids.WithLabelValues(unknownKidFound).Inc()
		return k, nil
	}
	a.m.unknownKids.WithLabelValues(unknownKidMissing).Inc()
	return nil, fmt.Errorf("no key with kid %q in the key set, even refetched", kid)
}

// refetch returns a channel closed when a refetch of the set ends: the one in flight,
// or one it starts. It returns nil, starting nothing, when the last started less than
// unknownKidRefetch ago or the JWKS is closed.
func (a *JWKS) refetch() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight != nil {
		return a.inflight
	}
	now := a.cfg.Now()
	if a.closed || a.ctx.Err() != nil || (!a.lastRefetch.IsZero() && now.Sub(a.lastRefetch) < unknownKidRefetch) {
		return nil
	}
	a.lastRefetch = now
	done := make(chan struct{})
	a.inflight = done
	a.wg.Add(1)
	// The fetch belongs to the JWKS, not to the token that caused it: it goes on
	// when that token stops waiting, for the next one to find the key.
	go func() {
		defer a.wg.Done()
		_ = a.refresh(a.ctx, fetchUnknownKid) // a failure is logged and counted; the waiters look again
		a.mu.Lock()
		a.inflight = nil
		a.mu.Unlock()
		close(done)
	}()
	return done
}

// checkJWKSURL returns why raw may not be fetched for keys: it is not an absolute
// https URL, or an http one on a loopback host (PROTOCOL.md §6, "JWKS").
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q is not an https URL", raw)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("%q must be https: keys fetched in clear text can be replaced on the way (http only on 127.0.0.1, [::1] or localhost)", raw)
	}
	return nil
}

// loopbackHost reports whether host is one of the loopback names PROTOCOL.md §6 lets
// serve a JWKS over http. Only these: "127.1" or "localhost." are spellings a
// reader of the setting would not recognize.
func loopbackHost(host string) bool {
	return host == "127.0.0.1" || host == "::1" || strings.EqualFold(host, "localhost")
}

// httpsOnly returns a copy of c that refuses to follow a redirect to a URL
// checkJWKSURL refuses: an https endpoint must not hand the keys over to http.
func httpsOnly(c *http.Client) *http.Client {
	cc := *c
	next := c.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := checkJWKSURL(req.URL.String()); err != nil {
			return fmt.Errorf("redirected: %w", err)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 { // net/http's own limit, which a non-nil CheckRedirect replaces
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &cc
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
	var key jwk.Key
	if kid == "" {
		// Allowed when the set leaves no choice (PROTOCOL.md §6): a kid-less token
		// names no key, so it never causes a refetch either.
		ks := p.a.keys.Load()
		if ks.only == nil {
			return fmt.Errorf("token has no kid, and the key set has %d signing keys", ks.signing)
		}
		key = ks.only
	} else {
		var err error
		if key, err = p.a.key(p.ctx, kid); err != nil {
			return err
		}
	}
	alg, err := keyAlgorithm(key)
	if err != nil {
		return err
	}
	// The token's alg is not trusted to choose anything; a mismatch is refused outright
	// rather than left to fail verification.
	if hdr.Algorithm() != alg {
		return fmt.Errorf("token alg %q does not match key %q (%s)", hdr.Algorithm(), key.KeyID(), alg)
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
