package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// The lock console of PROTOCOL.md §10, for callers whose token has the admin role:
//
//	GET    /api/admin/locks               every live lock of the tenant
//	DELETE /api/admin/locks/{type}/{uid}  force release · 404 not_found when free
//	GET    /api/admin/audit               the audit trail, newest first, with a cursor
//
// Without the role each answers 403 forbidden, before anything is read.

// AdminStore is what the lock console needs of the lock store: *locks.Console.
type AdminStore interface {
	AdminLocksJSON(ctx context.Context, tenant string) ([]byte, error)
	ForceRelease(ctx context.Context, ref locks.Ref, admin protocol.Holder) (locks.Result, error)
	Audit(ctx context.Context, tenant string, q locks.AuditQuery) (locks.AuditPage, error)
}

var _ AdminStore = (*locks.Console)(nil)

// auditBody is the body of GET /api/admin/audit; Next is null on the last page.
type auditBody struct {
	Entries []locks.AuditEntry `json:"entries"`
	Next    *string            `json:"next"`
}

// adminRoutes mounts the console's routes on r, behind Authenticate.
func (s *Server) adminRoutes(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(s.requireAdmin)
		r.Get("/api/admin/locks", s.adminLocks)
		r.Delete("/api/admin/locks/{type}/{uid}", s.forceRelease)
		r.Get("/api/admin/audit", s.audit)
	})
}

// requireAdmin answers 403 forbidden to a caller without the admin role.
func (s *Server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.roles.IsAdmin(identity(r)) {
			s.fail(w, r, Errorf(protocol.CodeForbidden, "the lock console needs the role %s", s.roles.Admin))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// adminLocks: GET /api/admin/locks. A store that does not answer is 503
// store_unavailable (PROTOCOL.md §5, version 3): "no locks" would mislead.
func (s *Server) adminLocks(w http.ResponseWriter, r *http.Request) {
	tenant := identity(r).Tenant
	ls, err := s.consoles.Read(shared(r), tenant, func(ctx context.Context) ([]byte, error) {
		return s.console.AdminLocksJSON(ctx, tenant)
	})
	if errors.Is(err, locks.ErrUnavailable) {
		s.fail(w, r, Errorf(protocol.CodeStoreUnavailable, "the locks cannot be listed now: the lock store does not answer"))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeLocksJSON(w, ls)
}

// forceRelease: DELETE /api/admin/locks/{type}/{uid}. Released answers 200 with the
// lock that was held; a free entity 404; unknown (the store failed open) 200, as a
// release does.
func (s *Server) forceRelease(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	ref := ref(r, id)
	res, err := s.console.ForceRelease(r.Context(), ref, id.Holder())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if res.Outcome == protocol.OutcomeNotHeld {
		s.fail(w, r, Errorf(protocol.CodeNotFound, "%s %s is not locked", ref.Type, ref.UID))
		return
	}
	WriteJSON(w, http.StatusOK, lockResult{Outcome: res.Outcome, Lock: res.Lock})
}

// audit: GET /api/admin/audit?entityType=&entityUid=&before=&limit=. A store that
// does not answer is 503 store_unavailable: an empty trail would mislead.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := locks.AuditQuery{EntityType: v.Get("entityType"), EntityUID: v.Get("entityUid"), Before: v.Get("before")}
	if raw := v.Get("limit"); raw != "" {
		// Digits only: Atoi would take "+5" and "-0" for limits.
		n, err := strconv.Atoi(raw)
		if err == nil && strings.TrimLeft(raw, "0123456789") != "" {
			err = strconv.ErrSyntax
		}
		if err != nil || n == 0 { // 0 would mean the default to the store
			s.fail(w, r, &locks.QueryError{Field: "limit", Value: raw})
			return
		}
		q.Limit = n
	}
	page, err := s.console.Audit(r.Context(), identity(r).Tenant, q)
	if errors.Is(err, locks.ErrUnavailable) {
		s.fail(w, r, Errorf(protocol.CodeStoreUnavailable, "the audit trail cannot be read now: the lock store does not answer"))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body := auditBody{Entries: page.Entries}
	if body.Entries == nil {
		body.Entries = []locks.AuditEntry{}
	}
	if page.Next != "" {
		body.Next = &page.Next
	}
	WriteJSON(w, http.StatusOK, body)
}
