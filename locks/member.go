package locks

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/lockhub/lockhub/protocol"
)

// Member is this instance's membership of the hub instances sharing one Redis
// (PROTOCOL.md §4, "An instance that dies"; the records are Instances'): its holdings,
// its liveness record, and its share of reaping the instances that died. Make it with
// NewMember, tell it what the sockets hold (Hold, Drop, Leaving, Left) and run it with
// Run. All methods may be called concurrently; Run is called once.
//
// # Holdings
//
// A holding (one lock claimed through one socket) is, in the Member:
//
//   - absent, until Hold;
//   - held, from Hold until Drop: listed in Redis once the writer has written it;
//   - leaving, from Leaving until Left (held again) or Drop (absent): its socket is
//     letting go, the store call that removes its id from the lock's sockets is in
//     flight. A reattach (below) that puts a leaving holding's socket back takes it
//     out again.
//
// The writer (Run) writes the changes as they come, batched: a change waits at most one
// round trip. A write that fails is not lost: its changes wait for the next change or
// heartbeat. The Member keeps every holding, to write them again whole when Redis lost
// them: another instance took this one for dead and reaped it, or they were evicted.
//
// # Liveness
//
// Every InstanceTimeout/3 Run refreshes the liveness record (a heartbeat), and then,
// when healthy, reaps. The instance is
//
//   - starting, until a heartbeat succeeds;
//   - registered, from then: its record has been in Redis;
//   - healthy, once its heartbeats have gone about an InstanceTimeout without two
//     failures in a row (a gap: it may have let a live instance's record go stale, and
//     healthy starts again at the next good heartbeat). After Redis was out of reach for
//     long every record may be stale; each live instance refreshes its own within
//     InstanceTimeout/3 of Redis coming back, so one that reaped at once would take the
//     others for dead and release the locks their live sockets hold. One failed
//     heartbeat is no such gap: no live record can go stale in it;
//   - taken for dead, when a heartbeat of a registered instance finds its record gone
//     (it was cut off from Redis longer than InstanceTimeout and reaped): it writes
//     its holdings again, and at this heartbeat and the next puts its sockets back into
//     their locks' sockets, where the reaper forgot them (the second for a reaper's
//     forget that ran late). Then it is registered again. Holdings found gone while the
//     record stayed (the end of a reap of it, eviction) are written again too;
//   - Redis lost its data, when that heartbeat finds every instance's record gone at
//     once (a restart or failover without persistence): the same, but said as what
//     happened, and not counted as taken for dead;
//   - left, once Run returns: the record and the holdings are removed (an instance that
//     stops has detached its sockets: nothing is left to reap).
//
// # Reaping
//
// A healthy Member takes the instances whose record is older than InstanceTimeout
// (Instances.Reap: each by one instance). A dead instance is then
//
//   - found: at once its sockets stop counting for the two-tab rule wherever another
//     socket of the holder uses the lock (Instances.Forget), so a live tab's release
//     is the last and drops the lock; where a dead socket is the last because the
//     holder's live sockets let go of the lock after the instance was last seen (a
//     pending release), it is detached at once, with release;
//   - due, ReleaseGrace later: one instance at a time, for a turn of InstanceTimeout,
//     detaches its holdings with release, as if its sockets had just closed: a lock is
//     released unless a live socket of its holder still uses it (Locks.Detach);
//   - finished: its holdings are forgotten (Instances.FinishReap). A detach that failed
//     leaves it due: the next turn, here or on another instance, tries again.
//
// So a lock claimed through a killed instance goes at most InstanceTimeout +
// InstanceTimeout/3 + ReleaseGrace after the death (20 s + the grace with the
// defaults; the contract allows the grace + 30 s).
type Member struct {
	id        string
	instances MemberInstances
	locks     Detacher
	timeout   time.Duration // InstanceTimeout
	grace     time.Duration // ReleaseGrace
	every     time.Duration // the heartbeat: timeout/3
	log       *slog.Logger
	met       memberMetrics
	detached  func(protocol.Outcome)
	running   atomic.Bool

	// The holdings: changed by the sockets, taken by the writer.
	mu  sync.Mutex
	all map[Holding]struct{} // guarded by mu; what the sockets hold now
	// byLock: guarded by mu; how many of all hold each lock for each holder
	// (HeldElsewhere)
	byLock map[heldLock]int
	add    map[Holding]struct{} // guarded by mu; not yet written
	remove map[Holding]struct{} // guarded by mu; not yet removed
	whole  bool                 // guarded by mu; write all, not the changes
	// leaving: guarded by mu; holdings whose socket is letting go, from Leaving until
	// Left or Drop: see reattach.
	leaving map[Holding]struct{}
	wake    chan struct{} // capacity 1: something waits for the writer

	// Owned by the liveness loop (Run).
	healthy, lastOK time.Time // since when without a gap; the last good heartbeat
	registered      bool      // a heartbeat has succeeded: the record was there since
	reattachBeats   int       // heartbeats still to put the sockets back (taken for dead)
	dueAt           *time.Timer

	// work is the goroutines the liveness loop starts: forgets, detaches of the dead,
	// reattaches. Joined by Run.
	work   sync.WaitGroup
	busyMu sync.Mutex
	busy   map[string]bool // guarded by busyMu; dead instances being detached here
}

