package hub

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/hub/auth/authtest"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// The close codes of PROTOCOL.md §4, one by one, plus 403 and 400 at the handshake.

func TestNotAuthenticated(t *testing.T) {
	th := startMini(t, hubOptions{})
	for _, tc := range []struct {
		name string
		typ  websocket.MessageType
		data string
	}{
		{"claim first", websocket.MessageText, `{"id":"1","type":"claim","entityType":"ApprovalRequest","entityUid":"r-1"}`},
		{"mine first", websocket.MessageText, `{"id":"1","type":"mine"}`},
		{"malformed first", websocket.MessageText, `{"type":"auth"`},
		{"auth without token", websocket.MessageText, `{"type":"auth"}`},
		{"binary first", websocket.MessageBinary, `{"type":"auth","token":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := th.dialRaw()
			if err := c.SendRaw(tctx(t), tc.typ, []byte(tc.data)); err != nil {
				t.Fatal(err)
			}
			wantClosed(t, c, protocol.CloseNotAuthenticated)
		})
	}
	if got := th.metric("lockhub_hub_closes_total", "code=4401"); got != 5 {
		t.Errorf("4401 closes counted = %v, want 5", got)
	}
}

// TestBadTokensOverSocket runs the bad-token list of the issue through the socket:
// each closes with 4401, and nothing else happens.
func TestBadTokensOverSocket(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := auth.NewDev(auth.DevConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	th := startMini(t, hubOptions{dev: dev})
	tokens := authtest.DevBadTokens(t, key, auth.DevIssuer, auth.DevAudience, time.Now())
	for _, tc := range tokens {
		t.Run(tc.Name, func(t *testing.T) {
			c := th.dialRaw()
			_, err := c.Auth(tctx(t), tc.Token)
			if websocket.CloseStatus(err) != protocol.CloseNotAuthenticated {
				t.Fatalf("Auth = %v, want a close with 4401", err)
			}
		})
	}
	if got := th.metric("lockhub_hub_auth_failures_total"); int(got) != len(tokens) {
		t.Errorf("auth failures counted = %v, want %d", got, len(tokens))
	}
	// The hub still serves.
	c, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(c.Claim(tctx(t), typ, "r-1"))
}

func TestAuthTimeout(t *testing.T) {
	// Long enough for the socket that does authenticate to do so on a loaded machine.
	const timeout = 500 * time.Millisecond
	th := startMini(t, hubOptions{hub: func(c *Config) { c.AuthTimeout = timeout }})
	start := time.Now()
	c := th.dialRaw()
	wantClosed(t, c, protocol.CloseAuthTimeout)
	if d := time.Since(start); d < timeout {
		t.Fatalf("closed after %s, before the auth timeout", d)
	}
	// Authenticated in time: the timer is off. The barrier is a socket opened after ok
	// that does not authenticate: once the hub has closed it, ok's timer, started
	// earlier for as long, would have fired too.
	ok, _ := th.dial("acme", "u-ada")
	wantClosed(t, th.authClock(), protocol.CloseAuthTimeout)
	if _, err := ok.Mine(tctx(t)); err != nil {
		t.Fatalf("authenticated socket closed: %v", err)
	}
	if got := th.metric("lockhub_hub_closes_total", "code=4408"); got != 2 {
		t.Errorf("4408 closes counted = %v, want 2: the sockets that did not authenticate", got)
	}
}

func TestFrameTooLarge(t *testing.T) {
	th := startMini(t, hubOptions{})
	big := `{"type":"auth","token":"` + strings.Repeat("x", protocol.MaxFrameSize) + `"}`
	t.Run("before auth", func(t *testing.T) {
		c := th.dialRaw()
		_ = c.SendRaw(tctx(t), websocket.MessageText, []byte(big)) // the hub may cut it mid-write
		wantClosed(t, c, protocol.CloseTooLarge)
	})
	t.Run("after auth", func(t *testing.T) {
		c, _ := th.dial("acme", "u-ada")
		req := `{"id":"1","type":"claim","entityType":"ApprovalRequest","entityUid":"` + strings.Repeat("r", protocol.MaxFrameSize) + `"}`
		_ = c.SendRaw(tctx(t), websocket.MessageText, []byte(req))
		wantClosed(t, c, protocol.CloseTooLarge)
	})
	t.Run("exactly 64 KiB is served", func(t *testing.T) {
		c, _ := th.dial("acme", "u-ada")
		frame := `{"id":"1","type":"mine","pad":"`
		frame += strings.Repeat(" ", protocol.MaxFrameSize-len(frame)-2) + `"}`
		if len(frame) != protocol.MaxFrameSize {
			t.Fatalf("frame is %d bytes", len(frame))
		}
		if err := c.SendRaw(tctx(t), websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		f, err := c.NextFrame(tctx(t))
		if err != nil || f.Result == nil || f.ID != "1" {
			t.Fatalf("answer = %+v, %v", f, err)
		}
	})
	if len(th.redisKeys()) != 0 {
		t.Fatalf("keys written: %v", th.redisKeys())
	}
}

func TestTokenExpiry(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.TokenLeeway = time.Millisecond }})
	// JWT times are whole seconds: base is the next second but one.
	base := time.Now().Truncate(time.Second).Add(2 * time.Second)
	short, _ := th.dev.IssueWithExpiry("acme", "u-ada", "Ada", nil, base)
	later, _ := th.dev.IssueWithExpiry("acme", "u-ada", "Ada", nil, base.Add(time.Second))

	refreshed := th.dialRaw()
	if _, err := refreshed.Auth(tctx(t), short); err != nil {
		t.Fatal(err)
	}
	expect(t, protocol.OutcomeRefreshed)(refreshed.Refresh(tctx(t), th.token("acme", "u-ada")))

	expiring := th.dialRaw()
	if _, err := expiring.Auth(tctx(t), later); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, expiring, protocol.CloseNotAuthenticated)
	if time.Now().Before(base.Add(time.Second)) {
		t.Fatalf("closed before its token expired at %s", base.Add(time.Second))
	}
	// The refreshed socket's first token ran out a second before: it is still open.
	if _, err := refreshed.Mine(tctx(t)); err != nil {
		t.Fatalf("refreshed socket: %v", err)
	}
}

