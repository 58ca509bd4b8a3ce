package hub

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
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
	w.frames = newFrameWriter(nc)
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
//
// tryWrite is the fan-out's way past all of that: an event framed once for all its
// watchers (textFrame) is written to an idle socket by the feed's goroutine itself, in
// a write(2) that never waits (see sender.pushWire). Every write to the connection is
// made under mu, so nothing can come between the bytes of two frames; what the kernel
// did not take of a frame (rest) leaves before anything else does.
type frameWriter struct {
	nc  net.Conn
	raw syscall.RawConn // nc's descriptor, for tryWrite; nil when nc has none
	// mu guards what follows and is held across every write to nc: release's, Write's
	// and tryWrite's. So a frame that comes during a write (a Pong, the close frame)
	// leaves after it, never before, and never inside what is held or left over.
	// tryWrite only tries it: the feed never waits for a socket.
	mu      sync.Mutex
	holding bool
	held    *[]byte // from frameBufs; nil when nothing is held
	// rest is what the kernel did not take of a frame tryWrite wrote (a suffix of
	// the event's shared wire bytes, never modified); the sender's writer flushes it
	// (flush), and any other write sends it first.
	rest []byte
	// closing is set once coder/websocket wrote a close frame (its own, or the echo of
	// the client's): tryWrite writes no data frame after it (RFC 6455 §5.5.1).
	closing bool
}

func newFrameWriter(nc net.Conn) *frameWriter {
	w := &frameWriter{nc: nc}
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			w.raw = raw
		}
	}
	return w
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
	if err := w.flushLocked(); err != nil {
		putFrameBuf(held)
		return err
	}
	if held == nil {
		return nil
	}
	_, err := w.nc.Write(*held)
	putFrameBuf(held)
	return err
}

// flush writes what tryWrite left over, waiting for the socket under the connection's
// write deadline.
func (w *frameWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

// flushLocked is flush with mu held. What it fails to write is dropped: the
// connection is broken mid-frame and will be closed.
func (w *frameWriter) flushLocked() error {
	if w.rest == nil {
		return nil
	}
	rest := w.rest
	w.rest = nil
	_, err := w.nc.Write(rest)
	return err
}

// closeFrame is the first byte of a close frame as a server writes it: FIN, opcode 8.
const closeFrame = 0x88

// errMaybeClosed is writeParts' answer once Write took a write for a close frame: a
// guess, which a piece of a data frame that starts with closeFrame (a UTF-8
// continuation byte, as in "ш") also makes.
var errMaybeClosed = errors.New("hub: a close frame may have gone; write through coder/websocket")

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Each control frame comes whole, in one call at a frame's start (a data frame
	// larger than the buffer may come in pieces, so a piece that happens to start
	// with this byte costs its socket the fan-out's direct writes, nothing else).
	if len(p) > 0 && len(p) <= 2+125 && p[0] == closeFrame {
		w.closing = true
	}
	if err := w.flushLocked(); err != nil {
		return 0, err
	}
	if !w.holding {
		return w.nc.Write(p)
	}
	held := w.held
	if held == nil {
		held = frameBufs.Get().(*[]byte)
		w.held = held
	}
	if len(*held)+len(p) <= maxFrameBuf {
		*held = append(*held, p...)
		return len(p), nil
	}
	// More than a pooled buffer keeps (a snapshot of hundreds of locks): what is held
	// leaves now, with p, rather than be copied into an ever larger buffer. No other
	// frame can come between (coder/websocket's write lock), nor release (its caller
	// writes this frame).
	w.held = nil
	first := int64(len(*held))
	bufs := net.Buffers{*held, p} // one writev(2) on a TCP connection
	n, err := bufs.WriteTo(w.nc)
	putFrameBuf(held)
	return int(max(n-first, 0)), err
}

// tryResult is what tryWrite did.
type tryResult int

const (
	tryNot     tryResult = iota // nothing written: queue the frame as usual
	tryDone                     // the whole frame is written
	tryPartial                  // part of it is written; flush writes the rest
)

// tryWrite writes frame, whole websocket frames (textFrame), in one write(2) that
// never waits: not at all when another write holds the connection, something is held
// or left over, or a close frame went; what the kernel does not take now is kept for
// flush. An error other than a full socket writes nothing: the writer, trying the
// usual way, meets it again and reports it.
func (w *frameWriter) tryWrite(frame []byte) tryResult {
	if w.raw == nil || !w.mu.TryLock() {
		return tryNot
	}
	defer w.mu.Unlock()
	if w.holding || w.rest != nil || w.closing {
		return tryNot
	}
	var n int
	var werr error
	err := w.raw.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), frame)
		return true // never wait for the socket: flush does
	})
	switch {
	case err != nil: // closed, or a write deadline of a writer's passed
		return tryNot
	case werr == nil && n == len(frame):
		return tryDone
	case werr == nil || werr == syscall.EAGAIN || werr == syscall.EINTR:
		w.rest = frame[max(n, 0):]
		return tryPartial
	default: // EPIPE, ECONNRESET: nothing was written
		return tryNot
	}
}

// writeParts writes one text frame whose payload is parts one after another, with what
// is held before it, in one writev(2) that waits for the socket under the connection's
// write deadline, without copying the parts (a big answer's locks, shared by every
// socket it answers). Only the sender's writer calls it, between whole messages of
// coder/websocket, which flushes each one: nothing of coder/websocket's is buffered, and
// its control frames come whole under mu, before or after this frame. When Write took
// something for a close frame it writes nothing and answers errMaybeClosed: the guess
// may be a piece of a data frame (see Write), and the caller writes the frame through
// coder/websocket, which knows.
func (w *frameWriter) writeParts(parts ...[]byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return errMaybeClosed
	}
	if err := w.flushLocked(); err != nil {
		return err
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	// The frame's header and its first part (the answer's head, a few dozen bytes)
	// join what is held, or a buffer of their own.
	head := w.held
	w.held = nil
	if head == nil {
		head = frameBufs.Get().(*[]byte)
	}
	defer putFrameBuf(head)
	*head = append(frameHeader(*head, n), parts[0]...)
	bufs := make(net.Buffers, 0, len(parts))
	bufs = append(bufs, *head)
	for _, p := range parts[1:] {
		if len(p) > 0 {
			bufs = append(bufs, p)
		}
	}
	_, err := bufs.WriteTo(w.nc) // writev(2), again for what the kernel did not take
	return err
}

// textFrame appends to dst payload as one unmasked text frame, as a server sends it
// (RFC 6455 §5.2): what coder/websocket would write for it, made once for every socket.
func textFrame(dst, payload []byte) []byte {
	return append(frameHeader(dst, len(payload)), payload...)
}

// frameHeader appends to dst the header of an unmasked text frame of n bytes.
func frameHeader(dst []byte, n int) []byte {
	const finText = 0x81
	switch {
	case n <= 125:
		return append(dst, finText, byte(n))
	case n <= 0xffff:
		return append(dst, finText, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, finText, 127)
		return binary.BigEndian.AppendUint64(dst, uint64(n))
	}
}
