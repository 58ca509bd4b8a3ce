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
// Start with Verifier and Identity; NewJWKS and NewDev make the two verifiers. Roles is
// the role policy both transports check an Identity with (takeover, the lock console).
// Package authtest is an identity provider for tests.
//
// # Concurrency
//
// Every method of JWKS and Dev may be called concurrently. A JWKS holds its key set in
// memory and refreshes it from a goroutine of its own, which runs until the ctx given
// to NewJWKS is done or Close is called; Close also waits for it, and for a refetch an
// unknown kid started. Verify never waits on a fetch for a kid the set holds, and at
// most JWKSConfig.UnknownKidWait for one it lacks.
//
// Every Identity's Name is cleaned by CleanName (PROTOCOL.md §6, "Names").
package auth
