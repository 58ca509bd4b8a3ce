package locks

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// testListJSON: ListJSON answers List's locks encoded, byte for byte, however they were
// written (lockhub, the .NET scripts, a value that is not a lock), reads the keys every
// time (a change of any writer shows at once), and decodes only the values that are new
// or changed since its last read of the type.
func testListJSON(t *testing.T, b backend) {
	c := b.client(t)
	s, _ := newStore(t, c, Config{Timeout: 10 * time.Second})
	ctx := ctxT(t)
	tenant := fmt.Sprintf("json-%d", time.Now().UnixNano())
	const typ = "ApprovalRequest"
	r := func(uid string) Ref { return Ref{tenant, typ, uid} }
	net := redistest.DotNet{C: c}
	counts := func() (decoded, known float64) {
		return testutil.ToFloat64(s.core.met.listValues.WithLabelValues(listDecoded)), testutil.ToFloat64(s.core.met.listValues.WithLabelValues(listKnown))
	}
	// check compares ListJSON with List, and the values it decoded and knew with want.
	check := func(step string, wantDecoded, wantKnown float64) {
		t.Helper()
		d0, k0 := counts()
		got, err := s.Locks.ListJSON(ctx, tenant, typ)
		if err != nil {
			t.Fatal(err)
		}
		d1, k1 := counts()
		list, err := s.Locks.List(ctx, tenant, typ)
		if err != nil {
			t.Fatal(err)
		}
		if list == nil {
			list = []protocol.Lock{}
		}
		want, _ := json.Marshal(list) // locks always encode
		if string(got) != string(want) {
			t.Fatalf("%s: ListJSON\n%s\nList\n%s", step, got, want)
		}
		if d1-d0 != wantDecoded || k1-k0 != wantKnown {
			t.Fatalf("%s: %v values decoded and %v known, want %v and %v", step, d1-d0, k1-k0, wantDecoded, wantKnown)
		}
	}

	check("no locks", 0, 0)
	for _, uid := range []string{"r-1", "r-2", "r-3"} {
		expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, r(uid), ada, ""))
	}
	if ok, _, err := net.Claim(ctx, tenant, typ, "r-net", grace.OID, grace.Name); err != nil || !ok {
		t.Fatalf(".NET claim = %v, %v", ok, err)
	}
	check("first read", 4, 0)
	check("nothing changed", 0, 4)
	expect(t, protocol.OutcomeRenewed)(s.Locks.Renew(ctx, r("r-2"), ada, ""))
	check("one renewed", 1, 3)
	check("nothing changed since the renewal", 0, 4)
	if ok, err := net.Release(ctx, tenant, typ, "r-net", grace.OID); err != nil || !ok {
		t.Fatalf(".NET release = %v, %v", ok, err)
	}
	check("the .NET lock released by .NET", 0, 3)
	// A value that is not a lock, under a live key of the index: skipped, and tried
	// again at each read that finds the type's values changed (it never parses, so it
	// is never known); a read that finds nothing changed skips it too.
	if err := c.Set(ctx, LockKey(r("r-bad")), "not a lock", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	due := float64(time.Now().Add(time.Minute).UnixMilli())
	if err := c.ZAdd(ctx, IndexKey(tenant, typ), redis.Z{Score: due, Member: LockKey(r("r-bad"))}).Err(); err != nil {
		t.Fatal(err)
	}
	check("a value that is not a lock", 0, 3)
	expect(t, protocol.OutcomeReleased)(s.Locks.Release(ctx, r("r-1"), ada, ""))
	check("one released", 0, 2)
	check("nothing changed since the release", 0, 2)
	first, _ := s.Locks.ListJSON(ctx, tenant, typ)
	again, _ := s.Locks.ListJSON(ctx, tenant, typ)
	if len(first) == 0 || &first[0] != &again[0] {
		t.Fatal("ListJSON built the array again though nothing changed")
	}

	// ListJSON only reads: no key of the tenant changes, even where a sweep would write
	// (an index that ended before its locks, as a program's PEXPIRE may end it). The
	// locks are still found through their value copies.
	if err := c.Del(ctx, IndexKey(tenant, typ)).Err(); err != nil {
		t.Fatal(err)
	}
	keys := []string{IndexKey(tenant, typ), ValuesKey(tenant, typ), seenKey(tenant, typ), FeedKey(tenant), AuditKey(tenant)}
	for _, uid := range []string{"r-1", "r-2", "r-3", "r-net", "r-bad"} {
		keys = append(keys, LockKey(r(uid)), ConnsKey(r(uid)))
	}
	// Each key's DUMP (its value, "" when absent) and PTTL (-1 none, -2 absent).
	dump := func() ([]string, []time.Duration) {
		vals, ttls := make([]string, len(keys)), make([]time.Duration, len(keys))
		for i, k := range keys {
			vals[i] = c.Dump(ctx, k).Val()
			ttls[i] = c.PTTL(ctx, k).Val()
		}
		return vals, ttls
	}
	start := time.Now()
	before, ttlBefore := dump()
	got, err := s.Locks.ListJSON(ctx, tenant, typ)
	if err != nil {
		t.Fatal(err)
	}
	after, ttlAfter := dump()
	elapsed := time.Since(start)
	for i, k := range keys {
		if before[i] != after[i] {
			t.Errorf("ListJSON changed %s", k)
		}
		// A TTL only runs down, by at most the time that passed.
		b, a := ttlBefore[i], ttlAfter[i]
		if (b < 0 || a < 0) && a != b || b >= 0 && (a > b || a < b-elapsed-time.Millisecond) {
			t.Errorf("ListJSON changed the TTL of %s: %v, then %v", k, b, a)
		}
	}
	list, err := s.Locks.List(ctx, tenant, typ)
	if err != nil {
		t.Fatal(err)
	}
	var listed []protocol.Lock
	if err := json.Unmarshal(got, &listed); err != nil {
		t.Fatal(err)
	}
	byUID := func(a, b protocol.Lock) int { return strings.Compare(a.EntityUID, b.EntityUID) }
	slices.SortFunc(listed, byUID) // the order of a list is not the contract's
	slices.SortFunc(list, byUID)
	if len(list) != 2 || !slices.Equal(listed, list) {
		t.Fatalf("with the index gone ListJSON = %+v, List = %+v, want r-2 and r-3", listed, list)
	}
	if got, err := s.Locks.ListJSON(ctx, "nobody", typ); err != nil || string(got) != "[]" {
		t.Fatalf("ListJSON of an empty tenant = %s, %v", got, err)
	}
}

