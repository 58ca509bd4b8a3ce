package auth

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every test closes its JWKS, which joins the background refresh and refetches.
	goleak.VerifyTestMain(m)
}
