package locks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/coalesce"
	"github.com/lockhub/lockhub/protocol"
)

// Config configures a Store. Only Client is required; every other zero value works.
type Config struct {
	// Client reaches Redis: a *redis.Client (standalone, miniredis), a failover client
	// (Sentinel) or a *redis.ClusterClient. On a cluster the change feed uses sharded
	// pub/sub. Required.
	Client redis.UniversalClient
	// Registry is the set of lockable types. Nil means ApprovalRequest only.
	Registry *Registry
	// Lease is how long a claim or renewal holds a lock: setting "lease" (PROTOCOL.md
	// §7). Zero means DefaultLease; it must be at least a millisecond.
	Lease time.Duration
	// Timeout bounds each operation, all its Redis round trips together, so a dead Redis
	// never hangs a user. Zero means 500ms. It bounds a call on a Redis that hangs only
	// if Client honours ctx deadlines on its socket (go-redis ContextTimeoutEnabled, as
	// NewClient sets); otherwise the client's own read timeout does.
	Timeout time.Duration
	// Channels is how many pub/sub channels carry the change feed; tenants are spread
	// over them by hash. Every instance on one Redis must use the same number.
	// Zero means 16.
	Channels int
	// Logger receives a warning for every fail-open. Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the store's metrics. Nil means none are registered.
	Registerer prometheus.Registerer
	// Now is the clock of lock values and the index. Nil means time.Now. Liveness
	// (instances.go) and presence's expiry (presence.lua) read the Redis server's clock
	// instead.
	Now func() time.Time
	// AuditRetention is how long the audit stream of a tenant keeps an entry: setting
	// "audit-retention" (PROTOCOL.md §10, version 3). Entries older than it, by their
	// stream id against Now, are dropped as the next entry is added. Zero means
	// DefaultAuditRetention; it must be at least a millisecond.
	AuditRetention time.Duration
	// AuditMaxEntries is the most entries the audit stream of a tenant holds: setting
	// "audit-max-entries". The oldest go first; one dropped before AuditRetention is
	// counted and warned of. Zero means DefaultAuditMaxEntries.
	AuditMaxEntries int

	// MaxLocksPerPerson is how many live locks one person (tenant and oid) may hold,
	// counted in Redis across sockets, HTTP calls and instances: setting
	// "max-locks-per-person" (PROTOCOL.md §4, fair share). Zero means
	// DefaultMaxLocksPerPerson.
	MaxLocksPerPerson int
	// MaxLocksPerTenant is how many live locks a tenant may hold, other programs' locks
	// counted (though never refused): setting "max-locks-per-tenant". Zero means
	// DefaultMaxLocksPerTenant.
	MaxLocksPerTenant int
	// MaxChangesPerPerson is how many claims, takeovers, releases and force releases
	// that change a lock one person may make a second, across instances: setting
	// "max-changes-per-person". Zero means DefaultMaxChangesPerPerson.
	MaxChangesPerPerson float64
	// ChangesBurst is how many changes above that rate a person may make at once. Zero
	// means DefaultChangesBurst.
	ChangesBurst int
	// ListLocksPerTenant is how many locks a tenant's lists (watch snapshots, lists by
	// type, the console) may read from Redis a second on this instance, each page
	// charged 16 more for its call: setting "max-list-locks-per-tenant" (readshare.go).
	// A list over it is slowed, not refused. Zero means DefaultListLocksPerTenant;
	// negative means no budget.
	ListLocksPerTenant float64
	// ListLocksBurst is how many locks above that rate a tenant's lists may read at
	// once. Zero means DefaultListLocksBurst.
	ListLocksBurst int

	noAudit   bool          // the benchmarks' baseline: no audit stream written
	feedQuiet time.Duration // tests: the feed's silence before it pings; zero means feedPingEvery
}

// DefaultLease is the lease of a Store whose Config.Lease is zero (PROTOCOL.md §1).
const DefaultLease = 5 * time.Minute

