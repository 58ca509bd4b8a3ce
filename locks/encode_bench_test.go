package locks

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// BenchmarkListEncode prices encode, the hub's part of a list, a watch's snapshot or
// the console's list of a type at a tenant's quota (20,000 locks): each call finds one
// value changed and moved to the end of the index's order (a renewal, as a working day
// brings). The baseline in the same run, once in 20 calls, is a read with nothing known
// (every value decoded and encoded, as the first read of a type).
// Reported: ns/op of the reads with one change, of the baseline, and their ratio.
func BenchmarkListEncode(b *testing.B) {
	e := newEncodeBench(b)
	var changed, fresh time.Duration
	var nChanged, nFresh float64
	for i := 0; b.Loop(); i++ {
		if i%20 == 19 {
			nFresh++
			var none encodedValues // nothing known
			fresh += timeIt(func() { none.encode(e.ctx, e.core, e.key, e.vals) })
			continue
		}
		e.renew(i)
		nChanged++
		changed += timeIt(func() { e.core.encoded.encode(e.ctx, e.core, e.key, e.vals) })
	}
	perChanged, perFresh := float64(changed.Nanoseconds())/nChanged, float64(fresh.Nanoseconds())/nFresh
	b.ReportMetric(perChanged, "onechange-ns/op")
	b.ReportMetric(perFresh, "fresh-ns/op")
	b.ReportMetric(perFresh/perChanged, "speedup")
}

// BenchmarkListEncodeHold prices what others wait for while encode runs: on one P
// (GOMAXPROCS 1), a goroutine that only yields stands for the requests ready to run
// beside a big read (a small tenant's claim); the longest gap between two of its turns
// is the longest stretch encode held the P. Each call is a read with one change, as in
// BenchmarkListEncode. The baseline in the same run is the read's whole time.
// Reported: the longest hold of each read (mean over reads, and the largest), the
// read's time, and their ratio (1 for a read that never yields).
func BenchmarkListEncodeHold(b *testing.B) {
	e := newEncodeBench(b)
	e.core.encoded.encode(e.ctx, e.core, e.key, e.vals) // the first read of the type, not measured
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var longest atomic.Int64 // ns; the other goroutine's longest gap since it was reset
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		last := time.Now()
		for !stop.Load() {
			runtime.Gosched()
			now := time.Now()
			if gap := now.Sub(last).Nanoseconds(); gap > longest.Load() {
				longest.Store(gap)
			}
			last = now
		}
	})
	var reads, holds time.Duration
	var maxHold time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		e.renew(i)
		runtime.Gosched() // the other goroutine's turn: its gap starts now
		longest.Store(0)
		reads += timeIt(func() { e.core.encoded.encode(e.ctx, e.core, e.key, e.vals) })
		runtime.Gosched() // its turn after the read: the read's last stretch is counted
		hold := time.Duration(longest.Load())
		holds += hold
		maxHold = max(maxHold, hold)
		n++
	}
	stop.Store(true)
	wg.Wait()
	b.ReportMetric(float64(holds.Nanoseconds())/float64(n), "hold-ns/op")
	b.ReportMetric(float64(maxHold.Nanoseconds()), "maxhold-ns")
	b.ReportMetric(float64(reads.Nanoseconds())/float64(n), "read-ns/op")
	b.ReportMetric(float64(holds)/float64(reads), "hold/read")
}

// encodeBench is a type of 20,000 stored lock values, as the list script answers them.
type encodeBench struct {
	ctx  context.Context
	core *core
	key  typeKey
	vals []any
	uids []int
}

func newEncodeBench(b *testing.B) *encodeBench {
	c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(b).Addr()})
	b.Cleanup(func() { _ = c.Close() })
	s, _ := newStore(b, c, benchConfig(5*time.Second))
	const n = 20000
	e := &encodeBench{ctx: context.Background(), core: s.Console.core, key: typeKey{"bench", "ApprovalRequest"}, vals: make([]any, n), uids: make([]int, n)}
	for i := range e.vals {
		e.vals[i], e.uids[i] = encodeBenchValue(i, 0), i
	}
	return e
}

// encodeBenchValue is lock i's stored value after its gen-th renewal (20 locks a
// person); TestEncodeOrderMoved uses it too.
func encodeBenchValue(i, gen int) string {
	return fmt.Sprintf(`{"entityType":"ApprovalRequest","entityUid":"r-%d","holderOid":"u-%d","holderName":"Person u-%d","acquiredAtUtc":"2026-12-07T06:00:00.000Z","expiresAtUtc":"2026-12-07T%02d:%02d:%02d.000Z"}`, i, i/20, i/20, gen/3600%24, gen/60%60, gen%60)
}

// renew is a renewal before read i: a value changes and moves to the end of the index's
// order.
func (e *encodeBench) renew(i int) {
	n := len(e.vals)
	at := i % n
	uid := e.uids[at]
	copy(e.vals[at:], e.vals[at+1:])
	copy(e.uids[at:], e.uids[at+1:])
	e.vals[n-1], e.uids[n-1] = encodeBenchValue(uid, i+1), uid
}
