package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// The read side of a socket: run's loop reads frames and queues them; a handler
// goroutine answers them one at a time, in order, so a client's requests are served in
// order and one socket never holds more than one store call in flight. The handler
// exists only while there are frames to answer, so an idle socket is one goroutine
// parked in a read, with a small stack.

const (
	// verifyTimeout bounds one token check (a JWKS refetch included).
	verifyTimeout = 10 * time.Second
)

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
		if c.closeCode == 0 && !c.finished {
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

// handleLoop answers queued frames until none is left.
func (c *conn) handleLoop() {
	defer c.wg.Done()
	held := 0 // frames handled since the last writeAnswers
	for {
		c.mu.Lock()
		if len(c.inbox) == 0 || c.closeCode != 0 || c.finished {
			c.inbox = nil
			c.handling = false
			c.room.Broadcast()
			// What another goroutine queued for the handler to write since the last
			// writeAnswers: a writer writes it now.
			c.startWriterLocked()
			c.mu.Unlock()
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
		c.writeAnswers()
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
		if !c.authedNow() {
			c.h.met.limits.WithLabelValues(limitPreAuthFrame).Inc()
		}
	case websocket.CloseStatus(err) != -1, c.closing():
		// The client closed, or the hub did: nothing to say.
	default:
		c.h.log.LogAttrs(c.h.ctx, slog.LevelDebug, "socket ended", slog.String("conn", c.id), slog.String("error", err.Error()))
	}
}

// authenticate handles the first frame, which must be auth (4401 otherwise).
func (c *conn) authenticate(typ websocket.MessageType, data []byte) {
	var req protocol.Request
	var err error
	if typ == websocket.MessageText {
		req, err = protocol.DecodeRequest(data)
	}
	if typ != websocket.MessageText || err != nil || req.Type != protocol.FrameAuth {
		c.h.met.framesIn.WithLabelValues(frameLabel(req, err)).Inc()
		c.closeWith(protocol.CloseNotAuthenticated, reasonAuthFirst)
		return
	}
	c.h.met.framesIn.WithLabelValues(string(protocol.FrameAuth)).Inc()
	id, err := c.verify(req.Token)
	if err != nil {
		c.closeWith(protocol.CloseNotAuthenticated, reasonBadToken)
		return
	}
	c.mu.Lock()
	c.ident, c.authed = id, true
	c.armExpiryLocked() // with authed: the auth deadline is gone as it stops applying
	c.mu.Unlock()
	c.h.pendingAuth.Add(-1) // teardown gives back the open place only
	c.ws.SetReadLimit(protocol.MaxFrameSize)
	c.limiter = rate.NewLimiter(rate.Limit(c.h.cfg.RateLimit), c.h.cfg.RateBurst)
	c.sendJSON(protocol.FrameWelcome, protocol.Welcome{
		ConnectionID: c.id,
		Tenant:       id.Tenant,
		Holder:       id.Holder(),
		LeaseMs:      c.h.store.Locks.Lease().Milliseconds(),
		RenewMs:      c.h.cfg.RenewEvery.Milliseconds(),
		ServerTime:   protocol.NewTime(time.Now()),
		Lockable:     c.h.store.Locks.Registry().Types(),
		CanTakeOver:  id.HasRole(c.h.cfg.TakeoverRole),
	})
}

// verify checks a token, counting and logging a refusal.
func (c *conn) verify(token string) (auth.Identity, error) {
	ctx, cancel := context.WithTimeout(c.h.ctx, verifyTimeout)
	defer cancel()
	id, err := c.h.cfg.Verifier.Verify(ctx, token)
	if err != nil {
		c.h.met.authFailures.Inc()
		c.h.log.LogAttrs(c.h.ctx, slog.LevelInfo, "socket token refused", slog.String("conn", c.id), slog.String("error", err.Error()))
	}
	return id, err
}

// armExpiry rearms the deadline to close the socket with 4401 TokenLeeway after its
// token's exp, unless a refresh comes first. Handler only, once c.authed.
func (c *conn) armExpiry() {
	c.mu.Lock()
	c.armExpiryLocked()
	c.mu.Unlock()
}

func (c *conn) armExpiryLocked() {
	c.closeAt = c.ident.Expires.Add(c.h.cfg.TokenLeeway)
	c.armLocked()
}

// frameLabel is the type label of a frame in metrics: its type when it decoded,
// "invalid" otherwise (client-chosen strings never become label values).
func frameLabel(req protocol.Request, err error) string {
	if err != nil || req.Type == "" {
		return "invalid"
	}
	return string(req.Type)
}

// request answers one frame of an authenticated socket.
func (c *conn) request(typ websocket.MessageType, data []byte) {
	start := time.Now()
	var req protocol.Request
	var err error = errBinary
	if typ == websocket.MessageText {
		req, err = protocol.DecodeRequest(data)
	}
	label := frameLabel(req, err)
	c.h.met.framesIn.WithLabelValues(label).Inc()
	if !c.allow(start, req) {
		return
	}
	if err != nil {
		c.sendError(req, err)
		return
	}

	ref := locks.Ref{Tenant: c.ident.Tenant, Type: req.EntityType, UID: req.EntityUID}
	holder := c.ident.Holder()
	switch req.Type {
	case protocol.FrameClaim:
		if c.overLockLimit(req, ref) {
			break
		}
		res, err := c.h.store.Locks.Claim(c.h.ctx, ref, holder, c.id)
		c.answer(req, res, err)
	case protocol.FrameRenew:
		res, err := c.h.store.Locks.Renew(c.h.ctx, ref, holder, c.id)
		c.answer(req, res, err)
	case protocol.FrameRelease:
		c.h.member.Leaving(holding(ref, holder.OID, c.id))
		res, err := c.h.store.Locks.Release(c.h.ctx, ref, holder, c.id)
		c.answer(req, res, err)
		c.h.member.Left(holding(ref, holder.OID, c.id)) // after answer: untracked by then, if released
	case protocol.FrameTakeover:
		if c.overLockLimit(req, ref) {
			break
		}
		res, err := c.h.store.Locks.Takeover(c.h.ctx, ref, holder, c.id, c.ident.HasRole(c.h.cfg.TakeoverRole))
		c.answer(req, res, err)
	case protocol.FrameWatch:
		c.watch(req)
	case protocol.FrameUnwatch:
		c.unwatch(req)
	case protocol.FrameMine:
		mine, err := c.h.store.Locks.Mine(c.h.ctx, c.ident.Tenant, c.ident.OID)
		if err != nil {
			c.sendError(req, err)
			break
		}
		c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Locks: mine})
	case protocol.FrameView:
		c.view(req)
	case protocol.FrameUnview:
		c.unview(req)
	case protocol.FrameNudge:
		c.nudge(req)
	case protocol.FrameAdminLocks:
		c.adminLocks(req)
	case protocol.FrameForceRelease:
		c.forceRelease(req)
	case protocol.FrameAuth:
		c.refresh(req)
	case protocol.FramePing:
		c.sendJSON(protocol.FramePong, protocol.Pong{ID: req.ID, HasID: req.HasID, ServerTime: protocol.NewTime(time.Now())})
	}
	c.h.met.requestTiming.WithLabelValues(label).Observe(time.Since(start).Seconds())
}

