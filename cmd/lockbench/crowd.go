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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// -mode crowd: what a reconnect crowd costs. -watchers sockets watch the type on
// instance A; A shuts down (1001 to every socket, as on SIGTERM); once every socket has
// seen its close, all of them dial instance B at the same moment (-dialers at a time),
// authenticate and watch again. Measured: the time until all are watching on B, the
// Redis commands the crowd cost (INFO stats total_commands_processed on -redis-url),
// and the same crowd without the watch (connect and auth alone) on B, before and after,
// as the baseline of the ratio; and the CPU time over each (getrusage), per socket, of
// this process (the hubs') and of the child (the clients': they share the machine's
// cores with the hubs, so what they spend slows the crowd too).
//
// One round on a shared machine proves little: the same crowd ranges over a third
// between rounds. A run is a crowd on B that is not measured, a baseline, and -rounds
// rounds of (a fresh A, its crowd on B, a baseline); each round is set against the
// baselines on both sides of it, and the report gives the median of the rounds.
//
// The clients run in a child process (-child): a process holds at most the file limit
// of sockets, and the hubs hold as many as the clients.

// maxSnapshotLocks bounds -snapshot-locks: a snapshot of 1,000 locks is about 200 KiB.
const maxSnapshotLocks = 1000

// maxRounds bounds -rounds: a round of 10,000 watchers takes about 12 s.
const maxRounds = 20

// crowdPhase is one crowd: n sockets opened at once.
type crowdPhase struct {
	Seconds float64 `json:"seconds"`
	Failed  int     `json:"failed"`
	Closes  int     `json:"closes"` // AWAIT: sockets the hub closed with 1001
	// CPUSeconds is the clients' process CPU over an OPEN (getrusage).
	CPUSeconds float64 `json:"cpuSeconds"`
}

// rate is the phase's sockets a second.
func (p crowdPhase) rate(n int) float64 {
	if p.Seconds <= 0 {
		return 0
	}
	return float64(n) / p.Seconds
}

// crowdResult is what a crowd run measured: -rounds rounds, each against the baseline
// before and after it.
type crowdResult struct {
	watchers, dialers int
	first             crowdPhase    // connect + auth alone on B, before the first round
	firstCPU          time.Duration // the hubs' process CPU during first
	rounds            []crowdRound
}

// crowdRound is one round: a fresh instance A gets the watchers and goes away, they
// reconnect to B at once, and then the same crowd connects to B without the watch.
type crowdRound struct {
	setupA                crowdPhase    // the watchers, on A
	goneA                 crowdPhase    // from A's shutdown until every socket saw its close
	crowd                 crowdPhase    // connect + auth + watch on B, at once
	base                  crowdPhase    // connect + auth alone on B, after the crowd
	crowdCmds, baseCmds   int64         // Redis commands during the crowd and during base
	crowdLists, baseLists float64       // List operations of B's store during them
	crowdCPU, baseCPU     time.Duration // the hubs' process CPU during the crowd and during base
}

// crowdRig is what the rounds of a crowd run share: hub B, the clients and Redis.
type crowdRig struct {
	m   *Main
	b   *inprocHub
	ch  *crowdClients
	rdb redis.UniversalClient
}

