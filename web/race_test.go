package web_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
)

// TestDecisionRace is the story's bug: two people open the same approval request and
// both click approve. Whatever the locks do (held, never claimed, or failing open with
// the lock Redis down while the rows' Redis is up), every request ends with exactly
// one decision, by the one whose click succeeded.
func TestDecisionRace(t *testing.T) {
	const rounds = 40
	cases := []struct {
		name  string
		env   func(t *testing.T) *env
		claim bool     // both open the form first: claim the lock
		loser []string // the codes the loser may get
	}{
		{"locks up, both claim", func(t *testing.T) *env { return newEnv(t, envOpts{}) }, true, []string{"locked", "already_decided"}},
		{"locks up, nobody claims", func(t *testing.T) *env { return newEnv(t, envOpts{}) }, false, []string{"already_decided"}},
		{"lock Redis down, rows up", func(t *testing.T) *env {
			lock, rows := redistest.StartServer(t), redistest.StartServer(t)
			lock.Kill(t)
			return newEnv(t, envOpts{lockRDB: client(t, lock.URL()), demoRDB: client(t, rows.URL())})
		}, true, []string{"already_decided"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := c.env(t)
			users := [2]string{e.token("acme", "u-ada", "Ada Lovelace"), e.token("acme", "u-bob", "Bob Marley")}
			oids := [2]string{"u-ada", "u-bob"}
			for i := range rounds {
				uid := fmt.Sprintf("r-%d", 1001+i)
				if c.claim {
					for _, u := range users {
						r := e.do(req{method: "POST", path: "/api/locks/ApprovalRequest/" + uid, token: u})
						if r.status != 200 && r.status != 409 {
							t.Fatalf("claim: %d %s", r.status, r.raw)
						}
					}
				}
				var (
					wg    sync.WaitGroup
					start = make(chan struct{})
					got   [2]resp
					errs  [2]error
				)
				for k := range 2 {
					action := "approve"
					if (i+k)%3 == 0 {
						action = "reject"
					}
					wg.Go(func() {
						<-start
						got[k], errs[k] = tryHTTP(t.Context(), e.srv.Client(), e.srv.URL,
							req{method: "POST", path: "/api/approval-requests/" + uid + "/" + action, token: users[k]})
					})
				}
				close(start)
				wg.Wait()
				winner := -1
				for k := range 2 {
					if errs[k] != nil {
						t.Fatal(errs[k])
					}
					switch {
					case got[k].status == 200 && winner < 0:
						winner = k
					case got[k].status == 409 && slices.Contains(c.loser, got[k].code()):
					default:
						t.Fatalf("round %d, user %d: %d %s", i, k, got[k].status, got[k].raw)
					}
				}
				if winner < 0 {
					t.Fatalf("round %d: nobody decided: %s / %s", i, got[0].raw, got[1].raw)
				}
				r := e.do(req{method: "GET", path: "/api/approval-requests/" + uid, token: users[0]})
				if r.str("status") == "pending" || r.obj("decidedBy")["oid"] != oids[winner] {
					t.Fatalf("round %d: row %s, winner %s", i, r.raw, oids[winner])
				}
				equal(t, "one write", r.body["version"], any(2.0))
			}
			if c.name == "lock Redis down, rows up" {
				if metric(t, e, "lockhub_store_fail_open_total") == 0 {
					t.Fatal("the lock store never failed open")
				}
			}
		})
	}
}

// client makes a Redis client as lockhub does, for a redistest URL.
func client(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	c, err := locks.NewClient(url, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// metric sums the counters of one family of the env's registry.
func metric(t *testing.T, e *env, name string) float64 {
	t.Helper()
	fams, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
