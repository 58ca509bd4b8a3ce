//go:build !unix

package main

import (
	"math"
	"time"
)

// processCPU is unknown here: 0.
func processCPU() time.Duration { return 0 }

// raiseFileLimit is a no-op where there is no RLIMIT_NOFILE.
func raiseFileLimit() (uint64, error) { return math.MaxUint64, nil }
