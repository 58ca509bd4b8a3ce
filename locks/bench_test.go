package locks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// The benchmarks report each figure against a baseline measured in the same run, on
// the same real redis-server, interleaved, because this machine is shared and noisy:
// only the ratios mean something.
//
//	go test -run='^$' -bench=. -benchtime=2s ./locks/

// BenchmarkClaimRelease compares a claim and a release through the store (two Lua
// scripts, an index, a values hash, a published event each) with the bare minimum a
// lock needs: SET NX PX and DEL. The goal is a ratio of at least 0.5.
func BenchmarkClaimRelease(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client(b)
	s, _ := newStore(b, c, Config{Timeout: 5 * time.Second})
	ctx := context.Background()
	ref := Ref{"bench", "ApprovalRequest", "r-1"}
	key := "raw:{bench}:r-1"
	var storeT, rawT time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first, so neither always meets a warmer cache.
		first, second := func() { storeT += timeIt(func() { claimRelease(b, s, ctx, ref) }) },
			func() { rawT += timeIt(func() { rawSetDel(b, c, ctx, key) }) }
		if i%2 == 1 {
			first, second = second, first
		}
		first()
		second()
	}
	b.ReportMetric(float64(storeT.Nanoseconds())/float64(b.N), "store-ns/op")
	b.ReportMetric(float64(rawT.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(rawT)/float64(storeT), "store/raw-rate")
}

func claimRelease(b *testing.B, s *Store, ctx context.Context, ref Ref) {
	if r, _ := s.Claim(ctx, ref, ada, ""); r.Outcome != protocol.OutcomeAcquired {
		b.Fatalf("claim: %s", r.Outcome)
	}
	if r, _ := s.Release(ctx, ref, ada, ""); r.Outcome != protocol.OutcomeReleased {
		b.Fatalf("release: %s", r.Outcome)
	}
}

func rawSetDel(b *testing.B, c redis.UniversalClient, ctx context.Context, key string) {
	if ok, err := c.SetNX(ctx, key, `{"holderOid":"u-ada"}`, 5*time.Minute).Result(); err != nil || !ok {
		b.Fatalf("SET NX: %v %v", ok, err)
	}
	if err := c.Del(ctx, key).Err(); err != nil {
		b.Fatal(err)
	}
}

func timeIt(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// BenchmarkListByType compares listing a type's locks by its index (3 live locks:
// prune, range, one MGET) with the seed's first design, one MGET of every uid on the
// grid's page, at pages of 200, 2,000 and 10,000 rows. By type stays flat as pages
// grow; the goal is at least 10x at 10,000 rows.
func BenchmarkListByType(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client(b)
	s, _ := newStore(b, c, Config{Timeout: 5 * time.Second})
	ctx := context.Background()
	const tenant = "bench"
	for i := range 3 {
		if r, _ := s.Claim(ctx, Ref{tenant, "ApprovalRequest", fmt.Sprintf("r-%d", 1000+i*7)}, ada, ""); r.Outcome != protocol.OutcomeAcquired {
			b.Fatal(r.Outcome)
		}
	}
	for _, rows := range []int{200, 2000, 10000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			page := make([]string, rows)
			for i := range page {
				page[i] = LockKey(Ref{tenant, "ApprovalRequest", fmt.Sprintf("r-%d", 1000+i)})
			}
			// Alternate in blocks, not call by call: a 10,000-key MGET leaves the caches
			// of this small machine cold for the call right after it, which would bill
			// the baseline's cost to the by-type read (measured: 130 µs becomes 390 µs).
			const block = 25
			var byType, perRow time.Duration
			var nBy, nRow float64
			for i := 0; b.Loop(); i++ {
				if (i/block)%2 == 0 {
					nBy++
					byType += timeIt(func() {
						if l, _ := s.List(ctx, tenant, "ApprovalRequest"); len(l) != 3 {
							b.Fatalf("List = %d locks", len(l))
						}
					})
					continue
				}
				nRow++
				perRow += timeIt(func() {
					vals, err := c.MGet(ctx, page...).Result()
					if err != nil || len(vals) != rows {
						b.Fatal(err)
					}
					if n := countLocks(vals); n != 3 {
						b.Fatalf("MGET found %d locks", n)
					}
				})
			}
			perBy, perPage := float64(byType.Nanoseconds())/nBy, float64(perRow.Nanoseconds())/nRow
			b.ReportMetric(perBy, "bytype-ns/op")
			b.ReportMetric(perPage, "mget-page-ns/op")
			b.ReportMetric(perPage/perBy, "speedup")
		})
	}
}

// countLocks decodes what a page MGET found, as the seed's grid did.
func countLocks(vals []any) int {
	n := 0
	for _, v := range vals {
		if str, ok := v.(string); ok {
			if _, err := decodeLock(str); err == nil {
				n++
			}
		}
	}
	return n
}
