package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// ManyReader reads the live locks of many entities of one type in one round trip:
// *locks.Locks.
type ManyReader interface {
	// LookupMany returns the live lock of each uid, nil where it is free. It returns
	// an error for uids that could never be locked (a bad_request *protocol.Error for
	// a list that is not 1 to protocol.MaxBulk distinct uids, *locks.InvalidEntityError,
	// *locks.NotLockableError), and locks.ErrUnavailable when the store did not answer.
	LookupMany(ctx context.Context, tenant, entityType string, uids []string) ([]*protocol.Lock, error)
}

var _ ManyReader = (*locks.Locks)(nil)

// GuardManyConfig configures GuardMany. Store, Identify and Entities are required.
type GuardManyConfig struct {
	// Store reads locks: a *locks.Store's Locks, on the lock Redis. Required.
	Store ManyReader
	// Identify returns the caller's tenant and oid, as GuardConfig.Identify. Required.
	Identify func(r *http.Request) (tenant, oid string, err error)
	// Entities returns the entities a bulk write touches: one type and its uids (for a
	// body {"uids":[..]}, ReadUIDs reads them and leaves the body for the handler). ok
	// false means the request touches no lockable entity and passes unguarded; an
	// error is answered as it is (a malformed body: 400). Required.
	Entities func(r *http.Request) (entityType string, uids []string, ok bool, err error)
	// Logger receives a warning for every fail-open. Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives lockhub_guard_bulk_decisions_total. Nil means it is not
	// registered. Several bulk guards may share one Registerer.
	Registerer prometheus.Registerer
}

// GuardMany returns middleware that enforces edit locks on a bulk write, one that
// changes many entities of one type at once (PROTOCOL.md §12, "Enforcement"): Guard
// for many entities, read in one round trip.
//
//   - Another user holds a live lock on any of them: 409
//     {"code":"locked","message":"..","locks":[..]} with every lock held by others, and
//     the handler does not run: the write changes nothing.
//   - Every one is free or the caller's: the request passes.
//   - The list is not 1 to protocol.MaxBulk distinct valid uids: 400 bad_request or
//     invalid_entity; a type that is not lockable passes, as with Guard.
//   - The store fails: the request passes, and a warning is logged and counted.
//
// It panics when Store, Identify or Entities is nil, or when its metric cannot be
// registered. The returned middleware is safe for concurrent use.
func GuardMany(cfg GuardManyConfig) func(http.Handler) http.Handler {
	if cfg.Store == nil || cfg.Identify == nil || cfg.Entities == nil {
		panic("web: GuardManyConfig.Store, Identify and Entities are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	decisions, err := registerCounterVec(cfg.Registerer, prometheus.CounterOpts{
		Name: "lockhub_guard_bulk_decisions_total",
		Help: "Guarded bulk writes by decision: free (every entity free or the caller's), locked, unguarded, refused, failed_open.",
	}, []string{"decision"})
	if err != nil {
		panic("web: GuardMany: " + err.Error())
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, err := guardMany(r, cfg, log)
			decisions.WithLabelValues(string(d)).Inc()
			if err != nil {
				WriteError(w, r, log, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// guardMany decides one bulk request; a non-nil error is the answer.
func guardMany(r *http.Request, cfg GuardManyConfig, log *slog.Logger) (GuardDecision, error) {
	typ, uids, ok, err := cfg.Entities(r)
	if err != nil {
		return GuardRefused, err
	}
	if !ok {
		return GuardUnguarded, nil
	}
	tenant, oid, err := cfg.Identify(r)
	if err != nil {
		return GuardRefused, &Error{Code: protocol.CodeUnauthorized, Message: "the caller could not be identified", Err: err}
	}
	held, err := cfg.Store.LookupMany(r.Context(), tenant, typ, uids)
	var nl *locks.NotLockableError
	var ce protocol.ClientError
	switch {
	case errors.As(err, &nl):
		return GuardUnguarded, nil
	case errors.As(err, &ce):
		return GuardRefused, err
	case err != nil:
		log.LogAttrs(r.Context(), slog.LevelWarn, "lock store unavailable; bulk guard failing open",
			slog.String("tenant", tenant), slog.String("type", typ), slog.Int("entities", len(uids)),
			slog.String("reason", "store_unavailable"), slog.String("error", err.Error()))
		return GuardFailedOpen, nil
	}
	var others []protocol.Lock
	var names []string
	for _, l := range held {
		if l != nil && l.HolderOID != oid {
			others = append(others, *l)
			if len(names) < 3 {
				names = append(names, l.EntityUID+" by "+l.HolderName)
			}
		}
	}
	if len(others) == 0 {
		return GuardFree, nil
	}
	more := ""
	if len(others) > len(names) {
		more = fmt.Sprintf(" and %d more", len(others)-len(names))
	}
	return GuardLocked, &Error{Code: protocol.CodeLocked, Locks: others,
		Message: fmt.Sprintf("%d of the %d %s entities are being edited: %s%s", len(others), len(uids), typ, strings.Join(names, ", "), more)}
}
