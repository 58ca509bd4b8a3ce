package protocol

import "encoding/json"

// Viewer is one person viewing an entity (PROTOCOL.md §9): one entry per oid however
// many sockets they view it from, Since the earliest of them.
//
//	{"oid":"u-ada","name":"Ada Lovelace","since":"2026-12-02T09:15:00.123Z","state":"waiting","position":1}
//
// State and Position are version 3's (§9, §11): every entry the hub sends carries a
// State, and a waiting one its Position in line, 1 for the next. A Viewer the hub
// stores for one socket has neither (they are the entity's, worked out in Redis).
type Viewer struct {
	OID      string      `json:"oid"`
	Name     string      `json:"name"`
	Since    Time        `json:"since"`
	State    ViewerState `json:"state,omitempty"`
	Position int         `json:"position,omitempty"`
}

// Presence is the viewers of one entity, ordered by Since (version 2, §9). With an ID
// it answers view; without one it is a change, sent to every socket viewing the entity:
//
//	{"id":"20","type":"presence","entityType":"ApprovalRequest","entityUid":"r-1001",
//	 "viewers":[{"oid":"u-ada","name":"Ada Lovelace","since":"..Z"}]}
//
// Viewers marshals as [] when nil.
type Presence struct {
	ID         string   `json:"id,omitempty"`
	HasID      bool     `json:"-"` // the view carried an empty id: echo it
	EntityType string   `json:"entityType"`
	EntityUID  string   `json:"entityUid"`
	Viewers    []Viewer `json:"viewers"`
}

// MarshalJSON writes p as a presence frame.
func (p Presence) MarshalJSON() ([]byte, error) {
	if p.Viewers == nil {
		p.Viewers = []Viewer{}
	}
	return json.Marshal(struct {
		ID         *string   `json:"id,omitempty"`
		Type       FrameType `json:"type"`
		EntityType string    `json:"entityType"`
		EntityUID  string    `json:"entityUid"`
		Viewers    []Viewer  `json:"viewers"`
	}{idMember(p.ID, p.HasID), FramePresence, p.EntityType, p.EntityUID, p.Viewers})
}

// Nudge asks the holder of an entity to finish (version 2, §9). It goes to every socket
// of the holder that views the entity, on every instance:
//
//	{"type":"nudge","entityType":"ApprovalRequest","entityUid":"r-1001",
//	 "from":{"oid":"u-grace","name":"Grace Hopper"},"at":"..Z"}
type Nudge struct {
	EntityType string `json:"entityType"`
	EntityUID  string `json:"entityUid"`
	From       Holder `json:"from"`
	At         Time   `json:"at"`
}

// MarshalJSON writes n as a nudge frame.
func (n Nudge) MarshalJSON() ([]byte, error) {
	type fields Nudge // Nudge's members without its methods
	return json.Marshal(struct {
		Type FrameType `json:"type"`
		fields
	}{FrameNudge, fields(n)})
}
