package locks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/protocol"
)

// The lock operations of PROTOCOL.md §1–§3 (Locks). Every write is one Lua script
// touching the lock key, its type's index and the values hash, all in the tenant's
// slot; a claim or takeover whose lock changes hands under each of its retries fails
// open as ReasonContention.

// Lease returns the lease a claim or renewal grants.
func (s *Locks) Lease() time.Duration { return s.lease }

// Registry returns the lockable types.
func (s *Locks) Registry() *Registry { return s.reg }

// Result is the answer of a lock operation.
type Result struct {
	Outcome protocol.Outcome
	// Lock is the lock after the operation (acquired, renewed, takenOver), the lock
	// that stands in the way (locked, forbidden, lost), or the lock that was released.
	// Nil where there is none, and on OutcomeUnknown.
	Lock *protocol.Lock
	// PreviousHolder is set on OutcomeTakenOver.
	PreviousHolder *protocol.Holder
	// Kept is set on a release through a socket answered OutcomeReleased that let go of
	// that socket's share only: another socket of the holder keeps the lock (Release).
	Kept bool

	// refused is a change the fair share refused (*LimitError, *RateError): the public
	// method answers it as its error. Nothing was written.
	refused error
}

// answer turns what write answered into a public method's answer.
func answer(res Result) (Result, error) {
	if res.refused != nil {
		return Result{}, res.refused
	}
	return res, nil
}

// Claim takes the lock on ref for h. It answers acquired, renewed (h already held it:
// the lease is extended, acquiredAtUtc kept), locked (someone else holds it; Lock says
// who) or unknown (fail open, also when the lock changed hands under every retry:
// ReasonContention).
//
// conn names the socket that claims, or is "" (HTTP): see Detach.
func (s *Locks) Claim(ctx context.Context, ref Ref, h protocol.Holder, conn string) (Result, error) {
	if err := s.check(ref, &h); err != nil {
		return Result{}, err
	}
	return answer(s.write(ctx, opClaim, func(ctx context.Context) (Result, error) { return s.claim(ctx, ref, h, conn) }))
}

func (s *core) claim(ctx context.Context, ref Ref, h protocol.Holder, conn string) (Result, error) {
	k := s.keys(ref)
	for range casAttempts {
		now := s.now()
		l := s.newLock(ref, h, now, now)
		st, stored, err := s.sc.claim.run(ctx, s, k, s.pubArgs(ref.Tenant, now), s.auditArgs(now, &h, AuditClaim),
			h.OID, encodeLock(l), s.lease.Milliseconds(), l.ExpiresAt.UnixMilli(), s.indexTTL(), conn)
		if err != nil {
			return Result{}, err
		}
		switch st {
		case claimAcquired:
			s.published(protocol.OpAcquired, 1)
			return Result{Outcome: protocol.OutcomeAcquired, Lock: &l}, nil
		case claimTooMany, claimRated:
			return Result{refused: s.refused(ctx, ref.Tenant, st == claimTooMany, stored)}, nil
		case claimLocked:
			cur, err := decodeLock(stored)
			if err != nil {
				return Result{}, err
			}
			return Result{Outcome: protocol.OutcomeLocked, Lock: &cur}, nil
		case claimMine: // another tab of h's: renew it, keeping acquiredAtUtc
			res, err := s.extend(ctx, ref, k, h, conn, stored)
			if err != nil || res.Outcome == protocol.OutcomeRenewed {
				return res, err
			}
			// Lost between the two scripts (it ran out or was taken over): claim afresh.
		default:
			return Result{}, &corruptError{fmt.Sprintf("claim script answered status %q", st)}
		}
	}
	return Result{}, fmt.Errorf("%w: claim did not settle after %d attempts", errContention, casAttempts)
}

// Renew extends h's lease on ref. It answers renewed, lost (the lock is gone, Lock nil,
// or someone else's, Lock says whose) or unknown.
func (s *Locks) Renew(ctx context.Context, ref Ref, h protocol.Holder, conn string) (Result, error) {
	if err := s.check(ref, &h); err != nil {
		return Result{}, err
	}
	return s.write(ctx, opRenew, func(ctx context.Context) (Result, error) { return s.renew(ctx, ref, h, conn) }), nil
}

