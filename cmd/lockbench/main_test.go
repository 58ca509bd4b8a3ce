package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockhub/lockhub/hub"
	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"defaults", nil, true},
		{"inproc", []string{"-inproc", "-watchers", "10000"}, true},
		{"ipv6 loopback", []string{"-url", "ws://[::1]:8080/ws"}, true},
		{"localhost", []string{"-url", "ws://localhost:8080/ws"}, true},
		{"not loopback", []string{"-url", "ws://10.0.0.1:8080/ws"}, false},
		{"a name", []string{"-url", "ws://example.com/ws"}, false},
		{"token url elsewhere", []string{"-token-url", "http://10.0.0.1/dev/token"}, false},
		{"redis elsewhere", []string{"-redis-url", "redis://10.0.0.1:6379/0"}, false},
		{"not ws", []string{"-url", "http://127.0.0.1:8080/ws"}, false},
		{"too many watchers", []string{"-watchers", "50001"}, false},
		{"no watchers", []string{"-watchers", "0"}, false},
		{"over the socket rate", []string{"-claimers", "1", "-rate", "21"}, false},
		{"timeout unbounded", []string{"-timeout", "10h"}, false},
		{"foreign", []string{"-mode", "foreign", "-redis-url", "redis://127.0.0.1:6390/0"}, true},
		{"foreign without redis", []string{"-mode", "foreign"}, false},
		{"foreign, too few entities", []string{"-mode", "foreign", "-redis-url", "redis://127.0.0.1:6390/0", "-entities", "10"}, false},
		{"foreign, too many hubs", []string{"-mode", "foreign", "-redis-url", "redis://127.0.0.1:6390/0", "-instances", "9"}, false},
		{"no such mode", []string{"-mode", "fast"}, false},
		{"share", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0"}, true},
		{"share without redis", []string{"-mode", "share"}, false},
		{"share on a cluster", []string{"-mode", "share", "-redis-cluster", "-redis-url", "redis://127.0.0.1:6390"}, true},
		{"a cluster without share", []string{"-mode", "foreign", "-redis-cluster", "-redis-url", "redis://127.0.0.1:6390/0"}, false},
		{"share, traced", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0", "-trace", "/tmp/share.trace"}, true},
		{"a trace without share", []string{"-mode", "foreign", "-redis-url", "redis://127.0.0.1:6390/0", "-trace", "/tmp/share.trace"}, false},
		{"share, too many people", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0", "-share-people", "65"}, false},
		{"share, too short", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0", "-share-for", "10ms"}, false},
		{"share, no pairs", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0", "-share-pairs", "0"}, false},
		{"share, too many pairs", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0", "-share-pairs", "21"}, false},
		{"share, some kinds", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0", "-share-kinds", "watch, list"}, true},
		{"share, no such kind", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0", "-share-kinds", "watch,delete"}, false},
		{"share, a kind twice", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0", "-share-kinds", "list,list"}, false},
		{"share, kinds empty", []string{"-mode", "share", "-redis-url", "redis://127.0.0.1:6390/0", "-share-kinds", ""}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			m := &Main{Stderr: &stderr}
			if err := m.ParseFlags(tc.args); (err == nil) != tc.ok {
				t.Fatalf("ParseFlags(%q) = %v", tc.args, err)
			}
		})
	}
	m := &Main{Stderr: &bytes.Buffer{}}
	if err := m.ParseFlags([]string{"-url", "ws://127.0.0.1:9/ws"}); err != nil || m.opt.tokenURL != "http://127.0.0.1:9/dev/token" {
		t.Fatalf("token URL = %q, %v", m.opt.tokenURL, err)
	}

	// Every flag may come from LOCKBENCH_<NAME>; a flag wins, and a refusal names the
	// variable the value came from.
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	m = &Main{Stderr: &bytes.Buffer{}, LookupEnv: env("LOCKBENCH_WATCHERS", "123", "LOCKBENCH_CLAIMERS", "9")}
	if err := m.ParseFlags([]string{"-claimers", "3"}); err != nil || m.opt.watchers != 123 || m.opt.claimers != 3 {
		t.Fatalf("watchers %d, claimers %d, %v; want 123 from the environment, 3 from the flag", m.opt.watchers, m.opt.claimers, err)
	}
	m = &Main{Stderr: &bytes.Buffer{}, LookupEnv: env("LOCKBENCH_WATCHERS", "0")}
	if err := m.ParseFlags(nil); err == nil || !strings.Contains(err.Error(), "LOCKBENCH_WATCHERS (--watchers): must be 1 to") {
		t.Fatalf("ParseFlags with LOCKBENCH_WATCHERS=0 = %v", err)
	}
}

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	s := summarize(d)
	if s.N != 100 || s.P50 != 51 || s.P99 != 100 || s.Max != 100 || s.Mean != 50.5 {
		t.Fatalf("summary = %+v", s)
	}
	if summarize(nil).N != 0 {
		t.Fatal("empty summary")
	}
}

// TestExternalRun drives a hub served by the test, as lockbench drives a running hub.
func TestExternalRun(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	store, err := locks.NewStore(locks.Config{Client: rdb, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := auth.NewDev(auth.DevConfig{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hub.New(hub.Config{Store: hub.StoreOf(store), Verifier: auth})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- h.Run(ctx) }()
	mux := http.NewServeMux()
	mux.Handle("GET /ws", h)
	mux.HandleFunc("POST /dev/token", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Tenant, OID, Name string }
		_ = json.NewDecoder(r.Body).Decode(&req) // a bad body fails Issue
		tok, err := auth.Issue(req.Tenant, req.OID, req.Name, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
	})
	srv := httptest.NewServer(mux)
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := h.Shutdown(sctx); err != nil {
			t.Error(err)
		}
		cancel()
		<-runDone
		srv.Close()
	}()

	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	args := []string{"-url", url, "-watchers", "20", "-claimers", "2", "-claims", "3", "-rate", "20",
		"-redis-url", "redis://" + mr.Addr() + "/0", "-pairs", "5", "-floor", "20", "-timeout", "1m"}
	if err := m.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s", err, errOut.String())
	}
	report := out.String()
	for _, want := range []string{"20 open and watching", "6 acquired, 0 failed", "240 expected, 240 received, 0 lost",
		"socket vs direct", "machine floor"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestForeignRun: a short -mode foreign run on a real redis-server, two hubs in this
// process, each change of the .NET scripts received once by each hub's watcher.
func TestForeignRun(t *testing.T) {
	srv := redistest.StartServer(t)
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	args := []string{"-mode", "foreign", "-redis-url", srv.URL(), "-changes", "12", "-change-rate", "20", "-timeout", "1m"}
	if err := m.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if m.opt.watchers != 1 {
		t.Fatalf("watchers per hub = %d, want 1 by default in foreign mode", m.opt.watchers)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	report := out.String()
	for _, want := range []string{"1 per instance", "12 by the .NET scripts", "instance 0: p50", "instance 1: p50", "(n=24)", "mismatches          0"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestLeadingType: the clients' check of an answer's type reads a frame's members up
// to "type" wherever it stands, and refuses what is not a frame.
func TestLeadingType(t *testing.T) {
	for in, want := range map[string]protocol.FrameType{
		`{"id":"w","type":"snapshot","entityType":"ApprovalRequest","locks":[{"entityUid":"r-1"}]}`: protocol.FrameSnapshot,
		`{"locks":[{"type":"lock"}],"id":"w","type":"snapshot"}`:                                    protocol.FrameSnapshot,
		`{"type":"welcome","holder":{"oid":"u-1"}}`:                                                 protocol.FrameWelcome,
	} {
		if got, err := leadingType([]byte(in)); err != nil || got != want {
			t.Errorf("leadingType(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `[]`, `"snapshot"`, `{}`, `{"id":"w"}`, `{"type":7}`, `{"type":null}`, `{"id":}`, `{"id":"w",`} {
		if got, err := leadingType([]byte(bad)); err == nil {
			t.Errorf("leadingType(%s) = %q, want an error", bad, got)
		}
	}
}

// TestShareRun: a short -mode share run on a real redis-server: the big tenant's locks
// written as the .NET API writes them, its people's load, the small tenant's claims,
// and every figure of the report, read from the server it measured.
func TestShareRun(t *testing.T) {
	srv := redistest.StartServer(t)
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, clientsInProcess: true}
	args := []string{"-mode", "share", "-redis-url", srv.URL(), "-share-locks", "300", "-share-people", "2", "-share-for", "1s", "-share-pairs", "2", "-timeout", "1m"}
	if err := m.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	report := out.String()
	for _, want := range []string{"a tenant of 300 locks and 2 of its people", "(watch, mine, adminLocks, list, claim)", "slowest command lockhub sent to Redis", "Redis CPU:", "small tenant's claims alone:      p50", "small tenant's claims under load: p50", "of 2 pairs pooled; each pair: ", "the floor, a ping to the hub (no Redis): p99 ", "the floor, EXISTS straight to Redis (no hub): p99 ", `"locks":300`} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if !strings.Contains(report, "watch:") || strings.Contains(report, "watch:0") {
		t.Errorf("the big tenant's people sent no watch:\n%s", report)
	}
	var res shareResult
	_, js, _ := strings.Cut(report, "json: ")
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		t.Fatalf("the report's json: %v\n%s", err, report)
	}
	// Each pair measured its own claims, and the pooled phases hold them all: 16
	// people, a pair each 0.5 s, so about 32 claims a phase of 1 s.
	if len(res.Pairs) != 2 {
		t.Fatalf("%d pairs, want 2", len(res.Pairs))
	}
	for i, p := range res.Pairs {
		if p.Alone.N < smallPeople || p.Loaded.N < smallPeople {
			t.Errorf("pair %d measured %d claims alone and %d under load, want at least %d each", i+1, p.Alone.N, p.Loaded.N, smallPeople)
		}
	}
	if n := res.Pairs[0].Alone.N + res.Pairs[1].Alone.N; res.Alone.Claims.N != n {
		t.Errorf("pooled alone: %d claims, the pairs measured %d", res.Alone.Claims.N, n)
	}
	if n := res.Pairs[0].Loaded.N + res.Pairs[1].Loaded.N; res.Loaded.Claims.N != n {
		t.Errorf("pooled under load: %d claims, the pairs measured %d", res.Loaded.Claims.N, n)
	}
	for _, ph := range []sharePhase{res.Alone, res.Loaded} {
		if ph.Pings.N != ph.Claims.N || ph.Redis.N != ph.Claims.N {
			t.Errorf("pooled: %d claims, %d pings, %d EXISTS; want as many of each", ph.Claims.N, ph.Pings.N, ph.Redis.N)
		}
	}
	if res.PingRatio <= 0 || res.RedisRatio <= 0 {
		t.Errorf("the floor's ratios: ping %v, EXISTS %v; want both measured", res.PingRatio, res.RedisRatio)
	}
}

// TestShareRunKinds: -share-kinds limits what the big tenant's people send.
func TestShareRunKinds(t *testing.T) {
	res := runShareKinds(t, "mine,claim")
	if res.Requests["mine"] == 0 || res.Requests["claim"] == 0 {
		t.Errorf("requests %v, want mine and claim", res.Requests)
	}
	for _, k := range []string{"watch", "adminLocks", "list"} {
		if res.Requests[k] != 0 {
			t.Errorf("requests %v: %s sent, not asked for", res.Requests, k)
		}
	}
}

// TestShareRunCluster: -mode share on the 6-node cluster: the small tenant on the big
// one's shard, and SLOWLOG and CPU read from every master.
func TestShareRunCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node cluster")
	}
	cl := redistest.StartCluster(t)
	addrs := cl.MasterAddrs()
	url := "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, clientsInProcess: true}
	args := []string{"-mode", "share", "-redis-cluster", "-redis-url", url, "-share-locks", "300", "-share-people", "2", "-share-for", "1s", "-timeout", "1m"}
	if err := m.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	report := out.String()
	for _, want := range []string{"a tenant of 300 locks and 2 of its people", "slowest command lockhub sent to Redis",
		"less the fast commands inside it", "the floor, the slowest command Redis flags fast", "small tenant's claims under load: p50"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestShareChild: the load's process of -mode share (runShareChild), driven as the
// parent drives it: READY once its people's sockets are open, then, when its stdin
// ends, RESULT with what they sent, every kind of request among it.
func TestShareChild(t *testing.T) {
	srv, ih := startShareHub(t)
	ctx := minuteCtx(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errOut bytes.Buffer
	m := &Main{Stdin: inR, Stdout: outW, Stderr: &errOut}
	if err := m.ParseFlags([]string{"-mode", "share", "-child", "-redis-url", srv.URL(), "-url", ih.url, "-token-url", ih.token,
		"-tenant", "big", "-type", "ApprovalRequest", "-share-people", "2", "-timeout", "1m"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := m.Run(ctx)
		_ = outW.CloseWithError(err)
		done <- err
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() || sc.Text() != "READY" {
		t.Fatalf("first line %q (%v), want READY; stderr: %s", sc.Text(), sc.Err(), errOut.String())
	}
	// A person sends a claim after one of each other kind, and counts a request once it is
	// answered, before it sends the next. Three claims read by the hub mean one person sent
	// two, so its first claim, and one of each other kind, are counted: fewer could all be
	// in flight when stdin ends, and a request still in flight then is not counted.
	redistest.Eventually(t, "a person's second claim", func() bool { return claimsIn(t, ih) >= 3 })
	_ = inW.Close()
	if !sc.Scan() {
		t.Fatalf("no RESULT after stdin ended: %v; stderr: %s", sc.Err(), errOut.String())
	}
	line, ok := strings.CutPrefix(sc.Text(), "RESULT ")
	if !ok {
		t.Fatalf("got %q, want RESULT", sc.Text())
	}
	var res shareResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatal(err)
	}
	for _, kind := range loadKinds {
		if res.Requests[kind] == 0 {
			t.Errorf("no %s counted: %v", kind, res.Requests)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("the child: %v", err)
	}
}

// claimsIn is the claim frames the hub has read.
func claimsIn(t *testing.T, ih *inprocHub) float64 {
	mfs, err := ih.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "lockhub_hub_frames_in_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == string(protocol.FrameClaim) {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestShareSmallChild: the small tenant's process of -mode share (runSmallChild) claims
// and releases for -share-for and reports every claim's latency.
func TestShareSmallChild(t *testing.T) {
	srv, ih := startShareHub(t)
	ctx := minuteCtx(t)
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	if err := m.ParseFlags([]string{"-mode", "share", "-child", "-share-small", "-redis-url", srv.URL(), "-url", ih.url, "-token-url", ih.token,
		"-tenant", "small", "-type", "ApprovalRequest", "-share-for", "1s", "-timeout", "1m"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatalf("Run: %v; stderr: %s", err, errOut.String())
	}
	line, ok := strings.CutPrefix(strings.TrimSpace(out.String()), "RESULT ")
	if !ok {
		t.Fatalf("output %q, want RESULT", out.String())
	}
	var r smallResult
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	// 16 people, a pair each every 0.5 s from a start spread over the first 0.5 s: at
	// least one claim each in 1 s.
	if len(r.Latencies) < smallPeople || r.Unknown != 0 {
		t.Fatalf("%d claims, %d failed open; want at least %d, none failed", len(r.Latencies), r.Unknown, smallPeople)
	}
	// Beside each claim, a ping to the hub and an EXISTS straight to Redis.
	if len(r.Pings) != len(r.Latencies) || len(r.Redis) != len(r.Latencies) {
		t.Fatalf("%d claims, %d pings, %d EXISTS; want as many of each", len(r.Latencies), len(r.Pings), len(r.Redis))
	}
	for i := range r.Latencies {
		if r.Latencies[i] <= 0 || r.Pings[i] <= 0 || r.Redis[i] <= 0 {
			t.Fatalf("round trip %d: claim %v, ping %v, EXISTS %v", i, r.Latencies[i], r.Pings[i], r.Redis[i])
		}
	}
}

// startShareHub starts a redis-server and a hub on it with every limit at its default,
// as -mode share runs one; both stop when the test ends.
func startShareHub(t *testing.T) (*redistest.Server, *inprocHub) {
	t.Helper()
	srv := redistest.StartServer(t)
	ih, err := startHub(minuteCtx(t), srv.URL(), "ApprovalRequest", true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ih.stop(); err != nil {
			t.Error(err)
		}
	})
	return srv, ih
}

// minuteCtx is a context that ends a minute from now or with the test.
func minuteCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestShareRunIdle: -share-kinds idle, the control: the big tenant's people open their
// sockets in the phase under load and send nothing, and every phase is still measured.
func TestShareRunIdle(t *testing.T) {
	res := runShareKinds(t, "idle")
	if len(res.Requests) != 0 || len(res.Refused) != 0 {
		t.Errorf("requests %v, refused %v: an idle load sent something", res.Requests, res.Refused)
	}
	if res.Loaded.Claims.N == 0 || res.P99Ratio <= 0 {
		t.Errorf("the phase under the idle load: %d claims, ratio %v; want it measured", res.Loaded.Claims.N, res.P99Ratio)
	}
	if !slices.Equal(res.Kinds, []string{"idle"}) {
		t.Errorf("kinds %v, want [idle] in the report", res.Kinds)
	}
}

// runShareKinds runs a short -mode share on a redis-server of its own with -share-kinds
// kinds, and returns the report's JSON.
func runShareKinds(t *testing.T, kinds string) shareResult {
	t.Helper()
	srv := redistest.StartServer(t)
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, clientsInProcess: true}
	args := []string{"-mode", "share", "-redis-url", srv.URL(), "-share-locks", "300", "-share-people", "2", "-share-for", "1s", "-share-pairs", "1", "-share-kinds", kinds, "-timeout", "1m"}
	if err := m.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	_, js, _ := strings.Cut(out.String(), "json: ")
	var res shareResult
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		t.Fatalf("the report's json: %v\n%s", err, out.String())
	}
	return res
}

// TestParseLoadKinds: -share-kinds takes known kinds once each, and idle only alone.
func TestParseLoadKinds(t *testing.T) {
	for v, want := range map[string]string{
		"mine,claim": "",
		"idle":       "",
		" idle ":     "",
		"idle,mine":  `"idle" sends nothing, so it goes alone`,
		"mine,idle":  `"idle" sends nothing, so it goes alone`,
		"mine,mine":  `"mine" twice`,
		"ping":       `"ping" is not one of watch,mine,adminLocks,list,claim (or idle alone)`,
	} {
		_, err := parseLoadKinds(v)
		if got := fmt.Sprint(err); (want == "" && err != nil) || (want != "" && got != want) {
			t.Errorf("parseLoadKinds(%q): %v, want %q", v, err, want)
		}
	}
}
