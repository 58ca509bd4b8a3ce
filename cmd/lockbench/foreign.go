package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// -mode foreign: how long a change another program makes directly in Redis takes to
// reach watchers (PROTOCOL.md §8: within 2 s, once, as the op it was, even with two
// instances). Several in-process lockhub instances share one real Redis, each with
// watchers of the type; a writer runs the .NET service's own claim and release scripts
// (redistest.DotNet, byte for byte from the story) at random moments on many entities.
// Nothing publishes those changes: each reaches the watchers only through the sweep of
// one of the instances.

// entityGap is the least time between two changes of one entity. A claim and its
// release within one sweep interval leave nothing for the sweep to see (the contract's
// bound is 2 s), so changes of an entity are spaced further apart than that: every
// change must then arrive, and arrive once.
const entityGap = 2500 * time.Millisecond

// foreignSettle is how long the run waits for the last changes' events after the last
// write: the contract's 2 s, plus a margin for a loaded machine.
const foreignSettle = 5 * time.Second

// change is one write of the .NET scripts.
type change struct {
	uid string
	op  protocol.Op // Acquired for a claim, Released for a release
	at  time.Time   // just before the script was sent
}

// arrival is one lock event of the run that a watcher received.
type arrival struct {
	op protocol.Op
	at time.Time
}

// foreignWatcher is one watching socket of one instance and what its reader recorded.
type foreignWatcher struct {
	instance int
	ws       *websocket.Conn
	got      map[string][]arrival // uid -> events in order; owned by the reader until done
	closed   bool                 // the hub closed the socket before the end; likewise
	done     chan struct{}
}

// foreignResult is what a foreign run measured.
type foreignResult struct {
	instances, watchers int     // instances, watchers per instance
	changes             int     // writes made
	claims, releases    int     // of which
	writeSeconds        float64 // from the first write to the last
	latency             []summary
	all                 summary
	announced           []float64 // foreign changes each instance's store announced
	errs                []string  // a change not received exactly once as its op, and the like
}

// runForeign runs -mode foreign.
func (m *Main) runForeign(ctx context.Context) error {
	o := m.opt
	hubs := make([]*inprocHub, 0, o.instances)
	defer func() {
		for _, ih := range hubs {
			if err := ih.stop(); err != nil {
				fmt.Fprintln(m.Stderr, "lockbench: stopping a hub:", err)
			}
		}
	}()
	for range o.instances {
		ih, err := startInproc(ctx, o.redisURL, o.entityType)
		if err != nil {
			return err
		}
		hubs = append(hubs, ih)
	}
	rdb, err := locks.NewClient(o.redisURL, false)
	if err != nil {
		return err
	}
	defer rdb.Close()
	res, err := m.foreign(ctx, hubs, redistest.DotNet{C: rdb})
	if err != nil {
		return err
	}
	m.reportForeign(hubs, res)
	if len(res.errs) > 0 {
		return fmt.Errorf("%d changes not received exactly once as their op", len(res.errs))
	}
	return nil
}

// foreign opens the watchers, writes, waits for the events and matches them.
func (m *Main) foreign(ctx context.Context, hubs []*inprocHub, net redistest.DotNet) (foreignResult, error) {
	o := m.opt
	prefix := "lbf-" + strings.ToLower(randText(6)) + "-"
	res := foreignResult{instances: len(hubs), watchers: o.watchers}
	var ws []*foreignWatcher
	defer func() { closeForeign(ws) }()
	var received atomic.Int64
	for i, ih := range hubs {
		cl := &client{url: ih.url, tokenURL: ih.token, tenant: o.tenant, typ: o.entityType, http: &http.Client{}}
		defer cl.http.CloseIdleConnections()
		tok, err := cl.token(ctx, "u-lockbench-watcher")
		if err != nil {
			return res, err
		}
		for range o.watchers {
			conn, err := cl.connect(ctx, tok, true)
			if err != nil {
				return res, fmt.Errorf("instance %d: %w", i, err)
			}
			w := &foreignWatcher{instance: i, ws: conn, got: map[string][]arrival{}, done: make(chan struct{})}
			ws = append(ws, w)
			go w.read(prefix, &received) // joined by closeForeign
		}
	}
	for _, ih := range hubs {
		res.announced = append(res.announced, -gauge(ih.reg, "lockhub_store_foreign_changes_total"))
	}

	changes, held, err := writeForeign(ctx, net, o, prefix)
	// Release what is still held whatever happened, so the run leaves no locks behind;
	// these releases are not measured.
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, uid := range held {
			_, _ = net.Release(cctx, o.tenant, o.entityType, uid, foreignOID) // best effort: the lease ends them anyway
		}
	}()
	if err != nil {
		return res, err
	}
	res.changes = len(changes)
	for _, c := range changes {
		if c.op == protocol.OpAcquired {
			res.claims++
		} else {
			res.releases++
		}
	}
	if len(changes) > 0 {
		res.writeSeconds = changes[len(changes)-1].at.Sub(changes[0].at).Seconds()
	}
	want := int64(len(changes) * len(ws))
	deadline := time.Now().Add(foreignSettle)
	tick := time.NewTicker(10 * time.Millisecond)
	for received.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		<-tick.C
	}
	tick.Stop()
	// A little longer, so an event announced twice is seen as such.
	if t := time.NewTimer(200 * time.Millisecond); ctx.Err() == nil {
		<-t.C
	}
	closeForeign(ws)
	for i, ih := range hubs {
		res.announced[i] += gauge(ih.reg, "lockhub_store_foreign_changes_total")
	}
	res.latency, res.all, res.errs = matchForeign(changes, ws, len(hubs))
	ws = nil
	return res, ctx.Err()
}

