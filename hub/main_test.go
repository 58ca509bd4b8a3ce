package hub

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every goroutine the hub starts is joined by Shutdown or Run; every test shuts its
	// hubs down. goleak retries for a while, which covers the jwx JWKS cache goroutines
	// that end (unjoined) when their ctx is canceled.
	goleak.VerifyTestMain(m)
}
