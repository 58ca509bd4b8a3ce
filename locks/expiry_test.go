package locks

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestExpiryLeavesNothing: on a real redis-server, locks whose leases run out without a
// release leave no key of any kind behind (lock:, lockidx:, lockval:, lockseen:, lockconn:, per
// PROTOCOL.md §1 "an idle tenant leaves nothing behind"): the lock and sockets keys die
// with the lease, and the sweep that announces the expiry empties the index and the
// values and seen hashes, so they go at once (the sweep leaves only lockfeed:{tenant}, which runs
// out a minute after the last sweep). Without a sweep, the index and the values and seen hashes still
// carry a TTL of at most the lease plus a minute.
//
// The index margin (indexMargin, 30 s) is a constant, not a Config field, so the
// sweepless case checks the TTLs Redis holds rather than waiting them out.
func TestExpiryLeavesNothing(t *testing.T) {
	// Long enough to see every key before it goes on a loaded machine; the leases of all
	// cases run out together, so the test takes about one lease.
	const lease = time.Second
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	reg, err := NewRegistry("ApprovalRequest", "Invoice")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newStore(t, c, Config{Lease: lease, Registry: reg})
	ctx := ctxT(t)
	all := []string{"lock:", "lockidx:", "lockval:", "lockseen:", "lockconn:"}

	// One tenant per case: the server is this test's alone.
	type ranOut struct {
		name, tenant string
		sweep        bool
		leaseEnd     time.Time
	}
	var ran []ranOut
	n := 0
	for _, tc := range []struct {
		name  string
		kinds []string                          // the kinds of key the locks make
		lock  func(t *testing.T, tenant string) // leaves locks of tenant to run out
	}{
		{"claimed over a socket", all, func(t *testing.T, tenant string) {
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", "r-1"}, ada, "tab-1"))
		}},
		{"claimed over HTTP", []string{"lock:", "lockidx:", "lockval:", "lockseen:"}, func(t *testing.T, tenant string) {
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", "r-1"}, ada, ""))
		}},
		{"claimed from two tabs and renewed", all, func(t *testing.T, tenant string) {
			ref := Ref{tenant, "ApprovalRequest", "r-1"}
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "tab-1"))
			expect(t, protocol.OutcomeRenewed)(s.Locks.Claim(ctx, ref, ada, "tab-2"))
			expect(t, protocol.OutcomeRenewed)(s.Locks.Renew(ctx, ref, ada, "tab-1"))
		}},
		{"taken over", all, func(t *testing.T, tenant string) {
			ref := Ref{tenant, "ApprovalRequest", "r-1"}
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "tab-1"))
			expect(t, protocol.OutcomeTakenOver)(s.Locks.Takeover(ctx, ref, margot, "tab-9", true))
		}},
		{"several locks of two types, one released", all, func(t *testing.T, tenant string) {
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", "r-1"}, ada, "tab-1"))
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", "r-2"}, grace, ""))
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "Invoice", "i-1"}, ada, "tab-1"))
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "Invoice", "i-2"}, grace, "tab-2"))
			expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, Ref{tenant, "Invoice", "i-2"}, grace, ""))
		}},
	} {
		for _, sweep := range []bool{true, false} {
			n++
			name := tc.name + " then swept"
			if !sweep {
				name = tc.name + " without a sweep"
			}
			// Every case locks first, so that their leases run out together.
			tenant := fmt.Sprintf("exp-%d", n)
			tc.lock(t, tenant)
			ran = append(ran, ranOut{name, tenant, sweep, time.Now().Add(lease)}) // no lease of the tenant ends later
			got := tenantKeys(t, c, tenant)
			for _, kind := range tc.kinds {
				if !slices.ContainsFunc(got, func(k string) bool { return strings.HasPrefix(k, kind+"{") }) {
					t.Fatalf("%s: no %s key before the leases ran out: %v", name, kind, got)
				}
			}
		}
	}

	for _, r := range ran {
		t.Run(r.name, func(t *testing.T) {
			if !r.sweep {
				checkLeftovers(t, c, r.tenant, r.leaseEnd)
				return
			}
			redistest.Eventually(t, "no key of the tenant left after the leases and a sweep", func() bool {
				for _, typ := range reg.Types() {
					if err := s.Locks.Sweep(ctx, r.tenant, typ, 0); err != nil {
						t.Fatal(err)
					}
				}
				// What is left is the feed key of a tenant swept, until it runs out, and
				// the people's buckets of changes, until they are full again.
				left := slices.DeleteFunc(tenantKeys(t, c, r.tenant), func(k string) bool { return strings.HasPrefix(k, "lockrate:") })
				return slices.Equal(left, []string{FeedKey(r.tenant)})
			})
			checkRateKeys(t, c, r.tenant)
			if ttl := c.PTTL(ctx, FeedKey(r.tenant)).Val(); ttl <= 0 || ttl > feedKeyTTL {
				t.Fatalf("%s has TTL %s, want at most %s", FeedKey(r.tenant), ttl, feedKeyTTL)
			}
		})
	}
}

