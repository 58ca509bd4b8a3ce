package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The browser client's side of presence and nudges (PROTOCOL.md §9), in real Chromium
// against the fake hub of client_test.go: what a form sends (view, unview, nudge),
// what it makes of the presence and nudge frames, in which order, and what it draws.
// TestPresenceStory runs the same against the real binary.

// viewer is one entry of a presence frame, here since d ago.
func viewer(oid, name string, d time.Duration) map[string]any {
	return map[string]any{"oid": oid, "name": name, "since": stamp(time.Now().Add(-d))}
}

// presence is a presence frame of ApprovalRequest r-1 without id (a change).
func presence(viewers ...map[string]any) map[string]any {
	if viewers == nil {
		viewers = []map[string]any{}
	}
	return map[string]any{"type": "presence", "entityType": "ApprovalRequest", "entityUid": "r-1", "viewers": viewers}
}

// othersJS is the form's list of others as its text, one person per line.
const othersJS = `[...document.querySelectorAll('[data-testid=lock-viewers] li')].map((li) => li.textContent).join('\n')`

// presenceDiag shows what the form shows and knows of presence.
const presenceDiag = `({state: f.state, others: ` + othersJS + `, hidden: document.querySelector('[data-testid=lock-presence]')?.hidden,
	nudge: document.querySelector('[data-testid=lock-nudge]')?.textContent, status: document.querySelector('[data-testid=lock-nudge-status]')?.textContent,
	notice: document.querySelector('[data-testid=lock-nudged]')?.textContent, errors})`

// othersAre is a predicate: the form lists exactly these lines, in this order.
func othersAre(lines ...string) string {
	return fmt.Sprintf(`(%s) === %s`, othersJS, jsString(strings.Join(lines, "\n")))
}

// openForm opens a lockForm on r-1 as window.f (js: the expression that opens it) and
// answers the three frames it sends, in whatever order: watch with an empty
// snapshot, claim with claimReply, and view (when viewers is not nil) with a presence
// answer listing viewers. It returns the view frame.
func openForm(t *testing.T, e *clientEnv, c *fakeConn, js string, claimReply map[string]any, viewers []map[string]any) frame {
	t.Helper()
	eval[bool](t, e.tab, js)
	var view frame
	for range 3 {
		f := c.next(t, 5*time.Second)
		switch f.str("type") {
		case "watch":
			c.reply(t, f, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{}})
		case "claim":
			c.reply(t, f, "result", claimReply)
		case "view":
			if f.str("entityType") != "ApprovalRequest" || f.str("entityUid") != "r-1" || f.str("id") == "" {
				t.Fatalf("view frame %v", f)
			}
			view = f
			if viewers != nil {
				c.reply(t, f, "presence", map[string]any{"entityType": "ApprovalRequest", "entityUid": "r-1", "viewers": viewers})
			}
		default:
			t.Fatalf("unexpected frame %v while the form opens", f)
		}
	}
	if view == nil {
		t.Fatal("the form sent no view")
	}
	return view
}

