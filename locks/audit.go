package locks

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/protocol"
)

// The audit trail of PROTOCOL.md §10. Every write script that changes a lock adds an
// entry to the tenant's stream lockaudit:{<tenant>} in the same atomic step
// (scripts/prelude.lua, record), so the record and the change never disagree and
// nothing is recorded that did not happen. Renewals are not recorded.
//
// Retention (version 3). A script that records drops the entries older than
// Config.AuditRetention before its first entry (XTRIM MINID, by stream id), and the
// oldest beyond Config.AuditMaxEntries after its last (XTRIM MAXLEN), both exactly,
// and gives the stream the retention as its TTL: an idle tenant's trail goes when its
// newest entry is too old. Audit shows no entry older than the retention, though one
// may wait in the stream for the tenant's next change. What the count drops is younger
// than the retention: the script answers how many, and trimmedEarly counts them and
// warns, naming --audit-max-entries. With the per-person rate of changes (share.go)
// one person needs DefaultAuditMaxEntries / DefaultMaxChangesPerPerson seconds, over
// five hours, to fill a tenant's trail, so no ordinary user can push another person's
// entry out of it (issue 25).

// AuditReason is why a change happened, the reason of an audit entry.
type AuditReason string

// The reasons of PROTOCOL.md §10.
const (
	AuditClaim      AuditReason = "claim"      // a claim acquired a free lock
	AuditRelease    AuditReason = "release"    // the holder released it
	AuditTakeover   AuditReason = "takeover"   // a takeover (of a held or a free lock)
	AuditExpiry     AuditReason = "expiry"     // the lease ran out; actor null
	AuditDisconnect AuditReason = "disconnect" // the holder's last socket closed (after the grace)
	AuditDecision   AuditReason = "decision"   // a decision (approve, reject) ended the edit
	AuditAdmin      AuditReason = "admin"      // an administrator forced the release
	AuditForeign    AuditReason = "foreign"    // another writer's change (§8); actor null
	AuditHandoff    AuditReason = "handoff"    // a freed lock went to the next in line (§11, version 3); actor null
)

// OpForceReleased is the op of the audit entry of a force release. It is announced to
// watchers as OpReleased with "by".
const OpForceReleased protocol.Op = "ForceReleased"

// The retention of a tenant's audit trail (PROTOCOL.md §10, version 3), for the zero
// fields of Config, and the settings that name it.
const (
	DefaultAuditRetention  = 720 * time.Hour
	DefaultAuditMaxEntries = 100000

	SettingAuditRetention  = "audit-retention"
	SettingAuditMaxEntries = "audit-max-entries"
)

// Limits of an audit read (PROTOCOL.md §10).
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 500
	// auditScanBatch is how many entries a filtered read fetches at a time, and
	// auditScanMax how many it looks at before it answers what it found with a
	// cursor to go on: one read stays bounded however rare the entity is.
	auditScanBatch = 500
	auditScanMax   = 20000
)

// AuditEntry is one entry of the audit stream, as the admin API answers it:
//
//	{"id":"1764667200123-0","op":"TakenOver","entityType":"ApprovalRequest","entityUid":"r-1001",
//	 "holder":{"oid":"u-margaret","name":"Margaret Hamilton"},"actor":{"oid":"u-margaret","name":"Margaret Hamilton"},
//	 "reason":"takeover","at":"2026-12-02T09:15:00.123Z"}
//
// Holder is whose lock it was (Released, Expired, ForceReleased) or became (Acquired,
// TakenOver); Actor who caused it, nil for an expiry or another writer's change.
// Previous, of a TakenOver or ForceReleased entry only, is whose lock it was (version
// 3): the TakenOver above would carry
//
//	"previous":{"oid":"u-ada","name":"Ada Lovelace"}
//
// It is null where nobody known held it, and absent from the JSON of the other ops.
type AuditEntry struct {
	ID         string           `json:"id"`
	Op         protocol.Op      `json:"op"`
	EntityType string           `json:"entityType"`
	EntityUID  string           `json:"entityUid"`
	Holder     *protocol.Holder `json:"holder"`
	Previous   *protocol.Holder `json:"previous"`
	Actor      *protocol.Holder `json:"actor"`
	Reason     AuditReason      `json:"reason"`
	At         protocol.Time    `json:"at"`
}

