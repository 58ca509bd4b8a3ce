package hub

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/protocol"
)

// sender is the outbound path of one socket: every frame the hub sends it, and its
// close frame, go through it. It queues frames in a bounded queue, holds the events of
// a type (or the presence of an entity) while a snapshot of it is read, drops a list of
// viewers older than one queued already, writes what is queued in batches, one write(2)
// each (frameWriter), and closes the socket. Anyone may queue (the handler its
// answers, the feed its events, Run its resync snapshots); none of them ever blocks or
// writes, except a handler, which writes its own answers (writeAnswers). A queue that
// would grow past senderConfig.queue means the client does not read fast enough: the
// socket is closed with 4429 rather than a lock event dropped that it would never know
// it missed (it reconnects and takes a fresh snapshot). One batch that cannot be
// written within WriteTimeout closes it the same way.
//
// # States
//
// A sender is in one of these states, all guarded by mu:
//
//	state      queue                  writer                        code  stopped
//	idle       empty                  none                          0     false
//	writing    frames, or being taken a writer goroutine, or a      0     false
//	                                  handler in its stead
//	answered   answers only           none: a handler runs, and     0     false
//	                                  writes them when it is done
//	closing    dropped                stops before its next frame;  set   false
//	                                  the closer writes the close
//	                                  frame, then waits for the echo
//	stopped    dropped                none (wait joins the last)    any   true
//
// and moves between them so:
//
//	idle      -> writing   push of an event (or of an answer while no handler runs)
//	                       starts the writer goroutine (startWriterLocked)
//	idle      -> answered  push of an answer while a handler runs (answering > 0)
//	answered  -> writing   the handler's writeAnswers after its request, or the
//	                       writer goroutine started by its endAnswers or by an event
//	writing   -> idle      the writer finds the queue empty and returns
//	any       -> closing   close (tooSlow: an overflow, a write timeout, a client that
//	                       stopped reading): queue dropped, closer started
//	any       -> stopped   stop (the socket's teardown): nothing is queued or started
//	                       again
//
// Closing and stopped are final; only the first close counts. Beside the state, two
// things are kept per key, whatever the state until stopped: the frames held while a
// snapshot of the key is read (pending, see beginSnapshot), and the version of the
// last list of an entity's viewers queued (presented).
//
// # Locks and writes
//
// mu is never held across a network write that may wait (pushWire's never does), nor
// while another lock is taken (pushWire only tries frameWriter's): a
// sender's callers hold no lock of the socket's (conn.mu) when they call it, or hold
// the hub's read lock only (the feed), and it calls out (the metrics) with
// mu released. The one lock held across a write is frameWriter's, by release, so that
// the close frame (and a Pong) waits behind the frames held before it and never
// overtakes them (RFC 6455 §5.5.1).
//
// The heartbeat is not the sender's but the socket's (conn.heartbeat): it is timed by
// the socket's one timer, with its auth and token deadlines, under conn.mu. Its Ping
// goes through ws like the Pongs, behind what frameWriter holds; it reads the count of
// the sender's writes (writesDone), and closes through tooSlow.
type sender struct {
	// Set by newConn, read-only after.
	ws     *websocket.Conn
	nc     net.Conn     // the hijacked connection, for write deadlines; nil when there is none
	frames *frameWriter // under ws's write buffer (hijack.go); nil without nc
	cfg    *senderConfig

	// shut is code != 0, for the writer's check between frames without mu.
	shut atomic.Bool
	// writes counts the batches written, for the heartbeat: a client that does not
	// answer its Ping had frames to read if the count grew since the Ping it last
	// answered.
	writes atomic.Uint64

	mu sync.Mutex
	// Guarded by mu.
	queue     []outFrame                // frames waiting for the writer
	admitted  int                       // of them, what endSnapshot queued past the cap: the cap grows by it until the writer takes the queue
	writing   bool                      // a writer runs: the writer goroutine, or a handler in its stead
	answering int                       // handlers running, each of which writes the answers it queues
	pending   map[string]*pendingFrames // per key, frames held while a snapshot is read
	presented map[string]int64          // per viewed entity, the version of the viewers last queued
	code      websocket.StatusCode      // nonzero once closing
	stopped   bool                      // stop was called: start no goroutine, queue nothing
	slow      bool                      // tooSlow counted this socket
	wg        sync.WaitGroup            // the writer goroutine and the closer; Add under mu while !stopped
}

