package demo

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
	"github.com/lockhub/lockhub/web"
)

// The demo domain of PROTOCOL.md §5: approval requests, as in the story, served for
// QA and for the browser demo. The rows stand for the application's own database,
// which is not the lock cache: they live in their own Redis keys (demo_store.go).

// ApprovalRequestType is the entity type of the demo domain's rows.
const ApprovalRequestType = "ApprovalRequest"

// RequestStatus is the status of an approval request.
type RequestStatus string

// The statuses of an approval request. A request is decided once.
const (
	StatusPending  RequestStatus = "pending"
	StatusApproved RequestStatus = "approved"
	StatusRejected RequestStatus = "rejected"
)

// ApprovalRequest is a row of the demo domain:
//
//	{"uid":"r-1001","title":"..","requester":"..","amount":1250.50,"currency":"EUR",
//	 "status":"pending|approved|rejected","decidedBy":{"oid":"..","name":".."}|null,
//	 "decidedAtUtc":"..Z"|null,"version":3, ...}
//
// The members after version are transport management details for the demo page.
type ApprovalRequest struct {
	UID       string           `json:"uid"`
	Title     string           `json:"title"`
	Requester string           `json:"requester"`
	Amount    float64          `json:"amount"`
	Currency  string           `json:"currency"`
	Status    RequestStatus    `json:"status"`
	DecidedBy *protocol.Holder `json:"decidedBy"`
	DecidedAt protocol.Time    `json:"decidedAtUtc"` // null while pending
	Version   int64            `json:"version"`

	Category    string           `json:"category,omitempty"`
	Carrier     string           `json:"carrier,omitempty"`
	Origin      string           `json:"origin,omitempty"`
	Destination string           `json:"destination,omitempty"`
	ShipmentRef string           `json:"shipmentRef,omitempty"`
	CreatedAt   protocol.Time    `json:"createdAtUtc"`
	UpdatedBy   *protocol.Holder `json:"updatedBy,omitempty"`
	UpdatedAt   *protocol.Time   `json:"updatedAtUtc,omitempty"`
	Comment     string           `json:"decisionComment,omitempty"`
}

// Limits of what a client may write into a row.
const (
	maxTitle   = 200
	maxComment = 1000
	maxAmount  = 1e9
)

type rowList struct {
	Rows []ApprovalRequest `json:"rows"`
}

// rowRef validates the row a request names, as PROTOCOL.md §1 validates a uid.
func rowRef(r *http.Request) (locks.Ref, error) {
	ref := locks.Ref{Tenant: identity(r).Tenant, Type: ApprovalRequestType, UID: web.PathParam(r, "uid")}
	return ref, ref.Validate()
}

// demoError turns the store's "no such row" into not_found; the rest is as it is.
func demoError(err error, uid string) error {
	if errors.Is(err, errRowMissing) {
		return web.Errorf(protocol.CodeNotFound, "no approval request %s", uid)
	}
	return err
}

func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// writeRow answers a row with its version as ETag (RFC 9110 §8.8.3).
func writeRow(w http.ResponseWriter, status int, row ApprovalRequest) {
	w.Header().Set("ETag", etag(row.Version))
	web.WriteJSON(w, status, row)
}

// checkIfMatch answers 412 stale when the request's If-Match names no current
// version of row (RFC 9110 §13.1.1; "*" matches any row that exists). No If-Match
// means the client does not ask, and the write goes on.
func checkIfMatch(r *http.Request, row *ApprovalRequest) error {
	h := r.Header.Values("If-Match")
	if len(h) == 0 {
		return nil
	}
	cur := etag(row.Version)
	for _, line := range h {
		for tag := range strings.SplitSeq(line, ",") {
			tag = strings.TrimSpace(tag)
			// Strong comparison: a weak tag never matches. An unquoted version is
			// accepted too, for hand-written requests.
			if tag == "*" || tag == cur || tag == strconv.FormatInt(row.Version, 10) {
				return nil
			}
		}
	}
	cp := *row
	return &web.Error{Code: protocol.CodeStale, Message: fmt.Sprintf("%s is at version %d; If-Match named another", row.UID, row.Version), Row: &cp}
}

// alreadyDecided refuses a change to a request that has its decision.
func alreadyDecided(row *ApprovalRequest) error {
	if row.Status == StatusPending {
		return nil
	}
	cp := *row
	by := ""
	if row.DecidedBy != nil {
		by = " by " + row.DecidedBy.Name
	}
	return &web.Error{Code: protocol.CodeAlreadyDecided, Message: fmt.Sprintf("%s was already %s%s", row.UID, row.Status, by), Row: &cp}
}

// listRequests: GET /api/approval-requests.
func (d *Domain) listRequests(w http.ResponseWriter, r *http.Request) {
	rows, err := d.rows.list(r.Context(), identity(r).Tenant)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	web.WriteJSON(w, http.StatusOK, rowList{Rows: rows})
}

