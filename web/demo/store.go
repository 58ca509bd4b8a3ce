package demo

import (
	"context"
	_ "embed" // the Lua scripts live in scripts/*.lua
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/protocol"
	"github.com/lockhub/lockhub/testdata"
	"github.com/lockhub/lockhub/web"
)

// The demo domain's store: approval requests kept in Redis under their own keys, all
// in the tenant's hash tag so a script may touch the rows and the index on a cluster
// too.
//
//	demo:{<tenant>}:ApprovalRequest:<uid>   string: the row as JSON (ApprovalRequest)
//	demoidx:{<tenant>}:ApprovalRequest      set: the uids the tenant was seeded with
//
// A uid stays in the index when its row is deleted, so the index stands while the
// tenant's set does, even when every row was deleted; a tenant whose index and rows
// are all gone (a Redis that restarted empty) is seeded again (scripts/seed.lua).
//
// Every write is a compare-and-set on the whole row (scripts/cas.lua, delete.lua): Go
// reads a row, decides, builds the new value and stores it only if the row is still
// what it read. That is what makes a second decision impossible whatever the locks do.

// RowKey returns the key of a demo row: demo:{<tenant>}:ApprovalRequest:<uid>.
func RowKey(tenant, uid string) string {
	return "demo:{" + tenant + "}:" + ApprovalRequestType + ":" + uid
}

// RowIndexKey returns the key of the set of the uids a tenant's demo rows were seeded
// with, deleted ones included: demoidx:{<tenant>}:ApprovalRequest.
func RowIndexKey(tenant string) string { return "demoidx:{" + tenant + "}:" + ApprovalRequestType }

// The demo store's scripts, each file's header documenting its KEYS, ARGV and reply,
// embedded as the lock store embeds its own. redis.Script.Run sends EVALSHA and falls
// back to EVAL when the server lacks the script.
var (
	//go:embed scripts/cas.lua
	casSrc string
	//go:embed scripts/delete.lua
	deleteSrc string
	//go:embed scripts/seed.lua
	seedSrc string
)

// casAttempts bounds the compare-and-set retries of one write racing others.
const casAttempts = 8

// errRowMissing is the store's "no such row"; handlers answer it as not_found.
var errRowMissing = errors.New("demo: approval request not found")

// approvalStore keeps the demo rows. It is safe for concurrent use.
type approvalStore struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	log     *slog.Logger
	failed  *prometheus.CounterVec // op
	seed    []ApprovalRequest      // the starting set, sorted by uid
	seedVal []string               // seed, encoded
	cas     *redis.Script
	del     *redis.Script
	seedSc  *redis.Script
}

func newApprovalStore(rdb redis.UniversalClient, timeout time.Duration, log *slog.Logger, reg prometheus.Registerer) (*approvalStore, error) {
	var seed []ApprovalRequest
	if err := json.Unmarshal(testdata.ApprovalRequests(), &seed); err != nil {
		return nil, fmt.Errorf("demo: testdata/approval-requests.json: %w", err)
	}
	if len(seed) == 0 {
		return nil, errors.New("demo: testdata/approval-requests.json holds no rows")
	}
	slices.SortFunc(seed, func(a, b ApprovalRequest) int { return compareUIDs(a.UID, b.UID) })
	s := &approvalStore{
		rdb: rdb, timeout: timeout, log: log, seed: seed,
		cas: redis.NewScript(casSrc), del: redis.NewScript(deleteSrc), seedSc: redis.NewScript(seedSrc),
	}
	for _, r := range seed {
		if !protocol.ValidUID(r.UID) { // PROTOCOL.md §1
			return nil, fmt.Errorf("demo: testdata/approval-requests.json: invalid uid %q", r.UID)
		}
		s.seedVal = append(s.seedVal, encodeRow(r))
	}
	s.failed = promauto.With(reg).NewCounterVec(prometheus.CounterOpts{
		Name: "lockhub_demo_store_failures_total",
		Help: "Demo domain operations answered 503 store_unavailable because its Redis failed, by operation.",
	}, []string{"op"})
	return s, nil
}

// compareUIDs orders uids as people expect: r-999 before r-1000.
func compareUIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func encodeRow(r ApprovalRequest) string {
	b, err := json.Marshal(r)
	if err != nil {
		panic("demo: encoding a row cannot fail: " + err.Error())
	}
	return string(b)
}

func decodeRow(v string) (ApprovalRequest, error) {
	var r ApprovalRequest
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return r, fmt.Errorf("demo: stored row is not an approval request: %w", err)
	}
	return r, nil
}

// unavailable is the one branch where the demo store's Redis failure becomes 503
// store_unavailable: logged with its op and counted.
func (s *approvalStore) unavailable(ctx context.Context, op string, err error) error {
	s.failed.WithLabelValues(op).Inc()
	s.log.LogAttrs(ctx, slog.LevelWarn, "demo store unavailable",
		slog.String("op", op), slog.String("error", err.Error()))
	return &web.Error{Code: protocol.CodeStoreUnavailable, Message: "the approval request store is unavailable; try again shortly", Err: err}
}

// ensureSeeded seeds tenant when its whole set is gone.
func (s *approvalStore) ensureSeeded(ctx context.Context, tenant string) error {
	keys := make([]string, 0, 1+len(s.seed))
	args := make([]any, 0, 2*len(s.seed))
	keys = append(keys, RowIndexKey(tenant))
	for i, r := range s.seed {
		keys = append(keys, RowKey(tenant, r.UID))
		args = append(args, r.UID, s.seedVal[i])
	}
	n, err := s.seedSc.Run(ctx, s.rdb, keys, args...).Int()
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.LogAttrs(ctx, slog.LevelInfo, "seeded the demo domain", slog.String("tenant", tenant), slog.Int("rows", n))
	}
	return nil
}

