package service

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/redis/go-redis-entraid/shared"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// tokenLife is the life of a test token unless testIdentity says otherwise:
// go-redis-entraid renews it at 70 % of its life, so about every second.
const tokenLife = 1400 * time.Millisecond

// testIdentity is an identity provider behind go-redis-entraid's interface, as Entra
// ID would be: each request issues a new token (a JWT naming the identity's oid, as
// Entra ID's do) and makes it the only password of that ACL user on every node, the
// previous one removed, so only the newest token opens a connection.
type testIdentity struct {
	oid   string
	nodes []*redis.Client // admin clients of every node
	life  time.Duration   // of each token; 0 means tokenLife

	// expire, when set, gives each token a user of its own (its oid, as Entra ID's
	// tokens name the Redis user) and deletes the user of the token before the
	// previous one, which closes every connection still authenticated as it: what
	// Azure Managed Redis does to a connection whose token expired and was not
	// replaced by AUTH.
	expire bool

	fail atomic.Bool // requests fail while set

	mu     sync.Mutex
	issued []string // guarded by mu: every token, the current one last
}

var errIdentityDown = errors.New("test identity provider: down")

func (ti *testIdentity) RequestToken(ctx context.Context) (shared.IdentityProviderResponse, error) {
	if ti.fail.Load() {
		return nil, errIdentityDown
	}
	ti.mu.Lock()
	defer ti.mu.Unlock()
	exp := time.Now().Add(cmp.Or(ti.life, tokenLife))
	user := ti.oid
	if ti.expire {
		user = ti.userOf(len(ti.issued))
	}
	tok := testJWT(user, exp)
	for _, n := range ti.nodes {
		args := []any{"ACL", "SETUSER", user, "on", ">" + tok, "~*", "&*", "+@all"}
		if len(ti.issued) > 0 && !ti.expire {
			args = append(args, "<"+ti.issued[len(ti.issued)-1])
		}
		if err := n.Do(ctx, args...).Err(); err != nil {
			return nil, fmt.Errorf("test identity provider: ACL SETUSER: %w", err)
		}
		if ti.expire && len(ti.issued) >= 2 {
			if err := n.Do(ctx, "ACL", "DELUSER", ti.userOf(len(ti.issued)-2)).Err(); err != nil {
				return nil, fmt.Errorf("test identity provider: ACL DELUSER: %w", err)
			}
		}
	}
	ti.issued = append(ti.issued, tok)
	return shared.NewIDPResponse(shared.ResponseTypeAccessToken, &azcore.AccessToken{Token: tok, ExpiresOn: exp})
}

// userOf is the Redis user of the i-th token when each has its own.
func (ti *testIdentity) userOf(i int) string { return fmt.Sprintf("%s-%d", ti.oid, i) }

// tokens returns every token issued so far.
func (ti *testIdentity) tokens() []string {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return append([]string(nil), ti.issued...)
}

// testJWT is an unsigned-looking JWT with the claims go-redis-entraid reads: oid, the
// Redis user, and exp. Redis checks it as a password, not as a signature.
func testJWT(oid string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce) // crypto/rand never fails on Linux
	claims, _ := json.Marshal(map[string]any{"oid": oid, "exp": exp.Unix(), "jti": enc(nonce)})
	return enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc(claims) + "." + enc(nonce)
}

// failOpens returns the fail-opens the running service counted with reason, or all
// of them when reason is empty.
func failOpens(t *testing.T, r *running, reason string) float64 {
	t.Helper()
	total := 0.0
	for line := range strings.SplitSeq(call(t, "GET", r.url+"/metrics", "", "").raw, "\n") {
		if !strings.HasPrefix(line, "lockhub_store_fail_open_total{") || (reason != "" && !strings.Contains(line, `reason="`+reason+`"`)) {
			continue
		}
		var v float64
		_, _ = fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
		total += v
	}
	return total
}

// reauths returns how many AUTH commands the nodes have served: lockhub's
// connections open with HELLO, and go-redis re-authenticates an open connection with
// a renewed token by AUTH.
func reauths(t *testing.T, nodes []*redis.Client) int {
	t.Helper()
	total := 0
	for _, n := range nodes {
		info, err := n.Info(t.Context(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_auth:calls="); ok {
				var c int
				_, _ = fmt.Sscanf(v, "%d", &c)
				total += c
			}
		}
	}
	return total
}

