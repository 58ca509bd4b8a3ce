package service

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/cmd/internal/flagenv"
	"github.com/lockhub/lockhub/hub"
	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
	"github.com/lockhub/lockhub/web"
	"github.com/lockhub/lockhub/web/demo"
)

// ExitCode is the exit status for an error of Run: 0 for none or after -h, 2 for a
// setting or command line that cannot be used, 1 for anything else.
func ExitCode(err error) int {
	var ce *flagenv.Error
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ce), errors.Is(err, errUsage):
		return 2
	}
	return 1
}

// SetRedisLogger routes go-redis's own log lines, which go to one process-wide logger,
// to log at debug: the store already warns once per failed operation, with its reason.
func SetRedisLogger(log *slog.Logger) { redis.SetLogger(redisLogger{log}) }

// shutdownTimeout bounds the graceful shutdown; PROTOCOL.md §7 allows 10 s in all.
const shutdownTimeout = 8 * time.Second

// errUsage marks an error in the command line itself.
var errUsage = errors.New("usage")

// Main is the lockhub program, separate from package main so tests and tools can run it
// in-process:
// set its fields, call Run, wait for Ready, and cancel Run's ctx to shut it down.
type Main struct {
	// Args are the command-line arguments, without the program name.
	Args []string
	// LookupEnv reads the environment. Nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Stdout receives the logs: JSON, or text when it is a terminal. Nil means os.Stdout.
	Stdout io.Writer
	// Stderr receives the usage. Nil means os.Stderr.
	Stderr io.Writer
	// Configure, when set, changes the parsed settings before anything is built: for
	// programs that run the service with settings no flag has, such as cmd/lockbench
	// lifting the per-socket rate limit.
	Configure func(*Config)

	ready chan struct{}
	addr  string       // set before ready is closed
	maddr string       // likewise: --metrics-listen's address, if any
	store *locks.Store // likewise
	reg   *prometheus.Registry

	logOnce sync.Once
	level   slog.LevelVar
	log     *slog.Logger
}

// NewMain returns a Main for the process: its arguments, environment and streams.
func NewMain() *Main {
	return &Main{Args: os.Args[1:], ready: make(chan struct{})}
}

// Ready is closed once Run listens; Addr then says where.
func (m *Main) Ready() <-chan struct{} {
	m.logOnce.Do(m.init)
	return m.ready
}

// Addr returns the address Run listens on, once Ready is closed.
func (m *Main) Addr() string {
	<-m.Ready()
	return m.addr
}

// MetricsAddr returns the address /metrics is served on with --metrics-listen, once
// Ready is closed; empty without it.
func (m *Main) MetricsAddr() string {
	<-m.Ready()
	return m.maddr
}

// Store returns the lock store Run built, once Ready is closed.
func (m *Main) Store() *locks.Store {
	<-m.Ready()
	return m.store
}

// Metrics returns the registry /metrics serves, once Ready is closed.
func (m *Main) Metrics() *prometheus.Registry {
	<-m.Ready()
	return m.reg
}

func (m *Main) init() {
	if m.ready == nil {
		m.ready = make(chan struct{})
	}
	if m.LookupEnv == nil {
		m.LookupEnv = os.LookupEnv
	}
	if m.Stdout == nil {
		m.Stdout = os.Stdout
	}
	if m.Stderr == nil {
		m.Stderr = os.Stderr
	}
	opts := &slog.HandlerOptions{Level: &m.level}
	if isTerminal(m.Stdout) {
		m.log = slog.New(slog.NewTextHandler(m.Stdout, opts))
	} else {
		m.log = slog.New(slog.NewJSONHandler(m.Stdout, opts))
	}
}