// The .NET holder of every claim of the run.
const (
	foreignOID  = "u-lockbench-dotnet"
	foreignName = "lockbench .NET writer"
)

// writeForeign makes o.changes changes on o.entities entities with the .NET scripts,
// at random moments (a Poisson process of o.changeRate a second), each to a random
// entity not changed within entityGap: a claim when it is free, a release when held.
// It returns the changes in order and the uids it left held.
func writeForeign(ctx context.Context, net redistest.DotNet, o options, prefix string) ([]change, []string, error) {
	type entity struct {
		uid  string
		held bool
		last time.Time
	}
	es := make([]*entity, o.entities)
	for i := range es {
		es[i] = &entity{uid: fmt.Sprintf("%s%d", prefix, i)}
	}
	heldUIDs := func() []string {
		var out []string
		for _, e := range es {
			if e.held {
				out = append(out, e.uid)
			}
		}
		return out
	}
	changes := make([]change, 0, o.changes)
	next := time.Now()
	for len(changes) < o.changes {
		next = next.Add(time.Duration(rand.ExpFloat64() / o.changeRate * float64(time.Second)))
		if d := time.Until(next); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return changes, heldUIDs(), ctx.Err()
			case <-t.C:
			}
		}
		now := time.Now()
		var e *entity
		for _, i := range rand.Perm(len(es)) {
			if now.Sub(es[i].last) >= entityGap {
				e = es[i]
				break
			}
		}
		if e == nil {
			continue // every entity changed lately: skip this moment (ParseFlags keeps this rare)
		}
		c := change{uid: e.uid, op: protocol.OpAcquired, at: time.Now()}
		var ok bool
		var err error
		if e.held {
			c.op = protocol.OpReleased
			ok, err = net.Release(ctx, o.tenant, o.entityType, e.uid, foreignOID)
		} else {
			ok, _, err = net.Claim(ctx, o.tenant, o.entityType, e.uid, foreignOID, foreignName)
		}
		if err != nil {
			return changes, heldUIDs(), fmt.Errorf(".NET %s of %s: %w", c.op, e.uid, err)
		}
		if !ok {
			return changes, heldUIDs(), fmt.Errorf(".NET %s of %s: refused (someone else wrote the entity)", c.op, e.uid)
		}
		e.held, e.last = !e.held, c.at
		changes = append(changes, c)
	}
	return changes, heldUIDs(), nil
}

// read records the run's lock events (uids with prefix) of one watcher until its
// socket closes.
func (w *foreignWatcher) read(prefix string, received *atomic.Int64) {
	defer close(w.done)
	for {
		_, data, err := w.ws.Read(context.Background()) // ends when the socket closes
		if err != nil {
			w.closed = websocket.CloseStatus(err) != websocket.StatusNormalClosure
			return
		}
		at := time.Now()
		f, err := protocol.DecodeServerFrame(data)
		if err != nil || f.Event == nil || !strings.HasPrefix(f.Event.Lock.EntityUID, prefix) {
			continue
		}
		uid := f.Event.Lock.EntityUID
		w.got[uid] = append(w.got[uid], arrival{op: f.Event.Op, at: at})
		received.Add(1)
	}
}

// closeForeign closes every socket and joins its reader.
func closeForeign(ws []*foreignWatcher) {
	for _, w := range ws {
		_ = w.ws.Close(websocket.StatusNormalClosure, "")
		<-w.done
	}
}

