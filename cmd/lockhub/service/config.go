package service

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	neturl "net/url"
	"strings"
	"time"

	entraid "github.com/redis/go-redis-entraid"

	"github.com/lockhub/lockhub/cmd/internal/flagenv"
	"github.com/lockhub/lockhub/hub"
	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Config is every setting of PROTOCOL.md §7, mapped onto the Configs of the packages
// that own them. Each default and each validation lives there, once: a flag's default
// is the owner's exported default, and a value the owner cannot use is refused by its
// constructor with a *protocol.SettingError, which Run names as the flag.
type Config struct {
	Listen       string
	RedisURL     string // empty: an embedded Redis in the process
	RedisCluster bool
	DemoRedisURL string // empty: the lock Redis
	DemoCluster  bool   // DemoRedisURL is a cluster seed
	// RedisAuth is how the lock and demo Redis clients authenticate: "password" (the
	// URLs' credentials) or "entra" (Entra ID tokens, redisauth.go).
	RedisAuth string
	// RedisIdentity, with RedisAuth "entra", issues the tokens; no flag sets it. Nil
	// means the identity the AZURE_* variables name (azureIdentity). For programs and
	// tests that bring their own identity provider.
	RedisIdentity entraid.IdentityProvider
	// RedisCAFile is a PEM file of the CAs a rediss:// server's certificate must
	// chain to, instead of the system's; empty means the system's.
	RedisCAFile string
	Lockable    []string
	// JWKS checks production tokens; URL empty means development tokens. Its Claims
	// are the claim names of either.
	JWKS     auth.JWKSConfig
	Store    locks.Config // Lease, fair share, audit retention
	Hub      hub.Config   // ReleaseGrace, RenewEvery, Roles, AllowedOrigins, socket limits, heartbeat
	LogLevel slog.Level
	// Dev asks for development mode (PROTOCOL.md §6): tokens from POST /dev/token.
	Dev bool
	// Demo asks for the demo domain outside development mode (PROTOCOL.md §5).
	Demo bool
	// MetricsListen, when set, serves /metrics there and not on Listen.
	MetricsListen string
	// DrainDelay is how long, on SIGTERM, /readyz answers 503 while everything else is
	// served as before, before the sockets are closed (PROTOCOL.md §7). Zero closes
	// them at once.
	DrainDelay time.Duration
	// MemoryTrimBurst is how many new sockets make a burst whose garbage's memory is
	// returned to the OS once it is over (trim.go); 0 never returns it.
	MemoryTrimBurst int
}

// Development reports whether lockhub runs in development mode: chosen with --dev, or
// the embedded default of make run, with neither --redis-url nor --jwks-url (PROTOCOL.md
// §6, "Development mode is chosen, never fallen into").
func (c Config) Development() bool { return c.Dev || (c.RedisURL == "" && c.JWKS.URL == "") }

// DemoOn reports whether the demo domain is served: in development mode, or with --demo.
func (c Config) DemoOn() bool { return c.Demo || c.Development() }

// Listen defaults: anywhere in production, this machine only in development mode.
const (
	defaultListen    = ":8080"
	defaultDevListen = "127.0.0.1:8080"
)

// envPrefix makes a flag's environment variable: --redis-url is LOCKHUB_REDIS_URL.
const envPrefix = "LOCKHUB_"

