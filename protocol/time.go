package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// TimeLayout is the wire format of every timestamp: RFC 3339, UTC, "Z", exactly
// three fractional digits. The .NET service deserializes it; it must not change.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time is an instant that marshals as TimeLayout and unmarshals any RFC 3339 form,
// as the .NET service writes them: System.Text.Json trims trailing zeros (0 to 7
// fractional digits) and may write an offset instead of "Z".
//
// The zero Time marshals as JSON null.
type Time struct{ time.Time }

// NewTime returns t truncated to the millisecond, the precision of the wire.
func NewTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Millisecond)} }

// TimeFromMillis returns the instant ms milliseconds after the Unix epoch.
func TimeFromMillis(ms int64) Time { return Time{time.UnixMilli(ms).UTC()} }

// String formats t as TimeLayout.
func (t Time) String() string { return t.UTC().Format(TimeLayout) }

// AppendText appends TimeLayout form to b without allocating a string.
func (t Time) AppendText(b []byte) ([]byte, error) { return t.UTC().AppendFormat(b, TimeLayout), nil }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("protocol: time: year %d outside [0,9999]", y)
	}
	b := make([]byte, 0, len(TimeLayout)+2)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimeLayout)
	return append(b, '"'), nil
}

// UnmarshalJSON implements json.Unmarshaler. It accepts RFC 3339 with 0 to 9
// fractional digits and "Z" or a numeric offset, and null. An instant whose UTC year
// is outside [0,9999] is refused: it has no RFC 3339 form to marshal back to.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("protocol: time %.40s is not a JSON string", b)
	}
	s := string(b[1 : len(b)-1])
	if bytes.IndexByte(b, '\\') >= 0 { // escaped, as JSON allows: rare, so decoded apart
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("protocol: time %.40s is not a JSON string", b)
		}
	}
	// time.RFC3339Nano parses any number of fractional digits, and offsets.
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("protocol: time: %w", err)
	}
	// An offset can move a 4-digit year out of range in UTC, where it no longer
	// marshals as RFC 3339.
	v = v.UTC()
	if y := v.Year(); y < 0 || y > 9999 {
		return fmt.Errorf("protocol: time %q: year %d in UTC outside [0,9999]", s, y)
	}
	t.Time = v
	return nil
}