// hasPrevious reports whether entries of op carry previous.
func hasPrevious(op protocol.Op) bool {
	return op == protocol.OpTakenOver || op == OpForceReleased
}

// MarshalJSON writes the entry as PROTOCOL.md §10 shows it: previous only for the ops
// that carry it, null there when nobody known held the lock.
func (e AuditEntry) MarshalJSON() ([]byte, error) {
	type entry AuditEntry // without this method
	if hasPrevious(e.Op) {
		return json.Marshal(entry(e))
	}
	return json.Marshal(struct {
		entry
		Previous *struct{} `json:"previous,omitempty"` // shadows entry's: never written
	}{entry: entry(e)})
}

// AuditQuery selects audit entries, newest first.
type AuditQuery struct {
	// EntityType and EntityUID keep only the entries of that type, uid or entity; ""
	// means any. They must be valid names (PROTOCOL.md §1), lockable or not: a type
	// may have been lockable when its entries were written.
	EntityType, EntityUID string
	// Before is a cursor, the Next of an earlier page: only older entries. "" means
	// from the newest.
	Before string
	// Limit is how many entries at most, 1 to MaxAuditLimit. Zero means
	// DefaultAuditLimit.
	Limit int
}

// AuditPage is one page of audit entries, newest first.
type AuditPage struct {
	Entries []AuditEntry
	// Next is the cursor of the next (older) page, "" when no older entry matches.
	// A filtered read that looked at many entries without filling the page answers
	// what it found and a Next to go on from.
	Next string
}

// QueryError refuses a malformed audit query: a limit out of range or a cursor that
// is not one. Transports answer it as bad_request.
type QueryError struct {
	Field string // "limit" or "before"
	Value string
}

func (e *QueryError) Error() string { return "locks: " + e.ClientMessage() }

// ErrorCode returns protocol.CodeBadRequest.
func (e *QueryError) ErrorCode() protocol.ErrorCode { return protocol.CodeBadRequest }

// ClientMessage says what is wrong with the field.
func (e *QueryError) ClientMessage() string {
	v := e.Value
	if len(v) > 80 {
		v = v[:80] + "…"
	}
	if e.Field == "limit" {
		return fmt.Sprintf("invalid limit %q: must be an integer from 1 to %d", v, MaxAuditLimit)
	}
	return fmt.Sprintf("invalid %s %q: must be the next cursor of an earlier page", e.Field, v)
}

var _ protocol.ClientError = (*QueryError)(nil)

// Audit reads the tenant's audit entries that q selects, newest first. Errors are
// *InvalidEntityError (tenant, type or uid) and *QueryError (limit, cursor), and
// ErrUnavailable when Redis did not answer (logged and counted already): an audit
// trail that reads as empty because Redis is down would mislead, so this read does
// not fail open.
func (s *Console) Audit(ctx context.Context, tenant string, q AuditQuery) (AuditPage, error) {
	if !ValidTenant(tenant) {
		return AuditPage{}, &InvalidEntityError{Field: "tenant", Value: tenant}
	}
	if q.EntityType != "" && !ValidType(q.EntityType) {
		return AuditPage{}, &InvalidEntityError{Field: "entityType", Value: q.EntityType}
	}
	if q.EntityUID != "" && !protocol.ValidUID(q.EntityUID) {
		return AuditPage{}, &InvalidEntityError{Field: "entityUid", Value: q.EntityUID}
	}
	q.Limit = cmp.Or(q.Limit, DefaultAuditLimit)
	if q.Limit < 1 || q.Limit > MaxAuditLimit {
		return AuditPage{}, &QueryError{Field: "limit", Value: strconv.Itoa(q.Limit)}
	}
	if q.Before != "" && !validStreamID(q.Before) {
		return AuditPage{}, &QueryError{Field: "before", Value: q.Before}
	}
	page, ok := runOp(ctx, s.core, opAudit, func(ctx context.Context) (AuditPage, error) {
		return s.readAudit(ctx, tenant, q)
	}, func(AuditPage) outcomeLabel { return labelRead })
	if !ok {
		s.amet.reads.WithLabelValues(string(labelUnknown)).Inc()
		return AuditPage{}, ErrUnavailable
	}
	s.amet.reads.WithLabelValues(string(labelRead)).Inc()
	return page, nil
}

