package locks

import (
	_ "embed" // the Lua scripts live in scripts/*.lua
	"github.com/redis/go-redis/v9"
)

// The store's scripts. Each file's header documents its KEYS and ARGV; prelude.lua,
// prepended to each, holds what they share (publishing the change event).
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
	//go:embed scripts/detach.lua
	detachSrc string
)

// scripts holds the parsed scripts; one per Store, so no package state is shared.
type scripts struct {
	claim, renew, release, takeover, sweep, detach *redis.Script
}

func newScripts() scripts {
	return scripts{
		claim:    redis.NewScript(preludeSrc + claimSrc),
		renew:    redis.NewScript(preludeSrc + renewSrc),
		release:  redis.NewScript(preludeSrc + releaseSrc),
		takeover: redis.NewScript(preludeSrc + takeoverSrc),
		sweep:    redis.NewScript(preludeSrc + sweepSrc),
		detach:   redis.NewScript(preludeSrc + detachSrc),
	}
}
