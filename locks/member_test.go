package locks

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// The Member on a real redis-server: its timeouts are short (a heartbeat every 100 ms),
// and every wait polls Redis or its metrics with a deadline (redistest.Eventually).

// memberTimeout is the instance timeout of these tests unless one says otherwise.
const memberTimeout = 300 * time.Millisecond

// runMember makes a Member with cfg, its Instances and Locks taken from s where cfg
// leaves them nil, and runs it; the test's cleanup stops it and waits for Run, and so
// does stop, for a test that stops it early.
func runMember(t *testing.T, s *Store, cfg MemberConfig) (m *Member, stop func()) {
	t.Helper()
	if cfg.Instances == nil {
		cfg.Instances = s.Instances
	}
	if cfg.Locks == nil {
		cfg.Locks = s.Locks
	}
	cfg.InstanceTimeout = cmp.Or(cfg.InstanceTimeout, memberTimeout)
	if cfg.Logger == nil {
		cfg.Logger = s.core.log
	}
	m, err := NewMember(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(stop)
	return m, stop
}

// realStore returns a store on a fresh redis-server, and a client of the server.
func realStore(t *testing.T, cfg Config) (*Store, *redis.Client) {
	t.Helper()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	s, _ := newStore(t, c, cfg)
	return s, c
}

// storeThrough returns a store whose Redis, reached with the production client, is
// behind part: cutting part cuts the store off.
func storeThrough(t *testing.T, part *redistest.Partition, cfg Config) *Store {
	t.Helper()
	rdb, err := NewClient(part.URL(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	s, _ := newStore(t, rdb, cfg)
	return s
}

// count is a counter's value.
func count(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }

// heldBy returns the holdings of instance as Redis lists them, sorted.
func heldBy(t *testing.T, c redis.UniversalClient, instance string) []Holding {
	t.Helper()
	ms, err := c.SMembers(context.Background(), heldKey(instance)).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []Holding
	for _, m := range ms {
		h, err := parseHolding(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Holding) int { return cmp.Compare(a.member(), b.member()) })
	return out
}

// failingHoldings fails the next n holdings updates, as a Redis failing open would,
// and counts the heartbeats.
type failingHoldings struct {
	MemberInstances
	n      atomic.Int32 // updates still to fail
	failed atomic.Int32
	beats  atomic.Int32
}

func (s *failingHoldings) Heartbeat(ctx context.Context, instance string) (Liveness, error) {
	l, err := s.MemberInstances.Heartbeat(ctx, instance)
	s.beats.Add(1)
	return l, err
}

func (s *failingHoldings) UpdateHoldings(ctx context.Context, instance string, add, remove []Holding) error {
	if s.n.Add(-1) >= 0 {
		s.failed.Add(1)
		return errors.New("holdings write failed (test)")
	}
	return s.MemberInstances.UpdateHoldings(ctx, instance, add, remove)
}

// TestMemberHoldingsWriteRetried: a holdings write that fails is not lost: it is made
// at the next heartbeat, with no other change to prompt it. (The holdings are in Redis
// already: the heartbeat does not find them missing and write them whole.)
func TestMemberHoldingsWriteRetried(t *testing.T) {
	s, c := realStore(t, Config{})
	fs := &failingHoldings{MemberInstances: s.Instances}
	m, _ := runMember(t, s, MemberConfig{Instances: fs})
	h1 := Holding{Ref: Ref{"acme", "ApprovalRequest", "r-1"}, Holder: ada.OID, Conn: "c-1"}
	h2 := Holding{Ref: Ref{"acme", "ApprovalRequest", "r-2"}, Holder: ada.OID, Conn: "c-1"}
	m.Hold(h1)
	redistest.Eventually(t, "r-1 written", func() bool { return slices.Equal(heldBy(t, c, m.ID()), []Holding{h1}) })
	// Steady: a heartbeat begun before r-1 was written may have found the holdings
	// missing and asked for them whole; one begun after has not.
	beats := fs.beats.Load()
	redistest.Eventually(t, "two heartbeats more, nothing to write", func() bool { return fs.beats.Load() >= beats+2 && !m.pending() })
	fs.n.Store(1)
	m.Hold(h2)
	redistest.Eventually(t, "r-2 written", func() bool { return slices.Equal(heldBy(t, c, m.ID()), []Holding{h1, h2}) })
	if fs.failed.Load() != 1 {
		t.Fatalf("%d holdings writes failed, want 1: the test proved nothing", fs.failed.Load())
	}
}

// TestMemberHoldingsFollowTheSockets: holdings are written as sockets hold and drop
// locks, and a mark of leaving changes nothing in Redis.
func TestMemberHoldingsFollowTheSockets(t *testing.T) {
	s, c := realStore(t, Config{})
	m, _ := runMember(t, s, MemberConfig{})
	h1 := Holding{Ref: Ref{"acme", "ApprovalRequest", "r-1"}, Holder: ada.OID, Conn: "c-1"}
	h2 := Holding{Ref: Ref{"acme", "ApprovalRequest", "r-2"}, Holder: ada.OID, Conn: "c-1"}
	m.Hold(h1)
	m.Hold(h2)
	redistest.Eventually(t, "both written", func() bool { return slices.Equal(heldBy(t, c, m.ID()), []Holding{h1, h2}) })
	m.Leaving(h1)
	m.Left(h1) // the release answered notHeld for this socket: still held
	m.Leaving(h2)
	m.Drop(h2)
	redistest.Eventually(t, "r-2 dropped", func() bool { return slices.Equal(heldBy(t, c, m.ID()), []Holding{h1}) })
	if m.gone(h1) || !m.gone(h2) {
		t.Fatalf("gone(r-1) = %v, gone(r-2) = %v; want false, true", m.gone(h1), m.gone(h2))
	}
}

// TestMemberTakenForDead: an instance taken for dead while it lived (another reaped
// its record and its holdings, as after a partition of it alone) finds its record gone
// at its next heartbeat, says so, and writes its holdings again: if it dies later, its
// locks are released as any dead instance's are. It puts back the socket the reaper
// forgot, so that it counts again for the two-tab rule. Holdings deleted while the record
// stays (a reap of it that ended after it came back, eviction) are written again too,
// without taking it for dead.
func TestMemberTakenForDead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dropRecord bool
	}{
		{"record and holdings gone", true},
		{"holdings gone", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := realStore(t, Config{})
			m, _ := runMember(t, s, MemberConfig{})
			ctx := ctxT(t)
			ref := Ref{"acme", "ApprovalRequest", "r-1"}
			h := Holding{Ref: ref, Holder: ada.OID, Conn: "c-1"}
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "c-1"))
			expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, ref, ada, "c-other"))
			m.Hold(h)
			redistest.Eventually(t, "the holding written", func() bool { return len(heldBy(t, c, m.ID())) == 1 })
			// What a reaper does (Reap, Forget, then FinishReap), at once: a heartbeat
			// between them would write the holdings before they were deleted.
			if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				if tc.dropRecord {
					// The reaper lives: its own record is in the set.
					p.ZAdd(ctx, instancesKey, redis.Z{Score: float64(time.Now().UnixMilli()), Member: "i-reaper"})
					p.ZRem(ctx, instancesKey, m.ID())
					p.SRem(ctx, ConnsKey(ref), "c-1")
				}
				p.Del(ctx, heldKey(m.ID()))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			redistest.Eventually(t, "the holdings written again", func() bool { return slices.Equal(heldBy(t, c, m.ID()), []Holding{h}) })
			if !tc.dropRecord {
				if got := count(m.met.takenForDead) + count(m.met.reattached); got != 0 {
					t.Fatalf("taken for dead and reattached: %v, want none", got)
				}
				return
			}
			if got := count(m.met.takenForDead); got != 1 {
				t.Fatalf("lockhub_hub_taken_for_dead_total = %v, want 1", got)
			}
			// Its socket, forgotten by the reaper, is back in the lock's sockets.
			redistest.Eventually(t, "the socket put back", func() bool {
				return c.SCard(ctx, ConnsKey(ref)).Val() == 2 && count(m.met.reattached) == 1
			})
		})
	}
}

