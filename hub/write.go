package hub

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/protocol"
)

// The write side of a socket: a bounded queue and one writer.
//
// Anyone may queue a frame (the handler its answers, the feed its events, Run its
// resync snapshots); none of them ever blocks or writes. The first frame queued on an
// empty queue starts the writer goroutine, which writes until the queue is empty and
// then exits, so an idle socket has no writer; an answer queued while the handler runs
// is written by the handler itself once its request is done (writeAnswers). A queue
// that would grow past Config.SendQueue means the client does not read fast enough: it is closed with 4429
// rather than dropping a lock event it would never know it missed (it reconnects and
// takes a fresh snapshot). One frame that cannot be written within WriteTimeout drops
// the socket the same way.

// idleQueueCap is the largest queue array an idle socket keeps for its next frames.
const idleQueueCap = 8

// send queues f; see push.
func (c *conn) send(f outFrame) { c.push("", f) }

// sendJSON encodes v and queues it.
func (c *conn) sendJSON(typ protocol.FrameType, v any) { c.send(encodeFrame(typ, v)) }

// push queues f, or, when f is an event of a type whose snapshot is being read, holds
// it until the snapshot is queued (see beginSnapshot). It never blocks.
func (c *conn) push(watchType string, f outFrame) {
	c.mu.Lock()
	ok := c.pushLocked(watchType, f)
	c.mu.Unlock()
	if !ok {
		c.tooSlow(slowQueue)
	}
}

// pushLocked is push with c.mu held. It reports false when the queue overflowed.
func (c *conn) pushLocked(watchType string, f outFrame) bool {
	if c.closeCode != 0 || c.finished {
		return true // closing: nothing more is written
	}
	if watchType != "" {
		if p := c.pending[watchType]; p != nil {
			if len(p.frames) >= c.h.cfg.SendQueue {
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
		case f.version > c.presented[f.entity]:
			if c.presented == nil {
				c.presented = map[string]int64{}
			}
			c.presented[f.entity] = f.version
		case !f.answer:
			return true
		}
	}
	if len(c.queue) >= c.h.cfg.SendQueue {
		return false
	}
	c.queue = append(c.queue, f)
	if !c.handling || !isAnswer(f.typ) {
		c.startWriterLocked()
	}
	return true
}

// startWriterLocked starts the writer goroutine for the queued frames, unless one
// writes already (or the handler writes in its stead). With c.mu held.
func (c *conn) startWriterLocked() {
	if !c.writing && len(c.queue) > 0 && c.closeCode == 0 && !c.finished {
		c.writing = true
		c.wg.Add(1)
		go c.writeLoop()
	}
}

// isAnswer reports whether a frame of type t answers a request: queued while the
// handler runs, it is the handler's own, written by the handler after the request
// (writeAnswers) rather than by a writer goroutine started for it. Events, presence
// lists and nudges are never left to the handler, which may be waiting on Redis or a
// key set: they start the writer at once.
func isAnswer(t protocol.FrameType) bool {
	return t != protocol.FrameLock && t != protocol.FramePresence && t != protocol.FrameNudge
}

// writeAnswers writes what the request just handled queued, on the handler's own
// goroutine, unless a writer runs already (which writes it). It saves each answer a
// goroutine of its own and that goroutine's stack growth: a socket's setup is two
// answers (welcome, snapshot). Handler only.
func (c *conn) writeAnswers() {
	c.mu.Lock()
	if c.writing || len(c.queue) == 0 || c.closeCode != 0 || c.finished {
		c.mu.Unlock()
		return
	}
	c.writing = true
	c.mu.Unlock()
	c.writeQueued()
}

// writeLoop is writeQueued on a writer goroutine of its own, joined by run.
func (c *conn) writeLoop() {
	defer c.wg.Done()
	c.writeQueued()
}

// writeQueued writes queued frames until the queue is empty or the socket closes. The
// caller has set c.writing; it is cleared on return.
func (c *conn) writeQueued() {
	var batch []outFrame
	for {
		c.mu.Lock()
		if len(c.queue) == 0 || c.closeCode != 0 || c.finished {
			if c.netConn != nil {
				// coder/websocket writes too (pongs, the close frame), under deadlines
				// of its own: one of ours left armed would fail them later. Cleared
				// under mu, so it cannot clear the deadline of the next writer.
				_ = c.netConn.SetWriteDeadline(time.Time{}) // fails only on a closed conn
			}
			c.writing = false
			if cap(c.queue) > idleQueueCap {
				c.queue = nil // an idle socket keeps no burst-sized array
			}
			c.mu.Unlock()
			return
		}
		// Take the whole queue: the next frames queue behind it without waiting for
		// these writes. Reuse the slice just written to spare an allocation.
		batch, c.queue = c.queue, batch[:0]
		c.mu.Unlock()

		if err := c.writeBatch(batch); err != nil {
			c.mu.Lock()
			c.writing = false
			c.mu.Unlock()
			return
		}
		clear(batch) // let the frames' bytes go
		c.probe()
	}
}

// writeBatch writes frames within WriteTimeout, in one write(2) when there is more than
// one or one larger than the connection's write buffer (frameWriter), and stops early
// once the socket is closing: the close frame goes next, nothing after it. The deadline
// is the connection's own (SetWriteDeadline), not a ctx: a ctx with a deadline costs
// every write a timer and a registration, and this runs once per watcher per event.
func (c *conn) writeBatch(frames []outFrame) error {
	if c.netConn == nil {
		for _, f := range frames {
			if c.shut.Load() {
				return nil
			}
			ctx, cancel := context.WithTimeout(c.h.ctx, c.h.cfg.WriteTimeout)
			err := c.ws.Write(ctx, websocket.MessageText, f.b)
			cancel()
			if err != nil {
				return c.writeFailed(err)
			}
			c.sent(f)
		}
		return nil
	}
	_ = c.netConn.SetWriteDeadline(time.Now().Add(c.h.cfg.WriteTimeout)) // fails only on a closed conn, which the write reports
	// One frame that fits the buffer leaves in one write(2) as it is (+4: the header of
	// a payload over 125 bytes); anything more is held and released together.
	held := len(frames) > 1 || len(frames[0].b)+4 > connWriteBuffer
	if held {
		c.frames.hold()
	}
	n := 0
	var err error
	for _, f := range frames {
		if c.shut.Load() {
			break
		}
		if err = c.ws.Write(c.h.readCtx, websocket.MessageText, f.b); err != nil {
			break
		}
		n++
	}
	if held {
		if rerr := c.frames.release(); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return c.writeFailed(err)
	}
	for _, f := range frames[:n] {
		c.sent(f)
	}
	return nil
}

// writeFailed reports a failed write, closing the socket with 4429 when it timed out:
// only a timeout says the client is slow; other errors are a connection already
// closing.
func (c *conn) writeFailed(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		c.tooSlow(slowWrite)
	}
	return err
}

