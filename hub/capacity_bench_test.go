//go:build linux

package hub

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// The capacity plan's unit costs and its two assumptions (cmd/lockbench/CAPACITY.md,
// issue 26 item 4). CPU is counted, not timed: the process's CPU time (getrusage) and
// redis-server's (INFO cpu), so that what else the shared machine runs matters less.
// The hub and its clients share this process: every hub figure here is hub and
// clients together, an upper bound of the hub's own.

// BenchmarkCapacityClaim prices one claim and one release over a socket, with one
// watcher of the type on the hub so that each change is published, received from the
// feed and delivered once, as in production; against the same two calls made directly
// on the store, interleaved in blocks on one real redis-server. It reports, per
// claim+release pair:
//   - cpu-us/socket-pair: this process's CPU (hub, client, the one delivery);
//   - cpu-us/direct-pair: the same for the store's calls alone (go-redis, no socket);
//   - redis-cpu-us/pair: redis-server's CPU (INFO cpu) over the socket pairs, and
//     script-us/claim, script-us/release its time inside the scripts
//     (INFO commandstats), the rest being the network and the published message.
//
// Run by hand:
//
//	go test -run '^$' -bench CapacityClaim -benchtime 4000x -count 3 ./hub/
func BenchmarkCapacityClaim(b *testing.B) {
	th, srv := startReal(b, hubOptions{hub: func(c *Config) { c.RateLimit, c.RateBurst = 1e9, 1e9 },
		store: func(c *locks.Config) { c.MaxChangesPerPerson, c.ChangesBurst = 1e9, 1<<30 }})
	rc := srv.Client(b)
	ctx := context.Background()
	c, _ := th.dial("acme", "u-bench")
	w := dialTailWatcher(b, th, "u-watcher")
	var got atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, m, err := w.ws.Read(ctx)
			if err != nil {
				return
			}
			if bytes.HasPrefix(m, []byte(`{"type":"lock"`)) {
				got.Add(1)
			}
		}
	}()
	defer func() { _ = w.ws.CloseNow(); <-done }()
	h := protocol.Holder{OID: "u-direct", Name: "Direct"}
	ref := locks.Ref{Tenant: "acme", Type: typ, UID: "b-direct"}
	direct := func() {
		if r, _ := th.store.Locks.Claim(ctx, ref, h, ""); r.Outcome != protocol.OutcomeAcquired {
			b.Fatalf("direct claim: %s", r.Outcome)
		}
		if r, _ := th.store.Locks.Release(ctx, ref, h, ""); r.Outcome != protocol.OutcomeReleased {
			b.Fatalf("direct release: %s", r.Outcome)
		}
	}
	var claimUs, releaseUs float64
	socket := func() {
		u0 := scriptUsec(b, rc)
		if r, err := c.Claim(ctx, typ, "b-socket"); err != nil || r.Outcome != protocol.OutcomeAcquired {
			b.Fatalf("socket claim: %v %v", r.Outcome, err)
		}
		u1 := scriptUsec(b, rc)
		if r, err := c.Release(ctx, typ, "b-socket"); err != nil || r.Outcome != protocol.OutcomeReleased {
			b.Fatalf("socket release: %v %v", r.Outcome, err)
		}
		claimUs += u1 - u0
		releaseUs += scriptUsec(b, rc) - u1
	}
	// Blocks of pairs, the counters read around each block: INFO on every call would
	// bill its own cost to the pair.
	const block = 100
	var cpu [2]time.Duration
	var n [2]float64
	var redisCPU time.Duration
	var sockets float64 // socket pairs whose script times were read
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		kind := (i / block) % 2
		if i%block != 0 {
			continue
		}
		r0, c0 := redisServerCPU(b, rc), procCPU(b)
		for range block {
			if kind == 0 {
				direct()
			} else {
				socketPair(b, ctx, c) // bare: the block's CPU is the pairs'
			}
		}
		c1, r1 := procCPU(b), redisServerCPU(b, rc)
		cpu[kind] += c1 - c0
		n[kind] += block
		if kind == 1 {
			redisCPU += r1 - r0
			socket() // one more pair, timed inside Redis (INFO around each call)
			sockets++
		}
	}
	b.StopTimer()
	if n[1] == 0 {
		b.Fatalf("too few iterations (%d) for two blocks of %d: raise -benchtime", b.N, block)
	}
	// Every pair's two changes, direct or over the socket, reached the watcher.
	want := int64(2 * (n[0] + n[1] + sockets))
	redistest.Eventually(b, "the watcher to get every change", func() bool { return got.Load() >= want })
	per := func(d time.Duration, k float64) float64 { return float64(d.Nanoseconds()) / k / 1e3 }
	b.ReportMetric(per(cpu[1], n[1]), "cpu-us/socket-pair")
	b.ReportMetric(per(cpu[0], n[0]), "cpu-us/direct-pair")
	b.ReportMetric(per(redisCPU, n[1]), "redis-cpu-us/pair")
	b.ReportMetric(claimUs/sockets, "script-us/claim")
	b.ReportMetric(releaseUs/sockets, "script-us/release")
}