// validStreamID reports whether s is a complete Redis stream id, <ms>-<seq>: what
// Next holds.
func validStreamID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return err1 == nil && err2 == nil && ms[0] != '+' && seq[0] != '+'
}

func (s *core) readAudit(ctx context.Context, tenant string, q AuditQuery) (AuditPage, error) {
	key := AuditKey(tenant)
	start := "+"
	// Entries older than the retention are dropped as the next entry is added; until
	// then they are not part of the trail either.
	end := strconv.FormatInt(max(s.now().Add(-s.auditAge).UnixMilli(), 0), 10)
	if q.Before == "0-0" { // nothing is older; Redis refuses the range "(0-0"
		return AuditPage{}, nil
	}
	if q.Before != "" {
		start = "(" + q.Before // exclusive (Redis 6.2)
	}
	filtered := q.EntityType != "" || q.EntityUID != ""
	batch := q.Limit + 1 // one more than a page tells whether there is a next one
	if filtered {
		batch = max(batch, auditScanBatch)
	}
	var out []AuditEntry
	scanned := 0
	for {
		msgs, err := s.rdb.XRevRangeN(ctx, key, start, end, int64(batch)).Result()
		if err != nil {
			return AuditPage{}, err
		}
		for _, m := range msgs {
			scanned++
			e := parseAuditEntry(m)
			if (q.EntityType != "" && e.EntityType != q.EntityType) || (q.EntityUID != "" && e.EntityUID != q.EntityUID) {
				continue
			}
			if len(out) == q.Limit {
				return AuditPage{Entries: out, Next: out[len(out)-1].ID}, nil
			}
			out = append(out, e)
		}
		if len(msgs) < batch {
			return AuditPage{Entries: out}, nil
		}
		last := msgs[len(msgs)-1].ID
		if scanned >= auditScanMax {
			return AuditPage{Entries: out, Next: last}, nil
		}
		start = "(" + last
	}
}

// parseAuditEntry reads a stream entry as record (prelude.lua) writes it. It is
// lenient: a field that is missing or does not parse is left empty, since the stream
// is an interface another program might write to.
func parseAuditEntry(m redis.XMessage) AuditEntry {
	str := func(k string) string { v, _ := m.Values[k].(string); return v }
	e := AuditEntry{
		ID: m.ID, Op: protocol.Op(str("op")), EntityType: str("entityType"), EntityUID: str("entityUid"),
		Holder: parsePerson(str("holder")), Actor: parsePerson(str("actor")), Reason: AuditReason(str("reason")),
	}
	if hasPrevious(e.Op) {
		e.Previous = parsePerson(str("previous"))
	}
	if t, err := time.Parse(time.RFC3339Nano, str("at")); err == nil {
		e.At = protocol.NewTime(t)
	}
	return e
}

func parsePerson(v string) *protocol.Holder {
	var h *protocol.Holder
	if err := json.Unmarshal([]byte(v), &h); err != nil || h == nil || h.OID == "" {
		return nil
	}
	return h
}

// auditArgs are the audit entry's arguments of a write script (prelude.lua,
// auditing): its at, the cap, who causes the script's own change, and why. Empty ones
// when the store keeps no audit (a script records only with the audit key), so the
// arguments after them keep their place.
func (s *core) auditArgs(now time.Time, actor *protocol.Holder, reason AuditReason) []any {
	if !s.audit {
		return []any{"", 0, "", "", ""}
	}
	var oid, name string
	if actor != nil {
		oid, name = actor.OID, actor.Name
	}
	return []any{protocol.NewTime(now).String(), s.auditMax, oid, name, string(reason)}
}

