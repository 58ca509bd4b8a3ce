package hub

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Presence and nudges (PROTOCOL.md §9).
//
// A socket views an entity with view: the store adds the socket to the entity's
// viewers in Redis (with a ttl, refreshed by viewLoop while the socket lives) and
// announces each change of the people viewing it on the change feed; the hub queues
// each change to its own sockets that view the entity, and no other, so grids that
// only watch a type never receive presence. The answer to view is the viewers as
// they were after the view; changes that arrive while it is being made are held and
// queued after it (the snapshot mechanism of watch, keyed by entity). Every list
// carries the version the store gave it, and a socket is never queued a list older
// than one it was queued already (a change published before this socket's view, held
// with the rest; a resend after a resync), so no older list overtakes a newer one.
//
// A socket that closes stops viewing after the release grace (its detach job), so a
// page that reloads does not seem to leave; one that closes for a shutdown leaves at
// the end of the grace too, its client viewing again from another instance meanwhile.
// A socket of an instance that died is not refreshed: its view runs out (ViewTTL) and
// the next refresh by another instance, or the next view, drops it and announces it.
//
// nudge goes through the store, which checks who holds the lock and the rate, and
// publishes the nudge for the holder; each instance queues it to the holder's sockets
// that view the entity.

// viewPending is the key under which a socket holds an entity's presence changes while
// its view is answered: "type/uid" (a watched type, the other key, has no '/').
func viewPending(ref locks.Ref) string { return ref.Type + "/" + ref.UID }

// view adds the socket to the viewers of an entity and answers with the viewers. A
// view of an entity the socket views already changes its intent (version 3, §9).
func (c *conn) view(req protocol.Request) {
	ref := locks.Ref{Tenant: c.ident.Tenant, Type: req.EntityType, UID: req.EntityUID}
	if err := c.checkEntity(ref); err != nil {
		c.sendError(req, err)
		return
	}
	v, viewing := c.viewing[ref]
	if !viewing {
		if len(c.viewing) >= c.h.cfg.MaxViewsPerSocket {
			c.h.hitLimit(limitViews)
			c.sendError(req, &protocol.Error{Code: protocol.CodeTooManyViews,
				Message: fmt.Sprintf("this connection views %d entities, the most it may; unview one first", c.h.cfg.MaxViewsPerSocket)})
			return
		}
		v = protocol.Viewer{OID: c.ident.OID, Name: c.ident.Name, Since: protocol.NewTime(time.Now())}
	}
	key := viewPending(ref)
	start := c.out.beginSnapshot(key)
	if !viewing {
		if c.viewing == nil {
			c.viewing = map[locks.Ref]protocol.Viewer{}
		}
		c.viewing[ref] = v
		c.h.addView(ref, c, v)
	}
	intent := protocol.IntentLook
	if req.Intent == protocol.IntentEdit {
		intent = protocol.IntentEdit
	}
	c.setIntent(ref, intent)
	viewers, err := c.h.store.Presence.View(c.h.ctx, ref, locks.View{Conn: c.id, Viewer: v, Intent: intent}, c.h.cfg.ViewTTL)
	if err != nil { // checked above; the store agrees
		viewers = locks.Viewers{}
	}
	c.out.endSnapshot(key, start, presenceFrame(req, ref, viewers))
}

// presenceFrame encodes the viewers of ref, answering req (protocol.Request{} for an
// unsolicited one), versioned so that no older list overtakes a newer one.
func presenceFrame(req protocol.Request, ref locks.Ref, viewers locks.Viewers) outFrame {
	f := encodeFrame(protocol.FramePresence, protocol.Presence{
		ID: req.ID, HasID: req.HasID, EntityType: ref.Type, EntityUID: ref.UID, Viewers: viewers.List})
	f.entity, f.version, f.answer = viewPending(ref), viewers.Version, req.ID != "" || req.HasID
	return f
}