// TestMemberRedisLostItsData: a Redis that restarted empty (or failed over without
// persistence) lost every instance's record at once. A Member that finds its own gone
// then says so, not that it was taken for dead (ISSUE 30), and writes its holdings
// again all the same.
func TestMemberRedisLostItsData(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	s, logs := newStore(t, c, Config{})
	m, _ := runMember(t, s, MemberConfig{})
	ctx := ctxT(t)
	h := Holding{Ref: Ref{"acme", "ApprovalRequest", "r-1"}, Holder: ada.OID, Conn: "c-1"}
	m.Hold(h)
	redistest.Eventually(t, "the holding and the record written", func() bool {
		return len(heldBy(t, c, m.ID())) == 1 && c.ZScore(ctx, instancesKey, m.ID()).Err() == nil
	})
	if err := c.FlushAll(ctx).Err(); err != nil { // what a restart without persistence leaves
		t.Fatal(err)
	}
	// The holdings may come back before the warning: a holdings write of the member's
	// own can land after the flush and before the next heartbeat finds the records gone.
	redistest.Eventually(t, "the warning that Redis lost its data", func() bool { return strings.Contains(logs.String(), "Redis lost its data") })
	redistest.Eventually(t, "the holdings written again", func() bool { return slices.Equal(heldBy(t, c, m.ID()), []Holding{h}) })
	if strings.Contains(logs.String(), "taken for dead") || count(m.met.takenForDead) != 0 {
		t.Fatalf("a Redis that lost its data was taken for a reap of this instance:\n%s", logs.String())
	}
}

