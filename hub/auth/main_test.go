package auth

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The JWKS cache's goroutines belong to jwx and end, unjoined, when the ctx given
	// to NewJWKS is canceled; goleak retries for a while, which covers them.
	goleak.VerifyTestMain(m)
}
