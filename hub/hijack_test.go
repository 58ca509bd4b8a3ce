package hub

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// recordedConn records the size of every write to the connection under it.
type recordedConn struct {
	net.Conn
	mu     sync.Mutex
	writes []int
}

func (c *recordedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, len(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// since returns the sizes of the writes after the first n.
func (c *recordedConn) since(n int) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.writes[n:]...)
}

func (c *recordedConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// recordingHijacker hands out its hijacked connection recorded.
type recordingHijacker struct {
	http.ResponseWriter
	got chan *recordedConn
}

func (h recordingHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := h.ResponseWriter.(http.Hijacker).Hijack()
	if err != nil {
		return nil, nil, err
	}
	rc := &recordedConn{Conn: nc}
	h.got <- rc
	return rc, brw, nil
}

// TestFrameWriter: a frame larger than the connection's write buffer, announced with
// whole, leaves in one write(2) and arrives whole; without whole it takes two (what
// coder/websocket does, and what the test would see if joining broke), as does a frame
// too large to copy; every frame arrives whole.
func TestFrameWriter(t *testing.T) {
	type accepted struct {
		ws     *websocket.Conn
		rec    *recordedConn
		frames *frameWriter
	}
	acc := make(chan accepted, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := make(chan *recordedConn, 1)
		hw := &hijackWriter{ResponseWriter: recordingHijacker{w, got}}
		ws, err := websocket.Accept(hw, r, nil)
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		acc <- accepted{ws, <-got, hw.frames}
	}))
	defer srv.Close()
	ctx := tctx(t)
	client, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseNow()
	client.SetReadLimit(1 << 20)
	s := <-acc
	defer s.ws.CloseNow()

	for _, tc := range []struct {
		name   string
		size   int
		whole  bool
		writes int
	}{
		{"small", 300, true, 1},
		{"just fits", connWriteBuffer - 4, true, 1},
		{"one byte over", connWriteBuffer - 3, true, 1},
		{"a snapshot, announced", 4300, true, 1},
		{"a snapshot, not announced", 4300, false, 2},
		{"many buffers", 40 << 10, true, 1},
		{"larger than the pool's buffers", 200 << 10, true, 2},
	} {
		payload := bytes.Repeat([]byte{'a' + byte(tc.size%26)}, tc.size)
		n := s.rec.count()
		w := s.frames
		if !tc.whole {
			w = nil // coder/websocket's own writes
		}
		if err := writeWhole(ctx, s.ws, w, payload); err != nil {
			t.Fatalf("%s: write: %v", tc.name, err)
		}
		_, got, err := client.Read(ctx)
		if err != nil {
			t.Fatalf("%s: read: %v", tc.name, err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("%s: got %d bytes, not the %d written", tc.name, len(got), len(payload))
		}
		if w := s.rec.since(n); len(w) != tc.writes {
			t.Errorf("%s: %d bytes of payload left in writes of %v bytes, want %d write(s)", tc.name, tc.size, w, tc.writes)
		}
	}
}

// TestFrameWriterCutsAHalfFrame: a part held for a frame whose rest never came
// (coder/websocket never does this) is not sent: the client would read half a frame.
// done reports it and closes the connection.
func TestFrameWriterCutsAHalfFrame(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	rec := &recordedConn{Conn: a}
	w := &frameWriter{nc: rec}
	w.whole(4000)
	first := bytes.Repeat([]byte{'x'}, connWriteBuffer)
	if n, err := w.Write(first); n != len(first) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(b)
		read <- err
	}()
	if err := w.done(); !errors.Is(err, errFrameCut) {
		t.Fatalf("done = %v, want errFrameCut", err)
	}
	if err := <-read; err != nil {
		t.Fatalf("the client's read ended with %v, want EOF", err)
	}
	if rec.count() != 0 {
		t.Fatalf("%d writes of a half frame, want none", rec.count())
	}
}
