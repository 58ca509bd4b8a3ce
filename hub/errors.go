package hub

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// errorFrame maps an error answering req to its error frame, echoing req's id (even an
// empty one; none when req carried none): the one place the
// socket turns errors into codes (PROTOCOL.md §4).
//
//	*protocol.Error            its own code (bad_request from DecodeRequest)
//	*locks.InvalidEntityError  invalid_entity
//	*locks.NotLockableError    not_lockable, naming the lockable types
func errorFrame(req protocol.Request, err error) protocol.Error {
	id, has := req.ID, req.HasID
	var pe *protocol.Error
	var ie *locks.InvalidEntityError
	var nl *locks.NotLockableError
	switch {
	case errors.As(err, &pe):
		e := *pe
		if e.ID == "" && !e.HasID {
			e.ID, e.HasID = id, has
		}
		return e
	case errors.As(err, &ie):
		return protocol.Error{ID: id, HasID: has, Code: protocol.CodeInvalidEntity, Message: strings.TrimPrefix(ie.Error(), "locks: ")}
	case errors.As(err, &nl):
		return protocol.Error{ID: id, HasID: has, Code: protocol.CodeNotLockable, Message: strings.TrimPrefix(nl.Error(), "locks: ")}
	}
	// The store promises no other error; should one come, the request was not served.
	return protocol.Error{ID: id, HasID: has, Code: protocol.CodeBadRequest, Message: "request not served"}
}

// encodeFrame encodes a server frame.
func encodeFrame(typ protocol.FrameType, v any) outFrame {
	b, err := json.Marshal(v)
	if err != nil {
		panic("hub: encoding a server frame cannot fail: " + err.Error())
	}
	return outFrame{b: b, typ: typ}
}
