package hub

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// errorFrame maps an error answering request id to its error frame: the one place the
// socket turns errors into codes (PROTOCOL.md §4).
//
//	*protocol.Error            its own code (bad_request from DecodeRequest)
//	*locks.InvalidEntityError  invalid_entity
//	*locks.NotLockableError    not_lockable, naming the lockable types
func errorFrame(id string, err error) protocol.Error {
	var pe *protocol.Error
	var ie *locks.InvalidEntityError
	var nl *locks.NotLockableError
	switch {
	case errors.As(err, &pe):
		e := *pe
		if e.ID == "" {
			e.ID = id
		}
		return e
	case errors.As(err, &ie):
		return protocol.Error{ID: id, Code: protocol.CodeInvalidEntity, Message: strings.TrimPrefix(ie.Error(), "locks: ")}
	case errors.As(err, &nl):
		return protocol.Error{ID: id, Code: protocol.CodeNotLockable, Message: strings.TrimPrefix(nl.Error(), "locks: ")}
	}
	// The store promises no other error; should one come, the request was not served.
	return protocol.Error{ID: id, Code: protocol.CodeBadRequest, Message: "request not served"}
}

// encodeFrame encodes a server frame.
func encodeFrame(typ protocol.FrameType, v any) outFrame {
	b, err := json.Marshal(v)
	if err != nil {
		panic("hub: encoding a server frame cannot fail: " + err.Error())
	}
	return outFrame{b: b, typ: typ}
}
