package redistest

import (
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
	deadline := time.Now().Add(eventuallyTimeout)
	tick := time.NewTicker(eventuallyEvery)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("redistest: still waiting after %v for %s", eventuallyTimeout, what)
		}
		<-tick.C
	}
}