// unview ends the socket's view of an entity. Unviewing what is not viewed is not an
// error.
func (c *conn) unview(req protocol.Request) {
	ref := locks.Ref{Tenant: c.ident.Tenant, Type: req.EntityType, UID: req.EntityUID}
	if err := c.checkEntity(ref); err != nil {
		c.sendError(req, err)
		return
	}
	if _, ok := c.viewing[ref]; ok {
		delete(c.viewing, ref)
		delete(c.editing, ref)
		c.h.removeView(ref, c)
		// Viewing again starts afresh: any version is newer than none.
		c.out.forget(viewPending(ref))
		_ = c.h.store.Presence.Unview(c.h.ctx, ref, c.id) // fails open inside; ref was checked
	}
	c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Outcome: protocol.OutcomeUnviewed})
}

// nudge asks the holder of an entity the socket views to finish.
func (c *conn) nudge(req protocol.Request) {
	ref := locks.Ref{Tenant: c.ident.Tenant, Type: req.EntityType, UID: req.EntityUID}
	if err := c.checkEntity(ref); err != nil {
		c.sendError(req, err)
		return
	}
	if _, ok := c.viewing[ref]; !ok {
		c.h.met.nudges.WithLabelValues(string(protocol.CodeForbidden)).Inc()
		c.sendError(req, &protocol.Error{Code: protocol.CodeForbidden, Message: "only a socket that views the entity may nudge its holder; send view first"})
		return
	}
	outcome, err := c.h.store.Presence.Nudge(c.h.ctx, ref, c.ident.Holder(), c.h.cfg.NudgeEvery)
	if err != nil {
		c.h.met.nudges.WithLabelValues(string(errorFrame(req, err).Code)).Inc()
		c.sendError(req, err)
		return
	}
	c.h.met.nudges.WithLabelValues(string(outcome)).Inc()
	c.sendJSON(protocol.FrameResult, protocol.Result{ID: req.ID, Outcome: outcome, Bare: true})
}

// checkEntity refuses an entity that is not a valid name or not of a lockable type, as
// the store would.
func (c *conn) checkEntity(ref locks.Ref) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	return c.h.store.Locks.Registry().Check(ref.Type)
}

// addView adds c to the local viewers of ref.
func (h *Hub) addView(ref locks.Ref, c *conn, v protocol.Viewer) {
	h.mu.Lock()
	set := h.views[ref]
	if set == nil {
		set = map[*conn]protocol.Viewer{}
		h.views[ref] = set
	}
	set[c] = v
	h.mu.Unlock()
	h.met.views.Inc()
}

func (h *Hub) removeView(ref locks.Ref, c *conn) {
	h.mu.Lock()
	h.removeViewLocked(ref, c)
	h.mu.Unlock()
}

func (h *Hub) removeViewLocked(ref locks.Ref, c *conn) {
	if set := h.views[ref]; set != nil {
		if _, ok := set[c]; ok {
			delete(set, c)
			h.met.views.Dec()
		}
		if len(set) == 0 {
			delete(h.views, ref)
		}
	}
	h.setEditingLocked(ref, c, false)
}

// Presence queues a change of an entity's viewers to this instance's sockets that view
// it. The frame is the store's, shared and forwarded as is.
func (f feed) Presence(p locks.PresenceChange) {
	h := f.h
	key := viewPending(p.Ref)
	out := outFrame{b: p.Frame, typ: protocol.FramePresence, entity: key, version: p.Version}
	h.mu.RLock()
	set := h.views[p.Ref]
	for c := range set {
		c.out.push(key, out)
	}
	n := len(set)
	h.mu.RUnlock()
	h.met.presenceSent.Add(float64(n))
}

// Nudge queues a nudge to the sockets of its holder that view the entity.
func (f feed) Nudge(n locks.NudgeChange) {
	h := f.h
	var out outFrame
	sent := 0
	h.mu.RLock()
	for c, v := range h.views[n.Ref] {
		if v.OID != n.To {
			continue
		}
		if out.b == nil {
			out = encodeFrame(protocol.FrameNudge, n.Nudge)
		}
		c.out.send(out)
		sent++
	}
	h.mu.RUnlock()
	h.met.nudgesSent.Add(float64(sent))
}

