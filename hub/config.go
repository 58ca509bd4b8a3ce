package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Store is what the hub uses of the lock store, each concept through a small interface
// of its own; StoreOf fills it from a *locks.Store. Every method may be called
// concurrently, and every one follows the store's error convention (locks.Store): a
// Redis failure was logged and counted inside the store and is answered as failing
// open (OutcomeUnknown, no locks), or, where the hub must tell "no answer" from an
// answer, as an error matching locks.ErrUnavailable. Any other error is a request that
// could never succeed.
type Store struct {
	Locks     Locks
	Feed      Feed
	Presence  Presence
	Instances locks.MemberInstances // passed on to the hub's locks.Member (instance.go)
	Console   Console
}

// StoreOf returns the parts of s the hub uses.
func StoreOf(s *locks.Store) Store {
	return Store{Locks: s.Locks, Feed: s.Locks, Presence: s.Presence, Instances: s.Instances, Console: s.Console}
}

// Locks is what a socket's lock requests need: *locks.Locks.
type Locks interface {
	Claim(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string) (locks.Result, error)
	Renew(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string) (locks.Result, error)
	Release(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string) (locks.Result, error)
	Takeover(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string, allowed bool) (locks.Result, error)
	Detach(ctx context.Context, ref locks.Ref, h protocol.Holder, conn string, release bool) (locks.Result, error)
	Mine(ctx context.Context, tenant, oid string) ([]protocol.Lock, error)
	// The waiting line and claims of many (version 3, line.go).
	ReleaseHanded(ctx context.Context, ref locks.Ref, conn string) (locks.Result, error)
	ClaimMany(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string) (locks.ManyResult, error)
	ReleaseMany(ctx context.Context, tenant, entityType string, uids []string, h protocol.Holder, conn string) (locks.ManyResult, error)
	Registry() *locks.Registry
	Lease() time.Duration
}

// Feed is what watches need (see fanout.go, snapshot.go): a type's snapshot, the sweep
// of watched types, and the change feed. *locks.Locks.
type Feed interface {
	ListJSON(ctx context.Context, tenant, entityType string) ([]byte, error)
	Sweep(ctx context.Context, tenant, entityType string, every time.Duration) error
	RunFeed(ctx context.Context, h locks.FeedHandler) error
}

// Presence is the viewers of entities and nudges (view.go): *locks.Presence.
type Presence interface {
	View(ctx context.Context, ref locks.Ref, v locks.View, ttl time.Duration) (locks.Viewers, error)
	Unview(ctx context.Context, ref locks.Ref, conns ...string) error
	LeaveViews(ctx context.Context, ref locks.Ref, at time.Time, conns ...string) error
	RefreshViews(ctx context.Context, ref locks.Ref, ttl time.Duration, conns ...string) (locks.Viewers, []string, error)
	Nudge(ctx context.Context, ref locks.Ref, from protocol.Holder, every time.Duration) (protocol.Outcome, error)
}

// Console is the lock console's frames (PROTOCOL.md §10, admin.go): *locks.Console.
type Console interface {
	AdminLocks(ctx context.Context, tenant string) ([]protocol.Lock, error)
	ForceRelease(ctx context.Context, ref locks.Ref, admin protocol.Holder) (locks.Result, error)
}

var (
	_ Locks    = (*locks.Locks)(nil)
	_ Feed     = (*locks.Locks)(nil)
	_ Presence = (*locks.Presence)(nil)
	_ Console  = (*locks.Console)(nil)
)

