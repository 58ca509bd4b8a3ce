package main

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// slowStats is what one phase's SLOWLOG says, read with what else is in it: the
// commands run inside a script. Redis 7 logs those as entries of their own (the
// client "?:0"), pushed before the script's entry with the IDs just below it (a
// script runs alone). A command Redis flags fast (COMMAND INFO; Redis 7.0 gives the
// flag to commands of constant or logarithmic cost, EXISTS, ZSCORE, ZRANK, ZADD,
// HMGET, and to MGET, which lockhub's list pages send with at most 64 keys) takes
// microseconds, so the time one is logged at over a millisecond is time Redis did not
// run (on a machine shared with its clients: waiting for a core). The slowest such is
// the floor of what SLOWLOG can show in that run, and inside a script, time that is
// not the script's work.
type slowStats struct {
	SlowestUs   int64  `json:"slowestUs"` // the longest command, as SLOWLOG measured it
	SlowestKind string `json:"slowestKind"`
	// WorkUs is the longest command less the time the fast commands inside it were
	// logged at (a script's own; a command sent alone is counted whole, fast or
	// not): an upper bound of its work in the Redis, the stalls SLOWLOG caught taken out.
	WorkUs   int64  `json:"workUs"`
	WorkKind string `json:"workKind"`
	// FastUs is the longest fast command, sent alone or inside a script: the floor.
	FastUs   int64      `json:"fastUs"`
	FastKind string     `json:"fastKind"`
	Slow     []slowKind `json:"slow"` // the slowest kinds of command, those inside a script apart
}

// scriptClient is how SLOWLOG names the client of a command run inside a script.
const scriptClient = "?:0"

// fastCommands are the commands the server flags fast (lower case), from COMMAND INFO.
func fastCommands(ctx context.Context, rdb redis.UniversalClient) (map[string]bool, error) {
	infos, err := rdb.Command(ctx).Result()
	if err != nil {
		return nil, err
	}
	fast := map[string]bool{}
	for name, in := range infos {
		if slices.Contains(in.Flags, "fast") {
			fast[strings.ToLower(name)] = true
		}
	}
	return fast, nil
}

// nodeSlowStats reads one node's SLOWLOG entries, in any order (their IDs are the
// node's own).
func nodeSlowStats(logs []redis.SlowLog, fast map[string]bool) slowStats {
	logs = slices.Clone(logs)
	slices.SortFunc(logs, func(a, b redis.SlowLog) int { return cmp.Compare(a.ID, b.ID) })
	var st slowStats
	kinds := map[string]*slowKind{}
	var stalled int64 // the fast commands' time inside the script whose entry comes next
	for _, l := range logs {
		us := l.Duration.Microseconds()
		inner := l.ClientAddr == scriptClient
		k := commandKind(l.Args)
		isFast := len(l.Args) > 0 && fast[strings.ToLower(l.Args[0])]
		if isFast && us > st.FastUs {
			st.FastUs, st.FastKind = us, k
		}
		if inner {
			k = "in a script: " + k
			if isFast {
				stalled += us
			}
		} else {
			if us > st.SlowestUs {
				st.SlowestUs, st.SlowestKind = us, k
			}
			if w := us - stalled; w > st.WorkUs {
				st.WorkUs, st.WorkKind = w, k
			}
			stalled = 0
		}
		if kinds[k] == nil {
			kinds[k] = &slowKind{Kind: k}
		}
		kinds[k].N++
		kinds[k].MaxUs = max(kinds[k].MaxUs, us)
	}
	st.Slow = sortedKinds(kinds)
	return st
}

// merge adds o's figures to st.
func (st *slowStats) merge(o slowStats) {
	if o.SlowestUs > st.SlowestUs {
		st.SlowestUs, st.SlowestKind = o.SlowestUs, o.SlowestKind
	}
	if o.WorkUs > st.WorkUs {
		st.WorkUs, st.WorkKind = o.WorkUs, o.WorkKind
	}
	if o.FastUs > st.FastUs {
		st.FastUs, st.FastKind = o.FastUs, o.FastKind
	}
	kinds := map[string]*slowKind{}
	for _, k := range append(slices.Clone(st.Slow), o.Slow...) {
		if kinds[k.Kind] == nil {
			kinds[k.Kind] = &slowKind{Kind: k.Kind}
		}
		kinds[k.Kind].N += k.N
		kinds[k.Kind].MaxUs = max(kinds[k.Kind].MaxUs, k.MaxUs)
	}
	st.Slow = sortedKinds(kinds)
}

// sortedKinds is kinds, the slowest first.
func sortedKinds(kinds map[string]*slowKind) []slowKind {
	out := make([]slowKind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b slowKind) int { return cmp.Or(cmp.Compare(b.MaxUs, a.MaxUs), strings.Compare(a.Kind, b.Kind)) })
	return out
}
