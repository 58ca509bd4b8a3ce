package web

import (
	"cmp"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/lockhub/lockhub/protocol"
)

// Requests per person (PROTOCOL.md §4, "Fair share"): over HTTP, each person (tenant
// and oid) is served the rate of a socket, RequestRate a second with bursts of
// RequestBurst, on this instance; a request beyond answers 429 rate_limited with
// Retry-After. Counted in lockhub_http_limit_hits_total{limit="requests_per_person"}
// and warned of at most once per limitWarnEvery.

// limitRequests is the label of the per-person request rate.
const limitRequests = "requests_per_person"

// limitWarnEvery is how often a limit that keeps being hit is logged.
const limitWarnEvery = protocol.LimitLogEvery

// limiterIdle is how long a person's limiter is kept after its bucket is full again:
// a full bucket is what a new one would be.
const limiterIdle = time.Minute

// personKey is who a limiter is for.
type personKey struct{ tenant, oid string }

// requestLimits are the per-person request limiters of a Server.
type requestLimits struct {
	rate  rate.Limit
	burst int
	hits  prometheus.Counter
	log   *slog.Logger

	mu     sync.Mutex
	of     map[personKey]*rate.Limiter // guarded by mu
	swept  time.Time                   // guarded by mu; when idle limiters were last dropped
	warned time.Time                   // guarded by mu; when the limit was last logged
	since  int                         // guarded by mu; hits since
}

func newRequestLimits(perSecond float64, burst int, hits prometheus.Counter, log *slog.Logger) *requestLimits {
	return &requestLimits{rate: rate.Limit(cmp.Or(perSecond, protocol.RateLimit)), burst: cmp.Or(burst, protocol.RateBurst),
		hits: hits, log: log, of: map[personKey]*rate.Limiter{}}
}

// allow takes one request of p's rate, or returns how long until one is free.
func (l *requestLimits) allow(p personKey, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > limiterIdle {
		// Bounded memory without a goroutine: limiters of people who stopped are full
		// again, and dropped.
		for k, lim := range l.of {
			if lim.TokensAt(now) >= float64(l.burst) {
				delete(l.of, k)
			}
		}
		l.swept = now
	}
	lim := l.of[p]
	if lim == nil {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.of[p] = lim
	}
	if lim.AllowN(now, 1) {
		return 0, true
	}
	wait := time.Duration((1 - lim.TokensAt(now)) / float64(l.rate) * float64(time.Second))
	return max(wait, time.Millisecond), false
}

// limit is middleware, behind Authenticate, answering 429 rate_limited to a request
// over its person's rate.
func (l *requestLimits) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := identity(r)
		wait, ok := l.allow(personKey{id.Tenant, id.OID}, time.Now())
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		l.hit(r, id.Tenant)
		WriteError(w, r, l.log, &rateLimitedError{wait: wait})
	})
}

// hit counts a refusal and logs it, at most once per limitWarnEvery.
func (l *requestLimits) hit(r *http.Request, tenant string) {
	l.hits.Inc()
	now := time.Now()
	l.mu.Lock()
	l.since++
	n, due := l.since, now.Sub(l.warned) >= limitWarnEvery
	if due {
		l.warned, l.since = now, 0
	}
	l.mu.Unlock()
	if due {
		l.log.LogAttrs(r.Context(), slog.LevelWarn, "a person's HTTP requests went over the rate of a socket (PROTOCOL.md §4; no setting: a client this busy should use the WebSocket)",
			slog.String("limit", limitRequests), slog.String("tenant", tenant), slog.Int("refused", n),
			slog.String("metric", "lockhub_http_limit_hits_total"))
	}
}

// rateLimitedError answers a request over its person's rate: 429 rate_limited, with
// Retry-After (WriteError reads Wait).
type rateLimitedError struct{ wait time.Duration }

func (e *rateLimitedError) Error() string {
	return "web: over the request rate of this person"
}
func (e *rateLimitedError) ErrorCode() protocol.ErrorCode { return protocol.CodeRateLimited }
func (e *rateLimitedError) ClientMessage() string {
	return "over the request rate of one person; retry after the Retry-After seconds"
}
func (e *rateLimitedError) Wait() time.Duration { return e.wait }
