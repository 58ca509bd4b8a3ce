package hub

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
)

// Buffer sizes of an upgraded connection. net/http hands a hijacked connection its own
// 4 KiB reader and writer. Server frames are written whole by coder/websocket, header
// and payload into the writer, then one flush: a frame larger than the writer takes two
// write(2) calls, so it holds an event (~300 bytes) with room to spare. Client frames
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
	netConn net.Conn // set by Hijack
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
	return nc, bufio.NewReadWriter(br, bufio.NewWriterSize(nc, connWriteBuffer)), nil
}