// runCrowd runs -mode crowd.
func (m *Main) runCrowd(ctx context.Context) error {
	o := m.opt
	b, err := startInproc(ctx, o.redisURL, o.entityType)
	if err != nil {
		return err
	}
	defer func() {
		if err := b.stop(); err != nil {
			fmt.Fprintln(m.Stderr, "lockbench: stopping hub B:", err)
		}
	}()
	rdb, err := locks.NewClient(o.redisURL, false)
	if err != nil {
		return err
	}
	defer rdb.Close()

	// Locks for the snapshots, released at the end.
	prefix := "lbc-" + strings.ToLower(randText(6)) + "-"
	holder := protocol.Holder{OID: "u-lockbench-crowd", Name: "lockbench crowd"}
	for i := range o.snapshotLocks {
		ref := locks.Ref{Tenant: o.tenant, Type: o.entityType, UID: prefix + strconv.Itoa(i)}
		if _, err := b.store.Locks.Claim(ctx, ref, holder, "lockbench"); err != nil {
			return err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_, _ = b.store.Locks.Release(cctx, ref, holder, "lockbench") // best effort: the lease ends it anyway
		}()
	}

	ch, err := m.startCrowdClients(ctx)
	if err != nil {
		return err
	}
	defer ch.quit()
	g := &crowdRig{m: m, b: b, ch: ch, rdb: rdb}

	// A first crowd on B, not measured, so that no measured phase is the process's
	// first: that one grows the heap, the goroutine stacks and the kernel's socket
	// tables, and was the slowest of every run.
	var warm crowdPhase
	var warmCPU time.Duration
	if err := g.open(b, askWatch, &warm, &warmCPU); err != nil {
		return err
	}
	if err := g.closeOnB(ctx); err != nil {
		return err
	}
	res := crowdResult{watchers: o.watchers, dialers: o.dialers, rounds: make([]crowdRound, o.rounds)}
	if err := g.open(b, askNothing, &res.first, &res.firstCPU); err != nil {
		return err
	}
	if err := g.closeOnB(ctx); err != nil {
		return err
	}
	for i := range res.rounds {
		profile := ""
		if i == 0 {
			profile = o.cpuProfile
		}
		if err := g.round(ctx, &res.rounds[i], profile); err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
	}
	m.reportCrowd(b, res)
	return nil
}

// What each socket of a crowd sends after its auth (OPEN's last field).
const (
	askNothing = "0"
	askWatch   = "1"
	askPing    = "2" // -crowd-ping
)

// crowdAsk is what the measured crowd sends after its auth: its watch, or with
// -crowd-ping a ping.
func (g *crowdRig) crowdAsk() string {
	if g.m.opt.crowdPing {
		return askPing
	}
	return askWatch
}

// open opens the crowd on ih, each socket sending ask after its auth, into into, and
// adds the hubs' process CPU it took to cpu.
func (g *crowdRig) open(ih *inprocHub, ask string, into *crowdPhase, cpu *time.Duration) error {
	cmd := fmt.Sprintf("OPEN %s %s %s", ih.url, ih.token, ask)
	cpu0 := processCPU()
	p, err := g.ch.do(cmd)
	*cpu += processCPU() - cpu0
	*into = p
	if err == nil && p.Failed > 0 {
		err = fmt.Errorf("%s: %d sockets failed", cmd, p.Failed)
	}
	return err
}

// closeOnB closes the clients' sockets and waits until B has let them go.
func (g *crowdRig) closeOnB(ctx context.Context) error {
	if _, err := g.ch.do("CLOSE"); err != nil {
		return err
	}
	return waitSockets(ctx, g.b, 0)
}

// round runs one round into r; profile, when set, is where the CPU profiles of its
// crowd and of its baseline (profile.connect) go.
func (g *crowdRig) round(ctx context.Context, r *crowdRound, profile string) error {
	o := g.m.opt
	a, err := startInproc(ctx, o.redisURL, o.entityType)
	if err != nil {
		return err
	}
	var setupCPU time.Duration
	if err := g.open(a, askWatch, &r.setupA, &setupCPU); err != nil {
		_ = a.stop() // an error of a round that failed already
		return err
	}
	// A goes away: every socket sees 1001; then the crowd dials B at once.
	awaited := make(chan struct{})
	var awaitErr error
	go func() {
		defer close(awaited)
		r.goneA, awaitErr = g.ch.do("AWAIT")
	}()
	if err := a.stop(); err != nil {
		fmt.Fprintln(g.m.Stderr, "lockbench: stopping hub A:", err)
	}
	<-awaited
	if awaitErr != nil {
		return awaitErr
	}

	measure := func(watch bool, into *crowdPhase, cpu *time.Duration, cmds *int64, lists *float64, profile string) error {
		cmds0, lists0 := redisCommands(ctx, g.rdb), listOps(g.b)
		stopCPU := func() {}
		if profile != "" {
			stopCPU = startCPUProfile(g.m.Stderr, profile)
		}
		ask := askNothing
		if watch {
			ask = g.crowdAsk()
		}
		err := g.open(g.b, ask, into, cpu)
		stopCPU()
		if err != nil {
			return err
		}
		*cmds, *lists = redisCommands(ctx, g.rdb)-cmds0, listOps(g.b)-lists0
		return g.closeOnB(ctx)
	}
	if err := measure(true, &r.crowd, &r.crowdCPU, &r.crowdCmds, &r.crowdLists, profile); err != nil {
		return err
	}
	if profile != "" {
		profile += ".connect" // the same crowd without the watch, to compare with: pprof -diff_base
	}
	return measure(false, &r.base, &r.baseCPU, &r.baseCmds, &r.baseLists, profile)
}

