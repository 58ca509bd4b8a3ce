package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	// installCommand is what a developer has to run when redis-server is
	// missing; it is part of the failure message so the fix is copy-paste.
	installCommand = "apt-get install -y redis-server"

	// Ports are drawn from [portMin, portMax). The upper bound keeps the
	// cluster bus port (port+busPortOffset) below 60000, clear of the top of
	// Linux's default ephemeral range.
	portMin = 20000
	portMax = 50000

	// busPortOffset is the fixed distance between a cluster node's client
	// port and its cluster bus port, as Redis derives it by default.
	busPortOffset = 10000

	// startAttempts bounds how often a server is relaunched on a fresh port
	// when it dies before answering (almost always because another process
	// bound the port between our check and redis-server's bind).
	startAttempts = 5

	// portProbes bounds the random search for a currently bindable port.
	portProbes = 200

	// startTimeout is how long a freshly launched server may take to answer
	// PING. Redis normally answers in tens of milliseconds; the slack is for
	// heavily loaded CI machines running many test binaries at once.
	startTimeout = 10 * time.Second

	// pollInterval is the pause between two checks in every poll loop.
	pollInterval = 20 * time.Millisecond

	// logTailLines is how much of a server log failure messages include.
	logTailLines = 30
)

// errExited reports that redis-server terminated on its own while we were
// waiting for it to come up.
var errExited = errors.New("redis-server exited before answering PING")

// RequireRedisServer returns the path of the redis-server binary found in
// PATH. When there is none it fails the test with t.Fatalf, naming the command
// that installs it ("apt-get install -y redis-server"). It never skips: tests
// that need a real Redis must not silently pass on a machine without one.
func RequireRedisServer(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server is not installed or not in PATH (%v); install it with: %s", err, installCommand)
	}
	return path
}

// process is one running (or already reaped) redis-server.
type process struct {
	cmd     *exec.Cmd
	port    int
	logPath string // stdout and stderr of redis-server

	// exited is closed once cmd.Wait has returned, i.e. the process has been
	// reaped; waitErr is valid after that. A single goroutine calls Wait, so
	// kill can be called any number of times without double-waiting.
	exited  chan struct{}
	waitErr error
}

// addr returns the client address of the process.
func (p *process) addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
}

// alive reports whether the process has not exited yet.
func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and blocks until the process has been reaped. It is
// idempotent and safe for concurrent use: signalling an already reaped
// process is a no-op (os.Process tracks that), and the wait is on a channel.
func (p *process) kill() {
	// SIGKILL rather than SIGTERM: tests use this to simulate a crash, and a
	// crashed server must not get to flush anything or close connections
	// politely.
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// launch starts redis-server on port with the harness's base arguments
// followed by extra, in a new directory under baseDir. It does not wait for
// the server to answer; see waitReady.
func launch(bin, baseDir string, port int, extra []string) (*process, error) {
	// A fresh directory per launch guarantees a restarted server comes up
	// empty even if a test forced a SAVE, and keeps each run's log separate.
	dir, err := os.MkdirTemp(baseDir, "redis-"+strconv.Itoa(port)+"-")
	if err != nil {
		return nil, fmt.Errorf("redistest: creating server directory: %w", err)
	}
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("redistest: creating server log: %w", err)
	}
	// The child inherits the descriptor; our copy is not needed once it has
	// started (or failed to).
	defer logFile.Close()

	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--daemonize", "no",
		// Redis logs to stdout when logfile is empty; stdout is the log file,
		// which also captures errors printed before logging is set up.
		"--logfile", "",
		// No persistence: nothing survives Kill/Restart, and no background
		// fork competes with the test for CPU.
		"--save", "",
		"--appendonly", "no",
	}
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = sysProcAttr()
	// An *os.File is handed to the child directly, so os/exec starts no
	// copying goroutine that could outlive the test.
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redistest: starting %s: %w", bin, err)
	}

	p := &process{cmd: cmd, port: port, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitReady polls the server with PING until it answers +PONG, it exits, or
// timeout elapses. It returns an error wrapping errExited when the process
// died, so callers can tell a lost port race from a hung server.
func (p *process) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%w (%v)", errExited, p.waitErr)
		default:
		}
		if lastErr = ping(p.addr(), 200*time.Millisecond); lastErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server did not answer PING within %v: %v", timeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for PING: %w", context.Cause(ctx))
		case <-p.exited:
		case <-time.After(pollInterval):
		}
	}
}

// failure decorates err with the server's address and the tail of its log.
func (p *process) failure(err error) error {
	return fmt.Errorf("redis-server on %s: %w\n--- last lines of %s ---\n%s", p.addr(), err, p.logPath, logTail(p.logPath, logTailLines))
}

// ping sends a RESP PING over a fresh connection and expects +PONG. It speaks
// the protocol directly instead of using go-redis so that readiness probing
// leaves no connection pool, retry state or background goroutine behind.
func ping(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	// A server still loading answers -LOADING; anything but +PONG means
	// "not ready yet".
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// startOnFreePort launches redis-server with extra arguments on a random free
// port (with port+busPortOffset also free when needBus is set) and waits for
// it to answer PING. If the server dies before answering, it retries on
// another port, up to startAttempts times. On error no process is left
// running.
func startOnFreePort(ctx context.Context, bin, baseDir string, needBus bool, extra []string) (*process, error) {
	var lastErr error
	for range startAttempts {
		port, err := pickPort(needBus)
		if err != nil {
			return nil, err
		}
		p, err := launch(bin, baseDir, port, extra)
		if err != nil {
			return nil, err
		}
		err = p.waitReady(ctx, startTimeout)
		if err == nil {
			return p, nil
		}
		p.kill()
		lastErr = p.failure(err)
		if !errors.Is(err, errExited) {
			// Alive but unresponsive: another port will not help.
			return nil, lastErr
		}
	}
	return nil, fmt.Errorf("redistest: gave up after %d attempts, last one: %w", startAttempts, lastErr)
}

// pickPort returns a random port in [portMin, portMax) that can be bound on
// 127.0.0.1 right now, together with port+busPortOffset when needBus is set.
// Randomness (rather than asking the kernel for port 0) lets us check the
// bus port as well and makes collisions between concurrently running test
// binaries unlikely; startOnFreePort handles the remaining races.
func pickPort(needBus bool) (int, error) {
	for range portProbes {
		port := portMin + rand.IntN(portMax-portMin)
		if !canBind(port) {
			continue
		}
		if needBus && !canBind(port+busPortOffset) {
			continue
		}
		return port, nil
	}
	return 0, fmt.Errorf("redistest: no bindable port in [%d, %d) after %d random probes", portMin, portMax, portProbes)
}

// canBind reports whether a TCP listener can be opened on 127.0.0.1:port.
func canBind(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// logTail returns the last n lines of the file at path, or a note saying why
// it could not be read. Redis logs from a test run are small, so reading the
// whole file is fine.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(log is empty)"
	}
	return strings.Join(lines, "\n")
}

// waitFor calls check every pollInterval until it reports done, ctx ends or
// timeout elapses. check returns a short description of the state it saw;
// on timeout the last one is part of the error, which is usually all a
// failing test needs to explain itself.
func waitFor(ctx context.Context, timeout time.Duration, check func(ctx context.Context) (done bool, state string)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, state := check(ctx)
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still not done after %v; last state: %s", timeout, state)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last state: %s", context.Cause(ctx), state)
		case <-time.After(pollInterval):
		}
	}
}
