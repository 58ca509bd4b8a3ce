package locks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/protocol"
)

// The change feed.
//
// Each change is published after its script succeeds, to one of Config.Channels
// channels chosen by a hash of the tenant: "lockhub:ev:{<n>}". A hub instance subscribes
// to all of them, so it holds that many subscriptions however many tenants there are.
// On a cluster these are sharded channels (SPUBLISH/SSUBSCRIBE, Redis 7): each lives on
// the node of its own slot, and one PubSub connection serves each channel because a
// SSUBSCRIBE may only name channels of one slot.
//
// A message is "<tenant> <rev>\n<frame>", where frame is the protocol.LockEvent as sent
// to sockets (a hub forwards the bytes without re-encoding) and rev is the Redis
// server's TIME in microseconds when the script ran. All changes of one entity run on
// the node of its tenant's slot, so rev orders them; the feed drops an event older
// than one already delivered for its entity, since two instances may publish the
// changes they made in the opposite order.

// Change is one lock change received from the feed.
type Change struct {
	Tenant string
	Event  protocol.LockEvent
	// Frame is Event encoded for the wire. Shared by every receiver: do not modify.
	Frame []byte
}

// FeedHandler receives the change feed. Its methods are called from the feed's
// goroutines, one per channel, so concurrently; they must not block.
type FeedHandler interface {
	// Change delivers one change. Changes of one entity arrive in order.
	Change(Change)
	// Resync says that a subscription was lost and is back: changes may have been
	// missed, and watchers need fresh snapshots.
	Resync()
}

func (s *Store) channel(tenant string) string {
	h := fnv.New32a()
	h.Write([]byte(tenant))
	return "lockhub:ev:{" + strconv.Itoa(int(h.Sum32()%uint32(s.channels))) + "}"
}

// publish sends one change to the tenant's channel. The change is already written, so
// a failure here is logged and counted, and the caller's outcome stands: watchers that
// missed it are made whole by the next snapshot.
func (s *Store) publish(ctx context.Context, tenant, rev string, op protocol.Op, l protocol.Lock, prev *protocol.Holder, at time.Time) {
	ev := protocol.LockEvent{Type: protocol.FrameLock, Op: op, Lock: l, PreviousHolder: prev, At: protocol.NewTime(at)}
	frame, err := json.Marshal(ev)
	if err != nil {
		panic("locks: encoding an event cannot fail: " + err.Error())
	}
	msg := make([]byte, 0, len(tenant)+len(rev)+2+len(frame))
	msg = append(msg, tenant...)
	msg = append(msg, ' ')
	msg = append(msg, rev...)
	msg = append(msg, '\n')
	msg = append(msg, frame...)
	ch := s.channel(tenant)
	if s.cluster != nil {
		err = s.cluster.SPublish(ctx, ch, msg).Err()
	} else {
		err = s.rdb.Publish(ctx, ch, msg).Err()
	}
	if err != nil {
		s.met.failOpen.WithLabelValues("publish", string(ReasonPublish)).Inc()
		s.log.LogAttrs(ctx, slog.LevelWarn, "lock change written but not published",
			slog.String("tenant", tenant), slog.String("op", string(op)),
			slog.String("reason", string(classify(err))), slog.String("error", err.Error()))
		return
	}
	s.met.published.WithLabelValues(string(op)).Inc()
}

// parseMessage splits a feed message into its tenant, rev and frame.
func parseMessage(payload string) (Change, int64, error) {
	head, frame, ok := bytes.Cut([]byte(payload), []byte{'\n'})
	if !ok {
		return Change{}, 0, errors.New("locks: feed message without a header")
	}
	tenant, rev, ok := bytes.Cut(head, []byte{' '})
	if !ok || !ValidTenant(string(tenant)) {
		return Change{}, 0, errors.New("locks: feed message with a bad header")
	}
	c := Change{Tenant: string(tenant), Frame: frame}
	if err := json.Unmarshal(frame, &c.Event); err != nil {
		return Change{}, 0, fmt.Errorf("locks: feed message: %w", err)
	}
	return c, revMicros(string(rev)), nil
}

