package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestSlowReader: a watcher that stops reading is closed with 4429 once its send queue
// overflows, and a fast watcher keeps getting every event meanwhile, each before the
// next claim: the fan-out does not wait for the slow socket.
func TestSlowReader(t *testing.T) {
	th, _ := startReal(t, hubOptions{hub: func(c *Config) { c.SendQueue = 8 }, sndbuf: 8 << 10})
	ctx := tctx(t)

	slow := dialSlow(t, th)
	fast, _ := th.dial("acme", "u-fast")
	if _, err := fast.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	// Big events fill the slow socket's kernel buffers in a few dozen frames.
	name := strings.Repeat("n", 8<<10)
	tok, err := th.dev.Issue("acme", "u-claimer", name, nil)
	if err != nil {
		t.Fatal(err)
	}
	claimer := th.dialRaw()
	if _, err := claimer.Auth(ctx, tok); err != nil {
		t.Fatal(err)
	}

	for i := 0; th.metric("lockhub_hub_slow_disconnects_total", "reason=queue") == 0; i++ {
		if i == 2000 {
			t.Fatal("the slow reader was never cut")
		}
		uid := "s-" + itoa(i)
		expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, uid))
		wantEvent(t, fast, protocol.OpAcquired, uid)
	}
	// Cut by its queue, never by a write timing out: the fan-out queued and moved on.
	// Had it waited on the slow socket's writes, the write timeout would have cut it.
	if got := th.metric("lockhub_hub_slow_disconnects_total", "reason=write"); got != 0 {
		t.Errorf("slow disconnects for a write timeout = %v, want 0", got)
	}
	if n := fast.Dropped(); n != 0 {
		t.Errorf("the fast watcher dropped %d events", n)
	}
	// The slow client reads again: it drains what was written and finds 4429.
	if code := drain(t, slow); code != protocol.CloseTooMany {
		t.Fatalf("slow reader closed with %d, want 4429", code)
	}
	// The fast one is still fine.
	expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "after"))
	wantEvent(t, fast, protocol.OpAcquired, "after")
}

// TestStalledReader: a watcher that stops reading, while the kernels have room for
// everything sent to it (default buffers, a few small events), is found by the
// heartbeat's next Ping, which it does not answer, and closed with 4429 within
// PingEvery + PongTimeout of its last Pong, not when the buffers fill; reading again,
// it finds the close frame after its events. With PingEvery half of PongTimeout, that
// is within 1.5 PongTimeouts of the socket's opening, its last Pong here, and so
// within 3 of the frame it left unread.
func TestStalledReader(t *testing.T) {
	const pongTimeout = 400 * time.Millisecond
	th, _ := startReal(t, hubOptions{hub: func(c *Config) { c.PingEvery, c.PongTimeout = pongTimeout/2, pongTimeout }})
	ctx := tctx(t)
	stalled := dialWatcher(t, th, 0)
	claimer, _ := th.dial("acme", "u-claimer")
	expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "r-1")) // the frame it leaves unread
	unread := time.Now()
	redistest.Within(t, 3*pongTimeout, "the stalled reader closed", func() error {
		if th.metric("lockhub_hub_slow_disconnects_total", "reason=read") != 1 {
			return errors.New("still open")
		}
		return nil
	})
	t.Logf("closed %v after the frame it did not read", time.Since(unread).Round(time.Millisecond))
	if code := drain(t, stalled); code != protocol.CloseTooMany {
		t.Fatalf("stalled reader closed with %d, want 4429", code)
	}
	// A watcher that reads stays, however long it watches.
	reader, _ := th.dial("acme", "u-reader")
	if _, err := reader.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "k-"+itoa(i)))
		wantEvent(t, reader, protocol.OpAcquired, "k-"+itoa(i))
		if _, err := reader.Ping(ctx); err != nil { // let Pings and Pongs go round
			t.Fatal(err)
		}
	}
	if got := th.metric("lockhub_hub_slow_disconnects_total", "reason=read"); got != 1 {
		t.Fatalf("%v sockets closed for not reading, want only the stalled one", got)
	}
}

// TestReadStall: a frame left unread is found within Config.ReadStall, not only at the
// next PingEvery: the socket is pinged early because something was written since its
// last Pong, and closed with 4429 (issue 26: a stalled reader closed within 30 s,
// where PingEvery + PongTimeout is 35). A socket that reads stays.
func TestReadStall(t *testing.T) {
	const stall = 900 * time.Millisecond
	th, _ := startReal(t, hubOptions{hub: func(c *Config) { c.PingEvery, c.PongTimeout, c.ReadStall = 10*time.Second, 300*time.Millisecond, stall }})
	ctx := tctx(t)
	stalled := dialWatcher(t, th, 0)
	reader, _ := th.dial("acme", "u-reader")
	if _, err := reader.Watch(ctx, typ); err != nil {
		t.Fatal(err)
	}
	claimer, _ := th.dial("acme", "u-claimer")
	expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "r-1")) // the frame it leaves unread
	unread := time.Now()
	wantEvent(t, reader, protocol.OpAcquired, "r-1")
	// Well before PingEvery (10 s): within ReadStall of its last Pong, the opening.
	redistest.Within(t, 3*stall, "the stalled reader closed", func() error {
		if th.metric("lockhub_hub_slow_disconnects_total", "reason=read") != 1 {
			return errors.New("still open")
		}
		return nil
	})
	t.Logf("closed %v after the frame it did not read", time.Since(unread).Round(time.Millisecond))
	if code := drain(t, stalled); code != protocol.CloseTooMany {
		t.Fatalf("stalled reader closed with %d, want 4429", code)
	}
	// The reader answered its early Ping: still here, and gets what follows.
	expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "r-2"))
	wantEvent(t, reader, protocol.OpAcquired, "r-2")
	if got := th.metric("lockhub_hub_slow_disconnects_total", "reason=read"); got != 1 {
		t.Fatalf("%v sockets closed for not reading, want only the stalled one", got)
	}
}