// matchForeign pairs each watcher's events of an entity with the entity's changes, in
// order: each change must arrive exactly once, as its op. It returns the latencies
// per instance and of all, and what did not match.
func matchForeign(changes []change, ws []*foreignWatcher, instances int) ([]summary, summary, []string) {
	byUID := map[string][]change{}
	for _, c := range changes {
		byUID[c.uid] = append(byUID[c.uid], c)
	}
	per := make([][]time.Duration, instances)
	var all []time.Duration
	var errs []string
	for wi, w := range ws {
		name := fmt.Sprintf("watcher %d (instance %d)", wi, w.instance)
		if w.closed {
			errs = append(errs, name+": closed by the hub during the run")
		}
		for uid, want := range byUID {
			got := w.got[uid]
			for i, c := range want {
				if i >= len(got) {
					errs = append(errs, fmt.Sprintf("%s: %s change %d (%s) never arrived", name, uid, i+1, c.op))
					continue
				}
				if got[i].op != c.op {
					errs = append(errs, fmt.Sprintf("%s: %s change %d arrived as %s, want %s", name, uid, i+1, got[i].op, c.op))
					continue
				}
				d := got[i].at.Sub(c.at)
				per[w.instance] = append(per[w.instance], d)
				all = append(all, d)
			}
			for _, extra := range got[min(len(got), len(want)):] {
				errs = append(errs, fmt.Sprintf("%s: %s: an extra %s event (%d changes, %d events)", name, uid, extra.op, len(want), len(got)))
			}
		}
		for uid, got := range w.got {
			if _, ok := byUID[uid]; !ok {
				errs = append(errs, fmt.Sprintf("%s: %d events of %s, which the run never changed", name, len(got), uid))
			}
		}
	}
	sums := make([]summary, instances)
	for i := range per {
		sums[i] = summarize(per[i])
	}
	return sums, summarize(all), errs
}

// randText is n random letters and digits.
func randText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

// maxErrorsShown bounds the mismatches the report lists.
const maxErrorsShown = 20

func (m *Main) reportForeign(hubs []*inprocHub, res foreignResult) {
	w := m.Stdout
	o := m.opt
	fmt.Fprintf(w, "lockbench %s\n", strings.Join(m.args, " "))
	fmt.Fprintf(w, "target: %d in-process hubs on %s, sweep interval: the service's default; GOMAXPROCS %d\n\n",
		len(hubs), hubs[0].redis, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "watchers            %d per instance, watching %s\n", res.watchers, o.entityType)
	fmt.Fprintf(w, "foreign writes      %d by the .NET scripts (%d claims, %d releases) on %d entities over %.1fs, each entity at most every %s\n",
		res.changes, res.claims, res.releases, o.entities, res.writeSeconds, entityGap)
	line := func(s summary) string {
		if s.N == 0 {
			return "no samples"
		}
		return fmt.Sprintf("p50 %.0f ms  p90 %.0f ms  p99 %.0f ms  max %.0f ms  mean %.0f ms  (n=%d)", s.P50, s.P90, s.P99, s.Max, s.Mean, s.N)
	}
	for i, s := range res.latency {
		fmt.Fprintf(w, "write-to-event      instance %d: %s\n", i, line(s))
	}
	fmt.Fprintf(w, "write-to-event      all:        %s%s\n", line(res.all),
		verdict(res.all.N > 0, res.all.Max < goalForeignMs, fmt.Sprintf("goal every change within %d ms", goalForeignMs)))
	announced := make([]string, len(res.announced))
	for i, n := range res.announced {
		announced[i] = fmt.Sprintf("%.0f", n)
	}
	fmt.Fprintf(w, "announced by        instance %s (lockhub_store_foreign_changes_total during the run; their sum is the changes announced)\n",
		strings.Join(announced, ", instance "))
	fmt.Fprintf(w, "mismatches          %d%s\n", len(res.errs), verdict(true, len(res.errs) == 0, "goal 0: each change once per watcher, as its op"))
	for i, e := range res.errs {
		if i == maxErrorsShown {
			fmt.Fprintf(w, "  … and %d more\n", len(res.errs)-maxErrorsShown)
			break
		}
		fmt.Fprintf(w, "  %s\n", e)
	}
}

// goalForeignMs is PROTOCOL.md §8's bound on a foreign change's event.
const goalForeignMs = 2000

var errForeignRedis = errors.New("-mode foreign runs its hubs on one real Redis: give -redis-url")
