package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
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
//   - the small tenant's claim p50/p99, alone and under load (goal: p99 at most 1.5×).

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
	Alone    sharePhase  `json:"alone"`
	Loaded   sharePhase  `json:"loaded"`
	P99Ratio float64     `json:"p99Ratio"` // loaded p99 / alone p99, pooled
	Pairs    []sharePair `json:"pairs"`
	// CatchUpSeconds is how long the sweeper took to announce the locks written, once
	// their type was watched.
	CatchUpSeconds float64        `json:"catchUpSeconds"`
	Requests       map[string]int `json:"requests"` // of the big tenant's people, by kind
	Refused        map[string]int `json:"refused"`  // of those, refused by a limit, by code
	SlowestUs      int64          `json:"slowestUs"`
	SlowestKind    string         `json:"slowestKind"`
	Slow           []slowKind     `json:"slow"` // the slowest kinds of command over slowlogFloor
}

// sharePhase is one phase of the run.
type sharePhase struct {
	Seconds   float64 `json:"seconds"`
	Claims    summary `json:"claims"`    // the small tenant's claim latency
	Unknown   int     `json:"unknown"`   // of its claims and releases, those that failed open
	RedisCPU  float64 `json:"redisCpu"`  // Redis's CPU seconds a second
	SlowestUs int64   `json:"slowestUs"` // the longest command SLOWLOG recorded
}

// sharePair is a phase alone and the phase under load after it.
type sharePair struct {
	Alone    summary `json:"alone"`
	Loaded   summary `json:"loaded"`
	P99Ratio float64 `json:"p99Ratio"`
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
	var aloneLat, loadedLat []time.Duration
	for i := range o.sharePairs {
		fmt.Fprintf(m.Stderr, "lockbench: pair %d: the small tenant alone\n", i+1)
		a, lat, err := m.measurePhase(ctx, rdb, &scl, o.shareFor, &res)
		if err != nil {
			return fmt.Errorf("alone, pair %d: %w", i+1, err)
		}
		aloneLat = append(aloneLat, lat...)
		load, err := m.startShareLoad(ctx, cl, o.sharePeople, res.Kinds)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stderr, "lockbench: pair %d: the small tenant under the big tenant's load\n", i+1)
		stopCPU := func() {}
		if o.cpuProfile != "" && i == 0 {
			stopCPU = startCPUProfile(m.Stderr, o.cpuProfile) // the hub's process: the first phase under load
		}
		l, lat, err := m.measurePhase(ctx, rdb, &scl, o.shareFor, &res)
		stopCPU()
		if lerr := load.finish(&res); err == nil && lerr != nil {
			return fmt.Errorf("the big tenant's load: %w", lerr)
		}
		if err != nil {
			return fmt.Errorf("under load, pair %d: %w", i+1, err)
		}
		loadedLat = append(loadedLat, lat...)
		alone, loaded = append(alone, a), append(loaded, l)
		pair := sharePair{Alone: a.Claims, Loaded: l.Claims}
		if a.Claims.P99 > 0 {
			pair.P99Ratio = l.Claims.P99 / a.Claims.P99
		}
		res.Pairs = append(res.Pairs, pair)
		fmt.Fprintf(m.Stderr, "lockbench: pair %d: p99 %.2f ms alone, %.2f ms under load: %.2f\n", i+1, a.Claims.P99, l.Claims.P99, pair.P99Ratio)
	}
	res.Alone, res.Loaded = pool(alone, aloneLat), pool(loaded, loadedLat)
	if res.Alone.Claims.P99 > 0 {
		res.P99Ratio = res.Loaded.Claims.P99 / res.Alone.Claims.P99
	}
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

