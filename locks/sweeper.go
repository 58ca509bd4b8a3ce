package locks

import (
	"context"
	"sync"
	"time"
)

// Sweeper finds leases that ran out without release and has them announced as Expired
// (PROTOCOL.md §3), for the (tenant, type) pairs that someone watches. Keyspace
// notifications would be per node on a cluster, so expiry is found by sweeping the
// indexes instead. Every instance may sweep the same index: pruning is atomic, so each
// expiry is published once.
//
// Track and Untrack may be called concurrently with each other and with Run.
type Sweeper struct {
	store    *Store
	interval time.Duration

	mu      sync.Mutex
	tracked map[sweepKey]int // guarded by mu; reference counts
}

type sweepKey struct{ tenant, typ string }

// DefaultSweepInterval is how often a Sweeper sweeps when not told otherwise.
const DefaultSweepInterval = time.Second

// NewSweeper returns a sweeper over s. Zero interval means DefaultSweepInterval.
func NewSweeper(s *Store, interval time.Duration) *Sweeper {
	return &Sweeper{store: s, interval: cmp(interval, DefaultSweepInterval), tracked: map[sweepKey]int{}}
}

// Track starts sweeping tenant's index of entityType; each Track needs one Untrack.
func (w *Sweeper) Track(tenant, entityType string) {
	w.mu.Lock()
	w.tracked[sweepKey{tenant, entityType}]++
	w.mu.Unlock()
}

// Untrack undoes one Track.
func (w *Sweeper) Untrack(tenant, entityType string) {
	w.mu.Lock()
	k := sweepKey{tenant, entityType}
	if w.tracked[k]--; w.tracked[k] <= 0 {
		delete(w.tracked, k)
	}
	w.mu.Unlock()
}

// Run sweeps every tracked index each interval until ctx is done.
func (w *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		w.mu.Lock()
		keys := make([]sweepKey, 0, len(w.tracked))
		for k := range w.tracked {
			keys = append(keys, k)
		}
		w.mu.Unlock()
		for _, k := range keys {
			if ctx.Err() != nil {
				return nil
			}
			_ = w.store.Sweep(ctx, k.tenant, k.typ) // only invalid names err, and Track is fed validated ones
		}
	}
}
