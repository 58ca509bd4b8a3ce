package redistest

import (
	"errors"
	"testing"
	"time"
)

const (
	// eventuallyTimeout bounds an Eventually. It is reached only by a test that fails
	// anyway, so it is generous: a cluster failover on a loaded machine fits in it
	// (clusterConvergenceTimeout).
	eventuallyTimeout = 20 * time.Second
	// eventuallyEvery is how often Eventually checks: often, so that a test waits
	// little past the moment its condition holds.
	eventuallyEvery = 5 * time.Millisecond
)

// Eventually calls cond every few milliseconds until it returns true, and fails the
// test with what if it has not after 20 s. It is for a state that no event announces
// (a metric, a key in Redis, a server that accepts again); where there is an event to
// wait on (a frame, a closed channel), wait on that instead.
//
// cond runs on the calling goroutine, so it may call t.Fatal. Eventually must be
// called from the goroutine running t.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, eventuallyTimeout, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

// Within is Eventually for a condition that says why it does not hold yet, with a
// bound of its own (a contract's "within 2 s", or more for a slow step): it calls cond
// until it returns nil, fails the test with cond's last error once d has passed, and
// returns how long it took, for a test that reports it.
func Within(t testing.TB, d time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(eventuallyEvery)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("redistest: %s still not so after %v: %v", what, d, err)
		}
		<-tick.C
	}
}
