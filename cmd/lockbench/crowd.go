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
// The clients run in a child process (-child): a process holds at most the file limit
// of sockets, and the hubs hold as many as the clients.

// maxSnapshotLocks bounds -snapshot-locks: a snapshot of 1,000 locks is about 200 KiB.
const maxSnapshotLocks = 1000

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

// crowdResult is what a crowd run measured.
type crowdResult struct {
	watchers, dialers    int
	setupA               crowdPhase    // the first watchers, on A
	goneA                crowdPhase    // from A's shutdown until every socket saw its close
	crowd                crowdPhase    // connect + auth + watch on B, at once
	base1, base2         crowdPhase    // connect + auth alone on B, before and after
	crowdCmds, baseCmds  int64         // Redis commands during the crowd and during base2
	crowdLists, baseList float64       // List operations of B's store during them
	crowdCPU, baseCPU    time.Duration // the hubs' process CPU during the crowd and during base1 + base2
}

// runCrowd runs -mode crowd.
func (m *Main) runCrowd(ctx context.Context) error {
	o := m.opt
	a, err := startInproc(ctx, o.redisURL, o.entityType)
	if err != nil {
		return err
	}
	aStopped := false
	defer func() {
		if !aStopped {
			_ = a.stop() // an error of a run that failed already
		}
	}()
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
		if _, err := a.store.Claim(ctx, ref, holder, "lockbench"); err != nil {
			return err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_, _ = b.store.Release(cctx, ref, holder, "lockbench") // best effort: the lease ends it anyway
		}()
	}

	ch, err := m.startCrowdClients(ctx)
	if err != nil {
		return err
	}
	defer ch.quit()
	res := crowdResult{watchers: o.watchers, dialers: o.dialers}
	closeOnB := func() error {
		if _, err := ch.do("CLOSE"); err != nil {
			return err
		}
		return waitSockets(ctx, b, 0)
	}
	step := func(cmd string, into *crowdPhase, cpu *time.Duration) error {
		cpu0 := processCPU()
		p, err := ch.do(cmd)
		*cpu += processCPU() - cpu0
		*into = p
		if err == nil && p.Failed > 0 {
			err = fmt.Errorf("%s: %d sockets failed", cmd, p.Failed)
		}
		return err
	}
	var setupCPU time.Duration
	if err := step(fmt.Sprintf("OPEN %s %s 0", b.url, b.token), &res.base1, &res.baseCPU); err != nil {
		return err
	}
	if err := closeOnB(); err != nil {
		return err
	}
	if err := step(fmt.Sprintf("OPEN %s %s 1", a.url, a.token), &res.setupA, &setupCPU); err != nil {
		return err
	}
	// A goes away: every socket sees 1001; then the crowd dials B at once.
	awaited := make(chan struct{})
	var awaitRes crowdPhase
	var awaitErr error
	go func() {
		defer close(awaited)
		awaitRes, awaitErr = ch.do("AWAIT")
	}()
	aStopped = true
	if err := a.stop(); err != nil {
		fmt.Fprintln(m.Stderr, "lockbench: stopping hub A:", err)
	}
	<-awaited
	res.goneA = awaitRes
	if awaitErr != nil {
		return awaitErr
	}
	cmds0, lists0 := redisCommands(ctx, rdb), listOps(b)
	stopCPU := func() {}
	if o.cpuProfile != "" {
		stopCPU = startCPUProfile(m.Stderr, o.cpuProfile)
	}
	err = step(fmt.Sprintf("OPEN %s %s 1", b.url, b.token), &res.crowd, &res.crowdCPU)
	stopCPU()
	if err != nil {
		return err
	}
	res.crowdCmds, res.crowdLists = redisCommands(ctx, rdb)-cmds0, listOps(b)-lists0
	if err := closeOnB(); err != nil {
		return err
	}
	cmds0, lists0 = redisCommands(ctx, rdb), listOps(b)
	if o.cpuProfile != "" {
		// The same crowd without the watch, to compare with: pprof -diff_base.
		stopCPU = startCPUProfile(m.Stderr, o.cpuProfile+".connect")
	}
	err = step(fmt.Sprintf("OPEN %s %s 0", b.url, b.token), &res.base2, &res.baseCPU)
	stopCPU()
	if err != nil {
		return err
	}
	res.baseCmds, res.baseList = redisCommands(ctx, rdb)-cmds0, listOps(b)-lists0
	if err := closeOnB(); err != nil {
		return err
	}
	m.reportCrowd(b, res)
	return nil
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

