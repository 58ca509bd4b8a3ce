package service

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockhub/lockhub/protocol"
)

// TestDrain builds the binary and sends SIGTERM with --drain-delay: /readyz answers
// 503 at once while /healthz, the HTTP API and an open socket are served as before;
// only once the delay has passed is the socket closed with 1001, and the process
// exits 0 within 10 s more.
func TestDrain(t *testing.T) {
	const delay = 2 * time.Second
	p := startBinary(t, buildBinary(t), []string{"--listen", "127.0.0.1:0", "--drain-delay", delay.String()})
	base := "http://" + p.addr
	if a := call(t, "GET", base+"/readyz", "", ""); a.status != 200 {
		t.Fatalf("readyz before SIGTERM: %d %s", a.status, a.raw)
	}
	ada := devToken(t, base, "u-ada")
	c := dialAuth(t, "ws://"+p.addr+"/ws", ada)
	if _, err := c.Watch(t.Context(), "ApprovalRequest"); err != nil {
		t.Fatal(err)
	}

	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// /readyz turns 503 at once: well within the delay.
	for {
		a := call(t, "GET", base+"/readyz", "", "")
		if a.status == 503 {
			if !strings.Contains(a.raw, "not_ready") || !strings.Contains(a.raw, "draining") {
				t.Fatalf("readyz while draining: %s", a.raw)
			}
			break
		}
		if time.Since(sent) > delay/2 {
			t.Fatalf("readyz still %d %s after %s", a.status, a.raw, time.Since(sent))
		}
	}
	// Everything else is served: health, the HTTP API, and the socket, whose watch
	// still receives the change the HTTP claim makes.
	if a := call(t, "GET", base+"/healthz", "", ""); a.status != 200 {
		t.Fatalf("healthz while draining: %d", a.status)
	}
	if a := call(t, "POST", base+"/api/locks/ApprovalRequest/r-1", ada, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("claim over HTTP while draining: %d %s", a.status, a.raw)
	}
	select {
	case ev := <-c.Events():
		if ev.Op != protocol.OpAcquired || ev.Lock.EntityUID != "r-1" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(delay / 2):
		t.Fatal("the watch got no event while draining")
	}
	if res, err := c.Claim(t.Context(), "ApprovalRequest", "r-2"); err != nil || res.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("claim over the socket while draining: %v %v", res.Outcome, err)
	}
	if d := time.Since(sent); d >= delay {
		t.Fatalf("the checks took %s, the whole drain: they prove nothing", d)
	}

	// Then the shutdown of today: 1001, and exit 0.
	select {
	case <-c.Done():
	case <-time.After(delay + 10*time.Second):
		t.Fatal("socket still open 10s after the drain")
	}
	if d := time.Since(sent); d < delay {
		t.Fatalf("socket closed %s after SIGTERM, before the %s drain was over", d, delay)
	}
	if got := c.CloseStatus(); got != protocol.CloseGoingAway {
		t.Fatalf("socket closed with %d (%v), want 1001", got, c.Err())
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, p.stderr.String())
		}
	case <-time.After(delay + 10*time.Second - time.Since(sent)):
		t.Fatal("still running 10s after the drain")
	}
	t.Logf("readyz 503 at once; sockets closed and exit %s after SIGTERM (drain %s)", time.Since(sent).Round(time.Millisecond), delay)
}
