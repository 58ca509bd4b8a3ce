package demo

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
	"github.com/lockhub/lockhub/web"
)

// LockStore is what the demo domain needs of the lock store: the guards' reads, the
// release that ends an edit after a decision, and the bulk approve's claim and release
// of many (PROTOCOL.md §12): *locks.Locks.
type LockStore interface {
	web.LockReader
	web.ManyReader
	// ReleaseBecause is the release, recorded in the audit trail with its reason.
	ReleaseBecause(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string, reason locks.AuditReason) (locks.Result, error)
	ClaimMany(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string) (locks.ManyResult, error)
	ReleaseManyBecause(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string, reason locks.AuditReason) (locks.ManyResult, error)
}

var _ LockStore = (*locks.Locks)(nil)

// Config configures a Domain. Rows, Locks and Verifier are required; every other zero
// value works.
type Config struct {
	// Rows is the Redis the rows live in (PROTOCOL.md §5): the lock Redis or another
	// one, standalone or a cluster. Required.
	Rows redis.UniversalClient
	// Locks is the lock store the guard reads and decisions release. Required.
	Locks LockStore
	// Verifier checks bearer tokens, as the lock API does. Required.
	Verifier auth.Verifier
	// Timeout bounds each operation on the rows, all its Redis round trips together.
	// Zero means 1s.
	Timeout time.Duration
	// BodyTimeout is how long a request body may take once its headers have arrived.
	// Zero means web.DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Logger receives store failures and guard warnings. Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the demo's metrics and its guard's. Nil means none are
	// registered.
	Registerer prometheus.Registerer
}

// DefaultTimeout bounds a row operation when Config.Timeout is zero.
const DefaultTimeout = time.Second

// Domain is the demo application: its routes, its page and its rows. It is an
// http.Handler, safe for concurrent use.
type Domain struct {
	locks LockStore
	rows  *approvalStore
	log   *slog.Logger
	mux   *chi.Mux
}

var _ http.Handler = (*Domain)(nil)

// page holds the demo page, index.html at its root, served at / and /demo/.
//
//go:embed static
var page embed.FS

// New returns a Domain, or an error when cfg is invalid.
func New(cfg Config) (*Domain, error) {
	if cfg.Rows == nil || cfg.Locks == nil || cfg.Verifier == nil {
		return nil, errors.New("demo: Config.Rows, Locks and Verifier are required")
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("demo: Config.Timeout must not be negative")
	}
	d := &Domain{locks: cfg.Locks, log: cmp.Or(cfg.Logger, slog.Default())}
	var err error
	if d.rows, err = newApprovalStore(cfg.Rows, cmp.Or(cfg.Timeout, DefaultTimeout), d.log, cfg.Registerer); err != nil {
		return nil, err
	}
	files, err := fs.Sub(page, "static")
	if err != nil {
		return nil, err
	}
	guard := web.Guard(web.GuardConfig{
		Store:      cfg.Locks,
		Identify:   web.IdentifyFromContext,
		Entity:     entityFromPath,
		Logger:     d.log,
		Registerer: cfg.Registerer,
	})

	guardMany := web.GuardMany(web.GuardManyConfig{
		Store:    cfg.Locks,
		Identify: web.IdentifyFromContext,
		Entities: func(r *http.Request) (string, []string, bool, error) {
			uids, err := web.ReadUIDs(r)
			return ApprovalRequestType, uids, err == nil, err
		},
		Logger:     d.log,
		Registerer: cfg.Registerer,
	})

	m := chi.NewRouter()
	m.NotFound(func(w http.ResponseWriter, r *http.Request) {
		d.fail(w, r, web.Errorf(protocol.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	m.MethodNotAllowed(web.MethodNotAllowed(m))
	m.Get("/", func(w http.ResponseWriter, r *http.Request) { web.ServeFile(w, r, files, "index.html") })
	m.Handle("/demo/*", http.StripPrefix("/demo/", web.FileServer(files)))
	m.Group(func(r chi.Router) {
		r.Use(web.Authenticate(cfg.Verifier, d.log), web.LimitBody(cfg.BodyTimeout, d.log)) // the token before the body
		r.Get("/api/approval-requests", d.listRequests)
		r.Get("/api/approval-requests/{uid}", d.getRequest)
		r.With(guard).Put("/api/entities/{type}/{uid}", d.updateEntity)
		r.With(guard).Delete("/api/entities/{type}/{uid}", d.deleteEntity)
		r.With(guardMany).Post("/api/approval-requests/approve", d.approveMany)
		r.With(guard).Post("/api/approval-requests/{uid}/approve", d.decide(StatusApproved))
		r.With(guard).Post("/api/approval-requests/{uid}/reject", d.decide(StatusRejected))
	})
	d.mux = m
	return d, nil
}

// ServeHTTP serves the demo's routes and page.
func (d *Domain) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.mux.ServeHTTP(w, r) }

// fail answers err as every error of the lock API is answered.
func (d *Domain) fail(w http.ResponseWriter, r *http.Request, err error) {
	web.WriteError(w, r, d.log, err)
}

// identity returns the caller of a request that passed web.Authenticate.
func identity(r *http.Request) auth.Identity {
	id, ok := web.IdentityFrom(r.Context())
	if !ok {
		panic("demo: a handler of an authenticated route ran without an identity")
	}
	return id
}

// entityFromPath is the guard's GuardConfig.Entity: /api/entities/{type}/{uid} and
// /api/approval-requests/{uid}/....
func entityFromPath(r *http.Request) (entityType, uid string, ok bool) {
	return cmp.Or(web.PathParam(r, "type"), ApprovalRequestType), web.PathParam(r, "uid"), true
}

// short caps a string from a client for a message.
func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
