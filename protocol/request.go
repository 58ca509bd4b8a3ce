package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Request is a frame sent by the client (PROTOCOL.md §4). Which members it carries
// depends on its Type; DecodeRequest requires those and leaves the others empty:
//
//	auth                              Token, and ID when it is a refresh (IsRefresh)
//	claim, renew, release, takeover   ID, EntityType, EntityUID
//	view                              ID, EntityType, EntityUID, and Intent when given (version 3)
//	unview, nudge                     ID, EntityType, EntityUID
//	claimMany, releaseMany            ID, EntityType, EntityUIDs (version 3)
//	watch, unwatch                    ID, EntityType
//	mine                              ID
//	adminLocks                        ID
//	forceRelease                      ID, EntityType, EntityUID
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
	// Intent is a view's intent, "edit" or "look" (version 3, §9); empty when the
	// view carried none, which means look.
	Intent Intent `json:"intent"`
	// EntityUIDs are the entities of a claimMany or releaseMany (version 3, §12): 1 to
	// MaxBulk distinct strings (CheckEntityUIDs).
	EntityUIDs []string `json:"entityUids"`
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
		Intent     *string   `json:"intent,omitempty"`
		EntityUIDs []string  `json:"entityUids,omitempty"`
	}{
		member(r.ID, r.HasID), r.Type,
		member(r.Token, need&needToken != 0),
		member(r.EntityType, need&needEntityType != 0),
		member(r.EntityUID, need&needEntityUID != 0),
		member(string(r.Intent), false),
		r.EntityUIDs,
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
	needEntityUIDs
)

// requestMembers returns the members typ requires, and false for a type that is not a
// request.
func requestMembers(typ FrameType) (need int, ok bool) {
	switch typ {
	case FrameAuth:
		return needToken, true
	case FrameClaim, FrameRenew, FrameRelease, FrameTakeover, FrameView, FrameUnview, FrameNudge, FrameForceRelease:
		return needEntityType | needEntityUID, true
	case FrameWatch, FrameUnwatch:
		return needEntityType, true
	case FrameClaimMany, FrameReleaseMany:
		return needEntityType | needEntityUIDs, true
	case FrameMine, FramePing, FrameAdminLocks:
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
// member that is missing, a name given twice in any object of the frame.
//
// So the hub closes with CloseTooLarge on errors.Is(err, ErrFrameTooLarge), and
// answers an *Error (errors.As) with it as the error frame.
//
// Members are matched case-sensitively. A known member (id, type, token, entityType,
// entityUid, intent) must be a JSON string even where the type does not use it, and is
// then ignored (entityUids an array of strings); unknown members are ignored. A view's
// intent must be edit or look; a bulk request's entityUids 1 to MaxBulk distinct uids.
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
	if len(bytes.TrimSpace(data)) == 0 {
		return Request{}, badRequest("", "empty frame")
	}
	var m members
	if err := m.read(data); err != nil {
		return Request{}, err
	}

	// The id first, so that every later error can echo it.
	var req Request
	if m.dup == "id" {
		return Request{}, badRequest("", "member \"id\" given twice")
	}
	if m.id.kind != 0 {
		id, err := m.id.str("id")
		if err != nil {
			return Request{}, err
		}
		if utf8.RuneCountInString(id) > MaxIDLength {
			return Request{}, badRequest("", "id must be at most %d characters", MaxIDLength)
		}
		req.ID, req.HasID = id, id == ""
	}
	if m.dup != "" {
		return req, badRequest("", "member %s given twice%s", quoteShort(m.dup), m.dupIn)
	}

	if m.typ.kind == 0 {
		return req, badRequest("", "missing type")
	}
	typ, err := m.typ.str("type")
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
		m    member
	}{{"token", m.token}, {"entityType", m.entityType}, {"entityUid", m.entityUID}, {"intent", m.intent}} {
		if f.m.kind != 0 {
			if _, err := f.m.str(f.name); err != nil {
				return req, err
			}
		}
	}
	if m.entityUIDs.kind != 0 && (m.entityUIDs.kind != '[' || m.entityUIDs.bad != 0) {
		what := kind(m.entityUIDs.kind)
		if m.entityUIDs.kind == '[' {
			what = "an array holding " + kind(m.entityUIDs.bad)
		}
		return req, badRequest("", "entityUids must be an array of strings, not %s", what)
	}

	if need&needToken != 0 {
		if req.Token, err = m.token.required("token"); err != nil {
			return req, err
		}
	}
	if need&needEntityType != 0 {
		if req.EntityType, err = m.entityType.required("entityType"); err != nil {
			return req, err
		}
	}
	if need&needEntityUID != 0 {
		if req.EntityUID, err = m.entityUID.required("entityUid"); err != nil {
			return req, err
		}
	}
	if req.Type == FrameView && m.intent.kind != 0 {
		if err := checkIntent(m.intent.s); err != nil {
			return req, err
		}
		req.Intent = Intent(m.intent.s)
	}
	if need&needEntityUIDs != 0 {
		if m.entityUIDs.kind == 0 {
			return req, badRequest("", "missing entityUids")
		}
		if err := CheckEntityUIDs("entityUids", m.entityUIDs.list); err != nil {
			return req, err
		}
		req.EntityUIDs = m.entityUIDs.list
	}
	return req, nil
}