// listOps is how many List operations ih's store made.
func listOps(ih *inprocHub) float64 {
	mfs, err := ih.reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "lockhub_store_operations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == "list" {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// redisCommands is the server's total_commands_processed (INFO stats); -1 when it
// cannot be read. The INFO itself counts one.
func redisCommands(ctx context.Context, rdb redis.UniversalClient) int64 {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := rdb.Info(cctx, "stats").Result()
	if err != nil {
		return -1
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return -1
}

// waitSockets waits until ih holds n sockets.
func waitSockets(ctx context.Context, ih *inprocHub, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for int(gauge(ih.reg, "lockhub_hub_sockets")) != n {
		if time.Now().After(deadline) {
			return fmt.Errorf("the hub still holds %.0f sockets, want %d", gauge(ih.reg, "lockhub_hub_sockets"), n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // a poll of the hub's gauge
		}
	}
	return nil
}

// crowdFigures are what one round of a crowd run comes to, each side against the
// baseline before and after it.
type crowdFigures struct {
	crowdRate, baseRate float64 // sockets a second
	timeRatio           float64 // the crowd's time over the baseline's
	hubCPU, hubBaseCPU  float64 // the hubs' process CPU per socket, µs
	cliCPU, cliBaseCPU  float64 // the clients' process CPU per socket, µs
}

// figures computes round i's figures.
func (r crowdResult) figures(i int) crowdFigures {
	before, beforeCPU := r.first, r.firstCPU
	if i > 0 {
		before, beforeCPU = r.rounds[i-1].base, r.rounds[i-1].baseCPU
	}
	rd := r.rounds[i]
	n := float64(r.watchers)
	base := (before.Seconds + rd.base.Seconds) / 2
	f := crowdFigures{
		crowdRate:  rd.crowd.rate(r.watchers),
		hubCPU:     float64(rd.crowdCPU.Microseconds()) / n,
		hubBaseCPU: float64((beforeCPU + rd.baseCPU).Microseconds()) / (2 * n),
		cliCPU:     rd.crowd.CPUSeconds * 1e6 / n,
		cliBaseCPU: (before.CPUSeconds + rd.base.CPUSeconds) * 1e6 / (2 * n),
	}
	if base > 0 {
		f.baseRate, f.timeRatio = n/base, rd.crowd.Seconds/base
	}
	return f
}

// spread is the median of some figure over the rounds, with its least and greatest.
type spread struct{ med, lo, hi float64 }

func spreadOf(r crowdResult, figure func(crowdFigures) float64) spread {
	v := make([]float64, len(r.rounds))
	for i := range r.rounds {
		v[i] = figure(r.figures(i))
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + med) / 2
	}
	return spread{med: med, lo: v[0], hi: v[len(v)-1]}
}

// format is the median in f, and the range when the rounds differ.
func (s spread) format(f string) string {
	if s.lo == s.hi {
		return fmt.Sprintf(f, s.med)
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s.med, s.lo, s.hi)
}

func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func (m *Main) reportCrowd(b *inprocHub, r crowdResult) {
	w := m.Stdout
	fmt.Fprintf(w, "lockbench %s\n", strings.Join(m.args, " "))
	fmt.Fprintf(w, "target: 2 in-process hubs on %s, clients in a child process, %d dialers; GOMAXPROCS %d\n\n",
		b.redis, r.dialers, runtime.GOMAXPROCS(0))
	n := r.watchers
	what, goals := fmt.Sprintf("a snapshot of %d locks each", m.opt.snapshotLocks), true
	again, ask := "watch again", "watch"
	if m.opt.crowdPing {
		// Not the goal's figure: the floor under it.
		what, goals = "the crowd on B sends a ping instead of its watch (-crowd-ping)", false
		again, ask = "have their pong", "ping"
	}
	fmt.Fprintf(w, "watchers            %d, %s; %d round(s), each after a fresh hub A went away\n",
		n, what, len(r.rounds))
	sent := "right behind its auth, as the browser client does (-pipeline)"
	if !m.opt.pipeline {
		sent = "after the welcome (-pipeline=false)"
	}
	fmt.Fprintf(w, "each socket sends   its %s %s\n\n", ask, sent)
	fmt.Fprintf(w, "round  setup on A  A gone  crowd on B  connect+auth on B  time ratio  hub CPU ratio  client CPU ratio\n")
	for i, rd := range r.rounds {
		f := r.figures(i)
		fmt.Fprintf(w, "%5d  %6.0f/s  %6.3fs  %8.0f/s  %15.0f/s  %10.2f  %13.2f  %16.2f\n", i+1,
			rd.setupA.rate(n), rd.goneA.Seconds, f.crowdRate, f.baseRate, f.timeRatio,
			ratioOf(f.hubCPU, f.hubBaseCPU), ratioOf(f.cliCPU, f.cliBaseCPU))
	}
	last := r.rounds[len(r.rounds)-1]
	of := "median of the rounds, least–greatest in brackets"
	if len(r.rounds) == 1 {
		of = "one round"
	}
	fmt.Fprintf(w, "\n%s:\n", of)
	fmt.Fprintf(w, "A going away        all %d sockets saw their close (%d with 1001, last round)\n", n, last.goneA.Closes)
	rate := spreadOf(r, func(f crowdFigures) float64 { return f.crowdRate })
	fmt.Fprintf(w, "crowd on B          all %d %s: %s sockets/s%s\n", n, again, rate.format("%.0f"),
		verdict(goals && n >= 10000, rate.med >= goalCrowdRate, fmt.Sprintf("goal ≥ %d/s for 10,000", goalCrowdRate)))
	fmt.Fprintf(w, "connect+auth on B   %s sockets/s\n", spreadOf(r, func(f crowdFigures) float64 { return f.baseRate }).format("%.0f"))
	ratio := spreadOf(r, func(f crowdFigures) float64 { return f.timeRatio })
	fmt.Fprintf(w, "crowd / connect     %s of the time%s\n", ratio.format("%.2f"),
		verdict(goals && ratio.med > 0, ratio.med <= goalCrowdRatio, fmt.Sprintf("goal ≤ %.1f", goalCrowdRatio)))
	if r.firstCPU > 0 {
		fmt.Fprintf(w, "hub CPU per socket  %s µs for connect + auth + %s, %s µs for connect + auth alone: %s\n",
			spreadOf(r, func(f crowdFigures) float64 { return f.hubCPU }).format("%.0f"), ask,
			spreadOf(r, func(f crowdFigures) float64 { return f.hubBaseCPU }).format("%.0f"),
			spreadOf(r, func(f crowdFigures) float64 { return ratioOf(f.hubCPU, f.hubBaseCPU) }).format("%.2f"))
	}
	// In a test the clients share the hubs' process: their CPU is not theirs alone.
	if r.first.CPUSeconds > 0 && !m.clientsInProcess {
		fmt.Fprintf(w, "client CPU          %s µs per socket for connect + auth + %s, %s µs for connect + auth alone: %s\n",
			spreadOf(r, func(f crowdFigures) float64 { return f.cliCPU }).format("%.0f"), ask,
			spreadOf(r, func(f crowdFigures) float64 { return f.cliBaseCPU }).format("%.0f"),
			spreadOf(r, func(f crowdFigures) float64 { return ratioOf(f.cliCPU, f.cliBaseCPU) }).format("%.2f"))
	}
	fmt.Fprintf(w, "redis commands      %d during the last crowd (%.2f per socket), %d during connect+auth alone\n",
		last.crowdCmds, float64(last.crowdCmds)/float64(n), last.baseCmds)
	fmt.Fprintf(w, "list operations     %.0f during the last crowd, %.0f during connect+auth alone (B's lockhub_store_operations_total{op=\"list\"})\n",
		last.crowdLists, last.baseLists)
}

// Goals of the issue "reconnect crowds are cheap".
const (
	goalCrowdRate  = 3500
	goalCrowdRatio = 1.2
)

// crowdClients drives the clients: a child process, or in a test a goroutine.
type crowdClients struct {
	in   io.WriteCloser
	out  *bufio.Scanner
	wait func() error
}

// do sends one command and reads its answer, "DONE <json>".
func (c *crowdClients) do(cmd string) (crowdPhase, error) {
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		return crowdPhase{}, err
	}
	for c.out.Scan() {
		line := c.out.Text()
		if v, ok := strings.CutPrefix(line, "DONE "); ok {
			var p crowdPhase
			err := json.Unmarshal([]byte(v), &p)
			return p, err
		}
		if v, ok := strings.CutPrefix(line, "ERROR "); ok {
			return crowdPhase{}, fmt.Errorf("%s: %s", cmd, v)
		}
	}
	return crowdPhase{}, fmt.Errorf("%s: the clients ended: %v", cmd, c.out.Err())
}

func (c *crowdClients) quit() {
	_ = c.in.Close() // the clients end at EOF
	_ = c.wait()     // they said what went wrong on stderr
}

// startCrowdClients starts the clients' process (in a test, m.clientsInProcess: a
// goroutine of this one).
func (m *Main) startCrowdClients(ctx context.Context) (*crowdClients, error) {
	o := m.opt
	if m.clientsInProcess {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := runCrowdClients(ctx, o, inR, outW)
			_ = outW.CloseWithError(err) // the reader sees err, or EOF
			done <- err
		}()
		sc := bufio.NewScanner(outR)
		return &crowdClients{in: inW, out: sc, wait: func() error {
			_, _ = io.Copy(io.Discard, outR)
			return <-done
		}}, nil
	}
	cmd, in, out, err := m.startChild(ctx, "-mode", modeCrowd, "-child", "-redis-url", o.redisURL,
		"-watchers", strconv.Itoa(o.watchers), "-dialers", strconv.Itoa(o.dialers),
		"-tenant", o.tenant, "-type", o.entityType, "-timeout", o.timeout.String(),
		"-pipeline="+strconv.FormatBool(o.pipeline))
	if err != nil {
		return nil, err
	}
	return &crowdClients{in: in, out: bufio.NewScanner(out), wait: func() error {
		_, _ = io.Copy(io.Discard, out)
		return cmd.Wait()
	}}, nil
}

