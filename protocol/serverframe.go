package protocol

import (
	"encoding/json"
	"errors"
	"time"
)

// Welcome answers the first auth frame (PROTOCOL.md §4):
//
//	{"type":"welcome","connectionId":"c-1","tenant":"acme","holder":{"oid":"u-ada","name":"Ada Lovelace"},
//	 "leaseMs":300000,"renewMs":120000,"serverTime":"2026-12-02T09:15:00.123Z",
//	 "lockable":["ApprovalRequest"],"canTakeOver":false}
//
// Lockable marshals as [] when nil.
type Welcome struct {
	ConnectionID string   `json:"connectionId"`
	Tenant       string   `json:"tenant"`
	Holder       Holder   `json:"holder"`
	LeaseMs      int64    `json:"leaseMs"`
	RenewMs      int64    `json:"renewMs"`
	ServerTime   Time     `json:"serverTime"`
	Lockable     []string `json:"lockable"`
	CanTakeOver  bool     `json:"canTakeOver"`
}

// Lease returns LeaseMs as a duration: how long a claim holds without renewal.
func (w Welcome) Lease() time.Duration { return time.Duration(w.LeaseMs) * time.Millisecond }

// RenewEvery returns RenewMs as a duration: how often a holder should renew.
func (w Welcome) RenewEvery() time.Duration { return time.Duration(w.RenewMs) * time.Millisecond }

// MarshalJSON writes w as a welcome frame.
func (w Welcome) MarshalJSON() ([]byte, error) {
	type fields Welcome // Welcome's members without its methods
	if w.Lockable == nil {
		w.Lockable = []string{}
	}
	return json.Marshal(struct {
		Type FrameType `json:"type"`
		fields
	}{FrameWelcome, fields(w)})
}

// Result answers a request that has no answer frame of its own (PROTOCOL.md §4). Its
// Outcome chooses which members it carries, and MarshalJSON writes exactly those:
//
//	claim, renew, release, takeover   {"id":"7","type":"result","outcome":"acquired","lock":{..}}
//	                                  "lock" is null when Lock is nil
//	takeover of a held lock           {"id":"8","type":"result","outcome":"takenOver","lock":{..},"previousHolder":{..}}
//	unwatch, auth with an id          {"id":"10","type":"result","outcome":"unwatched"}
//	unview, nudge (Bare)              {"id":"21","type":"result","outcome":"unviewed"}
//	mine (Outcome empty)              {"id":"11","type":"result","locks":[..]}
//	claimMany (Many, version 3)       {"id":"40","type":"result","outcome":"acquired","locks":[..]}
//	releaseMany (Count, version 3)    {"id":"41","type":"result","outcome":"released","count":12}
//
// PreviousHolder is written with OutcomeTakenOver only; Locks marshals as [] when nil.
type Result struct {
	ID             string  `json:"id"`
	Outcome        Outcome `json:"outcome,omitempty"`
	Lock           *Lock   `json:"lock,omitempty"`
	PreviousHolder *Holder `json:"previousHolder,omitempty"`
	Locks          []Lock  `json:"locks,omitempty"`
	// Bare says the answer carries the outcome alone, no lock: unview's and nudge's
	// (version 2, §9), whose notHeld says nothing of a lock.
	Bare bool `json:"-"`
	// Many says the answer is claimMany's: the outcome and Locks, no lock (§12).
	Many bool `json:"-"`
	// Count, when set, makes the answer releaseMany's: the outcome and how many locks
	// the call released (§12).
	Count *int `json:"-"`
}

// MarshalJSON writes r as a result frame, shaped by its Outcome.
func (r Result) MarshalJSON() ([]byte, error) {
	switch r.Outcome {
	case "": // mine
		if r.Locks == nil {
			r.Locks = []Lock{}
		}
		return json.Marshal(struct {
			ID    string    `json:"id"`
			Type  FrameType `json:"type"`
			Locks []Lock    `json:"locks"`
		}{r.ID, FrameResult, r.Locks})
	case OutcomeUnwatched, OutcomeRefreshed, OutcomeUnviewed, OutcomeNudged:
		r.Bare = true
	}
	switch {
	case r.Count != nil:
		return json.Marshal(struct {
			ID      string    `json:"id"`
			Type    FrameType `json:"type"`
			Outcome Outcome   `json:"outcome"`
			Count   int       `json:"count"`
		}{r.ID, FrameResult, r.Outcome, *r.Count})
	case r.Many:
		if r.Locks == nil {
			r.Locks = []Lock{}
		}
		return json.Marshal(struct {
			ID      string    `json:"id"`
			Type    FrameType `json:"type"`
			Outcome Outcome   `json:"outcome"`
			Locks   []Lock    `json:"locks"`
		}{r.ID, FrameResult, r.Outcome, r.Locks})
	}
	if r.Bare {
		return json.Marshal(struct {
			ID      string    `json:"id"`
			Type    FrameType `json:"type"`
			Outcome Outcome   `json:"outcome"`
		}{r.ID, FrameResult, r.Outcome})
	}
	if r.Outcome != OutcomeTakenOver {
		r.PreviousHolder = nil
	}
	return json.Marshal(struct {
		ID             string    `json:"id"`
		Type           FrameType `json:"type"`
		Outcome        Outcome   `json:"outcome"`
		Lock           *Lock     `json:"lock"`
		PreviousHolder *Holder   `json:"previousHolder,omitempty"`
	}{r.ID, FrameResult, r.Outcome, r.Lock, r.PreviousHolder})
}

