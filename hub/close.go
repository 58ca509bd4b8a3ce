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
	reasonTooSlow     = "too slow a reader"
	reasonShutdown    = "server going away"
)

// closeWith closes the socket with code: it records the code, stops further writes and
// starts the close handshake on a goroutine joined by run. The reader sees the end of
// the connection and tears down. Only the first call counts; it never blocks.
func (c *conn) closeWith(code websocket.StatusCode, reason string) {
	c.mu.Lock()
	if c.closeCode != 0 || c.finished {
		c.mu.Unlock()
		return
	}
	c.closeCode = code
	c.shut.Store(true)
	c.queue = nil
	c.wg.Add(1)
	c.mu.Unlock()
	c.h.met.closed(int(code))
	go func() {
		defer c.wg.Done()
		// The handshake waits for the client's echo (coder/websocket bounds each step
		// to 5 s); the reader goroutine reads that echo and ends.
		_ = c.ws.Close(code, reason) // a failed handshake still closes the connection
	}()
}

// closing reports whether the hub has begun closing the socket.
func (c *conn) closing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeCode != 0
}

// authedNow reports whether the socket has authenticated, from any goroutine.
func (c *conn) authedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authed
}
