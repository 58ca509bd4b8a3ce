package hub

import (
	"encoding/json"
	"errors"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// errorFrame maps an error answering req to its error frame, echoing req's id (even an
// empty one; none when req carried none): the one place the socket turns errors into
// codes (PROTOCOL.md §4). A protocol.ClientError (bad_request from DecodeRequest,
// invalid_entity and not_lockable from the store) answers its own code and message.
func errorFrame(req protocol.Request, err error) protocol.Error {
	id, has := req.ID, req.HasID
	var pe *protocol.Error
	if errors.As(err, &pe) && (pe.ID != "" || pe.HasID) {
		return *pe // it names the id it answers already
	}
	var ce protocol.ClientError
	if errors.As(err, &ce) {
		return protocol.Error{ID: id, HasID: has, Code: ce.ErrorCode(), Message: ce.ClientMessage()}
	}
	if errors.Is(err, locks.ErrUnavailable) {
		// Where "no answer" must not read as an answer (the console's list).
		return protocol.Error{ID: id, HasID: has, Code: protocol.CodeStoreUnavailable, Message: "the lock store does not answer; try again shortly"}
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
