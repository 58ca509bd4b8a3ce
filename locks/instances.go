package locks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Instances that die (PROTOCOL.md §4, "An instance that dies").
//
// A lock claimed through a socket is released after the grace when the socket closes
// (Detach). An instance killed outright runs no detach: its sockets' ids stay in the
// locks' sockets sets, and their locks would stay until the lease ran out, however a
// live tab of the same holder released them. So each instance keeps, in Redis,
//   - a liveness record: its score in the sorted set lockhub:instances (instance id ->
//     last heartbeat, Unix ms), refreshed every few seconds (Heartbeat);
//   - its holdings: the set lockhub:held:{<instance>} of the locks its sockets claimed,
//     one member per socket and lock (UpdateHoldings).
// A live instance that finds a record older than the instance timeout takes it (ZREM:
// exactly one instance wins) and marks it reaped, due a grace later, in lockhub:reaped
// (Reap). At once, its sockets stop counting for the two-tab rule wherever another
// socket uses the lock (Forget): a live tab of the holder that releases it then is its
// last. Where a live tab released it already, after the dead instance was last seen
// (a release made before the death was noticed, noted in lockleft:), the dead socket
// is the last, and Forget says to detach it at once: that release takes effect now. Once due, one instance at a time takes it for a turn (DueReaped), detaches its
// holdings with release, as if the socket had just closed: the lock is released unless
// another socket of the holder, alive, still uses it; and then forgets it (FinishReap).
// The holdings stay in Redis until then, so a reaper that stops or dies within the
// grace leaves them to the others.
//
// Every time here (the records' scores, the due times) is the clock of the Redis server
// that holds lockhub:instances (serverNow), never an instance's own: an instance whose
// clock ran ahead would take the others for dead.
//
// These keys are not the tenants': they live in their own slots on a cluster, and no
// script mixes them with a tenant's keys (every call here is a plain command).

// serverNow reads the clock of the Redis server that holds lockhub:instances (now.lua
// runs where its key lives), which scores and judges every instance's liveness.
func (s *core) serverNow(ctx context.Context) (time.Time, error) {
	ms, err := s.sc.now.Run(ctx, s.rdb, []string{instancesKey}).Int64()
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).Add(s.shift), nil
}

// instanceKeysTTL bounds how long the liveness records and holdings outlive the last
// instance that refreshed them: with every instance dead, nobody reaps, and the locks
// ran out long before.
func (s *core) instanceKeysTTL() time.Duration { return 2*s.lease + indexMargin }

// Holding is one lock claimed through one socket of an instance.
type Holding struct {
	Ref    Ref
	Holder string // the holder's oid
	Conn   string // the socket's id
}

// member encodes h for the holdings set. Every part is a validated name, which holds
// no space.
func (h Holding) member() string {
	return strings.Join([]string{h.Ref.Tenant, h.Ref.Type, h.Ref.UID, h.Holder, h.Conn}, " ")
}

func parseHolding(m string) (Holding, error) {
	p := strings.Split(m, " ")
	if len(p) != 5 {
		return Holding{}, fmt.Errorf("locks: holding %q has %d parts, want 5", m, len(p))
	}
	h := Holding{Ref: Ref{Tenant: p[0], Type: p[1], UID: p[2]}, Holder: p[3], Conn: p[4]}
	if err := h.Ref.Validate(); err != nil || !ValidOID(h.Holder) || h.Conn == "" {
		return Holding{}, fmt.Errorf("locks: holding %q is not valid", m)
	}
	return h, nil
}

// validInstance says whether id may name an instance: the uid rule, so it cannot
// break out of the hash tag of its holdings key.
func validInstance(id string) bool { return ValidOID(id) }

// Liveness is what a Heartbeat found missing in Redis.
type Liveness struct {
	// RecordMissing: the instance is new, or another took it for dead (it was cut off
	// from Redis longer than the instance timeout) and reaped it.
	RecordMissing bool
	// AllMissing: with RecordMissing, every instance's record was gone, the set itself:
	// Redis lost its data (a restart or a failover without persistence), not a reap, or
	// no instance ran before this one.
	AllMissing bool
	// HoldingsMissing: the instance holds nothing yet, or its holdings were deleted (a
	// reap of it, eviction, a failover that lost writes). One that holds locks writes
	// them again (ReplaceHoldings).
	HoldingsMissing bool
}

// Heartbeat refreshes instance's liveness record and keeps its holdings alive, and
// reports what was missing.
func (s *Instances) Heartbeat(ctx context.Context, instance string) (Liveness, error) {
	if !validInstance(instance) {
		return Liveness{}, fmt.Errorf("locks: instance id %q is not valid", instance)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ttl := s.instanceKeysTTL()
	var added *redis.Cmd
	var kept *redis.BoolCmd
	// One round trip, as one failed command fails the heartbeat: just after Redis is
	// back, when a stale pooled connection may fail a command, each instance must get
	// its record in before the others' reaping starts (see Member). EVAL,
	// not EVALSHA: a pipeline cannot fall back on NOSCRIPT.
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		added = s.sc.beat.Eval(ctx, p, []string{instancesKey}, instance, ttl.Milliseconds(), s.shift.Milliseconds())
		kept = p.PExpire(ctx, heldKey(instance), ttl)
		return nil
	})
	if err != nil {
		return Liveness{}, s.unavailable(ctx, opInstances, err)
	}
	n, err := added.Int()
	if err != nil {
		return Liveness{}, err // the pipeline's error, above
	}
	return Liveness{RecordMissing: n >= 1, AllMissing: n == 2, HoldingsMissing: !kept.Val()}, nil
}

