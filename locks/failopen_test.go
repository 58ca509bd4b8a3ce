package locks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// failOpenBound is the contract's limit for any call while Redis is dead.
const failOpenBound = 2 * time.Second

// TestFailOpenStandaloneKilled kills the real redis-server under the store: every
// operation answers unknown or no locks within the bound, warns and counts; after a
// restart on the same port everything works again.
func TestFailOpenStandaloneKilled(t *testing.T) {
	srv := redistest.StartServer(t)
	c, err := NewClient(srv.URL(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	reg := prometheus.NewRegistry()
	s, logs := newStore(t, c, Config{Registerer: reg})
	ctx := ctxT(t)
	ref := Ref{"acme", "ApprovalRequest", "r-1001"}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "c1"))

	srv.Kill(t)
	ops := []struct {
		name string
		run  func() (protocol.Outcome, int)
	}{
		{"claim", func() (protocol.Outcome, int) { r, _ := s.Locks.Claim(ctx, ref, grace, ""); return r.Outcome, 0 }},
		{"renew", func() (protocol.Outcome, int) { r, _ := s.Locks.Renew(ctx, ref, ada, ""); return r.Outcome, 0 }},
		{"release", func() (protocol.Outcome, int) { r, _ := s.Locks.Release(ctx, ref, ada, ""); return r.Outcome, 0 }},
		{"takeover", func() (protocol.Outcome, int) {
			r, _ := s.Locks.Takeover(ctx, ref, margot, "", true)
			return r.Outcome, 0
		}},
		{"detach", func() (protocol.Outcome, int) { r, _ := s.Locks.Detach(ctx, ref, ada, "c1", true); return r.Outcome, 0 }},
		{"get", func() (protocol.Outcome, int) {
			l, _ := s.Locks.Get(ctx, ref)
			return protocol.OutcomeUnknown, btoi(l != nil)
		}},
		{"list", func() (protocol.Outcome, int) {
			l, _ := s.Locks.List(ctx, "acme", "ApprovalRequest")
			return protocol.OutcomeUnknown, len(l)
		}},
		{"mine", func() (protocol.Outcome, int) {
			l, _ := s.Locks.Mine(ctx, "acme", ada.OID)
			return protocol.OutcomeUnknown, len(l)
		}},
	}
	for _, op := range ops {
		start := time.Now()
		out, n := op.run()
		if d := time.Since(start); d > failOpenBound {
			t.Errorf("%s took %s with Redis dead, bound %s", op.name, d, failOpenBound)
		}
		if out != protocol.OutcomeUnknown || n != 0 {
			t.Errorf("%s with Redis dead: outcome %s, %d locks; want unknown and none", op.name, out, n)
		}
		if got := testutil.ToFloat64(s.core.met.failOpen.WithLabelValues(op.name, string(ReasonConnection))); got < 1 {
			out, _ := testutil.CollectAndFormat(s.core.met.failOpen, expfmt.TypeTextPlain, "lockhub_store_fail_open_total")
			t.Errorf("%s: fail-open not counted as connection:\n%s", op.name, out)
		}
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"lock store unavailable; failing open\"") {
		t.Errorf("no fail-open warning logged:\n%s", logs.String())
	}
	if err := s.Ping(ctx); err == nil {
		t.Error("Ping succeeded with Redis dead")
	}

	srv.Restart(t)
	redistest.Eventually(t, "claims work after restart", func() bool {
		r, _ := s.Locks.Claim(ctx, ref, grace, "")
		return r.Outcome == protocol.OutcomeAcquired
	})
	expect(t, protocol.OutcomeLocked)(s.Locks.Claim(ctx, ref, ada, ""))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFailOpenCommandError: a command Redis refuses (here WRONGTYPE, a lock key that
// holds a hash) fails open like a dead connection, rather than reaching the user.
func TestFailOpenCommandError(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	s, logs := newStore(t, c, Config{})
	ctx := ctxT(t)
	ref := Ref{"acme", "ApprovalRequest", "r-1"}
	c.HSet(ctx, LockKey(ref), "x", "y")
	expect(t, protocol.OutcomeUnknown)(s.Locks.Claim(ctx, ref, ada, ""))
	expect(t, protocol.OutcomeUnknown)(s.Locks.Renew(ctx, ref, ada, ""))
	if l := must1(s.Locks.Get(ctx, ref)); l != nil {
		t.Fatalf("Get = %+v, want nil", l)
	}
	if !strings.Contains(logs.String(), "reason=command") {
		t.Fatalf("no warning with reason=command:\n%s", logs.String())
	}
	// Mine reads the person's own index alone: a broken index of a type is not read,
	// and a broken person index fails open as a whole (no locks).
	reg, err := NewRegistry("ApprovalRequest", "Order")
	if err != nil {
		t.Fatal(err)
	}
	two, _ := newStore(t, c, Config{Registry: reg})
	mineRef := Ref{"acme", "ApprovalRequest", "mine"}
	expect(t, protocol.OutcomeAcquired)(two.Locks.Claim(ctx, mineRef, ada, ""))
	c.Set(ctx, IndexKey("acme", "Order"), "not a sorted set", time.Minute)
	if got := must1(two.Locks.Mine(ctx, "acme", ada.OID)); len(got) != 1 {
		t.Fatalf("Mine with the Order index broken = %+v, want ada's lock: it reads her index alone", got)
	}
	c.Del(ctx, IndexKey("acme", "Order"))
	c.Set(ctx, personKey("acme", ada.OID), "not a sorted set", time.Minute)
	if got := must1(two.Locks.Mine(ctx, "acme", ada.OID)); len(got) != 0 {
		t.Fatalf("Mine with ada's index broken = %+v, want no locks", got)
	}
	c.Del(ctx, personKey("acme", ada.OID))
	expect(t, protocol.OutcomeRenewed)(two.Locks.Renew(ctx, mineRef, ada, "")) // writes her index again
	if got := must1(two.Locks.Mine(ctx, "acme", ada.OID)); len(got) != 1 {
		t.Fatalf("Mine with ada's index mended = %+v, want ada's lock", got)
	}

	// A value that is not a lock reads as corrupt, and fails open too.
	ref2 := Ref{"acme", "ApprovalRequest", "r-2"}
	c.Set(ctx, LockKey(ref2), "not json", time.Minute)
	expect(t, protocol.OutcomeUnknown)(s.Locks.Renew(ctx, ref2, ada, ""))
	if !strings.Contains(logs.String(), "reason=corrupt") {
		t.Fatalf("no warning with reason=corrupt:\n%s", logs.String())
	}
}

// TestClusterFailover kills the master of a lock's slot on a real cluster: claims fail
// open while it is gone, and succeed again after the replica takes over, through a
// client made by NewClient (the production settings), well within the contract's 15 s.
func TestClusterFailover(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := productionClusterClient(t, cl)
	s, _ := newStore(t, c, Config{})
	ctx := ctxT(t)
	tenant := "acme"
	slot := redistest.Slot(IndexKey(tenant, "ApprovalRequest"))
	rec := runFeed(t, s, s, tenant)
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", "before"}, ada, ""))

	// A dead replica (of another master: this slot's replica must stay for the
	// failover below) takes nothing from the locks: Redis is still ready. The client's
	// slot map still lists the replica here, which is what /readyz once tripped on.
	other := (slot + 16384/3) % 16384
	if cl.MasterForSlot(t, other) == cl.MasterForSlot(t, slot) {
		t.Fatalf("slots %d and %d have one master", slot, other)
	}
	cl.KillReplica(t, other)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping with a replica dead: %v", err)
	}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", "replica-dead"}, ada, ""))

	// A tenant on another master keeps its live events through the failover: no
	// gap, no resync. Its changes go on every few milliseconds meanwhile.
	calm := ""
	for i := 0; calm == ""; i++ {
		if tn := fmt.Sprintf("calm-%d", i); cl.MasterForSlot(t, redistest.Slot("{"+tn+"}")) != cl.MasterForSlot(t, slot) {
			calm = tn
		}
	}
	waitFeed(t, s, rec, calm)
	calmCtx, stopCalm := context.WithCancel(ctx)
	calmDone := make(chan int)
	go func() {
		n := 0
		defer func() { calmDone <- n }()
		for calmCtx.Err() == nil {
			ref := Ref{calm, "ApprovalRequest", "c-1"}
			var r Result
			if n%2 == 0 {
				r, _ = s.Locks.Claim(calmCtx, ref, ada, "")
			} else {
				r, _ = s.Locks.Release(calmCtx, ref, ada, "")
			}
			if r.Outcome == protocol.OutcomeAcquired || r.Outcome == protocol.OutcomeReleased {
				n++
			}
			sleepCtx(calmCtx, 10*time.Millisecond)
		}
	}()

	killed := time.Now()
	cl.KillMaster(t, slot)
	n := 0
	redistest.Eventually(t, "a claim succeeds after failover", func() bool {
		n++
		start := time.Now()
		r, err := s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", fmt.Sprintf("after-%d", n)}, ada, "")
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > failOpenBound {
			t.Fatalf("a claim during failover took %s", d)
		}
		return r.Outcome == protocol.OutcomeAcquired
	})
	t.Logf("claims succeed again %s after the master was killed", time.Since(killed).Round(10*time.Millisecond))

	// The feed rebuilt its subscriptions on the new master, said so, and delivers again.
	redistest.Eventually(t, "the feed resyncs after the failover", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.resyncs > 0
	})
	ref := Ref{tenant, "ApprovalRequest", "after-feed"}
	redistest.Eventually(t, "events flow after the failover", func() bool {
		s.Locks.Claim(ctx, ref, ada, "")
		return len(rec.of(tenant, ref.UID)) > 0
	})
	stopCalm()
	made := <-calmDone
	redistest.Eventually(t, "every change of the calm tenant delivered", func() bool { return len(rec.of(calm, "c-1")) >= made })
	if got := len(rec.of(calm, "c-1")); got != made || made < 10 {
		t.Fatalf("the calm tenant made %d changes during the failover, the feed delivered %d", made, got)
	}
	if !rec.resyncedFor(tenant) {
		t.Fatal("no resync named the failed master's tenant")
	}
	if rec.resyncedFor(calm) {
		t.Fatal("a tenant of a healthy master was resynced: the whole feed was rebuilt")
	}
	t.Logf("a tenant on a healthy master made %d changes through the failover: every one delivered, no resync", made)
}

