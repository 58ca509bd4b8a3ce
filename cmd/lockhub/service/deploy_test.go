package service

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/lockhub/lockhub/cmd/internal/flagenv"
	"github.com/lockhub/lockhub/hub/auth/authtest"
	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// deployDir holds the deployment recipes (cmd/lockhub/deploy).
const deployDir = "../deploy"

// shutdownBound is how long PROTOCOL.md §7 gives the shutdown after the drain.
const shutdownBound = 10 * time.Second

// The parts of the Kubernetes objects the checks read.
type (
	k8sObject struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name        string            `json:"name"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec json.RawMessage `json:"spec"`
	}
	deploymentSpec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				ServiceAccountName            string      `json:"serviceAccountName"`
				TerminationGracePeriodSeconds *int        `json:"terminationGracePeriodSeconds"`
				Containers                    []container `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	}
	container struct {
		Name  string   `json:"name"`
		Image string   `json:"image"`
		Args  []string `json:"args"`
		Ports []struct {
			Name          string `json:"name"`
			ContainerPort int    `json:"containerPort"`
		} `json:"ports"`
		Env []struct {
			Name      string          `json:"name"`
			Value     string          `json:"value"`
			ValueFrom json.RawMessage `json:"valueFrom"`
		} `json:"env"`
		ReadinessProbe *probe `json:"readinessProbe"`
		LivenessProbe  *probe `json:"livenessProbe"`
		StartupProbe   *probe `json:"startupProbe"`
		Lifecycle      *struct {
			PreStop json.RawMessage `json:"preStop"`
		} `json:"lifecycle"`
		Resources struct {
			Requests map[string]string `json:"requests"`
			Limits   map[string]string `json:"limits"`
		} `json:"resources"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `json:"path"`
			Port any    `json:"port"` // a name or a number
		} `json:"httpGet"`
	}
)

// manifests reads every YAML document under dir/kubernetes.
func manifests(t *testing.T) []k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", deployDir, err)
	}
	var objs []k8sObject
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var o k8sObject
			if err := yaml.UnmarshalStrict([]byte(doc), &o, yaml.DisallowUnknownFields); err != nil {
				// Strict on the envelope only: spec is RawMessage.
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s, document %d: no apiVersion, kind or name", f, i+1)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func one(t *testing.T, objs []k8sObject, kind string) k8sObject {
	t.Helper()
	var found []k8sObject
	for _, o := range objs {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s manifests, want 1", len(found), kind)
	}
	return found[0]
}

func spec[T any](t *testing.T, o k8sObject) T {
	t.Helper()
	var s T
	if err := json.Unmarshal(o.Spec, &s); err != nil {
		t.Fatalf("%s %s: %v", o.Kind, o.Metadata.Name, err)
	}
	return s
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestDeployManifests checks the Kubernetes manifests against the binary: every
// LOCKHUB_* variable and flag they name exists, their values are settings the binary
// accepts, the probes ask /healthz and /readyz on the port lockhub listens on, the
// drain is --drain-delay and not a preStop hook, the grace period covers the drain and
// the shutdown, and the Service, PodDisruptionBudget, HorizontalPodAutoscaler and
// ServiceAccount point at the Deployment's pods.
func TestDeployManifests(t *testing.T) {
	objs := manifests(t)
	dep := one(t, objs, "Deployment")
	ds := spec[deploymentSpec](t, dep)
	pod := ds.Template.Spec
	if !subset(ds.Selector.MatchLabels, ds.Template.Metadata.Labels) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", ds.Selector.MatchLabels, ds.Template.Metadata.Labels)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want lockhub alone", len(pod.Containers))
	}
	c := pod.Containers[0]

	// Every flag and variable exists, and the values are accepted.
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	new(Config).flags(fs)
	vars := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { vars[flagenv.EnvName(envPrefix, f.Name)] = f.Name })
	var environ []string
	for _, e := range c.Env {
		switch {
		case strings.HasPrefix(e.Name, envPrefix):
			if _, ok := vars[e.Name]; !ok {
				t.Errorf("%s names no setting of lockhub", e.Name)
			}
			environ = append(environ, e.Name, e.Value)
		case e.Name == "GOMEMLIMIT" || e.Name == "GOGC" || strings.HasPrefix(e.Name, "AZURE_"):
		default:
			t.Errorf("variable %s is neither lockhub's, the Go runtime's nor Azure's", e.Name)
		}
	}
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && fs.Lookup(name) == nil {
			t.Errorf("argument %s names no flag of lockhub", a)
		}
	}
	s, err := parseConfig(c.Args, env(environ...), io.Discard)
	if err != nil {
		t.Fatalf("the binary refuses the manifest's settings: %v", err)
	}
	if err := s.check(); err != nil {
		t.Fatalf("the binary refuses the manifest's settings: %v", err)
	}
	if s.Development() || s.RedisAuth != authEntra || !isTLS(s.RedisURL) {
		t.Errorf("the manifest is not production on Azure Managed Redis with Entra ID: development %v, auth %s, URL %s", s.Development(), s.RedisAuth, s.RedisURL)
	}

	// Probes and ports.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	portOf := func(listen string) int {
		_, p, err := net.SplitHostPort(listen)
		if err != nil {
			t.Fatalf("listen address %q: %v", listen, err)
		}
		n, _ := strconv.Atoi(p)
		return n
	}
	probePort := func(what string, p *probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no %s probe", what)
			return
		}
		if p.HTTPGet.Path != path {
			t.Errorf("%s probe asks %s, want %s", what, p.HTTPGet.Path, path)
		}
		port := 0
		switch v := p.HTTPGet.Port.(type) {
		case string:
			port = ports[v]
		case float64:
			port = int(v)
		}
		if port != portOf(s.Listen) {
			t.Errorf("%s probe on port %v (%d), lockhub listens on %s", what, p.HTTPGet.Port, port, s.Listen)
		}
	}
	probePort("readiness", c.ReadinessProbe, "/readyz")
	probePort("liveness", c.LivenessProbe, "/healthz")
	if c.StartupProbe != nil {
		probePort("startup", c.StartupProbe, "/healthz")
	}
	if s.MetricsListen == "" || ports["metrics"] != portOf(s.MetricsListen) {
		t.Errorf("the metrics port %d is not LOCKHUB_METRICS_LISTEN %q", ports["metrics"], s.MetricsListen)
	}
	if a := ds.Template.Metadata.Annotations["prometheus.io/port"]; a != strconv.Itoa(ports["metrics"]) {
		t.Errorf("prometheus.io/port %q, metrics on %d", a, ports["metrics"])
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}

	// The drain: --drain-delay, no preStop, a grace period covering it.
	if c.Lifecycle != nil && len(c.Lifecycle.PreStop) > 0 {
		t.Error("a preStop hook: the drain is --drain-delay's")
	}
	if s.DrainDelay <= 0 {
		t.Error("no LOCKHUB_DRAIN_DELAY: SIGTERM would close the sockets while the Service still routes here")
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil {
		t.Error("no terminationGracePeriodSeconds: Kubernetes's 30 s is not said")
	} else if time.Duration(*g)*time.Second <= s.DrainDelay+shutdownBound {
		t.Errorf("terminationGracePeriodSeconds %d does not cover the drain (%s) and the shutdown (%s)", *g, s.DrainDelay, shutdownBound)
	}

	// The other objects point at the Deployment's pods.
	svc := one(t, objs, "Service")
	svcSpec := spec[struct {
		Selector map[string]string `json:"selector"`
		Ports    []struct {
			TargetPort any `json:"targetPort"`
		} `json:"ports"`
	}](t, svc)
	if !subset(svcSpec.Selector, ds.Template.Metadata.Labels) {
		t.Errorf("the Service selects %v, not the pods %v", svcSpec.Selector, ds.Template.Metadata.Labels)
	}
	for _, p := range svcSpec.Ports {
		if name, ok := p.TargetPort.(string); !ok || ports[name] != portOf(s.Listen) {
			t.Errorf("the Service's target port %v is not lockhub's --listen", p.TargetPort)
		}
	}
	pdb := spec[struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		MaxUnavailable any `json:"maxUnavailable"`
		MinAvailable   any `json:"minAvailable"`
	}](t, one(t, objs, "PodDisruptionBudget"))
	if !subset(pdb.Selector.MatchLabels, ds.Template.Metadata.Labels) || (pdb.MaxUnavailable == nil && pdb.MinAvailable == nil) {
		t.Errorf("the PodDisruptionBudget %+v does not bound the pods %v", pdb, ds.Template.Metadata.Labels)
	}
	hpa := spec[struct {
		ScaleTargetRef struct{ Kind, Name string } `json:"scaleTargetRef"`
		MinReplicas    int                         `json:"minReplicas"`
		MaxReplicas    int                         `json:"maxReplicas"`
	}](t, one(t, objs, "HorizontalPodAutoscaler"))
	if hpa.ScaleTargetRef.Kind != "Deployment" || hpa.ScaleTargetRef.Name != dep.Metadata.Name || hpa.MinReplicas < 2 || hpa.MaxReplicas < hpa.MinReplicas {
		t.Errorf("the HorizontalPodAutoscaler %+v", hpa)
	}
	if sa := one(t, objs, "ServiceAccount"); sa.Metadata.Name != pod.ServiceAccountName {
		t.Errorf("the pods run as %q, the ServiceAccount is %q", pod.ServiceAccountName, sa.Metadata.Name)
	}
}

// metricName finds the series a PromQL expression names.
var metricName = regexp.MustCompile(`\b(?:lockhub|go|process)_[a-z0-9_]+\b`)

// monitoringMetrics returns every metric name the Grafana dashboard and the alert
// rules use, each with where.
func monitoringMetrics(t *testing.T) map[string]string {
	t.Helper()
	used := map[string]string{}
	add := func(where, expr string) {
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s: an empty expression", where)
		}
		for _, m := range metricName.FindAllString(expr, -1) {
			used[m] = where
		}
	}
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "lockhub-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil || len(dash.Panels) == 0 {
		t.Fatalf("dashboard: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q draws nothing", p.Title)
		}
		for _, q := range p.Targets {
			add("panel "+p.Title, q.Expr)
		}
	}
	b, err = os.ReadFile(filepath.Join(deployDir, "prometheus", "lockhub-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	if err := yaml.UnmarshalStrict(b, &rules); err != nil || len(rules.Groups) == 0 {
		t.Fatalf("alert rules: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			add("alert "+r.Alert, r.Expr)
			if r.Annotations["summary"] == "" || !strings.Contains(r.Annotations["runbook"], "#"+strings.ToLower(r.Alert)) {
				t.Errorf("alert %s: no summary, or no runbook pointing at its section", r.Alert)
			}
		}
	}
	// Each alert's section on the operator's page says what it means and what to do.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if !strings.Contains(string(readme), "### "+a+"\n") {
			t.Errorf("cmd/lockhub/README.md has no section ### %s", a)
		}
	}
	for _, want := range []string{"lockhub_store_fail_open_total", "lockhub_hub_limit_hits_total", "lockhub_hub_resyncs_total", "lockhub_hub_dead_instances_total", "lockhub_jwks_fetches_total", "lockhub_redis_ready"} {
		found := false
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				found = found || strings.Contains(r.Expr, want)
			}
		}
		if !found {
			t.Errorf("no alert on %s", want)
		}
	}
	return used
}

// TestDeployMetrics runs lockhub in production mode (a JWKS, a real redis-server,
// --redis-auth password), uses it the way the panels and alerts watch it (claims and
// a watch over a socket and HTTP, each kind of limit hit, a fail-open with Redis
// killed), and checks that every metric the Grafana dashboard and the alert rules
// name is in its /metrics, so they cannot drift apart.
func TestDeployMetrics(t *testing.T) {
	used := monitoringMetrics(t)

	idp := authtest.NewIDP(t)
	srv := redistest.StartServer(t)
	r := start(t, []string{"--redis-url", srv.URL(), "--jwks-url", idp.URL, "--issuer", authtest.Issuer, "--audience", authtest.Audience,
		"--max-locks-per-socket", "1", "--max-locks-per-person", "2"}, env())
	token := func(oid string) string {
		return idp.Token(t, map[string]any{"aud": []string{authtest.Audience}, "tid": "acme", "oid": oid, "name": "User " + oid, "roles": []string{}})
	}
	ada, bob := token("u-ada"), token("u-bob")
	ws := "ws" + strings.TrimPrefix(r.url, "http") + "/ws"
	watcher := dialAuth(t, ws, bob)
	if _, err := watcher.Watch(t.Context(), "ApprovalRequest"); err != nil {
		t.Fatal(err)
	}
	c := dialAuth(t, ws, ada)
	if res, err := c.Claim(t.Context(), "ApprovalRequest", "r-1"); err != nil || res.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("claim: %v %v", res.Outcome, err)
	}
	select {
	case <-watcher.Events():
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	if _, err := c.Claim(t.Context(), "ApprovalRequest", "r-2"); err == nil {
		t.Fatal("a second lock on a socket of --max-locks-per-socket 1")
	}
	for _, uid := range []string{"r-3", "r-4"} { // the person's third lock is refused
		call(t, "POST", r.url+"/api/locks/ApprovalRequest/"+uid, ada, "")
	}
	for range protocol.RateBurst + 10 { // beyond the HTTP burst of one person
		call(t, "GET", r.url+"/api/me/locks", bob, "")
	}
	// A socket with a bad token, which the hub closes (4401): lockhub_hub_closes_total.
	bad, err := protocol.Dial(t.Context(), ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Auth(t.Context(), "not-a-token"); err == nil {
		t.Fatal("a bad token authenticated")
	}
	_ = bad.Close()
	srv.Kill(t)
	if a := call(t, "POST", r.url+"/api/locks/ApprovalRequest/r-5", token("u-carol"), ""); a.body["outcome"] != "unknown" {
		t.Fatalf("claim with Redis dead: %d %s", a.status, a.raw)
	}

	// Some series appear when the hub has handled what the test did (the bad
	// socket's close): poll until none is missing, or report those still missing.
	var missing []string
	redistest.Within(t, 10*time.Second, "every metric named by the dashboard and the alerts in /metrics", func() error {
		exposed := map[string]bool{}
		for line := range strings.SplitSeq(call(t, "GET", r.url+"/metrics", "", "").raw, "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			exposed[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
		}
		missing = missing[:0]
		for m, where := range used {
			if !exposed[m] {
				missing = append(missing, fmt.Sprintf("%s (%s)", m, where))
			}
		}
		slices.Sort(missing)
		if len(missing) > 0 {
			return fmt.Errorf("named by the dashboard or the alerts but not in a running lockhub's /metrics:\n  %s", strings.Join(missing, "\n  "))
		}
		return nil
	})
	t.Logf("%d metrics named by the dashboard and alerts, all exported", len(used))
}