// senderConfig is what the senders of a hub share (Hub.send).
type senderConfig struct {
	queue        int           // Config.SendQueue: the most frames queued; a snapshot's hold, holdFactor times it
	writeTimeout time.Duration // Config.WriteTimeout: for one batch
	// ctx bounds a write where there is no net.Conn to set a deadline on; writeCtx,
	// ctx without its cancelation, is the writes' under a deadline (see writeBatch).
	ctx, writeCtx context.Context
	met           *metrics
}

// outFrame is one encoded server frame and its type, for metrics.
type outFrame struct {
	b   []byte
	typ protocol.FrameType
	// buf, when set, is b's buffer, taken from frameBufs for this frame alone; it goes
	// back once the frame is written (see recycle). Only for a frame queued exactly
	// once, to one socket: a watch's own snapshot.
	buf *[]byte
	// body, when set, is the middle of the payload, shared and never modified (a big
	// list's encoded locks): the payload is b, body, then tail, and goes out from where
	// the three are (frameWriter.writeParts), not copied into one frame. A snapshot of
	// 20,000 locks is 4 MB; copying it for each socket it answers cost the hub a 4 MB
	// allocation and copy per answer (see sharedBody).
	body, tail []byte
	// A presence frame's entity (viewPending) and the version of its viewers: a list
	// older than one the socket was sent already is dropped, unless it answers a
	// request (see pushLocked).
	entity  string
	version int64
	answer  bool
}

// size is f's payload in bytes.
func (f outFrame) size() int { return len(f.b) + len(f.body) + len(f.tail) }

// payload is f's payload in one slice: b itself, or b, body and tail copied together
// (a connection without a net.Conn, which coder/websocket writes whole).
func (f outFrame) payload() []byte {
	if f.body == nil {
		return f.b
	}
	return slices.Concat(f.b, f.body, f.tail)
}

// frameBufs holds the buffers of frames built for one socket and written once (see
// outFrame.buf).
var frameBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxFrameBuf is the largest buffer frameBufs keeps: a snapshot of a few hundred locks.
const maxFrameBuf = 64 << 10

// recycle gives f's buffer back to frameBufs, once f is written. f must not be used
// after.
func (f outFrame) recycle() { putFrameBuf(f.buf) }

// putFrameBuf gives buf (nil: none) back to frameBufs, unless it grew past maxFrameBuf.
func putFrameBuf(buf *[]byte) {
	if buf != nil && cap(*buf) <= maxFrameBuf {
		*buf = (*buf)[:0]
		frameBufs.Put(buf)
	}
}

// idleQueueCap is the largest queue array an idle socket keeps for its next frames.
const idleQueueCap = 8

// send queues f; see push.
func (s *sender) send(f outFrame) { s.push("", f) }

// push queues f, or, when a snapshot of key is being read, holds it until the snapshot
// is queued (see beginSnapshot); key "" is never held. It never blocks.
func (s *sender) push(key string, f outFrame) {
	s.mu.Lock()
	s.pushQueuedLocked(key, f)
}

// holdFactor is how many times the send queue a snapshot's hold may grow to. A snapshot
// of a big type is read in pages (PROTOCOL.md §4), each between other tenants'
// commands and within the tenant's lists' budget, so it may take seconds; the type's
// events meanwhile are held, not written. A bulk load of another program is announced
// at up to about 640 events a second of a type (the sweep's bound), so a hold of the
// queue's 256 closed a grid that opened its type during one with 4429 within 0.4 s
// (lockbench -mode share, 2 runs of 4); 16 times it holds 6 s of that, about 1.2 MB of
// events beside the snapshot's own 3.7 MB for 20,000 locks.
const holdFactor = 16

// pushLocked is push with s.mu held. It reports false when the queue overflowed.
func (s *sender) pushLocked(key string, f outFrame) bool {
	return s.enqueueLocked(key, f, s.cfg.queue+s.admitted)
}

