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
// its Acquired published and audited, the handoff message, the viewers announced, all
// in the release's script) against a release with nobody waiting, interleaved on one
// real redis-server. In both the holder's own form views the entity, as the browser
// client's does, so both announce the viewers; a third, bare release (nobody views)
// is reported beside them. The goal is handoff/release at most 1.3.
//
//	go test -run='^$' -bench=Handoff -benchtime=1s -count=3 ./locks/
func BenchmarkHandoff(b *testing.B) {
	srv := redistest.StartServer(b)
	s, _ := newStore(b, srv.Client(b), benchConfig(5*time.Second))
	ctx := context.Background()
	bare := Ref{"bench", "ApprovalRequest", "r-bare"}
	alone := Ref{"bench", "ApprovalRequest", "r-alone"}
	line := Ref{"bench", "ApprovalRequest", "r-line"}
	viewer := func(h protocol.Holder, intent protocol.Intent) View {
		return View{Conn: "c-" + h.OID, Viewer: protocol.Viewer{OID: h.OID, Name: h.Name, Since: protocol.NewTime(time.Now())}, Intent: intent}
	}
	view := func(ref Ref, v View) {
		if _, err := s.Presence.View(ctx, ref, v, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	view(alone, viewer(ada, protocol.IntentLook)) // the holder's form
	view(line, viewer(ada, protocol.IntentLook))
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
	var bareT, aloneT, lineT time.Duration
	for i := 0; b.Loop(); i++ {
		claim(bare, ada)
		claim(alone, ada)
		claim(line, ada) // before Grace waits: a claim never jumps the line
		view(line, viewer(grace, protocol.IntentEdit))
		runs := []func(){
			func() { bareT += timeIt(func() { release(bare, ada) }) },
			func() { aloneT += timeIt(func() { release(alone, ada) }) },
			func() { lineT += timeIt(func() { release(line, ada) }) },
		}
		for j := range runs { // each goes first in turn
			runs[(i+j)%len(runs)]()
		}
		release(line, grace) // the hand-off gave it to Grace
		if err := s.Presence.Unview(ctx, line, "c-"+grace.OID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(bareT.Nanoseconds())/float64(b.N), "bare-ns/op")
	b.ReportMetric(float64(aloneT.Nanoseconds())/float64(b.N), "release-ns/op")
	b.ReportMetric(float64(lineT.Nanoseconds())/float64(b.N), "handoff-ns/op")
	b.ReportMetric(float64(lineT)/float64(aloneT), "handoff/release")
	b.ReportMetric(float64(lineT)/float64(bareT), "handoff/bare")
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
