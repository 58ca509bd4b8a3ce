// Package e2e holds lockhub's end-to-end tests: the browser client (web/static/lockhub.js
// and its modules in web/static/lockhub/) and the demo page (web/demo/static) driven in
// a real headless Chromium through chromedp, against a fake hub written with
// github.com/coder/websocket (client_test.go, demopage_test.go, presence_client_test.go,
// line_client_test.go: the waiting line, a pending release, German messages, the grid's
// bulk approve) and against the real lockhub binary with a real redis-server
// (story_test.go, the eight scenarios of issue 5; presence_story_test.go, three people on
// one request of issue 12; react_test.go, the React example of the client's npm package,
// bundled by esbuild from the package's dev dependencies, which it installs with npm ci
// when they are missing). The client's core has its own unit tests under Node
// (web/static/lockhub/test, make client-test).
//
// The fake hub serves every page under a strict Content-Security-Policy (strictCSP:
// no 'unsafe-inline'), and the client tests fail on any violation the tab reports;
// the demo page's test fails on any console error at all.
//
// No test asserts that nothing happens by waiting a while. Against the fake hub, the
// absence of a frame is checked after a barrier (clientEnv.barrier in client_test.go): a
// round trip on the client's socket, whose end comes after anything the client sends in
// answer to what came before it. Against the real hub, a page's request answered
// (the hub answers a socket's requests in order) does the same. Where the absence is
// of something a timer would do, a test waits for a sign that its time has come.
//
// Start with story_test.go. browser_test.go starts Chromium and holds the small
// helpers (evaluate, poll with a deadline, click, the console of a tab, side-by-side
// screenshots).
//
// Chromium is looked up as $LOCKHUB_CHROMIUM, /usr/bin/chromium, or chromium in PATH;
// `make deps` installs it. Screenshots go to $LOCKHUB_E2E_OUT, else
// testdata/e2e-output/ next to this file.
//
// The package has no non-test code.
package e2e
