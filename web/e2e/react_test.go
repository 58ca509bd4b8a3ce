package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks/redistest"
)

// clientDir is the browser client's npm package, next to the files the hub serves.
var clientDir = filepath.Join("..", "static", "lockhub")

// npmCI installs the client's dev dependencies from its lock file when they are
// missing (make client-deps does the same before go test).
func npmCI(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(clientDir, "node_modules", ".package-lock.json")); err == nil {
		return
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatal("e2e: npm is missing; `make deps` installs nodejs and npm (sudo apt-get install -y nodejs npm)")
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = clientDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e: npm ci in %s: %v\n%s", clientDir, err, out)
	}
}

// buildReactExample bundles examples/react/app.jsx with React (esbuild, from the
// client's dev dependencies) into a directory with the page and the styles.
func buildReactExample(t *testing.T) string {
	t.Helper()
	npmCI(t)
	dir := t.TempDir()
	esbuild := filepath.Join("node_modules", ".bin", "esbuild")
	cmd := exec.Command(esbuild, filepath.Join("examples", "react", "app.jsx"),
		"--bundle", "--format=esm", "--jsx=automatic", "--minify",
		`--define:process.env.NODE_ENV="production"`, "--outfile="+filepath.Join(dir, "app.js"), "--log-level=warning")
	cmd.Dir = clientDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e: esbuild the React example: %v\n%s", err, out)
	}
	for src, dst := range map[string]string{
		filepath.Join(clientDir, "examples", "react", "index.html"): "index.html",
		filepath.Join(clientDir, "..", "lockhub.css"):               "lockhub.css",
	} {
		if err := copyFile(src, filepath.Join(dir, dst)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReactExample runs the React example page (useLockClient, useLock, useLocks) in
// Chromium against the real binary: the page is served from an origin of its own, as
// an application's would be, under a CSP without 'unsafe-inline'. Ada holds r-1001,
// Grace's page shows Ada's lock and that she is next; she stops waiting and waits
// again; Ada releases, and the hub hands the lock to Grace's page without a claim of
// its own; Ada wants it again and waits behind Grace.
func TestReactExample(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := buildReactExample(t)

	var csp string // set before the first request, once the hub's address is known
	files := http.FileServer(http.Dir(dir))
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Cache-Control", "no-store")
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(app.Close)

	rds := redistest.StartServer(t)
	hub := startHub(t, bin, rds.URL(), "--allowed-origins", app.URL, "--release-grace", "1s")
	wsURL := "ws://" + hub.addr + "/ws"
	csp = fmt.Sprintf("default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self' %s", wsURL)
	browser := startBrowser(t)

	open := func(p person) *tab {
		url := fmt.Sprintf("%s/?hub=%s&token=%s", app.URL, wsURL, hub.token(t, p))
		tb := newTab(t, browser, strings.Fields(p.name)[0], url)
		t.Cleanup(func() { noConsole(t, tb, "an uncaught exception or a CSP violation", isUncaughtOrCSP) })
		waitFor(t, tb, "the page connected", sel("conn")+`.dataset.state === 'open'`, 10*time.Second, `document.body.innerText`)
		return tb
	}
	status := func(s string) string { return sel("request") + `.dataset.status === ` + jsString(s) }
	const diag = `JSON.stringify({status: document.querySelector('[data-testid="request"]')?.dataset.status, text: document.body.innerText})`

	pAda := open(ada)
	waitFor(t, pAda, "Ada holds r-1001", status("held"), 5*time.Second, diag)
	waitFor(t, pAda, "useLocks lists Ada's lock", sel("locks")+`.querySelector('li[data-uid="r-1001"]')?.dataset.holder === 'u-ada'`, 5*time.Second, diag)

	pGrace := open(grace)
	waitFor(t, pGrace, "Grace blocked by Ada", status("locked")+` && `+sel("banner")+`.textContent.startsWith('Locked by Ada Lovelace')`, 5*time.Second, diag)
	if !eval[bool](t, pGrace, sel("fields")+`.disabled`) {
		t.Error("Grace's fields are editable while Ada holds the lock")
	}
	waitFor(t, pGrace, "Grace's page lists Ada editing", sel("others")+`.textContent === 'Ada Lovelace is editing'`, 5*time.Second, diag)
	waitFor(t, pAda, "Ada's page lists Grace waiting 1st", sel("others")+`.textContent === 'Grace Hopper is waiting (1st)'`, 5*time.Second, diag)
	waitFor(t, pGrace, "Grace is next", sel("request")+`.dataset.position === '1' && `+sel("banner")+`.textContent.includes('Locked by Ada Lovelace · you are next')`, 5*time.Second, diag)

	// stopWaiting and wait: out of the line and back in.
	click(t, pGrace, "stop-waiting")
	waitFor(t, pAda, "Ada's page lists Grace viewing", sel("others")+`.textContent === 'Grace Hopper is viewing'`, 5*time.Second, diag)
	click(t, pGrace, "wait")
	waitFor(t, pAda, "Ada's page lists Grace waiting again", sel("others")+`.textContent === 'Grace Hopper is waiting (1st)'`, 5*time.Second, diag)

	eval[bool](t, pGrace, recordFrames)
	start := time.Now()
	click(t, pAda, "release")
	waitFor(t, pAda, "Ada's page released", status("released"), 5*time.Second, diag)
	waitFor(t, pGrace, "Grace holds r-1001", status("held")+` && !`+sel("fields")+`.disabled`, 5*time.Second, diag)
	t.Logf("Grace's page held the lock %v after Ada clicked Release", time.Since(start).Round(time.Millisecond))
	if n := eval[int](t, pGrace, `sentFrames.filter((f) => f.type === 'claim').length`); n != 0 {
		t.Errorf("Grace's page claimed besides the hand-off: %s", eval[string](t, pGrace, `JSON.stringify(sentFrames)`))
	}
	waitFor(t, pAda, "Ada's useLocks shows Grace's lock", sel("locks")+`.querySelector('li[data-uid="r-1001"]')?.dataset.holder === 'u-grace'`, 5*time.Second, diag)
	if got := hub.locksOf(t, grace)["r-1001"].HolderOID; got != "u-grace" {
		t.Errorf("the hub says r-1001 is held by %q", got)
	}

	// Ada wants it again (claim() after her release): a new hold, blocked by Grace.
	click(t, pAda, "claim")
	waitFor(t, pAda, "Ada blocked by Grace", status("locked")+` && `+sel("banner")+`.textContent.startsWith('Locked by Grace Hopper')`, 5*time.Second, diag)
	waitFor(t, pGrace, "Grace's page lists Ada waiting", `/^Ada Lovelace is waiting/.test(`+sel("others")+`.textContent)`, 5*time.Second, diag)
}