// retentionArg is the audit's retention argument of a write script, in ms: it follows
// the share block (prelude.lua, auditing), which was there first.
func (s *core) retentionArg() any { return s.auditAge.Milliseconds() }

// trimmedEarly counts the audit entries a script's cap dropped before their retention
// (its reply's trimmed, an integer) and warns of them, at most once per limitWarnEvery
// per tenant: the trail no longer holds what the contract promises to keep.
func (s *core) trimmedEarly(ctx context.Context, tenant string, reply any) {
	n, _ := reply.(int64)
	if n <= 0 {
		return
	}
	s.amet.trimmedEarly.Add(float64(n))
	if since, due := s.auditWarned.note(tenant, int(n), time.Now()); due {
		s.log.LogAttrs(ctx, slog.LevelWarn, "the audit trail dropped entries younger than --"+SettingAuditRetention+
			" to stay within --"+SettingAuditMaxEntries+"; raise --"+SettingAuditMaxEntries+" to keep them",
			slog.String("setting", SettingAuditMaxEntries), slog.String("tenant", tenant), slog.Int("dropped", since),
			slog.Int("max_entries", s.auditMax), slog.String("retention", s.auditAge.String()),
			slog.String("metric", "lockhub_audit_trimmed_early_total"))
	}
}

// audited counts n audit entries of op that a script wrote.
func (s *core) audited(op string, n int) {
	if s.audit && n > 0 {
		s.amet.written.WithLabelValues(op).Add(float64(n))
	}
}

func (s *core) setUpAudit(cfg Config) error {
	if cfg.AuditMaxEntries < 0 {
		return &protocol.SettingError{Setting: SettingAuditMaxEntries, Err: fmt.Errorf("%d must be positive", cfg.AuditMaxEntries)}
	}
	if cfg.AuditRetention < 0 {
		return &protocol.SettingError{Setting: SettingAuditRetention, Err: fmt.Errorf("%s must be positive", cfg.AuditRetention)}
	}
	s.audit = !cfg.noAudit
	s.auditMax = cmp.Or(cfg.AuditMaxEntries, DefaultAuditMaxEntries)
	s.auditAge = cmp.Or(cfg.AuditRetention, DefaultAuditRetention)
	if s.auditAge < time.Millisecond {
		return &protocol.SettingError{Setting: SettingAuditRetention, Err: fmt.Errorf("%s is under the millisecond precision of a stream id", s.auditAge)}
	}
	s.amet = newAuditMetrics(cfg.Registerer)
	return nil
}

// Operations of the lock console, for the store's metrics and fail-open warnings.
const (
	opForceRelease opName = "forceRelease"
	opAdminLocks   opName = "adminLocks"
	opAudit        opName = "audit"

	labelRead outcomeLabel = "read" // audit: entries read
)

// auditMetrics are the collectors of the lock console and the audit trail.
type auditMetrics struct {
	forced  *prometheus.CounterVec // outcome: released, notHeld, unknown
	written *prometheus.CounterVec // op: Acquired, Released, TakenOver, Expired, ForceReleased
	reads   *prometheus.CounterVec // outcome: read, unknown
	// trimmedEarly: entries the cap (audit-max-entries) dropped before the retention
	trimmedEarly prometheus.Counter
}

func newAuditMetrics(reg prometheus.Registerer) *auditMetrics {
	f := promauto.With(reg)
	return &auditMetrics{
		forced: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_admin_force_releases_total",
			Help: "Force releases of the lock console, by outcome.",
		}, []string{"outcome"}),
		written: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_audit_entries_written_total",
			Help: "Entries the lock scripts added to the audit streams, by op.",
		}, []string{"op"}),
		reads: f.NewCounterVec(prometheus.CounterOpts{
			Name: "lockhub_audit_reads_total",
			Help: "Reads of the audit trail through the admin API, by outcome (read, unknown: Redis did not answer).",
		}, []string{"outcome"}),
		trimmedEarly: f.NewCounter(prometheus.CounterOpts{
			Name: "lockhub_audit_trimmed_early_total",
			Help: "Audit entries dropped to stay within --audit-max-entries while younger than --audit-retention: raise --audit-max-entries.",
		}),
	}
}