// TestPresenceClient checks lockhub.js's presence and nudges against PROTOCOL.md §9.
func TestPresenceClient(t *testing.T) {
	t.Parallel() // alongside the other browser tests: they mostly wait
	browser := startBrowser(t)

	t.Run("PureHelpers", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		checks := map[string]string{
			"the holder edits":            `lh.activityOf('u-ada', 'u-ada') === 'editing'`,
			"others wait while it's held": `lh.activityOf('u-grace', 'u-ada') === 'waiting'`,
			"others view while it's free": `lh.activityOf('u-grace', null) === 'viewing' && lh.activityOf('u-grace', '') === 'viewing'`,
			"a viewer's line":             `lh.viewerText('Grace Hopper', 'waiting') === 'Grace Hopper is waiting'`,
			"the holder's notice":         `/^Grace Hopper asks you to finish \(\d\d:\d\d\)$/.test(lh.nudgeText('Grace Hopper', '2026-12-02T09:15:00.123Z'))`,
			"a notice without a time":     `lh.nudgeText('Grace Hopper', 'soon') === 'Grace Hopper asks you to finish'`,
		}
		checkAll(t, e.tab, checks, "")
	})

	// Grace opens a request Ada holds, with Edsger on it too: she sees Ada editing and
	// Edsger waiting, never herself, and may ask Ada to finish; the hub's answers show.
	t.Run("BlockedFormListsOthersAndAsksTheHolder", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{oid: "u-grace", name: "Grace Hopper"})
		adas := lock("r-1", "u-ada", "Ada Lovelace", time.Minute)
		openForm(t, e, c, openFormR1, map[string]any{"outcome": "locked", "lock": adas}, []map[string]any{
			viewer("u-ada", "Ada Lovelace", 3*time.Minute), viewer("u-grace", "Grace Hopper", 0), viewer("u-edsger", "Edsger Dijkstra", time.Minute),
		})
		waitFor(t, e.tab, "the others listed", `f.state === 'locked' && `+othersAre("Ada Lovelace is editing", "Edsger Dijkstra is waiting"), 5*time.Second, presenceDiag)
		checks := map[string]string{
			"the list is shown":        `!document.querySelector('[data-testid=lock-presence]').hidden`,
			"activities as attributes": `document.querySelector('[data-testid=viewer-u-ada]').dataset.activity === 'editing' && document.querySelector('[data-testid=viewer-u-edsger]').dataset.activity === 'waiting'`,
			"not herself":              `!document.querySelector('[data-testid=viewer-u-grace]') && f.viewers.length === 3 && f.others.length === 2`,
			"others in the API":        `JSON.stringify(f.others.map((o) => [o.oid, o.activity])) === JSON.stringify([['u-ada', 'editing'], ['u-edsger', 'waiting']])`,
			"the ask button":           `document.querySelector('[data-testid=lock-nudge]').textContent === 'Ask Ada Lovelace to finish' && !document.querySelector('[data-testid=lock-nudge]').closest('[hidden]')`,
			"no notice for her":        `document.querySelector('[data-testid=lock-nudged]').hidden`,
			"no style attribute":       `document.querySelectorAll('[style]').length === 0`,
		}
		checkAll(t, e.tab, checks, `JSON.stringify(`+presenceDiag+`)`)

		click(t, e.tab, "lock-nudge")
		req := c.waitFrame(t, "nudge", 2*time.Second)
		if req.str("entityType") != "ApprovalRequest" || req.str("entityUid") != "r-1" || req.str("id") == "" {
			t.Fatalf("nudge frame %v", req)
		}
		c.reply(t, req, "result", map[string]any{"outcome": "nudged"})
		waitFor(t, e.tab, "told it was asked", `/^Asked at \d\d:\d\d\.$/.test(document.querySelector('[data-testid=lock-nudge-status]').textContent) && `+
			`document.querySelector('[data-testid=lock-nudge-status]').dataset.outcome === 'nudged'`, 5*time.Second, presenceDiag)
		click(t, e.tab, "lock-nudge")
		req = c.waitFrame(t, "nudge", 2*time.Second)
		c.reply(t, req, "error", map[string]any{"code": "rate_limited", "message": "one nudge per 30 s"})
		waitFor(t, e.tab, "told she asked recently", `document.querySelector('[data-testid=lock-nudge-status]').textContent === 'You asked recently; try again in a little while.' && `+
			`document.querySelector('[data-testid=lock-nudge-status]').dataset.outcome === 'rateLimited'`, 5*time.Second, presenceDiag)
		// The API resolves with the outcome, whatever it is.
		for _, tc := range []struct {
			answer  string
			members map[string]any
			want    string
		}{
			{"result", map[string]any{"outcome": "notHeld"}, "notHeld"},
			{"error", map[string]any{"code": "forbidden", "message": "not viewing"}, "forbidden"},
			{"error", map[string]any{"code": "bad_request", "message": "?"}, "failed"},
		} {
			eval[bool](t, e.tab, `(window.np = f.nudge(), true)`)
			c.reply(t, c.waitFrame(t, "nudge", 2*time.Second), tc.answer, tc.members)
			if got := eval[string](t, e.tab, `np`); got != tc.want {
				t.Errorf("nudge answered %s %v: form.nudge() resolved %q, want %q", tc.answer, tc.members, got, tc.want)
			}
		}

		// Edsger leaves: the list follows the hub's next frame.
		c.send(t, presence(viewer("u-ada", "Ada Lovelace", 3*time.Minute), viewer("u-grace", "Grace Hopper", 0)))
		waitFor(t, e.tab, "Edsger gone", othersAre("Ada Lovelace is editing"), 5*time.Second, presenceDiag)
		// Ada lets go and Grace's form takes the lock: Ada, still there, now waits, and
		// nobody is asked to finish any more.
		c.send(t, event("Released", adas, nil))
		c.reply(t, c.waitFrame(t, "claim", 2*time.Second), "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-grace", "Grace Hopper", 5*time.Minute)})
		waitFor(t, e.tab, "Grace holds it, Ada waits", `f.state === 'held' && `+othersAre("Ada Lovelace is waiting")+
			` && !!document.querySelector('[data-testid=lock-nudge]').closest('[hidden]')`, 5*time.Second, presenceDiag)
		// Closing the form stops viewing, and takes its presence away.
		eval[bool](t, e.tab, `(f.close(), true)`)
		if u := c.waitFrame(t, "unview", 2*time.Second); u.str("entityUid") != "r-1" {
			t.Fatalf("unview %v", u)
		}
		if !eval[bool](t, e.tab, `!document.querySelector('[data-testid=lock-presence]') && f.others.length === 0`) {
			t.Error("the presence outlived the form")
		}
	})

	// Ada holds the request: those who come are waiting, and when Grace asks, Ada's
	// form names her, with the time, until Ada dismisses it.
	t.Run("HolderIsToldWhoAsks", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{oid: "u-ada", name: "Ada Lovelace"})
		open := `(window.seen = [], window.f = client.lockForm(document.getElementById('form'), 'ApprovalRequest', 'r-1',
			{onNudge: (n, form) => seen.push(n.from.name + '@' + form.uid), onPresence: (others) => seen.push(others.length)}), true)`
		openForm(t, e, c, open, map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-ada", "Ada Lovelace", 5*time.Minute)},
			[]map[string]any{viewer("u-ada", "Ada Lovelace", 0)})
		waitFor(t, e.tab, "held, nobody else here", `f.state === 'held' && f.viewers.length === 1 && document.querySelector('[data-testid=lock-presence]').hidden`, 5*time.Second, presenceDiag)
		c.send(t, presence(viewer("u-ada", "Ada Lovelace", time.Minute), viewer("u-grace", "Grace Hopper", 0)))
		waitFor(t, e.tab, "Grace waiting", othersAre("Grace Hopper is waiting")+` && !document.querySelector('[data-testid=lock-presence]').hidden`, 5*time.Second, presenceDiag)
		if !eval[bool](t, e.tab, `!!document.querySelector('[data-testid=lock-nudge]').closest('[hidden]')`) {
			t.Error("the holder is offered to ask herself")
		}

		at := time.Now().Add(-30 * time.Second)
		nudge := map[string]any{"type": "nudge", "entityType": "ApprovalRequest", "entityUid": "r-1", "from": map[string]any{"oid": "u-grace", "name": "Grace Hopper"}, "at": stamp(at)}
		c.send(t, nudge)
		waitFor(t, e.tab, "the notice", `!document.querySelector('[data-testid=lock-nudged]').hidden`, 5*time.Second, presenceDiag)
		want := fmt.Sprintf("Grace Hopper asks you to finish (%s)", eval[string](t, e.tab, fmt.Sprintf(`lh.formatClock(%s)`, jsString(stamp(at)))))
		if got := eval[string](t, e.tab, `document.querySelector('[data-testid=lock-nudged-list]').textContent`); got != want {
			t.Errorf("notice %q, want %q", got, want)
		}
		if !eval[bool](t, e.tab, `document.querySelector('[data-testid=lock-nudged]').getAttribute('role') === 'alert' && f.nudges.length === 1 && f.nudges[0].from.oid === 'u-grace'`) {
			t.Error("the notice is no alert, or form.nudges does not say who asked")
		}
		// Asked again: one line per person; a nudge about another entity is not this form's.
		// The nudge about r-2 goes first: once the page has seen the ask after it, it
		// has read it too (frames are read in order), and its absence is exact.
		other := map[string]any{"type": "nudge", "entityType": "ApprovalRequest", "entityUid": "r-2", "from": map[string]any{"oid": "u-edsger", "name": "Edsger Dijkstra"}, "at": stamp(time.Now())}
		c.send(t, other)
		c.send(t, nudge)
		waitFor(t, e.tab, "the second ask seen", `seen.filter((s) => s === 'Grace Hopper@r-1').length === 2`, 5*time.Second, `JSON.stringify(seen)`)
		if got := eval[int](t, e.tab, `document.querySelectorAll('[data-testid=lock-nudged-list] li').length`); got != 1 {
			t.Errorf("%d lines in the notice, want 1", got)
		}
		if eval[bool](t, e.tab, `seen.some((s) => String(s).startsWith('Edsger'))`) {
			t.Error("a nudge about r-2 reached r-1's form")
		}
		if !eval[bool](t, e.tab, `seen.includes(1)`) {
			t.Errorf("onPresence not called with the one other: %v", eval[string](t, e.tab, `JSON.stringify(seen)`))
		}
		click(t, e.tab, "lock-nudged-dismiss")
		waitFor(t, e.tab, "dismissed", `document.querySelector('[data-testid=lock-nudged]').hidden && f.nudges.length === 0 && `+othersAre("Grace Hopper is waiting"),
			5*time.Second, presenceDiag)
		// A notice goes with the lock: taken over, the form is no longer asked anything.
		c.send(t, nudge)
		waitFor(t, e.tab, "asked again", `!document.querySelector('[data-testid=lock-nudged]').hidden`, 5*time.Second, presenceDiag)
		c.send(t, event("TakenOver", lock("r-1", "u-margaret", "Margaret Hamilton", 5*time.Minute), map[string]any{"oid": "u-ada", "name": "Ada Lovelace"}))
		waitFor(t, e.tab, "taken over, no notice", `f.state === 'takenOver' && document.querySelector('[data-testid=lock-nudged]').hidden && f.nudges.length === 0`,
			5*time.Second, presenceDiag)
	})

	// Frames apply in arrival order, answers and changes alike; an answer to a view
	// that closed before it was answered is not taken for the reopened form's.
	t.Run("FramesInArrivalOrder_StaleAnswerDropped", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		view := openForm(t, e, c, openFormR1, map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)}, nil)
		me := viewer("u-me", "Me Myself", time.Minute)
		// A change sent before the hub answered the view, then the answer: the answer came last.
		c.send(t, presence(me, viewer("u-x", "Xavier Early", 0)))
		c.reply(t, view, "presence", map[string]any{"entityType": "ApprovalRequest", "entityUid": "r-1", "viewers": []any{me, viewer("u-y", "Yvonne Answer", 0)}})
		waitFor(t, e.tab, "the answer", othersAre("Yvonne Answer is waiting"), 5*time.Second, presenceDiag)
		// Then a change, at once after a frame that is no presence.
		c.send(t, event("Renewed", lock("r-1", "u-me", "Me Myself", 5*time.Minute), nil))
		c.send(t, presence(me, viewer("u-z", "Zoe Later", 0)))
		waitFor(t, e.tab, "the change", othersAre("Zoe Later is waiting"), 5*time.Second, presenceDiag)

		// Closed and opened again before the first view is answered.
		eval[bool](t, e.tab, `(f.close(), window.f = client.lockForm(document.getElementById('form'), 'ApprovalRequest', 'r-1'), f.close(), `+
			`window.f = client.lockForm(document.getElementById('form'), 'ApprovalRequest', 'r-1'), true)`)
		var views []frame
		var unviews int
		deadline := time.Now().Add(5 * time.Second)
		for (len(views) < 2 || unviews < 2) && time.Now().Before(deadline) {
			f := c.next(t, time.Until(deadline))
			switch f.str("type") {
			case "view":
				views = append(views, f)
			case "unview":
				unviews++
				c.reply(t, f, "result", map[string]any{"outcome": "unviewed"})
			case "claim":
				c.reply(t, f, "result", map[string]any{"outcome": "renewed", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
			}
		}
		if len(views) != 2 || unviews != 2 {
			t.Fatalf("got %d views and %d unviews; want 2 and 2", len(views), unviews)
		}
		// The stale answer, then the answer to a request sent after it: once that is in,
		// the stale one has been read too, and must not show.
		eval[bool](t, e.tab, `(window.mineDone = false, client.mine().then(() => mineDone = true), true)`)
		mine := c.waitFrame(t, "mine", 2*time.Second)
		c.reply(t, views[0], "presence", map[string]any{"entityType": "ApprovalRequest", "entityUid": "r-1", "viewers": []any{me, viewer("u-old", "Olga Stale", 0)}})
		c.reply(t, mine, "result", map[string]any{"locks": []any{}})
		waitFor(t, e.tab, "the frames after the stale answer read", `mineDone && f.state === 'held'`, 5*time.Second, presenceDiag)
		if !eval[bool](t, e.tab, `f.viewers.length === 0 && `+othersAre()) {
			t.Fatalf("the stale answer was applied: %s", eval[string](t, e.tab, `JSON.stringify(`+presenceDiag+`)`))
		}
		c.reply(t, views[1], "presence", map[string]any{"entityType": "ApprovalRequest", "entityUid": "r-1", "viewers": []any{me, viewer("u-new", "Nina Fresh", 0)}})
		waitFor(t, e.tab, "the fresh answer", othersAre("Nina Fresh is waiting"), 5*time.Second, presenceDiag)
	})

	// A reconnect empties the list (nobody is known to be here) and views again, as
	// claims are made again; the new answer fills it.
	t.Run("ReconnectViewsAgain", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		openForm(t, e, c, openFormR1, map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)},
			[]map[string]any{viewer("u-me", "Me Myself", time.Minute), viewer("u-ada", "Ada Lovelace", 0)})
		waitFor(t, e.tab, "Ada listed", othersAre("Ada Lovelace is waiting"), 5*time.Second, presenceDiag)
		c.shut()
		waitFor(t, e.tab, "nobody known while disconnected", `f.viewers.length === 0 && document.querySelector('[data-testid=lock-presence]').hidden`, 5*time.Second, presenceDiag)
		c2 := e.hub.accept(t)
		c2.handshake(t, welcomeOpts{})
		seen := map[string]int{}
		for range 3 {
			f := c2.next(t, 5*time.Second)
			seen[f.str("type")]++
			switch f.str("type") {
			case "watch":
				c2.reply(t, f, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{lock("r-1", "u-me", "Me Myself", 5*time.Minute)}})
			case "claim":
				c2.reply(t, f, "result", map[string]any{"outcome": "renewed", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
			case "view":
				c2.reply(t, f, "presence", map[string]any{"entityType": "ApprovalRequest", "entityUid": "r-1",
					"viewers": []any{viewer("u-me", "Me Myself", 0), viewer("u-ada", "Ada Lovelace", 0), viewer("u-grace", "Grace Hopper", 0)}})
			}
		}
		if seen["watch"] != 1 || seen["claim"] != 1 || seen["view"] != 1 {
			t.Fatalf("after the reconnect the client sent %v; want one watch, claim and view", seen)
		}
		waitFor(t, e.tab, "the list whole again", `f.state === 'held' && `+othersAre("Ada Lovelace is waiting", "Grace Hopper is waiting"), 5*time.Second, presenceDiag)
	})

	// Locks unavailable (fail open): nobody holds it, so the others are viewing; the
	// hub's Redis down too: an empty list, nothing shown, the form editable.
	t.Run("FailOpen", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		openForm(t, e, c, openFormR1, map[string]any{"outcome": "unknown", "lock": nil}, []map[string]any{})
		waitFor(t, e.tab, "unknown, nothing shown", `f.state === 'unknown' && f.viewers.length === 0 && document.querySelector('[data-testid=lock-presence]').hidden && `+
			`!document.getElementById('form-body').inert`, 5*time.Second, presenceDiag)
		c.send(t, presence(viewer("u-me", "Me Myself", 0), viewer("u-ada", "Ada Lovelace", 0)))
		waitFor(t, e.tab, "Ada viewing", othersAre("Ada Lovelace is viewing"), 5*time.Second, presenceDiag)
		c.send(t, presence())
		waitFor(t, e.tab, "nothing shown again", `f.viewers.length === 0 && document.querySelector('[data-testid=lock-presence]').hidden`, 5*time.Second, presenceDiag)
		if got := eval[[]string](t, e.tab, `errors`); len(got) != 0 {
			t.Errorf("errors reported: %v", got)
		}
	})

	// A hub from before presence answers view with bad_request: said once, the form
	// works as before, and no unview or ask goes out.
	t.Run("HubWithoutPresence", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{oid: "u-grace", name: "Grace Hopper"})
		view := openForm(t, e, c, openFormR1, map[string]any{"outcome": "locked", "lock": lock("r-1", "u-ada", "Ada Lovelace", time.Minute)}, nil)
		c.reply(t, view, "error", map[string]any{"code": "bad_request", "message": "unknown frame type \"view\""})
		waitFor(t, e.tab, "said once", `errors.length === 1 && errors[0].includes('does not support presence')`, 5*time.Second, `JSON.stringify(errors)`)
		if !eval[bool](t, e.tab, `f.state === 'locked' && document.querySelector('[data-testid=lock-presence]').hidden && f.others.length === 0`) {
			t.Errorf("the form without presence: %s", eval[string](t, e.tab, `JSON.stringify(`+presenceDiag+`)`))
		}
		eval[bool](t, e.tab, `(f.close(), true)`)
		e.noFrame(t, c, "unview")
	})

	// Grids never view: only forms on an entity get its presence.
	t.Run("GridDoesNotView", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		eval[bool](t, e.tab, `(window.g = client.lockGrid(document.getElementById('grid'), 'ApprovalRequest', 'data-uid'), true)`)
		c.reply(t, c.expect(t, "watch"), "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{}})
		e.noFrame(t, c, "view")
		// A stray presence frame breaks nothing.
		c.send(t, presence(viewer("u-ada", "Ada Lovelace", 0)))
		c.send(t, event("Acquired", lock("r-1", "u-ada", "Ada Lovelace", time.Minute), nil))
		waitFor(t, e.tab, "the grid live", `document.querySelector('tr[data-uid=r-1]').dataset.lockState === 'other'`, 5*time.Second, ``)
		if got := eval[[]string](t, e.tab, `errors`); len(got) != 0 {
			t.Errorf("errors reported: %v", got)
		}
	})
}
