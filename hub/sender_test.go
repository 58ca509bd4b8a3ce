package hub

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockhub/lockhub/protocol"
)

// senderPair is a sender on the server end of a real loopback WebSocket, made as the
// hub makes one (hijackWriter, frameWriter), and the client end.
type senderPair struct {
	s      *sender
	client *websocket.Conn
	rec    *recordedConn // the server's connection, under frameWriter: its writes
	th     *testHub      // for its metric helper only: no hub runs
}

// newSenderPair makes a senderPair whose sender queues at most queue frames. wrap,
// when set, is given the server's connection and returns what the sender writes to.
// Everything is closed and joined when the test ends.
func newSenderPair(t *testing.T, queue int, wrap func(net.Conn) net.Conn) *senderPair {
	t.Helper()
	type accepted struct {
		ws  *websocket.Conn
		hw  *hijackWriter
		rec *recordedConn
	}
	acc := make(chan accepted, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := make(chan *recordedConn, 1)
		hw := &hijackWriter{ResponseWriter: wrappingHijacker{w, wrap, got}}
		ws, err := websocket.Accept(hw, r, nil)
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		acc <- accepted{ws, hw, <-got}
	}))
	t.Cleanup(srv.Close)
	client, _, err := websocket.Dial(tctx(t), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	client.SetReadLimit(1 << 20)
	a := <-acc
	reg := prometheus.NewRegistry()
	ctx := context.Background()
	cfg := &senderConfig{queue: queue, writeTimeout: waitTimeout, ctx: ctx, writeCtx: ctx, met: newMetrics(reg)}
	s := &sender{ws: a.ws, nc: a.hw.netConn, frames: a.hw.frames, cfg: cfg}
	t.Cleanup(func() {
		s.stop()
		_ = client.CloseNow()
		_ = a.ws.CloseNow()
		s.wait()
	})
	return &senderPair{s: s, client: client, rec: a.rec, th: &testHub{t: t, reg: reg}}
}

// wrappingHijacker hands out its hijacked connection wrapped (wrap, when set), then
// recorded.
type wrappingHijacker struct {
	http.ResponseWriter
	wrap func(net.Conn) net.Conn
	got  chan *recordedConn
}

func (h wrappingHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := h.ResponseWriter.(http.Hijacker).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if h.wrap != nil {
		nc = h.wrap(nc)
	}
	rc := &recordedConn{Conn: nc}
	h.got <- rc
	if sc, ok := nc.(syscall.Conn); ok && h.wrap != nil {
		// Wrapped into a connection whose descriptor can be reached, as net/http's
		// is: the fan-out's direct writes reach it too, unrecorded (pushwire_test.go).
		return rawRecordedConn{rc, sc}, brw, nil
	}
	return rc, brw, nil
}

// answer and event are frames of the two kinds the sender tells apart (isAnswer).
func answer(s string) outFrame { return outFrame{b: []byte(s), typ: protocol.FrameResult} }
func event(s string) outFrame  { return outFrame{b: []byte(s), typ: protocol.FrameLock} }

// presence is a list of viewers of entity at version v, answering a request or not.
func presence(s, entity string, v int64, answers bool) outFrame {
	return outFrame{b: []byte(s), typ: protocol.FramePresence, entity: entity, version: v, answer: answers}
}

// read reads the client's next frames and fails unless they are want, in order.
func (p *senderPair) read(t *testing.T, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for i, w := range want {
		_, b, err := p.client.Read(ctx)
		if err != nil {
			t.Fatalf("frame %d of %q: %v", i, want, err)
		}
		if string(b) != w {
			t.Fatalf("frame %d: got %q, want %q (of %q)", i, b, w, want)
		}
	}
}

// readClose reads the client's next frame, which must be the close frame with code.
func (p *senderPair) readClose(t *testing.T, code websocket.StatusCode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, b, err := p.client.Read(ctx)
	if err == nil {
		t.Fatalf("got %q, want the close frame %d", b, code)
	}
	if got := websocket.CloseStatus(err); got != code {
		t.Fatalf("read: %v, want the close frame %d", err, code)
	}
}

