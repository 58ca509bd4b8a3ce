package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// -mode share: the fair share of PROTOCOL.md §4 under the load it is for (ISSUE 25). A
// big tenant holds its quota of locks (-share-locks, all of one type, written as the
// .NET API writes them) and its people (-share-people, one socket and HTTP each) send
// every request the limits allow: watches (a snapshot of every lock), mine, the
// console's list, list by type over HTTP, and claims. Beside it a small tenant's people
// claim and release. The run measures the small tenant's claims alone, then under the
// big tenant's load, on one in-process hub with every limit at its default, and reports:
//
//   - the longest command lockhub sent to Redis, as SLOWLOG measures it (goal: at most
//     5 ms), and the slowest kinds of command;
//   - Redis's CPU a second (INFO cpu), alone and under load;
//   - the small tenant's claim p50/p99, alone and under load (goal: p99 at most 1.5×);
//   - beside each claim, the floor: a ping to the hub (no Redis) and an EXISTS straight
//     to Redis (no hub), alone and under load, so that what the machine adds to any
//     round trip under the load shows in the same run.

// Defaults and bounds of -mode share.
const (
	maxShareLocks  = 100000
	maxSharePeople = 64
	maxSharePairs  = 20
	// smallPeople claim and release in the small tenant, each a pair every
	// smallPairEvery: 4 changes a second each, under a person's 5; 320 claims a
	// phase of 10 s, so that the p99 is a percentile (the 4th slowest), not the
	// slowest of a handful.
	smallPeople    = 16
	smallPairEvery = 500 * time.Millisecond
	// slowlogFloor is the shortest command SLOWLOG records during the run, µs.
	slowlogFloor = 1000
)

var errShareRedis = errors.New("-mode share measures Redis itself (SLOWLOG, INFO): give -redis-url of a redis-server of its own")

// shareResult is what -mode share reports, as JSON too.
type shareResult struct {
	Locks  int      `json:"locks"`
	People int      `json:"people"`
	Kinds  []string `json:"kinds"` // what the big tenant's people send
	// HubFlags are the hub's flags beside its defaults (-hub-flags).
	HubFlags []string `json:"hubFlags,omitempty"`
	// Alone and Loaded pool every pair's phase of that kind.
	Alone    sharePhase `json:"alone"`
	Loaded   sharePhase `json:"loaded"`
	P99Ratio float64    `json:"p99Ratio"` // loaded p99 / alone p99, pooled
	// PingRatio and RedisRatio are the same for the round trips beside the claims
	// that do no lockhub work (smallResult): the floor the machine sets.
	PingRatio  float64     `json:"pingP99Ratio"`
	RedisRatio float64     `json:"redisP99Ratio"`
	Pairs      []sharePair `json:"pairs"`
	// CatchUpSeconds is how long the sweeper took to announce the locks written, once
	// their type was watched.
	CatchUpSeconds float64        `json:"catchUpSeconds"`
	Requests       map[string]int `json:"requests"` // of the big tenant's people, by kind
	Refused        map[string]int `json:"refused"`  // of those, refused by a limit, by code
	// The SLOWLOG of every phase (commands over slowlogFloor), with its floor.
	slowStats
	// fast is the commands the server flags fast (fastCommands).
	fast map[string]bool
}

// sharePhase is one phase of the run.
type sharePhase struct {
	Seconds   float64 `json:"seconds"`
	Claims    summary `json:"claims"`    // the small tenant's claim latency
	Pings     summary `json:"pings"`     // its pings to the hub (no Redis)
	Redis     summary `json:"redis"`     // its EXISTS straight to Redis (no hub)
	Unknown   int     `json:"unknown"`   // of its claims and releases, those that failed open
	RedisCPU  float64 `json:"redisCpu"`  // Redis's CPU seconds a second
	SlowestUs int64   `json:"slowestUs"` // the longest command SLOWLOG recorded
	FastUs    int64   `json:"fastUs"`    // the longest of those Redis flags fast: the floor
}

// sharePair is a phase alone and the phase under load after it.
type sharePair struct {
	Alone      summary `json:"alone"`
	Loaded     summary `json:"loaded"`
	P99Ratio   float64 `json:"p99Ratio"`
	PingRatio  float64 `json:"pingP99Ratio"`
	RedisRatio float64 `json:"redisP99Ratio"`
}

// slowKind is one kind of slow command: the command and, for a script, its first key's
// kind (lockidx:, lockmine:, ...), which names the script's concept.
type slowKind struct {
	Kind  string `json:"kind"`
	N     int    `json:"n"`
	MaxUs int64  `json:"maxUs"`
}

