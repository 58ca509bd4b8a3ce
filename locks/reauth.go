package locks

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/auth"
)

// Re-authenticating the change feed's connections.
//
// With streaming credentials (ClientOptions.Credentials: Entra ID tokens), go-redis
// re-authenticates a connection of its pools with each new token when it is returned
// to its pool. A pub/sub connection never is: go-redis v9.23 leaves it on the token it
// was opened with, and Azure Managed Redis closes a connection whose token expired,
// which loses the feed and resyncs every watcher of its tenants once per token life.
//
// So the dialer of such a client wraps each connection. A connection on which go-redis
// writes a SUBSCRIBE, SSUBSCRIBE or PSUBSCRIBE is a pub/sub one from then on; when the
// credentials change, AUTH with them is written on each such connection, between two of
// go-redis's writes (a command is one write: go-redis flushes its buffer per command).
// RESP3, which go-redis speaks by default, allows AUTH on a subscribed connection; its
// "+OK" reaches the PubSub as a *redis.Pong whose Payload is "OK", which the feed
// ignores (receive in feed.go). Should the write fail, the connection is closed and
// go-redis opens a new one with the current token.

// reauthDialer dials the connections of one client and re-authenticates its pub/sub
// connections whenever creds changes.
type reauthDialer struct {
	creds auth.StreamingCredentialsProvider
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)

	mu         sync.Mutex
	conns      map[*reauthConn]struct{} // guarded by mu: the open connections
	subscribed bool                     // guarded by mu: creds has this listener
}

var _ auth.CredentialsListener = (*reauthDialer)(nil)

// newReauthDialer returns the dialer of a client with creds, dialling as go-redis
// would with the dial timeout and TLS configuration given.
func newReauthDialer(creds auth.StreamingCredentialsProvider, timeout time.Duration, o *redis.Options) *reauthDialer {
	return &reauthDialer{
		creds: creds,
		dial:  redis.NewDialer(&redis.Options{DialTimeout: timeout, TLSConfig: o.TLSConfig}),
		conns: map[*reauthConn]struct{}{},
	}
}

// Dial is the client's Options.Dialer.
func (d *reauthDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.listen()
	c, err := d.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	rc := &reauthConn{Conn: c, owner: d}
	d.mu.Lock()
	d.conns[rc] = struct{}{}
	d.mu.Unlock()
	return rc, nil
}

// listen subscribes d to the credentials, once that succeeds. go-redis subscribes
// each connection itself as it opens; a failure here (no token yet) is go-redis's to
// report, and the next dial tries again.
func (d *reauthDialer) listen() {
	d.mu.Lock()
	done := d.subscribed
	d.mu.Unlock()
	if done {
		return
	}
	if _, _, err := d.creds.Subscribe(d); err == nil {
		d.mu.Lock()
		d.subscribed = true
		d.mu.Unlock()
	}
}

// OnNext writes AUTH with the new credentials on every pub/sub connection.
func (d *reauthDialer) OnNext(creds auth.Credentials) {
	user, pass := creds.BasicAuth()
	args := []string{"AUTH", pass}
	if user != "" {
		args = []string{"AUTH", user, pass}
	}
	cmd := respCommand(args...)
	d.mu.Lock()
	conns := make([]*reauthConn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	for _, c := range conns {
		c.reauth(cmd)
	}
}

// OnError does nothing: the provider logs and counts its own failures, and the
// connections keep their token until it expires.
func (d *reauthDialer) OnError(error) {}

func (d *reauthDialer) forget(c *reauthConn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
}

// reauthConn is a connection of a reauthDialer.
type reauthConn struct {
	net.Conn
	owner *reauthDialer

	mu     sync.Mutex // held across each write: go-redis's and an AUTH never interleave
	pubsub bool       // guarded by mu: a SUBSCRIBE was written
}

func (c *reauthConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pubsub && subscribes(p) {
		c.pubsub = true
	}
	return c.Conn.Write(p)
}

func (c *reauthConn) Close() error {
	c.owner.forget(c)
	return c.Conn.Close()
}

// reauth writes cmd, an AUTH, if c is a pub/sub connection.
func (c *reauthConn) reauth(cmd []byte) {
	c.mu.Lock()
	if !c.pubsub {
		c.mu.Unlock()
		return
	}
	// go-redis sets a deadline before each of its own writes; this one has its own.
	_ = c.Conn.SetWriteDeadline(time.Now().Add(ClientTimeout))
	_, err := c.Conn.Write(cmd)
	c.mu.Unlock()
	if err != nil {
		_ = c.Close() // a part of AUTH may have gone: go-redis reconnects, with the new token
	}
}

// subscribes reports whether p, a command as go-redis writes it (a RESP array of bulk
// strings), is a SUBSCRIBE, SSUBSCRIBE or PSUBSCRIBE.
func subscribes(p []byte) bool {
	// *<n>\r\n$<len>\r\n<name>\r\n
	_, rest, ok := bytes.Cut(p, []byte("\r\n"))
	if !ok || len(p) == 0 || p[0] != '*' || len(rest) == 0 || rest[0] != '$' {
		return false
	}
	_, name, ok := bytes.Cut(rest, []byte("\r\n"))
	if !ok {
		return false
	}
	name, _, _ = bytes.Cut(name, []byte("\r\n"))
	for _, s := range [...]string{"subscribe", "ssubscribe", "psubscribe"} {
		if bytes.EqualFold(name, []byte(s)) {
			return true
		}
	}
	return false
}

// respCommand encodes args as a RESP array of bulk strings.
func respCommand(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return b
}
