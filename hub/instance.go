package hub

import (
	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// Instances that die (PROTOCOL.md §4): this instance's membership is a locks.Member,
// which keeps its liveness record and its holdings in Redis and takes its share of
// reaping the instances that died (its doc writes down the states and the rules). The
// hub tells it what its sockets hold (conn.track, untrack; release and detach mark a
// holding leaving around the store call that lets it go) and runs it from Run; the
// Member counts its detaches of dead instances' holdings with the hub's own, in
// lockhub_hub_detaches_total{why="grace"}.

// newMember makes the Member of a hub with cfg (defaults applied) and met.
func newMember(cfg Config, met *metrics) (*locks.Member, error) {
	return locks.NewMember(locks.MemberConfig{
		Instances:       cfg.Store.Instances,
		Locks:           cfg.Store.Locks,
		InstanceTimeout: cfg.InstanceTimeout,
		ReleaseGrace:    cfg.ReleaseGrace,
		Logger:          cfg.Logger,
		Registerer:      cfg.Registerer,
		Detached: func(o protocol.Outcome) {
			met.detaches.WithLabelValues("grace", string(o)).Inc()
		},
	})
}

// holding is the holding of ref by holder oid through socket conn.
func holding(ref locks.Ref, oid, conn string) locks.Holding {
	return locks.Holding{Ref: ref, Holder: oid, Conn: conn}
}