// enqueueLocked is pushLocked with the queue's cap given: endSnapshot admits a
// snapshot and what was held behind it past the send queue's cap (the hold has its
// own), and the writer takes them in one batch.
func (s *sender) enqueueLocked(key string, f outFrame, limit int) bool {
	if s.code != 0 || s.stopped {
		return true // closing: nothing more is written
	}
	if key != "" {
		if p := s.pending[key]; p != nil {
			if len(p.frames) >= holdFactor*s.cfg.queue {
				return false
			}
			p.frames = append(p.frames, f)
			return true
		}
	}
	if f.version != 0 {
		// Lists of an entity's viewers may reach the queue out of order: a change held
		// while a view was answered with a newer list, a resend after a resync. The
		// newest wins; an older one would undo it. An answer is always queued: it
		// answers a request (when not newer, it lists what the last one did).
		switch {
		case f.version > s.presented[f.entity]:
			if s.presented == nil {
				s.presented = map[string]int64{}
			}
			s.presented[f.entity] = f.version
		case !f.answer:
			return true
		}
	}
	if len(s.queue) >= limit {
		return false
	}
	s.queue = append(s.queue, f)
	if s.answering == 0 || !isAnswer(f.typ) {
		s.startWriterLocked()
	}
	return true
}

// pushWire is push for an event, whose wire bytes (textFrame) are made once for every
// socket: on an idle socket (nothing queued or being written, nothing held for key)
// it writes them at once on the caller's goroutine, in a write(2) that never waits
// (frameWriter.tryWrite), where push would start a writer goroutine to write them.
// The fan-out of an event to many idle watchers so costs one write(2) each, with no
// goroutine, scheduling or framing per socket. What the kernel does not take at once
// is written by a writer goroutine, before anything queued after it; a socket whose
// connection another write holds gets the frame queued as by push. It never blocks:
// mu is held across the write that never waits, so nothing is queued in between.
func (s *sender) pushWire(key string, f outFrame, wire []byte) {
	s.mu.Lock()
	if s.writing || len(s.queue) > 0 || s.code != 0 || s.stopped || s.frames == nil || s.pending[key] != nil {
		s.pushQueuedLocked(key, f)
		return
	}
	switch s.frames.tryWrite(wire) {
	case tryNot:
		s.pushQueuedLocked(key, f)
		return
	case tryPartial:
		s.writing = true
		s.wg.Add(1)
		go s.flushLoop()
	}
	s.mu.Unlock()
	s.writes.Add(1)
	s.sent(f)
}

// pushQueuedLocked queues f as push does, with s.mu held, which it releases.
func (s *sender) pushQueuedLocked(key string, f outFrame) {
	ok := s.pushLocked(key, f)
	s.mu.Unlock()
	if !ok {
		s.tooSlow(slowQueue)
	}
}

// isAnswer reports whether a frame of type t answers a request: queued while a
// handler runs, it is the handler's own, written by the handler after the request
// (writeAnswers) rather than by a writer goroutine started for it. Events, presence
// lists and nudges are never left to the handler, which may be waiting on Redis or a
// key set: they start the writer at once.
func isAnswer(t protocol.FrameType) bool {
	return t != protocol.FrameLock && t != protocol.FramePresence && t != protocol.FrameNudge
}

// startWriterLocked starts the writer goroutine for the queued frames, unless one
// writes already. With s.mu held.
func (s *sender) startWriterLocked() {
	if !s.writing && len(s.queue) > 0 && s.code == 0 && !s.stopped {
		s.writing = true
		s.wg.Add(1)
		go s.writeLoop()
	}
}

// forget forgets the version of the viewers of entity last queued: viewing it again
// starts afresh.
func (s *sender) forget(entity string) {
	s.mu.Lock()
	delete(s.presented, entity)
	s.mu.Unlock()
}

// beginAnswers tells the sender that a handler runs, which writes the answers it
// queues itself (writeAnswers) until its endAnswers. Called by the handler goroutine
// first thing.
func (s *sender) beginAnswers() {
	s.mu.Lock()
	s.answering++
	s.mu.Unlock()
}

// endAnswers tells the sender that a handler is gone: what was queued for it to write
// since its last writeAnswers (a resync's snapshot) is written by a writer goroutine,
// unless another handler runs already and will write it.
func (s *sender) endAnswers() {
	s.mu.Lock()
	s.answering--
	if s.answering == 0 {
		s.startWriterLocked()
	}
	s.mu.Unlock()
}

