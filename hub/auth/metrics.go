package auth

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Why a JWKS fetched its key set: the label values of lockhub_jwks_fetches_total's
// "trigger".
const (
	fetchStart      = "start"       // the first fetch, in NewJWKS
	fetchBackground = "background"  // the periodic refresh
	fetchUnknownKid = "unknown_kid" // a token named a kid the held set lacks
)

// What became of a token whose kid the held set lacks: the label values of
// lockhub_jwks_unknown_kids_total.
const (
	unknownKidFound     = "found"     // the refetch it caused or shared brought the key
	unknownKidMissing   = "missing"   // the refetch ended (or failed) without it: refused
	unknownKidThrottled = "throttled" // a refetch ran less than 30 s ago: refused without one
	unknownKidTimeout   = "timeout"   // the refetch took longer than the wait: refused
)

// jwksMetrics are a JWKS's Prometheus collectors, registered on
// JWKSConfig.Registerer if any.
type jwksMetrics struct {
	fetches     *prometheus.CounterVec // trigger, result: ok, error
	unknownKids *prometheus.CounterVec // outcome
	lastGood    prometheus.Gauge       // unix time of the last fetch that replaced the set
}

func newJWKSMetrics(reg prometheus.Registerer) *jwksMetrics {
	f := promauto.With(reg) // a nil reg registers nothing
	return &jwksMetrics{
		fetches: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_jwks_fetches_total",
			Help: "Fetches of the JWKS, by trigger (start, background, unknown_kid) and result (ok, error).",
		}, []string{"trigger", "result"}),
		unknownKids: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_jwks_unknown_kids_total",
			Help: "Tokens naming a kid the held key set lacks, by outcome (found, missing, throttled, timeout).",
		}, []string{"outcome"}),
		lastGood: f.NewGauge(prometheus.GaugeOpts{
			Name: "lockhub_jwks_last_success_timestamp_seconds",
			Help: "When the key set in use was fetched, as a Unix time; it ages while refreshes fail.",
		}),
	}
}
