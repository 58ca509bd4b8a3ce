package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/cmd/internal/flagenv"
	"github.com/lockhub/lockhub/hub"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// -mode fanout: the hub's own CPU per delivered frame and per idle socket, for the
// capacity plan (CAPACITY.md, issue 26 item 4). hub's BenchmarkFanoutTail counts the
// CPU of the hub and its clients together, in one process; here the hub runs in this
// process with the binary's wiring and the -watchers watching sockets in a child
// process (the -inproc load's), so this process's CPU (getrusage) is the hub's alone.
//
// Once the child holds its watchers:
//
//  1. idle: fanoutIdle with nothing sent (one whole Ping period: every socket is
//     pinged once): the hub's CPU per socket and second, heartbeats and the
//     instance's background work;
//  2. -rounds rounds, each of -changes changes of one entity of the watched type (a
//     claim or a release through the hub's store: the real script, published and
//     received from the feed like any change), -change-rate a second, then waiting
//     until the hub has written every change to every watcher (its
//     lockhub_hub_frames_out_total{type="lock"}). Each round's CPU less the idle
//     rate over its length, over the frames written, is the hub's CPU per delivered
//     frame; Redis's (INFO cpu) less its idle rate, per change, is Redis's CPU per
//     change with one subscribed instance. A change Redis did not answer in time
//     (unknown, on a saturated machine) is counted, and the round goes on.

// fanoutIdle is how long the idle phase lasts: the hub's default Ping period, so each
// socket's heartbeat is counted once.
const fanoutIdle = hub.DefaultPingEvery

var errFanoutRedis = errors.New("-mode fanout counts Redis's CPU: give -redis-url")

// The defaults of -changes and -change-rate with -mode fanout, whose changes each
// reach every watcher: 40 changes a round, 5 a second (50,000 frames a second to
// 10,000 watchers: about what a shared 2-vCPU machine keeps up with; a round that
// falls behind only takes longer).
const (
	fanoutChanges    = 40
	fanoutChangeRate = 5
)

// checkFanout checks the flags of -mode fanout and applies its defaults.
func (o *options) checkFanout(p *flagenv.Parsed) error {
	if p.From("changes") == flagenv.Default {
		o.changes = fanoutChanges
	}
	if p.From("change-rate") == flagenv.Default {
		o.changeRate = fanoutChangeRate
	}
	switch {
	case o.redisURL == "":
		return p.Name("redis-url", errFanoutRedis)
	case o.changes < 1 || o.changes > maxClaims:
		return p.Name("changes", fmt.Errorf("must be 1 to %d", maxClaims))
	case o.changeRate <= 0 || o.changeRate > 1000:
		return p.Name("change-rate", errors.New("must be positive and at most 1000"))
	case o.rounds < 1 || o.rounds > maxRounds:
		return p.Name("rounds", fmt.Errorf("must be 1 to %d", maxRounds))
	}
	return nil
}

// fanoutRound is one round's figures.
type fanoutRound struct {
	Changes    int
	Failed     int     // changes answered neither Acquired nor Released (unknown: Redis too slow)
	Delivered  float64 // lock frames the hub wrote
	Seconds    float64
	HubCPU     float64 // µs per delivered frame, less the idle rate
	RedisCPU   float64 // µs per change, less the idle rate
	SlowClosed float64 // sockets the hub closed as slow during the round
}

// fanoutResult is the whole run's.
type fanoutResult struct {
	Sockets      int
	IdlePerSock  float64 // hub µs per socket per second, idle
	RedisIdle    float64 // Redis µs per second, idle
	Rounds       []fanoutRound
	ClientResult loadResult
}

