package locks

import "testing"

func TestSubscribes(t *testing.T) {
	for _, c := range []struct {
		name string
		cmd  []byte
		want bool
	}{
		{"subscribe", respCommand("subscribe", "lockhub:ev:{0}", "lockhub:ev:{1}"), true},
		{"ssubscribe", respCommand("ssubscribe", "lockhub:ev:{a}"), true},
		{"psubscribe upper case", respCommand("PSUBSCRIBE", "lockhub:*"), true},
		{"ping", respCommand("ping", "subscribed"), false},
		{"a key named subscribe", respCommand("get", "subscribe"), false},
		{"unsubscribe", respCommand("unsubscribe"), false},
		{"evalsha", respCommand("evalsha", "abc", "1", "lock:{acme}:T:1"), false},
		{"not RESP", []byte("subscribe x\r\n"), false},
		{"empty", nil, false},
		{"cut short", []byte("*2\r\n$9\r\nsubsc"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := subscribes(c.cmd); got != c.want {
				t.Fatalf("subscribes(%q) = %v", c.cmd, got)
			}
		})
	}
	if got := string(respCommand("AUTH", "oid", "tok")); got != "*3\r\n$4\r\nAUTH\r\n$3\r\noid\r\n$3\r\ntok\r\n" {
		t.Fatalf("respCommand: %q", got)
	}
}