// member is a known member of a frame as read.
type member struct {
	kind jsontext.Kind // of its value; 0 when the frame does not carry it
	s    string        // its value, when kind is '"'
	list []string      // its strings, when kind is '[' (entityUids)
	bad  jsontext.Kind // the kind of the first element of the array that is not a string
}

// str returns m's value, or an error naming the member when it is not a JSON string.
func (m member) str(name string) (string, *Error) {
	if m.kind != '"' {
		return "", badRequest("", "%s must be a string, not %s", name, kind(m.kind))
	}
	return m.s, nil
}

// required is str for a member the request type needs, refusing one that is missing.
func (m member) required(name string) (string, *Error) {
	if m.kind == 0 {
		return "", badRequest("", "missing %s", name)
	}
	return m.str(name)
}

// members holds the members a request may carry, as read by read.
type members struct {
	id, typ, token, entityType, entityUID, intent member
	entityUIDs                                    member // an array of strings

	// dup is the first name given twice: a known member if any, else any other,
	// anywhere in the frame; dupIn then says in which object, when not the frame.
	dup, dupIn string
}

// Options of the decoders. Invalid UTF-8 in a string is replaced by U+FFFD rather than
// refused, as the hub has always read frames (encoding/json's way; RFC 8259 §8.1).
var (
	frameOptions = jsontext.AllowInvalidUTF8(true)
	allowDups    = jsontext.AllowDuplicateNames(true)
)

// notAnObject is the error of readFrom for a frame that is valid JSON but not an
// object: the kind of value it is.
type notAnObject jsontext.Kind

func (k notAnObject) Error() string { return "not an object" }

// read checks that data is one well-formed JSON object and records its known members.
//
// jsontext refuses a name given twice in any object (RFC 8259 §4 leaves duplicates to
// the parser; I-JSON, RFC 7493 §2.3, forbids them). Only then is the frame read again
// with duplicates allowed, so that a duplicated known member and the id to echo are
// found however the frame is ordered: a fault in the rest of the frame, or a known
// member given twice, takes precedence over the first duplicate jsontext saw.
func (m *members) read(data []byte) *Error {
	err := m.readWith(data, frameOptions)
	if err != nil {
		err = m.readDuplicates(data, err)
	}
	if err == nil {
		return nil
	}
	if k := notAnObject(0); errors.As(err, &k) { // declared here: it escapes
		return badRequest("", "frame must be a JSON object, not %s", kind(jsontext.Kind(k)))
	}
	return badRequest("", "malformed JSON: %s", syntaxError(data, err))
}

