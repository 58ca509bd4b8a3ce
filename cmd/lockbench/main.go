package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lockhub/lockhub/cmd/internal/flagenv"
)

func main() {
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin}
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// Main is the program, testable: ParseFlags, then Run.
type Main struct {
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	// LookupEnv reads the environment, where each flag may be given as LOCKBENCH_<NAME>
	// (a flag wins). Nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	opt       options
	args      []string // as given, echoed in the report
	// clientsInProcess runs -mode crowd's clients and -mode share's load on goroutines
	// of this process rather than in a child process: for tests, whose binary is not
	// lockbench.
	clientsInProcess bool
}

// options are the flags.
type options struct {
	url, tokenURL, redisURL string
	inproc, child           bool
	watchers, claimers      int
	claims                  int
	rate                    float64
	pairs                   int
	dialers                 int
	floor                   int
	timeout                 time.Duration
	tenant, entityType      string
	cpuProfile, memProfile  string
	execTrace               string // -trace

	// -mode foreign
	mode       string
	instances  int
	entities   int
	changes    int
	changeRate float64

	// -mode crowd
	snapshotLocks int
	rounds        int
	crowdPing     bool
	pipeline      bool

	// -mode share
	shareLocks  int
	sharePeople int
	shareFor    time.Duration
	sharePairs  int
	hubFlags    []string
	shareKinds  []string
	smallChild  bool
	cluster     bool // -redis-cluster
}

// Bounds of the flags: the tool never opens more than this.
const (
	maxWatchers = 50000
	maxClaimers = 100
	maxClaims   = 100000
	maxTimeout  = 30 * time.Minute
	maxHubs     = 8
	maxEntities = 100000
)

// The modes of -mode.
const (
	modeLoad    = "load"
	modeForeign = "foreign"
	modeCrowd   = "crowd"
	modeShare   = "share"
	modeFanout  = "fanout"
)