func TestRefresh(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	t.Run("same identity, new roles", func(t *testing.T) {
		c, w := th.dial("acme", "u-ada")
		if w.CanTakeOver {
			t.Fatal("canTakeOver without the role")
		}
		expect(t, protocol.OutcomeForbidden)(c.Takeover(ctx, typ, "r-1"))
		expect(t, protocol.OutcomeRefreshed)(c.Refresh(ctx, th.token("acme", "u-ada", "Locks.TakeOver")))
		expect(t, protocol.OutcomeAcquired)(c.Takeover(ctx, typ, "r-1"))
	})
	for _, tc := range []struct {
		name        string
		tenant, oid string
	}{
		{"another oid", "acme", "u-bob"},
		{"another tenant", "globex", "u-ada"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := th.dial("acme", "u-ada")
			_, err := c.Refresh(ctx, th.token(tc.tenant, tc.oid))
			if websocket.CloseStatus(err) != protocol.CloseForbidden {
				t.Fatalf("Refresh = %v, want a close with 4403", err)
			}
		})
	}
	t.Run("bad token", func(t *testing.T) {
		c, _ := th.dial("acme", "u-ada")
		_, err := c.Refresh(ctx, "garbage")
		if websocket.CloseStatus(err) != protocol.CloseNotAuthenticated {
			t.Fatalf("Refresh = %v, want a close with 4401", err)
		}
	})
	t.Run("auth without id", func(t *testing.T) {
		c, _ := th.dial("acme", "u-ada")
		if err := c.SendRaw(ctx, websocket.MessageText, []byte(`{"type":"auth","token":"x"}`)); err != nil {
			t.Fatal(err)
		}
		f, err := c.NextFrame(ctx)
		if err != nil || f.Error == nil || f.Error.Code != protocol.CodeBadRequest {
			t.Fatalf("answer = %+v, %v", f, err)
		}
		if _, err := c.Mine(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRateLimit(t *testing.T) {
	th := startMini(t, hubOptions{})
	c, _ := th.dial("acme", "u-ada")
	ctx := tctx(t)
	const n = 160
	for i := range n {
		id := "q" + itoa(i)
		if err := c.SendRaw(ctx, websocket.MessageText, []byte(`{"id":"`+id+`","type":"unwatch","entityType":"Invoice"}`)); err != nil {
			t.Fatal(err)
		}
	}
	served, limited := 0, 0
	seen := map[string]bool{}
	for range n {
		f, err := c.NextFrame(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[f.ID] = true
		switch {
		case f.Result != nil:
			served++
		case f.Error != nil && f.Error.Code == protocol.CodeRateLimited:
			limited++
		default:
			t.Fatalf("unexpected answer %s", f.Raw)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct ids answered, want %d: each request gets its own answer", len(seen), n)
	}
	if served < protocol.RateBurst || limited < 10 {
		t.Fatalf("served %d, rate limited %d of %d", served, limited, n)
	}
	if got := th.metric("lockhub_hub_rate_limited_total"); int(got) != limited {
		t.Errorf("rate limited counted = %v, want %d", got, limited)
	}
	// Counted by limit too, beside the hub's other limits (PROTOCOL.md §4).
	if got := th.metric("lockhub_hub_limit_hits_total", "limit="+limitRequestRate); int(got) != limited {
		t.Errorf("limit hits of %s = %v, want %d", limitRequestRate, got, limited)
	}
	// Within the grace the connection stays, and serves again once the bucket refills.
	redistest.Eventually(t, "a request served after the burst", func() bool {
		_, err := c.Mine(ctx)
		if err != nil && c.Err() != nil {
			t.Fatalf("after a burst: %v", err)
		}
		return err == nil
	})
}

func TestRateLimitClose(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) {
		c.RateLimit, c.RateBurst, c.OverRateGrace = 20, 5, 300*time.Millisecond
	}})
	c, _ := th.dial("acme", "u-ada")
	ctx := tctx(t)
	start := time.Now()
	// 500 frames a second, steadily: over the rate, yet slow enough that the answers
	// never overflow the send queue (which would close with 4429 too, sooner).
	floodUntilClosed(t, ctx, c, 1, 2*time.Millisecond)
	wantClosed(t, c, protocol.CloseTooMany)
	if th.metric("lockhub_hub_slow_disconnects_total") != 0 {
		t.Fatal("closed as a slow reader, not for its rate")
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("closed after %s, within the grace", d)
	}
}

// unwatchFrame is a cheap request with id i: it touches no store.
func unwatchFrame(i int) []byte {
	return []byte(`{"id":"` + itoa(i) + `","type":"unwatch","entityType":"Invoice"}`)
}

// floodUntilClosed sends bursts of burst requests every interval until the hub closes c.
func floodUntilClosed(t *testing.T, ctx context.Context, c *protocol.Client, burst int, every time.Duration) {
	t.Helper()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; c.Err() == nil; {
		for range burst {
			if err := c.SendRaw(ctx, websocket.MessageText, unwatchFrame(i)); err != nil {
				return // closed
			}
			i++
		}
		select {
		case <-tick.C:
		case <-c.Done():
		case <-ctx.Done():
			t.Fatal("never closed")
		}
	}
}

// TestRateLimitCloseBursts: a client that comes back over the rate in bursts, pausing
// long enough between them to refill its bucket, is still over the rate: it is closed
// when the grace runs out.
func TestRateLimitCloseBursts(t *testing.T) {
	const grace = 3 * time.Second
	th := startMini(t, hubOptions{hub: func(c *Config) {
		c.RateLimit, c.RateBurst, c.OverRateGrace = 20, 5, grace
	}})
	c, _ := th.dial("acme", "u-ada")
	ctx := tctx(t)
	start := time.Now()
	// Pauses that refill the bucket and last over a second (the pause that used to end
	// a spell), yet shorter than half the grace.
	floodUntilClosed(t, ctx, c, 12, 1200*time.Millisecond) // bursts of 12 against a bucket of 5
	wantClosed(t, c, protocol.CloseTooMany)
	if d := time.Since(start); d < grace {
		t.Fatalf("closed after %s, within the grace", d)
	}
	if th.metric("lockhub_hub_rate_limited_total") == 0 {
		t.Fatal("no request was answered rate_limited before the close")
	}
}

// TestRateLimitOneBurst: one burst over the rate, then calm, is answered rate_limited
// and forgotten; the socket stays.
func TestRateLimitOneBurst(t *testing.T) {
	const grace = 600 * time.Millisecond
	th := startMini(t, hubOptions{hub: func(c *Config) {
		c.RateLimit, c.RateBurst, c.OverRateGrace = 20, 5, grace
		c.AuthTimeout = 2 * grace // the clock of the calm below
	}})
	c, _ := th.dial("acme", "u-ada")
	ctx := tctx(t)
	for i := range 12 {
		if err := c.SendRaw(ctx, websocket.MessageText, unwatchFrame(i)); err != nil {
			t.Fatal(err)
		}
	}
	redistest.Eventually(t, "rate_limited answers", func() bool { return th.metric("lockhub_hub_rate_limited_total") >= 1 })
	// Calm for longer than the grace, one request at a time under the rate, until the
	// hub's auth timer of twice the grace, started after the burst, has fired.
	clock := th.authClock()
	tick := time.NewTicker(100 * time.Millisecond) // paces the requests: 10 a second
	defer tick.Stop()
	for calm := true; calm; {
		select {
		case <-clock.Done():
			calm = false
		case <-tick.C:
		}
		if _, err := c.Mine(ctx); err != nil && c.Err() != nil {
			t.Fatalf("closed after one burst: %v", c.Err())
		}
	}
	if code := clock.CloseStatus(); code != protocol.CloseAuthTimeout {
		t.Fatalf("the clock socket closed with %d, want 4408 (%v)", code, clock.Err())
	}
	if _, err := c.Mine(ctx); err != nil {
		t.Fatalf("after one burst and calm: %v", err)
	}
	// The first spell is forgotten: a second burst starts a spell of its own, answered
	// rate_limited, where the first spell's grace, long run out, would close the socket.
	limited := th.metric("lockhub_hub_rate_limited_total")
	for i := range 12 {
		if err := c.SendRaw(ctx, websocket.MessageText, unwatchFrame(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	redistest.Eventually(t, "rate_limited answers to the second burst", func() bool {
		return th.metric("lockhub_hub_rate_limited_total") > limited
	})
	redistest.Eventually(t, "a request served after the second burst", func() bool {
		_, err := c.Mine(ctx)
		if err != nil && c.Err() != nil {
			t.Fatalf("closed by a second burst after calm: %v", c.Err())
		}
		return err == nil
	})
}

func TestOrigin(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) {
		c.AllowedOrigins = []string{"https://tms.example.com", "https://*.example.org", "http://localhost:3000"}
	}})
	self := "http://" + strings.TrimPrefix(th.srv.URL, "http://")
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{self, true},
		{"https://tms.example.com", true},
		{"HTTPS://TMS.Example.COM", true},
		{"https://tms.example.com:443", true},
		{"https://a.example.org", true},
		{"http://localhost:3000", true},
		{"https://a.b.example.org", false},
		{"https://example.org", false},
		{"https://evil.com", false},
		{"http://tms.example.com", false},
		{"https://tms.example.com:8443", false},
		{"https://tms.example.com.evil.com", false},
		{"http://localhost:3001", false},
		{"null", false},
		{"https://tms.example.com/path", false},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			h := http.Header{}
			if tc.origin != "" {
				h.Set("Origin", tc.origin)
			}
			c, err := protocol.Dial(tctx(t), th.url, &protocol.DialOptions{HTTPHeader: h})
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				_ = c.Close()
				return
			}
			var he *protocol.HandshakeError
			if !errors.As(err, &he) || he.StatusCode != http.StatusForbidden {
				if c != nil {
					_ = c.Close()
				}
				t.Fatalf("Dial = %v, want HTTP 403", err)
			}
		})
	}
}

