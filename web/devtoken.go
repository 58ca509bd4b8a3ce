package web

import (
	"log/slog"
	"net/http"

	"github.com/lockhub/lockhub/protocol"
)

// devTokenRequest is the body of POST /dev/token (PROTOCOL.md §6).
type devTokenRequest struct {
	Tenant string   `json:"tenant"`
	OID    string   `json:"oid"`
	Name   string   `json:"name"`
	Roles  []string `json:"roles"`
}

// Limits of a development identity.
const (
	maxName  = 200
	maxRoles = 32
)

type devTokenResponse struct {
	Token string `json:"token"`
}

// devToken: POST /dev/token issues a development token. The route exists only in
// development mode (Config.DevTokens set); the token is never logged.
func (s *Server) devToken(w http.ResponseWriter, r *http.Request) {
	var req devTokenRequest
	if err := DecodeJSON(r, &req, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if !protocol.ValidTenant(req.Tenant) {
		s.fail(w, r, &protocol.InvalidEntityError{Field: "tenant", Value: req.Tenant})
		return
	}
	if !protocol.ValidOID(req.OID) {
		s.fail(w, r, &protocol.InvalidEntityError{Field: "holderOid", Value: req.OID})
		return
	}
	if req.Name == "" {
		req.Name = req.OID
	}
	if len([]rune(req.Name)) > maxName || len(req.Roles) > maxRoles {
		s.fail(w, r, Errorf(protocol.CodeBadRequest, "name must be at most %d characters, roles at most %d", maxName, maxRoles))
		return
	}
	token, err := s.dev.Issue(req.Tenant, req.OID, req.Name, req.Roles)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "issued a development token",
		slog.String("tenant", req.Tenant), slog.String("oid", req.OID), slog.Any("roles", req.Roles))
	WriteJSON(w, http.StatusOK, devTokenResponse{Token: token})
}
