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
// as another's), line and paragraph separators (Zl, Zp) and the invisible filler
// letters (U+115F, U+1160, U+3164, U+FFA0, which would make a name look empty), with
// surrounding white space trimmed, cut to MaxNameLength runes. Invalid UTF-8 becomes
// U+FFFD, so the result is always valid UTF-8. It may be empty; an Identity then
// takes the oid. The browser client cleans names the same way
// (web/static/lockhub/format.js cleanName).
func CleanName(name string) string {
	var b strings.Builder
	for _, r := range name { // an invalid byte comes out as utf8.RuneError, written as U+FFFD
		if removed(r) {
			continue
		}
		b.WriteRune(r)
	}
	s := strings.TrimSpace(b.String())
	n := 0
	for i := range s {
		if n == MaxNameLength {
			return strings.TrimRightFunc(s[:i], unicode.IsSpace)
		}
		n++
	}
	return s
}

// removed reports whether CleanName drops r wherever it stands.
func removed(r rune) bool {
	switch r {
	case '\u115F', '\u1160', '\u3164', '\uFFA0': // Hangul fillers: letters (Lo) that show nothing
		return true
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}