// beatLog records the liveness calls of a Member and fails the heartbeats it is told
// to.
type beatLog struct {
	MemberInstances
	fail   atomic.Int32 // heartbeats still to fail
	failed atomic.Int32 // heartbeats failed, by this or by Redis
	ok     atomic.Int32 // heartbeats that succeeded
	mu     sync.Mutex
	calls  []string // "beat", "beat failed", "reap"
}

func (s *beatLog) note(c string) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *beatLog) Heartbeat(ctx context.Context, instance string) (Liveness, error) {
	if s.fail.Add(-1) >= 0 {
		s.note("beat failed")
		s.failed.Add(1)
		return Liveness{}, errors.New("heartbeat failed (test)")
	}
	l, err := s.MemberInstances.Heartbeat(ctx, instance)
	if err != nil {
		s.failed.Add(1)
	} else {
		s.ok.Add(1)
	}
	s.note("beat")
	return l, err
}

func (s *beatLog) Reap(ctx context.Context, timeout, grace time.Duration) ([]DeadInstance, error) {
	s.note("reap")
	return s.MemberInstances.Reap(ctx, timeout, grace)
}

func (s *beatLog) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// TestMemberOneFailedHeartbeatKeepsReaping: a Member that reaps goes on reaping at the
// tick right after one failed heartbeat. A single gap cannot let a live instance's
// record go stale, so it does not wait a whole timeout again, which would push a dead
// instance's release past the contract's bound.
func TestMemberOneFailedHeartbeatKeepsReaping(t *testing.T) {
	s, _ := realStore(t, Config{})
	bl := &beatLog{MemberInstances: s.Instances}
	runMember(t, s, MemberConfig{Instances: bl})
	redistest.Eventually(t, "the Member reaps", func() bool { return slices.Contains(bl.log(), "reap") })
	bl.fail.Store(1)
	redistest.Eventually(t, "a heartbeat fails, and two more ticks pass", func() bool {
		c := bl.log()
		i := slices.Index(c, "beat failed")
		return i >= 0 && len(slices.DeleteFunc(c[i+1:], func(call string) bool { return call != "beat" })) >= 2
	})
	c := bl.log()
	after := c[slices.Index(c, "beat failed")+1:]
	if len(after) < 2 || after[0] != "beat" || after[1] != "reap" {
		t.Fatalf("after a failed heartbeat the Member called %v; want a heartbeat and a reap at the next tick", after)
	}
}

