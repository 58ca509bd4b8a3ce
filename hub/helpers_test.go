package hub

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// waitTimeout bounds every wait of these tests for a frame or a close of the hub;
// polls of a state (redistest.Eventually) have their own, longer deadline.
const waitTimeout = 5 * time.Second

// requestTimeout bounds the requests of a test (tctx), all of them together where a
// test shares one ctx: it catches a hang, it is no time limit, so it is generous.
const requestTimeout = 30 * time.Second

// testHub is a hub served by an httptest server on a store, with a dev token issuer.
type testHub struct {
	t     testing.TB
	hub   *Hub
	store *locks.Store
	srv   *httptest.Server
	url   string // ws://127.0.0.1:port/ws
	dev   *auth.Dev
	reg   *prometheus.Registry
	mr    *miniredis.Miniredis // set by startMini
	// stop shuts the hub down as cmd/lockhub does (Shutdown, then Run's ctx) and waits
	// for Run; the test's cleanup calls it too, so a test may stop a hub early.
	stop func()
}

// hubOptions adjusts a test hub's configs.
type hubOptions struct {
	hub   func(*Config)
	store func(*locks.Config)
	dev   *auth.Dev // shared by several hubs; nil means a new one
	// sndbuf, when set, caps the kernel send buffer of every accepted connection.
	sndbuf int
	// wrap, when set, is given every accepted connection and returns what the hub
	// serves it through.
	wrap func(net.Conn) net.Conn
}

// startMini starts a hub on a fresh miniredis.
func startMini(t testing.TB, o hubOptions) *testHub {
	t.Helper()
	mr := miniredis.RunT(t)
	// Generous timeouts: miniredis runs Lua in Go, slowly under -race on a busy machine,
	// and these tests are about the hub, not about timeouts.
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	th := startHub(t, rdb, o)
	th.mr = mr
	return th
}

// startReal starts a hub on a fresh real redis-server.
func startReal(t testing.TB, o hubOptions) (*testHub, *redistest.Server) {
	t.Helper()
	srv := redistest.StartServer(t)
	return startHub(t, srv.Client(t), o), srv
}

