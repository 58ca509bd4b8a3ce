package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// LockReader reads the live lock of one entity: *locks.Locks.
type LockReader interface {
	// Lookup returns the live lock on ref, or nil when it is free. It returns an error
	// for a ref that can never be locked (*locks.InvalidEntityError,
	// *locks.NotLockableError), and locks.ErrUnavailable when the store did not answer.
	Lookup(ctx context.Context, ref locks.Ref) (*protocol.Lock, error)
}

var _ LockReader = (*locks.Locks)(nil)

// GuardConfig configures Guard. Store, Identify and Entity are required.
type GuardConfig struct {
	// Store reads locks: a *locks.Store's Locks, on the lock Redis. Required.
	Store LockReader
	// Identify returns the caller's tenant and user object id (the holder oid of the
	// locks it claims), typically from what the API's own authentication put in the
	// request's context. An error answers 401 unauthorized. Required.
	Identify func(r *http.Request) (tenant, oid string, err error)
	// Entity returns the entity a write touches. ok false means the request touches
	// no lockable entity and passes unguarded. Required.
	Entity func(r *http.Request) (entityType, uid string, ok bool)
	// Logger receives a warning for every fail-open. Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the guard's metric, lockhub_guard_decisions_total. Nil means
	// it is not registered. Several guards may share one Registerer.
	Registerer prometheus.Registerer
}

// GuardDecision says why Guard let a request through or stopped it. Each is a label
// value of lockhub_guard_decisions_total.
type GuardDecision string

// The decisions of Guard.
const (
	GuardFree       GuardDecision = "free"        // no live lock: passes (automation never claims)
	GuardMine       GuardDecision = "mine"        // the caller holds the lock: passes
	GuardLocked     GuardDecision = "locked"      // another user holds it: 409 locked
	GuardUnguarded  GuardDecision = "unguarded"   // not a lockable entity: passes
	GuardRefused    GuardDecision = "refused"     // a name that fails PROTOCOL.md §1, or no identity: 400, 401
	GuardFailedOpen GuardDecision = "failed_open" // the store answered an error: passes, warns
)

// Guard returns middleware that enforces edit locks at the edge of an HTTP API
// (PROTOCOL.md §5, "Enforcement at the API edge"). Wrap it around the handlers that
// write an entity: the generic update and delete, and mutators such as approve.
//
//   - Another user holds a live lock on the entity: 409 {"code":"locked","lock":{..}},
//     and the handler does not run.
//   - The entity is free, or the caller holds the lock: the request passes. A free
//     entity is writable without a lock, so automation, workers and driver apps that
//     never claim are never blocked.
//   - The entity's type is not lockable (Entity said so, or the store does not know
//     the type): the request passes.
//   - The store fails: the request passes, and a warning is logged and counted. A
//     *locks.Store fails open by itself (it answers "no lock" and logs and counts
//     the failure as lockhub_store_fail_open_total{op="get"}); the guard does the
//     same for a store that returns its failure as an error.
//
// An identity the API cannot establish answers 401, and an entity uid that fails
// PROTOCOL.md §1 answers 400 invalid_entity, in the body shape of every error of
// this package. Guard panics when Store, Identify or Entity is nil, or when its metric
// cannot be registered: both are programming errors found at start.
//
// The returned middleware is safe for concurrent use.
func Guard(cfg GuardConfig) func(http.Handler) http.Handler {
	if cfg.Store == nil || cfg.Identify == nil || cfg.Entity == nil {
		panic("web: GuardConfig.Store, Identify and Entity are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	decisions, err := registerCounterVec(cfg.Registerer, prometheus.CounterOpts{
		Name: "lockhub_guard_decisions_total",
		Help: "Guarded writes by decision: free, mine, locked, unguarded, refused, failed_open.",
	}, []string{"decision"})
	if err != nil {
		panic("web: Guard: " + err.Error())
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, err := guard(r, cfg, log)
			decisions.WithLabelValues(string(d)).Inc()
			if err != nil {
				WriteError(w, r, log, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// guard decides one request; a non-nil error is the answer.
func guard(r *http.Request, cfg GuardConfig, log *slog.Logger) (GuardDecision, error) {
	typ, uid, ok := cfg.Entity(r)
	if !ok {
		return GuardUnguarded, nil
	}
	tenant, oid, err := cfg.Identify(r)
	if err != nil {
		return GuardRefused, &Error{Code: protocol.CodeUnauthorized, Message: "the caller could not be identified", Err: err}
	}
	ref := locks.Ref{Tenant: tenant, Type: typ, UID: uid}
	l, err := cfg.Store.Lookup(r.Context(), ref)
	var nl *locks.NotLockableError
	var ie *locks.InvalidEntityError
	switch {
	case errors.As(err, &nl):
		// Nothing can hold a lock on a type that is not lockable: nothing to enforce.
		return GuardUnguarded, nil
	case errors.As(err, &ie):
		return GuardRefused, err
	case err != nil:
		// locks.ErrUnavailable: Redis did not answer; the store logged its reason.
		log.LogAttrs(r.Context(), slog.LevelWarn, "lock store unavailable; guard failing open",
			slog.String("entity", ref.String()), slog.String("reason", "store_unavailable"),
			slog.String("error", err.Error()))
		return GuardFailedOpen, nil
	case l == nil:
		return GuardFree, nil
	case l.HolderOID == oid:
		return GuardMine, nil
	}
	return GuardLocked, lockedError(l)
}

// registerCounterVec registers a counter vector, or reuses the one already registered
// under the same name, so that several guards may share a Registerer. A nil reg
// registers nothing. Every other collector of lockhub is made with promauto.With,
// which refuses a second registration; the guard's is the one meant to be shared.
func registerCounterVec(reg prometheus.Registerer, opts prometheus.CounterOpts, labels []string) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(opts, labels)
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}