// TestMemberNoReapAfterOutage: when Redis was out of reach longer than the instance
// timeout, every liveness record is stale when it comes back, the live instances' too.
// Neither of two live Members takes the other for dead then, even when one is back
// first and the other only a moment later (here: at the first's first good
// heartbeat): the lock a socket holds through one of them stays, and so do its
// holdings, over several timeouts and the grace.
func TestMemberNoReapAfterOutage(t *testing.T) {
	srv := redistest.StartServer(t)
	// A timeout long enough that a busy machine does not starve a heartbeat that long.
	const timeout, grace = 600 * time.Millisecond, 200 * time.Millisecond
	partA, partB := redistest.StartPartition(t, srv.Addr()), redistest.StartPartition(t, srv.Addr())
	scfg := Config{Timeout: 200 * time.Millisecond}
	sa, sb := storeThrough(t, partA, scfg), storeThrough(t, partB, scfg)
	la := &beatLog{MemberInstances: sa.Instances}
	a, _ := runMember(t, sa, MemberConfig{Instances: la, InstanceTimeout: timeout, ReleaseGrace: grace})
	b, _ := runMember(t, sb, MemberConfig{InstanceTimeout: timeout, ReleaseGrace: grace})
	ctx := ctxT(t)
	check := srv.Client(t)
	ref := Ref{"acme", "ApprovalRequest", "r-1"}
	expect(t, protocol.OutcomeAcquired)(sb.Locks.Claim(ctx, ref, ada, "c-b"))
	h := Holding{Ref: ref, Holder: ada.OID, Conn: "c-b"}
	b.Hold(h)
	redistest.Eventually(t, "B's holding written", func() bool { return len(heldBy(t, check, b.ID())) == 1 })

	partA.Cut()
	partB.Cut()
	// Redis itself sees the records grow older than the timeout.
	redistest.Eventually(t, "both records stale", func() bool {
		now, err := check.Time(ctx).Result() // the server's clock scores them
		if err != nil {
			return false
		}
		old := now.Add(-timeout).UnixMilli()
		n, _ := check.ZCount(ctx, instancesKey, "-inf", strconv.FormatInt(old, 10)).Result()
		return n == 2
	})
	if la.failed.Load() == 0 {
		t.Fatal("no heartbeat of A failed during the cut: the test proved nothing")
	}
	beats := la.ok.Load()
	partA.Heal(t)
	redistest.Eventually(t, "A beats again", func() bool { return la.ok.Load() > beats })
	partB.Heal(t)
	// A false reap would come at A's next tick and release B's lock a grace later:
	// watch over several timeouts past that.
	for end := time.Now().Add(3*timeout + grace + 500*time.Millisecond); time.Now().Before(end); {
		if n := count(a.met.deadInstances) + count(b.met.deadInstances); n != 0 {
			t.Fatalf("after the outage a live instance took another for dead (%v reaps)", n)
		}
		if v, err := check.Exists(ctx, LockKey(ref)).Result(); err != nil || v != 1 {
			t.Fatalf("Ada's lock, held by a live socket on a live instance, is gone after the outage (%v)", err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond): // the pace of the checks over the window
		}
	}
	if got := heldBy(t, check, b.ID()); !slices.Equal(got, []Holding{h}) {
		t.Fatalf("B's holdings = %v after the outage, want %v", got, h)
	}
}