// socketPair claims and releases b-socket over c.
func socketPair(b *testing.B, ctx context.Context, c *protocol.Client) {
	if r, err := c.Claim(ctx, typ, "b-socket"); err != nil || r.Outcome != protocol.OutcomeAcquired {
		b.Fatalf("socket claim: %v %v", r.Outcome, err)
	}
	if r, err := c.Release(ctx, typ, "b-socket"); err != nil || r.Outcome != protocol.OutcomeReleased {
		b.Fatalf("socket release: %v %v", r.Outcome, err)
	}
}

// BenchmarkClusterFanout checks the capacity plan's two assumptions on a real 6-node
// Redis Cluster (3 masters), with every hub instance in this process, each with a
// cluster client of its own:
//
//  1. Fan-out cost per instance stays flat as instances are added. Each case runs
//     hub instances with the given watchers each of one type of tenant acme; b.N
//     changes of acme (a claim or a release through the store, the real scripts and
//     SPUBLISH) are made one after the other, each once every watcher got the last.
//     cpu-ns/delivery is this process's CPU (hubs and clients) per delivered frame:
//     flat means instances=4 about equal to instances=1. instances=4,watched-on=1
//     has watchers on one instance only: what the other three pay for events they
//     only receive (every instance subscribes to every slot's channel) shows as
//     its cpu-ns/delivery above instances=1's.
//  2. A tenant's events cost only its own shard. Each master's CPU (INFO cpu) over
//     the changes, per change: own-us/change for the master of acme's slot,
//     other1-us/change and other2-us/change for the other two; and each of the
//     three over an idle window as long as the changes took (idle-own-us/change …),
//     the noise floor of a master that serves nobody (cluster bus, cron).
//
// idle-cpu-ns/delivery is this process's own CPU over that idle window per delivery
// of the run: the instances' background work (heartbeats, sweeps), already included
// in cpu-ns/delivery.
//
// Heavy (a cluster and up to 800 sockets): it is not run by go test, only with -bench.
//
//	go test -run '^$' -bench ClusterFanout -benchtime 300x -count 3 ./hub/
func BenchmarkClusterFanout(b *testing.B) {
	const (
		tenant   = "acme"
		watchers = 200
	)
	cl := redistest.StartCluster(b)
	slot := redistest.Slot(locks.LockKey(locks.Ref{Tenant: tenant, Type: typ, UID: "x"}))
	own := cl.MasterForSlot(b, slot)
	masters := []string{own} // the tenant's master first, then the others
	for _, a := range cl.MasterAddrs() {
		if a != own {
			masters = append(masters, a)
		}
	}
	admins := make([]*redis.Client, len(masters))
	for i, a := range masters {
		admins[i] = redis.NewClient(&redis.Options{Addr: a})
		b.Cleanup(func() { _ = admins[i].Close() })
	}
	mastersCPU := func() []time.Duration {
		out := make([]time.Duration, len(admins))
		for i, c := range admins {
			out[i] = redisServerCPU(b, c)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		watchers []int // per instance
	}{
		{"instances=1", []int{watchers}},
		{"instances=4", []int{watchers, watchers, watchers, watchers}},
		{"instances=4,watched-on=1", []int{watchers, 0, 0, 0}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dev, err := auth.NewDev(auth.DevConfig{})
			if err != nil {
				b.Fatal(err)
			}
			opts := hubOptions{dev: dev,
				// The production sweep interval: the test helpers' 50 ms would bill
				// twenty sweeps a second to every delivery.
				hub:   func(c *Config) { c.SweepInterval = DefaultSweepInterval },
				store: func(c *locks.Config) { c.MaxChangesPerPerson, c.ChangesBurst = 1e9, 1<<30 }}
			hubs := make([]*testHub, len(tc.watchers))
			for i := range hubs {
				hubs[i] = startHub(b, cl.Client(b), opts)
				hubs[i].waitFeed(tenant)
			}
			total := int64(0)
			for _, n := range tc.watchers {
				total += int64(n)
			}
			var received atomic.Int64
			allIn := make(chan struct{}, 1)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var sockets []*tailWatcher
			defer func() {
				cancel()
				for _, w := range sockets {
					_ = w.ws.CloseNow()
				}
				wg.Wait()
			}()
			for i, th := range hubs {
				for j := range tc.watchers[i] {
					w := dialTailWatcher(b, th, fmt.Sprintf("u-%d-%d", i, j))
					sockets = append(sockets, w)
					wg.Go(func() {
						for {
							_, m, err := w.ws.Read(ctx)
							if err != nil {
								return
							}
							if bytes.HasPrefix(m, []byte(`{"type":"lock"`)) && received.Add(1) == total {
								allIn <- struct{}{}
							}
						}
					})
				}
			}
			holder := protocol.Holder{OID: "u-writer", Name: "Writer"}
			// An entity of its own: the last run may have left its lock held.
			ref := locks.Ref{Tenant: tenant, Type: typ, UID: fmt.Sprintf("cap-%d", time.Now().UnixNano())}
			change := func(i int) {
				received.Store(0)
				var r locks.Result
				var err error
				if i%2 == 0 {
					r, err = hubs[0].store.Locks.Claim(ctx, ref, holder, "")
				} else {
					r, err = hubs[0].store.Locks.Release(ctx, ref, holder, "")
				}
				if err != nil || (r.Outcome != protocol.OutcomeAcquired && r.Outcome != protocol.OutcomeReleased) {
					b.Fatalf("change %d: %s, %v", i, r.Outcome, err)
				}
				select {
				case <-allIn:
				case <-time.After(30 * time.Second):
					b.Fatalf("change %d: %d of %d watchers received it", i, received.Load(), total)
				}
			}
			change(0) // one round before the count: the first change warms every path
			start := 1
			b.ResetTimer()
			m0, c0, t0 := mastersCPU(), procCPU(b), time.Now()
			for i := 0; b.Loop(); i++ {
				change(start + i)
			}
			m1, c1, took := mastersCPU(), procCPU(b), time.Since(t0)
			b.StopTimer()
			// The idle window: as long as the changes took (at most 20 s), nothing sent.
			idle := min(took, 20*time.Second)
			m2, c2 := mastersCPU(), procCPU(b)
			select {
			case <-time.After(idle):
			case <-b.Context().Done():
			}
			m3, c3 := mastersCPU(), procCPU(b)

			deliveries := float64(b.N) * float64(total)
			b.ReportMetric(float64((c1-c0).Nanoseconds())/deliveries, "cpu-ns/delivery")
			b.ReportMetric(float64((c3-c2).Nanoseconds())*float64(took)/float64(idle)/deliveries, "idle-cpu-ns/delivery")
			names := []string{"own", "other1", "other2"}
			for i := range masters {
				b.ReportMetric(float64((m1[i]-m0[i]).Microseconds())/float64(b.N), names[i]+"-us/change")
				b.ReportMetric(float64((m3[i]-m2[i]).Microseconds())*float64(took)/float64(idle)/float64(b.N), "idle-"+names[i]+"-us/change")
			}
		})
	}
}

