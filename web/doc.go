// Package web is lockhub's HTTP side: the lock API of PROTOCOL.md §5, the Guard
// middleware that enforces locks at the edge of any Go HTTP API, the demo domain
// (approval requests), the health, readiness and metrics endpoints, the development
// token endpoint, the embedded browser client and demo page, and the mount point of
// the WebSocket hub at /ws.
//
// Start with New and Config: a *Server is an http.Handler with every route. Guard and
// GuardConfig are the enforcement middleware, usable without a Server (see
// ExampleGuard). Every error an endpoint answers goes through one function, errorFor,
// which maps it to an HTTP status and a {"code","message"} body; the codes are the
// Code constants.
//
// Locks fail open (PROTOCOL.md §2): when the lock Redis is down the lock API answers
// "unknown" or no locks, and guarded writes proceed; the store logs and counts each
// failure. The demo domain's own rows are not a cache: when their store is down the
// demo answers 503 store_unavailable. A decision on an approval request is a
// compare-and-set in Redis, so a request never carries two decisions, with or without
// locks. The lock console's reads are the exception: 503 store_unavailable, since no
// locks would mislead an administrator.
//
// Every answer, /ws's refusals, 404 and 405 included, carries the security headers and
// holds the body deadline (server.go, body.go); the lock API and the console serve
// each person RequestRate requests a second (rate.go); in development mode only
// loopback Hosts are answered (host.go).
//
// Concurrency: a Server, and the handler Guard returns, are safe for concurrent use
// once built. They start no goroutines of their own; every request runs on the
// goroutine net/http gives it, and /ws is handed to the hub, which owns its sockets.
package web