func TestParseOrigins(t *testing.T) {
	got, err := ParseOrigins(" https://tms.example.com , https://*.Example.org,http://localhost:8080,, ")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"https://tms.example.com:443", "https://*.example.org:443", "http://localhost:8080"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ParseOrigins = %q, want %q", got, want)
	}
	if got, err := ParseOrigins(""); err != nil || len(got) != 0 {
		t.Fatalf("ParseOrigins(\"\") = %q, %v", got, err)
	}
	for _, bad := range []string{"tms.example.com", "ftp://x.com", "https://", "https://a*.example.com", "https://*",
		"https://x.com/path", "https://user@x.com", "*", "https://a..b"} {
		if _, err := ParseOrigins(bad); err == nil {
			t.Errorf("ParseOrigins(%q) accepted it", bad)
		}
	}
}

func TestHandshakeRefusals(t *testing.T) {
	th := startMini(t, hubOptions{})
	t.Run("no subprotocol", func(t *testing.T) {
		c, resp, err := websocket.Dial(tctx(t), th.url, nil)
		if err == nil {
			_ = c.CloseNow()
			t.Fatal("upgraded without lockhub.v1")
		}
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("response = %v, want 400", resp)
		}
	})
	t.Run("not a websocket", func(t *testing.T) {
		resp, err := http.Get(th.srv.URL + "/ws")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("status = %d", resp.StatusCode)
		}
	})
}

