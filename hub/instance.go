package hub

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Instances that die (PROTOCOL.md §4; the store's side is in locks/instances.go).
//
// Each hub keeps a liveness record in Redis, refreshed every InstanceTimeout/3, and the
// list of the locks its sockets claimed (its holdings), written in batches as sockets
// claim and let go. Every InstanceTimeout/3 it also looks for instances whose record is
// older than InstanceTimeout; one live instance takes each dead one and detaches the
// dead one's holdings after the release grace, as if those sockets had just closed: a
// lock is released unless a live socket of its holder still uses it. So a lock claimed
// through a killed instance goes at most InstanceTimeout + InstanceTimeout/3 + the
// grace after the death (25 s + the grace with the defaults; the contract allows the
// grace + 30 s), and the killed sockets' ids stop counting for the two-tab rule then.

// holdings batches the changes to this instance's holdings in Redis. A change waits
// at most one round trip: the writer flushes whatever gathered while it wrote.
type holdings struct {
	mu     sync.Mutex
	add    map[locks.Holding]struct{} // guarded by mu; not yet written
	remove map[locks.Holding]struct{} // guarded by mu; not yet removed
	wake   chan struct{}              // capacity 1
}

func newHoldings() *holdings {
	return &holdings{add: map[locks.Holding]struct{}{}, remove: map[locks.Holding]struct{}{}, wake: make(chan struct{}, 1)}
}

// hold records that socket conn of holder oid holds ref; drop that it no longer does.
func (hs *holdings) hold(ref locks.Ref, oid, conn string) { hs.note(ref, oid, conn, true) }
func (hs *holdings) drop(ref locks.Ref, oid, conn string) { hs.note(ref, oid, conn, false) }

func (hs *holdings) note(ref locks.Ref, oid, conn string, held bool) {
	h := locks.Holding{Ref: ref, Holder: oid, Conn: conn}
	to, from := hs.add, hs.remove
	if !held {
		to, from = from, to
	}
	hs.mu.Lock()
	delete(from, h)
	to[h] = struct{}{}
	hs.mu.Unlock()
	hs.poke()
}

func (hs *holdings) poke() {
	select {
	case hs.wake <- struct{}{}:
	default:
	}
}

// take returns the pending changes and forgets them.
func (hs *holdings) take() (add, remove []locks.Holding) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for h := range hs.add {
		add = append(add, h)
	}
	for h := range hs.remove {
		remove = append(remove, h)
	}
	clear(hs.add)
	clear(hs.remove)
	return add, remove
}

// holdingsLoop writes the holdings as they change, until ctx is done. A write that
// fails (the store failed open and said so) is not retried: the lock is then left to
// its lease if this instance dies, as before there were holdings.
func (h *Hub) holdingsLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.held.wake:
		}
		add, remove := h.held.take()
		_ = h.store.UpdateHoldings(ctx, h.instance, add, remove)
	}
}

// livenessLoop refreshes this instance's liveness record and reaps dead instances
// every InstanceTimeout/3, until ctx is done; then it removes the record (a hub that
// stops has detached its sockets: nothing is left to reap).
func (h *Hub) livenessLoop(ctx context.Context) {
	every := h.cfg.InstanceTimeout / 3
	t := time.NewTicker(every)
	defer t.Stop()
	_ = h.store.Heartbeat(ctx, h.instance)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = h.store.Heartbeat(ctx, h.instance)
		dead, _ := h.store.Reap(ctx, h.cfg.InstanceTimeout) // fails open inside; the next tick tries again
		for _, d := range dead {
			h.reap(d)
		}
	}
}

// reap schedules the detach of a dead instance's holdings after the grace.
func (h *Hub) reap(d locks.DeadInstance) {
	h.met.deadInstances.Inc()
	h.log.LogAttrs(h.ctx, slog.LevelWarn, "an instance stopped without shutting down; releasing the locks its sockets held after the release grace",
		slog.String("instance", d.ID), slog.Time("lastSeen", d.LastSeen), slog.Int("locks", len(d.Holdings)),
		slog.Duration("grace", h.cfg.ReleaseGrace), slog.String("setting", "instance-timeout"))
	type sock struct{ conn, oid string }
	jobs := map[sock][]locks.Ref{}
	for _, hd := range d.Holdings {
		k := sock{hd.Conn, hd.Holder}
		jobs[k] = append(jobs[k], hd.Ref)
	}
	for k, refs := range jobs {
		h.met.reapedLocks.Add(float64(len(refs)))
		h.rel.schedule(h, detachJob{conn: k.conn, holder: protocol.Holder{OID: k.oid}, refs: refs})
	}
}
