package hub

import (
	"fmt"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// The waiting line and claims of many entities (version 3, PROTOCOL.md §11, §12).
//
// A socket that views an entity with intent edit waits in its line, kept in Redis by
// the store. When a lock is freed while someone waits, the store's script hands it to
// the first in line, through their earliest waiting socket, and publishes a hand-off on
// the change feed after the entity's Acquired. Each instance sends the handoff frame
// to its sockets of the new holder that view the entity with intent edit, and the
// instance of the socket it went through takes the lock up for that socket, as if it
// had claimed it: it is released when the socket closes (after the grace), counted
// toward the socket's locks, and renewed by the client. A socket that closed before
// the hand-off reached it is not taken up for: its detach job releases the lock after
// the grace (locks.Locks.ReleaseHanded), and the views of a socket of a dead instance
// run out, after which the store releases it the same way.

// setIntent records the socket's intent for ref, which it views. Handler only.
func (c *conn) setIntent(ref locks.Ref, intent protocol.Intent) {
	edit := intent == protocol.IntentEdit
	if edit {
		if c.editing == nil {
			c.editing = map[locks.Ref]struct{}{}
		}
		c.editing[ref] = struct{}{}
	} else {
		delete(c.editing, ref)
	}
	c.h.mu.Lock()
	c.h.setEditingLocked(ref, c, edit)
	c.h.mu.Unlock()
}

// setEditingLocked records whether c views ref with intent edit. Under h.mu.
func (h *Hub) setEditingLocked(ref locks.Ref, c *conn, edit bool) {
	set := h.editing[ref]
	if !edit {
		if set != nil {
			delete(set, c)
			if len(set) == 0 {
				delete(h.editing, ref)
			}
		}
		return
	}
	if set == nil {
		set = map[*conn]struct{}{}
		h.editing[ref] = set
	}
	set[c] = struct{}{}
}

// intentOf is c's intent for ref, which it views.
func (h *Hub) intentOf(ref locks.Ref, c *conn) protocol.Intent {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if _, ok := h.editing[ref][c]; ok {
		return protocol.IntentEdit
	}
	return protocol.IntentLook
}

// Handoff sends a hand-off to this instance's sockets of the new holder that view the
// entity with intent edit, and takes the lock up for the socket it went through, if
// that socket is here.
func (f feed) Handoff(hc locks.HandoffChange) {
	h := f.h
	var out outFrame
	sent := 0
	var through *conn
	h.mu.RLock()
	for c, v := range h.views[hc.Ref] {
		if c.id == hc.Conn && v.OID == hc.To {
			through = c
		}
		if _, edit := h.editing[hc.Ref][c]; !edit || v.OID != hc.To {
			continue
		}
		if out.b == nil {
			out = encodeFrame(protocol.FrameHandoff, hc.Handoff)
		}
		c.out.send(out)
		sent++
	}
	h.mu.RUnlock()
	h.met.handoffsSent.Add(float64(sent))
	if through != nil {
		through.adoptHanded(hc.Ref, hc.To)
	}
}

// adoptHanded takes up a lock a hand-off gave this socket: held through it from now,
// for the instance's records at once (locks.Member), for the socket's own at its next
// request or its teardown (takeHanded). A socket whose teardown began is left out: its
// detach job releases the lock (ReleaseHanded).
func (c *conn) adoptHanded(ref locks.Ref, oid string) {
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	c.handed = append(c.handed, ref)
	c.mu.Unlock()
	c.h.member.Hold(holding(ref, oid, c.id))
	c.h.met.handoffsTaken.Inc()
}

// takeHanded moves the locks handed to the socket to claimed. Handler only (or the
// teardown, once the handler is joined).
func (c *conn) takeHanded() {
	c.mu.Lock()
	handed := c.handed
	c.handed = nil
	c.mu.Unlock()
	for _, ref := range handed {
		if c.claimed == nil {
			c.claimed = map[locks.Ref]struct{}{}
		}
		c.claimed[ref] = struct{}{} // member.Hold was done at adoption
	}
}

// claimMany claims every entity of the request for the socket, or none (§12).
func (c *conn) claimMany(req protocol.Request) {
	refs := make([]locks.Ref, len(req.EntityUIDs))
	fresh := 0
	for i, uid := range req.EntityUIDs {
		refs[i] = locks.Ref{Tenant: c.ident.Tenant, Type: req.EntityType, UID: uid}
		if _, held := c.claimed[refs[i]]; !held {
			fresh++
		}
	}
	if fresh > 0 && len(c.claimed)+fresh > c.h.cfg.MaxLocksPerSocket {
		c.h.hitLimit(limitLocks)
		c.sendError(req, &protocol.Error{Code: protocol.CodeTooManyLocks,
			Message: fmt.Sprintf("this connection holds %d locks and asks for %d more, beyond the %d it may hold; release some first",
				len(c.claimed), fresh, c.h.cfg.MaxLocksPerSocket)})
		return
	}
	res, err := c.h.store.Locks.ClaimMany(c.h.ctx, c.ident.Tenant, req.EntityType, req.EntityUIDs, c.ident.Holder(), c.id)
	if err != nil {
		c.sendError(req, err)
		return
	}
	c.h.met.outcomes.WithLabelValues(string(req.Type), string(res.Outcome)).Inc()
	if res.Outcome == protocol.OutcomeAcquired || res.Outcome == protocol.OutcomeUnknown {
		// Unknown: the store may have written before failing; a detach of a lock that
		// is not ours changes nothing.
		for _, ref := range refs {
			c.track(ref)
		}
	}
	c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Outcome: res.Outcome, Locks: res.Locks, Many: true})
}

// releaseMany releases the socket's share of the request's entities (§12).
func (c *conn) releaseMany(req protocol.Request) {
	hs := make([]locks.Holding, len(req.EntityUIDs))
	for i, uid := range req.EntityUIDs {
		hs[i] = holding(locks.Ref{Tenant: c.ident.Tenant, Type: req.EntityType, UID: uid}, c.ident.OID, c.id)
		c.h.member.Leaving(hs[i])
	}
	res, err := c.h.store.Locks.ReleaseMany(c.h.ctx, c.ident.Tenant, req.EntityType, req.EntityUIDs, c.ident.Holder(), c.id)
	if err == nil {
		c.h.met.outcomes.WithLabelValues(string(req.Type), string(res.Outcome)).Inc()
		if res.Outcome == protocol.OutcomeReleased {
			for _, uid := range req.EntityUIDs {
				c.untrack(locks.Ref{Tenant: c.ident.Tenant, Type: req.EntityType, UID: uid})
			}
		}
	}
	for _, hd := range hs {
		c.h.member.Left(hd)
	}
	if err != nil {
		c.sendError(req, err)
		return
	}
	count := res.Count
	c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Outcome: res.Outcome, Count: &count})
}