// measurePhase runs the small tenant's claimers for d, with SLOWLOG recording commands
// over slowlogFloor and Redis's CPU read before and after; it returns the phase and its
// claims' latencies. With into, the slow kinds of command are added to it.
func (m *Main) measurePhase(ctx context.Context, rdb redis.UniversalClient, cl *client, d time.Duration, into *shareResult) (sharePhase, []time.Duration, error) {
	if err := eachNode(ctx, rdb, func(ctx context.Context, n *redis.Client) error {
		if err := n.ConfigSet(ctx, "slowlog-log-slower-than", strconv.Itoa(slowlogFloor)).Err(); err != nil {
			return err
		}
		if err := n.ConfigSet(ctx, "slowlog-max-len", "10000").Err(); err != nil {
			return err
		}
		return n.SlowLogReset(ctx).Err()
	}); err != nil {
		return sharePhase{}, nil, err
	}
	// Back to Redis's default; a node that does not answer now keeps the floor, which
	// only logs more.
	defer eachNode(context.WithoutCancel(ctx), rdb, func(ctx context.Context, n *redis.Client) error {
		return n.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err()
	})
	cpu0, err := redisCPU(ctx, rdb)
	if err != nil {
		return sharePhase{}, nil, err
	}
	start := time.Now()
	lat, unknown, err := m.runSmall(ctx, cl, d)
	if err != nil {
		return sharePhase{}, nil, err
	}
	took := time.Since(start)
	cpu1, err := redisCPU(ctx, rdb)
	if err != nil {
		return sharePhase{}, nil, err
	}
	p := sharePhase{Seconds: took.Seconds(), Claims: summarize(slices.Clone(lat)), Unknown: unknown, RedisCPU: (cpu1 - cpu0) / took.Seconds()}
	var mu sync.Mutex
	var logs []redis.SlowLog
	if err := eachNode(ctx, rdb, func(ctx context.Context, n *redis.Client) error {
		l, err := n.SlowLogGet(ctx, 10000).Result()
		mu.Lock()
		logs = append(logs, l...)
		mu.Unlock()
		return err
	}); err != nil {
		return sharePhase{}, nil, err
	}
	kinds := map[string]*slowKind{}
	for _, l := range logs {
		us := l.Duration.Microseconds()
		p.SlowestUs = max(p.SlowestUs, us)
		k := commandKind(l.Args)
		if kinds[k] == nil {
			kinds[k] = &slowKind{Kind: k}
		}
		kinds[k].N++
		kinds[k].MaxUs = max(kinds[k].MaxUs, us)
		if into != nil && us > into.SlowestUs {
			into.SlowestUs, into.SlowestKind = us, k
		}
	}
	if into != nil {
		for _, k := range into.Slow {
			if kinds[k.Kind] == nil {
				kinds[k.Kind] = &slowKind{Kind: k.Kind}
			}
			kinds[k.Kind].N += k.N
			kinds[k.Kind].MaxUs = max(kinds[k.Kind].MaxUs, k.MaxUs)
		}
		into.Slow = into.Slow[:0]
		for _, k := range kinds {
			into.Slow = append(into.Slow, *k)
		}
		slices.SortFunc(into.Slow, func(a, b slowKind) int { return int(b.MaxUs - a.MaxUs) })
	}
	return p, lat, nil
}