// MemberInstances is what a Member needs of the instances' records: *Instances. Every
// call follows the store's convention (Store): an error matching ErrUnavailable is a
// Redis failure, logged and counted already; the Member tries again at a later
// heartbeat.
type MemberInstances interface {
	Heartbeat(ctx context.Context, instance string) (Liveness, error)
	UpdateHoldings(ctx context.Context, instance string, add, remove []Holding) error
	ReplaceHoldings(ctx context.Context, instance string, all []Holding) error
	Leave(ctx context.Context, instance string) error
	Reap(ctx context.Context, timeout, grace time.Duration) ([]DeadInstance, error)
	DueReaped(ctx context.Context, turn time.Duration) ([]DeadInstance, error)
	Forget(ctx context.Context, h Holding, lastSeen time.Time) (Forgotten, error)
	Alive(ctx context.Context, instance string) (bool, error)
	Reattach(ctx context.Context, h Holding) (bool, error)
	FinishReap(ctx context.Context, instance string) error
}

// Detacher is what a Member needs of the locks: *Locks. A detach that fails open
// answers protocol.OutcomeUnknown (Store).
type Detacher interface {
	Detach(ctx context.Context, ref Ref, h protocol.Holder, conn string, release bool) (Result, error)
}

var (
	_ MemberInstances = (*Instances)(nil)
	_ Detacher        = (*Locks)(nil)
)

// MemberConfig configures a Member. Instances and Locks are required; every other zero
// value works.
type MemberConfig struct {
	// Instances keeps the liveness records and holdings: Store.Instances. Required.
	Instances MemberInstances
	// Locks detaches the holdings of dead instances: Store.Locks. Required.
	Locks Detacher
	// ID is this instance's id in the liveness records, unique across instances. Zero
	// means a random one.
	ID string
	// InstanceTimeout is how long an instance may go without refreshing its record
	// before the others take it for dead: setting "instance-timeout". The record is
	// refreshed every third of it. Zero means DefaultInstanceTimeout.
	InstanceTimeout time.Duration
	// ReleaseGrace is how long after a dead instance is found its sockets' locks are
	// detached with release, as a closed socket's are: setting "release-grace". Zero
	// means DefaultReleaseGrace.
	ReleaseGrace time.Duration
	// Logger receives the warnings about dead instances and this one taken for dead.
	// Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the Member's metrics (lockhub_hub_dead_instances_total,
	// lockhub_hub_taken_for_dead_total, lockhub_hub_reaped_locks_total,
	// lockhub_hub_dead_sockets_forgotten_total, lockhub_hub_dead_sockets_released_total,
	// lockhub_hub_sockets_reattached_total:
	// named for the hub, which runs the Member). Nil means none are registered.
	Registerer prometheus.Registerer
	// Detached, when set, is called with the outcome of every detach of a dead
	// instance's holding after the grace: the hub counts them with its own detaches
	// (lockhub_hub_detaches_total{why="grace"}). Nil means none is told.
	Detached func(protocol.Outcome)
}

// Defaults of MemberConfig.
const (
	// DefaultInstanceTimeout: a dead instance's locks go at most 20 s + the grace after
	// it died (the contract allows the grace + 30 s).
	DefaultInstanceTimeout = 15 * time.Second
	// DefaultReleaseGrace is how long a closed socket's locks, or a dead instance's,
	// wait for their holder to come back.
	DefaultReleaseGrace = 10 * time.Second
)

