package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
	"github.com/lockhub/lockhub/web"
)

// An existing chi API adopts the guard in a few lines: say who the caller is and which
// entity a route writes, and wrap the write routes. A write to an order another user
// is editing answers 409 with the lock; the editor, and anyone writing a free order
// (a worker, a driver app), passes.
func ExampleGuard() {
	// The lock store on the Redis the lockhub instances share (miniredis here).
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	lockable, _ := locks.NewRegistry("Order")
	store, _ := locks.NewStore(locks.Config{Client: rdb, Registry: lockable})

	// The existing API: its authentication puts the caller in the context.
	r := chi.NewRouter()
	r.Use(authenticate)
	r.Get("/orders/{id}", getOrder)

	// Adopting the guard.
	guard := web.Guard(web.GuardConfig{
		Store: store.Locks,
		Identify: func(r *http.Request) (tenant, oid string, err error) {
			c := r.Context().Value(callerKey{}).(caller)
			return c.tenant, c.oid, nil
		},
		Entity: func(r *http.Request) (entityType, uid string, ok bool) {
			return "Order", chi.URLParam(r, "id"), true
		},
	})
	r.With(guard).Put("/orders/{id}", updateOrder)
	r.With(guard).Delete("/orders/{id}", deleteOrder)

	// Ada opens order o-17 in her browser, which claims it through lockhub.
	ref := locks.Ref{Tenant: "acme", Type: "Order", UID: "o-17"}
	_, _ = store.Locks.Claim(context.Background(), ref, protocol.Holder{OID: "u-ada", Name: "Ada Lovelace"}, "")

	for _, who := range []string{"u-bob", "u-ada", "svc-driver-app"} {
		for _, path := range []string{"/orders/o-17", "/orders/o-18"} {
			req := httptest.NewRequest("PUT", path, nil)
			req.Header.Set("X-User", who)
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			fmt.Println(who, path, rec.Code)
		}
	}
	// Output:
	// u-bob /orders/o-17 409
	// u-bob /orders/o-18 204
	// u-ada /orders/o-17 204
	// u-ada /orders/o-18 204
	// svc-driver-app /orders/o-17 409
	// svc-driver-app /orders/o-18 204
}

type callerKey struct{}

type caller struct{ tenant, oid string }

// authenticate stands for the API's own authentication.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), callerKey{}, caller{tenant: "acme", oid: r.Header.Get("X-User")})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func getOrder(w http.ResponseWriter, r *http.Request)    { w.WriteHeader(http.StatusOK) }
func updateOrder(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }
func deleteOrder(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }
