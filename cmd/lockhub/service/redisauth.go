package service

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/prometheus/client_golang/prometheus"
	entraid "github.com/redis/go-redis-entraid"
	"github.com/redis/go-redis-entraid/identity"
	"github.com/redis/go-redis-entraid/manager"
	"github.com/redis/go-redis-entraid/shared"
	"github.com/redis/go-redis-entraid/token"
	"github.com/redis/go-redis/v9/auth"

	"github.com/lockhub/lockhub/locks"
)

// Redis authentication (--redis-auth): "password", the URL's user and password, or
// "entra", a Microsoft Entra ID token for the identity the AZURE_* variables name, as
// Azure Managed Redis with access keys disabled requires (issue 28).
//
// The token comes through github.com/redis/go-redis-entraid, the Redis organisation's
// credentials provider for go-redis: its token manager renews the token before it
// expires (at 70 % of its life), and go-redis's streaming credentials re-authenticate
// every open connection with it (AUTH), so no connection drops at the old token's
// expiry. lockhub adds what a service needs around it: the identity chosen from the
// usual variables with start-up errors naming what is missing, a token that cannot
// be had failing open like any Redis error (logged, counted, retried) instead of
// stopping the process or the renewals, and a token manager stopped at shutdown.
const (
	authPassword = "password"
	authEntra    = "entra"
)

// The token manager's settings. Entra ID tokens live about an hour; a failed request is
// retried with backoff up to tokenRetryMax, for as long as it fails (go-redis-entraid
// gives up after three attempts by default, and then never renews again).
const (
	tokenRequestTimeout = 5 * time.Second // the manager holds new connections while it asks
	tokenRetryFirst     = time.Second
	tokenRetryMax       = 10 * time.Second
)

// azureIdentity picks the identity of --redis-auth entra from the usual AZURE_*
// variables, as the Azure SDK's environment and workload identity credentials read
// them, and says which it is:
//
//   - AZURE_FEDERATED_TOKEN_FILE: a workload identity (AKS), with AZURE_CLIENT_ID and
//     AZURE_TENANT_ID;
//   - AZURE_CLIENT_SECRET or AZURE_CLIENT_CERTIFICATE_PATH (and its optional
//     AZURE_CLIENT_CERTIFICATE_PASSWORD): a service principal, with AZURE_CLIENT_ID and
//     AZURE_TENANT_ID;
//   - otherwise a managed identity (Container Apps, AKS nodes, VMs): user-assigned
//     with AZURE_CLIENT_ID, system-assigned without.
//
// Its error names the variable that is missing or wrong.
func azureIdentity(lookup func(string) (string, bool)) (shared.IdentityProvider, string, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	clientID, tenantID := get("AZURE_CLIENT_ID"), get("AZURE_TENANT_ID")
	need := func(what string) error {
		var missing []string
		if clientID == "" {
			missing = append(missing, "AZURE_CLIENT_ID")
		}
		if tenantID == "" {
			missing = append(missing, "AZURE_TENANT_ID")
		}
		if missing == nil {
			return nil
		}
		return fmt.Errorf("%s needs %v: the application (client) id and the directory (tenant) id of the identity", what, missing)
	}
	var cred azcore.TokenCredential
	var kind string
	var err error
	switch {
	case get("AZURE_FEDERATED_TOKEN_FILE") != "":
		kind = "workload identity"
		if err = need("a workload identity (AZURE_FEDERATED_TOKEN_FILE)"); err != nil {
			return nil, "", err
		}
		cred, err = azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientID: clientID, TenantID: tenantID, TokenFilePath: get("AZURE_FEDERATED_TOKEN_FILE"),
		})
	case get("AZURE_CLIENT_SECRET") != "":
		kind = "service principal (client secret)"
		if err = need("a service principal (AZURE_CLIENT_SECRET)"); err != nil {
			return nil, "", err
		}
		cred, err = azidentity.NewClientSecretCredential(tenantID, clientID, get("AZURE_CLIENT_SECRET"), nil)
	case get("AZURE_CLIENT_CERTIFICATE_PATH") != "":
		kind = "service principal (client certificate)"
		if err = need("a service principal (AZURE_CLIENT_CERTIFICATE_PATH)"); err != nil {
			return nil, "", err
		}
		path := get("AZURE_CLIENT_CERTIFICATE_PATH")
		data, rerr := os.ReadFile(path)
		if rerr != nil {
			return nil, "", fmt.Errorf("AZURE_CLIENT_CERTIFICATE_PATH: %w", rerr)
		}
		certs, key, perr := azidentity.ParseCertificates(data, []byte(get("AZURE_CLIENT_CERTIFICATE_PASSWORD")))
		if perr != nil {
			return nil, "", fmt.Errorf("AZURE_CLIENT_CERTIFICATE_PATH %s: %w", path, perr)
		}
		cred, err = azidentity.NewClientCertificateCredential(tenantID, clientID, certs, key, nil)
	case tenantID != "":
		// A tenant without a secret, certificate or token file is a service principal
		// whose secret did not arrive, not a managed identity.
		return nil, "", errors.New("AZURE_TENANT_ID is set but none of AZURE_CLIENT_SECRET, AZURE_CLIENT_CERTIFICATE_PATH and AZURE_FEDERATED_TOKEN_FILE is: a service principal or workload identity needs one; unset AZURE_TENANT_ID to use a managed identity")
	default:
		o := &azidentity.ManagedIdentityCredentialOptions{}
		kind = "system-assigned managed identity"
		if clientID != "" {
			kind, o.ID = "user-assigned managed identity", azidentity.ClientID(clientID)
		}
		cred, err = azidentity.NewManagedIdentityCredential(o)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", kind, err)
	}
	return credentialIdentity{cred}, kind, nil
}