// memberWorkers bounds the Redis calls in flight for the holdings of one dead instance
// (or this one's reattach): thousands of holdings must not open thousands of calls.
const memberWorkers = 16

// leaveTimeout bounds Leave when Run stops, so a dead Redis cannot stretch a shutdown
// past the 10 s the contract allows.
const leaveTimeout = time.Second

// NewMember returns a Member, or an error when cfg is invalid.
func NewMember(cfg MemberConfig) (*Member, error) {
	if cfg.Instances == nil || cfg.Locks == nil {
		return nil, errors.New("locks: MemberConfig.Instances and Locks are required")
	}
	for setting, d := range map[string]time.Duration{"instance-timeout": cfg.InstanceTimeout, "release-grace": cfg.ReleaseGrace} {
		if d < 0 {
			return nil, &protocol.SettingError{Setting: setting, Err: fmt.Errorf("%s must be positive", d)}
		}
	}
	cfg.InstanceTimeout = cmp.Or(cfg.InstanceTimeout, DefaultInstanceTimeout)
	cfg.ReleaseGrace = cmp.Or(cfg.ReleaseGrace, DefaultReleaseGrace)
	if cfg.InstanceTimeout < 3*time.Millisecond {
		return nil, &protocol.SettingError{Setting: "instance-timeout", Err: fmt.Errorf("%s is too short to refresh a record in", cfg.InstanceTimeout)}
	}
	cfg.ID = cmp.Or(cfg.ID, "i-"+rand.Text())
	if !validInstance(cfg.ID) {
		return nil, fmt.Errorf("locks: instance id %q is not valid", cfg.ID)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Member{
		id:        cfg.ID,
		instances: cfg.Instances,
		locks:     cfg.Locks,
		timeout:   cfg.InstanceTimeout,
		grace:     cfg.ReleaseGrace,
		every:     cfg.InstanceTimeout / 3,
		log:       cfg.Logger,
		met:       newMemberMetrics(cfg.Registerer),
		detached:  cfg.Detached,
		all:       map[Holding]struct{}{},
		byLock:    map[heldLock]int{},
		add:       map[Holding]struct{}{},
		remove:    map[Holding]struct{}{},
		leaving:   map[Holding]struct{}{},
		wake:      make(chan struct{}, 1),
		busy:      map[string]bool{},
	}, nil
}

// ID is this instance's id in the liveness records.
func (m *Member) ID() string { return m.id }

// Hold records that h's socket holds h's lock.
func (m *Member) Hold(h Holding) { m.note(h, true) }

// Drop records that h's socket no longer holds h's lock.
func (m *Member) Drop(h Holding) { m.note(h, false) }

func (m *Member) note(h Holding, held bool) {
	to, from := m.add, m.remove
	if !held {
		to, from = from, to
	}
	m.mu.Lock()
	delete(from, h)
	delete(m.leaving, h)
	to[h] = struct{}{}
	_, had := m.all[h]
	k := heldLock{h.Ref, h.Holder}
	switch {
	case held && !had:
		m.all[h] = struct{}{}
		m.byLock[k]++
	case !held && had:
		delete(m.all, h)
		if m.byLock[k]--; m.byLock[k] <= 0 {
			delete(m.byLock, k)
		}
	}
	m.mu.Unlock()
	m.poke()
}

// heldLock is one lock held for one holder, through any number of sockets.
type heldLock struct {
	ref    Ref
	holder string
}

// HeldElsewhere reports whether another socket of this instance holds h's lock for
// h's holder (Hold without Drop yet: open, or closed and within its grace). A release
// through h's socket that left the lock to other sockets of its holder is pending
// when none of them is here (PROTOCOL.md §4): they are on other instances, and
// nothing tells a live one from one that died and is not found yet.
func (m *Member) HeldElsewhere(h Holding) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.byLock[heldLock{h.Ref, h.Holder}]
	if _, held := m.all[h]; held {
		n--
	}
	return n > 0
}

// Leaving marks that h's socket is letting go of its lock, to call before the store
// call that removes its id from the lock's sockets (a release, a detach); Left ends
// the mark, and so do Hold and Drop.
func (m *Member) Leaving(h Holding) { m.mark(h, true) }

// Left ends Leaving's mark: the socket still holds the lock (or Drop follows).
func (m *Member) Left(h Holding) { m.mark(h, false) }

func (m *Member) mark(h Holding, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if on {
		m.leaving[h] = struct{}{}
	} else {
		delete(m.leaving, h)
	}
}

