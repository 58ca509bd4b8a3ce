package e2e

import (
	"testing"
	"time"
)

// The browser client's side of the waiting line and of a pending release (PROTOCOL.md
// version 3: §9 intent, §11 the line, §4 "An instance that dies"), in real Chromium
// against the fake hub of client_test.go, frame by frame as the contract writes them.

// waiter is a presence entry of version 3: a person waiting in line at position.
func waiter(oid, name string, d time.Duration, position int) map[string]any {
	v := viewer(oid, name, d)
	v["state"], v["position"] = "waiting", position
	return v
}

// editor is a presence entry of version 3: the holder.
func editor(oid, name string, d time.Duration) map[string]any {
	v := viewer(oid, name, d)
	v["state"] = "editing"
	return v
}

const bannerJS = `document.querySelector('[data-testid=lock-banner-text]').textContent`

const lineDiag = `({state: f.state, position: f.position, intent: f.intent, banner: ` + bannerJS + `, others: ` + othersJS + `,
	inert: document.querySelector('[data-testid=lock-banner]').nextElementSibling?.inert, stop: document.querySelector('[data-testid=lock-stop-waiting]')?.textContent,
	stopHidden: document.querySelector('[data-testid=lock-stop-waiting]')?.hidden, errors})`

// TestLineClient checks lockhub.js's form against PROTOCOL.md §11 and the pending
// release of §4.
func TestLineClient(t *testing.T) {
	t.Parallel() // alongside the other browser tests: they mostly wait
	browser := startBrowser(t)
	adas := func() map[string]any { return lock("r-1", "u-ada", "Ada Lovelace", time.Minute) }

	// Grace waits 2nd behind Edsger while Ada holds r-1; Edsger leaves, Grace is next;
	// Ada releases and Grace's form does not claim; the hub hands the lock to Grace and
	// her form is editable at once.
	t.Run("WaitsInLineAndTakesTheHandoffWithoutAClaim", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{oid: "u-grace", name: "Grace Hopper"})
		view := openForm(t, e, c, openFormR1, map[string]any{"outcome": "locked", "lock": adas()}, []map[string]any{
			editor("u-ada", "Ada Lovelace", 3*time.Minute), waiter("u-edsger", "Edsger Dijkstra", 2*time.Minute, 1), waiter("u-grace", "Grace Hopper", time.Minute, 2),
		})
		if view.str("intent") != "edit" {
			t.Errorf("the form viewed with intent %q, want edit", view.str("intent"))
		}
		waitFor(t, e.tab, "2nd in line", `f.state === 'locked' && f.position === 2 && / · 2nd in line$/.test(`+bannerJS+`)`, 5*time.Second, lineDiag)
		checks := map[string]string{
			"Stop waiting offered": `document.querySelector('[data-testid=lock-stop-waiting]').textContent === 'Stop waiting' && !document.querySelector('[data-testid=lock-stop-waiting]').hidden`,
			"the line in the list": othersAre("Ada Lovelace is editing", "Edsger Dijkstra is waiting (1st)") + ` || ` + othersAre("Edsger Dijkstra is waiting (1st)", "Ada Lovelace is editing"),
			"position attribute":   `document.getElementById('form').dataset.lockPosition === '2'`,
		}
		checkAll(t, e.tab, checks, `JSON.stringify(`+lineDiag+`)`)

		c.send(t, presence(editor("u-ada", "Ada Lovelace", 3*time.Minute), waiter("u-grace", "Grace Hopper", time.Minute, 1)))
		waitFor(t, e.tab, "next", `f.position === 1 && / · you are next$/.test(`+bannerJS+`)`, 5*time.Second, lineDiag)

		c.send(t, event("Released", adas(), nil))
		e.noFrame(t, c, "claim")
		if got := eval[string](t, e.tab, `f.state`); got != "locked" {
			t.Errorf("after Released, before the handoff, the form is %q", got)
		}
		start := time.Now()
		c.send(t, map[string]any{"type": "handoff", "entityType": "ApprovalRequest", "entityUid": "r-1", "lock": lock("r-1", "u-grace", "Grace Hopper", 5*time.Minute)})
		waitFor(t, e.tab, "held after the handoff", `f.state === 'held' && !document.getElementById('form-body').inert && document.querySelector('[data-testid=lock-banner]').hidden`, 2*time.Second, lineDiag)
		t.Logf("the form was editable %v after the handoff frame", time.Since(start).Round(time.Millisecond))
		e.noFrame(t, c, "claim")
	})

	// "Stop waiting" views again as a look (a plain view); the form then does not take
	// the lock when it is freed, and offers to edit, which claims it.
	t.Run("StopWaitingLooksAndWaitsAgain", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{oid: "u-grace", name: "Grace Hopper"})
		openForm(t, e, c, openFormR1, map[string]any{"outcome": "locked", "lock": adas()}, []map[string]any{
			editor("u-ada", "Ada Lovelace", 3*time.Minute), waiter("u-grace", "Grace Hopper", time.Minute, 1),
		})
		waitFor(t, e.tab, "next", `f.position === 1`, 5*time.Second, lineDiag)
		click(t, e.tab, "lock-stop-waiting")
		v := c.waitFrame(t, "view", 2*time.Second)
		if _, has := v["intent"]; has || v.str("entityUid") != "r-1" {
			t.Errorf("Stop waiting sent %v, want a view without intent", v)
		}
		c.reply(t, v, "presence", map[string]any{"entityType": "ApprovalRequest", "entityUid": "r-1", "viewers": []any{
			editor("u-ada", "Ada Lovelace", 3*time.Minute), func() map[string]any { l := viewer("u-grace", "Grace Hopper", 0); l["state"] = "looking"; return l }(),
		}})
		waitFor(t, e.tab, "looking", `f.intent === 'look' && f.position === 0 && document.querySelector('[data-testid=lock-stop-waiting]').textContent === 'Wait for it' && !/in line|next/.test(`+bannerJS+`)`, 5*time.Second, lineDiag)
		// Someone who only looks does not claim when the lock is freed; the form says
		// it is free and offers to edit, which views with intent edit and claims.
		c.send(t, event("Released", adas(), nil))
		e.noFrame(t, c, "claim")
		waitFor(t, e.tab, "free", `f.state === 'free' && `+bannerJS+` === 'Nobody is editing this now.' && document.querySelector('[data-testid=lock-stop-waiting]').textContent === 'Edit'`, 5*time.Second, lineDiag)
		click(t, e.tab, "lock-stop-waiting")
		var claim frame
		for v == nil || v.str("intent") != "edit" || claim == nil {
			f := c.next(t, 2*time.Second)
			switch f.str("type") {
			case "view":
				v = f
			case "claim":
				claim = f
			default:
				t.Fatalf("unexpected frame %v", f)
			}
		}
		c.reply(t, claim, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-grace", "Grace Hopper", 5*time.Minute)})
		waitFor(t, e.tab, "held", `f.state === 'held' && !document.getElementById('form-body').inert`, 5*time.Second, lineDiag)
	})

	// Ada holds r-1: her form lists who waits in the order of the line, whatever the
	// order of the presence frame.
	t.Run("HolderListsTheLineInOrder", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{oid: "u-ada", name: "Ada Lovelace"})
		openForm(t, e, c, openFormR1, map[string]any{"outcome": "acquired", "lock": adas()}, []map[string]any{
			editor("u-ada", "Ada Lovelace", 3*time.Minute), waiter("u-edsger", "Edsger Dijkstra", 2*time.Minute, 2), waiter("u-grace", "Grace Hopper", time.Minute, 1),
			func() map[string]any { l := viewer("u-barbara", "Barbara Liskov", 0); l["state"] = "looking"; return l }(),
		})
		waitFor(t, e.tab, "the line listed", `f.state === 'held' && `+othersAre("Grace Hopper is waiting (1st)", "Edsger Dijkstra is waiting (2nd)", "Barbara Liskov is viewing"), 5*time.Second, lineDiag)
	})

	// A release the hub answers pending (the holder's other tab is on an instance not
	// yet known to be dead) shows "Releasing…" until the Released event.
	t.Run("PendingReleaseSaysReleasing", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{oid: "u-ada", name: "Ada Lovelace"})
		openForm(t, e, c, openFormR1, map[string]any{"outcome": "acquired", "lock": adas()}, []map[string]any{editor("u-ada", "Ada Lovelace", time.Minute)})
		waitFor(t, e.tab, "held", `f.state === 'held'`, 5*time.Second, lineDiag)
		eval[bool](t, e.tab, `(window.rel = f.release(), true)`)
		var req frame
		for req == nil {
			f := c.next(t, 2*time.Second)
			switch f.str("type") {
			case "release":
				req = f
			case "view": // the form stops waiting for a lock it lets go
				c.reply(t, f, "presence", map[string]any{"entityType": "ApprovalRequest", "entityUid": "r-1", "viewers": []any{}})
			default:
				t.Fatalf("unexpected frame %v", f)
			}
		}
		c.reply(t, req, "result", map[string]any{"outcome": "released", "pending": true})
		waitFor(t, e.tab, "Releasing…", `f.state === 'releasing' && `+bannerJS+` === 'Releasing…' && !document.querySelector('[data-testid=lock-banner]').hidden`, 5*time.Second, lineDiag)
		if !eval[bool](t, e.tab, `rel.then((r) => r.pending === true)`) {
			t.Error("form.release() did not resolve with the pending answer")
		}
		c.send(t, event("Released", lock("r-1", "u-ada", "Ada Lovelace", time.Minute), nil))
		waitFor(t, e.tab, "released", `f.state === 'released' && `+bannerJS+` !== 'Releasing…'`, 5*time.Second, lineDiag)
		e.noFrame(t, c, "claim")
	})

	// The messages option: the same banner in German.
	t.Run("GermanMessages", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{messages: lh.de}`, welcomeOpts{oid: "u-grace", name: "Grace Hopper"})
		openForm(t, e, c, openFormR1, map[string]any{"outcome": "locked", "lock": adas()}, []map[string]any{
			editor("u-ada", "Ada Lovelace", 3*time.Minute), waiter("u-edsger", "Edsger Dijkstra", 2*time.Minute, 1), waiter("u-grace", "Grace Hopper", time.Minute, 2),
		})
		waitFor(t, e.tab, "the German banner", `/^Gesperrt von Ada Lovelace seit \d\d:\d\d \(bis \d\d:\d\d\) · 2\. in der Warteschlange$/.test(`+bannerJS+`)`, 5*time.Second, lineDiag)
		checks := map[string]string{
			"Nicht mehr warten": `document.querySelector('[data-testid=lock-stop-waiting]').textContent === 'Nicht mehr warten'`,
			"the list":          othersAre("Ada Lovelace bearbeitet", "Edsger Dijkstra wartet (1.)") + ` || ` + othersAre("Edsger Dijkstra wartet (1.)", "Ada Lovelace bearbeitet"),
			"the ask button":    `document.querySelector('[data-testid=lock-nudge]').textContent === 'Ada Lovelace bitten, fertig zu werden'`,
		}
		checkAll(t, e.tab, checks, `JSON.stringify(`+lineDiag+`)`)
	})

	// The demo page in German (?lang=de: the widgets' messages), and its grid's bulk
	// approve: a batch with a row someone else holds names them and approves nothing;
	// without it, the rows come back approved.
	t.Run("DemoGridBulkApproveInGerman", func(t *testing.T) {
		t.Parallel()
		h := newFakeHub(t)
		tb := newTab(t, browser, "demo", h.srv.URL+"/?user=u-ada&lang=de")
		// The refused batch's 409 is a network error on the console: expected here.
		t.Cleanup(func() { noConsole(t, tb, "an uncaught exception or a CSP violation", isUncaughtOrCSP) })
		c := h.accept(t)
		c.handshake(t, welcomeOpts{oid: "u-ada", name: "Ada Lovelace"})
		req := c.expect(t, "watch")
		c.reply(t, req, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{lock("r-1002", "u-grace", "Grace Hopper", time.Minute)}})
		waitFor(t, tb, "the page live", sel("grid")+`.dataset.loaded === 'true' && `+rowLockedBy("r-1002", "other", "Grace Hopper"), 5*time.Second, rowDiag("r-1002"))
		checks := map[string]string{
			"the column in German":  sel("col-locked-by") + `.textContent === 'Gesperrt von'`,
			"German row title":      `/^Gesperrt von Grace Hopper seit \d\d:\d\d \(bis \d\d:\d\d\)$/.test(` + row("r-1002") + `.title)`,
			"the picker says so":    sel("lang-picker") + `.value === 'de'`,
			"nothing selected":      sel("approve-selected") + `.disabled && ` + sel("approve-selected") + `.textContent === 'Approve selected'`,
			"no open on a checkbox": `(` + sel("pick-r-1001") + `.click(), ` + sel("pick-r-1001") + `.click(), !lockhubDemo.current)`,
		}
		checkAll(t, tb, checks, `JSON.stringify({col: `+sel("col-locked-by")+`?.textContent, title: `+row("r-1002")+`.title})`)

		click(t, tb, "pick-r-1001")
		click(t, tb, "pick-r-1002")
		waitFor(t, tb, "two selected", sel("approve-selected")+`.textContent === 'Approve selected (2)' && !`+sel("approve-selected")+`.disabled`, 2*time.Second, sel("approve-selected")+`.textContent`)
		click(t, tb, "approve-selected")
		waitFor(t, tb, "told who holds r-1002", sel("grid-notice")+`.textContent === 'Nothing was approved: r-1002 is locked by Grace Hopper.' && `+sel("grid-notice")+`.dataset.kind === 'error'`, 5*time.Second, sel("grid-notice")+`.textContent`)
		if !eval[bool](t, tb, sel("status-r-1001")+`.textContent.startsWith('Pending')`) {
			t.Error("r-1001 shows approved after a refused batch")
		}
		click(t, tb, "pick-r-1002")
		click(t, tb, "approve-selected")
		waitFor(t, tb, "approved", sel("grid-notice")+`.textContent === 'Approved 1 request.' && `+sel("status-r-1001")+`.textContent.startsWith('Approved')`, 5*time.Second, sel("grid-notice")+`.textContent`)
		if !eval[bool](t, tb, sel("pick-r-1001")+`.disabled && `+sel("approve-selected")+`.disabled`) {
			t.Error("an approved row can still be selected")
		}
	})
}