func (m *Main) runShare(ctx context.Context) error {
	o := m.opt
	rdb, err := locks.NewClient(o.redisURL, o.cluster)
	if err != nil {
		return err
	}
	defer rdb.Close()
	var extra []string
	if o.cluster {
		extra = append(extra, "--redis-cluster")
	}
	extra = append(extra, o.hubFlags...)
	ih, err := startHub(ctx, o.redisURL, o.entityType, true, extra...)
	if err != nil {
		return err
	}
	defer func() {
		if err := ih.stop(); err != nil {
			fmt.Fprintln(m.Stderr, "lockbench: stopping the hub:", err)
		}
	}()
	run := strings.ToLower(randText(6))
	big, small := "big-"+run, "small-"+run
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		// The worst case: the small tenant on the big one's shard, where the big
		// tenant's scripts run (another shard would not see them at all).
		if small, err = sameShard(ctx, cc, big, "small-"+run); err != nil {
			return err
		}
	}
	fmt.Fprintf(m.Stderr, "lockbench: writing %d locks of tenant %s as the .NET API does\n", o.shareLocks, big)
	if err := fillTenant(ctx, rdb, big, o.entityType, o.shareLocks); err != nil {
		return err
	}
	cl := &client{url: ih.url, tokenURL: ih.token, tenant: big, typ: o.entityType, http: &http.Client{Timeout: 30 * time.Second}}
	defer cl.http.CloseIdleConnections()
	scl := *cl
	scl.tenant = small

	res := shareResult{Locks: o.shareLocks, People: o.sharePeople, Kinds: o.loadKinds(), HubFlags: o.hubFlags, Requests: map[string]int{}, Refused: map[string]int{}}
	if res.fast, err = fastCommands(ctx, rdb); err != nil {
		return fmt.Errorf("COMMAND: %w", err)
	}
	// The big tenant's grid is open from here on: one socket watches its type, so the
	// sweeper announces the locks the .NET API wrote. Both phases measure after it has
	// caught up (a working day's writes are announced as they come); how long the
	// catch-up of a bulk write took is reported on its own.
	closeWatcher, caughtUp, err := settleTenant(ctx, ih, cl, o.shareLocks)
	if err != nil {
		return err
	}
	defer closeWatcher()
	res.CatchUpSeconds = caughtUp.Seconds()
	// Phases alone and under load alternate, so that a pair's ratio compares moments
	// of the machine close together, and the spread of the pairs shows.
	var alone, loaded []sharePhase
	var aloneLat, loadedLat smallResult
	for i := range o.sharePairs {
		fmt.Fprintf(m.Stderr, "lockbench: pair %d: the small tenant alone\n", i+1)
		a, lat, err := m.measurePhase(ctx, rdb, &scl, o.shareFor, &res)
		if err != nil {
			return fmt.Errorf("alone, pair %d: %w", i+1, err)
		}
		aloneLat = aloneLat.add(lat)
		load, err := m.startShareLoad(ctx, cl, o.sharePeople, res.Kinds)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stderr, "lockbench: pair %d: the small tenant under the big tenant's load\n", i+1)
		stopCPU := func() {}
		if o.cpuProfile != "" && i == 0 {
			stopCPU = startCPUProfile(m.Stderr, o.cpuProfile) // the hub's process: the first phase under load
		}
		stopTrace := func() {}
		if o.execTrace != "" && i == 0 {
			stopTrace = startTrace(m.Stderr, o.execTrace) // the same phase: the hub's goroutines' waits for a P
		}
		l, lat, err := m.measurePhase(ctx, rdb, &scl, o.shareFor, &res)
		stopCPU()
		stopTrace()
		if lerr := load.finish(&res); err == nil && lerr != nil {
			return fmt.Errorf("the big tenant's load: %w", lerr)
		}
		if err != nil {
			return fmt.Errorf("under load, pair %d: %w", i+1, err)
		}
		loadedLat = loadedLat.add(lat)
		alone, loaded = append(alone, a), append(loaded, l)
		pair := sharePair{Alone: a.Claims, Loaded: l.Claims, P99Ratio: p99Ratio(a.Claims, l.Claims),
			PingRatio: p99Ratio(a.Pings, l.Pings), RedisRatio: p99Ratio(a.Redis, l.Redis)}
		res.Pairs = append(res.Pairs, pair)
		fmt.Fprintf(m.Stderr, "lockbench: pair %d: p99 %.2f ms alone, %.2f ms under load: %.2f (a ping to the hub %.2f, EXISTS to Redis %.2f)\n",
			i+1, a.Claims.P99, l.Claims.P99, pair.P99Ratio, pair.PingRatio, pair.RedisRatio)
	}
	res.Alone, res.Loaded = pool(alone, aloneLat), pool(loaded, loadedLat)
	res.P99Ratio = p99Ratio(res.Alone.Claims, res.Loaded.Claims)
	res.PingRatio = p99Ratio(res.Alone.Pings, res.Loaded.Pings)
	res.RedisRatio = p99Ratio(res.Alone.Redis, res.Loaded.Redis)
	m.reportShare(ih, res)
	return nil
}

