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
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockhub/lockhub/cmd/lockhub/service"
	"github.com/lockhub/lockhub/hub"
	"github.com/lockhub/lockhub/locks"
)

// inprocHub is the lockhub service run by this process on a loopback port: the same
// wiring as the binary (cmd/lockhub/service), so what is measured is the server.
type inprocHub struct {
	store *locks.Store
	reg   *prometheus.Registry
	url   string // ws://127.0.0.1:port/ws
	token string // http://127.0.0.1:port/dev/token
	redis string // what the store talks to, for the report
	stop  func() error
}

// benchChangesPerPerson is the rate of changes one person may make in a benchmark:
// more than any run makes, so nothing is refused while every change is still counted.
const benchChangesPerPerson = 1_000_000

// startInproc runs the lockhub service on redisURL (empty: its embedded Redis), with
// typ the one lockable type and development tokens. stop shuts it down and joins it.
func startInproc(ctx context.Context, redisURL, typ string) (*inprocHub, error) {
	return startHub(ctx, redisURL, typ, false)
}

// startHub is startInproc; with limits, every limit of the hub and the store is its
// default (-mode share, which measures them), else the rates are lifted (below). extra
// flags go to the service as they are (--redis-cluster).
func startHub(ctx context.Context, redisURL, typ string, limits bool, extra ...string) (*inprocHub, error) {
	// --dev: the clients take development tokens from POST /dev/token, which the
	// service serves on a --redis-url only when told (PROTOCOL.md §5 Hardening).
	// --max-sockets-per-person, --max-pending-auth-per-ip: the crowd and the watchers
	// are thousands of sockets of one person from one address, which the fair share
	// would refuse past 20 (and 100 waiting to authenticate); the instance's own caps
	// still hold. -mode share keeps them: it measures the fair share.
	args := []string{"--listen", "127.0.0.1:0", "--lockable", typ, "--log-level", "warn", "--dev"}
	if !limits {
		// The claim+release pairs of one person measure what a change costs, the fair
		// share's count included, not the share itself (PROTOCOL.md §4 would refuse a
		// person's 201st change within a few seconds).
		args = append(args, "--max-changes-per-person", strconv.Itoa(benchChangesPerPerson),
			"--max-sockets-per-person", strconv.Itoa(hub.DefaultMaxConnections),
			"--max-pending-auth-per-ip", strconv.Itoa(hub.DefaultMaxPendingAuth-1),
			"--max-list-locks-per-tenant", "-1") // rounds of crowds re-reading a type, back to back
	}
	if redisURL != "" {
		args = append(args, "--redis-url", redisURL)
	}
	args = append(args, extra...)
	m := &service.Main{
		Args:      args,
		LookupEnv: func(string) (string, bool) { return "", false }, // the flags alone
		Stdout:    os.Stderr,
		Stderr:    os.Stderr,
		Configure: func(c *service.Config) {
			if limits {
				return
			}
			// The per-socket rate limit would time the limiter in the socket/direct
			// ratio, not the cost of the socket; claimers keep under it by themselves
			// (-rate).
			c.Hub.RateLimit, c.Hub.RateBurst = 1e6, 1e6
		},
	}
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	runDone := make(chan error, 1)
	go func() { runDone <- m.Run(runCtx) }()
	select {
	case <-m.Ready():
	case err := <-runDone:
		cancelRun()
		return nil, fmt.Errorf("starting the hub: %w", err)
	}
	base := m.Addr()
	ih := &inprocHub{store: m.Store(), reg: m.Metrics(), url: "ws://" + base + "/ws", token: "http://" + base + "/dev/token", redis: redisURL}
	if redisURL == "" {
		ih.redis = "in-process miniredis"
	}
	ih.stop = func() error {
		cancelRun()
		return <-runDone
	}
	return ih, nil
}

// memResult is the hub process's memory per idle socket.
type memResult struct {
	Sockets       int     `json:"sockets"`
	HeapPerSocket float64 `json:"heapBytesPerSocket"`
	StackPerSock  float64 `json:"stackBytesPerSocket"`
	TotalPerSock  float64 `json:"totalBytesPerSocket"`
	Goroutines    int     `json:"goroutinesPerSocket"`
	// What the process holds from the OS, per socket: VmRSS of /proc/self/status
	// (0 where there is none), and the Go heap's in-use spans, the live heap plus the
	// free space inside them that the next allocations fill.
	RSSPerSocket       float64 `json:"rssBytesPerSocket"`
	HeapInusePerSocket float64 `json:"heapInuseBytesPerSocket"`
	// The same once the hub returned the burst's free memory to the OS
	// (--memory-trim-burst), 0 when it did not within trimWait.
	RSSAfterTrimPerSocket float64 `json:"rssAfterTrimBytesPerSocket"`
}

