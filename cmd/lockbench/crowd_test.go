package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestCrowdRun: a short -mode crowd run on a real redis-server: in each of two rounds 50
// watchers move from a fresh in-process hub to the other, every one of them sees 1001
// and watches again (its watch right behind its auth, the default), and the report
// gives each round and their median.
func TestCrowdRun(t *testing.T) {
	srv := redistest.StartServer(t)
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, clientsInProcess: true}
	if err := m.ParseFlags([]string{"-mode", "crowd", "-redis-url", srv.URL(), "-watchers", "50", "-dialers", "8", "-timeout", "1m", "-snapshot-locks", "3", "-rounds", "2"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	report := out.String()
	for _, want := range []string{"watchers            50, a snapshot of 3 locks each; 2 round(s)", "its watch right behind its auth", "\n    1  ", "\n    2  ", "median of the rounds", "(50 with 1001", "all 50 watch again", "crowd / connect", "redis commands"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestCrowdRunPing: with -crowd-ping the measured crowd pings instead of watching,
// reads no snapshot, and the report claims no goal for it; with -pipeline=false each
// socket waits for its welcome before it pings.
func TestCrowdRunPing(t *testing.T) {
	srv := redistest.StartServer(t)
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, clientsInProcess: true}
	if err := m.ParseFlags([]string{"-mode", "crowd", "-redis-url", srv.URL(), "-watchers", "50", "-dialers", "8", "-timeout", "1m", "-rounds", "1", "-crowd-ping", "-pipeline=false"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	report := out.String()
	for _, want := range []string{"sends a ping instead of its watch", "its ping after the welcome (-pipeline=false)", "all 50 have their pong", "connect + auth + ping", "list operations     0 during the last crowd"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "goal") {
		t.Errorf("a ping crowd's report names a goal:\n%s", report)
	}
}

// TestParseCrowdFlags: -mode crowd needs a real Redis for its two hubs.
func TestParseCrowdFlags(t *testing.T) {
	m := &Main{Stderr: &bytes.Buffer{}}
	if err := m.ParseFlags([]string{"-mode", "crowd"}); err == nil {
		t.Fatal("-mode crowd without -redis-url was accepted")
	}
	if err := m.ParseFlags([]string{"-mode", "crowd", "-redis-url", "redis://127.0.0.1:6390/0"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"0", "21"} {
		err := m.ParseFlags([]string{"-mode", "crowd", "-redis-url", "redis://127.0.0.1:6390/0", "-rounds", bad})
		if err == nil || !strings.Contains(err.Error(), "rounds") {
			t.Errorf("-rounds %s: %v, want an error naming the flag", bad, err)
		}
	}
	for _, bad := range []string{"-1", "1001"} {
		err := m.ParseFlags([]string{"-mode", "crowd", "-redis-url", "redis://127.0.0.1:6390/0", "-snapshot-locks", bad})
		if err == nil || !strings.Contains(err.Error(), "snapshot-locks") {
			t.Errorf("-snapshot-locks %s: %v, want an error naming the flag", bad, err)
		}
	}
}

// TestCrowdFigures: each round is set against the baseline before it and the one after
// it, and the report's figure is the median of the rounds with their range.
func TestCrowdFigures(t *testing.T) {
	sec := func(s float64) crowdPhase { return crowdPhase{Seconds: s, CPUSeconds: s / 2} }
	r := crowdResult{
		watchers: 1000,
		first:    sec(1), firstCPU: time.Second,
		rounds: []crowdRound{
			{crowd: sec(3), base: sec(3), crowdCPU: 4 * time.Second, baseCPU: 3 * time.Second},   // against 1 and 3: 1.5
			{crowd: sec(3.6), base: sec(3), crowdCPU: 3 * time.Second, baseCPU: 3 * time.Second}, // against 3 and 3: 1.2
			{crowd: sec(2), base: sec(1), crowdCPU: 2 * time.Second, baseCPU: time.Second},       // against 3 and 1: 1
		},
	}
	f := r.figures(0)
	if f.timeRatio != 1.5 || f.baseRate != 500 || f.crowdRate != 1000.0/3 {
		t.Errorf("round 1: %+v, want a time ratio of 1.5 against a baseline of 2 s (500/s)", f)
	}
	if f.hubCPU != 4000 || f.hubBaseCPU != 2000 || f.cliCPU != 1500 || f.cliBaseCPU != 1000 {
		t.Errorf("round 1 CPU per socket: %+v, want 4000/2000 µs on the hubs, 1500/1000 µs on the clients", f)
	}
	ratio := spreadOf(r, func(f crowdFigures) float64 { return f.timeRatio })
	if ratio != (spread{med: 1.2, lo: 1, hi: 1.5}) {
		t.Errorf("time ratio %+v, want median 1.2 of 1–1.5", ratio)
	}
	if got := ratio.format("%.2f"); got != "1.20 (1.00–1.50)" {
		t.Errorf("format = %q", got)
	}
	r.rounds = r.rounds[:2]
	if got := spreadOf(r, func(f crowdFigures) float64 { return f.timeRatio }); got.med != 1.35 {
		t.Errorf("median of two rounds = %v, want their mean 1.35", got.med)
	}
	r.rounds = r.rounds[:1]
	if got := spreadOf(r, func(f crowdFigures) float64 { return f.timeRatio }).format("%.2f"); got != "1.50" {
		t.Errorf("one round formats as %q, want the figure alone", got)
	}
}
