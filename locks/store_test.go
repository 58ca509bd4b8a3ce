package locks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/protocol"
)

// testOutcomes proves every outcome of PROTOCOL.md §2 for every operation.
func testOutcomes(t *testing.T, b backend) {
	{
		{
			c := b.client(t)
			// A generous timeout: these tests are about outcomes, on a shared machine
			// under the race detector; the fail-open tests keep the default.
			s, _ := newStore(t, c, Config{Timeout: 10 * time.Second})
			ctx := ctxT(t)
			n := 0
			next := func() Ref {
				n++
				return Ref{Tenant: "acme", Type: "ApprovalRequest", UID: fmt.Sprintf("%s-%d", b.name, n)}
			}

			t.Run("claim acquired, renewed keeps acquiredAt, locked", func(t *testing.T) {
				ref := next()
				r := expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, ""))
				if r.Lock.HolderOID != ada.OID || r.Lock.EntityUID != ref.UID || r.Lock.ExpiresAt.Sub(r.Lock.AcquiredAt.Time) != 5*time.Minute {
					t.Fatalf("acquired lock %+v", r.Lock)
				}
				again := expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, ref, ada, ""))
				if !again.Lock.AcquiredAt.Equal(r.Lock.AcquiredAt.Time) {
					t.Fatalf("re-claim moved acquiredAt %s -> %s", r.Lock.AcquiredAt, again.Lock.AcquiredAt)
				}
				if again.Lock.ExpiresAt.Before(r.Lock.ExpiresAt.Time) {
					t.Fatalf("re-claim shortened the lease")
				}
				other := expect(t, protocol.OutcomeLocked)(s.Locks.Claim(ctx, ref, grace, ""))
				if other.Lock == nil || other.Lock.HolderOID != ada.OID || other.Lock.HolderName != ada.Name {
					t.Fatalf("locked answer carries %+v, want Ada's lock", other.Lock)
				}
			})
			t.Run("renew renewed, lost when free, lost when someone else's", func(t *testing.T) {
				ref := next()
				if r := expect(t, protocol.OutcomeLost)(s.Locks.Renew(ctx, ref, ada, "")); r.Lock != nil {
					t.Fatalf("lost on a free entity returned %+v, want null", r.Lock)
				}
				first := expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, ""))
				r := expect(t, protocol.OutcomeRenewed)(s.Locks.Renew(ctx, ref, ada, ""))
				if !r.Lock.AcquiredAt.Equal(first.Lock.AcquiredAt.Time) {
					t.Fatal("renew moved acquiredAt")
				}
				assertIndexScore(t, c, ref, r.Lock.ExpiresAt.UnixMilli())
				if r := expect(t, protocol.OutcomeLost)(s.Locks.Renew(ctx, ref, grace, "")); r.Lock == nil || r.Lock.HolderOID != ada.OID {
					t.Fatalf("lost to Ada returned %+v", r.Lock)
				}
			})
			t.Run("release released, notHeld", func(t *testing.T) {
				ref := next()
				expect(t, protocol.OutcomeNotHeld)(s.Locks.Release(ctx, ref, ada, ""))
				expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, ""))
				if r := expect(t, protocol.OutcomeNotHeld)(s.Locks.Release(ctx, ref, grace, "")); r.Lock == nil || r.Lock.HolderOID != ada.OID {
					t.Fatalf("notHeld by Grace returned %+v", r.Lock)
				}
				expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, ref, ada, ""))
				if l := must1(s.Locks.Get(ctx, ref)); l != nil {
					t.Fatalf("released lock still there: %+v", l)
				}
				if n, _ := c.ZCard(ctx, IndexKey(ref.Tenant, ref.Type)).Result(); n != int64(countLive(t, s, ref.Tenant)) {
					t.Fatalf("index holds %d members, %d live locks", n, countLive(t, s, ref.Tenant))
				}
				expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, grace, ""))
			})
			t.Run("index TTL follows the latest lock", func(t *testing.T) {
				// Two leases on one index: a store with a short one and this one.
				short, _ := newStore(t, c, Config{Timeout: 10 * time.Second, Lease: time.Minute})
				tenant := "ttl-" + b.name
				a, z := Ref{tenant, "ApprovalRequest", "a"}, Ref{tenant, "ApprovalRequest", "z"}
				idx := IndexKey(tenant, "ApprovalRequest")
				expect(t, protocol.OutcomeAcquired)(short.Locks.Claim(ctx, a, ada, ""))
				expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, z, grace, ""))
				if ttl := c.PTTL(ctx, idx).Val(); ttl < 5*time.Minute || ttl > 5*time.Minute+indexMargin {
					t.Fatalf("index TTL %s with a 5 min lock, want 5m..5m%s", ttl, indexMargin)
				}
				expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, z, grace, ""))
				for _, k := range []string{idx, ValuesKey(tenant, "ApprovalRequest"), seenKey(tenant, "ApprovalRequest")} {
					if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Minute+indexMargin {
						t.Fatalf("%s TTL %s after the 5 min lock went, want at most the 1 min lock's + %s", k, ttl, indexMargin)
					}
				}
				expect(t, protocol.OutcomeReleased)(short.Locks.Release(ctx, a, ada, ""))
				if n := c.Exists(ctx, idx, ValuesKey(tenant, "ApprovalRequest"), seenKey(tenant, "ApprovalRequest")).Val(); n != 0 {
					t.Fatalf("an index without locks is left behind (%d keys)", n)
				}
			})
			t.Run("takeover takenOver, acquired, forbidden", func(t *testing.T) {
				ref := next()
				expect(t, protocol.OutcomeAcquired)(s.Locks.Takeover(ctx, ref, margot, "", true))
				expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, ref, margot, ""))
				expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, ""))
				if r := expect(t, protocol.OutcomeForbidden)(s.Locks.Takeover(ctx, ref, grace, "", false)); r.Lock == nil || r.Lock.HolderOID != ada.OID {
					t.Fatalf("forbidden returned %+v, want Ada's lock", r.Lock)
				}
				r := expect(t, protocol.OutcomeTakenOver)(s.Locks.Takeover(ctx, ref, margot, "", true))
				if r.PreviousHolder == nil || *r.PreviousHolder != ada || r.Lock.HolderOID != margot.OID {
					t.Fatalf("takenOver: previous %+v lock %+v", r.PreviousHolder, r.Lock)
				}
				// Taking over one's own lock: takenOver from oneself, the lease extended,
				// acquiredAtUtc kept.
				again := expect(t, protocol.OutcomeTakenOver)(s.Locks.Takeover(ctx, ref, margot, "", true))
				if again.PreviousHolder == nil || *again.PreviousHolder != margot || again.Lock == nil ||
					again.Lock.HolderOID != margot.OID || !again.Lock.AcquiredAt.Equal(r.Lock.AcquiredAt.Time) {
					t.Fatalf("own takeover: previous %+v lock %+v, first %+v", again.PreviousHolder, again.Lock, r.Lock)
				}
				expect(t, protocol.OutcomeNotHeld)(s.Locks.Release(ctx, ref, ada, ""))
			})
			t.Run("list by type and mine", func(t *testing.T) {
				tenant := "list-" + b.name
				for i, h := range []protocol.Holder{ada, grace, ada} {
					expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", fmt.Sprintf("r-%d", i)}, h, ""))
				}
				if got := must1(s.Locks.List(ctx, tenant, "ApprovalRequest")); len(got) != 3 {
					t.Fatalf("List = %d locks, want 3", len(got))
				}
				mine := must1(s.Locks.Mine(ctx, tenant, ada.OID))
				if len(mine) != 2 || mine[0].HolderOID != ada.OID || mine[1].HolderOID != ada.OID {
					t.Fatalf("Mine(ada) = %+v", mine)
				}
				if got := must1(s.Locks.List(ctx, "nobody", "ApprovalRequest")); len(got) != 0 {
					t.Fatalf("List of an empty tenant = %+v", got)
				}
			})
			t.Run("invalid and not lockable write nothing", func(t *testing.T) {
				before := dbsize(t, c)
				for _, ref := range []Ref{{"acme", "ApprovalRequest", "a}b"}, {"ac{me", "ApprovalRequest", "x"}, {"acme", "Invoice", "x"}} {
					_, err := s.Locks.Claim(ctx, ref, ada, "")
					if !errors.Is(err, ErrInvalidEntity) && !errors.Is(err, ErrNotLockable) {
						t.Fatalf("Claim(%v) = %v", ref, err)
					}
				}
				if _, err := s.Locks.Claim(ctx, next(), protocol.Holder{OID: "u {x}"}, ""); !errors.Is(err, ErrInvalidEntity) {
					t.Fatalf("hostile holder oid: %v", err)
				}
				if after := dbsize(t, c); after != before {
					t.Fatalf("refused claims wrote %d keys", after-before)
				}
			})
			t.Run("50 racing claims, one acquired", func(t *testing.T) {
				ref := next()
				var wg sync.WaitGroup
				outcomes := make(chan protocol.Outcome, 50)
				for i := range 50 {
					wg.Go(func() {
						r, err := s.Locks.Claim(ctx, ref, protocol.Holder{OID: fmt.Sprintf("u-%d", i), Name: "racer"}, "")
						if err != nil {
							t.Error(err)
						}
						outcomes <- r.Outcome
					})
				}
				wg.Wait()
				close(outcomes)
				count := map[protocol.Outcome]int{}
				for o := range outcomes {
					count[o]++
				}
				if count[protocol.OutcomeAcquired] != 1 || count[protocol.OutcomeLocked] != 49 {
					t.Fatalf("outcomes %v, want 1 acquired and 49 locked", count)
				}
			})
		}
	}
}