func (m *Main) Logger() *slog.Logger {
	m.logOnce.Do(m.init)
	return m.log
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Run parses the settings, starts the service and serves until ctx is done, then shuts
// down gracefully. It returns nil after a clean shutdown, flag.ErrHelp after -h, and
// an error naming the setting when one is invalid. Call it once.
func (m *Main) Run(ctx context.Context) (err error) {
	log := m.Logger()
	cfg, err := parseConfig(m.Args, m.LookupEnv, m.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		var ce *flagenv.Error
		if errors.As(err, &ce) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := cfg.check(); err != nil {
		return err
	}
	if m.Configure != nil {
		m.Configure(&cfg.Config)
	}
	m.level.Set(cfg.LogLevel)

	// Everything below is owned by Run: started here, stopped and joined before it
	// returns, in reverse order. A constructor's *protocol.SettingError is named as
	// the flag or variable its value came from.
	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Entra ID credentials and CAs, shared by both clients; their renewals stop after
	// the clients close (closers run in reverse).
	rco, err := m.redisClientOptions(cfg, reg, &closers)
	if err != nil {
		return err
	}
	lockRDB, err := m.lockRedis(cfg, rco, &closers)
	if err != nil {
		return err
	}
	demoRDB := lockRDB // used only when the demo is on
	if cfg.DemoRedisURL != "" {
		if demoRDB, err = locks.NewClientWith(cfg.DemoRedisURL, cfg.DemoCluster, demoOptions(cfg.DemoRedisURL, rco)); err != nil {
			return cfg.Name("demo-redis-url", err)
		}
		closers = append(closers, func() { _ = demoRDB.Close() })
	}
	if cfg.Store.Registry, err = locks.NewRegistry(cfg.Lockable...); err != nil {
		return cfg.settingError(err)
	}
	cfg.Store.Client, cfg.Store.Logger, cfg.Store.Registerer = lockRDB, log, reg
	store, err := locks.NewStore(cfg.Store)
	if err != nil {
		return cfg.settingError(err)
	}
	reg.MustRegister(redisReady(store.Locks))

	// The JWKS key set refreshes in the background until its Close, a closer.
	verifier, dev, err := m.verifier(context.WithoutCancel(ctx), cfg.Config, reg, &closers)
	if err != nil {
		return cfg.settingError(err)
	}
	// A token presented again (a reconnect, a crowd moving from an instance that went
	// away) is not verified again for 5 minutes (auth.Cached).
	verifier = auth.NewCached(verifier, auth.CacheConfig{Registerer: reg})

	// One log of refused tokens for both transports: its count at INFO covers both.
	refusals := auth.NewRefusalLog(log)
	cfg.Hub.Store, cfg.Hub.Verifier, cfg.Hub.Logger, cfg.Hub.Registerer, cfg.Hub.Refusals = hub.StoreOf(store), verifier, log, reg, refusals
	h, err := hub.New(cfg.Hub)
	if err != nil {
		return cfg.settingError(err)
	}
	wcfg := web.Config{
		Store: store.Locks, Console: store.Console, Verifier: verifier, Hub: h,
		Roles: cfg.Hub.Roles, Logger: log, Refusals: refusals, Registerer: reg, Gatherer: reg,
		NoMetrics: cfg.MetricsListen != "",
	}
	if cfg.Development() {
		// No DNS rebinding of /dev/token (PROTOCOL.md §6): loopback Hosts and the
		// --listen host only.
		wcfg.LocalHosts, wcfg.Hosts = true, []string{listenHost(cfg.Listen)}
	}
	if cfg.DemoOn() {
		// Only then does anything write demo: keys (PROTOCOL.md §5): without it the demo
		// routes answer 404 like any unknown route.
		app, err := demo.New(demo.Config{Rows: demoRDB, Locks: store.Locks, Verifier: verifier, Logger: log, Registerer: reg})
		if err != nil {
			return err
		}
		wcfg.App = app
	}
	if dev != nil {
		wcfg.DevTokens = dev
	}
	handler, err := web.New(wcfg)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return cfg.Name("listen", err)
	}
	srv := newHTTPServer(handler, log)
	servers := []*http.Server{srv}
	listeners := []net.Listener{ln}
	if cfg.MetricsListen != "" {
		mln, err := net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			_ = ln.Close()
			return cfg.Name("metrics-listen", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", web.MetricsHandler(reg, log))
		servers, listeners = append(servers, newHTTPServer(web.Harden(mux), log)), append(listeners, mln)
		m.maddr = mln.Addr().String()
	}

	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHub()
	var wg sync.WaitGroup
	errc := make(chan error, 1+len(servers))
	wg.Go(func() {
		if err := h.Run(hubCtx); err != nil {
			errc <- err
		}
	})
	if cfg.MemoryTrimBurst > 0 {
		tr := newTrimmer(h.Accepted, cfg.MemoryTrimBurst, trimQuiet, log, reg)
		wg.Go(func() { tr.run(hubCtx) })
	}
	for i, s := range servers {
		wg.Go(func() {
			if err := s.Serve(listeners[i]); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serving HTTP on %s: %w", listeners[i].Addr(), err)
			}
		})
	}

	m.addr, m.store, m.reg = ln.Addr().String(), store, reg
	close(m.ready)
	up := "lockhub is up on " + browserURL(ln.Addr())
	if cfg.DemoOn() {
		up = "lockhub is up; open " + browserURL(ln.Addr()) + " in a browser"
	}
	log.Info(up, slog.String("listen", m.addr), slog.Bool("development", cfg.Development()),
		slog.Bool("demo", cfg.DemoOn()), slog.String("metrics", cmp.Or(cfg.MetricsListen, m.addr)),
		slog.Any("lockable", store.Locks.Registry().Types()), slog.String("lease", store.Locks.Lease().String()))

	var runErr error
	select {
	case <-ctx.Done():
		if cfg.DrainDelay > 0 {
			runErr = m.drain(handler, cfg.DrainDelay, errc)
		}
		if runErr == nil {
			log.Info("shutting down: closing every socket with 1001, then exiting")
		}
	case runErr = <-errc:
		log.Error("lockhub stops on an error", slog.String("error", runErr.Error()))
	}

	// Stop accepting and close the sockets at the same time: http.Server.Shutdown does
	// not wait for hijacked connections, and the hub closes them with 1001 going away.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	var sd sync.WaitGroup
	for _, s := range servers {
		sd.Go(func() {
			if err := s.Shutdown(sctx); err != nil {
				log.Warn("HTTP shutdown cut short", slog.String("error", err.Error()))
				_ = s.Close() // the deadline passed: drop what is left
			}
		})
	}
	sd.Go(func() {
		if err := h.Shutdown(sctx); err != nil {
			log.Warn("hub shutdown cut short", slog.String("error", err.Error()))
		}
	})
	sd.Wait()
	stopHub()
	wg.Wait()
	log.Info("lockhub stopped")
	return runErr
}

// drain makes /readyz answer 503 and serves everything else as before for delay, so
// that load balancers take this instance out before its sockets close (PROTOCOL.md
// §7). A server that fails meanwhile ends it early, with that error.
func (m *Main) drain(h *web.Server, delay time.Duration, errc <-chan error) error {
	h.Drain()
	m.log.Info("draining: /readyz answers 503 for --drain-delay while everything else is served, then every socket is closed",
		slog.String("drain_delay", delay.String()))
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case err := <-errc:
		m.log.Error("lockhub stops on an error while draining", slog.String("error", err.Error()))
		return err
	}
}

