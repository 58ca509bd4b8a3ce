package redistest_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestMain fails the package if any goroutine (the harness's process
// waiters, go-redis pools) is still running once all tests are done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRequireRedisServer(t *testing.T) {
	path := redistest.RequireRedisServer(t)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("RequireRedisServer returned %q: %v", path, err)
	}
	if info.Mode()&0o111 == 0 {
		t.Fatalf("RequireRedisServer returned %q, which is not executable", path)
	}
}

// fatalRecorder stands in for a testing.TB to capture what Fatalf reports.
// Like the real Fatalf it stops the calling goroutine.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestRequireRedisServerMissingFailsWithInstallCommand(t *testing.T) {
	// An empty directory as the whole PATH hides redis-server. (t.Setenv
	// makes this test sequential, which is why it does not call t.Parallel.)
	t.Setenv("PATH", t.TempDir())
	rec := &fatalRecorder{TB: t}
	returned := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		redistest.RequireRedisServer(rec)
		returned = true
	}()
	<-done
	if returned {
		t.Fatal("RequireRedisServer returned instead of failing the test")
	}
	if !strings.Contains(rec.msg, "apt-get install -y redis-server") {
		t.Fatalf("failure message %q does not contain the install command", rec.msg)
	}
}

func TestServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := redistest.StartServer(t)

	addr := s.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("Addr() = %q, want a 127.0.0.1 address", addr)
	}
	if want := "redis://" + addr + "/0"; s.URL() != want {
		t.Fatalf("URL() = %q, want %q", s.URL(), want)
	}
	opt, err := redis.ParseURL(s.URL())
	if err != nil || opt.Addr != addr || opt.DB != 0 {
		t.Fatalf("redis.ParseURL(%q) = %+v, %v", s.URL(), opt, err)
	}

	rdb := s.Client(t)
	if err := rdb.Set(ctx, "greeting", "hello", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := rdb.Get(ctx, "greeting").Result(); err != nil || got != "hello" {
		t.Fatalf("GET = %q, %v; want %q", got, err, "hello")
	}
	cfg, err := rdb.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatalf("CONFIG GET: %v", err)
	}
	if cfg["save"] != "" || cfg["appendonly"] != "no" {
		t.Fatalf("persistence is enabled: save=%q appendonly=%q", cfg["save"], cfg["appendonly"])
	}

	s.Kill(t)
	killedAt := time.Now()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded")
	} else {
		t.Logf("PING after Kill failed after %v: %v", time.Since(killedAt), err)
	}
	s.Kill(t) // killing a dead server is a no-op

	s.Restart(t)
	if s.Addr() != addr {
		t.Fatalf("Addr() after Restart = %q, want %q", s.Addr(), addr)
	}
	fresh := s.Client(t)
	if err := fresh.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if _, err := fresh.Get(ctx, "greeting").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart: err = %v, want redis.Nil (restarted server must be empty)", err)
	}
	// A client created before the crash reconnects on its own.
	took := redistest.Within(t, 5*time.Second, "old client after Restart", func() error {
		return rdb.Set(ctx, "greeting", "again", 0).Err()
	})
	t.Logf("client created before Kill worked again %v after Restart", took)
}

func TestServerRestartWhileRunning(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := redistest.StartServer(t)
	rdb := s.Client(t)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	s.Restart(t) // kills the running process first
	fresh := s.Client(t)
	if n, err := fresh.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after Restart = %d, %v; want 0", n, err)
	}
}

func TestServersAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := redistest.StartServer(t), redistest.StartServer(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers share address %s", a.Addr())
	}
	if err := a.Client(t).Set(ctx, "only-on-a", "1", 0).Err(); err != nil {
		t.Fatalf("SET on a: %v", err)
	}
	if n, err := b.Client(t).Exists(ctx, "only-on-a").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS on b = %d, %v; want 0", n, err)
	}
}

