package web

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// LockStore is what the Server needs of the lock store's locks: *locks.Locks. It
// follows the store's error convention (locks.Store).
type LockStore interface {
	LockReader
	// Get is Lookup that fails open: nil when the store does not answer.
	Get(ctx context.Context, ref locks.Ref) (*protocol.Lock, error)
	Claim(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string) (locks.Result, error)
	Renew(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string) (locks.Result, error)
	Release(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string) (locks.Result, error)
	Takeover(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string, allowed bool) (locks.Result, error)
	List(ctx context.Context, tenant, entityType string) ([]protocol.Lock, error)
	Mine(ctx context.Context, tenant, oid string) ([]protocol.Lock, error)
	Ping(ctx context.Context) error
	// Claims of many entities at once (version 3, PROTOCOL.md §12).
	ClaimMany(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string) (locks.ManyResult, error)
	ReleaseMany(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string) (locks.ManyResult, error)
}

var _ LockStore = (*locks.Locks)(nil)

// TokenIssuer issues development tokens for POST /dev/token. *auth.Dev has it.
type TokenIssuer interface {
	Issue(tenant, oid, name string, roles []string) (string, error)
}

var _ TokenIssuer = (*auth.Dev)(nil)

// Config configures a Server. Store, Console and Verifier are required; every other
// zero value works.
type Config struct {
	// Store is the lock store's locks: a *locks.Store's Locks. Required.
	Store LockStore
	// Console is the lock console's store (admin.go): a *locks.Store's Console.
	// Required.
	Console AdminStore
	// Verifier checks bearer tokens, the same way as the hub checks a socket's auth
	// frame. Required.
	Verifier auth.Verifier
	// DevTokens, when set, serves POST /dev/token: development mode (PROTOCOL.md §6).
	// Nil means the route does not exist, as in production with a JWKS.
	DevTokens TokenIssuer
	// Hub serves GET /ws, the WebSocket of PROTOCOL.md §4 (a *hub.Hub). Nil means no
	// /ws route.
	Hub http.Handler
	// App is an application served beside the lock API: every request no route of the
	// Server matches goes to it, behind the same panic recovery, metrics and security
	// headers; it caps its bodies itself, after its authentication (LimitBody). Nil
	// means such requests answer 404 not_found (cmd/lockhub mounts the demo domain,
	// web/demo, here).
	App http.Handler
	// Roles are the roles a token needs to take a lock over (setting "takeover-role")
	// and for the lock console (PROTOCOL.md §10, setting "admin-role"). The zero value
	// means auth's defaults; give the hub's Config the same.
	Roles auth.Roles
	// Logger receives request failures and guard warnings. Nil means slog.Default().
	Logger *slog.Logger
	// Refusals logs refused bearer tokens (PROTOCOL.md §6): give the hub's Config the
	// same, so that the count at INFO covers both. Nil means one of the Server's own,
	// on Logger.
	Refusals *auth.RefusalLog
	// Registerer receives the HTTP metrics. Nil means a new registry of the Server's
	// own, served at /metrics.
	Registerer prometheus.Registerer
	// BodyTimeout is how long a request body may take once its headers have arrived,
	// on every route (PROTOCOL.md §5, "Hardening"), whether or not the handler reads
	// it. Zero means DefaultBodyTimeout (10s).
	BodyTimeout time.Duration
	// RequestRate and RequestBurst are the requests a second served to one person
	// over the lock API and the console on this instance, and the burst above that
	// (PROTOCOL.md §4, "Fair share"); beyond, 429 rate_limited with Retry-After. Zero
	// means a socket's: protocol.RateLimit (50) and protocol.RateBurst (100).
	RequestRate  float64
	RequestBurst int
	// LocalHosts, when set, serves only requests whose Host is a loopback name or
	// address, or one of Hosts; others answer 403 forbidden. Development mode sets it
	// (PROTOCOL.md §6): a page of another site whose DNS name was rebound to
	// 127.0.0.1 must not get tokens from /dev/token.
	LocalHosts bool
	// Hosts are further host names or addresses LocalHosts allows (the --listen
	// host), without ports.
	Hosts []string
	// NoMetrics leaves /metrics out: it is served elsewhere (MetricsHandler on another
	// address, as --metrics-listen does).
	NoMetrics bool
	// Gatherer is what /metrics serves. Nil means Registerer, when it is a
	// prometheus.Gatherer (a *prometheus.Registry is both).
	Gatherer prometheus.Gatherer
	// Static holds the browser client's files, served under /static/. Nil means the
	// files embedded in this package.
	Static fs.FS
}