// Timeouts of an HTTP request (PROTOCOL.md §5, "Hardening"): its headers within 5 s;
// its body within 10 s of them is web's to enforce (web.Config), per request, since a
// server-wide read deadline would cut the WebSockets; an idle keep-alive connection
// is closed after 60 s (version 3).
const (
	readHeaderTimeout = 5 * time.Second
	idleTimeout       = 60 * time.Second
)

func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// lockRedis returns the client of the lock Redis: the one --redis-url names, or an
// embedded Redis in this process.
func (m *Main) lockRedis(cfg *settings, o locks.ClientOptions, closers *[]func()) (redis.UniversalClient, error) {
	if cfg.RedisURL != "" {
		if !isTLS(cfg.RedisURL) {
			o.RootCAs = nil // --redis-ca-file is for the demo Redis
		}
		if o.Credentials != nil && !isTLS(cfg.RedisURL) {
			m.log.Warn("--redis-auth entra over redis://: the Entra ID token crosses the network in clear text; use rediss:// (Azure Managed Redis listens on TLS port 10000)")
		}
		c, err := locks.NewClientWith(cfg.RedisURL, cfg.RedisCluster, o)
		if err != nil {
			return nil, cfg.Name("redis-url", err)
		}
		*closers = append(*closers, func() { _ = c.Close() })
		return c, nil
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("starting the embedded Redis: %w", err)
	}
	*closers = append(*closers, mr.Close)
	m.log.Warn("no --redis-url: using an embedded Redis in this process; locks and demo rows live only as long as this process, and no other instance sees them",
		slog.String("addr", mr.Addr()))
	c, err := locks.NewClient("redis://"+mr.Addr(), false)
	if err != nil {
		return nil, err
	}
	*closers = append(*closers, func() { _ = c.Close() })
	return c, nil
}

