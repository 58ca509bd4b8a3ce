package auth

import (
	"context"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"

	"github.com/lockhub/lockhub/hub/auth/authtest"
)

// BenchmarkVerify is the cost of one token check, by verifier and algorithm: the dev
// tokens' EdDSA (what lockbench's sockets present), and the JWKS verifier with RS256
// (Microsoft Entra ID's) and ES256. The signature dominates; the rest is the same code.
//
//	go test -run '^$' -bench Verify -benchmem ./hub/auth/
func BenchmarkVerify(b *testing.B) {
	f := newJWKSFixture(b)
	a := newJWKSForTest(b, f)
	const iss, aud = "https://login.example/tenant/v2.0", "api://lockhub"
	d, err := NewDev(DevConfig{Now: func() time.Time { return testNow }})
	if err != nil {
		b.Fatal(err)
	}
	devToken, err := d.Issue("acme", "u-ada", "Ada Lovelace", []string{"Locks.TakeOver"})
	if err != nil {
		b.Fatal(err)
	}
	gc := authtest.GoodClaims(testNow, iss, aud)
	for _, bc := range []struct {
		name  string
		v     Verifier
		token string
	}{
		{"dev-EdDSA", d, devToken},
		{"jwks-RS256", a, authtest.Sign(b, gc, jwa.RS256, f.rsa, "rsa-1")},
		{"jwks-ES256", a, authtest.Sign(b, gc, jwa.ES256, f.ec, "ec-1")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.v.Verify(context.Background(), bc.token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