func (s *core) renew(ctx context.Context, ref Ref, h protocol.Holder, conn string) (Result, error) {
	k := s.keys(ref)
	stored, err := s.rdb.Get(ctx, k.lock).Result()
	if errors.Is(err, redis.Nil) {
		return Result{Outcome: protocol.OutcomeLost}, nil
	}
	if err != nil {
		return Result{}, err
	}
	cur, err := decodeLock(stored)
	if err != nil {
		return Result{}, err
	}
	if cur.HolderOID != h.OID {
		return Result{Outcome: protocol.OutcomeLost, Lock: &cur}, nil
	}
	return s.extend(ctx, ref, k, h, conn, stored)
}

// extend renews h's lock by compare-and-set on the stored bytes, keeping acquiredAtUtc
// (the script publishes Renewed). It answers renewed or lost.
func (s *core) extend(ctx context.Context, ref Ref, k keys, h protocol.Holder, conn, stored string) (Result, error) {
	cur, err := decodeLock(stored)
	if err != nil {
		return Result{}, err
	}
	for range casAttempts {
		now := s.now()
		l := s.newLock(ref, h, cur.AcquiredAt.Time, now)
		st, got, err := s.sc.renew.run(ctx, s, k, s.pubArgs(ref.Tenant, now), s.auditArgs(now, &h, ""),
			h.OID, stored, encodeLock(l), s.lease.Milliseconds(), l.ExpiresAt.UnixMilli(), s.indexTTL(), conn)
		if err != nil {
			return Result{}, err
		}
		switch st {
		case renewRenewed:
			s.published(protocol.OpRenewed, 1)
			return Result{Outcome: protocol.OutcomeRenewed, Lock: &l}, nil
		case renewLost:
			if got == "" {
				return Result{Outcome: protocol.OutcomeLost}, nil
			}
			other, err := decodeLock(got)
			if err != nil {
				return Result{}, err
			}
			return Result{Outcome: protocol.OutcomeLost, Lock: &other}, nil
		case renewRaced:
			// Another socket of the same holder renewed in between: try again on its value.
			stored = got
			if cur, err = decodeLock(got); err != nil {
				return Result{}, err
			}
		default:
			return Result{}, &corruptError{fmt.Sprintf("renew script answered status %q", st)}
		}
	}
	// Still the caller's, renewed moments ago by another of its sockets: that is renewed.
	return Result{Outcome: protocol.OutcomeRenewed, Lock: &cur}, nil
}

// Release drops h's lock on ref. It answers released (Lock is the lock that was held),
// notHeld (free, Lock nil, or someone else's, Lock says whose) or unknown. Released
// through socket conn ("" over HTTP), it lets go of that socket's share only: while
// another socket of h still uses the lock (the same person in another tab, see Detach)
// the lock stays h's, nothing is published, and the answer is still released, with
// Kept set. When the sockets left prove to be a dead instance's, the lock goes as soon
// as that instance is found (Member), not a grace later.
func (s *Locks) Release(ctx context.Context, ref Ref, h protocol.Holder, conn string) (Result, error) {
	return s.ReleaseBecause(ctx, ref, h, conn, AuditRelease)
}

// ReleaseBecause is Release recording why in the audit trail (PROTOCOL.md §10):
// AuditRelease, or AuditDecision when a decision on the entity ended the edit.
func (s *Locks) ReleaseBecause(ctx context.Context, ref Ref, h protocol.Holder, conn string, reason AuditReason) (Result, error) {
	if err := s.check(ref, &h); err != nil {
		return Result{}, err
	}
	return answer(s.write(ctx, opRelease, func(ctx context.Context) (Result, error) { return s.release(ctx, ref, h, conn, reason) }))
}

func (s *core) release(ctx context.Context, ref Ref, h protocol.Holder, conn string, reason AuditReason) (Result, error) {
	now := s.now()
	st, stored, err := s.sc.release.run(ctx, s, s.keys(ref), s.pubArgs(ref.Tenant, now), s.auditArgs(now, &h, reason),
		h.OID, conn)
	if err != nil {
		return Result{}, err
	}
	if st == releaseRated { // its value is the wait, not a lock
		return Result{refused: s.refused(ctx, ref.Tenant, false, stored)}, nil
	}
	var lock *protocol.Lock
	if stored != "" {
		l, err := decodeLock(stored)
		if err != nil {
			return Result{}, err
		}
		lock = &l
	}
	switch st {
	case releaseReleased:
		s.published(protocol.OpReleased, 1)
		return Result{Outcome: protocol.OutcomeReleased, Lock: lock}, nil
	case releaseKept: // released for conn; another socket of h keeps it
		return Result{Outcome: protocol.OutcomeReleased, Lock: lock, Kept: true}, nil
	case releaseNotHeld:
		return Result{Outcome: protocol.OutcomeNotHeld, Lock: lock}, nil
	}
	return Result{}, &corruptError{fmt.Sprintf("release script answered status %q", st)}
}

