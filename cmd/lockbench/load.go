package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/lockhub/lockhub/protocol"
)

// The client side of a run: watchers, claimers, and what they measured.

// loadResult is what the client side reports (in JSON from a child process).
type loadResult struct {
	Watchers      int     `json:"watchers"`        // sockets watching
	DialSeconds   float64 `json:"dialSeconds"`     // to open and watch all of them
	Claims        int     `json:"claims"`          // claims answered acquired
	Failed        int     `json:"failed"`          // claims answered otherwise, or errors
	ClaimLatency  summary `json:"claimLatency"`    // claim sent -> result
	EventLatency  summary `json:"eventLatency"`    // claim sent -> Acquired at a watcher
	Expected      int64   `json:"expected"`        // events the watchers should get
	Received      int64   `json:"received"`        // events they got
	Lost          int64   `json:"lost"`            // Expected - Received
	Dropped       uint64  `json:"dropped"`         // events a client queue dropped (in Lost)
	ClosedEarly   int     `json:"closedEarly"`     // watchers that ended during the run
	LoadSeconds   float64 `json:"loadSeconds"`     // from the first claim to the last event
	PeakEventRate float64 `json:"eventsPerSecond"` // frames delivered per second, all watchers

	Floor *floorResult `json:"floor,omitempty"` // the machine's fan-out floor, measured first

	ClosedHow map[string]int `json:"closedHow,omitempty"` // the early ends by how: a close code, or "cut"
}

// client makes sockets and tokens for one hub.
type client struct {
	url, tokenURL string
	tenant, typ   string
	roles         []string // of the tokens it gets; nil: none
	http          *http.Client
}

// token gets a development token from the hub's POST /dev/token.
func (cl *client) token(ctx context.Context, oid string) (string, error) {
	roles := cl.roles
	if roles == nil {
		roles = []string{}
	}
	body, _ := json.Marshal(map[string]any{"tenant": cl.tenant, "oid": oid, "name": "lockbench " + oid, "roles": roles})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.tokenURL, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: %s: %s", cl.tokenURL, resp.Status, b)
	}
	var out struct{ Token string }
	if err := json.Unmarshal(b, &out); err != nil || out.Token == "" {
		return "", fmt.Errorf("POST %s: no token in %s", cl.tokenURL, b)
	}
	return out.Token, nil
}

// open dials and authenticates a socket. Buffer is small: ten thousand clients with
// the default 4096-event queues would hold gigabytes.
func (cl *client) open(ctx context.Context, token string) (*protocol.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := protocol.Dial(dctx, cl.url, &protocol.DialOptions{Buffer: 64, HTTPClient: cl.http})
	if err != nil {
		return nil, err
	}
	if _, err := c.Auth(dctx, token); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// run is one load run: uids of its claims start with prefix, so events of anything
// else on the hub are ignored.
type run struct {
	cl     *client
	prefix string
	sent   sync.Map // uid -> time.Time the claim was sent

	received atomic.Int64
	expected atomic.Int64
	// ending is set when the run closes its watchers: a socket ending after it ended by
	// the run's own close, however that close went (a handshake cut short by the load
	// of ten thousand closes at once is not the hub closing early).
	ending atomic.Bool
}

func newRun(cl *client) *run {
	return &run{cl: cl, prefix: "lb-" + strings.ToLower(rand.Text()[:6]) + "-"}
}

// watcher is one watching socket and what its reader goroutine recorded. Watchers are
// raw sockets read by one goroutine each, parsing only what they count: with ten
// thousand of them on the same two cores as the hub, a full client per watcher (a
// reader goroutine, a JSON decode and a channel hop per event) would measure the
// clients, not the hub.
type watcher struct {
	ws    *websocket.Conn
	lat   []time.Duration // claim-to-Acquired; owned by the reader goroutine until done
	got   int64           // events of the run received; likewise
	early string          // how it ended, if before the run closed it: the close code, or "cut"
	done  chan struct{}
}

// openWatchers opens n sockets that watch the run's type, dialers at a time, each read
// by a goroutine of its own until its socket closes.
func (r *run) openWatchers(ctx context.Context, n, dialers int) ([]*watcher, error) {
	token, err := r.cl.token(ctx, "u-lockbench-watcher")
	if err != nil {
		return nil, err
	}
	ws := make([]*watcher, n)
	sem := make(chan struct{}, dialers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := range ws {
		sem <- struct{}{}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			conn, err := r.cl.connect(ctx, token, true)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("watcher %d: %w", i, err)
				}
				mu.Unlock()
				return
			}
			w := &watcher{ws: conn, done: make(chan struct{})}
			ws[i] = w
			go r.read(w) // joined by closeWatchers, through w.done
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		closeWatchers(ws)
		return nil, firstErr
	}
	return ws, nil
}

