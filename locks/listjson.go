package locks

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// ListJSON is the live locks of one type as the JSON array of their protocol.Lock
// encodings (a snapshot's "locks" member, sent as it is): "[]" when there are none or
// the store fails open. It is for the snapshots of watched types: unlike List it only
// reads (list.lua), and leaves announcing what nobody announced to the sweeper, which
// sweeps every watched type. Every call reads the keys themselves (PROTOCOL.md §8);
// what it saves is the decoding and encoding of values it read the time before. A
// reconnect crowd reads one quiet type thousands of times, and each read decoded and
// encoded every lock again, a third of a watch's cost on the hub. Values are compared
// as stored, so a lock that changed, whoever wrote it, is decoded again; when none
// did, the last read's array is answered again, so the caller must not modify it.
func (s *Locks) ListJSON(ctx context.Context, tenant, entityType string) ([]byte, error) {
	if err := s.check(Ref{Tenant: tenant, Type: entityType, UID: "x"}, nil); err != nil {
		return nil, err
	}
	b, ok := runOpWithin(ctx, s.core, opList, pagedBudget*s.timeout, func(ctx context.Context) ([]byte, error) {
		values, err := s.readLive(ctx, tenant, entityType)
		if err != nil {
			return nil, err
		}
		return s.encoded.encode(ctx, s.core, typeKey{tenant, entityType}, values), nil
	}, func([]byte) outcomeLabel { return labelListed })
	if !ok {
		return []byte("[]"), nil // failing open answers no locks
	}
	return b, nil
}

// ListPage is how many index members one page of a list reads (list.lua): a page of
// locks costs Redis a fraction of a millisecond, whatever the type's size. Pages of 256
// made 96–350 commands over 1 ms in 10 s of lockbench -mode share, pages of 128 made
// 2–8 on a quiet machine. On a busier one (2026-12-07, the two alternating), pages of 128
// made 95–195 list pages over 1 ms a run, pages of 64 made 24–37, standalone and on the
// 6-node cluster, for the same Redis CPU and as many lists answered: another tenant's
// command waits behind a shorter page (cmd/lockbench/README.md, "The fair share").
const ListPage = 64

// readLive reads the stored values of a type's live locks, page by page (list.lua), each
// page a script of its own, so that no command on a big type holds Redis for long
// (PROTOCOL.md §4). Each page has Config.Timeout; its callers give the whole read
// pagedBudget of them (a tenant's quota is 313 pages: on a loaded Redis they may take
// longer than one operation's timeout, and failing open would show no locks). A key
// read on two pages (renewed in between) is kept once, at its first place, with its
// later value. A nil in the answer is a key gone meanwhile.
func (s *core) readLive(ctx context.Context, tenant, entityType string) ([]any, error) {
	// Reads of one type that arrive together share one read (locks/coalesce), whoever
	// asks: a watch's snapshot, a list over HTTP, the console. A tenant at its quota
	// whose people read it in a loop then has one read of a type in flight on this
	// instance, not one per request: another tenant's command waits behind one page
	// at most, not behind a page of each (lockbench -mode share).
	return s.live.Read(ctx, typeKey{tenant, entityType}, func(ctx context.Context) ([]any, error) {
		return s.readPages(ctx, tenant, entityType)
	})
}

