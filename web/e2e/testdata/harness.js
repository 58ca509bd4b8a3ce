// The script of harness.html, a file of its own: the fake hub serves the page under a
// Content-Security-Policy without 'unsafe-inline', which blocks inline scripts.
import * as lh from '/static/lockhub.js';

window.lh = lh;
const b64url = (s) => btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
// An unsigned JWT-shaped token: the client only decodes its exp.
window.makeToken = (exp, n) =>
  `${b64url(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${b64url(JSON.stringify({ sub: 'u-me', n, ...(exp ? { exp } : {}) }))}.sig`;
window.start = (opts = {}) => {
  window.states = [];
  window.tokens = [];
  window.errors = [];
  window.changes = [];
  window.whys = [];
  window.stateLog = [];
  window.client = lh.connect({
    url: `ws://${location.host}/ws`,
    getToken: async (why) => {
      window.whys.push(why);
      const exp = opts.expIn ? Math.floor(Date.now() / 1000) + opts.expIn : undefined;
      const tok = window.makeToken(exp, window.tokens.length + 1);
      window.tokens.push(tok);
      return tok;
    },
    onState: (s) => {
      window.states.push(s.state);
      window.stateLog.push(s);
    },
    backoffBaseMs: opts.base ?? 50,
    backoffMaxMs: opts.max ?? 200,
    idlePingMs: opts.idlePingMs,
    pongTimeoutMs: opts.pongTimeoutMs,
    onError: (e) => window.errors.push(String(e)),
  });
  return true;
};
window.harnessReady = true;