// flags registers every setting on fs, bound to c, in the order -h shows them.
func (c *Config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", defaultListen, "HTTP and WebSocket address ("+defaultDevListen+" in development mode)")
	fs.StringVar(&c.RedisURL, "redis-url", "", "redis:// or rediss:// URL of the lock Redis, credentials in the URL (empty: an embedded Redis in this process)")
	fs.BoolVar(&c.RedisCluster, "redis-cluster", false, "treat --redis-url as a Redis Cluster seed (more seeds as ?addr=host:port)")
	c.RedisAuth = authPassword
	fs.Func("redis-auth", "how lockhub authenticates to the lock and demo Redis: password (the URL's credentials) or entra (a Microsoft Entra ID token for the identity the AZURE_* variables name, renewed on open connections) (default password)", func(s string) error {
		switch s = strings.TrimSpace(s); s {
		case authPassword, authEntra:
			c.RedisAuth = s
			return nil
		}
		return fmt.Errorf("%q is neither %s nor %s", s, authPassword, authEntra)
	})
	fs.StringVar(&c.RedisCAFile, "redis-ca-file", "", "PEM file of the certificate authorities a rediss:// server's certificate must chain to (empty: the system's)")
	fs.StringVar(&c.JWKS.URL, "jwks-url", "", "where the token signing keys are (empty: development tokens from POST /dev/token)")
	fs.StringVar(&c.JWKS.Issuer, "issuer", "", "required token issuer (iss), with --jwks-url")
	fs.StringVar(&c.JWKS.Audience, "audience", "", "required token audience (aud), with --jwks-url")
	nonEmpty(fs, &c.JWKS.Claims.Tenant, "claim-tenant", auth.DefaultTenantClaim, "token claim naming the tenant")
	nonEmpty(fs, &c.JWKS.Claims.OID, "claim-oid", auth.DefaultOIDClaim, "token claim naming the user's object id (the lock holder)")
	nonEmpty(fs, &c.JWKS.Claims.Name, "claim-name", auth.DefaultNameClaim, "token claim naming the user's display name")
	nonEmpty(fs, &c.JWKS.Claims.Roles, "claim-roles", auth.DefaultRolesClaim, "token claim listing the user's roles")
	c.Lockable = []string{locks.DefaultLockable}
	fs.Func("lockable", "comma-separated lockable entity types (default "+locks.DefaultLockable+")", func(s string) error {
		c.Lockable = nil
		for t := range strings.SplitSeq(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				c.Lockable = append(c.Lockable, t)
			}
		}
		if len(c.Lockable) == 0 {
			return errors.New("names no type")
		}
		return nil
	})
	fs.DurationVar(&c.Store.Lease, "lease", locks.DefaultLease, "how long a claim holds a lock without renewal")
	fs.DurationVar(&c.Hub.RenewEvery, "renew-every", hub.DefaultRenewEvery, "how often clients renew their locks; shorter than --lease")
	fs.DurationVar(&c.Hub.ReleaseGrace, "release-grace", hub.DefaultReleaseGrace, "how long after a socket closes its locks are released")
	fs.StringVar(&c.DemoRedisURL, "demo-redis-url", "", "redis:// or rediss:// URL where the demo domain keeps its rows (empty: the lock Redis)")
	fs.BoolVar(&c.DemoCluster, "demo-redis-cluster", false, "treat --demo-redis-url as a Redis Cluster seed (more seeds as ?addr=host:port)")
	fs.Func("allowed-origins", "comma-separated WebSocket Origin allow-list, '*' for one DNS label (empty: same origin)", func(s string) error {
		var err error
		c.Hub.AllowedOrigins, err = hub.ParseOrigins(s)
		return err
	})
	nonEmpty(fs, &c.Hub.Roles.Takeover, "takeover-role", auth.DefaultTakeoverRole, "role that may take a lock over")
	nonEmpty(fs, &c.Hub.Roles.Admin, "admin-role", auth.DefaultAdminRole, "role of the lock console: every live lock of the tenant, force release, the audit trail")
	fs.BoolVar(&c.Dev, "dev", false, "development mode: lockhub signs its own tokens (POST /dev/token) and serves the demo; on by itself only with neither --redis-url nor --jwks-url")
	fs.BoolVar(&c.Demo, "demo", false, "serve the demo domain and page outside development mode")
	fs.IntVar(&c.Hub.MaxConnections, "max-connections", hub.DefaultMaxConnections, "sockets this instance holds at most; a handshake beyond is refused with 503")
	fs.IntVar(&c.Hub.MaxPendingAuth, "max-pending-auth", hub.DefaultMaxPendingAuth, "sockets not yet authenticated this instance holds at most; a handshake beyond is refused with 503")
	fs.IntVar(&c.Hub.MaxSocketsPerPerson, "max-sockets-per-person", hub.DefaultMaxSocketsPerPerson, "authenticated sockets one person may hold on this instance; an auth beyond answers too_many_sockets and closes with 4429")
	fs.IntVar(&c.Hub.MaxPendingAuthPerIP, "max-pending-auth-per-ip", hub.DefaultMaxPendingAuthPerIP, "sockets of one client address not yet authenticated this instance holds at most, below --max-pending-auth; a handshake beyond is refused with 503")
	fs.Func("trusted-proxies", "comma-separated CIDRs of proxies whose X-Forwarded-For names the client address of --max-pending-auth-per-ip (empty: the peer's address)", func(s string) error {
		var err error
		c.Hub.TrustedProxies, err = hub.ParseTrustedProxies(s)
		return err
	})
	fs.IntVar(&c.Hub.MaxLocksPerSocket, "max-locks-per-socket", hub.DefaultMaxLocksPerSocket, "entities one socket may hold at a time; a claim beyond answers too_many_locks")
	fs.IntVar(&c.Store.MaxLocksPerPerson, locks.SettingLocksPerPerson, locks.DefaultMaxLocksPerPerson, "live locks one person may hold, counted in Redis across sockets, HTTP and instances; a claim beyond answers too_many_locks")
	fs.IntVar(&c.Store.MaxLocksPerTenant, locks.SettingLocksPerTenant, locks.DefaultMaxLocksPerTenant, "live locks a tenant may hold, other programs' locks counted (never refused); a claim beyond answers too_many_locks")
	fs.Float64Var(&c.Store.MaxChangesPerPerson, locks.SettingChangesPerPerson, locks.DefaultMaxChangesPerPerson, "claims, takeovers, releases and force releases that change a lock, one person may make a second across instances (bursts of 200, a bulk claim or release counting one per entity; renewals free); beyond answers rate_limited")
	fs.Float64Var(&c.Store.ListLocksPerTenant, locks.SettingListLocksPerTenant, locks.DefaultListLocksPerTenant, fmt.Sprintf("locks a tenant's lists (watch snapshots, lists by type, the console) may read from Redis a second on this instance, bursts of %d, each page of up to %d charged %d more; a list beyond is slowed, not refused (negative: no budget)", locks.DefaultListLocksBurst, locks.ListPage, locks.PageCharge))
	fs.DurationVar(&c.Store.AuditRetention, locks.SettingAuditRetention, locks.DefaultAuditRetention, "how long a tenant's audit trail keeps an entry; older ones are dropped as new ones are added")
	fs.IntVar(&c.Store.AuditMaxEntries, locks.SettingAuditMaxEntries, locks.DefaultAuditMaxEntries, "the most entries a tenant's audit trail holds, the oldest dropped first; dropping one younger than --audit-retention warns")
	fs.DurationVar(&c.Hub.PingEvery, "ping-every", hub.DefaultPingEvery, "how often the hub Pings each socket; one without a Pong 10s later is cut")
	fs.DurationVar(&c.Hub.ViewTTL, "presence-ttl", hub.DefaultViewTTL, "how long a socket's view of an entity lasts in Redis unless refreshed (every third of it): a dead instance's viewers go within about 4/3 of it")
	fs.DurationVar(&c.Hub.InstanceTimeout, "instance-timeout", hub.DefaultInstanceTimeout, "an instance that has not refreshed its liveness record in this long is dead: the others release its sockets' locks after --release-grace")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "a separate address for /metrics, then served only there (empty: /metrics on --listen)")
	fs.IntVar(&c.MemoryTrimBurst, "memory-trim-burst", DefaultMemoryTrimBurst, "after this many new sockets, once they stop coming (10s with under a tenth as many), return the free memory their set-up left to the OS (0: never)")
	fs.DurationVar(&c.DrainDelay, "drain-delay", 0, "on SIGTERM, answer /readyz 503 for this long, serving everything else as before, then close every socket (load balancers stop sending first)")
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "debug, info, warn or error")
}

