package hub

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

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

// dialSlow opens a raw socket with a tiny receive buffer, authenticates it, watches
// the type, and stops reading.
func dialSlow(t *testing.T, th *testHub) *websocket.Conn {
	t.Helper()
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
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
