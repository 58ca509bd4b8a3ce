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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	name   string
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
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
	tb := &tab{name: name, ctx: ctx, cancel: cancel}
	owner.Cleanup(tb.close)
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

// run runs actions in the tab, failing the test on error.
func run(t *testing.T, tb *tab, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("e2e: %s: %s: %v", tb.name, what, err)
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
func click(t *testing.T, tb *tab, testid string) {
	t.Helper()
	run(t, tb, "click "+testid, chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-testid=%q]`, testid))))
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
