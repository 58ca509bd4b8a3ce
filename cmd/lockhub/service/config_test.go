package service

import (
	"errors"
	"io"
	"testing"

	"github.com/lockhub/lockhub/cmd/internal/flagenv"
)

// TestCheckOrder: the rules that join settings report every broken one, always in the
// order of check, so the same command line reads the same error every time.
func TestCheckOrder(t *testing.T) {
	args := []string{"--memory-trim-burst=-1", "--audience", "a", "--issuer", "i", "--redis-cluster"}
	want := []string{"redis-cluster", "issuer", "audience", "memory-trim-burst"}
	for range 50 {
		s, err := parseConfig(args, env(), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		err = s.check()
		joined, ok := err.(interface{ Unwrap() []error })
		if !ok {
			t.Fatalf("check() = %v, want the errors of %v", err, want)
		}
		var got []string
		for _, e := range joined.Unwrap() {
			var fe *flagenv.Error
			if !errors.As(e, &fe) {
				t.Fatalf("check() error %v does not name a setting", e)
			}
			got = append(got, fe.Flag)
		}
		if len(got) != len(want) {
			t.Fatalf("check() names %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("check() names %v, want %v", got, want)
			}
		}
	}
}

// TestFirstBadSettingOfAnOwner: of two values an owner's constructor refuses, Run
// names the first in the owner's documented order (hub.Config's fields), every time.
func TestFirstBadSettingOfAnOwner(t *testing.T) {
	for range 50 {
		m := &Main{Args: []string{"--presence-ttl=-1s", "--release-grace=-1s"}, LookupEnv: env(), Stdout: io.Discard, Stderr: io.Discard}
		err := m.Run(t.Context())
		var fe *flagenv.Error
		if !errors.As(err, &fe) || fe.Flag != "release-grace" {
			t.Fatalf("Run = %v, want it to name --release-grace", err)
		}
	}
}