// errBinary answers a binary message: the protocol is JSON text frames.
var errBinary = &protocol.Error{Code: protocol.CodeBadRequest, Message: "binary frames are not supported; send JSON text frames"}

// allow applies the socket's rate limit to one request (PROTOCOL.md §4): beyond it the
// request is answered rate_limited, and a socket still over the rate OverRateGrace
// after the first rate_limited of its spell is closed with 4429.
func (c *conn) allow(now time.Time, req protocol.Request) bool {
	if c.limiter.AllowN(now, 1) {
		return true
	}
	// A spell over the rate ends only after half the grace without a rate_limited
	// answer: a client that keeps coming back over the rate in bursts, with pauses that
	// refill its bucket, is still over the rate and is closed when the grace runs out;
	// one burst (a page re-claiming after a reconnect) is forgotten soon after.
	if c.overRate.first.IsZero() || now.Sub(c.overRate.last) > c.h.cfg.OverRateGrace/2 {
		c.overRate.first = now // a new spell over the rate
	}
	c.overRate.last = now
	c.h.met.rateLimited.Inc()
	if now.Sub(c.overRate.first) >= c.h.cfg.OverRateGrace {
		c.closeWith(protocol.CloseTooMany, reasonTooMany)
		return false
	}
	c.sendError(req, &protocol.Error{Code: protocol.CodeRateLimited, Message: "over the rate of this connection; slow down"})
	return false
}

