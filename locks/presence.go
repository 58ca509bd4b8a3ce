package locks

import (
	"bytes"
	"context"
	_ "embed" // presence.lua, nudge.lua
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lockhub/lockhub/protocol"
)

// Presence and nudges (PROTOCOL.md §9).
//
// Who views an entity is kept in Redis, in the tenant's slot like its lock, so that
// every instance sees the viewers of every other: per entity a sorted set of the
// viewing sockets' ids scored by when their view runs out, and a hash of who each
// socket is. A socket's view lives for the ttl its hub gives and is refreshed by that
// hub while the socket lives (RefreshViews), so the views of an instance that died run
// out by themselves. Every change is one script (scripts/presence.lua) that drops the
// views that ran out, makes the change, and compares the people viewing with those it
// announced last: a change of them is published on the tenant's channel of the change
// feed in the same step, so it is announced once, and in order, whichever instance
// made it.

var (
	//go:embed scripts/presence.lua
	presenceSrc string
	//go:embed scripts/nudge.lua
	nudgeSrc string
)

// viewMargin is how long the presence keys outlive their latest view.
const viewMargin = 5 * time.Second

// View is one socket's view of an entity.
type View struct {
	Conn   string          // the socket's connection id
	Viewer protocol.Viewer // who views, and since when this socket does
	// Intent is what the socket wants (version 3, PROTOCOL.md §9): with IntentEdit it
	// waits in the entity's line while someone else holds the lock (§11). Empty means
	// IntentLook.
	Intent protocol.Intent
}

// Viewers are the people viewing an entity, as of one version of them.
type Viewers struct {
	List []protocol.Viewer
	// Version grows with every change of the entity's viewers, on every instance: of
	// two lists of one entity, the one of the greater version is the newer. Zero when
	// unknown (the store failed open).
	Version int64
}

// PresenceChange is a change of an entity's viewers, from the change feed.
type PresenceChange struct {
	Ref Ref
	// Frame is the protocol.Presence frame, without id, to send to the entity's
	// viewers. Shared by every receiver: do not modify.
	Frame []byte
	// Version is the version of the viewers it lists (see Viewers).
	Version int64
}

// NudgeChange is a nudge from the change feed, for the sockets of the holder To that
// view Ref.
type NudgeChange struct {
	Ref   Ref
	To    string         // the oid of the holder asked
	Nudge protocol.Nudge // the frame to send them
}

// TooSoonError refuses a nudge that follows the caller's last one of the same entity
// too soon (PROTOCOL.md §9: one per person per entity per 30 s). Transports answer it
// as rate_limited.
type TooSoonError struct {
	Wait time.Duration // until the next nudge may go
}

func (e *TooSoonError) Error() string { return "locks: " + e.ClientMessage() }

// ErrorCode returns protocol.CodeRateLimited.
func (e *TooSoonError) ErrorCode() protocol.ErrorCode { return protocol.CodeRateLimited }

// ClientMessage says when the next nudge may go.
func (e *TooSoonError) ClientMessage() string {
	secs := max(1, int((e.Wait+time.Second-1)/time.Second))
	return fmt.Sprintf("you asked the holder to finish a moment ago; you may ask again in %d s", secs)
}

var _ protocol.ClientError = (*TooSoonError)(nil)

// View adds socket v.Conn to the viewers of ref until ttl from now (a view already
// there keeps its since), with v.Intent (a socket that views with intent edit joins the
// line unless it is in it already; with look it leaves it), and returns the viewers of
// ref, the socket's person among them. A change of them is announced on the change feed. It fails open: when Redis
// cannot be reached it answers no viewers, and logs and counts why; the caller keeps
// the view and refreshes it, so it is back when Redis is.
func (s *Presence) View(ctx context.Context, ref Ref, v View, ttl time.Duration) (Viewers, error) {
	if err := s.check(ref, &protocol.Holder{OID: v.Viewer.OID}); err != nil {
		return Viewers{}, err
	}
	viewer, err := json.Marshal(v.Viewer)
	if err != nil {
		return Viewers{}, err // a Viewer of valid strings always encodes
	}
	intent := protocol.IntentLook
	if v.Intent == protocol.IntentEdit {
		intent = protocol.IntentEdit
	}
	head := lineHead(ref, protocol.Holder{OID: v.Viewer.OID, Name: v.Viewer.Name})
	res, _ := runOp(ctx, s.core, opView, func(ctx context.Context) (presenceReply, error) {
		return s.presence(ctx, ref, "view", v.Conn, ttl.Milliseconds(), v.Viewer.OID,
			v.Viewer.Since.UnixMilli(), viewer, string(intent), head)
	}, presenceLabel)
	s.expired(ctx, ref, res.expired)
	return res.viewers, nil
}

// Unview drops the views of ref by the sockets conns at once. It fails open.
func (s *Presence) Unview(ctx context.Context, ref Ref, conns ...string) error {
	if err := s.check(ref, nil); err != nil {
		return err
	}
	if len(conns) == 0 {
		return nil
	}
	runOp(ctx, s.core, opUnview, func(ctx context.Context) (presenceReply, error) {
		return s.presence(ctx, ref, "unview", anys(conns)...)
	}, presenceLabel)
	return nil
}

// LeaveViews ends the views of ref by the sockets conns at the time at rather than now:
// the sockets of an instance shutting down, whose clients reconnect elsewhere and view
// again meanwhile, so that nobody seems to leave and come back. A view that ran out by
// at ends at its own time. It fails open.
func (s *Presence) LeaveViews(ctx context.Context, ref Ref, at time.Time, conns ...string) error {
	if err := s.check(ref, nil); err != nil {
		return err
	}
	if len(conns) == 0 {
		return nil
	}
	runOp(ctx, s.core, opUnview, func(ctx context.Context) (presenceReply, error) {
		// From now by this instance's clock, which need not agree with the server's.
		in := max(at.Sub(s.now()), 0)
		return s.presence(ctx, ref, "leave", append([]any{in.Milliseconds()}, anys(conns)...)...)
	}, presenceLabel)
	return nil
}

// RefreshViews extends the views of ref by the sockets conns until ttl from now, and
// returns the viewers of ref and which of conns Redis no longer had (it restarted, or
// the hub could not refresh in time): their hub views again with View. With no conns
// it only reads the viewers (dropping those that ran out). When it fails open the
// error matches ErrUnavailable: the caller must not take "no viewers" for an answer.
func (s *Presence) RefreshViews(ctx context.Context, ref Ref, ttl time.Duration, conns ...string) (viewers Viewers, missing []string, err error) {
	if err := s.check(ref, nil); err != nil {
		return Viewers{}, nil, err
	}
	res, ok := runOp(ctx, s.core, opViewRefresh, func(ctx context.Context) (presenceReply, error) {
		return s.presence(ctx, ref, "refresh", append([]any{ttl.Milliseconds()}, anys(conns)...)...)
	}, presenceLabel)
	if !ok {
		return Viewers{}, nil, ErrUnavailable
	}
	s.expired(ctx, ref, res.expired)
	return res.viewers, res.missing, nil
}

// expired releases what a hand-off gave to sockets whose views of ref ran out before
// any hub took it up (PROTOCOL.md §11: a socket of an instance that died). Each is a
// script that changes nothing unless the lock was handed to that socket; they are few.
func (s *Presence) expired(ctx context.Context, ref Ref, conns []string) {
	for _, conn := range conns {
		runOp(ctx, s.core, opHanded, func(ctx context.Context) (Result, error) { return s.releaseHanded(ctx, ref, conn) }, outcomeOf)
	}
}

// presenceReply is what presence.lua answers.
type presenceReply struct {
	viewers Viewers
	missing []string
	expired []string // the sockets whose views this call found run out
}

func presenceLabel(presenceReply) outcomeLabel { return labelViewed }

// presence runs presence.lua on ref for op with args. Views run out by the clock of the
// Redis server that holds ref's keys, not this instance's.
func (s *core) presence(ctx context.Context, ref Ref, op string, args ...any) (presenceReply, error) {
	head := ref.Tenant + "\n" + `{"type":"` + string(protocol.FramePresence) + `","entityType":"` + ref.Type +
		`","entityUid":"` + ref.UID + `","viewers":`
	argv := append([]any{s.publishCommand(), s.channel(ref.Tenant), head, s.shift.Milliseconds(), viewMargin.Milliseconds(), op}, args...)
	reply, err := s.sc.presence.Run(ctx, s.rdb, []string{ViewsKey(ref), ViewersKey(ref), LineKey(ref), LockKey(ref)}, argv...).Slice()
	if err != nil {
		return presenceReply{}, err
	}
	if len(reply) != 4 {
		return presenceReply{}, &corruptError{fmt.Sprintf("presence script answered %d values, want 4", len(reply))}
	}
	js, _ := reply[0].(string)
	var res presenceReply
	if err := json.Unmarshal([]byte(js), &res.viewers.List); err != nil {
		return presenceReply{}, &corruptError{"presence script answered viewers that are not JSON: " + err.Error()}
	}
	ver, _ := reply[2].(string)
	if res.viewers.Version, err = strconv.ParseInt(ver, 10, 64); err != nil {
		return presenceReply{}, &corruptError{"presence script answered a version that is not a number: " + err.Error()}
	}
	missing, _ := reply[1].([]any)
	for _, m := range missing {
		if id, ok := m.(string); ok {
			res.missing = append(res.missing, id)
		}
	}
	expired, _ := reply[3].([]any)
	for _, m := range expired {
		if id, ok := m.(string); ok {
			res.expired = append(res.expired, id)
		}
	}
	return res, nil
}