// runCrowdChild is the clients' process of -mode crowd.
func (m *Main) runCrowdChild(ctx context.Context) error {
	return runCrowdClients(ctx, m.opt, m.Stdin, m.Stdout)
}

// crowdSocket is one socket of the clients, read until it ends.
type crowdSocket struct {
	ws   *websocket.Conn
	code websocket.StatusCode // how it ended; set before done closes
	done chan struct{}
}

// runCrowdClients answers the parent's commands, one line each, until in ends:
//
//	OPEN <ws url> <token url> <0|1|2>      open -watchers sockets at once (-dialers at a
//	                                       time): connect, auth, and then nothing (0),
//	                                       a watch (1) or a ping (2), sent right behind
//	                                       the auth with -pipeline
//	AWAIT                                  wait until every open socket has ended
//	CLOSE                                  close every open socket
//
// Each is answered "DONE <crowdPhase as JSON>" or "ERROR <why>".
func runCrowdClients(ctx context.Context, o options, in io.Reader, out io.Writer) error {
	var socks []*crowdSocket
	defer func() { closeCrowd(socks) }()
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	sc := bufio.NewScanner(in)
	answer := func(p crowdPhase, err error) error {
		if err != nil {
			_, werr := fmt.Fprintf(out, "ERROR %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			return werr
		}
		b, _ := json.Marshal(p) // plain numbers
		_, werr := fmt.Fprintf(out, "DONE %s\n", b)
		return werr
	}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		var p crowdPhase
		var err error
		switch {
		case len(f) == 4 && f[0] == "OPEN":
			cl := &client{url: f[1], tokenURL: f[2], tenant: o.tenant, typ: o.entityType, http: hc}
			var opened []*crowdSocket
			cpu0 := processCPU()
			p, opened, err = openCrowd(ctx, cl, o.watchers, o.dialers, f[3], o.pipeline)
			p.CPUSeconds = (processCPU() - cpu0).Seconds()
			socks = append(socks, opened...)
		case len(f) == 1 && f[0] == "AWAIT":
			start := time.Now()
			for _, s := range socks {
				select {
				case <-s.done:
				case <-ctx.Done():
				}
				if s.code == websocket.StatusGoingAway {
					p.Closes++
				}
			}
			p.Seconds = time.Since(start).Seconds()
			err = ctx.Err()
			socks = nil
		case len(f) == 1 && f[0] == "CLOSE":
			closeCrowd(socks)
			socks = nil
		default:
			err = fmt.Errorf("unknown command %q", sc.Text())
		}
		if werr := answer(p, err); werr != nil {
			return werr
		}
	}
	return sc.Err()
}