// Config configures a Hub. Store and Verifier are required; every other zero value
// works.
type Config struct {
	// Store is the lock store: StoreOf(*locks.Store). Every part is required.
	Store Store
	// Verifier checks the tokens of auth frames. Required.
	Verifier auth.Verifier
	// Logger receives connection-level warnings. Nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the hub's metrics. Nil means none are registered.
	Registerer prometheus.Registerer
	// Refusals logs refused tokens (PROTOCOL.md §6): give web's Config the same, so
	// that the count at INFO covers both. Nil means one of the hub's own, on Logger.
	Refusals *auth.RefusalLog

	// AllowedOrigins is the Origin allow-list of the handshake (see ParseOrigins). The
	// hub's own origin and requests without Origin are always allowed. Nil means same
	// origin only.
	AllowedOrigins []string
	// Roles are the roles that may take a lock over (setting "takeover-role") and use
	// the lock console's frames, adminLocks and forceRelease (PROTOCOL.md §10, setting
	// "admin-role"). The zero value means auth's defaults; web.Config takes the same.
	Roles auth.Roles

	// ReleaseGrace is how long after a socket closes its locks are released, unless its
	// holder keeps them from another socket: setting "release-grace". Zero means
	// DefaultReleaseGrace.
	ReleaseGrace time.Duration
	// RenewEvery is the renewal period the welcome frame advises (renewMs): setting
	// "renew-every", shorter than the store's lease. Zero means DefaultRenewEvery, or
	// two fifths of the lease when that is shorter.
	RenewEvery time.Duration
	// AuthTimeout is how long a new socket has to authenticate (close 4408). Zero
	// means protocol.AuthTimeout (10s).
	AuthTimeout time.Duration
	// TokenLeeway is how long past its token's exp a socket stays open without a
	// refresh (close 4401). Zero means protocol.TokenLeeway (5s), also the maximum.
	TokenLeeway time.Duration

	// SendQueue is how many frames may wait for one socket; a reader too slow to keep
	// it from overflowing is closed with 4429. Zero means 256.
	SendQueue int
	// WriteTimeout bounds the write of one frame; a socket that cannot take a frame in
	// that time is dropped as too slow. Zero means 10s.
	WriteTimeout time.Duration

	// RateLimit and RateBurst are the frames a second served per socket and the burst
	// above that (PROTOCOL.md §4). Zero means protocol.RateLimit (50) and
	// protocol.RateBurst (100).
	RateLimit float64
	RateBurst int
	// OverRateGrace is how long a socket may stay over the rate after its first
	// rate_limited answer before it is closed with 4429. Zero means
	// protocol.RateLimitGrace (10s).
	OverRateGrace time.Duration

	// SweepInterval is how often the indexes of watched types are swept for leases that
	// ran out, to announce them as Expired. Zero means DefaultSweepInterval (1s).
	SweepInterval time.Duration

	// MaxConnections caps the sockets of this instance: setting "max-connections". A
	// handshake beyond it is refused with 503 and Retry-After; open sockets are not
	// disturbed. Zero means DefaultMaxConnections.
	MaxConnections int
	// MaxPendingAuth caps the sockets that have not authenticated yet: setting
	// "max-pending-auth", refused like MaxConnections. Zero means
	// DefaultMaxPendingAuth.
	MaxPendingAuth int
	// MaxPendingAuthPerIP caps the sockets of one client address that have not
	// authenticated yet: setting "max-pending-auth-per-ip", refused like
	// MaxConnections. Zero means DefaultMaxPendingAuthPerIP, or half of
	// MaxPendingAuth when that is smaller. Set, it must be below MaxPendingAuth: at
	// MaxPendingAuth one address could hold every place.
	MaxPendingAuthPerIP int
	// TrustedProxies are the proxies whose X-Forwarded-For names the client address
	// MaxPendingAuthPerIP counts (setting "trusted-proxies", see ParseTrustedProxies).
	// Nil means none: the client address is the peer's.
	TrustedProxies []netip.Prefix
	// MaxSocketsPerPerson caps the authenticated sockets of one person (tenant and
	// oid) on this instance: setting "max-sockets-per-person". An auth beyond it
	// answers too_many_sockets and closes with 4429. Zero means
	// DefaultMaxSocketsPerPerson.
	MaxSocketsPerPerson int
	// MaxLocksPerSocket caps the entities held through one socket at a time: setting
	// "max-locks-per-socket"; a claim or takeover beyond it answers too_many_locks and
	// writes nothing. Zero means DefaultMaxLocksPerSocket.
	MaxLocksPerSocket int
	// PingEvery is how often the hub sends each socket a WebSocket Ping: setting
	// "ping-every". A socket that has not answered with a Pong PongTimeout later is
	// cut, and its locks follow the release grace. Zero means DefaultPingEvery.
	PingEvery time.Duration
	// PongTimeout is how long a Ping may go unanswered. Zero means
	// protocol.PongTimeout (10s).
	PongTimeout time.Duration
	// InstanceTimeout is how long an instance may go without refreshing its liveness
	// record before the others take it for dead and release its sockets' locks after
	// the grace: setting "instance-timeout". Records are refreshed every third of it.
	// Zero means DefaultInstanceTimeout.
	InstanceTimeout time.Duration

	// ViewTTL is how long a socket's view of an entity lasts in Redis unless refreshed
	// (PROTOCOL.md §9): setting "presence-ttl". Views are refreshed every third of it,
	// so the views of an instance that died end within about four thirds of it. Zero
	// means DefaultViewTTL.
	ViewTTL time.Duration
	// MaxViewsPerSocket caps the entities one socket views at a time; a view beyond it
	// answers too_many_views. Zero means protocol.MaxViewsPerSocket (50).
	MaxViewsPerSocket int
	// NudgeEvery is how often one person may nudge the holder of one entity; sooner
	// answers rate_limited. Zero means protocol.NudgeEvery (30s).
	NudgeEvery time.Duration
}

