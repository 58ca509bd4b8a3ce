package hub

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// conn is one socket and its goroutines:
//
//   - run, the reader: it reads frames and queues them for the handler, and when the
//     socket ends it tears down. It is the only goroutine of an idle socket, and runs
//     nothing but the read path, so its stack stays small.
//   - the handler: started when a frame is queued and gone when none is left, it
//     answers the frames one at a time, in order. Token checks, store calls and JSON
//     run here.
//   - the heartbeat: a Ping on its way, started by onTimer.
//   - the writer and the closer, the sender's (out): the writer is started when a
//     frame is queued to be sent and gone when none is left, the only writer of the
//     socket but for the handler, which writes its own answers in the writer's stead;
//     the closer is the close handshake, started by closeWith.
//
// run joins the others before it tears down: the handler and the heartbeat through
// wg, the writer and the closer through out.wait.
//
// Everything the socket sends goes through out, which has a lock of its own: conn.mu
// is never held while out's lock is taken, nor the other way round (out.closing and
// out.writesDone take no lock, and out calls nothing of conn's).
type conn struct {
	h       *Hub
	ws      *websocket.Conn
	netConn net.Conn // the hijacked connection, to abort; nil when there is none
	id      string   // connection id: the welcome's connectionId, and the store's conn
	out     sender   // the outbound path: queue, holds, writer, close (sender.go)

	// Owned by the handler (one at a time, ordered by mu); read by run's teardown after
	// the last handler is joined.
	ident    auth.Identity
	authed   bool                          // written under mu too: the reader reads it (authedNow)
	watched  []string                      // entity types this socket watches, a handful at most
	claimed  map[locks.Ref]struct{}        // locks claimed through this socket, to detach at close
	viewing  map[locks.Ref]protocol.Viewer // entities this socket views, and since when (view.go)
	editing  map[locks.Ref]struct{}        // those of them it views with intent edit (version 3, §11)
	limiter  *rate.Limiter
	overRate struct{ first, last time.Time } // the current spell over the rate

	// timer fires at the earlier of closeAt and pingAt (onTimer): one timer for the
	// socket's deadline and its heartbeat, since each timer an idle socket keeps costs
	// it about 150 bytes of heap (ISSUE 11). Set by run before reading, under mu.
	timer *time.Timer

	mu       sync.Mutex
	inbox    []inFrame // guarded by mu; frames read, waiting for the handler
	handling bool      // guarded by mu; a handler goroutine is running
	// handed are locks a hand-off gave this socket (line.go), guarded by mu: the
	// feed adds them, the handler and the teardown move them to claimed.
	handed   []locks.Ref
	room     sync.Cond      // on mu: the inbox has room again
	finished bool           // guarded by mu; run is joining: start no goroutine
	wg       sync.WaitGroup // handler, heartbeat; Add under mu while !finished
	// The heartbeat, also a check of reading (see heartbeat): all guarded by mu.
	pinging  bool      // a Ping waits for its Pong
	lastPong time.Time // when the last Pong came (or the socket opened)
	read     uint64    // batches the client has read: out.writesDone before the Ping of the last Pong
	// closeAt closes the socket with 4408 unless auth comes first, then with 4401 when
	// the token runs out, TokenLeeway included (a wall-clock time then: the token's).
	closeAt time.Time // guarded by mu
	pingAt  time.Time // guarded by mu; when the next heartbeat starts; zero while a Ping waits
}

// inFrame is one frame read from the client.
type inFrame struct {
	typ  websocket.MessageType
	data []byte
}

// maxInbox is how many frames the reader may read ahead of the handler; then it stops
// reading, and TCP pushes back on the client.
const maxInbox = 4

// watchKey is what a watcher watches: one entity type of one tenant.
type watchKey struct{ tenant, typ string }

// newConn makes the conn of an upgraded socket: ws, over nc (nil: none) through frames
// (nil without nc).
func newConn(h *Hub, ws *websocket.Conn, nc net.Conn, frames *frameWriter) *conn {
	c := &conn{h: h, ws: ws, netConn: nc, id: "c-" + rand.Text()}
	c.room.L = &c.mu
	c.out.ws, c.out.nc, c.out.frames, c.out.cfg = ws, nc, frames, &h.send
	return c
}