// TestStalledReaderBehindFullBuffers: a watcher that stops reading once the kernels'
// buffers are full (tiny buffers, big events; its queue never overflows) is found by
// the heartbeat like any stalled reader, but its close frame cannot follow what the
// kernels hold: the connection is cut without it. Reading again, the client gets
// the frames the kernels held, then the end of the connection with no close frame
// (what a browser reports as 1006), as the operator's page says (issue 30, item 2).
func TestStalledReaderBehindFullBuffers(t *testing.T) {
	// A Ping every second: the client stops reading after the first event, and the
	// rest are written before the next Ping, which finds them unread (were none
	// written, it would be taken for a dead peer, cut without a close frame too).
	th, _ := startReal(t, hubOptions{hub: func(c *Config) { c.PingEvery, c.PongTimeout = time.Second, 500*time.Millisecond }, sndbuf: 8 << 10})
	ctx := tctx(t)
	name := strings.Repeat("n", 8<<10)
	tok, err := th.dev.Issue("acme", "u-claimer", name, nil)
	if err != nil {
		t.Fatal(err)
	}
	claimer := th.dialRaw()
	if _, err := claimer.Auth(ctx, tok); err != nil {
		t.Fatal(err)
	}
	stalled := dialSlow(t, th)
	expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "f-0"))
	for { // read up to the first event, answering Pings meanwhile; then stop reading
		_, b, err := stalled.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f, err := protocol.DecodeServerFrame(b); err == nil && f.Event != nil {
			break
		}
	}
	// Far more than the kernels hold (a few dozen of these), far fewer than the queue.
	for i := 1; i < 64; i++ {
		expect(t, protocol.OutcomeAcquired)(claimer.Claim(ctx, typ, "f-"+itoa(i)))
	}
	redistest.Within(t, 20*time.Second, "the stalled reader closed and cut", func() error {
		read, queue, write := th.metric("lockhub_hub_slow_disconnects_total", "reason=read"),
			th.metric("lockhub_hub_slow_disconnects_total", "reason=queue"), th.metric("lockhub_hub_slow_disconnects_total", "reason=write")
		if open := th.metric("lockhub_hub_sockets"); read != 1 || open != 1 {
			return fmt.Errorf("closed for not reading %v, for the queue %v, for a write %v; %v sockets open; pong limit %v", read, queue, write, open, th.metric("lockhub_hub_limit_hits_total", "limit=pong_timeout"))
		}
		return nil
	})
	if got := th.metric("lockhub_hub_slow_disconnects_total", "reason=queue") + th.metric("lockhub_hub_slow_disconnects_total", "reason=write"); got != 0 {
		t.Fatalf("closed for its queue or a write timeout (%v), not by the heartbeat: the test proved nothing", got)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var events int
	for {
		_, b, err := stalled.Read(rctx)
		if err != nil {
			if code := websocket.CloseStatus(err); code != -1 {
				t.Fatalf("after %d events the connection ended with close code %d; want no close frame (the kernels were full)", events, code)
			}
			if rctx.Err() != nil {
				t.Fatalf("after %d events the connection did not end: %v", events, err)
			}
			break
		}
		if f, err := protocol.DecodeServerFrame(b); err == nil && f.Event != nil {
			events++
		}
	}
	if events == 0 || events >= 63 {
		t.Fatalf("read %d events of 63 before the end; want those the kernels held", events)
	}
	t.Logf("read %d events the kernels held, then the connection ended without a close frame", events)
}

// dialSlow opens a raw socket with a tiny receive buffer, authenticates it, watches
// the type, and stops reading.
func dialSlow(t *testing.T, th *testHub) *websocket.Conn { return dialWatcher(t, th, 4096) }

// dialWatcher opens a raw socket, with a receive buffer of rcvbuf bytes (0: the
// kernel's default), authenticates it, watches the type, and stops reading.
func dialWatcher(t *testing.T, th *testHub, rcvbuf int) *websocket.Conn {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		if rcvbuf == 0 {
			return nil
		}
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	t.Cleanup(hc.CloseIdleConnections)
	ctx := tctx(t)
	ws, _, err := websocket.Dial(ctx, th.url, &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	ws.SetReadLimit(-1)
	write := func(v any) {
		b, _ := json.Marshal(v)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() protocol.ServerFrame {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := protocol.DecodeServerFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	write(protocol.Request{Type: protocol.FrameAuth, Token: th.token("acme", "u-slow")})
	if f := read(); f.Welcome == nil {
		t.Fatalf("got %s, want a welcome", f.Raw)
	}
	write(protocol.Request{ID: "1", Type: protocol.FrameWatch, EntityType: typ})
	if f := read(); f.Snapshot == nil {
		t.Fatalf("got %s, want a snapshot", f.Raw)
	}
	return ws
}

// drain reads ws until it ends and returns its close code.
func drain(t *testing.T, ws *websocket.Conn) websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if _, _, err := ws.Read(ctx); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}
