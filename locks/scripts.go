package locks

import (
	"context"
	_ "embed" // the Lua scripts live in scripts/*.lua
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The store's scripts. Each file's header documents its KEYS, ARGV and reply;
// prelude.lua, prepended to each, holds what they share (publishing the change event).
// redis.Script.Run sends EVALSHA and falls back to EVAL when the server lacks the
// script (a restarted Redis, a new cluster node).
var (
	//go:embed scripts/prelude.lua
	preludeSrc string
	//go:embed scripts/claim.lua
	claimSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/takeover.lua
	takeoverSrc string
	//go:embed scripts/sweep.lua
	sweepSrc string
	//go:embed scripts/list.lua
	listSrc string
	//go:embed scripts/detach.lua
	detachSrc string
	//go:embed scripts/forcerelease.lua
	forceReleaseSrc string
	//go:embed scripts/reaped.lua
	reapedSrc string
	//go:embed scripts/forget.lua
	forgetSrc string
	//go:embed scripts/now.lua
	nowSrc string
	//go:embed scripts/reattach.lua
	reattachSrc string
	//go:embed scripts/beat.lua
	beatSrc string
	//go:embed scripts/mine.lua
	mineSrc string
)

// scripts holds the parsed scripts; one per Store, so no package state is shared.
type scripts struct {
	claim    script[claimReply]
	renew    script[renewReply]
	release  script[releaseReply]
	takeover script[takeoverReply]
	detach   script[detachReply]
	force    script[forceReleaseReply]
	sweep    *redis.Script // answers {found, values, trimmed}: see sweep.lua
	list     *redis.Script // list.lua, without the prelude: the live values
	presence *redis.Script // presence.lua, without the prelude
	nudge    *redis.Script // nudge.lua, without the prelude
	reaped   *redis.Script // reaped.lua, without the prelude: answers 1 or 0
	forget   *redis.Script // forget.lua, without the prelude: answers 1 or 0
	now      *redis.Script // now.lua, without the prelude: the server's Unix ms
	reattach *redis.Script // reattach.lua, without the prelude: answers 1 or 0
	beat     *redis.Script // beat.lua, without the prelude: answers 1 or 0
	mine     *redis.Script // mine.lua, without the prelude: a person's live values
}

func newScripts() scripts {
	return scripts{
		claim:    newScript[claimReply](claimSrc),
		renew:    newScript[renewReply](renewSrc),
		release:  newScript[releaseReply](releaseSrc),
		takeover: newScript[takeoverReply](takeoverSrc),
		detach:   newScript[detachReply](detachSrc),
		force:    newScript[forceReleaseReply](forceReleaseSrc),
		sweep:    redis.NewScript(preludeSrc + sweepSrc),
		list:     redis.NewScript(listSrc),
		presence: redis.NewScript(presenceSrc),
		nudge:    redis.NewScript(nudgeSrc),
		reaped:   redis.NewScript(reapedSrc),
		forget:   redis.NewScript(forgetSrc),
		now:      redis.NewScript(nowSrc),
		reattach: redis.NewScript(reattachSrc),
		beat:     redis.NewScript(beatSrc),
		mine:     redis.NewScript(mineSrc),
	}
}

// The statuses of the write scripts, one type per script, as each file's header
// documents them: a status means only what its own script says.

// claimReply is the status claim.lua answers.
type claimReply string

const (
	claimAcquired claimReply = "acquired"    // it was free; value is the new lock
	claimMine     claimReply = "mine"        // the caller holds it already; value is the stored lock
	claimLocked   claimReply = "locked"      // someone else holds it; value is their lock
	claimTooMany  claimReply = "tooMany"     // over a quota; value is the setting
	claimRated    claimReply = "rateLimited" // over the rate of changes; value is the wait, ms
)

// renewReply is the status renew.lua answers.
type renewReply string

const (
	renewRenewed renewReply = "renewed" // value is the new lock
	renewLost    renewReply = "lost"    // gone (value nil) or someone else's (value is theirs)
	renewRaced   renewReply = "raced"   // the caller's, changed since read; value is the stored lock
)

// releaseReply is the status release.lua answers.
type releaseReply string

const (
	releaseReleased releaseReply = "released"    // dropped; value is the lock that was held
	releaseKept     releaseReply = "kept"        // the socket let go, another of the holder's keeps it
	releaseNotHeld  releaseReply = "notHeld"     // gone (value nil) or someone else's (value is theirs)
	releaseRated    releaseReply = "rateLimited" // over the rate of changes; value is the wait, ms
)

// takeoverReply is the status takeover.lua answers.
type takeoverReply string

const (
	takeoverTakenOver takeoverReply = "takenOver"   // value is the previous holder's lock
	takeoverAcquired  takeoverReply = "acquired"    // it was free; value nil
	takeoverMine      takeoverReply = "mine"        // the caller holds it already; value is the stored lock
	takeoverTooMany   takeoverReply = "tooMany"     // over a quota; value is the setting
	takeoverRated     takeoverReply = "rateLimited" // over the rate of changes; value is the wait, ms
)

// detachReply is the status detach.lua answers.
type detachReply string

const (
	detachReleased detachReply = "released" // the last socket went; value is the lock that was held
	detachKept     detachReply = "kept"     // the socket is forgotten, the lock left as it is
	detachNotHeld  detachReply = "notHeld"  // the last socket went, but the lock is gone or someone else's
)

// forceReleaseReply is the status forcerelease.lua answers.
type forceReleaseReply string

const (
	forceReleased forceReleaseReply = "released"    // dropped; value is the lock that was held
	forceNotHeld  forceReleaseReply = "notHeld"     // free (or not a lock); value nil
	forceRated    forceReleaseReply = "rateLimited" // over the administrator's rate of changes; value is the wait, ms
)

// script is a write script answering {status R, value, found, trimmed}: R names its
// statuses, and value is a stored lock or nil (read as "").
type script[R ~string] struct{ *redis.Script }

func newScript[R ~string](src string) script[R] {
	return script[R]{redis.NewScript(preludeSrc + src)}
}

// run runs the script on the keys of k (the audit stream's only when k has it), with
// pub (the prelude's arguments, see prelude.lua) before args, and aud (the audit
// entry's, ditto), the share block of k's tenant and the audit's retention after them,
// and counts the changes of other programs it announced and the audit entries it
// dropped early.
func (sc script[R]) run(ctx context.Context, s *core, k keys, pub, aud []any, args ...any) (status R, value string, err error) {
	ks := []string{k.lock, k.index, k.values, k.conns, k.seen}
	if k.audit != "" {
		ks = append(ks, k.audit)
	}
	argv := append(append(append(pub, args...), aud...), s.shareArgs(k.tenant)...)
	argv = append(argv, s.retentionArg())
	reply, err := sc.Run(ctx, s.rdb, ks, argv...).Slice()
	if err != nil {
		return "", "", err
	}
	if len(reply) != 4 {
		return "", "", &corruptError{fmt.Sprintf("script answered %d values, want 4", len(reply))}
	}
	st, ok := reply[0].(string)
	if !ok {
		return "", "", &corruptError{fmt.Sprintf("script answered a status of type %T, want a string", reply[0])}
	}
	value, _ = reply[1].(string) // nil when there is no lock
	s.foundChanges(reply[2])
	s.trimmedEarly(ctx, k.tenant, reply[3])
	return R(st), value, nil
}

// ScriptName names the script of lockhub whose SHA1 is sha ("claim", "sweep", ...), or
// answers "" for any other: SLOWLOG and MONITOR show a script only by its SHA1
// (EVALSHA), which says nothing to an operator or a benchmark reading them.
func ScriptName(sha string) string {
	return scriptNames[strings.ToLower(sha)]
}

// scriptNames maps each script's SHA1 to its file's name; the sources never change
// while the process runs.
var scriptNames = func() map[string]string {
	sc := newScripts()
	named := map[string]*redis.Script{
		"claim": sc.claim.Script, "renew": sc.renew.Script, "release": sc.release.Script,
		"takeover": sc.takeover.Script, "detach": sc.detach.Script, "forcerelease": sc.force.Script,
		"sweep": sc.sweep, "list": sc.list, "presence": sc.presence, "nudge": sc.nudge,
		"reaped": sc.reaped, "forget": sc.forget, "now": sc.now, "reattach": sc.reattach,
		"beat": sc.beat, "mine": sc.mine,
	}
	m := make(map[string]string, len(named))
	for name, s := range named {
		m[s.Hash()] = name
	}
	return m
}()