// Detach tells the store that socket conn of h is gone. Each socket that claims,
// renews or takes over a lock is remembered with it (in lockconn:{<tenant>}:<type>:<uid>,
// a set of connection ids that lives as long as the lease); Detach forgets conn, and
// when release is true and no other socket is left, releases the lock and publishes
// Released. So the same person in two tabs, on one instance or two, keeps the lock
// while either tab is open. It answers released, notHeld (kept, gone or someone
// else's) or unknown.
func (s *Locks) Detach(ctx context.Context, ref Ref, h protocol.Holder, conn string, release bool) (Result, error) {
	if err := s.check(ref, &h); err != nil {
		return Result{}, err
	}
	return s.write(ctx, opDetach, func(ctx context.Context) (Result, error) { return s.detach(ctx, ref, h, conn, release) }), nil
}

func (s *core) detach(ctx context.Context, ref Ref, h protocol.Holder, conn string, release bool) (Result, error) {
	rel := "0"
	if release {
		rel = "1"
	}
	now := s.now()
	st, stored, err := s.sc.detach.run(ctx, s, s.keys(ref), s.pubArgs(ref.Tenant, now), s.auditArgs(now, nil, AuditDisconnect),
		h.OID, conn, rel)
	if err != nil {
		return Result{}, err
	}
	switch st {
	case detachReleased:
		s.published(protocol.OpReleased, 1)
		l, err := decodeLock(stored)
		if err != nil {
			return Result{}, err
		}
		return Result{Outcome: protocol.OutcomeReleased, Lock: &l}, nil
	case detachKept, detachNotHeld:
		return Result{Outcome: protocol.OutcomeNotHeld}, nil
	}
	return Result{}, &corruptError{fmt.Sprintf("detach script answered status %q", st)}
}

// Takeover gives ref's lock to h whoever holds it. allowed says whether h has the
// takeover role; without it the answer is forbidden with the current lock. It answers
// takenOver (PreviousHolder says from whom; h itself when h held it already, the lease
// then extended with acquiredAtUtc kept and broadcast as Renewed), acquired (it was
// free), forbidden or unknown (fail open, also when the lock changed hands under every
// retry: ReasonContention).
func (s *Locks) Takeover(ctx context.Context, ref Ref, h protocol.Holder, conn string, allowed bool) (Result, error) {
	if err := s.check(ref, &h); err != nil {
		return Result{}, err
	}
	if !allowed {
		l, err := s.Get(ctx, ref)
		if err != nil {
			return Result{}, err
		}
		return Result{Outcome: protocol.OutcomeForbidden, Lock: l}, nil
	}
	return answer(s.write(ctx, opTakeover, func(ctx context.Context) (Result, error) { return s.takeover(ctx, ref, h, conn) }))
}

func (s *core) takeover(ctx context.Context, ref Ref, h protocol.Holder, conn string) (Result, error) {
	k := s.keys(ref)
	for range casAttempts {
		now := s.now()
		l := s.newLock(ref, h, now, now)
		st, stored, err := s.sc.takeover.run(ctx, s, k, s.pubArgs(ref.Tenant, now), s.auditArgs(now, &h, AuditTakeover),
			h.OID, encodeLock(l), s.lease.Milliseconds(), l.ExpiresAt.UnixMilli(), s.indexTTL(), conn)
		if err != nil {
			return Result{}, err
		}
		switch st {
		case takeoverTakenOver:
			s.published(protocol.OpTakenOver, 1)
			prev, err := decodeLock(stored)
			if err != nil {
				return Result{}, err
			}
			ph := prev.Holder()
			return Result{Outcome: protocol.OutcomeTakenOver, Lock: &l, PreviousHolder: &ph}, nil
		case takeoverTooMany, takeoverRated:
			return Result{refused: s.refused(ctx, ref.Tenant, st == takeoverTooMany, stored)}, nil
		case takeoverAcquired:
			s.published(protocol.OpAcquired, 1)
			return Result{Outcome: protocol.OutcomeAcquired, Lock: &l}, nil
		case takeoverMine:
			// The caller's already: takenOver from themselves (the outcomes of
			// takeover are PROTOCOL.md §2's), the lease extended and acquiredAtUtc
			// kept, broadcast as Renewed, which is what happened to the lock.
			res, err := s.extend(ctx, ref, k, h, conn, stored)
			if err != nil {
				return Result{}, err
			}
			if res.Outcome == protocol.OutcomeRenewed {
				prev, err := decodeLock(stored) // extend read it already: it parses
				if err != nil {
					return Result{}, err
				}
				ph := prev.Holder() // as stored, like the other takeovers
				return Result{Outcome: protocol.OutcomeTakenOver, Lock: res.Lock, PreviousHolder: &ph}, nil
			}
			// It slipped away between the scripts: take it over afresh.
		default:
			return Result{}, &corruptError{fmt.Sprintf("takeover script answered status %q", st)}
		}
	}
	return Result{}, fmt.Errorf("%w: takeover did not settle after %d attempts", errContention, casAttempts)
}

