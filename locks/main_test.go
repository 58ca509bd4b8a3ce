package locks

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	ada    = protocol.Holder{OID: "u-ada", Name: "Ada Lovelace"}
	grace  = protocol.Holder{OID: "u-grace", Name: "Grace Hopper"}
	margot = protocol.Holder{OID: "u-margaret", Name: "Margaret Hamilton"}
)

// backend is one kind of Redis the store must work on.
type backend struct {
	name    string
	client  func(t *testing.T) redis.UniversalClient
	cluster *redistest.Cluster // set for the cluster backend
	// advance moves the server's clock on where time is driven (miniredis expires
	// keys only when told); nil where Redis keeps real time.
	advance func(time.Duration)
}

// TestStore proves the store on miniredis, a real redis-server and a real 6-node Redis
// Cluster: every outcome of PROTOCOL.md §2, the change feed across instances, expiry
// announced once, release on detach; and on the cluster, the seed's slot bug.
func TestStore(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("outcomes", func(t *testing.T) { testOutcomes(t, b) })
			t.Run("feed", func(t *testing.T) { testFeed(t, b.client) })
			t.Run("expired once", func(t *testing.T) { testExpiredOnce(t, b) })
			t.Run("detach", func(t *testing.T) { testDetach(t, b.client) })
			t.Run("release from a tab", func(t *testing.T) { testReleaseFromTab(t, b.client) })
			t.Run("foreign expiry", func(t *testing.T) { testForeignExpiry(t, b) })
			t.Run("other writers", func(t *testing.T) { testOtherWriters(t, b) })
			t.Run("list as JSON", func(t *testing.T) { testListJSON(t, b) })
			t.Run("feed example", func(t *testing.T) { testFeedExample(t, b) })
			t.Run("presence", func(t *testing.T) { testPresence(t, b) })
			t.Run("nudge", func(t *testing.T) { testNudge(t, b) })
			t.Run("presence odd data", func(t *testing.T) { testPresenceOddData(t, b) })
			t.Run("reap", func(t *testing.T) { testReap(t, b) })
			t.Run("forget", func(t *testing.T) { testForget(t, b) })
			t.Run("skewed clocks", func(t *testing.T) { testSkewedClocks(t, b) })
			if b.cluster != nil {
				t.Run("seed bug regression", func(t *testing.T) { testSeedBugRegression(t, b.cluster) })
				t.Run("key slots", func(t *testing.T) { testKeySlotsOnCluster(t, b.cluster) })
			}
		})
	}
}

// backends are the Redis kinds every outcome is proven on: miniredis (the embedded
// default), a real standalone redis-server and a real 6-node Redis Cluster. The real
// servers are started once per call and shared by the subtests.
func backends(t *testing.T) []backend {
	t.Helper()
	srv := redistest.StartServer(t)
	cl := redistest.StartCluster(t)
	mr := miniredis.RunT(t)
	return []backend{
		{"miniredis", func(t *testing.T) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { c.Close() })
			return c
		}, nil, mr.FastForward},
		{"standalone", func(t *testing.T) redis.UniversalClient { return srv.Client(t) }, nil, nil},
		{"cluster", func(t *testing.T) redis.UniversalClient { return cl.Client(t) }, cl, nil},
	}
}

func newStore(t testing.TB, c redis.UniversalClient, cfg Config) (*Store, *redistest.LogBuffer) {
	t.Helper()
	logs := &redistest.LogBuffer{}
	cfg.Client = c
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	s, err := NewStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// expect returns a checker of an operation's answer: expect(t, want)(s.Claim(...)).
func expect(t testing.TB, want protocol.Outcome) func(Result, error) Result {
	return func(got Result, err error) Result {
		t.Helper()
		if err != nil {
			t.Fatalf("error %v, want outcome %s", err, want)
		}
		if got.Outcome != want {
			t.Fatalf("outcome %s, want %s (lock %+v)", got.Outcome, want, got.Lock)
		}
		return got
	}
}
