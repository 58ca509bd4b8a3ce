package main

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// mode says what was measured.
type mode struct{ name, url string }

// Goals of ISSUE 3, measured in one run.
const (
	goalRatio       = 0.4
	goalEventP99Ms  = 100
	goalBytesSocket = 16 << 10
	goalRSSSocket   = 12 << 10 // ISSUE 11
	goalWatchers    = 10000
)

func (m *Main) report(md mode, ratio *ratioResult, mem *memResult, res loadResult, hub map[string]float64) {
	w := m.Stdout
	o := m.opt
	fmt.Fprintf(w, "lockbench %s\n", strings.Join(m.args, " "))
	fmt.Fprintf(w, "target: %s (%s), GOMAXPROCS %d\n\n", md.name, md.url, runtime.GOMAXPROCS(0))

	fmt.Fprintf(w, "watchers            %d open and watching %s (opened in %.1fs)\n", res.Watchers, o.entityType, res.DialSeconds)
	fmt.Fprintf(w, "claims              %d acquired, %d failed, by %d claimers at %.1f/s\n", res.Claims, res.Failed, o.claimers, o.rate)
	fmt.Fprintf(w, "claim latency       %s\n", res.ClaimLatency)
	fmt.Fprintf(w, "claim-to-event      %s%s\n", res.EventLatency,
		verdict(res.Watchers >= goalWatchers, res.EventLatency.P99 < goalEventP99Ms, fmt.Sprintf("goal p99 < %d ms with %d watchers", goalEventP99Ms, goalWatchers)))
	fmt.Fprintf(w, "events              %d expected, %d received, %d lost, %d watchers ended early%s%s\n",
		res.Expected, res.Received, res.Lost, res.ClosedEarly, closedHow(res.ClosedHow), verdict(true, res.Lost == 0, "goal 0 lost"))
	fmt.Fprintf(w, "delivery rate       %.0f events/s to all watchers over %.1fs\n", res.PeakEventRate, res.LoadSeconds)
	if f := res.Floor; f != nil {
		fmt.Fprintf(w, "machine floor       one 300-byte write to each of %d loopback TCP sockets, read at the other end, no hub: %.1f ms (%.1f us a socket; %d sockets: ~%.0f ms)\n",
			f.Sockets, f.TotalMs, f.PerFrame, res.Watchers, f.PerFrame*float64(res.Watchers)/1000)
	}
	if mem != nil {
		fmt.Fprintf(w, "hub memory          %.0f bytes per idle authenticated watching socket (heap %.0f + stacks %.0f; %d sockets, %d goroutines each)%s\n",
			mem.TotalPerSock, mem.HeapPerSocket, mem.StackPerSock, mem.Sockets, mem.Goroutines,
			verdict(true, mem.TotalPerSock <= goalBytesSocket, "goal <= 16 KiB"))
		fmt.Fprintf(w, "hub RSS             %.0f bytes per idle authenticated watching socket (VmRSS after - before; heap spans in use %.0f)%s\n",
			mem.RSSPerSocket, mem.HeapInusePerSocket, verdict(mem.RSSPerSocket > 0, mem.RSSPerSocket <= goalRSSSocket, "goal <= 12 KiB"))
		if mem.RSSAfterTrimPerSocket > 0 {
			fmt.Fprintf(w, "hub RSS, trimmed    %.0f bytes per idle socket once the hub returned its set-up's free memory (--memory-trim-burst)%s\n",
				mem.RSSAfterTrimPerSocket, verdict(true, mem.RSSAfterTrimPerSocket <= goalRSSSocket, "goal <= 12 KiB"))
		} else {
			fmt.Fprintf(w, "hub RSS, trimmed    not measured: the hub returned no memory within %s (fewer sockets than --memory-trim-burst?)\n", trimWait)
		}
	} else {
		fmt.Fprintf(w, "hub memory          not measured (run with -inproc)\n")
	}
	if ratio != nil {
		fmt.Fprintf(w, "direct claim+release  %s\n", ratio.Direct)
		fmt.Fprintf(w, "socket claim+release  %s\n", ratio.Socket)
		fmt.Fprintf(w, "socket vs direct    %.2f (direct mean / socket mean, %d pairs interleaved)%s\n",
			ratio.Ratio, ratio.Pairs, verdict(true, ratio.Ratio >= goalRatio, "goal >= 0.4"))
	} else {
		fmt.Fprintf(w, "socket vs direct    not measured (-redis-url names the hub's Redis, or use -inproc)\n")
	}
	if hub != nil {
		fmt.Fprintf(w, "hub counters        slow-reader disconnects %.0f, rate-limited %.0f, events delivered %.0f, fail-opens %.0f\n",
			hub["slow"], hub["ratelimited"], hub["delivered"], hub["failopen"])
	}
}

// verdict says whether a goal was met, when it applies.
func verdict(applies, met bool, goal string) string {
	switch {
	case !applies:
		return ""
	case met:
		return "  [met: " + goal + "]"
	default:
		return "  [NOT MET: " + goal + "]"
	}
}

// gauge sums the values of a metric family of reg.
func gauge(reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			}
		}
	}
	return sum
}

func hubCounters(reg *prometheus.Registry) map[string]float64 {
	return map[string]float64{
		"slow":        gauge(reg, "lockhub_hub_slow_disconnects_total"),
		"ratelimited": gauge(reg, "lockhub_hub_rate_limited_total"),
		"delivered":   gauge(reg, "lockhub_hub_events_delivered_total"),
		"failopen":    gauge(reg, "lockhub_store_fail_open_total"),
	}
}

// closedHow lists how watchers ended early, " (4429: 3, cut: 1)", or "" when none did.
func closedHow(how map[string]int) string {
	if len(how) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(how)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, how[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