// startHub starts a Store and a Hub on rdb, runs the hub and serves it; every piece is
// stopped and joined in the test's cleanup.
func startHub(t testing.TB, rdb redis.UniversalClient, o hubOptions) *testHub {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	reg, _ := locks.NewRegistry("ApprovalRequest", "Invoice")
	// One registry for the hub's and the store's metrics, as cmd/lockhub has it: tests
	// read why the store failed open.
	preg := prometheus.NewRegistry()
	scfg := locks.Config{Client: rdb, Registry: reg, Logger: log, Timeout: 2 * time.Second, Registerer: preg}
	if o.store != nil {
		o.store(&scfg)
	}
	store, err := locks.NewStore(scfg)
	if err != nil {
		t.Fatal(err)
	}
	dev := o.dev
	if dev == nil {
		if dev, err = auth.NewDev(auth.DevConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Store: StoreOf(store), Verifier: dev, Logger: log, Registerer: preg, ReleaseGrace: 200 * time.Millisecond,
		SweepInterval: 50 * time.Millisecond}
	if o.hub != nil {
		o.hub(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- h.Run(ctx) }()
	srv := httptest.NewUnstartedServer(h)
	if o.sndbuf > 0 || o.wrap != nil {
		srv.Listener = sndbufListener{srv.Listener, o.sndbuf, o.wrap}
	}
	srv.Start()
	stop := sync.OnceFunc(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := h.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
		srv.Close()
	})
	t.Cleanup(stop)
	return &testHub{t: t, hub: h, store: store, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws", dev: dev, reg: preg, stop: stop}
}

// sndbufListener sets the send buffer of each connection it accepts (when size is
// set), so that a client that stops reading fills it after a few frames instead of
// megabytes, and wraps it (when wrap is set).
type sndbufListener struct {
	net.Listener
	size int
	wrap func(net.Conn) net.Conn
}

func (l sndbufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && l.size > 0 {
		_ = tc.SetWriteBuffer(l.size) // a test knob: without it the test is only slower
	}
	if err == nil && l.wrap != nil {
		c = l.wrap(c)
	}
	return c, err
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// token issues a dev token.
func (th *testHub) token(tenant, oid string, roles ...string) string {
	th.t.Helper()
	tok, err := th.dev.Issue(tenant, oid, "Name of "+oid, roles)
	if err != nil {
		th.t.Fatal(err)
	}
	return tok
}

// dialRaw opens a socket without authenticating; it is closed at cleanup.
func (th *testHub) dialRaw() *protocol.Client {
	th.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := protocol.Dial(ctx, th.url, nil)
	if err != nil {
		th.t.Fatalf("dial: %v", err)
	}
	th.t.Cleanup(func() { _ = c.Close() })
	return c
}

// dial opens an authenticated socket for tenant/oid.
func (th *testHub) dial(tenant, oid string, roles ...string) (*protocol.Client, protocol.Welcome) {
	th.t.Helper()
	c := th.dialRaw()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	w, err := c.Auth(ctx, th.token(tenant, oid, roles...))
	if err != nil {
		th.t.Fatalf("auth: %v", err)
	}
	return c, w
}

// authClock opens a socket that never authenticates. The hub closes it with 4408 when
// its timer of Config.AuthTimeout, started now, fires: a test whose subject is time
// passing on the hub (an idle socket, a calm spell) waits on that close, an event of
// the hub's own clock, not on the test's.
func (th *testHub) authClock() *protocol.Client {
	th.t.Helper()
	return th.dialRaw()
}

// dialAs opens a socket authenticated as holder of tenant: dial with a name of the
// test's choosing.
func (th *testHub) dialAs(tenant string, holder protocol.Holder, roles ...string) *protocol.Client {
	th.t.Helper()
	tok, err := th.dev.Issue(tenant, holder.OID, holder.Name, roles)
	if err != nil {
		th.t.Fatal(err)
	}
	c := th.dialRaw()
	if _, err := c.Auth(tctx(th.t), tok); err != nil {
		th.t.Fatalf("auth: %v", err)
	}
	return c
}

// waitFeed waits until th's change feed delivers the changes of each tenant. The feed
// subscribes once Run has started, asynchronously (on a cluster one slot's channel at
// a time, 16,384 of them), and a change made before its tenant's channel is
// subscribed reaches no watcher of th. It probes with a lock of Invoice, which the
// tests that call it do not watch, and leaves none behind.
func (th *testHub) waitFeed(tenants ...string) {
	th.t.Helper()
	ctx := tctx(th.t)
	probe := protocol.Holder{OID: "u-probe", Name: "Feed probe"}
	for _, tenant := range tenants {
		w, _ := th.dial(tenant, "u-probe-watcher")
		if _, err := w.Watch(ctx, "Invoice"); err != nil {
			th.t.Fatal(err)
		}
		ref := locks.Ref{Tenant: tenant, Type: "Invoice", UID: "feed-probe"}
		held := false
		toggle := func() { // each toggle publishes a change of tenant
			var err error
			if held {
				_, err = th.store.Locks.Release(ctx, ref, probe, "")
			} else {
				_, err = th.store.Locks.Claim(ctx, ref, probe, "")
			}
			if err != nil {
				th.t.Fatalf("feed probe: %v", err)
			}
			held = !held
		}
		redistest.Eventually(th.t, "the change feed to deliver "+tenant+"'s changes", func() bool {
			select {
			case <-w.Events():
				return true
			default:
				toggle()
				return false
			}
		})
		if held {
			toggle()
		}
		_ = w.Close() // a probe: its end is of no interest
	}
}

// tctx is a ctx for the requests of t, canceled when t ends.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	t.Cleanup(cancel)
	return ctx
}

// nextEvent waits for the next lock event of c.
func nextEvent(t testing.TB, c *protocol.Client) protocol.LockEvent {
	t.Helper()
	select {
	case ev, ok := <-c.Events():
		if !ok {
			t.Fatalf("connection ended while waiting for an event: %v", c.Err())
		}
		return ev
	case <-time.After(waitTimeout):
		t.Fatal("no event in time")
	}
	panic("unreachable")
}

// wantEvent waits for the next event and checks its op and uid.
func wantEvent(t testing.TB, c *protocol.Client, op protocol.Op, uid string) protocol.LockEvent {
	t.Helper()
	ev := nextEvent(t, c)
	if ev.Op != op || ev.Lock.EntityUID != uid {
		t.Fatalf("event = %s %s, want %s %s", ev.Op, ev.Lock.EntityUID, op, uid)
	}
	return ev
}

// wantEventBy is wantEvent that also checks the lock's holder: where two tenants use
// the same uid, the holder tells whose event it is.
func wantEventBy(t testing.TB, c *protocol.Client, op protocol.Op, uid string, holder protocol.Holder) protocol.LockEvent {
	t.Helper()
	ev := wantEvent(t, c, op, uid)
	if got := ev.Lock.Holder(); got != holder {
		t.Fatalf("%s %s event held by %+v, want %+v", op, uid, got, holder)
	}
	return ev
}

// barrier makes a round trip on c. The hub writes c's frames in the order it queues
// them, so an event it queued to c before it answered is in c.Events() once barrier
// returns: noEvent after a barrier proves something when the event, had there been
// one, was queued before the request was sent (because another watcher already has
// it, or a later event of the same feed).
func barrier(t testing.TB, c *protocol.Client) {
	t.Helper()
	if _, err := c.Mine(tctx(t)); err != nil {
		t.Fatalf("barrier: %v", err)
	}
}

// noEvent checks that c has no event queued, nor dropped any. Call it after a barrier.
func noEvent(t testing.TB, c *protocol.Client) {
	t.Helper()
	select {
	case ev := <-c.Events():
		t.Fatalf("unexpected event %s %s/%s held by %+v", ev.Op, ev.Lock.EntityType, ev.Lock.EntityUID, ev.Lock.Holder())
	default:
	}
	if n := c.Dropped(); n != 0 {
		t.Fatalf("%d events dropped by the client: unseen, not absent", n)
	}
}

// closeCode waits until the server closes c and returns the close code.
func closeCode(t testing.TB, c *protocol.Client) websocket.StatusCode {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(waitTimeout):
		t.Fatal("the server did not close the socket in time")
	}
	return c.CloseStatus()
}

func wantClosed(t testing.TB, c *protocol.Client, want websocket.StatusCode) {
	t.Helper()
	if got := closeCode(t, c); got != want {
		t.Fatalf("close code = %d, want %d (%v)", got, want, c.Err())
	}
}

// expect returns a checker of a (Result, error) answer: expect(t, want)(c.Claim(...)).
func expect(t testing.TB, want protocol.Outcome) func(protocol.Result, error) protocol.Result {
	return func(r protocol.Result, err error) protocol.Result {
		t.Helper()
		return wantOutcome(t, r, err, want)
	}
}

// wantOutcome checks a result.
func wantOutcome(t testing.TB, r protocol.Result, err error, want protocol.Outcome) protocol.Result {
	t.Helper()
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	if r.Outcome != want {
		t.Fatalf("outcome = %q, want %q (%+v)", r.Outcome, want, r)
	}
	return r
}

// wantCode checks that err is an error frame with code.
func wantCode(t testing.TB, err error, code protocol.ErrorCode) *protocol.Error {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("error = %v, want an error frame %s", err, code)
	}
	return pe
}

// metric returns the value of a counter or gauge of th's registry whose labels include
// labels ("k=v" pairs); 0 when absent.
func (th *testHub) metric(name string, labels ...string) float64 {
	th.t.Helper()
	mfs, err := th.reg.Gather()
	if err != nil {
		th.t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// redisKeys lists the keys in th's miniredis, but for the liveness records every
// running instance keeps (instance.go): what requests wrote.
func (th *testHub) redisKeys() []string {
	var out []string
	for _, k := range th.mr.Keys() {
		if k != "lockhub:instances" && !strings.HasPrefix(k, "lockhub:held:{") {
			out = append(out, k)
		}
	}
	return out
}

// onRealRedis runs f on a real redis-server and on a real 6-node cluster, each with
// two clients of its own: two instances of the hub on one Redis.
func onRealRedis(t *testing.T, f func(t *testing.T, ca, cb redis.UniversalClient)) {
	t.Run("standalone", func(t *testing.T) {
		srv := redistest.StartServer(t)
		f(t, srv.Client(t), srv.Client(t))
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		f(t, cl.Client(t), cl.Client(t))
	})
}
