package locks

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/auth"
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
	return NewClientWith(url, cluster, ClientOptions{})
}

// ClientOptions are what NewClientWith adds to a URL. The zero value adds nothing.
type ClientOptions struct {
	// Credentials, when set, authenticate every connection, pub/sub ones included, in
	// place of the URL's: a token provider such as go-redis-entraid's, whose renewed
	// tokens re-authenticate the open connections (go-redis's streaming credentials
	// for its pools, reauth.go for the change feed's). Nil means the URL's user and
	// password.
	Credentials auth.StreamingCredentialsProvider
	// RootCAs, when set, are the certificate authorities a rediss:// server's
	// certificate must chain to, instead of the system's. Nil means the system's.
	RootCAs *x509.CertPool
}

// NewClientWith is NewClient with o: credentials other than the URL's, and the
// CAs of a rediss:// server. RootCAs with a redis:// URL is an error: it would be
// ignored.
func NewClientWith(url string, cluster bool, o ClientOptions) (redis.UniversalClient, error) {
	if cluster {
		co, err := clusterOptions(url, o)
		if err != nil {
			return nil, err
		}
		return redis.NewClusterClient(co), nil
	}
	so, err := options(url, o)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(so), nil
}

// errNoTLS is RootCAs given for a redis:// URL.
const errNoTLS = "locks: CAs are given but the URL is redis://, not rediss://: nothing would check them"

// setCAs puts co's CAs in place of the system's in the TLS config of a rediss:// URL;
// for a redis:// URL (nil) they would check nothing, and are refused.
func (co ClientOptions) setCAs(t *tls.Config) error {
	if co.RootCAs == nil {
		return nil
	}
	if t == nil {
		return errors.New(errNoTLS)
	}
	t.RootCAs = co.RootCAs
	return nil
}

func clusterOptions(url string, co ClientOptions) (*redis.ClusterOptions, error) {
	o, err := redis.ParseClusterURL(url)
	if err != nil {
		return nil, badURL(url, err)
	}
	if err := co.setCAs(o.TLSConfig); err != nil {
		return nil, err
	}
	o.StreamingCredentialsProvider = co.Credentials
	if co.Credentials != nil {
		o.Dialer = newReauthDialer(co.Credentials, ClientTimeout, &redis.Options{TLSConfig: o.TLSConfig}).Dial
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = ClientTimeout, ClientTimeout, ClientTimeout
	o.ClusterStateReloadInterval = clusterReload
	o.MaxRetries, o.DialerRetries = 1, 1
	o.ContextTimeoutEnabled = true // the store's Config.Timeout bounds each call
	return o, nil
}

func options(url string, co ClientOptions) (*redis.Options, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, badURL(url, err)
	}
	if err := co.setCAs(o.TLSConfig); err != nil {
		return nil, err
	}
	o.StreamingCredentialsProvider = co.Credentials
	if co.Credentials != nil {
		o.Dialer = newReauthDialer(co.Credentials, ClientTimeout, o).Dial
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = ClientTimeout, ClientTimeout, ClientTimeout
	// One retry, and one dial attempt (go-redis tries five by default): a dead Redis
	// must fail a call fast, and the store fails open.
	o.MaxRetries, o.DialerRetries = 1, 1
	// go-redis ignores a ctx deadline on the socket unless told: without this a hung
	// Redis held each call for ClientTimeout per attempt, whatever the store's
	// Config.Timeout said.
	o.ContextTimeoutEnabled = true
	return o, nil
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
