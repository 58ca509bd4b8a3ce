package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Viewport of every tab: two of them side by side make one screenshot.
const (
	viewportW = 1280
	viewportH = 800
)

// chromiumPath finds the browser: $LOCKHUB_CHROMIUM, Debian's /usr/bin/chromium, or
// chromium in PATH. It fails the test (never skips) with how to install it.
func chromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("LOCKHUB_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatal("e2e: chromium not found; install it with `make deps` (apt-get install -y chromium) or set LOCKHUB_CHROMIUM")
	return ""
}

// startBrowser starts a headless Chromium owned by t, with a fresh profile, and
// returns its root context. Every tab opened from it with newTab lives in its own
// browser context (cookies, storage), as a separate person would.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		// Several tabs run at once; none of them may be throttled as a background tab.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(viewportW, viewportH),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		_ = chromedp.Cancel(cctx) // closes the browser gracefully; errors only mean it is gone already
		ccancel()
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("e2e: start chromium: %v", err)
	}
	return ctx
}

// tab is one page in its own browser context: one person.
type tab struct {
	name    string
	ctx     context.Context
	cancel  context.CancelFunc
	closed  bool
	console *consoleLog // what the page reported from the moment it opened
}

// newTab opens a tab in a new browser context of the browser and navigates it to url.
// The tab is closed when t ends.
func newTab(t *testing.T, browser context.Context, name, url string) *tab {
	t.Helper()
	return openTab(t, t, browser, name, url)
}

// openTab is newTab with the tab closed when owner ends (a parent test, say).
func openTab(t, owner *testing.T, browser context.Context, name, url string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	tb := &tab{name: name, ctx: ctx, cancel: cancel, console: &consoleLog{}}
	owner.Cleanup(tb.close)
	// Before the navigation, so that what the page reports while it loads is seen.
	if err := chromedp.Listen(ctx, tb.console.record); err != nil {
		t.Fatalf("e2e: %s: listen to the console: %v", name, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(viewportW, viewportH),
		chromedp.Navigate(url),
	); err != nil {
		t.Fatalf("e2e: %s: open %s: %v", name, url, err)
	}
	return tb
}

// close closes the tab as a user closing it would (the page gets pagehide).
func (tb *tab) close() {
	if tb.closed {
		return
	}
	tb.closed = true
	tb.cancel()
}

// consoleLog records what a tab reports on its console: calls of console.error and
// console.warn, uncaught exceptions, and the browser's own log entries (a Content
// Security Policy violation, a failed load). It is written by chromedp's reader of the
// tab (Listen) and read by the test, hence the lock.
type consoleLog struct {
	mu   sync.Mutex
	msgs []consoleMsg
}

// consoleMsg is one message: its level (error, warning, exception, ...), where it
// came from ("security" for a CSP violation, "network", "javascript"; empty for a
// console API call), its text, and the URL it is about, if any.
type consoleMsg struct {
	level, source, text, url string
}

func (m consoleMsg) String() string {
	s := m.level + ": " + m.text
	if m.source != "" {
		s = m.level + " (" + m.source + "): " + m.text
	}
	if m.url != "" {
		s += " [" + m.url + "]"
	}
	return s
}

// record is chromedp's Listen callback: it runs on the tab's reader, so it only
// appends.
func (l *consoleLog) record(ev any) {
	var m consoleMsg
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeWarning && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		parts := make([]string, 0, len(ev.Args))
		for _, a := range ev.Args {
			var s string
			if a.Type == runtime.RemoteObjectTypeString && json.Unmarshal(a.Value, &s) == nil {
				parts = append(parts, s)
			} else {
				parts = append(parts, a.Description)
			}
		}
		m = consoleMsg{level: string(ev.Type), text: strings.Join(parts, " ")}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		m = consoleMsg{level: "exception", text: d.Text}
		if d.Exception != nil {
			m.text += " " + d.Exception.Description
		}
	case *cdplog.EventEntryAdded:
		m = consoleMsg{level: string(ev.Entry.Level), source: string(ev.Entry.Source), text: ev.Entry.Text, url: ev.Entry.URL}
	default:
		return
	}
	l.mu.Lock()
	l.msgs = append(l.msgs, m)
	l.mu.Unlock()
}

