package hub

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// handshake tries a WebSocket handshake and returns the HTTP answer of a refused one
// (nil when it was accepted; the socket is then closed at cleanup).
func (th *testHub) handshake(t *testing.T) *http.Response {
	t.Helper()
	return th.handshakeWith(t, nil)
}

// handshakeWith is handshake with header's fields in the request.
func (th *testHub) handshakeWith(t *testing.T, header http.Header) *http.Response {
	t.Helper()
	ws, resp, err := websocket.Dial(tctx(t), th.url, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}, HTTPHeader: header})
	if err == nil {
		t.Cleanup(func() { _ = ws.CloseNow() })
		return nil
	}
	if resp == nil {
		t.Fatalf("handshake failed without an HTTP answer: %v", err)
	}
	return resp
}

func wantRefused(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("handshake answered %+v, want 503 with Retry-After", resp)
	}
}

// TestMaxConnections: past --max-connections a handshake is refused with 503 and
// Retry-After, and the sockets already open keep working; a closed one gives its place
// back.
func TestMaxConnections(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.MaxConnections = 2 }})
	ada, _ := th.dial("acme", "u-ada")
	grace, _ := th.dial("acme", "u-grace")
	wantRefused(t, th.handshake(t))
	if got := th.metric("lockhub_hub_limit_hits_total", "limit=max_connections"); got != 1 {
		t.Fatalf("max_connections hits = %v, want 1", got)
	}
	expect(t, protocol.OutcomeAcquired)(ada.Claim(tctx(t), typ, "r-1"))
	expect(t, protocol.OutcomeLocked)(grace.Claim(tctx(t), typ, "r-1"))

	_ = grace.Close()
	redistest.Eventually(t, "the closed socket's place is free again", func() bool { return th.handshake(t) == nil })
}

// TestMaxPendingAuth: past --max-pending-auth sockets that have not authenticated, a
// handshake is refused; once one authenticates, its place among them is free.
func TestMaxPendingAuth(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.MaxPendingAuth = 1 }})
	first := th.dialRaw()
	wantRefused(t, th.handshake(t))
	if got := th.metric("lockhub_hub_limit_hits_total", "limit=max_pending_auth"); got != 1 {
		t.Fatalf("max_pending_auth hits = %v, want 1", got)
	}
	if _, err := first.Auth(tctx(t), th.token("acme", "u-ada")); err != nil {
		t.Fatal(err)
	}
	second := th.dialRaw() // accepted: the first no longer waits to authenticate
	if _, err := second.Auth(tctx(t), th.token("acme", "u-grace")); err != nil {
		t.Fatal(err)
	}
}

// TestPreAuthFrameLimit: before authentication a frame over 16 KiB closes with 1009;
// after it, a frame of that size is answered.
func TestPreAuthFrameLimit(t *testing.T) {
	th := startMini(t, hubOptions{})
	big := `{"type":"auth","token":"` + strings.Repeat("x", protocol.MaxPreAuthFrameSize) + `"}`
	c := th.dialRaw()
	if err := c.SendRaw(tctx(t), websocket.MessageText, []byte(big)); err != nil {
		t.Fatal(err)
	}
	wantClosed(t, c, protocol.CloseTooLarge)
	redistest.Eventually(t, "the 1009 before auth counted", func() bool {
		return th.metric("lockhub_hub_limit_hits_total", "limit=pre_auth_frame") == 1
	})

	ok, _ := th.dial("acme", "u-ada")
	frame := `{"id":"1","type":"mine","pad":"` + strings.Repeat("x", protocol.MaxPreAuthFrameSize) + `"}`
	if err := ok.SendRaw(tctx(t), websocket.MessageText, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	f, err := ok.NextFrame(tctx(t))
	if err != nil || f.Result == nil || f.ID != "1" {
		t.Fatalf("a 16 KiB frame after auth: %+v, %v; want its result", f, err)
	}
}

// TestMaxLocksPerSocket: a claim or takeover beyond --max-locks-per-socket answers
// too_many_locks and writes nothing; a lock held already may be claimed again, and a
// release makes room.
func TestMaxLocksPerSocket(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.MaxLocksPerSocket = 2 }})
	ctx := tctx(t)
	c, _ := th.dial("acme", "u-boss", "Locks.TakeOver")
	expect(t, protocol.OutcomeAcquired)(c.Claim(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeAcquired)(c.Claim(ctx, typ, "r-2"))
	for _, try := range []func() (protocol.Result, error){
		func() (protocol.Result, error) { return c.Claim(ctx, typ, "r-3") },
		func() (protocol.Result, error) { return c.Takeover(ctx, typ, "r-3") },
	} {
		_, err := try()
		wantCode(t, err, protocol.CodeTooManyLocks)
	}
	if l, _ := th.store.Locks.Get(ctx, locks.Ref{Tenant: "acme", Type: typ, UID: "r-3"}); l != nil {
		t.Fatalf("a refused claim wrote %+v", l)
	}
	if got := th.metric("lockhub_hub_limit_hits_total", "limit=max_locks_per_socket"); got != 2 {
		t.Fatalf("max_locks_per_socket hits = %v, want 2", got)
	}
	expect(t, protocol.OutcomeRenewed)(c.Claim(ctx, typ, "r-2"))
	expect(t, protocol.OutcomeReleased)(c.Release(ctx, typ, "r-1"))
	expect(t, protocol.OutcomeAcquired)(c.Claim(ctx, typ, "r-3"))

	other, _ := th.dial("acme", "u-boss") // the limit is per socket, not per person
	expect(t, protocol.OutcomeAcquired)(other.Claim(ctx, typ, "r-4"))

	// A claimMany counts as a whole (version 3, §12): two more than the socket may hold
	// is refused, writing nothing; renewing what it holds is not more.
	_, err := other.ClaimMany(ctx, typ, []string{"r-4", "r-5", "r-6"})
	if pe := wantCode(t, err, protocol.CodeTooManyLocks); !strings.Contains(pe.Message, "beyond the 2") {
		t.Fatalf("the refusal %q does not say the limit", pe.Message)
	}
	if l, _ := th.store.Locks.Get(ctx, locks.Ref{Tenant: "acme", Type: typ, UID: "r-5"}); l != nil {
		t.Fatalf("a refused claimMany wrote %+v", l)
	}
	if got := th.metric("lockhub_hub_limit_hits_total", "limit=max_locks_per_socket"); got != 3 {
		t.Fatalf("max_locks_per_socket hits = %v, want 3", got)
	}
	if r, err := other.ClaimMany(ctx, typ, []string{"r-4", "r-5"}); err != nil || r.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("claimMany within the limit: %+v, %v", r, err)
	}
}