// ParseFlags parses and checks the command line.
func (m *Main) ParseFlags(args []string) error {
	m.args = args
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	o := &m.opt
	fs.StringVar(&o.url, "url", "ws://127.0.0.1:8080/ws", "the hub's WebSocket URL (ignored with -inproc)")
	fs.StringVar(&o.tokenURL, "token-url", "", "POST /dev/token of the hub; empty: derived from -url")
	fs.StringVar(&o.redisURL, "redis-url", "", "Redis of the hub: the in-process hub's store with -inproc (empty: in-process miniredis), "+
		"else a store for the direct side of the ratio (empty: no ratio)")
	fs.BoolVar(&o.inproc, "inproc", false, "start a hub in this process and run the clients in a child process")
	fs.BoolVar(&o.child, "child", false, "internal: run the clients only, driven by the parent on stdin/stdout")
	fs.BoolVar(&o.smallChild, "share-small", false, "internal, with -mode share -child: run the small tenant's claims for -share-for, not the big tenant's load")
	fs.IntVar(&o.watchers, "watchers", 1000, "watching sockets")
	fs.IntVar(&o.claimers, "claimers", 4, "claiming sockets")
	fs.IntVar(&o.claims, "claims", 50, "claims per claimer, each released half a claim spacing later")
	fs.Float64Var(&o.rate, "rate", 10, "claims a second, all claimers together")
	fs.IntVar(&o.pairs, "pairs", 500, "claim+release pairs for the socket/direct ratio (0: none)")
	fs.IntVar(&o.dialers, "dialers", 32, "sockets opened concurrently")
	fs.IntVar(&o.floor, "floor", 5000, "loopback TCP pairs for the machine's fan-out floor, at most -watchers (0: not measured)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "cap of the whole run")
	fs.StringVar(&o.tenant, "tenant", "acme", "tenant of every token")
	fs.StringVar(&o.entityType, "type", "ApprovalRequest", "entity type watched and claimed")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "with -inproc: write the hub process's CPU profile of the load phase here; with -mode crowd, of the crowd on B, and of the same crowd without the watch in <file>.connect (compare with pprof -diff_base); with -mode fanout, of the rounds; with -mode share, of the hub in the first phase under load")
	fs.StringVar(&o.execTrace, "trace", "", "with -mode share: write the hub process's execution trace (go tool trace) of the first phase under load here")
	fs.StringVar(&o.memProfile, "memprofile", "", "with -inproc: write the hub process's heap profile, taken with the idle sockets open, here")
	fs.StringVar(&o.mode, "mode", modeLoad, "what to measure: "+modeLoad+" (watchers and claimers on one hub) or "+modeForeign+
		" (changes the .NET scripts make directly in Redis, seen by watchers of -instances in-process hubs on -redis-url; -watchers is per hub, default 1) or "+modeCrowd+
		" (-watchers move at once from one in-process hub on -redis-url to another, as when the first goes away) or "+modeShare+
		" (the fair share under a big tenant's load) or "+modeFanout+
		" (the in-process hub's own CPU per delivered frame and per idle socket, the watchers in a child process; Redis's CPU per change)")
	fs.IntVar(&o.instances, "instances", 2, "with -mode foreign: in-process hubs sharing -redis-url")
	fs.IntVar(&o.entities, "entities", 200, "with -mode foreign: entities the .NET writer changes")
	fs.IntVar(&o.changes, "changes", 500, "with -mode foreign: changes (a claim or a release) the .NET writer makes; with -mode fanout, changes a round (default 40)")
	fs.Float64Var(&o.changeRate, "change-rate", 25, "with -mode foreign: changes a second, at random moments; with -mode fanout, changes a second (default 5)")
	fs.IntVar(&o.rounds, "rounds", 3, "with -mode crowd: rounds, each a fresh hub A going away and its crowd on B, reported as their median; with -mode fanout, rounds of -changes")
	fs.IntVar(&o.snapshotLocks, "snapshot-locks", 20, "with -mode crowd: locks of the type, held through the run, that every snapshot carries")
	fs.BoolVar(&o.pipeline, "pipeline", true, "with -mode crowd: each socket sends its watch (or ping) right behind its auth, as the browser client does, and the hub answers both in one write; false waits for the welcome first")
	fs.BoolVar(&o.crowdPing, "crowd-ping", false, "with -mode crowd: the measured crowd sends a ping instead of its watch, and waits for the pong: what one request and answer costs, the least a watch could")
	fs.IntVar(&o.shareLocks, "share-locks", 20000, "with -mode share: locks of the big tenant, all of -type (its quota, PROTOCOL.md §4)")
	fs.IntVar(&o.sharePeople, "share-people", 4, "with -mode share: people of the big tenant sending every request the limits allow")
	fs.DurationVar(&o.shareFor, "share-for", 20*time.Second, "with -mode share: how long each phase (alone, under load) measures")
	fs.IntVar(&o.sharePairs, "share-pairs", 3, "with -mode share: pairs of phases (alone, then under load), alternated; each pair's ratio is reported")
	fs.Func("hub-flags", "with -mode share: more flags for the hub, space-separated (\"--max-list-locks-per-tenant 20000\"): what a setting does to the fair share", func(v string) error {
		o.hubFlags = strings.Fields(v)
		return nil
	})
	fs.Func("share-kinds", "with -mode share: the big tenant's requests, comma-separated, of "+strings.Join(loadKinds, ",")+" (default all); "+idleKind+" alone: its people's sockets open and silent, the control whose ratios are the harness's own spread", func(v string) error {
		kinds, err := parseLoadKinds(v)
		o.shareKinds = kinds
		return err
	})
	fs.BoolVar(&o.cluster, "redis-cluster", false, "with -mode share: -redis-url is a Redis Cluster seed (more seeds as ?addr=host:port); the small tenant is put on the big tenant's shard")
	lookup := m.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	p, err := flagenv.Parse(fs, args, "LOCKBENCH_", lookup)
	if err != nil {
		return err
	}
	switch {
	case o.watchers < 1 || o.watchers > maxWatchers:
		return p.Name("watchers", fmt.Errorf("must be 1 to %d", maxWatchers))
	case o.claimers < 1 || o.claimers > maxClaimers:
		return p.Name("claimers", fmt.Errorf("must be 1 to %d", maxClaimers))
	case o.claims < 1 || o.claims > maxClaims:
		return p.Name("claims", fmt.Errorf("must be 1 to %d", maxClaims))
	case o.rate <= 0 || o.rate/float64(o.claimers) > 20:
		// Two frames (claim, release) per claim: 20 claims a second keeps a socket under
		// the contract's 50 frames a second.
		return p.Name("rate", errors.New("must be positive and at most 20 per claimer"))
	case o.pairs < 0 || o.pairs > maxClaims:
		return p.Name("pairs", fmt.Errorf("must be 0 to %d", maxClaims))
	case o.dialers < 1 || o.dialers > 1024:
		return p.Name("dialers", errors.New("must be 1 to 1024"))
	case o.floor < 0 || o.floor > maxWatchers:
		return p.Name("floor", fmt.Errorf("must be 0 to %d", maxWatchers))
	case o.timeout <= 0 || o.timeout > maxTimeout:
		return p.Name("timeout", fmt.Errorf("must be positive and at most %s", maxTimeout))
	}
	if o.mode == modeForeign {
		if p.From("watchers") == flagenv.Default {
			o.watchers = 1
		}
		switch {
		case o.redisURL == "":
			return p.Name("redis-url", errForeignRedis)
		case o.instances < 1 || o.instances > maxHubs:
			return p.Name("instances", fmt.Errorf("must be 1 to %d", maxHubs))
		case o.changes < 1 || o.changes > maxClaims:
			return p.Name("changes", fmt.Errorf("must be 1 to %d", maxClaims))
		case o.changeRate <= 0 || o.changeRate > 1000:
			return p.Name("change-rate", errors.New("must be positive and at most 1000"))
		case o.entities < 1 || o.entities > maxEntities:
			return p.Name("entities", fmt.Errorf("must be 1 to %d", maxEntities))
		case float64(o.entities) < 2*o.changeRate*entityGap.Seconds():
			// Each entity changes at most every entityGap: with fewer entities the
			// writer would mostly wait for one to be free.
			return p.Name("entities", fmt.Errorf("must be at least %.0f for -change-rate %g (an entity changes at most every %s)",
				2*o.changeRate*entityGap.Seconds(), o.changeRate, entityGap))
		}
	} else if o.mode == modeCrowd {
		switch {
		case o.redisURL == "":
			return p.Name("redis-url", errCrowdRedis)
		case o.snapshotLocks < 0 || o.snapshotLocks > maxSnapshotLocks:
			return p.Name("snapshot-locks", fmt.Errorf("must be 0 to %d", maxSnapshotLocks))
		case o.rounds < 1 || o.rounds > maxRounds:
			return p.Name("rounds", fmt.Errorf("must be 1 to %d", maxRounds))
		}
	} else if o.mode == modeShare {
		switch {
		case o.redisURL == "":
			return p.Name("redis-url", errShareRedis)
		case o.shareLocks < 1 || o.shareLocks > maxShareLocks:
			return p.Name("share-locks", fmt.Errorf("must be 1 to %d", maxShareLocks))
		case o.sharePeople < 1 || o.sharePeople > maxSharePeople:
			return p.Name("share-people", fmt.Errorf("must be 1 to %d", maxSharePeople))
		case o.shareFor < time.Second || o.shareFor > 10*time.Minute:
			return p.Name("share-for", errors.New("must be 1s to 10m"))
		case o.sharePairs < 1 || o.sharePairs > maxSharePairs:
			return p.Name("share-pairs", fmt.Errorf("must be 1 to %d", maxSharePairs))
		}
	} else if o.mode == modeFanout {
		if err := o.checkFanout(p); err != nil {
			return err
		}
	} else if o.mode != modeLoad {
		return p.Name("mode", fmt.Errorf("must be %s, %s, %s, %s or %s", modeLoad, modeForeign, modeCrowd, modeShare, modeFanout))
	}
	if o.cluster && o.mode != modeShare {
		return p.Name("redis-cluster", fmt.Errorf("only with -mode %s", modeShare))
	}
	if o.execTrace != "" && o.mode != modeShare {
		return p.Name("trace", fmt.Errorf("only with -mode %s", modeShare))
	}
	if !o.inproc && o.mode == modeLoad {
		if err := loopbackURL(o.url, "ws", "wss"); err != nil {
			return p.Name("url", err)
		}
		if o.tokenURL == "" {
			u, _ := url.Parse(o.url)
			u.Scheme = strings.Replace(u.Scheme, "ws", "http", 1)
			u.Path = "/dev/token"
			o.tokenURL = u.String()
		}
		if err := loopbackURL(o.tokenURL, "http", "https"); err != nil {
			return p.Name("token-url", err)
		}
	}
	if o.redisURL != "" {
		if err := loopbackURL(o.redisURL, "redis", "rediss"); err != nil {
			return p.Name("redis-url", err)
		}
	}
	return nil
}

