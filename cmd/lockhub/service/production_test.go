package service

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/hub/auth/authtest"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestDevelopmentIsChosen: development mode is never fallen into (PROTOCOL.md §6 v2).
// A production Redis without a JWKS (a secret that did not arrive) is refused with exit
// status 2, naming --jwks-url and --dev; so are --dev with a JWKS and a JWKS over plain
// http to another host.
func TestDevelopmentIsChosen(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"redis without jwks", []string{"--redis-url", "redis://127.0.0.1:1"}, nil, []string{"--jwks-url", "--dev"}},
		{"the jwks secret missing", []string{"--redis-url", "redis://127.0.0.1:1"}, []string{"LOCKHUB_JWKS_URL", ""}, []string{"--jwks-url", "--dev"}},
		{"redis from the environment", nil, []string{"LOCKHUB_REDIS_URL", "redis://127.0.0.1:1"}, []string{"--jwks-url", "--dev"}},
		{"dev with jwks", []string{"--dev", "--jwks-url", "https://login.example.com/keys", "--issuer", "i", "--audience", "a"}, nil, []string{"--dev", "--jwks-url"}},
		{"jwks over http", []string{"--redis-url", "redis://127.0.0.1:1", "--jwks-url", "http://login.example.com/keys", "--issuer", "i", "--audience", "a"}, nil, []string{"--jwks-url", "https"}},
		// Version 3: production needs its Redis, and development mode that was not
		// chosen serves this machine only.
		{"jwks without redis", []string{"--jwks-url", "https://login.example.com/keys", "--issuer", "i", "--audience", "a"}, nil, []string{"--redis-url"}},
		{"jwks with the redis secret missing", []string{"--jwks-url", "https://login.example.com/keys", "--issuer", "i", "--audience", "a"}, []string{"LOCKHUB_REDIS_URL", ""}, []string{"--redis-url"}},
		{"jwks with an empty redis flag", []string{"--redis-url=", "--jwks-url", "https://login.example.com/keys", "--issuer", "i", "--audience", "a"}, nil, []string{"--redis-url"}},
		{"undeclared development on every interface", []string{"--listen", ":0"}, nil, []string{"--listen", "--dev"}},
		{"demo rows without the demo", []string{"--jwks-url", "https://login.example.com/keys", "--issuer", "i", "--audience", "a", "--demo-redis-url", "redis://127.0.0.1:1"}, nil, []string{"--demo-redis-url", "--demo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Main{Args: append([]string{"--listen", "127.0.0.1:0"}, tc.args...), LookupEnv: env(tc.env...), Stdout: io.Discard, Stderr: io.Discard}
			err := m.Run(t.Context())
			if code := ExitCode(err); code != 2 {
				t.Fatalf("Run = %v, exit status %d; want 2", err, code)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			select {
			case <-m.Ready():
				t.Fatal("listening despite the refusal")
			default:
			}
		})
	}
}

// TestListenDefault: anywhere in production, this machine only in development mode;
// an explicit --listen or LOCKHUB_LISTEN wins.
func TestListenDefault(t *testing.T) {
	prod := []string{"--redis-url", "redis://r:6379", "--jwks-url", "https://login.example.com/keys", "--issuer", "i", "--audience", "a"}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"development", nil, nil, "127.0.0.1:8080"},
		{"development on a real Redis", []string{"--dev", "--redis-url", "redis://r:6379"}, nil, "127.0.0.1:8080"},
		{"production", prod, nil, ":8080"},
		{"explicit", []string{"--listen", "0.0.0.0:9000"}, nil, "0.0.0.0:9000"},
		{"from the environment", nil, []string{"LOCKHUB_LISTEN", ":9001"}, ":9001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.args, env(tc.env...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.Listen != tc.want {
				t.Fatalf("listen = %q, want %q", c.Listen, tc.want)
			}
		})
	}
}

