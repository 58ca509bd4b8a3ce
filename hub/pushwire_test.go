package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// The fan-out's direct writes (sender.pushWire, frameWriter.tryWrite): an event
// written to an idle socket by the feed's goroutine, framed once for every socket.

// rawRecordedConn is a recordedConn that lets its descriptor be reached, as the
// connection net/http hijacks does: tryWrite writes to it directly, unrecorded.
// newSenderPair makes one when its wrap returns a connection that has one.
type rawRecordedConn struct {
	*recordedConn
	sc syscall.Conn
}

func (c rawRecordedConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

// tcpPair returns the two ends of a loopback TCP connection, closed when the test ends.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept() // nil on error: the Dial below fails too
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-acc
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = s.Close(); _ = c.Close() })
	return s.(*net.TCPConn), c.(*net.TCPConn)
}

// wirePayload is an event's payload of n bytes that names its index.
func wirePayload(i, n int) []byte {
	p := []byte(fmt.Sprintf(`{"i":%d,"pad":"`, i))
	p = append(p, bytes.Repeat([]byte("x"), max(n-len(p)-2, 0))...)
	return append(p, `"}`...)
}

// readWire is senderPair.read for frames too long to print: a frame that differs is
// named by its length and first bytes.
func readWire(t *testing.T, p *senderPair, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	short := func(s string) string { return fmt.Sprintf("%d bytes %.40q", len(s), s) }
	for i, w := range want {
		_, b, err := p.client.Read(ctx)
		if err != nil {
			t.Fatalf("frame %d of %d (%s): %v", i, len(want), short(w), err)
		}
		if string(b) != w {
			t.Fatalf("frame %d of %d: got %s, want %s", i, len(want), short(string(b)), short(w))
		}
	}
}

// TestPushWireIdle: an event pushed to an idle socket is written at once, with no
// writer started and nothing queued, and the client reads it whole, in each of the
// three lengths a frame header has (RFC 6455 §5.2: up to 125 bytes, up to 64 KiB,
// more).
func TestPushWireIdle(t *testing.T) {
	p := newSenderPair(t, 8, func(c net.Conn) net.Conn { return c })
	if p.s.frames.raw == nil {
		t.Fatal("the test connection has no descriptor: the direct write is never tried")
	}
	for i, n := range []int{0, 40, 125, 126, 300, 65535, 65536, 200_000} {
		payload := wirePayload(i, n)
		if n == 0 {
			payload = nil
		}
		p.s.pushWire("T", event(string(payload)), textFrame(nil, payload))
		if queued, writing := p.s.state(); queued != 0 || writing {
			// A frame of 200 KB may not fit the socket's buffer at once: its rest is the
			// writer's. Every smaller one must have gone in the call.
			if n < 200_000 {
				t.Fatalf("%d bytes: %d queued, writing %v after pushWire: not written directly", n, queued, writing)
			}
		}
		readWire(t, p, string(payload))
	}
	p.idle(t)
	if got := p.th.metric("lockhub_hub_frames_out_total", "type=lock"); got != 8 {
		t.Errorf("events counted written: %v, want 8", got)
	}
	if got := p.s.writesDone(); got < 8 {
		t.Errorf("writes counted for the heartbeat: %d, want at least 8", got)
	}
}

// TestPushWireFullSocket: a client that stops reading fills its socket; the event the
// kernel takes only part of is finished by a writer goroutine, and the events and an
// answer pushed meanwhile go behind it. Once the client reads again every frame
// arrives whole and in order.
func TestPushWireFullSocket(t *testing.T) {
	p := newSenderPair(t, 64, func(c net.Conn) net.Conn {
		_ = c.(*net.TCPConn).SetWriteBuffer(64 << 10) // fill it in a few frames, not megabytes
		return c
	})
	var want []string
	push := func() {
		i := len(want)
		payload := wirePayload(i, 30_000)
		p.s.pushWire("T", event(string(payload)), textFrame(nil, payload))
		want = append(want, string(payload))
	}
	for {
		push()
		if _, writing := p.s.state(); writing {
			break // the socket is full: a writer waits on it
		}
		if len(want) > 10_000 {
			t.Fatal("10,000 events of 30 KB and the socket never filled")
		}
	}
	for range 5 {
		push()
	}
	p.s.send(answer("after"))
	if _, writing := p.s.state(); !writing {
		t.Fatal("no writer finishes the event the socket took only part of")
	}
	readWire(t, p, append(want, "after")...)
	p.idle(t)
	if p.s.closing() {
		t.Fatal("the socket was closed")
	}
}

