package locks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockhub/lockhub/protocol"
)

// The waiting line (PROTOCOL.md §11, version 3).
//
// A socket that views an entity with intent edit is in the entity's line
// (lockline:{<tenant>}:<type>:<uid>, kept by presence.lua beside the views), with when
// it started waiting and the start of the lock value a hand-off would give its person,
// built here by Go like every lock value (lineHead). Every script that finds a lock
// free (release, detach, force release, the sweep's expiries and other programs'
// releases, handed) gives it, in the same atomic step, to the first person in line who
// is still allowed it (line.lua), and every script that changes a lock's holder
// announces the viewers, whose states and positions follow from it (people.lua).
// The hubs learn of a hand-off from the change feed (Handoff): the socket it went
// through takes the lock up as its own.

// HandoffChange is a hand-off from the change feed: Ref's lock went to the person To
// through their socket Conn, for the hubs to tell every socket of To that views Ref with
// intent edit, and for Conn's hub to hold the lock through Conn.
type HandoffChange struct {
	Ref     Ref
	To      string           // the new holder's oid
	Conn    string           // the socket it went through
	Handoff protocol.Handoff // the frame to send
}

// lineArgs is the line block of a write script (line.lua, lining): pub is its prelude
// arguments, whose fifth is now, Unix ms.
func (s *core) lineArgs(pub []any) []any {
	ms, _ := pub[4].(int64)
	now := time.UnixMilli(ms)
	return []any{s.shift.Milliseconds(), protocol.NewTime(now).String(), protocol.NewTime(now.Add(s.lease)).String(),
		s.lease.Milliseconds(), viewMargin.Milliseconds()}
}

// lineHead is the start of the lock value a hand-off of ref gives h, up to and with
// `"acquiredAtUtc":"`: built by Go, byte for byte as encodeLock writes it, so that a
// value the script completes with the two timestamps is a value Go would have written.
func lineHead(ref Ref, h protocol.Holder) string {
	v := encodeLock(protocol.Lock{EntityType: ref.Type, EntityUID: ref.UID, HolderOID: h.OID, HolderName: h.Name})
	head, _, ok := strings.Cut(v, `"acquiredAtUtc":`)
	if !ok {
		panic("locks: a lock value without acquiredAtUtc")
	}
	return head + `"acquiredAtUtc":"`
}

// handedOff counts what a script's hand-offs did (its reply's handed values and passed
// settings): each hand-off is an Acquired published and audited; each person passed
// over at a limit is a limit hit, warned of like a refusal.
func (s *core) handedOff(ctx context.Context, tenant string, handed, passed any) {
	if vs, _ := handed.([]any); len(vs) > 0 {
		s.published(protocol.OpAcquired, len(vs))
		s.met.handoffs.Add(float64(len(vs)))
	}
	ps, _ := passed.([]any)
	for _, p := range ps {
		setting, _ := p.(string)
		if setting != SettingLocksPerPerson && setting != SettingLocksPerTenant {
			continue
		}
		s.met.limits.WithLabelValues(setting).Inc()
		s.met.passedOver.WithLabelValues(setting).Inc()
		s.warnLimit(ctx, setting, tenant)
	}
}

// ReleaseHanded releases ref's lock when a hand-off gave it to socket conn and no hub
// took it up before conn's view ended (PROTOCOL.md §11: its socket closed and the grace
// passed, or its instance died and the view ran out), as a lock of a closed socket is
// released, handing it on to the next in line. Otherwise it does nothing. It answers
// released (Lock is the lock that was held), notHeld or unknown.
func (s *Locks) ReleaseHanded(ctx context.Context, ref Ref, conn string) (Result, error) {
	if err := s.check(ref, nil); err != nil {
		return Result{}, err
	}
	return s.write(ctx, opHanded, func(ctx context.Context) (Result, error) { return s.releaseHanded(ctx, ref, conn) }), nil
}

func (s *core) releaseHanded(ctx context.Context, ref Ref, conn string) (Result, error) {
	now := s.now()
	st, stored, err := s.sc.handed.run(ctx, s, s.keys(ref), s.pubArgs(ref.Tenant, now), s.auditArgs(now, nil, AuditDisconnect), conn)
	if err != nil {
		return Result{}, err
	}
	switch st {
	case handedReleased:
		s.published(protocol.OpReleased, 1)
		l, err := decodeLock(stored)
		if err != nil {
			return Result{}, err
		}
		return Result{Outcome: protocol.OutcomeReleased, Lock: &l}, nil
	case handedKept:
		return Result{Outcome: protocol.OutcomeNotHeld}, nil
	}
	return Result{}, &corruptError{fmt.Sprintf("handed script answered status %q", st)}
}

// handoffPrefix begins a hand-off message's frame on the feed (line.lua).
var handoffPrefix = []byte(`{"type":"` + string(protocol.FrameHandoff) + `",`)

// readHandoff reads a hand-off message of the feed (after its tenant): the frame with
// "to" (the oid) and "conn" (the socket) added.
func readHandoff(tenant string, frame []byte) (HandoffChange, error) {
	var m struct {
		EntityType string        `json:"entityType"`
		EntityUID  string        `json:"entityUid"`
		Lock       protocol.Lock `json:"lock"`
		To         string        `json:"to"`
		Conn       string        `json:"conn"`
	}
	if err := json.Unmarshal(frame, &m); err != nil {
		return HandoffChange{}, fmt.Errorf("locks: handoff message: %w", err)
	}
	ref := Ref{Tenant: tenant, Type: m.EntityType, UID: m.EntityUID}
	if err := ref.Validate(); err != nil {
		return HandoffChange{}, err
	}
	if !ValidOID(m.To) || m.Conn == "" || m.Lock.HolderOID != m.To {
		return HandoffChange{}, errors.New("locks: handoff message without a valid holder and socket")
	}
	return HandoffChange{Ref: ref, To: m.To, Conn: m.Conn,
		Handoff: protocol.Handoff{EntityType: ref.Type, EntityUID: ref.UID, Lock: m.Lock}}, nil
}
