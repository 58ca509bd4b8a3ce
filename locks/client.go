package locks

import (
	"fmt"
	neturl "net/url"
	"strings"
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
// URL). With cluster, the URL is a cluster seed, more seeds as ?addr=host:port. Its
// error says what is wrong with the URL without repeating it or its password.
func NewClient(url string, cluster bool) (redis.UniversalClient, error) {
	if cluster {
		o, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, badURL(url, err)
		}
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = ClientTimeout, ClientTimeout, ClientTimeout
		o.ClusterStateReloadInterval = clusterReload
		o.MaxRetries, o.DialerRetries = 1, 1
		o.ContextTimeoutEnabled = true // the store's Config.Timeout bounds each call
		return redis.NewClusterClient(o), nil
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, badURL(url, err)
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

// badURL says that u is no usable Redis URL. go-redis's message may quote the URL,
// credentials and all: it is repeated without them.
func badURL(u string, err error) error {
	msg := err.Error()
	if p, perr := neturl.Parse(u); perr == nil && p.User != nil {
		if pw, ok := p.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return fmt.Errorf("locks: not a usable redis:// or rediss:// URL (%s)", strings.ReplaceAll(msg, u, "<url>"))
}
