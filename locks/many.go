package locks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lockhub/lockhub/protocol"
)

// Claims of many entities at once (PROTOCOL.md §12, version 3): one script decides a
// whole claim (scripts/claimmany.lua), all or nothing, with one event and one audit
// entry per entity and the fair share applied to the batch as a whole.

// ManyResult is the answer of ClaimMany or ReleaseMany.
type ManyResult struct {
	// Outcome is acquired, locked or unknown (ClaimMany), released or unknown
	// (ReleaseMany).
	Outcome protocol.Outcome
	// Locks are, on acquired, the caller's locks after the claim in the order asked;
	// on locked, the locks others hold that stood in the way (nothing was written).
	Locks []protocol.Lock
	// Count is how many of the entities the caller held and let go (ReleaseMany).
	Count int
}

// checkMany checks a bulk call: 1 to protocol.MaxBulk distinct valid uids of a lockable
// type, and a valid holder.
func (s *core) checkMany(tenant, entityType string, uids []string, h protocol.Holder) error {
	if err := protocol.CheckEntityUIDs("the uids", uids); err != nil {
		return err
	}
	for _, uid := range uids {
		if err := s.check(Ref{Tenant: tenant, Type: entityType, UID: uid}, &h); err != nil {
			return err
		}
	}
	return nil
}

// ClaimMany claims every entity of uids (one type) for h, or none (PROTOCOL.md §12). It
// answers acquired (every one is h's now: the free ones claimed, h's own renewed, keeping
// acquiredAtUtc; Locks in the order asked), locked (others hold some: Locks are theirs;
// nothing written) or unknown (fail open). A batch that would pass a quota of the fair
// share is refused whole with a *LimitError, one beyond the rate of changes (one per
// entity claimed) with a *RateError; uids that are not 1 to protocol.MaxBulk distinct
// answer a bad_request *protocol.Error, an invalid one an *InvalidEntityError.
//
// conn names the socket that claims, or is "" (HTTP): see Detach.
func (s *Locks) ClaimMany(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string) (ManyResult, error) {
	if err := s.checkMany(tenant, entityType, uids, h); err != nil {
		return ManyResult{}, err
	}
	return s.many(ctx, opClaimMany, func(ctx context.Context) (ManyResult, error) {
		return s.claimMany(ctx, tenant, entityType, uids, h, conn)
	})
}

func (s *core) claimMany(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string) (ManyResult, error) {
	first := Ref{Tenant: tenant, Type: entityType, UID: uids[0]}
	k := s.keys(first)
	prefix := lockKeyPrefix(tenant, entityType)
	lockKeys := make([]string, len(uids))
	for i, uid := range uids {
		lockKeys[i] = prefix + uid
	}
	for range casAttempts {
		read, err := s.rdb.MGet(ctx, lockKeys...).Result()
		if err != nil {
			return ManyResult{}, err
		}
		now := s.now()
		out := make([]protocol.Lock, len(uids))
		args := []any{h.OID, s.lease.Milliseconds(), now.Add(s.lease).UnixMilli(), s.indexTTL(), conn, len(uids), prefix}
		for i, uid := range uids {
			ref := Ref{Tenant: tenant, Type: entityType, UID: uid}
			stored, _ := read[i].(string)
			l := s.newLock(ref, h, now, now)
			if stored != "" {
				if cur, err := decodeLock(stored); err == nil && cur.HolderOID == h.OID {
					l = s.newLock(ref, h, cur.AcquiredAt.Time, now) // a renewal keeps acquiredAtUtc
				}
			}
			out[i] = l
			args = append(args, uid, stored, encodeLock(l))
		}
		st, raw, err := s.sc.claimMany.runRaw(ctx, s, k, s.pubArgs(tenant, now), s.auditArgs(now, &h, AuditClaim), args...)
		if err != nil {
			return ManyResult{}, err
		}
		switch st {
		case manyAcquired:
			for i := range uids {
				if read[i] == nil {
					s.published(protocol.OpAcquired, 1)
				} else {
					s.published(protocol.OpRenewed, 1)
				}
			}
			return ManyResult{Outcome: protocol.OutcomeAcquired, Locks: out}, nil
		case manyLocked:
			vs, _ := raw.([]any)
			held := make([]protocol.Lock, 0, len(vs))
			for _, v := range vs {
				str, _ := v.(string)
				l, err := decodeLock(str)
				if err != nil {
					return ManyResult{}, err
				}
				held = append(held, l)
			}
			return ManyResult{Outcome: protocol.OutcomeLocked, Locks: held}, nil
		case manyTooMany, manyRated:
			value, _ := raw.(string)
			return ManyResult{}, s.refused(ctx, tenant, st == manyTooMany, value)
		case manyRaced:
			continue // a value changed since the read: read again
		default:
			return ManyResult{}, &corruptError{fmt.Sprintf("claimmany script answered status %q", st)}
		}
	}
	return ManyResult{}, fmt.Errorf("%w: claimMany did not settle after %d attempts", errContention, casAttempts)
}