// Snapshot answers watch with the live locks of a type (PROTOCOL.md §4):
//
//	{"id":"9","type":"snapshot","entityType":"ApprovalRequest","locks":[..]}
//
// A Snapshot without an ID (the member is omitted) is unsolicited: the hub sends it to
// every watcher of the type when it gets Redis back, and it replaces what the watcher
// knew. Locks marshals as [] when nil.
type Snapshot struct {
	ID         string `json:"id,omitempty"`
	HasID      bool   `json:"-"` // the watch carried an empty id: echo it
	EntityType string `json:"entityType"`
	Locks      []Lock `json:"locks"`
}

// MarshalJSON writes s as a snapshot frame.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	if s.Locks == nil {
		s.Locks = []Lock{}
	}
	return json.Marshal(struct {
		ID         *string   `json:"id,omitempty"`
		Type       FrameType `json:"type"`
		EntityType string    `json:"entityType"`
		Locks      []Lock    `json:"locks"`
	}{idMember(s.ID, s.HasID), FrameSnapshot, s.EntityType, s.Locks})
}

// Pong answers a ping (version 2):
//
//	{"id":"13","type":"pong","serverTime":"2026-12-02T09:15:00.123Z"}
type Pong struct {
	ID         string `json:"id,omitempty"`
	HasID      bool   `json:"-"` // the ping carried an empty id: echo it
	ServerTime Time   `json:"serverTime"`
}

// MarshalJSON writes p as a pong frame.
func (p Pong) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID         *string   `json:"id,omitempty"`
		Type       FrameType `json:"type"`
		ServerTime Time      `json:"serverTime"`
	}{idMember(p.ID, p.HasID), FramePong, p.ServerTime})
}

// MarshalJSON writes e as a lock frame. It writes "type":"lock" whatever e.Type holds,
// "previousHolder" with OpTakenOver only and "by" with OpReleased only.
func (e LockEvent) MarshalJSON() ([]byte, error) {
	type fields LockEvent // LockEvent's members without its methods
	e.Type = FrameLock
	if e.Op != OpTakenOver {
		e.PreviousHolder = nil
	}
	if e.Op != OpReleased {
		e.By = nil
	}
	return json.Marshal(fields(e))
}

// ServerFrame is one decoded server frame: Type tells which of the pointers is set.
type ServerFrame struct {
	Type FrameType
	// ID is the id of the request the frame answers, for a result, snapshot or error;
	// empty for welcome, lock events, unsolicited snapshots and errors answering a
	// frame whose id could not be read. HasID tells an empty id from none.
	ID    string
	HasID bool

	Welcome  *Welcome   // FrameWelcome
	Result   *Result    // FrameResult
	Snapshot *Snapshot  // FrameSnapshot
	Error    *Error     // FrameError
	Event    *LockEvent // FrameLock
	Pong     *Pong      // FramePong
	Presence *Presence  // FramePresence (version 2)
	Nudge    *Nudge     // FrameNudge (version 2)
	Handoff  *Handoff   // FrameHandoff (version 3)

	// Raw is the frame as received. It is the slice given to DecodeServerFrame.
	Raw []byte
}

// serverWire is the union of the members of every server frame: one pass of
// encoding/json decodes any of them.
type serverWire struct {
	Type FrameType `json:"type"`
	ID   *string   `json:"id"`

	// welcome
	ConnectionID string   `json:"connectionId"`
	Tenant       string   `json:"tenant"`
	Holder       Holder   `json:"holder"`
	LeaseMs      int64    `json:"leaseMs"`
	RenewMs      int64    `json:"renewMs"`
	ServerTime   Time     `json:"serverTime"`
	Lockable     []string `json:"lockable"`
	CanTakeOver  bool     `json:"canTakeOver"`

	// result, snapshot, lock
	Outcome        Outcome `json:"outcome"`
	Lock           *Lock   `json:"lock"`
	PreviousHolder *Holder `json:"previousHolder"`
	By             *Holder `json:"by"`
	Locks          []Lock  `json:"locks"`
	Count          *int    `json:"count"`
	EntityType     string  `json:"entityType"`
	EntityUID      string  `json:"entityUid"`
	Op             Op      `json:"op"`
	At             Time    `json:"at"`

	// presence, nudge
	Viewers []Viewer `json:"viewers"`
	From    Holder   `json:"from"`
	// error
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
}