// openCrowd opens n sockets at once, dialers at a time, and times them all; each sends
// ask after its auth, right behind it with pipeline.
func openCrowd(ctx context.Context, cl *client, n, dialers int, ask string, pipeline bool) (crowdPhase, []*crowdSocket, error) {
	token, err := cl.token(ctx, "u-lockbench-crowd")
	if err != nil {
		return crowdPhase{}, nil, err
	}
	var req *protocol.Request
	switch ask {
	case askWatch:
		req = cl.watchRequest()
	case askPing:
		req = &protocol.Request{ID: "p", Type: protocol.FramePing}
	}
	socks := make([]*crowdSocket, n)
	var failed atomic.Int64
	var firstErr atomic.Value
	sem := make(chan struct{}, dialers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range socks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ws, err := cl.dial(ctx, token, req, pipeline)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
				return
			}
			s := &crowdSocket{ws: ws, done: make(chan struct{})}
			socks[i] = s
			go s.read() // joined by closeCrowd or AWAIT, through s.done
		})
	}
	wg.Wait()
	p := crowdPhase{Seconds: time.Since(start).Seconds(), Failed: int(failed.Load())}
	var out []*crowdSocket
	for _, s := range socks {
		if s != nil {
			out = append(out, s)
		}
	}
	if e, ok := firstErr.Load().(error); ok {
		fmt.Fprintf(os.Stderr, "lockbench: %d sockets failed, the first: %v\n", p.Failed, e)
	}
	return p, out, nil
}

// read reads the socket until it ends: a hub's close frame, and pings, need a reader.
func (s *crowdSocket) read() {
	defer close(s.done)
	for {
		if _, _, err := s.ws.Read(context.Background()); err != nil {
			s.code = websocket.CloseStatus(err)
			return
		}
	}
}

func closeCrowd(socks []*crowdSocket) {
	for _, s := range socks {
		_ = s.ws.CloseNow() // the run is over for it: no handshake
	}
	for _, s := range socks {
		<-s.done
	}
}

var errCrowdRedis = errors.New("-mode crowd runs its two hubs on one real Redis: give -redis-url")
