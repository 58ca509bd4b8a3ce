package web

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/lockhub/lockhub/protocol"
)

// MaxBodySize caps a request body (PROTOCOL.md §5): larger answers 413 too_large.
const MaxBodySize = 64 << 10

// DefaultBodyTimeout is how long a request body may take to arrive once its headers
// have (PROTOCOL.md §5, "Hardening"); a slower one answers 408 and the connection
// closes.
const DefaultBodyTimeout = 10 * time.Second

// LimitBody returns middleware that reads each request body, up to MaxBodySize and
// within timeout (zero means DefaultBodyTimeout), before the handler runs: a larger
// body answers 413 too_large, a slower one 408 request_timeout, and handlers read a
// body that is already in memory. Put it after the authentication, so that a request
// without a valid token is refused before its body is read. Errors go to log (nil
// means slog.Default()).
func LimitBody(timeout time.Duration, log *slog.Logger) func(http.Handler) http.Handler {
	timeout = cmp.Or(timeout, DefaultBodyTimeout)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > MaxBodySize {
				closeUnread(w, r)
				WriteError(w, r, log, &http.MaxBytesError{Limit: MaxBodySize})
				return
			}
			if r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			b, err := readBody(w, r, timeout)
			if err != nil {
				WriteError(w, r, log, err)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			next.ServeHTTP(w, r)
		})
	}
}

// closeUnread marks the answer to a request whose body is left unread as the last of
// its connection. Otherwise net/http reads up to 256 KiB of the body before it writes
// the answer (to keep the connection alive), which is what refusing before the body
// means not to do.
func closeUnread(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		w.Header().Set("Connection", "close")
	}
}

// readBody reads r's body within timeout and MaxBodySize.
func readBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) ([]byte, error) {
	rc := http.NewResponseController(w)
	// A server without a deadline of its own (httptest's) still gets one; a writer
	// that cannot take one (a test recorder) reads without.
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodySize))
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		_ = rc.SetReadDeadline(time.Time{}) // the body is whole: the connection may serve the next request
		return b, nil
	case errors.As(err, &mbe):
		return nil, err
	case errors.Is(err, os.ErrDeadlineExceeded):
		// What is left of the body is not read, and the deadline stays passed: net/http
		// reads up to 256 KiB of an unread body after the handler, and a body that
		// drips (a byte now and then) kept the connection open while it came
		// (TestBodyDripCut).
		w.Header().Set("Connection", "close")
		return nil, &Error{Code: protocol.CodeRequestTimeout, Message: fmt.Sprintf("the body did not arrive within %s", timeout), Err: err}
	}
	return nil, &Error{Code: protocol.CodeBadRequest, Message: "the body could not be read", Err: err}
}

// DecodeJSON decodes the JSON object body of r into v, answering what is wrong with it
// as a bad_request *Error. An empty body leaves v as it is when optional, and is a bad
// request otherwise. Behind a Server (Config.App) the body is in memory already, and
// at most MaxBodySize.
func DecodeJSON(r *http.Request, v any, optional bool) error {
	b, err := io.ReadAll(r.Body) // in memory already: see LimitBody
	if err != nil {
		return &Error{Code: protocol.CodeBadRequest, Message: "the body could not be read", Err: err}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if optional {
			return nil
		}
		return Errorf(protocol.CodeBadRequest, "a JSON object body is required")
	}
	if t := bytes.TrimSpace(b); t[0] != '{' {
		return Errorf(protocol.CodeBadRequest, "the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return &Error{Code: protocol.CodeBadRequest, Message: describeJSON(err), Err: err}
	}
	if dec.More() {
		return Errorf(protocol.CodeBadRequest, "the body must be one JSON object")
	}
	return nil
}

// describeJSON names what is wrong with a body, in terms a client can act on.
func describeJSON(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return "the body is not valid JSON: " + se.Error()
	case errors.As(err, &te) && te.Field != "":
		return te.Field + " must not be a JSON " + te.Value
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body is truncated JSON"
	}
	return "the body is not the JSON object expected"
}

// bodyDeadline returns middleware that gives the body of every request timeout to
// arrive from when its headers have (PROTOCOL.md §5, "Hardening (version 3)"): on
// every route, whether the handler reads the body or not. Without it a route that
// ignores its body (GET /healthz with a Content-Length and no body) kept the
// connection open while net/http waited for the body it discards before reusing the
// connection. net/http sets the next request's own deadlines when it reads its
// headers, and clears them on a hijack, so the deadline of one request never cuts the
// next, nor a WebSocket.
func bodyDeadline(timeout time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body != nil && r.Body != http.NoBody {
				// A writer without deadlines (a test recorder) has no connection to hold.
				_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
			}
			next.ServeHTTP(w, r)
		})
	}
}