// connect opens a raw socket and authenticates it, and watches the run's type when
// watch, waiting for the welcome before the watch.
func (cl *client) connect(ctx context.Context, token string, watch bool) (*websocket.Conn, error) {
	if !watch {
		return cl.dial(ctx, token, nil, false)
	}
	return cl.dial(ctx, token, cl.watchRequest(), false)
}

// watchRequest is the watch of the run's type.
func (cl *client) watchRequest() *protocol.Request {
	return &protocol.Request{ID: "w", Type: protocol.FrameWatch, EntityType: cl.typ}
}

// dial opens a raw socket and authenticates it, then, when ask is set (a watch or a
// ping), sends it and reads its answer: after the welcome, or with pipeline right
// behind the auth, as the browser client sends its watches (the hub answers both in
// one write). Every kind of socket is made by the same steps, so that the crowd's two
// sides differ by the ask alone.
func (cl *client) dial(ctx context.Context, token string, ask *protocol.Request, pipeline bool) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, cl.url, &websocket.DialOptions{HTTPClient: cl.http, Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(16 << 20) // a snapshot grows with its locks
	send := func(req protocol.Request) error {
		b, _ := json.Marshal(req) // strings only
		return ws.Write(dctx, websocket.MessageText, b)
	}
	err = send(protocol.Request{Type: protocol.FrameAuth, Token: token})
	if err == nil && ask != nil && pipeline {
		err = send(*ask)
	}
	if err == nil {
		err = readFrameType(dctx, ws, protocol.FrameWelcome)
	}
	if err == nil && ask != nil && !pipeline {
		err = send(*ask)
	}
	if err == nil && ask != nil {
		err = readFrameType(dctx, ws, answerType(ask.Type))
	}
	if err != nil {
		_ = ws.CloseNow()
		return nil, err
	}
	return ws, nil
}

// answerType is the type of the frame that answers a request of type t.
func answerType(t protocol.FrameType) protocol.FrameType {
	switch t {
	case protocol.FrameWatch:
		return protocol.FrameSnapshot
	case protocol.FramePing:
		return protocol.FramePong
	}
	return protocol.FrameResult
}

// answerBufs recycles the buffers readFrameType reads answers into.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readFrameType reads one message and checks that it is a frame of type want. It
// decodes the frame's members only up to "type", not its locks: a browser decodes its
// snapshot on its own machine, and a full decode here (a 4 KiB snapshot costs the
// clients more than the hub's whole watch) would bill the clients' CPU, on the same
// two cores, to the hub. The rest is still read off the socket.
func readFrameType(ctx context.Context, ws *websocket.Conn, want protocol.FrameType) error {
	_, r, err := ws.Reader(ctx)
	if err != nil {
		return err
	}
	buf := answerBufs.Get().(*bytes.Buffer)
	defer answerBufs.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return err
	}
	got, err := leadingType(buf.Bytes())
	if err != nil {
		return fmt.Errorf("%w: %.200s", err, buf.Bytes())
	}
	if got != want {
		return fmt.Errorf("got %.200s, want a %s frame", buf.Bytes(), want)
	}
	return nil
}

// leadingType reads a JSON object's members until its "type" and returns that string.
func leadingType(b []byte) (protocol.FrameType, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return "", errors.New("not a JSON object")
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return "", err
		}
		if name.String() != "type" {
			if err := dec.SkipValue(); err != nil {
				return "", err
			}
			continue
		}
		v, err := dec.ReadToken()
		if err != nil || v.Kind() != '"' {
			return "", errors.New(`"type" is not a string`)
		}
		return protocol.FrameType(v.String()), nil
	}
	return "", errors.New(`no "type" member`)
}

// read records the run's events of one watcher until its socket closes.
func (r *run) read(w *watcher) {
	defer close(w.done)
	var buf bytes.Buffer
	prefix := []byte(`"entityUid":"` + r.prefix)
	for {
		_, rd, err := w.ws.Reader(context.Background()) // ends when the socket closes
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(rd)
		}
		if err != nil {
			if !r.ending.Load() {
				w.early = "cut"
				if code := websocket.CloseStatus(err); code != -1 {
					w.early = strconv.Itoa(int(code))
				}
			}
			return
		}
		b := buf.Bytes()
		// {"type":"lock","op":"Acquired","lock":{"entityType":..,"entityUid":"lb-..
		i := bytes.Index(b, prefix)
		if i < 0 {
			continue
		}
		uidStart := i + len(`"entityUid":"`)
		uidEnd := bytes.IndexByte(b[uidStart:], '"')
		if uidEnd < 0 {
			continue
		}
		switch {
		case bytes.Contains(b, []byte(`"op":"Acquired"`)):
			if t0, ok := r.sent.Load(string(b[uidStart : uidStart+uidEnd])); ok {
				w.lat = append(w.lat, time.Since(t0.(time.Time)))
			}
		case bytes.Contains(b, []byte(`"op":"Released"`)):
		default:
			continue
		}
		w.got++
		r.received.Add(1)
	}
}

