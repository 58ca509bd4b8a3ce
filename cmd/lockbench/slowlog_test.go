package main

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockhub/lockhub/locks/redistest"
)

// TestSlowStats: a script's entry takes the fast commands logged inside it (the IDs
// just below its own) out of its work, never a command sent alone; the floor is the
// slowest fast command, inside a script or not; entries come in any order.
func TestSlowStats(t *testing.T) {
	fast := map[string]bool{"exists": true, "get": true, "zrank": true}
	entry := func(id int64, ms float64, client string, args ...string) redis.SlowLog {
		return redis.SlowLog{ID: id, Duration: time.Duration(ms * float64(time.Millisecond)), ClientAddr: client, Args: args}
	}
	script := []string{"EVALSHA", "0123", "2", "lockidx:{t}:T", "lockval:{t}:T"}
	logs := []redis.SlowLog{
		entry(7, 4, "127.0.0.1:5000", "EVALSHA", "4567", "1", "lock:{t}:T:1"), // nothing logged inside: all work
		entry(4, 17.4, "127.0.0.1:5001", script...),                           // a list page
		entry(2, 16, scriptClient, "EXISTS", "lockidx:{t}:T"),                 // ... its EXISTS, stalled
		entry(3, 1.2, scriptClient, "MGET", "lock:{t}:T:1", "lock:{t}:T:2"),   // ... its MGET: not fast, kept
		entry(1, 1, scriptClient, "ZRANK", "lockidx:{t}:T", "x"),              // ... and its ZRANK, stalled too
		entry(5, 1.5, "127.0.0.1:5002", "ZRANGE", "lockidx:{t}:T", "0", "1"),  // alone
		entry(6, 3, "127.0.0.1:5003", "GET", "lock:{t}:T:9"),                  // fast, alone: the floor's, counted whole
	}
	// Entries 1 to 3 are inside the script of entry 4 (no entry of a client between).
	st := nodeSlowStats(logs, fast)
	if st.SlowestUs != 17400 || st.SlowestKind != "EVALSHA lockidx:" {
		t.Errorf("slowest %d µs (%s), want 17400 (EVALSHA lockidx:)", st.SlowestUs, st.SlowestKind)
	}
	// The page's work is at most 17.4 - 16 - 1 = 0.4 ms (the MGET is not fast here);
	// the release's 4 ms, nothing inside it logged, is the slowest work.
	if st.WorkUs != 4000 || st.WorkKind != "EVALSHA lock:" {
		t.Errorf("work %d µs (%s), want 4000 (EVALSHA lock:)", st.WorkUs, st.WorkKind)
	}
	if st.FastUs != 16000 || st.FastKind != "EXISTS lockidx:" {
		t.Errorf("floor %d µs (%s), want 16000 (EXISTS lockidx:)", st.FastUs, st.FastKind)
	}
	want := map[string]int64{"EVALSHA lockidx:": 17400, "in a script: EXISTS lockidx:": 16000, "EVALSHA lock:": 4000,
		"GET lock:": 3000, "in a script: ZRANK lockidx:": 1000, "ZRANGE lockidx:": 1500, "in a script: MGET lock:": 1200}
	if len(st.Slow) != len(want) {
		t.Errorf("kinds %+v, want %v", st.Slow, want)
	}
	for i, k := range st.Slow {
		if want[k.Kind] != k.MaxUs || k.N != 1 {
			t.Errorf("kind %+v, want max %d µs, once", k, want[k.Kind])
		}
		if i > 0 && st.Slow[i-1].MaxUs < k.MaxUs {
			t.Errorf("kinds not slowest first: %+v", st.Slow)
		}
	}

	// Another node's: merged, the slowest of each.
	st.merge(nodeSlowStats([]redis.SlowLog{entry(1, 5, "127.0.0.1:5004", "EVALSHA", "4567", "1", "lock:{u}:T:1")}, fast))
	if st.WorkUs != 5000 || st.SlowestUs != 17400 || st.FastUs != 16000 {
		t.Errorf("merged: work %d, slowest %d, floor %d µs; want 5000, 17400, 16000", st.WorkUs, st.SlowestUs, st.FastUs)
	}
	for _, k := range st.Slow {
		if k.Kind == "EVALSHA lock:" && (k.N != 2 || k.MaxUs != 5000) {
			t.Errorf("merged kind %+v, want 2, max 5000 µs", k)
		}
	}
}

// TestSlowlogOfScripts: what slowStats takes from Redis holds on a real redis-server:
// a command run inside a script has an entry of its own, with the client scriptClient
// and an ID below its script's, and COMMAND flags EXISTS fast and ZRANGE not.
func TestSlowlogOfScripts(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := srv.Client(t)
	ctx := minuteCtx(t)
	fast, err := fastCommands(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if !fast["exists"] || !fast["zscore"] || fast["zrange"] || fast["evalsha"] {
		t.Fatalf("fast flags: exists %v, zscore %v, zrange %v, evalsha %v; want true, true, false, false",
			fast["exists"], fast["zscore"], fast["zrange"], fast["evalsha"])
	}
	if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.SlowLogReset(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Eval(ctx, "redis.call('EXISTS', KEYS[1]); return redis.call('MGET', KEYS[1], KEYS[2])", []string{"lockidx:{t}:T", "lock:{t}:T:1"}).Err(); err != nil {
		t.Fatal(err)
	}
	logs, err := rdb.SlowLogGet(ctx, 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err(); err != nil {
		t.Fatal(err)
	}
	st := nodeSlowStats(logs, fast)
	n := map[string]int{}
	for _, k := range st.Slow {
		n[k.Kind] = k.N
	}
	if n["EVAL lockidx:"] != 1 || n["in a script: EXISTS lockidx:"] != 1 || n["in a script: MGET lockidx:"] != 1 {
		t.Errorf("kinds %+v, want the EVAL and, inside it, its EXISTS and MGET", st.Slow)
	}
	if st.FastKind == "" {
		t.Errorf("no fast command found in %+v", logs)
	}
}
