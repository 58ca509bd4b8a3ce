package hub

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
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
// grace after the death (20 s + the grace with the defaults; the contract allows the
// grace + 30 s). The killed sockets' ids stop counting for the two-tab rule as soon
// as the instance is found, a grace earlier, wherever a live socket of the holder uses
// the lock (forgetDead): that socket's release is then the last, and drops the lock.
// An instance reaps only once its own heartbeats have gone about an InstanceTimeout
// without two failures in a row (see livenessLoop), and one that finds its record or
// its holdings gone (taken for dead while it lived, say) writes its holdings again
// (holdings.rewrite); one taken for dead also puts its sockets back where the reaper
// forgot them (reattach).

// holdings batches the changes to this instance's holdings in Redis. A change waits
// at most one round trip: the writer flushes whatever gathered while it wrote. It also
// keeps them all, to write them again whole when Redis lost them: another instance took
// this one for dead and reaped it, or they were evicted.
type holdings struct {
	mu     sync.Mutex
	all    map[locks.Holding]struct{} // guarded by mu; what the sockets hold now
	add    map[locks.Holding]struct{} // guarded by mu; not yet written
	remove map[locks.Holding]struct{} // guarded by mu; not yet removed
	whole  bool                       // guarded by mu; write all, not the changes
	// leaving: guarded by mu; holdings whose socket is letting go (a release or a
	// detach in flight), until dropped or the call is over: see reattach.
	leaving map[locks.Holding]struct{}
	wake    chan struct{} // capacity 1
}

func newHoldings() *holdings {
	return &holdings{all: map[locks.Holding]struct{}{}, add: map[locks.Holding]struct{}{},
		remove: map[locks.Holding]struct{}{}, leaving: map[locks.Holding]struct{}{}, wake: make(chan struct{}, 1)}
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
	delete(hs.leaving, h)
	to[h] = struct{}{}
	if held {
		hs.all[h] = struct{}{}
	} else {
		delete(hs.all, h)
	}
	hs.mu.Unlock()
	hs.poke()
}

// leave marks that socket conn of holder oid is letting go of ref, before the store
// call that removes its id from the lock's sockets; left ends the mark (hold and drop
// end it too).
func (hs *holdings) leave(ref locks.Ref, oid, conn string) { hs.mark(ref, oid, conn, true) }
func (hs *holdings) left(ref locks.Ref, oid, conn string)  { hs.mark(ref, oid, conn, false) }

func (hs *holdings) mark(ref locks.Ref, oid, conn string, on bool) {
	h := locks.Holding{Ref: ref, Holder: oid, Conn: conn}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if on {
		hs.leaving[h] = struct{}{}
	} else {
		delete(hs.leaving, h)
	}
}

// gone reports whether h's socket let go of it, or is letting go.
func (hs *holdings) gone(h locks.Holding) bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	_, leaving := hs.leaving[h]
	_, held := hs.all[h]
	return leaving || !held
}

func (hs *holdings) poke() {
	select {
	case hs.wake <- struct{}{}:
	default:
	}
}

// rewrite asks the writer to write the holdings whole next time.
func (hs *holdings) rewrite() {
	hs.mu.Lock()
	hs.whole = true
	hs.mu.Unlock()
	hs.poke()
}

// take returns what to write and forgets it: every holding when whole (then all is
// set), else the changes.
func (hs *holdings) take() (whole bool, all, add, remove []locks.Holding) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	whole, hs.whole = hs.whole, false
	if whole {
		all = hs.allLocked()
	} else {
		for h := range hs.add {
			add = append(add, h)
		}
		for h := range hs.remove {
			remove = append(remove, h)
		}
	}
	clear(hs.add)
	clear(hs.remove)
	return whole, all, add, remove
}

// putBack returns changes whose write failed to the pending ones, unless newer ones
// replaced them meanwhile: the next write makes them.
func (hs *holdings) putBack(add, remove []locks.Holding) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, h := range add {
		if _, held := hs.all[h]; held {
			if _, newer := hs.remove[h]; !newer {
				hs.add[h] = struct{}{}
			}
		}
	}
	for _, h := range remove {
		if _, held := hs.all[h]; !held {
			if _, newer := hs.add[h]; !newer {
				hs.remove[h] = struct{}{}
			}
		}
	}
}

// snapshot returns every holding.
func (hs *holdings) snapshot() []locks.Holding {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.allLocked()
}

