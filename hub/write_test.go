package hub

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// TestAnswersLeaveTogether: frames that reach the hub together are answered together.
// A client that sends its watch and a ping in the same TCP write as its auth is sent
// the welcome, the snapshot and the pong in one write(2), in that order (a lock event
// pushed after the snapshot may come between them).
//
// Whether the hub's reader has read the watch before the token check ends is up to
// the scheduler (the hub answers what it has read, and never waits for more), so the
// test opens several such sockets: each must be answered right, and at least one
// must have its answers in one write. Without the batching, none has.
func TestAnswersLeaveTogether(t *testing.T) {
	conns := make(chan *recordedConn, 1)
	th := startMini(t, hubOptions{
		// No heartbeat's Ping among the writes counted.
		hub: func(c *Config) { c.PingEvery = time.Hour },
		wrap: func(nc net.Conn) net.Conn {
			rc := &recordedConn{Conn: nc}
			conns <- rc
			return rc
		},
	})
	ctx := tctx(t)
	holder := protocol.Holder{OID: "u-grace", Name: "Grace Hopper"}
	if res, err := th.store.Locks.Claim(ctx, locks.Ref{Tenant: "acme", Type: typ, UID: "r-1"}, holder, "c-other"); err != nil || res.Outcome != protocol.OutcomeAcquired {
		t.Fatalf("claim: %v, %v", res.Outcome, err)
	}

	const sockets = 5
	together := 0
	for i := range sockets {
		nc := rawUpgrade(t, th.srv.Listener.Addr().String(), "/ws")
		rc := <-conns
		upgrade := rc.count() // the 101
		var out []byte
		for _, f := range []map[string]string{
			{"type": "auth", "token": th.token("acme", "u-ada")},
			{"id": "w", "type": "watch", "entityType": typ},
			{"id": "p", "type": "ping"},
		} {
			b, _ := json.Marshal(f) // maps of strings always encode
			out = append(out, clientFrame(b)...)
		}
		if _, err := nc.Write(out); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(nc)
		_ = nc.SetReadDeadline(time.Now().Add(waitTimeout))
		for _, want := range []struct {
			typ protocol.FrameType
			id  string
		}{{protocol.FrameWelcome, ""}, {protocol.FrameSnapshot, "w"}, {protocol.FramePong, "p"}} {
			f, err := readServerFrame(br)
			// A lock event of the watched type may come between the answers: it is
			// pushed, not an answer (seen once in CI: an event of r-1 between the
			// snapshot and the pong). Only the answers' order is the test's.
			for err == nil && f.Type == protocol.FrameLock && want.typ != protocol.FrameSnapshot {
				f, err = readServerFrame(br)
			}
			if err != nil {
				t.Fatalf("socket %d: reading the %s: %v", i, want.typ, err)
			}
			if f.Type != want.typ || f.ID != want.id {
				t.Fatalf("socket %d: got %s %q, want %s %q", i, f.Type, f.ID, want.typ, want.id)
			}
			if f.Type == protocol.FrameSnapshot && (len(f.Snapshot.Locks) != 1 || f.Snapshot.Locks[0].HolderOID != holder.OID) {
				t.Fatalf("socket %d: snapshot %+v, want Grace's lock", i, f.Snapshot.Locks)
			}
		}
		writes := rc.since(upgrade)
		t.Logf("socket %d: answers in writes of %v bytes", i, writes)
		if len(writes) == 1 {
			together++
		}
		_ = nc.Close()
	}
	if together == 0 {
		t.Fatalf("none of %d sockets that sent auth, watch and ping together had its answers in one write", sockets)
	}
}

// clientFrame is payload as one masked text frame, as a client sends it (RFC 6455
// §5.2, §5.3).
func clientFrame(payload []byte) []byte {
	b := []byte{0x81} // FIN, text
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:]) // never fails
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// readServerFrame reads one unfragmented, unmasked text frame from the server and
// decodes it.
func readServerFrame(r io.Reader) (protocol.ServerFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return protocol.ServerFrame{}, err
	}
	if h[0] != 0x81 || h[1]&0x80 != 0 {
		return protocol.ServerFrame{}, errors.New("not an unfragmented, unmasked text frame")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return protocol.ServerFrame{}, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return protocol.ServerFrame{}, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return protocol.ServerFrame{}, err
	}
	return protocol.DecodeServerFrame(payload)
}
