package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockhub/lockhub/cmd/internal/flagenv"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// env returns a LookupEnv over vars only, so the tests never see the machine's.
func env(vars ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(vars); i += 2 {
		m[vars[i]] = vars[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// running is a Main serving in this process.
type running struct {
	m      *Main
	url    string
	logs   *redistest.LogBuffer
	cancel context.CancelFunc
	done   chan error
}

// start runs Main with args and environment, and waits until it listens.
func start(t *testing.T, args []string, lookup func(string) (string, bool)) *running {
	t.Helper()
	r := &running{logs: &redistest.LogBuffer{}, done: make(chan error, 1)}
	r.m = &Main{Args: append([]string{"--listen", "127.0.0.1:0"}, args...), LookupEnv: lookup, Stdout: r.logs, Stderr: io.Discard}
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

// stop cancels Run and waits for it; it may be called more than once.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Run did not return 10s after its ctx was done\n%s", r.logs)
		return nil
	}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func call(t *testing.T, method, url, token, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body) // not every answer is a JSON object
	return a
}

// testClient is the tests' HTTP client. Its idle connections close after 30 s, before
// the hub's 60 s (PROTOCOL.md §5): with the default 90 s a request could go out on a
// connection the hub was closing, and a POST is not retried (seen as "EOF" once).
var testClient = &http.Client{Transport: func() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.IdleConnTimeout = 30 * time.Second
	return tr
}()}

func devToken(t *testing.T, base, oid string, roles ...string) string {
	t.Helper()
	return devTokenOf(t, base, "acme", oid, roles...)
}

// devTokenOf is a development token of tenant's person oid.
func devTokenOf(t *testing.T, base, tenant, oid string, roles ...string) string {
	t.Helper()
	if roles == nil {
		roles = []string{}
	}
	b, _ := json.Marshal(map[string]any{"tenant": tenant, "oid": oid, "name": "User " + oid, "roles": roles})
	a := call(t, "POST", base+"/dev/token", "", string(b))
	tok, _ := a.body["token"].(string)
	if a.status != 200 || tok == "" {
		t.Fatalf("dev token: %d %s", a.status, a.raw)
	}
	return tok
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		want string // in the error
	}{
		{"bad duration", []string{"--lease", "5 minutes"}, nil, "--lease"},
		{"bad duration from env", nil, []string{"LOCKHUB_RENEW_EVERY", "often"}, "LOCKHUB_RENEW_EVERY"},
		{"negative grace", []string{"--release-grace=-1s"}, nil, "--release-grace"},
		{"presence ttl over the contract's bound", []string{"--presence-ttl", "1m"}, nil, "--presence-ttl"},
		{"instance timeout over the contract's bound", []string{"--instance-timeout", "23s"}, nil, "--instance-timeout"},
		{"renew not shorter than lease", []string{"--lease", "1m", "--renew-every", "2m"}, nil, "--renew-every"},
		{"jwks without issuer", []string{"--redis-url", "redis://127.0.0.1:1", "--jwks-url", "https://login.example.com/keys", "--audience", "api://lockhub"}, nil, "--issuer"},
		{"jwks without audience", nil, []string{"LOCKHUB_REDIS_URL", "redis://127.0.0.1:1", "LOCKHUB_JWKS_URL", "https://login.example.com/keys", "LOCKHUB_ISSUER", "https://login.example.com/"}, "--audience"},
		{"jwks not a URL", []string{"--redis-url", "redis://127.0.0.1:1", "--jwks-url", "login.example.com", "--issuer", "i", "--audience", "a"}, nil, "--jwks-url"},
		{"undeclared development on a public address", nil, []string{"LOCKHUB_LISTEN", "0.0.0.0:0"}, "LOCKHUB_LISTEN"},
		{"claim names collide", []string{"--claim-roles", "name"}, nil, "--claim-roles"},
		{"claim names collide from env", nil, []string{"LOCKHUB_CLAIM_OID", "tid"}, "LOCKHUB_CLAIM_OID"},
		{"per-address cap not below the instance's", []string{"--max-pending-auth", "50"}, nil, "--max-pending-auth-per-ip"},
		{"negative sockets per person", []string{"--max-sockets-per-person=-1"}, nil, "--max-sockets-per-person"},
		{"bad trusted proxy", []string{"--trusted-proxies", "10.0.0.0/8, proxy.internal"}, nil, "--trusted-proxies"},
		{"issuer without jwks", []string{"--issuer", "https://login.example.com/"}, nil, "--issuer"},
		{"unparsable redis URL", []string{"--dev", "--redis-url", "http://localhost:6379"}, nil, "--redis-url"},
		{"redis URL from env", nil, []string{"LOCKHUB_DEV", "true", "LOCKHUB_REDIS_URL", "redis://h:notaport"}, "LOCKHUB_REDIS_URL"},
		{"unparsable demo redis URL", []string{"--demo-redis-url", "mysql://x"}, nil, "--demo-redis-url"},
		{"cluster without URL", []string{"--redis-cluster"}, nil, "--redis-cluster"},
		{"cluster not a bool", nil, []string{"LOCKHUB_REDIS_CLUSTER", "maybe"}, "LOCKHUB_REDIS_CLUSTER"},
		{"demo cluster without its URL", []string{"--demo-redis-cluster"}, nil, "--demo-redis-cluster"},
		{"demo cluster not a bool", nil, []string{"LOCKHUB_DEMO_REDIS_CLUSTER", "yes please"}, "LOCKHUB_DEMO_REDIS_CLUSTER"},
		{"bad origin", []string{"--allowed-origins", "https://tms.example.com, ftp://x"}, nil, "--allowed-origins"},
		{"origin with path", []string{"--allowed-origins", "https://tms.example.com/app"}, nil, "--allowed-origins"},
		{"any origin", []string{"--allowed-origins", "https://*"}, nil, "--allowed-origins"},
		{"bad lockable", []string{"--lockable", "ApprovalRequest,Bad{Type}"}, nil, "--lockable"},
		{"no lockable", []string{"--lockable", " , "}, nil, "--lockable"},
		{"bad listen", []string{"--listen", "8080"}, nil, "--listen"},
		{"empty takeover role", []string{"--takeover-role="}, nil, "--takeover-role"},
		{"empty admin role", []string{"--admin-role", " "}, nil, "--admin-role"},
		{"bad log level", []string{"--log-level", "loud"}, nil, "--log-level"},
		{"entra without a redis URL", []string{"--redis-auth", "entra"}, nil, "--redis-auth"},
		{"unknown redis auth", nil, []string{"LOCKHUB_REDIS_AUTH", "token"}, "LOCKHUB_REDIS_AUTH"},
		{"entra with a password in the URL", []string{"--dev", "--redis-auth", "entra", "--redis-url", "rediss://:pw@127.0.0.1:1"}, nil, "--redis-url"},
		{"entra with a password in the demo URL", []string{"--dev", "--redis-auth", "entra", "--redis-url", "rediss://127.0.0.1:1", "--demo-redis-url", "redis://u:pw@127.0.0.1:2"}, nil, "--demo-redis-url"},
		{"entra service principal without a client id", []string{"--dev", "--redis-auth", "entra", "--redis-url", "rediss://127.0.0.1:1"}, []string{"AZURE_TENANT_ID", "t-1", "AZURE_CLIENT_SECRET", "s"}, "AZURE_CLIENT_ID"},
		{"entra workload identity without a tenant", []string{"--dev", "--redis-auth", "entra", "--redis-url", "rediss://127.0.0.1:1"}, []string{"AZURE_FEDERATED_TOKEN_FILE", "/var/run/secrets/azure/tokens/azure-identity-token", "AZURE_CLIENT_ID", "c-1"}, "AZURE_TENANT_ID"},
		{"entra tenant without a secret", []string{"--dev", "--redis-auth", "entra", "--redis-url", "rediss://127.0.0.1:1"}, []string{"AZURE_TENANT_ID", "t-1", "AZURE_CLIENT_ID", "c-1"}, "AZURE_CLIENT_SECRET"},
		{"entra certificate that is not there", []string{"--dev", "--redis-auth", "entra", "--redis-url", "rediss://127.0.0.1:1"}, []string{"AZURE_TENANT_ID", "t-1", "AZURE_CLIENT_ID", "c-1", "AZURE_CLIENT_CERTIFICATE_PATH", "/nonexistent/sp.pem"}, "AZURE_CLIENT_CERTIFICATE_PATH"},
		{"CA file without TLS", []string{"--dev", "--redis-url", "redis://127.0.0.1:1", "--redis-ca-file", "main_test.go"}, nil, "--redis-ca-file"},
		{"CA file not there", []string{"--dev", "--redis-url", "rediss://127.0.0.1:1", "--redis-ca-file", "/nonexistent/ca.pem"}, nil, "--redis-ca-file"},
		{"CA file not PEM", nil, []string{"LOCKHUB_DEV", "true", "LOCKHUB_REDIS_URL", "rediss://127.0.0.1:1", "LOCKHUB_REDIS_CA_FILE", "main_test.go"}, "LOCKHUB_REDIS_CA_FILE"},
		{"negative drain delay", []string{"--drain-delay=-1s"}, nil, "--drain-delay"},
		{"negative memory trim burst", nil, []string{"LOCKHUB_MEMORY_TRIM_BURST", "-5"}, "LOCKHUB_MEMORY_TRIM_BURST"},
		{"unknown flag", []string{"--redis", "x"}, nil, "redis"},
		{"stray argument", []string{"serve"}, nil, "serve"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &Main{Args: c.args, LookupEnv: env(c.env...), Stdout: io.Discard, Stderr: io.Discard}
			err := m.Run(t.Context())
			if err == nil {
				t.Fatal("Run accepted it")
			}
			if strings.Contains(err.Error(), ":pw@") || strings.Contains(err.Error(), "\"pw\"") {
				t.Fatalf("error %q shows a password", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name %s", err, c.want)
			}
			var ce *flagenv.Error
			if !errors.As(err, &ce) && !errors.Is(err, errUsage) {
				t.Fatalf("error %q is neither a config nor a usage error: the exit status would be 1, not 2", err)
			}
			select {
			case <-m.Ready():
				t.Fatal("listening despite the bad setting")
			default:
			}
		})
	}
}

