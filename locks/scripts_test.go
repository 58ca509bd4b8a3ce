package locks

import (
	"maps"
	"regexp"
	"slices"
	"testing"
)

// TestScriptReplies: every status a write script answers is a named reply of its Go
// type, and every named reply is one the script answers, so store.go's switches and
// the scripts' headers speak of the same statuses.
func TestScriptReplies(t *testing.T) {
	status := regexp.MustCompile(`return \{'([A-Za-z]+)',`)
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"claim", claimSrc, strs(claimAcquired, claimMine, claimLocked)},
		{"renew", renewSrc, strs(renewRenewed, renewLost, renewRaced)},
		{"release", releaseSrc, strs(releaseReleased, releaseKept, releaseNotHeld)},
		{"takeover", takeoverSrc, strs(takeoverTakenOver, takeoverAcquired, takeoverMine)},
		{"detach", detachSrc, strs(detachReleased, detachKept, detachNotHeld)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found := map[string]bool{}
			for _, m := range status.FindAllStringSubmatch(tc.src, -1) {
				found[m[1]] = true
			}
			got := slices.Sorted(maps.Keys(found))
			if want := slices.Sorted(slices.Values(tc.want)); !slices.Equal(got, want) {
				t.Fatalf("%s.lua answers %q, Go names %q", tc.name, got, want)
			}
		})
	}
}

func strs[R ~string](rs ...R) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}