// TestMemberReaperStopsWithinGrace: the Member that reaps a dead instance and then
// stops (a rolling restart) before the grace has ended leaves the dead one's holdings
// in Redis: a third Member detaches them, and the lock held only through the dead
// instance goes.
func TestMemberReaperStopsWithinGrace(t *testing.T) {
	srv := redistest.StartServer(t)
	part := redistest.StartPartition(t, srv.Addr())
	scfg := Config{Timeout: 100 * time.Millisecond}
	check := srv.Client(t)
	s, _ := newStore(t, check, scfg)
	// B must be stopped within the grace after it reaped A: a grace of seconds.
	mcfg := MemberConfig{ReleaseGrace: 3 * time.Second}
	sa := storeThrough(t, part, scfg)
	a, _ := runMember(t, sa, mcfg)
	ctx := ctxT(t)
	ref := Ref{"acme", "ApprovalRequest", "r-1"}
	expect(t, protocol.OutcomeAcquired)(sa.Locks.Claim(ctx, ref, ada, "c-a"))
	a.Hold(Holding{Ref: ref, Holder: ada.OID, Conn: "c-a"})
	redistest.Eventually(t, "A's holding written", func() bool { return len(heldBy(t, check, a.ID())) == 1 })
	b, stopB := runMember(t, s, mcfg)

	part.Cut() // A is gone, as far as Redis can tell
	redistest.Eventually(t, "B reaps A", func() bool { return count(b.met.deadInstances) == 1 })
	stopB() // within the grace
	var detached []protocol.Outcome
	var mu sync.Mutex
	mcfg.Detached = func(o protocol.Outcome) {
		mu.Lock()
		detached = append(detached, o)
		mu.Unlock()
	}
	c, _ := runMember(t, s, mcfg)
	// The key goes inside the Detach, the count after it answers: wait for the count.
	redistest.Eventually(t, "the dead instance's lock released by the third Member", func() bool {
		return count(c.met.reapedLocks) >= 1
	})
	if n := check.Exists(ctx, LockKey(ref)).Val(); n != 0 {
		t.Fatal("the dead instance's lock counted as detached but still in Redis")
	}
	if got := count(c.met.reapedLocks); got != 1 {
		t.Fatalf("the third Member detached %v locks of the dead one, want 1", got)
	}
	redistest.Eventually(t, "the reap finished", func() bool {
		return check.Exists(ctx, heldKey(a.ID())).Val() == 0 && check.ZCard(ctx, reapedKey).Val() == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(detached, []protocol.Outcome{protocol.OutcomeReleased}) {
		t.Fatalf("Detached told %v, want one released", detached)
	}
}

// TestMemberDeadInstance: a live Member that finds an instance dead forgets the dead
// sockets at once wherever a live socket of the holder uses the lock (a live tab's
// release would then be the last), and a grace later detaches the dead instance's
// holdings with release: the lock held through the dead socket alone goes, no sooner
// than the grace; the one a live tab still uses stays the holder's, and the reap
// ends.
func TestMemberDeadInstance(t *testing.T) {
	const grace = 500 * time.Millisecond
	s, c := realStore(t, Config{})
	ctx := ctxT(t)
	alone := Ref{"acme", "ApprovalRequest", "r-1"} // through the dead socket alone
	both := Ref{"acme", "ApprovalRequest", "r-2"}  // Ada also has it open in a live tab
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, alone, ada, "c-dead"))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, both, ada, "c-dead"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, both, ada, "c-live"))
	held := []Holding{{Ref: alone, Holder: ada.OID, Conn: "c-dead"}, {Ref: both, Holder: ada.OID, Conn: "c-dead"}}
	if err := s.Instances.UpdateHoldings(ctx, "i-dead", held, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var detached []protocol.Outcome
	m, _ := runMember(t, s, MemberConfig{ReleaseGrace: grace, Detached: func(o protocol.Outcome) {
		mu.Lock()
		detached = append(detached, o)
		mu.Unlock()
	}})
	sockets := func(r Ref) []string {
		ids := c.SMembers(ctx, ConnsKey(r)).Val()
		slices.Sort(ids)
		return ids
	}
	// It stopped an hour ago.
	died := time.Now()
	if err := c.ZAdd(ctx, instancesKey, redis.Z{Score: float64(time.Now().Add(-time.Hour).UnixMilli()), Member: "i-dead"}).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.Eventually(t, "the dead socket forgotten on r-2", func() bool {
		return slices.Equal(sockets(both), []string{"c-live"}) && count(m.met.forgotten) == 1
	})
	if got := count(m.met.deadInstances); got != 1 {
		t.Fatalf("lockhub_hub_dead_instances_total = %v, want 1", got)
	}
	redistest.Eventually(t, "r-1 released", func() bool { return c.Exists(ctx, LockKey(alone)).Val() == 0 })
	if since := time.Since(died); since < grace {
		t.Fatalf("r-1 released %v after its instance was found dead, before the grace of %v", since, grace)
	}
	redistest.Eventually(t, "the reap finished", func() bool {
		return c.Exists(ctx, heldKey("i-dead")).Val() == 0 && c.ZCard(ctx, reapedKey).Val() == 0
	})
	if l, err := s.Locks.Get(ctx, both); err != nil || l == nil || l.HolderOID != ada.OID {
		t.Fatalf("r-2 after the reap: %+v, %v; want Ada's, kept by her live tab", l, err)
	}
	if got := sockets(both); !slices.Equal(got, []string{"c-live"}) {
		t.Fatalf("sockets of r-2: %v, want the live tab's alone", got)
	}
	if got := count(m.met.forgotten); got != 1 {
		t.Fatalf("lockhub_hub_dead_sockets_forgotten_total = %v, want 1 (r-2 alone)", got)
	}
	if got := count(m.met.reapedLocks); got != 2 {
		t.Fatalf("lockhub_hub_reaped_locks_total = %v, want 2", got)
	}
	mu.Lock()
	got := slices.Sorted(slices.Values(detached))
	mu.Unlock()
	if want := []protocol.Outcome{protocol.OutcomeNotHeld, protocol.OutcomeReleased}; !slices.Equal(got, want) {
		t.Fatalf("Detached told %v, want %v (r-2 kept, r-1 released)", got, want)
	}
	// The live tab's release is the last now.
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, both, ada, "c-live"))
	if n := c.Exists(ctx, LockKey(both)).Val(); n != 0 {
		t.Fatal("r-2 kept after the holder's last live tab released it")
	}
}