// credentialIdentity is an Azure SDK credential as go-redis-entraid's identity
// provider: an access token for Azure Redis.
type credentialIdentity struct{ cred azcore.TokenCredential }

func (c credentialIdentity) RequestToken(ctx context.Context) (shared.IdentityProviderResponse, error) {
	t, err := c.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{identity.RedisScopeDefault}})
	if err != nil {
		return nil, err
	}
	return shared.NewIDPResponse(shared.ResponseTypeAccessToken, &t)
}

// observedIdentity logs and counts each token request of idp. A failure is the
// fail-open of a Redis error: warned, counted, retried; connections keep the token
// they have until it expires, and new ones fail (and so the store fails open).
type observedIdentity struct {
	idp      shared.IdentityProvider
	log      *slog.Logger
	ok, fail prometheus.Counter

	mu      sync.Mutex
	failing bool // guarded by mu: the last request failed
}

func (o *observedIdentity) RequestToken(ctx context.Context) (shared.IdentityProviderResponse, error) {
	r, err := o.idp.RequestToken(ctx)
	o.mu.Lock()
	was := o.failing
	o.failing = err != nil
	o.mu.Unlock()
	if err != nil {
		o.fail.Inc()
		o.log.LogAttrs(ctx, slog.LevelWarn, "Redis token request to Entra ID failed; open connections keep their token until it expires, new connections fail and the store fails open until a token comes",
			slog.String("reason", "redis_token"), slog.String("error", err.Error()))
		return nil, err
	}
	o.ok.Inc()
	if was {
		o.log.LogAttrs(ctx, slog.LevelInfo, "Redis token from Entra ID is back")
	} else {
		o.log.LogAttrs(ctx, slog.LevelDebug, "Redis token from Entra ID renewed")
	}
	return r, nil
}

// failOpenManager is go-redis-entraid's token manager, started even when the first
// token cannot be had. The library's credentials provider starts its manager when
// made, and fails when the first token does: lockhub would then not start while the
// identity provider is down, where a Redis that is down only fails open. Here the
// start succeeds; each new connection asks for a token (and fails, failing open, while
// none comes), and the first token that comes starts the renewals. And while requests
// fail, new connections get the newest token for as long as it has not expired.
type failOpenManager struct {
	manager.TokenManager

	mu      sync.Mutex
	pending manager.TokenListener // guarded by mu: the listener of a start whose token failed
	stop    manager.StopFunc      // guarded by mu: the running manager's
	last    *token.Token          // guarded by mu: the newest token had
}

func (m *failOpenManager) Start(l manager.TokenListener) (manager.StopFunc, error) {
	stop, err := m.TokenManager.Start(l)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.pending, m.stop = l, nil
	} else {
		m.pending, m.stop = nil, stop
	}
	return m.Stop, nil
}

