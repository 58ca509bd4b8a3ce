package web

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/protocol"
)

// Error is an error the HTTP API answers with its Code, one of the protocol's (see
// statusOf for the status of each). Lock and Row add the member of the same name to
// the body.
type Error struct {
	Code    protocol.ErrorCode
	Message string
	// Lock is the lock in the way, with protocol.CodeLocked.
	Lock *protocol.Lock
	// Locks are the locks in the way of a bulk write, with protocol.CodeLocked
	// (PROTOCOL.md §12).
	Locks []protocol.Lock
	// Row is the entity as it stands, for an adopter's codes that show it (the demo's
	// stale and already_decided): any value that encodes as JSON. Nil means no row
	// member.
	Row any
	// Err is the cause, logged and never sent.
	Err error
}

var _ protocol.ClientError = (*Error)(nil)

func (e *Error) Error() string {
	if e.Err != nil {
		return "web: " + string(e.Code) + ": " + e.Message + ": " + e.Err.Error()
	}
	return "web: " + string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns e.Code.
func (e *Error) ErrorCode() protocol.ErrorCode { return e.Code }

// ClientMessage returns e.Message.
func (e *Error) ClientMessage() string { return e.Message }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code protocol.ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// errorBody is what an error answers.
type errorBody struct {
	Code    protocol.ErrorCode `json:"code"`
	Message string             `json:"message"`
	Lock    *protocol.Lock     `json:"lock,omitempty"`
	Locks   []protocol.Lock    `json:"locks,omitempty"`
	Row     any                `json:"row,omitempty"`
}

// errorFor is the one place an error becomes an HTTP status and body. A
// protocol.ClientError answers its own code and message, as on the socket.
func errorFor(err error) (int, errorBody) {
	var (
		we  *Error
		ce  protocol.ClientError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &we):
		return statusOf(we.Code), errorBody{Code: we.Code, Message: we.Message, Lock: we.Lock, Locks: we.Locks, Row: we.Row}
	case errors.As(err, &ce):
		return statusOf(ce.ErrorCode()), errorBody{Code: ce.ErrorCode(), Message: ce.ClientMessage()}
	case errors.Is(err, auth.ErrUnauthorized):
		return http.StatusUnauthorized, errorBody{Code: protocol.CodeUnauthorized, Message: "a valid bearer token is required"}
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, errorBody{Code: protocol.CodeTooLarge, Message: fmt.Sprintf("the body is larger than %d bytes", mbe.Limit)}
	}
	return http.StatusInternalServerError, errorBody{Code: protocol.CodeInternal, Message: "internal error"}
}

// statusOf is the HTTP status of each error code (PROTOCOL.md §5).
func statusOf(code protocol.ErrorCode) int {
	switch code {
	case protocol.CodeBadRequest, protocol.CodeInvalidEntity, protocol.CodeNotLockable:
		return http.StatusBadRequest
	case protocol.CodeUnauthorized:
		return http.StatusUnauthorized
	case protocol.CodeForbidden:
		return http.StatusForbidden
	case protocol.CodeNotFound:
		return http.StatusNotFound
	case protocol.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case protocol.CodeLocked, protocol.CodeAlreadyDecided, protocol.CodeConflict:
		return http.StatusConflict
	case protocol.CodeStale:
		return http.StatusPreconditionFailed
	case protocol.CodeRequestTimeout:
		return http.StatusRequestTimeout
	case protocol.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case protocol.CodeRateLimited, protocol.CodeTooManyLocks:
		return http.StatusTooManyRequests
	case protocol.CodeStoreUnavailable, protocol.CodeNotReady:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// WriteError answers err as every error of the HTTP API is answered: the status and
// body of errorFor. Server errors are logged to log (nil means slog.Default()) with
// their cause; client errors are not, since they are the client's to see.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status, body := errorFor(err)
	if status >= 500 {
		log = cmp.Or(log, slog.Default())
		log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", status), slog.String("error", err.Error()))
	}
	if status == http.StatusUnauthorized {
		// RFC 6750 §3: a 401 names the scheme it wants.
		w.Header().Set("WWW-Authenticate", `Bearer realm="lockhub"`)
	}
	var wait interface{ Wait() time.Duration }
	if errors.As(err, &wait) {
		// RFC 9110 §10.2.3: whole seconds, rounded up so that a retry is not early.
		w.Header().Set("Retry-After", strconv.FormatInt(int64((wait.Wait()+time.Second-1)/time.Second), 10))
	}
	WriteJSON(w, status, body)
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are written, and they always encode.
		panic("web: encoding an answer: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	b = append(b, '\n')
	_, _ = w.Write(b) // a client that went away is not ours to report
}
