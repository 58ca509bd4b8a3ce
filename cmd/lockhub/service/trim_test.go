package service

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestTrimAfterBurst: the trimmer returns memory once per burst, when the burst is
// over: not while sockets keep coming, not for fewer sockets than a burst, and again
// after the next burst. Its looks are counted, so the test steps it look by look.
func TestTrimAfterBurst(t *testing.T) {
	// Each look asks the test for the count, once the previous look (and its trim, if
	// any) is done: the test checks each look's result when the next one asks.
	ctx, cancel := context.WithCancel(context.Background())
	looks, counts := make(chan struct{}), make(chan uint64)
	var accepted uint64 // the test's; the trimmer sees it through counts
	tr := newTrimmer(func() uint64 {
		select {
		case looks <- struct{}{}:
		case <-ctx.Done():
		}
		select {
		case n := <-counts:
			return n
		case <-ctx.Done():
			return accepted // the test is over and sends no more
		}
	}, 100, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	var wg sync.WaitGroup
	wg.Go(func() { tr.run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	nextLook := func() {
		t.Helper()
		select {
		case <-looks:
		case <-time.After(10 * time.Second):
			t.Fatal("the trimmer did not look")
		}
	}
	nextLook()
	counts <- 0 // the count at its start
	steps := []struct {
		add  uint64
		want float64
		why  string
	}{
		{60, 0, "60 sockets: not a burst"},
		{60, 0, "120 since the last trim, 60 since the last look: still coming"},
		{5, 1, "125 since the last trim, 5 since the last look: the burst is over"},
		{0, 1, "nothing new: nothing to trim"},
		{99, 1, "99 since the trim: not a burst"},
		{0, 1, "still 99 since the trim"},
		{1, 2, "100 since the trim, and 1 since the look: the next burst is over"},
	}
	for i, step := range steps {
		nextLook()
		if i > 0 {
			if got, prev := testutil.ToFloat64(tr.trims), steps[i-1]; got != prev.want {
				t.Fatalf("%s: %v trims, want %v", prev.why, got, prev.want)
			}
		}
		accepted += step.add
		counts <- accepted
	}
	nextLook()
	if got, last := testutil.ToFloat64(tr.trims), steps[len(steps)-1]; got != last.want {
		t.Fatalf("%s: %v trims, want %v", last.why, got, last.want)
	}
}