// The fair share of PROTOCOL.md §4 (version 3), for the zero fields of Config.
const (
	DefaultMaxLocksPerPerson   = 200
	DefaultMaxLocksPerTenant   = 20000
	DefaultMaxChangesPerPerson = 5
	DefaultChangesBurst        = 200
)

const (
	defaultTimeout  = 500 * time.Millisecond
	defaultChannels = 16
	// indexMargin keeps an index (and its values hash) alive a little past its
	// latest lease, so a sweeper can still announce the last expiry. The contract
	// caps it at a minute.
	indexMargin = 30 * time.Second
	// feedKeyTTL is how long lockfeed:{<tenant>} (how other programs publish on the
	// feed) outlives the last sweep of the tenant.
	feedKeyTTL = time.Minute
	// casAttempts bounds the compare-and-set retries of a renewal racing another tab.
	casAttempts = 3
)

// core is what every part of the store shares: the Redis client, the scripts, the
// metrics, the clock and the one fail-open path (runOp). Each concept (Locks, Presence,
// Instances, Console) is a handle on the same core.
type core struct {
	rdb      redis.UniversalClient
	cluster  *redis.ClusterClient // non-nil on a cluster: sharded pub/sub, slot map reloads
	reg      *Registry
	lease    time.Duration
	timeout  time.Duration
	channels int
	log      *slog.Logger
	met      *metrics
	now      func() time.Time
	sc       scripts
	tags     []string      // on a cluster: a hash tag for every slot, naming its channel
	audit    bool          // write the audit stream (PROTOCOL.md §10); off only in benchmarks
	auditMax int           // Config.AuditMaxEntries
	auditAge time.Duration // Config.AuditRetention
	// auditWarned is when each tenant was last warned of entries dropped early.
	auditWarned warnings
	share       shareLimits
	lists       listShare // each tenant's budget of locks its lists read (readshare.go)
	amet        *auditMetrics
	encoded     encodedValues                  // ListJSON's encodings of the values it read last
	live        coalesce.Reads[typeKey, []any] // readLive's reads, shared
	// feedQuiet is how long the feed's connection may be silent before it is pinged;
	// the Pong has a third of it.
	feedQuiet time.Duration
	// shift moves the server's clock as liveness (serverNow) and presence
	// (presence.lua) read it: tests only, to drive time on a real server. Zero otherwise.
	shift time.Duration
	// foreign is foreignLock's head and tail for each lockable type, made once: every
	// sweep and every List needs its type's.
	foreign map[string][2]string
}

