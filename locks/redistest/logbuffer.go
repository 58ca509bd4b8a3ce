package redistest

import (
	"bytes"
	"sync"
)

// LogBuffer is where a test sends the logs of a service whose goroutines write while
// the test reads: a bytes.Buffer behind a mutex. The zero value is ready to use, and
// its methods may be called concurrently.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Reset drops everything written so far.
func (b *LogBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