// TestOperationLabels pins the outcome labels of lockhub_store_operations_total that
// are not protocol outcomes (dashboards read them): get counts free or held, list and
// mine listed, sweep swept.
func TestOperationLabels(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	s, _ := newStore(t, c, Config{})
	ctx := ctxT(t)
	ref := Ref{"acme", "ApprovalRequest", "r-1"}
	must1(s.Locks.Get(ctx, ref))
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, ""))
	must1(s.Locks.Get(ctx, ref))
	must1(s.Locks.List(ctx, ref.Tenant, ref.Type))
	must1(s.Locks.Mine(ctx, ref.Tenant, ada.OID))
	if err := s.Locks.Sweep(ctx, ref.Tenant, ref.Type, 0); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"get", "free"}, {"get", "held"}, {"claim", "acquired"}, {"list", "listed"}, {"mine", "listed"}, {"sweep", "swept"}} {
		if got := testutil.ToFloat64(s.core.met.ops.WithLabelValues(l[0], l[1])); got != 1 {
			t.Errorf(`lockhub_store_operations_total{op=%q,outcome=%q} = %v, want 1`, l[0], l[1], got)
		}
	}
}

func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func dbsize(t *testing.T, c redis.UniversalClient) int64 {
	t.Helper()
	ctx := ctxT(t)
	if cc, ok := c.(*redis.ClusterClient); ok {
		var total int64
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			k, err := n.DBSize(ctx).Result()
			mu.Lock()
			total += k
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return total
	}
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func countLive(t *testing.T, s *Store, tenant string) int {
	return len(must1(s.Locks.List(ctxT(t), tenant, "ApprovalRequest")))
}

func assertIndexScore(t *testing.T, c redis.UniversalClient, ref Ref, want int64) {
	t.Helper()
	got, err := c.ZScore(ctxT(t), IndexKey(ref.Tenant, ref.Type), LockKey(ref)).Result()
	if err != nil || int64(got) != want {
		t.Fatalf("index score %v (%v), want %d", int64(got), err, want)
	}
}
