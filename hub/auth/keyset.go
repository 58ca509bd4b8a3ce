package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

// keySet is one fetched JWKS, never changed once made.
type keySet struct {
	set     jwk.Set
	signing int     // keys keyAlgorithm accepts
	only    jwk.Key // the one such key when signing is 1, for tokens without a kid; else nil
	fetched time.Time
}

// newKeySet reads a fetched set. A set without a single usable signing key is an
// error: it would refuse every token, so the set in use is better kept.
func newKeySet(set jwk.Set, fetched time.Time) (*keySet, error) {
	ks := &keySet{set: set, fetched: fetched}
	for i := range set.Len() {
		k, _ := set.Key(i) // i < Len
		if _, err := keyAlgorithm(k); err != nil {
			continue
		}
		ks.signing++
		ks.only = k
	}
	if ks.signing == 0 {
		return nil, fmt.Errorf("the key set of %d keys has no signing key", set.Len())
	}
	if ks.signing > 1 {
		ks.only = nil
	}
	return ks, nil
}

// maxJWKSBytes caps a fetched JWKS. Entra ID's is a few kilobytes.
const maxJWKSBytes = 1 << 20

// fetch gets and parses the key set, within FetchTimeout.
func (a *JWKS) fetch(ctx context.Context) (*keySet, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.cfg.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %s", res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the key set: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("the key set is over %d bytes", maxJWKSBytes)
	}
	set, err := jwk.Parse(body)
	if err != nil {
		return nil, fmt.Errorf("parsing the key set: %w", err)
	}
	return newKeySet(set, a.cfg.Now())
}

// refresh fetches the set and puts it in use, unless a fetch that started later
// already did. On failure the set in use stays, with a warning (a fail-open of sorts:
// old keys keep verifying), except at start, where NewJWKS fails instead.
func (a *JWKS) refresh(ctx context.Context, trigger string) error {
	seq := a.fetchSeq.Add(1)
	ks, err := a.fetch(ctx)
	if err != nil {
		a.m.fetches.WithLabelValues(trigger, "error").Inc()
		if old := a.keys.Load(); old != nil && ctx.Err() == nil { // not at start, nor on Close
			a.log.Warn("fetching the JWKS failed; keeping the key set in use",
				slog.String("jwks", a.cfg.URL), slog.String("trigger", trigger),
				slog.Time("fetched", old.fetched), slog.String("error", err.Error()))
		}
		return err
	}
	a.m.fetches.WithLabelValues(trigger, "ok").Inc()
	a.storeMu.Lock()
	defer a.storeMu.Unlock()
	if seq > a.storedSeq { // a slow fetch must not undo a newer one
		a.storedSeq = seq
		a.keys.Store(ks)
		a.m.lastGood.Set(float64(ks.fetched.Unix()))
	}
	return nil
}

// refreshLoop refreshes the set every RefreshInterval, sooner after a failure, until
// ctx is done. Owned by NewJWKS; joined by Close.
func (a *JWKS) refreshLoop(ctx context.Context) {
	defer a.wg.Done()
	failures := 0
	t := time.NewTimer(nextRefresh(a.cfg.RefreshInterval, failures))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := a.refresh(ctx, fetchBackground); err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return
			}
			failures++
		} else {
			failures = 0
		}
		t.Reset(nextRefresh(a.cfg.RefreshInterval, failures))
	}
}

// refreshRetry is the first wait after a failed refresh; each further failure doubles
// it, up to the refresh interval.
const refreshRetry = 5 * time.Second

// nextRefresh is the wait before the next background refresh after failures failed
// ones in a row: interval, or a backoff from refreshRetry up to it, less up to a
// tenth so that instances started together do not fetch together.
func nextRefresh(interval time.Duration, failures int) time.Duration {
	d := interval
	if failures > 0 {
		d = min(interval, refreshRetry<<min(failures-1, 16))
	}
	return d - rand.N(d/10+1)
}
