package locks

import (
	"sync"
	"time"
)

// warnings throttles a warning per key to one per limitWarnEvery, adding up what
// happened in between. It forgets a key not warned of for that long once it holds
// maxWarned keys, so it holds about the keys warned of lately.
type warnings struct {
	mu sync.Mutex
	by map[string]warned // guarded by mu
}

type warned struct {
	last time.Time
	n    int // since last
}

const maxWarned = 1024

// note adds n to key's count and reports whether a warning is due, with the count
// since the last warning.
func (w *warnings) note(key string, n int, now time.Time) (since int, due bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.by[key]
	e.n += n
	if !e.last.IsZero() && now.Sub(e.last) < limitWarnEvery {
		w.by[key] = e
		return 0, false
	}
	if w.by == nil {
		w.by = map[string]warned{}
	}
	if len(w.by) >= maxWarned {
		for k, o := range w.by {
			if now.Sub(o.last) >= limitWarnEvery {
				delete(w.by, k)
			}
		}
	}
	w.by[key] = warned{last: now}
	return e.n, true
}
