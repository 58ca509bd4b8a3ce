package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
)

// DialOptions configures Dial. The zero value works.
type DialOptions struct {
	// HTTPHeader is sent with the handshake, e.g. an Origin header.
	HTTPHeader http.Header
	// HTTPClient performs the handshake. Nil means http.DefaultClient.
	HTTPClient *http.Client
	// ReadLimit caps the size of one server frame in bytes. Zero means 16 MiB; -1 means
	// no cap. Server frames are not bound by MaxFrameSize: a snapshot grows with its
	// locks.
	ReadLimit int64
	// Buffer is the capacity of the Events channel, and of the queue NextFrame reads.
	// Zero means 4096.
	Buffer int
}

// HandshakeError is returned by Dial when the server refuses the WebSocket handshake,
// e.g. with 403 for an Origin not allowed.
type HandshakeError struct {
	StatusCode int    // the HTTP status of the refusal
	Body       []byte // up to its first 1 KiB
	Err        error
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("protocol: handshake refused with HTTP %d: %v", e.StatusCode, e.Err)
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// Client is a connection to the hub: a small client for tests and load tools.
//
// One goroutine, started by Dial and joined by Close, reads every server frame. It
// hands an answer to the call waiting for its id, queues each lock event on Events and
// every other frame (unsolicited snapshots, errors and results no call waits for) for
// NextFrame. It never blocks on a slow consumer: when a queue is full the frame is
// dropped, and counted by Dropped if it has no id.
//
// All methods may be called concurrently. A call whose ctx ends stops waiting, but its
// request may have been sent, and a ctx that ends during the write itself closes the
// connection (coder/websocket cannot leave half a message on the wire).
type Client struct {
	conn *websocket.Conn

	nextID    atomic.Uint64
	dropped   atomic.Uint64
	closeOnce sync.Once
	closeErr  error       // written once, in Close's closeOnce
	closedUs  atomic.Bool // Close started the close handshake

	// Owned by read: it alone sends on events and frames and closes them, and writes
	// err before closing done.
	events chan LockEvent
	frames chan ServerFrame
	err    error
	done   chan struct{}

	mu      sync.Mutex
	waiting map[string]chan ServerFrame // guarded by mu; by request id, authKey for Auth
}

// authKey is the waiting key of Auth, which has no id: request ids are never empty.
const authKey = ""

// Dial opens a WebSocket to url (ws:// or wss://, the hub's /ws) with the lockhub.v1
// subprotocol. The caller must Auth first, and Close the Client when done. ctx bounds
// the handshake only.
func Dial(ctx context.Context, url string, opts *DialOptions) (*Client, error) {
	var o DialOptions
	if opts != nil {
		o = *opts
	}
	if o.ReadLimit == 0 {
		o.ReadLimit = 16 << 20
	}
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:   o.HTTPClient,
		HTTPHeader:   o.HTTPHeader,
		Subprotocols: []string{Subprotocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			he := &HandshakeError{StatusCode: resp.StatusCode, Err: err}
			if resp.Body != nil {
				he.Body, _ = io.ReadAll(resp.Body) // already cut to 1 KiB by coder/websocket
			}
			return nil, he
		}
		return nil, fmt.Errorf("protocol: dial: %w", err)
	}
	if conn.Subprotocol() != Subprotocol {
		_ = conn.Close(websocket.StatusProtocolError, "subprotocol "+Subprotocol+" required") // the returned error says why
		return nil, fmt.Errorf("protocol: dial: server did not accept subprotocol %s", Subprotocol)
	}
	conn.SetReadLimit(o.ReadLimit)

	c := &Client{
		conn:    conn,
		events:  make(chan LockEvent, o.Buffer),
		frames:  make(chan ServerFrame, o.Buffer),
		done:    make(chan struct{}),
		waiting: make(map[string]chan ServerFrame),
	}
	go c.read()
	return c, nil
}

// read is the only reader of the connection; it runs until the connection ends.
func (c *Client) read() {
	defer close(c.done)
	defer close(c.frames)
	defer close(c.events)
	for {
		// No ctx of a caller: the read lives as long as the connection, which Close ends.
		typ, data, err := c.conn.Read(context.Background())
		if err != nil {
			c.err = err
			return
		}
		if typ != websocket.MessageText {
			c.err = errors.New("protocol: server sent a binary message")
			_ = c.conn.Close(websocket.StatusUnsupportedData, "text frames only") // c.err says why
			return
		}
		f, err := DecodeServerFrame(data)
		if err != nil {
			c.err = fmt.Errorf("protocol: bad frame from server: %w", err)
			_ = c.conn.Close(websocket.StatusProtocolError, "bad frame") // c.err says why
			return
		}
		c.route(f)
	}
}

