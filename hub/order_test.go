package hub

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lockhub/lockhub/protocol"
)

// TestWatchWhileChanging: watchers that join while locks change all the time end up
// with exactly the store's state when they apply their snapshot and then their events:
// no event is lost between registration and snapshot, and none overtakes the
// snapshot.
func TestWatchWhileChanging(t *testing.T) {
	th, _ := startReal(t, hubOptions{})
	ctx := tctx(t)
	stop := churn(t, th, 1)

	var watchers []*protocol.Client
	var models []model
	for range 12 {
		w, _ := th.dial("acme", "u-w")
		snap, err := w.Watch(ctx, typ)
		if err != nil {
			t.Fatal(err)
		}
		m := model{}
		for _, l := range snap.Locks {
			m[l.EntityUID] = l.HolderOID
		}
		watchers, models = append(watchers, w), append(models, m)
	}
	stop()
	last, _ := th.dial("acme", "u-last")

	// A last change: once a watcher has its event, it has every earlier one.
	expect(t, protocol.OutcomeAcquired)(last.Claim(ctx, typ, "end"))
	for i, w := range watchers {
		for {
			ev := nextEvent(t, w)
			switch ev.Op {
			case protocol.OpAcquired, protocol.OpRenewed, protocol.OpTakenOver:
				models[i][ev.Lock.EntityUID] = ev.Lock.HolderOID
			case protocol.OpReleased, protocol.OpExpired:
				delete(models[i], ev.Lock.EntityUID)
			}
			if ev.Lock.EntityUID == "end" {
				break
			}
		}
	}
	wantStore(t, th, models)
}

// churn has 4 clients claim and release 10 entities at random (seeded) until the
// returned stop is called, which waits for them.
func churn(t *testing.T, th *testHub, seed uint64) (stop func()) {
	t.Helper()
	ctx := tctx(t)
	claimers := make([]*protocol.Client, 4)
	for i := range claimers {
		claimers[i], _ = th.dial("acme", "u-"+itoa(i))
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range claimers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), seed))
			// Under the socket's rate (PROTOCOL.md §4: 50 frames a second, bursts of
			// 100): unpaced, a churn that outlasted its burst (a slow crowd on a loaded
			// machine) was answered rate_limited.
			pace := time.NewTicker(time.Second / 40)
			defer pace.Stop()
			for {
				select {
				case <-done:
					return
				case <-pace.C:
				}
				uid := "o-" + itoa(rng.IntN(10))
				var err error
				if rng.IntN(2) == 0 {
					_, err = c.Claim(ctx, typ, uid)
				} else {
					_, err = c.Release(ctx, typ, uid)
				}
				if err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		})
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// model is what a watcher believes of the type: uid -> holder.
type model map[string]string

// wantStore checks that every watcher's model is the store's state of the type.
func wantStore(t *testing.T, th *testHub, models []model) {
	t.Helper()
	truth, err := th.store.Locks.List(context.Background(), "acme", typ)
	if err != nil {
		t.Fatal(err)
	}
	want := model{}
	for _, l := range truth {
		want[l.EntityUID] = l.HolderOID
	}
	for i, m := range models {
		if len(m) != len(want) {
			t.Fatalf("watcher %d sees %v, the store holds %v", i, m, want)
		}
		for uid, h := range want {
			if m[uid] != h {
				t.Fatalf("watcher %d sees %v, the store holds %v", i, m, want)
			}
		}
	}
}

// slowMineStore is a Store whose Mine waits until released: a request the handler is
// stuck in.
type slowMineStore struct {
	Locks
	entered chan struct{}
	release chan struct{}
}

func (s *slowMineStore) Mine(ctx context.Context, tenant, oid string) ([]protocol.Lock, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Locks.Mine(ctx, tenant, oid)
}

// TestEventNotHeldBehindRequest: the handler writes its own answers, but an event
// never waits for it: while a socket's request is stuck in the store, the events of
// the type it watches still reach it, and the answer follows when the request ends.
func TestEventNotHeldBehindRequest(t *testing.T) {
	ss := &slowMineStore{entered: make(chan struct{}, 1), release: make(chan struct{})}
	th := startMini(t, hubOptions{hub: func(c *Config) {
		ss.Locks = c.Store.Locks
		c.Store.Locks = ss
	}})
	release := sync.OnceFunc(func() { close(ss.release) })
	t.Cleanup(release) // before the hub stops, which waits for the stuck request
	ctx := tctx(t)
	w := th.dialOrdered("acme", "u-w")
	w.send(map[string]string{"id": "w", "type": "watch", "entityType": typ})
	if f := w.next(); f.Type != protocol.FrameSnapshot {
		t.Fatalf("watch answered %s", f.Type)
	}
	w.send(map[string]string{"id": "m", "type": "mine"})
	select {
	case <-ss.entered:
	case <-ctx.Done():
		t.Fatal("mine never reached the store")
	}
	ada, _ := th.dial("acme", "u-ada")
	expect(t, protocol.OutcomeAcquired)(ada.Claim(ctx, typ, "r-1"))
	if f := w.next(); f.Type != protocol.FrameLock || f.Event.Lock.EntityUID != "r-1" {
		t.Fatalf("while mine was stuck: %s frame, want the event of r-1", f.Type)
	}
	release()
	if f := w.next(); f.Type != protocol.FrameResult || f.ID != "m" {
		t.Fatalf("after mine was released: %s %q, want its answer", f.Type, f.ID)
	}
}
