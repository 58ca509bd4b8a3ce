package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestLockConsole is the lock console of PROTOCOL.md §10 end to end: the real binary,
// a real redis-server, the demo page in Chromium. Ada edits r-1001; Barbara, an
// administrator, sees the lock live in her console, opens its history, force releases
// it after confirming, and Ada's open form turns read-only with a banner naming
// Barbara. Ada, without the role, gets no console and is refused by the hub.
func TestLockConsole(t *testing.T) {
	t.Parallel() // alongside the other browser tests: mostly waiting
	bin := binary(t)
	rds := redistest.StartServer(t)
	hub := startHub(t, bin, rds.URL())
	browser := startBrowser(t)
	t.Logf("hub on %s, redis on %s, screenshots in %s", hub.addr, rds.Addr(), outputDir(t))

	pAda := openAs(t, t, browser, hub, ada)
	click(t, pAda, "open-r-1001")
	waitFor(t, pAda, "Ada's form held", formState("held"), 5*time.Second, formDiag)
	if !eval[bool](t, pAda, sel("console-card")+`.hidden`) {
		t.Error("Ada, no administrator, is shown the lock console")
	}
	code := eval[string](t, pAda, `lockhubDemo.client.request({type: 'adminLocks'}).then(() => 'served', (e) => e.code)`)
	if code != "forbidden" {
		t.Errorf("adminLocks from Ada's page: %s, want forbidden", code)
	}

	pBarbara := openAs(t, t, browser, hub, barbara)
	consoleRow := func(uid string) string {
		return fmt.Sprintf(`document.querySelector('[data-testid="console-lock"][data-uid=%q]')`, uid)
	}
	const consoleDiag = `({status: document.querySelector('[data-testid="console-status"]').textContent,
		rows: [...document.querySelectorAll('[data-testid="console-lock"]')].map((r) => r.textContent),
		trail: [...document.querySelectorAll('[data-testid="console-entry"]')].map((e) => e.dataset.op + ' ' + e.textContent)})`
	waitFor(t, pBarbara, "Ada's lock in the console", `!`+sel("console-card")+`.hidden && `+consoleRow("r-1001")+` !== null && `+
		consoleRow("r-1001")+`.textContent.includes('Ada Lovelace')`, 5*time.Second, consoleDiag)
	// Live: a lock taken after the console opened appears without a reload.
	pGrace := openAs(t, t, browser, hub, grace)
	click(t, pGrace, "open-r-1002")
	waitFor(t, pGrace, "Grace's form held", formState("held"), 5*time.Second, formDiag)
	waitFor(t, pBarbara, "Grace's lock in the console, live", consoleRow("r-1002")+` !== null && `+
		consoleRow("r-1002")+`.textContent.includes('Grace Hopper')`, 5*time.Second, consoleDiag)

	// The history of r-1001: Ada's claim.
	eval[bool](t, pBarbara, `(`+consoleRow("r-1001")+`.querySelector('[data-testid="console-history"]').click(), true)`)
	waitFor(t, pBarbara, "r-1001's history", `[...document.querySelectorAll('[data-testid="console-entry"]')].map((e) => e.dataset.op + '/' + e.dataset.reason).join() === 'Acquired/claim'`,
		5*time.Second, consoleDiag)

	// Force release asks first; until confirmed nothing happens.
	eval[bool](t, pBarbara, `(`+consoleRow("r-1001")+`.querySelector('[data-testid="console-force"]').click(), true)`)
	waitFor(t, pBarbara, "the confirmation", consoleRow("r-1001")+`.querySelector('[data-testid="console-confirm-text"]')?.textContent.includes("Release Ada Lovelace's lock?")`,
		5*time.Second, consoleDiag)
	if !eval[bool](t, pAda, formState("held")) {
		t.Fatal("Ada's form lost its lock before the release was confirmed")
	}
	eval[bool](t, pBarbara, `(`+consoleRow("r-1001")+`.querySelector('[data-testid="console-confirm"]').click(), true)`)

	took := waitFor(t, pAda, "Ada's form told Barbara released her lock", formState("ended")+` && `+sel("lock-banner")+`.textContent.includes('Barbara Liskov released your lock') && `+
		sel("field-title")+`.readOnly`, 5*time.Second, formDiag)
	t.Logf("the force release reached Ada's form in %v", took.Round(time.Millisecond))
	waitFor(t, pBarbara, "the console without r-1001, its history with the force release", consoleRow("r-1001")+` === null && `+consoleRow("r-1002")+` !== null && `+
		`[...document.querySelectorAll('[data-testid="console-entry"]')].map((e) => e.dataset.op + '/' + e.dataset.reason).join() === 'ForceReleased/admin,Acquired/claim' && `+
		`document.querySelector('[data-testid="console-entry"]').textContent.includes('by Barbara Liskov')`, 5*time.Second, consoleDiag)
	saveShot(t, "10-console-force-release", pAda, pBarbara)

	// Ada's form does not claim it back on its own. A claim would have gone out as her
	// page read the release, before her form ended; the hub answers a socket's requests
	// in order, so her locks as it lists them in answer to a later request would show it.
	if eval[bool](t, pAda, `lockhubDemo.client.mine().then((locks) => locks.some((l) => l.entityUid === 'r-1001'))`) {
		t.Error("Ada holds r-1001 again after the force release")
	}
	if eval[bool](t, pAda, `lockhubDemo.client.held().some((l) => l.entityUid === 'r-1001')`) {
		t.Error("Ada's client holds r-1001 again after the force release")
	}

	// Margaret takes Grace's r-1002 over: its history says whose lock it was
	// (previous, PROTOCOL.md §10 version 3) and who took it.
	pMargaret := openAs(t, t, browser, hub, margaret)
	if out := eval[string](t, pMargaret, `lockhubDemo.client.request({type: 'takeover', entityType: 'ApprovalRequest', entityUid: 'r-1002'}).then((r) => r.outcome, (e) => e.code)`); out != "takenOver" {
		t.Fatalf("Margaret's takeover of r-1002: %s", out)
	}
	waitFor(t, pBarbara, "r-1002 Margaret's in the console", consoleRow("r-1002")+`?.textContent.includes('Margaret Hamilton')`, 5*time.Second, consoleDiag)
	eval[bool](t, pBarbara, `(`+consoleRow("r-1002")+`.querySelector('[data-testid="console-history"]').click(), true)`)
	waitFor(t, pBarbara, "r-1002's history names Grace as whose lock was taken over", `[...document.querySelectorAll('[data-testid="console-entry"]')].map((e) => e.dataset.op + '/' + e.dataset.reason).join() === 'TakenOver/takeover,Acquired/claim' && `+
		`document.querySelector('[data-testid="console-entry"]').textContent.includes("Grace Hopper's lock taken over by Margaret Hamilton")`, 5*time.Second, consoleDiag)
}
