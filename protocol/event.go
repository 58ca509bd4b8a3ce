package protocol

// LockEvent is the change event of PROTOCOL.md §3, sent to every watcher of the
// entity's type in the entity's tenant:
//
//	{"type":"lock","op":"TakenOver","lock":{...},"previousHolder":{"oid":"..","name":".."},"at":"..Z"}
//
// PreviousHolder is set on TakenOver only. By is set on a Released that an
// administrator forced (PROTOCOL.md §10, the lock console): who released it. Lock is the
// lock as stored; for Released and Expired it is the lock as it was last stored.
type LockEvent struct {
	Type           FrameType `json:"type"` // always FrameLock
	Op             Op        `json:"op"`
	Lock           Lock      `json:"lock"`
	PreviousHolder *Holder   `json:"previousHolder,omitempty"`
	By             *Holder   `json:"by,omitempty"`
	At             Time      `json:"at"`
}
