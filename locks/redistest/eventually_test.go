package redistest_test

import (
	"testing"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestEventually: cond is called until it holds, and not once more.
func TestEventually(t *testing.T) {
	calls := 0
	redistest.Eventually(t, "the third call", func() bool {
		calls++
		return calls == 3
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
	redistest.Eventually(t, "a condition that holds at once", func() bool { return true })
}
