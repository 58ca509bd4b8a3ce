package hub

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Release on disconnect (see the package doc for the reasoning).
//
// A socket that closes leaves a detachJob: its connection id, its holder and the locks
// claimed through it. After ReleaseGrace, Run detaches each lock with release=true; the
// store releases it only when no other socket of the holder, on any instance, claimed
// or renewed it (locks.Locks.Detach).

// detachJob is the detach of one closed socket's locks.
type detachJob struct {
	due    time.Time
	conn   string
	holder protocol.Holder
	refs   []locks.Ref
	views  []locks.Ref // the entities the socket viewed (view.go)
	edits  []locks.Ref // those it viewed with intent edit: a hand-off may have reached it since (line.go)
}

// releaser holds the jobs waiting for their grace. Every job waits the same grace, so
// the queue is in due order and a FIFO suffices.
type releaser struct {
	mu      sync.Mutex
	queue   []detachJob // guarded by mu; in due order
	stopped bool        // guarded by mu; Run has returned: detach at once
	wake    chan struct{}
}

// detachWorkers bounds the detaches in flight: a mass disconnect must not open a
// thousand Redis calls at once.
const detachWorkers = 16

// detachTimeout bounds the detaches of pending jobs when Run stops, so a dead Redis
// cannot stretch a shutdown past the 10 s the contract allows.
const detachTimeout = time.Second

func newReleaser() *releaser { return &releaser{wake: make(chan struct{}, 1)} }

// schedule queues a closed socket's locks for release after the grace. Once Run has
// returned there is nobody to wait for the grace, and a graceful shutdown releases
// nothing: the locks are only detached, and left to their lease.
func (r *releaser) schedule(h *Hub, job detachJob) {
	job.due = time.Now().Add(h.cfg.ReleaseGrace)
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		h.detach(h.ctx, job, false, "shutdown")
		return
	}
	r.queue = append(r.queue, job)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run detaches jobs as their grace ends, until ctx is done; then it settles the jobs
// still waiting at once and returns once every detach is done.
func (r *releaser) run(ctx context.Context, h *Hub) {
	sem := make(chan struct{}, detachWorkers)
	var wg sync.WaitGroup
	start := func(ctx context.Context, job detachJob, release bool, why string) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			h.detach(ctx, job, release, why)
		})
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		now := time.Now()
		var due []detachJob
		for len(r.queue) > 0 && !r.queue[0].due.After(now) {
			due = append(due, r.queue[0])
			r.queue[0] = detachJob{}
			r.queue = r.queue[1:]
		}
		next := time.Duration(-1)
		if len(r.queue) > 0 {
			next = r.queue[0].due.Sub(now)
		}
		r.mu.Unlock()
		for _, job := range due {
			start(ctx, job, true, "grace")
		}
		if next >= 0 {
			timer.Reset(next)
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			// Sockets that closed before the hub stopped, whose grace has not ended:
			// nobody here will wait it out, and a graceful shutdown releases nothing
			// (PROTOCOL.md §4), since such a client may be reconnecting to another
			// instance right now. They are detached without release: the lock stays
			// with its lease, or until the holder's other sockets let it go.
			r.mu.Lock()
			r.stopped = true
			rest := r.queue
			r.queue = nil
			r.mu.Unlock()
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), detachTimeout)
			for _, job := range rest {
				start(dctx, job, false, "shutdown")
			}
			wg.Wait()
			cancel()
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// detach detaches job's locks from its socket, releasing those no other socket of the
// holder uses when release is true. The store fails open: a lock it cannot reach is
// left to its lease.
func (h *Hub) detach(ctx context.Context, job detachJob, release bool, why string) {
	for _, ref := range job.refs {
		hd := holding(ref, job.holder.OID, job.conn)
		h.member.Leaving(hd) // ended by the drop below
		res, err := h.store.Locks.Detach(ctx, ref, job.holder, job.conn, release)
		if err != nil { // refs were accepted by the store when claimed: cannot happen
			h.log.LogAttrs(ctx, slog.LevelWarn, "detach refused", slog.String("lock", ref.String()), slog.String("error", err.Error()))
			h.member.Left(hd)
			continue
		}
		h.met.detaches.WithLabelValues(why, string(res.Outcome)).Inc()
		h.member.Drop(hd)
	}
	// Views end now, after the grace; without release (a shutdown) at the end of the
	// grace, leaving the client time to view again from another instance. The refs
	// were checked at view, and the store fails open.
	for _, ref := range job.views {
		if release {
			_ = h.store.Presence.Unview(ctx, ref, job.conn)
		} else {
			_ = h.store.Presence.LeaveViews(ctx, ref, job.due, job.conn)
		}
	}
	// A hand-off that reached the socket after it closed, in its grace, gave it a lock
	// nobody here took up: it goes now, like the socket's other locks (PROTOCOL.md
	// §11). The store changes nothing unless the lock was handed to this socket.
	if release {
		for _, ref := range job.edits {
			if res, err := h.store.Locks.ReleaseHanded(ctx, ref, job.conn); err == nil {
				h.met.detaches.WithLabelValues("handed", string(res.Outcome)).Inc()
			}
		}
	}
}
