package hub

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/protocol"
)

// Admission of PROTOCOL.md §4, "Fair share (version 3)": besides the instance's caps
// on open and unauthenticated sockets (reserve), at most MaxPendingAuthPerIP sockets
// of one client address wait for authentication, and one person holds at most
// MaxSocketsPerPerson authenticated sockets. A handshake refused by either cap gives
// back every place it took, so that the handshakes one address is refused never hold
// places the others need.

// ParseTrustedProxies parses --trusted-proxies: CIDRs separated by commas, spaces
// around them ignored; a bare address stands for itself alone. An empty s trusts no
// proxy.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an address", part)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// clientAddr is the address a handshake counts against (PROTOCOL.md §4): the peer's,
// or, when the peer is a trusted proxy, the last hop of X-Forwarded-For that is not
// one. Hops are read right to left, since each proxy appends the address it saw: what
// stands left of the first untrusted hop was written by the client and proves nothing.
// A hop that is not an address ends the walk at the trusted hop right of it.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := remoteAddr(r)
	if !isTrusted(peer, trusted) {
		return peer
	}
	addr := peer
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		list := strings.Split(hops[i], ",")
		for j := len(list) - 1; j >= 0; j-- {
			a, ok := parseHop(list[j])
			if !ok {
				return addr
			}
			if addr = a; !isTrusted(a, trusted) {
				return a
			}
		}
	}
	return addr // every hop a trusted proxy: the farthest one
}

// remoteAddr is the peer address of r; the zero Addr when it has none (a test's
// handler called directly), which then counts as one address.
func remoteAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		a, _ := netip.ParseAddr(r.RemoteAddr)
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}

// parseHop reads one X-Forwarded-For entry: an address, with a port or in brackets as
// some proxies write it.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return a.Unmap(), err == nil
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// person is who a socket's per-person cap counts: a tenant's oid.
type person struct{ tenant, oid string }

// admission is the hub's per-address and per-person counts.
type admission struct {
	mu        sync.Mutex
	pending   map[netip.Addr]int   // guarded by mu; sockets waiting to authenticate, by client address
	addrOf    map[*conn]netip.Addr // guarded by mu; of them, those handed to a conn
	sockets   map[person]int       // guarded by mu; authenticated sockets, by person
	perAddr   int                  // Config.MaxPendingAuthPerIP
	perPerson int                  // Config.MaxSocketsPerPerson
}

func newAdmission(cfg Config) *admission {
	return &admission{pending: map[netip.Addr]int{}, addrOf: map[*conn]netip.Addr{}, sockets: map[person]int{},
		perAddr: cfg.MaxPendingAuthPerIP, perPerson: cfg.MaxSocketsPerPerson}
}

// pend takes a place among a's sockets waiting to authenticate, or reports that a has
// as many as it may.
func (a *admission) pend(addr netip.Addr) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending[addr] >= a.perAddr {
		return false
	}
	a.pending[addr]++
	return true
}

// unpend gives back a place pend took.
func (a *admission) unpend(addr netip.Addr) {
	a.mu.Lock()
	a.unpendLocked(addr)
	a.mu.Unlock()
}

func (a *admission) unpendLocked(addr netip.Addr) {
	if n := a.pending[addr] - 1; n > 0 {
		a.pending[addr] = n
	} else {
		delete(a.pending, addr)
	}
}

// hand records that c holds the place pend took for addr, until authenticated or
// gone gives it back.
func (a *admission) hand(c *conn, addr netip.Addr) {
	a.mu.Lock()
	a.addrOf[c] = addr
	a.mu.Unlock()
}

// authenticated gives back c's place among its address's waiting sockets and takes one
// among id's sockets, or reports that id holds as many as it may; c's place is given
// back either way.
func (a *admission) authenticated(c *conn, id auth.Identity) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if addr, ok := a.addrOf[c]; ok {
		delete(a.addrOf, c)
		a.unpendLocked(addr)
	}
	p := person{id.Tenant, id.OID}
	if a.sockets[p] >= a.perPerson {
		return false
	}
	a.sockets[p]++
	return true
}

// gone gives back what c holds: its place among its address's waiting sockets, or,
// authenticated as id (authed), among id's sockets.
func (a *admission) gone(c *conn, authed bool, id auth.Identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if addr, ok := a.addrOf[c]; ok {
		delete(a.addrOf, c)
		a.unpendLocked(addr)
	}
	if !authed {
		return
	}
	p := person{id.Tenant, id.OID}
	if n := a.sockets[p] - 1; n > 0 {
		a.sockets[p] = n
	} else {
		delete(a.sockets, p)
	}
}

// limitWarnEvery is how often a limit that keeps being hit is logged (PROTOCOL.md §4:
// at most once per 10 s per limit).
const limitWarnEvery = protocol.LimitLogEvery

// limitSettings names the setting to raise for each limit that has one.
var limitSettings = map[string]string{
	limitConnections:      "max-connections",
	limitPendingAuth:      "max-pending-auth",
	limitPendingAuthPerIP: "max-pending-auth-per-ip",
	limitSocketsPerPerson: "max-sockets-per-person",
	limitLocks:            "max-locks-per-socket",
}

// limitFixed says what the limits without a setting are: the contract fixes them.
var limitFixed = map[string]string{
	limitPreAuthFrame: "a frame over 16 KiB before auth closes with 1009 (PROTOCOL.md §4; no setting)",
	limitFrame:        "a frame over 64 KiB closes with 1009 (PROTOCOL.md §4; no setting)",
	limitRequestRate:  "a socket sent over 50 frames a second, bursts of 100 (PROTOCOL.md §4; no setting)",
	limitViews:        "a socket views at most 50 entities at once (PROTOCOL.md §9; no setting)",
	limitPong:         "a socket did not answer a Ping within 10 s and was cut (PROTOCOL.md §4; no setting, see --ping-every)",
}

// limitWarnings is when each limit was last logged, and how often it was hit since.
type limitWarnings struct {
	mu   sync.Mutex
	last map[string]time.Time // guarded by mu
	hits map[string]int       // guarded by mu
}

// hitLimit counts a hit of limit in lockhub_hub_limit_hits_total and logs it at WARN,
// at most once per limitWarnEvery per limit, with the hits since the last warning and
// the setting to raise.
func (h *Hub) hitLimit(limit string, attrs ...slog.Attr) {
	h.met.limits.WithLabelValues(limit).Inc()
	now := time.Now()
	w := &h.warned
	w.mu.Lock()
	w.hits[limit]++
	n := w.hits[limit]
	due := now.Sub(w.last[limit]) >= limitWarnEvery
	if due {
		w.last[limit], w.hits[limit] = now, 0
	}
	w.mu.Unlock()
	if !due {
		return
	}
	msg := "a socket limit was reached (PROTOCOL.md §4)"
	if s, ok := limitSettings[limit]; ok {
		msg = "a socket limit was reached; raise --" + s + " if legitimate clients reach it"
	} else if s, ok := limitFixed[limit]; ok {
		msg = "a socket limit was reached: " + s
	}
	attrs = append(attrs, slog.String("limit", limit), slog.Int("hits", n), slog.String("metric", "lockhub_hub_limit_hits_total"))
	h.log.LogAttrs(h.ctx, slog.LevelWarn, msg, attrs...)
}
