package web

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// httpMetrics are the Server's Prometheus collectors.
type httpMetrics struct {
	duration *prometheus.HistogramVec // method, route, code
	limits   *prometheus.CounterVec   // limit: limitRequests
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	f := promauto.With(reg)
	return &httpMetrics{
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockhub_http_request_duration_seconds",
			Help:    "Duration of HTTP requests by method, route pattern and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"method", "route", "code"}),
		limits: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_http_limit_hits_total",
			Help: "Limits of PROTOCOL.md §4 reached over HTTP, by limit: requests_per_person (answered 429 rate_limited).",
		}, []string{"limit"}),
	}
}

// instrument times each request by its route pattern (never its path: uids would
// make the label set unbounded).
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		code := ww.Status()
		if code == 0 {
			code = http.StatusOK
		}
		d := time.Since(start)
		s.met.duration.WithLabelValues(r.Method, route, strconv.Itoa(code)).Observe(d.Seconds())
		// The path, never a header: the Authorization header holds a token.
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "request", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Int("status", code), slog.Duration("duration", d))
	})
}
