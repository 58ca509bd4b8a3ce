package service

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Returning a burst's memory. A crowd of sockets (an instance went away, a morning
// log-in) leaves garbage behind: handshakes, token checks, snapshots, several times
// what the sockets keep. Go's collector frees it, but its scavenger keeps freed memory
// up to the heap goal (twice the live heap) for the next allocations. An instance whose
// sockets then sit idle allocates little, and holds that memory for nothing: about
// 14 KiB of RSS per idle socket at 10,000 instead of 12 (ISSUE 11, goal 12). So once a
// burst is over, lockhub returns the free memory to the OS, once: one collection and
// one scavenge, a few tens of milliseconds of CPU for 10,000 sockets.

// trimQuiet is how often the trimmer looks: a look that finds fewer than a tenth of
// a burst of new sockets since the one before finds the burst over.
const trimQuiet = 10 * time.Second

// DefaultMemoryTrimBurst is how many new sockets make a burst worth returning memory
// after: setting "memory-trim-burst".
const DefaultMemoryTrimBurst = 1000

// trimmer returns the memory of bursts of new sockets (see above).
type trimmer struct {
	accepted func() uint64 // sockets accepted so far
	burst    uint64        // new sockets since the last trim that make a burst
	every    time.Duration // how often it looks (trimQuiet)
	log      *slog.Logger
	trims    prometheus.Counter
	released prometheus.Counter // bytes
}

func newTrimmer(accepted func() uint64, burst int, every time.Duration, log *slog.Logger, reg prometheus.Registerer) *trimmer {
	f := promauto.With(reg)
	return &trimmer{accepted: accepted, burst: uint64(burst), every: every, log: log,
		trims: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_memory_trims_total",
			Help: "Times the free memory a burst of new sockets left behind was returned to the OS (--memory-trim-burst).",
		}),
		released: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_memory_trimmed_bytes_total",
			Help: "Bytes of free heap returned to the OS after bursts of new sockets.",
		}),
	}
}

// run looks every t.every until ctx is done, and trims once a burst has ended: at
// least t.burst sockets accepted since the last trim, and fewer than a tenth of that
// since the last look.
func (t *trimmer) run(ctx context.Context) {
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	trimmed := t.accepted()
	last := trimmed
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n := t.accepted()
		if n-trimmed >= t.burst && n-last < max(t.burst/10, 1) {
			t.trim(ctx, n-trimmed)
			trimmed = n
		}
		last = n
	}
}

// trim returns the free heap to the OS, and says how much.
func (t *trimmer) trim(ctx context.Context, sockets uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	debug.FreeOSMemory()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	released := after.HeapReleased - min(before.HeapReleased, after.HeapReleased)
	t.trims.Inc()
	t.released.Add(float64(released))
	t.log.LogAttrs(ctx, slog.LevelInfo, "returned the free memory of a burst of sockets to the OS",
		slog.Uint64("sockets", sockets), slog.Uint64("released_bytes", released), slog.Duration("took", took),
		slog.Uint64("heap_live_bytes", after.HeapAlloc))
}