// pendingFrames holds the frames of one key while a snapshot of it is read, so that
// none of them overtakes the snapshot: an event queued before a snapshot that was read
// before the event's change would be undone by it. Each snapshot read in flight (a
// watch, a resync, a view) counts in ops.
type pendingFrames struct {
	frames []outFrame
	ops    int
}

// beginSnapshot starts holding the frames pushed for key (a watched type, or an
// entity's viewPending), and returns where the held frames of this snapshot start.
func (s *sender) beginSnapshot(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return 0
	}
	if s.pending == nil {
		s.pending = map[string]*pendingFrames{}
	}
	p := s.pending[key]
	if p == nil {
		p = &pendingFrames{}
		s.pending[key] = p
	}
	p.ops++
	return len(p.frames)
}

// endSnapshot queues the snapshot, then the frames held since its beginSnapshot. They
// are kept while another snapshot of the key is in flight: that one needs them after
// itself too (a duplicate event is harmless; a watcher applies it as a replace).
func (s *sender) endSnapshot(key string, start int, snap outFrame) {
	s.mu.Lock()
	p := s.pending[key]
	if p == nil { // stopped meanwhile
		s.mu.Unlock()
		return
	}
	p.ops--
	held := p.frames[min(start, len(p.frames)):]
	if p.ops == 0 {
		delete(s.pending, key)
		if len(s.pending) == 0 {
			s.pending = nil // an idle socket keeps no map
		}
	}
	limit := s.cfg.queue + s.admitted + 1 + len(held)
	n := len(s.queue)
	ok := s.enqueueLocked("", snap, limit)
	for _, f := range held {
		f.buf = nil // may be queued again after another snapshot: never recycled
		ok = ok && s.enqueueLocked("", f, limit)
	}
	if ok && s.code == 0 && !s.stopped {
		s.admitted += len(s.queue) - n
	}
	s.mu.Unlock()
	if !ok {
		s.tooSlow(slowQueue)
	}
}

// close closes the socket with code: it drops what is queued, stops the writer before
// its next frame and starts the close handshake on a goroutine joined by wait. Its
// close frame leaves after what frameWriter holds, never before (see release). Only
// the first call counts; it never blocks. The socket's reader sees the end of the
// connection.
func (s *sender) close(code websocket.StatusCode, reason string) {
	s.mu.Lock()
	if s.code != 0 || s.stopped {
		s.mu.Unlock()
		return
	}
	s.code = code
	s.shut.Store(true)
	s.queue, s.admitted = nil, 0
	s.wg.Add(1)
	s.mu.Unlock()
	s.cfg.met.closed(int(code))
	go func() {
		defer s.wg.Done()
		// The handshake waits for the client's echo (coder/websocket bounds each step
		// to 5 s); the socket's reader reads that echo and ends.
		_ = s.ws.Close(code, reason) // a failed handshake still closes the connection
	}()
}

// tooSlow closes a socket whose client does not read fast enough: 4429, counted by
// reason (slowQueue, slowWrite, slowRead). A socket whose connection ended under it
// without the hub closing it is counted all the same, once: a write that times out
// inside coder/websocket (a Ping, a frame) cuts the connection itself, and the socket
// may be torn down before the heartbeat or the writer gets here.
func (s *sender) tooSlow(reason string) {
	s.mu.Lock()
	count := s.code == 0 && !s.slow
	s.slow = s.slow || count
	closed := s.code != 0 || s.stopped
	s.mu.Unlock()
	if count {
		s.cfg.met.slow.WithLabelValues(reason).Inc()
	}
	if !closed {
		s.close(protocol.CloseTooMany, reasonTooSlow)
	}
}

// closing reports whether close was called. Lock-free: any goroutine, any lock held.
func (s *sender) closing() bool { return s.shut.Load() }

// stop ends the sender for the socket's teardown: nothing is queued, held or started
// after it. It returns the close code (0: the hub did not close the socket). The
// writer and the closer end with the connection; wait joins them.
func (s *sender) stop() websocket.StatusCode {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.queue, s.admitted, s.pending, s.presented = nil, 0, nil, nil
	return s.code
}

// writesDone returns how many batches were written.
func (s *sender) writesDone() uint64 { return s.writes.Load() }

// wait joins the writer goroutine and the closer, after stop.
func (s *sender) wait() { s.wg.Wait() }
