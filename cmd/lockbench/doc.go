// Command lockbench is lockhub's load tool (ISSUE 3, "Load tool and benchmarks"). It
// opens N watching sockets and M claiming sockets against a hub on this machine, and
// reports:
//
//   - claim latency over the socket (p50/p99/max);
//   - claim-to-event latency: from a claim sent to its Acquired event at each watcher.
//     Each claim is released half a claim spacing later (-rate), so one event's
//     fan-out is measured, not an Acquired and a Released queued together;
//   - events lost: Acquired and Released events of the run that a watcher never got
//     (must be 0);
//   - with -inproc, the hub's memory per idle authenticated socket: heap and stacks of
//     the hub's process, after a GC, before and after the N watchers connect, divided
//     by N; and its resident set (VmRSS of /proc/self/status) the same way, which also
//     counts the GC's headroom and memory not yet returned to the OS (with GOGC=100
//     about twice the live heap and stacks; GOGC and GOMEMLIMIT, if set, apply to both
//     processes);
//   - a claim+release over one socket against the same two calls made directly on a
//     lock store on the same Redis, interleaved in one run, as a ratio direct/socket.
//
// With -mode foreign it measures instead how long a change another program makes
// directly in Redis takes to reach watchers (PROTOCOL.md §8: within 2 s, once, as the
// op it was): -instances lockhub services in this process share the real Redis of
// -redis-url, each with -watchers watching sockets (default 1); a writer runs the .NET
// service's own claim and release scripts (locks/redistest.DotNet) at random moments
// on -entities entities, no entity twice within 2.5 s, and the report gives, per
// instance, the time from each write to its event (p50/p90/p99/max), and every change
// not received exactly once by every watcher as its op (the run then fails).
//
// With -mode crowd it measures a reconnect crowd (ISSUE 11): -watchers sockets watch a
// type on one in-process hub, it shuts down, and all of them dial a second hub on the
// same -redis-url at once, authenticate and watch again (snapshots of -snapshot-locks
// locks; each watch sent right behind its auth unless -pipeline=false); the same crowd
// without the watch is the baseline of the ratio. It runs
// -rounds rounds, each with a fresh first hub and set against the baseline before and
// after it, and reports their median (crowd.go). With -crowd-ping the measured crowd
// sends a ping in place of its watch: the cost of one request and answer, the floor
// under a watch's.
//
// With -mode fanout it measures the hub's own CPU per delivered frame and per idle
// socket, and Redis's CPU per change, for the capacity plan (CAPACITY.md): the hub in
// this process, -watchers in a child process, an idle phase of one Ping period, then
// -rounds rounds of -changes changes made through the hub's store (fanout.go).
//
// Usage:
//
//	lockbench -inproc -redis-url redis://127.0.0.1:7390/0 -watchers 10000
//	lockbench -url ws://127.0.0.1:8080/ws -watchers 1000 [-redis-url ... for the ratio]
//	lockbench -mode foreign -redis-url redis://127.0.0.1:7390/0
//	lockbench -mode crowd -redis-url redis://127.0.0.1:7390/0 -watchers 10000 -rounds 5
//	lockbench -mode fanout -redis-url redis://127.0.0.1:7390/0 -watchers 10000
//
// With -inproc it runs the lockhub service itself, the binary's own wiring
// (cmd/lockhub/service), with the per-socket rate limit lifted (on -redis-url, or its embedded miniredis
// when empty) on a loopback port and runs the clients in a child process of itself, so
// that the hub's memory is measured without them and each process stays within its
// file descriptor limit (it raises RLIMIT_NOFILE to the hard limit). Without -inproc it
// drives a running hub (tokens from its POST /dev/token, development mode).
//
// lockbench is bounded: every count is a flag, the whole run is capped by -timeout, and
// it only talks to loopback addresses.
//
// Concurrency: one goroutine per socket reads its events; claimers run one goroutine
// each; everything is joined before the report.
package main
