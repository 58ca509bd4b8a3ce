package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// The lock console on the socket (PROTOCOL.md §10), for a socket whose token has the
// admin role:
//
//	C: {"id":"30","type":"adminLocks"}
//	S: {"id":"30","type":"result","locks":[..]}          every live lock of the tenant
//	C: {"id":"31","type":"forceRelease","entityType":"..","entityUid":".."}
//	S: {"id":"31","type":"result","outcome":"released","lock":{..}}   or "notHeld", lock null
//
// Without the role both answer an error frame with code forbidden. The role is read
// from the socket's current token, so after a refresh that drops it the next console
// request is refused.

// isAdmin says whether the socket's token has the admin role.
func (c *conn) isAdmin() bool { return c.h.cfg.Roles.IsAdmin(c.ident) }

// refuseAdmin answers forbidden to a console request of a socket without the role.
func (c *conn) refuseAdmin(req protocol.Request) bool {
	if c.isAdmin() {
		return false
	}
	c.sendError(req, &protocol.Error{Code: protocol.CodeForbidden,
		Message: fmt.Sprintf("%s needs the role %s", req.Type, c.h.cfg.Roles.Admin)})
	return true
}

// adminLocks answers every live lock of the socket's tenant.
func (c *conn) adminLocks(req protocol.Request) {
	if c.refuseAdmin(req) {
		return
	}
	// The consoles of a tenant that list together share one read (locks/coalesce): a
	// tenant at its quota lists 20,000 locks each time.
	tenant := c.ident.Tenant
	ls, err := c.h.consoles.Read(c.h.ctx, tenant, func(ctx context.Context) ([]byte, error) {
		return c.h.store.Console.AdminLocksJSON(ctx, tenant)
	})
	if err != nil {
		c.sendError(req, err)
		return
	}
	c.out.send(resultLocksFrame(req, ls))
}

// resultLocksFrame is the result frame answering req with locks, a JSON array already
// encoded (protocol.Result's bytes for a list, built around the shared array, which a
// big one is written from: see sharedBody).
func resultLocksFrame(req protocol.Request, locks []byte) outFrame {
	if len(locks) >= sharedBody {
		return outFrame{b: appendResultLocksHead(nil, req), body: locks, tail: closeBrace, typ: protocol.FrameResult}
	}
	return outFrame{b: appendResultLocks(nil, req, locks), typ: protocol.FrameResult}
}

// appendResultLocks appends resultLocksFrame's bytes to b.
func appendResultLocks(b []byte, req protocol.Request, locks []byte) []byte {
	b = slices.Grow(b, len(locks)+len(req.ID)+48)
	b = appendResultLocksHead(b, req)
	b = append(b, locks...)
	return append(b, '}')
}

// appendResultLocksHead appends a result's bytes up to its locks.
func appendResultLocksHead(b []byte, req protocol.Request) []byte {
	id, _ := json.Marshal(req.ID) // a string always encodes
	b = append(b, `{"id":`...)
	b = append(b, id...)
	return append(b, `,"type":"`+string(protocol.FrameResult)+`","locks":`...)
}

// forceRelease drops a lock of the socket's tenant whoever holds it; the store
// announces it as Released with "by" and records it in the audit trail.
func (c *conn) forceRelease(req protocol.Request) {
	if c.refuseAdmin(req) {
		return
	}
	ref := locks.Ref{Tenant: c.ident.Tenant, Type: req.EntityType, UID: req.EntityUID}
	res, err := c.h.store.Console.ForceRelease(c.h.ctx, ref, c.ident.Holder())
	if err != nil {
		c.sendError(req, err)
		return
	}
	c.h.met.outcomes.WithLabelValues(string(req.Type), string(res.Outcome)).Inc()
	if res.Outcome == protocol.OutcomeReleased {
		c.untrack(ref) // the admin's own lock through this socket, if it was
	}
	c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Outcome: res.Outcome, Lock: res.Lock})
}