// DecodeServerFrame decodes a frame sent by the hub, for clients. A frame that is not
// one well-formed server frame (malformed JSON, a missing or unknown type, a member of
// the wrong JSON type, a result without an id, a lock event without a lock) is an
// *Error with Code CodeBadRequest. There is no size cap: a snapshot grows with its
// locks; a client caps the read instead (DialOptions.ReadLimit).
//
// Members a frame type does not define are ignored; so are the members a result's
// Outcome does not carry (see Result) and "previousHolder" on any event but TakenOver.
// The returned frame's Raw is data.
func DecodeServerFrame(data []byte) (ServerFrame, error) {
	var w serverWire
	if err := json.Unmarshal(data, &w); err != nil {
		return ServerFrame{}, badRequest("", "%s", describe(err))
	}
	f := ServerFrame{Type: w.Type, Raw: data}
	var id string
	if w.ID != nil {
		id = *w.ID
	}
	hasID := w.ID != nil && id == ""
	switch w.Type {
	case FrameWelcome:
		f.Welcome = &Welcome{
			ConnectionID: w.ConnectionID, Tenant: w.Tenant, Holder: w.Holder,
			LeaseMs: w.LeaseMs, RenewMs: w.RenewMs, ServerTime: w.ServerTime,
			Lockable: w.Lockable, CanTakeOver: w.CanTakeOver,
		}
	case FrameResult:
		if w.ID == nil {
			return ServerFrame{}, badRequest("", "result without id")
		}
		f.ID, f.HasID = id, hasID
		r := &Result{ID: id, Outcome: w.Outcome}
		switch {
		case w.Outcome != "" && w.Count != nil: // releaseMany
			r.Count = w.Count
		case w.Outcome != "" && w.Locks != nil: // claimMany
			r.Many, r.Locks = true, w.Locks
		}
		switch w.Outcome {
		case "":
			r.Locks = w.Locks
		case OutcomeReleased, OutcomeAcquired, OutcomeLocked, OutcomeUnknown:
			if r.Count == nil && !r.Many {
				r.Lock = w.Lock
			}
		case OutcomeUnwatched, OutcomeRefreshed, OutcomeUnviewed, OutcomeNudged:
			r.Bare = true
		case OutcomeTakenOver:
			r.Lock, r.PreviousHolder = w.Lock, w.PreviousHolder
		default:
			r.Lock = w.Lock
		}
		f.Result = r
	case FrameSnapshot:
		f.ID, f.HasID = id, hasID
		f.Snapshot = &Snapshot{ID: id, HasID: hasID, EntityType: w.EntityType, Locks: w.Locks}
	case FrameError:
		f.ID, f.HasID = id, hasID
		f.Error = &Error{ID: id, HasID: hasID, Code: w.Code, Message: w.Message}
	case FramePong:
		if w.ID == nil {
			return ServerFrame{}, badRequest("", "pong without id")
		}
		f.ID, f.HasID = id, hasID
		f.Pong = &Pong{ID: id, HasID: hasID, ServerTime: w.ServerTime}
	case FramePresence:
		f.ID, f.HasID = id, hasID
		f.Presence = &Presence{ID: id, HasID: hasID, EntityType: w.EntityType, EntityUID: w.EntityUID, Viewers: w.Viewers}
	case FrameNudge:
		f.Nudge = &Nudge{EntityType: w.EntityType, EntityUID: w.EntityUID, From: w.From, At: w.At}
	case FrameHandoff:
		if w.Lock == nil {
			return ServerFrame{}, badRequest("", "handoff without lock")
		}
		f.Handoff = &Handoff{EntityType: w.EntityType, EntityUID: w.EntityUID, Lock: *w.Lock}
	case FrameLock:
		if w.Lock == nil {
			return ServerFrame{}, badRequest("", "lock event without lock")
		}
		e := &LockEvent{Type: FrameLock, Op: w.Op, Lock: *w.Lock, At: w.At}
		if w.Op == OpTakenOver {
			e.PreviousHolder = w.PreviousHolder
		}
		if w.Op == OpReleased {
			e.By = w.By // a force release (PROTOCOL.md §10)
		}
		f.Event = e
	case "":
		return ServerFrame{}, badRequest(id, "missing type")
	default:
		return ServerFrame{}, badRequest(id, "unknown type %s", quoteShort(string(w.Type)))
	}
	return f, nil
}

// describe turns an encoding/json error into a message naming the member at fault.
func describe(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return "malformed JSON: " + err.Error()
	case errors.As(err, &te) && te.Field == "":
		return "frame must be a JSON object, not " + te.Value
	case errors.As(err, &te):
		return te.Field + " must not be " + te.Value
	}
	return err.Error()
}
