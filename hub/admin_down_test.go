package hub

import (
	"testing"

	"github.com/lockhub/lockhub/hub/auth"
	"github.com/lockhub/lockhub/protocol"
)

// TestAdminLocksStoreDown: while Redis fails, the console's list answers an error
// frame store_unavailable, never an empty list (PROTOCOL.md §5, version 3); once
// Redis answers, the list is back.
func TestAdminLocksStoreDown(t *testing.T) {
	th := startMini(t, hubOptions{})
	ctx := tctx(t)
	root := th.dialAs("acme", protocol.Holder{OID: "u-root", Name: "Rita Root"}, auth.DefaultAdminRole)
	expect(t, protocol.OutcomeAcquired)(root.Claim(ctx, "ApprovalRequest", "r-1"))
	th.mr.SetError("LOADING Redis is loading the dataset in memory")
	_, err := root.AdminLocks(ctx)
	wantCode(t, err, protocol.CodeStoreUnavailable)
	th.mr.SetError("")
	if ls, err := root.AdminLocks(ctx); err != nil || len(ls) != 1 {
		t.Fatalf("AdminLocks with Redis back = %v, %v; want the one lock", ls, err)
	}
}
