package main

import (
	"context"
	"fmt"
	"time"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// ratioResult compares a claim+release over one socket with the same two calls made
// directly on a lock store on the same Redis.
type ratioResult struct {
	Pairs  int     `json:"pairs"`
	Direct summary `json:"direct"`
	Socket summary `json:"socket"`
	// Ratio is mean direct / mean socket: the socket's throughput as a fraction of
	// the store's for one caller doing one thing at a time (ISSUE 3: at least 0.4).
	Ratio float64 `json:"ratio"`
}

// ratioWarmup pairs of each kind run before measuring: connections, scripts loaded.
const ratioWarmup = 20

// measureRatio runs pairs claim+release pairs each way, interleaved so that both see
// the same machine at the same moments. pace, when positive, spaces the iterations
// (a hub with the contract's rate limit serves a socket 50 frames a second).
func measureRatio(ctx context.Context, store *locks.Store, cl *client, pairs int, pace time.Duration) (ratioResult, error) {
	tok, err := cl.token(ctx, "u-lockbench-ratio")
	if err != nil {
		return ratioResult{}, err
	}
	c, err := cl.open(ctx, tok)
	if err != nil {
		return ratioResult{}, err
	}
	defer c.Close()
	h := protocol.Holder{OID: "u-lockbench-direct", Name: "lockbench direct"}
	prefix := newRun(cl).prefix
	direct := func(i int) error {
		ref := locks.Ref{Tenant: cl.tenant, Type: cl.typ, UID: fmt.Sprintf("%sd-%d", prefix, i)}
		if r, err := store.Locks.Claim(ctx, ref, h, ""); err != nil || r.Outcome != protocol.OutcomeAcquired {
			return fmt.Errorf("direct claim: %s %v", r.Outcome, err)
		}
		if r, err := store.Locks.Release(ctx, ref, h, ""); err != nil || r.Outcome != protocol.OutcomeReleased {
			return fmt.Errorf("direct release: %s %v", r.Outcome, err)
		}
		return nil
	}
	socket := func(i int) error {
		uid := fmt.Sprintf("%ss-%d", prefix, i)
		if r, err := c.Claim(ctx, cl.typ, uid); err != nil || r.Outcome != protocol.OutcomeAcquired {
			return fmt.Errorf("socket claim: %s %v", r.Outcome, err)
		}
		if r, err := c.Release(ctx, cl.typ, uid); err != nil || r.Outcome != protocol.OutcomeReleased {
			return fmt.Errorf("socket release: %s %v", r.Outcome, err)
		}
		return nil
	}
	var tick <-chan time.Time
	if pace > 0 {
		t := time.NewTicker(pace)
		defer t.Stop()
		tick = t.C
	}
	var dl, sl []time.Duration
	for i := -ratioWarmup; i < pairs; i++ {
		t0 := time.Now()
		if err := direct(i + ratioWarmup); err != nil {
			return ratioResult{}, err
		}
		t1 := time.Now()
		if err := socket(i + ratioWarmup); err != nil {
			return ratioResult{}, err
		}
		t2 := time.Now()
		if i >= 0 {
			dl, sl = append(dl, t1.Sub(t0)), append(sl, t2.Sub(t1))
		}
		if tick != nil {
			select {
			case <-ctx.Done():
				return ratioResult{}, ctx.Err()
			case <-tick:
			}
		}
	}
	res := ratioResult{Pairs: pairs, Direct: summarize(dl), Socket: summarize(sl)}
	if res.Socket.Mean > 0 {
		res.Ratio = res.Direct.Mean / res.Socket.Mean
	}
	return res, nil
}
