package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterMasters and clusterReplicasPerMaster give the smallest layout in
	// which a failover can happen: a majority of masters (2 of 3) survives
	// the loss of one master and can authorise its replica's promotion.
	clusterMasters            = 3
	clusterReplicasPerMaster  = 1
	clusterSize               = clusterMasters * (1 + clusterReplicasPerMaster)
	clusterConvergenceTimeout = 20 * time.Second
)

// clusterArgs are the redis-server arguments of every cluster node, on top of
// the base arguments in launch.
var clusterArgs = []string{
	"--cluster-enabled", "yes",
	// Two seconds is the smallest node timeout that does not make a loaded
	// test machine flap; it bounds failure detection, and so failover, to a
	// few seconds.
	"--cluster-node-timeout", "2000",
	// Replicas sync immediately instead of waiting 5 s for more replicas.
	"--repl-diskless-sync-delay", "0",
	// Keeps the replica's idea of its data age fresh, so it always qualifies
	// for promotion.
	"--repl-ping-replica-period", "1",
	// Without an announced IP a node learns its own address only from the
	// first MEET/PING it receives and reports an empty one until then; with
	// it every node describes itself consistently from the start.
	"--cluster-announce-ip", "127.0.0.1",
}

// Cluster is a six-node Redis Cluster (three masters, each with one replica)
// owned by a test. Create it with [StartCluster].
type Cluster struct {
	// nodes holds the masters first, then the replicas, nodes[i+3]
	// replicating nodes[i]. It is not modified after StartCluster returns;
	// a node's liveness is read from its process.
	nodes []*clusterNode
}

// clusterNode is one member of a Cluster.
type clusterNode struct {
	id    string // cluster node ID, from CLUSTER MYID
	proc  *process
	first int         // first slot assigned at creation (masters only)
	last  int         // last slot assigned at creation (masters only)
	hung  atomic.Bool // stopped by HangMaster: left out like a dead node
}

func (n *clusterNode) addr() string { return n.proc.addr() }

// StartCluster starts a Redis Cluster of six redis-server processes on free
// 127.0.0.1 ports: three masters that each serve a third of the 16384 hash
// slots, and one replica per master. It builds the cluster from Go with
// go-redis (CLUSTER SET-CONFIG-EPOCH, CLUSTER MEET, CLUSTER ADDSLOTSRANGE,
// CLUSTER REPLICATE), not with redis-cli, and waits (up to 20 s) until every
// node reports cluster_state:ok, all nodes agree on the slot map, and every
// replica's replication link is up.
//
// Nodes run with --cluster-node-timeout 2000 so that a killed master is
// failed over within a few seconds, with persistence disabled, each in its
// own temporary directory. All processes are SIGKILLed and reaped when t
// finishes. It fails the test if the cluster does not come up, with the
// state it last saw and, for a node that does not start, its log.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := RequireRedisServer(t)
	baseDir := t.TempDir()
	c := &Cluster{}
	// Registered before anything is started, so that a failure half-way
	// through still kills every node started so far.
	t.Cleanup(c.stop)

	ctx := t.Context()
	for range clusterSize {
		p, err := startOnFreePort(ctx, bin, baseDir, true, clusterArgs)
		if err != nil {
			t.Fatalf("redistest: StartCluster: %v", err)
		}
		c.nodes = append(c.nodes, &clusterNode{proc: p})
	}

	clients, closeClients := adminClients(c.nodes)
	defer closeClients()
	if err := c.build(ctx, clients); err != nil {
		t.Fatalf("redistest: StartCluster: %v%s", err, c.logs())
	}
	if err := waitFor(ctx, clusterConvergenceTimeout, func(ctx context.Context) (bool, string) {
		return c.converged(ctx, clients)
	}); err != nil {
		t.Fatalf("redistest: StartCluster: cluster did not converge: %v%s", err, c.logs())
	}
	return c
}

