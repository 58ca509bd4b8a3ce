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
// Each write script publishes its change in the same atomic step as the change
// (scripts/prelude.lua), so no change goes unannounced and the events of one entity
// leave Redis in the order the changes happened. A message is "<tenant>\n<frame>",
// where frame is the protocol.LockEvent exactly as sockets receive it: a hub forwards
// the bytes without re-encoding.
//
// Channels, bounded however many tenants there are:
//   - standalone, Sentinel, miniredis: Config.Channels channels "lockhub:ev:{<n>}", the
//     tenant picked by hash; PUBLISH and SUBSCRIBE. One connection per instance.
//   - cluster: one sharded channel per slot, "lockhub:ev:{<tag>}" where <tag> hashes to
//     the tenant's slot, because a script may SPUBLISH only within its own slot (Redis 7
//     sharded pub/sub). An instance subscribes to all 16,384, over one connection per
//     master, each SSUBSCRIBE naming one slot's channel (a SSUBSCRIBE may not span
//     slots); messages reach only the shard that owns the slot, never the whole cluster.

// Change is one lock change received from the feed.
type Change struct {
	Tenant string
	Event  protocol.LockEvent
	// Frame is Event encoded for the wire. Shared by every receiver: do not modify.
	Frame []byte
}

// FeedHandler receives the change feed. Its methods may be called concurrently (one
// goroutine per connection); they must not block.
type FeedHandler interface {
	// Change delivers one change. Changes of one entity arrive in order.
	Change(Change)
	// Presence delivers a change of an entity's viewers (PROTOCOL.md §9).
	Presence(PresenceChange)
	// Nudge delivers a nudge for the sockets of a holder that view an entity (§9).
	Nudge(NudgeChange)
	// Handoff delivers a hand-off: a freed lock went to the first in line (§11). It
	// comes after the entity's Acquired event.
	Handoff(HandoffChange)
	// Resync says that a subscription was lost and is back: changes of the tenants
	// for which affected reports true may have been missed, and their watchers need
	// fresh snapshots. A nil affected means every tenant. affected is safe for
	// concurrent use and never changes.
	Resync(affected func(tenant string) bool)
}

// channel returns the tenant's channel.
func (s *core) channel(tenant string) string {
	if s.cluster != nil {
		return channelPrefix + s.tags[crc16(tenant)%slotCount] + "}"
	}
	h := fnv.New32a()
	h.Write([]byte(tenant))
	return channelPrefix + strconv.Itoa(int(h.Sum32()%uint32(s.channels))) + "}"
}

// pubArgs are the first six arguments of every script (scripts/prelude.lua): how to
// publish its event, the clock and the index margin.
func (s *core) pubArgs(tenant string, now time.Time) []any {
	head := tenant + "\n" + `{"type":"` + string(protocol.FrameLock) + `","op":"`
	tail := `,"at":"` + protocol.NewTime(now).String() + `"}`
	return []any{s.publishCommand(), s.channel(tenant), head, tail, now.UnixMilli(), indexMargin.Milliseconds()}
}