// keyInSlots returns the first key "prefix:N" whose slot is in [first, last].
func keyInSlots(prefix string, first, last int) string {
	for i := 0; ; i++ {
		key := fmt.Sprintf("%s:%d", prefix, i)
		if s := redistest.Slot(key); first <= s && s <= last {
			return key
		}
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	start := time.Now()
	c := redistest.StartCluster(t)
	t.Logf("cluster ready after %v", time.Since(start))
	client := c.Client(t)

	t.Run("Addrs", func(t *testing.T) {
		addrs := c.Addrs()
		if len(addrs) != 6 || len(slices.Compact(slices.Sorted(slices.Values(addrs)))) != 6 {
			t.Fatalf("Addrs() = %v, want six distinct addresses", addrs)
		}
		if masters := c.MasterAddrs(); !slices.Equal(masters, addrs[:3]) {
			t.Fatalf("MasterAddrs() = %v, want the first three of %v", masters, addrs)
		}
		opt := c.ClusterOptions()
		if !slices.Equal(opt.Addrs, addrs) || opt.ClusterStateReloadInterval != time.Second {
			t.Fatalf("ClusterOptions() = Addrs %v, ClusterStateReloadInterval %v", opt.Addrs, opt.ClusterStateReloadInterval)
		}
	})

	t.Run("WriteInEachMasterRange", func(t *testing.T) {
		//lint:ignore SA1019 go-redis ClusterClient reads CLUSTER SLOTS itself: check what it will see
		slots, err := client.ClusterSlots(ctx).Result()
		if err != nil {
			t.Fatalf("CLUSTER SLOTS: %v", err)
		}
		var masters []string
		for _, r := range slots {
			master := r.Nodes[0].Addr
			masters = append(masters, master)
			if len(r.Nodes) != 2 {
				t.Errorf("slots %d-%d: nodes %v, want a master and one replica", r.Start, r.End, r.Nodes)
			}
			key := keyInSlots("range", r.Start, r.End)
			if err := client.Set(ctx, key, master, 0).Err(); err != nil {
				t.Fatalf("SET %s (slot %d) through the cluster client: %v", key, redistest.Slot(key), err)
			}
			if got := c.MasterForSlot(t, redistest.Slot(key)); got != master {
				t.Errorf("MasterForSlot(%d) = %s, CLUSTER SLOTS says %s", redistest.Slot(key), got, master)
			}
			// Read it back from the master itself: the cluster client must
			// have routed the write there.
			direct := redis.NewClient(&redis.Options{Addr: master})
			got, err := direct.Get(ctx, key).Result()
			_ = direct.Close()
			if err != nil || got != master {
				t.Errorf("GET %s directly on %s = %q, %v; want %q", key, master, got, err, master)
			}
		}
		if want := slices.Sorted(slices.Values(c.MasterAddrs())); !slices.Equal(slices.Sorted(slices.Values(masters)), want) {
			t.Fatalf("CLUSTER SLOTS masters %v, want %v", masters, want)
		}
	})

	t.Run("KeySlotAgreesWithSlot", func(t *testing.T) {
		keys := []string{
			"", "123456789", "somekey", "foo{hash_tag}", "bar{hash_tag}",
			"{user1000}.following", "{user1000}.followers",
			"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "}{x}", "{unterminated",
			"lock:{order:42}", "ünïcödé", "\x00\xff",
		}
		for i := range 100 {
			keys = append(keys, fmt.Sprintf("key-%d", i), fmt.Sprintf("{tag%d}.member", i))
		}
		for _, key := range keys {
			got, err := client.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
			}
			if want := redistest.Slot(key); int(got) != want {
				t.Errorf("CLUSTER KEYSLOT %q = %d, Slot = %d", key, got, want)
			}
		}
	})

	t.Run("CrossSlotMGET", func(t *testing.T) {
		a, b := "{a}.1", "{b}.2"
		if redistest.Slot(a) == redistest.Slot(b) {
			t.Fatalf("test keys %q and %q share a slot", a, b)
		}
		err := client.MGet(ctx, a, b).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
			t.Fatalf("MGET %s %s: err = %v, want a CROSSSLOT error", a, b, err)
		}
		if err := client.MGet(ctx, a, "{a}.2").Err(); err != nil {
			t.Fatalf("MGET of two keys in one slot: %v", err)
		}
	})

	// Last, because it leaves the cluster with a dead node.
	t.Run("FailoverAfterKillMaster", func(t *testing.T) {
		key := "failover:{victim}"
		slot := redistest.Slot(key)
		if err := client.Set(ctx, key, "before", 0).Err(); err != nil {
			t.Fatalf("SET before failover: %v", err)
		}
		killedAt := time.Now()
		old := c.KillMaster(t, slot)
		c.WaitFailover(t, slot)
		t.Logf("failover of slot %d from %s took %v", slot, old, time.Since(killedAt))

		promoted := c.MasterForSlot(t, slot)
		if promoted == old {
			t.Fatalf("slot %d is still served by the killed master %s", slot, old)
		}
		// The killed master's replica is the only candidate for promotion.
		i := slices.Index(c.Addrs(), old)
		if want := c.Addrs()[i+3]; promoted != want {
			t.Fatalf("slot %d promoted to %s, want %s (the replica of %s)", slot, promoted, want, old)
		}

		took := redistest.Within(t, 10*time.Second, "SET after failover", func() error {
			return client.Set(ctx, key, "after", 0).Err()
		})
		t.Logf("cluster client's first successful SET came %v after WaitFailover", took)
		if got, err := client.Get(ctx, key).Result(); err != nil || got != "after" {
			t.Fatalf("GET after failover = %q, %v", got, err)
		}
	})
}
