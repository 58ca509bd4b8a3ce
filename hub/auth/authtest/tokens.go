package authtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
)

// Claims is a token payload under construction.
type Claims map[string]any

// GoodClaims is a payload every verifier for iss and aud accepts at now: issued and
// valid from now, for an hour, for u-ada of tenant acme with the takeover role.
func GoodClaims(now time.Time, iss, aud string) Claims {
	return Claims{
		"iss": iss, "aud": aud, "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
		"tid": "acme", "oid": "u-ada", "name": "Ada Lovelace", "roles": []string{"Locks.TakeOver"},
	}
}

// With returns a copy of c with claim k set to v, or removed when v is nil.
func (c Claims) With(k string, v any) Claims {
	out := Claims{}
	for kk, vv := range c {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// Sign signs payload c with key under alg, putting kid in the header when not empty.
// A jwk.Key is signed with as its raw key: jwx would put the key's own kid in the header.
func Sign(t testing.TB, c Claims, alg jwa.SignatureAlgorithm, key any, kid string) string {
	t.Helper()
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return SignPayload(t, payload, alg, key, kid)
}

// SignPayload is Sign of a payload given as bytes: one that is not a claim set, or has
// a claim twice.
func SignPayload(t testing.TB, payload []byte, alg jwa.SignatureAlgorithm, key any, kid string) string {
	t.Helper()
	if k, ok := key.(jwk.Key); ok {
		var raw any
		if err := k.Raw(&raw); err != nil {
			t.Fatal(err)
		}
		key = raw
	}
	hdr := jws.NewHeaders()
	if kid != "" {
		_ = hdr.Set(jws.KeyIDKey, kid) // a string kid always sets
	}
	_ = hdr.Set(jws.TypeKey, "JWT") // likewise
	b, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Unsigned builds an alg:none token by hand: jwx refuses to make one.
func Unsigned(t testing.TB, c Claims, kid string) string {
	t.Helper()
	h, err := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": kid})
	if err != nil {
		t.Fatal(err)
	}
	p, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(p) + "."
}

// BadToken is one entry of a bad-token list.
type BadToken struct {
	Name  string
	Token string
}

// DevBadTokens is the list of tokens a development verifier signing with key, for
// issuer iss and audience aud, must refuse at now: expired, not yet valid, of another
// issuer, audience or key, unsigned, forged with HS256 over the public key, malformed,
// and with missing or hostile identity claims.
func DevBadTokens(t testing.TB, key ed25519.PrivateKey, iss, aud string, now time.Time) []BadToken {
	t.Helper()
	_, other, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	gc := GoodClaims(now, iss, aud)
	const kid = "dev"
	sign := func(c Claims) string { return Sign(t, c, jwa.EdDSA, key, kid) }
	return []BadToken{
		{"expired", sign(gc.With("exp", now.Add(-6*time.Second).Unix()).With("iat", now.Add(-time.Minute).Unix()).With("nbf", nil))},
		{"not yet valid", sign(gc.With("nbf", now.Add(time.Minute).Unix()))},
		{"wrong issuer", sign(gc.With("iss", "https://evil.example"))},
		{"wrong audience", sign(gc.With("aud", "someone-else"))},
		{"alg none", Unsigned(t, gc, kid)},
		{"HS256 signed with the public key bytes", Sign(t, gc, jwa.HS256, []byte(pub), kid)},
		{"unknown kid", Sign(t, gc, jwa.EdDSA, other, "no-such-kid")},
		{"another key's signature", Sign(t, gc, jwa.EdDSA, other, kid)},
		{"garbage", "not.a.token"},
		{"garbage base64", "eyJhbGciOiJFZERTQSJ9.eyJ$$$.AAAA"},
		{"empty", ""},
		{"missing exp", sign(gc.With("exp", nil))},
		{"missing tid", sign(gc.With("tid", nil))},
		{"missing oid", sign(gc.With("oid", nil))},
		{"hostile oid", sign(gc.With("oid", "a}b"))},
		{"hostile tenant", sign(gc.With("tid", "acme}:x"))},
		{"oid of the wrong type", sign(gc.With("oid", 42))},
		{"roles of the wrong type", sign(gc.With("roles", map[string]any{"a": 1}))},
		{"a role that is not a string", sign(gc.With("roles", []any{"Locks.TakeOver", 7}))},
		{"a null role", sign(gc.With("roles", []any{nil}))},
		{"exp as a string", sign(gc.With("exp", strconv.FormatInt(now.Add(time.Hour).Unix(), 10)))},
		{"audience of the wrong type", sign(gc.With("aud", 42))},
		{"issued in the future", sign(gc.With("iat", now.Add(time.Minute).Unix()))},
		{"payload not an object", SignPayload(t, []byte(`["tid","acme"]`), jwa.EdDSA, key, kid)},
		{"a claim twice", SignPayload(t, duplicate(t, gc, "oid", "u-mallory"), jwa.EdDSA, key, kid)},
		{"payload not JSON", SignPayload(t, []byte(`{"tid":"acme",`), jwa.EdDSA, key, kid)},
	}
}

// duplicate is c's payload with claim k a second time, holding v.
func duplicate(t testing.TB, c Claims, k string, v any) []byte {
	t.Helper()
	p, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := json.Marshal(map[string]any{k: v})
	if err != nil {
		t.Fatal(err)
	}
	return append(append(p[:len(p)-1:len(p)-1], ','), kv[1:]...)
}