// gone reports whether h's socket let go of it, or is letting go.
func (m *Member) gone(h Holding) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, leaving := m.leaving[h]
	_, held := m.all[h]
	return leaving || !held
}

func (m *Member) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// rewrite asks the writer to write the holdings whole next time.
func (m *Member) rewrite() {
	m.mu.Lock()
	m.whole = true
	m.mu.Unlock()
	m.poke()
}

// take returns what to write and forgets it: every holding when whole (then all is
// set), else the changes.
func (m *Member) take() (whole bool, all, add, remove []Holding) {
	m.mu.Lock()
	defer m.mu.Unlock()
	whole, m.whole = m.whole, false
	if whole {
		all = m.allLocked()
	} else {
		for h := range m.add {
			add = append(add, h)
		}
		for h := range m.remove {
			remove = append(remove, h)
		}
	}
	clear(m.add)
	clear(m.remove)
	return whole, all, add, remove
}

// putBack returns changes whose write failed to the pending ones, unless newer ones
// replaced them meanwhile: the next write makes them.
func (m *Member) putBack(add, remove []Holding) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range add {
		if _, held := m.all[h]; held {
			if _, newer := m.remove[h]; !newer {
				m.add[h] = struct{}{}
			}
		}
	}
	for _, h := range remove {
		if _, held := m.all[h]; !held {
			if _, newer := m.add[h]; !newer {
				m.remove[h] = struct{}{}
			}
		}
	}
}

// snapshot returns every holding.
func (m *Member) snapshot() []Holding {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.allLocked()
}

func (m *Member) allLocked() []Holding {
	out := make([]Holding, 0, len(m.all))
	for h := range m.all {
		out = append(out, h)
	}
	return out
}

// pending reports whether anything waits to be written.
func (m *Member) pending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.whole || len(m.add) > 0 || len(m.remove) > 0
}

// holdsAny reports whether the sockets hold anything.
func (m *Member) holdsAny() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.all) > 0
}

// Run writes the holdings as they change, heartbeats and reaps, until ctx is done;
// then it joins every goroutine it started and leaves: it removes this instance's
// record and holdings (within a second, whatever ctx), and returns. It returns an
// error only when called twice.
func (m *Member) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("locks: Member.Run called twice")
	}
	var wg sync.WaitGroup
	wg.Go(func() { m.writeLoop(ctx) })
	wg.Go(func() { m.livenessLoop(ctx) })
	wg.Wait()
	m.work.Wait()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	_ = m.instances.Leave(lctx, m.id) // fails open inside: the record goes stale, and is reaped
	return nil
}

// writeLoop writes the holdings as they change, until ctx is done. A write that fails
// (the store failed open and said so) is not lost: its changes wait for the next
// change or heartbeat, whichever comes first.
func (m *Member) writeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		}
		whole, all, add, remove := m.take()
		var err error
		if whole {
			err = m.instances.ReplaceHoldings(ctx, m.id, all)
		} else {
			err = m.instances.UpdateHoldings(ctx, m.id, add, remove)
		}
		switch {
		case err == nil || ctx.Err() != nil:
		case whole:
			m.rewrite() // takes whatever all is then
		default:
			m.putBack(add, remove)
		}
	}
}

// livenessLoop heartbeats every InstanceTimeout/3 and, when healthy, reaps, until ctx
// is done; it also detaches the holdings of dead instances as they come due.
func (m *Member) livenessLoop(ctx context.Context) {
	t := time.NewTicker(m.every)
	defer t.Stop()
	// The reaper looks again when the grace of what it reaped ends, not at the next
	// tick after: a dead instance's locks go a grace after it was found.
	m.dueAt = time.NewTimer(time.Hour)
	m.dueAt.Stop()
	defer m.dueAt.Stop()
	m.beat(ctx, time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			// About a timeout of good heartbeats (ticker times jitter: half a tick
			// less, so that the third tick after an outage reaps, not the fourth).
			if !m.beat(ctx, now) || now.Sub(m.healthy) < m.timeout-m.every/2 {
				break // not now: the due holdings below are still taken
			}
			m.reap(ctx)
		case <-m.dueAt.C:
		}
		// Marks exist only after a reap that passed the check above, and an instance
		// whose record came back is skipped: no wait here.
		m.detachDue(ctx)
	}
}