// route hands f to the call waiting for it, or queues it.
func (c *Client) route(f ServerFrame) {
	if f.Event != nil {
		select {
		case c.events <- *f.Event:
		default:
			c.dropped.Add(1)
		}
		return
	}
	key, answer := f.ID, f.ID != ""
	if !answer && (f.Type == FrameWelcome || f.Type == FrameError) {
		// Before authentication auth is the only frame in flight, so a welcome or an
		// error without an id answers it.
		key, answer = authKey, true
	}
	if answer {
		c.mu.Lock()
		ch, ok := c.waiting[key]
		delete(c.waiting, key)
		c.mu.Unlock()
		if ok {
			ch <- f // buffered, and removed from waiting: the only send
			return
		}
	}
	select {
	case c.frames <- f:
	default:
		if f.ID == "" {
			c.dropped.Add(1)
		}
		// A late answer to a call that stopped waiting carries no state worth a count.
	}
}

// newID returns a fresh request id.
func (c *Client) newID() string { return strconv.FormatUint(c.nextID.Add(1), 10) }

// call sends req and waits for the frame answering it: the one echoing req.ID, or for
// an auth without an id its welcome. An error frame comes back as its *Error, with the
// frame.
func (c *Client) call(ctx context.Context, req Request) (ServerFrame, error) {
	if err := ctx.Err(); err != nil {
		return ServerFrame{}, err // a write with an ended ctx would close the connection
	}
	key := req.ID // authKey when empty
	ch := make(chan ServerFrame, 1)
	c.mu.Lock()
	if _, busy := c.waiting[key]; busy {
		c.mu.Unlock()
		return ServerFrame{}, errors.New("protocol: an auth is already waiting for its welcome")
	}
	c.waiting[key] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.waiting[key] == ch {
			delete(c.waiting, key)
		}
		c.mu.Unlock()
	}()

	b, err := json.Marshal(req)
	if err != nil {
		return ServerFrame{}, fmt.Errorf("protocol: %w", err)
	}
	if err := c.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return ServerFrame{}, c.writeError(err)
	}
	var f ServerFrame
	select {
	case f = <-ch:
	case <-ctx.Done():
		return ServerFrame{}, ctx.Err()
	case <-c.done:
		select {
		case f = <-ch: // answered just before the connection ended
		default:
			return ServerFrame{}, c.closedError()
		}
	}
	if f.Error != nil {
		return f, f.Error
	}
	return f, nil
}

// closedError is the error of a call on a connection that has ended; it wraps why,
// so websocket.CloseStatus tells the close code. Only after done is closed.
func (c *Client) closedError() error {
	return fmt.Errorf("protocol: connection closed: %w", c.err)
}

// writeError prefers why the connection ended, when it has, to the write's own error.
func (c *Client) writeError(err error) error {
	select {
	case <-c.done:
		return c.closedError()
	default:
		return fmt.Errorf("protocol: write: %w", err)
	}
}

// unexpected is the error of an answer of the wrong type.
func unexpected(f ServerFrame, want FrameType) error {
	return fmt.Errorf("protocol: got a %q frame, want %q: %s", f.Type, want, f.Raw)
}

// Auth sends the first frame of the connection and returns the welcome. A refused
// token closes the connection: the error then wraps its close status
// (websocket.CloseStatus(err) == CloseNotAuthenticated).
func (c *Client) Auth(ctx context.Context, token string) (Welcome, error) {
	f, err := c.call(ctx, Request{Type: FrameAuth, Token: token})
	if err != nil {
		return Welcome{}, err
	}
	if f.Welcome == nil {
		return Welcome{}, unexpected(f, FrameWelcome)
	}
	return *f.Welcome, nil
}

// Refresh replaces the connection's token in band (auth with an id).
func (c *Client) Refresh(ctx context.Context, token string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameAuth, Token: token}))
}

