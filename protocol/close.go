package protocol

import "github.com/coder/websocket"

// Close codes of PROTOCOL.md §4. The 4xxx codes are in the range RFC 6455 §7.4.2
// reserves for private use; each mirrors the HTTP status of the same meaning.
const (
	// CloseNotAuthenticated: no valid token, an expired token, or a frame other than
	// auth before authentication.
	CloseNotAuthenticated websocket.StatusCode = 4401
	// CloseForbidden: an origin not allowed, or a refresh that changes the identity
	// (tenant or oid).
	CloseForbidden websocket.StatusCode = 4403
	// CloseAuthTimeout: no auth frame within AuthTimeout.
	CloseAuthTimeout websocket.StatusCode = 4408
	// CloseTooMany: over the rate for longer than RateLimitGrace, or a reader too slow
	// for its bounded send queue.
	CloseTooMany websocket.StatusCode = 4429

	// CloseTooLarge: a frame over MaxFrameSize (RFC 6455 §7.4.1).
	CloseTooLarge = websocket.StatusMessageTooBig // 1009
	// CloseGoingAway: the hub shuts down; reconnect elsewhere (RFC 6455 §7.4.1).
	CloseGoingAway = websocket.StatusGoingAway // 1001
)