func TestConfigErrorsListEveryBadSetting(t *testing.T) {
	_, err := parseConfig([]string{"--lease", "x", "--renew-every", "y"}, env(), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--lease") || !strings.Contains(err.Error(), "--renew-every") {
		t.Fatalf("error %v does not name both settings", err)
	}
}

func TestConfigErrorHidesPassword(t *testing.T) {
	m := &Main{Args: []string{"--dev", "--redis-url", "redis://user:s3cr3t@host:port"}, LookupEnv: env(), Stdout: io.Discard, Stderr: io.Discard}
	err := m.Run(t.Context())
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "--redis-url") {
		t.Fatalf("error %v", err)
	}
}

func TestConfigFlagWinsOverEnvironment(t *testing.T) {
	c, err := parseConfig([]string{"--dev", "--lease", "7m", "--redis-cluster", "--redis-url", "redis://a:7000"},
		env("LOCKHUB_LEASE", "9m", "LOCKHUB_RENEW_EVERY", "3m", "LOCKHUB_LOCKABLE", "Order, ApprovalRequest",
			"LOCKHUB_ALLOWED_ORIGINS", "https://tms.example.com , https://*.example.com", "LOCKHUB_TAKEOVER_ROLE", "", "LOCKHUB_ADMIN_ROLE", "Env.Admin"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Lease != 7*time.Minute || c.Hub.RenewEvery != 3*time.Minute || !c.RedisCluster || c.RedisURL != "redis://a:7000" {
		t.Fatalf("config %+v", c)
	}
	if strings.Join(c.Lockable, ",") != "Order,ApprovalRequest" || len(c.Hub.AllowedOrigins) != 2 {
		t.Fatalf("config %+v", c)
	}
	if c.Hub.Roles.Admin != "Env.Admin" {
		t.Fatalf("admin role %q, want the environment's", c.Hub.Roles.Admin)
	}
	if c.Hub.Roles.Takeover != "Locks.TakeOver" || c.Hub.ReleaseGrace != 10*time.Second || c.Listen != "127.0.0.1:8080" || !c.Development() { // the development default
		t.Fatalf("defaults: %+v", c) // an empty variable counts as unset
	}
}

func TestHelp(t *testing.T) {
	var usage bytes.Buffer
	m := &Main{Args: []string{"-h"}, LookupEnv: env(), Stdout: io.Discard, Stderr: &usage}
	if err := m.Run(t.Context()); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Run -h: %v", err)
	}
	// Every flag the binary has, and every setting of PROTOCOL.md §7 among them.
	var flags []string
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	new(Config).flags(fs)
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
	for _, name := range []string{"listen", "redis-url", "redis-cluster", "jwks-url", "issuer", "audience",
		"lockable", "lease", "renew-every", "release-grace", "demo-redis-url", "allowed-origins", "takeover-role", "admin-role"} {
		if !slices.Contains(flags, name) {
			t.Errorf("no flag --%s", name)
		}
	}
	for _, name := range flags {
		if !strings.Contains(usage.String(), "-"+name) || !strings.Contains(usage.String(), flagenv.EnvName(envPrefix, name)) {
			t.Fatalf("usage lacks %s / %s:\n%s", name, flagenv.EnvName(envPrefix, name), usage.String())
		}
	}
}

// TestRun starts the whole service in-process with an embedded Redis and development
// tokens, uses its HTTP API and its socket, and shuts it down: the socket is closed
// with 1001 and Run returns nil.
func TestRun(t *testing.T) {
	r := start(t, nil, env())
	if a := call(t, "GET", r.url+"/healthz", "", ""); a.status != 200 {
		t.Fatalf("healthz: %d", a.status)
	}
	if a := call(t, "GET", r.url+"/readyz", "", ""); a.status != 200 {
		t.Fatalf("readyz: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", r.url+"/", "", ""); a.status != 200 || !strings.Contains(strings.ToLower(a.raw), "<html") {
		t.Fatalf("/: %d", a.status)
	}
	ada := devToken(t, r.url, "u-ada")
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-1001", ada, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("claim: %d %s", a.status, a.raw)
	}
	if a := call(t, "POST", r.url+"/api/approval-requests/r-1002/approve", ada, ""); a.status != 200 {
		t.Fatalf("approve: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", r.url+"/metrics", "", ""); a.status != 200 || !strings.Contains(a.raw, "lockhub_store_operations_total") || !strings.Contains(a.raw, "go_goroutines") {
		t.Fatalf("metrics: %d", a.status)
	} else if !strings.Contains(a.raw, `lockhub_events_published_total{op="Acquired"} 1`) {
		t.Fatalf("the claim's Acquired is not counted as published:\n%s", a.raw)
	}

	// A socket, with a watch: shutdown closes it with 1001 going away.
	c := dialAuth(t, "ws"+strings.TrimPrefix(r.url, "http")+"/ws", ada)
	if _, err := c.Watch(t.Context(), "ApprovalRequest"); err != nil {
		t.Fatal(err)
	}
	// A change made over HTTP reaches the socket like any other.
	bob := devToken(t, r.url, "u-bob")
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-1003", bob, ""); a.status != 200 {
		t.Fatalf("claim: %d %s", a.status, a.raw)
	}
	select {
	case ev := <-c.Events():
		if ev.Op != protocol.OpAcquired || ev.Lock.EntityUID != "r-1003" || ev.Lock.HolderOID != "u-bob" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event for a claim made over HTTP")
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the socket is still open after shutdown")
	}
	if got := c.CloseStatus(); got != protocol.CloseGoingAway {
		t.Fatalf("closed with %d (%v), want 1001", got, c.Err())
	}

	logs := r.logs.String()
	for _, want := range []string{"embedded Redis", "DEVELOPMENT MODE", "open http://127.0.0.1:", "lockhub stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, ada) || strings.Contains(logs, ada[strings.LastIndex(ada, ".")+1:]) {
		t.Error("a token was logged")
	}
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("a log line that is not JSON (stdout is not a terminal): %s", line)
		}
	}
}