// answer answers a lock operation, and keeps track of the locks this socket holds
// through it, for release on disconnect.
func (c *conn) answer(req protocol.Request, res locks.Result, err error) {
	if err != nil {
		c.sendError(req, err)
		return
	}
	c.h.met.outcomes.WithLabelValues(string(req.Type), string(res.Outcome)).Inc()
	ref := locks.Ref{Tenant: c.ident.Tenant, Type: req.EntityType, UID: req.EntityUID}
	switch res.Outcome {
	case protocol.OutcomeAcquired, protocol.OutcomeRenewed, protocol.OutcomeTakenOver:
		c.track(ref)
	case protocol.OutcomeUnknown:
		// The store may have written it before failing: remember it, so a detach can
		// clean up; a detach of a lock that is not ours changes nothing.
		if req.Type != protocol.FrameRelease {
			c.track(ref)
		}
	case protocol.OutcomeReleased, protocol.OutcomeNotHeld, protocol.OutcomeLost:
		c.untrack(ref)
	}
	c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Outcome: res.Outcome, Lock: res.Lock, PreviousHolder: res.PreviousHolder})
}

// overLockLimit answers too_many_locks, writing nothing, when a claim or takeover of
// ref would make the socket hold more than MaxLocksPerSocket entities (PROTOCOL.md §4,
// v2). A lock the socket holds already may always be claimed again.
func (c *conn) overLockLimit(req protocol.Request, ref locks.Ref) bool {
	if _, held := c.claimed[ref]; held || len(c.claimed) < c.h.cfg.MaxLocksPerSocket {
		return false
	}
	c.h.met.limits.WithLabelValues(limitLocks).Inc()
	c.sendError(req, &protocol.Error{Code: protocol.CodeTooManyLocks,
		Message: fmt.Sprintf("this connection holds %d locks, the most it may; release one first", c.h.cfg.MaxLocksPerSocket)})
	return true
}

func (c *conn) track(ref locks.Ref) {
	if _, ok := c.claimed[ref]; ok {
		return
	}
	if c.claimed == nil {
		c.claimed = map[locks.Ref]struct{}{}
	}
	c.claimed[ref] = struct{}{}
	c.h.member.Hold(holding(ref, c.ident.OID, c.id))
}

// untrack forgets a lock the socket no longer holds.
func (c *conn) untrack(ref locks.Ref) {
	if _, ok := c.claimed[ref]; ok {
		delete(c.claimed, ref)
		c.h.member.Drop(holding(ref, c.ident.OID, c.id))
	}
}