// run is the connection's reader goroutine: it reads until the socket is closed, then
// tears down. It is started by ServeHTTP and joined by Shutdown (Hub.connWG).
func (c *conn) run() {
	defer c.h.connWG.Done()
	// A larger frame closes with 1009: 16 KiB until the socket authenticates, then 64.
	c.ws.SetReadLimit(protocol.MaxPreAuthFrameSize)
	c.mu.Lock()
	now := time.Now()
	c.lastPong = now
	c.closeAt, c.pingAt = now.Add(c.h.cfg.AuthTimeout), c.h.nextCheck(now)
	c.timer = time.AfterFunc(min(c.h.cfg.AuthTimeout, time.Until(c.pingAt)), c.onTimer)
	c.mu.Unlock()
	c.readLoop()
	c.teardown()
}

// teardown runs once the socket is closed: it joins the socket's other goroutines,
// stops delivery to it, and hands its locks to the release timers, or, on a graceful
// shutdown, detaches them at once without releasing them.
func (c *conn) teardown() {
	c.mu.Lock()
	c.timer.Stop()
	c.finished = true
	c.room.Broadcast()
	c.mu.Unlock()
	code := c.out.stop()
	_ = c.ws.CloseNow() // already closed, or closing: this only makes sure
	c.wg.Wait()         // the handler sees finished and stops; the heartbeat ends with the socket
	c.out.wait()        // writer and closer end with the socket too

	watched := make([]watchKey, 0, len(c.watched))
	for _, t := range c.watched {
		watched = append(watched, watchKey{c.ident.Tenant, t})
	}
	viewed := make([]locks.Ref, 0, len(c.viewing))
	for r := range c.viewing {
		viewed = append(viewed, r)
	}
	c.takeHanded()
	var edits []locks.Ref
	for r := range c.editing {
		edits = append(edits, r)
	}
	c.h.unregister(c, watched, viewed)
	c.h.open.Add(-1)
	if !c.authed {
		c.h.pendingAuth.Add(-1)
	}

	if c.authed && len(c.claimed)+len(viewed) > 0 {
		refs := make([]locks.Ref, 0, len(c.claimed))
		for r := range c.claimed {
			refs = append(refs, r)
		}
		job := detachJob{conn: c.id, holder: c.ident.Holder(), refs: refs, views: viewed, edits: edits}
		if code == protocol.CloseGoingAway {
			// Graceful shutdown releases nothing: the client reconnects to another
			// instance within the grace and claims again (PROTOCOL.md §4). Its views
			// end with the grace, by when the client views again elsewhere.
			job.due = time.Now().Add(c.h.cfg.ReleaseGrace)
			c.h.detach(c.h.ctx, job, false, "shutdown")
		} else {
			c.h.rel.schedule(c.h, job)
		}
	}
}

// heartbeat pings the client (PROTOCOL.md §4, "Heartbeat") on a goroutine joined by
// run: a Pong within PongTimeout schedules the next Ping, PingEvery later. Without
// one, a client that had frames to read (batches written since the Ping of its last
// Pong, see out.writesDone) has stopped reading, and is closed as too slow a reader,
// 4429, its close frame queued behind what it has not read; one that had nothing to
// read is a dead peer, cut without a close handshake (a peer that does not answer a
// Ping does not answer a Close either). Either way its locks follow the release
// grace. Run by onTimer.
//
// Its close frame reaches it only if the kernels have room for it: behind full buffers
// the connection is cut without one (closeFrameGrace), and a client that reads again
// gets what the kernels held, then the end of the connection (protocol/DECISIONS.md).
//
// So a client that stops reading is found by the next heartbeat: within ReadStall (30 s
// by default) of the first frame it left unread, PingEvery + PongTimeout (35 s) of its
// last Pong when nothing was written to it, however much the kernels buffer,
// and before that only if its queue overflows or a write times out. The writes cost
// the heartbeat a count and nothing more: no Ping, timer or wake-up follows a frame
// written, so a fan-out to many sockets is not followed by as many Pings (issue 26).
func (c *conn) heartbeat() {
	c.mu.Lock()
	if c.out.closing() || c.finished || c.pinging {
		c.mu.Unlock()
		return
	}
	c.pinging = true
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		// Batches written before the Ping are in the connection before it (frameWriter
		// keeps the order): its Pong says they were read.
		before := c.out.writesDone()
		ctx, cancel := context.WithTimeout(c.h.ctx, c.h.cfg.PongTimeout)
		defer cancel()
		err := c.ws.Ping(ctx) // the reader reads the Pong
		c.mu.Lock()
		c.pinging = false
		if err == nil {
			c.lastPong, c.read = time.Now(), before
			c.pingAtLocked(c.h.nextCheck(c.lastPong))
		}
		unread := c.out.writesDone() > c.read
		c.mu.Unlock()
		if errors.Is(err, context.DeadlineExceeded) && !c.out.closing() {
			c.h.hitLimit(limitPong, slog.String("conn", c.id))
			if unread {
				c.h.log.LogAttrs(c.h.ctx, slog.LevelDebug, "socket closed: it stopped reading",
					slog.String("conn", c.id), slog.Duration("waited", c.h.cfg.PongTimeout))
				c.out.tooSlow(slowRead)
				// Its close frame goes behind what it did not read, where the kernel has
				// room; it will not echo it (it does not read), so do not wait the
				// handshake out: cut once the frame had time to be written.
				t := time.NewTimer(closeFrameGrace)
				select {
				case <-t.C:
				case <-c.h.ctx.Done():
					t.Stop()
				}
				c.abort()
				return
			}
			c.h.log.LogAttrs(c.h.ctx, slog.LevelDebug, "socket cut: no Pong in time",
				slog.String("conn", c.id), slog.Duration("waited", c.h.cfg.PongTimeout))
			c.abort()
		} // else the Pong came, or the socket is closing or closed already
	}()
}

