package locks

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/lockhub/lockhub/protocol"
)

// metrics are the store's Prometheus collectors. They are registered on the
// Registerer of Config, if any (promauto panics when one is there already: a wiring
// mistake found at start); with none they count into the void.
type metrics struct {
	ops       *prometheus.CounterVec   // op, outcome (an outcomeLabel)
	failOpen  *prometheus.CounterVec   // op, reason
	duration  *prometheus.HistogramVec // op
	published *prometheus.CounterVec   // op (event op)
	foreign   *prometheus.CounterVec   // op (event op): changes of other programs
	// values: decoded, known (see ListJSON)
	listValues *prometheus.CounterVec
	limits     *prometheus.CounterVec // limit (a setting of the fair share)
	handoffs   prometheus.Counter     // freed locks handed to the next in line (§11)
	passedOver *prometheus.CounterVec // limit: people in line a hand-off passed over
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg) // a nil reg registers nothing
	m := &metrics{
		ops: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_store_operations_total",
			Help: "Lock store operations by operation and outcome.",
		}, []string{"op", "outcome"}),
		failOpen: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_store_fail_open_total",
			Help: "Redis failures the store answered by failing open, by operation and reason.",
		}, []string{"op", "reason"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockhub_store_operation_seconds",
			Help:    "Duration of lock store operations, Redis round trips included.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"op"}),
		published: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_events_published_total",
			Help: "Lock change events published to Redis pub/sub, by event op.",
		}, []string{"op"}),
		foreign: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_store_foreign_changes_total",
			Help: "Changes another program (the .NET API) made to locks, found and announced by lockhub, by event op.",
		}, []string{"op"}),
		listValues: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_store_list_values_total",
			Help: "Lock values read for watch snapshots: decoded (new or changed since the type's last read) or known (as the last read found them, their encoding reused).",
		}, []string{"values"}),
		limits: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_store_limit_hits_total",
			Help: "Changes the fair share refused (PROTOCOL.md §4), by the setting that limits them.",
		}, []string{"limit"}),
		handoffs: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_store_handoffs_total",
			Help: "Freed locks handed to the first person in line (PROTOCOL.md §11).",
		}),
		passedOver: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_store_handoff_passed_over_total",
			Help: "People in line a hand-off passed over because they were at a limit of the fair share, by the setting.",
		}, []string{"limit"}),
	}
	return m
}

// opName is the op label of the store's metrics and of its fail-open warnings.
type opName string

const (
	opClaim     opName = "claim"
	opRenew     opName = "renew"
	opRelease   opName = "release"
	opDetach    opName = "detach"
	opTakeover  opName = "takeover"
	opGet       opName = "get"
	opList      opName = "list"
	opMine      opName = "mine"
	opSweep     opName = "sweep"
	opSubscribe opName = "subscribe" // the change feed (fail-open only)
	opInstances opName = "instances" // liveness records and holdings (fail-open only)
	// Presence and nudges (PROTOCOL.md §9).
	opView        opName = "view"
	opUnview      opName = "unview"
	opViewRefresh opName = "view_refresh"
	opNudge       opName = "nudge"
	// The waiting line and claims of many (PROTOCOL.md §11, §12).
	opHanded      opName = "handed"
	opClaimMany   opName = "claim_many"
	opReleaseMany opName = "release_many"
)

// outcomeLabel is the outcome label of lockhub_store_operations_total. A lock operation
// is counted by its protocol.Outcome; a read, which has no outcome, by what it found.
type outcomeLabel string

const (
	labelFree outcomeLabel = "free" // get: no live lock
	// labelRefused: a change the fair share refused (share.go).
	labelRefused outcomeLabel = "refused"
	labelHeld    outcomeLabel = "held"   // get: a live lock
	labelListed  outcomeLabel = "listed" // list, mine: the live locks read
	labelSwept   outcomeLabel = "swept"  // sweep: the index pruned
	labelViewed  outcomeLabel = "viewed" // view, unview, view_refresh: the viewers read

	// labelUnknown counts any operation that failed open, a read as well as a write.
	labelUnknown = outcomeLabel(protocol.OutcomeUnknown)
)
