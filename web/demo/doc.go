// Package demo is lockhub's demo domain (PROTOCOL.md §5, "The demo domain"): the
// approval requests of the story, their page, and the routes that read and write them,
// each write guarded by web.Guard. It stands for the application that adopts lockhub:
// it uses only what any Go API would, web.Authenticate for the bearer token, web.Guard
// for the 409 when another user holds the lock, and the lock store's Release after a
// decision.
//
// Start with New and its Config; the Domain is an http.Handler that cmd/lockhub mounts
// beside the lock API with web.Config.App, in development mode or with --demo only.
//
// The rows live in Redis under their own keys (see RowKey), in the tenant's hash tag,
// seeded from testdata/approval-requests.json; every write is a compare-and-set on the
// whole row in a Lua script (scripts/*.lua), so a request never carries two decisions
// whatever the locks say.
//
// # Concurrency
//
// A Domain is safe for concurrent use; it starts no goroutines.
package demo