// loopbackURL refuses a URL that is not of one of schemes or does not name a loopback
// host: the tool loads a hub on this machine, never anyone else's.
func loopbackURL(s string, schemes ...string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	ok := false
	for _, sc := range schemes {
		ok = ok || u.Scheme == sc
	}
	if !ok {
		return fmt.Errorf("%q: scheme must be one of %v", s, schemes)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address", s)
}

// Run runs the benchmark the flags describe, within -timeout.
func (m *Main) Run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.opt.timeout)
	defer cancel()
	if n, err := raiseFileLimit(); err != nil {
		fmt.Fprintf(m.Stderr, "lockbench: raising the file limit: %v\n", err)
	} else if need := uint64(m.opt.watchers + m.opt.claimers + 64); n < need && !m.opt.inproc {
		return fmt.Errorf("the file limit is %d, %d sockets need %d", n, m.opt.watchers, need)
	}
	switch {
	case m.opt.mode == modeCrowd && m.opt.child:
		return m.runCrowdChild(ctx)
	case m.opt.mode == modeCrowd:
		return m.runCrowd(ctx)
	case m.opt.mode == modeForeign:
		return m.runForeign(ctx)
	case m.opt.mode == modeShare && m.opt.child && m.opt.smallChild:
		return m.runSmallChild(ctx)
	case m.opt.mode == modeShare && m.opt.child:
		return m.runShareChild(ctx)
	case m.opt.mode == modeShare:
		return m.runShare(ctx)
	case m.opt.mode == modeFanout:
		return m.runFanout(ctx)
	case m.opt.child:
		return m.runChild(ctx)
	case m.opt.inproc:
		return m.runInproc(ctx)
	default:
		return m.runExternal(ctx)
	}
}
