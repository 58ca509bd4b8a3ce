// @ts-check
/**
 * What the client reads of a token: only when it expires, to refresh it in time.
 *
 * @module lockhub/token
 */

/**
 * The expiry of a JWT in Unix milliseconds, read without verifying the token (the
 * client only needs to know when to refresh it), or null when it has none.
 * @param {string} token
 * @returns {number|null}
 */
export function jwtExpiry(token) {
  try {
    const part = String(token).split('.')[1];
    if (!part) return null;
    let b64 = part.replace(/-/g, '+').replace(/_/g, '/');
    while (b64.length % 4) b64 += '=';
    const bin = atob(b64);
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    const claims = JSON.parse(new TextDecoder().decode(bytes));
    return typeof claims.exp === 'number' ? claims.exp * 1000 : null;
  } catch {
    return null;
  }
}