// state returns what s has queued and whether a writer runs.
func (s *sender) state() (queued int, writing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue), s.writing
}

// idle waits until s has no writer and nothing queued.
func (p *senderPair) idle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		n, writing := p.s.state()
		if n == 0 && !writing {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d queued, writing %v", n, writing)
		}
		runtime.Gosched()
	}
}

// TestSenderQueueThenWrite: a frame queued on an idle sender starts the writer, which
// writes it and exits; an answer queued while a handler runs stays queued, no writer
// started, until the handler writes it (writeAnswers); an event does not wait for the
// handler.
func TestSenderQueueThenWrite(t *testing.T) {
	p := newSenderPair(t, 8, nil)
	p.s.send(answer("a1"))
	p.read(t, "a1")
	p.idle(t)
	if n := p.s.writesDone(); n != 1 {
		t.Fatalf("%d batches counted written, want 1", n)
	}

	p.s.beginAnswers()
	p.s.send(answer("a2"))
	p.s.send(answer("a3"))
	if n, writing := p.s.state(); n != 2 || writing {
		t.Fatalf("answers of a running handler: %d queued, writing %v; want 2 queued for the handler", n, writing)
	}
	p.s.writeAnswers()
	if n, writing := p.s.state(); n != 0 || writing {
		t.Fatalf("after writeAnswers: %d queued, writing %v", n, writing)
	}
	p.read(t, "a2", "a3")
	if n := p.s.writesDone(); n != 2 {
		t.Fatalf("%d batches counted written, want 2: a1, then a2 and a3 together", n)
	}

	p.s.send(event("e1")) // the handler may be waiting on Redis: not left to it
	p.read(t, "e1")
	p.idle(t)
	p.s.send(answer("a4"))
	p.s.endAnswers() // the handler leaves a4 to a writer
	p.read(t, "a4")
	p.idle(t)
	if got := p.th.metric("lockhub_hub_frames_out_total", "type=result"); got != 4 {
		t.Errorf("results counted written: %v, want 4", got)
	}
}

