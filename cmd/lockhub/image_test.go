package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestImage builds the container image with `make image` and checks the image
// itself: its config (a non-root user, the binary as entrypoint, the ports, the
// version label), and its binary, taken out of the image, which must be static and
// must answer /healthz and serve a claim on a real redis-server. It then runs the
// container where podman can run one; where it cannot, that subtest says why and
// skips.
func TestImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is missing: the image cannot be built or checked. Install it with: sudo apt-get install -y podman (make deps does it when run as root)")
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	version := "test-" + hex.EncodeToString(nonce[:])
	image := "localhost/lockhub-test:" + version
	mk := exec.CommandContext(t.Context(), "make", "-C", "../..", "image", "IMAGE="+image, "VERSION="+version)
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", image).Run() })

	t.Run("config", func(t *testing.T) {
		out, err := exec.CommandContext(t.Context(), "podman", "image", "inspect", image).Output()
		if err != nil {
			t.Fatal(err)
		}
		var inspect []struct {
			Config struct {
				User         string
				Entrypoint   []string
				Cmd          []string
				ExposedPorts map[string]struct{}
				Labels       map[string]string
			}
		}
		if err := json.Unmarshal(out, &inspect); err != nil || len(inspect) != 1 {
			t.Fatalf("podman image inspect: %v\n%s", err, out)
		}
		c := inspect[0].Config
		if c.User != "65532:65532" {
			t.Errorf("user %q, want the non-root 65532:65532", c.User)
		}
		if strings.Join(c.Entrypoint, " ") != "/lockhub" || len(c.Cmd) != 0 {
			t.Errorf("entrypoint %q, cmd %q: want /lockhub and no arguments", c.Entrypoint, c.Cmd)
		}
		for _, p := range []string{"8080/tcp", "9090/tcp"} {
			if _, ok := c.ExposedPorts[p]; !ok {
				t.Errorf("port %s not exposed: %v", p, c.ExposedPorts)
			}
		}
		if got := c.Labels["org.opencontainers.image.version"]; got != version {
			t.Errorf("version label %q, want %q", got, version)
		}
		if c.Labels["org.opencontainers.image.title"] != "lockhub" {
			t.Errorf("labels %v", c.Labels)
		}
	})

	t.Run("binary", func(t *testing.T) {
		dir := t.TempDir()
		ctr := "lockhub-test-" + version
		if out, err := exec.CommandContext(t.Context(), "podman", "create", "--name", ctr, image).CombinedOutput(); err != nil {
			t.Fatalf("podman create: %v\n%s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("podman", "rm", "-f", ctr).Run() })
		for _, f := range []string{"/lockhub", "/etc/ssl/certs/ca-certificates.crt", "/etc/passwd"} {
			dst := filepath.Join(dir, filepath.Base(f))
			if out, err := exec.CommandContext(t.Context(), "podman", "cp", ctr+":"+f, dst).CombinedOutput(); err != nil {
				t.Fatalf("podman cp %s: %v\n%s", f, err, out)
			}
		}
		bin := filepath.Join(dir, "lockhub")
		ef, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("the binary asks for a dynamic loader: FROM scratch has none (CGO_ENABLED=0)")
			}
		}
		_ = ef.Close()
		if b, _ := os.ReadFile(filepath.Join(dir, "ca-certificates.crt")); !strings.Contains(string(b), "BEGIN CERTIFICATE") {
			t.Error("no CA certificates in the image")
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "passwd")); !strings.Contains(string(b), ":65532:65532:") {
			t.Errorf("passwd %q does not name the user 65532", b)
		}

		srv := redistest.StartServer(t)
		addr := runImageBinary(t, bin, "--dev", "--listen", "127.0.0.1:0", "--redis-url", srv.URL())
		checkServes(t, "http://"+addr)
	})

	t.Run("container", func(t *testing.T) {
		// -h needs no Redis: whether podman can run a container here at all.
		out, err := exec.CommandContext(t.Context(), "podman", "run", "--rm", "--network", "host", image, "-h").CombinedOutput()
		if err != nil {
			t.Skipf("podman cannot run containers on this machine (%v: %s); the image's binary was checked outside it above. In this sandbox crun refuses to set the container's rlimits and cgroups (hybrid cgroup v1/v2 without the rights to change them); on a machine with rootful or rootless podman working, this subtest runs the container.", err, strings.TrimSpace(string(out)))
		}
		if !strings.Contains(string(out), "LOCKHUB_REDIS_URL") {
			t.Fatalf("lockhub -h in the container:\n%s", out)
		}
		srv := redistest.StartServer(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listen := ln.Addr().String()
		_ = ln.Close()
		ctr := "lockhub-run-" + version
		run := exec.CommandContext(t.Context(), "podman", "run", "--rm", "--name", ctr, "--network", "host", image, "--dev", "--listen", listen, "--redis-url", srv.URL())
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = exec.Command("podman", "rm", "-f", ctr).Run(); _ = run.Wait() })
		redistest.Within(t, 30*time.Second, "the container answering /healthz", func() error {
			res, err := http.Get("http://" + listen + "/healthz")
			if err != nil {
				return err
			}
			return res.Body.Close()
		})
		checkServes(t, "http://"+listen)
	})
}

// runImageBinary starts bin with args and returns the address it listens on, from its
// JSON log. The test's cleanup stops it.
func runImageBinary(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{} // the image's binary runs with what the container gives it
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var rec struct {
				Listen string `json:"listen"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Listen != "" {
				select {
				case addrs <- rec.Listen:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
	})
	select {
	case a := <-addrs:
		return a
	case <-done:
		t.Fatal("the image's binary exited before listening")
	case <-time.After(10 * time.Second):
		t.Fatal("the image's binary is not listening after 10s")
	}
	return ""
}

// checkServes asks base for /healthz and a development token, and claims with it.
func checkServes(t *testing.T, base string) {
	t.Helper()
	get := func(method, url, token, body string) (int, map[string]any) {
		req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	if code, _ := get("GET", base+"/healthz", "", ""); code != 200 {
		t.Fatalf("healthz: %d", code)
	}
	code, tok := get("POST", base+"/dev/token", "", `{"tenant":"acme","oid":"u-ada","name":"Ada","roles":[]}`)
	token, _ := tok["token"].(string)
	if code != 200 || token == "" {
		t.Fatalf("dev token: %d %v", code, tok)
	}
	if code, m := get("POST", base+"/api/locks/ApprovalRequest/r-"+strconv.Itoa(os.Getpid()), token, ""); code != 200 || m["outcome"] != "acquired" {
		t.Fatalf("claim: %d %v", code, m)
	}
}
