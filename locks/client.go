package locks

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClientTimeout is the dial, read and write timeout of clients made by NewClient:
// well under a second, so that a dead Redis fails a call fast and the store fails open.
const ClientTimeout = 400 * time.Millisecond

// clusterReload is how often a ClusterClient made by NewClient reloads its slot map
// (go-redis's default is 60 s). With the store's reloads on errors this keeps claims
// working within seconds of a failover (PROTOCOL.md §2 asks for 15 s).
const clusterReload = 5 * time.Second

// NewClient makes a Redis client from a redis:// or rediss:// URL (credentials in the
// URL). With cluster, the URL is a cluster seed, more seeds as ?addr=host:port.
func NewClient(url string, cluster bool) (redis.UniversalClient, error) {
	if cluster {
		o, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, fmt.Errorf("locks: cluster URL: %w", err)
		}
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = ClientTimeout, ClientTimeout, ClientTimeout
		o.ClusterStateReloadInterval = clusterReload
		o.MaxRetries, o.DialerRetries = 1, 1
		o.ContextTimeoutEnabled = true // the store's Config.Timeout bounds each call
		return redis.NewClusterClient(o), nil
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("locks: Redis URL: %w", err)
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = ClientTimeout, ClientTimeout, ClientTimeout
	// One retry, and one dial attempt (go-redis tries five by default): a dead Redis
	// must fail a call fast, and the store fails open.
	o.MaxRetries, o.DialerRetries = 1, 1
	// go-redis ignores a ctx deadline on the socket unless told: without this a hung
	// Redis held each call for ClientTimeout per attempt, whatever the store's
	// Config.Timeout said.
	o.ContextTimeoutEnabled = true
	return redis.NewClient(o), nil
}
