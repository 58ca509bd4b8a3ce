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
// 4 KiB reader and writer; client frames are small (a claim is ~100 bytes, the cap 64 KiB
// is read through in pieces) and server frames are written whole by coder/websocket, so
// half a KiB each is plenty, and an idle socket then costs a quarter of the buffer
// memory (ISSUE 3's goal: at most 16 KiB of hub memory per idle authenticated socket).
const (
	connReadBuffer  = 512
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
