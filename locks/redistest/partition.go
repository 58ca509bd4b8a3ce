package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Partition is a TCP relay between clients and a server, to cut them apart as a
// network partition of one client would: [Partition.Cut] drops every connection and
// refuses new ones, and nothing sent meanwhile reaches the server (unlike
// [Server.Pause], whose kernel buffers what clients send, and runs it on resume).
// [Partition.Heal] accepts connections again on the same address. Start it with
// [StartPartition]; the end of the test closes it and joins its goroutines.
type Partition struct {
	addr   string // where clients connect
	target string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartPartition starts a relay to target (host:port) on a free loopback port.
func StartPartition(t testing.TB, target string) *Partition {
	t.Helper()
	p := &Partition{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: StartPartition: %v", err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the address clients connect to instead of the server's.
func (p *Partition) Addr() string { return p.addr }

// URL is the redis:// URL of Addr, database 0.
func (p *Partition) URL() string { return "redis://" + p.addr + "/0" }

// Cut closes every relayed connection and the listener: clients see their
// connections end and new ones refused until Heal.
func (p *Partition) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close() // the accept loop ends on it
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close() // its copier ends on it
	}
	clear(p.conns)
}

// Heal listens on the same address again.
func (p *Partition) Heal(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("redistest: Partition.Heal: %v", err)
	}
	p.serve(ln)
}

func (p *Partition) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by Cut
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			if !p.track(ln, c, u) {
				continue
			}
			p.wg.Go(func() { relay(u, c) })
			p.wg.Go(func() { relay(c, u) })
		}
	})
}

// track records a relayed pair, unless a Cut came first: then it closes them.
func (p *Partition) track(ln net.Listener, c, u net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != ln {
		_ = c.Close()
		_ = u.Close()
		return false
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	return true
}

// relay copies src to dst until either ends, then closes both.
func relay(dst, src net.Conn) {
	_, _ = io.Copy(dst, src) // ends on a Cut, or when either side closes
	_ = dst.Close()
	_ = src.Close()
}
