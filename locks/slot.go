package locks

import (
	"strconv"
	"strings"
)

// slotCount is the number of Redis Cluster hash slots.
const slotCount = 16384

// keySlot returns the Redis Cluster slot of key, honouring {hash tags}
// (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags).
// The test harness has its own implementation, and both are checked against
// CLUSTER KEYSLOT on a real cluster.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % slotCount)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021), the checksum of the cluster spec.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slotTags returns, for every slot, a short string that hashes to it. A channel named
// with tag {slotTags()[s]} lives in slot s: a script may SPUBLISH to it only when it is
// the slot of the script's keys. Computed once per Store (about 160,000 checksums).
func slotTags() []string {
	tags := make([]string, slotCount)
	left := slotCount
	for n := 0; left > 0; n++ {
		tag := strconv.FormatInt(int64(n), 36)
		if s := crc16(tag) % slotCount; tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return tags
}