func (m *failOpenManager) GetToken(force bool) (*token.Token, error) {
	t, err := m.TokenManager.GetToken(force)
	if err != nil {
		// Past 70 % of its life the library asks for a new token for each new
		// connection, and fails it when the request does: the token it has is still
		// good until it expires, so a new connection gets in with it meanwhile.
		m.mu.Lock()
		last := m.last
		m.mu.Unlock()
		if !force && last != nil && time.Until(last.ExpirationOn()) > 0 {
			return last, nil
		}
		return nil, err
	}
	m.mu.Lock()
	m.last = t
	l := m.pending
	m.pending = nil
	m.mu.Unlock()
	if l != nil {
		// The first token came: start the renewals. Start asks for the token again,
		// which the manager now has.
		stop, err := m.TokenManager.Start(l)
		m.mu.Lock()
		if err != nil {
			m.pending = l
		} else {
			m.stop = stop
		}
		m.mu.Unlock()
	}
	return t, nil
}

// Stop stops the renewals, if they run. It may be called more than once.
func (m *failOpenManager) Stop() error {
	m.mu.Lock()
	stop := m.stop
	m.stop, m.pending = nil, nil
	m.mu.Unlock()
	if stop == nil {
		return nil
	}
	if err := stop(); err != nil && !errors.Is(err, manager.ErrTokenManagerAlreadyStopped) {
		return err
	}
	return nil
}

// entraCredentials returns the streaming credentials of --redis-auth entra, from idp,
// and the function that stops their renewals once the clients are closed.
func entraCredentials(idp shared.IdentityProvider, log *slog.Logger, requests *prometheus.CounterVec) (auth.StreamingCredentialsProvider, func(), error) {
	oi := &observedIdentity{idp: idp, log: log, ok: requests.WithLabelValues("ok"), fail: requests.WithLabelValues("error")}
	tm, err := manager.NewTokenManager(oi, manager.TokenManagerOptions{
		RequestTimeout: tokenRequestTimeout,
		RetryOptions: manager.RetryOptions{
			IsRetryable:  func(error) bool { return true }, // any failure may pass: a network, an identity endpoint restarting
			MaxAttempts:  math.MaxInt32,
			InitialDelay: tokenRetryFirst,
			MaxDelay:     tokenRetryMax,
		},
	})
	if err != nil {
		return nil, nil, err
	}
	fm := &failOpenManager{TokenManager: tm}
	cp, err := entraid.NewCredentialsProvider(fm, entraid.CredentialsProviderOptions{})
	if err != nil {
		return nil, nil, err
	}
	return cp, func() { _ = fm.Stop() }, nil
}

// redisClientOptions returns what the Redis clients of --redis-url and
// --demo-redis-url get beyond their URLs: the Entra ID credentials of --redis-auth
// entra, and the CAs of --redis-ca-file. Stopping the credentials' renewals is added
// to closers, to run after the clients are closed.
func (m *Main) redisClientOptions(cfg *settings, reg prometheus.Registerer, closers *[]func()) (locks.ClientOptions, error) {
	var o locks.ClientOptions
	// Registered whatever --redis-auth says, so that dashboards and alerts find the
	// series on every instance (zero without Entra ID).
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockhub_redis_token_requests_total",
		Help: "Entra ID token requests for Redis (--redis-auth entra), by result: ok or error. An error fails open like any Redis error.",
	}, []string{"result"})
	if err := reg.Register(requests); err != nil {
		return o, err
	}
	requests.WithLabelValues("ok")
	requests.WithLabelValues("error")
	if cfg.RedisCAFile != "" {
		pem, err := os.ReadFile(cfg.RedisCAFile)
		if err != nil {
			return o, cfg.Name("redis-ca-file", err)
		}
		o.RootCAs = x509.NewCertPool()
		if !o.RootCAs.AppendCertsFromPEM(pem) {
			return o, cfg.Name("redis-ca-file", fmt.Errorf("%s holds no PEM certificate", cfg.RedisCAFile))
		}
	}
	if cfg.RedisAuth != authEntra {
		return o, nil
	}
	idp, kind := cfg.RedisIdentity, "the program's identity provider"
	if idp == nil {
		var err error
		if idp, kind, err = azureIdentity(m.LookupEnv); err != nil {
			return o, cfg.Name("redis-auth", fmt.Errorf("entra: %w", err))
		}
	}
	cp, stop, err := entraCredentials(idp, m.log, requests)
	if err != nil {
		return o, err
	}
	*closers = append(*closers, stop)
	o.Credentials = cp
	m.log.Info("Redis connections authenticate with Entra ID tokens, renewed before they expire", slog.String("identity", kind))
	return o, nil
}
