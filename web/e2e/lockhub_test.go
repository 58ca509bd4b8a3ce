package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The lockhub binary, built by TestMain in the background while the first tests run
// (startBuild), waited for by binary, removed by cleanupBinary. Package state, because
// a build is slow and is shared by every story.
var (
	binDone chan struct{} // closed when the build has finished; nil: no build started
	binDir  string
	binPath string
	binErr  error
)

// startBuild starts building ./cmd/lockhub on a goroutine owned by TestMain, which
// joins it in cleanupBinary. $LOCKHUB_E2E_BIN names a binary built already, to test
// that one instead.
func startBuild() {
	binDone = make(chan struct{})
	if p := os.Getenv("LOCKHUB_E2E_BIN"); p != "" {
		binPath = p
		close(binDone)
		return
	}
	go func() {
		defer close(binDone)
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			binErr = err
			return
		}
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
			binErr = fmt.Errorf("e2e: module root not found at %s: %w", root, err)
			return
		}
		binDir, binErr = os.MkdirTemp("", "lockhub-e2e-")
		if binErr != nil {
			return
		}
		out := filepath.Join(binDir, "lockhub")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/lockhub")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("e2e: go build ./cmd/lockhub: %w\n%s", err, b)
			return
		}
		binPath = out
	}()
}

// binary waits for the build and returns the binary's path.
func binary(t *testing.T) string {
	t.Helper()
	if binDone == nil {
		t.Fatal("e2e: no build started; TestMain calls startBuild")
	}
	<-binDone
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// cleanupBinary waits for the build and removes it.
func cleanupBinary() {
	if binDone == nil {
		return
	}
	<-binDone
	if binDir != "" {
		_ = os.RemoveAll(binDir) // a temp dir; nothing to do if it fails
	}
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago. The
// hub must come back on the same port after a restart, so the test picks it.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// hubProc is the lockhub binary running as a child process of the test.
type hubProc struct {
	bin  string
	addr string
	args []string
	logf *os.File

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has been reaped
}

// devEnv puts the hub in development mode: the story gets its tokens from POST
// /dev/token, and with --redis-url given that mode must be asked for (PROTOCOL.md §6).
// It is the environment variable of --dev (§7), not the flag, so that a binary from
// before --dev existed, which ignores the variable, runs the story as well.
const devEnv = "LOCKHUB_DEV=true"

// startHub runs the binary on a fresh port against redisURL, in development mode, with
// flags added to the defaults, and stops it when t ends. Its output goes to
// lockhub-<top-level test>.log in the output directory, so that tests running in
// parallel keep their logs apart.
func startHub(t *testing.T, bin, redisURL string, flags ...string) *hubProc {
	t.Helper()
	logPath := filepath.Join(outputDir(t), "lockhub-"+strings.SplitN(t.Name(), "/", 2)[0]+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	h := &hubProc{bin: bin, addr: freeAddr(t), logf: f}
	h.args = append([]string{"--listen", h.addr, "--redis-url", redisURL}, flags...)
	t.Cleanup(func() {
		h.stop(t)
		_ = f.Close() // the log is only for reading after the run
	})
	h.start(t)
	return h
}

func (h *hubProc) base() string { return "http://" + h.addr }

// start starts the process and waits until /healthz answers.
func (h *hubProc) start(t *testing.T) {
	t.Helper()
	fmt.Fprintf(h.logf, "\n==== %s start %s %v\n", time.Now().Format(time.TimeOnly), devEnv, h.args)
	cmd := exec.Command(h.bin, h.args...)
	cmd.Env = append(os.Environ(), devEnv)
	cmd.Stdout = h.logf
	cmd.Stderr = h.logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("e2e: start lockhub: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is in the log; a kill is expected
		close(done)
	}()
	h.mu.Lock()
	h.cmd, h.done = cmd, done
	h.mu.Unlock()

	deadline := time.Now().Add(20 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-done:
			t.Fatalf("e2e: lockhub exited at start; see %s\n%s", h.logf.Name(), tail(h.logf.Name()))
		default:
		}
		resp, err := client.Get(h.base() + "/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("e2e: lockhub not healthy on %s within 20s (%v); log:\n%s", h.addr, err, tail(h.logf.Name()))
		}
		time.Sleep(50 * time.Millisecond) // polling a child process that has no readiness signal
	}
}

// kill SIGKILLs the process, as a crash would, and waits until it is reaped.
func (h *hubProc) kill(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	cmd, done := h.cmd, h.done
	h.mu.Unlock()
	if cmd == nil {
		return
	}
	fmt.Fprintf(h.logf, "\n==== %s SIGKILL\n", time.Now().Format(time.TimeOnly))
	_ = cmd.Process.Kill() // fails only when it exited already
	<-done
}

// stop sends SIGTERM, waits up to 10 s (PROTOCOL.md §7), then kills.
func (h *hubProc) stop(t *testing.T) {
	h.mu.Lock()
	cmd, done := h.cmd, h.done
	h.cmd = nil
	h.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM) // fails only when it exited already
	select {
	case <-done:
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("e2e: lockhub exited with status %d on SIGTERM; want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("e2e: lockhub still running 10s after SIGTERM")
		_ = cmd.Process.Kill()
		<-done
	}
}

// tail returns the last lines of a file, for failure messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// person is a demo user, as the page's picker knows them.
type person struct {
	oid, name, tenant string
	roles             []string
}

var (
	ada      = person{"u-ada", "Ada Lovelace", "acme", nil}
	grace    = person{"u-grace", "Grace Hopper", "acme", nil}
	edsger   = person{"u-edsger", "Edsger Dijkstra", "acme", nil}
	margaret = person{"u-margaret", "Margaret Hamilton", "acme", []string{"Locks.TakeOver"}}
	linus    = person{"u-linus", "Linus Torvalds", "globex", nil}
	barbara  = person{"u-barbara", "Barbara Liskov", "acme", []string{"Locks.Admin"}}
)

// token gets a development token for p from the hub.
func (h *hubProc) token(t *testing.T, p person) string {
	t.Helper()
	roles := p.roles
	if roles == nil {
		roles = []string{}
	}
	body, _ := json.Marshal(map[string]any{"tenant": p.tenant, "oid": p.oid, "name": p.name, "roles": roles}) // plain values always marshal
	resp, err := http.Post(h.base()+"/dev/token", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("e2e: POST /dev/token: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.Token == "" {
		t.Fatalf("e2e: POST /dev/token: status %d, %v", resp.StatusCode, err)
	}
	return out.Token
}

// get calls the API as p and returns the status and body.
func (h *hubProc) get(t *testing.T, p person, path string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.token(t, p))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("e2e: GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("e2e: GET %s: %v", path, err)
	}
	return resp.StatusCode, b
}

// apiLock is the part of a lock record the story checks.
type apiLock struct {
	EntityUID  string `json:"entityUid"`
	HolderOID  string `json:"holderOid"`
	HolderName string `json:"holderName"`
}

// locksOf lists the live ApprovalRequest locks of p's tenant, by uid.
func (h *hubProc) locksOf(t *testing.T, p person) map[string]apiLock {
	t.Helper()
	code, b := h.get(t, p, "/api/locks/ApprovalRequest")
	if code != http.StatusOK {
		t.Fatalf("e2e: GET /api/locks/ApprovalRequest: %d %s", code, b)
	}
	var out struct {
		Locks []apiLock `json:"locks"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("e2e: GET /api/locks/ApprovalRequest: %v: %s", err, b)
	}
	m := make(map[string]apiLock, len(out.Locks))
	for _, l := range out.Locks {
		m[l.EntityUID] = l
	}
	return m
}
