package e2e

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain builds the lockhub binary for the story in the background (startBuild),
// removes it afterwards, and checks that no goroutine outlives the tests: every
// browser, server and process a test starts is stopped by its cleanup.
func TestMain(m *testing.M) {
	startBuild()
	code := m.Run()
	cleanupBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