func (m *Main) reportCrowd(b *inprocHub, r crowdResult) {
	w := m.Stdout
	fmt.Fprintf(w, "lockbench %s\n", strings.Join(m.args, " "))
	fmt.Fprintf(w, "target: 2 in-process hubs on %s, clients in a child process, %d dialers; GOMAXPROCS %d\n\n",
		b.redis, r.dialers, runtime.GOMAXPROCS(0))
	n := r.watchers
	fmt.Fprintf(w, "watchers            %d, a snapshot of %d locks each\n", n, m.opt.snapshotLocks)
	fmt.Fprintf(w, "setup on A          %.3fs  %.0f sockets/s (connect + auth + watch)\n", r.setupA.Seconds, r.setupA.rate(n))
	fmt.Fprintf(w, "A going away        %.3fs until all %d sockets saw their close (%d with 1001)\n", r.goneA.Seconds, n, r.goneA.Closes)
	base := (r.base1.Seconds + r.base2.Seconds) / 2
	baseRate := 0.0
	if base > 0 {
		baseRate = float64(n) / base
	}
	ratio := 0.0
	if base > 0 {
		ratio = r.crowd.Seconds / base
	}
	fmt.Fprintf(w, "crowd on B          %.3fs until all %d watch again: %.0f sockets/s%s\n", r.crowd.Seconds, n, r.crowd.rate(n),
		verdict(n >= 10000, r.crowd.rate(n) >= goalCrowdRate, fmt.Sprintf("goal ≥ %d/s for 10,000", goalCrowdRate)))
	fmt.Fprintf(w, "connect+auth on B   %.3fs before, %.3fs after: %.0f sockets/s\n", r.base1.Seconds, r.base2.Seconds, baseRate)
	fmt.Fprintf(w, "crowd / connect     %.2f of the time, %.2f of the rate%s\n", ratio, r.crowd.rate(n)/max(baseRate, 1),
		verdict(base > 0, ratio <= goalCrowdRatio, fmt.Sprintf("goal ≤ %.1f", goalCrowdRatio)))
	if r.baseCPU > 0 {
		per := func(d time.Duration, sockets int) float64 { return float64(d.Microseconds()) / float64(sockets) }
		crowdCPU, baseCPU := per(r.crowdCPU, n), per(r.baseCPU, 2*n)
		fmt.Fprintf(w, "hub CPU per socket  %.0f µs for connect + auth + watch, %.0f µs for connect + auth alone: %.2f\n",
			crowdCPU, baseCPU, crowdCPU/baseCPU)
	}
	// In a test the clients share the hubs' process: their CPU is not theirs alone.
	if base := r.base1.CPUSeconds + r.base2.CPUSeconds; base > 0 && !m.crowdInProcess {
		crowdCPU, baseCPU := r.crowd.CPUSeconds*1e6/float64(n), base*1e6/float64(2*n)
		fmt.Fprintf(w, "client CPU          %.0f µs per socket for connect + auth + watch, %.0f µs for connect + auth alone: %.2f\n",
			crowdCPU, baseCPU, crowdCPU/baseCPU)
	}
	fmt.Fprintf(w, "redis commands      %d during the crowd (%.2f per socket), %d during connect+auth alone\n",
		r.crowdCmds, float64(r.crowdCmds)/float64(n), r.baseCmds)
	fmt.Fprintf(w, "list operations     %.0f during the crowd, %.0f during connect+auth alone (B's lockhub_store_operations_total{op=\"list\"})\n",
		r.crowdLists, r.baseList)
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

// startCrowdClients starts the clients' process (in a test, m.crowdInProcess: a
// goroutine of this one).
func (m *Main) startCrowdClients(ctx context.Context) (*crowdClients, error) {
	o := m.opt
	if m.crowdInProcess {
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
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "-mode", modeCrowd, "-child", "-redis-url", o.redisURL,
		"-watchers", strconv.Itoa(o.watchers), "-dialers", strconv.Itoa(o.dialers),
		"-tenant", o.tenant, "-type", o.entityType, "-timeout", o.timeout.String())
	cmd.Stderr = m.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
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
//	OPEN <ws url> <token url> <watch 0|1>  open -watchers sockets at once (-dialers at a
//	                                       time): connect, auth, and watch when 1
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
			p, opened, err = openCrowd(ctx, cl, o.watchers, o.dialers, f[3] == "1")
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

// openCrowd opens n sockets at once, dialers at a time, and times them all.
func openCrowd(ctx context.Context, cl *client, n, dialers int, watch bool) (crowdPhase, []*crowdSocket, error) {
	token, err := cl.token(ctx, "u-lockbench-crowd")
	if err != nil {
		return crowdPhase{}, nil, err
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
			ws, err := cl.connect(ctx, token, watch)
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
