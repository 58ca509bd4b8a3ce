package hub

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Fan-out: the store's change feed carries every change of every tenant, from every
// instance; the hub queues each to its own sockets that watch the change's (tenant,
// type) and to no other. The watcher index is read-locked while an event is handed to
// them: that never blocks (see sender.pushWire), so the lock is held for a walk over the
// watchers and, to each idle one, a write(2) that never waits.

// feed is the hub as the store's locks.FeedHandler; its methods run on the feed's
// goroutines and never block.
type feed struct{ h *Hub }

// Change hands a change to the watchers of its tenant and type. The frame is the
// store's encoding, shared and forwarded as is, framed for the wire once for them all.
func (f feed) Change(ch locks.Change) {
	h := f.h
	key := watchKey{ch.Tenant, ch.Event.Lock.EntityType}
	out := outFrame{b: ch.Frame, typ: protocol.FrameLock}
	wire := textFrame(make([]byte, 0, len(ch.Frame)+10), ch.Frame)
	h.mu.RLock()
	set := h.watchers[key]
	n := len(set)
	if n < fanoutSplit || runtime.GOMAXPROCS(0) == 1 {
		for c := range set {
			c.out.pushWire(key.typ, out, wire)
		}
	} else {
		fanoutSplitWays(set, key.typ, out, wire)
	}
	h.mu.RUnlock()
	h.met.delivered.Add(float64(n))
}

// fanoutSplit is the number of watchers from which an event's writes are shared among
// as many goroutines as there are cores: each write(2) costs some microseconds (on
// loopback it also runs the reader's TCP input), so a crowd's on one core would take
// a core's time per socket while the others idle.
const fanoutSplit = 256

// fanoutSplitWays hands an event to the watchers in set on GOMAXPROCS goroutines, the
// caller's one of them, and returns once every one has it: the next event of the key
// reaches each socket after this one.
func fanoutSplitWays(set map[*conn]struct{}, typ string, out outFrame, wire []byte) {
	bp := fanoutConns.Get().(*[]*conn)
	conns := (*bp)[:0]
	for c := range set {
		conns = append(conns, c)
	}
	ways := min(runtime.GOMAXPROCS(0), len(conns)/(fanoutSplit/2))
	per := (len(conns) + ways - 1) / ways
	var wg sync.WaitGroup
	for part := range slices.Chunk(conns[per:], per) {
		wg.Go(func() {
			for _, c := range part {
				c.out.pushWire(typ, out, wire)
			}
		})
	}
	for _, c := range conns[:per] {
		c.out.pushWire(typ, out, wire)
	}
	wg.Wait()
	clear(conns)
	*bp = conns
	fanoutConns.Put(bp)
}

// fanoutConns holds the arrays of watchers fanoutSplitWays shares out.
var fanoutConns = sync.Pool{New: func() any { return new([]*conn) }}

// Resync asks Run for fresh snapshots of the tenants affected names (nil: all): the
// feed was lost for them and is back.
func (f feed) Resync(affected func(tenant string) bool) {
	f.h.resyncMu.Lock()
	if affected == nil {
		f.h.resyncAll = true
	} else {
		f.h.resyncFor = append(f.h.resyncFor, affected)
	}
	f.h.resyncMu.Unlock()
	select {
	case f.h.resync <- struct{}{}:
	default: // one is pending already
	}
}

// takeResync returns which tenants the resyncs asked for since the last call want
// fresh snapshots, and forgets them.
func (h *Hub) takeResync() func(tenant string) bool {
	h.resyncMu.Lock()
	defer h.resyncMu.Unlock()
	all, fs := h.resyncAll, h.resyncFor
	h.resyncAll, h.resyncFor = false, nil
	if all {
		return func(string) bool { return true }
	}
	return func(tenant string) bool {
		for _, f := range fs {
			if f(tenant) {
				return true
			}
		}
		return false
	}
}

// resyncSettle gathers the burst of Resync calls of one outage (the feed has several
// channels, each of which calls it) into one resync.
const resyncSettle = 100 * time.Millisecond

// resyncLoop sends every watcher a fresh snapshot of each type it watches whenever the
// feed asks, until ctx is done. Unsolicited snapshots carry no id (protocol.Snapshot).
func (h *Hub) resyncLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.resync:
		}
		t := time.NewTimer(resyncSettle)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		select { // the burst's other calls are covered by this resync
		case <-h.resync:
		default:
		}
		h.resyncTenants(ctx, h.takeResync())
	}
}

// resyncTenants snapshots every watched (tenant, type) of the tenants affected names,
// holding its events meanwhile. Watchers of other tenants are left alone: their
// events kept flowing.
func (h *Hub) resyncTenants(ctx context.Context, affected func(tenant string) bool) {
	h.met.resyncs.Inc()
	for key, conns := range h.watchedNow() {
		if ctx.Err() != nil {
			return
		}
		if !affected(key.tenant) {
			continue
		}
		starts := make([]int, len(conns))
		for i, c := range conns {
			starts[i] = c.out.beginSnapshot(key.typ)
		}
		list, err := h.store.Feed.ListJSON(ctx, key.tenant, key.typ)
		if err != nil {
			list = encodeLocks(nil) // only for names the hub validated before watching: cannot happen
		}
		snap := snapshotFrame(protocol.Request{}, key.typ, list) // unsolicited: no id
		for i, c := range conns {
			c.out.endSnapshot(key.typ, starts[i], snap)
		}
	}
	// Presence changes may have been missed too; a restarted Redis lost the views.
	h.refreshViews(ctx, affected)
}

// watchedNow copies the watcher index.
func (h *Hub) watchedNow() map[watchKey][]*conn {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make(map[watchKey][]*conn, len(h.watchers))
	for k, set := range h.watchers {
		conns := make([]*conn, 0, len(set))
		for c := range set {
			conns = append(conns, c)
		}
		out[k] = conns
	}
	return out
}

// watchedKeys returns the (tenant, type) pairs someone watches.
func (h *Hub) watchedKeys() []watchKey {
	h.mu.RLock()
	defer h.mu.RUnlock()
	keys := make([]watchKey, 0, len(h.watchers))
	for k := range h.watchers {
		keys = append(keys, k)
	}
	return keys
}

// sweepLoop sweeps the index of every watched (tenant, type) each SweepInterval, so
// leases that ran out are announced as Expired (PROTOCOL.md §3), until ctx is done.
// Unwatched types are not swept: nobody would hear of them, and List prunes them when
// someone looks. Every instance sweeps what it watches; pruning is atomic in Redis, so
// each expiry is announced once.
func (h *Hub) sweepLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, k := range h.watchedKeys() {
			if ctx.Err() != nil {
				return
			}
			_ = h.store.Feed.Sweep(ctx, k.tenant, k.typ, h.cfg.SweepInterval) // fails open inside; names were validated at watch
		}
	}
}