// fillTenant writes n locks of tenant as the .NET API does (its own claim script), held
// by n/20 people, 20 each (a person's quota is 200), pipelined in batches.
func fillTenant(ctx context.Context, rdb redis.UniversalClient, tenant, typ string, n int) error {
	net := redistest.DotNet{C: rdb, Lease: time.Hour}
	const batch = 64
	for i := 0; i < n; i += batch {
		var wg sync.WaitGroup
		errs := make([]error, batch)
		for j := i; j < min(i+batch, n); j++ {
			wg.Go(func() {
				oid := fmt.Sprintf("u-%d", j/20)
				ok, _, err := net.Claim(ctx, tenant, typ, fmt.Sprintf("r-%d", j), oid, "Person "+oid)
				if err == nil && !ok {
					err = fmt.Errorf("r-%d was held already", j)
				}
				errs[j-i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

// settleTenant opens a socket of cl's tenant that watches its type (reading its events
// as a grid does), and waits until the hub's sweeper has announced the n locks another
// program wrote (lockhub_store_foreign_changes_total), at most 5 minutes. It returns
// what closes the socket, for the caller, and how long the wait took.
func settleTenant(ctx context.Context, ih *inprocHub, cl *client, n int) (func(), time.Duration, error) {
	tok, err := cl.token(ctx, "u-grid")
	if err != nil {
		return nil, 0, err
	}
	c, err := rawOpen(ctx, cl, tok)
	if err != nil {
		return nil, 0, err
	}
	typ, _ := json.Marshal(cl.typ) // a string always encodes
	start := time.Now()
	if err := c.call(ctx, protocol.FrameWatch, `,"entityType":`+string(typ)); err != nil {
		c.Close()
		return nil, 0, err
	}
	closeAndWait := c.drain()
	deadline := start.Add(5 * time.Minute)
	for gauge(ih.reg, "lockhub_store_foreign_changes_total") < float64(n) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			closeAndWait()
			return nil, 0, fmt.Errorf("the sweeper announced %.0f of the %d locks written within 5 min", gauge(ih.reg, "lockhub_store_foreign_changes_total"), n)
		}
		time.Sleep(50 * time.Millisecond) // polling the hub's counter, with a deadline
	}
	return closeAndWait, time.Since(start), nil
}

// p99Ratio is loaded's p99 over alone's, 0 without a p99 alone.
func p99Ratio(alone, loaded summary) float64 {
	if alone.P99 <= 0 {
		return 0
	}
	return loaded.P99 / alone.P99
}

// add is r with more's round trips and failures added.
func (r smallResult) add(more smallResult) smallResult {
	r.Latencies = append(r.Latencies, more.Latencies...)
	r.Pings = append(r.Pings, more.Pings...)
	r.Redis = append(r.Redis, more.Redis...)
	r.Unknown += more.Unknown
	return r
}

// measurePhase runs the small tenant's claimers for d, with SLOWLOG recording commands
// over slowlogFloor and Redis's CPU read before and after; it returns the phase and what
// the claimers measured. Its SLOWLOG is added to into's.
func (m *Main) measurePhase(ctx context.Context, rdb redis.UniversalClient, cl *client, d time.Duration, into *shareResult) (sharePhase, smallResult, error) {
	if err := eachNode(ctx, rdb, func(ctx context.Context, n *redis.Client) error {
		if err := n.ConfigSet(ctx, "slowlog-log-slower-than", strconv.Itoa(slowlogFloor)).Err(); err != nil {
			return err
		}
		if err := n.ConfigSet(ctx, "slowlog-max-len", "10000").Err(); err != nil {
			return err
		}
		return n.SlowLogReset(ctx).Err()
	}); err != nil {
		return sharePhase{}, smallResult{}, err
	}
	// Back to Redis's default; a node that does not answer now keeps the floor, which
	// only logs more.
	defer eachNode(context.WithoutCancel(ctx), rdb, func(ctx context.Context, n *redis.Client) error {
		return n.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err()
	})
	cpu0, err := redisCPU(ctx, rdb)
	if err != nil {
		return sharePhase{}, smallResult{}, err
	}
	start := time.Now()
	lat, err := m.runSmall(ctx, cl, rdb, d)
	if err != nil {
		return sharePhase{}, smallResult{}, err
	}
	took := time.Since(start)
	cpu1, err := redisCPU(ctx, rdb)
	if err != nil {
		return sharePhase{}, smallResult{}, err
	}
	p := sharePhase{Seconds: took.Seconds(), Claims: summarize(slices.Clone(lat.Latencies)), Pings: summarize(slices.Clone(lat.Pings)),
		Redis: summarize(slices.Clone(lat.Redis)), Unknown: lat.Unknown, RedisCPU: (cpu1 - cpu0) / took.Seconds()}
	var mu sync.Mutex
	var st slowStats
	if err := eachNode(ctx, rdb, func(ctx context.Context, n *redis.Client) error {
		l, err := n.SlowLogGet(ctx, 10000).Result()
		mu.Lock()
		st.merge(nodeSlowStats(l, into.fast)) // each node's IDs are its own
		mu.Unlock()
		return err
	}); err != nil {
		return sharePhase{}, smallResult{}, err
	}
	p.SlowestUs, p.FastUs = st.SlowestUs, st.FastUs
	into.merge(st)
	return p, lat, nil
}

// pool is the phases as one: their round trips (lat) summarized together, time and
// failures added, Redis's CPU weighted by time, the slowest command of them all.
func pool(phases []sharePhase, lat smallResult) sharePhase {
	p := sharePhase{Claims: summarize(lat.Latencies), Pings: summarize(lat.Pings), Redis: summarize(lat.Redis), Unknown: lat.Unknown}
	var cpu float64
	for _, ph := range phases {
		p.Seconds += ph.Seconds
		cpu += ph.RedisCPU * ph.Seconds
		p.SlowestUs = max(p.SlowestUs, ph.SlowestUs)
		p.FastUs = max(p.FastUs, ph.FastUs)
	}
	if p.Seconds > 0 {
		p.RedisCPU = cpu / p.Seconds
	}
	return p
}

// commandKind names a command of the SLOWLOG: lockhub's scripts by name, another
// script by the kind of its first key (the part before the hash tag), and any other
// command by its name and its first key's kind.
func commandKind(args []string) string {
	if len(args) == 0 {
		return "?"
	}
	name := strings.ToUpper(args[0])
	if name == "EVALSHA" && len(args) > 1 {
		if script := locks.ScriptName(args[1]); script != "" {
			return "script " + script
		}
	}
	if (name == "EVALSHA" || name == "EVAL") && len(args) > 3 {
		key, _, _ := strings.Cut(args[3], "{")
		return name + " " + key
	}
	if len(args) > 1 {
		key, _, _ := strings.Cut(args[1], "{")
		return name + " " + key
	}
	return name
}

// eachNode runs fn on rdb's server, or on each master of a cluster (where SLOWLOG and
// INFO are each node's own).
func eachNode(ctx context.Context, rdb redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	default:
		return fmt.Errorf("lockbench: a Redis client of type %T", rdb)
	}
}

// sameShard returns the first of prefix-0, prefix-1, ... whose tenant keys live on the
// master of tenant's.
func sameShard(ctx context.Context, cc *redis.ClusterClient, tenant, prefix string) (string, error) {
	want, err := cc.MasterForKey(ctx, locks.IndexKey(tenant, "x"))
	if err != nil {
		return "", err
	}
	for i := range 10000 {
		name := fmt.Sprintf("%s-%d", prefix, i)
		m, err := cc.MasterForKey(ctx, locks.IndexKey(name, "x"))
		if err != nil {
			return "", err
		}
		if m.Options().Addr == want.Options().Addr {
			return name, nil
		}
	}
	return "", fmt.Errorf("lockbench: no tenant %s-N on the shard of %s", prefix, tenant)
}

// redisCPU reads Redis's CPU seconds so far (user and system), summed over the masters
// of a cluster.
func redisCPU(ctx context.Context, rdb redis.UniversalClient) (float64, error) {
	var mu sync.Mutex
	var total float64
	err := eachNode(ctx, rdb, func(ctx context.Context, n *redis.Client) error {
		cpu, err := nodeCPU(ctx, n)
		mu.Lock()
		total += cpu
		mu.Unlock()
		return err
	})
	return total, err
}

// nodeCPU reads one Redis server's CPU seconds so far (user and system).
func nodeCPU(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu: %s: %w", line, err)
			}
			sum += f
		}
	}
	return sum, nil
}