// build turns the six standalone cluster-enabled nodes into the intended
// cluster. It does what redis-cli --cluster create does, minus the checks.
func (c *Cluster) build(ctx context.Context, clients []*redis.Client) error {
	for i, n := range c.nodes {
		id, err := clients[i].ClusterMyID(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", n.addr(), err)
		}
		n.id = id
		// Distinct config epochs up front spare the nodes Redis's slow
		// epoch-collision resolution, which would otherwise delay agreement
		// on who owns which slots.
		if err := clients[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("CLUSTER SET-CONFIG-EPOCH on %s: %w", n.addr(), err)
		}
	}

	// One node meeting all others is enough: gossip introduces the rest.
	for _, n := range c.nodes[1:] {
		if err := clients[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(n.proc.port)).Err(); err != nil {
			return fmt.Errorf("CLUSTER MEET %s from %s: %w", n.addr(), c.nodes[0].addr(), err)
		}
	}

	for i, n := range c.nodes[:clusterMasters] {
		n.first = i * SlotCount / clusterMasters
		n.last = (i+1)*SlotCount/clusterMasters - 1
		if err := clients[i].ClusterAddSlotsRange(ctx, n.first, n.last).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %s: %w", n.first, n.last, n.addr(), err)
		}
	}

	// A node accepts CLUSTER REPLICATE only once it knows the master, which
	// takes a gossip round or two after the MEETs; until then it answers
	// "ERR Unknown node". Hence the poll.
	for i := range clusterMasters {
		master, replica := c.nodes[i], c.nodes[clusterMasters+i]
		err := waitFor(ctx, clusterConvergenceTimeout, func(ctx context.Context) (bool, string) {
			err := clients[clusterMasters+i].ClusterReplicate(ctx, master.id).Err()
			if err != nil {
				return false, fmt.Sprintf("CLUSTER REPLICATE %s on %s: %v", master.id, replica.addr(), err)
			}
			return true, ""
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// converged reports whether the cluster is fully formed: every node sees
// cluster_state:ok and all six nodes, every node's CLUSTER SLOTS matches the
// intended layout, and every replica has a live link to its master.
func (c *Cluster) converged(ctx context.Context, clients []*redis.Client) (bool, string) {
	want := c.intendedSlots()
	for i, n := range c.nodes {
		info, err := clients[i].ClusterInfo(ctx).Result()
		if err != nil {
			return false, fmt.Sprintf("CLUSTER INFO on %s: %v", n.addr(), err)
		}
		if state := infoField(info, "cluster_state"); state != "ok" {
			return false, fmt.Sprintf("%s reports cluster_state:%s", n.addr(), state)
		}
		if known := infoField(info, "cluster_known_nodes"); known != strconv.Itoa(clusterSize) {
			return false, fmt.Sprintf("%s knows %s nodes", n.addr(), known)
		}
		//lint:ignore SA1019 go-redis ClusterClient reads CLUSTER SLOTS itself: check what it will see
		slots, err := clients[i].ClusterSlots(ctx).Result()
		if err != nil {
			return false, fmt.Sprintf("CLUSTER SLOTS on %s: %v", n.addr(), err)
		}
		if got := describeSlots(slots); got != want {
			return false, fmt.Sprintf("%s has slot map %q, want %q", n.addr(), got, want)
		}
	}
	for i, n := range c.nodes[clusterMasters:] {
		repl, err := clients[clusterMasters+i].Info(ctx, "replication").Result()
		if err != nil {
			return false, fmt.Sprintf("INFO replication on %s: %v", n.addr(), err)
		}
		if link := infoField(repl, "master_link_status"); link != "up" {
			return false, fmt.Sprintf("replica %s has master_link_status:%s", n.addr(), link)
		}
	}
	return true, ""
}

// intendedSlots describes, in describeSlots format, the slot map StartCluster
// builds.
func (c *Cluster) intendedSlots() string {
	var slots []redis.ClusterSlot
	for i, m := range c.nodes[:clusterMasters] {
		slots = append(slots, redis.ClusterSlot{
			Start: m.first,
			End:   m.last,
			Nodes: []redis.ClusterNode{{Addr: m.addr()}, {Addr: c.nodes[clusterMasters+i].addr()}},
		})
	}
	return describeSlots(slots)
}

// Addrs returns the addresses ("127.0.0.1:port") of all six nodes, the three
// nodes started as masters first. The list describes the cluster as built;
// it includes killed nodes and does not reflect failovers.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr()
	}
	return addrs
}

// MasterAddrs returns the addresses of the three nodes started as masters, in
// slot order. Like [Cluster.Addrs] it describes the cluster as built; use
// [Cluster.MasterForSlot] for the node serving a slot now.
func (c *Cluster) MasterAddrs() []string {
	return c.Addrs()[:clusterMasters]
}

// ClusterOptions returns go-redis cluster options for the cluster: every node
// as a seed address, a one-second ClusterStateReloadInterval so that a client
// notices a failover promptly even without MOVED redirects, and 500 ms dial,
// read and write timeouts so that commands sent to a killed node fail fast.
// Each call returns a new value the caller may modify.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                      c.Addrs(),
		ClusterStateReloadInterval: time.Second,
		DialTimeout:                clientTimeout,
		ReadTimeout:                clientTimeout,
		WriteTimeout:               clientTimeout,
	}
}