// beat refreshes the liveness record and handles what it found missing; it reports
// whether the heartbeat succeeded.
func (m *Member) beat(ctx context.Context, now time.Time) bool {
	l, err := m.instances.Heartbeat(ctx, m.id)
	if err != nil {
		return false
	}
	// A gap between good heartbeats longer than this (two or more failed in a row)
	// may have let a live instance's record go stale: reaping waits a timeout again.
	if maxGap := m.timeout - m.every/2; m.lastOK.IsZero() || now.Sub(m.lastOK) > maxGap {
		m.healthy = now
	}
	m.lastOK = now
	switch {
	case l.AllMissing && m.registered:
		// Every record went at once: Redis lost its data, nobody reaped this instance.
		m.log.LogAttrs(ctx, slog.LevelWarn, "liveness record missing, with every instance's: Redis lost its data (a restart or a failover without persistence); re-registering and writing this instance's holdings again",
			slog.String("instance", m.id))
		m.rewrite()
		m.reattachBeats = 2
	case l.RecordMissing && m.registered:
		// Taken for dead and reaped: the holdings in Redis are gone, or going.
		m.log.LogAttrs(ctx, slog.LevelWarn, "this instance's liveness record was gone (it was cut off from Redis longer than the instance timeout, and taken for dead); writing its holdings again",
			slog.String("instance", m.id), slog.String("setting", "instance-timeout"))
		m.met.takenForDead.Inc()
		m.rewrite()
		m.reattachBeats = 2
	case l.HoldingsMissing && m.holdsAny():
		m.rewrite() // deleted meanwhile (the end of a reap of this instance, eviction)
	}
	m.registered = true
	if m.reattachBeats > 0 {
		m.reattachBeats--
		m.work.Go(func() { m.reattach(ctx) })
	}
	if m.pending() {
		m.poke() // a failed write: try again
	}
	return true
}

// reap takes the instances found dead, logs and counts them, forgets their sockets
// where others use the locks, and sets the timer for when their grace ends.
func (m *Member) reap(ctx context.Context) {
	dead, _ := m.instances.Reap(ctx, m.timeout, m.grace) // fails open inside; the next tick tries again
	for _, d := range dead {
		m.met.deadInstances.Inc()
		m.log.LogAttrs(ctx, slog.LevelWarn, "an instance stopped without shutting down; releasing the locks its sockets held after the release grace",
			slog.String("instance", d.ID), slog.Time("lastSeen", d.LastSeen),
			slog.Duration("grace", m.grace), slog.String("setting", "instance-timeout"))
	}
	if len(dead) == 0 {
		return
	}
	m.dueAt.Reset(m.grace)
	m.work.Go(func() { // one instance after another: memberWorkers calls at a time in all
		for _, d := range dead {
			m.forgetDead(ctx, d)
		}
	})
}

// detachDue takes the dead instances whose grace has ended and detaches each, unless
// it is being detached here already. A turn lasts a timeout: the others take an
// instance over once it ends unfinished.
func (m *Member) detachDue(ctx context.Context) {
	due, _ := m.instances.DueReaped(ctx, m.timeout) // fails open inside; the next tick tries again
	for _, d := range due {
		m.busyMu.Lock()
		started := !m.busy[d.ID]
		m.busy[d.ID] = true
		m.busyMu.Unlock()
		if !started {
			continue
		}
		m.work.Go(func() {
			m.detachDead(ctx, d)
			m.busyMu.Lock()
			delete(m.busy, d.ID)
			m.busyMu.Unlock()
		})
	}
}

// reattach puts this instance's sockets back into the sockets of the locks they hold:
// a reaper that took this instance for dead dropped them (forgetDead), and they count
// again for the two-tab rule. A socket that let go of its lock meanwhile (its release
// or detach may have run just before the Reattach) has its id taken out again, or it
// would keep the lock for a holder whose last socket released it: Leaving marks it
// before the store call, so one of the two sees the other.
func (m *Member) reattach(ctx context.Context) {
	eachHolding(m.snapshot(), func(hd Holding) {
		put, err := m.instances.Reattach(ctx, hd)
		if err != nil || !put {
			return
		}
		if m.gone(hd) {
			_, _ = m.locks.Detach(ctx, hd.Ref, protocol.Holder{OID: hd.Holder}, hd.Conn, false) // fails open inside
			return
		}
		m.met.reattached.Inc()
	})
}