// slowMs is a SLOWLOG duration in ms; 0 is none logged, under slowlogFloor.
func slowMs(us int64) string {
	if us == 0 {
		return fmt.Sprintf("under %d ms", slowlogFloor/1000)
	}
	return fmt.Sprintf("%.2f ms", float64(us)/1000)
}

func (m *Main) reportShare(ih *inprocHub, r shareResult) {
	w := m.Stdout
	fmt.Fprintf(w, "lockbench -mode share on %s: a tenant of %d locks and %d of its people sending what the limits allow (%s), beside a small tenant of %d people\n",
		ih.redis, r.Locks, r.People, strings.Join(r.Kinds, ", "), smallPeople)
	if len(r.HubFlags) > 0 {
		fmt.Fprintf(w, "  the hub's flags beside the defaults: %s\n", strings.Join(r.HubFlags, " "))
	}
	fmt.Fprintf(w, "  the %d locks written were announced %.1f s after their type was first watched (%.0f a second); every phase comes after\n",
		r.Locks, r.CatchUpSeconds, float64(r.Locks)/max(r.CatchUpSeconds, 0.001))
	fmt.Fprintf(w, "  slowest command lockhub sent to Redis in any phase: %.2f ms (%s)  goal <= 5 ms\n", float64(r.SlowestUs)/1000, r.SlowestKind)
	fmt.Fprintf(w, "    less the fast commands inside it (their time is Redis not running: see the floor): %.2f ms (%s)\n", float64(r.WorkUs)/1000, r.WorkKind)
	fmt.Fprintf(w, "    the floor, the slowest command Redis flags fast (microseconds of work), alone or in a script: %s (%s); %s alone, %s under load\n",
		slowMs(r.FastUs), r.FastKind, slowMs(r.Alone.FastUs), slowMs(r.Loaded.FastUs))
	for i, k := range r.Slow {
		if i == 8 {
			break
		}
		fmt.Fprintf(w, "    %-40s %6d over %d ms, max %.2f ms\n", k.Kind, k.N, slowlogFloor/1000, float64(k.MaxUs)/1000)
	}
	fmt.Fprintf(w, "  Redis CPU: %.3f s/s alone, %.3f s/s under load\n", r.Alone.RedisCPU, r.Loaded.RedisCPU)
	fmt.Fprintf(w, "  small tenant's claims alone:      %s, %d failed open\n", r.Alone.Claims, r.Alone.Unknown)
	fmt.Fprintf(w, "  small tenant's claims under load: %s, %d failed open\n", r.Loaded.Claims, r.Loaded.Unknown)
	ratios := make([]string, len(r.Pairs))
	for i, p := range r.Pairs {
		ratios[i] = fmt.Sprintf("%.2f", p.P99Ratio)
	}
	fmt.Fprintf(w, "  p99 under load / alone: %.2f of %d pairs pooled; each pair: %s  goal <= 1.5\n", r.P99Ratio, len(r.Pairs), strings.Join(ratios, ", "))
	// The floor: the same people's round trips that do no lockhub work, beside each claim.
	floor := func(what string, ratio float64, alone, loaded summary, pair func(sharePair) float64) {
		each := make([]string, len(r.Pairs))
		for i, p := range r.Pairs {
			each[i] = fmt.Sprintf("%.2f", pair(p))
		}
		fmt.Fprintf(w, "    the floor, %s: p99 %.2f ms alone, %.2f ms under load: %.2f pooled; each pair: %s\n",
			what, alone.P99, loaded.P99, ratio, strings.Join(each, ", "))
	}
	floor("a ping to the hub (no Redis)", r.PingRatio, r.Alone.Pings, r.Loaded.Pings, func(p sharePair) float64 { return p.PingRatio })
	floor("EXISTS straight to Redis (no hub)", r.RedisRatio, r.Alone.Redis, r.Loaded.Redis, func(p sharePair) float64 { return p.RedisRatio })
	fmt.Fprintf(w, "  the big tenant's requests: %v; refused: %v\n", r.Requests, r.Refused)
	b, _ := json.Marshal(r) // our own types always encode
	fmt.Fprintf(w, "  json: %s\n", b)
}
