package web_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
	"github.com/lockhub/lockhub/web"
)

// ordersAPI is an existing Go API that adopts the guard: a plain chi router with its
// own authentication (X-User: <tenant>/<oid>), orders and invoices.
type ordersAPI struct {
	srv   *httptest.Server
	store *locks.Store
	mr    *miniredis.Miniredis
	reg   *prometheus.Registry
	logs  *redistest.LogBuffer

	mu     sync.Mutex
	writes map[string]int // guarded by mu
}

type userKey struct{}

type user struct{ tenant, oid string }

func newOrdersAPI(t *testing.T, store web.LockReader) *ordersAPI {
	t.Helper()
	a := &ordersAPI{mr: miniredis.RunT(t), reg: prometheus.NewRegistry(), logs: &redistest.LogBuffer{}, writes: map[string]int{}}
	rdb := redis.NewClient(&redis.Options{Addr: a.mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	types, err := locks.NewRegistry("Order")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(a.logs, nil))
	a.store, err = locks.NewStore(locks.Config{Client: rdb, Registry: types, Logger: log, Registerer: a.reg})
	if err != nil {
		t.Fatal(err)
	}
	if store == nil {
		store = a.store.Locks
	}

	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler { // the API's own authentication
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tenant, oid, ok := strings.Cut(r.Header.Get("X-User"), "/"); ok {
				r = r.WithContext(context.WithValue(r.Context(), userKey{}, user{tenant, oid}))
			}
			next.ServeHTTP(w, r)
		})
	})
	guard := web.Guard(web.GuardConfig{
		Store: store,
		Identify: func(r *http.Request) (string, string, error) {
			u, ok := r.Context().Value(userKey{}).(user)
			if !ok {
				return "", "", errors.New("no X-User")
			}
			return u.tenant, u.oid, nil
		},
		Entity: func(r *http.Request) (string, string, bool) {
			typ := chi.URLParam(r, "type")
			return typ, chi.URLParam(r, "id"), typ != "notes"
		},
		Logger:     log,
		Registerer: a.reg,
	})
	write := func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.writes[chi.URLParam(r, "type")+"/"+chi.URLParam(r, "id")]++
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
	r.With(guard).Put("/{type}/{id}", write)
	r.With(guard).Delete("/{type}/{id}", write)
	a.srv = httptest.NewServer(r)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *ordersAPI) put(t *testing.T, who, path string) resp {
	t.Helper()
	q := req{method: "PUT", path: path}
	if who != "" {
		q.header = map[string]string{"X-User": who}
	}
	return doHTTP(t, a.srv.Client(), a.srv.URL, q)
}

func (a *ordersAPI) claim(t *testing.T, tenant, oid, uid string) {
	t.Helper()
	res, err := a.store.Locks.Claim(t.Context(), locks.Ref{Tenant: tenant, Type: "Order", UID: uid}, protocol.Holder{OID: oid, Name: "User " + oid}, "")
	if err != nil || res.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("claim: %v %v", res.Outcome, err)
	}
}

func (a *ordersAPI) decisions(t *testing.T, decision web.GuardDecision) float64 {
	t.Helper()
	return counterValue(t, a.reg, "lockhub_guard_decisions_total", string(decision))
}

// written returns how often the handler wrote an entity.
func (a *ordersAPI) written(entity string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writes[entity]
}

func TestGuard(t *testing.T) {
	a := newOrdersAPI(t, nil)
	a.claim(t, "acme", "u-ada", "o-1")

	// Another user: 409 with the lock; the handler does not run.
	r := a.put(t, "acme/u-bob", "/Order/o-1")
	wantStatus(t, r, 409, "locked")
	equal(t, "lock holder", r.obj("lock")["holderOid"], any("u-ada"))
	equal(t, "lock entity", r.obj("lock")["entityUid"], any("o-1"))
	equal(t, "handler ran", a.written("Order/o-1"), 0)

	// The holder passes.
	wantStatus(t, a.put(t, "acme/u-ada", "/Order/o-1"), 204, "")
	// Another tenant's o-1 is another entity.
	wantStatus(t, a.put(t, "globex/u-bob", "/Order/o-1"), 204, "")
	// A type that is not lockable, and a route the guard is told to skip, pass.
	wantStatus(t, a.put(t, "acme/u-bob", "/Invoice/i-1"), 204, "")
	wantStatus(t, a.put(t, "acme/u-bob", "/notes/n-1"), 204, "")
	// A hostile uid never reaches the handler, and no identity is 401.
	wantStatus(t, a.put(t, "acme/u-bob", "/Order/a%7Db"), 400, "invalid_entity")
	wantStatus(t, a.put(t, "", "/Order/o-2"), 401, "unauthorized")

	// The lease runs out without release: the entity is free again.
	a.mr.FastForward(6 * time.Minute)
	wantStatus(t, a.put(t, "acme/u-bob", "/Order/o-1"), 204, "")
	equal(t, "writes", a.written("Order/o-1"), 3)

	equal(t, "locked", a.decisions(t, web.GuardLocked), 1)
	equal(t, "mine", a.decisions(t, web.GuardMine), 1)
	equal(t, "unguarded", a.decisions(t, web.GuardUnguarded), 2)
	equal(t, "refused", a.decisions(t, web.GuardRefused), 2)
}

// TestGuardNeverBlocksAutomation: a worker or driver app with a token that never
// claims writes every free entity, as often as it likes.
func TestGuardNeverBlocksAutomation(t *testing.T) {
	a := newOrdersAPI(t, nil)
	a.claim(t, "acme", "u-ada", "o-1")
	for i := range 20 {
		uid := "o-" + string(rune('2'+i%5))
		wantStatus(t, a.put(t, "acme/svc-driver-app", "/Order/"+uid), 204, "")
	}
	wantStatus(t, a.put(t, "acme/svc-driver-app", "/Order/o-1"), 409, "locked")
	equal(t, "free", a.decisions(t, web.GuardFree), 20)
}

// TestGuardFailsOpen: a dead Redis lets every write through, and says so: the store
// logs and counts its reason, the guard counts its decision.
func TestGuardFailsOpen(t *testing.T) {
	a := newOrdersAPI(t, nil)
	a.claim(t, "acme", "u-ada", "o-1")
	a.mr.Close()
	start := time.Now()
	wantStatus(t, a.put(t, "acme/u-bob", "/Order/o-1"), 204, "")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %s", d)
	}
	// A refused dial, or on a busy machine the store's own timeout first: either says
	// Redis did not answer, once.
	if n := counterValue(t, a.reg, "lockhub_store_fail_open_total", "get", "connection") +
		counterValue(t, a.reg, "lockhub_store_fail_open_total", "get", "timeout"); n != 1 {
		t.Fatalf("store fail-opens counted: %v", n)
	}
	equal(t, "failed open", a.decisions(t, web.GuardFailedOpen), 1)
	if !strings.Contains(a.logs.String(), "guard failing open") {
		t.Fatalf("no warning logged: %s", a.logs)
	}
}

// counterValue returns the value of the counter of a family with the given label
// values (in the order of the label names, sorted), or 0.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for i, l := range m.GetLabel() {
				if l.GetValue() != labels[i] {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
