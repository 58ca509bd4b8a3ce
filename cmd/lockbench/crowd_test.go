package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestCrowdRun: a short -mode crowd run on a real redis-server: 50 watchers move from
// one in-process hub to the other, every one of them sees 1001 and watches again.
func TestCrowdRun(t *testing.T) {
	srv := redistest.StartServer(t)
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, crowdInProcess: true}
	if err := m.ParseFlags([]string{"-mode", "crowd", "-redis-url", srv.URL(), "-watchers", "50", "-dialers", "8", "-timeout", "1m", "-snapshot-locks", "3"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	report := out.String()
	for _, want := range []string{"watchers            50, a snapshot of 3 locks each", "(50 with 1001)", "until all 50 watch again", "crowd / connect", "redis commands"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
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
	for _, bad := range []string{"-1", "1001"} {
		err := m.ParseFlags([]string{"-mode", "crowd", "-redis-url", "redis://127.0.0.1:6390/0", "-snapshot-locks", bad})
		if err == nil || !strings.Contains(err.Error(), "snapshot-locks") {
			t.Errorf("-snapshot-locks %s: %v, want an error naming the flag", bad, err)
		}
	}
}
