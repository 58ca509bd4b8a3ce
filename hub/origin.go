package hub

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ParseOrigins parses an Origin allow-list as PROTOCOL.md §4 writes it: origins
// separated by commas, spaces around them ignored, each "scheme://host[:port]" with
// scheme http or https, where a host label may be "*" standing for exactly one DNS
// label ("https://*.example.com"). An empty s is an empty list: same origin only.
func ParseOrigins(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := parseOriginPattern(part)
		if err != nil {
			return nil, err
		}
		out = append(out, p.String())
	}
	return out, nil
}

// originPattern is one entry of the allow-list, lower-cased, port made explicit.
type originPattern struct {
	scheme string
	labels []string // host labels; "*" matches any one label
	port   string
}

func (p originPattern) String() string {
	return p.scheme + "://" + net.JoinHostPort(strings.Join(p.labels, "."), p.port)
}

func parseOriginPattern(s string) (originPattern, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return originPattern{}, fmt.Errorf("hub: origin %q: want http:// or https:// followed by a host", s)
	}
	if strings.ContainsAny(rest, "/?#@ ") {
		return originPattern{}, fmt.Errorf("hub: origin %q: an origin is a scheme and a host, without path or credentials", s)
	}
	host, port := splitHostPort(rest, scheme)
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return originPattern{}, fmt.Errorf("hub: origin %q has no host", s)
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "*" {
			continue
		}
		if l == "" || strings.Contains(l, "*") {
			return originPattern{}, fmt.Errorf("hub: origin %q: '*' must stand alone for one whole label", s)
		}
	}
	if labels[len(labels)-1] == "*" && len(labels) == 1 {
		return originPattern{}, fmt.Errorf("hub: origin %q would allow any host", s)
	}
	return originPattern{scheme: scheme, labels: labels, port: port}, nil
}

// splitHostPort splits "host[:port]" (IPv6 in brackets), defaulting the port by scheme.
func splitHostPort(hostport, scheme string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	if port == "" {
		port = "80"
		if scheme == "https" || scheme == "wss" {
			port = "443"
		}
	}
	return host, port
}

func (p originPattern) match(scheme, host, port string) bool {
	if scheme != p.scheme || port != p.port {
		return false
	}
	labels := strings.Split(host, ".")
	if len(labels) != len(p.labels) {
		return false
	}
	for i, l := range p.labels {
		if l != "*" && l != labels[i] {
			return false
		}
		if l == "*" && labels[i] == "" {
			return false
		}
	}
	return true
}

// originChecker decides whether a handshake's Origin may open a socket.
type originChecker struct{ allowed []originPattern }

func newOriginChecker(list []string) (originChecker, error) {
	var c originChecker
	for _, s := range list {
		p, err := parseOriginPattern(strings.TrimSpace(s))
		if err != nil {
			return originChecker{}, err
		}
		c.allowed = append(c.allowed, p)
	}
	return c, nil
}

// allow reports whether r may open a socket: no Origin (not a browser), the hub's own
// origin (the Origin's host is the request's Host, as coder/websocket judges it: a TLS
// terminating proxy may change the scheme), or an origin of the allow-list.
func (c originChecker) allow(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return false // "null" (sandboxed pages, file://) included
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := splitHostPort(u.Host, scheme)
	host = strings.ToLower(strings.TrimSuffix(host, "."))

	reqHost, reqPort := splitHostPort(r.Host, scheme)
	if strings.EqualFold(strings.TrimSuffix(reqHost, "."), host) && reqPort == port {
		return true
	}
	for _, p := range c.allowed {
		if p.match(scheme, host, port) {
			return true
		}
	}
	return false
}