// ReplaceHoldings makes all the holdings of instance, whatever Redis had: after a
// reap of a live instance, or a change that could not be written.
func (s *Instances) ReplaceHoldings(ctx context.Context, instance string, all []Holding) error {
	if !validInstance(instance) {
		return fmt.Errorf("locks: instance id %q is not valid", instance)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	key := heldKey(instance)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { // one key: one slot
		p.Unlink(ctx, key) // a large set is freed off Redis's main thread
		if len(all) > 0 {
			p.SAdd(ctx, key, members(all)...)
			p.PExpire(ctx, key, s.instanceKeysTTL())
		}
		return nil
	})
	if err != nil {
		return s.unavailable(ctx, opInstances, err)
	}
	return nil
}

// UpdateHoldings adds and removes holdings of instance, in one round trip.
func (s *Instances) UpdateHoldings(ctx context.Context, instance string, add, remove []Holding) error {
	if !validInstance(instance) {
		return fmt.Errorf("locks: instance id %q is not valid", instance)
	}
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	key := heldKey(instance)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if len(add) > 0 {
			p.SAdd(ctx, key, members(add)...)
			p.PExpire(ctx, key, s.instanceKeysTTL())
		}
		if len(remove) > 0 {
			p.SRem(ctx, key, members(remove)...)
		}
		return nil
	})
	if err != nil {
		return s.unavailable(ctx, opInstances, err)
	}
	return nil
}

func members(hs []Holding) []any {
	out := make([]any, len(hs))
	for i, h := range hs {
		out[i] = h.member()
	}
	return out
}

// Leave removes instance's liveness record and its holdings: a graceful shutdown,
// which has detached its sockets already.
func (s *Instances) Leave(ctx context.Context, instance string) error {
	if !validInstance(instance) {
		return fmt.Errorf("locks: instance id %q is not valid", instance)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, instancesKey, instance)
		p.Del(ctx, heldKey(instance))
		return nil
	})
	if err != nil {
		return s.unavailable(ctx, opInstances, err)
	}
	return nil
}

// DeadInstance is an instance whose liveness record ran out, and what its sockets held.
type DeadInstance struct {
	ID       string
	LastSeen time.Time // Reap only
	Holdings []Holding
}

// Reap takes the instances whose liveness record is older than timeout, each by
// exactly one caller across all instances, and marks each reaped: its holdings are due
// for detaching grace later (DueReaped). They stay in Redis until then, so that a
// reaper that stops or dies meanwhile leaves them to the others. Each is returned with
// its holdings, for the caller to Forget.
func (s *Instances) Reap(ctx context.Context, timeout, grace time.Duration) ([]DeadInstance, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	now, err := s.serverNow(ctx)
	if err != nil {
		return nil, s.unavailable(ctx, opInstances, err)
	}
	dead, err := s.rdb.ZRangeByScoreWithScores(ctx, instancesKey, &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.Add(-timeout).UnixMilli(), 10), Count: 100,
	}).Result()
	if err != nil {
		return nil, s.unavailable(ctx, opInstances, err)
	}
	var out []DeadInstance
	var errs []error
	for _, z := range dead {
		id, _ := z.Member.(string)
		if !validInstance(id) {
			continue // not ours to read
		}
		// Marked first: a reaper that dies between the two leaves the record stale,
		// and the next one marks it again (NX) and takes it.
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.ZAddNX(ctx, reapedKey, redis.Z{Score: float64(now.Add(grace).UnixMilli()), Member: id})
			p.PExpire(ctx, reapedKey, s.instanceKeysTTL())
			return nil
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		won, err := s.rdb.ZRem(ctx, instancesKey, id).Result()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if won == 0 {
			continue // another instance took it
		}
		d := DeadInstance{ID: id, LastSeen: time.UnixMilli(int64(z.Score))}
		d.Holdings, err = s.holdings(ctx, id)
		if err != nil {
			errs = append(errs, err) // taken all the same: DueReaped reads them again
		}
		out = append(out, d)
	}
	if err := errors.Join(errs...); err != nil {
		return out, s.unavailable(ctx, opInstances, err)
	}
	return out, nil
}

