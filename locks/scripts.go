package locks

import (
	"context"
	_ "embed" // the Lua scripts live in scripts/*.lua
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The store's scripts. Each file's header documents its KEYS, ARGV and reply;
// prelude.lua, prepended to each, holds what they share (publishing the change event).
// redis.Script.Run sends EVALSHA and falls back to EVAL when the server lacks the
// script (a restarted Redis, a new cluster node).
var (
	//go:embed scripts/prelude.lua
	preludeSrc string
	//go:embed scripts/people.lua
	peopleSrc string
	//go:embed scripts/line.lua
	lineSrc string
	//go:embed scripts/handed.lua
	handedSrc string
	//go:embed scripts/claimmany.lua
	claimManySrc string
	//go:embed scripts/releasemany.lua
	releaseManySrc string
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
	claim       script[claimReply]
	renew       script[renewReply]
	release     script[releaseReply]
	takeover    script[takeoverReply]
	detach      script[detachReply]
	force       script[forceReleaseReply]
	handed      script[handedReply]
	claimMany   script[manyReply]
	releaseMany script[manyReply]
	sweep       *redis.Script // answers {found, values, more, trimmed, handed, passed}: see sweep.lua
	list        *redis.Script // list.lua, without the prelude: the live values
	presence    *redis.Script // presence.lua, after people.lua, without the prelude
	nudge       *redis.Script // nudge.lua, without the prelude
	reaped      *redis.Script // reaped.lua, without the prelude: answers 1 or 0
	forget      *redis.Script // forget.lua, without the prelude: answers 1 or 0
	now         *redis.Script // now.lua, without the prelude: the server's Unix ms
	reattach    *redis.Script // reattach.lua, without the prelude: answers 1 or 0
	beat        *redis.Script // beat.lua, without the prelude: answers 1 or 0
	mine        *redis.Script // mine.lua, without the prelude: a person's live values
}

func newScripts() scripts {
	return scripts{
		claim:       newScript[claimReply](claimSrc),
		renew:       newScript[renewReply](renewSrc),
		release:     newScript[releaseReply](releaseSrc),
		takeover:    newScript[takeoverReply](takeoverSrc),
		detach:      newScript[detachReply](detachSrc),
		force:       newScript[forceReleaseReply](forceReleaseSrc),
		handed:      newScript[handedReply](handedSrc),
		claimMany:   newScript[manyReply](claimManySrc),
		releaseMany: newScript[manyReply](releaseManySrc),
		sweep:       redis.NewScript(writePrelude + sweepSrc),
		list:        redis.NewScript(listSrc),
		presence:    redis.NewScript(peopleSrc + presenceSrc),
		nudge:       redis.NewScript(nudgeSrc),
		reaped:      redis.NewScript(reapedSrc),
		forget:      redis.NewScript(forgetSrc),
		now:         redis.NewScript(nowSrc),
		reattach:    redis.NewScript(reattachSrc),
		beat:        redis.NewScript(beatSrc),
		mine:        redis.NewScript(mineSrc),
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

// handedReply is the status handed.lua answers.
type handedReply string

const (
	handedReleased handedReply = "released" // dropped; value is the lock that was held
	handedKept     handedReply = "kept"     // not handed to that socket, or held through another too
)

// manyReply is the status claimmany.lua and releasemany.lua answer.
type manyReply string

const (
	manyAcquired manyReply = "acquired"    // every entity is the caller's; value is how many
	manyLocked   manyReply = "locked"      // others hold some; value is their values (a list); nothing written
	manyRaced    manyReply = "raced"       // a value changed since Go read it; nothing written
	manyReleased manyReply = "released"    // value is how many were released
	manyTooMany  manyReply = "tooMany"     // over a quota; value is the setting; nothing written
	manyRated    manyReply = "rateLimited" // over the rate of changes; value is the wait, ms; nothing written
)

// writePrelude is what every write script is prepended with: the shared rules
// (prelude.lua), the viewers (people.lua) and the waiting line (line.lua).
var writePrelude = preludeSrc + peopleSrc + lineSrc

// script is a write script answering {status R, value, found, trimmed, handed, passed}:
// R names its statuses, and value is a stored lock or nil (read as "").
type script[R ~string] struct{ *redis.Script }

func newScript[R ~string](src string) script[R] {
	return script[R]{redis.NewScript(writePrelude + src)}
}

// run runs the script on the keys of k (the audit stream's only when k has it), with
// pub (the prelude's arguments, see prelude.lua) before args, and aud (the audit
// entry's, ditto), the share block of k's tenant, the audit's retention and the line
// block after them, and counts the changes of other programs it announced, the audit
// entries it dropped early, and its hand-offs.
func (sc script[R]) run(ctx context.Context, s *core, k keys, pub, aud []any, args ...any) (status R, value string, err error) {
	status, raw, err := sc.runRaw(ctx, s, k, pub, aud, args...)
	value, _ = raw.(string) // nil when there is no lock
	return status, value, err
}

// runRaw is run answering the reply's value as the script gave it: a string, nil, or
// a list (claimmany.lua's locked values).
func (sc script[R]) runRaw(ctx context.Context, s *core, k keys, pub, aud []any, args ...any) (status R, value any, err error) {
	ks := []string{k.lock, k.index, k.values, k.conns, k.seen}
	if k.audit != "" {
		ks = append(ks, k.audit)
	}
	argv := append(append(append(pub, args...), aud...), s.shareArgs(k.tenant)...)
	argv = append(argv, s.retentionArg())
	argv = append(argv, s.lineArgs(pub)...)
	reply, err := sc.Run(ctx, s.rdb, ks, argv...).Slice()
	if err != nil {
		return "", "", err
	}
	if len(reply) != 6 {
		return "", "", &corruptError{fmt.Sprintf("script answered %d values, want 6", len(reply))}
	}
	s.handedOff(ctx, k.tenant, reply[4], reply[5])
	st, ok := reply[0].(string)
	if !ok {
		return "", "", &corruptError{fmt.Sprintf("script answered a status of type %T, want a string", reply[0])}
	}
	s.foundChanges(reply[2])
	s.trimmedEarly(ctx, k.tenant, reply[3])
	return R(st), reply[1], nil
}