// forgetDead drops a dead instance's sockets from the locks where another socket
// uses them, as soon as the instance is found dead: the two-tab rule then counts the
// live sockets alone. Where the dead socket is the last and its holder's live sockets
// let go of the lock since the instance was last seen (a pending release, PROTOCOL.md
// §4), it detaches it at once, with release: that release takes effect now, without
// waiting the grace again. What fails open here is detached a grace later all the
// same.
func (m *Member) forgetDead(ctx context.Context, d DeadInstance) {
	// One found with others waits its turn here: if its record is back by then (it
	// lived), its sockets count, and its own reattach may have run already.
	if alive, err := m.instances.Alive(ctx, d.ID); err != nil || alive {
		return
	}
	eachHolding(d.Holdings, func(hd Holding) {
		f, err := m.instances.Forget(ctx, hd, d.LastSeen)
		switch {
		case err != nil:
		case f == ForgetDropped:
			m.met.forgotten.Inc()
		case f == ForgetNow:
			res, err := m.locks.Detach(ctx, hd.Ref, protocol.Holder{OID: hd.Holder}, hd.Conn, true)
			if err == nil && res.Outcome == protocol.OutcomeReleased {
				m.met.pendingReleased.Inc()
			}
		}
	})
}

// detachDead detaches a dead instance's holdings, with release, as if its sockets had
// just closed (their grace has passed), and then forgets the instance. When a detach
// fails open it leaves the instance reaped: another turn tries again.
func (m *Member) detachDead(ctx context.Context, d DeadInstance) {
	var failed atomic.Bool
	eachHolding(d.Holdings, func(hd Holding) {
		res, err := m.locks.Detach(ctx, hd.Ref, protocol.Holder{OID: hd.Holder}, hd.Conn, true)
		if err != nil || res.Outcome == protocol.OutcomeUnknown {
			failed.Store(true) // refused (cannot be: the store took the ref when claimed) or failed open
			return
		}
		m.met.reapedLocks.Inc()
		if m.detached != nil {
			m.detached(res.Outcome)
		}
	})
	if !failed.Load() {
		_ = m.instances.FinishReap(ctx, d.ID) // fails open inside: the instance is due again after its turn
	}
}

// eachHolding calls f for every holding, memberWorkers at a time, and returns when all
// calls have.
func eachHolding(hs []Holding, f func(Holding)) {
	sem := make(chan struct{}, memberWorkers)
	var wg sync.WaitGroup
	for _, hd := range hs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(hd)
		})
	}
	wg.Wait()
}

// memberMetrics are the Member's collectors, named for the hub that runs it.
type memberMetrics struct {
	deadInstances prometheus.Counter // instances found dead and reaped here
	takenForDead  prometheus.Counter // times this instance's own record was found gone
	reapedLocks   prometheus.Counter // locks of dead instances' sockets detached here
	forgotten     prometheus.Counter // dead sockets dropped at once from locks a live socket uses
	reattached    prometheus.Counter // this instance's sockets put back after it was taken for dead
	// pendingReleased: locks released as soon as their dead instance was found, their
	// holder's live sockets having let go of them since it was last seen
	pendingReleased prometheus.Counter
}

func newMemberMetrics(reg prometheus.Registerer) memberMetrics {
	f := promauto.With(reg) // a nil reg registers nothing
	return memberMetrics{
		deadInstances: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_dead_instances_total", Help: "Instances that stopped refreshing their liveness record without shutting down, found and reaped by this instance.",
		}),
		takenForDead: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_taken_for_dead_total", Help: "Times this instance found its own liveness record gone (cut off from Redis longer than --instance-timeout, it was taken for dead) and wrote its holdings again.",
		}),
		reapedLocks: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_reaped_locks_total", Help: "Locks claimed through the sockets of dead instances, detached by this instance after the release grace.",
		}),
		forgotten: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_dead_sockets_forgotten_total", Help: "Sockets of dead instances that stopped counting for the two-tab rule as soon as the instance was found dead, on locks another socket of the holder used.",
		}),
		pendingReleased: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_dead_sockets_released_total", Help: "Locks released as soon as the dead instance whose socket still held them was found, not a release grace later: every live socket of their holder had let go of them since that instance was last seen (a release answered pending, PROTOCOL.md §4).",
		}),
		reattached: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_hub_sockets_reattached_total", Help: "Sockets of this instance put back into their locks' sockets after it found it was taken for dead (a reaper had dropped them for the two-tab rule).",
		}),
	}
}