func TestShutdown(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	anon := th.dialRaw()
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	tab2, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeRenewed)(tab2.Claim(ctx, typ, "r-1"))

	if err := th.hub.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*protocol.Client{anon, ada, tab2} {
		wantClosed(t, c, protocol.CloseGoingAway)
	}
	// Nothing released, and the sockets are no longer in the lock's set: the clients
	// reconnect elsewhere and claim again.
	l, err := th.store.Locks.Get(ctx, locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"})
	if err != nil || l == nil || l.HolderOID != "u-ada" {
		t.Fatalf("lock after shutdown = %+v, %v", l, err)
	}
	if got := th.metric("lockhub_hub_detaches_total", "why=shutdown", "outcome=notHeld"); got != 2 {
		t.Errorf("shutdown detaches = %v, want 2", got)
	}
	if got := th.mr.Exists(locks.ConnsKey(locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"})); got {
		members, _ := th.mr.SMembers(locks.ConnsKey(locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}))
		if len(members) != 0 {
			t.Errorf("sockets still attached after shutdown: %v", members)
		}
	}

	_, err = protocol.Dial(ctx, th.url, nil)
	var he *protocol.HandshakeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("Dial after Shutdown = %v, want HTTP 503", err)
	}
	if got := th.metric("lockhub_hub_sockets"); got != 0 {
		t.Errorf("sockets gauge = %v after shutdown", got)
	}
}

