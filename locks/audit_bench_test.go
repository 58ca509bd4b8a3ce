package locks

import (
	"context"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// BenchmarkAuditCost prices the audit trail (PROTOCOL.md §10): a claim and a release
// through a store that writes the audit stream (an XADD and its exact trims by age and
// count in each script) against the same through a store that does not, on the same real redis-server,
// interleaved call by call, each on its own tenant so neither meets the other's keys.
// audited/plain-rate is the rate with the audit over the rate without it: 1 means
// free, 0.5 half as many changes a second.
//
//	go test -run='^$' -bench=AuditCost -benchtime=2s ./locks/
func BenchmarkAuditCost(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client(b)
	// A cap of 10,000 entries, filled in seconds; a rate of changes that lets one
	// person go as fast as Redis does (the default refuses past 200: PROTOCOL.md §4).
	const max = 10000
	cfg := Config{Timeout: 5 * time.Second, AuditMaxEntries: max, MaxChangesPerPerson: 1e9, ChangesBurst: 1e9}
	audited, _ := newStore(b, c, cfg)
	cfg.noAudit = true
	plain, _ := newStore(b, c, cfg)
	ctx := context.Background()
	refA := Ref{"bench-audit", "ApprovalRequest", "r-1"}
	refP := Ref{"bench-plain", "ApprovalRequest", "r-1"}
	// Fill the audited tenant's stream to its cap first: the steady state trims.
	for range max / 2 {
		claimRelease(b, audited, ctx, refA)
	}
	var auditedT, plainT time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		first, second := func() { auditedT += timeIt(func() { claimRelease(b, audited, ctx, refA) }) },
			func() { plainT += timeIt(func() { claimRelease(b, plain, ctx, refP) }) }
		if i%2 == 1 {
			first, second = second, first
		}
		first()
		second()
	}
	b.ReportMetric(float64(auditedT.Nanoseconds())/float64(b.N), "audited-ns/op")
	b.ReportMetric(float64(plainT.Nanoseconds())/float64(b.N), "plain-ns/op")
	b.ReportMetric(float64(plainT)/float64(auditedT), "audited/plain-rate")
	if n, err := c.XLen(ctx, AuditKey(refA.Tenant)).Result(); err != nil || n != max {
		b.Fatalf("the audited stream holds %d entries (%v), want %d", n, err, max)
	}
	if n, _ := c.Exists(ctx, AuditKey(refP.Tenant)).Result(); n != 0 {
		b.Fatal("the plain store wrote an audit stream")
	}
}
