package hub

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
)

// Buffer sizes of an upgraded connection. net/http hands a hijacked connection its own
// 4 KiB reader and writer. Server frames are written whole by coder/websocket, header
// and payload into the writer, then one flush: a frame larger than the writer would
// take two write(2) calls (frameWriter joins them, as it joins a batch of frames), so
// it holds an event (~300 bytes) with room to spare. Client frames are few and small
// (a Pong ~10 bytes, a claim ~150; the cap of 64 KiB is read through in pieces, a
// payload larger than the buffer straight into the caller's slice), so a
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
// writes each frame into that buffer, header then payload, and flushes it once; a frame
// larger than the buffer leaves it in two write(2) calls, two frames in a row in two
// more, and the client wakes and reads for each. Between hold and release, frameWriter
// keeps what it is given and writes it all in one call: the welcome and the snapshot
// of a watch sent with the auth, or a batch of events, are one write for the hub and
// one wake-up for the client. Outside hold and release, writes pass straight through.
//
// Write is called by coder/websocket, one frame at a time, under its write lock (which
// takes in the Pongs and the close frame it writes itself, so what is held is always
// whole frames); hold and release, by the connection's writer around its frames.
type frameWriter struct {
	nc net.Conn
	// mu guards holding and held. release keeps it through its write, so a frame that
	// comes meanwhile (a Pong, the close frame) finds holding over only once what was
	// held is out, and leaves after it, never before. Nothing else holds it across a
	// write: a Pong waits for release only where it would wait for the socket anyway.
	mu      sync.Mutex
	holding bool
	held    *[]byte // from frameBufs; nil when nothing is held
}

// hold keeps what is written from now until release.
func (w *frameWriter) hold() {
	w.mu.Lock()
	w.holding = true
	w.mu.Unlock()
}

// release writes what was held since hold in one write(2), and stops holding.
func (w *frameWriter) release() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holding = false
	held := w.held
	w.held = nil
	if held == nil {
		return nil
	}
	_, err := w.nc.Write(*held)
	putFrameBuf(held)
	return err
}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if !w.holding {
		w.mu.Unlock()
		return w.nc.Write(p)
	}
	held := w.held
	if held == nil {
		held = frameBufs.Get().(*[]byte)
		w.held = held
	}
	if len(*held)+len(p) <= maxFrameBuf {
		*held = append(*held, p...)
		w.mu.Unlock()
		return len(p), nil
	}
	// More than a pooled buffer keeps (a snapshot of hundreds of locks): what is held
	// leaves now, with p, rather than be copied into an ever larger buffer. No other
	// frame can come between (coder/websocket's write lock), nor release (its caller
	// writes this frame).
	w.held = nil
	w.mu.Unlock()
	first := int64(len(*held))
	bufs := net.Buffers{*held, p} // one writev(2) on a TCP connection
	n, err := bufs.WriteTo(w.nc)
	putFrameBuf(held)
	return int(max(n-first, 0)), err
}