// Defaults of Config.
const (
	DefaultReleaseGrace = locks.DefaultReleaseGrace
	DefaultRenewEvery   = 2 * time.Minute
	DefaultSendQueue    = 256
	DefaultWriteTimeout = 10 * time.Second
	// DefaultSweepInterval is how often watched indexes are swept for expired leases.
	DefaultSweepInterval = time.Second
	// Limits and liveness of PROTOCOL.md §4 (version 2).
	DefaultMaxConnections    = 50000
	DefaultMaxPendingAuth    = 1000
	DefaultMaxLocksPerSocket = 100
	// Fair share of PROTOCOL.md §4 (version 3).
	DefaultMaxPendingAuthPerIP = 100
	DefaultMaxSocketsPerPerson = 20
	DefaultPingEvery           = 25 * time.Second
	// DefaultInstanceTimeout: a dead instance's locks go at most 20 s + the grace after
	// it died (the contract allows the grace + 30 s).
	DefaultInstanceTimeout = locks.DefaultInstanceTimeout
	// DefaultViewTTL: a dead instance's viewers go within 40 s (the contract: 60 s).
	DefaultViewTTL = 30 * time.Second
	// MaxViewTTL is the longest ViewTTL that keeps the contract's 60 s.
	MaxViewTTL = 45 * time.Second
	// MaxInstanceTimeout is the longest InstanceTimeout that keeps the contract's
	// grace + 30 s: a dead instance is found within about four thirds of it.
	MaxInstanceTimeout = 22 * time.Second
)

// named is a value and the name an error gives it. Validation ranges over slices of
// them, never over a map, whose order is random: of several bad values, the one
// refused is always the same.
type named[T any] struct {
	name  string
	value T
}