// Client returns a new go-redis cluster client built from
// [Cluster.ClusterOptions] that is closed when t finishes.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(c.ClusterOptions())
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// MasterForSlot returns the address of the live node that currently reports
// itself, in CLUSTER NODES, as the master serving slot. It fails the test
// if no live node, or more than one, does so, which is the case between
// killing a master and the end of its failover (see [Cluster.WaitFailover]).
func (c *Cluster) MasterForSlot(t testing.TB, slot int) string {
	t.Helper()
	checkSlot(t, slot)
	owners, state := c.slotOwners(t.Context(), slot)
	if len(owners) != 1 {
		t.Fatalf("redistest: MasterForSlot(%d): want exactly one live master serving the slot, found %v (%s)", slot, owners, state)
	}
	return owners[0]
}

// KillMaster SIGKILLs the node currently serving slot as master, waits until
// it has been reaped, and returns its address. The node stays dead; its
// replica is promoted by the cluster itself once the others have noticed,
// which [Cluster.WaitFailover] waits for.
func (c *Cluster) KillMaster(t testing.TB, slot int) string {
	t.Helper()
	addr := c.MasterForSlot(t, slot)
	for _, n := range c.nodes {
		if n.addr() == addr {
			n.proc.kill()
		}
	}
	return addr
}

// KillReplica SIGKILLs the live replica of the master serving slot, waits until it
// has been reaped, and returns its address. The master keeps serving the slot.
func (c *Cluster) KillReplica(t testing.TB, slot int) string {
	t.Helper()
	master := c.MasterForSlot(t, slot)
	live := c.liveNodes()
	clients, closeClients := adminClients(live)
	defer closeClients()
	for i, n := range live {
		role, err := clients[i].Do(t.Context(), "ROLE").Slice()
		if err != nil {
			t.Fatalf("redistest: KillReplica(%d): ROLE on %s: %v", slot, n.addr(), err)
		}
		// A replica answers ["slave", master host, master port, state, offset].
		if len(role) >= 3 && role[0] == "slave" && fmt.Sprintf("%v:%v", role[1], role[2]) == master {
			n.proc.kill()
			return n.addr()
		}
	}
	t.Fatalf("redistest: KillReplica(%d): no live replica of %s", slot, master)
	return ""
}

// WaitFailover waits, for up to 20 s, until exactly one live node reports
// itself master of slot, every live node reports cluster_state:ok, and every
// live node's CLUSTER SLOTS names that node as the slot's master. The last
// condition matters to clients, which load the slot map from any node.
func (c *Cluster) WaitFailover(t testing.TB, slot int) {
	t.Helper()
	checkSlot(t, slot)
	ctx := t.Context()
	err := waitFor(ctx, clusterConvergenceTimeout, func(ctx context.Context) (bool, string) {
		owners, state := c.slotOwners(ctx, slot)
		if len(owners) != 1 {
			return false, fmt.Sprintf("live masters claiming slot %d: %v (%s)", slot, owners, state)
		}
		live := c.liveNodes()
		clients, closeClients := adminClients(live)
		defer closeClients()
		for i, n := range live {
			info, err := clients[i].ClusterInfo(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("CLUSTER INFO on %s: %v", n.addr(), err)
			}
			if st := infoField(info, "cluster_state"); st != "ok" {
				return false, fmt.Sprintf("%s reports cluster_state:%s", n.addr(), st)
			}
			//lint:ignore SA1019 go-redis ClusterClient reads CLUSTER SLOTS itself: check what it will see
			slots, err := clients[i].ClusterSlots(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("CLUSTER SLOTS on %s: %v", n.addr(), err)
			}
			if m := slotMaster(slots, slot); m != owners[0] {
				return false, fmt.Sprintf("%s says slot %d is served by %q, but %s claims it", n.addr(), slot, m, owners[0])
			}
		}
		return true, ""
	})
	if err != nil {
		t.Fatalf("redistest: WaitFailover(%d): %v", slot, err)
	}
}