// nonEmpty registers a string flag that may not be given empty: its zero value would
// silently mean the default, which a flag given as --name= did not ask for.
func nonEmpty(fs *flag.FlagSet, p *string, name, def, usage string) {
	*p = def
	fs.Func(name, usage+" (default "+def+")", func(s string) error {
		if s = strings.TrimSpace(s); s == "" {
			return errors.New("must not be empty")
		}
		*p = s
		return nil
	})
}

// check applies the rules that join settings of several owners, which only the binary
// knows: which Redis is meant, and whether production was meant. Every broken rule is
// reported, in the order of the checks below, so the message reads the same each time.
func (s *settings) check() error {
	var errs []error
	if s.RedisCluster && s.RedisURL == "" {
		errs = append(errs, s.Name("redis-cluster", errors.New("needs --redis-url: the embedded Redis is not a cluster")))
	}
	if s.DemoCluster && s.DemoRedisURL == "" {
		errs = append(errs, s.Name("demo-redis-cluster", errors.New("needs --demo-redis-url: without it the demo rows live in the lock Redis")))
	}
	switch {
	case s.Dev && s.JWKS.URL != "":
		errs = append(errs, s.Name("dev", errors.New("and --jwks-url exclude each other: development mode signs its own tokens; leave out one of --dev and --jwks-url")))
	case s.RedisURL != "" && s.JWKS.URL == "" && !s.Dev:
		// A production Redis without a JWKS is a secret that did not arrive, not a
		// wish for development tokens: refuse rather than let anyone mint any token.
		errs = append(errs, s.Name("jwks-url", errors.New("is not set, and --redis-url is: set --jwks-url (with --issuer and --audience) to check production tokens, or --dev to run in development mode on that Redis")))
	case s.JWKS.URL != "" && s.RedisURL == "":
		// An embedded Redis in production would give each instance private locks,
		// blind to the .NET API and lost at restart: a URL that did not arrive.
		errs = append(errs, s.Name("redis-url", errors.New("is not set, and --jwks-url is: production needs the shared lock Redis (redis:// or rediss://)")))
	case s.JWKS.URL == "":
		// Development mode mints its own tokens: an issuer or audience without a
		// JWKS means production was meant.
		for _, set := range [...]struct{ name, value string }{{"issuer", s.JWKS.Issuer}, {"audience", s.JWKS.Audience}} {
			if set.value != "" {
				errs = append(errs, s.Name(set.name, errors.New("is set but --jwks-url is not: without a JWKS lockhub would run in development mode")))
			}
		}
	}
	if !s.Dev && s.RedisURL == "" && s.JWKS.URL == "" && !loopback(s.Listen) {
		// Development mode that was not chosen serves this machine only: anyone who
		// reaches it may mint any token.
		errs = append(errs, s.Name("listen", fmt.Errorf("%q is not a loopback address, and development mode was not chosen: add --dev to serve development tokens there, or set --redis-url and --jwks-url for production", s.Listen)))
	}
	if s.DemoRedisURL != "" && !s.DemoOn() {
		errs = append(errs, s.Name("demo-redis-url", errors.New("is set but the demo is off: add --demo to serve it")))
	}
	if s.MemoryTrimBurst < 0 {
		errs = append(errs, s.Name("memory-trim-burst", errors.New("must not be negative: 0 never returns a burst's memory")))
	}
	if s.RedisAuth == authEntra {
		if s.RedisURL == "" {
			errs = append(errs, s.Name("redis-auth", errors.New("entra needs --redis-url: the embedded Redis takes no token")))
		}
		for _, u := range [...]struct{ name, url string }{{"redis-url", s.RedisURL}, {"demo-redis-url", s.DemoRedisURL}} {
			if hasPassword(u.url) {
				errs = append(errs, s.Name(u.name, errors.New("carries a password and --redis-auth is entra: leave the password out of the URL, the token takes its place")))
			}
		}
	}
	if s.RedisCAFile != "" && !isTLS(s.RedisURL) && !isTLS(s.DemoRedisURL) {
		errs = append(errs, s.Name("redis-ca-file", errors.New("is set but neither --redis-url nor --demo-redis-url is rediss://: nothing would check the CAs")))
	}
	if s.DrainDelay < 0 {
		errs = append(errs, s.Name("drain-delay", errors.New("must not be negative: 0s closes the sockets at once")))
	}
	if s.MetricsListen != "" && s.MetricsListen == s.Listen && !strings.HasSuffix(s.Listen, ":0") {
		errs = append(errs, s.Name("metrics-listen", errors.New("is the same address as --listen: leave it empty to serve /metrics there")))
	}
	return errors.Join(errs...)
}

