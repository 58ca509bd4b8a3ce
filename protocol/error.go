package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrorCode is the "code" member of an error frame (PROTOCOL.md §4) and of an HTTP
// error body (§5): both transports speak one vocabulary, and the same error reads the
// same over either.
type ErrorCode string

// Error codes of an error frame (PROTOCOL.md §4), also answered over HTTP. The
// connection stays open after each.
const (
	// CodeBadRequest: not a well-formed frame (malformed JSON, unknown type, a missing
	// or mistyped member, an id that is not a string of at most MaxIDLength
	// characters, a binary message).
	CodeBadRequest ErrorCode = "bad_request"
	// CodeNotLockable: the entity type is not registered as lockable; the message
	// names the registered types.
	CodeNotLockable ErrorCode = "not_lockable"
	// CodeInvalidEntity: a well-formed string that fails the syntax of PROTOCOL.md §1.
	CodeInvalidEntity ErrorCode = "invalid_entity"
	// CodeRateLimited: the request exceeds the connection's rate (RateLimit).
	CodeRateLimited ErrorCode = "rate_limited"
	// CodeForbidden: the caller lacks the role the request needs.
	CodeForbidden ErrorCode = "forbidden"
	// CodeTooManyLocks: a claim or takeover beyond the locks one socket may hold at
	// a time (version 2); nothing was written.
	CodeTooManyLocks ErrorCode = "too_many_locks"
	// CodeTooManyViews: a view beyond the entities one socket may view at a time
	// (version 2, §9).
	CodeTooManyViews ErrorCode = "too_many_views"
	// CodeTooManySockets: an auth beyond the authenticated sockets one person may
	// hold on one instance (version 3, §4 "Fair share"); the socket is then closed
	// with CloseTooMany (4429).
	CodeTooManySockets ErrorCode = "too_many_sockets"
)

// Error codes of HTTP answers only (PROTOCOL.md §5); each has its status.
const (
	CodeUnauthorized     ErrorCode = "unauthorized"       // 401: no valid bearer token
	CodeNotFound         ErrorCode = "not_found"          // 404
	CodeMethodNotAllowed ErrorCode = "method_not_allowed" // 405
	CodeLocked           ErrorCode = "locked"             // 409: another user holds a live lock
	CodeRequestTimeout   ErrorCode = "request_timeout"    // 408: a body slower than its timeout
	CodeTooLarge         ErrorCode = "too_large"          // 413: a body over the size cap
	CodeInternal         ErrorCode = "internal"           // 500
	CodeNotReady         ErrorCode = "not_ready"          // 503: /readyz, the lock Redis does not answer

	// The demo domain's (PROTOCOL.md §5, "The demo domain").
	CodeAlreadyDecided   ErrorCode = "already_decided"   // 409: the request has a decision
	CodeConflict         ErrorCode = "conflict"          // 409: changed concurrently too often; retry
	CodeStale            ErrorCode = "stale"             // 412: If-Match does not match
	CodeStoreUnavailable ErrorCode = "store_unavailable" // 503: the demo domain's store is down
)

// A ClientError is an error meant for the client: both transports answer it with its
// code and its message, an error frame on the socket and an error body over HTTP, so it
// reads the same over either. *Error is one, and so are the request errors of package
// locks.
type ClientError interface {
	error
	ErrorCode() ErrorCode
	ClientMessage() string
}

var _ ClientError = (*Error)(nil)

// ErrFrameTooLarge is returned by DecodeRequest for a frame over MaxFrameSize. It is not
// answered with an error frame: the connection closes with CloseTooLarge (1009).
var ErrFrameTooLarge = errors.New("protocol: frame larger than 64 KiB")

// Error is an error frame, and the Go error that stands for it: DecodeRequest returns
// it for a frame that is not well formed, Client returns it when the server answers a
// request with an error frame.
//
//	{"id":"7","type":"error","code":"bad_request","message":"missing entityUid"}
//
// ID is the id of the request it answers; the member is omitted when none could be
// read, that is when ID is empty and HasID false.
type Error struct {
	ID      string    `json:"id,omitempty"`
	HasID   bool      `json:"-"` // the request carried an empty id: echo it
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
}

func (e *Error) Error() string { return "protocol: " + string(e.Code) + ": " + e.Message }

// ErrorCode returns e.Code.
func (e *Error) ErrorCode() ErrorCode { return e.Code }

// ClientMessage returns e.Message.
func (e *Error) ClientMessage() string { return e.Message }

// MarshalJSON writes e as an error frame.
func (e Error) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID      *string   `json:"id,omitempty"`
		Type    FrameType `json:"type"`
		Code    ErrorCode `json:"code"`
		Message string    `json:"message"`
	}{idMember(e.ID, e.HasID), FrameError, e.Code, e.Message})
}

// badRequest returns a CodeBadRequest error answering the request id.
func badRequest(id, format string, args ...any) *Error {
	return &Error{ID: id, Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

// idMember is the id member of an answer: absent (nil) unless the request carried an
// id, which is echoed even when empty.
func idMember(id string, has bool) *string {
	if id == "" && !has {
		return nil
	}
	return &id
}