// Get returns the live lock on ref, or nil when it is free or the store fails open.
func (s *Locks) Get(ctx context.Context, ref Ref) (*protocol.Lock, error) {
	l, err := s.Lookup(ctx, ref)
	if errors.Is(err, ErrUnavailable) {
		return nil, nil
	}
	return l, err
}

// Lookup is Get for a caller that must tell a free entity from a store that did not
// answer, such as the enforcement middleware, which counts its own fail-open: it
// returns ErrUnavailable where Get returns nil.
func (s *Locks) Lookup(ctx context.Context, ref Ref) (*protocol.Lock, error) {
	if err := s.check(ref, nil); err != nil {
		return nil, err
	}
	l, ok := runOp(ctx, s.core, opGet, func(ctx context.Context) (*protocol.Lock, error) { return s.get(ctx, ref) }, foundLabel)
	if !ok {
		return nil, ErrUnavailable
	}
	return l, nil
}

func (s *core) get(ctx context.Context, ref Ref) (*protocol.Lock, error) {
	v, err := s.rdb.Get(ctx, LockKey(ref)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := decodeLock(v)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// List returns the live locks of one type in a tenant, read page by page (readLive):
// a type of any size never holds Redis for long (PROTOCOL.md §4). It only reads: what
// ran out, or what another program changed, is announced by the sweeper of a watched
// type (Sweep), or by the next lockhub change of the entity. A key that expires while
// it is read is simply absent. On fail open it returns no locks.
func (s *Locks) List(ctx context.Context, tenant, entityType string) ([]protocol.Lock, error) {
	if err := s.check(Ref{Tenant: tenant, Type: entityType, UID: "x"}, nil); err != nil {
		return nil, err
	}
	locks, _ := runOpWithin(ctx, s.core, opList, pagedBudget*s.timeout, func(ctx context.Context) ([]protocol.Lock, error) {
		return s.list(ctx, tenant, entityType)
	}, listedLabel) // failing open answers no locks: runOp's nil
	return locks, nil
}

// list reads a type's live locks page by page (readLive) and decodes them: what List
// and the console list answer. A value that does not parse is skipped and logged.
func (s *core) list(ctx context.Context, tenant, entityType string) ([]protocol.Lock, error) {
	values, err := s.readLive(ctx, tenant, entityType)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.Lock, 0, len(values))
	for _, v := range values {
		str, ok := v.(string)
		if !ok {
			continue // expired between the range and the MGET: absent, which is right
		}
		if l, err := s.decodeListed(ctx, tenant, entityType, str); err == nil {
			out = append(out, l)
		}
	}
	return out, nil
}

// Mine returns the live locks of holder oid in tenant, read from the person's own index
// (lockmine:{<tenant>}:<oid>, kept by every lockhub script that changes a lock): its
// cost grows with the person's locks, never the tenant's (PROTOCOL.md §4). A lock
// another program wrote for the person is in it once lockhub has seen that lock (a
// sweep of its type, or any lockhub change of the entity: catchup in prelude.lua).
func (s *Locks) Mine(ctx context.Context, tenant, oid string) ([]protocol.Lock, error) {
	if !ValidTenant(tenant) {
		return nil, &InvalidEntityError{Field: "tenant", Value: tenant}
	}
	if !ValidOID(oid) {
		return nil, &InvalidEntityError{Field: "holderOid", Value: oid}
	}
	locks, _ := runOp(ctx, s.core, opMine, func(ctx context.Context) ([]protocol.Lock, error) {
		return s.mine(ctx, tenant, oid)
	}, listedLabel) // failing open answers no locks: runOp's nil
	return locks, nil
}

// mineReadMax bounds what one mine reads: a person's quota, with room for the locks
// other programs gave them.
const mineReadMax = 1000

func (s *core) mine(ctx context.Context, tenant, oid string) ([]protocol.Lock, error) {
	values, err := s.sc.mine.Run(ctx, s.rdb, []string{personKey(tenant, oid)}, s.now().UnixMilli(), max(mineReadMax, 2*s.share.perPerson)).Slice()
	if err != nil {
		return nil, err
	}
	var out []protocol.Lock
	for _, v := range values {
		str, ok := v.(string)
		if !ok {
			continue // gone since the range: absent, which is right
		}
		l, err := decodeLock(str)
		if err != nil || l.HolderOID != oid || s.reg.Check(l.EntityType) != nil {
			continue // given to someone else by another program, or not a lock of ours
		}
		out = append(out, l)
	}
	return out, nil
}

// Sweep announces what changed in the locks of one type of a tenant that nobody
// announced: leases that ran out (Expired), and every change another program made to
// them (PROTOCOL.md §8). The script is atomic and remembers what it announced, so when
// many instances sweep the same type each change is announced once. A sweep within
// every of another one of the type (by any instance) is skipped; every 0 never skips.
func (s *Locks) Sweep(ctx context.Context, tenant, entityType string, every time.Duration) error {
	if err := s.check(Ref{Tenant: tenant, Type: entityType, UID: "x"}, nil); err != nil {
		return err
	}
	// A sweep answers nothing: a failure is logged and counted by runOp, and the next
	// sweep finds what this one could not.
	runOp(ctx, s.core, opSweep, func(ctx context.Context) ([]protocol.Lock, error) {
		return nil, s.sweep(ctx, tenant, entityType, every)
	}, sweptLabel)
	return nil
}

// sweepWindow is the width of a sweep call's windows (sweep.lua; it compares at most a
// 32nd as many candidates, 4), and sweepCalls the most calls one Sweep makes after its
// first: each call is a short script whatever the type's size, other tenants' commands
// are served between them, and a Sweep costs Redis at most (sweepCalls+1) of them
// (PROTOCOL.md §4, bounded work). A type of up to sweepWindow × (sweepCalls+1) locks, a
// tenant's default quota among them, is looked at whole every sweep. Measured with
// lockbench -mode share: windows of 1,024 with 32 candidates made calls of 6.7 ms, over
// the 5 ms of PROTOCOL.md §4. Windows of 512 made calls of 1–4 ms even when nothing had
// changed (the windows' own reads), about 40 a second on a type of 20,000 locks that a
// grid keeps watched, and another tenant's claims waited behind them: p99 3.9–4.4 ms
// where it was 1.5–1.8 ms with windows of 128, for the same Redis CPU (0.09 s/s).
const (
	sweepWindow = 128
	sweepCalls  = 160
)

// sweepOnce runs sweep.lua once, and reports whether it has more to do (its windows
// have not come round, or candidates were left).
func (s *core) sweepOnce(ctx context.Context, tenant, entityType string, every time.Duration) (more bool, err error) {
	now := s.now()
	ft := s.foreign[entityType] // every caller checked that the type is lockable
	head, tail := ft[0], ft[1]
	// The mark lives a little less than the interval, so the instance whose tick set
	// it finds it gone at its next tick: someone sweeps every interval.
	skip := (every - every/10).Milliseconds()
	args := append(s.pubArgs(tenant, now), lockKeyPrefix(tenant, entityType), head, tail, "0", skip, feedKeyTTL.Milliseconds())
	args = append(args, s.auditArgs(now, nil, "")...)
	args = append(args, s.shareArgs(tenant)...)
	args = append(args, s.retentionArg(), sweepWindow, sweepAtKey(tenant, entityType))
	args = append(args, s.lineArgs(args)...)
	keys := []string{IndexKey(tenant, entityType), ValuesKey(tenant, entityType), sweepKey(tenant, entityType), FeedKey(tenant), seenKey(tenant, entityType)}
	if s.audit {
		keys = append(keys, AuditKey(tenant))
	}
	reply, err := s.sc.sweep.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return false, err
	}
	if len(reply) != 6 {
		return false, &corruptError{"sweep script answered an unexpected shape"}
	}
	s.foundChanges(reply[0])
	s.trimmedEarly(ctx, tenant, reply[3])
	s.handedOff(ctx, tenant, reply[4], reply[5])
	return reply[2] == int64(1), nil
}