// DueReaped takes the reaped instances whose grace has ended, each by one caller for
// turn, and returns them with their holdings: the caller detaches them, with release,
// and then calls FinishReap. One the caller does not finish within turn (it died,
// Redis failed) is due again for the next. An instance that refreshed its record
// since it was reaped (it lived, cut off from Redis for a while) is not dead: its mark
// is dropped and it is not returned.
func (s *Instances) DueReaped(ctx context.Context, turn time.Duration) ([]DeadInstance, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	now, err := s.serverNow(ctx)
	if err != nil {
		return nil, s.unavailable(ctx, opInstances, err)
	}
	due, err := s.rdb.ZRangeByScore(ctx, reapedKey, &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10), Count: 100,
	}).Result()
	if err != nil {
		return nil, s.unavailable(ctx, opInstances, err)
	}
	var out []DeadInstance
	var errs []error
	for _, id := range due {
		if !validInstance(id) {
			continue
		}
		taken, err := s.sc.reaped.Run(ctx, s.rdb, []string{reapedKey}, id, now.UnixMilli(), now.Add(turn).UnixMilli()).Int()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if taken == 0 {
			continue
		}
		if alive, err := s.alive(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		} else if alive {
			// Alive after all: its record is back (Heartbeat), and with it its holdings
			// and its sockets (Reattach).
			errs = append(errs, s.rdb.ZRem(ctx, reapedKey, id).Err())
			continue
		}
		hs, err := s.holdings(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, DeadInstance{ID: id, Holdings: hs})
	}
	if err := errors.Join(errs...); err != nil {
		return out, s.unavailable(ctx, opInstances, err)
	}
	return out, nil
}

// holdings reads instance's holdings; one that does not parse is not ours and is left.
func (s *core) holdings(ctx context.Context, instance string) ([]Holding, error) {
	ms, err := s.rdb.SMembers(ctx, heldKey(instance)).Result()
	if err != nil {
		return nil, err
	}
	var out []Holding
	for _, m := range ms {
		if h, err := parseHolding(m); err == nil {
			out = append(out, h)
		}
	}
	return out, nil
}

// Alive reports whether instance has a liveness record: one reaped that lived writes
// it again at its next heartbeat.
func (s *Instances) Alive(ctx context.Context, instance string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	alive, err := s.alive(ctx, instance)
	if err != nil {
		return false, s.unavailable(ctx, opInstances, err)
	}
	return alive, nil
}

// alive is Alive without the deadline and the fail-open report, for callers that
// make their own.
func (s *core) alive(ctx context.Context, instance string) (bool, error) {
	err := s.rdb.ZScore(ctx, instancesKey, instance).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

// Forgotten is what Forget did with a dead socket.
type Forgotten int

const (
	// ForgetKept: the socket was left in the lock's sockets (its last), or was not
	// there: the detach a grace later settles it.
	ForgetKept Forgotten = iota
	// ForgetDropped: the socket was dropped; another socket of the holder uses the lock.
	ForgetDropped
	// ForgetNow: the socket is the last, and the holder's other sockets let go of the
	// lock after its instance was last seen: a release that waited for the death to be
	// found (PROTOCOL.md §4). Detach it now, with release, not a grace later.
	ForgetNow
)

// Forget drops the socket of a holding of a dead instance from its lock's sockets,
// unless it is the last there, and reports what it did (forget.lua). Called when the
// instance is found dead: where the holder also uses the lock from a live socket, the
// dead one no longer counts for the two-tab rule, so that the live one's release is
// its last; where it is the last, it stays for the detach a grace later, or, when the
// holder's other sockets let go of the lock after lastSeen (the instance's last
// heartbeat, its liveness record's score), Forget answers ForgetNow.
func (s *Instances) Forget(ctx context.Context, h Holding, lastSeen time.Time) (Forgotten, error) {
	if err := h.Ref.Validate(); err != nil {
		return ForgetKept, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// The record's score is the server's clock plus the tests' shift (beat.lua); the
	// note in lockleft: is the server's clock alone.
	seen := lastSeen.Add(-s.shift).UnixMilli()
	n, err := s.sc.forget.Run(ctx, s.rdb, []string{ConnsKey(h.Ref), leftKey(h.Ref)}, h.Conn, seen).Int()
	if err != nil {
		return ForgetKept, s.unavailable(ctx, opInstances, err)
	}
	switch n {
	case 1:
		return ForgetDropped, nil
	case 2:
		return ForgetNow, nil
	}
	return ForgetKept, nil
}

// Reattach puts the socket of a holding back into its lock's sockets, while the lock
// is still its holder's, and reports whether it did (reattach.lua): for an instance
// that finds it was taken for dead while it lived, whose sockets the reaper forgot.
func (s *Instances) Reattach(ctx context.Context, h Holding) (bool, error) {
	if err := h.Ref.Validate(); err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := s.sc.reattach.Run(ctx, s.rdb, []string{LockKey(h.Ref), ConnsKey(h.Ref)}, h.Holder, h.Conn).Int()
	if err != nil {
		return false, s.unavailable(ctx, opInstances, err)
	}
	return n == 1, nil
}

// FinishReap forgets a dead instance whose holdings were detached.
func (s *Instances) FinishReap(ctx context.Context, instance string) error {
	if !validInstance(instance) {
		return fmt.Errorf("locks: instance id %q is not valid", instance)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, heldKey(instance))
		p.ZRem(ctx, reapedKey, instance)
		return nil
	})
	if err != nil {
		return s.unavailable(ctx, opInstances, err)
	}
	return nil
}
