// Package e2e holds lockhub's end-to-end tests: the browser client (web/static/lockhub.js
// and its modules in web/static/lockhub/) and the demo page (web/demo/static) driven in
// a real headless Chromium through chromedp, against a fake hub written with
// github.com/coder/websocket (client_test.go, demopage_test.go, presence_client_test.go)
// and against the real lockhub binary with a real redis-server (story_test.go, the
// eight scenarios of issue 5; presence_story_test.go, three people on one request of
// issue 12).
//
// The fake hub serves every page under a strict Content-Security-Policy (strictCSP:
// no 'unsafe-inline'), and the client tests fail on any violation the tab reports;
// the demo page's test fails on any console error at all.
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
