//go:build unix

package redistest

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// pauseProbeTimeout is how long Pause waits for a PING answer before it counts the
// server as no longer answering. A running server on loopback answers in well under
// a millisecond.
const pauseProbeTimeout = 100 * time.Millisecond

// Pause stops the server with SIGSTOP, simulating a Redis that hangs (a stalled host,
// a long fork, a partition that drops packets) rather than one that is gone: its port
// stays open and the kernel still accepts connections and buffers what clients send,
// but nothing is answered, so clients see timeouts instead of refused connections.
// Pause returns once the server has stopped answering PING.
//
// The server stays paused until [Server.Resume] or the end of t, whose cleanup resumes
// it (SIGCONT), so the harness kills and reaps it as usual; [Server.Kill] and
// [Server.Restart] also work on a paused server (SIGKILL ends a stopped process).
// What clients manage to send while the server is paused stays buffered by the kernel,
// so Redis may still run it once it resumes, even if its client has given up by then.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	// Registered first: even if the checks below fail the test, the process is resumed.
	t.Cleanup(func() { _ = s.signal(syscall.SIGCONT) })
	if err := s.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("redistest: Pause: %v", err)
	}
	p := s.current()
	err := waitFor(t.Context(), startTimeout, func(context.Context) (bool, string) {
		if !p.alive() {
			return false, "the server exited"
		}
		err := ping(p.addr(), pauseProbeTimeout)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return true, ""
		}
		if err == nil {
			return false, "still answers PING"
		}
		return false, "PING failed otherwise than by a timeout: " + err.Error()
	})
	if err != nil {
		t.Fatalf("redistest: Pause: %v", p.failure(err))
	}
}

// Resume continues a server stopped by [Server.Pause] (SIGCONT) and waits until it
// answers PING. Resuming a server that is not paused only checks that it answers.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if err := s.signal(syscall.SIGCONT); err != nil {
		t.Fatalf("redistest: Resume: %v", err)
	}
	p := s.current()
	if err := p.waitReady(t.Context(), startTimeout); err != nil {
		t.Fatalf("redistest: Resume: %v", p.failure(err))
	}
}

// signal sends sig to the current process. A process that has exited (Kill) is left
// alone: there is nothing to pause or resume.
func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || !s.proc.alive() {
		return nil
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// current returns the current process.
func (s *Server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// HangMaster stops the node serving slot as master with SIGSTOP, as [Server.Pause]
// stops a server, and returns its address: its kernel keeps the node's connections and
// acknowledges what clients send, but the node answers nothing, as a frozen VM or a
// partition that drops packets without a reset. The cluster fails it over as it would
// a dead one ([Cluster.WaitFailover], which leaves it out like a killed node). The end
// of t resumes it (SIGCONT), and the harness then kills it with the rest.
func (c *Cluster) HangMaster(t testing.TB, slot int) string {
	t.Helper()
	addr := c.MasterForSlot(t, slot)
	for _, n := range c.nodes {
		if n.addr() != addr {
			continue
		}
		t.Cleanup(func() { _ = n.proc.cmd.Process.Signal(syscall.SIGCONT) }) // gone already: nothing to resume
		if err := n.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("redistest: HangMaster(%d): %v", slot, err)
		}
		n.hung.Store(true)
	}
	return addr
}
