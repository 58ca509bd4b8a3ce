package web

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
)

// The lock API of PROTOCOL.md §5: the operations of §2 over HTTP, with the same
// outcomes as the socket. Changes made here are published by the store like any other,
// so every socket watching the type sees them.

// lockResult is the body of a lock operation: the socket's result frame without id and
// type.
type lockResult struct {
	Outcome        protocol.Outcome `json:"outcome"`
	Lock           *protocol.Lock   `json:"lock"`
	PreviousHolder *protocol.Holder `json:"previousHolder,omitempty"`
}

// lockList is the body of list and mine.
type lockList struct {
	Locks []protocol.Lock `json:"locks"`
}

// outcomeStatus is the HTTP status of each outcome (PROTOCOL.md §5). Unknown is 200:
// the store failed open, and a client goes on without a lock.
func outcomeStatus(o protocol.Outcome) int {
	switch o {
	case protocol.OutcomeLocked, protocol.OutcomeLost, protocol.OutcomeNotHeld:
		return http.StatusConflict
	case protocol.OutcomeForbidden:
		return http.StatusForbidden
	}
	return http.StatusOK
}

func writeResult(w http.ResponseWriter, res locks.Result) {
	body := lockResult{Outcome: res.Outcome, Lock: res.Lock}
	if res.Outcome == protocol.OutcomeTakenOver {
		body.PreviousHolder = res.PreviousHolder
	}
	WriteJSON(w, outcomeStatus(res.Outcome), body)
}

func writeLocks(w http.ResponseWriter, ls []protocol.Lock) {
	if ls == nil {
		ls = []protocol.Lock{}
	}
	WriteJSON(w, http.StatusOK, lockList{Locks: ls})
}

// claim: POST /api/locks/{type}/{uid}.
func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	res, err := s.store.Claim(r.Context(), ref(r, id), id.Holder(), "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeResult(w, res)
}

// renew: PUT /api/locks/{type}/{uid}.
func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	res, err := s.store.Renew(r.Context(), ref(r, id), id.Holder(), "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeResult(w, res)
}

// release: DELETE /api/locks/{type}/{uid}.
func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	res, err := s.store.Release(r.Context(), ref(r, id), id.Holder(), "") // over HTTP: whoever uses it
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeResult(w, res)
}

// takeover: POST /api/locks/{type}/{uid}/takeover.
func (s *Server) takeover(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	res, err := s.store.Takeover(r.Context(), ref(r, id), id.Holder(), "", s.roles.CanTakeOver(id))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeResult(w, res)
}

// get: GET /api/locks/{type}/{uid}; the lock itself, or 404 when it is free.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	ref := ref(r, id)
	l, err := s.store.Get(r.Context(), ref)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if l == nil {
		s.fail(w, r, Errorf(protocol.CodeNotFound, "%s %s is not locked", ref.Type, ref.UID))
		return
	}
	WriteJSON(w, http.StatusOK, l)
}

// list: GET /api/locks/{type}.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	ls, err := s.store.List(r.Context(), id.Tenant, PathParam(r, "type"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeLocks(w, ls)
}

// mine: GET /api/me/locks.
func (s *Server) mine(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	ls, err := s.store.Mine(r.Context(), id.Tenant, id.OID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeLocks(w, ls)
}

// lockedError is the 409 of a guarded write: another user holds l.
func lockedError(l *protocol.Lock) *Error {
	return &Error{
		Code: protocol.CodeLocked,
		Message: fmt.Sprintf("%s %s is being edited by %s until %s", l.EntityType, l.EntityUID,
			l.HolderName, l.ExpiresAt),
		Lock: l,
	}
}

// Claims of many entities at once (version 3, PROTOCOL.md §12).

// manyResult is the body of a bulk claim: {"outcome":"acquired","locks":[..]}.
type manyResult struct {
	Outcome protocol.Outcome `json:"outcome"`
	Locks   []protocol.Lock  `json:"locks"`
}

// releasedMany is the body of a bulk release: {"outcome":"released","count":2}.
type releasedMany struct {
	Outcome protocol.Outcome `json:"outcome"`
	Count   int              `json:"count"`
}

// UIDsBody is the body of a bulk write: {"uids":["r-1001","r-1002"]}.
type UIDsBody struct {
	UIDs []string `json:"uids"`
}

// ReadUIDs reads a bulk write's {"uids":[..]} body, leaving it in place for the next
// reader (a guard, then the handler): bad_request when it is not that object.
// Whether the uids are 1 to protocol.MaxBulk distinct valid names is the store's to
// judge.
func ReadUIDs(r *http.Request) ([]string, error) {
	b, err := io.ReadAll(r.Body) // in memory already: see LimitBody
	if err != nil {
		return nil, &Error{Code: protocol.CodeBadRequest, Message: "the body could not be read", Err: err}
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	probe := r.Clone(r.Context())
	probe.Body = io.NopCloser(bytes.NewReader(b))
	var body struct {
		UIDs *[]string `json:"uids"`
	}
	if err := DecodeJSON(probe, &body, false); err != nil {
		return nil, err
	}
	if body.UIDs == nil {
		return nil, Errorf(protocol.CodeBadRequest, `the body must name the entities: {"uids":[..]}`)
	}
	return *body.UIDs, nil
}

// claimMany: POST /api/locks/{type} {"uids":[..]}: all or none.
func (s *Server) claimMany(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	uids, err := ReadUIDs(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.store.ClaimMany(r.Context(), id.Tenant, PathParam(r, "type"), uids, id.Holder(), "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if res.Locks == nil {
		res.Locks = []protocol.Lock{}
	}
	WriteJSON(w, outcomeStatus(res.Outcome), manyResult{Outcome: res.Outcome, Locks: res.Locks})
}

// releaseMany: DELETE /api/locks/{type}?uid=..&uid=..
func (s *Server) releaseMany(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	uids := r.URL.Query()["uid"]
	res, err := s.store.ReleaseMany(r.Context(), id.Tenant, PathParam(r, "type"), uids, id.Holder(), "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, releasedMany{Outcome: res.Outcome, Count: res.Count})
}
