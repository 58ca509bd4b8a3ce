//go:build unix

package locks

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestFailOpenStandaloneHung pauses the real redis-server under the store (SIGSTOP): a
// Redis that hangs, accepting connections and answering nothing, rather than one that
// refuses them. Every operation still answers its fail-open result within the
// contract's 2 s, through a client with the production settings, and counts it as a
// timeout; once Redis resumes the store works again.
func TestFailOpenStandaloneHung(t *testing.T) {
	srv := redistest.StartServer(t)
	c, err := NewClient(srv.URL(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, _ := newStore(t, c, Config{Registerer: prometheus.NewRegistry()})
	ctx := ctxT(t)
	ref := Ref{"acme", "ApprovalRequest", "r-1001"}
	expect(t, protocol.OutcomeAcquired)(s.Locks.Claim(ctx, ref, ada, "c1"))

	srv.Pause(t)
	for _, tc := range []struct {
		name string // the op label of the store's metrics
		run  func(t *testing.T)
	}{
		{"claim", func(t *testing.T) { expect(t, protocol.OutcomeUnknown)(s.Locks.Claim(ctx, ref, grace, "")) }},
		{"renew", func(t *testing.T) { expect(t, protocol.OutcomeUnknown)(s.Locks.Renew(ctx, ref, ada, "c1")) }},
		{"release", func(t *testing.T) { expect(t, protocol.OutcomeUnknown)(s.Locks.Release(ctx, ref, ada, "")) }},
		{"takeover", func(t *testing.T) { expect(t, protocol.OutcomeUnknown)(s.Locks.Takeover(ctx, ref, margot, "", true)) }},
		{"get", func(t *testing.T) {
			if l, err := s.Locks.Get(ctx, ref); l != nil || err != nil {
				t.Fatalf("Get = %+v, %v; want no lock and no error", l, err)
			}
			if l, err := s.Locks.Lookup(ctx, ref); l != nil || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Lookup = %+v, %v; want ErrUnavailable", l, err)
			}
		}},
		{"list", func(t *testing.T) {
			if l, err := s.Locks.List(ctx, "acme", "ApprovalRequest"); len(l) != 0 || err != nil {
				t.Fatalf("List = %+v, %v; want no locks", l, err)
			}
		}},
		{"adminLocks", func(t *testing.T) {
			// Read page by page with a budget of many Timeouts in all, yet each page
			// has one: a hung Redis fails it within the bound all the same.
			if b, err := s.Console.AdminLocksJSON(ctx, "acme"); b != nil || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("AdminLocksJSON = %s, %v; want ErrUnavailable", b, err)
			}
		}},
		{"mine", func(t *testing.T) {
			if l, err := s.Locks.Mine(ctx, "acme", ada.OID); len(l) != 0 || err != nil {
				t.Fatalf("Mine = %+v, %v; want no locks", l, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			tc.run(t)
			// "get" runs Get and Lookup: each has the bound.
			bound := failOpenBound
			if tc.name == "get" {
				bound *= 2
			}
			if d := time.Since(start); d > bound {
				t.Errorf("%s took %s with Redis hung, bound %s a call", tc.name, d, failOpenBound)
			}
			if got := testutil.ToFloat64(s.core.met.failOpen.WithLabelValues(tc.name, string(ReasonTimeout))); got < 1 {
				t.Errorf("%s: fail-open not counted as a timeout", tc.name)
			}
		})
	}

	// The store's own Timeout bounds a call, below the client's socket timeouts.
	quick, _ := newStore(t, c, Config{Timeout: 100 * time.Millisecond, Registerer: prometheus.NewRegistry()})
	start := time.Now()
	expect(t, protocol.OutcomeUnknown)(quick.Locks.Claim(ctx, ref, grace, ""))
	if d := time.Since(start); d >= ClientTimeout {
		t.Errorf("a claim with Timeout 100ms took %s with Redis hung: the client's %s, not the store's", d, ClientTimeout)
	}

	srv.Resume(t)
	n := 0
	redistest.Eventually(t, "claims work after Redis resumes", func() bool {
		n++
		r, err := s.Locks.Claim(ctx, Ref{"acme", "ApprovalRequest", fmt.Sprintf("after-%d", n)}, grace, "")
		return err == nil && r.Outcome == protocol.OutcomeAcquired
	})
	after := Ref{"acme", "ApprovalRequest", fmt.Sprintf("after-%d", n)}
	expect(t, protocol.OutcomeLocked)(s.Locks.Claim(ctx, after, ada, ""))
	if l := must1(s.Locks.Lookup(ctx, after)); l == nil || l.HolderOID != grace.OID {
		t.Fatalf("Lookup after resume = %+v, want Grace's lock", l)
	}
	if mine := must1(s.Locks.Mine(ctx, "acme", grace.OID)); len(mine) == 0 {
		t.Fatal("Mine after resume is empty")
	}
}

// TestFeedStandaloneHung: the feed on a redis-server that hangs (SIGSTOP) notices the
// silence, since its Ping gets no Pong, counts the feed as lost, and once Redis
// answers again subscribes anew and asks for a resync of every tenant.
func TestFeedStandaloneHung(t *testing.T) {
	srv := redistest.StartServer(t)
	c, err := NewClient(srv.URL(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, _ := newStore(t, c, Config{Registerer: prometheus.NewRegistry(), feedQuiet: 600 * time.Millisecond})
	rec := runFeed(t, s, s, "acme")
	ctx := ctxT(t)

	srv.Pause(t)
	lost := s.core.met.failOpen.WithLabelValues(string(opSubscribe), string(ReasonConnection))
	redistest.Eventually(t, "the feed counts its silent connection as lost", func() bool { return testutil.ToFloat64(lost) >= 1 })
	srv.Resume(t)
	ref := Ref{"acme", "ApprovalRequest", "after-hang"}
	redistest.Eventually(t, "the feed resyncs and delivers again", func() bool {
		s.Locks.Claim(ctx, ref, ada, "")
		return rec.resyncedFor("acme") && len(rec.of("acme", ref.UID)) > 0
	})
}