// Server is the HTTP side of lockhub, an http.Handler serving every route of
// PROTOCOL.md §5 and §7. It is safe for concurrent use.
type Server struct {
	store       LockStore
	console     AdminStore
	verifier    auth.Verifier
	dev         TokenIssuer
	roles       auth.Roles // with defaults
	log         *slog.Logger
	refusals    *auth.RefusalLog
	app         http.Handler // nil without Config.App
	bodyTimeout time.Duration
	hosts       *hostCheck // nil: any Host
	rates       *requestLimits
	static      fs.FS
	met         *httpMetrics
	mux         *chi.Mux
}

var _ http.Handler = (*Server)(nil)

// New returns a Server, or an error when cfg is invalid.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Console == nil {
		return nil, errors.New("web: Config.Store and Config.Console are required")
	}
	if cfg.Verifier == nil {
		return nil, errors.New("web: Config.Verifier is required")
	}
	s := &Server{
		store:       cfg.Store,
		console:     cfg.Console,
		verifier:    cfg.Verifier,
		dev:         cfg.DevTokens,
		roles:       cfg.Roles.WithDefaults(),
		log:         cfg.Logger,
		static:      cfg.Static,
		app:         cfg.App,
		bodyTimeout: cmp.Or(cfg.BodyTimeout, DefaultBodyTimeout),
	}
	if cfg.RequestRate < 0 || cfg.RequestBurst < 0 || cfg.BodyTimeout < 0 {
		return nil, errors.New("web: Config.RequestRate, RequestBurst and BodyTimeout must not be negative")
	}
	if cfg.LocalHosts {
		s.hosts = newHostCheck(cfg.Hosts)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.refusals = cfg.Refusals; s.refusals == nil {
		s.refusals = auth.NewRefusalLog(s.log)
	}
	reg, gat := cfg.Registerer, cfg.Gatherer
	if reg == nil {
		r := prometheus.NewRegistry()
		reg = r
		if gat == nil {
			gat = r
		}
	}
	if gat == nil {
		gat, _ = reg.(prometheus.Gatherer) // nil when it does not gather: /metrics is then empty
	}
	if gat == nil {
		gat = prometheus.NewRegistry()
	}
	s.met = newHTTPMetrics(reg)
	s.rates = newRequestLimits(cfg.RequestRate, cfg.RequestBurst, s.met.limits.WithLabelValues(limitRequests), s.log)
	var err error
	if s.static == nil {
		if s.static, err = fs.Sub(embedded, "static"); err != nil {
			return nil, err
		}
	}
	var metrics http.Handler
	if !cfg.NoMetrics {
		metrics = MetricsHandler(gat, s.log)
	}
	s.routes(cfg.Hub, metrics)
	return s, nil
}

// MetricsHandler serves g as Prometheus text, logging its errors to log.
func MetricsHandler(g prometheus.Gatherer, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)})
}

// ServeHTTP serves every route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) routes(ws http.Handler, metrics http.Handler) {
	m := chi.NewRouter()
	s.mux = m
	// What every answer passes through, /ws, 404 and 405 included (PROTOCOL.md §5,
	// "Hardening (version 3)"): the security headers, the deadline of a body, and in
	// development mode the Host check. HEAD is answered wherever GET is (RFC 9110
	// §9.3.2).
	m.Use(securityHeaders, bodyDeadline(s.bodyTimeout))
	if s.hosts != nil {
		m.Use(s.hosts.check)
	}
	m.Use(middleware.GetHead)
	// What every route but /ws passes through, the mounted application included.
	common := chi.Chain(s.recoverer, s.instrument)
	limitBody := LimitBody(s.bodyTimeout, s.log)
	if s.app != nil {
		m.NotFound(common.Handler(s.app).ServeHTTP)
	} else {
		m.NotFound(func(w http.ResponseWriter, r *http.Request) {
			s.fail(w, r, Errorf(protocol.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
		})
	}
	m.MethodNotAllowed(MethodNotAllowed(m))
	if ws != nil {
		// The hub owns its sockets from the handshake on: no middleware wraps it, so
		// nothing stands between it and the hijacked connection.
		m.Handle("/ws", ws)
	}
	m.Group(func(r chi.Router) {
		r.Use(common...)
		r.Get("/healthz", s.healthz)
		r.Get("/readyz", s.readyz)
		if metrics != nil {
			r.Method(http.MethodGet, "/metrics", metrics)
		}
		r.Handle("/static/*", http.StripPrefix("/static/", FileServer(s.static)))
		if s.dev != nil {
			r.With(limitBody).Post("/dev/token", s.devToken)
		}
		r.Group(func(r chi.Router) {
			// The token before the body; the rate of its person before either is read.
			r.Use(noStore, authenticate(s.verifier, s.log, s.refusals), s.rates.limit, limitBody)
			r.Get("/api/locks/{type}", s.list)
			r.Post("/api/locks/{type}", s.claimMany)
			r.Delete("/api/locks/{type}", s.releaseMany)
			r.Get("/api/locks/{type}/{uid}", s.get)
			r.Post("/api/locks/{type}/{uid}", s.claim)
			r.Put("/api/locks/{type}/{uid}", s.renew)
			r.Delete("/api/locks/{type}/{uid}", s.release)
			r.Post("/api/locks/{type}/{uid}/takeover", s.takeover)
			r.Get("/api/me/locks", s.mine)
			s.adminRoutes(r)
		})
	})
}

// fail answers err through errorFor.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	WriteError(w, r, s.log, err)
}

