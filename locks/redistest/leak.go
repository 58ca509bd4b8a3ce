package redistest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// VerifyTestMain runs the package's tests and fails it when one leaves a goroutine
// behind. After dial failures go-redis starts a goroutine that re-dials once a second
// and notices a closed client only then, so leaks are looked for until a deadline
// rather than once (goleak.Find alone retries for about half a second). Use it as
//
//	func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(3 * time.Second)
		for {
			err := goleak.Find()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
				break
			}
		}
	}
	os.Exit(code)
}
