package hub

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// handshakeFrom is handshake with an X-Forwarded-For of xff; nil when accepted (the
// socket stays open, unauthenticated, until cleanup).
func (th *testHub) handshakeFrom(t *testing.T, xff string) *http.Response {
	t.Helper()
	return th.handshakeWith(t, http.Header{"X-Forwarded-For": {xff}})
}

// dialFrom opens a socket whose client address, through the trusted proxy the test
// hub runs behind, is xff.
func (th *testHub) dialFrom(t *testing.T, xff string) *protocol.Client {
	t.Helper()
	c, err := protocol.Dial(tctx(t), th.url, &protocol.DialOptions{HTTPHeader: http.Header{"X-Forwarded-For": {xff}}})
	if err != nil {
		t.Fatalf("dial from %s: %v", xff, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestPendingAuthPerAddress (issue 30, item 4): one address that opens handshakes and
// never authenticates fills its own places among the sockets waiting to authenticate,
// not the instance's: another address still connects and authenticates. Without the
// per-address cap, the first address's bare handshakes took every place and the other
// got 503.
func TestPendingAuthPerAddress(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) {
		c.MaxPendingAuth, c.MaxPendingAuthPerIP = 6, 3
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} // the test's proxy
	}})
	const crowd, user = "203.0.113.7", "198.51.100.9"
	for range 3 {
		if resp := th.handshakeFrom(t, crowd); resp != nil {
			t.Fatalf("handshake within the address's cap answered %d", resp.StatusCode)
		}
	}
	for range 6 { // as many as the instance's cap: none may take its places
		wantRefused(t, th.handshakeFrom(t, crowd))
	}
	if got := th.metric("lockhub_hub_limit_hits_total", "limit=max_pending_auth_per_ip"); got != 6 {
		t.Fatalf("max_pending_auth_per_ip hits = %v, want 6", got)
	}
	if got := th.metric("lockhub_hub_limit_hits_total", "limit=max_pending_auth"); got != 0 {
		t.Fatalf("max_pending_auth hits = %v, want 0: the crowd reached the instance's cap", got)
	}
	c := th.dialFrom(t, user)
	if _, err := c.Auth(tctx(t), th.token("acme", "u-ada")); err != nil {
		t.Fatalf("another address could not authenticate: %v", err)
	}
	// An authenticated socket gives its address's place back.
	mine := th.dialFrom(t, user+", 127.0.0.1") // a second trusted hop is skipped
	if _, err := mine.Auth(tctx(t), th.token("acme", "u-grace")); err != nil {
		t.Fatal(err)
	}
}

// TestPendingAuthPerAddressUntrusted: without --trusted-proxies, X-Forwarded-For is
// the client's to write and is ignored: changing it does not buy more places.
func TestPendingAuthPerAddressUntrusted(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.MaxPendingAuth, c.MaxPendingAuthPerIP = 6, 2 }})
	for _, xff := range []string{"203.0.113.1", "203.0.113.2"} {
		if resp := th.handshakeFrom(t, xff); resp != nil {
			t.Fatalf("handshake within the cap answered %d", resp.StatusCode)
		}
	}
	wantRefused(t, th.handshakeFrom(t, "203.0.113.3"))
	if got := th.metric("lockhub_hub_limit_hits_total", "limit=max_pending_auth_per_ip"); got != 1 {
		t.Fatalf("max_pending_auth_per_ip hits = %v, want 1", got)
	}
}

// TestClientAddr: the address a handshake counts against, by peer and
// X-Forwarded-For.
func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy", "192.0.2.1:5000", nil, "192.0.2.1"},
		{"untrusted peer's header ignored", "192.0.2.1:5000", []string{"198.51.100.1"}, "192.0.2.1"},
		{"trusted peer, one hop", "10.0.0.2:5000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"client-written hops left of the first untrusted", "10.0.0.2:5000", []string{"6.6.6.6, 198.51.100.1"}, "198.51.100.1"},
		{"trusted hops skipped", "10.0.0.2:5000", []string{"198.51.100.1, 10.1.1.1"}, "198.51.100.1"},
		{"header lines read as one list", "10.0.0.2:5000", []string{"6.6.6.6", "198.51.100.1, 10.1.1.1"}, "198.51.100.1"},
		{"every hop trusted: the farthest", "10.0.0.2:5000", []string{"10.9.9.9, 10.1.1.1"}, "10.9.9.9"},
		{"no header: the proxy", "10.0.0.2:5000", nil, "10.0.0.2"},
		{"garbage hop: the trusted hop right of it", "10.0.0.2:5000", []string{"198.51.100.1, unknown, 10.1.1.1"}, "10.1.1.1"},
		{"hop with a port", "10.0.0.2:5000", []string{"198.51.100.1:4711"}, "198.51.100.1"},
		{"IPv6 hop in brackets with a port", "[fd00::1]:5000", []string{"[2001:db8::1]:4711"}, "2001:db8::1"},
		{"IPv4-mapped peer", "[::ffff:10.0.0.2]:5000", []string{"198.51.100.1"}, "198.51.100.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "/ws", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientAddr(r, trusted); got != netip.MustParseAddr(tc.want) {
				t.Fatalf("clientAddr = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestParseTrustedProxies: CIDRs and bare addresses, spaces ignored; anything else
// refused.
func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies(" 10.0.0.0/8, 192.0.2.7 ,fd00::/8,")
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("fd00::/8")}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.example.com", "10.0.0.0/8;"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("ParseTrustedProxies(%q) took it", bad)
		}
	}
}

