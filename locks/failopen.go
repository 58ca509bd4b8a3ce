package locks

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Reason says why the store failed open. Each reason is a label value of the
// lockhub_store_fail_open_total metric and appears in the warning logged.
type Reason string

// The reasons a Redis call fails open (PROTOCOL.md §2 "Fail open").
const (
	ReasonTimeout     Reason = "timeout"     // the call's deadline passed
	ReasonCanceled    Reason = "canceled"    // the caller gave up (its ctx was canceled)
	ReasonConnection  Reason = "connection"  // refused, reset, closed: Redis is not there
	ReasonCrossSlot   Reason = "crossslot"   // keys of several slots in one command
	ReasonClusterDown Reason = "clusterdown" // the cluster lost a slot's master
	ReasonTryAgain    Reason = "tryagain"    // a slot is migrating
	ReasonReadOnly    Reason = "readonly"    // a write reached a replica (stale slot map)
	ReasonLoading     Reason = "loading"     // Redis is loading its dataset
	ReasonMoved       Reason = "moved"       // a redirect the client could not follow
	ReasonCommand     Reason = "command"     // any other error Redis answered
	ReasonCorrupt     Reason = "corrupt"     // a reply the store cannot read
	ReasonContention  Reason = "contention"  // the lock changed under every retry: racing writers
)

// corruptError is a reply the store cannot read: a script answering in an unexpected
// shape, or a stored value that is not a lock.
type corruptError struct{ msg string }

func (e *corruptError) Error() string { return "locks: " + e.msg }

// errContention is an operation whose every compare-and-set attempt lost to another
// writer of the same lock. Redis answered and nothing is corrupt: the lock changed
// hands faster than the retries.
var errContention = errors.New("locks: contention")

// classify maps the error of a store operation to its Reason: the store's own errors
// first, then the error values and helpers go-redis exports, never message text.
func classify(err error) Reason {
	var netErr net.Error
	switch {
	case errors.As(err, new(*corruptError)):
		return ReasonCorrupt
	case errors.Is(err, errContention):
		return ReasonContention
	case errors.Is(err, context.Canceled):
		return ReasonCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ReasonTimeout
	case redis.HasErrorPrefix(err, "CROSSSLOT"):
		return ReasonCrossSlot
	case redis.IsClusterDownError(err):
		return ReasonClusterDown
	case redis.IsTryAgainError(err):
		return ReasonTryAgain
	case redis.IsReadOnlyError(err):
		return ReasonReadOnly
	case redis.IsLoadingError(err):
		return ReasonLoading
	case isRedirect(err):
		return ReasonMoved
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, redis.ErrClosed), errors.Is(err, errSilent),
		errors.Is(err, net.ErrClosed), errors.As(err, new(*net.OpError)):
		return ReasonConnection
	default:
		return ReasonCommand
	}
}

func isRedirect(err error) bool {
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	_, ok := redis.IsAskError(err)
	return ok
}

// staleTopology reports whether r suggests the cluster's slot map changed, so a
// ClusterClient should reload it now rather than at its next periodic reload.
func staleTopology(r Reason) bool {
	switch r {
	case ReasonConnection, ReasonClusterDown, ReasonTryAgain, ReasonReadOnly, ReasonMoved, ReasonTimeout:
		return true
	}
	return false
}
