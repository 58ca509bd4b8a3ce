package service

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestBinaryStoreShare runs two lockhub processes on one real redis-server with the
// fair share's flags set low, and checks that the quotas and the change rate the store
// counts in Redis (PROTOCOL.md §4) hold across them, over HTTP and sockets alike: a
// person's locks, a tenant's locks with the .NET API's among them (never refused) and a
// bulk claim refused whole, and a person's changes. Each refusal names its flag in the
// answer and in both processes' /metrics.
func TestBinaryStoreShare(t *testing.T) {
	bin := buildBinary(t)
	srv := redistest.StartServer(t)
	args := []string{"--listen", "127.0.0.1:0", "--dev", "--redis-url", srv.URL(),
		"--" + locks.SettingLocksPerPerson, "3", "--" + locks.SettingLocksPerTenant, "6", "--" + locks.SettingChangesPerPerson, "1"}
	a, b := startBinary(t, bin, args), startBinary(t, bin, args)
	aURL, bURL := "http://"+a.addr, "http://"+b.addr
	wsURL := func(base string) string { return "ws" + strings.TrimPrefix(base, "http") + "/ws" }
	ctx := t.Context()
	const lockURL = "/api/locks/ApprovalRequest/"
	claimHTTP := func(base, tok, uid string) answer {
		t.Helper()
		return call(t, "POST", base+lockURL+uid, tok, "")
	}
	wantRefused := func(what string, a answer, code protocol.ErrorCode, setting string) {
		t.Helper()
		if a.status != 429 || a.body["code"] != string(code) || !strings.Contains(a.raw, setting) {
			t.Fatalf("%s: %d %s, want 429 %s naming %s", what, a.status, a.raw, code, setting)
		}
		if s, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("%s: Retry-After %q, want whole seconds", what, a.header.Get("Retry-After"))
		}
	}
	wantFree := func(base, tok, uid string) {
		t.Helper()
		if got := call(t, "GET", base+lockURL+uid, tok, ""); got.status != 404 {
			t.Fatalf("%s after a refusal: %d %s, want it free", uid, got.status, got.raw)
		}
	}
	wantFrame := func(what string, err error, code protocol.ErrorCode, setting string) {
		t.Helper()
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != code || !strings.Contains(pe.Message, setting) {
			t.Fatalf("%s: %v, want %s naming %s", what, err, code, setting)
		}
	}
	metric := func(base, setting string) float64 {
		t.Helper()
		m := call(t, "GET", base+"/metrics", "", "").raw
		_, rest, ok := strings.Cut(m, `lockhub_store_limit_hits_total{limit="`+setting+`"} `)
		if !ok {
			return 0
		}
		v, _, _ := strings.Cut(rest, "\n")
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", v, err)
		}
		return n
	}

	// Ada's three locks: over HTTP on one instance, a socket and HTTP on the other (each
	// development-mode process signs tokens with a key of its own).
	ada, adaB := devToken(t, aURL, "u-ada"), devToken(t, bURL, "u-ada")
	if got := claimHTTP(aURL, ada, "r-1"); got.body["outcome"] != "acquired" {
		t.Fatalf("claim: %d %s", got.status, got.raw)
	}
	sock := dialAuth(t, wsURL(bURL), adaB)
	if res, err := sock.Claim(ctx, "ApprovalRequest", "r-2"); err != nil || res.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("claim over the socket: %v %v", res.Outcome, err)
	}
	if got := claimHTTP(bURL, adaB, "r-3"); got.body["outcome"] != "acquired" {
		t.Fatalf("claim: %d %s", got.status, got.raw)
	}
	wantRefused("a fourth lock over HTTP", claimHTTP(aURL, ada, "r-4"), protocol.CodeTooManyLocks, locks.SettingLocksPerPerson)
	_, err := sock.Claim(ctx, "ApprovalRequest", "r-4")
	wantFrame("a fourth lock over the socket", err, protocol.CodeTooManyLocks, locks.SettingLocksPerPerson)
	wantFree(aURL, ada, "r-4")
	if ma, mb := metric(aURL, locks.SettingLocksPerPerson), metric(bURL, locks.SettingLocksPerPerson); ma != 1 || mb != 1 {
		t.Fatalf("%s hits in /metrics: %v and %v, want one on each instance", locks.SettingLocksPerPerson, ma, mb)
	}

	// Globex at its 6: two of Grace's and four the .NET API wrote, and a fifth of its
	// that lockhub never refuses. A bulk claim is refused whole, a socket's claim too.
	grace := devTokenOf(t, aURL, "globex", "u-grace")
	for _, uid := range []string{"g-1", "g-2"} {
		if got := claimHTTP(aURL, grace, uid); got.body["outcome"] != "acquired" {
			t.Fatalf("claim: %d %s", got.status, got.raw)
		}
	}
	net := redistest.DotNet{C: srv.Client(t)}
	for i := range 5 {
		if ok, _, err := net.Claim(ctx, "globex", "ApprovalRequest", "n-"+strconv.Itoa(i), "u-net", "The API"); err != nil || !ok {
			t.Fatalf(".NET claim %d: %v %v, want it written whatever the quota", i, ok, err)
		}
	}
	bob := devTokenOf(t, bURL, "globex", "u-bob")
	wantRefused("a bulk claim past the tenant's quota", call(t, "POST", bURL+"/api/locks/ApprovalRequest", bob, `{"uids":["b-1","b-2"]}`),
		protocol.CodeTooManyLocks, locks.SettingLocksPerTenant)
	wantFree(bURL, bob, "b-1")
	wantFree(bURL, bob, "b-2")
	_, err = dialAuth(t, wsURL(aURL), devTokenOf(t, aURL, "globex", "u-bob")).Claim(ctx, "ApprovalRequest", "b-3")
	wantFrame("a socket's claim past the tenant's quota", err, protocol.CodeTooManyLocks, locks.SettingLocksPerTenant)
	if ma, mb := metric(aURL, locks.SettingLocksPerTenant), metric(bURL, locks.SettingLocksPerTenant); ma != 1 || mb != 1 {
		t.Fatalf("%s hits in /metrics: %v and %v, want one on each instance", locks.SettingLocksPerTenant, ma, mb)
	}

	// Carol's changes: a burst of 200 at 1 a second, spent through sockets of both
	// instances (each within its own frame rate), then refused on either, over HTTP too.
	var socks []*protocol.Client
	for _, base := range []string{aURL, aURL, bURL, bURL} {
		socks = append(socks, dialAuth(t, wsURL(base), devToken(t, base, "u-carol")))
	}
	changes := 0
	for _, c := range socks {
		for range locks.DefaultChangesBurst / len(socks) / 2 {
			if res, err := c.Claim(ctx, "ApprovalRequest", "c-1"); err != nil || res.Outcome != protocol.OutcomeAcquired {
				t.Fatalf("change %d (claim): %v %v", changes, res.Outcome, err)
			}
			if res, err := c.Release(ctx, "ApprovalRequest", "c-1"); err != nil || res.Outcome != protocol.OutcomeReleased {
				t.Fatalf("change %d (release): %v %v", changes+1, res.Outcome, err)
			}
			changes += 2
		}
	}
	// The bucket refills one a second: what the burst took to spend may buy a few more.
	var refused error
	for extra := 0; refused == nil; extra++ {
		if extra > 10 {
			t.Fatalf("%d changes past the burst of %d allowed at 1 a second", extra, changes)
		}
		if _, refused = socks[extra%len(socks)].Claim(ctx, "ApprovalRequest", "c-"+strconv.Itoa(extra)); refused != nil {
			break
		}
	}
	wantFrame("a change past the rate", refused, protocol.CodeRateLimited, locks.SettingChangesPerPerson)
	wantRefused("a change past the rate over HTTP", claimHTTP(bURL, devToken(t, bURL, "u-carol"), "c-http"), protocol.CodeRateLimited, locks.SettingChangesPerPerson)
	wantFree(bURL, adaB, "c-http")
	if ma, mb := metric(aURL, locks.SettingChangesPerPerson), metric(bURL, locks.SettingChangesPerPerson); ma+mb < 2 || mb < 1 {
		t.Fatalf("%s hits in /metrics: %v and %v, want both refusals counted", locks.SettingChangesPerPerson, ma, mb)
	}
	// Renewals are not changes: Ada's lock renews however spent her budget is.
	if res, err := sock.Renew(ctx, "ApprovalRequest", "r-2"); err != nil || res.Outcome != protocol.OutcomeRenewed {
		t.Fatalf("a renewal: %v %v", res.Outcome, err)
	}
}