// publishCommand is the command that publishes on a channel of the feed.
func (s *core) publishCommand() string {
	if s.cluster != nil {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// deliver reads one feed message and hands it to h: a lock event, or one of lockhub's
// presence and nudge notices (presence.go).
func deliver(payload string, h FeedHandler) error {
	tenant, frame, ok := bytes.Cut([]byte(payload), []byte{'\n'})
	if !ok || !ValidTenant(string(tenant)) {
		return errors.New("locks: feed message without a tenant")
	}
	if notice, err := feedNotice(string(tenant), frame, h); notice || err != nil {
		return err
	}
	c, err := parseChange(string(tenant), frame)
	if err != nil {
		return err
	}
	h.Change(c)
	return nil
}

// parseChange reads the lock event of a feed message.
func parseChange(tenant string, frame []byte) (Change, error) {
	c := Change{Tenant: tenant, Frame: frame}
	if err := json.Unmarshal(frame, &c.Event); err != nil {
		return Change{}, fmt.Errorf("locks: feed message: %w", err)
	}
	return c, nil
}

// RunFeed subscribes to the change feed of every instance and delivers it to h until
// ctx is done; then it returns nil. It survives Redis outages and failovers,
// resubscribing with backoff, and calls h.Resync once a lost subscription is back. It
// joins every goroutine it starts before it returns.
func (s *Locks) RunFeed(ctx context.Context, h FeedHandler) error {
	if s.cluster != nil {
		s.runClusterFeed(ctx, h)
		return nil
	}
	chans := make([]string, s.channels)
	for i := range chans {
		chans[i] = channelPrefix + strconv.Itoa(i) + "}"
	}
	// go-redis reconnects and resubscribes a PubSub by itself after a connection
	// error, and receive notices. A connection that went silent it keeps: receive then
	// returns errSilent, and a new PubSub dials again.
	lost := false
	backoff := feedBackoffMin
	for {
		began := time.Now()
		ps := s.rdb.Subscribe(ctx, chans...)
		err := s.receive(ctx, ps, h, true, lost, nil)
		if ctx.Err() != nil {
			return nil
		}
		lost = errors.Is(err, errSilent)
		// A connection that lasted has earned a quick retry; one that failed at once
		// (dials timing out, go-redis's dial breaker open) backs off.
		if time.Since(began) > s.feedQuiet {
			backoff = feedBackoffMin
		}
		if !sleepCtx(ctx, backoff) {
			return nil
		}
		backoff = min(backoff*2, feedBackoffMax)
	}
}

// errSilent is a feed connection that sent nothing, not even the Pong of a Ping: a
// server that hangs, or a network that drops packets without a reset, which TCP
// reports only after many minutes.
var errSilent = errors.New("locks: the feed's connection answered no Ping")

const (
	feedPingEvery  = 15 * time.Second // a silent connection is pinged after this; its Pong has a third of it
	feedBackoffMin = 50 * time.Millisecond
	feedBackoffMax = 2 * time.Second
)

// receive delivers ps's messages to h until ctx is done, the connection goes silent
// (errSilent: it answers no Ping), or, when !survive, until the first error. It owns ps
// and closes it. lost says the feed was lost before ps: the first subscription then
// asks h for a resync. onPong, if set, is called on each PONG: Redis answers in order,
// so a PONG after a run of SSUBSCRIBEs says they all took effect.
func (s *core) receive(ctx context.Context, ps *redis.PubSub, h FeedHandler, survive, lost bool, onPong func()) error {
	defer ps.Close()
	// A blocked Receive does not watch ctx; closing the PubSub ends it.
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()

	backoff := feedBackoffMin
	pinged := false // a Ping is out and nothing has come since
	for {
		wait := s.feedQuiet
		if pinged {
			wait = s.feedQuiet / 3
		}
		msg, err := ps.ReceiveTimeout(ctx, wait)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			var netErr interface{ Timeout() bool }
			if errors.As(err, &netErr) && netErr.Timeout() {
				// Nothing arrived for a while: ping, so a dead connection shows itself.
				if !pinged && !lost && ps.Ping(ctx) == nil {
					pinged = true
					continue
				}
				// No Pong, or nothing since the feed was lost. go-redis keeps a
				// connection whose reads time out: it would wait for TCP to give up,
				// and the events meanwhile would be lost. Drop it; the caller
				// subscribes anew (and counts the loss when !survive).
				if survive && !lost {
					s.feedLost(ctx, errSilent)
				}
				return errSilent
			}
			if !survive {
				return err
			}
			if !lost {
				lost = true
				s.feedLost(ctx, err)
			}
			// The next Receive reconnects; wait first so a dead Redis does not spin.
			if !sleepCtx(ctx, backoff) {
				return ctx.Err()
			}
			backoff = min(backoff*2, feedBackoffMax)
			continue
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Pong:
			if onPong != nil {
				onPong()
			}
		case *redis.Subscription:
			if !survive && m.Kind == "sunsubscribe" {
				// Redis drops a shard channel whose slot moved to another master.
				return fmt.Errorf("locks: the server unsubscribed %s (its slot moved)", m.Channel)
			}
			if lost {
				s.log.LogAttrs(ctx, slog.LevelInfo, "lock change feed is back")
				h.Resync(nil)
			}
			lost, backoff = false, feedBackoffMin
		case *redis.Message:
			if err := deliver(m.Payload, h); err != nil {
				s.log.LogAttrs(ctx, slog.LevelWarn, "dropping a malformed feed message", slog.String("error", err.Error()))
			}
		}
	}
}

func (s *core) feedLost(ctx context.Context, err error) {
	reason := classify(err)
	s.met.failOpen.WithLabelValues(string(opSubscribe), string(reason)).Inc()
	s.log.LogAttrs(ctx, slog.LevelWarn, "lock change feed lost; watchers will be resynced when it is back",
		slog.String("reason", string(reason)), slog.String("error", err.Error()))
}

// sleepCtx waits d, or less if ctx ends first; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// runClusterFeed subscribes to every slot's channel, one connection per master, until
// ctx is done. When a connection fails (its master died, or a slot moved away from it)
// only the slots it served are subscribed again, on whichever masters serve them now
// (go-redis would resubscribe every channel of a PubSub in one SSUBSCRIBE, which Redis
// refuses across slots), and h.Resync names only the tenants of those slots: the other
// masters' connections, and their tenants' live events, are not disturbed.
func (s *core) runClusterFeed(ctx context.Context, h FeedHandler) {
	type shard struct {
		slots []int
		err   error
	}
	done := make(chan shard)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	pending := make([]int, slotCount)
	for i := range pending {
		pending[i] = i
	}
	first := true
	backoff := feedBackoffMin
	for {
		// Group the pending slots by the master that serves each now; a slot that moves
		// meanwhile answers MOVED to its SSUBSCRIBE, and comes back here.
		groups, unknown, err := s.slotsByMaster(ctx, pending)
		if err != nil && ctx.Err() == nil {
			s.feedLost(ctx, err)
		}
		for _, g := range groups {
			resync := !first
			wg.Go(func() {
				err := s.subscribeSlots(ctx, g.node, g.slots, h, resync)
				select {
				case done <- shard{g.slots, err}:
				case <-ctx.Done():
				}
			})
		}
		pending, first = unknown, false
		if len(pending) > 0 { // the slot map did not name a master for them yet
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, feedBackoffMax)
			s.cluster.ReloadState(ctx)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case sh := <-done:
			if ctx.Err() != nil {
				return
			}
			s.feedLost(ctx, sh.err)
			pending = append(pending, sh.slots...)
			// Gather the shards that fail together (one master's death), then look
			// again at the slot map.
			if !sleepCtx(ctx, backoff) {
				return
			}
			for more := true; more; {
				select {
				case sh := <-done:
					pending = append(pending, sh.slots...)
				default:
					more = false
				}
			}
			backoff = min(backoff*2, feedBackoffMax)
			s.cluster.ReloadState(ctx)
		}
	}
}

