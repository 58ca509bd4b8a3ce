package locks

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestListPages proves that lists read a type page by page (list.lua) and miss nothing:
// on every backend a type of several pages lists each lock once; and on a crafted index
// with ties of one score, a cursor whose member moved between two pages starts again at
// its score, so the moved lock comes twice (kept once) and no lock is skipped.
func TestListPages(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			s, _ := newStore(t, c, Config{Timeout: 10 * time.Second, MaxLocksPerPerson: 10000, ChangesBurst: 10000})
			ctx := ctxT(t)
			tenant := "pages-" + b.name
			n := 2*ListPage + 17
			for i := range n {
				expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", fmt.Sprintf("r-%04d", i)}, ada, ""))
			}
			ls := must1(s.Locks.List(ctx, tenant, "ApprovalRequest"))
			uids := map[string]bool{}
			for _, l := range ls {
				uids[l.EntityUID] = true
			}
			if len(ls) != n || len(uids) != n {
				t.Fatalf("List read %d locks, %d of them distinct, want %d", len(ls), len(uids), n)
			}
			if all := adminLocks(t, s, tenant); len(all) != n {
				t.Fatalf("AdminLocksJSON read %d locks, want %d", len(all), n)
			}

			// Ties: a, b, c at score 100, d at 200; pages of 2. Between the first page
			// and the second, b (the cursor) moves to 300, as a renewal moves it.
			tt := tenant + "-ties"
			idx, prefix := IndexKey(tt, "ApprovalRequest"), lockKeyPrefix(tt, "ApprovalRequest")
			for _, m := range []struct {
				uid   string
				score float64
			}{{"a", 100}, {"b", 100}, {"c", 100}, {"d", 200}} {
				c.ZAdd(ctx, idx, redis.Z{Score: m.score, Member: prefix + m.uid})
				c.Set(ctx, prefix+m.uid, m.uid, time.Minute)
			}
			keys := []string{idx, ValuesKey(tt, "ApprovalRequest")}
			var read []string
			page := func(cursor string) string {
				reply := must1(s.core.sc.list.Run(ctx, s.core.rdb, keys, prefix, 2, cursor).Slice())
				for _, v := range reply[1].([]any) {
					read = append(read, v.(string))
				}
				return reply[2].(string)
			}
			next := page("i")
			if want := "i 100 " + prefix + "b"; next != want {
				t.Fatalf("the first page's cursor is %q, want %q", next, want)
			}
			c.ZAdd(ctx, idx, redis.Z{Score: 300, Member: prefix + "b"})
			for next != "" {
				next = page(next)
			}
			if !slices.Equal(read, []string{"a", "b", "a", "c", "d", "b"}) {
				t.Fatalf("pages read %q, want a b, then a c again from the moved cursor's score, then d b", read)
			}
		})
	}
}

// TestSweepInChunks: a sweep compares at most sweepWindow/32 candidates a call, and the
// calls Sweeps make announce a program's rewrite of a big type all the same, each
// change once.
func TestSweepInChunks(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			s, _ := newStore(t, c, Config{Timeout: 10 * time.Second})
			ctx := ctxT(t)
			tenant := "chunks-" + b.name
			rec := runFeed(t, s, s, tenant)
			net := redistest.DotNet{C: c}
			n := sweepWindow + sweepWindow/2
			for i := range n {
				if ok, _, err := net.Claim(ctx, tenant, "ApprovalRequest", fmt.Sprintf("n-%04d", i), ada.OID, ada.Name); err != nil || !ok {
					t.Fatalf(".NET claim: %v %v", ok, err)
				}
			}
			more, err := s.core.sweepOnce(ctx, tenant, "ApprovalRequest", 0)
			if err != nil || !more {
				t.Fatalf("one call over %d changes: more %v, %v; want candidates left", n, more, err)
			}
			// Each Sweep makes at most sweepCalls+1 calls of sweepWindow/32 candidates.
			sweeps := (n + (sweepCalls+1)*sweepWindow/32 - 1) / ((sweepCalls + 1) * sweepWindow / 32)
			for range sweeps {
				if err := s.Locks.Sweep(ctx, tenant, "ApprovalRequest", 0); err != nil {
					t.Fatal(err)
				}
			}
			acquired := func() (events int, uids map[string]bool) {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				uids = map[string]bool{}
				for _, c := range rec.changes {
					if c.Tenant == tenant && c.Event.Op == protocol.OpAcquired && c.Event.Lock.EntityUID != "probe" {
						events++
						uids[c.Event.Lock.EntityUID] = true
					}
				}
				return events, uids
			}
			redistest.Eventually(t, "every change announced", func() bool { _, u := acquired(); return len(u) == n })
			if events, _ := acquired(); events != n {
				t.Fatalf("%d Acquired announced for %d changes: some twice", events, n)
			}
		})
	}
}

