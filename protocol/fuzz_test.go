package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// Run one with: go test -run=^$ -fuzz=FuzzDecodeRequest ./protocol/

func FuzzDecodeRequest(f *testing.F) {
	// Every request type, as the contract shows it.
	f.Add([]byte(`{"type":"auth","token":"eyJhbGciOiJSUzI1NiJ9.e30.sig"}`))
	f.Add([]byte(`{"id":"12","type":"auth","token":"eyJ.fresh"}`))
	f.Add([]byte(`{"id":"7","type":"claim","entityType":"ApprovalRequest","entityUid":"r-1001"}`))
	f.Add([]byte(`{"id":"8","type":"takeover","entityType":"ApprovalRequest","entityUid":"r-1001"}`))
	f.Add([]byte(`{"id":"9","type":"watch","entityType":"ApprovalRequest"}`))
	f.Add([]byte(`{"id":"20","type":"view","entityType":"ApprovalRequest","entityUid":"r-1001"}`))
	f.Add([]byte(`{"id":"22","type":"nudge","entityType":"ApprovalRequest"}`)) // missing entityUid
	f.Add([]byte(`{"id":"11","type":"mine"}`))
	// Version 3: a view with an intent, a bad intent, the bulk requests, a bulk list
	// with a duplicate and one holding a number.
	f.Add([]byte(`{"id":"20","type":"view","entityType":"ApprovalRequest","entityUid":"r-1001","intent":"edit"}`))
	f.Add([]byte(`{"id":"20","type":"view","entityType":"A","entityUid":"u","intent":"wait"}`))
	f.Add([]byte(`{"id":"40","type":"claimMany","entityType":"ApprovalRequest","entityUids":["r-1001","r-1002"]}`))
	f.Add([]byte(`{"id":"41","type":"releaseMany","entityType":"A","entityUids":["u","u"]}`))
	f.Add([]byte(`{"id":"41","type":"claimMany","entityType":"A","entityUids":["u",[1],{"a":"b"}]}`))
	// The lock console's frames (§10): one without members, one naming an entity.
	f.Add([]byte(`{"id":"30","type":"adminLocks"}`))
	f.Add([]byte(`{"id":"31","type":"forceRelease","entityType":"ApprovalRequest","entityUid":"r-1001"}`))
	// Mistyped and missing members: each error path, with and without a readable id.
	f.Add([]byte(`{"id":7,"type":"mine"}`))
	f.Add([]byte(`{"id":"6","type":"release","entityType":"A","entityUid":1001}`))
	f.Add([]byte(`{"type":"claim","entityType":"A","entityUid":"u"}`))
	f.Add([]byte(`{"id":"1","id":"2","type":"mine"}`))
	// Duplicate names that no request uses, at the top and nested: refused too.
	f.Add([]byte(`{"x":1,"id":"1","x":{"a":[],"a":{}},"type":"mine"}`))
	// The id at its boundary: 64 characters of 2 bytes, then 65 characters.
	f.Add([]byte(`{"id":"` + strings.Repeat("é", 64) + `","type":"mine"}`))
	f.Add([]byte(`{"id":"` + strings.Repeat("1", 65) + `","type":"mine"}`))
	// Escapes in names and values, surrogate pairs, and invalid UTF-8 (replaced by U+FFFD).
	f.Add([]byte(`{"\u0069d":"\ud83d\udd12","type":"cl\u0061im","entityType":"\"","entityUid":"\\"}`))
	f.Add([]byte("{\"id\":\"\xff\xfe\",\"type\":\"watch\",\"entityType\":\"\xc3\"}"))
	// Nested junk in unknown members, with braces and quotes inside strings, to be skipped.
	f.Add([]byte(`{"x":[{"id":"}"},["]",{}],"\"{"],"id":"1","y":{"type":"claim"},"type":"mine","z":-0.5e-3}`))
	// Not objects, trailing data, truncation.
	f.Add([]byte(`null`))
	f.Add([]byte(`[{"id":"1","type":"mine"}]`))
	f.Add([]byte(`{"id":"1","type":"mine"}{}`))
	f.Add([]byte(`{"id":"1","type":"mi`))
	f.Add([]byte(``))
	// Just over the size cap: refused before parsing.
	f.Add([]byte(`{"id":"1","type":"mine","pad":"` + strings.Repeat("p", MaxFrameSize) + `"}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeRequest(data)
		if err != nil {
			checkDecodeError(t, data, err)
			return
		}
		// encoding/json agrees that this is one object, and on the members the request uses.
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil {
			t.Fatalf("DecodeRequest accepted what encoding/json refuses (%v): %q", err, data)
		}
		for name, got := range map[string]string{"id": req.ID, "type": string(req.Type), "token": req.Token,
			"entityType": req.EntityType, "entityUid": req.EntityUID} {
			if got == "" {
				continue
			}
			var want string
			if err := json.Unmarshal(obj[name], &want); err != nil || got != want {
				t.Fatalf("%s = %q, encoding/json reads %q (%v) in %q", name, got, want, err, data)
			}
		}
		if req.ID == "" && !req.HasID && req.Type != FrameAuth {
			t.Fatalf("%s accepted without an id: %q", req.Type, data)
		}
		if n := utf8.RuneCountInString(req.ID); n > MaxIDLength {
			t.Fatalf("id of %d characters accepted", n)
		}
		// A decoded request re-encodes to a frame that decodes to the same request.
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", req, err)
		}
		back, err := DecodeRequest(b)
		if err != nil || !reflect.DeepEqual(back, req) {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", data, back, err, req)
		}
	})
}

// checkDecodeError checks that err is what DecodeRequest promises: ErrFrameTooLarge for
// an oversized frame, else a bad_request *Error whose id, if any, is a valid id.
func checkDecodeError(t *testing.T, data []byte, err error) {
	t.Helper()
	if errors.Is(err, ErrFrameTooLarge) {
		if len(data) <= MaxFrameSize {
			t.Fatalf("ErrFrameTooLarge for %d bytes", len(data))
		}
		return
	}
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %T %v, want *Error", err, err)
	}
	if fe.Code != CodeBadRequest || fe.Message == "" {
		t.Fatalf("error %+v, want bad_request with a message", fe)
	}
	if n := utf8.RuneCountInString(fe.ID); n > MaxIDLength {
		t.Fatalf("error echoes an id of %d characters", n)
	}
	if fe.ID != "" && !bytes.Contains(data, []byte(`"id"`)) && !bytes.Contains(data, []byte(`\u`)) {
		t.Fatalf("error echoes id %q absent from %q", fe.ID, data)
	}
	if _, err := json.Marshal(fe); err != nil {
		t.Fatalf("the error frame does not marshal: %v", err)
	}
}

func FuzzDecodeServerFrame(f *testing.F) {
	// Every server frame, as the contract shows it.
	f.Add([]byte(`{"type":"welcome","connectionId":"c-1","tenant":"acme","holder":{"oid":"u-ada","name":"Ada"},"leaseMs":300000,"renewMs":120000,"serverTime":"2026-12-02T09:15:00.123Z","lockable":["ApprovalRequest"],"canTakeOver":false}`))
	f.Add([]byte(`{"id":"7","type":"result","outcome":"acquired","lock":` + lockJSON + `}`))
	f.Add([]byte(`{"id":"8","type":"result","outcome":"takenOver","lock":` + lockJSON + `,"previousHolder":{"oid":"u-bob","name":"Bob"}}`))
	f.Add([]byte(`{"id":"10","type":"result","outcome":"unwatched"}`))
	f.Add([]byte(`{"id":"11","type":"result","locks":[` + lockJSON + `]}`))
	f.Add([]byte(`{"id":"9","type":"snapshot","entityType":"ApprovalRequest","locks":[]}`))
	f.Add([]byte(`{"type":"error","code":"bad_request","message":"missing id"}`))
	f.Add([]byte(`{"type":"lock","op":"TakenOver","lock":` + lockJSON + `,"previousHolder":{"oid":"u-bob","name":"Bob"},"at":"2026-12-02T09:15:00.123Z"}`))
	f.Add([]byte(`{"id":"13","type":"pong","serverTime":"2026-12-02T09:15:00.123Z"}`))
	// Presence and nudges (version 2): an answer, a change, a nudge, a bare result.
	f.Add([]byte(`{"id":"20","type":"presence","entityType":"ApprovalRequest","entityUid":"r-1001","viewers":[{"oid":"u-ada","name":"Ada","since":"2026-12-02T09:15:00.123Z"}]}`))
	f.Add([]byte(`{"type":"presence","entityType":"ApprovalRequest","entityUid":"r-1001","viewers":null}`))
	f.Add([]byte(`{"type":"nudge","entityType":"ApprovalRequest","entityUid":"r-1001","from":{"oid":"u-grace","name":"Grace"},"at":"2026-12-02T09:15:00.123Z","to":"u-ada"}`))
	f.Add([]byte(`{"id":"22","type":"result","outcome":"nudged","lock":null}`))
	// Version 3: a presence with states, a handoff, claimMany's and releaseMany's answers.
	f.Add([]byte(`{"type":"presence","entityType":"A","entityUid":"u","viewers":[{"oid":"u-ada","name":"Ada","since":"2026-12-02T09:15:00.123Z","state":"editing"},{"oid":"u-grace","name":"Grace","since":"2026-12-02T09:16:00.123Z","state":"waiting","position":1}]}`))
	f.Add([]byte(`{"type":"handoff","entityType":"ApprovalRequest","entityUid":"r-1001","lock":` + lockJSON + `}`))
	f.Add([]byte(`{"id":"40","type":"result","outcome":"locked","locks":[` + lockJSON + `]}`))
	f.Add([]byte(`{"id":"41","type":"result","outcome":"released","count":12}`))
	// Members a frame's shape does not carry: dropped on decode, so re-encoding is stable.
	f.Add([]byte(`{"id":"1","type":"result","lock":` + lockJSON + `,"locks":null,"previousHolder":{}}`))
	f.Add([]byte(`{"type":"lock","op":"Acquired","lock":{},"previousHolder":{"oid":"x"}}`))
	// Times as the .NET service writes them, and times at the edge of the year range.
	f.Add([]byte(`{"type":"lock","op":"Expired","lock":{"acquiredAtUtc":"2026-12-02T10:15:00.1234567+01:00","expiresAtUtc":"0000-01-01T00:00:00Z"},"at":"9999-12-31T23:59:59.9999999Z"}`))
	// Member names in another case (encoding/json matches them) and duplicates.
	f.Add([]byte(`{"TYPE":"snapshot","Id":"2","type":"snapshot","LOCKS":[]}`))
	// Unicode and escapes in strings.
	f.Add([]byte(`{"type":"error","code":"\u0062ad","message":"\ud83d\udd12 <&> \u2028"}`))
	// Not frames.
	f.Add([]byte(`null`))
	f.Add([]byte(`{"type":"welcome","leaseMs":1e400}`))
	f.Add([]byte(`[`))

	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := DecodeServerFrame(data)
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) || fe.Code != CodeBadRequest {
				t.Fatalf("error %T %v, want a bad_request *Error", err, err)
			}
			return
		}
		// Encoding is the inverse of decoding, up to the contract's canonical form.
		b1, err := encodeServerFrame(fr)
		if err != nil {
			t.Fatalf("encode %+v: %v", fr, err)
		}
		fr2, err := DecodeServerFrame(b1)
		if err != nil {
			t.Fatalf("decode of re-encoded %q: %v (from %q)", b1, err, data)
		}
		if fr2.Type != fr.Type || fr2.ID != fr.ID {
			t.Fatalf("type, id %q, %q became %q, %q", fr.Type, fr.ID, fr2.Type, fr2.ID)
		}
		b2, err := encodeServerFrame(fr2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("re-encoding is not stable (%v):\n%s\n%s", err, b1, b2)
		}
	})
}

func FuzzTimeUnmarshal(f *testing.F) {
	f.Add([]byte(`"2026-12-02T09:15:00.123Z"`))       // our own form
	f.Add([]byte(`"2026-12-02T09:15:00Z"`))           // .NET, trailing zeros trimmed to none
	f.Add([]byte(`"2026-12-02T09:15:00.1234567Z"`))   // .NET ticks
	f.Add([]byte(`"2026-12-02T10:15:00.5+01:00"`))    // an offset
	f.Add([]byte(`"0000-01-01T00:30:00+01:00"`))      // out of range in UTC
	f.Add([]byte(`"9999-12-31T23:59:59.999999999Z"`)) // the last instant
	f.Add([]byte(`"0001-01-01T00:00:00Z"`))           // the zero time.Time: marshals as null
	f.Add([]byte(`"2026-12-02T09:15:00\u002e1Z"`))    // an escaped character
	f.Add([]byte(`null`))                             // JSON null
	f.Add([]byte(`"2026-02-30T09:15:00Z"`))           // no such day
	f.Add([]byte(`1796202900123`))                    // not a string

	f.Fuzz(func(t *testing.T, data []byte) {
		var t1 Time
		if err := t1.UnmarshalJSON(data); err != nil {
			return
		}
		b, err := t1.MarshalJSON()
		if err != nil {
			t.Fatalf("Marshal of %q: %v", data, err)
		}
		if !t1.IsZero() && (len(b) != len(TimeLayout)+2 || b[len(b)-2] != 'Z') {
			t.Fatalf("Marshal of %q = %s, not the wire layout", data, b)
		}
		var t2 Time
		if err := t2.UnmarshalJSON(b); err != nil {
			t.Fatalf("Unmarshal of %s (from %q): %v", b, data, err)
		}
		if want := t1.Truncate(1e6); !t2.Equal(want) {
			t.Fatalf("%q: round trip gives %v, want %v", data, t2, want)
		}
	})
}
