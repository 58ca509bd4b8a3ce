package hub

import (
	"errors"
	"log/slog"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/protocol"
)

// The read side of a socket: run's loop reads frames and queues them; a handler
// goroutine answers them one at a time, in order (dispatch.go), so a client's requests
// are served in order and one socket never holds more than one store call in flight.
// The handler exists only while there are frames to answer, so an idle socket is one
// goroutine parked in a read, with a small stack.

// readLoop reads frames until the connection ends.
func (c *conn) readLoop() {
	// Reads end when the socket closes (close handshake, or abort), never by a ctx: a
	// cancelable one would cost every idle socket a registration.
	ctx := c.h.readCtx
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			c.readEnded(err)
			return
		}
		c.mu.Lock()
		for len(c.inbox) >= maxInbox && !c.finished {
			c.room.Wait() // the client sends faster than it is answered: push back
		}
		if !c.finished && !c.out.closing() {
			c.inbox = append(c.inbox, inFrame{typ, data})
			if !c.handling {
				c.handling = true
				c.wg.Add(1)
				go c.handleLoop()
			}
		} // else only the client's close echo matters now
		c.mu.Unlock()
	}
}

// handleLoop answers queued frames until none is left. The answers it queues it
// writes itself (writeAnswers), between its beginAnswers and endAnswers.
func (c *conn) handleLoop() {
	defer c.wg.Done()
	c.out.beginAnswers()
	held := 0 // frames handled since the last writeAnswers
	for {
		c.mu.Lock()
		if len(c.inbox) == 0 || c.finished || c.out.closing() {
			c.inbox = nil
			c.handling = false
			c.room.Broadcast()
			c.mu.Unlock()
			// What another goroutine queued for the handler to write since the last
			// writeAnswers: a writer writes it now.
			c.out.endAnswers()
			return
		}
		f := c.inbox[0]
		c.inbox[0] = inFrame{}
		c.inbox = c.inbox[1:]
		c.room.Broadcast()
		c.mu.Unlock()
		if !c.authed {
			c.authenticate(f.typ, f.data)
		} else {
			c.request(f.typ, f.data)
		}
		// The answers to frames that came together leave together, in one write(2):
		// a client that sends its watches with its auth wakes once for the welcome and
		// the snapshots. At most maxInbox answers wait so, for frames already read.
		if held++; held < maxInbox && c.queuedIn() {
			continue
		}
		held = 0
		c.out.writeAnswers()
	}
}

// queuedIn reports whether frames wait for the handler.
func (c *conn) queuedIn() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inbox) > 0
}

// readEnded notes why reading stopped.
func (c *conn) readEnded(err error) {
	switch {
	case errors.Is(err, websocket.ErrMessageTooBig):
		// coder/websocket has closed the socket with 1009 (SetReadLimit).
		c.h.met.closed(int(protocol.CloseTooLarge))
		if c.authedNow() {
			c.h.hitLimit(limitFrame, slog.String("conn", c.id))
		} else {
			c.h.hitLimit(limitPreAuthFrame, slog.String("conn", c.id))
		}
	case websocket.CloseStatus(err) != -1, c.out.closing():
		// The client closed, or the hub did: nothing to say.
	default:
		c.h.log.LogAttrs(c.h.ctx, slog.LevelDebug, "socket ended", slog.String("conn", c.id), slog.String("error", err.Error()))
	}
}
