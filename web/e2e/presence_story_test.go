package e2e

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// presenceGrace is the hub's release grace in TestPresenceStory: a closed tab leaves
// the lists after it.
const presenceGrace = 1500 * time.Millisecond

// presenceWithin is how long a change of the viewers may take to show on another page:
// the contract's 1 s (PROTOCOL.md §9) and the page's polling, with room for -race.
const presenceWithin = 3 * time.Second

// TestPresenceStory is issue 12 in Chromium: the real lockhub binary on a real
// redis-server, the demo page, three people on one request. Ada holds r-1001, Grace
// waits and asks her to finish, Edsger views; each sees the others, Ada is told who
// asks, Grace's second ask within 30 s is refused, Edsger leaves at once when he
// closes the form and after the release grace when he closes the tab; when Ada lets
// go and Grace edits, the roles turn; and a hub restart brings the lists back. Screenshots of the three windows go to the output
// directory, named presence-*.png.
func TestPresenceStory(t *testing.T) {
	t.Parallel() // alongside the other browser tests: they mostly wait
	bin := binary(t)
	rds := redistest.StartServer(t)
	hub := startHub(t, bin, rds.URL(), "--release-grace", presenceGrace.String())
	browser := startBrowser(t)
	t.Logf("hub on %s, redis on %s, screenshots in %s", hub.addr, rds.Addr(), outputDir(t))

	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	story := t
	pAda := openAs(t, story, browser, hub, ada)
	pGrace := openAs(t, story, browser, hub, grace)
	pEdsger := openAs(t, story, browser, hub, edsger)

	// lists waits until the page's form lists exactly these others, in this order.
	lists := func(t *testing.T, p *tab, lines ...string) time.Duration {
		t.Helper()
		return waitFor(t, p, fmt.Sprintf("the form lists %q", lines), othersAre(lines...)+` && (`+fmt.Sprint(len(lines))+` === 0 || !`+sel("lock-presence")+`.hidden)`,
			presenceWithin, demoPresenceDiag)
	}

	step("1_AdaHolds_NobodyElseListed", func(t *testing.T) {
		click(t, pAda, "open-r-1001")
		waitFor(t, pAda, "Ada holds r-1001", formState("held"), 5*time.Second, formDiag)
		waitFor(t, pAda, "Ada's view answered", `lockhubDemo.current.state === 'held' && `+sel("lock-presence")+`.hidden`, presenceWithin, demoPresenceDiag)
	})

	step("2_GraceWaits_EachSeesTheOther", func(t *testing.T) {
		click(t, pGrace, "open-r-1001")
		waitFor(t, pGrace, "Grace blocked by Ada", formState("locked"), 5*time.Second, formDiag)
		lists(t, pGrace, "Ada Lovelace is editing")
		d := lists(t, pAda, "Grace Hopper is waiting (1st)")
		t.Logf("Ada's form listed Grace %v after Grace's form was blocked", d.Round(time.Millisecond))
		if got := eval[string](t, pGrace, sel("lock-nudge")+`.textContent`); got != "Ask Ada Lovelace to finish" {
			t.Errorf("Grace's button says %q", got)
		}
		if !eval[bool](t, pGrace, `!`+sel("lock-nudge")+`.closest('[hidden]') && `+sel("lock-nudge")+`.getBoundingClientRect().height > 0`) {
			t.Error("Grace's ask button is not visible")
		}
		if !eval[bool](t, pAda, `!!`+sel("lock-nudge")+`.closest('[hidden]')`) {
			t.Error("Ada, the holder, is offered to ask herself")
		}
	})

	step("3_EdsgerViews_ThreeListsRight", func(t *testing.T) {
		click(t, pEdsger, "open-r-1001")
		waitFor(t, pEdsger, "Edsger blocked by Ada", formState("locked"), 5*time.Second, formDiag)
		// Ordered by since: who came first is listed first.
		lists(t, pEdsger, "Ada Lovelace is editing", "Grace Hopper is waiting (1st)")
		lists(t, pAda, "Grace Hopper is waiting (1st)", "Edsger Dijkstra is waiting (2nd)")
		lists(t, pGrace, "Ada Lovelace is editing", "Edsger Dijkstra is waiting (2nd)")
		for _, p := range []*tab{pAda, pGrace, pEdsger} {
			if n := eval[int](t, p, `document.querySelectorAll('[data-testid="lock-viewers"] li[data-oid="'+lockhubDemo.user.oid+'"]').length`); n != 0 {
				t.Errorf("%s's form lists %s", p.name, p.name)
			}
		}
		if !eval[bool](t, pAda, `lockhubDemo.current.others.map((o) => o.activity).join() === 'waiting,waiting'`) {
			t.Errorf("Ada's form.others: %s", eval[string](t, pAda, `JSON.stringify(lockhubDemo.current.others)`))
		}
		saveShot(t, "presence-01-ada-holds-grace-and-edsger-wait", pAda, pGrace, pEdsger)
	})

	var firstAsk string
	step("4_GraceAsks_AdaIsToldWho", func(t *testing.T) {
		start := time.Now()
		click(t, pGrace, "lock-nudge")
		waitFor(t, pGrace, "Grace told she asked", `/^Asked at \d\d:\d\d\.$/.test(`+sel("lock-nudge-status")+`.textContent)`, 5*time.Second, demoPresenceDiag)
		waitFor(t, pAda, "Ada's notice", `!`+sel("lock-nudged")+`.hidden`, presenceWithin, demoPresenceDiag)
		t.Logf("Ada's notice showed %v after Grace clicked", time.Since(start).Round(time.Millisecond))
		notice := eval[string](t, pAda, sel("lock-nudged-list")+`.textContent`)
		if !regexp.MustCompile(`^Grace Hopper asks you to finish \(\d\d:\d\d\)$`).MatchString(notice) {
			t.Errorf("Ada's notice %q", notice)
		}
		// Ada also still sees who is waiting.
		lists(t, pAda, "Grace Hopper is waiting (1st)", "Edsger Dijkstra is waiting (2nd)")
		// Only the holder is nudged.
		for _, p := range []*tab{pGrace, pEdsger} {
			if !eval[bool](t, p, sel("lock-nudged")+`.hidden && lockhubDemo.current.nudges.length === 0`) {
				t.Errorf("%s got Ada's nudge", p.name)
			}
		}
		firstAsk = eval[string](t, pAda, `lockhubDemo.current.nudges.map((n) => n.from.oid + '@' + n.at).join()`)
		saveShot(t, "presence-02-grace-asked-ada-told", pAda, pGrace, pEdsger)
	})

	step("5_GraceAsksAgainWithin30s_RateLimited", func(t *testing.T) {
		click(t, pGrace, "lock-nudge")
		waitFor(t, pGrace, "Grace told she asked recently", sel("lock-nudge-status")+`.textContent === 'You asked recently; try again in a little while.' && `+
			sel("lock-nudge-status")+`.dataset.outcome === 'rateLimited'`, 5*time.Second, demoPresenceDiag)
		// A second nudge would carry its own time. A frame to Ada after the refused ask
		// (the presence of Edsger leaving, below) shows that nothing reached her before it.
		click(t, pEdsger, "close-form")
		lists(t, pAda, "Grace Hopper is waiting (1st)")
		if got := eval[string](t, pAda, `lockhubDemo.current.nudges.map((n) => n.from.oid + '@' + n.at).join()`); got != firstAsk {
			t.Errorf("Ada's nudges after the refused ask: %s; want only the first, %s", got, firstAsk)
		}
		saveShot(t, "presence-03-grace-asked-again-rate-limited", pAda, pGrace)
	})

	step("6_EdsgerClosesTheForm_GoneAtOnce", func(t *testing.T) {
		// He closed it in the last step: unview, so gone without waiting for the grace.
		lists(t, pGrace, "Ada Lovelace is editing")
		lists(t, pAda, "Grace Hopper is waiting (1st)")
	})

	step("7_EdsgerClosesTheTab_GoneAfterTheGrace", func(t *testing.T) {
		click(t, pEdsger, "open-r-1001")
		lists(t, pAda, "Grace Hopper is waiting (1st)", "Edsger Dijkstra is waiting (2nd)")
		lists(t, pGrace, "Ada Lovelace is editing", "Edsger Dijkstra is waiting (2nd)")
		start := time.Now()
		pEdsger.close()
		waitFor(t, pAda, "Edsger gone from Ada's list", othersAre("Grace Hopper is waiting (1st)"), presenceGrace+presenceWithin, demoPresenceDiag)
		d := time.Since(start)
		t.Logf("Edsger left Ada's list %v after his tab closed (release grace %v)", d.Round(time.Millisecond), presenceGrace)
		if d < presenceGrace-200*time.Millisecond {
			t.Errorf("gone after %v, before the release grace of %v: a reload would flicker", d, presenceGrace)
		}
		lists(t, pGrace, "Ada Lovelace is editing")
	})

	step("8_AdaCloses_GraceTakesIt_AdaComesBackAndWaits", func(t *testing.T) {
		click(t, pAda, "close-form")
		waitFor(t, pGrace, "Grace holds it", formState("held"), 5*time.Second, formDiag)
		lists(t, pGrace)
		if !eval[bool](t, pGrace, sel("lock-presence")+`.hidden`) {
			t.Error("Grace, alone, sees a presence block")
		}
		// Ada's grid redraws the row on Grace's Acquired: her click waits for that, or it may
		// land on the row about to be replaced.
		waitFor(t, pAda, "Ada's grid shows Grace's lock", rowLockedBy("r-1001", "other", "Grace Hopper"), 5*time.Second, rowDiag("r-1001"))
		click(t, pAda, "open-r-1001")
		waitFor(t, pAda, "Ada blocked by Grace", formState("locked"), 5*time.Second, formDiag)
		lists(t, pAda, "Grace Hopper is editing")
		lists(t, pGrace, "Ada Lovelace is waiting (1st)")
		if !eval[bool](t, pAda, sel("lock-nudged")+`.hidden && `+sel("lock-nudge")+`.textContent === 'Ask Grace Hopper to finish'`) {
			t.Errorf("Ada's form after the roles turned: %s", eval[string](t, pAda, `JSON.stringify(`+demoPresenceDiag+`)`))
		}
	})

	step("9_HubRestarts_ListsComeBack", func(t *testing.T) {
		hub.kill(t)
		for _, p := range []*tab{pAda, pGrace} {
			waitFor(t, p, "reconnecting, nobody listed", sel("conn")+`.dataset.state === 'reconnecting' && `+sel("lock-viewers")+`.hidden`, 5*time.Second, demoPresenceDiag)
		}
		hub.start(t)
		for _, p := range []*tab{pAda, pGrace} {
			waitFor(t, p, "reconnected", sel("conn")+`.dataset.state === 'open'`, 20*time.Second, sel("conn")+`.textContent`)
		}
		// Only views made again on the new sockets bring presence back.
		waitFor(t, pGrace, "Grace holds it still", formState("held"), 5*time.Second, formDiag)
		lists(t, pGrace, "Ada Lovelace is waiting (1st)")
		lists(t, pAda, "Grace Hopper is editing")
		saveShot(t, "presence-04-hub-restarted-lists-back", pAda, pGrace)
	})
}

// demoPresenceDiag shows what the demo page's form shows and knows of presence.
const demoPresenceDiag = `({summary: lockhubDemo.current, others: ` + othersJS + `,
	presence: document.querySelector('[data-testid="lock-presence"]')?.outerHTML, conn: document.querySelector('[data-testid="conn"]').dataset.state})`
