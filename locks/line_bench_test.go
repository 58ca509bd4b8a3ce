package locks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// BenchmarkHandoff measures what a hand-off adds to a release (PROTOCOL.md §11): a
// release through which the lock goes to the one person waiting (the new lock written,
// its Acquired published and audited, the handoff message and the viewers announced,
// all in the release's script) against a release with nobody waiting, interleaved on
// one real redis-server. The goal is a ratio of at most 1.3.
//
//	go test -run='^$' -bench=Handoff -benchtime=1s -count=3 ./locks/
func BenchmarkHandoff(b *testing.B) {
	srv := redistest.StartServer(b)
	s, _ := newStore(b, srv.Client(b), benchConfig(5*time.Second))
	ctx := context.Background()
	alone := Ref{"bench", "ApprovalRequest", "r-alone"}
	line := Ref{"bench", "ApprovalRequest", "r-line"}
	v := View{Conn: "c-" + grace.OID, Viewer: protocol.Viewer{OID: grace.OID, Name: grace.Name, Since: protocol.NewTime(time.Now())}, Intent: protocol.IntentEdit}
	if _, err := s.Presence.View(ctx, line, v, time.Hour); err != nil {
		b.Fatal(err)
	}
	claim := func(ref Ref, h protocol.Holder) {
		if r, _ := s.Locks.Claim(ctx, ref, h, "c-"+h.OID); r.Outcome != protocol.OutcomeAcquired {
			b.Fatalf("claim of %s: %s", ref.UID, r.Outcome)
		}
	}
	release := func(ref Ref, h protocol.Holder) {
		if r, _ := s.Locks.Release(ctx, ref, h, "c-"+h.OID); r.Outcome != protocol.OutcomeReleased {
			b.Fatalf("release of %s: %s", ref.UID, r.Outcome)
		}
	}
	var aloneT, lineT time.Duration
	for i := 0; b.Loop(); i++ {
		claim(alone, ada)
		claim(line, ada)
		first := func() { aloneT += timeIt(func() { release(alone, ada) }) }
		second := func() { lineT += timeIt(func() { release(line, ada) }) }
		if i%2 == 1 {
			first, second = second, first
		}
		first()
		second()
		release(line, grace) // the hand-off gave it to Grace; she waits again after
	}
	b.ReportMetric(float64(aloneT.Nanoseconds())/float64(b.N), "release-ns/op")
	b.ReportMetric(float64(lineT.Nanoseconds())/float64(b.N), "handoff-ns/op")
	b.ReportMetric(float64(lineT)/float64(aloneT), "handoff/release")
}

// BenchmarkClaimMany measures a claim of 100 entities in one call (one read, one
// script) against 100 single claims, interleaved on one real redis-server. The goal is
// a ratio of at most 0.2.
//
//	go test -run='^$' -bench=ClaimMany -benchtime=1s -count=3 ./locks/
func BenchmarkClaimMany(b *testing.B) {
	srv := redistest.StartServer(b)
	s, _ := newStore(b, srv.Client(b), benchConfig(5*time.Second))
	ctx := context.Background()
	const n = protocol.MaxBulk
	bulk, single := make([]string, n), make([]string, n)
	for i := range n {
		bulk[i], single[i] = fmt.Sprintf("m-%d", i), fmt.Sprintf("s-%d", i)
	}
	const tenant, typ = "bench", "ApprovalRequest"
	var manyT, singleT time.Duration
	for i := 0; b.Loop(); i++ {
		first := func() {
			manyT += timeIt(func() {
				if r, err := s.Locks.ClaimMany(ctx, tenant, typ, bulk, ada, ""); err != nil || r.Outcome != protocol.OutcomeAcquired {
					b.Fatalf("claimMany: %+v, %v", r, err)
				}
			})
		}
		second := func() {
			singleT += timeIt(func() {
				for _, uid := range single {
					if r, _ := s.Locks.Claim(ctx, Ref{tenant, typ, uid}, ada, ""); r.Outcome != protocol.OutcomeAcquired {
						b.Fatalf("claim: %s", r.Outcome)
					}
				}
			})
		}
		if i%2 == 1 {
			first, second = second, first
		}
		first()
		second()
		for _, uids := range [][]string{bulk, single} {
			if r, err := s.Locks.ReleaseMany(ctx, tenant, typ, uids, ada, ""); err != nil || r.Count != n {
				b.Fatalf("releaseMany: %+v, %v", r, err)
			}
		}
	}
	b.ReportMetric(float64(manyT.Nanoseconds())/float64(b.N), "claimMany-ns/op")
	b.ReportMetric(float64(singleT.Nanoseconds())/float64(b.N), "100claims-ns/op")
	b.ReportMetric(float64(manyT)/float64(singleT), "many/single")
}
