package locks

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// testSeedBugRegression is the story's production bug, on a real Redis Cluster: a grid
// reading the locks of a page with one MGET. With the tenant as hash tag, listing the
// locks of many tenants, whose keys spread over every master, never errs; the control
// case shows that the old key format, without the hash tag, fails with CROSSSLOT there.
func testSeedBugRegression(t *testing.T, cl *redistest.Cluster) {
	c := cl.Client(t)
	ctx := ctxT(t)
	reg := prometheus.NewRegistry()
	s, _ := newStore(t, c, Config{Registerer: reg})

	const tenants, perTenant = 60, 12
	slots := map[int]bool{}
	for i := range tenants {
		tenant := fmt.Sprintf("tenant-%d", i)
		slots[redistest.Slot(IndexKey(tenant, "ApprovalRequest"))] = true
		for j := range perTenant {
			h := []protocol.Holder{ada, grace}[j%2]
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, Ref{tenant, "ApprovalRequest", fmt.Sprintf("r-%d", 1000+j)}, h, ""))
		}
	}
	masters := map[string]bool{}
	for slot := range slots {
		masters[cl.MasterForSlot(t, slot)] = true
	}
	if len(masters) < 3 {
		t.Fatalf("the tenants cover %d masters; the test needs all 3", len(masters))
	}
	for i := range tenants {
		tenant := fmt.Sprintf("tenant-%d", i)
		if got := must1(s.Locks.List(ctx, tenant, "ApprovalRequest")); len(got) != perTenant {
			t.Fatalf("List(%s) = %d locks, want %d", tenant, len(got), perTenant)
		}
		if got := must1(s.Locks.Mine(ctx, tenant, ada.OID)); len(got) != perTenant/2 {
			t.Fatalf("Mine(%s) = %d locks, want %d", tenant, len(got), perTenant/2)
		}
	}
	if n := testutil.CollectAndCount(s.core.met.failOpen); n != 0 {
		t.Fatalf("%d fail-open series on a healthy cluster", n)
	}

	// Control: the seed's first key format, one MGET over a page of uids.
	old := make([]string, 0, 20)
	oldSlots := map[int]bool{}
	for j := range 20 {
		k := fmt.Sprintf("lock:acme:ApprovalRequest:r-%d", 1000+j)
		old = append(old, k)
		oldSlots[redistest.Slot(k)] = true
	}
	if len(oldSlots) < 2 {
		t.Fatal("control keys share a slot; pick others")
	}
	err := c.MGet(ctx, old...).Err()
	if !redis.HasErrorPrefix(err, "CROSSSLOT") {
		t.Fatalf("MGET of old-format keys = %v, want CROSSSLOT", err)
	}
	if classify(err) != ReasonCrossSlot {
		t.Fatalf("classify(%v) = %s", err, classify(err))
	}
}

// testKeySlotsOnCluster cross-checks the slot arithmetic the fuzz test relies on
// against CLUSTER KEYSLOT on the real cluster, for a sample of accepted references.
func testKeySlotsOnCluster(t *testing.T, cl *redistest.Cluster) {
	c := cl.Client(t)
	ctx := ctxT(t)
	for _, ref := range []Ref{
		{"acme", "ApprovalRequest", "r-1001"},
		{"globex", "Order", "a:b:c"},
		{"t.1-_", "X", "0"},
		{"Z", "ApprovalRequest", "x"},
		{"9", "T", "u-" + fmt.Sprint(12345)},
	} {
		for _, key := range []string{LockKey(ref), IndexKey(ref.Tenant, ref.Type), ValuesKey(ref.Tenant, ref.Type), seenKey(ref.Tenant, ref.Type), ConnsKey(ref), LineKey(ref), handKey(ref)} {
			got, err := c.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if int(got) != redistest.Slot(key) || int(got) != redistest.Slot(LockKey(ref)) {
				t.Fatalf("CLUSTER KEYSLOT %s = %d; Slot() = %d; lock key slot %d", key, got, redistest.Slot(key), redistest.Slot(LockKey(ref)))
			}
		}
	}
}
