package redistest

import (
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLaunchOnTakenPortIsDetected checks the signal startOnFreePort relies on
// to retry on another port: a server whose port is taken exits, waitReady
// reports errExited promptly, and the failure message carries the log tail
// that explains why.
func TestLaunchOnTakenPortIsDetected(t *testing.T) {
	t.Parallel()
	bin := RequireRedisServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	p, err := launch(bin, t.TempDir(), port, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	err = p.waitReady(t.Context(), 5*time.Second)
	if !errors.Is(err, errExited) {
		t.Fatalf("waitReady on a taken port: err = %v, want errExited", err)
	}
	if msg := p.failure(err).Error(); !strings.Contains(msg, "Address already in use") {
		t.Fatalf("failure message lacks the log line explaining the exit:\n%s", msg)
	}
}

// TestKillIsIdempotent checks that kill may be called repeatedly and
// concurrently (Kill, KillMaster and the cleanup all end up here).
func TestKillIsIdempotent(t *testing.T) {
	t.Parallel()
	bin := RequireRedisServer(t)
	p, err := startOnFreePort(t.Context(), bin, t.TempDir(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(p.kill)
	}
	wg.Wait()
	p.kill()
	if p.alive() {
		t.Fatal("process alive after kill")
	}
	if err := ping(p.addr(), 200*time.Millisecond); err == nil {
		t.Fatal("killed server still answers PING")
	}
}

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	if got := logTail(dir+"/missing", 3); !strings.Contains(got, "log unavailable") {
		t.Errorf("logTail of a missing file = %q", got)
	}
	path := dir + "/log"
	if err := writeFile(path, ""); err != nil {
		t.Fatal(err)
	}
	if got := logTail(path, 3); got != "(log is empty)" {
		t.Errorf("logTail of an empty file = %q", got)
	}
	if err := writeFile(path, "1\n2\n3\n4\n5\n"); err != nil {
		t.Fatal(err)
	}
	if got := logTail(path, 3); got != "3\n4\n5" {
		t.Errorf("logTail(3) = %q, want %q", got, "3\n4\n5")
	}
}

func TestSelfServes(t *testing.T) {
	const nodes = "" +
		"aaa 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 7000 [5461->-bbb]\n" +
		"bbb 127.0.0.1:30002@40002 master - 0 0 2 connected 5461-10921\n"
	for slot, want := range map[int]bool{0: true, 5460: true, 7000: true, 5461: false, 10000: false} {
		if got := selfServes(nodes, slot); got != want {
			t.Errorf("selfServes(slot %d) = %v, want %v", slot, got, want)
		}
	}
	const replica = "ccc 127.0.0.1:30003@40003 myself,slave aaa 0 0 1 connected\n"
	if selfServes(replica, 0) {
		t.Error("a replica must not be reported as serving a slot")
	}
}

func writeFile(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o600)
}
