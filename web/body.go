package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/lockhub/lockhub/protocol"
)

// MaxBodySize caps a request body (PROTOCOL.md §5): larger answers 413 too_large.
const MaxBodySize = 64 << 10

// limitBody reads each request body, up to MaxBodySize, before any handler runs: a
// larger body answers 413 too_large whatever the route, and handlers read a body that
// is already in memory.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBodySize {
			s.fail(w, r, &http.MaxBytesError{Limit: MaxBodySize})
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodySize))
		if err != nil {
			var mbe *http.MaxBytesError
			if !errors.As(err, &mbe) {
				err = &Error{Code: protocol.CodeBadRequest, Message: "the body could not be read", Err: err}
			}
			s.fail(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		next.ServeHTTP(w, r)
	})
}

// DecodeJSON decodes the JSON object body of r into v, answering what is wrong with it
// as a bad_request *Error. An empty body leaves v as it is when optional, and is a bad
// request otherwise. Behind a Server (Config.App) the body is in memory already, and
// at most MaxBodySize.
func DecodeJSON(r *http.Request, v any, optional bool) error {
	b, err := io.ReadAll(r.Body) // in memory already: see limitBody
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
