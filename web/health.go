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
