package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/hub"
	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
)

// Config is every setting of PROTOCOL.md §7, parsed and validated.
type Config struct {
	Listen         string
	RedisURL       string // empty: an embedded Redis in the process
	RedisCluster   bool
	JWKSURL        string // empty: development tokens
	Issuer         string
	Audience       string
	Claims         auth.ClaimNames
	Lockable       []string
	Lease          time.Duration
	RenewEvery     time.Duration
	ReleaseGrace   time.Duration
	DemoRedisURL   string // empty: the lock Redis
	DemoCluster    bool   // DemoRedisURL is a cluster seed
	AllowedOrigins []string
	TakeoverRole   string
	LogLevel       slog.Level
}

// Development reports whether tokens are the server's own (no JWKS configured).
func (c Config) Development() bool { return c.JWKSURL == "" }

// setting is one setting: a flag and its environment variable (the flag wins).
type setting struct {
	flag, env, def, usage string
	isBool                bool
	value                 string // after parsing: flag, else environment, else def
	from                  string // where value came from, for error messages
}

func (s *setting) String() string { return s.value }

func (s *setting) Set(v string) error { s.value, s.from = v, "--"+s.flag; return nil }

// IsBoolFlag lets a boolean setting be given as a bare --flag.
func (s *setting) IsBoolFlag() bool { return s.isBool }

// settings lists the settings in the order -h shows them.
func settings() []*setting {
	return []*setting{
		{flag: "listen", env: "LOCKHUB_LISTEN", def: ":8080", usage: "HTTP and WebSocket address"},
		{flag: "redis-url", env: "LOCKHUB_REDIS_URL", usage: "redis:// or rediss:// URL of the lock Redis, credentials in the URL (empty: an embedded Redis in this process)"},
		{flag: "redis-cluster", env: "LOCKHUB_REDIS_CLUSTER", def: "false", isBool: true, usage: "treat --redis-url as a Redis Cluster seed (more seeds as ?addr=host:port)"},
		{flag: "jwks-url", env: "LOCKHUB_JWKS_URL", usage: "where the token signing keys are (empty: development tokens from POST /dev/token)"},
		{flag: "issuer", env: "LOCKHUB_ISSUER", usage: "required token issuer (iss), with --jwks-url"},
		{flag: "audience", env: "LOCKHUB_AUDIENCE", usage: "required token audience (aud), with --jwks-url"},
		{flag: "claim-tenant", env: "LOCKHUB_CLAIM_TENANT", def: "tid", usage: "token claim naming the tenant"},
		{flag: "claim-oid", env: "LOCKHUB_CLAIM_OID", def: "oid", usage: "token claim naming the user's object id (the lock holder)"},
		{flag: "claim-name", env: "LOCKHUB_CLAIM_NAME", def: "name", usage: "token claim naming the user's display name"},
		{flag: "claim-roles", env: "LOCKHUB_CLAIM_ROLES", def: "roles", usage: "token claim listing the user's roles"},
		{flag: "lockable", env: "LOCKHUB_LOCKABLE", def: "ApprovalRequest", usage: "comma-separated lockable entity types"},
		{flag: "lease", env: "LOCKHUB_LEASE", def: "5m", usage: "how long a claim holds a lock without renewal"},
		{flag: "renew-every", env: "LOCKHUB_RENEW_EVERY", def: "2m", usage: "how often clients renew their locks; shorter than --lease"},
		{flag: "release-grace", env: "LOCKHUB_RELEASE_GRACE", def: "10s", usage: "how long after a socket closes its locks are released"},
		{flag: "demo-redis-url", env: "LOCKHUB_DEMO_REDIS_URL", usage: "redis:// or rediss:// URL where the demo domain keeps its rows (empty: the lock Redis)"},
		{flag: "demo-redis-cluster", env: "LOCKHUB_DEMO_REDIS_CLUSTER", def: "false", isBool: true, usage: "treat --demo-redis-url as a Redis Cluster seed (more seeds as ?addr=host:port)"},
		{flag: "allowed-origins", env: "LOCKHUB_ALLOWED_ORIGINS", usage: "comma-separated WebSocket Origin allow-list, '*' for one DNS label (empty: same origin)"},
		{flag: "takeover-role", env: "LOCKHUB_TAKEOVER_ROLE", def: "Locks.TakeOver", usage: "role that may take a lock over"},
		{flag: "log-level", env: "LOCKHUB_LOG_LEVEL", def: "info", usage: "debug, info, warn or error"},
	}
}

