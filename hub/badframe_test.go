package hub

import (
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/protocol"
)

// TestBadFrames: every bad frame gets an error frame, echoing its id when it could be
// read; the connection stays usable and nothing is written in Redis.
func TestBadFrames(t *testing.T) {
	th := startMini(t, hubOptions{})
	c, _ := th.dial("acme", "u-ada")
	ctx := tctx(t)
	long := strings.Repeat("i", protocol.MaxIDLength+1)
	for _, tc := range []struct {
		name string
		typ  websocket.MessageType
		data string
		code protocol.ErrorCode
		id   string
		msg  string // part of the message
	}{
		{"malformed JSON", websocket.MessageText, `{"id":"1","type":"claim"`, protocol.CodeBadRequest, "", ""},
		{"not an object", websocket.MessageText, `[1,2]`, protocol.CodeBadRequest, "", ""},
		{"a string", websocket.MessageText, `"claim"`, protocol.CodeBadRequest, "", ""},
		{"empty", websocket.MessageText, ``, protocol.CodeBadRequest, "", ""},
		{"unknown type", websocket.MessageText, `{"id":"2","type":"lockAll"}`, protocol.CodeBadRequest, "2", "unknown type"},
		{"server frame type", websocket.MessageText, `{"id":"2b","type":"welcome"}`, protocol.CodeBadRequest, "2b", ""},
		{"missing type", websocket.MessageText, `{"id":"3"}`, protocol.CodeBadRequest, "3", "type"},
		{"missing id", websocket.MessageText, `{"type":"mine"}`, protocol.CodeBadRequest, "", "id"},
		{"id a number", websocket.MessageText, `{"id":4,"type":"mine"}`, protocol.CodeBadRequest, "", "id"},
		{"id too long", websocket.MessageText, `{"id":"` + long + `","type":"mine"}`, protocol.CodeBadRequest, "", "id"},
		{"missing entityUid", websocket.MessageText, `{"id":"5","type":"claim","entityType":"ApprovalRequest"}`, protocol.CodeBadRequest, "5", "entityUid"},
		{"missing entityType", websocket.MessageText, `{"id":"6","type":"watch"}`, protocol.CodeBadRequest, "6", "entityType"},
		{"entityUid a number", websocket.MessageText, `{"id":"7","type":"claim","entityType":"ApprovalRequest","entityUid":1001}`, protocol.CodeBadRequest, "7", "entityUid"},
		{"entityType null", websocket.MessageText, `{"id":"8","type":"release","entityType":null,"entityUid":"r-1"}`, protocol.CodeBadRequest, "8", "entityType"},
		{"token an object", websocket.MessageText, `{"id":"9","type":"auth","token":{}}`, protocol.CodeBadRequest, "9", "token"},
		{"type twice", websocket.MessageText, `{"id":"10","type":"mine","type":"claim"}`, protocol.CodeBadRequest, "10", "twice"},
		{"binary frame", websocket.MessageBinary, `{"id":"11","type":"mine"}`, protocol.CodeBadRequest, "", "binary"},
		{"uid with a brace", websocket.MessageText, `{"id":"12","type":"claim","entityType":"ApprovalRequest","entityUid":"a}b"}`, protocol.CodeInvalidEntity, "12", "entityUid"},
		{"uid with a space", websocket.MessageText, `{"id":"13","type":"takeover","entityType":"ApprovalRequest","entityUid":"a b"}`, protocol.CodeInvalidEntity, "13", ""},
		{"empty uid", websocket.MessageText, `{"id":"14","type":"renew","entityType":"ApprovalRequest","entityUid":""}`, protocol.CodeInvalidEntity, "14", ""},
		{"type with a colon", websocket.MessageText, `{"id":"15","type":"claim","entityType":"Approval:Request","entityUid":"r-1"}`, protocol.CodeInvalidEntity, "15", "entityType"},
		{"uid too long", websocket.MessageText, `{"id":"16","type":"claim","entityType":"ApprovalRequest","entityUid":"` + strings.Repeat("u", 129) + `"}`, protocol.CodeInvalidEntity, "16", ""},
		{"not lockable", websocket.MessageText, `{"id":"17","type":"claim","entityType":"Customer","entityUid":"c-1"}`, protocol.CodeNotLockable, "17", "ApprovalRequest, Invoice"},
		{"watch not lockable", websocket.MessageText, `{"id":"18","type":"watch","entityType":"Customer"}`, protocol.CodeNotLockable, "18", "ApprovalRequest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.SendRaw(ctx, tc.typ, []byte(tc.data)); err != nil {
				t.Fatal(err)
			}
			f, err := c.NextFrame(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if f.Error == nil || f.Error.Code != tc.code || f.ID != tc.id || !strings.Contains(f.Error.Message, tc.msg) {
				t.Fatalf("answer = %s, want %s with id %q mentioning %q", f.Raw, tc.code, tc.id, tc.msg)
			}
		})
	}
	if keys := th.redisKeys(); len(keys) != 0 {
		t.Fatalf("bad frames wrote %v", keys)
	}
	// Still usable.
	expect(t, protocol.OutcomeAcquired)(c.Claim(ctx, typ, "r-1"))
	if got := th.metric("lockhub_hub_frames_in_total", "type=invalid"); got < 10 {
		t.Errorf("invalid frames counted = %v", got)
	}
}

// TestEmptyID: an empty id is an id (PROTOCOL.md §4: a string of at most 64
// characters): it is served, and every answer echoes it, errors and snapshots included;
// a frame with no id is still answered without one.
func TestEmptyID(t *testing.T) {
	th := startMini(t, hubOptions{})
	c, _ := th.dial("acme", "u-ada")
	ctx := tctx(t)
	for _, tc := range []struct {
		name, data string
		typ        protocol.FrameType
	}{
		{"claim", `{"id":"","type":"claim","entityType":"ApprovalRequest","entityUid":"r-1"}`, protocol.FrameResult},
		{"watch", `{"id":"","type":"watch","entityType":"ApprovalRequest"}`, protocol.FrameSnapshot},
		{"not lockable", `{"id":"","type":"claim","entityType":"Customer","entityUid":"c-1"}`, protocol.FrameError},
		{"bad frame", `{"id":"","type":"claim","entityType":"ApprovalRequest"}`, protocol.FrameError},
		{"refresh", `{"id":"","type":"auth","token":"` + th.token("acme", "u-ada") + `"}`, protocol.FrameResult},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.SendRaw(ctx, websocket.MessageText, []byte(tc.data)); err != nil {
				t.Fatal(err)
			}
			f, err := c.NextFrame(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if f.Type != tc.typ || !f.HasID || f.ID != "" || !strings.HasPrefix(string(f.Raw), `{"id":"","type":"`) {
				t.Fatalf("answer %s, want a %s echoing the empty id", f.Raw, tc.typ)
			}
		})
	}
	// The lock claimed with an empty id is held like any other.
	expect(t, protocol.OutcomeRenewed)(c.Claim(ctx, typ, "r-1"))
	// No id at all is still bad_request, answered without an id.
	if err := c.SendRaw(ctx, websocket.MessageText, []byte(`{"type":"mine"}`)); err != nil {
		t.Fatal(err)
	}
	f, err := c.NextFrame(ctx)
	if err != nil || f.Error == nil || f.HasID || strings.Contains(string(f.Raw), `"id"`) {
		t.Fatalf("a frame without an id answered %s, %v", f.Raw, err)
	}
}
