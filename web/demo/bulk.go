package demo

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/lockhub/lockhub/locks"
	"github.com/lockhub/lockhub/protocol"
	"github.com/lockhub/lockhub/web"
)

// approveMany: POST /api/approval-requests/approve {"uids":[..]} (PROTOCOL.md §12), at
// most protocol.MaxBulk: the bulk approve of a grid. Guarded (web.GuardMany), it claims
// every row for the caller, all or none, approves each one still pending, releases
// them, and answers {"rows":[..]}, the rows as they stand, in the order asked: 409
// {"code":"locked","locks":[..]} when anyone else holds any of them, and nothing is
// decided. A row that does not exist answers 404 before anything is claimed. When the
// lock store fails open the approvals go on, each still a compare-and-set of its own.
func (d *Domain) approveMany(w http.ResponseWriter, r *http.Request) {
	id := identity(r)
	uids, err := web.ReadUIDs(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if err := protocol.CheckEntityUIDs("the uids", uids); err != nil {
		d.fail(w, r, err)
		return
	}
	for _, uid := range uids {
		if err := (locks.Ref{Tenant: id.Tenant, Type: ApprovalRequestType, UID: uid}).Validate(); err != nil {
			d.fail(w, r, err)
			return
		}
		if _, err := d.rows.get(r.Context(), id.Tenant, uid); err != nil {
			d.fail(w, r, demoError(err, uid))
			return
		}
	}
	res, err := d.locks.ClaimMany(r.Context(), id.Tenant, ApprovalRequestType, uids, id.Holder(), "")
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if res.Outcome == protocol.OutcomeLocked {
		d.fail(w, r, &web.Error{Code: protocol.CodeLocked, Locks: res.Locks,
			Message: "some of the requests are being edited by someone else; nothing was approved"})
		return
	}
	rows := make([]ApprovalRequest, 0, len(uids))
	var failed error
	for _, uid := range uids {
		row, err := d.rows.update(r.Context(), string(StatusApproved), id.Tenant, uid, func(row *ApprovalRequest) error {
			if row.Status != StatusPending {
				return errDecided
			}
			h := id.Holder()
			row.Status, row.DecidedBy, row.DecidedAt = StatusApproved, &h, protocol.NewTime(time.Now())
			return nil
		})
		if errors.Is(err, errDecided) {
			row, err = d.rows.get(r.Context(), id.Tenant, uid) // decided already: as it stands
		}
		if err != nil {
			failed = demoError(err, uid)
			break
		}
		rows = append(rows, row)
	}
	if res.Outcome == protocol.OutcomeAcquired {
		rel, err := d.locks.ReleaseManyBecause(r.Context(), id.Tenant, ApprovalRequestType, uids, id.Holder(), "", locks.AuditDecision)
		if err != nil {
			d.log.LogAttrs(r.Context(), slog.LevelWarn, "releasing the locks after a bulk approve failed",
				slog.Int("rows", len(uids)), slog.String("error", err.Error()))
		} else {
			d.log.LogAttrs(r.Context(), slog.LevelDebug, "released the locks after a bulk approve",
				slog.Int("rows", len(uids)), slog.String("outcome", string(rel.Outcome)))
		}
	}
	if failed != nil {
		d.fail(w, r, failed)
		return
	}
	web.WriteJSON(w, http.StatusOK, rowList{Rows: rows})
}

// errDecided skips a row of a bulk approve that has its decision already.
var errDecided = errors.New("demo: decided already")
