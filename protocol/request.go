package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// Request is a frame sent by the client (PROTOCOL.md §4). Which members it carries
// depends on its Type; DecodeRequest requires those and leaves the others empty:
//
//	auth                              Token, and ID when it is a refresh (IsRefresh)
//	claim, renew, release, takeover   ID, EntityType, EntityUID
//	watch, unwatch                    ID, EntityType
//	mine                              ID
//
// It marshals as the client sends it, members in this order:
//
//	{"id":"7","type":"claim","entityType":"ApprovalRequest","entityUid":"r-1001"}
//
// An id may be empty (PROTOCOL.md §4: a string of at most 64 characters), so whether
// the frame carried one is HasID or a non-empty ID.
type Request struct {
	ID string `json:"id"`
	// HasID says the frame carries an id even though ID is empty; answers copy it so
	// that an empty id is echoed too.
	HasID      bool      `json:"-"`
	Type       FrameType `json:"type"`
	Token      string    `json:"token"`
	EntityType string    `json:"entityType"`
	EntityUID  string    `json:"entityUid"`
}

// MarshalJSON writes r as a client frame: the members its Type requires, even when
// empty (so that the hub judges an empty entityUid, rather than finding none), and
// any other member that is not empty.
func (r Request) MarshalJSON() ([]byte, error) {
	need, _ := requestMembers(r.Type)
	member := func(v string, needed bool) *string {
		if needed || v != "" {
			return &v
		}
		return nil
	}
	return json.Marshal(struct {
		ID         *string   `json:"id,omitempty"`
		Type       FrameType `json:"type"`
		Token      *string   `json:"token,omitempty"`
		EntityType *string   `json:"entityType,omitempty"`
		EntityUID  *string   `json:"entityUid,omitempty"`
	}{
		member(r.ID, r.HasID), r.Type,
		member(r.Token, need&needToken != 0),
		member(r.EntityType, need&needEntityType != 0),
		member(r.EntityUID, need&needEntityUID != 0),
	})
}

// IsRefresh reports whether r is an in-band token refresh: an auth with an id. An auth
// without an id is the first frame of a connection.
func (r Request) IsRefresh() bool { return r.Type == FrameAuth && r.carriesID() }

// carriesID says whether r has an id, perhaps empty.
func (r Request) carriesID() bool { return r.HasID || r.ID != "" }

// The members a request type requires besides its id.
const (
	needToken = 1 << iota
	needEntityType
	needEntityUID
)

// requestMembers returns the members typ requires, and false for a type that is not a
// request.
func requestMembers(typ FrameType) (need int, ok bool) {
	switch typ {
	case FrameAuth:
		return needToken, true
	case FrameClaim, FrameRenew, FrameRelease, FrameTakeover:
		return needEntityType | needEntityUID, true
	case FrameWatch, FrameUnwatch:
		return needEntityType, true
	case FrameMine:
		return 0, true
	}
	return 0, false
}

// DecodeRequest decodes a client frame, the hub's only parser of untrusted input.
//
// A frame over MaxFrameSize is refused with ErrFrameTooLarge before it is parsed.
// Anything else that is not a well-formed request is an *Error with Code
// CodeBadRequest and a message naming the member at fault, carrying the frame's id
// whenever a valid one could be read so that the error frame echoes it (HasID when it
// is empty): malformed JSON or trailing data, a value that is not an object, an
// unknown type, a missing id (every type but auth), an id that is not a string of at
// most MaxIDLength characters, a known member that is not a JSON string, a required
// member that is missing, a member given twice.
//
// So the hub closes with CloseTooLarge on errors.Is(err, ErrFrameTooLarge), and
// answers an *Error (errors.As) with it as the error frame.
//
// Members are matched case-sensitively. A known member (id, type, token, entityType,
// entityUid) must be a JSON string even where the type does not use it, and is then
// ignored; unknown members are ignored.
// Entity types and uids are not checked beyond being strings: their syntax is the
// store's to judge (CodeInvalidEntity).
func DecodeRequest(data []byte) (Request, error) {
	if len(data) > MaxFrameSize {
		return Request{}, ErrFrameTooLarge
	}
	req, err := decodeRequest(data)
	if err != nil {
		if req.carriesID() { // every error after the id was read echoes it, empty or not
			err.ID, err.HasID = req.ID, req.HasID
		}
		return Request{}, err
	}
	return req, nil
}