// readDuplicates reads data again, allowing duplicate names, when err says that it has
// some; it returns the error of that reading, or err.
func (m *members) readDuplicates(data []byte, err error) error {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) || !errors.Is(se.Err, jsontext.ErrDuplicateName) {
		return err
	}
	*m = members{}
	if err := m.readWith(data, frameOptions, allowDups); err != nil {
		return err
	}
	if m.dup == "" {
		m.dup = se.JSONPointer.LastToken()
		if in := se.JSONPointer.Parent(); in != "" {
			m.dupIn = " in " + quoteShort(string(in))
		}
	}
	return nil
}

// A decoder reads one frame at a time. They are recycled through decoders: a fresh
// jsontext.Decoder allocates its name and nesting stacks anew, some 16 allocations, as
// many again as the frame it reads, and about twice its time.
type decoder struct {
	dec jsontext.Decoder
	buf bytes.Buffer // read in place by dec, not copied
}

// decoders is a cache, not state: what it holds is reset before use.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

// readWith reads data into m with a pooled decoder.
func (m *members) readWith(data []byte, opts ...jsontext.Options) error {
	d := decoders.Get().(*decoder)
	d.buf = *bytes.NewBuffer(data)
	d.dec.Reset(&d.buf, opts...)
	err := m.readFrom(&d.dec)
	d.buf = bytes.Buffer{} // retain nothing of data (doc.go)
	d.dec.Reset(&d.buf)
	decoders.Put(d)
	return err
}

// readFrom reads one JSON object, and nothing after it, from dec into m.
func (m *members) readFrom(dec *jsontext.Decoder) error {
	if k := dec.PeekKind(); k != '{' {
		if err := dec.SkipValue(); err != nil {
			return err
		}
		if err := atEOF(dec); err != nil {
			return err
		}
		return notAnObject(k)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		slot := m.slot(name.String())
		if slot == nil {
			if err := dec.SkipValue(); err != nil { // a member no request uses
				return err
			}
			continue
		}
		if slot.kind != 0 && m.dup == "" { // with AllowDuplicateNames only
			m.dup = name.String()
		}
		*slot = member{kind: dec.PeekKind()}
		if slot == &m.entityUIDs && slot.kind == '[' {
			if err := readStrings(dec, slot); err != nil {
				return err
			}
			continue
		}
		if slot.kind != '"' {
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		v, err := dec.ReadToken()
		if err != nil {
			return err
		}
		slot.s = v.String()
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	return atEOF(dec)
}

// atEOF returns an error unless dec has nothing left but white space.
func atEOF(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("trailing data")
		}
		return err
	}
	return nil
}

// slot returns where the member called name goes, nil for a member no request uses.
func (m *members) slot(name string) *member {
	switch name {
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
	case "intent":
		return &m.intent
	case "entityUids":
		return &m.entityUIDs
	}
	return nil
}

// readStrings reads the array at dec into slot.list; the first element that is not a
// string is recorded in slot.bad (and the rest skipped). Its length is bounded by the
// frame's: MaxFrameSize was checked before.
func readStrings(dec *jsontext.Decoder, slot *member) error {
	if _, err := dec.ReadToken(); err != nil { // [
		return err
	}
	slot.list = []string{}
	for dec.PeekKind() != ']' {
		k := dec.PeekKind()
		if k != '"' {
			if slot.bad == 0 {
				slot.bad = k
			}
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		v, err := dec.ReadToken()
		if err != nil {
			return err
		}
		slot.list = append(slot.list, v.String())
	}
	_, err := dec.ReadToken() // ]
	return err
}

// syntaxError describes why data is not valid JSON, as encoding/json words it (the
// wording clients have been answered with), else as jsontext does. It runs only on
// that rare path.
func syntaxError(data []byte, err error) string {
	var v struct{}
	var se *json.SyntaxError
	if uerr := json.Unmarshal(data, &v); errors.As(uerr, &se) {
		return se.Error() + " at offset " + strconv.FormatInt(se.Offset, 10)
	} else if uerr != nil {
		return uerr.Error()
	}
	return err.Error()
}

// kind names the JSON type k.
func kind(k jsontext.Kind) string {
	switch k {
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
