package locks

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

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
			expect(t, protocol.OutcomeAcquired)(s.Claim(ctxT(t), ref, ada, ""))
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
		expect(t, protocol.OutcomeLocked)(s.Claim(ctx, ref, grace, ""))
		r := expect(t, protocol.OutcomeRenewed)(s.Renew(ctx, ref, ada, ""))
		if !r.Lock.AcquiredAt.Equal(want.Truncate(time.Millisecond)) {
			t.Fatalf("%s: renew made acquiredAt %s", ts, r.Lock.AcquiredAt)
		}
		expect(t, protocol.OutcomeNotHeld)(s.Release(ctx, ref, grace))
	}
	if got := must1(s.List(ctx, "dotnet", "ApprovalRequest")); len(got) != 3 {
		t.Fatalf("List = %d locks, want 3", len(got))
	}
}

// TestForeignExpiry: a lock another program wrote keeps no value copy here, yet when
// its lease runs out it is still announced, from its key.
func TestForeignExpiry(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	s, _ := newStore(t, c, Config{})
	rec := runFeed(t, s, s, "dotnet")
	ctx := ctxT(t)
	ref := Ref{"dotnet", "ApprovalRequest", "r-9"}
	c.Set(ctx, LockKey(ref), `{"entityType":"ApprovalRequest","entityUid":"r-9","holderOid":"u-x","holderName":"X","acquiredAtUtc":"2026-12-02T09:15:00Z","expiresAtUtc":"2026-12-02T09:20:00Z"}`, time.Second)
	c.ZAdd(ctx, IndexKey(ref.Tenant, ref.Type), redis.Z{Score: float64(time.Now().Add(time.Second).UnixMilli()), Member: LockKey(ref)})
	// Redis's clock and the store's both move past the lease.
	mr.FastForward(2 * time.Second)
	s.now = func() time.Time { return time.Now().Add(2 * time.Second) }
	if err := s.Sweep(ctx, ref.Tenant, ref.Type); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "Expired from the key alone", func() bool {
		evs := rec.of("dotnet", "r-9")
		return len(evs) == 1 && evs[0].Op == protocol.OpExpired && evs[0].Lock.EntityType == "ApprovalRequest"
	})
}
