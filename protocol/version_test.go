package protocol

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestVersionIsTheContracts: Version is the version PROTOCOL.md's title names. When the
// contract is replaced by its next version this fails until Version follows it.
func TestVersionIsTheContracts(t *testing.T) {
	f, err := os.Open("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		t.Fatalf("PROTOCOL.md has no title line: %v", sc.Err())
	}
	title := sc.Text()
	const prefix = "# lockhub contract, version "
	n, err := strconv.Atoi(strings.TrimPrefix(title, prefix))
	if !strings.HasPrefix(title, prefix) || err != nil {
		t.Fatalf("PROTOCOL.md's title %q does not read %q followed by a version", title, prefix+"<n>")
	}
	if n != Version {
		t.Fatalf("PROTOCOL.md is the contract's version %d, protocol.Version is %d", n, Version)
	}
}

// TestSubprotocol: the subprotocol ends in SubprotocolVersion, and PROTOCOL.md §4 names
// it, whatever the contract's version.
func TestSubprotocol(t *testing.T) {
	if want := "lockhub.v" + strconv.Itoa(SubprotocolVersion); Subprotocol != want {
		t.Fatalf("Subprotocol = %q, want %q", Subprotocol, want)
	}
	doc, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "## 4. WebSocket: `GET /ws`, subprotocol `"+Subprotocol+"`") {
		t.Fatalf("PROTOCOL.md §4 does not name the subprotocol %s", Subprotocol)
	}
}
