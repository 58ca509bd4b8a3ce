// Package hub is lockhub's WebSocket hub (PROTOCOL.md §3, §4, §6): sockets that
// authenticate once, claim, renew, release and take over locks through the lock store,
// watch entity types of their tenant and receive every change of them, from every
// instance, live.
//
// Start with New and its Config, then Hub.ServeHTTP (GET /ws), Hub.Run and
// Hub.Shutdown. Tokens are checked by an auth.Verifier (package hub/auth), the same
// one the HTTP API uses.
//
// # Wiring
//
//	h, err := hub.New(hub.Config{Store: hub.StoreOf(store), Verifier: verifier, Registerer: reg})
//	go h.Run(ctx)                 // the change feed, the sweeper, the release timers
//	mux.Handle("GET /ws", h)
//	...
//	srv.Shutdown(sctx)            // stop accepting HTTP
//	h.Shutdown(sctx)              // close sockets with 1001, detach without releasing
//	cancel()                      // then stop Run, and wait for it
//
// # A socket's life
//
// ServeHTTP checks the Origin (403) and the subprotocol (400), upgrades, and hands the
// socket to a goroutine of the hub's, the reader, and returns. The reader only reads:
// frames go to a handler goroutine, started when a frame arrives and gone when none is
// left, which answers them one at a time, in order, and writes its own answers (those of
// frames that came together in one write(2), see frameWriter in hijack.go). Events
// go through the socket's sender (sender.go): to an idle socket the feed writes an event
// itself, framed once for all its watchers, in a write(2) that never waits (pushWire;
// a crowd's writes are shared among as many goroutines as cores); otherwise into a
// bounded queue, for a writer goroutine that exists only while there is something to
// write. An idle socket is thus one goroutine parked in a read,
// with a small stack, and one timer: for its heartbeat, and for its auth timeout, then
// its token's expiry.
// A client that lets its send queue overflow is closed with 4429, so one slow reader
// never slows the others or the feed; a frame that cannot be written within
// WriteTimeout (a deadline on the connection) drops the socket too.
//
// The first frame must be auth within AuthTimeout (4408), and anything else first
// closes with 4401; the socket then lives until its token expires (4401, TokenLeeway
// after exp) unless refreshed in band with the same tenant and oid (4403 otherwise).
// Frames over 64 KiB close with 1009; frames beyond the rate get rate_limited errors,
// each echoing its request's id, and a socket still over the rate OverRateGrace after
// the first rate_limited of its spell is closed with 4429 (a spell ends after half of
// OverRateGrace without rate_limited answers).
//
// Admission (admit.go, PROTOCOL.md §4 "Fair share"): a handshake takes a place among
// the open sockets (MaxConnections), those waiting to authenticate (MaxPendingAuth)
// and those of its client address waiting (MaxPendingAuthPerIP; the address is the
// peer's, or X-Forwarded-For's behind TrustedProxies), or is answered 503 with
// Retry-After; an auth beyond one person's MaxSocketsPerPerson answers
// too_many_sockets and closes with 4429. Every limit hit is counted in
// lockhub_hub_limit_hits_total{limit} and warned of at most once per 10 s per limit.
//
// Watching a type answers with its snapshot, then streams its events. Events that
// arrive while the snapshot is read are held and queued after it, so none is lost and
// none is overtaken by an older snapshot. When the store's feed loses Redis and gets
// it back (locks.FeedHandler.Resync), every watcher receives an unsolicited snapshot,
// without an id, of each type it watches. The events of a tenant go only to that
// tenant's sockets: the watcher index is keyed by (tenant, type), and a socket's tenant
// is its token's.
//
// # Presence
//
// A socket views an entity with view (view.go): its view is kept in Redis, in the
// tenant's slot, with a ttl (ViewTTL) that Run refreshes while the socket lives, and
// the store announces each change of the people viewing on the change feed; the hub
// queues it to its own sockets that view the entity, and to no other. A socket that
// closes stops viewing after the release grace; one of an instance that died is
// refreshed by nobody, and its view runs out. nudge asks the holder of a viewed entity
// to finish: the store checks the holder and the rate, and each instance queues the
// nudge to the holder's sockets that view it.
//
// A view carries an intent (version 3): with edit the socket waits in line while
// someone else holds the lock (line.go). A freed lock handed to the first in line
// reaches every instance as a hand-off: each sends the handoff frame to the new
// holder's sockets that view the entity with intent edit, and the instance of the
// socket it went through takes the lock up for it, as if it had claimed it.
// claimMany and releaseMany change many entities of a type at once (line.go).
//
// # The lock console
//
// The lock console's frames, adminLocks and forceRelease (admin.go), are served only to
// a socket whose current token has the admin role of Config.Roles, and only within its
// tenant.
//
// # Release on disconnect
//
// A lock claimed through a socket is released ReleaseGrace after the socket closes,
// unless its holder still uses it from another socket: the same person in two tabs is
// one holder, and closing one tab must not free the lock the other is editing, even
// when the tabs are connected to different instances.
//
// The hub cannot decide this alone: the other tab may be on another instance, and
// instances share nothing but Redis. So the decision is the store's, atomic in Redis.
// Every claim, renewal and takeover through a socket passes the socket's connection id
// (random, 128 bits, unique across instances), and the store remembers it in the
// lock's set of sockets, which lives as long as the lease. When a socket closes, the
// hub keeps the list of locks claimed through it and, after the grace, calls
// Locks.Detach for each: it removes this socket from the set and releases the lock only
// if the set is then empty and the lock is still the holder's. Hence:
//
//   - one tab closes, the other tab (any instance) has claimed or renewed the lock:
//     its id is in the set, the lock stays;
//   - a page reloads: the new socket re-claims within the grace (renewed), joins the
//     set, and the old socket's detach leaves the lock alone;
//   - the tab is really gone: the set empties and the lock is released (broadcast as
//     Released) after the grace rather than after the remaining lease;
//   - the lock was released, taken over or claimed by someone else meanwhile: detach
//     sees another holder or no lock and changes nothing.
//
// An explicit release through a socket (a form closing, the browser client's pagehide)
// follows the same rule at once, without the grace: it removes this socket from the set
// and releases the lock only if no other socket of the holder is left in it; otherwise
// it answers released for this socket and announces nothing, with "pending":true when
// none of the sockets left is on this instance (its Member's holdings): they may be a
// dead instance's, not found yet (below). A release over HTTP has no socket and drops
// the lock whoever uses it.
//
// The grace is timed by the instance where the socket closed (Run's release timers, a
// FIFO since every job waits the same grace). The set is only a hint of who may still
// use the lock, never the lock itself: the lease stays the truth.
//
// An instance that dies without detaching (kill -9, OOM, a lost node) cannot time
// anything. So each instance keeps a liveness record in Redis and the list of what its
// sockets claimed (its locks.Member, instance.go); a live instance that finds a record
// InstanceTimeout old takes it. At once it drops the dead instance's sockets from the
// locks where another socket of the holder is left (a live tab's release is then the
// last, and drops the lock); after the grace it detaches the rest as if they had just
// closed. The holdings stay in Redis until that is done, so any live instance finishes
// what a reaper that stopped began. Until the instance is found, a dead socket's id
// keeps a release from the holder's live socket from dropping the lock (it counts as a
// tab still open): that release answers pending, and the store notes when it was made.
// When the instance is found and its last heartbeat is older than the note, the reaper
// detaches the dead socket at once, and the lock goes then, without a second grace
// (PROTOCOL.md §4, version 3). A live tab that still holds the lock keeps it. With the
// defaults a lock of a dead instance goes at most about 20 s + the grace after the
// death, and one its holder released from a live tab about 20 s after.
//
// A graceful shutdown (Shutdown, 1001) detaches each socket's locks without releasing
// them: its clients reconnect to another instance within the grace and claim again,
// and a client that does not is covered by its lease. Release timers still pending when
// Run stops are settled the same way, detached without release: nobody is left to wait
// out their grace, and such a client may be reconnecting elsewhere right now.
//
// # Concurrency
//
// All methods of Hub may be called concurrently. Every goroutine
// has an owner that joins it: a socket's reader is started by ServeHTTP and joined by
// Shutdown; its handler, heartbeat, writer and close handshake are joined by its reader before it
// tears down; the feed, sweeper, resync, release and view-refresh goroutines and the
// Member's Run (which joins its own) are started and joined by Run; the goroutines a
// crowd's fan-out is shared among, by the feed's goroutine, before the next event. No
// lock of the hub's or a socket's is held across a network write that may wait or a
// store call: the hub's lock guards the socket and watcher sets (read-locked while an
// event is handed out, which never blocks), each socket's lock its inbox, timer and
// heartbeat, and its sender's lock, never held with the socket's, what it has to send
// (held across the feed's write that never waits). The one lock held across every write
// is a socket's frame writer's, so that a Pong or close frame never comes inside or
// ahead of the frames written or held before it; the feed only tries it.
package hub
