package hub

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Request dispatch: the handler's answer to each frame of a socket, one at a time, in
// order (read.go queues them). The first frame must authenticate; request serves the
// rest, through the store, and queues their answers on the socket's sender, which
// the handler writes once the frames read together are answered (writeAnswers).
// Watching is in watch.go, presence and nudges in view.go, the lock console in
// admin.go.

const (
	// verifyTimeout bounds one token check (a JWKS refetch included).
	verifyTimeout = 10 * time.Second
)

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
	if !c.h.admit.authenticated(c, id) {
		// PROTOCOL.md §4, "Fair share": the error, then 4429. The socket still
		// counts among the instance's sockets waiting to authenticate until its
		// teardown; its address's place was given back.
		c.h.hitLimit(limitSocketsPerPerson, slog.String("tenant", id.Tenant))
		c.sendError(req, &protocol.Error{Code: protocol.CodeTooManySockets,
			Message: fmt.Sprintf("you hold %d sockets on this instance, the most one person may; close one and connect again", c.h.cfg.MaxSocketsPerPerson)})
		c.out.writeAnswers()
		c.closeWith(protocol.CloseTooMany, reasonTooManySock)
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
		CanTakeOver:  c.h.cfg.Roles.CanTakeOver(id),
	})
}

// verify checks a token, counting a refusal and logging it (at DEBUG, and a count at
// INFO now and then: auth.RefusalLog).
func (c *conn) verify(token string) (auth.Identity, error) {
	ctx, cancel := context.WithTimeout(c.h.ctx, verifyTimeout)
	defer cancel()
	id, err := c.h.cfg.Verifier.Verify(ctx, token)
	if err != nil {
		c.h.met.authFailures.Inc()
		c.h.cfg.Refusals.Refused(c.h.ctx, err, slog.String("transport", "socket"), slog.String("conn", c.id))
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

	c.takeHanded()
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
		res, err := c.h.store.Locks.Takeover(c.h.ctx, ref, holder, c.id, c.h.cfg.Roles.CanTakeOver(c.ident))
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
	case protocol.FrameClaimMany:
		c.claimMany(req)
	case protocol.FrameReleaseMany:
		c.releaseMany(req)
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
	c.h.hitLimit(limitRequestRate, slog.String("tenant", c.ident.Tenant))
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
	// A release that left the lock to other sockets of the holder, none of them here:
	// they are on other instances, which may have died unnoticed, so it is pending
	// (PROTOCOL.md §4, "An instance that dies"). One here (open, or closed within its
	// grace) keeps the lock as the two-tab rule says: plainly released.
	pending := res.Kept && !c.h.member.HeldElsewhere(holding(ref, c.ident.OID, c.id))
	if pending {
		c.h.met.pendingReleases.Inc()
	}
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
	c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Outcome: res.Outcome, Lock: res.Lock, PreviousHolder: res.PreviousHolder, Pending: pending})
}

// overLockLimit answers too_many_locks, writing nothing, when a claim or takeover of
// ref would make the socket hold more than MaxLocksPerSocket entities (PROTOCOL.md §4,
// v2). A lock the socket holds already may always be claimed again.
func (c *conn) overLockLimit(req protocol.Request, ref locks.Ref) bool {
	if _, held := c.claimed[ref]; held || len(c.claimed) < c.h.cfg.MaxLocksPerSocket {
		return false
	}
	c.h.hitLimit(limitLocks)
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

// sendJSON encodes v and queues it.
func (c *conn) sendJSON(typ protocol.FrameType, v any) { c.out.send(encodeFrame(typ, v)) }