// newCore validates cfg and builds the shared core.
func newCore(cfg Config) (*core, error) {
	if cfg.Client == nil {
		return nil, errors.New("locks: Config.Client is required")
	}
	if cfg.Lease < 0 {
		return nil, &protocol.SettingError{Setting: "lease", Err: fmt.Errorf("%s must be positive", cfg.Lease)}
	}
	if cfg.Timeout < 0 || cfg.Channels < 0 {
		return nil, errors.New("locks: Config.Timeout and Channels must not be negative")
	}
	s := &core{
		rdb:       cfg.Client,
		reg:       cfg.Registry,
		lease:     cmp.Or(cfg.Lease, DefaultLease),
		timeout:   cmp.Or(cfg.Timeout, defaultTimeout),
		channels:  cmp.Or(cfg.Channels, defaultChannels),
		log:       cfg.Logger,
		now:       cfg.Now,
		sc:        newScripts(),
		feedQuiet: cmp.Or(cfg.feedQuiet, feedPingEvery),
	}
	if s.lease < time.Millisecond {
		return nil, &protocol.SettingError{Setting: "lease", Err: fmt.Errorf("%s is under the millisecond precision of a lease", s.lease)}
	}
	if s.cluster, _ = cfg.Client.(*redis.ClusterClient); s.cluster != nil {
		s.tags = slotTags()
	}
	if s.reg == nil {
		s.reg, _ = NewRegistry() // the default list is valid
	}
	s.foreign = map[string][2]string{}
	for _, t := range s.reg.Types() {
		head, tail := foreignLock(t)
		s.foreign[t] = [2]string{head, tail}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.setUpShare(cfg); err != nil {
		return nil, err
	}
	s.met = newMetrics(cfg.Registerer)
	if err := s.setUpAudit(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *core) check(ref Ref, h *protocol.Holder) error {
	if err := ref.Validate(); err != nil {
		return err
	}
	if h != nil && !ValidOID(h.OID) {
		return &InvalidEntityError{Field: "holderOid", Value: h.OID}
	}
	return s.reg.Check(ref.Type)
}

// runOp runs one store operation under the store's timeout, timing it and counting it
// under the label its answer gets. When f fails, runOp fails open (logs and counts why)
// and reports false with the zero T; the caller answers what failing open means for it.
func runOp[T any](ctx context.Context, s *core, op opName, f func(context.Context) (T, error), label func(T) outcomeLabel) (T, bool) {
	return runOpWithin(ctx, s, op, s.timeout, f, label)
}

// pagedBudget is how many Config.Timeouts a read of many pages (readLive) has in all;
// each page has one Config.Timeout of its own, so a Redis that does not answer still
// fails the read within one.
const pagedBudget = 20

// runOpWithin is runOp with d in place of Config.Timeout for the whole operation.
func runOpWithin[T any](ctx context.Context, s *core, op opName, d time.Duration, f func(context.Context) (T, error), label func(T) outcomeLabel) (T, bool) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	v, err := f(ctx)
	s.met.duration.WithLabelValues(string(op)).Observe(time.Since(start).Seconds())
	if err != nil {
		s.failOpen(ctx, op, err)
		s.met.ops.WithLabelValues(string(op), string(labelUnknown)).Inc()
		var zero T
		return zero, false
	}
	s.met.ops.WithLabelValues(string(op), string(label(v))).Inc()
	return v, true
}

// write runs a lock operation: counted by its outcome, OutcomeUnknown when it fails open.
func (s *core) write(ctx context.Context, op opName, f func(context.Context) (Result, error)) Result {
	res, ok := runOp(ctx, s, op, f, outcomeOf)
	if !ok {
		return Result{Outcome: protocol.OutcomeUnknown}
	}
	return res
}

func outcomeOf(r Result) outcomeLabel {
	if r.refused != nil {
		return labelRefused
	}
	return outcomeLabel(r.Outcome)
}

// foundLabel labels a get by whether it found a live lock.
func foundLabel(l *protocol.Lock) outcomeLabel {
	if l == nil {
		return labelFree
	}
	return labelHeld
}

func listedLabel([]protocol.Lock) outcomeLabel { return labelListed }
func sweptLabel([]protocol.Lock) outcomeLabel  { return labelSwept }

// unavailable is failOpen for a call whose caller must tell "no answer" from an
// answer: it returns an error matching ErrUnavailable (see Store).
func (s *core) unavailable(ctx context.Context, op opName, err error) error {
	s.failOpen(ctx, op, err)
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// failOpen is the one place a failed operation turns into "go on without locks".
func (s *core) failOpen(ctx context.Context, op opName, err error) {
	reason := classify(err)
	s.met.failOpen.WithLabelValues(string(op), string(reason)).Inc()
	level := slog.LevelWarn
	if reason == ReasonCanceled {
		// The caller gave up (a socket that closed mid-claim, the hub shutting down):
		// Redis is not at fault, and a warning per closed socket would be a flood any
		// client could cause. Counted all the same.
		level = slog.LevelDebug
	}
	s.log.LogAttrs(ctx, level, "lock store unavailable; failing open",
		slog.String("op", string(op)), slog.String("reason", string(reason)), slog.String("error", err.Error()))
	if s.cluster != nil && staleTopology(reason) {
		// Reload the slot map now instead of at the next periodic reload, so claims
		// succeed again soon after a failover. ReloadState only marks it stale.
		s.cluster.ReloadState(ctx)
	}
}