// matching returns the messages for which keep is true.
func (l *consoleLog) matching(keep func(consoleMsg) bool) []consoleMsg {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []consoleMsg
	for _, m := range l.msgs {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// isCSPViolation tells a report of a Content-Security-Policy violation: Chromium logs
// each one as an error, "Refused to ... because it violates the following Content
// Security Policy directive".
func isCSPViolation(m consoleMsg) bool {
	return strings.Contains(m.text, "Content Security Policy")
}

// isFault tells a message that a page without faults never writes: an error of any
// kind, an uncaught exception, a CSP violation.
func isFault(m consoleMsg) bool {
	return m.level == "error" || m.level == "exception" || m.level == "assert" || isCSPViolation(m)
}

// isUncaughtOrCSP tells an uncaught exception (or unhandled rejection) or a CSP
// violation: what a page must never report, even while its hub is down.
func isUncaughtOrCSP(m consoleMsg) bool {
	return m.level == "exception" || isCSPViolation(m)
}

// noConsole fails the test when the tab reported a message for which bad is true.
func noConsole(t *testing.T, tb *tab, what string, bad func(consoleMsg) bool) {
	t.Helper()
	for _, m := range tb.console.matching(bad) {
		t.Errorf("e2e: %s: %s on the console: %s", tb.name, what, m)
	}
}

// eval evaluates a JavaScript expression in the tab and decodes its value into T.
// Promises are awaited.
func eval[T any](t *testing.T, tb *tab, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("e2e: %s: evaluate %s: %v", tb.name, short(js), err)
	}
	return v
}

// checkAll evaluates each named check, a JS expression that must be true, as a
// subtest of that name (in the order of the names), and reports each that is not;
// diag, when not empty, is evaluated and added to a report.
func checkAll(t *testing.T, tb *tab, checks map[string]string, diag string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(checks)) {
		js := checks[name]
		t.Run(name, func(t *testing.T) {
			if eval[bool](t, tb, js) {
				return
			}
			if diag != "" {
				t.Errorf("%s is false; %s", short(js), eval[string](t, tb, diag))
			} else {
				t.Errorf("%s is false", short(js))
			}
		})
	}
}

// waitFor polls a JavaScript predicate in the tab until it is truthy or timeout
// passes; on timeout it fails the test, showing diag (a JavaScript expression
// evaluated for the message). It returns how long the wait took.
func waitFor(t *testing.T, tb *tab, what, predicate string, timeout time.Duration, diag string) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(tb.ctx, timeout+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](predicate,
		chromedp.WithPollingInterval(25*time.Millisecond),
		chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		msg := ""
		if diag != "" {
			dctx, dcancel := context.WithTimeout(tb.ctx, 3*time.Second)
			raw, derr := chromedp.Run(dctx, chromedp.Evaluate[[]byte](diag))
			dcancel()
			msg = string(raw)
			if derr != nil {
				msg = derr.Error()
			}
		}
		t.Fatalf("e2e: %s: waiting %v for %s: %v\n  page: %s", tb.name, timeout, what, err, msg)
	}
	return time.Since(start)
}

// click clicks the element with data-testid id, as a user with a mouse would.
//
// A live event may redraw the element between chromedp's query and its click (a grid
// row re-rendered on Acquired); the click then finds its node gone. click queries
// again and clicks the redrawn element, as a person would, for up to 15 s.
func click(t *testing.T, tb *tab, testid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	for {
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-testid=%q]`, testid))))
		if err == nil {
			return
		}
		if !nodeGone(err) || ctx.Err() != nil {
			t.Fatalf("e2e: %s: click %s: %v", tb.name, testid, err)
		}
	}
}

// nodeGone reports whether err is the browser saying a queried node left the
// document before the action on it ran.
func nodeGone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Could not find node with given id") ||
		strings.Contains(s, "Node is detached from document") ||
		strings.Contains(s, "No node with given id found")
}

// testid is the CSS selector of a data-testid, quoted for JavaScript.
func testid(id string) string { return jsString(fmt.Sprintf(`[data-testid=%q]`, id)) }

func jsString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

// screenshot returns a PNG of the tab's viewport.
func screenshot(t *testing.T, tb *tab) image.Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("e2e: %s: screenshot: %v", tb.name, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("e2e: %s: decode screenshot: %v", tb.name, err)
	}
	return img
}

// sideBySide draws images left to right on a dark background with a gap.
func sideBySide(imgs ...image.Image) image.Image {
	const gap = 16
	w, h := gap, 0
	for _, im := range imgs {
		b := im.Bounds()
		w += b.Dx() + gap
		h = max(h, b.Dy())
	}
	h += 2 * gap
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(out, out.Bounds(), &image.Uniform{color.RGBA{0x2b, 0x31, 0x3c, 0xff}}, image.Point{}, draw.Src)
	x := gap
	for _, im := range imgs {
		b := im.Bounds()
		draw.Draw(out, image.Rect(x, gap, x+b.Dx(), gap+b.Dy()), im, b.Min, draw.Src)
		x += b.Dx() + gap
	}
	return out
}

// outputDir is where screenshots and logs go: $LOCKHUB_E2E_OUT, else
// testdata/e2e-output (git-ignored). t.TempDir would delete them.
func outputDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("LOCKHUB_E2E_OUT")
	if dir == "" {
		dir = filepath.Join("testdata", "e2e-output")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("e2e: output dir: %v", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		t.Fatalf("e2e: output dir: %v", err)
	}
	return abs
}

// saveShot saves the tabs side by side as name.png in the output directory and
// returns its path.
func saveShot(t *testing.T, name string, tabs ...*tab) string {
	t.Helper()
	imgs := make([]image.Image, 0, len(tabs))
	for _, tb := range tabs {
		imgs = append(imgs, screenshot(t, tb))
	}
	path := filepath.Join(outputDir(t), name+".png")
	if err := writePNG(path, sideBySide(imgs...)); err != nil {
		t.Fatalf("e2e: save %s: %v", path, err)
	}
	t.Logf("screenshot %s", path)
	return path
}

func writePNG(path string, img image.Image) error {
	var buf bytes.Buffer
	// BestSpeed: the default level costs seconds per shot under -race.
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// copyFile copies src to dst.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
