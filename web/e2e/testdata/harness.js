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
    messages: opts.messages,
  });
  return true;
};
// The page's half of a barrier (client_test.go, clientEnv.barrier): a ping, and once it
// is answered a second one, which goes out after everything the client did in answer to
// the frames the hub sent before the first answer. n marks both as barrier n's, apart
// from the heartbeat's pings. A failure shows on the Go side as a ping that never came.
window.barrier = (n) => {
  window.client
    .request({ type: 'ping', barrier: `${n}.1` })
    .then(() => window.client.request({ type: 'ping', barrier: `${n}.2` }))
    .catch(() => {});
  return true;
};
window.harnessReady = true;