// TestSenderOverflow: a queue or a hold that would grow past the limit closes the
// socket with 4429, what was queued dropped, counted as a slow queue.
func TestSenderOverflow(t *testing.T) {
	for _, tc := range []struct {
		name string
		fill func(s *sender, n int)
	}{
		{"queue", func(s *sender, n int) {
			s.beginAnswers() // no writer drains the queue meanwhile
			for i := range n {
				s.send(answer("a" + string(rune('0'+i))))
			}
		}},
		{"hold", func(s *sender, n int) {
			s.beginSnapshot("T")
			for i := range n {
				s.push("T", event("e"+strconv.Itoa(i)))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const queue = 4
			p := newSenderPair(t, queue, nil)
			limit := queue
			if tc.name == "hold" {
				limit = holdFactor * queue
			}
			tc.fill(p.s, limit)
			if p.s.closing() {
				t.Fatalf("closed at %d frames, the limit", limit)
			}
			tc.fill(p.s, 1)
			if !p.s.closing() {
				t.Fatalf("not closed at %d frames", limit+1)
			}
			p.readClose(t, protocol.CloseTooMany)
			if got := p.th.metric("lockhub_hub_slow_disconnects_total", "reason=queue"); got != 1 {
				t.Errorf("slow disconnects (queue): %v, want 1", got)
			}
			if got := p.th.metric("lockhub_hub_closes_total", "code=4429"); got != 1 {
				t.Errorf("closes with 4429: %v, want 1", got)
			}
		})
	}
}

// TestSenderHoldPastQueue: a snapshot's hold may grow past the send queue, up to
// holdFactor times it (a big type's snapshot is read in pages while its events come):
// the snapshot and every held frame are queued behind it, in order, past the queue's
// cap, and a frame pushed before the writer has taken them does not count them
// against the cap.
func TestSenderHoldPastQueue(t *testing.T) {
	const queue = 4
	p := newSenderPair(t, queue, nil)
	p.s.beginAnswers() // no writer takes the queue until writeAnswers
	start := p.s.beginSnapshot("T")
	var want []string
	for i := range 3 * queue {
		name := "e" + strconv.Itoa(i)
		p.s.push("T", event(name))
		want = append(want, name)
	}
	p.s.endSnapshot("T", start, answer("snap"))
	for i := range queue - 1 { // room left behind the admitted frames
		name := "after" + strconv.Itoa(i)
		p.s.send(event(name))
		want = append(want, name)
	}
	if p.s.closing() {
		t.Fatalf("closed holding %d frames behind a snapshot with a queue of %d", 3*queue, queue)
	}
	p.s.writeAnswers()
	p.s.endAnswers()
	p.read(t, append([]string{"snap"}, want...)...)
	p.idle(t)
	if got := p.th.metric("lockhub_hub_slow_disconnects_total", "reason=queue"); got != 0 {
		t.Errorf("slow disconnects (queue): %v, want 0", got)
	}
}

// TestSenderHolds: frames pushed for a key while a snapshot of it is read are held,
// and queued after the snapshot, in order; other keys are not held. A snapshot that
// ends while another of the key is in flight leaves the held frames to it too.
func TestSenderHolds(t *testing.T) {
	p := newSenderPair(t, 8, nil)
	a := p.s.beginSnapshot("T")
	p.s.push("T", event("t1"))
	b := p.s.beginSnapshot("T") // a resync's, say, while a's is read
	p.s.push("T", event("t2"))
	p.s.push("U", event("u1"))
	p.s.push("", event("x1"))
	p.read(t, "u1", "x1") // not held
	p.s.endSnapshot("T", a, answer("snap-a"))
	p.read(t, "snap-a", "t1", "t2")
	p.s.push("T", event("t3")) // b still reads
	p.s.endSnapshot("T", b, answer("snap-b"))
	p.read(t, "snap-b", "t2", "t3")
	p.s.push("T", event("t4")) // no snapshot in flight: not held
	p.read(t, "t4")
	p.s.mu.Lock()
	pending := p.s.pending
	p.s.mu.Unlock()
	if pending != nil {
		t.Errorf("pending %v after the last snapshot, want none", pending)
	}
}

// TestSenderPresenceVersions: a list of an entity's viewers older than one queued is
// dropped, unless it answers a request; forget starts the entity afresh.
func TestSenderPresenceVersions(t *testing.T) {
	p := newSenderPair(t, 8, nil)
	const e = "T/1"
	p.s.push(e, presence("v5", e, 5, false))
	p.s.push(e, presence("v3", e, 3, false))               // older: dropped
	p.s.push(e, presence("v3 answer", e, 3, true))         // answers a view: queued
	p.s.push(e, presence("v5 again", e, 5, false))         // not newer: dropped
	p.s.push("T/2", presence("other v1", "T/2", 1, false)) // another entity
	p.s.push(e, presence("v6", e, 6, false))
	p.s.send(answer("end"))
	p.read(t, "v5", "v3 answer", "other v1", "v6", "end")
	p.s.forget(e) // unview
	p.s.push(e, presence("v2", e, 2, false))
	p.read(t, "v2")
}

// TestSenderBatchesAnswers: the answers a handler queued leave in one write(2); a lone
// small frame leaves as it is, in one too.
func TestSenderBatchesAnswers(t *testing.T) {
	p := newSenderPair(t, 8, nil)
	n := p.rec.count()
	p.s.beginAnswers()
	p.s.send(answer(`{"type":"welcome"}`))
	p.s.send(answer(`{"type":"snapshot","locks":[` + strings.Repeat(`{"entityUid":"r-1"},`, 40) + `{}]}`)) // larger than the write buffer
	p.s.send(answer(`{"type":"pong"}`))
	p.s.writeAnswers()
	p.s.endAnswers()
	if w := p.rec.since(n); len(w) != 1 {
		t.Errorf("three answers left in writes of %v bytes, want one write", w)
	}
	p.read(t, `{"type":"welcome"}`)
	p.read(t, `{"type":"snapshot","locks":[`+strings.Repeat(`{"entityUid":"r-1"},`, 40)+`{}]}`, `{"type":"pong"}`)

	n = p.rec.count()
	p.s.send(event("lone"))
	p.read(t, "lone")
	p.idle(t)
	if w := p.rec.since(n); len(w) != 1 {
		t.Errorf("a lone event left in writes of %v bytes, want one write", w)
	}
}

// TestSenderNothingAfterClose: once closing, nothing is queued, held or written: the
// client reads the close frame next, and the connection sees no write after it.
// After stop, nothing is held either.
func TestSenderNothingAfterClose(t *testing.T) {
	p := newSenderPair(t, 8, nil)
	p.s.send(event("before"))
	p.read(t, "before")
	p.idle(t)
	n := p.rec.count()
	p.s.beginAnswers()
	p.s.send(answer("queued, then dropped by the close"))
	p.s.close(protocol.CloseGoingAway, reasonShutdown)
	p.s.close(protocol.CloseTooMany, reasonTooSlow) // only the first counts
	p.s.send(event("after"))
	p.s.send(answer("after"))
	p.s.writeAnswers()
	p.s.endAnswers()
	start := p.s.beginSnapshot("T")
	p.s.push("T", event("held after"))
	p.s.endSnapshot("T", start, answer("snapshot after"))
	p.readClose(t, protocol.CloseGoingAway)
	if code := p.s.stop(); code != protocol.CloseGoingAway {
		t.Errorf("stop: code %d, want %d", code, protocol.CloseGoingAway)
	}
	p.s.wait() // the closer has read the echo, or failed: nothing is written any more
	if w := p.rec.since(n); len(w) != 1 {
		t.Errorf("writes of %v bytes after close, want the close frame's alone", w)
	}
	if got := p.th.metric("lockhub_hub_closes_total"); got != 1 {
		t.Errorf("closes counted: %v, want 1", got)
	}
	if got := p.th.metric("lockhub_hub_frames_out_total"); got != 1 {
		t.Errorf("frames counted written: %v, want 1 (before the close)", got)
	}
	if p.s.beginSnapshot("T") != 0 || p.s.pending != nil {
		t.Error("a stopped sender holds frames")
	}
}

// gateConn stops the first write after arm until open is closed, telling entered when
// it begins; other writes pass.
type gateConn struct {
	net.Conn
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	open    chan struct{}
}

func (g *gateConn) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

func (g *gateConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	wait := g.armed
	g.armed = false
	g.mu.Unlock()
	if wait {
		close(g.entered)
		<-g.open
	}
	return g.Conn.Write(p)
}

// TestSenderCloseAfterHeld: a close that comes while a batch is being written leaves
// its close frame after the batch, not within or before it (RFC 6455 §5.5.1): the
// batch's write is stopped in the connection until the closer is seen waiting for it.
func TestSenderCloseAfterHeld(t *testing.T) {
	gate := &gateConn{entered: make(chan struct{}), open: make(chan struct{})}
	openGate := sync.OnceFunc(func() { close(gate.open) })
	defer openGate() // a failed check still lets the writes end
	p := newSenderPair(t, 8, func(nc net.Conn) net.Conn { gate.Conn = nc; return gate })
	gate.arm()
	p.s.beginAnswers()
	p.s.send(answer("held 1"))
	p.s.send(answer("held 2"))
	p.s.endAnswers() // a writer goroutine writes both, held, in one write
	select {
	case <-gate.entered:
	case <-time.After(waitTimeout):
		t.Fatal("the batch was not written")
	}
	p.s.close(protocol.CloseGoingAway, reasonShutdown)
	deadline := time.Now().Add(waitTimeout)
	for !blockedIn("sync.Mutex.Lock", "(*frameWriter).Write") {
		if time.Now().After(deadline) {
			t.Fatal("the close frame's writer did not wait for the held batch")
		}
		runtime.Gosched()
	}
	openGate()
	p.read(t, "held 1", "held 2")
	p.readClose(t, protocol.CloseGoingAway)
}