// closeFrameGrace is how long a socket that stopped reading has for its close frame to
// be written, before it is cut.
const closeFrameGrace = time.Second

// nextCheck is when the heartbeat next looks at a socket whose last Pong came at
// lastPong: PingEvery later, or earlier when Config.ReadStall asks, so that a frame
// written just after a Pong and never read is found within ReadStall (onTimer then
// pings only if something was written since the Pong: one more timer firing a
// heartbeat, never one per frame).
func (h *Hub) nextCheck(lastPong time.Time) time.Time {
	early := h.cfg.ReadStall - h.cfg.PongTimeout
	if early <= 0 || early >= h.cfg.PingEvery {
		return lastPong.Add(h.cfg.PingEvery)
	}
	return lastPong.Add(early)
}

// pingAtLocked starts the next heartbeat at t (now, if t has passed).
func (c *conn) pingAtLocked(t time.Time) {
	c.pingAt = t
	c.armLocked()
}

// armLocked sets the timer for the earlier of closeAt and pingAt.
func (c *conn) armLocked() {
	next := c.closeAt
	if !c.pingAt.IsZero() && (next.IsZero() || c.pingAt.Before(next)) {
		next = c.pingAt
	}
	if !next.IsZero() && !c.finished {
		c.timer.Reset(max(time.Until(next), 0))
	}
}

// onTimer runs when the timer fires: it closes a socket past its closeAt (before auth
// it took too long to authenticate, 4408; after it, its token ran out, 4401), starts a
// heartbeat that is due, and rearms for what is left. A firing before either (it lost
// a race with a rearm, or the wall clock of a token's exp lags the timer's monotonic
// one) only rearms.
func (c *conn) onTimer() {
	c.mu.Lock()
	now := time.Now()
	closeDue := !c.closeAt.IsZero() && !now.Before(c.closeAt)
	pingDue := !c.pingAt.IsZero() && !now.Before(c.pingAt)
	if pingDue {
		c.pingAt = time.Time{} // the heartbeat sets the next
		// The early look of Config.ReadStall: nothing written since the last Pong, so
		// nothing unread; the Ping waits for its PingEvery.
		if full := c.lastPong.Add(c.h.cfg.PingEvery); now.Before(full) && c.out.writesDone() <= c.read {
			c.pingAt, pingDue = full, false
		}
	}
	if !closeDue {
		c.armLocked()
	}
	authed := c.authed
	c.mu.Unlock()
	switch {
	case closeDue && !authed:
		c.closeWith(protocol.CloseAuthTimeout, reasonAuthTimeout)
	case closeDue:
		c.closeWith(protocol.CloseNotAuthenticated, reasonExpired)
	case pingDue:
		c.heartbeat()
	}
}

// abort cuts the connection without a close handshake: for a Shutdown whose ctx ran out.
func (c *conn) abort() {
	if c.netConn != nil {
		_ = c.netConn.Close() // unblocks every read, write and close handshake on it
	}
	_ = c.ws.CloseNow()
}

// isWatching reports whether the socket watches typ. Handler only.
func (c *conn) isWatching(typ string) bool { return slices.Contains(c.watched, typ) }
