//go:build unix

package redistest_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestServerPause: a paused server hangs (commands time out, connections are not
// refused) and keeps its data; after Resume it answers again; a server left paused when
// its test ends is still resumed, killed and reaped.
func TestServerPause(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := redistest.StartServer(t)
	rdb := s.Client(t)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	s.Pause(t)
	start := time.Now()
	err := rdb.Get(ctx, "k").Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("GET on a paused server = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("GET on a paused server took %s, not the client's short timeouts", d)
	}

	s.Resume(t)
	if got, err := s.Client(t).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Resume = %q, %v; want the data kept", got, err)
	}

	var addr string
	t.Run("left paused", func(t *testing.T) {
		left := redistest.StartServer(t)
		addr = left.Addr()
		left.Pause(t)
	})
	// The subtest's cleanups have run: its server was resumed, killed and reaped.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("a server left paused still listens on %s after its test", addr)
	}
}