// pool is the phases as one: their claims' latencies summarized together, time and
// failures added, Redis's CPU weighted by time, the slowest command of them all.
func pool(phases []sharePhase, lat []time.Duration) sharePhase {
	p := sharePhase{Claims: summarize(lat)}
	var cpu float64
	for _, ph := range phases {
		p.Seconds += ph.Seconds
		p.Unknown += ph.Unknown
		cpu += ph.RedisCPU * ph.Seconds
		p.SlowestUs = max(p.SlowestUs, ph.SlowestUs)
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

// smallClaims has smallPeople of cl's tenant each claim and release an entity of their
// own every smallPairEvery for d, and returns every claim's latency, and how many of
// the claims and releases failed open (answered unknown: Redis did not answer in time,
// and locking was off for them).
func smallClaims(ctx context.Context, cl *client, d time.Duration) ([]time.Duration, int, error) {
	var mu sync.Mutex
	var lat []time.Duration
	unknown := 0
	var wg sync.WaitGroup
	errs := make([]error, smallPeople)
	for i := range smallPeople {
		wg.Go(func() {
			oid := fmt.Sprintf("u-small-%d", i)
			tok, err := cl.token(ctx, oid)
			if err != nil {
				errs[i] = err
				return
			}
			c, err := cl.open(ctx, tok)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			// People do not click in step: their pairs are spread over the period.
			select {
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			case <-time.After(smallPairEvery * time.Duration(i) / smallPeople):
			}
			t := time.NewTicker(smallPairEvery)
			defer t.Stop()
			uid := "s-" + oid
			for end := time.Now().Add(d); time.Now().Before(end); {
				start := time.Now()
				r, err := c.Claim(ctx, cl.typ, uid)
				took := time.Since(start)
				failed := r.Outcome == protocol.OutcomeUnknown
				if err != nil || (r.Outcome != protocol.OutcomeAcquired && r.Outcome != protocol.OutcomeRenewed && !failed) { // renewed: after a release that failed open
					errs[i] = fmt.Errorf("small tenant's claim: %s %v", r.Outcome, err)
					return
				}
				r, err = c.Release(ctx, cl.typ, uid)
				if err != nil || (r.Outcome != protocol.OutcomeReleased && r.Outcome != protocol.OutcomeUnknown && r.Outcome != protocol.OutcomeNotHeld) {
					errs[i] = fmt.Errorf("small tenant's release: %s %v", r.Outcome, err)
					return
				}
				mu.Lock()
				lat = append(lat, took)
				if failed {
					unknown++
				}
				if r.Outcome == protocol.OutcomeUnknown {
					unknown++
				}
				mu.Unlock()
				select {
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
	return lat, unknown, errors.Join(errs...)
}

// smallResult is what the small tenant's process reports (runSmallChild).
type smallResult struct {
	Latencies []time.Duration `json:"latencies"`
	Unknown   int             `json:"unknown"`
}

// runSmall runs the small tenant's claims for d (smallClaims) in a child process, or, in
// a test (m.clientsInProcess), on goroutines of this one. Its people are browsers on
// other machines too: in the hub's process their goroutines would wait for the hub's
// turns, and their latency would count the hub's scheduling of its load, not the hub's
// answer.
func (m *Main) runSmall(ctx context.Context, cl *client, d time.Duration) ([]time.Duration, int, error) {
	if m.clientsInProcess {
		return smallClaims(ctx, cl, d)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, err
	}
	o := m.opt
	cmd := exec.CommandContext(ctx, exe, "-mode", modeShare, "-child", "-share-small", "-redis-url", o.redisURL,
		"-url", cl.url, "-token-url", cl.tokenURL, "-tenant", cl.tenant, "-type", cl.typ,
		"-share-for", d.String(), "-timeout", o.timeout.String())
	cmd.Stderr = m.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, 0, fmt.Errorf("the small tenant's process: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			var r smallResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				return nil, 0, err
			}
			return r.Latencies, r.Unknown, nil
		}
	}
	return nil, 0, errors.New("the small tenant's process ended without a result")
}

// runSmallChild is the small tenant's process of -mode share: smallClaims on -tenant at
// -url for -share-for, then RESULT and every claim's latency.
func (m *Main) runSmallChild(ctx context.Context) error {
	o := m.opt
	cl := &client{url: o.url, tokenURL: o.tokenURL, tenant: o.tenant, typ: o.entityType, http: &http.Client{Timeout: 30 * time.Second}}
	defer cl.http.CloseIdleConnections()
	lat, unknown, err := smallClaims(ctx, cl, o.shareFor)
	if err != nil {
		return err
	}
	b, err := json.Marshal(smallResult{Latencies: lat, Unknown: unknown})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "RESULT %s\n", b)
	return err
}

// loadProcess is the big tenant's load running in a process of its own (see
// startShareLoad).
type loadProcess interface {
	// finish stops the load and adds what its people sent, and what was refused, to res.
	finish(res *shareResult) error
}

// startShareLoad starts the big tenant's people (startLoad) in a child process, or, in a
// test (m.clientsInProcess), on goroutines of this one. The people stand for browsers on
// other machines: in the hub's process their goroutines and their garbage would take
// turns from the hub's, and the small tenant's claims would wait behind the load
// generator rather than behind the hub and Redis, which is what is measured. It returns
// once every person's socket is open.
func (m *Main) startShareLoad(ctx context.Context, cl *client, people int, kinds []string) (loadProcess, error) {
	if m.clientsInProcess {
		l, err := startLoad(ctx, cl, people, kinds)
		if err != nil {
			return nil, err
		}
		return inprocLoad{l}, nil
	}
	o := m.opt
	cmd, in, out, err := m.startChild(ctx, "-mode", modeShare, "-child", "-redis-url", o.redisURL,
		"-url", cl.url, "-token-url", cl.tokenURL, "-tenant", cl.tenant, "-type", cl.typ,
		"-share-people", strconv.Itoa(people), "-share-kinds", strings.Join(kinds, ","), "-timeout", o.timeout.String())
	if err != nil {
		return nil, err
	}
	c := &childLoad{cmd: cmd, in: in, out: bufio.NewScanner(out), rest: out}
	if !c.out.Scan() || c.out.Text() != "READY" {
		_ = in.Close()
		return nil, errors.Join(errors.New("the load's process did not start its people"), c.wait())
	}
	return c, nil
}

// inprocLoad is the load on goroutines of this process.
type inprocLoad struct{ l *shareLoad }

func (p inprocLoad) finish(res *shareResult) error {
	p.l.stop()
	p.l.count(res)
	return nil
}

// childLoad is the load's process: it runs until its stdin ends, then prints RESULT and
// what its people sent as JSON (runShareChild).
type childLoad struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	rest io.Reader
}

func (c *childLoad) finish(res *shareResult) error {
	_ = c.in.Close() // the people stop at EOF
	var err error
	found := false
	for c.out.Scan() {
		if line, ok := strings.CutPrefix(c.out.Text(), "RESULT "); ok {
			var got shareResult
			err = json.Unmarshal([]byte(line), &got)
			for k, v := range got.Requests {
				res.Requests[k] += v
			}
			for k, v := range got.Refused {
				res.Refused[k] += v
			}
			found = true
		}
	}
	if !found && err == nil {
		err = errors.New("the load's process ended without a result")
	}
	return errors.Join(err, c.wait())
}

func (c *childLoad) wait() error {
	_, _ = io.Copy(io.Discard, c.rest)
	return c.cmd.Wait()
}

// runShareChild is the load's process of -mode share: -share-people of -tenant on the
// hub at -url, from READY until its stdin ends; then RESULT and what they sent.
func (m *Main) runShareChild(ctx context.Context) error {
	o := m.opt
	cl := &client{url: o.url, tokenURL: o.tokenURL, tenant: o.tenant, typ: o.entityType, http: &http.Client{Timeout: 30 * time.Second}}
	defer cl.http.CloseIdleConnections()
	l, err := startLoad(ctx, cl, o.sharePeople, o.loadKinds())
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, "READY")
	_, _ = io.Copy(io.Discard, m.Stdin) // until the parent closes it
	l.stop()
	res := shareResult{Requests: map[string]int{}, Refused: map[string]int{}}
	l.count(&res)
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "RESULT %s\n", b)
	return err
}

// shareLoad is the big tenant's people sending what the limits allow.
type shareLoad struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	requests map[string]int
	refused  map[string]int
}

