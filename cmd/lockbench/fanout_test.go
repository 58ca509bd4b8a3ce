package main

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"
)

func TestParseFlagsFanout(t *testing.T) {
	const redisURL = "redis://127.0.0.1:6390/0"
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr error // nil: any error will do
		ok      bool
		changes int
		rate    float64
	}{
		{name: "defaults", args: []string{"-mode", "fanout", "-redis-url", redisURL}, ok: true, changes: fanoutChanges, rate: fanoutChangeRate},
		{name: "given", args: []string{"-mode", "fanout", "-redis-url", redisURL, "-changes", "7", "-change-rate", "2"}, ok: true, changes: 7, rate: 2},
		{name: "without redis", args: []string{"-mode", "fanout"}, wantErr: errFanoutRedis},
		{name: "no changes", args: []string{"-mode", "fanout", "-redis-url", redisURL, "-changes", "0"}},
		{name: "too fast", args: []string{"-mode", "fanout", "-redis-url", redisURL, "-change-rate", "1001"}},
		{name: "no rounds", args: []string{"-mode", "fanout", "-redis-url", redisURL, "-rounds", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Main{Stderr: &bytes.Buffer{}}
			err := m.ParseFlags(tc.args)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseFlags(%q) = %v", tc.args, err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("ParseFlags(%q) = %v, want %v", tc.args, err, tc.wantErr)
			}
			if tc.ok && (m.opt.changes != tc.changes || m.opt.changeRate != tc.rate) {
				t.Fatalf("changes %d, rate %g; want %d, %g", m.opt.changes, m.opt.changeRate, tc.changes, tc.rate)
			}
		})
	}
}

// TestFanoutFigures: each round's CPU is taken less its idle rate over its length.
func TestFanoutFigures(t *testing.T) {
	// 2 s of a round: 1.1 s of hub CPU, of which 0.1 s the idle rate (50,000 µs/s);
	// 200,000 frames: 5 µs each. Redis: 0.3 s, of which 0.1 s idle, over 100 changes.
	hub, rds := fanoutFigures(1100*time.Millisecond, 0.3, 2*time.Second, 50000, 50000, 200000, 100)
	if math.Abs(hub-5) > 1e-9 || math.Abs(rds-2000) > 1e-6 {
		t.Fatalf("fanoutFigures = %v µs/frame, %v µs/change; want 5, 2000", hub, rds)
	}
	if hub, rds := fanoutFigures(time.Second, 1, time.Second, 0, 0, 0, 0); hub != 0 || rds != 0 {
		t.Fatalf("nothing delivered, nothing changed: %v, %v; want 0, 0", hub, rds)
	}
}