// ReleaseMany releases h's locks of uids (one type), each as Release would (PROTOCOL.md
// §12): an entity h does not hold is left alone, and one another socket of h still uses
// stays h's (through conn, "" over HTTP: dropped whoever uses it). It answers released
// with Count, how many of them h held, or unknown (fail open); a *RateError when h has
// fewer changes left than locks to drop (nothing written); uids as ClaimMany.
func (s *Locks) ReleaseMany(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string) (ManyResult, error) {
	return s.ReleaseManyBecause(ctx, tenant, entityType, uids, h, conn, AuditRelease)
}

// ReleaseManyBecause is ReleaseMany recording why in the audit trail, per entity:
// AuditRelease, or AuditDecision when a decision ended the edits (a bulk approve).
func (s *Locks) ReleaseManyBecause(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string, reason AuditReason) (ManyResult, error) {
	if err := s.checkMany(tenant, entityType, uids, h); err != nil {
		return ManyResult{}, err
	}
	return s.many(ctx, opReleaseMany, func(ctx context.Context) (ManyResult, error) {
		return s.releaseMany(ctx, tenant, entityType, uids, h, conn, reason)
	})
}

// many runs a claim or release of many entities: counted by its outcome, answered with
// the fair share's *LimitError or *RateError when refused (counted as refused), and
// unknown when Redis does not answer (failing open).
func (s *core) many(ctx context.Context, op opName, f func(context.Context) (ManyResult, error)) (ManyResult, error) {
	var refused error
	res, ok := runOp(ctx, s, op, func(ctx context.Context) (ManyResult, error) {
		r, err := f(ctx)
		if errors.As(err, new(*LimitError)) || errors.As(err, new(*RateError)) {
			refused = err
			return ManyResult{}, nil
		}
		return r, err
	}, func(r ManyResult) outcomeLabel {
		if refused != nil {
			return labelRefused
		}
		return outcomeLabel(r.Outcome)
	})
	switch {
	case !ok:
		return ManyResult{Outcome: protocol.OutcomeUnknown}, nil
	case refused != nil:
		return ManyResult{}, refused
	}
	return res, nil
}

func (s *core) releaseMany(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string, reason AuditReason) (ManyResult, error) {
	now := s.now()
	args := []any{h.OID, conn, len(uids), lockKeyPrefix(tenant, entityType)}
	for _, uid := range uids {
		args = append(args, uid)
	}
	st, raw, err := s.sc.releaseMany.runRaw(ctx, s, s.keys(Ref{Tenant: tenant, Type: entityType, UID: uids[0]}),
		s.pubArgs(tenant, now), s.auditArgs(now, &h, reason), args...)
	if err != nil {
		return ManyResult{}, err
	}
	value, _ := raw.(string)
	switch st {
	case manyReleased:
		held, dropped, _ := strings.Cut(value, " ")
		n, err := strconv.Atoi(held)
		d, err2 := strconv.Atoi(dropped)
		if err != nil || err2 != nil {
			return ManyResult{}, &corruptError{"releasemany script answered counts that are not numbers: " + value}
		}
		s.published(protocol.OpReleased, d)
		return ManyResult{Outcome: protocol.OutcomeReleased, Count: n}, nil
	case manyRated:
		return ManyResult{}, s.refused(ctx, tenant, false, value)
	}
	return ManyResult{}, &corruptError{fmt.Sprintf("releasemany script answered status %q", st)}
}

// LookupMany returns the live locks of uids (one type), one MGET: nil where an entity is
// free. It returns ErrUnavailable when the store did not answer, and refuses a list as
// ClaimMany does: what a guard of a bulk mutator reads (web.GuardMany).
func (s *Locks) LookupMany(ctx context.Context, tenant, entityType string, uids []string) ([]*protocol.Lock, error) {
	if err := protocol.CheckEntityUIDs("the uids", uids); err != nil {
		return nil, err
	}
	for _, uid := range uids {
		if err := s.check(Ref{Tenant: tenant, Type: entityType, UID: uid}, nil); err != nil {
			return nil, err
		}
	}
	out, ok := runOp(ctx, s.core, opGet, func(ctx context.Context) ([]*protocol.Lock, error) {
		prefix := lockKeyPrefix(tenant, entityType)
		keys := make([]string, len(uids))
		for i, uid := range uids {
			keys[i] = prefix + uid
		}
		vs, err := s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, err
		}
		out := make([]*protocol.Lock, len(uids))
		for i, v := range vs {
			str, ok := v.(string)
			if !ok {
				continue
			}
			l, err := decodeLock(str)
			if err != nil {
				continue // not a lock: nothing to enforce (as Lookup would fail, the guard passes)
			}
			out[i] = &l
		}
		return out, nil
	}, func([]*protocol.Lock) outcomeLabel { return labelListed })
	if !ok {
		return nil, ErrUnavailable
	}
	return out, nil
}
