package auth

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// countingVerifier verifies tokens of the form "ok:<oid>:<exp unix>" and counts calls.
type countingVerifier struct{ calls int }

func (v *countingVerifier) Verify(_ context.Context, token string) (Identity, error) {
	v.calls++
	var oid string
	var exp int64
	if _, err := fmt.Sscanf(token, "ok:%s %d", &oid, &exp); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	return Identity{Tenant: "acme", OID: oid, Name: oid, Roles: []string{"r"}, Expires: time.Unix(exp, 0)}, nil
}

func TestCached(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := &countingVerifier{}
	c := NewCached(v, CacheConfig{Now: func() time.Time { return now }, MaxAge: time.Minute, MaxTokens: 16})
	ctx := context.Background()
	tok := func(oid string, exp time.Time) string { return fmt.Sprintf("ok:%s %d", oid, exp.Unix()) }

	ada := tok("u-ada", now.Add(time.Hour))
	for i := range 3 {
		id, err := c.Verify(ctx, ada)
		if err != nil || id.OID != "u-ada" {
			t.Fatalf("verify %d: %+v %v", i, id, err)
		}
		id.Roles[0] = "changed by the caller" // must not reach the next caller
	}
	if v.calls != 1 {
		t.Fatalf("one token verified %d times, want once", v.calls)
	}
	if id, _ := c.Verify(ctx, ada); id.Roles[0] != "r" {
		t.Fatalf("a caller's change reached the cache: roles %v", id.Roles)
	}

	// Another token is verified on its own, and a bad one every time.
	if id, err := c.Verify(ctx, tok("u-grace", now.Add(time.Hour))); err != nil || id.OID != "u-grace" || v.calls != 2 {
		t.Fatalf("another token: %+v %v after %d calls", id, err, v.calls)
	}
	for range 2 {
		if _, err := c.Verify(ctx, "bad"); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("bad token: %v", err)
		}
	}
	if v.calls != 4 {
		t.Fatalf("a refused token was kept: %d calls, want 4", v.calls)
	}

	// MaxAge: verified again after a minute.
	now = now.Add(time.Minute)
	if _, err := c.Verify(ctx, ada); err != nil || v.calls != 5 {
		t.Fatalf("after MaxAge: %v, %d calls, want a new verification", err, v.calls)
	}
	// The token's own expiry, when earlier: verified again (and refused by the wrapped
	// verifier's rules, which this one's test form leaves out).
	soon := tok("u-soon", now.Add(10*time.Second))
	_, _ = c.Verify(ctx, soon)
	now = now.Add(10 * time.Second)
	if _, _ = c.Verify(ctx, soon); v.calls != 7 {
		t.Fatalf("after the token's exp: %d calls, want a new verification", v.calls)
	}

	// Bounded: many tokens keep at most MaxTokens.
	for i := range 100 {
		_, _ = c.Verify(ctx, tok(fmt.Sprintf("u-%d", i), now.Add(time.Hour)))
	}
	if n := len(c.m); n > 16 {
		t.Fatalf("%d tokens kept, MaxTokens 16", n)
	}

	// Off.
	off := NewCached(v, CacheConfig{MaxAge: -1})
	before := v.calls
	_, _ = off.Verify(ctx, ada)
	_, _ = off.Verify(ctx, ada)
	if v.calls != before+2 {
		t.Fatalf("MaxAge < 0 kept a token")
	}
}