// TestShutdownDeadline: a client that never answers the close handshake is cut when
// Shutdown's ctx runs out.
func TestShutdownDeadline(t *testing.T) {
	th := startMini(t, hubOptions{})
	// A raw socket whose reader we never run: it will not echo the close frame.
	ws, _, err := websocket.Dial(tctx(t), th.url, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	redistest.Eventually(t, "the socket to be registered", func() bool { return th.metric("lockhub_hub_sockets") == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := th.hub.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
	}
	if ctx.Err() == nil {
		t.Fatal("Shutdown gave up before its deadline")
	}
	// It asked first (1001), then cut the socket and joined its goroutine: the socket
	// is gone from the hub by the time Shutdown returns.
	if got := th.metric("lockhub_hub_closes_total", "code=1001"); got != 1 {
		t.Errorf("1001 closes counted = %v, want 1", got)
	}
	if got := th.metric("lockhub_hub_sockets"); got != 0 {
		t.Errorf("sockets gauge = %v when Shutdown returned, want 0", got)
	}
	// The client finds the hub's close frame, then the end of the connection.
	if _, _, err := ws.Read(tctx(t)); websocket.CloseStatus(err) != protocol.CloseGoingAway {
		t.Fatalf("client read after Shutdown = %v, want the close frame 1001", err)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// TestPingAfterIdle: a client's ping long after the last frame is answered: the write
// deadline of the last frame does not linger on the connection.
func TestPingAfterIdle(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) {
		c.WriteTimeout = 50 * time.Millisecond
		c.AuthTimeout = 500 * time.Millisecond // the clock of the idle below; ws authenticates well within it
	}})
	ctx := tctx(t)
	ws, _, err := websocket.Dial(ctx, th.url, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"auth","token":"`+th.token("acme", "u-ada")+`"}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.Read(ctx); err != nil { // the welcome: the hub's writer ran
		t.Fatal(err)
	}
	// Idle past the write deadline: the hub's auth timer of a socket opened after the
	// welcome, ten times the write timeout, has fired.
	wantClosed(t, th.authClock(), protocol.CloseAuthTimeout)
	readCtx := ws.CloseRead(ctx) // reads the pong
	if err := ws.Ping(ctx); err != nil {
		t.Fatalf("ping after idle: %v (%v)", err, readCtx.Err())
	}
}
