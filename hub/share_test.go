package hub

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestFairShareSockets: the fair share of PROTOCOL.md §4 over sockets of two instances
// on one real redis-server and on the 6-node cluster: the person's quota and rate count
// every socket of theirs on both, and a refusal is an error frame that writes nothing,
// counted and named in the store's metric.
func TestFairShareSockets(t *testing.T) { onRealRedis(t, testFairShareSockets) }

func testFairShareSockets(t *testing.T, ca, cb redis.UniversalClient) {
	share := func(c *locks.Config) { c.MaxLocksPerPerson, c.MaxChangesPerPerson, c.ChangesBurst = 2, 0.01, 4 }
	a := startHub(t, ca, hubOptions{store: share})
	b := startHub(t, cb, hubOptions{store: share, dev: a.dev})
	ctx := tctx(t)
	adaH := protocol.Holder{OID: "u-ada", Name: "Ada Lovelace"}
	tab1, tab2 := a.dialAs("acme", adaH), b.dialAs("acme", adaH)

	expect(t, protocol.OutcomeAcquired)(tab1.Claim(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeAcquired)(tab2.Claim(ctx, typ, "r-2"))
	_, err := tab1.Claim(ctx, typ, "r-3")
	if pe := wantCode(t, err, protocol.CodeTooManyLocks); !strings.Contains(pe.Message, locks.SettingLocksPerPerson) {
		t.Fatalf("the refusal %q does not name the limit", pe.Message)
	}
	boss := b.dialAs("acme", adaH, auth.DefaultTakeoverRole) // her third tab, allowed to take over
	_, err = boss.Takeover(ctx, typ, "r-3")
	wantCode(t, err, protocol.CodeTooManyLocks)
	if a.metric("lockhub_store_limit_hits_total", "limit="+locks.SettingLocksPerPerson) != 1 ||
		b.metric("lockhub_store_limit_hits_total", "limit="+locks.SettingLocksPerPerson) != 1 {
		t.Fatal("each instance's refusal is not counted in its lockhub_store_limit_hits_total")
	}
	// Another tab claiming what she holds renews it.
	expect(t, protocol.OutcomeRenewed)(tab2.Claim(ctx, typ, "r-1"))

	// Two changes are left of the burst of 4 (two claims spent it): a release, a claim.
	expect(t, protocol.OutcomeReleased)(tab2.Release(ctx, typ, "r-2"))
	expect(t, protocol.OutcomeAcquired)(tab1.Claim(ctx, typ, "r-3"))
	_, err = tab1.Release(ctx, typ, "r-3")
	wantCode(t, err, protocol.CodeRateLimited)
	// The refused release wrote nothing: the lock is still hers, through tab1.
	expect(t, protocol.OutcomeRenewed)(tab1.Renew(ctx, typ, "r-3"))
	// Grace, on the same tenant, is not slowed down.
	grace := b.dialAs("acme", protocol.Holder{OID: "u-grace", Name: "Grace Hopper"})
	expect(t, protocol.OutcomeAcquired)(grace.Claim(ctx, typ, "g-1"))
	expect(t, protocol.OutcomeReleased)(grace.Release(ctx, typ, "g-1"))
}

// TestTenantQuotaSockets: the tenant's quota through sockets of two instances, on one
// real redis-server and on the 6-node cluster: the .NET API's locks count toward it and
// are never refused, and a claim past it is an error frame naming the tenant's limit.
func TestTenantQuotaSockets(t *testing.T) { onRealRedis(t, testTenantQuotaSockets) }

func testTenantQuotaSockets(t *testing.T, ca, cb redis.UniversalClient) {
	quota := func(c *locks.Config) { c.MaxLocksPerTenant = 3 }
	a := startHub(t, ca, hubOptions{store: quota})
	b := startHub(t, cb, hubOptions{store: quota, dev: a.dev})
	ctx := tctx(t)
	ada := a.dialAs("quota", protocol.Holder{OID: "u-ada", Name: "Ada Lovelace"})
	grace := b.dialAs("quota", protocol.Holder{OID: "u-grace", Name: "Grace Hopper"})
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeAcquired)(grace.Claim(ctx, typ, "r-2"))
	net := redistest.DotNet{C: ca}
	for _, uid := range []string{"n-1", "n-2"} { // the second is over the quota: written all the same
		if ok, _, err := net.Claim(ctx, "quota", typ, uid, "u-margot", "Margot Hamilton"); err != nil || !ok {
			t.Fatalf(".NET claim of %s: %v %v, want it written (other programs are never refused)", uid, ok, err)
		}
	}
	for _, c := range []*protocol.Client{ada, grace} { // on either instance
		_, err := c.Claim(ctx, typ, "r-3")
		if pe := wantCode(t, err, protocol.CodeTooManyLocks); !strings.Contains(pe.Message, locks.SettingLocksPerTenant) {
			t.Fatalf("the refusal %q does not name the tenant's limit", pe.Message)
		}
	}
	// Once the .NET API releases its locks, there is room again.
	for _, uid := range []string{"n-1", "n-2"} {
		if ok, err := net.Release(ctx, "quota", typ, uid, "u-margot"); err != nil || !ok {
			t.Fatalf(".NET release of %s: %v %v", uid, ok, err)
		}
	}
	expect(t, protocol.OutcomeAcquired)(grace.Claim(ctx, typ, "r-3"))
}
