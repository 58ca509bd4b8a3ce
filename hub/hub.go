package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Hub serves lockhub's WebSocket (PROTOCOL.md §4) on top of a lock store. Start with
// New, serve GET /ws with ServeHTTP, run Run for the change feed, the sweeper and the
// release timers, and stop with Shutdown, then cancel Run's ctx.
//
// All methods may be called concurrently.
type Hub struct {
	cfg     Config
	store   Store
	log     *slog.Logger
	met     *metrics
	origins originChecker

	// ctx is the ctx of the connections' store calls and token checks; cancel ends
	// them all. Made in New (connections outlive the request that opened them; the hub
	// is their root), canceled by Shutdown.
	ctx    context.Context
	cancel context.CancelFunc
	// readCtx is ctx without its cancelation, for socket reads and writes: they end
	// with their connection, and a cancelable ctx would cost each a registration.
	readCtx context.Context

	mu       sync.RWMutex
	conns    map[*conn]struct{}                      // guarded by mu; every open socket
	watchers map[watchKey]map[*conn]struct{}         // guarded by mu; sockets by what they watch
	views    map[locks.Ref]map[*conn]protocol.Viewer // guarded by mu; sockets by what they view, and as whom (view.go)
	editing  map[locks.Ref]map[*conn]struct{}        // guarded by mu; those of views with intent edit (line.go)
	closing  bool                                    // guarded by mu; Shutdown began
	connWG   sync.WaitGroup                          // one per connection goroutine; Add under mu while !closing
	running  atomic.Bool                             // Run was called

	open        atomic.Int64  // sockets reserved or open (MaxConnections)
	accepted    atomic.Uint64 // sockets accepted since New
	pendingAuth atomic.Int64  // of them, not yet authenticated (MaxPendingAuth)
	admit       *admission    // per client address and per person (admit.go)
	warned      limitWarnings // when each limit was last logged (hitLimit)
	resync      chan struct{} // capacity 1: the feed asks Run for a resync
	resyncMu    sync.Mutex
	resyncAll   bool                       // guarded by resyncMu; a resync of every tenant is asked
	resyncFor   []func(tenant string) bool // guarded by resyncMu; or of the tenants these name
	rel         *releaser                  // release-on-disconnect timers, run by Run
	member      *locks.Member              // this instance's liveness and holdings, run by Run (instance.go)
	snaps       snapshotReads              // the watches' snapshot reads, coalesced (snapshot.go)
	send        senderConfig               // what every socket's sender shares (sender.go)
}

// New returns a Hub, or an error when cfg is invalid.
func New(cfg Config) (*Hub, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	origins, err := newOriginChecker(cfg.AllowedOrigins)
	if err != nil {
		return nil, &protocol.SettingError{Setting: "allowed-origins", Err: err}
	}
	h := &Hub{
		cfg:      cfg,
		store:    cfg.Store,
		log:      cfg.Logger,
		met:      newMetrics(cfg.Registerer),
		origins:  origins,
		conns:    map[*conn]struct{}{},
		watchers: map[watchKey]map[*conn]struct{}{},
		views:    map[locks.Ref]map[*conn]protocol.Viewer{},
		editing:  map[locks.Ref]map[*conn]struct{}{},
		resync:   make(chan struct{}, 1),
		admit:    newAdmission(cfg),
		warned:   limitWarnings{last: map[string]time.Time{}, hits: map[string]int{}},
		rel:      newReleaser(),
	}
	if h.member, err = newMember(cfg, h.met); err != nil {
		return nil, err
	}
	// The hub's own lifetime, not a request's: store calls made for sockets outlive the
	// HTTP request that upgraded them, and Shutdown cancels it.
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.readCtx = context.WithoutCancel(h.ctx)
	h.send = senderConfig{queue: cfg.SendQueue, writeTimeout: cfg.WriteTimeout, ctx: h.ctx, writeCtx: h.readCtx, met: h.met}
	return h, nil
}

