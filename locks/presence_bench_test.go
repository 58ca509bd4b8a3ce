package locks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// BenchmarkPresence measures what presence costs Redis (PROTOCOL.md §9) with 10,000
// viewers over 1,000 entities, 10 people each, on a real redis-server:
//
//   - bytes/viewer: Redis's used_memory grown by the views, per view;
//
//   - refresh: one entity's refresh (its 10 views extended in one script, as each
//     instance does every --presence-ttl/3), timed against a PING round trip measured
//     interleaved (refresh/ping), and the script's own time inside Redis
//     (INFO commandstats), from which redis-cpu-% is the share of one Redis core that
//     refreshing 10,000 viewers takes with the default 30 s ttl (1,000 entities every
//     10 s).
//
//     go test -run='^$' -bench=Presence -benchtime=2000x ./locks/
func BenchmarkPresence(b *testing.B) {
	const entities, perEntity = 1000, 10
	srv := redistest.StartServer(b)
	c := srv.Client(b)
	s, _ := newStore(b, c, benchConfig(5*time.Second))
	ctx := context.Background()
	before := usedMemory(b, c)
	refs := make([]Ref, entities)
	conns := make([][]string, entities)
	for e := range entities {
		refs[e] = Ref{"bench", "ApprovalRequest", fmt.Sprintf("r-%d", 1000+e)}
		for p := range perEntity {
			conn := fmt.Sprintf("c-%026d", e*perEntity+p) // as long as a real connection id
			conns[e] = append(conns[e], conn)
			v := View{Conn: conn, Viewer: protocol.Viewer{OID: fmt.Sprintf("u-%d", p), Name: fmt.Sprintf("Person Number %d", p),
				Since: protocol.NewTime(time.Now())}}
			if _, err := s.Presence.View(ctx, refs[e], v, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	}
	perViewer := float64(usedMemory(b, c)-before) / (entities * perEntity)
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}

	var refreshT, pingT time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		e := i % entities
		first := func() {
			refreshT += timeIt(func() {
				vs, missing, err := s.Presence.RefreshViews(ctx, refs[e], time.Hour, conns[e]...)
				if err != nil || len(missing) != 0 || len(vs.List) != perEntity {
					b.Fatalf("refresh: %d viewers, %d missing, %v", len(vs.List), len(missing), err)
				}
			})
		}
		second := func() { pingT += timeIt(func() { c.Ping(ctx) }) }
		if i%2 == 1 {
			first, second = second, first
		}
		first()
		second()
	}
	b.StopTimer()
	usec := scriptUsec(b, c)
	b.ReportMetric(perViewer, "bytes/viewer")
	b.ReportMetric(float64(refreshT.Nanoseconds())/float64(b.N), "refresh-ns/entity")
	b.ReportMetric(float64(refreshT)/float64(pingT), "refresh/ping")
	b.ReportMetric(usec, "redis-µs/refresh")
	// 1,000 entities refreshed every 10 s: 100 refreshes a second.
	b.ReportMetric(usec*entities/(benchViewRefresh.Seconds())/1e6*100, "redis-cpu-%")
}

// benchViewRefresh is how often a hub with the default --presence-ttl (30 s)
// refreshes its views: for the benchmark's arithmetic only.
const benchViewRefresh = 10 * time.Second

// usedMemory is Redis's used_memory, bytes.
func usedMemory(b *testing.B, c *redis.Client) int64 {
	b.Helper()
	return infoInt(b, c, "memory", "used_memory")
}

// scriptUsec is the mean time inside Redis of the scripts run since the last
// CONFIG RESETSTAT, µs (they run as EVALSHA: the views before loaded them).
func scriptUsec(b *testing.B, c *redis.Client) float64 {
	b.Helper()
	calls, usec := evalshaStats(b, c)
	if calls == 0 {
		b.Fatal("no scripts counted in INFO commandstats")
	}
	return usec / calls
}

func infoInt(b *testing.B, c *redis.Client, section, field string) int64 {
	b.Helper()
	info := c.Info(context.Background(), section).Val()
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("INFO %s has no %s", section, field)
	return 0
}
