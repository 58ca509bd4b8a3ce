package service

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestBinaryFairShareAndHardening runs two lockhub processes on one real redis-server,
// as an operator would behind a proxy on 127.0.0.1, and checks the rules of issue 25
// parts 3 and 6 that are about the binary: the per-person socket cap and HTTP rate
// (per instance: the other instance still serves the person), the per-address cap
// behind a trusted proxy, the body deadline of a route that reads no body, the Host
// check of development mode, the idle timeout, and the console's 503 while Redis is
// down.
func TestBinaryFairShareAndHardening(t *testing.T) {
	bin := buildBinary(t)
	srv := redistest.StartServer(t)
	args := []string{"--listen", "127.0.0.1:0", "--dev", "--redis-url", srv.URL(), "--trusted-proxies", "127.0.0.1/32",
		"--max-sockets-per-person", "2", "--max-pending-auth-per-ip", "2"}
	a, b := startBinary(t, bin, args), startBinary(t, bin, args)
	aURL, bURL := "http://"+a.addr, "http://"+b.addr
	wsURL := func(base string) string { return "ws" + strings.TrimPrefix(base, "http") + "/ws" }
	ctx := t.Context()

	t.Run("group", func(t *testing.T) {
		t.Run("sockets per person, per instance", func(t *testing.T) {
			t.Parallel()
			auth := func(base, oid string) (*protocol.Client, error) {
				c, err := protocol.Dial(ctx, wsURL(base), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				_, err = c.Auth(ctx, devToken(t, base, oid))
				return c, err
			}
			for range 2 {
				if _, err := auth(aURL, "u-sockets"); err != nil {
					t.Fatal(err)
				}
			}
			third, err := auth(aURL, "u-sockets")
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeTooManySockets {
				t.Fatalf("third socket: %v, want too_many_sockets", err)
			}
			<-third.Done()
			if got := third.CloseStatus(); got != protocol.CloseTooMany {
				t.Fatalf("third socket closed with %d, want 4429", got)
			}
			for range 2 { // the other instance counts its own
				if _, err := auth(bURL, "u-sockets"); err != nil {
					t.Fatalf("on the other instance: %v", err)
				}
			}
			if m := call(t, "GET", aURL+"/metrics", "", "").raw; !strings.Contains(m, `lockhub_hub_limit_hits_total{limit="max_sockets_per_person"} 1`+"\n") {
				t.Fatalf("/metrics lacks the refused socket:\n%s", grep(m, "limit_hits"))
			}
		})

		t.Run("sockets waiting per address behind a trusted proxy", func(t *testing.T) {
			t.Parallel()
			dial := func(xff string) (*websocket.Conn, *http.Response, error) {
				ws, resp, err := websocket.Dial(ctx, wsURL(aURL), &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol},
					HTTPHeader: http.Header{"X-Forwarded-For": {xff}}})
				if err == nil {
					t.Cleanup(func() { _ = ws.CloseNow() })
				}
				return ws, resp, err
			}
			for range 2 {
				if _, _, err := dial("203.0.113.5"); err != nil {
					t.Fatal(err)
				}
			}
			_, resp, err := dial("203.0.113.5")
			if err == nil || resp == nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("third waiting socket of one address: %v %+v, want 503 with Retry-After", err, resp)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Content-Security-Policy") == "" {
				t.Fatalf("the refused handshake lacks nosniff or the CSP: %v", resp.Header)
			}
			c, err := protocol.Dial(ctx, wsURL(aURL), &protocol.DialOptions{HTTPHeader: http.Header{"X-Forwarded-For": {"198.51.100.1"}}})
			if err != nil {
				t.Fatalf("another address: %v", err)
			}
			t.Cleanup(func() { _ = c.Close() })
			if _, err := c.Auth(ctx, devToken(t, aURL, "u-other-address")); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("HTTP requests per person, per instance", func(t *testing.T) {
			t.Parallel()
			tok := devToken(t, aURL, "u-http")
			var mu sync.Mutex
			limited, retryAfter := 0, ""
			var wg sync.WaitGroup
			for range 8 { // 8 × 30 requests at once: well past a burst of 100 at 50 a second
				wg.Go(func() {
					for range 30 {
						req, _ := http.NewRequestWithContext(ctx, "GET", aURL+"/api/me/locks", nil)
						req.Header.Set("Authorization", "Bearer "+tok)
						res, err := testClient.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, res.Body)
						_ = res.Body.Close()
						if res.StatusCode == 429 {
							mu.Lock()
							limited++
							retryAfter = res.Header.Get("Retry-After")
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			if s, err := strconv.Atoi(retryAfter); limited == 0 || err != nil || s < 1 {
				t.Fatalf("%d of 240 requests limited, Retry-After %q", limited, retryAfter)
			}
			if got := call(t, "GET", bURL+"/api/me/locks", devToken(t, bURL, "u-http"), ""); got.status != 200 {
				t.Fatalf("the other instance: %d %s", got.status, got.raw)
			}
			if m := call(t, "GET", aURL+"/metrics", "", "").raw; !strings.Contains(m, `lockhub_http_limit_hits_total{limit="requests_per_person"} `+strconv.Itoa(limited)+"\n") {
				t.Fatalf("/metrics does not count %d refusals:\n%s", limited, grep(m, "lockhub_http_limit"))
			}
		})

		t.Run("a declared body that never comes, on /healthz", func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", a.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang catcher only
			_, err = io.Copy(io.Discard, conn)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("still open after %s", time.Since(start).Round(time.Second))
			}
			if d := time.Since(start); d < 9*time.Second || d > 20*time.Second {
				t.Fatalf("closed after %s; the body may take 10 s", d)
			}
		})

		t.Run("an idle keep-alive connection is closed after 60 s", func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", a.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			idle := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(90 * time.Second)) // a hang catcher only
			_, err = io.Copy(io.Discard, br)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("an idle connection still open after %s", time.Since(idle).Round(time.Second))
			}
			if d := time.Since(idle); d < 55*time.Second || d > 75*time.Second {
				t.Fatalf("an idle connection closed after %s, want 60 s", d.Round(time.Second))
			}
		})

		t.Run("development mode answers loopback Hosts only", func(t *testing.T) {
			t.Parallel()
			_, port, _ := net.SplitHostPort(a.addr)
			for host, want := range map[string]int{"localhost:" + port: 200, "127.0.0.1:" + port: 200, "rebound.example:" + port: 403, "rebound.example": 403} {
				req, _ := http.NewRequestWithContext(ctx, "POST", aURL+"/dev/token", strings.NewReader(`{"tenant":"acme","oid":"u-ada"}`))
				req.Host = host
				res, err := testClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = res.Body.Close()
				if res.StatusCode != want || res.Header.Get("X-Content-Type-Options") != "nosniff" {
					t.Errorf("Host %s: %d (nosniff %q), want %d", host, res.StatusCode, res.Header.Get("X-Content-Type-Options"), want)
				}
			}
		})
	})

	// Last: it kills Redis. The console's list answers 503 store_unavailable, while
	// the lock API fails open.
	root := devToken(t, aURL, "u-root", "Locks.Admin")
	if got := call(t, "GET", aURL+"/api/admin/locks", root, ""); got.status != 200 {
		t.Fatalf("console's list with Redis up: %d %s", got.status, got.raw)
	}
	srv.Kill(t)
	if got := call(t, "GET", aURL+"/api/admin/locks", root, ""); got.status != 503 || got.body["code"] != "store_unavailable" {
		t.Fatalf("console's list with Redis down: %d %s", got.status, got.raw)
	}
	if got := call(t, "POST", aURL+"/api/locks/ApprovalRequest/r-1001", root, ""); got.status != 200 || got.body["outcome"] != "unknown" {
		t.Fatalf("claim with Redis down: %d %s", got.status, got.raw)
	}
}

// TestBinaryStartRefusals: the built binary refuses, with exit status 2 and the
// setting named, what issue 25 found it started with: production on an embedded
// Redis, development mode nobody chose on a public address, and claim names that
// collide.
func TestBinaryStartRefusals(t *testing.T) {
	bin := buildBinary(t)
	prod := []string{"--jwks-url", "https://login.example.com/keys", "--issuer", "i", "--audience", "a"}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"JWKS with an empty LOCKHUB_REDIS_URL", prod, []string{"LOCKHUB_REDIS_URL="}, "--redis-url"},
		{"neither URL on every interface", []string{"--listen", ":0"}, nil, "--listen"},
		{"neither URL on a public address from the environment", nil, []string{"LOCKHUB_LISTEN=0.0.0.0:0"}, "LOCKHUB_LISTEN"},
		{"roles claim is the name claim", []string{"--claim-roles", "name"}, nil, "--claim-roles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bin, tc.args...)
			cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, tc.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("the refusal does not name %s:\n%s", tc.want, out)
			}
		})
	}
}