// runFanout runs -mode fanout: a hub in this process, the watchers in a child, and
// the idle phase and the rounds while the child holds them.
func (m *Main) runFanout(ctx context.Context) error {
	o := m.opt
	opts, err := redis.ParseURL(o.redisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ih, err := startInproc(ctx, o.redisURL, o.entityType)
	if err != nil {
		return err
	}
	defer func() {
		if err := ih.stop(); err != nil {
			fmt.Fprintln(m.Stderr, "lockbench: stopping the hub:", err)
		}
	}()
	// The child only holds the watchers: one claim of its own after the measurement.
	child := *m
	child.opt.claimers, child.opt.claims, child.opt.floor = 1, 1, 0
	var res fanoutResult
	var ferr error
	cres, err := child.runChildProcess(ctx, ih, func(n int) {
		res, ferr = measureFanout(ctx, ih, rdb, o, m.Stderr)
	})
	if err = errors.Join(ferr, err); err != nil {
		return err
	}
	res.ClientResult = cres
	m.reportFanout(ih, res)
	return nil
}

// measureFanout runs the idle phase and the rounds on ih, whose watchers are open.
func measureFanout(ctx context.Context, ih *inprocHub, rdb redis.UniversalClient, o options, log io.Writer) (fanoutResult, error) {
	res := fanoutResult{Sockets: int(gauge(ih.reg, "lockhub_hub_sockets"))}
	if res.Sockets < 1 {
		return res, errors.New("no sockets open on the hub")
	}
	var rerr error // the first failed reading of Redis's CPU
	redisNow := func() float64 {
		v, err := redisCPU(ctx, rdb)
		if err != nil && rerr == nil {
			rerr = err
		}
		return v
	}
	c0, r0, t0 := processCPU(), redisNow(), time.Now()
	select {
	case <-time.After(fanoutIdle): // the idle phase is a length of time, not a wait for something
	case <-ctx.Done():
		return res, ctx.Err()
	}
	idle := time.Since(t0)
	hubIdle := float64((processCPU() - c0).Microseconds()) / idle.Seconds() // µs/s
	res.RedisIdle = (redisNow() - r0) * 1e6 / idle.Seconds()                // µs/s
	res.IdlePerSock = hubIdle / float64(res.Sockets)
	if rerr != nil {
		return res, rerr
	}

	if o.cpuProfile != "" {
		stop := startCPUProfile(log, o.cpuProfile) // the rounds, not the idle phase
		defer stop()
	}
	holder := protocol.Holder{OID: "u-lockbench-fanout", Name: "lockbench fan-out"}
	gap := time.Duration(float64(time.Second) / o.changeRate)
	for round := range o.rounds {
		ref := locks.Ref{Tenant: o.tenant, Type: o.entityType, UID: fmt.Sprintf("fanout-%d-%d", time.Now().UnixNano(), round)}
		f0, s0 := lockFrames(ih.reg), gauge(ih.reg, "lockhub_hub_slow_disconnects_total")
		c0, r0, t0 := processCPU(), redisNow(), time.Now()
		written, failed := 0, 0
		tick := time.NewTicker(gap)
		for i := range o.changes {
			var r locks.Result
			var err error
			if i%2 == 0 {
				r, err = ih.store.Locks.Claim(ctx, ref, holder, "")
			} else {
				r, err = ih.store.Locks.Release(ctx, ref, holder, "")
			}
			switch {
			case err != nil:
				tick.Stop()
				return res, fmt.Errorf("round %d, change %d: %w", round, i, err)
			case r.Outcome == protocol.OutcomeAcquired || r.Outcome == protocol.OutcomeReleased:
				written++
			default:
				// Redis did not answer in time (unknown; the change may or may not have
				// been made), or the last one was not made (notHeld, renewed): counted,
				// and the round's frames are what the hub wrote.
				failed++
			}
			<-tick.C // the pace of the changes
		}
		tick.Stop()
		// Every change written to every socket, or what is left after 30 s.
		want := f0 + float64(written*res.Sockets)
		deadline := time.Now().Add(30 * time.Second)
		poll := time.NewTicker(20 * time.Millisecond)
		for lockFrames(ih.reg) < want && time.Now().Before(deadline) && ctx.Err() == nil {
			<-poll.C // polls the hub's counter
		}
		poll.Stop()
		took := time.Since(t0)
		cpu, rcpu := processCPU()-c0, redisNow()-r0
		rd := fanoutRound{Changes: o.changes, Failed: failed, Delivered: lockFrames(ih.reg) - f0, Seconds: took.Seconds(),
			SlowClosed: gauge(ih.reg, "lockhub_hub_slow_disconnects_total") - s0}
		rd.HubCPU, rd.RedisCPU = fanoutFigures(cpu, rcpu, took, hubIdle, res.RedisIdle, rd.Delivered, o.changes)
		res.Rounds = append(res.Rounds, rd)
		if err := errors.Join(ctx.Err(), rerr); err != nil {
			return res, err
		}
	}
	return res, nil
}

// fanoutFigures are a round's hub CPU per delivered frame and Redis CPU per change, µs,
// each less its idle rate (µs/s) over the round's length.
func fanoutFigures(hubCPU time.Duration, redisSeconds float64, took time.Duration, hubIdle, redisIdle, delivered float64, changes int) (hubPer, redisPer float64) {
	if delivered > 0 {
		hubPer = (float64(hubCPU.Microseconds()) - hubIdle*took.Seconds()) / delivered
	}
	if changes > 0 {
		redisPer = (redisSeconds*1e6 - redisIdle*took.Seconds()) / float64(changes)
	}
	return hubPer, redisPer
}

// lockFrames is the lock events the hub has written to sockets.
func lockFrames(reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != "lockhub_hub_frames_out_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == string(protocol.FrameLock) {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func (m *Main) reportFanout(ih *inprocHub, r fanoutResult) {
	w := m.Stdout
	fmt.Fprintf(w, "lockbench -mode fanout on %s: %d watching sockets in a child process, %d rounds\n", ih.redis, r.Sockets, len(r.Rounds))
	fmt.Fprintf(w, "idle (%s): hub CPU %.1f µs per socket per second; Redis %.0f µs/s\n", fanoutIdle, r.IdlePerSock, r.RedisIdle)
	fmt.Fprintf(w, "round  changes  failed  frames written  not written  seconds  hub CPU µs/frame  Redis CPU µs/change  slow closes\n")
	var hubs, rds []float64
	for i, rd := range r.Rounds {
		// Negative when a change answered unknown was made after all: shown as 0.
		missing := max(0, float64((rd.Changes-rd.Failed)*r.Sockets)-rd.Delivered)
		fmt.Fprintf(w, "%5d  %7d  %6d  %14.0f  %11.0f  %7.1f  %16.2f  %19.0f  %11.0f\n", i+1, rd.Changes, rd.Failed, rd.Delivered, missing, rd.Seconds, rd.HubCPU, rd.RedisCPU, rd.SlowClosed)
		hubs, rds = append(hubs, rd.HubCPU), append(rds, rd.RedisCPU)
	}
	if len(hubs) > 0 {
		slices.Sort(hubs)
		slices.Sort(rds)
		fmt.Fprintf(w, "hub CPU per delivered frame  %.2f µs (%.2f–%.2f); Redis CPU per change %.0f µs (%.0f–%.0f)\n",
			hubs[len(hubs)/2], hubs[0], hubs[len(hubs)-1], rds[len(rds)/2], rds[0], rds[len(rds)-1])
	}
	fmt.Fprintf(w, "client process: %d watchers, closed early %d\n", r.ClientResult.Watchers, r.ClientResult.ClosedEarly)
}
