package web

import (
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
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// LockStore is what the Server needs of the lock store. *locks.Store has it.
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
}

var _ LockStore = (*locks.Store)(nil)

// TokenIssuer issues development tokens for POST /dev/token. *auth.Dev has it.
type TokenIssuer interface {
	Issue(tenant, oid, name string, roles []string) (string, error)
}

var _ TokenIssuer = (*auth.Dev)(nil)

// Config configures a Server. Store and Verifier are required; every other zero value
// works.
type Config struct {
	// Store is the lock store. Required.
	Store LockStore
	// Verifier checks bearer tokens, the same way as the hub checks a socket's auth
	// frame. Required.
	Verifier auth.Verifier
	// DevTokens, when set, serves POST /dev/token: development mode (PROTOCOL.md §6).
	// Nil means the route does not exist, as in production with a JWKS.
	DevTokens TokenIssuer
	// Hub serves GET /ws, the WebSocket of PROTOCOL.md §4 (a *hub.Hub). Nil means no
	// /ws route.
	Hub http.Handler
	// Demo is the Redis the demo domain keeps its rows in (PROTOCOL.md §5, "The demo
	// domain"): the lock Redis or another one. Nil means no demo domain routes.
	Demo redis.UniversalClient
	// DemoTimeout bounds each demo domain operation, all its Redis round trips
	// together. Zero means 1s.
	DemoTimeout time.Duration
	// TakeoverRole is the role a token needs to take a lock over. Zero means
	// "Locks.TakeOver".
	TakeoverRole string
	// Logger receives request failures and guard warnings. Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the HTTP metrics. Nil means a new registry of the Server's
	// own, served at /metrics.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves. Nil means Registerer, when it is a
	// prometheus.Gatherer (a *prometheus.Registry is both).
	Gatherer prometheus.Gatherer
	// Static holds the browser files: index.html at its root, served at /, and the
	// rest served under /static/. Nil means the files embedded in this package.
	Static fs.FS
}

// DefaultTakeoverRole is the role that may take a lock over when none is configured.
const DefaultTakeoverRole = "Locks.TakeOver"

const defaultDemoTimeout = time.Second

// Server is the HTTP side of lockhub, an http.Handler serving every route of
// PROTOCOL.md §5 and §7. It is safe for concurrent use.
type Server struct {
	store        LockStore
	verifier     auth.Verifier
	dev          TokenIssuer
	takeoverRole string
	log          *slog.Logger
	demo         *approvalStore // nil without Config.Demo
	guard        func(http.Handler) http.Handler
	static       fs.FS
	met          *httpMetrics
	mux          *chi.Mux
}

var _ http.Handler = (*Server)(nil)

// New returns a Server, or an error when cfg is invalid.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("web: Config.Store is required")
	}
	if cfg.Verifier == nil {
		return nil, errors.New("web: Config.Verifier is required")
	}
	if cfg.DemoTimeout < 0 {
		return nil, errors.New("web: Config.DemoTimeout must not be negative")
	}
	s := &Server{
		store:        cfg.Store,
		verifier:     cfg.Verifier,
		dev:          cfg.DevTokens,
		takeoverRole: cmp(cfg.TakeoverRole, DefaultTakeoverRole),
		log:          cfg.Logger,
		static:       cfg.Static,
	}
	if s.log == nil {
		s.log = slog.Default()
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
	var err error
	if s.met, err = newHTTPMetrics(reg); err != nil {
		return nil, err
	}
	if s.static == nil {
		if s.static, err = fs.Sub(embedded, "static"); err != nil {
			return nil, err
		}
	}
	if cfg.Demo != nil {
		s.demo, err = newApprovalStore(cfg.Demo, cmp(cfg.DemoTimeout, defaultDemoTimeout), s.log, reg)
		if err != nil {
			return nil, err
		}
	}
	s.guard = Guard(GuardConfig{
		Store:      cfg.Store,
		Identify:   identifyFromContext,
		Entity:     entityFromPath,
		Logger:     s.log,
		Registerer: reg,
	})
	s.routes(cfg.Hub, promhttp.HandlerFor(gat, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)}))
	return s, nil
}