// TestSweepBoundedPerSecond: however many changes wait in a type, one Sweep makes at
// most sweepCalls+1 short calls, and another instance's Sweep within the interval makes
// one call that finds the mark and does nothing, so a type costs Redis at most that many
// calls a second (PROTOCOL.md §4, bounded work). What a Sweep could not reach is
// announced by the next ones, each change once; a lockhub change of an entity the sweep
// has not reached yet announces the other program's change first, in order, and no
// later sweep announces it again. On a real redis-server, whose statistics count calls.
func TestSweepBoundedPerSecond(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	a, _ := newStore(t, c, Config{Timeout: 10 * time.Second})
	b, _ := newStore(t, c, Config{Timeout: 10 * time.Second}) // another instance
	ctx := ctxT(t)
	const tenant, typ = "bounded", "ApprovalRequest"
	rec := runFeed(t, a, a, tenant)
	net := redistest.DotNet{C: c}
	perSweep := (sweepCalls + 1) * sweepWindow / 32 // the most changes one Sweep compares
	n := 2*perSweep + perSweep/2
	for i := range n {
		if ok, _, err := net.Claim(ctx, tenant, typ, fmt.Sprintf("n-%04d", i), ada.OID, ada.Name); err != nil || !ok {
			t.Fatalf(".NET claim: %v %v", ok, err)
		}
	}
	announced := func() map[string]int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		got := map[string]int{}
		for _, ch := range rec.changes {
			if ch.Tenant == tenant && ch.Event.Op == protocol.OpAcquired && strings.HasPrefix(ch.Event.Lock.EntityUID, "n-") {
				got[ch.Event.Lock.EntityUID]++
			}
		}
		return got
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Locks.Sweep(ctx, tenant, typ, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := int(commandCalls(t, c, "evalsha")); got != sweepCalls+1 {
		t.Fatalf("a Sweep of %d changes made %d calls, want the bound, %d", n, got, sweepCalls+1)
	}
	redistest.Eventually(t, "the first Sweep's changes", func() bool { return len(announced()) == perSweep })
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Locks.Sweep(ctx, tenant, typ, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := int(commandCalls(t, c, "evalsha")); got != 1 {
		t.Fatalf("another instance's Sweep within the interval made %d calls, want 1 that finds the mark", got)
	}

	// Margaret takes over one the sweep has not announced yet.
	var late string
	seen := announced()
	for i := n - 1; i >= 0 && late == ""; i-- {
		if uid := fmt.Sprintf("n-%04d", i); seen[uid] == 0 {
			late = uid
		}
	}
	expect(t, protocol.OutcomeTakenOver)(a.Locks.Takeover(ctx, Ref{tenant, typ, late}, margot, "", true))
	for range 2 {
		if err := a.Locks.Sweep(ctx, tenant, typ, 0); err != nil {
			t.Fatal(err)
		}
	}
	redistest.Eventually(t, "every change announced", func() bool { return len(announced()) == n })
	marker := Ref{tenant, typ, "marker"}
	expect(t, protocol.OutcomeAcquired)(a.Locks.Claim(ctx, marker, grace, "")) // Ada holds far over her quota
	redistest.Eventually(t, "the marker arrives", func() bool { return len(rec.of(tenant, "marker")) > 0 })
	for uid, k := range announced() {
		if k != 1 {
			t.Errorf("%s announced Acquired %d times", uid, k)
		}
	}
	if got := ops(rec.of(tenant, late)); got != "Acquired TakenOver " {
		t.Fatalf("events of %s, taken over before the sweep reached it: %s, want Acquired TakenOver", late, got)
	}
}

// TestSweepQuietReadsNoScores: once the sweep has caught up with a bulk write by another
// program, a sweep of the type in which nothing changed finds each window of the index
// equal to the seen set's at the same rank and reads no scores (ZMSCORE), on a real
// redis-server. The two windows drifted a window apart for good after a bulk write, and
// every quiet call of a big type then read both windows' scores.
func TestSweepQuietReadsNoScores(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	s, _ := newStore(t, c, Config{Timeout: 10 * time.Second})
	ctx := ctxT(t)
	const tenant = "quiet"
	net := redistest.DotNet{C: c}
	n := 3*sweepWindow + sweepWindow/2 // the last window partial
	for i := range n {
		if ok, _, err := net.Claim(ctx, tenant, "ApprovalRequest", fmt.Sprintf("n-%04d", i), ada.OID, ada.Name); err != nil || !ok {
			t.Fatalf(".NET claim: %v %v", ok, err)
		}
	}
	calls := func(cmd string) int { return int(commandCalls(t, c, cmd)) }
	// The catch-up (every lock is a change to announce), then a round of the windows.
	for range 2 {
		if err := s.Locks.Sweep(ctx, tenant, "ApprovalRequest", 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Locks.Sweep(ctx, tenant, "ApprovalRequest", 0); err != nil {
		t.Fatal(err)
	}
	if got := calls("evalsha"); got < n/sweepWindow+1 {
		t.Fatalf("a sweep of %d locks made %d calls, want %d windows' worth", n, got, n/sweepWindow+1)
	}
	if got := calls("zmscore"); got != 0 {
		t.Fatalf("a quiet sweep read scores %d times: its windows are not in step", got)
	}
}

// TestSweepMovesPastLocksInTheirLastSecond: locks whose lease ends within the second of
// skew the sweep allows are compared where a call has room, but do not hold the windows
// where they are: with more of them than a call compares, a release by another program
// in a later window is still found by the next sweep (it was not while they lived: every
// call was cut short and kept its cursor).
func TestSweepMovesPastLocksInTheirLastSecond(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	clk := &fakeClock{t: time.Now()}
	s, _ := newStore(t, c, Config{Timeout: 10 * time.Second, Now: clk.Now})
	ctx := ctxT(t)
	const tenant, typ = "last-second", "ApprovalRequest"
	long, short := redistest.DotNet{C: c, Lease: time.Hour}, redistest.DotNet{C: c, Lease: 30 * time.Second}
	n := 3 * sweepWindow
	for i := range n {
		if ok, _, err := long.Claim(ctx, tenant, typ, fmt.Sprintf("n-%04d", i), ada.OID, ada.Name); err != nil || !ok {
			t.Fatalf(".NET claim: %v %v", ok, err)
		}
	}
	for i := range 3 * sweepWindow / 32 { // more than a call compares
		if ok, _, err := short.Claim(ctx, tenant, typ, fmt.Sprintf("s-%02d", i), grace.OID, grace.Name); err != nil || !ok {
			t.Fatalf(".NET claim: %v %v", ok, err)
		}
	}
	for range 3 { // the catch-up, and a round of the windows
		if err := s.Locks.Sweep(ctx, tenant, typ, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The short leases are in their last second by lockhub's clock (their keys live on
	// for 29 s in Redis), and another program releases a lock of the last window.
	clk.add(30*time.Second - 500*time.Millisecond)
	gone := fmt.Sprintf("n-%04d", n-1)
	if ok, err := long.Release(ctx, tenant, typ, gone, ada.OID); err != nil || !ok {
		t.Fatalf(".NET release: %v %v", ok, err)
	}
	if err := s.Locks.Sweep(ctx, tenant, typ, 0); err != nil {
		t.Fatal(err)
	}
	key, _ := redistest.DotNetKeys(tenant, typ, gone)
	if copied, err := c.HExists(ctx, ValuesKey(tenant, typ), key).Result(); err != nil || copied {
		t.Fatalf("after a sweep, lockhub still keeps the copy of %s, released by another program: %v %v", gone, copied, err)
	}
}

// TestSweepRescoresALockThatOutlivesItsScore: a lock whose index score has passed by
// lockhub's clock while its key lives on (the writer's clock behind lockhub's) is given
// the score of its key's TTL by the sweep that finds it, so that it is not due, and a
// candidate of every call, until it really ends; nothing is announced for it.
func TestSweepRescoresALockThatOutlivesItsScore(t *testing.T) {
	c := redistest.StartServer(t).Client(t)
	clk := &fakeClock{t: time.Now()}
	s, _ := newStore(t, c, Config{Timeout: 10 * time.Second, Now: clk.Now})
	ctx := ctxT(t)
	const tenant, typ = "outlives", "ApprovalRequest"
	net := redistest.DotNet{C: c, Lease: 30 * time.Second}
	if ok, _, err := net.Claim(ctx, tenant, typ, "n-1", ada.OID, ada.Name); err != nil || !ok {
		t.Fatalf(".NET claim: %v %v", ok, err)
	}
	if err := s.Locks.Sweep(ctx, tenant, typ, 0); err != nil { // seen, announced
		t.Fatal(err)
	}
	clk.add(20 * time.Second) // lockhub's clock runs 20 s ahead of the writer's
	key, index := redistest.DotNetKeys(tenant, typ, "n-1")
	c.ZAdd(ctx, index, redis.Z{Score: float64(clk.Now().Add(-time.Second).UnixMilli()), Member: key}) // its score passed by lockhub's clock
	if err := s.Locks.Sweep(ctx, tenant, typ, 0); err != nil {
		t.Fatal(err)
	}
	score, err := c.ZScore(ctx, index, key).Result()
	if err != nil {
		t.Fatalf("the lock left the index: %v", err)
	}
	if now := float64(clk.Now().UnixMilli()); score <= now+1000 {
		t.Fatalf("the index score is %.0f, %.0f ms from lockhub's now: still due", score, score-now)
	}
	if l := must1(s.Locks.Get(ctx, Ref{tenant, typ, "n-1"})); l == nil || l.HolderOID != ada.OID {
		t.Fatalf("the lock is %+v after the sweep, want Ada's still", l)
	}
}
