package locks

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// The capacity plan's Redis costs (cmd/lockbench/CAPACITY.md, issue 26 item 4), on a
// real redis-server. CPU is counted, not timed: redis-server's CPU (INFO cpu) and its
// time inside the scripts (INFO commandstats), so that what else the shared machine
// runs matters less. The claim's Redis cost, with its published message received by a
// hub, is hub's BenchmarkCapacityClaim.

// BenchmarkCapacitySweep prices the sweep of a quiet type (nothing changed since the
// last sweep, the steady state of a watched type) of 20, 1,000 and 20,000 live locks,
// once a second per watched type for the whole deployment, and the call of every
// other instance that finds the type swept just now and skips it. Each iteration
// clears the mark of the last sweep (untimed), sweeps as an instance's tick does
// (every = the default interval: a full sweep that sets the mark), then sweeps again
// (skipped on the mark). It reports, per sweep:
//   - redis-cpu-us/sweep: redis-server's CPU (INFO cpu) over the full sweeps;
//   - script-us/sweep, script-us/skip: the time inside the scripts (INFO commandstats);
//   - calls/sweep: the script calls a full sweep made (windows of sweepWindow);
//   - ns/sweep: the full sweep's wall time in Go, round trips included.
//
// Run by hand:
//
//	go test -run '^$' -bench CapacitySweep -benchtime 100x -count 3 ./locks/
func BenchmarkCapacitySweep(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client(b)
	s, _ := newStore(b, c, benchConfig(10*time.Second))
	ctx := context.Background()
	const typ = "ApprovalRequest"
	for _, n := range []int{20, 1000, 20000} {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			tenant := fmt.Sprintf("sweep-%d-%d", n, time.Now().UnixNano())
			claimMany(b, s, tenant, typ, n)
			if err := s.Locks.Sweep(ctx, tenant, typ, 0); err != nil { // the claims' catching up
				b.Fatal(err)
			}
			every := time.Second
			var full, skip, wall time.Duration
			var fullUs, skipUs, calls float64
			for b.Loop() {
				b.StopTimer()
				if err := c.Del(ctx, sweepKey(tenant, typ)).Err(); err != nil {
					b.Fatal(err)
				}
				h0 := commandCalls(b, c, "hlen")
				n0, u0 := evalshaStats(b, c)
				r0 := serverCPU(b, c)
				b.StartTimer()
				wall += timeIt(func() {
					if err := s.Locks.Sweep(ctx, tenant, typ, every); err != nil {
						b.Fatal(err)
					}
				})
				b.StopTimer()
				r1 := serverCPU(b, c)
				n1, u1 := evalshaStats(b, c)
				h1 := commandCalls(b, c, "hlen")
				rs := serverCPU(b, c) // the skip's count starts here, after the INFO commandstats
				if err := s.Locks.Sweep(ctx, tenant, typ, every); err != nil {
					b.Fatal(err)
				}
				r2 := serverCPU(b, c)
				n2, u2 := evalshaStats(b, c)
				b.StartTimer()
				// A sweep that looks at the type reads its values hash's length (sweep.lua);
				// one that finds the mark returns before.
				if h := commandCalls(b, c, "hlen"); n2-n1 != 1 || h != h1 || h1 == h0 {
					b.Fatalf("the sweep made %v HLEN; the one right after it %v script calls and %v HLEN, want 1 and 0 (skipped)",
						h1-h0, n2-n1, h-h1)
				}
				full += r1 - r0
				skip += r2 - rs
				fullUs += u1 - u0
				skipUs += u2 - u1
				calls += n1 - n0
			}
			if foreign := foreignChanges(s); foreign != 0 {
				b.Fatalf("a quiet type's sweeps announced %v changes", foreign)
			}
			k := float64(b.N)
			// Each count includes one INFO cpu of its own reading: take it off.
			info := infoCost(b, c)
			b.ReportMetric(float64((full-info*time.Duration(b.N)).Microseconds())/k, "redis-cpu-us/sweep")
			b.ReportMetric(float64((skip-info*time.Duration(b.N)).Microseconds())/k, "redis-cpu-us/skip")
			b.ReportMetric(float64(info.Nanoseconds())/1e3, "redis-cpu-us/info")
			b.ReportMetric(fullUs/k, "script-us/sweep")
			b.ReportMetric(skipUs/k, "script-us/skip")
			b.ReportMetric(calls/k, "calls/sweep")
			b.ReportMetric(float64(wall.Nanoseconds())/k, "ns/sweep")
		})
	}
}

