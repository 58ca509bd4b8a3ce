package auth

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// records is a slog.Handler that keeps what it is given.
type records struct {
	mu  sync.Mutex
	all []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.all = append(h.all, r)
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// at returns the records of level, and the "refused" count of each.
func (h *records) at(level slog.Level) (n int, counts []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.all {
		if r.Level != level {
			continue
		}
		n++
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "refused" {
				counts = append(counts, a.Value.Int64())
			}
			return true
		})
	}
	return n, counts
}

// TestRefusalLog: every refusal at DEBUG with its reason; at INFO the first, then at
// most one per RefusalLogEvery, counting the refusals since the last.
func TestRefusalLog(t *testing.T) {
	h := &records{}
	l := NewRefusalLog(slog.New(h))
	now := time.Unix(1_700_000_000, 0)
	l.now = func() time.Time { return now }
	why := errors.New("unknown kid \"attacker-chosen\"")
	for range 5 {
		l.Refused(context.Background(), why)
		now = now.Add(time.Second)
	}
	now = now.Add(RefusalLogEvery) // 15 s after the first
	l.Refused(context.Background(), why)
	if n, _ := h.at(slog.LevelDebug); n != 6 {
		t.Fatalf("%d refusals at DEBUG, want 6", n)
	}
	n, counts := h.at(slog.LevelInfo)
	if n != 2 || len(counts) != 2 || counts[0] != 1 || counts[1] != 5 {
		t.Fatalf("INFO records %d with counts %v, want 2: 1, then the 5 since", n, counts)
	}
}
