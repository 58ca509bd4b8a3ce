// The React example of the lockhub client: a request's form held with useLock (the
// waiting line, "Stop waiting", "Ask … to finish", release) and a list of the type's
// live locks with useLocks. Bundled with React by esbuild:
//
//   npx esbuild examples/react/app.jsx --bundle --format=esm --jsx=automatic \
//     --outfile=examples/react/app.js
//
// The page reads the hub's socket URL and a token from its query (?hub=ws://…/ws&token=…),
// as a test gives them; an application calls its own token endpoint in getToken.
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';

import { en, de } from '@lockhub/client';
import { LockClientProvider, useConnectionState, useLock, useLockClient, useLocks } from '@lockhub/client/react';

const TYPE = 'ApprovalRequest';
const q = new URLSearchParams(location.search);

function App() {
  const client = useLockClient({ url: q.get('hub') || undefined, getToken: () => q.get('token') || '' });
  if (!client) return <p data-testid="conn" data-state="connecting">Connecting…</p>;
  return (
    <LockClientProvider client={client}>
      <Indicator />
      <Request uid={q.get('uid') || 'r-1001'} />
      <Locks />
    </LockClientProvider>
  );
}

function Indicator() {
  const s = useConnectionState();
  return <p data-testid="conn" data-state={s ? s.state : 'connecting'}>{s ? s.state : 'connecting'}</p>;
}

function Request({ uid }) {
  const lock = useLock(TYPE, uid);
  const m = q.get('lang') === 'de' ? de : en;
  const place = lock.position > 0 ? m.place(lock.position) : '';
  return (
    <section data-testid="request" data-status={lock.status} data-position={lock.position}>
      {lock.status === 'locked' && lock.holder && (
        <div className="lockhub-banner" data-kind="locked" data-testid="banner">
          {m.lockedBy(lock.holder.name, '', '').replace(/ since.*$/, '')}{place}{' '}
          {lock.intent === 'edit'
            ? <button data-testid="stop-waiting" onClick={lock.stopWaiting}>{m.stopWaiting}</button>
            : <button data-testid="wait" onClick={lock.wait}>{m.waitInLine}</button>}
          <button data-testid="nudge" onClick={() => void lock.nudge().catch(() => {})}>{m.askToFinish(lock.holder.name)}</button>
        </div>
      )}
      {lock.status === 'releasing' && <div data-testid="releasing">{m.releasing}</div>}
      <ul data-testid="others">
        {lock.others.map((o) => <li key={o.oid} data-oid={o.oid}>{m.viewer(o.name, o.activity, o.position)}</li>)}
      </ul>
      <fieldset disabled={!lock.editable} data-testid="fields">
        <label>Title <input data-testid="title" defaultValue="Laptop for Grace" /></label>
      </fieldset>
      <button data-testid="release" disabled={lock.status !== 'held'} onClick={() => void lock.release()}>Release</button>
      <button data-testid="claim" disabled={lock.status === 'held'} onClick={lock.claim}>Edit</button>
      <p data-testid="status">{lock.status}</p>
    </section>
  );
}

function Locks() {
  const locks = useLocks(TYPE);
  return (
    <ul data-testid="locks">
      {[...locks.values()].map((l) => <li key={l.entityUid} data-uid={l.entityUid} data-holder={l.holderOid}>{l.entityUid}: {l.holderName}</li>)}
    </ul>
  );
}

createRoot(document.getElementById('root')).render(<StrictMode><App /></StrictMode>);
