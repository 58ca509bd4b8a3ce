package service

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/protocol"
)

// TestFlagsReachTheParts runs the whole binary in-process with non-default settings and
// checks each one where a client sees it: the takeover role in the welcome and on the
// HTTP takeover, the lease and renewal period in the welcome, the Origin allow-list at
// the WebSocket handshake.
func TestFlagsReachTheParts(t *testing.T) {
	r := start(t, []string{
		"--takeover-role", "Custom.Role",
		"--admin-role", "Custom.Admin",
		"--renew-every", "90s",
		"--lease", "3m",
		"--allowed-origins", "https://*.example.com",
	}, env())
	ws := "ws" + strings.TrimPrefix(r.url, "http") + "/ws"
	const lockURL = "/api/locks/ApprovalRequest/r-1001"

	custom := devToken(t, r.url, "u-boss", "Custom.Role")
	usual := devToken(t, r.url, "u-grace", "Locks.TakeOver") // the default role, not configured
	ada := devToken(t, r.url, "u-ada")

	t.Run("welcome", func(t *testing.T) {
		for _, tc := range []struct {
			name, token string
			canTakeOver bool
		}{
			{"the configured role", custom, true},
			{"the default role", usual, false},
			{"no role", ada, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w := welcome(t, ws, tc.token)
				if w.CanTakeOver != tc.canTakeOver || w.LeaseMs != 180000 || w.RenewMs != 90000 {
					t.Fatalf("welcome canTakeOver %v, leaseMs %d, renewMs %d; want %v, 180000, 90000",
						w.CanTakeOver, w.LeaseMs, w.RenewMs, tc.canTakeOver)
				}
			})
		}
	})

	t.Run("HTTP takeover", func(t *testing.T) {
		if a := call(t, "POST", r.url+lockURL, ada, ""); a.status != 200 || a.body["outcome"] != "acquired" {
			t.Fatalf("claim: %d %s", a.status, a.raw)
		}
		if a := call(t, "POST", r.url+lockURL+"/takeover", usual, ""); a.status != 403 || a.body["outcome"] != "forbidden" {
			t.Fatalf("takeover with the default role: %d %s, want 403 forbidden", a.status, a.raw)
		}
		a := call(t, "POST", r.url+lockURL+"/takeover", custom, "")
		if a.status != 200 || a.body["outcome"] != "takenOver" {
			t.Fatalf("takeover with the configured role: %d %s, want 200 takenOver", a.status, a.raw)
		}
		// The lease the lock got is --lease.
		lock, _ := a.body["lock"].(map[string]any)
		acquired, err1 := time.Parse(time.RFC3339, str(lock["acquiredAtUtc"]))
		expires, err2 := time.Parse(time.RFC3339, str(lock["expiresAtUtc"]))
		if err := errors.Join(err1, err2); err != nil || expires.Sub(acquired) != 3*time.Minute {
			t.Fatalf("lock %v: lease %s (%v), want 3m", lock, expires.Sub(acquired), err)
		}
	})

	t.Run("admin role", func(t *testing.T) {
		admin := devToken(t, r.url, "u-root", "Custom.Admin")
		if a := call(t, "GET", r.url+"/api/admin/locks", admin, ""); a.status != 200 {
			t.Fatalf("the console with the configured role: %d %s", a.status, a.raw)
		}
		dflt := devToken(t, r.url, "u-rita", "Locks.Admin") // the default role, not configured
		if a := call(t, "GET", r.url+"/api/admin/audit", dflt, ""); a.status != 403 || a.body["code"] != "forbidden" {
			t.Fatalf("the console with the default role: %d %s, want 403 forbidden", a.status, a.raw)
		}
	})

	t.Run("origins", func(t *testing.T) {
		for _, tc := range []struct {
			origin string
			status int // 0: the handshake succeeds
		}{
			{"https://tms.Example.com", 0},
			{"https://TMS.EXAMPLE.COM", 0},
			{"https://evil.com", http.StatusForbidden},
			{"https://a.tms.example.com", http.StatusForbidden}, // '*' is one label
			{"http://tms.example.com", http.StatusForbidden},    // another scheme
		} {
			t.Run(tc.origin, func(t *testing.T) {
				c, err := protocol.Dial(t.Context(), ws, &protocol.DialOptions{HTTPHeader: http.Header{"Origin": {tc.origin}}})
				if tc.status == 0 {
					if err != nil {
						t.Fatalf("handshake refused: %v", err)
					}
					_ = c.Close() // the handshake is what is tested
					return
				}
				if err == nil {
					_ = c.Close()
					t.Fatalf("handshake allowed, want HTTP %d", tc.status)
				}
				var he *protocol.HandshakeError
				if !errors.As(err, &he) || he.StatusCode != tc.status {
					t.Fatalf("Dial = %v, want HTTP %d", err, tc.status)
				}
			})
		}
	})

	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestShutdownClosesUnauthenticatedSocket: what SIGTERM does (main cancels Run's ctx)
// closes with 1001 a socket that has not authenticated yet, not only authenticated ones,
// and Run returns nil within 10 s.
func TestShutdownClosesUnauthenticatedSocket(t *testing.T) {
	r := start(t, nil, env())
	c, err := protocol.Dial(t.Context(), "ws"+strings.TrimPrefix(r.url, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	begun := time.Now()
	if err := r.stop(t); err != nil { // fails the test after 10 s
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(begun); d > 10*time.Second {
		t.Fatalf("Run returned %s after its ctx was done", d)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the unauthenticated socket is still open after shutdown")
	}
	if got := c.CloseStatus(); got != protocol.CloseGoingAway {
		t.Fatalf("closed with %d (%v), want 1001", got, c.Err())
	}
}

// welcome opens a socket, authenticates with token and returns the welcome.
func welcome(t *testing.T, url, token string) protocol.Welcome {
	t.Helper()
	c, err := protocol.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	w, err := c.Auth(t.Context(), token)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func str(v any) string { s, _ := v.(string); return s }