// TestPingFrame: a client may ask whether the hub is there; the pong echoes its id.
func TestPingFrame(t *testing.T) {
	th := startMini(t, hubOptions{})
	c, _ := th.dial("acme", "u-ada")
	p, err := c.Ping(tctx(t))
	if err != nil || p.ID == "" || p.ServerTime.IsZero() {
		t.Fatalf("Ping = %+v, %v", p, err)
	}
}

// TestHeartbeat: the hub Pings every socket; one that stops answering (it stops
// reading, as a half-open connection does) is cut once PongTimeout passes, and its
// locks follow the release grace. A socket that answers stays.
func TestHeartbeat(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) {
		c.PingEvery, c.PongTimeout = 50e6, 100e6 // 50 ms, 100 ms
	}})
	ctx := tctx(t)
	alive, _ := th.dial("acme", "u-grace")
	if _, err := alive.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}

	// A raw socket, read only until it holds its lock, then never again: no Pong.
	ws, _, err := websocket.Dial(ctx, th.url, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	send := func(frame string) {
		if err := ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"type":"auth","token":"` + th.token("acme", "u-ada") + `"}`)
	send(`{"id":"1","type":"claim","entityType":"` + typ + `","entityUid":"r-1"}`)
	wantEvent(t, alive, protocol.OpAcquired, "r-1")

	redistest.Eventually(t, "the silent socket cut for want of a Pong", func() bool {
		return th.metric("lockhub_hub_limit_hits_total", "limit=pong_timeout") == 1
	})
	wantEvent(t, alive, protocol.OpReleased, "r-1") // after the release grace
	if _, err := alive.Ping(ctx); err != nil {
		t.Fatalf("the socket that answers Pings was cut too: %v", err)
	}
	if got := th.metric("lockhub_hub_limit_hits_total", "limit=pong_timeout"); got != 1 {
		t.Fatalf("pong_timeout hits = %v, want only the silent socket's", got)
	}
}

// TestWatchTwice: a second watch of a type the socket watches already answers its own
// snapshot with one read of the store, and the events that follow come once, not once
// per watch.
func TestWatchTwice(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	w, _ := th.dial("acme", "u-w")
	lists := func() float64 { return th.metric("lockhub_store_operations_total", "op=list") }
	before := lists()
	for range 2 {
		if _, err := w.Watch(ctx, typ); err != nil {
			t.Fatal(err)
		}
	}
	if got := lists() - before; got != 2 {
		t.Fatalf("two watches read %v snapshots, want one each", got)
	}
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	wantEvent(t, w, protocol.OpAcquired, "r-1")
	barrier(t, w)
	noEvent(t, w)
}