func dialAuth(t *testing.T, url, token string) *protocol.Client {
	t.Helper()
	c, err := protocol.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Auth(t.Context(), token); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRunOnRedis runs on a real Redis given by URL, with the demo rows in another, and
// says not ready when the lock Redis dies.
func TestRunOnRedis(t *testing.T) {
	lock, rows := redistest.StartServer(t), redistest.StartServer(t)
	r := start(t, []string{"--dev", "--redis-url", lock.URL()}, env("LOCKHUB_DEMO_REDIS_URL", rows.URL(), "LOCKHUB_LOCKABLE", "ApprovalRequest,Order"))
	ada := devToken(t, r.url, "u-ada")
	if a := call(t, "POST", r.url+"/api/locks/Order/o-1", ada, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("claim: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", r.url+"/api/approval-requests/r-1001", ada, ""); a.status != 200 {
		t.Fatalf("row: %d %s", a.status, a.raw)
	}
	if n := rows.Client(t).Exists(t.Context(), "demo:{acme}:ApprovalRequest:r-1001").Val(); n != 1 {
		t.Fatal("the row is not in the demo Redis")
	}
	if n := lock.Client(t).Exists(t.Context(), "demo:{acme}:ApprovalRequest:r-1001").Val(); n != 0 {
		t.Fatal("the row is in the lock Redis")
	}
	if n := lock.Client(t).Exists(t.Context(), "lock:{acme}:Order:o-1").Val(); n != 1 {
		t.Fatal("the lock is not in the lock Redis")
	}
	if strings.Contains(r.logs.String(), "embedded Redis") {
		t.Fatal("embedded Redis despite --redis-url")
	}

	lock.Kill(t)
	if a := call(t, "GET", r.url+"/readyz", "", ""); a.status != 503 {
		t.Fatalf("readyz with the lock Redis dead: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", r.url+"/healthz", "", ""); a.status != 200 {
		t.Fatalf("healthz: %d", a.status)
	}
	if a := call(t, "POST", r.url+"/api/locks/Order/o-2", ada, ""); a.status != 200 || a.body["outcome"] != "unknown" {
		t.Fatalf("claim with Redis dead: %d %s", a.status, a.raw)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestRunOnCluster runs the binary on a real Redis Cluster, its demo rows too, from a
// seed node that does not serve the tenant's slot; without --demo-redis-cluster that
// seed answers MOVED to the demo store, which says it is unavailable.
func TestRunOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	owner := cl.MasterForSlot(t, redistest.Slot("{acme}"))
	var seed string
	for _, a := range cl.MasterAddrs() {
		if a != owner {
			seed = "redis://" + a
			break
		}
	}
	r := start(t, []string{"--dev", "--redis-url", seed, "--redis-cluster", "--demo-redis-url", seed}, env("LOCKHUB_DEMO_REDIS_CLUSTER", "true"))
	ada := devToken(t, r.url, "u-ada")
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-1001", ada, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("claim on the cluster: %d %s", a.status, a.raw)
	}
	if a := call(t, "POST", r.url+"/api/approval-requests/r-1001/approve", ada, ""); a.status != 200 || a.body["status"] != "approved" {
		t.Fatalf("approve on the cluster: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", r.url+"/api/me/locks", ada, ""); a.status != 200 || len(a.body["locks"].([]any)) != 0 {
		t.Fatalf("approve left the lock: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", r.url+"/readyz", "", ""); a.status != 200 {
		t.Fatalf("readyz on the cluster: %d %s", a.status, a.raw)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	standalone := start(t, []string{"--dev", "--redis-url", seed, "--redis-cluster", "--demo-redis-url", seed}, env())
	if a := call(t, "GET", standalone.url+"/api/approval-requests/r-1001", devToken(t, standalone.url, "u-ada"), ""); a.status != 503 || a.body["code"] != "store_unavailable" {
		t.Fatalf("a cluster seed read as a standalone demo Redis: %d %s", a.status, a.raw)
	}
	if err := standalone.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestSIGTERM builds the binary, starts it, opens a socket, and sends SIGTERM: the
// socket is closed with 1001 and the process exits 0 within 10 s.
func TestSIGTERM(t *testing.T) {
	p := startBinary(t, buildBinary(t), []string{"--listen", "127.0.0.1:0"}, "LOCKHUB_RELEASE_GRACE=10s")
	cmd, exited, stderr, addr := p.cmd, p.exited, p.stderr, p.addr
	base := "http://" + addr
	ada := devToken(t, base, "u-ada")
	c := dialAuth(t, "ws://"+addr+"/ws", ada)
	if res, err := c.Claim(t.Context(), "ApprovalRequest", "r-1001"); err != nil || res.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("claim: %v %v", res.Outcome, err)
	}

	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
		if got := c.CloseStatus(); got != protocol.CloseGoingAway {
			t.Fatalf("socket closed with %d (%v), want 1001", got, c.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("socket still open 10s after SIGTERM")
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, stderr.String())
		}
	case <-time.After(10*time.Second - time.Since(sent)):
		t.Fatal("still running 10s after SIGTERM")
	}
	if d := time.Since(sent); d > 10*time.Second {
		t.Fatalf("took %s to exit", d)
	}
}

// buildBinary builds cmd/lockhub into the test's temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lockhub")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is the lockhub binary running as its own process.
type process struct {
	cmd    *exec.Cmd
	exited chan error // Wait's answer, once the process is gone
	stderr *bytes.Buffer
	addr   string // where it listens
}

// startBinary starts bin with args and the environment plus env ("NAME=value"), and
// waits until it says where it listens. The test's cleanup kills it.
func startBinary(t *testing.T, bin string, args []string, env ...string) *process {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, exited: make(chan error, 1), stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // a test that stopped reading must not block the process
			}
		}
		close(lines)
		p.exited <- cmd.Wait() // after the pipe is drained, as os/exec requires
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // a no-op once it exited
		p.exited <- <-p.exited
	})
	deadline := time.After(10 * time.Second)
	for p.addr == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("exited before listening: %s", p.stderr.String())
			}
			var rec struct {
				Listen string `json:"listen"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Listen != "" {
				p.addr = rec.Listen
			}
		case <-deadline:
			t.Fatal("not listening after 10s")
		}
	}
	return p
}
