package protocol

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The rules of PROTOCOL.md §1 as the contract writes them (TestNameRulesAreTheContracts):
// the hand-written checks must agree with them on every input.
var (
	tenantRule = regexp.MustCompile("^" + NameRule + "$")
	uidRule    = regexp.MustCompile("^" + UIDRule + "$")
)

// TestNameRulesAreTheContracts: NameRule and UIDRule are the rules PROTOCOL.md §1
// writes, each for the names it gives them.
func TestNameRulesAreTheContracts(t *testing.T) {
	doc, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := "tenant and type `" + NameRule + "`, uid `" + UIDRule + "`"
	if !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), rules) {
		t.Fatalf("PROTOCOL.md §1 does not read %q", rules)
	}
}

// nameInputs are the names the rules are checked on: every single byte, each at the
// lengths around both limits, and a few a hostile caller would try.
func nameInputs() []string {
	var in []string
	for b := range 256 {
		c := string([]byte{byte(b)})
		in = append(in, c, "a"+c+"z")
		for _, n := range []int{63, 64, 65, 127, 128, 129} {
			in = append(in, strings.Repeat("a", n-1)+c)
		}
	}
	return append(in, "", "acme", "{acme}", "ac}me", "r-1001", "a:b:c", "ré", "a b", "../x", "*",
		"u-ada\x00", strings.Repeat(":", 128), strings.Repeat("é", 32))
}

func TestNameRules(t *testing.T) {
	for _, rule := range []struct {
		name  string
		valid func(string) bool
		want  *regexp.Regexp
	}{
		{"ValidTenant", ValidTenant, tenantRule},
		{"ValidType", ValidType, tenantRule},
		{"ValidUID", ValidUID, uidRule},
		{"ValidOID", ValidOID, uidRule},
	} {
		t.Run(rule.name, func(t *testing.T) {
			accepted := 0
			for _, s := range nameInputs() {
				got := rule.valid(s)
				if want := rule.want.MatchString(s); got != want {
					t.Errorf("%s(%q) = %v, the contract's %s says %v", rule.name, s, got, rule.want, want)
				}
				if got {
					accepted++
				}
			}
			if accepted == 0 { // the inputs must reach both answers
				t.Fatal("no input was accepted")
			}
		})
	}
}

func TestInvalidEntityError(t *testing.T) {
	for _, tc := range []struct {
		field, value, want string
	}{
		{"tenant", "ac}me", `invalid tenant "ac}me": must match [A-Za-z0-9_.-]{1,64}`},
		{"entityType", "A:B", `invalid entityType "A:B": must match [A-Za-z0-9_.-]{1,64}`},
		{"entityUid", "a b", `invalid entityUid "a b": must match [A-Za-z0-9_.:-]{1,128}`},
		{"holderOid", "", `invalid holderOid "": must match [A-Za-z0-9_.:-]{1,128}`},
		{"entityUid", strings.Repeat("x", 81), `invalid entityUid "` + strings.Repeat("x", 80) + `…": must match [A-Za-z0-9_.:-]{1,128}`},
	} {
		t.Run(tc.field, func(t *testing.T) {
			var err error = fmt.Errorf("claim: %w", &InvalidEntityError{Field: tc.field, Value: tc.value})
			var ie *InvalidEntityError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalidEntity) {
				t.Fatalf("%v: not an *InvalidEntityError matching ErrInvalidEntity", err)
			}
			if got := ie.ClientMessage(); got != tc.want {
				t.Fatalf("ClientMessage() = %q, want %q", got, tc.want)
			}
			if ie.ErrorCode() != CodeInvalidEntity || ie.Error() != "protocol: "+tc.want {
				t.Fatalf("ErrorCode() = %q, Error() = %q", ie.ErrorCode(), ie.Error())
			}
		})
	}
	if errors.Is(&Error{Code: CodeInvalidEntity}, ErrInvalidEntity) {
		t.Fatal("an error frame matches ErrInvalidEntity")
	}
}