// Nudge asks the holder of ref, on behalf of from, to finish: the nudge is published for
// the holder's sockets that view ref, on every instance. It answers nudged, notHeld
// (nobody holds ref, or from does) or unknown (fail open: nothing was sent), and a
// *TooSoonError when from nudged ref's holder less than every ago.
func (s *Presence) Nudge(ctx context.Context, ref Ref, from protocol.Holder, every time.Duration) (protocol.Outcome, error) {
	if err := s.check(ref, &from); err != nil {
		return "", err
	}
	type answer struct {
		outcome protocol.Outcome
		wait    time.Duration
	}
	res, ok := runOp(ctx, s.core, opNudge, func(ctx context.Context) (answer, error) {
		now := s.now()
		frame, err := json.Marshal(protocol.Nudge{EntityType: ref.Type, EntityUID: ref.UID, From: from, At: protocol.NewTime(now)})
		if err != nil {
			return answer{}, err
		}
		// The feed's message: the frame with the holder's oid added as "to", which the
		// script appends, having read whose lock it is.
		head := ref.Tenant + "\n" + string(frame[:len(frame)-1]) + `,"to":`
		reply, err := s.sc.nudge.Run(ctx, s.rdb, []string{LockKey(ref), nudgeKey(ref, from.OID)},
			s.publishCommand(), s.channel(ref.Tenant), head, from.OID, every.Milliseconds()).Slice()
		if err != nil {
			return answer{}, err
		}
		if len(reply) != 2 {
			return answer{}, &corruptError{fmt.Sprintf("nudge script answered %d values, want 2", len(reply))}
		}
		st, _ := reply[0].(string)
		wait, _ := reply[1].(int64)
		switch st {
		case "nudged":
			return answer{outcome: protocol.OutcomeNudged}, nil
		case "notHeld":
			return answer{outcome: protocol.OutcomeNotHeld}, nil
		case "rateLimited":
			return answer{outcome: outcomeTooSoon, wait: time.Duration(wait) * time.Millisecond}, nil
		}
		return answer{}, &corruptError{fmt.Sprintf("nudge script answered status %q", st)}
	}, func(a answer) outcomeLabel { return outcomeLabel(a.outcome) })
	switch {
	case !ok:
		return protocol.OutcomeUnknown, nil
	case res.outcome == outcomeTooSoon:
		return "", &TooSoonError{Wait: res.wait}
	}
	return res.outcome, nil
}

// outcomeTooSoon labels a nudge refused for the rate; it answers a TooSoonError.
const outcomeTooSoon protocol.Outcome = "rateLimited"

// anys converts strings to script arguments.
func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Messages of lockhub's own on the change feed besides lock events: their frames begin
// with these bytes, as the store writes them.
var (
	presencePrefix = []byte(`{"type":"` + string(protocol.FramePresence) + `",`)
	nudgePrefix    = []byte(`{"type":"` + string(protocol.FrameNudge) + `",`)
)

// feedNotice reads a presence or nudge message of the feed (after its tenant) and
// delivers it to h; it reports false for any other message (a lock event).
func feedNotice(tenant string, frame []byte, h FeedHandler) (bool, error) {
	var head struct {
		EntityType string `json:"entityType"`
		EntityUID  string `json:"entityUid"`
	}
	switch {
	case bytes.HasPrefix(frame, presencePrefix):
		// The frame, then its version on a line of its own (presence.lua).
		i := bytes.LastIndexByte(frame, '\n')
		if i < 0 {
			return true, errors.New("locks: presence message without a version")
		}
		version, err := strconv.ParseInt(string(frame[i+1:]), 10, 64)
		if err != nil {
			return true, fmt.Errorf("locks: presence message version: %w", err)
		}
		frame = frame[:i]
		if err := json.Unmarshal(frame, &head); err != nil {
			return true, fmt.Errorf("locks: presence message: %w", err)
		}
		ref := Ref{Tenant: tenant, Type: head.EntityType, UID: head.EntityUID}
		if err := ref.Validate(); err != nil {
			return true, err
		}
		h.Presence(PresenceChange{Ref: ref, Frame: frame, Version: version})
		return true, nil
	case bytes.HasPrefix(frame, handoffPrefix):
		c, err := readHandoff(tenant, frame)
		if err != nil {
			return true, err
		}
		h.Handoff(c)
		return true, nil
	case bytes.HasPrefix(frame, nudgePrefix):
		var m struct {
			protocol.Nudge
			To string `json:"to"`
		}
		if err := json.Unmarshal(frame, &m); err != nil {
			return true, fmt.Errorf("locks: nudge message: %w", err)
		}
		ref := Ref{Tenant: tenant, Type: m.EntityType, UID: m.EntityUID}
		if err := ref.Validate(); err != nil {
			return true, err
		}
		if !ValidOID(m.To) {
			return true, errors.New("locks: nudge message without a valid holder oid " + strconv.Quote(m.To))
		}
		h.Nudge(NudgeChange{Ref: ref, To: m.To, Nudge: m.Nudge})
		return true, nil
	}
	return false, nil
}
