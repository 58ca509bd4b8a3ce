package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/hub/auth"
)

// These tests run lockhub.js in real Chromium against a fake hub: a WebSocket server
// written here with coder/websocket that the test scripts frame by frame, so each
// rule of PROTOCOL.md §4 the client must follow can be seen on the wire. No browser
// API is mocked.

// frame is a decoded JSON frame.
type frame map[string]any

func (f frame) str(k string) string { s, _ := f[k].(string); return s }

// strictCSP is the Content-Security-Policy the fake hub serves every answer with:
// the least PROTOCOL.md §5 (Hardening) asks of the hub's HTML answers. No
// 'unsafe-inline': inline scripts, <style> elements and style attributes are refused.
const strictCSP = "default-src 'self'; frame-ancestors 'none'"

// fakeHub serves the harness page, web/static, the demo page (web/demo/static) with a
// stand-in for the demo's HTTP API, and a scripted /ws.
type fakeHub struct {
	srv   *httptest.Server
	conns chan *fakeConn

	mu      sync.Mutex
	all     []*fakeConn
	stallOn string // given to every new connection, see fakeConn.stallAfter
}

// fakeConn is one accepted socket. Its frames are read by the handler goroutine that
// accepted it, which returns when the socket closes.
type fakeConn struct {
	c      *websocket.Conn
	frames chan frame
	done   chan struct{} // closed when the reader stops
	stop   chan struct{} // closed by the test cleanup
	once   sync.Once

	mu      sync.Mutex
	stallOn string // after reading a frame of this type, read nothing more
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	h := &fakeHub{conns: make(chan *fakeConn, 16)}
	mux := http.NewServeMux()
	mux.Handle("/static/", http.StripPrefix("/static/", http.FileServer(http.Dir("../static"))))
	mux.HandleFunc("/harness.html", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, "testdata/harness.html")
	})
	mux.HandleFunc("/harness.js", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, "testdata/harness.js")
	})
	serveDemo(mux)
	mux.HandleFunc("/ws", h.serveWS)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", strictCSP)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		h.mu.Lock()
		all := h.all
		h.mu.Unlock()
		for _, c := range all {
			c.shut()
		}
		for _, c := range all {
			<-c.done
		}
		h.srv.Close()
	})
	return h
}

func (h *fakeHub) serveWS(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"lockhub.v1"}})
	if err != nil {
		return
	}
	fc := &fakeConn{c: c, frames: make(chan frame, 256), done: make(chan struct{}), stop: make(chan struct{})}
	defer close(fc.done)
	if c.Subprotocol() != "lockhub.v1" {
		_ = c.Close(4400, "the client must ask for lockhub.v1") // the test then sees no connection
		return
	}
	h.mu.Lock()
	h.all = append(h.all, fc)
	fc.stallOn = h.stallOn
	h.mu.Unlock()
	h.conns <- fc
	for {
		typ, b, err := c.Read(context.Background())
		if err != nil {
			return
		}
		f := frame{}
		if typ != websocket.MessageText || json.Unmarshal(b, &f) != nil {
			f = frame{"type": "<not a JSON text frame>", "raw": string(b)}
		}
		select {
		case fc.frames <- f:
		case <-fc.stop:
			return
		}
		if fc.stalls(f.str("type")) {
			// Read nothing more, not even a close frame, and answer nothing: a hub gone
			// half-open, whose TCP connection stays up. The cleanup's shut ends it.
			<-fc.stop
			return
		}
	}
}

// stallAfter makes the connection go silent once it has read a frame of type typ:
// from then on the fake hub reads and answers nothing, and keeps the socket open.
func (c *fakeConn) stallAfter(typ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stallOn = typ
}

func (c *fakeConn) stalls(typ string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stallOn != "" && c.stallOn == typ
}

// stallNewAfter makes every connection accepted from now on go silent once it has read
// a frame of type typ (see fakeConn.stallAfter).
func (h *fakeHub) stallNewAfter(typ string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stallOn = typ
}

// accept waits for the next connection.
func (h *fakeHub) accept(t *testing.T) *fakeConn {
	t.Helper()
	select {
	case c := <-h.conns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("fake hub: no connection within 5s")
		return nil
	}
}

func (c *fakeConn) shut() {
	c.once.Do(func() {
		close(c.stop)
		_ = c.c.CloseNow() // unblocks the reader
	})
}

// next returns the next frame the client sent.
func (c *fakeConn) next(t *testing.T, within time.Duration) frame {
	t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-c.done:
		// Frames read before the close come first.
		select {
		case f := <-c.frames:
			return f
		default:
		}
		t.Fatal("fake hub: the client closed the socket")
	case <-time.After(within):
		t.Fatalf("fake hub: no frame within %v", within)
	}
	return nil
}

// expect returns the next frame, which must have type typ.
func (c *fakeConn) expect(t *testing.T, typ string) frame {
	t.Helper()
	f := c.next(t, 5*time.Second)
	if f.str("type") != typ {
		t.Fatalf("fake hub: got frame %v, want type %q", f, typ)
	}
	return f
}

// expectAnsweringPings is expect, answering with a pong each ping that comes first.
func (c *fakeConn) expectAnsweringPings(t *testing.T, typ string) frame {
	t.Helper()
	for {
		f := c.next(t, 5*time.Second)
		if f.str("type") == "ping" && typ != "ping" {
			c.reply(t, f, "pong", map[string]any{"serverTime": stamp(time.Now())})
			continue
		}
		if f.str("type") != typ {
			t.Fatalf("fake hub: got frame %v, want type %q", f, typ)
		}
		return f
	}
}

// until returns the first frame for which stop is true, and the frames before it.
func (c *fakeConn) until(t *testing.T, what string, stop func(frame) bool, within time.Duration) (frame, []frame) {
	t.Helper()
	deadline := time.Now().Add(within)
	var before []frame
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("fake hub: no %s within %v; before it came %v", what, within, before)
		}
		f := c.next(t, left)
		if stop(f) {
			return f, before
		}
		before = append(before, f)
	}
}

// waitFrame returns the first frame of type typ, skipping others (renewals, say).
func (c *fakeConn) waitFrame(t *testing.T, typ string, within time.Duration) frame {
	t.Helper()
	f, _ := c.until(t, fmt.Sprintf("%q frame", typ), func(f frame) bool { return f.str("type") == typ }, within)
	return f
}

func (c *fakeConn) send(t *testing.T, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatalf("fake hub: write: %v", err)
	}
}

// reply answers request req with a frame of type typ and the given members.
func (c *fakeConn) reply(t *testing.T, req frame, typ string, members map[string]any) {
	t.Helper()
	out := map[string]any{"id": req["id"], "type": typ}
	for k, v := range members {
		out[k] = v
	}
	c.send(t, out)
}

type welcomeOpts struct {
	oid, name   string
	renewMs     int
	canTakeOver bool
}

