// Command lockhub is the edit-lock service: the HTTP lock API, the WebSocket hub, the
// demo domain and its page, in one binary (PROTOCOL.md §7).
//
//	lockhub                                   # embedded Redis, development tokens
//	lockhub --redis-url redis://redis:6379 --jwks-url https://login.example.com/keys \
//	        --issuer https://login.example.com/ --audience api://lockhub
//
// Every setting is a flag and a LOCKHUB_* environment variable; lockhub -h lists them.
// SIGTERM or SIGINT shuts it down gracefully: it stops accepting, closes every socket
// with 1001 so clients reconnect elsewhere, and exits 0 within 10 s; with --drain-delay
// it first answers /readyz 503 for that long, serving everything else as before.
package main
