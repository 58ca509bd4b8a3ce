package hub

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestFrameWriter: frames written between hold and release leave in one write(2) and
// arrive whole and in order: a frame larger than the connection's write buffer, a
// welcome with its snapshot, a batch of events. Without hold they take what
// coder/websocket takes (two writes for a large frame, one per frame), which the test
// would see if holding broke; so does a batch larger than the pool's buffers, whose
// held part leaves with the frame that overflows it (one writev(2) on TCP, two writes
// through the recording conn).
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
		sizes  []int // the frames' payloads
		held   bool  // written between hold and release
		writes int
	}{
		{"small", []int{300}, true, 1},
		{"just fits", []int{connWriteBuffer - 4}, true, 1},
		{"one byte over", []int{connWriteBuffer - 3}, true, 1},
		{"a snapshot", []int{4300}, true, 1},
		{"a snapshot, not held", []int{4300}, false, 2},
		{"many buffers", []int{40 << 10}, true, 1},
		{"a welcome and its snapshot", []int{320, 4300}, true, 1},
		{"a welcome and its snapshot, not held", []int{320, 4300}, false, 3},
		{"a batch of events", []int{300, 300, 300, 300, 300}, true, 1},
		{"larger than the pool's buffers", []int{300, 200 << 10}, true, 2},
	} {
		var payloads [][]byte
		for i, size := range tc.sizes {
			payloads = append(payloads, bytes.Repeat([]byte{'a' + byte((size+i)%26)}, size))
		}
		n := s.rec.count()
		if tc.held {
			s.frames.hold()
		}
		for _, p := range payloads {
			if err := s.ws.Write(ctx, websocket.MessageText, p); err != nil {
				t.Fatalf("%s: write: %v", tc.name, err)
			}
		}
		if tc.held {
			if err := s.frames.release(); err != nil {
				t.Fatalf("%s: release: %v", tc.name, err)
			}
		}
		for i, want := range payloads {
			_, got, err := client.Read(ctx)
			if err != nil {
				t.Fatalf("%s: read: %v", tc.name, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: frame %d: got %d bytes, not the %d written", tc.name, i, len(got), len(want))
			}
		}
		if w := s.rec.since(n); len(w) != tc.writes {
			t.Errorf("%s: frames of %v bytes left in writes of %v bytes, want %d write(s)", tc.name, tc.sizes, w, tc.writes)
		}
	}
	// writeWhole holds a frame larger than the buffer alone, and lets a small one pass.
	for _, size := range []int{300, 4300} {
		n := s.rec.count()
		if err := writeWhole(ctx, s.ws, s.frames, bytes.Repeat([]byte{'w'}, size)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := client.Read(ctx); err != nil {
			t.Fatal(err)
		}
		if w := s.rec.since(n); len(w) != 1 {
			t.Errorf("writeWhole of %d bytes: writes of %v bytes, want one", size, w)
		}
	}
}

// gatedConn is a connection whose first write waits for open to close; every write is
// told on entered when it begins.
type gatedConn struct {
	net.Conn
	entered chan string
	open    chan struct{}
	mu      sync.Mutex
	first   bool
	got     []string // the writes, in the order they ended
}

func (c *gatedConn) Write(p []byte) (int, error) {
	c.entered <- string(p)
	c.mu.Lock()
	wait := !c.first
	c.first = true
	c.mu.Unlock()
	if wait {
		<-c.open
	}
	c.mu.Lock()
	c.got = append(c.got, string(p))
	c.mu.Unlock()
	return len(p), nil
}

// TestFrameWriterKeepsOrder: a frame that coder/websocket writes while release is
// writing what was held (a Pong, the close frame) leaves after it, not before: the
// close frame must follow every frame the hub wrote before closing (RFC 6455 §5.5.1).
// The held write is stopped in the connection until the close frame's writer is seen
// waiting (or, were the order broken, has reached the connection).
func TestFrameWriterKeepsOrder(t *testing.T) {
	gc := &gatedConn{entered: make(chan string, 2), open: make(chan struct{})}
	openGate := sync.OnceFunc(func() { close(gc.open) })
	defer openGate() // a failed check still lets the writes end
	w := &frameWriter{nc: gc}
	w.hold()
	if _, err := w.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() { done <- w.release() }()
	if got := <-gc.entered; got != "held" {
		t.Fatalf("release wrote %q first", got)
	}
	go func() { // the close frame, coming while release writes
		_, err := w.Write([]byte("close"))
		done <- err
	}()
	deadline := time.Now().Add(waitTimeout)
	for !blockedIn("sync.Mutex.Lock", "(*frameWriter).Write") {
		select {
		case got := <-gc.entered:
			t.Fatalf("%q was written while the held frames were", got)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the close frame's writer neither waited nor wrote")
		}
		runtime.Gosched()
	}
	openGate()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"held", "close"}; !slices.Equal(gc.got, want) {
		t.Fatalf("writes %q, want %q", gc.got, want)
	}
}

// blockedIn reports whether some goroutine waits with the reason given (as the
// runtime's stack dump names it) in a function whose name contains fn.
func blockedIn(reason, fn string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, stack, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "["+reason) && strings.Contains(stack, fn) {
			return true
		}
	}
	return false
}