// aclOnly makes every node refuse unauthenticated connections: the default user is
// switched off, and an admin user remains for the test's own clients, which it
// returns.
func aclOnly(t *testing.T, addrs []string) []*redis.Client {
	t.Helper()
	var admins []*redis.Client
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		if err := c.Do(t.Context(), "ACL", "SETUSER", "admin", "on", ">admin-pw", "~*", "&*", "+@all").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(t.Context(), "ACL", "SETUSER", "default", "off").Err(); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		ac := redis.NewClient(&redis.Options{Addr: a, Username: "admin", Password: "admin-pw"})
		t.Cleanup(func() { _ = ac.Close() })
		if err := ac.Ping(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		admins = append(admins, ac)
	}
	return admins
}

// startConfigured is start with a Configure hook.
func startConfigured(t *testing.T, args []string, lookup func(string) (string, bool), configure func(*Config)) *running {
	t.Helper()
	r := &running{logs: &redistest.LogBuffer{}, done: make(chan error, 1)}
	r.m = &Main{Args: append([]string{"--listen", "127.0.0.1:0"}, args...), LookupEnv: lookup, Stdout: r.logs, Stderr: io.Discard, Configure: configure}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.m.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	select {
	case <-r.m.Ready():
	case err := <-r.done:
		r.done <- err
		t.Fatalf("Run: %v\n%s", err, r.logs)
	case <-time.After(10 * time.Second):
		t.Fatalf("not listening after 10s\n%s", r.logs)
	}
	r.url = "http://" + r.m.Addr()
	return r
}

// metric returns the value of one series of the running service's /metrics, 0 when
// it is absent; series is the name with its labels as the text format writes them.
func metric(t *testing.T, r *running, series string) float64 {
	t.Helper()
	a := call(t, "GET", r.url+"/metrics", "", "")
	for line := range strings.SplitSeq(a.raw, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			_, _ = fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

// TestEntraRenewals runs lockhub with --redis-auth entra on a redis-server and on
// the 6-node cluster whose only way in is the ACL user of the current token, while
// the identity provider issues a new token about every second and removes the old
// one: across ten renewals every claim is acquired (none fails open), every change
// reaches the watcher (the feed is never lost), and connections made after the last
// renewal get in with the newest token.
func TestEntraRenewals(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		srv := redistest.StartServer(t)
		entraRenewals(t, []string{srv.Addr()}, []string{"--redis-url", "redis://" + srv.Addr()}, false)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		entraRenewals(t, cl.Addrs(), []string{"--redis-url", "redis://" + cl.MasterAddrs()[0], "--redis-cluster"}, false)
	})
	// As Azure Managed Redis does: a connection still on an expired token is closed.
	// Every connection, the feed's included, must have been re-authenticated.
	t.Run("standalone, expired connections closed", func(t *testing.T) {
		srv := redistest.StartServer(t)
		entraRenewals(t, []string{srv.Addr()}, []string{"--redis-url", "redis://" + srv.Addr()}, true)
	})
	t.Run("cluster, expired connections closed", func(t *testing.T) {
		cl := redistest.StartCluster(t)
		entraRenewals(t, cl.Addrs(), []string{"--redis-url", "redis://" + cl.MasterAddrs()[0], "--redis-cluster"}, true)
	})
}

