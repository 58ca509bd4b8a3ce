// Package auth checks lockhub's bearer tokens (PROTOCOL.md §6) and says whose they are.
//
// A Verifier turns a token into an Identity: tenant, holder oid, display name, roles
// and expiry. Two implementations exist: JWKS checks production tokens against an
// identity provider's key set (issuer, audience, expiry, a signature whose algorithm
// the key fixes), and Dev signs and checks the development tokens that POST /dev/token
// hands out. Every failure, whatever its cause, wraps ErrUnauthorized, which the socket
// answers with close code 4401 and HTTP with 401. Package hub checks the auth frame of
// a socket with it, package web the Authorization header of a request.
//
// Start with Verifier and Identity; NewJWKS and NewDev make the two verifiers.
// Package authtest is an identity provider for tests.
//
// # Concurrency
//
// Every method of JWKS and Dev may be called concurrently. The JWKS key cache runs jwx's
// goroutines until the ctx given to NewJWKS is done.
package auth