// TestMemberReattach: a Member taken for dead puts back the sockets a reaper forgot,
// and counts them; but a socket that lets go of its lock meanwhile (here: its release
// ran between Leaving and the reattach, the worst moment) is taken out again: if it
// were left in, the holder's other tab releasing next would be told released and
// leave the lock to its lease.
func TestMemberReattach(t *testing.T) {
	s, c := realStore(t, Config{})
	ctx := ctxT(t)
	m, err := NewMember(MemberConfig{Instances: s.Instances, Locks: s.Locks}) // not run: reattach is called here
	if err != nil {
		t.Fatal(err)
	}
	kept := Ref{"acme", "ApprovalRequest", "r-1"}     // the reaper forgot c-1 here
	released := Ref{"acme", "ApprovalRequest", "r-2"} // c-1 releases it during the reattach
	for _, r := range []Ref{kept, released} {
		expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r, ada, "c-1"))
		expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, r, ada, "c-other"))
		m.Hold(Holding{Ref: r, Holder: ada.OID, Conn: "c-1"})
	}
	if forgot, err := s.Instances.Forget(ctx, Holding{Ref: kept, Holder: ada.OID, Conn: "c-1"}, time.Now().Add(-time.Hour)); err != nil || forgot != ForgetDropped {
		t.Fatalf("Forget = %v, %v", forgot, err)
	}
	leaving := Holding{Ref: released, Holder: ada.OID, Conn: "c-1"}
	m.Leaving(leaving)
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, released, ada, "c-1")) // the other tab keeps it
	m.reattach(ctx)
	m.Drop(leaving)

	sockets := func(r Ref) []string {
		ids := c.SMembers(ctx, ConnsKey(r)).Val()
		slices.Sort(ids)
		return ids
	}
	if got := sockets(kept); !slices.Equal(got, []string{"c-1", "c-other"}) {
		t.Fatalf("sockets of r-1 after the reattach: %v, want c-1 back", got)
	}
	if got := sockets(released); !slices.Equal(got, []string{"c-other"}) {
		t.Fatalf("sockets of r-2 after the release and the reattach: %v, want c-other alone", got)
	}
	if got := count(m.met.reattached); got != 1 {
		t.Fatalf("lockhub_hub_sockets_reattached_total = %v, want 1 (r-1)", got)
	}
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, released, ada, "c-other"))
	if n := c.Exists(ctx, LockKey(released)).Val(); n != 0 {
		t.Fatal("r-2 kept after the holder's last socket released it")
	}
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, kept, ada, "c-other"))
	if n := c.Exists(ctx, LockKey(kept)).Val(); n != 1 {
		t.Fatal("r-1 dropped by the other tab while c-1, put back, holds it")
	}
}