// withDefaults validates c and fills in every zero field: the one place defaults live.
// The checks run in a fixed order, each group in the order of Config's fields, and the
// first that fails is the error.
func (c Config) withDefaults() (Config, error) {
	if c.Store.Locks == nil || c.Store.Feed == nil || c.Store.Presence == nil || c.Store.Instances == nil || c.Store.Console == nil || c.Verifier == nil {
		return c, errors.New("hub: Config.Store (every part) and Config.Verifier are required")
	}
	for _, s := range []named[time.Duration]{{"release-grace", c.ReleaseGrace}, {"renew-every", c.RenewEvery}, {"ping-every", c.PingEvery}, {"instance-timeout", c.InstanceTimeout}, {"presence-ttl", c.ViewTTL}} {
		if s.value < 0 {
			return c, &protocol.SettingError{Setting: s.name, Err: fmt.Errorf("%s must be positive", s.value)}
		}
	}
	lease := c.Store.Locks.Lease()
	if c.RenewEvery >= lease {
		return c, &protocol.SettingError{Setting: "renew-every", Err: fmt.Errorf("%s is not shorter than the lease %s: locks would run out between renewals", c.RenewEvery, lease)}
	}
	for _, f := range []named[time.Duration]{
		{"AuthTimeout", c.AuthTimeout},
		{"TokenLeeway", c.TokenLeeway}, {"WriteTimeout", c.WriteTimeout}, {"OverRateGrace", c.OverRateGrace},
		{"SweepInterval", c.SweepInterval}, {"NudgeEvery", c.NudgeEvery},
	} {
		if f.value < 0 {
			return c, fmt.Errorf("hub: Config.%s must not be negative", f.name)
		}
	}
	for _, s := range []named[int]{{"max-connections", c.MaxConnections}, {"max-pending-auth", c.MaxPendingAuth}, {"max-pending-auth-per-ip", c.MaxPendingAuthPerIP}, {"max-sockets-per-person", c.MaxSocketsPerPerson}, {"max-locks-per-socket", c.MaxLocksPerSocket}} {
		if s.value < 0 {
			return c, &protocol.SettingError{Setting: s.name, Err: fmt.Errorf("%d must be positive", s.value)}
		}
	}
	if c.PongTimeout < 0 {
		return c, errors.New("hub: Config.PongTimeout must not be negative")
	}
	if c.SendQueue < 0 || c.RateLimit < 0 || c.RateBurst < 0 || c.MaxViewsPerSocket < 0 {
		return c, errors.New("hub: Config.SendQueue, RateLimit, RateBurst and MaxViewsPerSocket must not be negative")
	}
	if c.InstanceTimeout > MaxInstanceTimeout {
		return c, &protocol.SettingError{Setting: "instance-timeout", Err: fmt.Errorf("%s is over %s: the locks of an instance that dies go about 4/3 of it + the release grace after its death, and PROTOCOL.md §4 allows the grace + 30 s", c.InstanceTimeout, MaxInstanceTimeout)}
	}
	if c.ViewTTL > MaxViewTTL {
		return c, &protocol.SettingError{Setting: "presence-ttl", Err: fmt.Errorf("%s is over %s: the viewers of an instance that dies go within about 4/3 of it, and PROTOCOL.md §9 allows 60 s", c.ViewTTL, MaxViewTTL)}
	}
	if c.TokenLeeway > protocol.TokenLeeway {
		return c, fmt.Errorf("hub: Config.TokenLeeway %s is over the %s PROTOCOL.md §4 allows", c.TokenLeeway, protocol.TokenLeeway)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Refusals == nil {
		c.Refusals = auth.NewRefusalLog(c.Logger)
	}
	c.Roles = c.Roles.WithDefaults()
	c.ReleaseGrace = cmp.Or(c.ReleaseGrace, DefaultReleaseGrace)
	c.RenewEvery = cmp.Or(c.RenewEvery, min(DefaultRenewEvery, lease*2/5))
	c.AuthTimeout = cmp.Or(c.AuthTimeout, protocol.AuthTimeout)
	c.TokenLeeway = cmp.Or(c.TokenLeeway, protocol.TokenLeeway)
	c.SendQueue = cmp.Or(c.SendQueue, DefaultSendQueue)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	c.RateLimit = cmp.Or(c.RateLimit, protocol.RateLimit)
	c.RateBurst = cmp.Or(c.RateBurst, protocol.RateBurst)
	c.OverRateGrace = cmp.Or(c.OverRateGrace, protocol.RateLimitGrace)
	c.SweepInterval = cmp.Or(c.SweepInterval, DefaultSweepInterval)
	c.MaxConnections = cmp.Or(c.MaxConnections, DefaultMaxConnections)
	c.MaxPendingAuth = cmp.Or(c.MaxPendingAuth, DefaultMaxPendingAuth)
	if c.MaxPendingAuthPerIP >= c.MaxPendingAuth {
		return c, &protocol.SettingError{Setting: "max-pending-auth-per-ip", Err: fmt.Errorf("%d is not below --max-pending-auth (%d): one address could hold every place of the sockets waiting to authenticate", c.MaxPendingAuthPerIP, c.MaxPendingAuth)}
	}
	c.MaxPendingAuthPerIP = cmp.Or(c.MaxPendingAuthPerIP, min(DefaultMaxPendingAuthPerIP, max(1, c.MaxPendingAuth/2)))
	c.MaxSocketsPerPerson = cmp.Or(c.MaxSocketsPerPerson, DefaultMaxSocketsPerPerson)
	c.MaxLocksPerSocket = cmp.Or(c.MaxLocksPerSocket, DefaultMaxLocksPerSocket)
	c.PingEvery = cmp.Or(c.PingEvery, DefaultPingEvery)
	c.PongTimeout = cmp.Or(c.PongTimeout, protocol.PongTimeout)
	c.InstanceTimeout = cmp.Or(c.InstanceTimeout, DefaultInstanceTimeout)
	c.ViewTTL = cmp.Or(c.ViewTTL, DefaultViewTTL)
	c.MaxViewsPerSocket = cmp.Or(c.MaxViewsPerSocket, protocol.MaxViewsPerSocket)
	c.NudgeEvery = cmp.Or(c.NudgeEvery, protocol.NudgeEvery)
	if c.ViewTTL < 3*time.Millisecond {
		return c, &protocol.SettingError{Setting: "presence-ttl", Err: fmt.Errorf("%s is too short to refresh a view in", c.ViewTTL)}
	}
	if c.InstanceTimeout < 3*time.Millisecond {
		return c, &protocol.SettingError{Setting: "instance-timeout", Err: fmt.Errorf("%s is too short to refresh a record in", c.InstanceTimeout)}
	}
	return c, nil
}