// TestFrameWriterRestFirst: what tryWrite could not write leaves before anything
// written after it: tryWrite tries nothing more meanwhile, and a control frame
// coder/websocket writes (here a Ping) waits for the rest and follows it. The bytes
// the client reads are every frame, whole, in order.
func TestFrameWriterRestFirst(t *testing.T) {
	server, client := tcpPair(t)
	_ = server.SetWriteBuffer(32 << 10)
	_ = client.SetReadBuffer(32 << 10)
	w := newFrameWriter(server)
	var sent bytes.Buffer
	for i := 0; ; i++ {
		frame := textFrame(nil, wirePayload(i, 20_000))
		r := w.tryWrite(frame)
		if r == tryNot {
			t.Fatalf("frame %d: not tried on an idle connection", i)
		}
		sent.Write(frame)
		if r == tryPartial {
			break
		}
		if i > 10_000 {
			t.Fatal("10,000 frames of 20 KB and the socket never filled")
		}
	}
	if r := w.tryWrite(textFrame(nil, []byte("late"))); r != tryNot {
		t.Fatalf("tryWrite with a rest pending: %v, want tryNot", r)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client) // to the end: the test closes the server side
		got <- b
	}()
	ping := []byte{0x89, 0x00} // a Ping, as coder/websocket writes it
	if _, err := w.Write(ping); err != nil {
		t.Fatal(err)
	}
	sent.Write(ping)
	if r := w.tryWrite(textFrame(nil, []byte("next"))); r != tryDone {
		t.Fatalf("tryWrite once the rest is out: %v, want tryDone", r)
	}
	sent.Write(textFrame(nil, []byte("next")))
	_ = server.Close()
	select {
	case b := <-got:
		if !bytes.Equal(b, sent.Bytes()) {
			t.Fatalf("the client read %d bytes, not the %d written in order", len(b), sent.Len())
		}
	case <-time.After(waitTimeout):
		t.Fatal("the client read nothing to the end")
	}
}

// TestFrameWriterTryNot: tryWrite writes nothing while another write holds the
// connection, while frames are held, after a close frame, or on a closed connection.
func TestFrameWriterTryNot(t *testing.T) {
	frame := textFrame(nil, []byte(`{"op":"Acquired"}`))
	for _, tc := range []struct {
		name string
		set  func(w *frameWriter, server net.Conn) (undo func())
	}{
		{"another write", func(w *frameWriter, _ net.Conn) func() {
			w.mu.Lock()
			return w.mu.Unlock
		}},
		{"holding", func(w *frameWriter, _ net.Conn) func() {
			w.hold()
			return func() {}
		}},
		{"after a close frame", func(w *frameWriter, _ net.Conn) func() {
			if _, err := w.Write([]byte{closeFrame, 2, 0x03, 0xe8}); err != nil { // 1000
				t.Fatal(err)
			}
			return func() {}
		}},
		{"closed", func(_ *frameWriter, server net.Conn) func() {
			_ = server.Close()
			return func() {}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, client := tcpPair(t)
			w := newFrameWriter(server)
			undo := tc.set(w, server)
			r := w.tryWrite(frame)
			undo()
			if r != tryNot {
				t.Fatalf("tryWrite: %v, want tryNot", r)
			}
			_ = server.Close()
			b, _ := io.ReadAll(client)
			if bytes.Contains(b, []byte("Acquired")) {
				t.Fatalf("the frame was written: %q", b)
			}
		})
	}
}

