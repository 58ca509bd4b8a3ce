package service

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lockhub/lockhub/hub/auth/authtest"
	"github.com/lockhub/lockhub/locks/redistest"
)

// TestRunWithJWKS runs in production mode: tokens are checked against a JWKS, with the
// configured claim names, and there is no /dev/token.
func TestRunWithJWKS(t *testing.T) {
	idp := authtest.NewIDP(t)
	sign := func(aud string, roles ...string) string {
		return idp.Token(t, map[string]any{"aud": []string{aud}, "org": "acme", "oid": "u-ada",
			"name": "Ada Lovelace", "roles": roles})
	}

	r := start(t, []string{"--redis-url", redistest.StartServer(t).URL(), "--jwks-url", idp.URL, "--issuer", authtest.Issuer, "--claim-tenant", "org"},
		env("LOCKHUB_AUDIENCE", authtest.Audience))
	if a := call(t, "POST", r.url+"/dev/token", "", `{"tenant":"acme","oid":"u-ada"}`); a.status != 404 {
		t.Fatalf("/dev/token in production: %d %s", a.status, a.raw)
	}
	good := sign(authtest.Audience, "Locks.TakeOver")
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-1001/takeover", good, ""); a.status != 200 || a.body["outcome"] != "acquired" {
		t.Fatalf("takeover with a JWKS token: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", r.url+"/api/me/locks", sign("api://other"), ""); a.status != 401 {
		t.Fatalf("another audience: %d %s", a.status, a.raw)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if logs := r.logs.String(); strings.Contains(logs, "DEVELOPMENT") || strings.Contains(logs, good[:40]) {
		t.Fatalf("logs:\n%s", logs)
	}
}

// TestRunJWKSUnreachable: a JWKS that cannot be fetched stops the start, naming the
// setting, before anything listens.
func TestRunJWKSUnreachable(t *testing.T) {
	idp := httptest.NewServer(http.NotFoundHandler())
	url := idp.URL + "/keys"
	idp.Close()
	m := &Main{Args: []string{"--listen", "127.0.0.1:0", "--redis-url", "redis://127.0.0.1:1", "--jwks-url", url, "--issuer", "i", "--audience", "a"}, LookupEnv: env(), Stdout: &redistest.LogBuffer{}}
	err := m.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "--jwks-url") {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-m.Ready():
		t.Fatal("listening without its keys")
	default:
	}
}
