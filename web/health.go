package web

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/lockhub/lockhub/protocol"
)

// readyTimeout bounds the readiness probe's ping.
const readyTimeout = time.Second

type status struct {
	Status string `json:"status"`
}

// healthz: GET /healthz answers while the process runs.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, status{"ok"})
}

// readyz: GET /readyz says whether the lock Redis answers (PROTOCOL.md §5 and §7). The
// hub still serves without it, failing open; a load balancer may prefer instances
// that have it. The demo domain's store is not asked: it is not the lock service's.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		// Not logged: a load balancer asks every few seconds, and the drain itself
		// was logged once when it began.
		s.fail(w, r, &Error{Code: protocol.CodeNotReady, Message: "draining: this instance is shutting down"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		// The cause names internal addresses: it goes to the log, not to the prober.
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "not ready: the lock Redis does not answer", slog.String("error", err.Error()))
		s.fail(w, r, &Error{Code: protocol.CodeNotReady, Message: "the lock Redis does not answer; lockhub serves, failing open", Err: err})
		return
	}
	WriteJSON(w, http.StatusOK, status{"ready"})
}

// Drain makes GET /readyz answer 503 not_ready from now on, whether or not the lock
// Redis answers, while every other route is served as before: a load balancer stops
// sending new requests and sockets here before the process closes them (PROTOCOL.md
// §7, --drain-delay). It is safe to call concurrently and more than once.
func (s *Server) Drain() { s.draining.Store(true) }