// TestClusterHungMaster stops the master of a tenant's slot (SIGSTOP) instead of
// killing it: its connections stay open and its kernel acknowledges the feed's Pings,
// so no read of them ever fails. The cluster fails it over all the same, and the feed
// must notice the silence (no Pong), subscribe on the new master and resync the
// tenant, rather than wait for TCP to give up after many minutes.
func TestClusterHungMaster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := productionClusterClient(t, cl)
	s, _ := newStore(t, c, Config{feedQuiet: time.Second})
	ctx := ctxT(t)
	tenant := "acme"
	slot := redistest.Slot(IndexKey(tenant, "ApprovalRequest"))
	rec := runFeed(t, s, s, tenant)

	hung := time.Now()
	cl.HangMaster(t, slot)
	cl.WaitFailover(t, slot)
	n := 0
	redistest.Eventually(t, "a claim succeeds after the failover", func() bool {
		n++
		r, _ := s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", fmt.Sprintf("after-%d", n)}, ada, "")
		return r.Outcome == protocol.OutcomeAcquired
	})
	// Events may arrive before the resync: it comes once every slot is subscribed again.
	ref := Ref{tenant, "ApprovalRequest", "after-feed"}
	redistest.Eventually(t, "events flow, and the tenant is resynced, after the hung master was failed over", func() bool {
		s.Locks.Claim(ctx, ref, ada, "")
		return len(rec.of(tenant, ref.UID)) > 0 && rec.resyncedFor(tenant)
	})
	t.Logf("the feed delivers again %s after the master hung", time.Since(hung).Round(10*time.Millisecond))
}

// productionClusterClient is a client of cl made by NewClient, with the production
// settings, from three seeds.
func productionClusterClient(t *testing.T, cl *redistest.Cluster) redis.UniversalClient {
	t.Helper()
	seeds := cl.MasterAddrs()
	c, err := NewClient(fmt.Sprintf("redis://%s?addr=%s&addr=%s", seeds[0], seeds[1], seeds[2]), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitFeed claims and releases a probe of tenant until rec has seen it.
func waitFeed(t *testing.T, s *Store, rec *recorder, tenant string) {
	t.Helper()
	ctx := ctxT(t)
	probe := Ref{tenant, "ApprovalRequest", "probe"}
	redistest.Eventually(t, "the feed delivers "+tenant, func() bool {
		s.Locks.Claim(ctx, probe, ada, "")
		s.Locks.Release(ctx, probe, ada, "")
		return len(rec.of(tenant, "probe")) > 0
	})
}

func TestClassify(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		err  error
		want Reason
	}{
		{context.DeadlineExceeded, ReasonTimeout},
		{ctx.Err(), ReasonCanceled},
		{fmt.Errorf("wrapped: %w", redis.ErrClosed), ReasonConnection},
		{proto("CROSSSLOT Keys in request don't hash to the same slot"), ReasonCrossSlot},
		{proto("CLUSTERDOWN The cluster is down"), ReasonClusterDown},
		{proto("TRYAGAIN Multiple keys request during rehashing of slot"), ReasonTryAgain},
		{proto("READONLY You can't write against a read only replica."), ReasonReadOnly},
		{proto("LOADING Redis is loading the dataset in memory"), ReasonLoading},
		{proto("MOVED 3999 127.0.0.1:6381"), ReasonMoved},
		{proto("WRONGTYPE Operation against a key holding the wrong kind of value"), ReasonCommand},
		{errors.New("something else"), ReasonCommand},
		{&corruptError{"stored value is not a lock"}, ReasonCorrupt},
		{fmt.Errorf("%w: claim did not settle after 3 attempts", errContention), ReasonContention},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestFailOpenContention: a claim or takeover whose lock changes hands under every
// retry fails open counted as contention, not as corrupt: Redis answered every script.
// The clock plays the other writers, since the store reads it before each script: it
// puts Ada's lock back before each claim or takeover (which then answers "mine") and
// drops it before each renewal (which then answers "lost"), so nothing ever settles.
func TestFailOpenContention(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	for _, tc := range []struct {
		op opName
		do func(*Store, Ref) (Result, error)
	}{
		{opClaim, func(s *Store, ref Ref) (Result, error) { return s.Locks.Claim(ctx, ref, ada, "") }},
		{opTakeover, func(s *Store, ref Ref) (Result, error) { return s.Locks.Takeover(ctx, ref, ada, "", true) }},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			ref := Ref{"acme", "ApprovalRequest", "contended-" + string(tc.op)}
			at := time.Now()
			held := encodeLock(protocol.Lock{EntityType: ref.Type, EntityUID: ref.UID, HolderOID: ada.OID, HolderName: ada.Name,
				AcquiredAt: protocol.NewTime(at), ExpiresAt: protocol.NewTime(at.Add(time.Minute))})
			calls := 0
			s, logs := newStore(t, c, Config{Now: func() time.Time {
				calls++
				if calls%2 == 1 {
					c.Set(ctx, LockKey(ref), held, time.Minute) // another tab of Ada's claims it
				} else {
					c.Del(ctx, LockKey(ref)) // and lets go of it
				}
				return at
			}})
			expect(t, protocol.OutcomeUnknown)(tc.do(s, ref))
			if calls != 2*casAttempts {
				t.Fatalf("the clock was read %d times, want %d: the race did not happen as staged", calls, 2*casAttempts)
			}
			for reason, want := range map[Reason]float64{ReasonContention: 1, ReasonCorrupt: 0} {
				if got := testutil.ToFloat64(s.core.met.failOpen.WithLabelValues(string(tc.op), string(reason))); got != want {
					t.Errorf("fail-open %s{%s} = %v, want %v", tc.op, reason, got, want)
				}
			}
			if got := testutil.ToFloat64(s.core.met.ops.WithLabelValues(string(tc.op), string(protocol.OutcomeUnknown))); got != 1 {
				t.Errorf("%s counted %v times as unknown, want 1", tc.op, got)
			}
			if !strings.Contains(logs.String(), "reason=contention") {
				t.Errorf("no warning with reason=contention:\n%s", logs.String())
			}
		})
	}
}

// proto makes an error of the kind go-redis returns for a Redis error reply.
func proto(msg string) error { return redisError(msg) }

type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// TestFeedResync: the feed survives Redis dying and coming back, and says so with
// Resync, so the hub can send its watchers fresh snapshots; events flow again after.
func TestFeedResync(t *testing.T) {
	srv := redistest.StartServer(t)
	newClient := func() redis.UniversalClient {
		c, err := NewClient(srv.URL(), false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, _ := newStore(t, newClient(), Config{})
	b, logs := newStore(t, newClient(), Config{})
	rec := runFeed(t, b, a, "acme")
	ctx := ctxT(t)

	srv.Kill(t)
	redistest.Eventually(t, "the feed notices", func() bool {
		return strings.Contains(logs.String(), "lock change feed lost")
	})
	srv.Restart(t)
	redistest.Eventually(t, "Resync after the restart", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.resyncs > 0
	})
	ref := Ref{"acme", "ApprovalRequest", "after"}
	redistest.Eventually(t, "events flow again", func() bool {
		a.Locks.Claim(ctx, ref, ada, "")
		return len(rec.of("acme", "after")) > 0
	})
}

// TestFailOpenCanceledQuiet: an operation whose caller gave up (its ctx canceled: a
// socket closed mid-claim, the hub shutting down) fails open and is counted as
// canceled, but is not warned of: Redis is fine, and any client could flood the log.
// A timeout on the same store still warns.
func TestFailOpenCanceledQuiet(t *testing.T) {
	srv := redistest.StartServer(t)
	s, logs := newStore(t, srv.Client(t), Config{Registerer: prometheus.NewRegistry()})
	ref := Ref{"acme", "ApprovalRequest", "r-1001"}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if r, _ := s.Locks.Claim(ctx, ref, ada, ""); r.Outcome != protocol.OutcomeUnknown {
		t.Fatalf("claim with its ctx canceled: %s, want unknown", r.Outcome)
	}
	if got := testutil.ToFloat64(s.core.met.failOpen.WithLabelValues("claim", string(ReasonCanceled))); got != 1 {
		t.Errorf("canceled claim counted %v times, want 1", got)
	}
	if strings.Contains(logs.String(), "failing open") {
		t.Errorf("a canceled claim was logged at INFO or above:\n%s", logs.String())
	}

	ctx, cancel = context.WithDeadline(ctxT(t), time.Now().Add(-time.Second))
	defer cancel()
	s.Locks.Claim(ctx, ref, ada, "")
	if !strings.Contains(logs.String(), "level=WARN msg=\"lock store unavailable; failing open\" op=claim reason=timeout") {
		t.Errorf("a timed-out claim was not warned of:\n%s", logs.String())
	}
}
