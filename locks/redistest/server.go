package redistest

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clientTimeout is the dial, read and write timeout of the clients the
// harness hands out. Everything is on loopback, so anything slower than this
// is a dead or stopped server, and tests that kill servers should find out
// quickly rather than after go-redis's 5 s defaults.
const clientTimeout = 500 * time.Millisecond

// Server is a standalone redis-server process owned by a test. Create it with
// [StartServer].
type Server struct {
	bin     string
	baseDir string
	port    int
	addr    string // immutable: Restart reuses the port

	mu   sync.Mutex // serialises Kill, Restart and the cleanup
	proc *process   // current process; may already be killed
}

// StartServer starts a standalone redis-server on a free 127.0.0.1 port, with
// persistence disabled (save "" and appendonly no) and its own temporary
// directory, and waits until it answers PING. The process is SIGKILLed and
// reaped when t finishes. It fails the test if the server cannot be started,
// including the tail of the server log in the message.
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin := RequireRedisServer(t)
	s := &Server{bin: bin, baseDir: t.TempDir()}
	// Registered after t.TempDir, so it runs before the directory is removed.
	t.Cleanup(s.stop)

	p, err := startOnFreePort(t.Context(), bin, s.baseDir, false, nil)
	if err != nil {
		t.Fatalf("redistest: StartServer: %v", err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	s.port = p.port
	s.addr = p.addr()
	return s
}

// Addr returns the server's address, "127.0.0.1:port". It does not change
// across Kill and Restart.
func (s *Server) Addr() string { return s.addr }

// URL returns a redis URL for database 0 of the server,
// "redis://127.0.0.1:port/0", suitable for [redis.ParseURL].
func (s *Server) URL() string { return "redis://" + s.addr + "/0" }

// Options returns go-redis options for the server: its address and short
// (500 ms) dial, read and write timeouts, so that commands against a killed
// server fail fast. Each call returns a new value the caller may modify.
func (s *Server) Options() *redis.Options {
	return &redis.Options{
		Addr:         s.addr,
		DialTimeout:  clientTimeout,
		ReadTimeout:  clientTimeout,
		WriteTimeout: clientTimeout,
	}
}

// Client returns a new go-redis client for the server, built from
// [Server.Options], that is closed when t finishes.
//
// After Kill and Restart an existing client reconnects on its own, but
// go-redis stops dialling a node for up to a second once it has seen many
// consecutive dial failures; a fresh client avoids that delay.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.Options())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill SIGKILLs the server and waits until the process has been reaped,
// simulating a crash. All data is lost. The port is remembered, so
// [Server.Restart] brings the server back on the same address. Killing a
// server that is not running does nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.kill()
	}
}

// Restart starts the server again on the same port, with no data, and waits
// until it answers PING. If the server is still running it is killed first.
// The new process still belongs to the test that called [StartServer]; t is
// only used to report failures. Restart fails the test if the port has been
// taken by another process in the meantime.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.kill()
	}
	p, err := launch(s.bin, s.baseDir, s.port, nil)
	if err != nil {
		t.Fatalf("redistest: Restart: %v", err)
	}
	// Recorded before waiting so the cleanup kills it even if we fail below.
	s.proc = p
	if err := p.waitReady(t.Context(), startTimeout); err != nil {
		p.kill()
		t.Fatalf("redistest: Restart on the same port: %v", p.failure(err))
	}
}

// stop kills the current process, if any. It is the t.Cleanup of StartServer
// and is idempotent with Kill.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.kill()
	}
}