// closeWatchers closes every socket and joins its reader.
func closeWatchers(ws []*watcher) {
	var wg sync.WaitGroup
	for _, w := range ws {
		if w == nil {
			continue
		}
		wg.Go(func() {
			_ = w.ws.Close(websocket.StatusNormalClosure, "")
			<-w.done
		})
	}
	wg.Wait()
}

// claim runs the claimers: m sockets, k claims each, rate claims a second in all, each
// claim of a fresh uid followed by its release half a claim spacing later. Every
// watcher should see an Acquired and a Released event per claim.
func (r *run) claim(ctx context.Context, watchers []*watcher, m, k int, rate float64) (claims, failed int, lat []time.Duration, err error) {
	clients := make([]*protocol.Client, m)
	defer func() {
		for _, c := range clients {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	for i := range clients {
		tok, err := r.cl.token(ctx, fmt.Sprintf("u-lockbench-claimer-%d", i))
		if err != nil {
			return 0, 0, nil, err
		}
		if clients[i], err = r.cl.open(ctx, tok); err != nil {
			return 0, 0, nil, err
		}
	}
	interval := time.Duration(float64(time.Second) * float64(m) / rate)
	// Each release waits half the spacing between two claims of the whole run, so its
	// fan-out runs between two Acquired fan-outs instead of on top of the one just
	// started: a user edits for a while before letting go, and the Acquired latency
	// measured is that of one event's fan-out, not of two queued together.
	holdFor := time.Duration(float64(time.Second) / rate / 2)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			// Spread the claimers over the interval.
			phase := time.NewTimer(interval * time.Duration(i) / time.Duration(m))
			select {
			case <-ctx.Done():
				phase.Stop()
				return
			case <-phase.C:
			}
			var mine []time.Duration
			ok, bad := 0, 0
		claims:
			for j := range k {
				uid := fmt.Sprintf("%s%d-%d", r.prefix, i, j)
				t0 := time.Now()
				r.sent.Store(uid, t0)
				res, err := c.Claim(ctx, r.cl.typ, uid)
				d := time.Since(t0)
				if err != nil || res.Outcome != protocol.OutcomeAcquired {
					bad++
				} else {
					ok++
					mine = append(mine, d)
					r.expected.Add(2 * int64(len(watchers)))
					hold := time.NewTimer(holdFor)
					select {
					case <-ctx.Done():
						hold.Stop()
						break claims
					case <-hold.C:
					}
					if _, err := c.Release(ctx, r.cl.typ, uid); err != nil {
						bad++
					}
				}
				select {
				case <-ctx.Done():
					break claims
				case <-t.C:
				}
			}
			mu.Lock()
			claims, failed, lat = claims+ok, failed+bad, append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return claims, failed, lat, ctx.Err()
}

// load runs a whole client side: watchers first, then ready() (the parent measures the
// hub's memory), then the claims, then it waits for the last events.
func (cl *client) load(ctx context.Context, o options, ready func(watchers int) error) (loadResult, error) {
	var floor *floorResult
	if o.floor > 0 {
		f, err := measureFloor(ctx, min(o.floor, o.watchers))
		if err != nil {
			return loadResult{}, fmt.Errorf("floor: %w", err)
		}
		floor = &f
	}
	r := newRun(cl)
	start := time.Now()
	ws, err := r.openWatchers(ctx, o.watchers, o.dialers)
	if err != nil {
		return loadResult{}, err
	}
	defer closeWatchers(ws)
	res := loadResult{Watchers: len(ws), DialSeconds: time.Since(start).Seconds(), Floor: floor}
	if err := ready(len(ws)); err != nil {
		return res, err
	}

	loadStart := time.Now()
	claims, failed, claimLat, err := r.claim(ctx, ws, o.claimers, o.claims, o.rate)
	res.Claims, res.Failed, res.ClaimLatency = claims, failed, summarize(claimLat)
	if err != nil {
		return res, err
	}
	// Wait for the last events, within a bound: what has not come by then is lost.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	for r.received.Load() < r.expected.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		<-tick.C
	}
	tick.Stop()
	res.LoadSeconds = time.Since(loadStart).Seconds()
	r.ending.Store(true)
	closeWatchers(ws)
	var lat []time.Duration
	for _, w := range ws {
		lat = append(lat, w.lat...)
		if w.early != "" {
			res.ClosedEarly++
			if res.ClosedHow == nil {
				res.ClosedHow = map[string]int{}
			}
			res.ClosedHow[w.early]++
		}
	}
	res.EventLatency = summarize(lat)
	res.Expected, res.Received = r.expected.Load(), r.received.Load()
	// A claim answered unknown may still have been written: its events are extra.
	res.Lost = max(0, res.Expected-res.Received)
	if res.LoadSeconds > 0 {
		res.PeakEventRate = float64(res.Received) / res.LoadSeconds
	}
	return res, nil
}