// ServeHTTP serves GET /ws: it checks the Origin (403 when not allowed) and the
// subprotocol (400 without lockhub.v1), upgrades, and hands the socket to a goroutine
// of the hub's, so the handler returns at once. While the hub shuts down it answers 503.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		httpError(w, http.StatusMethodNotAllowed, "method_not_allowed", "GET only")
		return
	}
	if !h.origins.allow(r) {
		httpError(w, http.StatusForbidden, "forbidden_origin", "origin not allowed")
		return
	}
	if !offersSubprotocol(r) {
		httpError(w, http.StatusBadRequest, "bad_request", "the WebSocket subprotocol "+protocol.Subprotocol+" is required")
		return
	}
	h.mu.RLock()
	closing := h.closing
	h.mu.RUnlock()
	if closing {
		httpError(w, http.StatusServiceUnavailable, "shutting_down", "the hub is shutting down; connect to another instance")
		return
	}
	// Reserve a place among the open and the unauthenticated sockets, the client
	// address's included, before the upgrade, so a crowd cannot overshoot any cap
	// (PROTOCOL.md §4).
	addr := clientAddr(r, h.cfg.TrustedProxies)
	if !h.reserve(w, addr) {
		return
	}
	admitted := false
	defer func() {
		if !admitted {
			h.open.Add(-1)
			h.pendingAuth.Add(-1)
			h.admit.unpend(addr)
		}
	}()

	hw := &hijackWriter{ResponseWriter: w}
	ws, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		Subprotocols: []string{protocol.Subprotocol},
		// The Origin was checked above, against PROTOCOL.md §4's rules, which differ
		// from coder/websocket's own (one-label '*', ports, schemes).
		InsecureSkipVerify: true,
	})
	if err != nil {
		return // Accept has answered the request
	}
	c := newConn(h, ws, hw.netConn, hw.frames)

	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		h.met.closed(int(protocol.CloseGoingAway))
		_ = ws.Close(protocol.CloseGoingAway, reasonShutdown) // the client reconnects elsewhere
		return
	}
	h.conns[c] = struct{}{}
	h.connWG.Add(1)
	h.mu.Unlock()
	h.admit.hand(c, addr) // before run: its authentication or teardown gives it back
	admitted = true       // the connection gives its places back: authenticated and teardown
	h.met.sockets.Inc()
	h.accepted.Add(1)
	go c.run()
}

// Accepted is how many sockets the hub has accepted since it was made: for a process
// that watches its bursts (cmd/lockhub returns their garbage's memory to the OS).
func (h *Hub) Accepted() uint64 { return h.accepted.Load() }

// retryAfter is the Retry-After of a handshake refused for a limit: long enough not to
// hammer this instance, short enough for a load balancer's other instances to take
// the client first.
const retryAfter = "5"

// reserve takes a place among the open sockets, among those of addr not yet
// authenticated and among all those not yet authenticated, or answers 503 with
// Retry-After and counts the limit that was hit. A refused handshake gives back every
// place it took: the handshakes one address is refused never hold a place another
// address could use.
func (h *Hub) reserve(w http.ResponseWriter, addr netip.Addr) bool {
	limit := ""
	switch {
	case h.open.Add(1) > int64(h.cfg.MaxConnections):
		h.open.Add(-1)
		limit = limitConnections
	case h.pendingAuth.Add(1) > int64(h.cfg.MaxPendingAuth):
		h.pendingAuth.Add(-1)
		h.open.Add(-1)
		limit = limitPendingAuth
	case !h.admit.pend(addr):
		h.pendingAuth.Add(-1)
		h.open.Add(-1)
		limit = limitPendingAuthPerIP
	default:
		return true
	}
	if limit == limitPendingAuthPerIP {
		// The address tells an operator whether a proxy hides its clients (set
		// --trusted-proxies) or one client crowds the others out.
		h.hitLimit(limit, slog.String("address", addr.String()))
	} else {
		h.hitLimit(limit)
	}
	w.Header().Set("Retry-After", retryAfter)
	httpError(w, http.StatusServiceUnavailable, "too_many_connections", "this instance holds as many sockets as it may; retry shortly or connect to another instance")
	return false
}