// getRequest: GET /api/approval-requests/{uid}.
func (d *Domain) getRequest(w http.ResponseWriter, r *http.Request) {
	ref, err := rowRef(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	row, err := d.rows.get(r.Context(), ref.Tenant, ref.UID)
	if err != nil {
		d.fail(w, r, demoError(err, ref.UID))
		return
	}
	writeRow(w, http.StatusOK, row)
}

// rowUpdate is the body of the generic update: the members to change.
type rowUpdate struct {
	Title  *string  `json:"title"`
	Amount *float64 `json:"amount"`
}

func (u rowUpdate) validate() error {
	if u.Title == nil && u.Amount == nil {
		return web.Errorf(protocol.CodeBadRequest, "give title, amount or both")
	}
	if u.Title != nil {
		t := strings.TrimSpace(*u.Title)
		if t == "" || len([]rune(t)) > maxTitle {
			return web.Errorf(protocol.CodeBadRequest, "title must be 1 to %d characters", maxTitle)
		}
	}
	if u.Amount != nil {
		a := *u.Amount
		if math.IsNaN(a) || a < 0 || a > maxAmount || math.Abs(math.Round(a*100)-a*100) > 1e-6 {
			return web.Errorf(protocol.CodeBadRequest, "amount must be between 0 and %.0f, in cents", maxAmount)
		}
	}
	return nil
}

// entityRef reads the row a generic entity route names. Its {type} must be
// ApprovalRequest: the demo domain has nothing else.
func entityRef(r *http.Request) (locks.Ref, error) {
	if t := web.PathParam(r, "type"); t != ApprovalRequestType {
		return locks.Ref{}, web.Errorf(protocol.CodeNotFound, "the demo domain has no entities of type %q", short(t))
	}
	return rowRef(r)
}

// updateEntity: PUT /api/entities/ApprovalRequest/{uid}, guarded. It changes title
// and amount of a pending request.
func (d *Domain) updateEntity(w http.ResponseWriter, r *http.Request) {
	ref, err := entityRef(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	var u rowUpdate
	if err := web.DecodeJSON(r, &u, false); err != nil {
		d.fail(w, r, err)
		return
	}
	if err := u.validate(); err != nil {
		d.fail(w, r, err)
		return
	}
	id := identity(r)
	row, err := d.rows.update(r.Context(), "update", ref.Tenant, ref.UID, func(row *ApprovalRequest) error {
		if err := alreadyDecided(row); err != nil {
			return err
		}
		if err := checkIfMatch(r, row); err != nil {
			return err
		}
		if u.Title != nil {
			row.Title = strings.TrimSpace(*u.Title)
		}
		if u.Amount != nil {
			row.Amount = math.Round(*u.Amount*100) / 100
		}
		h, now := id.Holder(), protocol.NewTime(time.Now())
		row.UpdatedBy, row.UpdatedAt = &h, &now
		return nil
	})
	if err != nil {
		d.fail(w, r, demoError(err, ref.UID))
		return
	}
	writeRow(w, http.StatusOK, row)
}

// deleteEntity: DELETE /api/entities/ApprovalRequest/{uid}, guarded. The row stays
// deleted: its uid stays in the tenant's index, which keeps it from being seeded again.
func (d *Domain) deleteEntity(w http.ResponseWriter, r *http.Request) {
	ref, err := entityRef(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	err = d.rows.remove(r.Context(), ref.Tenant, ref.UID, func(row *ApprovalRequest) error {
		return checkIfMatch(r, row)
	})
	if err != nil {
		d.fail(w, r, demoError(err, ref.UID))
		return
	}
	d.releaseAfter(r, ref, "delete", locks.AuditRelease)
	w.WriteHeader(http.StatusNoContent)
}

// decision is the optional body of approve and reject.
type decision struct {
	Comment string `json:"comment"`
}

// decide: POST /api/approval-requests/{uid}/approve and /reject, guarded. The decision
// is a compare-and-set on the pending row, so of two racing decisions exactly one
// wins and the other answers 409 already_decided, whatever the locks say. On success
// the caller's lock is released.
func (d *Domain) decide(to RequestStatus) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ref, err := rowRef(r)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		var body decision
		if err := web.DecodeJSON(r, &body, true); err != nil {
			d.fail(w, r, err)
			return
		}
		if len([]rune(body.Comment)) > maxComment {
			d.fail(w, r, web.Errorf(protocol.CodeBadRequest, "comment must be at most %d characters", maxComment))
			return
		}
		id := identity(r)
		row, err := d.rows.update(r.Context(), string(to), ref.Tenant, ref.UID, func(row *ApprovalRequest) error {
			if err := alreadyDecided(row); err != nil {
				return err
			}
			if err := checkIfMatch(r, row); err != nil {
				return err
			}
			h := id.Holder()
			row.Status, row.DecidedBy, row.DecidedAt = to, &h, protocol.NewTime(time.Now())
			row.Comment = strings.TrimSpace(body.Comment)
			return nil
		})
		if err != nil {
			d.fail(w, r, demoError(err, ref.UID))
			return
		}
		d.releaseAfter(r, ref, string(to), locks.AuditDecision)
		writeRow(w, http.StatusOK, row)
	}
}

// releaseAfter releases the caller's lock on ref after a write that ends the edit.
// Not holding it is the common case for automation; a store that fails has failed
// open and logged it; either way the write stands. reason is what the audit trail
// records: decision after approve or reject, release after a delete.
func (d *Domain) releaseAfter(r *http.Request, ref locks.Ref, op string, reason locks.AuditReason) {
	res, err := d.locks.ReleaseBecause(r.Context(), ref, identity(r).Holder(), "", reason) // no tab edits it any more
	if err != nil {
		d.log.LogAttrs(r.Context(), slog.LevelWarn, "releasing the lock after a write failed",
			slog.String("op", op), slog.String("entity", ref.String()), slog.String("error", err.Error()))
		return
	}
	d.log.LogAttrs(r.Context(), slog.LevelDebug, "released the lock after a write",
		slog.String("op", op), slog.String("entity", ref.String()), slog.String("outcome", string(res.Outcome)))
}
