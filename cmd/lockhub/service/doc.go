// Package service is the lockhub program as a library: Main parses the settings of
// PROTOCOL.md §7 (flags and LOCKHUB_* variables) onto the Configs of the packages that
// own them, wires the lock store, the hub, the HTTP API and the demo domain, and runs
// them until its ctx is done. Command lockhub is a few lines around it; cmd/lockbench
// runs the same wiring in-process, so what it measures is the server.
//
// Start with Main and Main.Run; ExitCode maps Run's error to the exit status.
// redisauth.go authenticates the Redis clients with Entra ID tokens (--redis-auth
// entra); Run's drain (--drain-delay) makes /readyz answer 503 before the shutdown.
//
// # Concurrency
//
// Call Run once. Ready, Addr, Store and Metrics may be called from any goroutine; the
// last three block until Run listens. Everything Run starts is stopped and joined
// before it returns, the renewals of an Entra ID token included (after the clients
// close).
package service
