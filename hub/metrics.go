package hub

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/lockhub/lockhub/protocol"
)

// metrics are the hub's Prometheus collectors, registered on Config.Registerer if any.
type metrics struct {
	sockets   prometheus.Gauge       // open sockets, authenticated or not
	framesIn  *prometheus.CounterVec // type
	framesOut *prometheus.CounterVec // type
	outcomes  *prometheus.CounterVec // op, outcome
	// pendingReleases: releases answered released with pending:true (dispatch.go)
	pendingReleases prometheus.Counter
	delivered       prometheus.Counter       // lock events queued to watchers
	slow            *prometheus.CounterVec   // reason: queue, write
	rateLimited     prometheus.Counter       // requests answered rate_limited
	closes          *prometheus.CounterVec   // code
	authFailures    prometheus.Counter       // tokens refused
	resyncs         prometheus.Counter       // fresh snapshots sent after the feed came back
	detaches        *prometheus.CounterVec   // why: grace (with the Member's, of dead instances), shutdown; outcome
	requestTiming   *prometheus.HistogramVec // type
	limits          *prometheus.CounterVec   // limit: one of the limit* labels
	views           prometheus.Gauge         // entities viewed, summed over sockets
	presenceSent    prometheus.Counter       // presence changes queued to viewing sockets
	nudges          *prometheus.CounterVec   // outcome: nudged, notHeld, unknown, rate_limited, forbidden
	nudgesSent      prometheus.Counter       // nudges queued to holders' sockets
	handoffsSent    prometheus.Counter       // handoff frames queued to the new holders' sockets (§11)
	handoffsTaken   prometheus.Counter       // hand-offs taken up for a socket of this instance
	viewRefreshes   prometheus.Counter       // refreshes of this instance's views in Redis
	viewRestored    prometheus.Counter       // views Redis had lost, viewed again

	// Resolved once: the write path counts every frame.
	out map[protocol.FrameType]prometheus.Counter
}

// Limits of PROTOCOL.md §4, the label values of lockhub_hub_limit_hits_total.
const (
	limitConnections      = "max_connections"
	limitPendingAuth      = "max_pending_auth"
	limitPendingAuthPerIP = "max_pending_auth_per_ip"
	limitSocketsPerPerson = "max_sockets_per_person"
	limitLocks            = "max_locks_per_socket"
	limitPreAuthFrame     = "pre_auth_frame"
	limitFrame            = "frame_too_large"
	limitPong             = "pong_timeout"
	limitViews            = "max_views_per_socket"
	limitRequestRate      = "requests_per_socket" // 50 a second, bursts of 100: the contract's, no setting
)

// Slow-reader reasons, the label values of lockhub_hub_slow_disconnects_total.
const (
	slowQueue = "queue" // the bounded send queue overflowed
	slowWrite = "write" // one frame could not be written within WriteTimeout
	slowRead  = "read"  // frames were written, and no Pong came: the client stopped reading
)

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg) // a nil reg registers nothing
	m := &metrics{
		sockets: f.NewGauge(prometheus.GaugeOpts{
			Name: "lockhub_hub_sockets", Help: "Open WebSockets, authenticated or not.",
		}),
		framesIn: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_hub_frames_in_total", Help: "Frames received, by type (\"invalid\" for frames that do not decode).",
		}, []string{"type"}),
		framesOut: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_hub_frames_out_total", Help: "Frames written to sockets, by type.",
		}, []string{"type"}),
		outcomes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_hub_outcomes_total", Help: "Answers to lock requests over sockets, by operation and outcome.",
		}, []string{"op", "outcome"}),
		pendingReleases: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_pending_releases_total", Help: "Releases over sockets answered released with pending:true: the lock stays its holder's through sockets on other instances only, until they let go or their instance is found dead (PROTOCOL.md §4).",
		}),
		delivered: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_events_delivered_total", Help: "Lock events queued to watching sockets.",
		}),
		slow: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_hub_slow_disconnects_total", Help: "Sockets closed for reading too slowly, by reason (queue, write).",
		}, []string{"reason"}),
		rateLimited: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_rate_limited_total", Help: "Requests answered rate_limited.",
		}),
		closes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_hub_closes_total", Help: "Sockets closed by the hub, by close code.",
		}, []string{"code"}),
		authFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_auth_failures_total", Help: "Auth frames refused (bad, expired or identity-changing tokens).",
		}),
		resyncs: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_resyncs_total", Help: "Resyncs: fresh snapshots sent to every watcher after the change feed came back.",
		}),
		detaches: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_hub_detaches_total", Help: "Locks detached from closed sockets, by why (grace, shutdown) and outcome.",
		}, []string{"why", "outcome"}),
		limits: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_hub_limit_hits_total",
			Help: "Limits of PROTOCOL.md §4 reached, by limit: max_connections, max_pending_auth and max_pending_auth_per_ip (handshakes refused with 503), max_sockets_per_person (auths answered too_many_sockets), max_locks_per_socket (claims answered too_many_locks), max_views_per_socket (views answered too_many_views), pre_auth_frame (a frame over 16 KiB before auth, closed with 1009), frame_too_large (a frame over 64 KiB after it, closed with 1009), requests_per_socket (frames answered rate_limited), pong_timeout (sockets cut without a Pong).",
		}, []string{"limit"}),
		views: f.NewGauge(prometheus.GaugeOpts{
			Name: "lockhub_hub_views", Help: "Entities viewed by this instance's sockets (PROTOCOL.md §9), counted once per socket.",
		}),
		presenceSent: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_presence_delivered_total", Help: "Presence changes queued to the sockets viewing the entity.",
		}),
		nudges: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_hub_nudges_total", Help: "Nudge requests, by outcome (nudged, notHeld, unknown, rate_limited, forbidden).",
		}, []string{"outcome"}),
		handoffsSent: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_handoffs_delivered_total", Help: "Handoff frames queued to the sockets of the people a freed lock went to (PROTOCOL.md §11).",
		}),
		handoffsTaken: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_handoffs_taken_total", Help: "Hand-offs this instance took up for the socket they went through.",
		}),
		nudgesSent: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_nudges_delivered_total", Help: "Nudges queued to the holder's sockets that view the entity.",
		}),
		viewRefreshes: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_view_refreshes_total", Help: "Entities whose views by this instance's sockets were refreshed in Redis.",
		}),
		viewRestored: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_views_restored_total", Help: "Views Redis had lost (a restart, a refresh too late), announced again.",
		}),
		requestTiming: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockhub_hub_request_seconds",
			Help:    "Time from a request frame read to its answer queued, by type.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"type"}),
	}
	m.out = map[protocol.FrameType]prometheus.Counter{}
	for _, t := range []protocol.FrameType{protocol.FrameWelcome, protocol.FrameResult, protocol.FrameSnapshot,
		protocol.FrameLock, protocol.FrameError, protocol.FramePong, protocol.FramePresence, protocol.FrameNudge} {
		m.out[t] = m.framesOut.WithLabelValues(string(t))
	}
	return m
}

func (m *metrics) closed(code int) { m.closes.WithLabelValues(strconv.Itoa(code)).Inc() }
