//go:build linux

package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// BenchmarkFanoutTail measures the latency of the fan-out of one event to many
// watchers through the hub's whole write path (feed, sender, writer, frameWriter, the
// heartbeat): what the side-by-side run measures with 10,000 watchers and 20 events a
// second apart, here in the process, on a smaller scale. fanoutWatchers sockets
// authenticate and watch one type, each read by a client goroutine that answers Pings
// as a browser does; then b.N events of ~300 bytes are handed to the hub's feed
// (feed.Change, as the store's feed would), one every fanoutGap, each once the last
// was received by every watcher. It reports the latency of the deliveries (handed to
// the feed to read by the client), p50, p99 and max, in ms; and, less at the mercy of
// what else the machine runs, the process's read(2) and write(2) calls and CPU time
// per delivery, hub and clients together (a Ping is a write for the hub, a read and a
// write, its Pong, for the client, and a read for the hub again).
//
// The hub runs with the default Config, and the events come a second apart, as in the
// side-by-side run: a heartbeat that writes or wakes per delivered frame shows in the
// tail, its Pings going out, and their Pongs coming back, while an event is being
// fanned out. (Scaled down, with a PongTimeout of 2 s, a loaded machine closes
// watchers that answer late.)
//
//	go test -run '^$' -bench FanoutTail -benchtime 20x -count 3 ./hub/
func BenchmarkFanoutTail(b *testing.B) {
	const (
		fanoutWatchers = 2000
		fanoutGap      = time.Second
	)
	th := startMini(b, hubOptions{})
	watchers := make([]*tailWatcher, 0, fanoutWatchers)
	var received atomic.Int64 // deliveries of the event in flight
	var ended atomic.Int64    // watchers whose socket ended before the benchmark did
	var endedBy sync.Map      // why: close code -> count
	allIn := make(chan struct{}, 1)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		for _, w := range watchers {
			_ = w.ws.CloseNow()
		}
		wg.Wait()
	}()
	for i := range fanoutWatchers {
		w := dialTailWatcher(b, th, fmt.Sprintf("u-%d", i))
		watchers = append(watchers, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.read(ctx, func() {
				if received.Add(1) == fanoutWatchers {
					allIn <- struct{}{}
				}
			})
			if ctx.Err() == nil {
				ended.Add(1)
				n, _ := endedBy.LoadOrStore(websocket.CloseStatus(err), new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		}()
	}
	pad := bytes.Repeat([]byte{'.'}, 200)
	tick := time.NewTicker(fanoutGap)
	defer tick.Stop()
	b.ResetTimer()
	io0, cpu0 := procIO(b), procCPU(b)
	for i := range b.N {
		<-tick.C // the load's pace, as the side-by-side run's publisher keeps it
		received.Store(0)
		frame := fmt.Appendf(nil, `{"type":"event","op":"Acquired","seq":%d,"pad":"%s","sent":%d}`, i, pad, time.Now().UnixNano())
		feed{th.hub}.Change(locks.Change{Tenant: "acme", Event: protocol.LockEvent{Lock: protocol.Lock{EntityType: typ}}, Frame: frame})
		select {
		case <-allIn:
		case <-time.After(30 * time.Second):
			why := map[websocket.StatusCode]int64{}
			endedBy.Range(func(k, v any) bool { why[k.(websocket.StatusCode)] = v.(*atomic.Int64).Load(); return true })
			b.Fatalf("event %d: %d of %d watchers received it; %d sockets ended (by close code, -1 none: %v; slow: %v queue, %v write, %v read)",
				i, received.Load(), fanoutWatchers, ended.Load(), why,
				th.metric("lockhub_hub_slow_disconnects_total", "reason=queue"),
				th.metric("lockhub_hub_slow_disconnects_total", "reason=write"),
				th.metric("lockhub_hub_slow_disconnects_total", "reason=read"))
		}
	}
	b.StopTimer()
	io1, cpu1 := procIO(b), procCPU(b)
	deliveries := float64(b.N * fanoutWatchers)
	b.ReportMetric(float64(io1.writes-io0.writes)/deliveries, "writes/delivery")
	b.ReportMetric(float64(io1.reads-io0.reads)/deliveries, "reads/delivery")
	b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/deliveries, "cpu-ns/delivery")
	var lat []time.Duration
	for _, w := range watchers {
		w.mu.Lock()
		lat = append(lat, w.lat...)
		w.mu.Unlock()
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(int(q*float64(len(lat))), len(lat)-1)]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(at(1), "max-ms")
}

// tailWatcher is one watcher of BenchmarkFanoutTail and the latencies of what it read.
type tailWatcher struct {
	ws  *websocket.Conn
	mu  sync.Mutex
	lat []time.Duration
}

// dialTailWatcher opens a socket as oid of acme, watching typ, its snapshot read.
func dialTailWatcher(b *testing.B, th *testHub, oid string) *tailWatcher {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, th.url, &websocket.DialOptions{Subprotocols: []string{protocol.Subprotocol}})
	if err != nil {
		b.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	for _, f := range []map[string]string{
		{"type": "auth", "token": th.token("acme", oid)},
		{"id": "w", "type": "watch", "entityType": typ},
	} {
		m, _ := json.Marshal(f) // maps of strings always encode
		if err := ws.Write(ctx, websocket.MessageText, m); err != nil {
			b.Fatal(err)
		}
	}
	for range 2 { // the welcome, the snapshot
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return &tailWatcher{ws: ws}
}

// read reads events until ctx is done or the socket ends (the error says why), noting
// each one's latency and calling got.
func (w *tailWatcher) read(ctx context.Context, got func()) error {
	key := []byte(`"sent":`)
	for {
		_, m, err := w.ws.Read(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		i := bytes.LastIndex(m, key)
		if i < 0 {
			continue
		}
		sent, err := strconv.ParseInt(string(bytes.TrimSuffix(m[i+len(key):], []byte("}"))), 10, 64)
		if err != nil {
			continue
		}
		w.mu.Lock()
		w.lat = append(w.lat, now.Sub(time.Unix(0, sent)))
		w.mu.Unlock()
		got()
	}
}

// ioCount is the process's read and write system calls so far (/proc/self/io).
type ioCount struct{ reads, writes int64 }

func procIO(b *testing.B) ioCount {
	b.Helper()
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	var c ioCount
	for _, line := range bytes.Split(raw, []byte("\n")) {
		k, v, _ := bytes.Cut(line, []byte(": "))
		n, _ := strconv.ParseInt(string(v), 10, 64) // the lines wanted are numbers
		switch string(k) {
		case "syscr":
			c.reads = n
		case "syscw":
			c.writes = n
		}
	}
	return c
}

// procCPU is the process's user and system CPU time so far.
func procCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
