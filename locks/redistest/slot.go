package redistest

import "strings"

// SlotCount is the number of hash slots in a Redis Cluster.
const SlotCount = 16384

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM variant) of
// the key modulo 16384. As the cluster specification's hash-tag rule says
// (https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags),
// if the key contains a "{" followed later by a "}" with at least one byte
// between them, only the bytes between the first "{" and the first "}" after
// it are hashed; otherwise the whole key is. So "{user1000}.following" and
// "{user1000}.followers" share a slot, "foo{}{bar}" hashes the whole key, and
// "foo{{bar}}zap" hashes "{bar".
//
// It needs no server and is safe for concurrent use. Tests use it to pick
// keys for a given master or to build keys that must (not) share a slot.
func Slot(key string) int {
	return int(crc16(hashTag(key)) % SlotCount)
}

// hashTag returns the part of key that determines its slot.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	closing := strings.IndexByte(key[open+1:], '}')
	if closing <= 0 { // no "}" at all, or an empty tag "{}"
		return key
	}
	return key[open+1 : open+1+closing]
}

// crc16Table is the byte-wise lookup table for CRC16-XMODEM
// (polynomial 0x1021, initial value 0, no reflection, no final XOR),
// the variant Redis Cluster uses.
var crc16Table = func() (table [256]uint16) {
	for i := range table {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		table[i] = crc
	}
	return table
}()

// crc16 returns the CRC16-XMODEM checksum of s.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}