// loadKinds are the requests a big tenant's person sends, in turn.
var loadKinds = []string{"watch", "mine", "adminLocks", "list", "claim"}

// parseLoadKinds reads -share-kinds: some of loadKinds, comma-separated, each once.
func parseLoadKinds(v string) ([]string, error) {
	var kinds []string
	for k := range strings.SplitSeq(v, ",") {
		k = strings.TrimSpace(k)
		switch {
		case !slices.Contains(loadKinds, k):
			return nil, fmt.Errorf("%q is not one of %s", k, strings.Join(loadKinds, ","))
		case slices.Contains(kinds, k):
			return nil, fmt.Errorf("%q twice", k)
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}

// loadKinds are the requests the big tenant's people send: -share-kinds, or all.
func (o *options) loadKinds() []string {
	if len(o.shareKinds) == 0 {
		return loadKinds
	}
	return o.shareKinds
}

// startLoad starts people sockets of cl's tenant (each with the admin role, for the
// console's list), each sending the next of loadKinds as soon as the last is answered,
// as fast as the hub's per-socket rate lets them; list goes over HTTP with the
// person's token. Their sockets read answers without decoding them (rawConn).
func startLoad(ctx context.Context, cl *client, people int, kinds []string) (*shareLoad, error) {
	ctx, cancel := context.WithCancel(ctx)
	l := &shareLoad{cancel: cancel, requests: map[string]int{}, refused: map[string]int{}}
	for i := range people {
		oid := fmt.Sprintf("u-%d", i) // holders of the locks written: their own, and others'
		tok, err := adminToken(ctx, cl, oid)
		if err != nil {
			l.stop()
			return nil, err
		}
		c, err := rawOpen(ctx, cl, tok)
		if err != nil {
			l.stop()
			return nil, err
		}
		l.wg.Go(func() { l.person(ctx, cl, c, tok, i, kinds) })
	}
	return l, nil
}

// person sends one person's requests until ctx is done, on a new socket when the hub
// closed the last (4429: a snapshot of every lock is more than a slow reader keeps up
// with), as the browser client reconnects.
func (l *shareLoad) person(ctx context.Context, cl *client, c *rawConn, tok string, i int, kinds []string) {
	defer func() { c.Close() }()
	typ, _ := json.Marshal(cl.typ) // a string always encodes
	onType := `,"entityType":` + string(typ)
	for n := 0; ctx.Err() == nil; n++ {
		kind := kinds[n%len(kinds)]
		var err error
		switch kind {
		case "watch":
			if err = c.call(ctx, protocol.FrameWatch, onType); err == nil {
				err = c.call(ctx, protocol.FrameUnwatch, onType)
			}
		case "mine":
			err = c.call(ctx, protocol.FrameMine, "")
		case "adminLocks":
			err = c.call(ctx, protocol.FrameAdminLocks, "")
		case "list":
			err = listHTTP(ctx, cl, tok)
		case "claim":
			err = c.call(ctx, protocol.FrameClaim, onType+`,"entityUid":"`+fmt.Sprintf("r-%d", (n*7+i)%maxShareLocks)+`"`)
		}
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		l.requests[kind]++
		var pe *protocol.Error
		switch {
		case errors.As(err, &pe):
			l.refused[string(pe.Code)]++
		case err != nil:
			l.refused["closed"]++
		}
		l.mu.Unlock()
		if err != nil && pe == nil && kind != "list" {
			c.Close()
			if c, err = rawOpen(ctx, cl, tok); err != nil {
				return // ctx done, or the hub is gone: the run reports what it saw
			}
		}
		if pe != nil && pe.Code == protocol.CodeRateLimited {
			select { // the hub's per-socket rate: back off as a client should
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func (l *shareLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

func (l *shareLoad) count(res *shareResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range l.requests {
		res.Requests[k] += v
	}
	for k, v := range l.refused {
		res.Refused[k] += v
	}
}

// adminToken gets a development token with the console's role.
func adminToken(ctx context.Context, cl *client, oid string) (string, error) {
	admin := *cl
	admin.roles = []string{"Locks.Admin"}
	return admin.token(ctx, oid)
}

// listHTTP lists the type's locks over HTTP (GET /api/locks/{type}).
func listHTTP(ctx context.Context, cl *client, tok string) error {
	u := strings.Replace(cl.tokenURL, "/dev/token", "/api/locks/"+cl.typ, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := cl.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return &protocol.Error{Code: protocol.CodeRateLimited}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return nil
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
	fmt.Fprintf(w, "  the big tenant's requests: %v; refused: %v\n", r.Requests, r.Refused)
	b, _ := json.Marshal(r) // our own types always encode
	fmt.Fprintf(w, "  json: %s\n", b)
}