// Claim claims the entity: OutcomeAcquired, OutcomeRenewed, OutcomeLocked (Result.Lock is
// the holder's lock) or OutcomeUnknown.
func (c *Client) Claim(ctx context.Context, entityType, uid string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameClaim, EntityType: entityType, EntityUID: uid}))
}

// Renew extends the caller's lease: OutcomeRenewed, OutcomeLost or OutcomeUnknown.
func (c *Client) Renew(ctx context.Context, entityType, uid string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameRenew, EntityType: entityType, EntityUID: uid}))
}

// Release releases the caller's lock: OutcomeReleased, OutcomeNotHeld or OutcomeUnknown.
func (c *Client) Release(ctx context.Context, entityType, uid string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameRelease, EntityType: entityType, EntityUID: uid}))
}

// Takeover takes the entity's lock over: OutcomeTakenOver (Result.PreviousHolder set),
// OutcomeAcquired, OutcomeForbidden or OutcomeUnknown.
func (c *Client) Takeover(ctx context.Context, entityType, uid string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameTakeover, EntityType: entityType, EntityUID: uid}))
}

// Watch subscribes to the lock events of entityType and returns its snapshot. The
// events that follow the snapshot arrive on Events.
func (c *Client) Watch(ctx context.Context, entityType string) (Snapshot, error) {
	f, err := c.call(ctx, Request{ID: c.newID(), Type: FrameWatch, EntityType: entityType})
	if err != nil {
		return Snapshot{}, err
	}
	if f.Snapshot == nil {
		return Snapshot{}, unexpected(f, FrameSnapshot)
	}
	return *f.Snapshot, nil
}

// Unwatch ends a Watch: OutcomeUnwatched.
func (c *Client) Unwatch(ctx context.Context, entityType string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameUnwatch, EntityType: entityType}))
}

// Ping asks whether the hub is there (version 2) and returns its pong.
func (c *Client) Ping(ctx context.Context) (Pong, error) {
	f, err := c.call(ctx, Request{ID: c.newID(), Type: FramePing})
	if err != nil {
		return Pong{}, err
	}
	if f.Pong == nil {
		return Pong{}, unexpected(f, FramePong)
	}
	return *f.Pong, nil
}

// View starts viewing an entity (version 2, §9) and returns its viewers. Every later
// change of them arrives, without an id, from NextFrame, as do nudges for the caller.
func (c *Client) View(ctx context.Context, entityType, uid string) (Presence, error) {
	f, err := c.call(ctx, Request{ID: c.newID(), Type: FrameView, EntityType: entityType, EntityUID: uid})
	if err != nil {
		return Presence{}, err
	}
	if f.Presence == nil {
		return Presence{}, unexpected(f, FramePresence)
	}
	return *f.Presence, nil
}

// ViewWith is View with an intent (version 3, §9): IntentEdit waits in line while
// someone else holds the lock (§11), and a handoff frame, from NextFrame, says when the
// lock came to the caller. A view of an entity viewed already changes the intent.
func (c *Client) ViewWith(ctx context.Context, entityType, uid string, intent Intent) (Presence, error) {
	f, err := c.call(ctx, Request{ID: c.newID(), Type: FrameView, EntityType: entityType, EntityUID: uid, Intent: intent})
	if err != nil {
		return Presence{}, err
	}
	if f.Presence == nil {
		return Presence{}, unexpected(f, FramePresence)
	}
	return *f.Presence, nil
}

// ClaimMany claims every entity of uids, or none (version 3, §12): OutcomeAcquired with
// the caller's locks in the order asked, OutcomeLocked with the locks of others in the
// way, or OutcomeUnknown.
func (c *Client) ClaimMany(ctx context.Context, entityType string, uids []string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameClaimMany, EntityType: entityType, EntityUIDs: uids}))
}

// ReleaseMany releases the caller's locks of uids (§12): OutcomeReleased with Count, or
// OutcomeUnknown.
func (c *Client) ReleaseMany(ctx context.Context, entityType string, uids []string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameReleaseMany, EntityType: entityType, EntityUIDs: uids}))
}

// Unview ends a View: OutcomeUnviewed.
func (c *Client) Unview(ctx context.Context, entityType, uid string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameUnview, EntityType: entityType, EntityUID: uid}))
}

