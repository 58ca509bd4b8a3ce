package locks

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The lists' share of Redis. A tenant at its quota (20,000 locks of one type) whose
// people read it in a loop, as every limit of PROTOCOL.md §4 allows, kept Redis busy
// 0.7 s a second with pages of 256 locks, one read at a time (coalesced), and another
// tenant's claims waited behind them (lockbench -mode share). Pages are short, so no
// command is long; what they add up to is a share of Redis, and here each tenant's
// lists on an instance draw on a budget of locks read a second. A list over it is not
// refused (a grid must show its locks) but slowed: its next page waits for the budget,
// and the reads that arrive meanwhile share it (coalesce). Each page is charged its
// locks and PageCharge more for the call itself, so a crowd re-reading a small type
// thousands of times draws on the budget as a big type's pages do.

// SettingListLocksPerTenant is the setting of the lists' share, and its label in
// lockhub_store_limit_hits_total.
const SettingListLocksPerTenant = "max-list-locks-per-tenant"

// The lists' share, for the zero fields of Config: 10,000 locks a second is about one
// read of a tenant's whole quota every 2.5 s (its 313 pages charge 5,008 more), about
// 0.03 s of Redis's CPU a second; the burst is four such reads.
// Measured with lockbench -mode share (4 people of a tenant at its quota listing in a
// loop, 5 pairs of 10 s): at 50,000 a second another tenant's claim p99 was 2.57× its
// p99 without them (Redis 0.23 s/s), at 30,000 1.79× (0.18), at 20,000 1.25× (0.16),
// and with bursts of 100,000 rather than 200,000 0.84× and 1.33× in two runs. On a
// noisier machine (2026-12-07, 4 runs of each, alternating) 20,000 gave 1.52, 1.37,
// 1.76 and 1.30× (Redis 0.18-0.22 s/s under the load) and 10,000 gave 1.33, 0.97, 0.98
// and 1.36× (0.14-0.16 s/s). A tenant of a few hundred locks never meets the budget;
// one at its quota lists its whole type four times at once, then once every 2.5 s on
// each instance, where 20,000 allowed once every 1.25 s.
// The rest of the lists' cost is the hub's and the machine's, not Redis's alone: a read
// costs Redis about 2.8 µs a lock and the hub as much again, in short pieces.
const (
	DefaultListLocksPerTenant = 10000
	DefaultListLocksBurst     = 100000
)

// PageCharge is what a page costs beyond its locks, in locks: a call costs Redis about
// as much as a few dozen locks read (cmd/lockbench/CAPACITY.md R3: about 60 µs a call
// against 1.2–1.8 µs a lock); 16 keeps a reconnect crowd's many small reads within the
// burst.
const PageCharge = 16

// listShare is the budget of each tenant's lists on this instance.
type listShare struct {
	rate  rate.Limit // 0: no budget
	burst int

	mu      sync.Mutex
	tenants map[string]*tenantShare // guarded by mu
	pruned  time.Time               // guarded by mu
}

type tenantShare struct {
	lim  *rate.Limiter
	used time.Time // guarded by listShare.mu
}

// listShareKeep is how long the budget of a tenant that stopped listing is kept.
const listShareKeep = time.Minute

// limiter returns tenant's budget, made at the first read.
func (l *listShare) limiter(tenant string, now time.Time) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tenants == nil {
		l.tenants = map[string]*tenantShare{}
	}
	t := l.tenants[tenant]
	if t == nil {
		t = &tenantShare{lim: rate.NewLimiter(l.rate, l.burst)}
		l.tenants[tenant] = t
	}
	t.used = now
	if now.Sub(l.pruned) >= listShareKeep {
		l.pruned = now
		for k, v := range l.tenants {
			if now.Sub(v.used) >= listShareKeep {
				delete(l.tenants, k)
			}
		}
	}
	return t.lim
}

// charge draws a page of n locks from tenant's budget and, with wait, waits when the
// budget is spent, for as long as it takes to refill or until ctx leaves only one
// Timeout: a list is slowed by its share, never failed by it.
func (s *core) charge(ctx context.Context, tenant string, n int, wait bool) {
	if s.lists.rate == 0 {
		return
	}
	now := time.Now()
	r := s.lists.limiter(tenant, now).ReserveN(now, min(n+PageCharge, s.lists.burst))
	delay := r.DelayFrom(now)
	if delay <= 0 || !wait {
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		delay = min(delay, time.Until(dl)-s.timeout)
	}
	s.met.limits.WithLabelValues(SettingListLocksPerTenant).Inc()
	if slowed, due := s.share.warned.note(SettingListLocksPerTenant, 1, now); due {
		s.log.LogAttrs(ctx, slog.LevelWarn, "a tenant's lists are slowed by their share of Redis; raise --"+SettingListLocksPerTenant+" if legitimate users wait",
			slog.String("setting", SettingListLocksPerTenant), slog.String("tenant", tenant), slog.Int("pages slowed", slowed),
			slog.String("metric", "lockhub_store_limit_hits_total"))
	}
	if delay <= 0 {
		return
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