// RunFeed subscribes to the change feed and delivers it to h until ctx is done. It
// returns nil when ctx is done; it survives Redis outages, reconnecting with backoff,
// and calls h.Resync once a lost subscription is back. It owns one goroutine per
// channel and joins them all before it returns.
func (s *Store) RunFeed(ctx context.Context, h FeedHandler) error {
	ord := newOrderer()
	var wg sync.WaitGroup
	for i := range s.channels {
		ch := "lockhub:ev:{" + strconv.Itoa(i) + "}"
		wg.Go(func() { s.subscribe(ctx, ch, h, ord) })
	}
	wg.Wait()
	return nil
}

const (
	feedPingEvery  = 15 * time.Second // a silent connection is checked this often
	feedBackoffMin = 50 * time.Millisecond
	feedBackoffMax = 2 * time.Second
)

func (s *Store) subscribe(ctx context.Context, ch string, h FeedHandler, ord *orderer) {
	var ps *redis.PubSub
	if s.cluster != nil {
		ps = s.cluster.SSubscribe(ctx, ch)
	} else {
		ps = s.rdb.Subscribe(ctx, ch)
	}
	defer ps.Close()
	// A blocked Receive does not watch ctx; closing the PubSub ends it.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()

	lost := false
	backoff := feedBackoffMin
	for {
		msg, err := ps.ReceiveTimeout(ctx, feedPingEvery)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var netErr interface{ Timeout() bool }
			if errors.As(err, &netErr) && netErr.Timeout() && !lost {
				// Nothing arrived for a while: ping, so a dead connection shows itself.
				if perr := ps.Ping(ctx); perr == nil {
					continue
				}
			}
			if !lost {
				lost = true
				s.met.failOpen.WithLabelValues("subscribe", string(classify(err))).Inc()
				s.log.LogAttrs(ctx, slog.LevelWarn, "lock change feed lost; watchers will be resynced when it is back",
					slog.String("channel", ch), slog.String("reason", string(classify(err))), slog.String("error", err.Error()))
			}
			// go-redis reconnects and resubscribes on the next Receive; wait first so a
			// dead Redis does not spin this loop.
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, feedBackoffMax)
			if s.cluster != nil {
				s.cluster.ReloadState(ctx)
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if lost {
				s.log.LogAttrs(ctx, slog.LevelInfo, "lock change feed is back", slog.String("channel", ch))
				h.Resync()
			}
			lost, backoff = false, feedBackoffMin
		case *redis.Message:
			c, rev, err := parseMessage(m.Payload)
			if err != nil {
				s.log.LogAttrs(ctx, slog.LevelWarn, "dropping a malformed feed message", slog.String("error", err.Error()))
				continue
			}
			if ord.admit(c, rev) {
				h.Change(c)
			}
		}
	}
}

// orderer drops an event older than one already delivered for the same entity. It
// remembers entities for between one and two orderWindows, far longer than two
// publishes of one entity can be reordered in flight.
type orderer struct {
	mu        sync.Mutex
	cur, prev map[string]int64 // entity -> newest rev delivered
	rotated   time.Time
}

const orderWindow = time.Minute

func newOrderer() *orderer {
	return &orderer{cur: map[string]int64{}, prev: map[string]int64{}, rotated: time.Now()}
}

func (o *orderer) admit(c Change, rev int64) bool {
	key := c.Tenant + "\x00" + c.Event.Lock.EntityType + "\x00" + c.Event.Lock.EntityUID
	o.mu.Lock()
	defer o.mu.Unlock()
	if time.Since(o.rotated) > orderWindow {
		o.prev, o.cur, o.rotated = o.cur, map[string]int64{}, time.Now()
	}
	last, ok := o.cur[key]
	if !ok {
		last, ok = o.prev[key]
	}
	if ok && rev < last {
		return false
	}
	o.cur[key] = rev
	return true
}