// TestSocketsPerPerson: past --max-sockets-per-person authenticated sockets of one
// person on one instance, an auth answers too_many_sockets and closes with 4429;
// other people are not affected, and a closed socket gives its place back.
func TestSocketsPerPerson(t *testing.T) {
	th := startMini(t, hubOptions{hub: func(c *Config) { c.MaxSocketsPerPerson = 2 }})
	first, _ := th.dial("acme", "u-ada")
	th.dial("acme", "u-ada")
	third := th.dialRaw()
	_, err := third.Auth(tctx(t), th.token("acme", "u-ada"))
	wantCode(t, err, protocol.CodeTooManySockets)
	wantClosed(t, third, protocol.CloseTooMany)
	if got := th.metric("lockhub_hub_limit_hits_total", "limit=max_sockets_per_person"); got != 1 {
		t.Fatalf("max_sockets_per_person hits = %v, want 1", got)
	}
	th.dial("acme", "u-grace") // another person
	th.dial("globex", "u-ada") // the same oid in another tenant is another person
	_ = first.Close()
	redistest.Eventually(t, "a closed socket gives its person's place back", func() bool {
		c := th.dialRaw()
		_, err := c.Auth(tctx(t), th.token("acme", "u-ada"))
		return err == nil
	})
}

// TestPendingAuthPerIPBelowInstanceCap: a per-address cap at or above the instance's
// would let one address hold every place; it is refused when set, and its default
// stays below a small instance cap.
func TestPendingAuthPerIPBelowInstanceCap(t *testing.T) {
	th := startMini(t, hubOptions{})
	d := th.dev
	_, err := New(Config{Store: StoreOf(th.store), Verifier: d, MaxPendingAuth: 10, MaxPendingAuthPerIP: 10})
	if !names(err, "max-pending-auth-per-ip") {
		t.Fatalf("New = %v, want it to refuse max-pending-auth-per-ip", err)
	}
	c, err := Config{Store: StoreOf(th.store), Verifier: d, MaxPendingAuth: 10}.withDefaults()
	if err != nil || c.MaxPendingAuthPerIP != 5 {
		t.Fatalf("default per-address cap under an instance cap of 10 = %d (%v)", c.MaxPendingAuthPerIP, err)
	}
	c, _ = Config{Store: StoreOf(th.store), Verifier: d}.withDefaults()
	if c.MaxPendingAuthPerIP != DefaultMaxPendingAuthPerIP || c.MaxSocketsPerPerson != DefaultMaxSocketsPerPerson {
		t.Fatalf("defaults = %d, %d", c.MaxPendingAuthPerIP, c.MaxSocketsPerPerson)
	}
}

// TestLimitWarnings: each limit hit is counted; it is logged at WARN at most once per
// 10 s per limit, naming the setting to raise and the hits since the last warning.
func TestLimitWarnings(t *testing.T) {
	th := startMini(t, hubOptions{})
	var buf redistest.LogBuffer
	h, err := New(Config{Store: StoreOf(th.store), Verifier: th.dev, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		h.hitLimit(limitSocketsPerPerson)
	}
	h.hitLimit(limitPendingAuthPerIP, slog.String("address", "203.0.113.7"))
	if n := strings.Count(buf.String(), `"level":"WARN"`); n != 2 {
		t.Fatalf("%d warnings for two limits hit 4 times, want 2:\n%s", n, buf.String())
	}
	for _, want := range []string{"--max-sockets-per-person", "--max-pending-auth-per-ip", `"address":"203.0.113.7"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the warnings do not name %s:\n%s", want, buf.String())
		}
	}
	// 10 s later, the next hit warns again, with the hits since.
	h.warned.mu.Lock()
	h.warned.last[limitSocketsPerPerson] = time.Now().Add(-limitWarnEvery)
	h.warned.mu.Unlock()
	h.hitLimit(limitSocketsPerPerson)
	if n := strings.Count(buf.String(), `"level":"WARN"`); n != 3 || !strings.Contains(buf.String(), `"hits":3`) {
		t.Fatalf("after 10 s: %d warnings, want 3, the last with the 3 hits since:\n%s", n, buf.String())
	}

	// Every limit says what to do: the setting to raise, or that the contract fixes it.
	for _, limit := range []string{limitConnections, limitPendingAuth, limitPendingAuthPerIP, limitSocketsPerPerson,
		limitLocks, limitPreAuthFrame, limitFrame, limitPong, limitViews, limitRequestRate} {
		buf.Reset()
		h.warned.mu.Lock()
		delete(h.warned.last, limit)
		h.warned.mu.Unlock()
		h.hitLimit(limit)
		_, set := limitSettings[limit]
		if out := buf.String(); !strings.Contains(out, `"level":"WARN"`) || !strings.Contains(out, `"limit":"`+limit+`"`) ||
			set == strings.Contains(out, "no setting") || set != strings.Contains(out, "raise --") {
			t.Errorf("limit %s (setting %v) warned:\n%s", limit, set, out)
		}
	}
}