// watch subscribes the socket to a type and answers with its snapshot. Events of the
// type are held from before the watcher is registered until the snapshot is queued, so
// none is lost between the two and none overtakes the snapshot; the snapshot is read
// after the registration, in a read shared with the other watches of the type.
func (c *conn) watch(req protocol.Request) {
	typ := req.EntityType
	if err := c.checkType(typ); err != nil {
		c.sendError(req, err)
		return
	}
	start := c.beginSnapshot(typ)
	if !c.isWatching(typ) {
		c.watched = append(c.watched, typ)
		c.h.addWatcher(watchKey{c.ident.Tenant, typ}, c)
	}
	// A crowd of watches of one type shares reads, each begun after its watchers were
	// registered (snapshot.go).
	tenant := c.ident.Tenant
	list, err := c.h.snaps.list(c.h.ctx, watchKey{tenant, typ}, func(ctx context.Context) ([]byte, error) {
		return c.h.store.Feed.ListJSON(ctx, tenant, typ)
	})
	if err != nil { // checked above; the store agrees
		list = encodeLocks(nil)
	}
	// This frame is the socket's own and written once: its buffer is reused. A crowd
	// builds one per socket, a snapshot's size each, the larger part of a watch's
	// garbage and so of the collections a crowd pays for.
	buf := frameBufs.Get().(*[]byte)
	*buf = appendSnapshot((*buf)[:0], req, typ, list)
	c.endSnapshot(typ, start, outFrame{b: *buf, typ: protocol.FrameSnapshot, buf: buf})
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

// checkType refuses a type that is not a valid name or not lockable, as the store
// would for a lock of it.
func (c *conn) checkType(typ string) error {
	if !locks.ValidType(typ) {
		return &locks.InvalidEntityError{Field: "entityType", Value: typ}
	}
	return c.h.store.Locks.Registry().Check(typ)
}

// unwatch ends a watch. Unwatching a type not watched is not an error.
func (c *conn) unwatch(req protocol.Request) {
	typ := req.EntityType
	if !locks.ValidType(typ) {
		c.sendError(req, &locks.InvalidEntityError{Field: "entityType", Value: typ})
		return
	}
	if i := slices.Index(c.watched, typ); i >= 0 {
		c.watched = slices.Delete(c.watched, i, i+1)
		c.h.removeWatcher(watchKey{c.ident.Tenant, typ}, c)
	}
	c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Outcome: protocol.OutcomeUnwatched})
}

// refresh replaces the socket's token in band. A bad token closes with 4401, one of
// another tenant or oid with 4403.
func (c *conn) refresh(req protocol.Request) {
	if !req.IsRefresh() {
		c.sendError(protocol.Request{}, &protocol.Error{Code: protocol.CodeBadRequest, Message: "already authenticated; a token refresh carries an id"})
		return
	}
	id, err := c.verify(req.Token)
	if err != nil {
		c.closeWith(protocol.CloseNotAuthenticated, reasonBadToken)
		return
	}
	if id.Tenant != c.ident.Tenant || id.OID != c.ident.OID {
		c.h.met.authFailures.Inc()
		c.closeWith(protocol.CloseForbidden, reasonIdentity)
		return
	}
	c.ident = id // a new name, roles and expiry
	c.armExpiry()
	c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Outcome: protocol.OutcomeRefreshed})
}

// sendError answers req with the error frame err maps to.
func (c *conn) sendError(req protocol.Request, err error) {
	c.sendJSON(protocol.FrameError, errorFrame(req, err))
}

// snapshotFrame is the snapshot of typ answering req, its locks already encoded (a
// JSON array, see encodeLocks); an unsolicited one answers protocol.Request{} and
// carries no id. The bytes are protocol.Snapshot's, built around the shared locks
// rather than encoded for each watcher.
func snapshotFrame(req protocol.Request, typ string, locks []byte) outFrame {
	return outFrame{b: appendSnapshot(nil, req, typ, locks), typ: protocol.FrameSnapshot}
}

// appendSnapshot appends snapshotFrame's bytes to b.
func appendSnapshot(b []byte, req protocol.Request, typ string, locks []byte) []byte {
	b = slices.Grow(b, len(locks)+len(typ)+len(req.ID)+64)
	b = append(b, '{')
	if req.ID != "" || req.HasID {
		id, _ := json.Marshal(req.ID) // a string always encodes
		b = append(b, `"id":`...)
		b = append(b, id...)
		b = append(b, ',')
	}
	b = append(b, `"type":"`+string(protocol.FrameSnapshot)+`","entityType":`...)
	t, _ := json.Marshal(typ) // a checked name; encoded all the same
	b = append(b, t...)
	b = append(b, `,"locks":`...)
	b = append(b, locks...)
	return append(b, '}')
}
