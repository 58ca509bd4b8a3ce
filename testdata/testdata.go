// Package testdata holds the data sets lockhub ships with: the approval requests every
// tenant of the demo domain starts with (PROTOCOL.md §5, "The demo domain").
//
// The files are embedded, so the binary needs no working directory. The go tool skips
// directories named testdata in ./... patterns; this package is built because web
// imports it, and can be vetted by naming it (go vet ./testdata/).
//
// Concurrency: everything here is immutable and safe for concurrent use.
package testdata

import _ "embed" // for go:embed

// approvalRequests is a string, not a []byte, so no caller can change what the next
// one reads.
//
//go:embed approval-requests.json
var approvalRequests string

// ApprovalRequests returns approval-requests.json: a JSON array of approval requests,
// uids r-1001 to r-1042, all pending, amounts in EUR, with realistic transport
// management data (requester, carrier, route, shipment reference).
func ApprovalRequests() []byte { return []byte(approvalRequests) }
