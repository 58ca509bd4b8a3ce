package locks

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestValueGolden pins the exact bytes Go stores: field names and order, and
// timestamps with exactly three fractional digits and "Z". The .NET service
// deserializes these bytes.
func TestValueGolden(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	for _, tc := range []struct {
		name string
		at   time.Time
	}{
		{"lock-value", time.Date(2026, 12, 2, 9, 15, 0, 123_456_789, time.UTC)},
		{"lock-value-whole-second", time.Date(2026, 12, 2, 9, 15, 0, 0, time.FixedZone("CET", 3600))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newStore(t, c, Config{Now: func() time.Time { return tc.at }})
			ref := Ref{"golden", "ApprovalRequest", tc.name}
			expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctxT(t), ref, ada, ""))
			got, err := c.Get(ctxT(t), LockKey(ref)).Result()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("stored value\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestForeignValue proves a value written by another program in the .NET format is
// honoured: 0 to 7 fractional digits, an offset instead of Z. Renew keeps its
// acquired instant, release compares its holder, list reads it back.
func TestForeignValue(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	s, _ := newStore(t, c, Config{})
	ctx := ctxT(t)
	for i, ts := range []string{"2026-12-02T09:15:00Z", "2026-12-02T09:15:00.1234567Z", "2026-12-02T10:15:00.5+01:00"} {
		ref := Ref{"dotnet", "ApprovalRequest", "r-" + string(rune('a'+i))}
		val := `{"entityType":"ApprovalRequest","entityUid":"` + ref.UID + `","holderOid":"u-ada","holderName":"Ada Lovelace","acquiredAtUtc":"` + ts + `","expiresAtUtc":"2099-12-02T09:20:00.1Z"}`
		c.Set(ctx, LockKey(ref), val, time.Minute)
		c.ZAdd(ctx, IndexKey(ref.Tenant, ref.Type), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: LockKey(ref)})

		want, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, protocol.OutcomeLocked)(s.Locks.Claim(ctx, ref, grace, ""))
		r := expect(t, protocol.OutcomeRenewed)(s.Locks.Renew(ctx, ref, ada, ""))
		if !r.Lock.AcquiredAt.Equal(want.Truncate(time.Millisecond)) {
			t.Fatalf("%s: renew made acquiredAt %s", ts, r.Lock.AcquiredAt)
		}
		expect(t, protocol.OutcomeNotHeld)(s.Locks.Release(ctx, ref, grace, ""))
	}
	if got := must1(s.Locks.List(ctx, "dotnet", "ApprovalRequest")); len(got) != 3 {
		t.Fatalf("List = %d locks, want 3", len(got))
	}
}

// testForeignExpiry: a lock another program wrote keeps no value copy here, yet when
// its lease runs out it is announced, from its key, by the sweep script itself (the
// store has no other way to publish, so it keeps its place among the entity's events;
// the race it closes cannot be staged from here). Index members that are not lock keys
// of the type with a valid uid are pruned and announced to no one.
func testForeignExpiry(t *testing.T, b backend) {
	c := b.client(t)
	s, _ := newStore(t, c, Config{})
	const tenant = "dotnet"
	rec := runFeed(t, s, s, tenant)
	ctx := ctxT(t)
	ref := Ref{tenant, "ApprovalRequest", "r-9"}
	idx := IndexKey(tenant, ref.Type)
	lease := 300 * time.Millisecond
	c.Set(ctx, LockKey(ref), `{"entityType":"ApprovalRequest","entityUid":"r-9","holderOid":"u-x","holderName":"X","acquiredAtUtc":"2026-12-02T09:15:00Z","expiresAtUtc":"2026-12-02T09:20:00Z"}`, lease)
	due := float64(time.Now().Add(lease).UnixMilli())
	hostile := []string{
		`lock:{dotnet}:ApprovalRequest:r-"},"x":{"`, // would break out of the JSON
		`lock:{dotnet}:ApprovalRequest:`,            // no uid
		`lock:{dotnet}:Order:r-1`,                   // another type's key
		`lockidx:{dotnet}:ApprovalRequest`,          // not a lock key
	}
	zs := []redis.Z{{Score: due, Member: LockKey(ref)}}
	for _, h := range hostile {
		zs = append(zs, redis.Z{Score: due, Member: h})
	}
	// Members not yet due are never read either: on a cluster a key of another slot
	// (another tenant's, or no tag at all) would fail the whole script.
	later := float64(time.Now().Add(time.Hour).UnixMilli())
	for _, h := range []string{`lock:{acme}:ApprovalRequest:r-1`, `bar`} {
		zs = append(zs, redis.Z{Score: later, Member: h})
	}
	if err := c.ZAdd(ctx, idx, zs...).Err(); err != nil {
		t.Fatal(err)
	}
	if b.advance != nil {
		b.advance(2 * lease)
	} else {
		redistest.Eventually(t, "the foreign lock expires", func() bool { return c.Exists(ctx, LockKey(ref)).Val() == 0 })
	}
	s.core.now = func() time.Time { return time.Now().Add(2 * lease) }
	if err := s.Locks.Sweep(ctx, tenant, ref.Type, 0); err != nil {
		t.Fatal(err)
	}
	s.core.now = time.Now
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, ""))
	redistest.Eventually(t, "Expired, then Acquired", func() bool { return len(rec.of(tenant, "r-9")) == 2 })
	evs := rec.of(tenant, "r-9")
	if evs[0].Op != protocol.OpExpired || evs[1].Op != protocol.OpAcquired {
		t.Fatalf("events %s, want Expired Acquired", ops(evs))
	}
	if got, want := evs[0].Lock, (protocol.Lock{EntityType: "ApprovalRequest", EntityUID: "r-9"}); got != want {
		t.Fatalf("Expired announced %+v, want %+v", got, want)
	}
	if l := must1(s.Locks.List(ctx, tenant, ref.Type)); len(l) != 1 || l[0].HolderOID != ada.OID {
		t.Fatalf("List = %+v, want Ada's new lock alone", l)
	}
	if n := c.ZCard(ctx, idx).Val(); n != 1 {
		t.Fatalf("the index keeps %d members, want only the new claim's: %v", n, c.ZRange(ctx, idx, 0, -1).Val())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, ch := range rec.changes {
		if uid := ch.Event.Lock.EntityUID; uid != "r-9" && uid != "probe" {
			t.Errorf("an event for %q: %s", uid, ch.Frame)
		}
	}
}
