package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/lockhub/lockhub/hub"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Code is the "code" member of an error body.
type Code string

// The error codes the HTTP API answers, each with its status (see errorFor).
const (
	CodeBadRequest       Code = "bad_request"        // 400: a body that is not the JSON asked for
	CodeInvalidEntity    Code = "invalid_entity"     // 400: a name that fails PROTOCOL.md §1
	CodeNotLockable      Code = "not_lockable"       // 400: a type not registered as lockable
	CodeUnauthorized     Code = "unauthorized"       // 401: no valid bearer token
	CodeNotFound         Code = "not_found"          // 404
	CodeMethodNotAllowed Code = "method_not_allowed" // 405
	CodeLocked           Code = "locked"             // 409: another user holds a live lock
	CodeAlreadyDecided   Code = "already_decided"    // 409: the request has a decision
	CodeConflict         Code = "conflict"           // 409: changed concurrently too often; retry
	CodeStale            Code = "stale"              // 412: If-Match does not match
	CodeTooLarge         Code = "too_large"          // 413: a body over MaxBodySize
	CodeInternal         Code = "internal"           // 500
	CodeStoreUnavailable Code = "store_unavailable"  // 503: the demo domain's store is down
	CodeNotReady         Code = "not_ready"          // 503: /readyz, the lock Redis does not answer
)

// Error is an error the HTTP API answers with its Code. Lock and Row add the member
// of the same name to the body.
type Error struct {
	Code    Code
	Message string
	// Lock is the lock in the way, with CodeLocked.
	Lock *protocol.Lock
	// Row is the row as it stands, with CodeAlreadyDecided and CodeStale.
	Row *ApprovalRequest
	// Err is the cause, logged and never sent.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "web: " + string(e.Code) + ": " + e.Message + ": " + e.Err.Error()
	}
	return "web: " + string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// errorBody is what an error answers.
type errorBody struct {
	Code    Code             `json:"code"`
	Message string           `json:"message"`
	Lock    *protocol.Lock   `json:"lock,omitempty"`
	Row     *ApprovalRequest `json:"row,omitempty"`
}

// errorFor is the one place an error becomes an HTTP status and body.
func errorFor(err error) (int, errorBody) {
	var (
		we  *Error
		ie  *locks.InvalidEntityError
		nl  *locks.NotLockableError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &we):
		b := errorBody{Code: we.Code, Message: we.Message, Lock: we.Lock, Row: we.Row}
		switch we.Code {
		case CodeBadRequest, CodeInvalidEntity, CodeNotLockable:
			return http.StatusBadRequest, b
		case CodeUnauthorized:
			return http.StatusUnauthorized, b
		case CodeNotFound:
			return http.StatusNotFound, b
		case CodeMethodNotAllowed:
			return http.StatusMethodNotAllowed, b
		case CodeLocked, CodeAlreadyDecided, CodeConflict:
			return http.StatusConflict, b
		case CodeStale:
			return http.StatusPreconditionFailed, b
		case CodeTooLarge:
			return http.StatusRequestEntityTooLarge, b
		case CodeStoreUnavailable, CodeNotReady:
			return http.StatusServiceUnavailable, b
		}
		return http.StatusInternalServerError, b
	case errors.As(err, &ie):
		return http.StatusBadRequest, errorBody{Code: CodeInvalidEntity, Message: err.Error()}
	case errors.As(err, &nl):
		return http.StatusBadRequest, errorBody{Code: CodeNotLockable, Message: err.Error()}
	case errors.Is(err, hub.ErrUnauthorized):
		return http.StatusUnauthorized, errorBody{Code: CodeUnauthorized, Message: "a valid bearer token is required"}
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, errorBody{Code: CodeTooLarge, Message: fmt.Sprintf("the body is larger than %d bytes", mbe.Limit)}
	}
	return http.StatusInternalServerError, errorBody{Code: CodeInternal, Message: "internal error"}
}

// writeError answers err. Server errors are logged with their cause; client errors
// are not, since they are the client's to see.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status, body := errorFor(err)
	if status >= 500 {
		log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", status), slog.String("error", err.Error()))
	}
	if status == http.StatusUnauthorized {
		// RFC 6750 §3: a 401 names the scheme it wants.
		w.Header().Set("WWW-Authenticate", `Bearer realm="lockhub"`)
	}
	writeJSON(w, status, body)
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
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
