package coalesce

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestReadsShare: callers that arrive while a read is in flight never get that read
// (it may have begun before them); they share one next read, made once.
func TestReadsShare(t *testing.T) {
	var s Reads[string, int]
	var calls atomic.Int32
	entered := make(chan struct{})
	gate := make(chan struct{})
	read := func(context.Context) (int, error) {
		n := int(calls.Add(1))
		if n == 1 {
			close(entered)
			<-gate
		}
		return n, nil
	}
	ctx := context.Background()
	first := make(chan int, 1)
	go func() { v, _ := s.Read(ctx, "k", read); first <- v }()
	<-entered

	const n = 20
	var wg sync.WaitGroup
	got := make([]int, n)
	for i := range n {
		wg.Go(func() { got[i], _ = s.Read(ctx, "k", read) })
	}
	redistest.Within(t, 10*time.Second, "every caller queued behind the read in flight", func() error {
		if q := s.Queued("k"); q != n {
			return fmt.Errorf("%d queued", q)
		}
		return nil
	})
	// Another key is not held up by the first.
	if v, err := s.Read(ctx, "other", func(context.Context) (int, error) { return 99, nil }); v != 99 || err != nil {
		t.Fatalf("other key: %d %v", v, err)
	}
	close(gate)
	wg.Wait()
	if v := <-first; v != 1 {
		t.Fatalf("first caller got read %d, want 1", v)
	}
	for i, v := range got {
		if v != 2 {
			t.Fatalf("queued caller %d got read %d, want the one next read (2)", i, v)
		}
	}
	if c := calls.Load(); c != 2 {
		t.Fatalf("%d reads for %d callers, want 2", c, n+1)
	}
	if s.keys != nil {
		t.Fatalf("idle Reads keeps %d keys", len(s.keys))
	}
}