// offersSubprotocol reports whether the handshake asks for lockhub.v1 among its
// Sec-WebSocket-Protocol values (RFC 6455 §4.1; the header may repeat).
func offersSubprotocol(r *http.Request) bool {
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if strings.TrimSpace(p) == protocol.Subprotocol {
				return true
			}
		}
	}
	return false
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `{"code":%q,"message":%q}`+"\n", code, msg) // the client may be gone
}

// Run runs what the hub needs besides its sockets, until ctx is done: the change feed
// (store.RunFeed, delivering events to watchers and resyncing them when the feed comes
// back), the sweeper of watched types (announcing Expired), the release timers of
// closed sockets, and this instance's membership (locks.Member: its liveness record,
// its holdings, reaping the instances that died). It returns after joining all of
// them. When ctx is done, release timers still pending are settled at once (see the
// package doc). Call Run once; cancel its ctx after Shutdown.
func (h *Hub) Run(ctx context.Context) error {
	if !h.running.CompareAndSwap(false, true) {
		return errors.New("hub: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The Member stops last: it leaves (its record and holdings go) once every socket's
	// locks are settled, since a stopped instance's holdings must not be reaped as a
	// dead one's.
	mctx, stopMember := context.WithCancel(context.WithoutCancel(ctx))
	memberDone := make(chan struct{})
	go func() {
		defer close(memberDone)
		_ = h.member.Run(mctx) // its only error is a second call, and Run runs once
	}()
	var wg sync.WaitGroup
	var feedErr error
	wg.Go(func() {
		if err := h.store.Feed.RunFeed(ctx, feed{h}); err != nil && ctx.Err() == nil {
			feedErr = fmt.Errorf("hub: change feed: %w", err)
			cancel() // without the feed the hub is deaf: stop, and say why
		}
	})
	wg.Go(func() { h.sweepLoop(ctx) })
	wg.Go(func() { h.resyncLoop(ctx) })
	wg.Go(func() { h.rel.run(ctx, h) })
	wg.Go(func() { h.viewLoop(ctx) })
	wg.Wait()
	stopMember()
	<-memberDone
	return feedErr
}

// Shutdown stops accepting sockets, closes every socket (authenticated or not) with
// 1001 going away, detaches each socket's locks without releasing them (its client
// reconnects to another instance within the grace and claims them again), and waits for
// every connection goroutine. When ctx ends first, it cuts the remaining connections
// and returns ctx.Err() once their goroutines are done.
func (h *Hub) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.closing = true
	conns := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()

	for _, c := range conns {
		c.closeWith(protocol.CloseGoingAway, reasonShutdown)
	}
	done := make(chan struct{})
	go func() { // ends with the last connection goroutine, forced below if need be
		h.connWG.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		if len(conns) > 0 {
			err = ctx.Err()
		}
		h.cancel() // store calls of the connections give up
		for _, c := range conns {
			c.abort()
		}
		<-done
	}
	h.cancel()
	return err
}

// addWatcher adds c to the sockets that watch key.
func (h *Hub) addWatcher(key watchKey, c *conn) {
	h.mu.Lock()
	set := h.watchers[key]
	if set == nil {
		set = map[*conn]struct{}{}
		h.watchers[key] = set
	}
	set[c] = struct{}{}
	h.mu.Unlock()
}

func (h *Hub) removeWatcher(key watchKey, c *conn) {
	h.mu.Lock()
	h.removeWatcherLocked(key, c)
	h.mu.Unlock()
}

func (h *Hub) removeWatcherLocked(key watchKey, c *conn) {
	if set := h.watchers[key]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(h.watchers, key)
		}
	}
}

// unregister forgets c entirely: it is no longer a socket of the hub, a watcher nor a
// viewer, and no longer counts against its address or person (admit.go). Called by
// c's teardown, once its handler is joined.
func (h *Hub) unregister(c *conn, watched []watchKey, viewed []locks.Ref) {
	h.mu.Lock()
	delete(h.conns, c)
	for _, k := range watched {
		h.removeWatcherLocked(k, c)
	}
	for _, ref := range viewed {
		h.removeViewLocked(ref, c)
	}
	h.mu.Unlock()
	h.admit.gone(c, c.authed, c.ident)
	h.met.sockets.Dec()
}
