package hub

import (
	"github.com/coder/websocket"
)

// Close reasons sent with the close codes of PROTOCOL.md §4 (protocol.Close*). They are
// constant: a reason is at most 123 bytes and never carries client data.
const (
	reasonAuthFirst   = "the first frame must be auth"
	reasonBadToken    = "token refused"
	reasonExpired     = "token expired"
	reasonIdentity    = "a refresh may not change the tenant or oid"
	reasonAuthTimeout = "no auth in time"
	reasonTooMany     = "too many requests"
	reasonTooManySock = "too many sockets of this person"
	reasonTooSlow     = "too slow a reader"
	reasonShutdown    = "server going away"
)

// closeWith closes the socket with code: the sender drops what is queued, writes the
// close frame after what it holds and waits for the echo on a goroutine joined by run.
// The reader sees the end of the connection and tears down. Only the first call
// counts; it never blocks.
func (c *conn) closeWith(code websocket.StatusCode, reason string) { c.out.close(code, reason) }

// authedNow reports whether the socket has authenticated, from any goroutine.
func (c *conn) authedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authed
}