// decodeRequest is DecodeRequest under the size cap. On error the request it returns
// holds the id, when one was read.
func decodeRequest(data []byte) (Request, *Error) {
	var m members
	if err := m.scan(data); err != nil {
		return Request{}, err
	}

	// The id first, so that every later error can echo it.
	var req Request
	if m.dup == "id" {
		return Request{}, badRequest("", "member \"id\" given twice")
	}
	if m.id != nil {
		id, err := str("id", m.id)
		if err != nil {
			return Request{}, err
		}
		if utf8.RuneCountInString(id) > MaxIDLength {
			return Request{}, badRequest("", "id must be at most %d characters", MaxIDLength)
		}
		req.ID, req.HasID = id, id == ""
	}
	if m.dup != "" {
		return req, badRequest("", "member %q given twice", m.dup)
	}

	if m.typ == nil {
		return req, badRequest("", "missing type")
	}
	typ, err := str("type", m.typ)
	if err != nil {
		return req, err
	}
	req.Type = FrameType(typ)
	need, ok := requestMembers(req.Type)
	if !ok {
		return req, badRequest("", "unknown type %s", quoteShort(typ))
	}
	if !req.carriesID() && req.Type != FrameAuth {
		return req, badRequest("", "missing id")
	}
	// A known member has one JSON type, string, in every frame: one of the wrong type
	// is refused even where this type of frame does not use it (PROTOCOL.md §4).
	for _, f := range [...]struct {
		name string
		raw  []byte
	}{{"token", m.token}, {"entityType", m.entityType}, {"entityUid", m.entityUID}} {
		if f.raw != nil && f.raw[0] != '"' {
			return req, badRequest("", "%s must be a string, not %s", f.name, kind(f.raw[0]))
		}
	}

	if need&needToken != 0 {
		if req.Token, err = required("token", m.token); err != nil {
			return req, err
		}
	}
	if need&needEntityType != 0 {
		if req.EntityType, err = required("entityType", m.entityType); err != nil {
			return req, err
		}
	}
	if need&needEntityUID != 0 {
		if req.EntityUID, err = required("entityUid", m.entityUID); err != nil {
			return req, err
		}
	}
	return req, nil
}

// required returns the value of a member the request type needs, or the error when it
// is missing or not a string.
func required(name string, raw []byte) (string, *Error) {
	if raw == nil {
		return "", badRequest("", "missing %s", name)
	}
	return str(name, raw)
}

// members holds the raw JSON values of the members a request may carry, nil when
// absent. It is filled by scan, which walks the object once without reflection: the
// hub decodes every frame.
type members struct {
	id, typ, token, entityType, entityUID []byte

	dup string // the first known member given twice
}

// scan checks that data is one well-formed JSON object and records its known members.
func (m *members) scan(data []byte) *Error {
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("", "empty frame")
	}
	if !json.Valid(data) {
		return badRequest("", "malformed JSON: %s", syntaxError(data))
	}
	// From here on data is valid JSON (json.Valid also refused trailing data), so the
	// walk below needs no bounds or syntax checks of its own.
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return badRequest("", "frame must be a JSON object, not %s", kind(data[i]))
	}
	i = skipSpace(data, i+1)
	for data[i] != '}' {
		end := endOfString(data, i)
		key := data[i:end]
		i = skipSpace(data, skipSpace(data, end)+1) // past the ':'
		end = endOfValue(data, i)
		val := data[i:end]
		i = skipSpace(data, end)
		if data[i] == ',' {
			i = skipSpace(data, i+1)
		}

		name := key[1 : len(key)-1]
		if bytes.IndexByte(name, '\\') >= 0 { // an escaped name: rare
			name = []byte(jsonString(key))
		}
		slot := m.slot(name)
		if slot == nil {
			continue // a member no request uses
		}
		if *slot != nil && m.dup == "" {
			m.dup = string(name)
		}
		*slot = val
	}
	return nil
}

// slot returns where the member called name goes, nil for a member no request uses.
func (m *members) slot(name []byte) *[]byte {
	switch string(name) { // compared without allocating
	case "id":
		return &m.id
	case "type":
		return &m.typ
	case "token":
		return &m.token
	case "entityType":
		return &m.entityType
	case "entityUid":
		return &m.entityUID
	}
	return nil
}

// str returns the raw value of member name as a Go string, or an error naming the
// member when it is not a JSON string.
func str(name string, raw []byte) (string, *Error) {
	if raw[0] != '"' {
		return "", badRequest("", "%s must be a string, not %s", name, kind(raw[0]))
	}
	return jsonString(raw), nil
}

// syntaxError describes why data is not valid JSON. It runs only on that rare path.
func syntaxError(data []byte) string {
	var v struct{}
	var se *json.SyntaxError
	if err := json.Unmarshal(data, &v); errors.As(err, &se) {
		return se.Error() + " at offset " + strconv.FormatInt(se.Offset, 10)
	} else if err != nil {
		return err.Error()
	}
	return "invalid"
}

// jsonString returns the value of a valid JSON string token, quotes included.
func jsonString(tok []byte) string {
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body)
	}
	// Escapes, or invalid UTF-8 that encoding/json replaces with U+FFFD.
	var s string
	_ = json.Unmarshal(tok, &s) // cannot fail: tok is a valid JSON string
	return s
}

// kind names the JSON type of the value starting with byte c.
func kind(c byte) string {
	switch c {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// quoteShort quotes s for a message, cut to a length that keeps error frames small.
func quoteShort(s string) string {
	const max = 64
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return strconv.Quote(s)
}

// The walkers below assume valid JSON (checked by json.Valid) and i at a token.

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// endOfString returns the index just past the string token starting at data[i].
func endOfString(data []byte, i int) int {
	for i++; ; i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// endOfValue returns the index just past the value starting at data[i].
func endOfValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return endOfString(data, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch data[i] {
			case '"':
				i = endOfString(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	// A number, true, false or null runs to the next delimiter.
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
