// Package authtest is test support for code that checks lockhub's production tokens.
//
// Start with NewIDP: an identity provider that serves a JWKS over HTTP and signs tokens
// with its key, as Entra ID or any OpenID provider would, for the real auth.JWKS (or
// the lockhub binary's --jwks-url) to check. It lives until the test that made it ends.
// Keys can be added and retired (AddKey, RemoveKey), and the endpoint made to fail or
// hang (Fail, Hang) and asked how often it was fetched (Fetches), for tests of key
// rotation and of a JWKS endpoint that misbehaves.
// An IDP is safe for concurrent use. It is for tests only.
package authtest