// TestEncodeOrderMoved: encode walks the last read's values in step, and when a read's
// order moved further than a few places it looks them up instead: a reversed type of
// 200 locks decodes only the first walkMisses values it missed, and answers what a read
// with nothing known answers, byte for byte.
func TestEncodeOrderMoved(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = c.Close() })
	s, _ := newStore(t, c, Config{Timeout: 10 * time.Second})
	ctx := ctxT(t)
	const n = 200
	vals := make([]any, n)
	for i := range vals {
		vals[i] = encodeBenchValue(i, 0)
	}
	key := typeKey{"t", "ApprovalRequest"}
	decoded := func() float64 { return testutil.ToFloat64(s.core.met.listValues.WithLabelValues(listDecoded)) }
	s.core.encoded.encode(ctx, s.core, key, vals)
	slices.Reverse(vals)
	d0 := decoded()
	got := s.core.encoded.encode(ctx, s.core, key, vals)
	if d := decoded() - d0; d != walkMisses {
		t.Errorf("a reversed read decoded %v values, want %d (then looked up)", d, walkMisses)
	}
	var fresh encodedValues
	if want := fresh.encode(ctx, s.core, key, vals); string(got) != string(want) {
		t.Fatalf("reversed read:\n%s\nwant\n%s", got, want)
	}
}

// TestJoinArrays: the console's arrays of several types make one array; one type's is
// answered as it is, not copied (it is that type's shared array).
func TestJoinArrays(t *testing.T) {
	one := []byte(`[{"a":1},{"a":2}]`)
	for _, tc := range []struct {
		arrs [][]byte
		want string
	}{
		{nil, `[]`},
		{[][]byte{one}, `[{"a":1},{"a":2}]`},
		{[][]byte{one, []byte(`[{"b":1}]`), []byte(`[{"c":1},{"c":2}]`)}, `[{"a":1},{"a":2},{"b":1},{"c":1},{"c":2}]`},
	} {
		got := joinArrays(tc.arrs)
		if string(got) != tc.want || !json.Valid(got) {
			t.Errorf("joinArrays(%q) = %s, want %s", tc.arrs, got, tc.want)
		}
		if len(tc.arrs) == 1 && &got[0] != &one[0] {
			t.Error("joinArrays copied the one array it was given")
		}
	}
}
