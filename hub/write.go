package hub

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/coder/websocket"
)

// The writing of a sender's queue: one writer at a time, the writer goroutine or a
// handler in its stead (see sender). The first frame queued on an empty queue starts
// the writer goroutine, which writes until the queue is empty and then exits, so an
// idle socket has no writer; an answer queued while a handler runs is written by the
// handler itself once its request is done (writeAnswers).

// writeAnswers writes what the request just handled queued, on the handler's own
// goroutine, unless a writer runs already (which writes it). It saves each answer a
// goroutine of its own and that goroutine's stack growth: a socket's setup is two
// answers (welcome, snapshot). Handler only, between beginAnswers and endAnswers.
func (s *sender) writeAnswers() {
	s.mu.Lock()
	if s.writing || len(s.queue) == 0 || s.code != 0 || s.stopped {
		s.mu.Unlock()
		return
	}
	s.writing = true
	s.mu.Unlock()
	s.writeQueued()
}

// writeLoop is writeQueued on a writer goroutine of its own, joined by wait.
func (s *sender) writeLoop() {
	defer s.wg.Done()
	s.writeQueued()
}

// flushLoop is the writer goroutine of a socket whose frame pushWire could write only
// in part: it writes the rest, within WriteTimeout, then what was queued meanwhile.
func (s *sender) flushLoop() {
	defer s.wg.Done()
	_ = s.nc.SetWriteDeadline(time.Now().Add(s.cfg.writeTimeout)) // fails only on a closed conn, which the write reports
	if err := s.frames.flush(); err != nil {
		_ = s.writeFailed(err)
		s.mu.Lock()
		s.writing = false
		s.mu.Unlock()
		return
	}
	s.writes.Add(1)
	s.writeQueued()
}

// writeQueued writes queued frames until the queue is empty or the socket closes. The
// caller has set s.writing; it is cleared on return.
func (s *sender) writeQueued() {
	var batch []outFrame
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.code != 0 || s.stopped {
			if s.nc != nil {
				// coder/websocket writes too (pongs, the close frame), under deadlines
				// of its own: one of ours left armed would fail them later. Cleared
				// under mu, so it cannot clear the deadline of the next writer.
				_ = s.nc.SetWriteDeadline(time.Time{}) // fails only on a closed conn
			}
			s.writing = false
			if cap(s.queue) > idleQueueCap {
				s.queue = nil // an idle socket keeps no burst-sized array
			}
			s.mu.Unlock()
			return
		}
		// Take the whole queue: the next frames queue behind it without waiting for
		// these writes. Reuse the slice just written to spare an allocation.
		batch, s.queue, s.admitted = s.queue, batch[:0], 0
		s.mu.Unlock()

		if err := s.writeBatch(batch); err != nil {
			s.mu.Lock()
			s.writing = false
			s.mu.Unlock()
			return
		}
		clear(batch) // let the frames' bytes go
		s.writes.Add(1)
	}
}

// writeBatch writes frames within WriteTimeout, in one write(2) when there is more than
// one or one larger than the connection's write buffer (frameWriter), and stops early
// once the socket is closing: the close frame goes next, nothing after it. The deadline
// is the connection's own (SetWriteDeadline), not a ctx: a ctx with a deadline costs
// every write a timer and a registration, and this runs once per watcher per event.
func (s *sender) writeBatch(frames []outFrame) error {
	if s.nc == nil {
		for _, f := range frames {
			if s.shut.Load() {
				return nil
			}
			ctx, cancel := context.WithTimeout(s.cfg.ctx, s.cfg.writeTimeout)
			err := s.ws.Write(ctx, websocket.MessageText, f.payload())
			cancel()
			if err != nil {
				return s.writeFailed(err)
			}
			s.sent(f)
		}
		return nil
	}
	_ = s.nc.SetWriteDeadline(time.Now().Add(s.cfg.writeTimeout)) // fails only on a closed conn, which the write reports
	// One frame that fits the buffer leaves in one write(2) as it is (+4: the header of
	// a payload over 125 bytes); anything more is held and released together.
	held := len(frames) > 1 || frames[0].size()+4 > connWriteBuffer
	if held {
		s.frames.hold()
	}
	n := 0
	var err error
	for _, f := range frames {
		if s.shut.Load() {
			break
		}
		if f.body != nil {
			err = s.frames.writeParts(f.b, f.body, f.tail)
			if errors.Is(err, errMaybeClosed) {
				// coder/websocket refuses a frame after a close frame it sent, and
				// writes it otherwise: what was taken for one was a data frame's piece.
				err = s.ws.Write(s.cfg.writeCtx, websocket.MessageText, f.payload())
			}
		} else {
			err = s.ws.Write(s.cfg.writeCtx, websocket.MessageText, f.b)
		}
		if err != nil {
			break
		}
		n++
	}
	if held {
		if rerr := s.frames.release(); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return s.writeFailed(err)
	}
	for _, f := range frames[:n] {
		s.sent(f)
	}
	return nil
}

// writeFailed reports a failed write, closing the socket with 4429 when it timed out:
// only a timeout says the client is slow; other errors are a connection already
// closing.
func (s *sender) writeFailed(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		s.tooSlow(slowWrite)
	}
	return err
}

// sent counts a frame written and gives its buffer back.
func (s *sender) sent(f outFrame) {
	if m := s.cfg.met.out[f.typ]; m != nil {
		m.Inc()
	}
	f.recycle()
}