// sent counts a frame written and gives its buffer back.
func (c *conn) sent(f outFrame) {
	if m := c.h.met.out[f.typ]; m != nil {
		m.Inc()
	}
	f.recycle()
}

// tooSlow closes a socket whose client does not read fast enough: 4429.
func (c *conn) tooSlow(reason string) {
	c.mu.Lock()
	already := c.closeCode != 0 || c.finished
	c.mu.Unlock()
	if already {
		return
	}
	c.h.met.slow.WithLabelValues(reason).Inc()
	c.closeWith(protocol.CloseTooMany, reasonTooSlow)
}

// pendingFrames holds the events of one type while a snapshot of it is read, so that
// none of them overtakes the snapshot: an event queued before a snapshot that was read
// before the event's change would be undone by it. Each snapshot read in flight (a
// watch, a resync) counts in ops.
type pendingFrames struct {
	frames []outFrame
	ops    int
}

// beginSnapshot starts holding the events of typ, and returns where the held events of
// this snapshot start.
func (c *conn) beginSnapshot(typ string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return 0
	}
	if c.pending == nil {
		c.pending = map[string]*pendingFrames{}
	}
	p := c.pending[typ]
	if p == nil {
		p = &pendingFrames{}
		c.pending[typ] = p
	}
	p.ops++
	return len(p.frames)
}

// endSnapshot queues the snapshot, then the events held since its beginSnapshot. They
// are kept while another snapshot of the type is in flight: that one needs them after
// itself too (a duplicate event is harmless; a watcher applies it as a replace).
func (c *conn) endSnapshot(typ string, start int, snap outFrame) {
	c.mu.Lock()
	p := c.pending[typ]
	if p == nil { // finished meanwhile
		c.mu.Unlock()
		return
	}
	p.ops--
	held := p.frames[min(start, len(p.frames)):]
	if p.ops == 0 {
		delete(c.pending, typ)
		if len(c.pending) == 0 {
			c.pending = nil // an idle socket keeps no map
		}
	}
	ok := c.pushLocked("", snap)
	for _, f := range held {
		f.buf = nil // may be queued again after another snapshot: never recycled
		ok = ok && c.pushLocked("", f)
	}
	c.mu.Unlock()
	if !ok {
		c.tooSlow(slowQueue)
	}
}
