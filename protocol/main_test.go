package protocol

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every Client joins its reader in Close; the scripted hub's handlers end with
	// their connections.
	goleak.VerifyTestMain(m)
}

// lockAt is the lock of the contract's examples, with milliseconds in its times.
func lockAt(uid string) Lock {
	at := time.Date(2026, 12, 2, 9, 15, 0, 123_000_000, time.UTC)
	return Lock{
		EntityType: "ApprovalRequest", EntityUID: uid,
		HolderOID: "u-ada", HolderName: "Ada Lovelace",
		AcquiredAt: NewTime(at), ExpiresAt: NewTime(at.Add(5 * time.Minute)),
	}
}

// lockJSON is lockAt("r-1001") as stored and sent.
const lockJSON = `{"entityType":"ApprovalRequest","entityUid":"r-1001","holderOid":"u-ada","holderName":"Ada Lovelace",` +
	`"acquiredAtUtc":"2026-12-02T09:15:00.123Z","expiresAtUtc":"2026-12-02T09:20:00.123Z"}`