// sweep sweeps a type: one call, then the calls its windows and candidates need, at
// once, up to sweepCalls more.
func (s *core) sweep(ctx context.Context, tenant, entityType string, every time.Duration) error {
	more, err := s.sweepOnce(ctx, tenant, entityType, every)
	for i := 0; err == nil && more && i < sweepCalls; i++ {
		more, err = s.sweepOnce(ctx, tenant, entityType, 0)
	}
	return err
}

// decodeListed decodes a value a list read, warning of one that does not parse.
func (s *core) decodeListed(ctx context.Context, tenant, entityType, v string) (protocol.Lock, error) {
	l, err := decodeLock(v)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "skipping a lock value that does not parse",
			slog.String("tenant", tenant), slog.String("type", entityType), slog.String("error", err.Error()))
	}
	return l, err
}

// published counts n events of op that a script published, and the audit entries
// it wrote with them (every op but Renewed).
func (s *core) published(op protocol.Op, n int) {
	if n > 0 {
		s.met.published.WithLabelValues(string(op)).Add(float64(n))
		if op != protocol.OpRenewed {
			s.audited(string(op), n)
		}
	}
}

// foundChanges counts the events a script announced for changes nobody announced (its
// reply's list of ops): leases that ran out, and changes of other programs.
func (s *core) foundChanges(reply any) {
	ops, _ := reply.([]any)
	for _, op := range ops {
		name, _ := op.(string)
		s.published(protocol.Op(name), 1)
		if name != string(protocol.OpExpired) {
			s.met.foreign.WithLabelValues(name).Inc()
		}
	}
}

