package service

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/lockhub/lockhub/cmd/internal/flagenv"
)

// TestAuditFlags: --audit-max-entries and --audit-retention reach the store. The trail
// read over HTTP holds at most the cap, the newest; dropping entries younger than the
// retention warns, naming both settings' values; and a value the store refuses is named
// as its flag.
func TestAuditFlags(t *testing.T) {
	r := start(t, []string{"--audit-max-entries", "3", "--audit-retention", "48h"}, env())
	const lockURL = "/api/locks/ApprovalRequest/r-1001"
	ada := devToken(t, r.url, "u-ada")
	root := devToken(t, r.url, "u-root", "Locks.Admin")
	for range 3 { // 6 entries
		if a := call(t, "POST", r.url+lockURL, ada, ""); a.status != 200 || a.body["outcome"] != "acquired" {
			t.Fatalf("claim: %d %s", a.status, a.raw)
		}
		if a := call(t, "DELETE", r.url+lockURL, ada, ""); a.status != 200 || a.body["outcome"] != "released" {
			t.Fatalf("release: %d %s", a.status, a.raw)
		}
	}
	a := call(t, "GET", r.url+"/api/admin/audit", root, "")
	entries, _ := a.body["entries"].([]any)
	var ops []string
	for _, e := range entries {
		op, _ := e.(map[string]any)["op"].(string)
		ops = append(ops, op)
	}
	if got := strings.Join(ops, " "); a.status != 200 || got != "Released Acquired Released" {
		t.Fatalf("the trail: %d %q (%s), want the newest 3", a.status, got, a.raw)
	}
	if m := call(t, "GET", r.url+"/metrics", "", ""); !strings.Contains(m.raw, "lockhub_audit_trimmed_early_total 3\n") {
		t.Fatalf("/metrics lacks lockhub_audit_trimmed_early_total 3")
	}
	var warned bool
	for line := range strings.Lines(r.logs.String()) {
		warned = warned || (strings.Contains(line, "raise --audit-max-entries") &&
			strings.Contains(line, `"max_entries":3`) && strings.Contains(line, `"retention":"48h0m0s"`))
	}
	if !warned {
		t.Fatalf("no warning naming --audit-max-entries 3 and --audit-retention 48h:\n%s", r.logs)
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	for _, tc := range []struct{ arg, flag string }{
		{"--audit-max-entries=-1", "audit-max-entries"},
		{"--audit-retention=-1h", "audit-retention"},
		{"--audit-retention=1us", "audit-retention"},
	} {
		m := &Main{Args: []string{tc.arg}, LookupEnv: env(), Stdout: io.Discard, Stderr: io.Discard}
		var fe *flagenv.Error
		if err := m.Run(t.Context()); !errors.As(err, &fe) || fe.Flag != tc.flag {
			t.Errorf("%s: Run = %v, want it to name --%s", tc.arg, err, tc.flag)
		}
	}
}
