package web_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/web"
)

// gatedLists is a lock store whose lists count their reads, and whose first read waits
// at a gate once it has read: what the HTTP list shares is then visible.
type gatedLists struct {
	*locks.Locks
	reads   atomic.Int32
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedLists) ListJSON(ctx context.Context, tenant, entityType string) ([]byte, error) {
	b, err := g.Locks.ListJSON(ctx, tenant, entityType)
	if g.reads.Add(1) == 1 {
		close(g.entered)
		<-g.gate
	}
	return b, err
}

// TestListsShareReads: lists of one type that arrive while one is read share one next
// read (PROTOCOL.md §4: identical reads may share one read); each answer is whole, and
// the ones that waited see a claim made after the first read.
func TestListsShareReads(t *testing.T) {
	g := &gatedLists{entered: make(chan struct{}), gate: make(chan struct{})}
	e := newEnv(t, envOpts{config: func(c *web.Config) {
		g.Locks = c.Store.(*locks.Locks)
		c.Store = g
	}})
	var once sync.Once
	open := func() { once.Do(func() { close(g.gate) }) }
	t.Cleanup(open) // before the server's Close, which waits for the gated request
	tok := e.token("acme", "u-ada", "Ada")
	list := req{method: http.MethodGet, path: "/api/locks/ApprovalRequest", token: tok}
	if r := e.do(req{method: http.MethodPost, path: "/api/locks/ApprovalRequest/r-1", token: tok}); r.status != http.StatusOK {
		t.Fatalf("claim: %d", r.status)
	}

	first := make(chan resp, 1)
	go func() { r, _ := tryHTTP(context.Background(), e.srv.Client(), e.srv.URL, list); first <- r }()
	<-g.entered
	if r := e.do(req{method: http.MethodPost, path: "/api/locks/ApprovalRequest/r-2", token: tok}); r.status != http.StatusOK {
		t.Fatalf("claim: %d", r.status)
	}
	const n = 8
	var wg sync.WaitGroup
	got := make([]resp, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { got[i], errs[i] = tryHTTP(context.Background(), e.srv.Client(), e.srv.URL, list) })
	}
	redistest.Within(t, 10*time.Second, "the lists queued behind the read in flight", func() error {
		if q := e.server.QueuedLists("acme", "ApprovalRequest"); q != n {
			return fmt.Errorf("%d queued, want %d", q, n)
		}
		return nil
	})
	open()
	wg.Wait()
	if r := <-first; len(r.list("locks")) != 1 {
		t.Fatalf("the first list: %d locks, want r-1 alone (read before r-2)", len(r.list("locks")))
	}
	for i := range n {
		if errs[i] != nil || got[i].status != http.StatusOK || len(got[i].list("locks")) != 2 {
			t.Fatalf("list %d: %v %d %v, want both locks", i, errs[i], got[i].status, got[i].body)
		}
	}
	if reads := g.reads.Load(); reads != 2 {
		t.Fatalf("%d reads for %d lists, want 2: the one in flight and one shared by the rest", reads, n+1)
	}
}
