package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestDotNetApproveFreesTheLock is PROTOCOL.md §8 in the browser: Ada holds r-1003 in
// the demo page, Grace waits on it behind the banner, and the .NET API approves it,
// running the story's release script straight on Redis, which publishes nothing. Only
// the hub's sweep can tell the pages; Grace's grid must drop Ada and her form must
// claim on its own within the 2 s of §8 (5 s allowed here for a loaded machine).
//
// The lease and renewal are long, so that no renewal by Ada's page happens while the
// test waits: the sweep's Released is then the only way Grace can learn of it, and a
// hub without it fails here.
//
// Ada's page hears the same Released: it must not claim its lock back (which would
// snatch it from Grace), but go read-only and say the lock was released elsewhere.
func TestDotNetApproveFreesTheLock(t *testing.T) {
	t.Parallel() // alongside TestStory: both mostly wait on a browser
	const uid = "r-1003"
	bin := binary(t)
	rds := redistest.StartServer(t)
	hub := startHub(t, bin, rds.URL(), "--lease", "2m", "--renew-every", "1m")
	browser := startBrowser(t)
	rc := rds.Client(t)
	lockKey, indexKey := redistest.DotNetKeys(ada.tenant, "ApprovalRequest", uid)
	t.Logf("hub on %s, redis on %s, screenshots and log in %s", hub.addr, rds.Addr(), outputDir(t))

	pAda := openAs(t, t, browser, hub, ada)
	pGrace := openAs(t, t, browser, hub, grace)
	click(t, pAda, "open-"+uid)
	waitFor(t, pAda, "Ada holds "+uid, formState("held"), 5*time.Second, formDiag)
	waitFor(t, pGrace, uid+" locked by Ada in Grace's grid", rowLockedBy(uid, "other", ada.name), 3*time.Second, rowDiag(uid))
	click(t, pGrace, "open-"+uid)
	waitFor(t, pGrace, "Grace's form blocked by Ada", formState("locked")+` && `+sel("form-body")+`.inert && !`+sel("lock-banner")+`.hidden && `+
		sel("lock-banner-text")+`.textContent.startsWith('Locked by Ada Lovelace')`, 5*time.Second, formDiag)
	// The release must find Ada's lock where the .NET service looks for it, or the
	// test proves nothing.
	if h := holderInRedis(t, rc, lockKey); h != ada.oid {
		t.Fatalf("%q holds %s in Redis; want %s", h, lockKey, ada.oid)
	}
	if _, err := rc.ZScore(t.Context(), indexKey, lockKey).Result(); err != nil {
		t.Fatalf("ZSCORE %s %s: %v; want Ada's lock in the index", indexKey, lockKey, err)
	}
	saveShot(t, "dotnet-1-grace-blocked-by-ada", pAda, pGrace)

	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	released, err := redistest.DotNet{C: rc}.Release(ctx, ada.tenant, "ApprovalRequest", uid, ada.oid)
	cancel()
	if err != nil || !released {
		t.Fatalf("the .NET release script: released %v, %v; want true", released, err)
	}
	const within = 5 * time.Second
	waitFor(t, pGrace, "Ada gone from Grace's grid", fmt.Sprintf(`(%s && !%s)`, row(uid), rowLockedBy(uid, "other", ada.name)), within, rowDiag(uid))
	waitFor(t, pGrace, "Grace's form claims on its own", formState("held")+` && !`+sel("form-body")+`.inert && `+sel("lock-banner")+`.hidden`,
		max(within-time.Since(start), 0), formDiag)
	d := time.Since(start)
	t.Logf("Grace's form held %s %v after the .NET release", uid, d.Round(time.Millisecond))
	if d > within {
		t.Errorf("took %v; want within %v", d, within)
	}
	if h := holderInRedis(t, rc, lockKey); h != grace.oid {
		t.Errorf("%q holds %s in Redis after Grace's claim; want %s", h, lockKey, grace.oid)
	}
	waitFor(t, pGrace, "Grace's grid marks it hers", rowLockedBy(uid, "mine", grace.name), 3*time.Second, rowDiag(uid))

	waitFor(t, pAda, "Ada's form ended, read-only, not claimed back", formState("ended")+` && `+
		sel("lock-banner-text")+`.textContent.startsWith('Your lock was released elsewhere')`, 5*time.Second, formDiag)
	waitFor(t, pAda, "Ada's grid shows Grace", rowLockedBy(uid, "other", grace.name), 3*time.Second, rowDiag(uid))
	// A claim back would have gone out as Ada's page read the release, before her form
	// ended; once the hub has answered a later request of hers (it answers a socket's
	// requests in order), Redis shows what came of it.
	eval[bool](t, pAda, `lockhubDemo.client.mine().then(() => true)`)
	if h := holderInRedis(t, rc, lockKey); h != grace.oid {
		t.Errorf("%q holds %s in Redis after Ada's page heard the release; want %s", h, lockKey, grace.oid)
	}
	if !eval[bool](t, pGrace, formState("held")) {
		t.Errorf("Grace's form lost the lock to Ada's page: %s", eval[string](t, pGrace, `JSON.stringify(`+formDiag+`)`))
	}
	saveShot(t, "dotnet-2-after-dotnet-approve-grace-holds", pAda, pGrace)
}

// holderInRedis is the holderOid of the lock value under key, as the .NET service
// reads it, or "" when there is none.
func holderInRedis(t *testing.T, rc *redis.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	v, err := rc.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	var l struct {
		HolderOID string `json:"holderOid"`
	}
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		t.Fatalf("GET %s: %v: %s", key, err, v)
	}
	return l.HolderOID
}
