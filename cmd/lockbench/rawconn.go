package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/protocol"
)

// rawConn is a socket of -mode share's big tenant that never decodes what it reads: it
// matches each answer to its request by the id the frame starts with. The people of a
// tenant at its quota are browsers on other machines, which decode their 4 MB
// snapshots and lists on their own CPU; decoded here, on the hub's two cores, they
// took more CPU than the hub itself, and the benchmark measured its own load generator.
type rawConn struct {
	ws   *websocket.Conn
	next int
	buf  bytes.Buffer
}

// rawOpen dials cl's hub and authenticates with token.
func rawOpen(ctx context.Context, cl *client, token string) (*rawConn, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, cl.url, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}, HTTPClient: cl.http})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(64 << 20) // a snapshot of 20,000 locks is about 4 MB
	c := &rawConn{ws: ws}
	auth, _ := json.Marshal(map[string]string{"type": string(protocol.FrameAuth), "token": token}) // strings always encode
	if err := ws.Write(dctx, websocket.MessageText, auth); err != nil {
		c.Close()
		return nil, err
	}
	b, err := c.read(dctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	if !bytes.Contains(b, []byte(`"type":"`+string(protocol.FrameWelcome)+`"`)) {
		c.Close()
		return nil, fmt.Errorf("lockbench: auth answered %.200s", b)
	}
	return c, nil
}

// call sends a request of typ with fields (a JSON object's members, each with its
// leading comma) and reads frames until its answer. An error frame answers a
// *protocol.Error.
func (c *rawConn) call(ctx context.Context, typ protocol.FrameType, fields string) error {
	c.next++
	id := strconv.Itoa(c.next)
	req := `{"id":"` + id + `","type":"` + string(typ) + `"` + fields + `}`
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
		return err
	}
	head := []byte(`{"id":"` + id + `",`)
	for {
		b, err := c.read(ctx)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(b, head) {
			continue // an event, or a frame of no request of ours
		}
		if bytes.HasPrefix(b[len(head):], []byte(`"type":"`+string(protocol.FrameError)+`"`)) {
			pe := &protocol.Error{}
			if err := json.Unmarshal(b, pe); err != nil {
				return fmt.Errorf("lockbench: an error frame that does not parse: %.200s", b)
			}
			return pe
		}
		return nil
	}
}

// read reads one frame into c's buffer, valid until the next read.
func (c *rawConn) read(ctx context.Context) ([]byte, error) {
	_, r, err := c.ws.Reader(ctx)
	if err != nil {
		return nil, err
	}
	c.buf.Reset()
	if _, err := io.Copy(&c.buf, r); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), nil
}

// Close closes the socket; a nil rawConn (a reconnect that failed) has none.
func (c *rawConn) Close() {
	if c != nil {
		_ = c.ws.CloseNow() // a benchmark's socket: nothing to tell
	}
}

// drain reads and drops every frame until the socket ends, on a goroutine of its own;
// the returned func closes the socket and waits for that goroutine. For a socket that
// only watches (a grid left open), which the hub would close as a slow reader if its
// events were left unread.
func (c *rawConn) drain() (closeAndWait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, _, err := c.ws.Read(context.Background()); err != nil {
				return // closed: by closeAndWait, or the hub
			}
		}
	}()
	return func() {
		c.Close()
		<-done
	}
}