func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// ServeHTTP serves every route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func (s *Server) routes(ws http.Handler, metrics http.Handler) {
	m := chi.NewRouter()
	s.mux = m
	// HEAD is answered wherever GET is (RFC 9110 §9.3.2).
	m.Use(middleware.GetHead)
	m.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, Errorf(protocol.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	m.MethodNotAllowed(s.methodNotAllowed)
	if ws != nil {
		// The hub owns its sockets from the handshake on: no middleware wraps it, so
		// nothing stands between it and the hijacked connection.
		m.Handle("/ws", ws)
	}
	m.Group(func(r chi.Router) {
		r.Use(s.recoverer, s.instrument, securityHeaders, s.limitBody)
		r.Get("/healthz", s.healthz)
		r.Get("/readyz", s.readyz)
		r.Method(http.MethodGet, "/metrics", metrics)
		r.Get("/", s.index)
		r.Get("/static/*", s.staticFile)
		if s.dev != nil {
			r.Post("/dev/token", s.devToken)
		}
		r.Group(func(r chi.Router) {
			r.Use(noStore, s.authenticate)
			r.Get("/api/locks/{type}", s.list)
			r.Get("/api/locks/{type}/{uid}", s.get)
			r.Post("/api/locks/{type}/{uid}", s.claim)
			r.Put("/api/locks/{type}/{uid}", s.renew)
			r.Delete("/api/locks/{type}/{uid}", s.release)
			r.Post("/api/locks/{type}/{uid}/takeover", s.takeover)
			r.Get("/api/me/locks", s.mine)
			if s.demo != nil {
				r.Get("/api/approval-requests", s.listRequests)
				r.Get("/api/approval-requests/{uid}", s.getRequest)
				r.With(s.guard).Put("/api/entities/{type}/{uid}", s.updateEntity)
				r.With(s.guard).Delete("/api/entities/{type}/{uid}", s.deleteEntity)
				r.With(s.guard).Post("/api/approval-requests/{uid}/approve", s.decide(StatusApproved))
				r.With(s.guard).Post("/api/approval-requests/{uid}/reject", s.decide(StatusRejected))
			}
		})
	})
}

// fail answers err through errorFor.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, s.log, err)
}

// methodNotAllowed answers 405 with the Allow header (RFC 9110 §15.5.6) that chi's own
// handler sets but a custom one has to work out.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if s.mux.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
		}
	}
	for _, m := range allowed {
		w.Header().Add("Allow", m)
	}
	s.fail(w, r, Errorf(protocol.CodeMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
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

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// noStore keeps answers about live locks and rows out of every cache.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// param returns a path parameter, unescaped: chi matches on the escaped path when the
// request has one, so "a%7Db" arrives as is. A parameter that does not unescape is
// returned raw; it then fails the name rules of PROTOCOL.md §1.
func param(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// ref returns the entity a lock route names, in the caller's tenant.
func ref(r *http.Request, id auth.Identity) locks.Ref {
	return locks.Ref{Tenant: id.Tenant, Type: param(r, "type"), UID: param(r, "uid")}
}

// identifyFromContext is the Server's GuardConfig.Identify: authenticate has run.
func identifyFromContext(r *http.Request) (tenant, oid string, err error) {
	id, ok := IdentityFrom(r.Context())
	if !ok {
		return "", "", auth.ErrUnauthorized
	}
	return id.Tenant, id.OID, nil
}

// entityFromPath is the Server's GuardConfig.Entity: /api/entities/{type}/{uid} and
// /api/approval-requests/{uid}/....
func entityFromPath(r *http.Request) (entityType, uid string, ok bool) {
	entityType = param(r, "type")
	if entityType == "" {
		entityType = ApprovalRequestType
	}
	return entityType, param(r, "uid"), true
}
