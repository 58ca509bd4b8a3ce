package auth

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lestrrat-go/jwx/v2/jwa"

	"github.com/lockhub/lockhub/hub/auth/authtest"
)

func TestCleanName(t *testing.T) {
	long := strings.Repeat("é", 300) // 2 bytes a rune: a cut by bytes would differ
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "Ada Lovelace", "Ada Lovelace"},
		{"non-Latin letters kept", "Ада Лавлейс 愛達", "Ада Лавлейс 愛達"},
		{"bidi override (Cf)", "Ada\u202Eecalevol", "Adaecalevol"},
		{"bidi isolates and marks (Cf)", "\u2066Ada\u2069\u200F", "Ada"},
		{"zero-width joiner (Cf)", "A\u200Dda", "Ada"},
		{"byte order mark (Cf)", "\uFEFFAda", "Ada"},
		{"NUL and newlines (Cc)", "Ada\x00\r\nLovelace\t", "AdaLovelace"},
		{"C1 control (Cc)", "Ada\u0085Lovelace", "AdaLovelace"},
		{"invalid UTF-8 becomes U+FFFD", "Ada\xff", "Ada\uFFFD"},
		{"300 runes cut to 200 runes", long, strings.Repeat("é", 200)},
		{"removed characters do not count", strings.Repeat("\u202E", 50) + long, strings.Repeat("é", 200)},
		{"all control", "\x00\u202E\u200D\n", ""},
		{"line and paragraph separators (Zl, Zp)", "Ada\u2028Love\u2029lace", "AdaLovelace"},
		{"Hangul fillers only (version 3)", "\u3164\u115F\u1160\uFFA0", ""},
		{"Hangul filler among letters", "A\u3164da", "Ada"},
		{"surrounding white space trimmed", " \u00A0\u3000Ada Lovelace\u2003 ", "Ada Lovelace"},
		{"white space left by removed characters trimmed", "\u202E Ada \u2028", "Ada"},
		{"inner white space kept", "Ada  Lovelace", "Ada  Lovelace"},
		{"leading spaces do not count toward the cut", "   " + long, strings.Repeat("é", 200)},
		{"no trailing space after the cut", strings.Repeat("x", 199) + " y", strings.Repeat("x", 199)},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CleanName(tc.in)
			if got != tc.want {
				t.Fatalf("CleanName(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !utf8.ValidString(got) || utf8.RuneCountInString(got) > MaxNameLength {
				t.Fatalf("CleanName(%q) = %q: invalid UTF-8 or longer than %d runes", tc.in, got, MaxNameLength)
			}
		})
	}
}

// TestIdentityNameCleaned: the name of every verified token is clean, and a name that
// cleaning leaves empty, or none at all, is the oid. The Dev verifier stands for both:
// they share identityOf.
func TestIdentityNameCleaned(t *testing.T) {
	d, key := newTestDev(t)
	for _, tc := range []struct{ name, in, want string }{
		{"bidi override", "Mallory\u202Eeca", "Malloryeca"},
		{"300 characters", strings.Repeat("x", 300), strings.Repeat("x", 200)},
		{"all control becomes the oid", "\u202E\u200D\x00\n", "u-ada"},
		{"filler letters only become the oid", "\u3164\u3164", "u-ada"},
		{"separators and spaces only become the oid", " \u2028 \u2029 ", "u-ada"},
		{"empty becomes the oid", "", "u-ada"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := d.Issue("acme", "u-ada", tc.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			id, err := d.Verify(context.Background(), tok)
			if err != nil {
				t.Fatal(err)
			}
			if id.Name != tc.want || id.Holder().Name != tc.want {
				t.Fatalf("Name = %q, want %q", id.Name, tc.want)
			}
		})
	}
	// A token without the claim at all.
	tok := authtest.Sign(t, goodClaims(DevIssuer, DevAudience).With("name", nil), jwa.EdDSA, key, "dev")
	if id, err := d.Verify(context.Background(), tok); err != nil || id.Name != "u-ada" {
		t.Fatalf("Verify(no name) = %+v, %v; want the oid as name", id, err)
	}
}
