// Package redistest is a test harness that runs real redis-server processes,
// standalone or as a Redis Cluster, for tests that must observe real Redis
// behaviour (network failures, MOVED redirects, failover) rather than an
// in-memory fake.
//
// # Where to start
//
// Call [StartServer] for a single standalone server or [StartCluster] for a
// six-node cluster (three masters, one replica each). Both take the calling
// test, start the processes on free 127.0.0.1 ports, block until Redis
// answers, and register cleanups that SIGKILL and reap every process when the
// test ends. Use [Server.Client] or [Cluster.Client] for go-redis clients that
// are closed automatically, and [Server.Kill], [Server.Restart],
// [Cluster.KillMaster] and [Cluster.WaitFailover] to inject failures.
// [Slot] computes the cluster hash slot of a key without a server.
//
// It also holds what the tests of every package share: [Eventually] and [Within] poll
// a condition with a deadline, and [LogBuffer] collects the logs a service writes from
// its goroutines.
//
// The redis-server binary is looked up in PATH. When it is missing the test
// fails (it never skips) with the command that installs it; see
// [RequireRedisServer].
//
//	func TestLock(t *testing.T) {
//		srv := redistest.StartServer(t)
//		rdb := srv.Client(t)
//		// ... exercise code against rdb, then srv.Kill(t) to simulate an outage.
//	}
//
// # Isolation
//
// Every server listens only on 127.0.0.1, on a random port in [20000, 50000)
// that was bindable (for a cluster node, together with port+10000, its
// cluster bus port) just before the server was launched. Because another process can grab the port
// between that check and redis-server's own bind, startup is retried on a new
// port a few times. Servers run with persistence disabled (save "" and
// appendonly no), each in its own temporary directory that also holds its log;
// the tail of that log is included in every start-up failure message.
//
// # Concurrency contract
//
// Functions and methods that take a testing.TB may call t.Fatalf and therefore
// must be called from the goroutine running that test. A [Server] or
// [Cluster] belongs to the test passed to [StartServer] or [StartCluster]:
// its processes are killed when that test (including its subtests) finishes,
// and it must not be used afterwards. Accessors that take no testing.TB
// ([Server.Addr], [Server.URL], [Server.Options], [Cluster.Addrs],
// [Cluster.MasterAddrs], [Cluster.ClusterOptions]) and [Slot] are safe for
// concurrent use. Independent servers and clusters may be started from
// parallel tests and from concurrently running test binaries.
//
// The harness starts one goroutine per process, which waits for the process to
// exit; it ends when the process is killed, so no goroutine outlives the test
// that owns the process. On Linux the servers are also started with a
// parent-death signal, so a test binary that dies without running its
// cleanups (a -timeout panic, Ctrl-C) does not leave servers behind.
package redistest