// checkLeftovers waits until every lease of tenant (the last ending at leaseEnd) has
// run out, then checks that only index and values keys are left, each with a TTL ending
// at most a minute (the contract's cap on the index margin) after leaseEnd.
func checkLeftovers(t *testing.T, c *redis.Client, tenant string, leaseEnd time.Time) {
	t.Helper()
	ctx := ctxT(t)
	redistest.Eventually(t, "the lock and sockets keys to die with their leases", func() bool {
		return !slices.ContainsFunc(tenantKeys(t, c, tenant), func(k string) bool {
			return strings.HasPrefix(k, "lock:") || strings.HasPrefix(k, "lockconn:")
		})
	})
	left := tenantKeys(t, c, tenant)
	if len(left) == 0 {
		t.Fatal("no index left before any sweep")
	}
	checkRateKeys(t, c, tenant)
	for _, k := range left {
		if strings.HasPrefix(k, "lockrate:") {
			continue // checkRateKeys
		}
		if !strings.HasPrefix(k, "lockidx:") && !strings.HasPrefix(k, "lockval:") && !strings.HasPrefix(k, "lockseen:") && !strings.HasPrefix(k, "lockmine:") {
			t.Errorf("%s left after every lease ran out", k)
			continue
		}
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 {
			t.Errorf("%s has no TTL (%s): it would stay forever", k, ttl)
		} else if ends := time.Now().Add(ttl); ends.After(leaseEnd.Add(time.Minute)) {
			t.Errorf("%s lives until %s after the last lease, more than a minute", k, ends.Sub(leaseEnd))
		}
	}
}

// checkRateKeys checks that every bucket of changes of tenant (lockrate:, PROTOCOL.md
// §4) runs out once it would be full again: the default burst at the default rate.
func checkRateKeys(t *testing.T, c *redis.Client, tenant string) {
	t.Helper()
	full := time.Duration(DefaultChangesBurst/DefaultMaxChangesPerPerson)*time.Second + time.Second
	for _, k := range tenantKeys(t, c, tenant) {
		if !strings.HasPrefix(k, "lockrate:") {
			continue
		}
		if ttl := c.PTTL(ctxT(t), k).Val(); ttl <= 0 || ttl > full {
			t.Errorf("%s has TTL %s, want at most %s", k, ttl, full)
		}
	}
}

// tenantKeys lists every key in tenant's hash tag, whatever its kind, but the audit
// stream: the one key meant to outlive the locks (PROTOCOL.md §10, a record keeps what
// it holds), bounded by its cap, not by time (TestAudit). It must be there, though:
// every case here changed a lock.
func tenantKeys(t *testing.T, c *redis.Client, tenant string) []string {
	t.Helper()
	ks, err := c.Keys(ctxT(t), "*{"+tenant+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(ks, AuditKey(tenant))
	if i < 0 {
		t.Fatalf("no audit stream %s among %v", AuditKey(tenant), ks)
	}
	ks = slices.Delete(ks, i, i+1)
	slices.Sort(ks)
	return ks
}

// TestSweepReadsNoValues: the sweeper prunes and announces, and changes no live lock;
// List, on the same index, reads them all.
func TestSweepReadsNoValues(t *testing.T) {
	for _, b := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"miniredis", func(t *testing.T) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}},
		{"standalone", func(t *testing.T) redis.UniversalClient { return redistest.StartServer(t).Client(t) }},
	} {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			s, _ := newStore(t, c, Config{})
			ctx := ctxT(t)
			for _, uid := range []string{"r-1", "r-2", "r-3"} {
				expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{"acme", "ApprovalRequest", uid}, ada, ""))
			}
			if err := s.Locks.Sweep(ctx, "acme", "ApprovalRequest", 0); err != nil {
				t.Fatal(err)
			}
			if l := must1(s.Locks.List(ctx, "acme", "ApprovalRequest")); len(l) != 3 {
				t.Fatalf("List after sweeps = %d locks, want 3", len(l))
			}
		})
	}
}