// slotOwners asks every live node whether it is a master serving slot and
// returns the addresses of those that say so, with a note about nodes that
// could not be asked.
func (c *Cluster) slotOwners(ctx context.Context, slot int) (owners []string, state string) {
	live := c.liveNodes()
	clients, closeClients := adminClients(live)
	defer closeClients()
	var problems []string
	for i, n := range live {
		nodes, err := clients[i].ClusterNodes(ctx).Result()
		if err != nil {
			problems = append(problems, fmt.Sprintf("CLUSTER NODES on %s: %v", n.addr(), err))
			continue
		}
		if selfServes(nodes, slot) {
			owners = append(owners, n.addr())
		}
	}
	return owners, fmt.Sprintf("%d live nodes; %s", len(live), strings.Join(problems, "; "))
}

// liveNodes returns the nodes whose process has not exited and is not stopped.
func (c *Cluster) liveNodes() []*clusterNode {
	var live []*clusterNode
	for _, n := range c.nodes {
		if n.proc.alive() && !n.hung.Load() {
			live = append(live, n)
		}
	}
	return live
}

// logs returns the log tails of all nodes, for failure messages about the
// cluster as a whole.
func (c *Cluster) logs() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "\n--- last lines of %s (%s) ---\n%s", n.proc.logPath, n.addr(), logTail(n.proc.logPath, 10))
	}
	return b.String()
}

// stop kills and reaps every node. It is the t.Cleanup of StartCluster and
// is idempotent with KillMaster.
func (c *Cluster) stop() {
	for _, n := range c.nodes {
		n.proc.kill()
	}
}

// adminClients returns one go-redis client per node for the harness's own
// CLUSTER and INFO commands, and a function closing them all.
func adminClients(nodes []*clusterNode) ([]*redis.Client, func()) {
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{
			Addr:         n.addr(),
			DialTimeout:  clientTimeout,
			ReadTimeout:  clientTimeout,
			WriteTimeout: clientTimeout,
			// The harness polls with its own deadline; go-redis's retries and
			// dial retries would only stretch each poll.
			MaxRetries:    -1,
			DialerRetries: 1,
			PoolSize:      1,
		})
	}
	return clients, func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}
}

// describeSlots renders a CLUSTER SLOTS reply canonically, as
// "start-end master [replicas...]" entries sorted by start slot, so that two
// nodes' views can be compared as strings. Node IDs are left out so the
// intended layout can be written down before they are known.
func describeSlots(slots []redis.ClusterSlot) string {
	entries := make([]string, 0, len(slots))
	for _, s := range slots {
		var master string
		var replicas []string
		for i, n := range s.Nodes {
			if i == 0 {
				master = n.Addr
			} else {
				replicas = append(replicas, n.Addr)
			}
		}
		slices.Sort(replicas)
		entries = append(entries, fmt.Sprintf("%05d-%05d %s %v", s.Start, s.End, master, replicas))
	}
	// Zero-padded starts make string order equal slot order.
	slices.Sort(entries)
	return strings.Join(entries, ", ")
}

// slotMaster returns the master address CLUSTER SLOTS gives for slot, or ""
// if the slot is not covered.
func slotMaster(slots []redis.ClusterSlot, slot int) string {
	for _, s := range slots {
		if s.Start <= slot && slot <= s.End && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr
		}
	}
	return ""
}

// selfServes reports whether a CLUSTER NODES reply says that the node that
// produced it ("myself") is a master serving slot.
func selfServes(clusterNodes string, slot int) bool {
	for line := range strings.Lines(clusterNodes) {
		// <id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot>...
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if !slices.Contains(flags, "myself") {
			continue
		}
		if !slices.Contains(flags, "master") {
			return false
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being imported or migrated, not served
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			first, err1 := strconv.Atoi(lo)
			last, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && first <= slot && slot <= last {
				return true
			}
		}
		return false
	}
	return false
}

// infoField returns the value of key in an INFO or CLUSTER INFO reply
// ("key:value" lines), or "" if it is absent.
func infoField(info, key string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), key+":"); ok {
			return v
		}
	}
	return ""
}

// checkSlot fails the test if slot is not a valid hash slot.
func checkSlot(t testing.TB, slot int) {
	t.Helper()
	if slot < 0 || slot >= SlotCount {
		t.Fatalf("redistest: slot %d out of range [0, %d)", slot, SlotCount)
	}
}
