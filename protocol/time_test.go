package protocol

import (
	"encoding/json"
	"testing"
	"time"
)

func TestTimeUnmarshal(t *testing.T) {
	base := time.Date(2026, 12, 2, 9, 15, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{`"2026-12-02T09:15:00Z"`, base},                                    // System.Text.Json, no fraction
		{`"2026-12-02T09:15:00.1Z"`, base.Add(100 * time.Millisecond)},      // trailing zeros trimmed
		{`"2026-12-02T09:15:00.123Z"`, base.Add(123 * time.Millisecond)},    // our own form
		{`"2026-12-02T09:15:00.1234567Z"`, base.Add(123456700)},             // .NET ticks: 7 digits
		{`"2026-12-02T10:15:00+01:00"`, base},                               // an offset instead of Z
		{`"2026-12-02T04:45:00.5-04:30"`, base.Add(500 * time.Millisecond)}, // a negative, odd offset
		{`"2026-12-02T09:15:00\u002E1Z"`, base.Add(100 * time.Millisecond)}, // a JSON escape
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got Time
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Errorf("Unmarshal = %v, want %v in UTC", got.Time, tt.want)
			}
		})
	}

	var null Time
	if err := json.Unmarshal([]byte(`null`), &null); err != nil || !null.IsZero() {
		t.Errorf("Unmarshal(null) = %v, %v; want the zero Time", null, err)
	}

	for _, bad := range []string{
		`"2026-12-02"`,                // a date is not an instant
		`"2026-12-02 09:15:00Z"`,      // not RFC 3339
		`"2026-12-02T09:15:00"`,       // no zone
		`1796202900123`,               // Unix ms: not our wire form
		`"0000-01-01T00:30:00+01:00"`, // year -1 in UTC
		`"9999-12-31T23:30:00-01:00"`, // year 10000 in UTC
		`""`,
		`"`,
	} {
		var got Time
		if err := got.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("Unmarshal(%s) = %v, want an error", bad, got)
		}
	}
}

func TestTimeMarshal(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	tests := []struct {
		in   Time
		want string
	}{
		{NewTime(time.Date(2026, 12, 2, 9, 15, 0, 0, time.UTC)), `"2026-12-02T09:15:00.000Z"`},           // always 3 digits
		{NewTime(time.Date(2026, 12, 2, 9, 15, 0, 100_000_000, time.UTC)), `"2026-12-02T09:15:00.100Z"`}, // zeros kept
		{Time{time.Date(2026, 12, 2, 9, 15, 0, 123_456_789, time.UTC)}, `"2026-12-02T09:15:00.123Z"`},    // truncated, not rounded
		{Time{time.Date(2026, 12, 2, 10, 15, 0, 999_999_999, cet)}, `"2026-12-02T09:15:00.999Z"`},        // always UTC, Z
		{TimeFromMillis(1796202900123), `"2026-12-02T09:15:00.123Z"`},                                    // Unix ms
		{Time{}, `null`}, // the zero Time
	}
	for _, tt := range tests {
		assertJSON(t, tt.in, tt.want)
	}
	if _, err := json.Marshal(Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("Marshal of year 10000 succeeded")
	}
}
