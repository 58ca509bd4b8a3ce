//go:build unix

package hub

import (
	"testing"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestRedisHung: while Redis hangs (paused with SIGSTOP: connections accepted, nothing
// answered, unlike TestRedisRestart's refused connections) a socket's claim is
// answered unknown by the store's own timeout, whose default is within the contract's
// 2 s; once Redis resumes claims succeed again.
func TestRedisHung(t *testing.T) {
	// The production client and the store's default timeout, not the generous ones of
	// the other hub tests: this test is about the bound.
	srv := redistest.StartServer(t)
	rdb, err := locks.NewClient(srv.URL(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	th := startHub(t, rdb, hubOptions{store: func(c *locks.Config) { c.Timeout = 0 }})
	ctx := tctx(t)
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))

	srv.Pause(t)
	for _, uid := range []string{"r-2", "r-1"} { // free, and held by the caller
		r := expect(t, protocol.OutcomeUnknown)(ada.Claim(ctx, typ, uid))
		if r.Lock != nil {
			t.Fatalf("claim of %s with Redis hung answered %+v", uid, r)
		}
	}
	// The store's deadline answered, not the socket's ctx nor a broken connection.
	if got := th.metric("lockhub_store_fail_open_total", "op=claim", "reason=timeout"); got != 2 {
		t.Fatalf("claims failed open on the store's timeout = %v, want 2", got)
	}

	srv.Resume(t)
	redistest.Eventually(t, "a claim to succeed after Redis resumes", func() bool {
		r, err := ada.Claim(ctx, typ, "r-3")
		return err == nil && r.Outcome == protocol.OutcomeAcquired
	})
}
