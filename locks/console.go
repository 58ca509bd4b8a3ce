package locks

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	"github.com/lockhub/lockhub/protocol"
)

// The lock console of PROTOCOL.md §10: every live lock of a tenant, and the force
// release. Who may use them (the admin role) is the transports' to check.

// AdminLocksJSON returns every live lock of a tenant, of every lockable type, walking
// the per-type indexes page by page (never KEYS or SCAN), as the JSON array of their
// protocol.Lock encodings. It encodes as ListJSON does (only the values that changed
// since the last list of the type are decoded and encoded again): the console of a
// tenant at its quota reads 20,000 locks, and decoding and encoding each of them for
// every request was most of its cost on the hub. When Redis does not answer it returns
// ErrUnavailable (logged and counted as failing open): an administrator must not read
// "no locks" when the truth is unknown (PROTOCOL.md §5, version 3). The bytes may be
// shared: do not modify them.
func (s *Console) AdminLocksJSON(ctx context.Context, tenant string) ([]byte, error) {
	if !ValidTenant(tenant) {
		return nil, &InvalidEntityError{Field: "tenant", Value: tenant}
	}
	b, ok := runOpWithin(ctx, s.core, opAdminLocks, pagedBudget*s.timeout, func(ctx context.Context) ([]byte, error) {
		var arrs [][]byte // the types that have locks
		for _, t := range s.reg.Types() {
			values, err := s.readLive(ctx, tenant, t)
			if err != nil {
				return nil, err // failing open is no locks, not the types read so far
			}
			if arr := s.encoded.encode(ctx, s.core, typeKey{tenant, t}, values); len(arr) > 2 { // not "[]"
				arrs = append(arrs, arr)
			}
		}
		return joinArrays(arrs), nil
	}, func([]byte) outcomeLabel { return labelListed })
	if !ok {
		return nil, ErrUnavailable
	}
	return b, nil
}

// joinArrays returns the JSON arrays arrs as one. One array is answered as it is (a
// tenant whose locks are of one type, shared with that type's lists): copying a
// tenant's quota of locks is 3.5 MB of fresh memory and milliseconds on one P.
func joinArrays(arrs [][]byte) []byte {
	switch len(arrs) {
	case 0:
		return []byte("[]")
	case 1:
		return arrs[0]
	}
	size := 0
	for _, a := range arrs {
		size += len(a)
	}
	var out strings.Builder // unzeroed, as encode's (see encodeYield)
	out.Grow(size)
	for i, a := range arrs {
		sep := byte(',')
		if i == 0 {
			sep = '['
		}
		out.WriteByte(sep)
		out.Write(a[1 : len(a)-1])
		runtime.Gosched() // between types (see encodeYield)
	}
	out.WriteByte(']')
	return readOnlyBytes(out.String())
}

// ForceRelease drops the lock on ref whoever holds it, for admin: every socket of the
// holder loses it, watchers get Released with "by" naming admin, and the audit trail
// gets ForceReleased (reason admin). It answers released (Lock is the lock that was
// held), notHeld (free) or unknown.
func (s *Console) ForceRelease(ctx context.Context, ref Ref, admin protocol.Holder) (Result, error) {
	if err := s.check(ref, &admin); err != nil {
		return Result{}, err
	}
	res := s.write(ctx, opForceRelease, func(ctx context.Context) (Result, error) { return s.forceRelease(ctx, ref, admin) })
	if res.refused != nil {
		return answer(res)
	}
	s.amet.forced.WithLabelValues(string(res.Outcome)).Inc()
	return res, nil
}

func (s *core) forceRelease(ctx context.Context, ref Ref, admin protocol.Holder) (Result, error) {
	now := s.now()
	st, stored, err := s.sc.force.run(ctx, s, s.keys(ref), s.pubArgs(ref.Tenant, now), s.auditArgs(now, &admin, AuditAdmin),
		admin.OID, admin.Name)
	if err != nil {
		return Result{}, err
	}
	switch st {
	case forceReleased:
		s.met.published.WithLabelValues(string(protocol.OpReleased)).Inc()
		s.audited(string(OpForceReleased), 1)
		l, err := decodeLock(stored)
		if err != nil {
			return Result{}, err
		}
		return Result{Outcome: protocol.OutcomeReleased, Lock: &l}, nil
	case forceNotHeld:
		return Result{Outcome: protocol.OutcomeNotHeld}, nil
	case forceRated:
		return Result{refused: s.refused(ctx, ref.Tenant, false, stored)}, nil
	}
	return Result{}, &corruptError{fmt.Sprintf("forcerelease script answered status %q", st)}
}
