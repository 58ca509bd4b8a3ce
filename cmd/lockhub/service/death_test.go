package service

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestInstanceDeath: an instance killed with SIGKILL (the built binary) leaves none of
// the locks its sockets claimed for longer than the release grace + 30 s (PROTOCOL.md
// §4, "An instance that dies"), and its sockets stop counting for the two-tab rule: on
// redis-server and on the 6-node cluster, a live instance in this process releases
// a lock held only through the dead one (one tab), one whose live tab released it (two
// tabs), and keeps one whose live tab still holds it, until that tab lets go.
func TestInstanceDeath(t *testing.T) {
	bin := buildBinary(t)
	t.Run("standalone", func(t *testing.T) {
		srv := redistest.StartServer(t)
		testInstanceDeath(t, bin, []string{"--redis-url", srv.URL()}, srv.Client(t))
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		testInstanceDeath(t, bin, []string{"--redis-url", "redis://" + cl.MasterAddrs()[0], "--redis-cluster"}, cl.Client(t))
	})
}

func testInstanceDeath(t *testing.T, bin string, redisArgs []string, rdb redis.UniversalClient) {
	const grace = 300 * time.Millisecond
	args := append([]string{"--dev", "--release-grace", grace.String(), "--instance-timeout", "1500ms", "--presence-ttl", "1500ms"}, redisArgs...)
	dead := startBinary(t, bin, append([]string{"--listen", "127.0.0.1:0"}, args...))
	live := start(t, args, env())
	ctx := t.Context()
	deadURL := "http://" + dead.addr

	// tab opens a socket as Ada on an instance, and claims uid through it.
	tab := func(base, uid string) (*protocol.Client, string) {
		t.Helper()
		c, err := protocol.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		w, err := c.Auth(ctx, devToken(t, base, "u-ada"))
		if err != nil {
			t.Fatal(err)
		}
		if r, err := c.Claim(ctx, "ApprovalRequest", uid); err != nil || (r.Outcome != protocol.OutcomeAcquired && r.Outcome != protocol.OutcomeRenewed) {
			t.Fatalf("claim %s: %v %v", uid, r.Outcome, err)
		}
		return c, w.ConnectionID
	}
	watcher := dialAuth(t, "ws"+strings.TrimPrefix(live.url, "http")+"/ws", devToken(t, live.url, "u-w"))
	if _, err := watcher.Watch(ctx, "ApprovalRequest"); err != nil {
		t.Fatal(err)
	}
	key := func(uid string) string { return "lock:{acme}:ApprovalRequest:" + uid }
	adaDead, _ := tab(deadURL, "r-1") // one tab, on the instance that dies
	// Ada's tab views r-1 too, and so does Grace, on the live instance (PROTOCOL.md §9).
	graceLive := dialAuth(t, "ws"+strings.TrimPrefix(live.url, "http")+"/ws", devToken(t, live.url, "u-grace"))
	if _, err := adaDead.View(ctx, "ApprovalRequest", "r-1"); err != nil {
		t.Fatal(err)
	}
	if p, err := graceLive.View(ctx, "ApprovalRequest", "r-1"); err != nil || len(p.Viewers) != 2 {
		t.Fatalf("Grace's view answered %+v, %v; want Ada and Grace", p, err)
	}
	tab(deadURL, "r-2") // two tabs; the live one releases
	releaser, _ := tab(live.url, "r-2")
	tab(deadURL, "r-3") // two tabs; the live one keeps it
	keeper, keeperID := tab(live.url, "r-3")
	// The dead instance's holdings reach Redis in a batch, one round trip after the
	// claims: wait for them, as a real instance would have had the time.
	redistest.Eventually(t, "the instance's holdings written", func() bool {
		var n atomic.Int64
		count := func(ctx context.Context, c *redis.Client) error { // a test server: KEYS is fine
			for _, k := range c.Keys(ctx, "lockhub:held:*").Val() {
				n.Add(c.SCard(ctx, k).Val())
			}
			return nil
		}
		if cl, ok := rdb.(*redis.ClusterClient); ok {
			_ = cl.ForEachMaster(ctx, count)
		} else {
			_ = count(ctx, rdb.(*redis.Client))
		}
		return n.Load() >= 5
	})

	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-dead.exited
	dead.exited <- nil
	if r, err := releaser.Release(ctx, "ApprovalRequest", "r-2"); err != nil || r.Outcome != protocol.OutcomeReleased {
		t.Fatalf("release from the live tab: %v %v", r.Outcome, err)
	}
	bound := grace + 30*time.Second
	for _, uid := range []string{"r-1", "r-2"} {
		redistest.Within(t, bound-time.Since(killed), uid+" released after the instance died", func() error {
			if n := rdb.Exists(ctx, key(uid)).Val(); n != 0 {
				return fmt.Errorf("%s still held", uid)
			}
			return nil
		})
		t.Logf("%s released %s after the kill", uid, time.Since(killed).Round(time.Millisecond))
	}
	// r-3: the dead socket's id is gone from its sockets, the live tab's is left, and the
	// lock stays with it.
	redistest.Within(t, bound-time.Since(killed), "the dead socket forgotten on r-3", func() error {
		ids := rdb.SMembers(ctx, "lockconn:{acme}:ApprovalRequest:r-3").Val()
		if len(ids) != 1 || ids[0] != keeperID {
			return fmt.Errorf("sockets of r-3: %v, want only %s", ids, keeperID)
		}
		return nil
	})
	if n := rdb.Exists(ctx, key("r-3")).Val(); n != 1 {
		t.Fatal("r-3 released while its live tab holds it")
	}
	if r, err := keeper.Release(ctx, "ApprovalRequest", "r-3"); err != nil || r.Outcome != protocol.OutcomeReleased {
		t.Fatalf("release of r-3: %v %v", r.Outcome, err)
	}
	if n := rdb.Exists(ctx, key("r-3")).Val(); n != 0 {
		t.Fatal("r-3 kept after its last live tab released it")
	}
	// Ada's view on the dead instance ran out: Grace sees her go, within the contract's
	// 60 s (about four thirds of --presence-ttl).
	redistest.Within(t, 60*time.Second-time.Since(killed), "Ada's view gone with her instance", func() error {
		f, err := graceLive.NextFrame(ctx)
		if err != nil {
			return err
		}
		if f.Presence == nil || len(f.Presence.Viewers) != 1 || f.Presence.Viewers[0].OID != "u-grace" {
			return fmt.Errorf("Grace got %s", f.Raw)
		}
		return nil
	})
	t.Logf("Ada's view gone %s after the kill", time.Since(killed).Round(time.Millisecond))
	// The watcher on the live instance saw each lock go.
	released := map[string]bool{}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for len(released) < 3 {
		select {
		case ev := <-watcher.Events():
			if ev.Op == protocol.OpReleased {
				released[ev.Lock.EntityUID] = true
			}
		case <-wctx.Done():
			t.Fatalf("the watcher saw %v released", released)
		}
	}
	m := call(t, "GET", live.url+"/metrics", "", "").raw
	// r-3's dead socket was forgotten when the instance was found (r-2's live tab had
	// released before): one.
	if !strings.Contains(m, "lockhub_hub_dead_instances_total 1") || !strings.Contains(m, "lockhub_hub_reaped_locks_total 3") ||
		!strings.Contains(m, "lockhub_hub_dead_sockets_forgotten_total 1") {
		t.Fatalf("metrics do not show the dead instance, its 3 locks and r-3's forgotten socket:\n%s", grep(m, "lockhub_hub_"))
	}
	if !strings.Contains(live.logs.String(), "stopped without shutting down") {
		t.Fatalf("no warning about the dead instance:\n%s", live.logs)
	}
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
