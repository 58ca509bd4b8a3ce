package redistest_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lockhub/lockhub/locks/redistest"
)

// crc16Bitwise is an independent, table-free CRC16-XMODEM used as the
// reference for Slot's table-driven implementation.
func crc16Bitwise(s string) uint16 {
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

func TestCRC16Reference(t *testing.T) {
	// The standard CRC16-XMODEM check value, also quoted by the cluster
	// specification; guards the reference implementation itself.
	if got := crc16Bitwise("123456789"); got != 0x31C3 {
		t.Fatalf("crc16Bitwise(%q) = %#04x, want 0x31c3", "123456789", got)
	}
}

func TestSlotVectors(t *testing.T) {
	tests := []struct {
		key  string
		want int
	}{
		{"123456789", 0x31C3}, // 12739: CRC16 check value, below 16384
		{"", 0},
		// Examples from the CLUSTER KEYSLOT documentation.
		{"somekey", 11058},
		{"foo{hash_tag}", 2515},
		{"bar{hash_tag}", 2515},
		// Hash-tag edge cases from the cluster specification.
		{"{user1000}.following", int(crc16Bitwise("user1000")) % 16384},
		{"{user1000}.followers", int(crc16Bitwise("user1000")) % 16384},
		{"foo{}{bar}", int(crc16Bitwise("foo{}{bar}")) % 16384},
		{"foo{{bar}}zap", int(crc16Bitwise("{bar")) % 16384},
		{"foo{bar}{zap}", int(crc16Bitwise("bar")) % 16384},
		{"{", int(crc16Bitwise("{")) % 16384},
		{"{}", int(crc16Bitwise("{}")) % 16384},
		{"}{x}", int(crc16Bitwise("x")) % 16384},
		{"{unterminated", int(crc16Bitwise("{unterminated")) % 16384},
	}
	for _, tt := range tests {
		if got := redistest.Slot(tt.key); got != tt.want {
			t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
	if a, b := redistest.Slot("{user1000}.following"), redistest.Slot("{user1000}.followers"); a != b {
		t.Errorf("keys sharing the tag {user1000} got slots %d and %d", a, b)
	}
}

func TestSlotMatchesReference(t *testing.T) {
	// Random byte strings without braces exercise the table lookup against
	// the bitwise reference on inputs nobody thought of; wrapped in braces
	// they must hash the same, as a tag.
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.IntN(256))
			if b[i] == '{' || b[i] == '}' {
				b[i] = 'x'
			}
		}
		key := string(b)
		want := int(crc16Bitwise(key) % redistest.SlotCount)
		if got := redistest.Slot(key); got != want {
			t.Fatalf("Slot(%q) = %d, want %d", key, got, want)
		}
		if got := redistest.Slot("{" + key + "}suffix"); len(key) > 0 && got != want {
			t.Fatalf("Slot of tagged %q = %d, want %d", key, got, want)
		}
	}
}

func ExampleSlot() {
	fmt.Println(redistest.Slot("123456789"))
	fmt.Println(redistest.Slot("{user1000}.following") == redistest.Slot("{user1000}.followers"))
	// Output:
	// 12739
	// true
}