// demoOptions are the client options of the demo Redis at url: --redis-ca-file only
// when it is rediss:// (the CAs may be the lock Redis's alone).
func demoOptions(url string, o locks.ClientOptions) locks.ClientOptions {
	if !isTLS(url) {
		o.RootCAs = nil
	}
	return o
}

// verifier returns the token verifier: a JWKS in production, or the server's own
// development tokens, which it also returns to serve POST /dev/token.
func (m *Main) verifier(ctx context.Context, cfg Config, reg prometheus.Registerer, closers *[]func()) (auth.Verifier, *auth.Dev, error) {
	if !cfg.Development() {
		// The first fetch is bounded by its FetchTimeout; the key set is then refreshed
		// in the background until Close.
		jc := cfg.JWKS
		jc.Logger, jc.Registerer = m.log, reg
		a, err := auth.NewJWKS(ctx, jc)
		var se *protocol.SettingError
		if err != nil && !errors.As(err, &se) {
			// The first fetch failed: the URL is the setting at fault.
			err = &protocol.SettingError{Setting: "jwks-url", Err: err}
		}
		if err != nil {
			return nil, nil, err
		}
		*closers = append(*closers, a.Close)
		m.log.Info("tokens are checked against the JWKS", slog.String("jwks", cfg.JWKS.URL),
			slog.String("issuer", cfg.JWKS.Issuer), slog.String("audience", cfg.JWKS.Audience))
		return a, nil, nil
	}
	dev, err := auth.NewDev(auth.DevConfig{Claims: cfg.JWKS.Claims})
	if err != nil {
		return nil, nil, err
	}
	m.log.Warn("DEVELOPMENT MODE (--dev, or neither --redis-url nor --jwks-url): lockhub signs its own tokens and anyone who reaches it may get one from POST /dev/token for any tenant, user and role. Never run it like this in production: set --jwks-url, --issuer and --audience.")
	return dev, dev, nil
}

// redisReady is the gauge lockhub_redis_ready: what GET /readyz would answer, for
// dashboards and alerts, asked at each scrape.
func redisReady(l *locks.Locks) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lockhub_redis_ready",
		Help: "1 when the lock Redis answers a PING (as GET /readyz asks it), 0 when not; asked at each scrape, for at most 1 s.",
	}, func() float64 {
		// A scrape hands no ctx to a GaugeFunc: the ping has its own bound.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if l.Ping(ctx) != nil {
			return 0
		}
		return 1
	})
}

// browserURL is the URL to open for a listening address: an unspecified host is this
// machine.
func browserURL(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String() + "/"
	}
	host := ta.IP.String()
	if ta.IP == nil || ta.IP.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(ta.Port)) + "/"
}

// redisLogger routes go-redis's internal log lines to slog at debug.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
