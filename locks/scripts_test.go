package locks

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestScriptReplies: every status a write script answers is a named reply of its Go
// type, and every named reply is one the script answers, so store.go's switches and
// the scripts' headers speak of the same statuses.
func TestScriptReplies(t *testing.T) {
	status := regexp.MustCompile(`return reply\('([A-Za-z]+)',`)
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"claim", claimSrc, strs(claimAcquired, claimMine, claimLocked, claimTooMany, claimRated)},
		{"renew", renewSrc, strs(renewRenewed, renewLost, renewRaced)},
		{"release", releaseSrc, strs(releaseReleased, releaseKept, releaseNotHeld, releaseRated)},
		{"takeover", takeoverSrc, strs(takeoverTakenOver, takeoverAcquired, takeoverMine, takeoverTooMany, takeoverRated)},
		{"forcerelease", forceReleaseSrc, strs(forceReleased, forceNotHeld, forceRated)},
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

// TestInstant: the prelude's timestamp reader agrees with Go's RFC 3339 parser on what
// Go and the .NET service write (0 to 7 fractional digits, Z or an offset), on
// redis-server's Lua and on miniredis's, and refuses what is not a timestamp.
func TestInstant(t *testing.T) {
	srv := redistest.StartServer(t)
	mr := miniredis.RunT(t)
	mc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { mc.Close() })
	sc := redis.NewScript(preludeSrc + "local ms = instant(ARGV[7]) if ms == nil then return 'nil' end return string.format('%.0f', ms)")
	good := []string{
		"2026-12-02T09:15:00.123Z", "2026-12-02T09:15:00Z", "2026-12-02T09:15:00.1Z",
		"2026-12-02T09:15:00.1234567Z", "2026-12-02T10:15:00.5+01:00", "2026-12-01T23:45:00-09:30",
		"1970-01-01T00:00:00Z", "2000-02-29T23:59:59.999Z", "2100-03-01T00:00:00Z", "1969-12-31T23:59:59.9Z",
	}
	for _, c := range []redis.Scripter{srv.Client(t), mc} {
		for _, s := range good {
			want, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := sc.Run(ctxT(t), c, nil, "", "", "", "", 0, 0, s).Text()
			if err != nil {
				t.Fatal(err)
			}
			// Go's ms truncate toward the past; so does the Lua (digits cut at three).
			if w := fmt.Sprint(want.Truncate(time.Millisecond).UnixMilli()); got != w {
				t.Errorf("instant(%q) = %s, want %s", s, got, w)
			}
		}
		for _, s := range []string{"", "yesterday", "2026-12-02 09:15:00Z", "2026-12-02T09:15:00", "2026-12-02T09:15:00+0100", "2026-12-02T09:15:00.Z"} {
			if got, err := sc.Run(ctxT(t), c, nil, "", "", "", "", 0, 0, s).Text(); err != nil || got != "nil" {
				t.Errorf("instant(%q) = %s, %v; want nil", s, got, err)
			}
		}
	}
}

// TestScriptName: every script of the store has a name, and nothing else has one, so
// that a SLOWLOG read by an operator or lockbench names each of lockhub's scripts.
func TestScriptName(t *testing.T) {
	fields := reflect.TypeOf(scripts{}).NumField()
	if len(scriptNames) != fields {
		t.Fatalf("%d scripts named, the store has %d", len(scriptNames), fields)
	}
	sc := newScripts()
	if got := ScriptName(sc.sweep.Hash()); got != "sweep" {
		t.Errorf("ScriptName(sweep) = %q", got)
	}
	if got := ScriptName(strings.ToUpper(sc.claim.Hash())); got != "claim" {
		t.Errorf("ScriptName(CLAIM's SHA1 in capitals) = %q", got)
	}
	if got := ScriptName("0000000000000000000000000000000000000000"); got != "" {
		t.Errorf("ScriptName(unknown) = %q, want empty", got)
	}
}