// TestMemberRunLeaves: Run heartbeats until its ctx is done, then removes the record
// and the holdings (a stopped instance is not reaped) and returns; a second Run is
// refused.
func TestMemberRunLeaves(t *testing.T) {
	s, c := realStore(t, Config{})
	ctx := ctxT(t)
	m, stop := runMember(t, s, MemberConfig{})
	m.Hold(Holding{Ref: Ref{"acme", "ApprovalRequest", "r-1"}, Holder: ada.OID, Conn: "c-1"})
	redistest.Eventually(t, "the record and the holding written", func() bool {
		alive, err := s.Instances.Alive(ctx, m.ID())
		return err == nil && alive && len(heldBy(t, c, m.ID())) == 1
	})
	stop()
	if alive, err := s.Instances.Alive(ctx, m.ID()); err != nil || alive {
		t.Fatalf("Alive after Run returned = %v, %v; want false", alive, err)
	}
	if n := c.Exists(ctx, heldKey(m.ID())).Val(); n != 0 {
		t.Fatal("the holdings outlived Run")
	}
	if err := m.Run(ctx); err == nil {
		t.Fatal("a second Run was not refused")
	}
}

// TestMemberConfig: what NewMember refuses, and the metrics it registers.
func TestMemberConfig(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never reached: nothing runs
	t.Cleanup(func() { _ = rdb.Close() })
	s, _ := newStore(t, rdb, Config{})
	for _, tc := range []struct {
		name    string
		cfg     MemberConfig
		setting string // of the *protocol.SettingError; "" for another error
	}{
		{"no Instances", MemberConfig{Locks: s.Locks}, ""},
		{"no Locks", MemberConfig{Instances: s.Instances}, ""},
		{"negative timeout", MemberConfig{Instances: s.Instances, Locks: s.Locks, InstanceTimeout: -time.Second}, "instance-timeout"},
		{"timeout too short", MemberConfig{Instances: s.Instances, Locks: s.Locks, InstanceTimeout: time.Millisecond}, "instance-timeout"},
		{"negative grace", MemberConfig{Instances: s.Instances, Locks: s.Locks, ReleaseGrace: -time.Second}, "release-grace"},
		{"bad id", MemberConfig{Instances: s.Instances, Locks: s.Locks, ID: "i 1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMember(tc.cfg)
			var se *protocol.SettingError
			switch {
			case err == nil:
				t.Fatal("accepted")
			case tc.setting != "" && (!errors.As(err, &se) || se.Setting != tc.setting):
				t.Fatalf("error %v, want a SettingError of %s", err, tc.setting)
			}
		})
	}
	reg := prometheus.NewRegistry()
	m, err := NewMember(MemberConfig{Instances: s.Instances, Locks: s.Locks, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if !validInstance(m.ID()) || m.ID() == "" {
		t.Fatalf("random id %q is not valid", m.ID())
	}
	if m.timeout != DefaultInstanceTimeout || m.grace != DefaultReleaseGrace || m.every != DefaultInstanceTimeout/3 {
		t.Fatalf("defaults: timeout %v, grace %v, every %v", m.timeout, m.grace, m.every)
	}
	names := []string{"lockhub_hub_dead_instances_total", "lockhub_hub_taken_for_dead_total", "lockhub_hub_reaped_locks_total",
		"lockhub_hub_dead_sockets_forgotten_total", "lockhub_hub_sockets_reattached_total", "lockhub_hub_dead_sockets_released_total"}
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != len(names) {
		t.Fatalf("%d of the Member's %d metrics registered (%v)", n, len(names), err)
	}
}

// TestMemberPendingRelease: Ada holds r-2 in two tabs, one on an instance that died
// unnoticed; her live tab releases it (the release is kept: the dead tab's socket is
// still in the lock's sockets). When the instance is found dead the lock goes at once,
// not a release grace later (PROTOCOL.md §4, version 3), while r-1, held through the
// dead tab alone, still waits its grace.
func TestMemberPendingRelease(t *testing.T) {
	const grace = time.Minute // far beyond the test: what goes, goes at once
	s, c := realStore(t, Config{})
	ctx := ctxT(t)
	alone := Ref{"acme", "ApprovalRequest", "r-1"} // through the dead socket alone
	both := Ref{"acme", "ApprovalRequest", "r-2"}  // the live tab releases it
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, alone, ada, "c-dead"))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, both, ada, "c-dead"))
	expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, both, ada, "c-live"))
	held := []Holding{{Ref: alone, Holder: ada.OID, Conn: "c-dead"}, {Ref: both, Holder: ada.OID, Conn: "c-dead"}}
	if err := s.Instances.UpdateHoldings(ctx, "i-dead", held, nil); err != nil {
		t.Fatal(err)
	}
	// Its last heartbeat, now; then it dies.
	if _, err := s.Instances.Heartbeat(ctx, "i-dead"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Locks.Release(ctx, both, ada, "c-live")
	if err != nil || res.Outcome != protocol.OutcomeReleased || !res.Kept {
		t.Fatalf("release from the live tab = %+v, %v; want released, kept by the dead tab", res, err)
	}
	if n := c.Exists(ctx, LockKey(both)).Val(); n != 1 {
		t.Fatal("r-2 released before its other socket's instance was found dead")
	}
	m, _ := runMember(t, s, MemberConfig{ReleaseGrace: grace})
	// The key goes inside the Detach, the count after it answers: wait for the count.
	redistest.Eventually(t, "r-2 released and counted once the instance is found dead", func() bool {
		return count(m.met.pendingReleased) >= 1
	})
	if n := c.Exists(ctx, LockKey(both)).Val(); n != 0 {
		t.Fatal("r-2 counted as released but still in Redis")
	}
	if got := count(m.met.deadInstances); got != 1 {
		t.Fatalf("lockhub_hub_dead_instances_total = %v, want 1", got)
	}
	if got := count(m.met.pendingReleased); got != 1 {
		t.Fatalf("lockhub_hub_dead_sockets_released_total = %v, want 1", got)
	}
	if n := c.Exists(ctx, LockKey(alone)).Val(); n != 1 {
		t.Fatal("r-1, held through the dead socket alone, released before its grace")
	}
}