type slotGroup struct {
	node  *redis.Client
	slots []int
}

// slotsByMaster groups slots by the master that serves them in the client's slot map;
// unknown are those it names no master for.
func (s *core) slotsByMaster(ctx context.Context, slots []int) (groups []slotGroup, unknown []int, err error) {
	byAddr := map[string]int{}
	for _, slot := range slots {
		node, e := s.cluster.MasterForKey(ctx, s.slotChannel(slot))
		if e != nil {
			unknown, err = append(unknown, slot), e
			continue
		}
		addr := node.Options().Addr
		i, ok := byAddr[addr]
		if !ok {
			i = len(groups)
			byAddr[addr] = i
			groups = append(groups, slotGroup{node: node})
		}
		groups[i].slots = append(groups[i].slots, slot)
	}
	return groups, unknown, err
}

// slotChannel is the sharded channel of a slot.
func (s *core) slotChannel(slot int) string { return channelPrefix + s.tags[slot] + "}" }

// subscribeSlots subscribes to the channels of slots on node, one SSUBSCRIBE per slot
// (a SSUBSCRIBE may not span slots), and receives until the connection fails or ctx
// ends; it returns why. With resync, h.Resync names the slots' tenants once every
// SSUBSCRIBE took effect: only then may watchers take fresh snapshots without missing
// a change made in between.
func (s *core) subscribeSlots(ctx context.Context, node *redis.Client, slots []int, h FeedHandler, resync bool) error {
	ps := node.SSubscribe(ctx)
	for _, slot := range slots {
		if err := ps.SSubscribe(ctx, s.slotChannel(slot)); err != nil {
			ps.Close()
			return err
		}
	}
	if err := ps.Ping(ctx, "subscribed"); err != nil {
		ps.Close()
		return err
	}
	onReady := func() {}
	if resync {
		set := make([]bool, slotCount)
		for _, slot := range slots {
			set[slot] = true
		}
		onReady = sync.OnceFunc(func() {
			s.log.LogAttrs(ctx, slog.LevelInfo, "lock change feed is back for some slots", slog.Int("slots", len(slots)),
				slog.String("master", node.Options().Addr))
			h.Resync(func(tenant string) bool { return set[crc16(tenant)%slotCount] })
		})
	}
	err := s.receive(ctx, ps, h, false, false, onReady)
	if err == nil {
		err = errors.New("locks: feed connection closed")
	}
	return err
}
