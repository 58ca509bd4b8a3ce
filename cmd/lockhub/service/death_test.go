package service

import (
	"context"
	"errors"
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
// a lock held only through the dead one (one tab) after the grace, one whose live tab
// released it after the kill (two tabs) as soon as the death is found, that release
// having answered released with "pending":true (version 3), and keeps one whose live
// tab still holds it, until that tab lets go. A release that leaves the lock to
// another tab on the same instance is not pending.
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
	// A grace longer than finding the death takes (--instance-timeout 1.5s: at most
	// 2 s), so that a lock released when the death is found is told from one released
	// a grace after.
	const grace = 4 * time.Second
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
	// Two tabs on the live instance: a release by one leaves the lock to the other,
	// which lives, so it is not pending.
	near, _ := tab(live.url, "r-4")
	tab(live.url, "r-4")
	if r, err := near.Release(ctx, "ApprovalRequest", "r-4"); err != nil || r.Outcome != protocol.OutcomeReleased || r.Pending {
		t.Fatalf("release of r-4 from one of two tabs on one instance: %+v, %v; want released, not pending", r, err)
	}

	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-dead.exited
	dead.exited <- nil
	// Nothing tells the dead instance from a slow one yet: the release from the live
	// tab takes effect when the death is found, and says so.
	if r, err := releaser.Release(ctx, "ApprovalRequest", "r-2"); err != nil || r.Outcome != protocol.OutcomeReleased || !r.Pending {
		t.Fatalf("release from the live tab: %+v, %v; want released, pending", r, err)
	}
	// Dave claims r-2 as soon as it is free: when the death is found, not a grace
	// later. r-1, held through the dead tab alone, waits its grace meanwhile.
	dave := dialAuth(t, "ws"+strings.TrimPrefix(live.url, "http")+"/ws", devToken(t, live.url, "u-dave"))
	redistest.Within(t, grace, "r-2 free before a grace has passed since the kill", func() error {
		if n := rdb.Exists(ctx, key("r-2")).Val(); n != 0 {
			return errors.New("r-2 still held")
		}
		return nil
	})
	if r, err := dave.Claim(ctx, "ApprovalRequest", "r-2"); err != nil || r.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("Dave's claim of r-2: %+v, %v; want acquired", r, err)
	}
	t.Logf("Dave acquired r-2 %s after the kill", time.Since(killed).Round(time.Millisecond))
	if n := rdb.Exists(ctx, key("r-1")).Val(); n != 1 {
		t.Fatal("r-1, held through the dead tab alone, released before its grace")
	}
	bound := grace + 30*time.Second
	redistest.Within(t, bound-time.Since(killed), "r-1 released after the instance died", func() error {
		if n := rdb.Exists(ctx, key("r-1")).Val(); n != 0 {
			return errors.New("r-1 still held")
		}
		return nil
	})
	if since := time.Since(killed); since < grace {
		t.Fatalf("r-1 released %v after the kill, before the grace of %v", since, grace)
	}
	t.Logf("r-1 released %s after the kill", time.Since(killed).Round(time.Millisecond))
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
	// r-3's dead socket was forgotten when the instance was found (r-2's live tab had
	// released before): one; r-2's was detached then, its release pending: one. A reaped
	// lock is counted once its Detach answered, after the key and the event seen above:
	// poll.
	redistest.Within(t, 10*time.Second, "the dead instance's reap counted in /metrics", func() error {
		m := call(t, "GET", live.url+"/metrics", "", "").raw
		for _, want := range []string{"lockhub_hub_dead_instances_total 1", "lockhub_hub_reaped_locks_total 3",
			"lockhub_hub_dead_sockets_forgotten_total 1", "lockhub_hub_dead_sockets_released_total 1", "lockhub_hub_pending_releases_total 1"} {
			if !strings.Contains(m, want+"\n") {
				return fmt.Errorf("metrics do not show %s:\n%s", want, grep(m, "lockhub_hub_"))
			}
		}
		return nil
	})
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