// TestMemberHeldElsewhere: whether another socket of this instance holds a lock for
// the same holder, as the hub asks to tell a pending release from a plain one.
func TestMemberHeldElsewhere(t *testing.T) {
	s, _ := realStore(t, Config{})
	m, err := NewMember(MemberConfig{Instances: s.Instances, Locks: s.Locks}) // not run: no Redis call here
	if err != nil {
		t.Fatal(err)
	}
	ref := Ref{"acme", "ApprovalRequest", "r-1"}
	tab1 := Holding{Ref: ref, Holder: ada.OID, Conn: "c-1"}
	tab2 := Holding{Ref: ref, Holder: ada.OID, Conn: "c-2"}
	other := Holding{Ref: Ref{"acme", "ApprovalRequest", "r-2"}, Holder: ada.OID, Conn: "c-2"}
	graceTab := Holding{Ref: ref, Holder: grace.OID, Conn: "c-3"}
	check := func(step string, h Holding, want bool) {
		t.Helper()
		if got := m.HeldElsewhere(h); got != want {
			t.Fatalf("%s: HeldElsewhere(%s) = %v, want %v", step, h.Conn, got, want)
		}
	}
	m.Hold(tab1)
	m.Hold(other)
	m.Hold(graceTab)
	check("one tab", tab1, false)
	m.Hold(tab2)
	m.Hold(tab2) // twice: counted once
	check("two tabs", tab1, true)
	check("two tabs", tab2, true)
	m.Drop(tab2)
	m.Drop(tab2)
	check("the other dropped", tab1, false)
	m.Drop(tab1)
	check("neither", tab1, false)
	m.Hold(tab2)
	check("the other only, asked for one not held", tab1, true)
}