// handshake reads the auth frame and answers with a welcome; it returns the auth frame.
func (c *fakeConn) handshake(t *testing.T, w welcomeOpts) frame {
	t.Helper()
	auth := c.expect(t, "auth")
	if _, ok := auth["id"]; ok {
		t.Fatalf("the first auth frame has an id: %v", auth)
	}
	if auth.str("token") == "" {
		t.Fatalf("the auth frame has no token: %v", auth)
	}
	c.welcome(t, w)
	return auth
}

// welcome sends the welcome of an auth frame already read.
func (c *fakeConn) welcome(t *testing.T, w welcomeOpts) {
	t.Helper()
	if w.oid == "" {
		w.oid, w.name = "u-me", "Me Myself"
	}
	if w.renewMs == 0 {
		w.renewMs = 120000
	}
	c.send(t, map[string]any{
		"type": "welcome", "connectionId": "c1", "tenant": "acme",
		"holder":  map[string]any{"oid": w.oid, "name": w.name},
		"leaseMs": 300000, "renewMs": w.renewMs, "serverTime": stamp(time.Now()),
		"lockable": []string{"ApprovalRequest"}, "canTakeOver": w.canTakeOver,
	})
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// lock is a lock record held by oid, acquired a minute ago, expiring after d.
func lock(uid, oid, name string, d time.Duration) map[string]any {
	now := time.Now()
	return map[string]any{
		"entityType": "ApprovalRequest", "entityUid": uid, "holderOid": oid, "holderName": name,
		"acquiredAtUtc": stamp(now.Add(-time.Minute)), "expiresAtUtc": stamp(now.Add(d)),
	}
}

func event(op string, l map[string]any, prev map[string]any) map[string]any {
	ev := map[string]any{"type": "lock", "op": op, "lock": l, "at": stamp(time.Now())}
	if prev != nil {
		ev["previousHolder"] = prev
	}
	return ev
}

// wantWholeAgain checks what a client does on the socket c that replaced a dropped
// one, holding r-1 and watching ApprovalRequest as window.w: it authenticates with a
// fresh token, watches and claims again, and is whole once answered.
func wantWholeAgain(t *testing.T, e *clientEnv, c *fakeConn) {
	t.Helper()
	auth := c.handshake(t, welcomeOpts{})
	if got := eval[[]string](t, e.tab, `tokens`); len(got) != 2 || auth.str("token") != got[1] {
		t.Errorf("reconnect authenticated with %q; tokens fetched %v (want a fresh one)", auth.str("token"), got)
	}
	seen := map[string]bool{}
	for range 2 {
		f := c.next(t, 5*time.Second)
		seen[f.str("type")] = true
		switch f.str("type") {
		case "watch":
			c.reply(t, f, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{lock("r-1", "u-me", "Me Myself", 5*time.Minute)}})
		case "claim":
			if f.str("entityUid") != "r-1" {
				t.Fatalf("re-claim of %v", f)
			}
			c.reply(t, f, "result", map[string]any{"outcome": "renewed", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
		default:
			t.Fatalf("unexpected frame after reconnect %v", f)
		}
	}
	if !seen["watch"] || !seen["claim"] {
		t.Fatalf("after reconnect got %v, want watch and claim", seen)
	}
	waitFor(t, e.tab, "whole again", `client.state.state === 'open' && w.locks.has('r-1') && client.held().length === 1`, 5*time.Second, `[client.state, [...w.locks.keys()]]`)
}

// clientEnv is one subtest's fake hub and harness tab.
type clientEnv struct {
	hub *fakeHub
	tab *tab

	barriers int // the barriers made so far, which numbers the next one's pings
}

// barrier makes a round trip on c, the client's socket, and returns every frame the
// client sent before its end. Whatever the client sends at once about something the
// page did, or about a frame the fake hub sent, before the barrier is among them: a
// frame's absence from them is exact, where waiting a while for it would pass a frame
// sent just after the while.
//
// The round trip (window.barrier in testdata/harness.js): the page sends a ping, the
// fake hub answers it, and the page, once it has the answer, sends a second ping,
// which ends the barrier. Frames keep their order on a socket, both ways, and the page
// handles each frame of the hub, with the promise callbacks it sets off, before the
// next. So the answer to the first ping is handled after every frame the fake hub sent
// before it, and whatever the client sent about those went out before the second
// ping; what the page did before the barrier went out before the first.
//
// Frames the client sends on its own timers (renewals, reconnects) are not covered:
// the tests that rule those out wait for a sign that the time has come, each saying
// which.
func (e *clientEnv) barrier(t *testing.T, c *fakeConn) []frame {
	t.Helper()
	e.barriers++
	eval[bool](t, e.tab, fmt.Sprintf(`barrier(%d)`, e.barriers))
	var before []frame
	for part := 1; part <= 2; part++ {
		mark := fmt.Sprintf("%d.%d", e.barriers, part)
		ping, sent := c.until(t, "barrier ping "+mark, func(f frame) bool {
			return f.str("type") == "ping" && f.str("barrier") == mark
		}, 5*time.Second)
		before = append(before, sent...)
		c.reply(t, ping, "pong", map[string]any{"serverTime": stamp(time.Now())})
	}
	return before
}

// noFrame asserts, after a barrier, that the client sent no frame of type typ.
func (e *clientEnv) noFrame(t *testing.T, c *fakeConn, typ string) {
	t.Helper()
	for _, f := range e.barrier(t, c) {
		if f.str("type") == typ {
			t.Fatalf("fake hub: unexpected frame %v", f)
		}
	}
}

// newClientEnv opens the harness page on a fake hub. Whatever the subtest does, the
// client must not break the page's Content-Security-Policy (checked when t ends).
func newClientEnv(t *testing.T, browser context.Context) *clientEnv {
	t.Helper()
	h := newFakeHub(t)
	tb := newTab(t, browser, "harness", h.srv.URL+"/harness.html")
	t.Cleanup(func() { noConsole(t, tb, "a CSP violation", isCSPViolation) })
	waitFor(t, tb, "the harness", `window.harnessReady === true`, 5*time.Second, `document.title`)
	return &clientEnv{hub: h, tab: tb}
}

// start connects the client and completes the handshake.
func (e *clientEnv) start(t *testing.T, opts string, w welcomeOpts) *fakeConn {
	t.Helper()
	eval[bool](t, e.tab, fmt.Sprintf(`start(%s)`, opts))
	c := e.hub.accept(t)
	c.handshake(t, w)
	waitFor(t, e.tab, "state open", `window.client.state.state === 'open'`, 5*time.Second, `window.states`)
	return c
}

// openFormR1 opens a lockForm on ApprovalRequest r-1 over the harness's form, as
// window.f.
const openFormR1 = `(window.f = client.lockForm(document.getElementById('form'), 'ApprovalRequest', 'r-1'), true)`

// holdR1 has the client claim ApprovalRequest r-1, answers acquired, and waits until
// the client holds it.
func (e *clientEnv) holdR1(t *testing.T, c *fakeConn) {
	t.Helper()
	eval[bool](t, e.tab, `(client.claim('ApprovalRequest', 'r-1'), true)`)
	c.expect(t, "watch") // a held lock's type is watched, for its events
	req := c.expect(t, "claim")
	c.reply(t, req, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
	waitFor(t, e.tab, "held", `client.held().length === 1`, 5*time.Second, ``)
}

// untilRenewalOfR2 claims r-2, holds it, and returns what the client sent until it
// renewed it, which it does at the first tick of its timer past renewMs. A renewal
// is a timer's, which no barrier covers: r-2's is the sign that the time of any lock
// held from before has come too, and a renewal of such a lock would have gone out at
// that tick or an earlier one, ahead of r-2's (a tick renews locks in the order they
// were first wanted).
func untilRenewalOfR2(t *testing.T, e *clientEnv, c *fakeConn) []frame {
	t.Helper()
	eval[bool](t, e.tab, `(client.claim('ApprovalRequest', 'r-2'), true)`)
	ofR2 := func(typ string) func(frame) bool {
		return func(f frame) bool { return f.str("type") == typ && f.str("entityUid") == "r-2" }
	}
	claim, before := c.until(t, "claim of r-2", ofR2("claim"), 5*time.Second)
	c.reply(t, claim, "result", map[string]any{"outcome": "acquired", "lock": lock("r-2", "u-me", "Me Myself", 5*time.Minute)})
	renew, after := c.until(t, "renewal of r-2", ofR2("renew"), 5*time.Second)
	c.reply(t, renew, "result", map[string]any{"outcome": "renewed", "lock": lock("r-2", "u-me", "Me Myself", 5*time.Minute)})
	return append(before, after...)
}

// TestClient checks lockhub.js against PROTOCOL.md §3 and §4 in real Chromium.
//
// The subtests run in parallel, each with its own fake hub and its own tab in a
// browser context of one shared Chromium.
func TestClient(t *testing.T) {
	t.Parallel() // alongside TestStory: both mostly wait on a browser
	browser := startBrowser(t)

	t.Run("PureHelpers", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		checks := map[string]string{
			"backoff never reaches its cap": `lh.backoffDelay(0, 500, 30000, () => 0.9999) === 499`,
			"backoff doubles":               `lh.backoffDelay(3, 500, 30000, () => 0.9999) === 3999`,
			"backoff is capped":             `lh.backoffDelay(20, 500, 30000, () => 0.9999) === 29997`,
			"full jitter starts at zero":    `lh.backoffDelay(5, 500, 30000, () => 0) === 0`,
			"jitter spreads": `(() => { const s = new Set(); for (let i = 0; i < 50; i++) s.add(lh.backoffDelay(4)); return s.size > 10 &&
				[...s].every((d) => d >= 0 && d < 8000); })()`,
			"jwt exp is read":          `lh.jwtExpiry(makeToken(2000000000, 1)) === 2000000000 * 1000`,
			"jwt without exp":          `lh.jwtExpiry(makeToken(undefined, 1)) === null`,
			"not a jwt":                `lh.jwtExpiry('garbage') === null && lh.jwtExpiry('a.%%%.b') === null`,
			"base64url in jwt":         `lh.jwtExpiry('x.' + btoa(JSON.stringify({exp: 1, s: '?>?>~~~'})).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '') + '.y') === 1000`,
			".NET times, 7 digits":     `lh.parseTime('2026-12-02T09:15:00.1234567Z') === Date.UTC(2026, 11, 2, 9, 15, 0, 123)`,
			"times without fraction":   `lh.parseTime('2026-12-02T09:15:00Z') === Date.UTC(2026, 11, 2, 9, 15, 0, 0)`,
			"times with an offset":     `lh.parseTime('2026-12-02T10:15:00.5+01:00') === Date.UTC(2026, 11, 2, 9, 15, 0, 500)`,
			"not a time":               `Number.isNaN(lh.parseTime('yesterday'))`,
			"clock is HH:MM":           `/^\d\d:\d\d$/.test(lh.formatClock('2026-12-02T09:15:00.000Z'))`,
			"remaining time":           `lh.formatRemaining(65000) === '1:05' && lh.formatRemaining(-5) === '0:00' && lh.formatRemaining(3723000) === '1:02:03'`,
			"banner text of the issue": `/^Locked by Ada Lovelace since \d\d:\d\d \(until \d\d:\d\d\)$/.test(lh.lockedByText({holderName: 'Ada Lovelace', acquiredAtUtc: '2026-12-02T09:15:00.123Z', expiresAtUtc: '2026-12-02T09:20:00.123Z'}))`,
			// PROTOCOL.md §6 version 3: a name the .NET service wrote is shown cleaned.
			"banner of a filler-only name shows the oid": `/^Locked by u-ada since /.test(lh.lockedByText({holderName: '\u3164\u3164', holderOid: 'u-ada', acquiredAtUtc: '2026-12-02T09:15:00.123Z', expiresAtUtc: '2026-12-02T09:20:00.123Z'}))`,
			"a name that is not a string is the oid":     `lh.holderNameOf({holderName: 7, holderOid: 'u-ada'}) === 'u-ada'`,
		}
		// The browser cleans names exactly as the hub does (hub/auth CleanName).
		for i, in := range []string{"Ada Lovelace", "Ada\u202Eecalevol", "\u2066Ada\u2069\u200F", "Ada\x00\r\nLovelace\t",
			"Ada\u2028Love\u2029lace", "\u3164\u115F\u1160\uFFA0", "A\u3164da", " \u00A0\u3000Ada Lovelace\u2003 ",
			"\u202E Ada \u2028", "Ada  Lovelace", strings.Repeat(" ", 3) + strings.Repeat("é", 300), strings.Repeat("x", 199) + " y",
			strings.Repeat("\U0001F600", 201), "Ада Лавлейс 愛達", "\uFEFFAda\u0085"} {
			arg, _ := json.Marshal(in)
			want, _ := json.Marshal(auth.CleanName(in))
			checks[fmt.Sprintf("name %d cleaned as the hub cleans it", i)] = fmt.Sprintf("lh.cleanName(%s) === %s", arg, want)
		}
		checkAll(t, e.tab, checks, "")
	})

	t.Run("AuthFirstThenRequestsQueuedUntilWelcome", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		// A claim made before the socket is up waits for the welcome.
		eval[bool](t, e.tab, `start({}) && (window.p = client.claim('ApprovalRequest', 'r-1').then((r) => window.res = r), true)`)
		c := e.hub.accept(t)
		c.handshake(t, welcomeOpts{})
		// The type of a held lock is watched first (for its events), then the claim goes.
		c.expect(t, "watch")
		req := c.expect(t, "claim")
		if req.str("entityType") != "ApprovalRequest" || req.str("entityUid") != "r-1" || req.str("id") == "" {
			t.Fatalf("claim frame %v", req)
		}
		c.reply(t, req, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
		waitFor(t, e.tab, "the claim result", `window.res && window.res.outcome === 'acquired'`, 5*time.Second, `window.res`)
		if got := eval[[]string](t, e.tab, `states`); strings.Join(got, ",") != "connecting,open" {
			t.Errorf("states %v, want connecting,open", got)
		}
		if !eval[bool](t, e.tab, `client.held().length === 1 && client.me.oid === 'u-me'`) {
			t.Error("the lock is not held")
		}
	})

	// A page's watches go right behind its auth, before any welcome, on its first
	// socket and on the one after a 1001: a reconnect crowd's snapshots cost the hub no
	// round trip of their own, and it answers them with the welcome in one write.
	t.Run("WatchesGoWithTheAuth", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		// No spread of the reconnect after 1001: Math.random is stubbed to 0.
		eval[bool](t, e.tab, `start({}) && (Math.random = () => 0, window.w = client.watch('ApprovalRequest'), true)`)
		for i := range 2 {
			c := e.hub.accept(t)
			c.expect(t, "auth")
			req := c.expect(t, "watch") // no welcome was sent
			if req.str("entityType") != "ApprovalRequest" || req.str("id") == "" {
				t.Fatalf("socket %d: watch frame %v", i, req)
			}
			c.welcome(t, welcomeOpts{})
			uid := fmt.Sprintf("r-%d", i+1)
			c.reply(t, req, "snapshot", map[string]any{"entityType": "ApprovalRequest",
				"locks": []any{lock(uid, "u-grace", "Grace Hopper", 5*time.Minute)}})
			waitFor(t, e.tab, "the snapshot applied",
				fmt.Sprintf(`w.locks.size === 1 && w.get(%q) !== undefined && client.state.state === 'open'`, uid),
				5*time.Second, `JSON.stringify([...w.locks.keys()])`)
			if i == 0 {
				_ = c.c.Close(websocket.StatusGoingAway, "shutting down") // the next socket is the check
			}
		}
	})

	t.Run("RequestKeepsItsOwnID", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		// An id in the caller's frame would never match the answer: the client's wins.
		eval[bool](t, e.tab, `(client.request({ id: '', type: 'mine' }).then((r) => window.res = r), true)`)
		req := c.expect(t, "mine")
		if req.str("id") == "" {
			t.Fatalf("the caller's empty id went out: %v", req)
		}
		c.reply(t, req, "result", map[string]any{"locks": []any{}})
		waitFor(t, e.tab, "the answer", `window.res !== undefined`, 5*time.Second, `window.res`)
	})

	t.Run("ErrorFrameRejects", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		eval[bool](t, e.tab, `(client.claim('Nope', 'r-1').catch((err) => window.err = err), true)`)
		req := c.waitFrame(t, "claim", 5*time.Second)
		c.reply(t, req, "error", map[string]any{"code": "not_lockable", "message": "not lockable; lockable: ApprovalRequest"})
		waitFor(t, e.tab, "the rejection", `window.err && window.err.code === 'not_lockable' && window.err instanceof lh.LockhubError`, 5*time.Second, `String(window.err)`)
	})

	t.Run("TokenRefreshedInBand", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		// The token expires in 31 s: the client refreshes 30 s before, so in about 1 s.
		c := e.start(t, `{expIn: 31}`, welcomeOpts{})
		f := c.waitFrame(t, "auth", 5*time.Second)
		if f.str("id") == "" {
			t.Fatalf("the refresh auth frame has no id: %v", f)
		}
		if got := eval[[]string](t, e.tab, `tokens`); len(got) != 2 || f.str("token") != got[1] {
			t.Fatalf("refresh sent token %q; tokens fetched %v", f.str("token"), got)
		}
		c.reply(t, f, "result", map[string]any{"outcome": "refreshed"})
		// The barrier's pings come on the same socket, after the client has read the
		// answer: it kept the socket.
		e.barrier(t, c)
		if eval[int](t, e.tab, `states.filter((s) => s !== 'open').length`) != 1 {
			t.Errorf("the refresh reconnected: states %v", eval[[]string](t, e.tab, `states`))
		}
	})

	t.Run("ReconnectReauthRewatchReclaim", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		eval[bool](t, e.tab, `(window.w = client.watch('ApprovalRequest', (m, ch) => changes.push(ch.op)), client.claim('ApprovalRequest', 'r-1'), true)`)
		for range 2 {
			f := c.next(t, 5*time.Second)
			switch f.str("type") {
			case "watch":
				c.reply(t, f, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{}})
			case "claim":
				c.reply(t, f, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
			default:
				t.Fatalf("unexpected frame %v", f)
			}
		}
		waitFor(t, e.tab, "held", `client.held().length === 1`, 5*time.Second, `client.state`)
		// The hub dies without a close frame.
		c.shut()
		c2 := e.hub.accept(t)
		wantWholeAgain(t, e, c2)
		if got := strings.Join(eval[[]string](t, e.tab, `states`), ","); !strings.Contains(got, "open,reconnecting") || !strings.HasSuffix(got, "open") {
			t.Errorf("states %s", got)
		}
	})

	// A hub going away (1001) sends all its clients elsewhere at once: the first
	// reconnect of each is spread uniformly over goingAwaySpreadMs (default 2 s), later
	// ones and other closes back off as before. Math.random is stubbed in the page, so
	// each delay is known exactly and the test cannot flake on a draw.
	t.Run("FirstReconnectAfter1001IsSpread", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		lastClose := func(code int) float64 {
			t.Helper()
			expr := fmt.Sprintf(`(stateLog.filter((s) => s.state === 'reconnecting' && s.code === %d).at(-1) ?? {}).retryInMs ?? -1`, code)
			waitFor(t, e.tab, "reconnecting", expr+` >= 0`, 5*time.Second, `JSON.stringify(stateLog)`)
			return eval[float64](t, e.tab, expr)
		}
		for i, r := range []float64{0.75, 0.9999} {
			eval[bool](t, e.tab, fmt.Sprintf(`(Math.random = () => %v, stateLog.length = 0, true)`, r))
			closed := time.Now()
			_ = c.c.Close(websocket.StatusGoingAway, "shutting down") // the delay below is the check
			want := float64(int(2000 * r))
			if got := lastClose(1001); got != want {
				t.Fatalf("close %d: first reconnect after 1001 in %v ms, want %v (2000 × %v)", i, got, want, r)
			}
			// The spread is waited for: the harness's backoff alone would be under 50 ms.
			// The reconnect itself is the sign that its timer fired: it must not come
			// before the delay drawn, counted from before the close.
			c = e.hub.accept(t)
			if d := time.Since(closed); d < time.Duration(want)*time.Millisecond {
				t.Errorf("close %d: reconnected after %v, before the %v ms drawn", i, d, want)
			}
			c.handshake(t, welcomeOpts{})
			waitFor(t, e.tab, "open again", `client.state.state === 'open'`, 5*time.Second, `JSON.stringify(stateLog)`)
		}
		// A close that is not 1001 keeps the backoff: base 50 ms in the harness.
		c.shut()
		if got := lastClose(1006); got != 49 {
			t.Fatalf("reconnect after 1006 in %v ms, want 49 (50 × 0.9999)", got)
		}
		c = e.hub.accept(t)
		// A failed first reconnect after 1001 backs off from there, not spread again.
		c.handshake(t, welcomeOpts{})
		waitFor(t, e.tab, "open again", `client.state.state === 'open'`, 5*time.Second, `JSON.stringify(stateLog)`)
		eval[bool](t, e.tab, `(Math.random = () => 0.5, stateLog.length = 0, true)`)
		_ = c.c.Close(websocket.StatusGoingAway, "shutting down") // the delays below are the check
		if got := lastClose(1001); got != 1000 {
			t.Fatalf("first reconnect after 1001 in %v ms, want 1000", got)
		}
		c = e.hub.accept(t)
		c.shut() // before any welcome
		if got := lastClose(1006); got != 50 {
			t.Fatalf("second attempt after 1001 in %v ms, want 50 (backoff attempt 1: 100 × 0.5)", got)
		}
		c = e.hub.accept(t)
		c.handshake(t, welcomeOpts{})
		waitFor(t, e.tab, "open again", `client.state.state === 'open'`, 5*time.Second, `JSON.stringify(stateLog)`)
	})

	t.Run("NoReconnectAfter4403", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		_ = c.c.Close(4403, "identity changed") // the reason is checked by the client's state below
		waitFor(t, e.tab, "forbidden", `client.state.state === 'forbidden'`, 5*time.Second, `states`)
		// A reconnect that never comes is a timer that never fires, which no wait can
		// show. What shows it: the client is closed for good, and a closed client opens
		// no socket. It said forbidden last, with no reconnecting (which a scheduled
		// reconnect announces at once), and it refuses a request at once rather than
		// queue it for a next socket: a closed client's request is already rejected, so
		// its catch runs in the microtask before the one that reads the outcome.
		if got := strings.Join(eval[[]string](t, e.tab, `states`), ","); got != "connecting,open,forbidden" {
			t.Errorf("states %s, want connecting,open,forbidden", got)
		}
		got := eval[string](t, e.tab, `(() => {
			let got = 'queued for a next socket';
			client.request({ type: 'ping' }).catch((err) => { got = err.code; });
			return Promise.resolve().then(() => got);
		})()`)
		if got != "closed" {
			t.Errorf("a request after the 4403: %s, want refused as closed", got)
		}
		select {
		case <-e.hub.conns:
			t.Error("the client reconnected after 4403")
		default:
		}
	})

	t.Run("ReconnectsAfter4401WithNewToken", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		_ = c.c.Close(4401, "token expired") // the reconnect below is the check
		c2 := e.hub.accept(t)
		auth := c2.handshake(t, welcomeOpts{})
		if got := eval[[]string](t, e.tab, `tokens`); len(got) != 2 || got[1] != auth.str("token") {
			t.Errorf("tokens %v; reconnect used %q", got, auth.str("token"))
		}
		// getToken is told that the last token was refused, so it fetches a new one,
		// and the client came back at once: the hub is there, only the token was bad.
		if !eval[bool](t, e.tab, `whys.length === 2 && whys[0].rejected === false && whys[1].rejected === true && whys[1].reason === 'connect'`) {
			t.Errorf("getToken was asked %s", eval[string](t, e.tab, `JSON.stringify(whys)`))
		}
		if !eval[bool](t, e.tab, `stateLog.some((s) => s.state === 'reconnecting' && s.retryInMs === 0 && s.code === 4401)`) {
			t.Errorf("no immediate retry after 4401: %s", eval[string](t, e.tab, `JSON.stringify(stateLog)`))
		}
		// Expired later: at once again. But a fresh token refused too: back off.
		_ = c2.c.Close(4401, "token expired") // the reconnect below is the check
		c3 := e.hub.accept(t)
		c3.expect(t, "auth")
		_ = c3.c.Close(4401, "still not") // the backoff below is the check
		c4 := e.hub.accept(t)
		c4.expect(t, "auth")
		// The closes, in order: two expiries retried at once without counting an attempt,
		// then a refused fresh token that counts one and waits a jittered delay. Full
		// jitter may draw 0 ms, so the backoff shows in the counted attempt, not the delay.
		if !eval[bool](t, e.tab, `(() => {
			const closes = stateLog.filter((s) => s.state === 'reconnecting' && s.code === 4401);
			return closes.length === 3 &&
				closes.slice(0, 2).every((s) => s.attempt === 0 && s.retryInMs === 0) &&
				closes[2].attempt === 1 && closes[2].retryInMs >= 0 && closes[2].retryInMs < 50;
		})()`) {
			t.Errorf("no backoff after a fresh token was refused: %s", eval[string](t, e.tab, `JSON.stringify(stateLog)`))
		}
	})

	// PROTOCOL.md §4, Heartbeat, with the intervals cut from 25 s and 10 s.
	const idlePing, pongTimeout = 300 * time.Millisecond, 300 * time.Millisecond
	heartbeatOpts := fmt.Sprintf(`{idlePingMs: %d, pongTimeoutMs: %d}`, idlePing.Milliseconds(), pongTimeout.Milliseconds())

	t.Run("HeartbeatPingsAQuietHubAndStays", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		quiet := time.Now() // before the welcome, the last frame the hub sends unasked
		c := e.start(t, heartbeatOpts, welcomeOpts{})
		// Any frame is an answer: a pong, and the bad_request of a hub that does not
		// know ping yet.
		for i, answer := range []string{"pong", "error", "pong", "pong"} {
			p := c.expect(t, "ping") // nothing else goes out on a quiet socket
			if d := time.Since(quiet); d < idlePing {
				t.Errorf("ping %d after %v of quiet; idlePingMs is %v", i, d, idlePing)
			}
			if p.str("id") == "" {
				t.Fatalf("ping without an id: %v", p)
			}
			quiet = time.Now()
			switch answer {
			case "pong":
				c.reply(t, p, "pong", map[string]any{"serverTime": stamp(time.Now())})
			case "error":
				c.reply(t, p, "error", map[string]any{"code": "bad_request", "message": `unknown frame type "ping"`})
			}
		}
		// The client gave nothing up: the socket reader would have seen its close frame.
		c.expect(t, "ping")
		select {
		case <-e.hub.conns:
			t.Fatal("the client reconnected to a hub that answers")
		default:
		}
		if got := strings.Join(eval[[]string](t, e.tab, `states`), ","); got != "connecting,open" {
			t.Errorf("states %s, want connecting,open", got)
		}
		if got := eval[[]string](t, e.tab, `errors`); len(got) != 0 {
			t.Errorf("the answers to ping were reported as errors: %v", got)
		}
	})

	t.Run("HeartbeatFindsAHubThatStoppedAnswering", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, heartbeatOpts, welcomeOpts{})
		eval[bool](t, e.tab, `(window.w = client.watch('ApprovalRequest'), client.claim('ApprovalRequest', 'r-1'), true)`)
		// On a busy machine the page may take longer than idlePing to run that, and the
		// client pings the quiet hub first: answered, as a live hub would.
		watch := c.expectAnsweringPings(t, "watch")
		claim := c.expectAnsweringPings(t, "claim")
		// The hub reads the ping and then nothing more; the TCP connection stays up.
		c.stallAfter("ping")
		c.reply(t, watch, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{}})
		quiet := time.Now()
		c.reply(t, claim, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
		waitFor(t, e.tab, "held", `client.held().length === 1`, 5*time.Second, `client.state`)
		c.waitFrame(t, "ping", idlePing+5*time.Second)
		c2 := e.hub.accept(t)
		took := time.Since(quiet)
		t.Logf("a hub that stopped answering was given up and reconnected to after %v of silence", took.Round(time.Millisecond))
		if took < idlePing+pongTimeout {
			t.Errorf("reconnected after %v of silence; the ping is due after %v and its answer %v later", took, idlePing, pongTimeout)
		}
		if limit := idlePing + pongTimeout + 2*time.Second; took > limit {
			t.Errorf("reconnected after %v of silence, want about %v (at most %v)", took, idlePing+pongTimeout, limit)
		}
		// As after any drop: authenticate, watch and claim again on the new socket.
		wantWholeAgain(t, e, c2)
		if !eval[bool](t, e.tab, `stateLog.some((s) => s.state === 'reconnecting' && s.code === lh.CloseCode.NO_ANSWER && s.code === 4000)`) {
			t.Errorf("no reconnect with code 4000: %s", eval[string](t, e.tab, `JSON.stringify(stateLog)`))
		}
	})

	t.Run("HeartbeatGivesUpAHubThatNeverWelcomes", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		e.hub.stallNewAfter("auth")
		before := time.Now() // before the auth frame goes out
		eval[bool](t, e.tab, fmt.Sprintf(`start(%s)`, heartbeatOpts))
		c := e.hub.accept(t)
		c.expect(t, "auth")
		c2 := e.hub.accept(t)
		took := time.Since(before)
		if took < pongTimeout {
			t.Errorf("gave the socket up %v after starting; pongTimeoutMs is %v", took, pongTimeout)
		}
		if limit := pongTimeout + 2*time.Second; took > limit {
			t.Errorf("waited %v for a welcome, want about %v (at most %v)", took, pongTimeout, limit)
		}
		c2.expect(t, "auth")
		if !eval[bool](t, e.tab, `client.welcome === null && stateLog.some((s) => s.state === 'reconnecting' && s.code === 4000)`) {
			t.Errorf("states %s", eval[string](t, e.tab, `JSON.stringify(stateLog)`))
		}
	})

	t.Run("WatchSnapshotEventsLocalExpiry", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		eval[bool](t, e.tab, `(window.w = client.watch('ApprovalRequest', (m, ch) => changes.push(ch.op + ':' + (ch.lock ? ch.lock.entityUid : '') + (ch.local ? ':local' : ''))), true)`)
		req := c.expect(t, "watch")
		c.reply(t, req, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{
			lock("r-1", "u-ada", "Ada Lovelace", time.Minute),
			lock("r-2", "u-grace", "Grace Hopper", 1200*time.Millisecond),
			lock("r-9", "u-old", "Already Gone", -time.Second),
		}})
		waitFor(t, e.tab, "the snapshot", `w.locks.size === 2 && w.locks.has('r-1') && w.locks.has('r-2')`, 5*time.Second, `[...w.locks.keys()]`)
		c.send(t, event("Acquired", lock("r-3", "u-ada", "Ada Lovelace", time.Minute), nil))
		c.send(t, event("Released", lock("r-1", "u-ada", "Ada Lovelace", time.Minute), nil))
		waitFor(t, e.tab, "the events", `w.locks.has('r-3') && !w.locks.has('r-1')`, 5*time.Second, `[...w.locks.keys()]`)
		// r-2's lease ends and the hub says nothing: the client hides it itself.
		waitFor(t, e.tab, "local expiry", `!w.locks.has('r-2') && changes.includes('Expired:r-2:local')`, 5*time.Second, `changes`)
		// An unsolicited snapshot (the hub resynced after losing Redis) replaces the map.
		c.send(t, map[string]any{"type": "snapshot", "entityType": "ApprovalRequest", "locks": []any{lock("r-4", "u-ada", "Ada Lovelace", time.Minute)}})
		waitFor(t, e.tab, "the resync", `w.locks.size === 1 && w.locks.has('r-4')`, 5*time.Second, `[...w.locks.keys()]`)
		eval[bool](t, e.tab, `(w.close(), true)`)
		c.expect(t, "unwatch")
	})

	t.Run("RenewsEveryRenewMs", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{renewMs: 600})
		eval[bool](t, e.tab, `(client.claim('ApprovalRequest', 'r-1'), true)`)
		c.expect(t, "watch") // a held lock's type is watched, for its events
		req := c.expect(t, "claim")
		at := time.Now()
		c.reply(t, req, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
		for i := range 2 {
			r := c.waitFrame(t, "renew", 3*time.Second)
			if d := time.Since(at); d < 500*time.Millisecond {
				t.Errorf("renewal %d after %v; renewMs is 600", i, d)
			}
			at = time.Now()
			c.reply(t, r, "result", map[string]any{"outcome": "renewed", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
		}
	})

	// A held lock, and the frame about it the client must send, at once, when
	// something happens: nothing of the kind before.
	for _, tc := range []struct {
		name    string
		want    string // the type of the frame about r-1
		trigger func(t *testing.T, e *clientEnv, c *fakeConn)
	}{
		{"RenewsAtOnceWhenLeaseEndsSooner", "renew", func(t *testing.T, e *clientEnv, c *fakeConn) {
			// Another tab of mine closed: the hub cut the lease to its release grace,
			// long before the next renewal (renewMs 120000).
			c.send(t, event("Renewed", lock("r-1", "u-me", "Me Myself", 10*time.Second), nil))
		}},
		{"HeldLockMissingFromSnapshotIsClaimedAgain", "claim", func(t *testing.T, e *clientEnv, c *fakeConn) {
			// The hub lost Redis and got it back empty: its unsolicited snapshot lacks ours.
			c.send(t, map[string]any{"type": "snapshot", "entityType": "ApprovalRequest", "locks": []any{}})
		}},
		{"ReleasesOnPagehide", "release", func(t *testing.T, e *clientEnv, c *fakeConn) {
			eval[bool](t, e.tab, `dispatchEvent(new PageTransitionEvent('pagehide', {persisted: false}))`)
		}},
		{"ReleasesWhenTheTabCloses", "release", func(t *testing.T, e *clientEnv, c *fakeConn) {
			e.tab.close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newClientEnv(t, browser)
			c := e.start(t, `{}`, welcomeOpts{})
			e.holdR1(t, c)
			e.noFrame(t, c, tc.want)
			tc.trigger(t, e, c)
			if f := c.waitFrame(t, tc.want, 2*time.Second); f.str("entityUid") != "r-1" {
				t.Fatalf("%s %v", tc.want, f)
			}
		})
	}

	t.Run("FormBlockedThenClaimsOnItsOwn", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		eval[bool](t, e.tab, openFormR1)
		for range 2 {
			f := c.next(t, 5*time.Second)
			switch f.str("type") {
			case "watch":
				c.reply(t, f, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{lock("r-1", "u-ada", "Ada Lovelace", time.Minute)}})
			case "claim":
				c.reply(t, f, "result", map[string]any{"outcome": "locked", "lock": lock("r-1", "u-ada", "Ada Lovelace", time.Minute)})
			}
		}
		waitFor(t, e.tab, "blocked", `f.state === 'locked' && document.getElementById('form-body').inert`, 5*time.Second, `f.state`)
		text := eval[string](t, e.tab, `document.querySelector('[data-testid=lock-banner]').textContent`)
		if !strings.HasPrefix(text, "Locked by Ada Lovelace since ") || !strings.Contains(text, "(until ") {
			t.Errorf("banner %q", text)
		}
		if eval[bool](t, e.tab, `document.querySelector('[data-testid=lock-banner]').hidden`) {
			t.Error("the banner is hidden")
		}
		if eval[bool](t, e.tab, `!document.querySelector('[data-testid=lock-takeover]').hidden`) {
			t.Error("a takeover button without canTakeOver")
		}
		// Ada releases: the form claims on its own.
		c.send(t, event("Released", lock("r-1", "u-ada", "Ada Lovelace", time.Minute), nil))
		req := c.waitFrame(t, "claim", 2*time.Second)
		c.reply(t, req, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
		waitFor(t, e.tab, "held", `f.state === 'held' && !document.getElementById('form-body').inert && document.querySelector('[data-testid=lock-banner]').hidden`, 5*time.Second, `f.state`)
	})

	// A form that held its lock and lost it, each way it can: told who has it now or
	// that it ended, read-only, and no claim back when the lock is let go, which would
	// snatch it from whoever waits. Closed, the form is restored and releases nothing
	// (the lock is not its own); opened again, it claims afresh.
	for _, tc := range []struct {
		name    string
		renewMs int // in the welcome; 0: the default
		// lose takes the lock, held as mine, from the form, and returns the event that
		// lets it go afterwards, or nil.
		lose   func(t *testing.T, e *clientEnv, c *fakeConn, mine map[string]any) map[string]any
		state  string         // the form's state once it lost the lock
		banner *regexp.Regexp // the banner's text then
	}{
		{
			name: "FormTakenOverBySupervisor",
			lose: func(t *testing.T, e *clientEnv, c *fakeConn, mine map[string]any) map[string]any {
				theirs := lock("r-1", "u-margaret", "Margaret Hamilton", 5*time.Minute)
				c.send(t, event("TakenOver", theirs, map[string]any{"oid": "u-me", "name": "Me Myself"}))
				return event("Released", theirs, nil)
			},
			state: "takenOver", banner: regexp.MustCompile(`^Margaret Hamilton took over this record at \d\d:\d\d\. `),
		},
		{
			// The renewal finds Grace holding it (we missed how).
			name: "FormLosingItsLockIsTakenOver", renewMs: 600,
			lose: func(t *testing.T, e *clientEnv, c *fakeConn, mine map[string]any) map[string]any {
				// A late event about the lock ours replaced changes nothing.
				older := lock("r-1", "u-ada", "Ada Lovelace", time.Minute)
				older["acquiredAtUtc"] = stamp(time.Now().Add(-time.Hour))
				c.send(t, event("Renewed", older, nil))
				r := c.waitFrame(t, "renew", 3*time.Second)
				if !eval[bool](t, e.tab, `f.state === 'held'`) {
					t.Fatalf("a late event about an older lock moved the form to %s", eval[string](t, e.tab, `f.state`))
				}
				newer := lock("r-1", "u-grace", "Grace Hopper", 5*time.Minute)
				newer["acquiredAtUtc"] = stamp(time.Now())
				c.reply(t, r, "result", map[string]any{"outcome": "lost", "lock": newer})
				return event("Released", newer, nil)
			},
			state: "takenOver", banner: regexp.MustCompile(`^Grace Hopper took over this record at \d\d:\d\d\. `),
		},
		{
			// The .NET approve (or another tab over HTTP) releases it.
			name: "FormWhoseLockIsReleasedElsewhereEnds",
			lose: func(t *testing.T, e *clientEnv, c *fakeConn, mine map[string]any) map[string]any {
				c.send(t, event("Released", mine, nil))
				return nil
			},
			state: "ended", banner: regexp.MustCompile(`^Your lock was released elsewhere at \d\d:\d\d `),
		},
		{
			// An administrator's release (PROTOCOL.md §10) names who.
			name: "FormWhoseLockAnAdministratorReleasesEnds",
			lose: func(t *testing.T, e *clientEnv, c *fakeConn, mine map[string]any) map[string]any {
				byAdmin := event("Released", mine, nil)
				byAdmin["by"] = map[string]any{"oid": "u-margaret", "name": "Margaret Hamilton"}
				c.send(t, byAdmin)
				return nil
			},
			state: "ended", banner: regexp.MustCompile(`^Margaret Hamilton released your lock at \d\d:\d\d\. `),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newClientEnv(t, browser)
			c := e.start(t, `{}`, welcomeOpts{renewMs: tc.renewMs})
			mine := lock("r-1", "u-me", "Me Myself", 5*time.Minute)
			openForm(t, e, c, openFormR1, map[string]any{"outcome": "acquired", "lock": mine}, nil)
			waitFor(t, e.tab, "held", `f.state === 'held'`, 5*time.Second, `f.state`)

			freed := tc.lose(t, e, c, mine)
			waitFor(t, e.tab, tc.state, fmt.Sprintf(`f.state === %q`, tc.state), 5*time.Second, `f.state`)
			if text := eval[string](t, e.tab, `document.querySelector('[data-testid=lock-banner]').textContent`); !tc.banner.MatchString(text) {
				t.Errorf("banner %q, want %v", text, tc.banner)
			}
			if !eval[bool](t, e.tab, `document.getElementById('title').readOnly && document.getElementById('approve').disabled`) {
				t.Error("the form is not read-only")
			}
			if freed != nil {
				c.send(t, freed)
			}
			// Nothing more about r-1: no claim in answer to the events (the barrier),
			// and, where the form renewed it often, no renewal, which is a timer's
			// (the sign that its time has come).
			sent := e.barrier(t, c)
			if tc.renewMs > 0 {
				sent = append(sent, untilRenewalOfR2(t, e, c)...)
			}
			for _, f := range sent {
				if f.str("entityUid") == "r-1" {
					t.Fatalf("fake hub: after losing r-1 the client sent %v", f)
				}
			}

			eval[bool](t, e.tab, `(f.close(), true)`)
			e.noFrame(t, c, "release")
			if !eval[bool](t, e.tab, `!document.getElementById('title').readOnly && !document.querySelector('[data-testid=lock-banner]')`) {
				t.Error("close did not restore the form")
			}
			eval[bool](t, e.tab, openFormR1)
			c.reply(t, c.waitFrame(t, "claim", 2*time.Second), "result", map[string]any{"outcome": "acquired", "lock": mine})
			waitFor(t, e.tab, "held again", `f.state === 'held'`, 5*time.Second, `f.state`)
		})
	}

	t.Run("FormReopenedBeforeItsClaimIsAnswered", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		eval[bool](t, e.tab, openFormR1)
		first := c.waitFrame(t, "claim", 2*time.Second)
		// Closed while its claim is on its way, and opened again at once.
		eval[bool](t, e.tab, `(f.close(), true)`)
		eval[bool](t, e.tab, openFormR1)
		c.waitFrame(t, "release", 2*time.Second)
		second := c.waitFrame(t, "claim", 2*time.Second)
		// The first claim's answer comes late: its release went already; a second one
		// would free the reopened form's lock.
		c.reply(t, first, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
		c.reply(t, second, "result", map[string]any{"outcome": "renewed", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
		waitFor(t, e.tab, "held", `f.state === 'held'`, 5*time.Second, `f.state`)
		e.noFrame(t, c, "release")
	})

	t.Run("FormClaimsWhenHolderLeaseRunsOut", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		openForm(t, e, c, openFormR1, map[string]any{"outcome": "locked", "lock": lock("r-1", "u-ada", "Ada Lovelace", 800*time.Millisecond)}, nil)
		// No Released, no Expired: the lease passes and the form tries on its own.
		req := c.waitFrame(t, "claim", 3*time.Second)
		c.reply(t, req, "result", map[string]any{"outcome": "acquired", "lock": lock("r-1", "u-me", "Me Myself", 5*time.Minute)})
		waitFor(t, e.tab, "held", `f.state === 'held'`, 5*time.Second, `f.state`)
		// Closing the form releases the lock.
		eval[bool](t, e.tab, `(f.close(), true)`)
		if r := c.waitFrame(t, "release", 2*time.Second); r.str("entityUid") != "r-1" {
			t.Fatalf("release %v", r)
		}
	})

	t.Run("FormFailsOpenOnUnknown", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		eval[bool](t, e.tab, openFormR1)
		c.expect(t, "watch")
		req := c.waitFrame(t, "claim", 2*time.Second)
		c.reply(t, req, "result", map[string]any{"outcome": "unknown", "lock": nil})
		waitFor(t, e.tab, "unknown", `f.state === 'unknown'`, 5*time.Second, `f.state`)
		if !eval[bool](t, e.tab, `!document.getElementById('form-body').inert && !document.getElementById('title').readOnly`) {
			t.Error("the form is not editable when the store is down")
		}
		if !eval[bool](t, e.tab, `document.querySelector('[data-testid=lock-banner]').dataset.kind === 'quiet' && !document.querySelector('[data-testid=lock-banner]').hidden`) {
			t.Error("no quiet note")
		}
	})

	t.Run("FormTakeoverButton", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{oid: "u-margaret", name: "Margaret Hamilton", canTakeOver: true})
		eval[bool](t, e.tab, openFormR1)
		c.expect(t, "watch")
		req := c.waitFrame(t, "claim", 2*time.Second)
		c.reply(t, req, "result", map[string]any{"outcome": "locked", "lock": lock("r-1", "u-grace", "Grace Hopper", time.Minute)})
		waitFor(t, e.tab, "the takeover button", `!document.querySelector('[data-testid=lock-takeover]').hidden`, 5*time.Second, `f.state`)
		click(t, e.tab, "lock-takeover")
		req = c.waitFrame(t, "takeover", 2*time.Second)
		c.reply(t, req, "result", map[string]any{"outcome": "takenOver", "lock": lock("r-1", "u-margaret", "Margaret Hamilton", 5*time.Minute),
			"previousHolder": map[string]any{"oid": "u-grace", "name": "Grace Hopper"}})
		waitFor(t, e.tab, "held", `f.state === 'held' && document.querySelector('[data-testid=lock-banner]').hidden`, 5*time.Second, `f.state`)
	})

	t.Run("DemoPageUnderStrictCSP", func(t *testing.T) {
		t.Parallel()
		testDemoPageUnderStrictCSP(t, browser)
	})

	t.Run("Grid", func(t *testing.T) {
		t.Parallel()
		e := newClientEnv(t, browser)
		c := e.start(t, `{}`, welcomeOpts{})
		eval[bool](t, e.tab, `(window.g = client.lockGrid(document.getElementById('grid'), 'ApprovalRequest', 'data-uid'), true)`)
		req := c.expect(t, "watch")
		c.reply(t, req, "snapshot", map[string]any{"entityType": "ApprovalRequest", "locks": []any{
			lock("r-1", "u-ada", "Ada Lovelace", time.Minute),
			lock("r-2", "u-me", "Me Myself", time.Minute),
		}})
		waitFor(t, e.tab, "the column", `document.querySelector('tr[data-uid=r-1]').dataset.lockState === 'other'`, 5*time.Second, `document.getElementById('grid').outerHTML`)
		checks := map[string]string{
			"header":           `document.querySelector('#grid thead th[data-lockhub-col]').textContent === 'Locked by'`,
			"holder named":     `document.querySelector('tr[data-uid=r-1] [data-testid=locked-by]').textContent.includes('Ada Lovelace')`,
			"live expiry":      `/until \d\d:\d\d · \d+:\d\d/.test(document.querySelector('tr[data-uid=r-1] .lockhub-expiry').textContent)`,
			"other's dimmed":   `document.querySelector('tr[data-uid=r-1]').classList.contains('lockhub-locked') && getComputedStyle(document.querySelector('tr[data-uid=r-1] td')).opacity < 1`,
			"mine marked":      `document.querySelector('tr[data-uid=r-2]').classList.contains('lockhub-mine') && !document.querySelector('tr[data-uid=r-2]').classList.contains('lockhub-locked')`,
			"one cell per row": `[...document.querySelectorAll('#grid tbody tr')].every((tr) => tr.querySelectorAll('[data-lockhub-cell]').length === 1)`,
		}
		checkAll(t, e.tab, checks, "")
		// A row added later is decorated, and events keep it live.
		eval[bool](t, e.tab, `(document.querySelector('#grid tbody').insertAdjacentHTML('beforeend', '<tr data-uid="r-3"><td>r-3</td></tr>'), true)`)
		c.send(t, event("Acquired", lock("r-3", "u-grace", "Grace Hopper", time.Minute), nil))
		waitFor(t, e.tab, "the new row", `document.querySelector('tr[data-uid=r-3]').dataset.lockState === 'other' && document.querySelector('tr[data-uid=r-3]').textContent.includes('Grace Hopper')`, 5*time.Second, `document.querySelector('tr[data-uid=r-3]').outerHTML`)
		c.send(t, event("Expired", lock("r-1", "u-ada", "Ada Lovelace", 0), nil))
		waitFor(t, e.tab, "r-1 free", `document.querySelector('tr[data-uid=r-1]').dataset.lockState === 'free' && !document.querySelector('tr[data-uid=r-1]').classList.contains('lockhub-locked')`, 5*time.Second, ``)
	})
}
