package locks

import (
	"context"
	"fmt"
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
	c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(b).Addr()})
	b.Cleanup(func() { _ = c.Close() })
	s, _ := newStore(b, c, benchConfig(5*time.Second))
	ctx := context.Background()
	const n = 20000
	value := func(i, gen int) string {
		return fmt.Sprintf(`{"entityType":"ApprovalRequest","entityUid":"r-%d","holderOid":"u-%d","holderName":"Person u-%d","acquiredAtUtc":"2026-12-07T06:00:00.000Z","expiresAtUtc":"2026-12-07T%02d:%02d:%02d.000Z"}`, i, i/20, i/20, gen/3600%24, gen/60%60, gen%60)
	}
	vals, uids := make([]any, n), make([]int, n)
	for i := range vals {
		vals[i], uids[i] = value(i, 0), i
	}
	key := typeKey{"bench", "ApprovalRequest"}
	var changed, fresh time.Duration
	var nChanged, nFresh float64
	for i := 0; b.Loop(); i++ {
		if i%20 == 19 {
			nFresh++
			var e encodedValues // nothing known
			fresh += timeIt(func() { e.encode(ctx, s.Console.core, key, vals) })
			continue
		}
		// A renewal: the value changes and moves to the end of the index's order.
		at := i % n
		uid := uids[at]
		copy(vals[at:], vals[at+1:])
		copy(uids[at:], uids[at+1:])
		vals[n-1], uids[n-1] = value(uid, i+1), uid
		nChanged++
		changed += timeIt(func() { s.Console.encoded.encode(ctx, s.Console.core, key, vals) })
	}
	perChanged, perFresh := float64(changed.Nanoseconds())/nChanged, float64(fresh.Nanoseconds())/nFresh
	b.ReportMetric(perChanged, "onechange-ns/op")
	b.ReportMetric(perFresh, "fresh-ns/op")
	b.ReportMetric(perFresh/perChanged, "speedup")
}
