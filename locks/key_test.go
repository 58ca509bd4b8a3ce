package locks

import (
	"errors"
	"strings"
	"testing"
)

// TestKeyShape pins the exact key strings of PROTOCOL.md §1: the .NET service reads
// the same keys, and the hash tag is what keeps a tenant in one cluster slot. If this
// test fails, someone "cleaned up" the key format: don't.
func TestKeyShape(t *testing.T) {
	ref := Ref{Tenant: "acme", Type: "ApprovalRequest", UID: "r-1001"}
	for _, tc := range []struct{ name, got, want string }{
		{"lock", LockKey(ref), "lock:{acme}:ApprovalRequest:r-1001"},
		{"index", IndexKey("acme", "ApprovalRequest"), "lockidx:{acme}:ApprovalRequest"},
		{"values", ValuesKey("acme", "ApprovalRequest"), "lockval:{acme}:ApprovalRequest"},
		{"seen", seenKey("acme", "ApprovalRequest"), "lockseen:{acme}:ApprovalRequest"},
		{"conns", ConnsKey(ref), "lockconn:{acme}:ApprovalRequest:r-1001"},
		{"left", leftKey(ref), "lockleft:{acme}:ApprovalRequest:r-1001"}, // built from conns in Lua too (prelude.lua)
		{"line", LineKey(ref), "lockline:{acme}:ApprovalRequest:r-1001"},
		{"hand", handKey(ref), "lockhand:{acme}:ApprovalRequest:r-1001"},
		{"uid with colons", LockKey(Ref{"t.1", "Order_v2", "a:b:c"}), "lock:{t.1}:Order_v2:a:b:c"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s key = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name  string
		ref   Ref
		field string // "" when valid
	}{
		{"plain", Ref{"acme", "ApprovalRequest", "r-1001"}, ""},
		{"every allowed char", Ref{"a-Z_0.9", "T-y_p.e", "u:i_d-0.9"}, ""},
		{"max lengths", Ref{long(64), long(64), long(128)}, ""},
		{"empty tenant", Ref{"", "T", "u"}, "tenant"},
		{"tenant too long", Ref{long(65), "T", "u"}, "tenant"},
		{"tenant with brace", Ref{"ac}me", "T", "u"}, "tenant"},
		{"tenant with open brace", Ref{"{acme", "T", "u"}, "tenant"},
		{"tenant with colon", Ref{"ac:me", "T", "u"}, "tenant"},
		{"empty type", Ref{"acme", "", "u"}, "entityType"},
		{"type with colon", Ref{"acme", "A:B", "u"}, "entityType"},
		{"type too long", Ref{"acme", long(65), "u"}, "entityType"},
		{"empty uid", Ref{"acme", "T", ""}, "entityUid"},
		{"uid too long", Ref{"acme", "T", long(129)}, "entityUid"},
		{"uid with brace", Ref{"acme", "T", "a}b"}, "entityUid"},
		{"uid hash tag", Ref{"acme", "T", "{other}"}, "entityUid"},
		{"uid with space", Ref{"acme", "T", "a b"}, "entityUid"},
		{"uid with newline", Ref{"acme", "T", "a\nb"}, "entityUid"},
		{"uid with NUL", Ref{"acme", "T", "a\x00b"}, "entityUid"},
		{"uid unicode", Ref{"acme", "T", "ré"}, "entityUid"},
		{"uid glob", Ref{"acme", "T", "*"}, "entityUid"},
		{"uid slash", Ref{"acme", "T", "../x"}, "entityUid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ref.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ie *InvalidEntityError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalidEntity) {
				t.Fatalf("Validate() = %v, want *InvalidEntityError", err)
			}
			if ie.Field != tc.field {
				t.Fatalf("Field = %q, want %q", ie.Field, tc.field)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	r, err := NewRegistry("Order", "ApprovalRequest", "Order")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Types(), ","); got != "ApprovalRequest,Order" {
		t.Fatalf("Types() = %s", got)
	}
	err = r.Check("Invoice")
	var nl *NotLockableError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNotLockable) {
		t.Fatalf("Check(Invoice) = %v, want *NotLockableError", err)
	}
	if !strings.Contains(nl.Error(), "ApprovalRequest, Order") {
		t.Fatalf("error %q does not name the registered types", nl.Error())
	}
	if _, err := NewRegistry("Bad Type"); err == nil {
		t.Fatal("NewRegistry accepted a type with a space")
	}
	def, _ := NewRegistry()
	if def.Check("ApprovalRequest") != nil {
		t.Fatal("the default registry lacks ApprovalRequest")
	}
}
