package locks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/protocol"
)

// TestListShare: a tenant's lists draw on a budget of locks read a second; a list over
// it is slowed (counted, warned of by its setting), never cut short or failed; another
// tenant's lists have a budget of their own.
func TestListShare(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	// A burst of one page and a bit: the second page of a read of 600 waits (about
	// 50 ms at this rate), the third is the last and leaves its debt.
	s, logs := newStore(t, c, Config{MaxLocksPerPerson: 1000, ChangesBurst: 1000, ListLocksPerTenant: 5000, ListLocksBurst: 300})
	ctx := ctxT(t)
	const n = 600
	for i := range n {
		expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{"big", "ApprovalRequest", fmt.Sprintf("r-%04d", i)}, ada, ""))
	}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{"small", "ApprovalRequest", "s-1"}, grace, ""))
	hits := func() float64 {
		return testutil.ToFloat64(s.core.met.limits.WithLabelValues(SettingListLocksPerTenant))
	}

	if ls := must1(s.Locks.List(ctx, "big", "ApprovalRequest")); len(ls) != n {
		t.Fatalf("a slowed list read %d locks, want all %d", len(ls), n)
	}
	if hits() < 1 {
		t.Fatal("the list passed its budget uncounted")
	}
	if !strings.Contains(logs.String(), "--"+SettingListLocksPerTenant) {
		t.Fatalf("no warning naming the setting:\n%s", logs)
	}
	before := hits()
	if ls := must1(s.Locks.List(ctx, "small", "ApprovalRequest")); len(ls) != 1 {
		t.Fatalf("the small tenant's list: %d locks", len(ls))
	}
	if b, err := s.Console.AdminLocksJSON(ctx, "small"); err != nil || !strings.Contains(string(b), "s-1") {
		t.Fatalf("the small tenant's console: %s %v", b, err)
	}
	if hits() != before {
		t.Fatal("another tenant's lists were slowed by the big tenant's budget")
	}

	// No budget: the same read is never slowed.
	free, _ := newStore(t, c, Config{ListLocksPerTenant: -1})
	if ls := must1(free.Locks.List(ctx, "big", "ApprovalRequest")); len(ls) != n {
		t.Fatalf("list without a budget: %d", len(ls))
	}
	if got := testutil.ToFloat64(free.core.met.limits.WithLabelValues(SettingListLocksPerTenant)); got != 0 {
		t.Fatalf("a store without a budget slowed %v pages", got)
	}
	if _, err := NewStore(Config{Client: c, ListLocksBurst: -1}); err == nil || !strings.Contains(err.Error(), SettingListLocksPerTenant) {
		t.Fatalf("a negative burst: %v", err)
	}
}