func (hs *holdings) allLocked() []locks.Holding {
	out := make([]locks.Holding, 0, len(hs.all))
	for h := range hs.all {
		out = append(out, h)
	}
	return out
}

// pending reports whether anything waits to be written.
func (hs *holdings) pending() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.whole || len(hs.add) > 0 || len(hs.remove) > 0
}

// any reports whether the sockets hold anything.
func (hs *holdings) any() bool {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.all) > 0
}

// holdingsLoop writes the holdings as they change, until ctx is done. A write that
// fails (the store failed open and said so) is not lost: its changes wait for the next
// change or liveness tick, whichever comes first.
func (h *Hub) holdingsLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.held.wake:
		}
		whole, all, add, remove := h.held.take()
		var err error
		if whole {
			err = h.store.Instances.ReplaceHoldings(ctx, h.instance, all)
		} else {
			err = h.store.Instances.UpdateHoldings(ctx, h.instance, add, remove)
		}
		switch {
		case err == nil || ctx.Err() != nil:
		case whole:
			h.held.rewrite() // takes whatever all is then
		default:
			h.held.putBack(add, remove)
		}
	}
}

// livenessLoop refreshes this instance's liveness record and reaps dead instances
// every InstanceTimeout/3, until ctx is done; then it removes the record (a hub that
// stops has detached its sockets: nothing is left to reap).
//
// It reaps only once its own heartbeats have gone without a gap for a whole
// InstanceTimeout. After Redis was out of reach for long (every instance's record may
// have gone stale meanwhile), each live instance refreshes its own within
// InstanceTimeout/3 of Redis coming back; an instance that reaped at once would take
// the others for dead and release the locks their live sockets hold. A gap of one
// failed heartbeat is not such an outage: no live record can go stale in it.
func (h *Hub) livenessLoop(ctx context.Context) {
	every := h.cfg.InstanceTimeout / 3
	t := time.NewTicker(every)
	defer t.Stop()
	// A gap between good heartbeats longer than this (two or more failed in a row)
	// may have let a live instance's record go stale: reaping waits a timeout again.
	maxGap := h.cfg.InstanceTimeout - every/2
	var healthy, lastOK time.Time // since when without such a gap; the last good heartbeat
	registered := false           // a heartbeat has succeeded: the record was there since
	var detaching sync.WaitGroup  // the dead instances' detaches, this one's reattaches; joined on return
	defer detaching.Wait()
	// Heartbeats still to put this instance's sockets back, after it found it was taken
	// for dead: two, for a reaper's forget that ran late, after the first.
	reattachBeats := 0
	beat := func(now time.Time) (ok bool) {
		l, err := h.store.Instances.Heartbeat(ctx, h.instance)
		if err != nil {
			return false
		}
		if lastOK.IsZero() || now.Sub(lastOK) > maxGap {
			healthy = now
		}
		lastOK = now
		switch {
		case l.RecordMissing && registered:
			// Taken for dead and reaped: the holdings in Redis are gone, or going.
			h.log.LogAttrs(ctx, slog.LevelWarn, "this instance's liveness record was gone (it was cut off from Redis longer than the instance timeout, and taken for dead); writing its holdings again",
				slog.String("instance", h.instance), slog.String("setting", "instance-timeout"))
			h.met.takenForDead.Inc()
			h.held.rewrite()
			reattachBeats = 2
		case l.HoldingsMissing && h.held.any():
			h.held.rewrite() // deleted meanwhile (the end of a reap of this instance, eviction)
		}
		registered = true
		if reattachBeats > 0 {
			reattachBeats--
			detaching.Go(func() { h.reattach(ctx) })
		}
		if h.held.pending() {
			h.held.poke() // a failed write: try again
		}
		return true
	}
	var mu sync.Mutex
	busy := map[string]bool{} // guarded by mu; dead instances being detached here
	// The reaper looks again when the grace of what it reaped ends, not at the next
	// tick after: a dead instance's locks go a grace after it was found.
	dueAt := time.NewTimer(time.Hour)
	dueAt.Stop()
	defer dueAt.Stop()
	beat(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			// About a timeout of good heartbeats (ticker times jitter: half a tick
			// less, so that the third tick after an outage reaps, not the fourth).
			if !beat(now) || now.Sub(healthy) < h.cfg.InstanceTimeout-every/2 {
				break // not now: the due holdings below are still taken
			}
			// Fails open inside; the next tick tries again.
			dead, _ := h.store.Instances.Reap(ctx, h.cfg.InstanceTimeout, h.cfg.ReleaseGrace)
			for _, d := range dead {
				h.met.deadInstances.Inc()
				h.log.LogAttrs(ctx, slog.LevelWarn, "an instance stopped without shutting down; releasing the locks its sockets held after the release grace",
					slog.String("instance", d.ID), slog.Time("lastSeen", d.LastSeen),
					slog.Duration("grace", h.cfg.ReleaseGrace), slog.String("setting", "instance-timeout"))
			}
			if len(dead) > 0 {
				dueAt.Reset(h.cfg.ReleaseGrace)
			}
			if len(dead) > 0 { // one instance after another: detachWorkers calls at a time in all
				detaching.Go(func() {
					for _, d := range dead {
						h.forgetDead(ctx, d)
					}
				})
			}
		case <-dueAt.C:
		}
		// Marks exist only after a reap that passed the check above, and an instance
		// whose record came back is skipped: no wait here. A turn of a timeout: the
		// others take an instance over once it ends unfinished. Fails open inside; the
		// next tick tries again.
		due, _ := h.store.Instances.DueReaped(ctx, h.cfg.InstanceTimeout)
		for _, d := range due {
			mu.Lock()
			started := !busy[d.ID]
			busy[d.ID] = true
			mu.Unlock()
			if !started {
				continue
			}
			detaching.Go(func() {
				h.detachDead(ctx, d)
				mu.Lock()
				delete(busy, d.ID)
				mu.Unlock()
			})
		}
	}
}

