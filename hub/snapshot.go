package hub

import (
	"encoding/json"
	"slices"

	"github.com/lockhub/lockhub/protocol"
)

// encodeLocks encodes locks as a snapshot's "locks" member: [] when there are none.
func encodeLocks(locks []protocol.Lock) []byte {
	if locks == nil {
		locks = []protocol.Lock{}
	}
	b, err := json.Marshal(locks)
	if err != nil {
		panic("hub: encoding locks cannot fail: " + err.Error())
	}
	return b
}

// snapshotFrame is the snapshot of typ answering req, its locks already encoded (a
// JSON array, see encodeLocks); an unsolicited one answers protocol.Request{} and
// carries no id. The bytes are protocol.Snapshot's, built around the shared locks
// rather than encoded for each watcher.
func snapshotFrame(req protocol.Request, typ string, locks []byte) outFrame {
	if len(locks) >= sharedBody {
		return outFrame{b: appendSnapshotHead(nil, req, typ), body: locks, tail: closeBrace, typ: protocol.FrameSnapshot}
	}
	return outFrame{b: appendSnapshot(nil, req, typ, locks), typ: protocol.FrameSnapshot}
}

// sharedBody is the size from which an answer's locks go out from their shared array
// (outFrame.body) rather than copied into the socket's frame: below it, one buffer
// and one write(2) cost less than a writev(2) of three.
const sharedBody = 16 << 10

// closeBrace ends a frame whose locks are its body (outFrame.tail). Never modified.
var closeBrace = []byte{'}'}

// appendSnapshot appends snapshotFrame's bytes to b.
func appendSnapshot(b []byte, req protocol.Request, typ string, locks []byte) []byte {
	b = slices.Grow(b, len(locks)+len(typ)+len(req.ID)+64)
	b = appendSnapshotHead(b, req, typ)
	b = append(b, locks...)
	return append(b, '}')
}

// appendSnapshotHead appends a snapshot's bytes up to its locks.
func appendSnapshotHead(b []byte, req protocol.Request, typ string) []byte {
	b = append(b, '{')
	if req.ID != "" || req.HasID {
		id, _ := json.Marshal(req.ID) // a string always encodes
		b = append(b, `"id":`...)
		b = append(b, id...)
		b = append(b, ',')
	}
	b = append(b, `"type":"`+string(protocol.FrameSnapshot)+`","entityType":`...)
	t, _ := json.Marshal(typ) // a checked name; encoded all the same
	b = append(b, t...)
	return append(b, `,"locks":`...)
}