// TestProductionMode runs lockhub as an operator would: a real redis-server and a
// JWKS. The lock API works; /dev/token, the demo's page and routes answer 404, and no
// demo: key is ever written. With --demo the demo is back.
func TestProductionMode(t *testing.T) {
	srv := redistest.StartServer(t)
	idp := authtest.NewIDP(t)
	token := idp.Token(t, map[string]any{"tid": "acme", "oid": "u-ada", "name": "Ada Lovelace"})
	prod := []string{"--redis-url", srv.URL(), "--jwks-url", idp.URL, "--issuer", authtest.Issuer, "--audience", authtest.Audience}

	r := start(t, prod, env())
	for _, q := range []struct{ method, path, tok string }{
		{"POST", "/dev/token", ""},
		{"GET", "/", ""},
		{"GET", "/demo/app.js", ""},
		{"GET", "/api/approval-requests", token},
		{"GET", "/api/approval-requests/r-1001", token},
		{"PUT", "/api/entities/ApprovalRequest/r-1001", token},
		{"POST", "/api/approval-requests/r-1001/approve", token},
	} {
		if a := call(t, q.method, r.url+q.path, q.tok, `{"title":"x"}`); a.status != 404 {
			t.Errorf("%s %s in production: %d %s, want 404", q.method, q.path, a.status, a.raw)
		}
	}
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-1001", token, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("claim in production: %d %s", a.status, a.raw)
	}
	rdb := srv.Client(t)
	if keys, err := rdb.Keys(t.Context(), "demo*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("demo keys in production: %v, %v", keys, err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	withDemo := start(t, append(prod, "--demo"), env())
	if a := call(t, "GET", withDemo.url+"/api/approval-requests/r-1001", token, ""); a.status != 200 {
		t.Fatalf("a row with --demo: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", withDemo.url+"/", "", ""); a.status != 200 {
		t.Fatalf("the page with --demo: %d", a.status)
	}
	if a := call(t, "POST", withDemo.url+"/dev/token", "", `{"tenant":"acme","oid":"u-ada"}`); a.status != 404 {
		t.Fatalf("/dev/token with --demo but a JWKS: %d", a.status)
	}
}

// TestMetricsListen: with --metrics-listen, /metrics is served there and only there.
func TestMetricsListen(t *testing.T) {
	r := start(t, []string{"--metrics-listen", "127.0.0.1:0"}, env())
	if a := call(t, "GET", r.url+"/metrics", "", ""); a.status != 404 {
		t.Fatalf("/metrics on --listen: %d", a.status)
	}
	a := call(t, "GET", "http://"+r.m.MetricsAddr()+"/metrics", "", "")
	if a.status != 200 || !strings.Contains(a.raw, "lockhub_hub_sockets") {
		t.Fatalf("/metrics on --metrics-listen: %d %.200s", a.status, a.raw)
	}
	// Every answer of that address is hardened too, its 404 included (PROTOCOL.md §5).
	for _, path := range []string{"/metrics", "/other"} {
		res, err := http.Get("http://" + r.m.MetricsAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s on --metrics-listen: %d without nosniff or the CSP: %v", path, res.StatusCode, res.Header)
		}
	}
}

// TestConnectionLimit: past --max-connections the handshake answers 503 with
// Retry-After while the open socket keeps working, and /metrics shows the limit hit.
func TestConnectionLimit(t *testing.T) {
	r := start(t, []string{"--max-connections", "1"}, env())
	ws := "ws" + strings.TrimPrefix(r.url, "http") + "/ws"
	c, err := protocol.Dial(t.Context(), ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Auth(t.Context(), devToken(t, r.url, "u-ada")); err != nil {
		t.Fatal(err)
	}
	_, resp, err := websocket.Dial(t.Context(), ws, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second socket: %v, %+v; want 503 with Retry-After", err, resp)
	}
	if res, err := c.Claim(t.Context(), "ApprovalRequest", "r-1001"); err != nil || res.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("the open socket after the refusal: %+v, %v", res, err)
	}
	if a := call(t, "GET", r.url+"/metrics", "", ""); !strings.Contains(a.raw, `lockhub_hub_limit_hits_total{limit="max_connections"} 1`) {
		t.Fatalf("/metrics lacks the limit hit:\n%s", a.raw)
	}
}

// TestSilentPeerIsCut: a socket that stops answering the hub's Pings (it stops
// reading, as a half-open connection does) is cut about 10 s after a Ping, and its lock
// follows the release grace.
func TestSilentPeerIsCut(t *testing.T) {
	r := start(t, []string{"--ping-every", "100ms", "--release-grace", "100ms"}, env())
	ws := "ws" + strings.TrimPrefix(r.url, "http") + "/ws"
	raw, _, err := websocket.Dial(t.Context(), ws, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.CloseNow()
	roundTrip := func(frame string) {
		if err := raw.Write(t.Context(), websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := raw.Read(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	roundTrip(`{"type":"auth","token":"` + devToken(t, r.url, "u-ada") + `"}`)
	roundTrip(`{"id":"1","type":"claim","entityType":"ApprovalRequest","entityUid":"r-1001"}`)
	// From here on nothing reads the socket: the Pings go unanswered.
	grace := devToken(t, r.url, "u-grace")
	redistest.Within(t, 30*time.Second, "the silent socket's lock released", func() error {
		a := call(t, "GET", r.url+"/api/locks/ApprovalRequest/r-1001", grace, "")
		if a.status != 404 {
			return errors.New("still held")
		}
		return nil
	})
	if a := call(t, "GET", r.url+"/metrics", "", ""); !strings.Contains(a.raw, `lockhub_hub_limit_hits_total{limit="pong_timeout"} 1`) {
		t.Fatalf("/metrics lacks the cut socket:\n%s", a.raw)
	}
}

// TestHeaderTimeout: a client that sends half its headers and stops is cut once the
// 5 s for headers have passed.
func TestHeaderTimeout(t *testing.T) {
	r := start(t, nil, env())
	conn, err := net.Dial("tcp", r.m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang catcher only
	line, err := bufio.NewReader(conn).ReadString('\n')
	if errors.Is(err, context.DeadlineExceeded) || (err != nil && !errors.Is(err, io.EOF) && !isReset(err)) {
		t.Fatalf("after half the headers: %q, %v; want the connection cut", line, err)
	}
	if line != "" && !strings.Contains(line, "408") {
		t.Fatalf("after half the headers the server answered %q", line)
	}
	if waited := time.Since(start); waited < readHeaderTimeout-time.Second {
		t.Fatalf("cut after %s, before the %s headers may take", waited, readHeaderTimeout)
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne)
}

// TestBinaryRefusesProduction: the built binary exits with status 2 and says what to
// set when pointed at a Redis without a JWKS.
func TestBinaryRefusesProduction(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), buildBinary(t), "--redis-url", "redis://127.0.0.1:1")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2\n%s", err, out)
	}
	if !strings.Contains(string(out), "--jwks-url") || !strings.Contains(string(out), "--dev") {
		t.Fatalf("the refusal does not say what to set:\n%s", out)
	}
}

// TestHungJWKS: while the identity provider hangs, a token whose kid is known is
// checked at once, over HTTP and on the socket; a token of a new kid is refused after
// the short wait, and the known one still works.
func TestHungJWKS(t *testing.T) {
	idp := authtest.NewIDP(t)
	r := start(t, []string{"--redis-url", redistest.StartServer(t).URL(), "--jwks-url", idp.URL, "--issuer", authtest.Issuer, "--audience", authtest.Audience}, env())
	claims := map[string]any{"tid": "acme", "oid": "u-ada", "name": "Ada Lovelace"}
	known := idp.Token(t, claims)
	idp.AddKey(t, "k2") // published, but the hub has not fetched it
	unknown := idp.TokenOf(t, "k2", claims)

	arrived, release := idp.Hang()
	defer release()
	if a := call(t, "GET", r.url+"/api/me/locks", unknown, ""); a.status != 401 {
		t.Fatalf("a token of a kid not fetched yet, the JWKS hung: %d %s", a.status, a.raw)
	}
	<-arrived // the unknown kid asked for a refetch, which hangs
	if a := call(t, "GET", r.url+"/api/me/locks", known, ""); a.status != 200 {
		t.Fatalf("a known kid while the JWKS hangs: %d %s", a.status, a.raw)
	}
	ws := "ws" + strings.TrimPrefix(r.url, "http") + "/ws"
	c, err := protocol.Dial(t.Context(), ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Auth(t.Context(), known); err != nil {
		t.Fatalf("socket auth with a known kid while the JWKS hangs: %v", err)
	}
}
