package protocol

import "encoding/json"

// The waiting line and claims of many entities at once (version 3, PROTOCOL.md §9,
// §11, §12).

// Intent is what a viewer wants of an entity (version 3, §9): to edit it (then they
// wait in line while someone else holds it, §11) or only to look, the default.
type Intent string

const (
	IntentLook Intent = "look" // the default: only looks
	IntentEdit Intent = "edit" // wants to edit: waits in line while someone else holds the lock
)

// ViewerState is a viewer entry's state (version 3, §9).
type ViewerState string

const (
	StateEditing ViewerState = "editing" // holds the lock
	StateWaiting ViewerState = "waiting" // intent edit while someone else holds it; Position says where
	StateLooking ViewerState = "looking" // intent look, or nobody holds it
)

// MaxBulk is the most entities one claimMany, releaseMany or bulk HTTP call names (§12).
const MaxBulk = 100

// Handoff tells each socket of the new holder that views the entity with intent edit
// that a freed lock went to them as the first in line (version 3, §11): the lock is
// theirs, through their earliest waiting socket, as if it had claimed it.
//
//	{"type":"handoff","entityType":"ApprovalRequest","entityUid":"r-1001","lock":{..}}
type Handoff struct {
	EntityType string `json:"entityType"`
	EntityUID  string `json:"entityUid"`
	Lock       Lock   `json:"lock"`
}

// MarshalJSON writes h as a handoff frame.
func (h Handoff) MarshalJSON() ([]byte, error) {
	type fields Handoff // Handoff's members without its methods
	return json.Marshal(struct {
		Type FrameType `json:"type"`
		fields
	}{FrameHandoff, fields(h)})
}

// CheckEntityUIDs refuses, as bad_request, a bulk list that is not 1 to MaxBulk
// distinct uids (§12); its message names the list as what ("entityUids" on the socket,
// "uids" over HTTP). Each uid's syntax is the store's to judge (invalid_entity).
func CheckEntityUIDs(what string, uids []string) *Error {
	if len(uids) == 0 {
		return badRequest("", "%s must name at least one entity", what)
	}
	if len(uids) > MaxBulk {
		return badRequest("", "%s names %d entities; at most %d at once", what, len(uids), MaxBulk)
	}
	seen := make(map[string]struct{}, len(uids))
	for _, u := range uids {
		if _, dup := seen[u]; dup {
			return badRequest("", "%s names %s twice", what, quoteShort(u))
		}
		seen[u] = struct{}{}
	}
	return nil
}

// checkIntent refuses an intent other than edit or look.
func checkIntent(s string) *Error {
	switch Intent(s) {
	case IntentEdit, IntentLook:
		return nil
	}
	return badRequest("", "intent must be %q or %q, not %s", IntentEdit, IntentLook, quoteShort(s))
}