// trimWait is how long the measure waits for the hub to return the free memory of the
// sockets' set-up: its trimmer looks every 10 s, and trims at the first quiet look.
const trimWait = 45 * time.Second

type memSample struct {
	heap, stack uint64
	heapInuse   uint64
	rss         uint64 // VmRSS, bytes
	goroutines  int
}

// sampleMemory collects garbage (twice: the second run frees what finalizers of the
// first released, and shrinks idle stacks) and reads live heap and stack bytes.
func sampleMemory() memSample {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSample{heap: m.HeapAlloc, stack: m.StackInuse, heapInuse: m.HeapInuse,
		rss: readRSS(), goroutines: runtime.NumGoroutine()}
}

// readRSS returns the process's resident set (VmRSS of /proc/self/status) in bytes, or 0
// where /proc is not there. It counts what the Go runtime took from the OS and has not
// returned, live or not; the kernel's socket buffers are not in it.
func readRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// runInproc starts a hub, measures the socket/direct ratio against it, then runs the
// clients in a child process and measures the hub's memory while the child holds its
// idle watching sockets.
func (m *Main) runInproc(ctx context.Context) error {
	o := m.opt
	ih, err := startInproc(ctx, o.redisURL, o.entityType)
	if err != nil {
		return err
	}
	defer func() {
		if err := ih.stop(); err != nil {
			fmt.Fprintln(m.Stderr, "lockbench: stopping the hub:", err)
		}
	}()
	cl := &client{url: ih.url, tokenURL: ih.token, tenant: o.tenant, typ: o.entityType, http: &http.Client{}}
	defer cl.http.CloseIdleConnections()

	var ratio *ratioResult
	if o.pairs > 0 {
		r, err := measureRatio(ctx, ih.store, cl, o.pairs, 0)
		if err != nil {
			return fmt.Errorf("ratio: %w", err)
		}
		ratio = &r
	}

	if o.memProfile != "" {
		// Every allocation of the sockets' set-up, so the profile reads per socket. It
		// slows the set-up down; the load phase runs at the default rate again.
		runtime.MemProfileRate = 1
	}
	before := sampleMemory()
	var mem memResult
	stopCPU := func() {}
	defer func() { stopCPU() }()
	res, err := m.runChildProcess(ctx, ih, func(n int) {
		after := sampleMemory()
		sockets := int(gauge(ih.reg, "lockhub_hub_sockets"))
		mem = memResult{Sockets: sockets}
		if o.memProfile != "" {
			writeProfile(m.Stderr, o.memProfile, func(w io.Writer) error { return pprof.WriteHeapProfile(w) })
			runtime.MemProfileRate = 512 << 10
		}
		if o.cpuProfile != "" {
			stopCPU = startCPUProfile(m.Stderr, o.cpuProfile)
		}
		if sockets > 0 {
			mem.HeapPerSocket = (float64(after.heap) - float64(before.heap)) / float64(sockets)
			mem.StackPerSock = (float64(after.stack) - float64(before.stack)) / float64(sockets)
			mem.TotalPerSock = mem.HeapPerSocket + mem.StackPerSock
			mem.HeapInusePerSocket = (float64(after.heapInuse) - float64(before.heapInuse)) / float64(sockets)
			mem.RSSPerSocket = (float64(after.rss) - float64(before.rss)) / float64(sockets)
			mem.Goroutines = (after.goroutines - before.goroutines) / sockets
			// Idle sockets, after the hub has returned what their set-up left behind.
			deadline := time.Now().Add(trimWait)
			for gauge(ih.reg, "lockhub_memory_trims_total") < 1 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond) // polls the hub's counter; the trimmer's clock is its own
			}
			if gauge(ih.reg, "lockhub_memory_trims_total") >= 1 {
				trimmed := sampleMemory()
				mem.RSSAfterTrimPerSocket = (float64(trimmed.rss) - float64(before.rss)) / float64(sockets)
			}
		}
	})
	if err != nil {
		return err
	}
	m.report(mode{name: "in-process hub on " + ih.redis, url: ih.url}, ratio, &mem, res, hubCounters(ih.reg))
	return nil
}

// startChild starts this program again with args, in a child process that ends with
// ctx, its stderr on m.Stderr, and returns the pipes to its stdin and from its stdout.
func (m *Main) startChild(ctx context.Context, args ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = m.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, err
	}
	return cmd, stdin, stdout, nil
}

