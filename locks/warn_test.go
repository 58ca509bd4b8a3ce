package locks

import (
	"strconv"
	"testing"
	"time"
)

// TestWarningsOncePer10s: a limit hit again and again is warned of at once, then not
// before limitWarnEvery has passed, and then with every hit since the last warning
// (PROTOCOL.md §4: at most once per 10 s per limit). Keys are throttled apart, and the
// set forgets keys not warned of lately rather than growing.
func TestWarningsOncePer10s(t *testing.T) {
	var w warnings
	t0 := time.Unix(1_800_000_000, 0)
	if n, due := w.note(SettingLocksPerTenant, 1, t0); !due || n != 1 {
		t.Fatalf("the first hit: due %v with %d, want a warning of 1", due, n)
	}
	for i := range 5 {
		at := t0.Add(time.Duration(i+1) * time.Second)
		if _, due := w.note(SettingLocksPerTenant, 2, at); due {
			t.Fatalf("a hit %s after the warning was warned of again", at.Sub(t0))
		}
	}
	if n, due := w.note(SettingChangesPerPerson, 1, t0.Add(time.Second)); !due || n != 1 {
		t.Fatalf("another limit's first hit: due %v with %d, want its own warning", due, n)
	}
	if _, due := w.note(SettingLocksPerTenant, 1, t0.Add(limitWarnEvery-time.Millisecond)); due {
		t.Fatal("warned again before limitWarnEvery")
	}
	// 5 hits of 2, one of 1, and this one: 12 since the first warning.
	if n, due := w.note(SettingLocksPerTenant, 1, t0.Add(limitWarnEvery)); !due || n != 12 {
		t.Fatalf("after limitWarnEvery: due %v with %d, want a warning counting the 12 hits since", due, n)
	}
	if _, due := w.note(SettingLocksPerTenant, 1, t0.Add(limitWarnEvery+time.Second)); due {
		t.Fatal("the second warning did not restart the 10 s")
	}

	// Bounded: keys warned of over limitWarnEvery ago are dropped once maxWarned are held.
	var many warnings
	for i := range maxWarned {
		many.note("tenant-"+strconv.Itoa(i), 1, t0)
	}
	many.note("late", 1, t0.Add(limitWarnEvery))
	if n := len(many.by); n != 1 {
		t.Fatalf("%d keys held after the old ones aged, want 1", n)
	}
}