// list returns the tenant's rows, sorted by uid.
func (s *approvalStore) list(ctx context.Context, tenant string) ([]ApprovalRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for range 2 {
		ids, err := s.rdb.SMembers(ctx, RowIndexKey(tenant)).Result()
		if err != nil {
			return nil, s.unavailable(ctx, "list", err)
		}
		if len(ids) == 0 { // the set is gone: a deleted row leaves its uid
			if err := s.ensureSeeded(ctx, tenant); err != nil {
				return nil, s.unavailable(ctx, "seed", err)
			}
			continue
		}
		slices.SortFunc(ids, compareUIDs)
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = RowKey(tenant, id)
		}
		vals, err := s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, s.unavailable(ctx, "list", err)
		}
		rows := make([]ApprovalRequest, 0, len(vals))
		for i, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue // deleted
			}
			row, err := decodeRow(str)
			if err != nil {
				s.log.LogAttrs(ctx, slog.LevelWarn, "skipping a demo row that does not parse",
					slog.String("key", keys[i]), slog.String("error", err.Error()))
				continue
			}
			rows = append(rows, row)
		}
		return rows, nil
	}
	return nil, s.unavailable(ctx, "list", errors.New("the index did not stay after seeding"))
}

// read returns a row and its stored bytes, seeding the tenant first if it must.
func (s *approvalStore) read(ctx context.Context, op, tenant, uid string) (ApprovalRequest, string, error) {
	for range 2 {
		pipe := s.rdb.Pipeline()
		seeded := pipe.Exists(ctx, RowIndexKey(tenant))
		get := pipe.Get(ctx, RowKey(tenant, uid))
		_, err := pipe.Exec(ctx)
		if err != nil && !errors.Is(err, redis.Nil) {
			return ApprovalRequest{}, "", s.unavailable(ctx, op, err)
		}
		if seeded.Val() == 0 {
			if err := s.ensureSeeded(ctx, tenant); err != nil {
				return ApprovalRequest{}, "", s.unavailable(ctx, "seed", err)
			}
			continue
		}
		raw, err := get.Result()
		if errors.Is(err, redis.Nil) {
			return ApprovalRequest{}, "", errRowMissing
		}
		if err != nil {
			return ApprovalRequest{}, "", s.unavailable(ctx, op, err)
		}
		row, err := decodeRow(raw)
		if err != nil {
			return ApprovalRequest{}, "", err
		}
		return row, raw, nil
	}
	return ApprovalRequest{}, "", s.unavailable(ctx, op, errors.New("the index did not stay after seeding"))
}

// get returns one row.
func (s *approvalStore) get(ctx context.Context, tenant, uid string) (ApprovalRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	row, _, err := s.read(ctx, "get", tenant, uid)
	return row, err
}

// update applies change to a row and stores it with the next version, atomically:
// change sees the row as stored, and what it returns is stored only if nobody wrote
// the row in between (else change runs again on the newer row). An error from change
// is returned as is, and nothing is written.
func (s *approvalStore) update(ctx context.Context, op, tenant, uid string, change func(*ApprovalRequest) error) (ApprovalRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	row, raw, err := s.read(ctx, op, tenant, uid)
	if err != nil {
		return ApprovalRequest{}, err
	}
	for range casAttempts {
		next := row
		if err := change(&next); err != nil {
			return ApprovalRequest{}, err
		}
		next.UID = row.UID // the identity of a row never changes
		next.Version = row.Version + 1
		reply, err := s.cas.Run(ctx, s.rdb, []string{RowKey(tenant, uid)}, raw, encodeRow(next)).Slice()
		if err != nil {
			return ApprovalRequest{}, s.unavailable(ctx, op, err)
		}
		switch st, cur := casReply(reply); st {
		case 1:
			return next, nil
		case 0:
			return ApprovalRequest{}, errRowMissing
		case 2:
			if row, err = decodeRow(cur); err != nil {
				return ApprovalRequest{}, err
			}
			raw = cur
		default:
			return ApprovalRequest{}, fmt.Errorf("demo: cas.lua answered %v", reply)
		}
	}
	return ApprovalRequest{}, web.Errorf(protocol.CodeConflict, "%s changed concurrently too often; try again", uid)
}

// remove deletes a row if check, which sees it as stored, allows it.
func (s *approvalStore) remove(ctx context.Context, tenant, uid string, check func(*ApprovalRequest) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	row, raw, err := s.read(ctx, "delete", tenant, uid)
	if err != nil {
		return err
	}
	for range casAttempts {
		if err := check(&row); err != nil {
			return err
		}
		reply, err := s.del.Run(ctx, s.rdb, []string{RowKey(tenant, uid)}, raw).Slice()
		if err != nil {
			return s.unavailable(ctx, "delete", err)
		}
		switch st, cur := casReply(reply); st {
		case 1:
			return nil
		case 0:
			return errRowMissing
		case 2:
			if row, err = decodeRow(cur); err != nil {
				return err
			}
			raw = cur
		default:
			return fmt.Errorf("demo: delete.lua answered %v", reply)
		}
	}
	return web.Errorf(protocol.CodeConflict, "%s changed concurrently too often; try again", uid)
}

// casReply reads the {status[, current]} reply of cas.lua and delete.lua.
func casReply(reply []any) (status int64, current string) {
	if len(reply) == 0 {
		return -1, ""
	}
	status, ok := reply[0].(int64)
	if !ok {
		return -1, ""
	}
	if len(reply) > 1 {
		current, _ = reply[1].(string)
	}
	return status, current
}