// Nudge asks the holder of an entity the caller views to finish: OutcomeNudged,
// OutcomeNotHeld or OutcomeUnknown; an *Error with CodeRateLimited or CodeForbidden.
func (c *Client) Nudge(ctx context.Context, entityType, uid string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameNudge, EntityType: entityType, EntityUID: uid}))
}

// Mine returns the caller's live locks.
func (c *Client) Mine(ctx context.Context) ([]Lock, error) {
	r, err := c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameMine}))
	return r.Locks, err
}

// AdminLocks returns every live lock of the tenant (the lock console, PROTOCOL.md §10);
// without the admin role an error frame with CodeForbidden.
func (c *Client) AdminLocks(ctx context.Context) ([]Lock, error) {
	r, err := c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameAdminLocks}))
	return r.Locks, err
}

// ForceRelease drops the entity's lock whoever holds it (the lock console):
// OutcomeReleased (Result.Lock is the lock that was held), OutcomeNotHeld or
// OutcomeUnknown; without the admin role an error frame with CodeForbidden.
func (c *Client) ForceRelease(ctx context.Context, entityType, uid string) (Result, error) {
	return c.result(c.call(ctx, Request{ID: c.newID(), Type: FrameForceRelease, EntityType: entityType, EntityUID: uid}))
}

func (c *Client) result(f ServerFrame, err error) (Result, error) {
	if err != nil {
		return Result{}, err
	}
	if f.Result == nil {
		return Result{}, unexpected(f, FrameResult)
	}
	return *f.Result, nil
}

// SendRaw writes data as one message of type typ, unchecked: for tests that send what
// no well-behaved client would. Its answer, if any, comes from NextFrame (or Events).
func (c *Client) SendRaw(ctx context.Context, typ websocket.MessageType, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err // a write with an ended ctx would close the connection
	}
	if err := c.conn.Write(ctx, typ, data); err != nil {
		return c.writeError(err)
	}
	return nil
}

// NextFrame returns the next frame that answered no call of the Client and is not a
// lock event: an unsolicited snapshot, or the answer to a SendRaw. Once the connection
// has ended and the queue is empty it returns the error of a call on a closed Client.
func (c *Client) NextFrame(ctx context.Context) (ServerFrame, error) {
	select {
	case f, ok := <-c.frames:
		if !ok {
			return ServerFrame{}, c.closedError() // frames is closed before done
		}
		return f, nil
	case <-ctx.Done():
		return ServerFrame{}, ctx.Err()
	}
}

// Events returns the lock events of the watched types, in the order received. The
// channel is closed when the connection ends. It holds DialOptions.Buffer events;
// when it is full, further events are dropped and counted by Dropped.
func (c *Client) Events() <-chan LockEvent { return c.events }

// Dropped returns how many frames without an id (lock events, unsolicited snapshots)
// were dropped because Events or the NextFrame queue was full. Nonzero means lock
// events may have been lost.
func (c *Client) Dropped() uint64 { return c.dropped.Load() }

// Done is closed when the connection has ended, by Close or by the server.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, nil while it is open. When the server closed
// it, websocket.CloseStatus(c.Err()) is its close code (see CloseStatus).
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// CloseStatus returns the close code of the ended connection (the server's, or
// websocket.StatusNormalClosure after Close), -1 while it is open or when it ended
// without a close frame.
func (c *Client) CloseStatus() websocket.StatusCode {
	s := websocket.CloseStatus(c.Err())
	if s == -1 && c.closedUs.Load() && c.Err() != nil {
		// Our own close: the reader may see the connection end before the server's
		// echo of the close frame (coder/websocket closes it once the handshake is done),
		// and then reports no close frame. It was a normal closure all the same.
		return websocket.StatusNormalClosure
	}
	return s
}

// Close closes the connection with 1000 (the close handshake waits at most ~10 s for
// an unresponsive server) and waits for the reader goroutine to return. Calls waiting
// for an answer return an error. Close may be called more than once, concurrently.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		select {
		case <-c.done: // already ended; Err says how
			_ = c.conn.CloseNow() // only releases what is left
			return
		default:
		}
		c.closedUs.Store(true)
		err := c.conn.Close(websocket.StatusNormalClosure, "")
		if errors.Is(err, net.ErrClosed) {
			err = nil // the server closed it meanwhile
		}
		c.closeErr = err
	})
	<-c.done
	return c.closeErr
}
