package hub

import (
	"testing"

	"github.com/lockhub/lockhub/locks/redistest"
)

func TestMain(m *testing.M) {
	// Every goroutine the hub starts is joined by Shutdown or Run; every test shuts its
	// hubs down. The check retries for a while, which covers the jwx JWKS cache
	// goroutines that end (unjoined) when their ctx is canceled, and go-redis's re-dial
	// goroutine after a dial failed (a test that cuts Redis off).
	redistest.VerifyTestMain(m)
}
