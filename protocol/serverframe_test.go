package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestServerFrameJSON pins every server frame to the bytes of PROTOCOL.md §3 and §4.
func TestServerFrameJSON(t *testing.T) {
	l := lockAt("r-1001")
	ada := &Holder{OID: "u-ada", Name: "Ada Lovelace"}
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"welcome", Welcome{
			ConnectionID: "c-1", Tenant: "acme", Holder: Holder{OID: "u-bob", Name: "Bob"},
			LeaseMs: 300000, RenewMs: 120000, ServerTime: l.AcquiredAt,
			Lockable: []string{"ApprovalRequest"}, CanTakeOver: false,
		}, `{"type":"welcome","connectionId":"c-1","tenant":"acme","holder":{"oid":"u-bob","name":"Bob"},` +
			`"leaseMs":300000,"renewMs":120000,"serverTime":"2026-12-02T09:15:00.123Z","lockable":["ApprovalRequest"],"canTakeOver":false}`},
		{"welcome with nothing lockable", Welcome{ConnectionID: "c-2", Tenant: "acme", ServerTime: l.AcquiredAt, CanTakeOver: true},
			`{"type":"welcome","connectionId":"c-2","tenant":"acme","holder":{"oid":"","name":""},` +
				`"leaseMs":0,"renewMs":0,"serverTime":"2026-12-02T09:15:00.123Z","lockable":[],"canTakeOver":true}`},

		{"result acquired", Result{ID: "7", Outcome: OutcomeAcquired, Lock: &l},
			`{"id":"7","type":"result","outcome":"acquired","lock":` + lockJSON + `}`},
		{"result lost, no lock", Result{ID: "8", Outcome: OutcomeLost},
			`{"id":"8","type":"result","outcome":"lost","lock":null}`},
		{"result unknown", Result{ID: "8", Outcome: OutcomeUnknown},
			`{"id":"8","type":"result","outcome":"unknown","lock":null}`},
		{"result takenOver", Result{ID: "8", Outcome: OutcomeTakenOver, Lock: &l, PreviousHolder: &Holder{OID: "u-bob", Name: "Bob"}},
			`{"id":"8","type":"result","outcome":"takenOver","lock":` + lockJSON + `,"previousHolder":{"oid":"u-bob","name":"Bob"}}`},
		{"result previousHolder only on takenOver", Result{ID: "8", Outcome: OutcomeForbidden, Lock: &l, PreviousHolder: ada},
			`{"id":"8","type":"result","outcome":"forbidden","lock":` + lockJSON + `}`},
		{"result unwatched", Result{ID: "10", Outcome: OutcomeUnwatched, Lock: &l, Locks: []Lock{l}},
			`{"id":"10","type":"result","outcome":"unwatched"}`},
		{"result refreshed", Result{ID: "12", Outcome: OutcomeRefreshed},
			`{"id":"12","type":"result","outcome":"refreshed"}`},
		{"result unviewed", Result{ID: "21", Outcome: OutcomeUnviewed},
			`{"id":"21","type":"result","outcome":"unviewed"}`},
		{"result nudged", Result{ID: "22", Outcome: OutcomeNudged},
			`{"id":"22","type":"result","outcome":"nudged"}`},
		{"result of a nudge, notHeld: bare", Result{ID: "22", Outcome: OutcomeNotHeld, Bare: true},
			`{"id":"22","type":"result","outcome":"notHeld"}`},

		{"presence", Presence{ID: "20", EntityType: "ApprovalRequest", EntityUID: "r-1001", Viewers: []Viewer{
			{OID: "u-ada", Name: "Ada Lovelace", Since: l.AcquiredAt}, {OID: "u-grace", Name: "Grace Hopper", Since: l.ExpiresAt}}},
			`{"id":"20","type":"presence","entityType":"ApprovalRequest","entityUid":"r-1001","viewers":[` +
				`{"oid":"u-ada","name":"Ada Lovelace","since":"2026-12-02T09:15:00.123Z"},{"oid":"u-grace","name":"Grace Hopper","since":"2026-12-02T09:20:00.123Z"}]}`},
		{"presence unsolicited, nobody", Presence{EntityType: "ApprovalRequest", EntityUID: "r-1001"},
			`{"type":"presence","entityType":"ApprovalRequest","entityUid":"r-1001","viewers":[]}`},
		{"nudge", Nudge{EntityType: "ApprovalRequest", EntityUID: "r-1001", From: Holder{OID: "u-grace", Name: "Grace Hopper"}, At: l.AcquiredAt},
			`{"type":"nudge","entityType":"ApprovalRequest","entityUid":"r-1001","from":{"oid":"u-grace","name":"Grace Hopper"},"at":"2026-12-02T09:15:00.123Z"}`},

		{"result mine", Result{ID: "11", Locks: []Lock{l}},
			`{"id":"11","type":"result","locks":[` + lockJSON + `]}`},
		{"result mine, none", Result{ID: "11"},
			`{"id":"11","type":"result","locks":[]}`},

		{"snapshot", Snapshot{ID: "9", EntityType: "ApprovalRequest", Locks: []Lock{l, l}},
			`{"id":"9","type":"snapshot","entityType":"ApprovalRequest","locks":[` + lockJSON + `,` + lockJSON + `]}`},
		{"snapshot unsolicited, empty", Snapshot{EntityType: "ApprovalRequest"},
			`{"type":"snapshot","entityType":"ApprovalRequest","locks":[]}`},

		{"error", Error{ID: "7", Code: CodeNotLockable, Message: "Invoice is not lockable; lockable: ApprovalRequest"},
			`{"id":"7","type":"error","code":"not_lockable","message":"Invoice is not lockable; lockable: ApprovalRequest"}`},
		{"error without id", &Error{Code: CodeBadRequest, Message: "malformed JSON"},
			`{"type":"error","code":"bad_request","message":"malformed JSON"}`},

		{"lock acquired", LockEvent{Op: OpAcquired, Lock: l, PreviousHolder: ada, At: l.AcquiredAt},
			`{"type":"lock","op":"Acquired","lock":` + lockJSON + `,"at":"2026-12-02T09:15:00.123Z"}`},
		{"lock takenOver", LockEvent{Type: FrameLock, Op: OpTakenOver, Lock: l, PreviousHolder: &Holder{OID: "u-bob", Name: "Bob"}, At: l.AcquiredAt},
			`{"type":"lock","op":"TakenOver","lock":` + lockJSON + `,"previousHolder":{"oid":"u-bob","name":"Bob"},"at":"2026-12-02T09:15:00.123Z"}`},
		// PROTOCOL.md §10: a force release names who released the lock, after the lock.
		{"lock force released", LockEvent{Op: OpReleased, Lock: l, By: &Holder{OID: "u-root", Name: "Rita"}, At: l.AcquiredAt},
			`{"type":"lock","op":"Released","lock":` + lockJSON + `,"by":{"oid":"u-root","name":"Rita"},"at":"2026-12-02T09:15:00.123Z"}`},
		{"lock by only on Released", LockEvent{Op: OpAcquired, Lock: l, By: &Holder{OID: "u-root", Name: "Rita"}, At: l.AcquiredAt},
			`{"type":"lock","op":"Acquired","lock":` + lockJSON + `,"at":"2026-12-02T09:15:00.123Z"}`},
		{"lock expired", LockEvent{Op: OpExpired, Lock: l, At: l.ExpiresAt},
			`{"type":"lock","op":"Expired","lock":` + lockJSON + `,"at":"2026-12-02T09:20:00.123Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertJSON(t, tt.in, tt.want)
		})
	}
}

func TestLockJSON(t *testing.T) {
	assertJSON(t, lockAt("r-1001"), lockJSON) // §1: field names, order and time format
}

func TestDecodeServerFrame(t *testing.T) {
	l := lockAt("r-1001")
	tests := []struct {
		name string
		in   string
		want ServerFrame
	}{
		{"welcome", `{"type":"welcome","connectionId":"c-1","tenant":"acme","holder":{"oid":"u-ada","name":"Ada"},` +
			`"leaseMs":300000,"renewMs":120000,"serverTime":"2026-12-02T09:15:00.123Z","lockable":["ApprovalRequest"],"canTakeOver":true}`,
			ServerFrame{Type: FrameWelcome, Welcome: &Welcome{ConnectionID: "c-1", Tenant: "acme", Holder: Holder{OID: "u-ada", Name: "Ada"},
				LeaseMs: 300000, RenewMs: 120000, ServerTime: l.AcquiredAt, Lockable: []string{"ApprovalRequest"}, CanTakeOver: true}}},
		{"result", `{"id":"7","type":"result","outcome":"locked","lock":` + lockJSON + `}`,
			ServerFrame{Type: FrameResult, ID: "7", Result: &Result{ID: "7", Outcome: OutcomeLocked, Lock: &l}}},
		{"result null lock", `{"id":"7","type":"result","outcome":"lost","lock":null}`,
			ServerFrame{Type: FrameResult, ID: "7", Result: &Result{ID: "7", Outcome: OutcomeLost}}},
		{"result takenOver", `{"id":"8","type":"result","outcome":"takenOver","lock":` + lockJSON + `,"previousHolder":{"oid":"u-bob","name":"Bob"}}`,
			ServerFrame{Type: FrameResult, ID: "8", Result: &Result{ID: "8", Outcome: OutcomeTakenOver, Lock: &l, PreviousHolder: &Holder{OID: "u-bob", Name: "Bob"}}}},
		{"result mine", `{"id":"11","type":"result","locks":[` + lockJSON + `]}`,
			ServerFrame{Type: FrameResult, ID: "11", Result: &Result{ID: "11", Locks: []Lock{l}}}},
		{"snapshot", `{"id":"9","type":"snapshot","entityType":"ApprovalRequest","locks":[]}`,
			ServerFrame{Type: FrameSnapshot, ID: "9", Snapshot: &Snapshot{ID: "9", EntityType: "ApprovalRequest", Locks: []Lock{}}}},
		{"error", `{"type":"error","code":"bad_request","message":"missing id"}`,
			ServerFrame{Type: FrameError, Error: &Error{Code: CodeBadRequest, Message: "missing id"}}},
		{"lock", `{"type":"lock","op":"TakenOver","lock":` + lockJSON + `,"previousHolder":{"oid":"u-bob","name":"Bob"},"at":"2026-12-02T09:15:00.1Z"}`,
			ServerFrame{Type: FrameLock, Event: &LockEvent{Type: FrameLock, Op: OpTakenOver, Lock: l, PreviousHolder: &Holder{OID: "u-bob", Name: "Bob"},
				At: NewTime(time.Date(2026, 12, 2, 9, 15, 0, 100_000_000, time.UTC))}}},
		{"lock force released", `{"type":"lock","op":"Released","lock":` + lockJSON + `,"by":{"oid":"u-root","name":"Rita"},"at":"2026-12-02T09:15:00.123Z"}`,
			ServerFrame{Type: FrameLock, Event: &LockEvent{Type: FrameLock, Op: OpReleased, Lock: l, By: &Holder{OID: "u-root", Name: "Rita"}, At: l.AcquiredAt}}},
		{"lock by ignored but on Released", `{"type":"lock","op":"Expired","lock":` + lockJSON + `,"by":{"oid":"u-root","name":"Rita"},"at":"2026-12-02T09:15:00.123Z"}`,
			ServerFrame{Type: FrameLock, Event: &LockEvent{Type: FrameLock, Op: OpExpired, Lock: l, At: l.AcquiredAt}}},
		{"lock times as .NET writes them", `{"type":"lock","op":"Acquired","lock":{"entityType":"ApprovalRequest","entityUid":"r-1001",` +
			`"holderOid":"u-ada","holderName":"Ada Lovelace","acquiredAtUtc":"2026-12-02T10:15:00.123+01:00","expiresAtUtc":"2026-12-02T09:20:00.1230000Z"},"at":"2026-12-02T09:15:00.123Z"}`,
			ServerFrame{Type: FrameLock, Event: &LockEvent{Type: FrameLock, Op: OpAcquired, Lock: l, At: l.AcquiredAt}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeServerFrame([]byte(tt.in))
			if err != nil {
				t.Fatalf("DecodeServerFrame: %v", err)
			}
			if string(got.Raw) != tt.in {
				t.Errorf("Raw = %s", got.Raw)
			}
			got.Raw = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeServerFrame =\n %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestDecodeServerFrameBad(t *testing.T) {
	tests := []struct{ name, in, errMsg string }{
		{"empty", ``, "malformed JSON: unexpected end of JSON input"},
		{"array", `[]`, "frame must be a JSON object, not array"},
		{"null", `null`, "missing type"},
		{"unknown type", `{"type":"claim","id":"1"}`, `unknown type "claim"`},
		{"result without id", `{"type":"result","outcome":"acquired"}`, "result without id"},
		{"lock without lock", `{"type":"lock","op":"Acquired"}`, "lock event without lock"},
		{"mistyped member", `{"type":"welcome","leaseMs":"300000"}`, "leaseMs must not be string"},
		{"mistyped nested member", `{"type":"snapshot","locks":[{"entityUid":1}]}`, "locks.entityUid must not be number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeServerFrame([]byte(tt.in))
			var fe *Error
			if !errors.As(err, &fe) || fe.Code != CodeBadRequest || fe.Message != tt.errMsg {
				t.Errorf("DecodeServerFrame error = %#v, want bad_request %q", err, tt.errMsg)
			}
		})
	}
	// A bad time names no member, but is still a bad frame.
	_, err := DecodeServerFrame([]byte(`{"type":"lock","op":"Acquired","lock":{},"at":"yesterday"}`))
	var fe *Error
	if !errors.As(err, &fe) {
		t.Errorf("DecodeServerFrame with a bad time: %v, want *Error", err)
	}
}

// encodeServerFrame marshals the frame f holds: DecodeServerFrame's inverse.
func encodeServerFrame(f ServerFrame) ([]byte, error) {
	var v any
	switch {
	case f.Welcome != nil:
		v = f.Welcome
	case f.Result != nil:
		v = f.Result
	case f.Snapshot != nil:
		v = f.Snapshot
	case f.Error != nil:
		v = f.Error
	case f.Event != nil:
		v = f.Event
	case f.Pong != nil:
		v = f.Pong
	case f.Presence != nil:
		v = f.Presence
	case f.Nudge != nil:
		v = f.Nudge
	case f.Handoff != nil:
		v = f.Handoff
	default:
		return nil, errors.New("empty ServerFrame")
	}
	return json.Marshal(v)
}

// TestPingPong: a ping is a request with an id and nothing else; its pong echoes the
// id, an empty one included, and decodes back.
func TestPingPong(t *testing.T) {
	req, err := DecodeRequest([]byte(`{"id":"13","type":"ping"}`))
	if err != nil || req.Type != FramePing || req.ID != "13" {
		t.Fatalf("DecodeRequest(ping) = %+v, %v", req, err)
	}
	if _, err := DecodeRequest([]byte(`{"type":"ping"}`)); err == nil {
		t.Fatal("a ping without an id was accepted")
	}
	at := NewTime(time.Date(2026, 12, 2, 9, 15, 0, 123e6, time.UTC))
	for _, p := range []Pong{{ID: "13", ServerTime: at}, {HasID: true, ServerTime: at}} {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"id":"` + p.ID + `","type":"pong","serverTime":"2026-12-02T09:15:00.123Z"}`
		if string(b) != want {
			t.Fatalf("pong = %s, want %s", b, want)
		}
		f, err := DecodeServerFrame(b)
		if err != nil || f.Pong == nil || f.Pong.ID != p.ID || f.HasID != p.HasID || !f.Pong.ServerTime.Equal(at.Time) {
			t.Fatalf("DecodeServerFrame(%s) = %+v, %v", b, f, err)
		}
	}
	if _, err := DecodeServerFrame([]byte(`{"type":"pong","serverTime":"2026-12-02T09:15:00.123Z"}`)); err == nil {
		t.Fatal("a pong without an id was accepted")
	}
}
