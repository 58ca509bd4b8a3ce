package auth

import (
	"strings"
	"unicode"
)

// MaxNameLength is the most characters (runes) a cleaned name keeps (PROTOCOL.md §6,
// "Names").
const MaxNameLength = 200

// CleanName returns name as lockhub shows and stores it (PROTOCOL.md §6, "Names"):
// without control and format characters (Unicode categories Cc and Cf: NUL, newlines,
// zero-width joiners, bidirectional overrides that would make one holder's name read
// as another's), cut to MaxNameLength runes. Invalid UTF-8 becomes U+FFFD, so the
// result is always valid UTF-8. It may be empty; an Identity then takes the oid.
func CleanName(name string) string {
	var b strings.Builder
	n := 0
	for _, r := range name { // an invalid byte comes out as utf8.RuneError, written as U+FFFD
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			continue
		}
		if n == MaxNameLength {
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}