// TestFanoutSplit: a crowd of more than fanoutSplit watchers has each event written by
// several goroutines (two at least, on one core too); every watcher still gets
// every event, once and in order, and the events delivered are counted once.
func TestFanoutSplit(t *testing.T) {
	if runtime.GOMAXPROCS(0) == 1 { // one core: the fan-out would not be split
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	watchers := make([]*protocol.Client, fanoutSplit+44)
	for i := range watchers {
		watchers[i], _ = th.dial("acme", "u-w"+itoa(i))
		if _, err := watchers[i].Watch(ctx, typ); err != nil {
			t.Fatal(err)
		}
	}
	holder, _ := th.dial("acme", "u-holder")
	const events = 4
	for k := range events {
		expect(t, protocol.OutcomeAcquired)(holder.Claim(ctx, typ, "r-"+itoa(k)))
	}
	for _, w := range watchers {
		for k := range events {
			wantEvent(t, w, protocol.OpAcquired, "r-"+itoa(k))
		}
	}
	// An event is counted once every watcher has it queued (feed.Change): the last may
	// be read before then. Wait for the count, then check it counted each once.
	want := float64(events * len(watchers))
	redistest.Eventually(t, "the events delivered counted", func() bool { return th.metric("lockhub_hub_events_delivered_total") >= want })
	if got := th.metric("lockhub_hub_events_delivered_total"); got != want {
		t.Errorf("events delivered: %v, want %v", got, want)
	}
}

// TestSharedBodyFrames: a frame whose locks are a shared body (outFrame.body) reaches
// the client whole, in order among frames written the usual way and among held ones,
// in each length a frame header has, and the shared bytes are not modified.
func TestSharedBodyFrames(t *testing.T) {
	p := newSenderPair(t, 64, func(c net.Conn) net.Conn { return c })
	body := wirePayload(0, 300_000) // a snapshot's worth of locks, shared
	shared := bytes.Clone(body)
	big := outFrame{b: []byte(`{"id":"1","locks":`), body: body, tail: closeBrace, typ: protocol.FrameResult}
	small := outFrame{b: []byte(`{"id":"2","locks":`), body: []byte("[]"), tail: closeBrace, typ: protocol.FrameResult}
	mid := outFrame{b: []byte(`{"id":"3","locks":`), body: wirePayload(3, 70_000), tail: closeBrace, typ: protocol.FrameResult}

	// Alone on an idle socket: one writev of its own.
	p.s.send(big)
	readWire(t, p, string(big.payload()))
	p.idle(t)

	// In one batch with frames written the usual way: held, then written in order.
	p.s.mu.Lock() // the frames queue together, one batch for the writer
	for _, f := range []outFrame{answer("a1"), big, answer("a2"), small, mid, answer("a3")} {
		p.s.pushLocked("", f)
	}
	p.s.mu.Unlock()
	readWire(t, p, "a1", string(big.payload()), "a2", string(small.payload()), string(mid.payload()), "a3")
	p.idle(t)
	if !bytes.Equal(body, shared) {
		t.Fatal("writing the frame modified its shared body")
	}
	if got := p.th.metric("lockhub_hub_frames_out_total", "type=result"); got != 7 {
		t.Errorf("frames counted written: %v, want 7", got)
	}
}

// TestWritePartsAfterClose: once a close frame went, writeParts writes nothing and
// says so.
func TestWritePartsAfterClose(t *testing.T) {
	server, client := tcpPair(t)
	w := newFrameWriter(server)
	if _, err := w.Write([]byte{closeFrame, 2, 0x03, 0xe8}); err != nil { // 1000
		t.Fatal(err)
	}
	if err := w.writeParts([]byte(`{"locks":`), []byte(`["Acquired"]`), closeBrace); !errors.Is(err, errMaybeClosed) {
		t.Fatalf("writeParts after a close frame: %v, want errMaybeClosed", err)
	}
	_ = server.Close()
	b, _ := io.ReadAll(client)
	if bytes.Contains(b, []byte("Acquired")) {
		t.Fatalf("the frame was written after the close frame: %q", b)
	}
}

// TestSharedBodyAfterFalseClose: a piece of a data frame that starts like a close frame
// (the payload byte 0x88 of "ш" where coder/websocket's buffer splits the frame) makes
// Write take it for one; a big answer after it still arrives, written through
// coder/websocket, and so does the frame after that.
func TestSharedBodyAfterFalseClose(t *testing.T) {
	p := newSenderPair(t, 64, func(c net.Conn) net.Conn { return c })
	// A frame of 600 bytes leaves in two writes: the buffer's 512 (4 of header, 508 of
	// payload), then the rest, which starts at payload byte 508.
	payload := bytes.Repeat([]byte("x"), 600)
	copy(payload[507:], "ш") // 0xd1 0x88
	p.s.send(answer(string(payload)))
	readWire(t, p, string(payload))
	p.idle(t)
	p.s.frames.mu.Lock()
	guessed := p.s.frames.closing
	p.s.frames.mu.Unlock()
	if !guessed {
		t.Fatal("the frame's second piece was not taken for a close frame: nothing here tests the guess")
	}
	big := outFrame{b: []byte(`{"id":"1","locks":`), body: wirePayload(1, 100_000), tail: closeBrace, typ: protocol.FrameResult}
	p.s.send(big)
	p.s.send(answer("after"))
	readWire(t, p, string(big.payload()), "after")
}
