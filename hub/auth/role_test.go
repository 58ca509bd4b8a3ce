package auth

import "testing"

func TestRoles(t *testing.T) {
	ada := func(roles ...string) Identity { return Identity{Tenant: "acme", OID: "u-ada", Roles: roles} }
	for _, tc := range []struct {
		name                    string
		roles                   Roles
		id                      Identity
		takeOver, admin         bool
		wantTakeover, wantAdmin string // the roles after WithDefaults
	}{
		{"zero: the defaults", Roles{}, ada(DefaultTakeoverRole), true, false, DefaultTakeoverRole, DefaultAdminRole},
		{"zero: the default admin", Roles{}, ada(DefaultAdminRole), false, true, DefaultTakeoverRole, DefaultAdminRole},
		{"no roles", Roles{}, ada(), false, false, DefaultTakeoverRole, DefaultAdminRole},
		{"configured takeover replaces the default", Roles{Takeover: "Ops.Take"}, ada(DefaultTakeoverRole), false, false, "Ops.Take", DefaultAdminRole},
		{"configured takeover", Roles{Takeover: "Ops.Take"}, ada("Ops.Take"), true, false, "Ops.Take", DefaultAdminRole},
		{"configured admin", Roles{Admin: "Ops.Locks"}, ada("Ops.Locks", DefaultAdminRole), false, true, DefaultTakeoverRole, "Ops.Locks"},
		{"configured admin replaces the default", Roles{Admin: "Ops.Locks"}, ada(DefaultAdminRole), false, false, DefaultTakeoverRole, "Ops.Locks"},
		{"compared exactly", Roles{}, ada("locks.takeover", "Locks.Admin "), false, false, DefaultTakeoverRole, DefaultAdminRole},
		{"both", Roles{Takeover: "T", Admin: "A"}, ada("A", "T"), true, true, "T", "A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.roles.CanTakeOver(tc.id); got != tc.takeOver {
				t.Errorf("CanTakeOver(%v) = %v, want %v", tc.id.Roles, got, tc.takeOver)
			}
			if got := tc.roles.IsAdmin(tc.id); got != tc.admin {
				t.Errorf("IsAdmin(%v) = %v, want %v", tc.id.Roles, got, tc.admin)
			}
			d := tc.roles.WithDefaults()
			if d.Takeover != tc.wantTakeover || d.Admin != tc.wantAdmin {
				t.Errorf("WithDefaults() = %+v, want {%s %s}", d, tc.wantTakeover, tc.wantAdmin)
			}
			if d.WithDefaults() != d || d.CanTakeOver(tc.id) != tc.takeOver || d.IsAdmin(tc.id) != tc.admin {
				t.Errorf("WithDefaults() = %+v does not keep the policy", d)
			}
		})
	}
}
