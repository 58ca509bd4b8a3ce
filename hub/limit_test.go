package hub

import (
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/lockhub/lockhub/locks/redistest"
	"github.com/lockhub/lockhub/protocol"
)

// TestFrameOneByteTooLarge pins the boundary TestFrameTooLarge brackets from both
// sides: a text frame of exactly 64 KiB + 1 byte, well-formed JSON, closes the socket
// with 1009, before and after authentication, and nothing is written.
func TestFrameOneByteTooLarge(t *testing.T) {
	th := startMini(t, hubOptions{})
	for _, tc := range []struct {
		name   string
		authed bool
		head   string // the frame up to its padding string
	}{
		{"before auth", false, `{"type":"auth","token":"`},
		{"after auth", true, `{"id":"1","type":"mine","pad":"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := padFrame(t, tc.head, protocol.MaxFrameSize+1)
			var c *protocol.Client
			if tc.authed {
				c, _ = th.dial("acme", "u-ada")
			} else {
				c = th.dialRaw()
			}
			_ = c.SendRaw(tctx(t), websocket.MessageText, []byte(frame)) // the hub may cut it mid-write
			wantClosed(t, c, protocol.CloseTooLarge)
		})
	}
	// Counted when the hub's read ends, which may be just after the client saw the close;
	// the limit after the close (readEnded): wait for both.
	redistest.Eventually(t, "two 1009 closes and their limits counted", func() bool {
		return th.metric("lockhub_hub_closes_total", "code=1009") == 2 &&
			th.metric("lockhub_hub_limit_hits_total", "limit="+limitPreAuthFrame) >= 1 &&
			th.metric("lockhub_hub_limit_hits_total", "limit="+limitFrame) >= 1
	})
	// Each is a limit of its own (PROTOCOL.md §4: every limit hit is counted by limit).
	for _, limit := range []string{limitPreAuthFrame, limitFrame} {
		if got := th.metric("lockhub_hub_limit_hits_total", "limit="+limit); got != 1 {
			t.Errorf("lockhub_hub_limit_hits_total{limit=%q} = %v, want 1", limit, got)
		}
	}
	if len(th.redisKeys()) != 0 {
		t.Fatalf("keys written: %v", th.redisKeys())
	}
}

// padFrame returns head, spaces and `"}`, size bytes in all.
func padFrame(t testing.TB, head string, size int) string {
	t.Helper()
	frame := head + strings.Repeat(" ", size-len(head)-2) + `"}`
	if len(frame) != size {
		t.Fatalf("frame is %d bytes, want %d", len(frame), size)
	}
	return frame
}
