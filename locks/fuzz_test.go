package locks

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// FuzzValidate proves that no accepted reference yields a key outside its tenant's
// slot (so one script and one MGET always work on a cluster), and that a refused one
// writes nothing.
func FuzzValidate(f *testing.F) {
	f.Add("acme", "ApprovalRequest", "r-1001")    // the everyday case
	f.Add("acme", "ApprovalRequest", "a}b")       // a brace in the uid
	f.Add("{acme", "ApprovalRequest", "x")        // a brace opening the tenant
	f.Add("ac}me", "T", "{x}")                    // braces that would move the hash tag
	f.Add("", "T", "u")                           // empty tenant
	f.Add("acme", "T", "a:b:{c}")                 // colons then a tag in the uid
	f.Add("acme", "T\n", "u")                     // a newline in the type
	f.Add("ä", "T", "ü")                          // non-ASCII
	f.Add("a", "b", "c:::::::::::::::::::::::::") // many colons
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		f.Fatal(err)
	}
	defer mr.Close()
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	s, _ := newStore(f, c, Config{})
	// A store as on a cluster, for its channel names: each must be in its tenant's slot.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{mr.Addr()}})
	defer cc.Close()
	cs, _ := newStore(f, cc, Config{})
	f.Fuzz(func(t *testing.T, tenant, typ, uid string) {
		ref := Ref{tenant, typ, uid}
		if err := ref.Validate(); err != nil {
			before := mr.DB(0).Keys()
			if _, cerr := s.Locks.Claim(context.Background(), ref, protocol.Holder{OID: "u-x"}, "c"); cerr == nil {
				t.Fatalf("Claim accepted %v that Validate refused", ref)
			}
			if after := mr.DB(0).Keys(); len(after) != len(before) {
				t.Fatalf("a refused claim wrote keys: %v", after)
			}
			return
		}
		want := redistest.Slot("{" + tenant + "}")
		for _, key := range []string{LockKey(ref), IndexKey(tenant, typ), ValuesKey(tenant, typ), seenKey(tenant, typ), ConnsKey(ref), s.core.channel(tenant), cs.core.channel(tenant)} {
			if got := redistest.Slot(key); got != want && key != s.core.channel(tenant) {
				t.Fatalf("key %q is in slot %d, its tenant's is %d", key, got, want)
			}
			if got := keySlot(key); got != redistest.Slot(key) {
				t.Fatalf("keySlot(%q) = %d, the harness says %d", key, got, redistest.Slot(key))
			}
		}
	})
}
