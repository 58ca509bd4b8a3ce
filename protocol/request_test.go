package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeRequest(t *testing.T) {
	id64 := strings.Repeat("é", MaxIDLength) // 64 characters, 128 bytes
	tests := []struct {
		name string
		in   string
		want Request
	}{
		{"auth", `{"type":"auth","token":"t0k"}`, Request{Type: FrameAuth, Token: "t0k"}},
		{"refresh", `{"id":"12","type":"auth","token":"fresh"}`, Request{ID: "12", Type: FrameAuth, Token: "fresh"}},
		{"claim", `{"id":"7","type":"claim","entityType":"ApprovalRequest","entityUid":"r-1001"}`,
			Request{ID: "7", Type: FrameClaim, EntityType: "ApprovalRequest", EntityUID: "r-1001"}},
		{"renew", `{"id":"8","type":"renew","entityType":"A","entityUid":"u"}`, Request{ID: "8", Type: FrameRenew, EntityType: "A", EntityUID: "u"}},
		{"release", `{"id":"8","type":"release","entityType":"A","entityUid":"u"}`, Request{ID: "8", Type: FrameRelease, EntityType: "A", EntityUID: "u"}},
		{"takeover", `{"id":"8","type":"takeover","entityType":"A","entityUid":"u"}`, Request{ID: "8", Type: FrameTakeover, EntityType: "A", EntityUID: "u"}},
		{"watch", `{"id":"9","type":"watch","entityType":"ApprovalRequest"}`, Request{ID: "9", Type: FrameWatch, EntityType: "ApprovalRequest"}},
		{"unwatch", `{"id":"10","type":"unwatch","entityType":"ApprovalRequest"}`, Request{ID: "10", Type: FrameUnwatch, EntityType: "ApprovalRequest"}},
		{"mine", `{"id":"11","type":"mine"}`, Request{ID: "11", Type: FrameMine}},
		{"view", `{"id":"20","type":"view","entityType":"A","entityUid":"u"}`, Request{ID: "20", Type: FrameView, EntityType: "A", EntityUID: "u"}},
		{"unview", `{"id":"21","type":"unview","entityType":"A","entityUid":"u"}`, Request{ID: "21", Type: FrameUnview, EntityType: "A", EntityUID: "u"}},
		{"nudge", `{"id":"22","type":"nudge","entityType":"A","entityUid":"u"}`, Request{ID: "22", Type: FrameNudge, EntityType: "A", EntityUID: "u"}},
		{"adminLocks", `{"id":"30","type":"adminLocks"}`, Request{ID: "30", Type: FrameAdminLocks}},
		{"forceRelease", `{"id":"31","type":"forceRelease","entityType":"A","entityUid":"u"}`, Request{ID: "31", Type: FrameForceRelease, EntityType: "A", EntityUID: "u"}},
		{"members in any order, whitespace", " \n{ \"entityUid\" : \"u\",\t\"type\":\"claim\" ,\"entityType\":\"A\",\"id\":\"1\"}\r\n",
			Request{ID: "1", Type: FrameClaim, EntityType: "A", EntityUID: "u"}},
		// PROTOCOL.md §4: an id is a string of at most 64 characters, so "" is one.
		{"id empty", `{"id":"","type":"mine"}`, Request{HasID: true, Type: FrameMine}},
		{"refresh with an empty id", `{"id":"","type":"auth","token":"t"}`, Request{HasID: true, Type: FrameAuth, Token: "t"}},
		{"unknown members ignored", `{"id":"1","type":"mine","x":[{"id":2},"}"],"y":null,"z":-1.5e3,"w":true}`, Request{ID: "1", Type: FrameMine}},
		{"members the type does not use ignored", `{"id":"1","type":"watch","entityType":"A","entityUid":"u","token":"t"}`,
			Request{ID: "1", Type: FrameWatch, EntityType: "A"}},
		{"escapes decoded", `{"id":"\u0037","type":"cl\u0061im","entityType":"A\/B","entityUid":"\"q\""}`,
			Request{ID: "7", Type: FrameClaim, EntityType: "A/B", EntityUID: `"q"`}},
		{"escaped member name", `{"\u0069d":"7","type":"mine"}`, Request{ID: "7", Type: FrameMine}},
		{"id of 64 characters", `{"id":"` + id64 + `","type":"mine"}`, Request{ID: id64, Type: FrameMine}},
		{"entity syntax is not checked", `{"id":"1","type":"claim","entityType":"","entityUid":"{x} y"}`,
			Request{ID: "1", Type: FrameClaim, EntityType: "", EntityUID: "{x} y"}},
		// Version 3: a view's intent (§9), the bulk requests (§12).
		{"view intent edit", `{"id":"20","type":"view","entityType":"A","entityUid":"u","intent":"edit"}`,
			Request{ID: "20", Type: FrameView, EntityType: "A", EntityUID: "u", Intent: IntentEdit}},
		{"view intent look", `{"id":"20","type":"view","entityType":"A","entityUid":"u","intent":"look"}`,
			Request{ID: "20", Type: FrameView, EntityType: "A", EntityUID: "u", Intent: IntentLook}},
		{"intent ignored where unused", `{"id":"7","type":"claim","entityType":"A","entityUid":"u","intent":"sit"}`,
			Request{ID: "7", Type: FrameClaim, EntityType: "A", EntityUID: "u"}},
		{"claimMany", `{"id":"40","type":"claimMany","entityType":"A","entityUids":["r-1","r-2"]}`,
			Request{ID: "40", Type: FrameClaimMany, EntityType: "A", EntityUIDs: []string{"r-1", "r-2"}}},
		{"releaseMany of 100", `{"id":"41","type":"releaseMany","entityType":"A","entityUids":` + uidsJSON(MaxBulk) + `}`,
			Request{ID: "41", Type: FrameReleaseMany, EntityType: "A", EntityUIDs: uids(MaxBulk)}},
		{"entityUids ignored where unused", `{"id":"7","type":"claim","entityType":"A","entityUid":"u","entityUids":["x","x"]}`,
			Request{ID: "7", Type: FrameClaim, EntityType: "A", EntityUID: "u"}},
		{"invalid UTF-8 replaced", "{\"id\":\"1\",\"type\":\"watch\",\"entityType\":\"a\xffb\"}", Request{ID: "1", Type: FrameWatch, EntityType: "a\uFFFDb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeRequest([]byte(tt.in))
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecodeRequest = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeRequestBad(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		id     string // echoed in the error frame
		errMsg string
	}{
		{"empty", ``, "", "empty frame"},
		{"blank", " \n\t", "", "empty frame"},
		{"malformed JSON", `{"id":"1","type":`, "", "malformed JSON: unexpected end of JSON input at offset 17"},
		{"not JSON", `claim r-1001`, "", "malformed JSON: invalid character 'c' looking for beginning of value at offset 1"},
		{"trailing data", `{"id":"1","type":"mine"} {}`, "", "malformed JSON: invalid character '{' after top-level value at offset 26"},
		{"null", `null`, "", "frame must be a JSON object, not null"},
		{"array", `[{"id":"1","type":"mine"}]`, "", "frame must be a JSON object, not an array"},
		{"string", `"mine"`, "", "frame must be a JSON object, not a string"},
		{"number", `7`, "", "frame must be a JSON object, not a number"},
		{"empty object", `{}`, "", "missing type"},
		{"missing type", `{"id":"1"}`, "1", "missing type"},
		{"type null", `{"id":"1","type":null}`, "1", "type must be a string, not null"},
		{"unknown type", `{"id":"1","type":"lock"}`, "1", `unknown type "lock"`},
		{"type case", `{"id":"1","type":"Claim"}`, "1", `unknown type "Claim"`},
		{"long unknown type cut", `{"id":"1","type":"` + strings.Repeat("x", 100) + `"}`, "1", `unknown type "` + strings.Repeat("x", 64) + `…"`},
		{"missing id", `{"type":"claim","entityType":"A","entityUid":"u"}`, "", "missing id"},
		{"missing id mine", `{"type":"mine"}`, "", "missing id"},
		{"member names are case-sensitive", `{"ID":"1","type":"mine"}`, "", "missing id"},
		{"id a number", `{"id":7,"type":"mine"}`, "", "id must be a string, not a number"},
		{"id null", `{"id":null,"type":"mine"}`, "", "id must be a string, not null"},
		{"id too long", `{"id":"` + strings.Repeat("1", MaxIDLength+1) + `","type":"mine"}`, "", "id must be at most 64 characters"},
		{"id given twice", `{"id":"1","id":"2","type":"mine"}`, "", `member "id" given twice`},
		{"type given twice", `{"id":"1","type":"mine","type":"claim"}`, "1", `member "type" given twice`},
		{"escaped id given twice", `{"id":"1","\u0069d":"1","type":"mine"}`, "", `member "id" given twice`},
		// RFC 7493 §2.3: no name twice in any object, even one no request uses.
		{"unknown member given twice", `{"id":"1","type":"mine","x":1,"x":1}`, "1", `member "x" given twice`},
		{"nested name given twice", `{"id":"1","type":"mine","x":[{"a":1,"a":2}]}`, "1", `member "a" given twice in "/x/0"`},
		{"a known member given twice comes first", `{"x":1,"x":2,"id":"1","type":"mine","type":"mine"}`, "1", `member "type" given twice`},
		{"the id after a duplicate is echoed", `{"x":1,"x":2,"type":"mine","id":"1"}`, "1", `member "x" given twice`},
		{"malformed after a duplicate", `{"x":1,"x":2,"id":"1","type":"mine"`, "", "malformed JSON: unexpected end of JSON input at offset 35"},
		{"not an object with a duplicate", `[{"a":1,"a":2}]`, "", "frame must be a JSON object, not an array"},
		{"missing token", `{"type":"auth"}`, "", "missing token"},
		{"missing token on refresh", `{"id":"3","type":"auth"}`, "3", "missing token"},
		{"token a number", `{"type":"auth","token":42}`, "", "token must be a string, not a number"},
		{"token an object", `{"id":"4","type":"auth","token":{"jwt":"x"}}`, "4", "token must be a string, not an object"},
		{"missing entityType", `{"id":"5","type":"watch"}`, "5", "missing entityType"},
		{"entityType an array", `{"id":"5","type":"watch","entityType":["A"]}`, "5", "entityType must be a string, not an array"},
		{"missing entityUid", `{"id":"6","type":"claim","entityType":"A"}`, "6", "missing entityUid"},
		{"forceRelease without entityUid", `{"id":"31","type":"forceRelease","entityType":"A"}`, "31", "missing entityUid"},
		{"adminLocks without id", `{"type":"adminLocks"}`, "", "missing id"},
		{"entityUid a number", `{"id":"6","type":"release","entityType":"A","entityUid":1001}`, "6", "entityUid must be a string, not a number"},
		{"entityUid a boolean", `{"id":"6","type":"renew","entityType":"A","entityUid":true}`, "6", "entityUid must be a string, not a boolean"},
		// A known member of the wrong type is refused where the type does not use it too.
		{"unused entityType a number", `{"id":"7","type":"mine","entityType":5}`, "7", "entityType must be a string, not a number"},
		{"unused entityUid null", `{"id":"7","type":"watch","entityType":"A","entityUid":null}`, "7", "entityUid must be a string, not null"},
		{"intent not a word of the contract", `{"id":"20","type":"view","entityType":"A","entityUid":"u","intent":"Edit"}`, "20", `intent must be "edit" or "look", not "Edit"`},
		{"intent a boolean", `{"id":"20","type":"view","entityType":"A","entityUid":"u","intent":true}`, "20", "intent must be a string, not a boolean"},
		{"claimMany without entityUids", `{"id":"40","type":"claimMany","entityType":"A"}`, "40", "missing entityUids"},
		{"claimMany of none", `{"id":"40","type":"claimMany","entityType":"A","entityUids":[]}`, "40", "entityUids must name at least one entity"},
		{"claimMany of 101", `{"id":"40","type":"claimMany","entityType":"A","entityUids":` + uidsJSON(MaxBulk+1) + `}`, "40", "entityUids names 101 entities; at most 100 at once"},
		{"claimMany duplicates", `{"id":"40","type":"claimMany","entityType":"A","entityUids":["r-1","r-2","r-1"]}`, "40", `entityUids names "r-1" twice`},
		{"entityUids a string", `{"id":"41","type":"releaseMany","entityType":"A","entityUids":"r-1"}`, "41", "entityUids must be an array of strings, not a string"},
		{"entityUids holding a number", `{"id":"41","type":"releaseMany","entityType":"A","entityUids":["r-1",2]}`, "41", "entityUids must be an array of strings, not an array holding a number"},
		{"releaseMany without entityType", `{"id":"41","type":"releaseMany","entityUids":["r-1"]}`, "41", "missing entityType"},
		{"unused token an object", `{"id":"7","type":"claim","entityType":"A","entityUid":"u","token":{}}`, "7", "token must be a string, not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tt.in))
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("DecodeRequest error = %v, want *Error", err)
			}
			want := Error{ID: tt.id, Code: CodeBadRequest, Message: tt.errMsg}
			if *fe != want {
				t.Errorf("DecodeRequest error = %+v, want %+v", *fe, want)
			}
		})
	}
}

func TestDecodeRequestSize(t *testing.T) {
	// A valid frame padded with an unknown member to an exact size.
	frame := func(size int) []byte {
		const head, tail = `{"id":"1","type":"mine","pad":"`, `"}`
		return []byte(head + strings.Repeat("p", size-len(head)-len(tail)) + tail)
	}
	if _, err := DecodeRequest(frame(MaxFrameSize)); err != nil {
		t.Errorf("DecodeRequest of %d bytes: %v", MaxFrameSize, err)
	}
	if _, err := DecodeRequest(frame(MaxFrameSize + 1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("DecodeRequest of %d bytes: %v, want ErrFrameTooLarge", MaxFrameSize+1, err)
	}
	// The cap comes before parsing: garbage over the cap is too large, not malformed.
	if _, err := DecodeRequest([]byte(strings.Repeat("[", MaxFrameSize+1))); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("DecodeRequest of oversized garbage: %v, want ErrFrameTooLarge", err)
	}
}

func TestRequestMarshal(t *testing.T) {
	tests := []struct {
		in   Request
		want string
	}{
		{Request{Type: FrameAuth, Token: "eyJ.a.b"}, `{"type":"auth","token":"eyJ.a.b"}`},
		{Request{ID: "12", Type: FrameAuth, Token: "eyJ.c.d"}, `{"id":"12","type":"auth","token":"eyJ.c.d"}`},
		{Request{ID: "7", Type: FrameClaim, EntityType: "ApprovalRequest", EntityUID: "r-1001"},
			`{"id":"7","type":"claim","entityType":"ApprovalRequest","entityUid":"r-1001"}`},
		{Request{ID: "9", Type: FrameWatch, EntityType: "ApprovalRequest"}, `{"id":"9","type":"watch","entityType":"ApprovalRequest"}`},
		{Request{ID: "11", Type: FrameMine}, `{"id":"11","type":"mine"}`},
	}
	for _, tt := range tests {
		t.Run(string(tt.in.Type), func(t *testing.T) {
			assertJSON(t, tt.in, tt.want)
			back, err := DecodeRequest([]byte(tt.want))
			if err != nil || !reflect.DeepEqual(back, tt.in) {
				t.Errorf("DecodeRequest(%s) = %+v, %v; want %+v", tt.want, back, err, tt.in)
			}
		})
	}
}

func TestRequestIsRefresh(t *testing.T) {
	if (Request{Type: FrameAuth}).IsRefresh() {
		t.Error("auth without id is a refresh")
	}
	if !(Request{ID: "1", Type: FrameAuth}).IsRefresh() {
		t.Error("auth with id is not a refresh")
	}
}

func ExampleDecodeRequest() {
	_, err := DecodeRequest([]byte(`{"id":"7","type":"claim","entityType":"ApprovalRequest","entityUid":1001}`))
	var fe *Error
	if errors.As(err, &fe) {
		b, _ := json.Marshal(fe) // the error frame the hub answers with
		fmt.Println(string(b))
	}
	// Output: {"id":"7","type":"error","code":"bad_request","message":"entityUid must be a string, not a number"}
}

// benchFrames are the frames the hub decodes most, as a browser sends them, and a bad
// one: the auth carries a token of the size an RS256 access token has.
var benchFrames = []struct{ name, frame string }{
	{"auth", `{"type":"auth","token":"` + benchToken + `"}`},
	{"claim", `{"id":"7","type":"claim","entityType":"ApprovalRequest","entityUid":"r-1001"}`},
	{"renew", `{"id":"118","type":"renew","entityType":"ApprovalRequest","entityUid":"r-1001"}`},
	{"watch", `{"id":"9","type":"watch","entityType":"ApprovalRequest"}`},
	{"bad", `{"id":"6","type":"release","entityType":"ApprovalRequest","entityUid":1001}`},
}

// benchToken is shaped like an Entra ID access token: a header, about 20 claims and a
// 2048-bit RSA signature, base64url-encoded (about 1.1 KB).
var benchToken = func() string {
	enc := base64.RawURLEncoding.EncodeToString
	header := `{"typ":"JWT","alg":"RS256","kid":"CNv0OI3RwqlHFEVnaoMAshCH2XE"}`
	claims := `{"aud":"api://lockhub","iss":"https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/",` +
		`"iat":1796202600,"nbf":1796202600,"exp":1796206500,"acr":"1","aio":"AVQAq/8TAAAA5t0n0vP1rF1nN3oRQ==",` +
		`"amr":["pwd","mfa"],"appid":"3fa1e2b4-7c5d-4e6f-8a9b-0c1d2e3f4a5b","appidacr":"0","name":"Ada Lovelace",` +
		`"oid":"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d","tid":"acme","roles":["Locks.TakeOver"],"scp":"access_as_user",` +
		`"sub":"x5Q2mN8pL1kJ7hG4fD3sA9zX6cV0bN2mQ4wE8rT1yU","ver":"1.0","upn":"ada@acme.example"}`
	return enc([]byte(header)) + "." + enc([]byte(claims)) + "." + enc(bytes.Repeat([]byte{0xa5, 0x5a}, 128))
}()

func BenchmarkDecodeRequest(b *testing.B) {
	for _, bf := range benchFrames {
		data := []byte(bf.frame)
		b.Run(bf.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				_, _ = DecodeRequest(data) // "bad" fails by design
			}
		})
	}
}