// loopback reports whether listen, a host:port, listens on this machine only: a
// loopback address or localhost. An address that does not parse is left to net.Listen
// to refuse.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// hasPassword reports whether a Redis URL carries a password.
func hasPassword(u string) bool {
	p, err := neturl.Parse(u)
	if err != nil || p.User == nil {
		return false
	}
	pw, ok := p.User.Password()
	return ok && pw != ""
}

// isTLS reports whether a Redis URL asks for TLS.
func isTLS(u string) bool { return strings.HasPrefix(u, "rediss://") }

// listenHost is the host of listen, a host:port; empty when it has none.
func listenHost(listen string) string {
	host, _, _ := net.SplitHostPort(listen)
	return host
}

// settings is the parsed command line and environment.
type settings struct {
	Config
	*flagenv.Parsed
}

// settingError names the setting of err, a *protocol.SettingError from a constructor,
// as the flag or variable its value came from; other errors are returned as they are.
func (s *settings) settingError(err error) error {
	var se *protocol.SettingError
	if errors.As(err, &se) {
		return s.Name(se.Setting, se.Err)
	}
	return err
}

// parseConfig reads the settings from args, then the environment for those args leave
// out (an empty variable counts as unset), then the owners' defaults. It reports
// every value that does not parse, each named by its flag or variable; values that
// parse are judged by the constructors Run calls. -h prints the usage to usage and
// returns flag.ErrHelp.
func parseConfig(args []string, lookupEnv func(string) (string, bool), usage io.Writer) (*settings, error) {
	s := &settings{}
	fs := flag.NewFlagSet("lockhub", flag.ContinueOnError)
	fs.SetOutput(usage)
	s.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(usage, "lockhub: an edit-lock service (HTTP API, WebSocket hub, demo page).\n\nUsage: lockhub [flags]\n\nEvery flag may be given as the environment variable in brackets; a flag wins.\n\n")
		fs.PrintDefaults()
	}
	var err error
	if s.Parsed, err = flagenv.Parse(fs, args, envPrefix, lookupEnv); err != nil {
		return s, err
	}
	if s.Development() && s.From("listen") == flagenv.Default {
		s.Listen = defaultDevListen // an explicit --listen wins
	}
	return s, nil
}
