package auth

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Cached verifies each token once for a while: a page that reconnects, or the crowd of
// sockets that move to another instance when one goes away, present the tokens they
// presented before, and the signature check is most of a connection's set-up on the
// hub (about 40% of its CPU with EdDSA development tokens, BenchmarkVerify). A token
// verified once is answered from memory, by its SHA-256, until the earlier of its own
// expiry and CacheConfig.MaxAge; a token that fails is never kept, so it is checked
// again each time. All methods may be called concurrently.
//
// What it changes: a key the identity provider withdraws from its JWKS stops admitting
// the tokens already verified with it after at most MaxAge, not at the next refresh of
// the key set. Tokens are bearer credentials either way: one that verified once stays
// valid to its exp, as it would if checked again.
type Cached struct {
	v      Verifier
	now    func() time.Time
	maxAge time.Duration
	max    int
	met    *cacheMetrics

	mu sync.Mutex
	m  map[[sha256.Size]byte]cachedIdentity // guarded by mu
}

type cachedIdentity struct {
	id    Identity
	until time.Time // the earlier of the token's exp and when it was verified + maxAge
}

// CacheConfig configures a Cached. Its zero value works.
type CacheConfig struct {
	// MaxAge is how long a verified token is answered from memory at most. Zero means
	// 5 minutes; negative turns the cache off (every token is verified every time).
	MaxAge time.Duration
	// MaxTokens is how many verified tokens are kept at most (about 250 bytes each).
	// Zero means 65,536.
	MaxTokens int
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Registerer registers lockhub_auth_verifications_total. Nil registers nothing.
	Registerer prometheus.Registerer
}

// NewCached returns v behind a cache of verified tokens.
func NewCached(v Verifier, cfg CacheConfig) *Cached {
	if cfg.MaxAge == 0 {
		cfg.MaxAge = 5 * time.Minute
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 65536
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Cached{v: v, now: cfg.Now, maxAge: cfg.MaxAge, max: cfg.MaxTokens, met: newCacheMetrics(cfg.Registerer)}
}

var _ Verifier = (*Cached)(nil)

// Verify answers the identity of a token verified within MaxAge and not expired from
// memory, and verifies any other with the wrapped Verifier.
func (c *Cached) Verify(ctx context.Context, token string) (Identity, error) {
	if c.maxAge < 0 {
		return c.v.Verify(ctx, token)
	}
	key := sha256.Sum256([]byte(token))
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[key]
	if ok && !now.Before(e.until) {
		delete(c.m, key)
		ok = false
	}
	c.mu.Unlock()
	if ok {
		c.met.verifications.WithLabelValues("cached").Inc()
		id := e.id
		id.Roles = slices.Clone(id.Roles) // the caller's to keep
		return id, nil
	}
	id, err := c.v.Verify(ctx, token)
	if err != nil {
		return id, err
	}
	c.met.verifications.WithLabelValues("verified").Inc()
	until := now.Add(c.maxAge)
	if id.Expires.Before(until) {
		until = id.Expires
	}
	c.keep(key, cachedIdentity{id: Identity{Tenant: id.Tenant, OID: id.OID, Name: id.Name, Roles: slices.Clone(id.Roles), Expires: id.Expires}, until: until}, now)
	return id, nil
}

// keep stores e under key, first making room when the cache is full: the entries
// that ran out go, and arbitrary others (a map's order) up to an eighth of the cache.
func (c *Cached) keep(key [sha256.Size]byte, e cachedIdentity, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[[sha256.Size]byte]cachedIdentity)
	}
	if len(c.m) >= c.max {
		// An eighth at once, so that the scan is paid once per many tokens kept.
		drop := c.max/8 + 1
		for k, old := range c.m {
			if !now.Before(old.until) {
				delete(c.m, k)
				drop--
			}
		}
		for k := range c.m {
			if drop <= 0 {
				break
			}
			delete(c.m, k)
			drop--
		}
	}
	c.m[key] = e
}

// cacheMetrics are a Cached's Prometheus collectors.
type cacheMetrics struct {
	verifications *prometheus.CounterVec // how: verified, cached
}

func newCacheMetrics(reg prometheus.Registerer) *cacheMetrics {
	f := promauto.With(reg) // a nil reg registers nothing
	return &cacheMetrics{verifications: f.NewCounterVec(prometheus.CounterOpts{
		Name: "lockhub_auth_verifications_total",
		Help: "Tokens accepted, by how: verified (the signature checked) or cached (the same token verified within the last 5 minutes, and not expired).",
	}, []string{"how"})}
}
