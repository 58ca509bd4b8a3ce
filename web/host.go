package web

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/lockhub/lockhub/protocol"
)

// hostCheck answers only requests whose Host is a loopback name or address, or one of
// a few more hosts (PROTOCOL.md §6, development mode): a browser sends the name it
// resolved in Host, so a page whose DNS name an attacker rebinds to 127.0.0.1 is
// refused, while http://localhost:8080 and http://127.0.0.1:8080 are served.
type hostCheck struct {
	extra []string // lower-cased, without ports
}

func newHostCheck(hosts []string) *hostCheck {
	hc := &hostCheck{}
	for _, h := range hosts {
		if h = normalHost(h); h != "" {
			hc.extra = append(hc.extra, h)
		}
	}
	return hc
}

// allows reports whether host, a Host header, names this machine or one of extra.
func (hc *hostCheck) allows(host string) bool {
	h := normalHost(host)
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		// RFC 6761 §6.3: .localhost names are loopback; browsers never ask DNS for
		// them, so none can be rebound.
		return true
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Unmap().IsLoopback() {
		return true
	}
	for _, e := range hc.extra {
		if h == e {
			return true
		}
	}
	return false
}

func (hc *hostCheck) check(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hc.allows(r.Host) {
			closeUnread(w, r)
			WriteError(w, r, nil, Errorf(protocol.CodeForbidden, "this development server answers only requests for a loopback host such as localhost or 127.0.0.1"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// normalHost is host without its port or brackets, lower-cased and without a final
// dot.
func normalHost(host string) string {
	host = strings.TrimSpace(host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimPrefix(strings.TrimSuffix(host, "]"), "[")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