// MethodNotAllowed returns chi's MethodNotAllowed handler for the router routes: 405
// method_not_allowed in the body shape of every error, with the Allow header (RFC 9110
// §15.5.6) that chi's own handler sets but a custom one has to work out.
func MethodNotAllowed(routes chi.Routes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		path := cmp.Or(r.URL.RawPath, r.URL.Path)
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
			if routes.Match(chi.NewRouteContext(), m, path) {
				w.Header().Add("Allow", m)
			}
		}
		WriteError(w, r, nil, Errorf(protocol.CodeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
	}
}

// recoverer answers a panic with 500 and logs it with its stack, so one bad request
// never takes the process down.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler { // net/http's own sentinel: it aborts quietly
				panic(rec)
			}
			s.log.LogAttrs(r.Context(), slog.LevelError, "handler panicked",
				slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Any("panic", rec), slog.String("stack", string(debug.Stack())))
			s.fail(w, r, &Error{Code: protocol.CodeInternal, Message: "internal error"})
		}()
		next.ServeHTTP(w, r)
	})
}

// ContentSecurityPolicy is sent with every answer (PROTOCOL.md §5, "Hardening"): the
// pages and the client load only their own scripts, styles and sockets ('self' covers
// ws: and wss: of the same host, CSP Level 3 §6.7.2.8), nothing inline, and no page
// frames them.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// securityHeaders sets the headers of PROTOCOL.md §5 "Hardening" on every answer, a
// refused WebSocket handshake included: the CSP and the referrer policy matter on
// HTML, and cost nothing on JSON. It only sets headers, never wraps the writer, so the
// hub's hijack of /ws is not in its way.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY") // for browsers that predate frame-ancestors
		next.ServeHTTP(w, r)
	})
}

// Harden wraps h, a handler served beside a Server on an address of its own (the
// metrics of --metrics-listen), with what every answer of a Server passes through
// (PROTOCOL.md §5, "Hardening"): the security headers and the body deadline of
// DefaultBodyTimeout.
func Harden(h http.Handler) http.Handler {
	return securityHeaders(bodyDeadline(DefaultBodyTimeout)(h))
}

// noStore keeps answers about live locks and rows out of every cache.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// PathParam returns a chi path parameter, unescaped: chi matches on the escaped path
// when the request has one, so "a%7Db" arrives as is. A parameter that does not
// unescape is returned raw; it then fails the name rules of PROTOCOL.md §1.
func PathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// ref returns the entity a lock route names, in the caller's tenant.
func ref(r *http.Request, id auth.Identity) locks.Ref {
	return locks.Ref{Tenant: id.Tenant, Type: PathParam(r, "type"), UID: PathParam(r, "uid")}
}

// IdentifyFromContext is a GuardConfig.Identify for routes behind Authenticate: the
// caller's tenant and oid from the identity it put in the request's context.
func IdentifyFromContext(r *http.Request) (tenant, oid string, err error) {
	id, ok := IdentityFrom(r.Context())
	if !ok {
		return "", "", auth.ErrUnauthorized
	}
	return id.Tenant, id.OID, nil
}