// reattach puts this instance's sockets back into the sockets of the locks they hold:
// a reaper that took this instance for dead dropped them (forgetDead), and they count
// again for the two-tab rule. A socket that let go of its lock meanwhile (its release
// or detach may have run just before the Reattach) has its id taken out again, or it
// would keep the lock for a holder whose last socket released it: its release marks
// it leaving before the store call, so one of the two sees the other.
func (h *Hub) reattach(ctx context.Context) {
	eachHolding(h.held.snapshot(), func(hd locks.Holding) {
		put, err := h.store.Instances.Reattach(ctx, hd)
		if err != nil || !put {
			return
		}
		if h.held.gone(hd) {
			_, _ = h.store.Locks.Detach(ctx, hd.Ref, protocol.Holder{OID: hd.Holder}, hd.Conn, false) // fails open inside
			return
		}
		h.met.reattached.Inc()
	})
}

// forgetDead drops a dead instance's sockets from the locks where another socket
// uses them, as soon as the instance is found dead: the two-tab rule then counts the
// live sockets alone. What fails open here is detached a grace later all the same.
func (h *Hub) forgetDead(ctx context.Context, d locks.DeadInstance) {
	// One found with others waits its turn here: if its record is back by then (it
	// lived), its sockets count, and its own reattach may have run already.
	if alive, err := h.store.Instances.Alive(ctx, d.ID); err != nil || alive {
		return
	}
	eachHolding(d.Holdings, func(hd locks.Holding) {
		if forgot, err := h.store.Instances.Forget(ctx, hd); err == nil && forgot {
			h.met.forgotten.Inc()
		}
	})
}

// eachHolding calls f for every holding, detachWorkers at a time, and returns when all
// calls have.
func eachHolding(hs []locks.Holding, f func(locks.Holding)) {
	sem := make(chan struct{}, detachWorkers)
	var wg sync.WaitGroup
	for _, hd := range hs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(hd)
		})
	}
	wg.Wait()
}

// detachDead detaches a dead instance's holdings, with release, as if its sockets had
// just closed (their grace has passed), detachWorkers at a time, and then forgets the
// instance. When a detach fails open it leaves the instance reaped: another turn tries
// again.
func (h *Hub) detachDead(ctx context.Context, d locks.DeadInstance) {
	var failed atomic.Bool
	eachHolding(d.Holdings, func(hd locks.Holding) {
		res, err := h.store.Locks.Detach(ctx, hd.Ref, protocol.Holder{OID: hd.Holder}, hd.Conn, true)
		if err != nil || res.Outcome == protocol.OutcomeUnknown {
			failed.Store(true) // refused (cannot be: the store took the ref when claimed) or failed open
			return
		}
		h.met.reapedLocks.Inc()
		h.met.detaches.WithLabelValues("grace", string(res.Outcome)).Inc()
	})
	if !failed.Load() {
		_ = h.store.Instances.FinishReap(ctx, d.ID) // fails open inside: the instance is due again after its turn
	}
}