// configError is a setting that cannot be used; the binary exits with status 2.
type configError struct {
	setting *setting
	err     error
}

func (e *configError) Error() string {
	switch e.setting.from {
	case "--" + e.setting.flag:
		return fmt.Sprintf("--%s: %v", e.setting.flag, e.err)
	case e.setting.env:
		return fmt.Sprintf("%s (--%s): %v", e.setting.env, e.setting.flag, e.err)
	}
	return fmt.Sprintf("--%s (%s): %v", e.setting.flag, e.setting.env, e.err)
}

func (e *configError) Unwrap() error { return e.err }

// parseConfig reads the settings from args, then the environment for those args leave
// out (an empty variable counts as unset), then the defaults, and validates them.
// -h prints the usage to usage and returns flag.ErrHelp.
func parseConfig(args []string, lookupEnv func(string) (string, bool), usage io.Writer) (Config, error) {
	fs := flag.NewFlagSet("lockhub", flag.ContinueOnError)
	fs.SetOutput(usage)
	all := settings()
	byFlag := map[string]*setting{}
	for _, s := range all {
		s.value, s.from = s.def, "the default"
		byFlag[s.flag] = s
		fs.Var(s, s.flag, s.usage+" ["+s.env+"]")
	}
	fs.Usage = func() {
		fmt.Fprintf(usage, "lockhub: an edit-lock service (HTTP API, WebSocket hub, demo page).\n\nUsage: lockhub [flags]\n\nEvery flag may be given as the environment variable in brackets; a flag wins.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q: every setting is a --flag", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, s := range all {
		if given[s.flag] {
			continue
		}
		if v, ok := lookupEnv(s.env); ok && v != "" {
			s.value, s.from = v, s.env
		}
	}
	return validate(byFlag)
}

// validate turns the settings into a Config; every error names its setting.
func validate(s map[string]*setting) (Config, error) {
	var c Config
	var errs []error
	bad := func(name string, err error) { errs = append(errs, &configError{setting: s[name], err: err}) }
	str := func(name string) string { return strings.TrimSpace(s[name].value) }

	c.Listen = str("listen")
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", fmt.Errorf("%q is not a host:port address (like :8080 or 127.0.0.1:8080)", c.Listen))
	}

	var err error
	if c.RedisCluster, err = strconv.ParseBool(str("redis-cluster")); err != nil {
		bad("redis-cluster", fmt.Errorf("%q is not true or false", str("redis-cluster")))
	}
	c.RedisURL = str("redis-url")
	if c.RedisURL != "" {
		if err := checkRedisURL(c.RedisURL, c.RedisCluster); err != nil {
			bad("redis-url", err)
		}
	} else if c.RedisCluster {
		bad("redis-cluster", errors.New("needs --redis-url: the embedded Redis is not a cluster"))
	}
	if c.DemoCluster, err = strconv.ParseBool(str("demo-redis-cluster")); err != nil {
		bad("demo-redis-cluster", fmt.Errorf("%q is not true or false", str("demo-redis-cluster")))
	}
	c.DemoRedisURL = str("demo-redis-url")
	if c.DemoRedisURL != "" {
		if err := checkRedisURL(c.DemoRedisURL, c.DemoCluster); err != nil {
			bad("demo-redis-url", err)
		}
	} else if c.DemoCluster {
		bad("demo-redis-cluster", errors.New("needs --demo-redis-url: without it the demo rows live in the lock Redis"))
	}

	c.JWKSURL, c.Issuer, c.Audience = str("jwks-url"), str("issuer"), str("audience")
	if c.JWKSURL != "" {
		if u, err := url.Parse(c.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("jwks-url", fmt.Errorf("%q is not an http or https URL", c.JWKSURL))
		}
		if c.Issuer == "" {
			bad("issuer", errors.New("is required with --jwks-url: tokens of any issuer would pass"))
		}
		if c.Audience == "" {
			bad("audience", errors.New("is required with --jwks-url: tokens for any service would pass"))
		}
	} else {
		// Without a JWKS the server runs in development mode and mints its own tokens:
		// an issuer or audience without a JWKS means production was meant.
		for _, name := range []string{"issuer", "audience"} {
			if str(name) != "" {
				bad(name, errors.New("is set but --jwks-url is not: without a JWKS lockhub would run in development mode"))
			}
		}
	}
	c.Claims = auth.ClaimNames{Tenant: str("claim-tenant"), OID: str("claim-oid"), Name: str("claim-name"), Roles: str("claim-roles")}
	for _, name := range []string{"claim-tenant", "claim-oid", "claim-name", "claim-roles"} {
		if str(name) == "" {
			bad(name, errors.New("must name a claim"))
		}
	}

	for t := range strings.SplitSeq(str("lockable"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			c.Lockable = append(c.Lockable, t)
		}
	}
	if len(c.Lockable) == 0 {
		bad("lockable", errors.New("names no type"))
	} else if _, err := locks.NewRegistry(c.Lockable...); err != nil {
		bad("lockable", errors.New(strings.TrimPrefix(err.Error(), "locks: ")))
	}

	durations := []struct {
		name string
		to   *time.Duration
	}{{"lease", &c.Lease}, {"renew-every", &c.RenewEvery}, {"release-grace", &c.ReleaseGrace}}
	durOK := true
	for _, d := range durations {
		v, err := time.ParseDuration(str(d.name))
		switch {
		case err != nil:
			bad(d.name, fmt.Errorf("%q is not a Go duration (like 90s, 5m or 1h30m)", str(d.name)))
			durOK = false
		case v <= 0:
			bad(d.name, fmt.Errorf("%s must be positive", v))
			durOK = false
		case v < time.Millisecond:
			bad(d.name, fmt.Errorf("%s is under the millisecond precision of a lease", v))
			durOK = false
		}
		*d.to = v
	}
	if durOK && c.RenewEvery >= c.Lease {
		bad("renew-every", fmt.Errorf("%s is not shorter than --lease %s: locks would run out between renewals", c.RenewEvery, c.Lease))
	}

	if c.AllowedOrigins, err = hub.ParseOrigins(str("allowed-origins")); err != nil {
		bad("allowed-origins", errors.New(strings.TrimPrefix(err.Error(), "hub: ")))
	}
	if c.TakeoverRole = str("takeover-role"); c.TakeoverRole == "" {
		bad("takeover-role", errors.New("must name a role"))
	}
	if err := c.LogLevel.UnmarshalText([]byte(str("log-level"))); err != nil {
		bad("log-level", fmt.Errorf("%q is not debug, info, warn or error", str("log-level")))
	}
	return c, errors.Join(errs...)
}

// checkRedisURL parses a Redis URL as locks.NewClient will.
func checkRedisURL(u string, cluster bool) error {
	var err error
	if cluster {
		_, err = redis.ParseClusterURL(u)
	} else {
		_, err = redis.ParseURL(u)
	}
	if err != nil {
		// go-redis's message may quote the URL, credentials and all: say what is wrong
		// without repeating it.
		return fmt.Errorf("not a usable redis:// or rediss:// URL (%s)", redactURL(err.Error(), u))
	}
	return nil
}

// redactURL removes u, and its password, from msg.
func redactURL(msg, u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		if pw, ok := p.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return strings.ReplaceAll(msg, u, "<url>")
}
