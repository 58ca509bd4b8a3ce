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
	return outFrame{b: appendSnapshot(nil, req, typ, locks), typ: protocol.FrameSnapshot}
}

// appendSnapshot appends snapshotFrame's bytes to b.
func appendSnapshot(b []byte, req protocol.Request, typ string, locks []byte) []byte {
	b = slices.Grow(b, len(locks)+len(typ)+len(req.ID)+64)
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
	b = append(b, `,"locks":`...)
	b = append(b, locks...)
	return append(b, '}')
}
