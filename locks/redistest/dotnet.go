package redistest

import (
	"context"
	_ "embed" // the .NET service's scripts, byte for byte from the story
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The existing .NET service's lock scripts, copied byte for byte from the story
// (../shared/seed): lockhub shares its Redis with them (PROTOCOL.md §8), and they
// publish nothing.
var (
	//go:embed dotnet/claim.lua
	DotNetClaimScript string
	//go:embed dotnet/release.lua
	DotNetReleaseScript string
)

// DotNet is the .NET service writing locks on the same Redis: its own claim and
// release scripts with values in its own format, and, for what the story gives no
// script of, plain commands that keep PROTOCOL.md §1's layout. It builds its keys
// itself, from the contract, as another program would.
type DotNet struct {
	C redis.Scripter
	// Lease is the lease of its claims; zero means 5 minutes.
	Lease time.Duration
}

var (
	dotnetClaim   = redis.NewScript(DotNetClaimScript)
	dotnetRelease = redis.NewScript(DotNetReleaseScript)
)

// DotNetKeys returns the lock key and the index key of an entity, built from
// PROTOCOL.md §1 alone.
func DotNetKeys(tenant, entityType, uid string) (lock, index string) {
	return "lock:{" + tenant + "}:" + entityType + ":" + uid, "lockidx:{" + tenant + "}:" + entityType
}

// DotNetValue is a lock value as System.Text.Json writes it: the fields of §1 in
// order, timestamps with their trailing fractional zeros trimmed.
func DotNetValue(entityType, uid, oid, name string, acquired, expires time.Time) string {
	const layout = "2006-01-02T15:04:05.9999999Z"
	return fmt.Sprintf(`{"entityType":%q,"entityUid":%q,"holderOid":%q,"holderName":%q,"acquiredAtUtc":%q,"expiresAtUtc":%q}`,
		entityType, uid, oid, name, acquired.UTC().Format(layout), expires.UTC().Format(layout))
}

func (d DotNet) lease() time.Duration {
	if d.Lease == 0 {
		return 5 * time.Minute
	}
	return d.Lease
}

// Claim runs the .NET claim script for oid; it reports whether the lock was free.
// It returns the value it wrote.
func (d DotNet) Claim(ctx context.Context, tenant, entityType, uid, oid, name string) (bool, string, error) {
	now := time.Now()
	v := DotNetValue(entityType, uid, oid, name, now, now.Add(d.lease()))
	lock, index := DotNetKeys(tenant, entityType, uid)
	n, err := dotnetClaim.Run(ctx, d.C, []string{lock, index}, v, d.lease().Milliseconds(), now.Add(d.lease()).UnixMilli()).Int()
	return n == 1, v, err
}

// Release runs the .NET release script (as its approve and reject do); it reports
// whether oid held the lock.
func (d DotNet) Release(ctx context.Context, tenant, entityType, uid, oid string) (bool, error) {
	lock, index := DotNetKeys(tenant, entityType, uid)
	n, err := dotnetRelease.Run(ctx, d.C, []string{lock, index}, oid).Int()
	return n == 1, err
}

// dotnetRewrite writes v over an existing lock with a fresh lease and its index
// score, in one script: what a program that keeps §1's layout does to renew or to
// take over. The story gives no script for these.
var dotnetRewrite = redis.NewScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'XX', 'PX', ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], KEYS[1])
return 1`)

// Renew gives the lock of oid a fresh lease, keeping acquiredAtUtc as stored.
// It returns the value it wrote.
func (d DotNet) Renew(ctx context.Context, tenant, entityType, uid, oid, name string, acquired time.Time) (string, error) {
	now := time.Now()
	v := DotNetValue(entityType, uid, oid, name, acquired, now.Add(d.lease()))
	return v, d.rewrite(ctx, tenant, entityType, uid, v, now)
}

// Overwrite puts oid's lock in place of whoever holds it.
// It returns the value it wrote.
func (d DotNet) Overwrite(ctx context.Context, tenant, entityType, uid, oid, name string) (string, error) {
	now := time.Now()
	v := DotNetValue(entityType, uid, oid, name, now, now.Add(d.lease()))
	return v, d.rewrite(ctx, tenant, entityType, uid, v, now)
}

func (d DotNet) rewrite(ctx context.Context, tenant, entityType, uid, v string, now time.Time) error {
	lock, index := DotNetKeys(tenant, entityType, uid)
	n, err := dotnetRewrite.Run(ctx, d.C, []string{lock, index}, v, d.lease().Milliseconds(), now.Add(d.lease()).UnixMilli()).Int()
	if err == nil && n == 0 {
		err = fmt.Errorf("redistest: no lock at %s to rewrite", lock)
	}
	return err
}