// BenchmarkCapacityMemory measures Redis's memory per live lock and per audit entry:
// capMemLocks locks of one type claimed through the store by capMemPeople people
// (capMemLocks/capMemPeople each, within the contract's 200), each claim naming its
// socket as the hub's does, so every key a live lock keeps is there: the lock, its
// index entry, the value copy and the seen score, the person's index and bucket, the
// socket set. It reports:
//   - bytes/lock: used_memory grown by the claims, less the audit stream, per lock;
//   - bytes/audit-entry: the audit stream's MEMORY USAGE over its entries (one per
//     claim);
//   - <kind>-bytes/lock: each kind of key's MEMORY USAGE, summed, per lock (the rest
//     of bytes/lock is Redis's per-key overhead in its main dictionary and expires
//     table).
//
// One iteration is the whole measurement; -benchtime 1x, -count for a spread.
//
//	go test -run '^$' -bench CapacityMemory -benchtime 1x -count 3 ./locks/
func BenchmarkCapacityMemory(b *testing.B) {
	const (
		capMemLocks  = 20000
		capMemPeople = 200
		typ          = "ApprovalRequest"
	)
	srv := redistest.StartServer(b)
	c := srv.Client(b)
	s, _ := newStore(b, c, benchConfig(10*time.Second))
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		tenant := fmt.Sprintf("mem-%d", i)
		before := usedMemory(b, c)
		var wg sync.WaitGroup
		errs := make(chan error, capMemLocks)
		sem := make(chan struct{}, 32)
		for j := range capMemLocks {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				p := j % capMemPeople
				h := protocol.Holder{OID: fmt.Sprintf("00000000-0000-0000-0000-%012d", p), Name: fmt.Sprintf("Person Number %d", p)}
				conn := fmt.Sprintf("c-%026d", p) // as long as a real connection id
				ref := Ref{tenant, typ, fmt.Sprintf("%08d-0000-0000-0000-000000000000", j)}
				if r, err := s.Locks.Claim(ctx, ref, h, conn); err != nil || r.Outcome != protocol.OutcomeAcquired {
					errs <- fmt.Errorf("claim %d: %s, %v", j, r.Outcome, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		grown := usedMemory(b, c) - before
		b.StopTimer()
		kinds := memoryByKind(b, c, tenant)
		entries, err := c.XLen(ctx, AuditKey(tenant)).Result()
		if err != nil || entries != capMemLocks {
			b.Fatalf("the audit stream holds %d entries (%v), want %d", entries, err, capMemLocks)
		}
		audit := kinds["lockaudit"]
		b.ReportMetric(float64(grown-audit)/capMemLocks, "bytes/lock")
		b.ReportMetric(float64(audit)/float64(entries), "bytes/audit-entry")
		for k, v := range kinds {
			if k != "lockaudit" {
				b.ReportMetric(float64(v)/capMemLocks, k+"-bytes/lock")
			}
		}
		if err := c.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// memoryByKind sums MEMORY USAGE (every element counted: SAMPLES 0) of a tenant's
// keys by kind, the key's name up to its first ':'. A benchmark's census, with SCAN.
func memoryByKind(b *testing.B, c *redis.Client, tenant string) map[string]int64 {
	ctx := context.Background()
	out := map[string]int64{}
	iter := c.Scan(ctx, 0, "*{"+tenant+"}*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		n, err := c.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		kind, _, _ := strings.Cut(key, ":")
		out[kind] += n
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// commandCalls is how many times redis-server has run cmd (lower case), scripts'
// calls included (INFO commandstats).
func commandCalls(b testing.TB, c redis.UniversalClient, cmd string) float64 {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO commandstats %s: %v", line, err)
				}
				return n
			}
		}
	}
	return 0
}

// infoCost is what redis-server's CPU count grows by between two readings with
// nothing else sent: the cost of one INFO cpu, the median of 21.
func infoCost(b *testing.B, c redis.UniversalClient) time.Duration {
	b.Helper()
	var d []time.Duration
	for range 21 {
		r0 := serverCPU(b, c)
		d = append(d, serverCPU(b, c)-r0)
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// serverCPU is redis-server's CPU time so far, user and system (INFO cpu, to the
// microsecond).
func serverCPU(b *testing.B, c redis.UniversalClient) time.Duration {
	b.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("INFO cpu %s: %v", line, err)
		}
		sum += time.Duration(f * 1e9)
	}
	if sum == 0 {
		b.Fatalf("INFO cpu has no used_cpu_sys, used_cpu_user: %q", info)
	}
	return sum
}