// viewRefresh is how often this instance's views are refreshed in Redis: a third of
// their ttl, so one late refresh does not end them.
func (h *Hub) viewRefresh() time.Duration { return h.cfg.ViewTTL / 3 }

// viewWorkers bounds the refreshes in flight.
const viewWorkers = 8

// viewLoop refreshes the views of this instance's sockets every viewRefresh, so they
// outlive their ttl while the sockets live, until ctx is done. A refresh also drops
// the views that ran out (an instance that died) and announces it.
func (h *Hub) viewLoop(ctx context.Context) {
	t := time.NewTicker(h.viewRefresh())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.refreshViews(ctx, nil)
	}
}

// refreshViews refreshes every view of this instance's sockets, those of the tenants
// resync names when it is set. A view Redis no longer has (it restarted) is made
// again. With resync, the sockets also get the viewers afresh, unsolicited: changes
// may have been announced while the feed was down.
func (h *Hub) refreshViews(ctx context.Context, resync func(tenant string) bool) {
	views := h.viewsNow()
	sem := make(chan struct{}, viewWorkers)
	var wg sync.WaitGroup
	// Once Redis fails a refresh, the rest of the pass would only wait out the store's
	// timeout and warn again: the next pass makes up for it.
	var failed atomic.Bool
	for ref, set := range views {
		if resync != nil && !resync(ref.Tenant) {
			continue
		}
		if ctx.Err() != nil || failed.Load() {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if !failed.Load() && !h.refreshView(ctx, ref, set, resync != nil) {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
}

// refreshView refreshes this instance's views of ref; it reports false when Redis
// failed it.
func (h *Hub) refreshView(ctx context.Context, ref locks.Ref, set map[*conn]protocol.Viewer, resend bool) bool {
	ids := make([]string, 0, len(set))
	byID := make(map[string]*conn, len(set))
	for c := range set {
		ids = append(ids, c.id)
		byID[c.id] = c
	}
	viewers, missing, err := h.store.Presence.RefreshViews(ctx, ref, h.cfg.ViewTTL, ids...)
	if err != nil { // refs were checked at view: ErrUnavailable
		return false // Redis is not there: the next refresh makes the views again
	}
	h.met.viewRefreshes.Inc()
	for _, id := range missing {
		c := byID[id]
		v, still := h.viewOf(ref, c)
		if !still {
			continue // it stopped viewing meanwhile
		}
		h.met.viewRestored.Inc()
		view := locks.View{Conn: id, Viewer: v, Intent: h.intentOf(ref, c)}
		if vs, err := h.store.Presence.View(ctx, ref, view, h.cfg.ViewTTL); err == nil {
			viewers = vs
		}
		if _, still := h.viewOf(ref, c); !still {
			// It stopped viewing while the view was made again: end it, or it would
			// stay listed until its ttl, refreshed by nobody.
			_ = h.store.Presence.Unview(ctx, ref, id) // fails open inside; ref was checked
		}
	}
	if !resend {
		return true
	}
	// Queued unheld: a change that reached a socket meanwhile has a greater version,
	// and this older list is then dropped (pushLocked).
	out := presenceFrame(protocol.Request{}, ref, viewers)
	key := viewPending(ref)
	h.mu.RLock()
	for c := range h.views[ref] {
		c.out.push(key, out)
	}
	h.mu.RUnlock()
	return true
}

// viewOf reports whether c still views ref, and as whom.
func (h *Hub) viewOf(ref locks.Ref, c *conn) (protocol.Viewer, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	v, ok := h.views[ref][c]
	return v, ok
}

// viewsNow copies the local viewer index.
func (h *Hub) viewsNow() map[locks.Ref]map[*conn]protocol.Viewer {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make(map[locks.Ref]map[*conn]protocol.Viewer, len(h.views))
	for ref, set := range h.views {
		cp := make(map[*conn]protocol.Viewer, len(set))
		for c, v := range set {
			cp[c] = v
		}
		out[ref] = cp
	}
	return out
}
