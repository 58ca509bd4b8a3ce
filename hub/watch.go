package hub

import (
	"context"
	"slices"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Watching an entity type (PROTOCOL.md §3): the snapshot of the type, then its events,
// none lost between the two and none overtaken by an older snapshot (the sender holds
// them, see beginSnapshot).

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
	start := c.out.beginSnapshot(typ)
	if !c.isWatching(typ) {
		c.watched = append(c.watched, typ)
		c.h.addWatcher(watchKey{c.ident.Tenant, typ}, c)
	}
	// A crowd of watches of one type shares reads, each begun after its watchers were
	// registered (locks/coalesce).
	tenant := c.ident.Tenant
	list, err := c.h.snaps.Read(c.h.ctx, watchKey{tenant, typ}, func(ctx context.Context) ([]byte, error) {
		return c.h.store.Feed.ListJSON(ctx, tenant, typ)
	})
	if err != nil { // checked above; the store agrees
		list = encodeLocks(nil)
	}
	if len(list) >= sharedBody {
		c.out.endSnapshot(typ, start, snapshotFrame(req, typ, list)) // the locks go out from the shared array
		return
	}
	// This frame is the socket's own and written once: its buffer is reused. A crowd
	// builds one per socket, a snapshot's size each, the larger part of a watch's
	// garbage and so of the collections a crowd pays for.
	buf := frameBufs.Get().(*[]byte)
	*buf = appendSnapshot((*buf)[:0], req, typ, list)
	c.out.endSnapshot(typ, start, outFrame{b: *buf, typ: protocol.FrameSnapshot, buf: buf})
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
