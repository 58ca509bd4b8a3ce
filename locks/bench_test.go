package locks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
	s, _ := newStore(b, c, benchConfig(5*time.Second))
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

// benchConfig is a store's Config for benchmarks: one person makes every change of a
// benchmark, which the fair share (PROTOCOL.md §4) would refuse past 200 locks and 200
// changes; its counting is still done, and measured.
func benchConfig(timeout time.Duration) Config {
	return Config{Timeout: timeout, MaxLocksPerPerson: 1 << 30, MaxLocksPerTenant: 1 << 30, MaxChangesPerPerson: 1e9, ChangesBurst: 1 << 30}
}

func claimRelease(b *testing.B, s *Store, ctx context.Context, ref Ref) {
	if r, _ := s.Locks.Claim(ctx, ref, ada, ""); r.Outcome != protocol.OutcomeAcquired {
		b.Fatalf("claim: %s", r.Outcome)
	}
	if r, _ := s.Locks.Release(ctx, ref, ada, ""); r.Outcome != protocol.OutcomeReleased {
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
	s, _ := newStore(b, c, benchConfig(5*time.Second))
	ctx := context.Background()
	const tenant = "bench"
	for i := range 3 {
		if r, _ := s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", fmt.Sprintf("r-%d", 1000+i*7)}, ada, ""); r.Outcome != protocol.OutcomeAcquired {
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
						if l, _ := s.Locks.List(ctx, tenant, "ApprovalRequest"); len(l) != 3 {
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

// BenchmarkSweep prices the sweep of one type (sweep.lua: every index member and every
// value copy compared with its live key, PROTOCOL.md §8) against List of the same
// locks, one snapshot read through the same script, at 10, 1,000 and 10,000 live
// locks claimed through the store. Three calls, interleaved in blocks:
//
//   - sweep: Sweep with nothing changed since the last one (every 0: never skipped);
//   - changed: Sweep after the .NET scripts released 1% of the locks (at least one) and
//     claimed them for another holder, so it announces that many TakenOver; the
//     changes are made with the timer stopped, and each sweep is checked to announce
//     exactly them;
//   - list: List, the baseline;
//   - snapshot: ListJSON, a watch's snapshot read (list.lua: the same range and MGET,
//     with nothing compared, announced or written).
//
// Each reports its mean ns/op and, from INFO commandstats, the EVALSHA time Redis
// spent on it (redis-us/op): the rest is the round trip and decoding in Go.
func BenchmarkSweep(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client(b)
	s, _ := newStore(b, c, benchConfig(10*time.Second))
	ctx := context.Background()
	const typ = "ApprovalRequest"
	release, claim := redis.NewScript(redistest.DotNetReleaseScript), redis.NewScript(redistest.DotNetClaimScript)
	for _, sc := range []*redis.Script{release, claim} {
		if err := sc.Load(ctx, c).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			tenant := fmt.Sprintf("sweep-%d-%d", n, time.Now().UnixNano())
			claimMany(b, s, tenant, typ, n)
			if l, err := s.Locks.List(ctx, tenant, typ); err != nil || len(l) != n {
				b.Fatalf("List = %d locks, %v; want %d", len(l), err, n)
			}
			holders := make([]protocol.Holder, n) // who holds lock i now
			for i := range holders {
				holders[i] = ada
			}
			k := max(1, n/100)
			next := 0 // the first lock the next change moves
			// change moves k locks to their other holder with the .NET scripts, in one
			// pipeline: release as the holder, claim as the other.
			change := func() {
				pipe := c.Pipeline()
				var cmds []*redis.Cmd
				for range k {
					i := next
					next = (next + 1) % n
					uid := fmt.Sprintf("r-%d", i)
					lock, index := redistest.DotNetKeys(tenant, typ, uid)
					to := edsger
					if holders[i] == edsger {
						to = ada
					}
					now := time.Now()
					lease := 5 * time.Minute
					v := redistest.DotNetValue(typ, uid, to.OID, to.Name, now, now.Add(lease))
					cmds = append(cmds,
						release.EvalSha(ctx, pipe, []string{lock, index}, holders[i].OID),
						claim.EvalSha(ctx, pipe, []string{lock, index}, v, lease.Milliseconds(), now.Add(lease).UnixMilli()))
					holders[i] = to
				}
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
				for _, cmd := range cmds {
					if n, err := cmd.Int(); err != nil || n != 1 {
						b.Fatalf(".NET script %v = %d, %v", cmd.Args(), n, err)
					}
				}
			}
			sweep := func() {
				if err := s.Locks.Sweep(ctx, tenant, typ, 0); err != nil {
					b.Fatal(err)
				}
			}
			list := func() {
				if l, _ := s.Locks.List(ctx, tenant, typ); len(l) != n {
					b.Fatalf("List = %d locks, want %d", len(l), n)
				}
			}
			snapshot := func() {
				if j, err := s.Locks.ListJSON(ctx, tenant, typ); err != nil || len(j) < 2+n*100 {
					b.Fatalf("ListJSON = %d bytes, %v; want %d locks", len(j), err, n)
				}
			}
			sweep() // take in anything the claims left to catch up

			// Blocks, not call by call, as in BenchmarkListByType: a 10,000-lock script
			// leaves the caches cold for whatever runs right after it.
			const block = 5
			var t [4]time.Duration
			var redisUs [4]float64
			var runs [4]float64
			for i := 0; b.Loop(); i++ {
				kind := (i / block) % 4
				b.StopTimer()
				if kind == 1 {
					change()
				}
				before := foreignChanges(s)
				us := evalshaUsec(b, c)
				b.StartTimer()
				t[kind] += timeIt([]func(){sweep, sweep, list, snapshot}[kind])
				b.StopTimer()
				redisUs[kind] += evalshaUsec(b, c) - us
				runs[kind]++
				want := 0.0
				if kind == 1 {
					want = float64(k)
				}
				if got := foreignChanges(s) - before; got != want {
					b.Fatalf("call %d (kind %d) announced %v changes, want %v", i, kind, got, want)
				}
				b.StartTimer()
			}
			if runs[3] == 0 {
				b.Fatalf("too few iterations (%d) to interleave: raise -benchtime", b.N)
			}
			per := func(kind int) float64 { return float64(t[kind].Nanoseconds()) / runs[kind] }
			b.ReportMetric(per(0), "sweep-ns/op")
			b.ReportMetric(per(1), "changed-ns/op")
			b.ReportMetric(per(2), "list-ns/op")
			b.ReportMetric(per(0)/per(2), "sweep/list")
			b.ReportMetric(per(1)/per(2), "changed/list")
			b.ReportMetric(per(3), "snapshot-ns/op")
			b.ReportMetric(per(3)/per(2), "snapshot/list")
			b.ReportMetric(redisUs[0]/runs[0], "sweep-redis-us/op")
			b.ReportMetric(redisUs[1]/runs[1], "changed-redis-us/op")
			b.ReportMetric(redisUs[2]/runs[2], "list-redis-us/op")
			b.ReportMetric(redisUs[3]/runs[3], "snapshot-redis-us/op")
		})
	}
}

// claimMany claims r-0 … r-(n-1) of a type for Ada through the store, a few at a
// time.
func claimMany(b *testing.B, s *Store, tenant, typ string, n int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if r, err := s.Locks.Claim(ctx, Ref{tenant, typ, fmt.Sprintf("r-%d", i)}, ada, ""); err != nil || r.Outcome != protocol.OutcomeAcquired {
				errs <- fmt.Errorf("claim r-%d: %s, %v", i, r.Outcome, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// foreignChanges is how many changes of other programs the store has announced.
func foreignChanges(s *Store) float64 {
	var sum float64
	for _, op := range []protocol.Op{protocol.OpAcquired, protocol.OpRenewed, protocol.OpTakenOver, protocol.OpReleased} {
		sum += testutil.ToFloat64(s.core.met.foreign.WithLabelValues(string(op)))
	}
	return sum
}

// evalshaUsec is the total time Redis has spent in EVALSHA (INFO commandstats), µs.
func evalshaUsec(b *testing.B, c redis.UniversalClient) float64 {
	_, usec := evalshaStats(b, c)
	return usec
}

// evalshaStats are the calls of EVALSHA and the time Redis spent in them, µs, since
// the server started or its last CONFIG RESETSTAT (INFO commandstats).
func evalshaStats(b *testing.B, c redis.UniversalClient) (calls, usec float64) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	// cmdstat_evalsha:calls=12,usec=345,usec_per_call=28.75,...
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(strings.TrimSpace(rest), ",") {
			k, v, _ := strings.Cut(field, "=")
			if k != "calls" && k != "usec" {
				continue
			}
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			if k == "calls" {
				calls = n
			} else {
				usec = n
			}
		}
	}
	return calls, usec
}
