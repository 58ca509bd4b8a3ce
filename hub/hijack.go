package hub

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/coder/websocket"
)

// Buffer sizes of an upgraded connection. net/http hands a hijacked connection its own
// 4 KiB reader and writer. Server frames are written whole by coder/websocket, header
// and payload into the writer, then one flush: a frame larger than the writer would
// take two write(2) calls (frameWriter joins them), so it holds an event (~300 bytes)
// with room to spare. Client frames
// are few and small (a Pong ~10 bytes, a claim ~150; the cap of 64 KiB is read through
// in pieces, a payload larger than the buffer straight into the caller's slice), so a
// reader of 128 bytes costs a larger one at most one more read(2), and an idle socket
// keeps 384 bytes less (ISSUE 11: at most 12 KiB of RSS per idle authenticated socket).
const (
	connReadBuffer  = 128
	connWriteBuffer = 512
)

// hijackWriter wraps the handshake's ResponseWriter for websocket.Accept: it keeps the
// hijacked net.Conn, so Shutdown can cut a connection whose close handshake hangs, and
// replaces net/http's buffers with small ones.
type hijackWriter struct {
	http.ResponseWriter
	netConn net.Conn     // set by Hijack
	frames  *frameWriter // set by Hijack: under the connection's write buffer
}

// Unwrap lets http.ResponseController reach the original writer.
func (w *hijackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack implements http.Hijacker.
func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hub: the ResponseWriter cannot be hijacked")
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.netConn = nc
	// Bytes the client sent right after its handshake may already sit in net/http's
	// reader; they must stay buffered in ours (coder/websocket re-reads them with Peek).
	var src io.Reader = nc
	size := connReadBuffer
	n := brw.Reader.Buffered()
	if n > 0 {
		early, _ := brw.Reader.Peek(n) // n bytes are buffered: cannot fail
		src = io.MultiReader(bytes.NewReader(bytes.Clone(early)), nc)
		size = max(size, n)
	}
	br := bufio.NewReaderSize(src, size)
	if n > 0 {
		if _, err := br.Peek(n); err != nil {
			return nil, nil, err
		}
	}
	w.frames = &frameWriter{nc: nc}
	return nc, bufio.NewReadWriter(br, bufio.NewWriterSize(w.frames, connWriteBuffer)), nil
}

// frameWriter is what an upgraded connection's write buffer writes to. coder/websocket
// writes a frame into that buffer, header then payload, and flushes it once; a frame
// larger than the buffer leaves it in two write(2) calls, the full buffer and then the
// rest, and the client wakes and reads for each. Told such a frame comes (whole), it
// holds the full buffer and writes it with the rest in one call: a snapshot of 20 locks
// (about 4 KiB) is one write, not two, for the hub and for the client. Every other
// write passes straight through.
//
// Its Write is called by coder/websocket, one at a time (under its write lock); whole
// and done, by the connection's writer around each of its frames.
type frameWriter struct {
	nc net.Conn
	// mu guards next and held; it is never held across a write to nc, so whole and
	// done never wait behind coder/websocket's pong to a client that stopped reading.
	mu   sync.Mutex
	next bool    // the next frame is larger than the buffer
	held *[]byte // that frame's first part, from frameBufs
}

// errFrameCut reports a frame whose first part was held and whose rest never came.
var errFrameCut = errors.New("hub: a frame was cut short after its first part")

// writeWhole writes b to ws as one text message, telling w (nil: none) of it first, so
// that a message larger than the write buffer leaves in one write(2).
func writeWhole(ctx context.Context, ws *websocket.Conn, w *frameWriter, b []byte) error {
	w.whole(len(b))
	err := ws.Write(ctx, websocket.MessageText, b)
	if derr := w.done(); err == nil {
		err = derr
	}
	return err
}

// whole tells w that the frame written next is n bytes of payload, so it holds the
// first part when that frame is larger than the buffer (its header is at least 2
// bytes, and at least 4 above 125 bytes of payload). A frame larger than the pool's
// buffers (maxFrameBuf) is left in two writes: a copy of it would cost more than the
// write it saves.
func (w *frameWriter) whole(n int) {
	if w == nil || n+4 <= connWriteBuffer || n > maxFrameBuf-connWriteBuffer {
		return
	}
	w.mu.Lock()
	w.next = true
	w.mu.Unlock()
}

// done follows the frame announced by whole. A part still held means the frame's rest
// never came (coder/websocket, which writes a larger frame whole, never leaves one):
// the client cannot be sent half a frame, nor anything after it, so the connection is
// cut and done reports it.
func (w *frameWriter) done() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	w.next = false
	held := w.held
	w.held = nil
	w.mu.Unlock()
	if held == nil {
		return nil
	}
	putFrameBuf(held)
	_ = w.nc.Close() // the socket's teardown follows; its error is the one reported
	return errFrameCut
}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	held := w.held
	w.held = nil
	if held == nil && w.next && len(p) == connWriteBuffer {
		// The buffer, full with the frame's start: held for the rest.
		w.next = false
		buf := frameBufs.Get().(*[]byte)
		*buf = append((*buf)[:0], p...)
		w.held = buf
		w.mu.Unlock()
		return len(p), nil
	}
	w.mu.Unlock()
	if held == nil {
		return w.nc.Write(p)
	}
	// The rest of the frame: out with its first part.
	*held = append(*held, p...)
	first := len(*held) - len(p)
	n, err := w.nc.Write(*held)
	putFrameBuf(held)
	return max(n-first, 0), err
}