// assertJSON checks that v marshals to exactly want.
func assertJSON(t *testing.T, v any, want string) {
	t.Helper()
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%+v): %v", v, err)
	}
	if string(got) != want {
		t.Errorf("json.Marshal(%T):\n got %s\nwant %s", v, got, want)
	}
}

func TestRequestMarshalEmptyMembers(t *testing.T) {
	// Required members are written even when empty, so the hub answers invalid_entity
	// (or refuses the token) instead of bad_request for a missing member.
	assertJSON(t, Request{ID: "1", Type: FrameClaim}, `{"id":"1","type":"claim","entityType":"","entityUid":""}`)
	assertJSON(t, Request{Type: FrameAuth}, `{"type":"auth","token":""}`)
	// Members the type does not use are written only when set.
	assertJSON(t, Request{ID: "2", Type: FrameMine}, `{"id":"2","type":"mine"}`)
	assertJSON(t, Request{ID: "3", Type: "bogus", EntityUID: "u"}, `{"id":"3","type":"bogus","entityUid":"u"}`)
}

// TestEmptyID: an empty id is an id (PROTOCOL.md §4: a string of at most 64
// characters). Every answer echoes it, errors and snapshots included, while frames that
// carried no id are answered without one; a client reads the difference back.
func TestEmptyID(t *testing.T) {
	req, err := DecodeRequest([]byte(`{"id":"","type":"auth","token":"t"}`))
	if err != nil || !req.IsRefresh() {
		t.Fatalf("auth with an empty id = %+v, %v; want a refresh", req, err)
	}
	if b, _ := json.Marshal(req); !strings.Contains(string(b), `"id":""`) {
		t.Fatalf("re-encoded as %s, without its id", b)
	}
	for _, tc := range []struct {
		name, in string
		want     string // how the error frame starts
	}{
		{"empty id echoed", `{"id":"","type":"nope"}`, `{"id":"","type":"error"`},
		{"empty id echoed after a later member", `{"type":"claim","id":"","entityType":"A"}`, `{"id":"","type":"error"`},
		{"no id, none echoed", `{"type":"nope"}`, `{"type":"error"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tc.in))
			var fe *Error
			if !errors.As(err, &fe) {
				t.Fatalf("DecodeRequest(%s) = %v, want *Error", tc.in, err)
			}
			b, _ := json.Marshal(fe)
			if !strings.HasPrefix(string(b), tc.want) {
				t.Fatalf("error frame %s, want it to start %s", b, tc.want)
			}
			back, err := DecodeServerFrame(b)
			if err != nil || back.Error == nil || back.Error.ID != fe.ID || back.Error.HasID != fe.HasID {
				t.Fatalf("read back as %+v, %v; sent %+v", back.Error, err, fe)
			}
		})
	}
	for _, s := range []Snapshot{{HasID: true, EntityType: "A"}, {EntityType: "A"}} {
		b, _ := json.Marshal(s)
		back, err := DecodeServerFrame(b)
		if err != nil || back.Snapshot == nil || back.Snapshot.HasID != s.HasID || back.HasID != s.HasID {
			t.Fatalf("snapshot %s read back as %+v, %v", b, back.Snapshot, err)
		}
	}
	if f, err := DecodeServerFrame([]byte(`{"id":"","type":"result","outcome":"released","lock":null}`)); err != nil || !f.HasID {
		t.Fatalf("a result answering an empty id = %+v, %v", f, err)
	}
}

// uids are n distinct uids, and uidsJSON their JSON array.
func uids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r-%d", 1000+i)
	}
	return out
}

func uidsJSON(n int) string {
	b, _ := json.Marshal(uids(n))
	return string(b)
}