// redisServerCPU is redis-server's CPU time so far, user and system (INFO cpu, to the
// microsecond).
func redisServerCPU(b *testing.B, c redis.UniversalClient) time.Duration {
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
		s, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("INFO cpu %s: %v", line, err)
		}
		sum += time.Duration(s * 1e9)
	}
	if sum == 0 {
		b.Fatalf("INFO cpu has no used_cpu_sys, used_cpu_user: %q", info)
	}
	return sum
}

// scriptUsec is the time redis-server has spent in EVALSHA and EVAL so far, µs
// (INFO commandstats).
func scriptUsec(b *testing.B, c redis.UniversalClient) float64 {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for line := range strings.Lines(info) {
		k, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !slices.Contains([]string{"cmdstat_evalsha", "cmdstat_eval"}, k) {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "usec="); ok {
				u, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO commandstats %s: %v", line, err)
				}
				sum += u
			}
		}
	}
	return sum
}

// BenchmarkCapacityReceive prices what an instance pays for a change it receives from
// the feed and delivers to nobody. lockhub's scripts publish every change, watched or
// not, and every instance subscribes to every channel (every slot's, on a cluster), so
// each pays this for every change of the deployment, however few of its sockets watch.
// The same changes (a claim and a release of a type nobody watches) are made through
// two stores in blocks, interleaved: one on the hub's redis-server, whose feed the hub
// subscribes to, and one on a second redis-server nobody subscribes to. It reports,
// per change:
//
//   - cpu-us/received: this process's CPU for a change on the hub's Redis less one on
//     the other: receiving, parsing and dropping the message;
//   - redis-cpu-us/published: the hub's redis-server's CPU (INFO cpu) per change less
//     the other's: sending the message to one subscriber;
//   - cpu-us/change, redis-cpu-us/change: the unsubscribed store's figures, a change
//     on both sides with nobody listening.
//
// Run by hand:
//
//	go test -run '^$' -bench CapacityReceive -benchtime 4000x -count 3 ./hub/
func BenchmarkCapacityReceive(b *testing.B) {
	lift := func(c *locks.Config) { c.MaxChangesPerPerson, c.ChangesBurst = 1e9, 1<<30 }
	th, srv := startReal(b, hubOptions{store: lift})
	th.waitFeed("acme")
	other := redistest.StartServer(b)
	reg, _ := locks.NewRegistry(typ)
	cfg := locks.Config{Client: other.Client(b), Registry: reg, Timeout: 2 * time.Second}
	lift(&cfg)
	unheard, err := locks.NewStore(cfg)
	if err != nil {
		b.Fatal(err)
	}
	rcs := [2]redis.UniversalClient{other.Client(b), srv.Client(b)}
	ctx := context.Background()
	for i, want := range []int{0, 1} { // nobody listens to the other; the hub to its own
		if n, err := rcs[i].PubSubChannels(ctx, "lockhub:ev:*").Result(); err != nil || (len(n) > 0) != (want == 1) {
			b.Fatalf("redis-server %d has subscribed channels %v (%v)", i, n, err)
		}
	}
	stores := [2]*locks.Store{unheard, th.store}
	h := protocol.Holder{OID: "u-writer", Name: "Writer"}
	ref := locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}
	pair := func(s *locks.Store) {
		if r, _ := s.Locks.Claim(ctx, ref, h, ""); r.Outcome != protocol.OutcomeAcquired {
			b.Fatalf("claim: %s", r.Outcome)
		}
		if r, _ := s.Locks.Release(ctx, ref, h, ""); r.Outcome != protocol.OutcomeReleased {
			b.Fatalf("release: %s", r.Outcome)
		}
	}
	const block = 100
	pub0 := commandCalls(b, rcs[1], "publish")
	var cpu, rcpu [2]time.Duration
	var n [2]float64
	for i := 0; b.Loop(); i++ {
		if i%block != 0 {
			continue
		}
		kind := (i / block) % 2
		r0, c0 := redisServerCPU(b, rcs[kind]), procCPU(b)
		for range block {
			pair(stores[kind])
		}
		c1, r1 := procCPU(b), redisServerCPU(b, rcs[kind])
		cpu[kind] += c1 - c0
		rcpu[kind] += r1 - r0
		n[kind] += 2 * block
	}
	if n[1] == 0 {
		b.Fatalf("too few iterations (%d) for two blocks of %d: raise -benchtime", b.N, block)
	}
	// Every change on the hub's Redis was published: what the hub received.
	if pub := commandCalls(b, rcs[1], "publish") - pub0; pub != n[1] {
		b.Fatalf("%v messages published on the hub's Redis, want %v", pub, n[1])
	}
	per := func(d time.Duration, k float64) float64 { return float64(d.Nanoseconds()) / k / 1e3 }
	b.ReportMetric(per(cpu[1], n[1])-per(cpu[0], n[0]), "cpu-us/received")
	b.ReportMetric(per(rcpu[1], n[1])-per(rcpu[0], n[0]), "redis-cpu-us/published")
	b.ReportMetric(per(cpu[0], n[0]), "cpu-us/change")
	b.ReportMetric(per(rcpu[0], n[0]), "redis-cpu-us/change")
}

// commandCalls is how many times redis-server has run cmd (lower case), scripts'
// calls included (INFO commandstats).
func commandCalls(b *testing.B, c redis.UniversalClient, cmd string) float64 {
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
