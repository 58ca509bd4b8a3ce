package auth

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// RefusalLogEvery is how often RefusalLog sums up the refused tokens at INFO.
const RefusalLogEvery = 10 * time.Second

// RefusalLog logs refused tokens (PROTOCOL.md §6): each at DEBUG with its reason, and
// at INFO at most once per RefusalLogEvery, with how many were refused since. A reason
// may carry what the token's sender chose (a kid, a claim's name), and anyone can send
// tokens: at INFO each would let them fill the log. One RefusalLog may serve both
// transports. Its methods may be called concurrently; the zero value is not usable:
// use NewRefusalLog.
type RefusalLog struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	last    time.Time // guarded by mu; the last summary at INFO
	refused int       // guarded by mu; refusals since
}

// NewRefusalLog returns a RefusalLog writing to log; nil means slog.Default().
func NewRefusalLog(log *slog.Logger) *RefusalLog {
	if log == nil {
		log = slog.Default()
	}
	return &RefusalLog{log: log, now: time.Now}
}

// Refused logs a refused token: why is the verifier's error, attrs say where (the
// transport, the path or connection).
func (l *RefusalLog) Refused(ctx context.Context, why error, attrs ...slog.Attr) {
	if l.log.Enabled(ctx, slog.LevelDebug) {
		l.log.LogAttrs(ctx, slog.LevelDebug, "token refused", append(attrs, slog.String("reason", why.Error()))...)
	}
	now := l.now()
	l.mu.Lock()
	l.refused++
	n := l.refused
	due := now.Sub(l.last) >= RefusalLogEvery
	if due {
		l.last, l.refused = now, 0
	}
	l.mu.Unlock()
	if due {
		l.log.LogAttrs(ctx, slog.LevelInfo, "tokens refused (each with its reason at DEBUG)",
			slog.Int("refused", n), slog.Duration("since", RefusalLogEvery))
	}
}
