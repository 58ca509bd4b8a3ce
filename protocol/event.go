package protocol

// LockEvent is the change event of PROTOCOL.md §3, sent to every watcher of the
// entity's type in the entity's tenant:
//
//	{"type":"lock","op":"TakenOver","lock":{...},"previousHolder":{"oid":"..","name":".."},"at":"..Z"}
//
// PreviousHolder is set on TakenOver only. Lock is the lock as stored; for Released and
// Expired it is the lock as it was last stored.
type LockEvent struct {
	Type           FrameType `json:"type"` // always FrameLock
	Op             Op        `json:"op"`
	Lock           Lock      `json:"lock"`
	PreviousHolder *Holder   `json:"previousHolder,omitempty"`
	At             Time      `json:"at"`
}