// runChildProcess runs the clients in a child process of this program and returns its
// result. measure runs once the child holds its watchers open and idle.
func (m *Main) runChildProcess(ctx context.Context, ih *inprocHub, measure func(watchers int)) (loadResult, error) {
	o := m.opt
	remaining := o.timeout
	if d, ok := ctx.Deadline(); ok {
		remaining = time.Until(d)
	}
	cmd, stdin, stdout, err := m.startChild(ctx, "-child",
		"-url", ih.url, "-token-url", ih.token,
		"-watchers", strconv.Itoa(o.watchers), "-claimers", strconv.Itoa(o.claimers),
		"-claims", strconv.Itoa(o.claims), "-rate", strconv.FormatFloat(o.rate, 'f', -1, 64),
		"-dialers", strconv.Itoa(o.dialers), "-timeout", remaining.String(),
		"-tenant", o.tenant, "-type", o.entityType, "-pairs", "0", "-floor", strconv.Itoa(o.floor))
	if err != nil {
		return loadResult{}, err
	}
	res, rerr := func() (loadResult, error) {
		defer stdin.Close() // the child stops waiting for GO
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "READY "):
				n, _ := strconv.Atoi(strings.TrimPrefix(line, "READY "))
				measure(n)
				if _, err := io.WriteString(stdin, "GO\n"); err != nil {
					return loadResult{}, err
				}
			case strings.HasPrefix(line, "RESULT "):
				var res loadResult
				err := json.Unmarshal([]byte(strings.TrimPrefix(line, "RESULT ")), &res)
				return res, err
			}
		}
		return loadResult{}, fmt.Errorf("the client process ended without a result: %v", sc.Err())
	}()
	_, _ = io.Copy(io.Discard, stdout) // let the child finish writing
	werr := cmd.Wait()
	if rerr != nil {
		return res, errors.Join(rerr, werr)
	}
	return res, werr
}

// runChild is the child process: the clients of a run, driven over stdin and stdout.
func (m *Main) runChild(ctx context.Context) error {
	o := m.opt
	cl := &client{url: o.url, tokenURL: o.tokenURL, tenant: o.tenant, typ: o.entityType, http: &http.Client{}}
	defer cl.http.CloseIdleConnections()
	in := bufio.NewScanner(m.Stdin)
	res, err := cl.load(ctx, o, func(n int) error {
		fmt.Fprintf(m.Stdout, "READY %d\n", n)
		if !in.Scan() || in.Text() != "GO" {
			return errors.New("the parent did not say GO")
		}
		return nil
	})
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(m.Stdout, "RESULT %s\n", b)
	return err
}

// runExternal drives a running hub from this process.
func (m *Main) runExternal(ctx context.Context) error {
	o := m.opt
	cl := &client{url: o.url, tokenURL: o.tokenURL, tenant: o.tenant, typ: o.entityType, http: &http.Client{}}
	defer cl.http.CloseIdleConnections()
	var ratio *ratioResult
	if o.redisURL != "" && o.pairs > 0 {
		rdb, err := locks.NewClient(o.redisURL, false)
		if err != nil {
			return err
		}
		defer rdb.Close()
		lockable, err := locks.NewRegistry(o.entityType)
		if err != nil {
			return err
		}
		store, err := locks.NewStore(locks.Config{Client: rdb, Registry: lockable,
			MaxChangesPerPerson: benchChangesPerPerson, ChangesBurst: benchChangesPerPerson})
		if err != nil {
			return err
		}
		// 20 pairs a second: 40 frames, under the hub's 50 a second per socket.
		r, err := measureRatio(ctx, store, cl, o.pairs, 50*time.Millisecond)
		if err != nil {
			return fmt.Errorf("ratio: %w", err)
		}
		ratio = &r
	}
	res, err := cl.load(ctx, o, func(int) error { return nil })
	if err != nil {
		return err
	}
	m.report(mode{name: "hub at " + o.url, url: o.url}, ratio, nil, res, nil)
	return nil
}

// writeProfile writes a profile to path, saying so or why not on log.
func writeProfile(log io.Writer, path string, write func(io.Writer) error) {
	f, err := os.Create(path)
	if err == nil {
		err = errors.Join(write(f), f.Close())
	}
	if err != nil {
		fmt.Fprintf(log, "lockbench: profile %s: %v\n", path, err)
	}
}

// startCPUProfile starts the CPU profile of this process into path and returns what
// stops it; a profile that cannot start is logged and skipped.
func startCPUProfile(log io.Writer, path string) func() {
	return startCapture(log, "profile", path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace starts the execution trace of this process into path (runtime/trace) and
// returns what stops it; a trace that cannot start is logged and skipped.
func startTrace(log io.Writer, path string) func() {
	return startCapture(log, "trace", path, trace.Start, trace.Stop)
}

// startCapture starts writing what (a profile, a trace) into path with start, and
// returns what stops it with stop and closes the file; one that cannot start is
// logged and skipped.
func startCapture(log io.Writer, what, path string, start func(io.Writer) error, stop func()) func() {
	f, err := os.Create(path)
	if err == nil {
		if err = start(f); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(log, "lockbench: %s %s: %v\n", what, path, err)
		return func() {}
	}
	return func() {
		stop()
		if err := f.Close(); err != nil {
			fmt.Fprintf(log, "lockbench: %s %s: %v\n", what, path, err)
		}
	}
}