// foreignLock is the lock sweep.lua announces as Expired for a lock another program
// wrote, which keeps no value copy: all the key says, its type and uid, with no holder.
// It is cut where the uid goes.
func foreignLock(entityType string) (head, tail string) {
	const uid = "\x00"
	b, err := json.Marshal(protocol.Lock{EntityType: entityType, EntityUID: uid})
	if err != nil {
		panic("locks: encoding a lock cannot fail: " + err.Error())
	}
	head, tail, _ = strings.Cut(string(b), `"\u0000"`)
	return head + `"`, `"` + tail
}

// Ping reports whether Redis answers, for readiness probes.
func (s *Locks) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if s.cluster != nil {
		// Masters only: locks are read and written there, and a dead replica takes
		// nothing from them.
		return s.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
	}
	return s.rdb.Ping(ctx).Err()
}

type keys struct{ tenant, lock, index, values, conns, seen, audit string }

// keys returns the keys of a write script; audit is "" when the store keeps no audit.
func (s *core) keys(ref Ref) keys {
	k := keys{ref.Tenant, LockKey(ref), IndexKey(ref.Tenant, ref.Type), ValuesKey(ref.Tenant, ref.Type), ConnsKey(ref), seenKey(ref.Tenant, ref.Type), ""}
	if s.audit {
		k.audit = AuditKey(ref.Tenant)
	}
	return k
}

func (s *core) indexTTL() int64 { return (s.lease + indexMargin).Milliseconds() }

func (s *core) newLock(ref Ref, h protocol.Holder, acquired, now time.Time) protocol.Lock {
	n := protocol.NewTime(now)
	return protocol.Lock{
		EntityType: ref.Type,
		EntityUID:  ref.UID,
		HolderOID:  h.OID,
		HolderName: h.Name,
		AcquiredAt: protocol.NewTime(acquired),
		ExpiresAt:  protocol.Time{Time: n.Add(s.lease)},
	}
}

// encodeLock builds the stored value. Go builds every value: field order and the
// millisecond timestamps are fixed by protocol.Lock (golden files pin the bytes).
func encodeLock(l protocol.Lock) string {
	b, err := json.Marshal(l)
	if err != nil {
		panic("locks: encoding a lock cannot fail: " + err.Error())
	}
	return string(b)
}

// decodeLock reads a stored value, as Go or the .NET service wrote it.
func decodeLock(v string) (protocol.Lock, error) {
	var l protocol.Lock
	if err := json.Unmarshal([]byte(v), &l); err != nil {
		return l, &corruptError{"stored value is not a lock: " + err.Error()}
	}
	if l.EntityUID == "" || l.HolderOID == "" {
		return l, &corruptError{"stored value lacks entityUid or holderOid"}
	}
	return l, nil
}