func entraRenewals(t *testing.T, addrs, args []string, expire bool) {
	idp := &testIdentity{oid: "5f0c-lockhub-mi", nodes: aclOnly(t, addrs), expire: expire}
	r := startConfigured(t, append(args, "--dev", "--redis-auth", "entra"), env(), func(c *Config) { c.RedisIdentity = idp })
	ada, bob := devToken(t, r.url, "u-ada"), devToken(t, r.url, "u-bob")
	watcher := dialAuth(t, "ws"+strings.TrimPrefix(r.url, "http")+"/ws", ada)
	if _, err := watcher.Watch(t.Context(), "ApprovalRequest"); err != nil {
		t.Fatal(err)
	}
	holder := dialAuth(t, "ws"+strings.TrimPrefix(r.url, "http")+"/ws", bob)

	const renewals = 10
	first := len(idp.tokens())
	began := time.Now()
	rounds, slow := 0, 0.0
	skipped := map[string]bool{} // entities of rounds skipped for a timeout
	// A round every 250 ms, each two claims and two releases: within the fair share's
	// bursts, and a few rounds to each token.
	pace := time.NewTicker(250 * time.Millisecond)
	defer pace.Stop()
	for len(idp.tokens()) < first+renewals+1 {
		<-pace.C
		if time.Since(began) > 60*time.Second {
			t.Fatalf("%d tokens in %s: the renewals stopped\n%s", len(idp.tokens())-first, time.Since(began), r.logs)
		}
		rounds++
		uid := fmt.Sprintf("r-%d", rounds)
		// One claim over HTTP and one over the socket, each announced to the watcher,
		// then their releases. An operation that times out on a loaded machine fails
		// open (reason timeout): its round is skipped and counted, and must stay rare;
		// any other fail-open fails the test below.
		token := len(idp.tokens())
		ok := func(what string, outcome any, err error, want protocol.Outcome) bool {
			t.Helper()
			if err == nil && fmt.Sprint(outcome) == string(want) {
				return true
			}
			if err == nil && fmt.Sprint(outcome) == string(protocol.OutcomeUnknown) && failOpens(t, r, "timeout") > slow {
				slow = failOpens(t, r, "timeout")
				skipped[uid], skipped[uid+"-ws"] = true, true
				t.Logf("round %d (token %d): %s timed out on this loaded machine; round skipped", rounds, token, what)
				return false
			}
			t.Fatalf("round %d (token %d): %s answered %v %v\n%s", rounds, token, what, outcome, err, r.logs)
			return false
		}
		expect := func(op protocol.Op, want string) {
			t.Helper()
			for {
				select {
				case ev := <-watcher.Events():
					if ev.Op == op && ev.Lock.EntityUID == want {
						return
					}
					if !skipped[ev.Lock.EntityUID] {
						t.Fatalf("round %d: event %s %s, want %s %s", rounds, ev.Op, ev.Lock.EntityUID, op, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("round %d (token %d): no %s for %s: the feed dropped it\n%s", rounds, token, op, want, r.logs)
				}
			}
		}
		a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/"+uid, ada, "")
		if !ok("HTTP claim", a.body["outcome"], nil, protocol.OutcomeAcquired) {
			continue
		}
		res, err := holder.Claim(t.Context(), "ApprovalRequest", uid+"-ws")
		if !ok("socket claim", res.Outcome, err, protocol.OutcomeAcquired) {
			continue
		}
		expect(protocol.OpAcquired, uid)
		expect(protocol.OpAcquired, uid+"-ws")
		a = call(t, "DELETE", r.url+"/api/locks/ApprovalRequest/"+uid, ada, "")
		if !ok("HTTP release", a.body["outcome"], nil, protocol.OutcomeReleased) {
			continue
		}
		res, err = holder.Release(t.Context(), "ApprovalRequest", uid+"-ws")
		if !ok("socket release", res.Outcome, err, protocol.OutcomeReleased) {
			continue
		}
		expect(protocol.OpReleased, uid)
		expect(protocol.OpReleased, uid+"-ws")
	}
	if other := failOpens(t, r, "") - failOpens(t, r, "timeout"); other != 0 || slow > 2 {
		t.Fatalf("%v fail-opens other than timeouts, %v timeouts in %d rounds\n%s", other, slow, rounds, r.logs)
	}
	tokens := idp.tokens()
	auths := reauths(t, idp.nodes)
	t.Logf("%d renewals in %s over %d rounds of two claims and two events; %d re-authentications of open connections", len(tokens)-first, time.Since(began).Round(time.Millisecond), rounds, auths)
	if auths < renewals {
		t.Errorf("%d AUTH commands over %d renewals: open connections were not re-authenticated", auths, renewals)
	}

	// The feed was never lost, nothing failed open.
	for _, s := range []string{"lockhub_hub_resyncs_total", `lockhub_store_fail_open_total{op="subscribe",reason="other"}`} {
		if v := metric(t, r, s); v != 0 {
			t.Errorf("%s = %v\n%s", s, v, r.logs)
		}
	}
	if strings.Contains(r.logs.String(), "fail") && strings.Contains(r.logs.String(), `"level":"WARN"`) {
		t.Errorf("a warning during the renewals:\n%s", r.logs)
	}
	// Old tokens no longer open a connection, and every connection lockhub holds is
	// the token user's.
	for _, n := range idp.nodes {
		addr := n.Options().Addr
		user0 := idp.oid
		if expire {
			user0 = idp.userOf(0)
		}
		old := redis.NewClient(&redis.Options{Addr: addr, Username: user0, Password: tokens[0], MaxRetries: -1})
		if err := old.Ping(t.Context()).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("the first token still opens %s: %v", addr, err)
		}
		_ = old.Close()
		list, err := n.ClientList(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(strings.TrimSpace(list), "\n") {
			replication := strings.Contains(line, " flags=S ") || strings.Contains(line, " flags=M ")
			if !replication && !strings.Contains(line, "user="+idp.oid) && !strings.Contains(line, "user=admin") {
				t.Errorf("a connection to %s not of the token user: %s", addr, line)
			}
		}
		// Drop lockhub's command connections (not its feed): the next claims dial
		// again, with the newest token.
		users := []string{idp.oid}
		if expire {
			users = []string{idp.userOf(len(tokens) - 1), idp.userOf(len(tokens) - 2)}
		}
		for _, u := range users {
			_ = n.Do(t.Context(), "CLIENT", "KILL", "USER", u, "SKIPME", "yes", "TYPE", "normal").Err() // none may be left of u
		}
	}
	redistest.Eventually(t, "a claim on new connections", func() bool {
		a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/after-kill", ada, "")
		return a.status == 200 && a.body["outcome"] == "acquired"
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestEntraProviderFails starts lockhub while the identity provider fails: it starts
// all the same, fails open (claims answer unknown, /readyz 503) and warns; once the
// provider answers, claims succeed and the renewals run; when it fails again, it
// warns and counts while the connections keep working on the token they have.
func TestEntraProviderFails(t *testing.T) {
	srv := redistest.StartServer(t)
	// Tokens of 8 s: a claim made once a renewal has failed comes well before the
	// token in hand expires.
	idp := &testIdentity{oid: "5f0c-lockhub-mi", nodes: aclOnly(t, []string{srv.Addr()}), life: 8 * time.Second}
	idp.fail.Store(true)
	r := startConfigured(t, []string{"--dev", "--redis-url", srv.URL(), "--redis-auth", "entra"}, env(), func(c *Config) { c.RedisIdentity = idp })
	ada := devToken(t, r.url, "u-ada")
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-1", ada, ""); a.status != 200 || a.body["outcome"] != "unknown" {
		t.Fatalf("claim without a token: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", r.url+"/readyz", "", ""); a.status != 503 {
		t.Fatalf("readyz without a token: %d %s", a.status, a.raw)
	}
	if !strings.Contains(r.logs.String(), "Redis token request to Entra ID failed") || !strings.Contains(r.logs.String(), errIdentityDown.Error()) {
		t.Fatalf("no warning naming the failed token request:\n%s", r.logs)
	}
	if v := metric(t, r, `lockhub_redis_token_requests_total{result="error"}`); v < 1 {
		t.Fatalf("failed token requests counted %v", v)
	}

	idp.fail.Store(false)
	redistest.Eventually(t, "a claim once the provider answers", func() bool {
		a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-2", ada, "")
		return a.status == 200 && a.body["outcome"] == "acquired"
	})
	// The renewals run, though the manager's first start failed.
	n := len(idp.tokens())
	redistest.Within(t, 20*time.Second, "two renewals after the provider came back", func() error {
		if got := len(idp.tokens()); got < n+2 {
			return fmt.Errorf("%d tokens since", got-n)
		}
		return nil
	})

	idp.fail.Store(true)
	errs := metric(t, r, `lockhub_redis_token_requests_total{result="error"}`)
	redistest.Within(t, 10*time.Second, "a failed renewal counted", func() error {
		if v := metric(t, r, `lockhub_redis_token_requests_total{result="error"}`); v <= errs {
			return fmt.Errorf("errors %v", v)
		}
		return nil
	})
	// The open connections keep the token they have: locking goes on.
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-3", ada, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("claim while renewals fail: %d %s\n%s", a.status, a.raw, r.logs)
	}
	// And the renewals go on once it answers again, re-authenticating the open
	// connections: nothing gave up meanwhile.
	n, auths := len(idp.tokens()), reauths(t, idp.nodes)
	idp.fail.Store(false)
	redistest.Within(t, 20*time.Second, "two renewals after the second outage", func() error {
		if got := len(idp.tokens()); got < n+2 {
			return fmt.Errorf("%d tokens since", got-n)
		}
		return nil
	})
	if got := reauths(t, idp.nodes); got <= auths {
		t.Fatalf("no open connection re-authenticated after the second outage (%d AUTH before, %d after)", auths, got)
	}
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-4", ada, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("claim after the second outage: %d %s", a.status, a.raw)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