// readPages is readLive's read, page by page. The values it answers may be shared:
// they are only read.
func (s *core) readPages(ctx context.Context, tenant, entityType string) ([]any, error) {
	keys := []string{IndexKey(tenant, entityType), ValuesKey(tenant, entityType)}
	prefix := lockKeyPrefix(tenant, entityType)
	var out []any
	var at map[string]int // key -> its place in out, from the second page on
	for cursor := "i"; ; {
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		reply, err := s.sc.list.Run(pctx, s.rdb, keys, prefix, ListPage, cursor).Slice()
		cancel()
		if err != nil {
			return nil, err
		}
		if len(reply) != 3 {
			return nil, &corruptError{fmt.Sprintf("list script answered %d values, want 3", len(reply))}
		}
		ks, _ := reply[0].([]any)
		vs, _ := reply[1].([]any)
		next, _ := reply[2].(string)
		if len(vs) != len(ks) {
			return nil, &corruptError{fmt.Sprintf("list script answered %d values for %d keys", len(vs), len(ks))}
		}
		// The page is paid for; a next page waits for the tenant's budget, the last
		// leaves its debt to the tenant's next read.
		s.charge(ctx, tenant, len(ks), next != "")
		if at == nil && next != "" { // more than one page: keys may come twice
			at = make(map[string]int, 2*len(ks))
		}
		for i, k := range ks {
			key, _ := k.(string)
			if at != nil {
				if j, seen := at[key]; seen {
					out[j] = vs[i]
					continue
				}
				at[key] = len(out)
			}
			out = append(out, vs[i])
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// typeKey is one entity type of one tenant.
type typeKey struct{ tenant, typ string }

// encodedValues keeps, per type, the encoding of each lock value the last ListJSON of
// the type read, for the next one. Its zero value is ready to use.
type encodedValues struct {
	mu     sync.Mutex
	types  map[typeKey]*encodedSet // guarded by mu
	pruned time.Time               // guarded by mu
}

// encodedSet is the values one read found, each with its lock encoded. Never modified
// once stored: a read replaces it.
type encodedSet struct {
	vals  []string // the values in the order read, nil skipped, those that do not parse kept
	encs  [][]byte // each value's encoding, nil for one that does not parse
	known int      // how many of vals parse
	out   []byte   // the array they made
	read  time.Time
}

// encodedKeep is how long the values of a type nobody lists any more are kept.
const encodedKeep = time.Minute

// encode returns values (stored lock values; a nil is skipped) as a JSON array of
// protocol.Lock, decoding and encoding only the values the type's last read lacked (and
// the first walkMisses of those that moved further than encodeAhead places), and keeps
// this read's values for the next one. On a type of 20,000 locks with one renewed since
// the last read: 4.1-4.6 ms, where a map of the last read's values built at every read
// took 6.9-7.4 ms (BenchmarkListEncode, the two alternating).
func (e *encodedValues) encode(ctx context.Context, s *core, key typeKey, values []any) []byte {
	e.mu.Lock()
	prev := e.types[key]
	e.mu.Unlock()
	if prev.same(values) {
		// Nothing changed since the last read: its array stands, and the same set is
		// kept again under this read's time (a crowd reads a quiet type thousands of
		// times; each array is a snapshot's size).
		s.met.listValues.WithLabelValues(listKnown).Add(float64(prev.known))
		again := *prev
		again.read = time.Now()
		e.keep(key, &again)
		return prev.out
	}
	next := &encodedSet{vals: make([]string, 0, len(values)), encs: make([][]byte, 0, len(values)), read: time.Now()}
	size := 2
	for _, v := range values {
		str, _ := v.(string)
		size += len(str) + 1 // an encoding is about as long as the stored value
	}
	var out strings.Builder // unzeroed (see encodeYield)
	out.Grow(size)
	out.WriteByte('[')

	// The values come in the index's order, as the last read's did: a value is most
	// often the last read's next one, or a few past it (a lock released or renewed in
	// between moved out of the way). Walking both in step finds it without hashing
	// 20,000 values into a map at every read; the map is built only for a read whose
	// order moved more than that (walk.find).
	decoded := 0
	var w walk
	if prev != nil {
		w.vals, w.encs = prev.vals, prev.encs
	}
	for i, v := range values {
		if i%encodeYield == encodeYield-1 {
			// A read of a type at its quota is milliseconds of work without a wait:
			// others' requests ready to run on this P (a small tenant's claim) are let
			// through between stretches, rather than waiting for the whole read.
			runtime.Gosched()
		}
		str, ok := v.(string)
		if !ok {
			continue // expired between the range and the MGET: absent, which is right
		}
		next.vals = append(next.vals, str)
		b, ok := w.find(str)
		if !ok {
			if l, err := s.decodeListed(ctx, key.tenant, key.typ, str); err == nil {
				if b, err = json.Marshal(l); err != nil {
					panic("locks: encoding a lock cannot fail: " + err.Error())
				}
				decoded++
			}
		}
		next.encs = append(next.encs, b)
		if b == nil {
			continue // does not parse: tried again at the next read that changed
		}
		if next.known++; next.known > 1 {
			out.WriteByte(',')
		}
		out.Write(b)
	}
	out.WriteByte(']')
	next.out = readOnlyBytes(out.String())
	s.met.listValues.WithLabelValues(listDecoded).Add(float64(decoded))
	s.met.listValues.WithLabelValues(listKnown).Add(float64(next.known - decoded))
	e.keep(key, next)
	return next.out
}

// keep stores next as key's last read, unless a later read stored its own meanwhile,
// and forgets the types nobody listed for encodedKeep.
func (e *encodedValues) keep(key typeKey, next *encodedSet) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.types == nil {
		e.types = map[typeKey]*encodedSet{}
	}
	if p := e.types[key]; p == nil || !p.read.After(next.read) { // concurrent reads: the later one stays
		e.types[key] = next
	}
	if next.read.Sub(e.pruned) >= encodedKeep {
		e.pruned = next.read
		for k, set := range e.types {
			if next.read.Sub(set.read) >= encodedKeep {
				delete(e.types, k)
			}
		}
	}
}

// same reports whether values are, in order, the values set was made of: a nil value
// (a key gone between the range and the MGET) is skipped, as encode skips it.
func (set *encodedSet) same(values []any) bool {
	if set == nil {
		return false
	}
	i := 0
	for _, v := range values {
		str, ok := v.(string)
		if !ok {
			continue
		}
		if i == len(set.vals) || set.vals[i] != str {
			return false
		}
		i++
	}
	return i == len(set.vals)
}

// walk finds values in the last read's (vals, with their encodings encs), in step.
type walk struct {
	vals   []string
	encs   [][]byte
	at     int            // the last read's next value
	misses int            // values not found in step
	index  map[string]int // value -> its place, built after walkMisses misses
}

// encodeAhead is how far walk looks past the last read's next value for the value in
// hand (a released or renewed lock leaves a gap of one); walkMisses is how many values
// may be missed in step before it looks them up.
const (
	encodeAhead = 8
	walkMisses  = 64
)

// find returns v's encoding in the last read, if it has one that parses.
func (w *walk) find(v string) ([]byte, bool) {
	for i := w.at; i < min(w.at+encodeAhead, len(w.vals)); i++ {
		if w.vals[i] == v {
			w.at = i + 1
			return w.encs[i], w.encs[i] != nil
		}
	}
	if w.misses++; w.misses <= walkMisses {
		return nil, false // new or changed, most likely: decoded
	}
	if w.index == nil {
		w.index = make(map[string]int, len(w.vals))
		for i, pv := range w.vals {
			w.index[pv] = i
		}
	}
	i, ok := w.index[v]
	if !ok {
		return nil, false
	}
	w.at = i + 1
	return w.encs[i], w.encs[i] != nil
}

// encodeYield is how many values encode handles between two yields of its P. A read
// of a type at its quota (20,000 locks, about 3.5 MB) held its P for 4-5 ms, and a
// third of that was zeroing the answer before it was written (mostly the page faults
// of fresh memory): the answer is written into unzeroed memory instead (a
// strings.Builder), so that its faults too come between yields. In the hub's execution
// trace under lockbench -mode share (2 vCPUs), this and the console's answering one
// type's array uncopied (joinArrays) took the longest run of lockhub code from 11-42 ms
// to 4-7 ms, and the longest wait of a runnable goroutine from 11-27 ms to 7 ms, with
// a yield every 2048 values. Every 256 (a yield costs well under a microsecond, 80 a
// read) the stretches of encode left the trace's longest runs (the garbage collector's
// mark worker is now the longest, 4.9 ms); on one P (BenchmarkListEncodeHold, 3 runs
// each, alternating), another goroutine's longest wait in a read with one change went
// from 0.77-1.48 ms on average and 4.8-6.3 ms at most (2048) to 0.41-0.96 and 1.7-4.6
// ms, for the same read time (2.2-2.8 ms against 1.8-2.9 ms).
const encodeYield = 256

// readOnlyBytes is s's bytes, not copied: for a value built once and only read after
// (an encoded answer, shared by every reader, which must never write to it).
func readOnlyBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// The label values of lockhub_store_list_values_total.
const (
	listDecoded = "decoded" // read for the first time, or changed: decoded and encoded
	listKnown   = "known"   // as the type's last read found it: its encoding reused
)
