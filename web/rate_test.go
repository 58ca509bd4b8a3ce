package web

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRequestLimitWarnings: every request over a person's rate is counted; the WARN
// comes at most once per limitWarnEvery (PROTOCOL.md §4), names the limit and the
// metric, and the next one counts the refusals since.
func TestRequestLimitWarnings(t *testing.T) {
	var logs bytes.Buffer
	hits := prometheus.NewCounter(prometheus.CounterOpts{Name: "hits"})
	l := newRequestLimits(1, 2, hits, slog.New(slog.NewTextHandler(&logs, nil)))
	p, now := personKey{"acme", "u-ada"}, time.Now()
	for i := range 2 {
		if _, ok := l.allow(p, now); !ok {
			t.Fatalf("request %d of a burst of 2 refused", i+1)
		}
	}
	wait, ok := l.allow(p, now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("the third request: allowed %v, wait %s; want refused for at most the 1 s a request refills", ok, wait)
	}
	if _, ok := l.allow(personKey{"acme", "u-grace"}, now); !ok {
		t.Fatal("another person was refused")
	}
	r := httptest.NewRequest("GET", "/api/me/locks", nil)
	for range 3 {
		l.hit(r, "acme")
	}
	warns := func() int { return strings.Count(logs.String(), "level=WARN") }
	if n := warns(); n != 1 || !strings.Contains(logs.String(), "limit="+limitRequests) ||
		!strings.Contains(logs.String(), "metric=lockhub_http_limit_hits_total") {
		t.Fatalf("%d warnings for 3 refusals in a row, want 1 naming the limit and metric:\n%s", n, logs.String())
	}
	if got := testutil.ToFloat64(hits); got != 3 {
		t.Fatalf("counted %v refusals, want 3", got)
	}
	// 10 s later the next refusal is warned of, with the two held back since.
	l.mu.Lock()
	l.warned = l.warned.Add(-limitWarnEvery)
	l.mu.Unlock()
	l.hit(r, "acme")
	if n := warns(); n != 2 || !strings.Contains(logs.String(), "refused=3") {
		t.Fatalf("%d warnings after 10 s, want 2, the second counting 3 refusals:\n%s", n, logs.String())
	}
}
