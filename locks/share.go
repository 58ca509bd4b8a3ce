package locks

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/lockhub/lockhub/protocol"
)

// The fair share of PROTOCOL.md §4 (version 3): locks per person and per tenant, and
// changes per person, counted in Redis by the same script that makes the change
// (prelude.lua, "Fair share"), so sockets, HTTP calls and instances share one count.
// A refusal writes nothing and answers a *LimitError or a *RateError; each is counted
// in lockhub_store_limit_hits_total by its setting and warned of at most once per
// limitWarnEvery.

// limitWarnEvery is how often a limit that keeps being hit is logged.
const limitWarnEvery = protocol.LimitLogEvery

// Settings of the fair share, the label values of lockhub_store_limit_hits_total.
const (
	SettingLocksPerPerson   = "max-locks-per-person"
	SettingLocksPerTenant   = "max-locks-per-tenant"
	SettingChangesPerPerson = "max-changes-per-person"
)

// shareLimits is the fair share of a store.
type shareLimits struct {
	perPerson, perTenant int
	rate                 float64
	burst                int
	types                string   // the lockable types, comma-separated
	warned               warnings // by setting
}

func (s *core) setUpShare(cfg Config) error {
	for _, c := range []struct {
		setting string
		bad     bool
	}{
		{SettingLocksPerPerson, cfg.MaxLocksPerPerson < 0},
		{SettingLocksPerTenant, cfg.MaxLocksPerTenant < 0},
		{SettingChangesPerPerson, cfg.MaxChangesPerPerson < 0 || cfg.ChangesBurst < 0},
		{SettingListLocksPerTenant, cfg.ListLocksBurst < 0},
	} {
		if c.bad {
			return &protocol.SettingError{Setting: c.setting, Err: fmt.Errorf("must be positive")}
		}
	}
	s.share = shareLimits{
		perPerson: cmp.Or(cfg.MaxLocksPerPerson, DefaultMaxLocksPerPerson),
		perTenant: cmp.Or(cfg.MaxLocksPerTenant, DefaultMaxLocksPerTenant),
		rate:      cmp.Or(cfg.MaxChangesPerPerson, DefaultMaxChangesPerPerson),
		burst:     cmp.Or(cfg.ChangesBurst, DefaultChangesBurst),
		types:     strings.Join(s.reg.Types(), ","),
	}
	if cfg.ListLocksPerTenant >= 0 {
		s.lists.rate = rate.Limit(cmp.Or(cfg.ListLocksPerTenant, DefaultListLocksPerTenant))
		s.lists.burst = cmp.Or(cfg.ListLocksBurst, DefaultListLocksBurst)
	}
	return nil
}

// shareArgs is the share block of a write script (prelude.lua, sharing).
func (s *core) shareArgs(tenant string) []any {
	return []any{"{" + tenant + "}", s.share.types, s.share.perPerson, s.share.perTenant,
		strconv.FormatFloat(s.share.rate, 'f', -1, 64), s.share.burst}
}

// LimitError refuses a claim or takeover that would pass a quota of the fair share
// (PROTOCOL.md §4): nothing was written. Transports answer too_many_locks (HTTP 429).
type LimitError struct {
	Setting string // SettingLocksPerPerson or SettingLocksPerTenant
	Limit   int
	// RetryAfter is the lease: a lock that nobody renews is gone within it, and one
	// released frees a place at once. PROTOCOL.md §5 (version 3) gives every fair-share
	// refusal over HTTP a Retry-After; the route table names it for rate_limited only,
	// and this one costs a client that ignores it nothing.
	RetryAfter time.Duration
}

// Wait is how long a client might wait before it tries again (HTTP's Retry-After).
func (e *LimitError) Wait() time.Duration { return e.RetryAfter }

func (e *LimitError) Error() string { return "locks: " + e.ClientMessage() }

// ErrorCode returns protocol.CodeTooManyLocks.
func (e *LimitError) ErrorCode() protocol.ErrorCode { return protocol.CodeTooManyLocks }

// ClientMessage says which limit was reached.
func (e *LimitError) ClientMessage() string {
	if e.Setting == SettingLocksPerTenant {
		return fmt.Sprintf("your organisation holds %d locks, the most it may (%s); release some first", e.Limit, e.Setting)
	}
	return fmt.Sprintf("you hold %d locks, the most one person may (%s); release one first", e.Limit, e.Setting)
}

// RateError refuses a change beyond a person's rate of changes (PROTOCOL.md §4):
// nothing was written. Transports answer rate_limited (HTTP 429 with Retry-After).
type RateError struct {
	Setting    string        // SettingChangesPerPerson
	RetryAfter time.Duration // when the next change is allowed
}

func (e *RateError) Error() string { return "locks: " + e.ClientMessage() }

// ErrorCode returns protocol.CodeRateLimited.
func (e *RateError) ErrorCode() protocol.ErrorCode { return protocol.CodeRateLimited }

// ClientMessage says when to try again.
func (e *RateError) ClientMessage() string {
	return fmt.Sprintf("too many lock changes in a short time (%s); try again in %s", e.Setting, e.RetryAfter.Round(time.Millisecond))
}

// Wait returns e.RetryAfter, for a transport's Retry-After.
func (e *RateError) Wait() time.Duration { return e.RetryAfter }

var (
	_ protocol.ClientError = (*LimitError)(nil)
	_ protocol.ClientError = (*RateError)(nil)
)

// refused turns a script's refusal into its error, counting and warning of it.
func (s *core) refused(ctx context.Context, tenant string, limited bool, value string) error {
	var err error
	setting := SettingChangesPerPerson
	if limited {
		setting = value
		limit := s.share.perPerson
		if setting == SettingLocksPerTenant {
			limit = s.share.perTenant
		}
		err = &LimitError{Setting: setting, Limit: limit, RetryAfter: s.lease}
	} else {
		ms, _ := strconv.ParseInt(value, 10, 64)
		err = &RateError{Setting: setting, RetryAfter: time.Duration(max(ms, 1)) * time.Millisecond}
	}
	s.met.limits.WithLabelValues(setting).Inc()
	s.warnLimit(ctx, setting, tenant)
	return err
}

// warnLimit logs that a limit was hit, at most once per limitWarnEvery per setting.
func (s *core) warnLimit(ctx context.Context, setting, tenant string) {
	if n, due := s.share.warned.note(setting, 1, time.Now()); due {
		s.log.LogAttrs(ctx, slog.LevelWarn, "a fair-share limit refused a change; raise --"+setting+" if legitimate users reach it",
			slog.String("setting", setting), slog.String("tenant", tenant), slog.Int("refused", n),
			slog.String("metric", "lockhub_store_limit_hits_total"))
	}
}
