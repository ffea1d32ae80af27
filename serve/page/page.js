// The reviewer's page of spl serve. It calls the JSON API of the server
// it came from, logged in by a cookie the script cannot read; writes carry
// the login's CSRF token. Records are untrusted input: everything taken
// from them is set as text (textContent), never parsed as HTML.
'use strict';

const state = { csrf: '', right: '', thread: '', source: null, recordsAsked: 0 };

const $ = (id) => document.getElementById(id);

// el makes an element whose text is text (as text, never HTML).
function el(tag, text, className) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (className) e.className = className;
  return e;
}

function button(label, onClick, className) {
  const b = el('button', label, className);
  b.type = 'button';
  b.addEventListener('click', onClick);
  return b;
}

// say shows a message: kind is 'error', 'ok' or ''.
function say(text, kind) {
  const s = $('status');
  s.textContent = text;
  s.className = kind || '';
}

const short = (id) => (id ? String(id).slice(-12) : '');

// writes says whether the login may write: a read login is shown no
// write control at all (the server refuses its writes either way).
const writes = () => state.right === 'write' || state.right === 'admin';

// ago is how long before now the time t (RFC 3339) was, in the largest
// whole unit: "3h ago".
function ago(t) {
  const ms = Date.now() - Date.parse(t);
  if (!(ms >= 0)) return t || '';
  const units = [['d', 86400000], ['h', 3600000], ['min', 60000], ['s', 1000]];
  for (const [u, n] of units) if (ms >= n) return Math.floor(ms / n) + u + ' ago';
  return 'just now';
}

// when is a cell showing the time t as ago, the time itself on hover.
function when(t) {
  const td = el('td', ago(t));
  td.title = t;
  return td;
}
const path = (...parts) => parts.map(encodeURIComponent).join('/');

// APIError is an error answer of the API.
class APIError extends Error {
  constructor(status, body) {
    super((body && body.error) || 'HTTP ' + status);
    this.status = status;
    this.rule = body && body.rule;
  }
}

// api calls the API: the cookie goes with it, and the CSRF token with
// every request that is not a GET. A write refused for its CSRF token (a
// login made since in another tab) learns the token again and is tried
// once more.
async function api(method, url, body, retried) {
  const init = { method, headers: {}, credentials: 'same-origin', cache: 'no-store' };
  if (method !== 'GET') init.headers['X-CSRF-Token'] = state.csrf;
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(url, init);
  let data = null;
  if (resp.status !== 204) {
    try { data = await resp.json(); } catch (e) { data = null; }
  }
  if (resp.status === 401 && url !== '/v1/login') showLogin('Your login has ended: log in again.');
  if (resp.status === 403 && data && data.field === 'X-CSRF-Token' && !retried) {
    setLogin(await api('GET', '/v1/login'));
    return api(method, url, body, true);
  }
  if (!resp.ok) throw new APIError(resp.status, data);
  return data;
}

// refused says plainly why a write was refused.
function refused(what, err) {
  if (err.status === 403 && err.rule === 'needs the write right') {
    say(what + ' refused (403 forbidden): this login has the read right only. Log in with the write token to ' + what.toLowerCase() + '.', 'error');
    return;
  }
  say(what + ' refused (' + (err.status || 'network') + '): ' + err.message, 'error');
}

// --- login ---

function showLogin(message) {
  stopFollow();
  state.csrf = state.right = '';
  $('app').hidden = true;
  $('logout').hidden = true;
  $('who').textContent = '';
  $('login').hidden = false;
  $('token').focus();
  if (message) say(message, 'error');
}

function setLogin(login) {
  state.csrf = login.csrf_token || '';
  state.right = login.right;
  $('who').textContent = 'logged in with the ' + login.right + ' right';
  $('pause').hidden = !writes();
}

function showApp(login) {
  setLogin(login);
  $('login').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = false;
  if (login.warnings && login.warnings.length) say(login.warnings.join(' '), 'error');
  loadThreads();
  loadSessions();
  loadRuns();
  const linked = linkedThread();
  if (linked) openThread(linked);
}

// --- deep links: #thread=NAME opens that thread, and survives a reload ---

function linkedThread() {
  const m = /^#thread=(.+)$/.exec(location.hash);
  if (!m) return '';
  try { return decodeURIComponent(m[1]); } catch (e) { return ''; }
}

// --- threads: every thread of the thread index, newest activity first ---

async function loadThreads(ev) {
  if (ev) ev.preventDefault();
  const q = new URLSearchParams({ limit: '100' });
  const a = $('threads-actor').value.trim();
  const k = $('threads-kind').value.trim();
  if (a) q.set('actor', a);
  if (k) q.set('kind', k);
  try {
    const data = await api('GET', '/v1/threads?' + q);
    const body = $('threads').tBodies[0];
    body.replaceChildren();
    for (const t of data.threads) {
      const tr = threadRow(t.thread);
      tr.append(el('td', t.records), el('td', t.checkpoints), el('td', t.last_actor, 'mono'), when(t.last_time));
      body.append(tr);
    }
    if (!data.threads.length) body.append(emptyRow(5, 'no threads'));
  } catch (err) {
    if (err.status !== 401) say('Threads: ' + (err.rule ? err.message + ' (' + err.rule + ')' : err.message), 'error');
  }
}

async function logIn(ev) {
  ev.preventDefault();
  const token = $('token').value.trim();
  $('token').value = '';
  try {
    const login = await api('POST', '/v1/login', { token });
    say('Logged in.', 'ok');
    showApp(login);
  } catch (err) {
    say('Login refused: ' + err.message, 'error');
  }
}

async function logOut() {
  try {
    await api('DELETE', '/v1/login');
  } catch (err) { /* the login ends with the cookie either way */ }
  showLogin();
  say('Logged out.', 'ok');
}

// threadRow is a table row of thread, its first cell a link that opens it.
function threadRow(thread) {
  const tr = document.createElement('tr');
  tr.dataset.thread = thread;
  const name = el('td');
  name.append(button(thread, () => openThread(thread), 'link'));
  tr.append(name);
  return tr;
}

// --- sessions ---

async function loadSessions() {
  const q = $('resumable').checked ? '?resumable=true' : '';
  try {
    const data = await api('GET', '/v1/sessions' + q);
    const body = $('sessions').tBodies[0];
    body.replaceChildren();
    for (const s of data.sessions) {
      const tr = threadRow(s.session_id);
      tr.append(el('td', s.status, 'status-' + s.status), when(s.updated_at), el('td', s.error || ''));
      const acts = el('td');
      if (writes() && s.status === 'running') acts.append(button('Pause', () => pause(s.session_id)));
      if (writes() && s.resumable) acts.append(button('Resume', () => resume(s.session_id)));
      tr.append(acts);
      body.append(tr);
    }
    if (!data.sessions.length) body.append(emptyRow(5, 'no sessions'));
  } catch (err) {
    if (err.status !== 401) say('Sessions: ' + err.message, 'error');
  }
}

function emptyRow(cols, text) {
  const tr = document.createElement('tr');
  const td = el('td', text, 'hint');
  td.colSpan = cols;
  tr.append(td);
  return tr;
}

const actor = () => $('actor').value.trim();

async function pause(thread) {
  try {
    await api('POST', '/v1/threads/' + path(thread) + '/pause', { actor: actor(), reason: "paused from the reviewer's page" });
    say('Paused ' + thread + '.', 'ok');
    loadSessions();
    if (state.thread === thread) openThread(thread);
  } catch (err) {
    refused('Pause', err);
  }
}

async function resume(thread) {
  try {
    await api('POST', '/v1/threads/' + path(thread) + '/resume', { actor: actor() });
    say('Resumed ' + thread + '.', 'ok');
    loadSessions();
    if (state.thread === thread) openThread(thread);
  } catch (err) {
    refused('Resume', err);
  }
}

async function pin(thread, id) {
  try {
    const p = await api('POST', '/v1/threads/' + path(thread) + '/pins', { id, actor: actor(), reason: "pinned from the reviewer's page" });
    say((p.already ? 'Already pinned: ' : 'Pinned: ') + short(id) + '.', 'ok');
  } catch (err) {
    refused('Pin', err);
  }
}

// --- a thread: checkpoints, lineage, live ---

function list(items) {
  const ul = el('ul');
  for (const it of items || []) ul.append(el('li', it));
  return ul;
}

async function openThread(thread) {
  if (state.thread !== thread) {
    stopFollow();
    // Nothing of the thread shown before stays while this one loads.
    for (const id of ['live', 'records', 'checkpoints', 'lineage']) $(id).replaceChildren();
    $('records-state').textContent = 'loading';
    $('record').hidden = true;
  }
  state.thread = thread;
  history.replaceState(null, '', '#thread=' + encodeURIComponent(thread));
  $('thread').hidden = false;
  $('thread-name').textContent = thread;
  $('pause').onclick = () => pause(thread);
  $('resume').onclick = () => resume(thread);
  // Pause and Resume are offered when the API says the thread holds a
  // session, running or one to resume, and to a login that may write.
  $('pause').hidden = $('resume').hidden = true;
  api('GET', '/v1/threads/' + path(thread) + '/session').then((s) => {
    if (state.thread !== thread) return;
    $('pause').hidden = !writes() || s.status !== 'running';
    $('resume').hidden = !writes() || !s.resumable;
  }, (err) => {
    if (err.status !== 404 && err.status !== 401) say('Session ' + thread + ': ' + err.message, 'error');
  });
  loadRecords(thread);
  const cps = $('checkpoints');
  const lin = $('lineage');
  try {
    const [c, l] = await Promise.all([
      api('GET', '/v1/threads/' + path(thread) + '/checkpoints?limit=50'),
      api('GET', '/v1/threads/' + path(thread) + '/lineage'),
    ]);
    cps.replaceChildren();
    for (const cp of c.checkpoints.slice().reverse()) {
      const li = el('li');
      li.dataset.id = cp.id;
      const head = el('div');
      head.append(el('strong', cp.summary), el('span', '  ' + cp.time + (cp.name ? '  name ' + cp.name : '') +
        (cp.step ? '  step ' + cp.step : '') + (cp.progress ? '  ' + cp.progress : '') + '  ' + short(cp.id), 'meta'));
      if (writes()) head.append(' ', button('Pin', () => pin(thread, cp.id)));
      li.append(head);
      if (cp.learnings.length) li.append(el('div', 'Learnings', 'meta'), list(cp.learnings));
      if (cp.next_steps.length) li.append(el('div', 'Next steps', 'meta'), list(cp.next_steps));
      cps.append(li);
    }
    if (!c.checkpoints.length) cps.append(el('li', 'no checkpoints', 'hint'));
    lin.replaceChildren();
    for (const n of l.nodes) {
      let text = n.type + ' ' + short(n.id);
      if (n.parent) text += ' ← ' + short(n.parent);
      if (n.summary) text += ': ' + n.summary;
      if (n.to_thread) text += ' → ' + n.to_thread;
      if (n.reason) text += ' (' + n.reason + ')';
      lin.append(el('li', text + '  ' + n.time, 'mono'));
    }
  } catch (err) {
    say('Thread ' + thread + ': ' + err.message, 'error');
  }
}

// loadRecords shows the newest records of thread, each as the server
// verified it (its id and body digest), and the stored messages that do
// not verify, flagged with their clock and what is wrong.
async function loadRecords(thread) {
  const ol = $('records');
  const asked = ++state.recordsAsked; // an older answer arriving last is not shown
  try {
    const data = await api('GET', '/v1/threads/' + path(thread) + '/records?last=50&envelope=true');
    if (state.thread !== thread || asked !== state.recordsAsked) return;
    const rows = data.records.map((r) => ({ clock: r.clock, r }))
      .concat(data.corrupt.map((c) => ({ clock: c.clock, c })))
      .sort((a, b) => b.clock - a.clock);
    ol.replaceChildren();
    for (const { r, c } of rows) {
      const li = el('li', null, 'mono');
      if (c) {
        li.dataset.clock = c.clock;
        li.append(el('span', 'does not verify', 'badge corrupt'), ' ' + c.clock + '  ' + c.reason);
      } else {
        li.dataset.clock = r.clock;
        li.dataset.id = r.id;
        li.append(el('span', 'verified', 'badge verified'), ' ', button(r.clock + '  ' + r.act + '  ' + r.kind, () => showRecord(r), 'link'),
          el('span', '  ' + r.actor + '  ' + ago(r.time) + '  ' + short(r.id), 'meta'));
      }
      ol.append(li);
    }
    if (!rows.length) ol.append(el('li', 'no records', 'hint'));
    $('records-state').textContent = data.corrupt.length
      ? data.corrupt.length + ' of the newest ' + rows.length + ' do not verify'
      : 'the newest ' + rows.length + ', every one verified';
    $('records-state').className = data.corrupt.length ? 'corrupt' : 'meta';
  } catch (err) {
    if (err.status !== 401) say('Records of ' + thread + ': ' + err.message, 'error');
  }
}

// showRecord shows one record whole, as the API gave it after verifying
// it: its id, header fields and body as JSON, then the stored bytes (the
// canonical CBOR envelope its id is computed from) in hex.
function showRecord(r) {
  $('record').hidden = false;
  $('record-name').textContent = r.id;
  const badge = $('record-badge');
  badge.textContent = 'verified';
  badge.className = 'badge verified';
  const { envelope, ...fields } = r;
  let hex = '';
  if (envelope) {
    const bin = atob(envelope);
    for (let i = 0; i < bin.length; i++) hex += bin.charCodeAt(i).toString(16).padStart(2, '0');
  }
  $('record-raw').textContent = JSON.stringify(fields, null, 2) + (hex ? '\n\nCBOR envelope (' + (hex.length / 2) + ' bytes):\n' + hex : '');
}

// follow streams the thread's new records (Server-Sent Events; the
// browser sends the cookie with them).
function follow() {
  const thread = state.thread;
  if (!thread) return;
  if (state.source) { stopFollow(); return; }
  const src = new EventSource('/v1/threads/' + path(thread) + '/events');
  state.source = src;
  $('follow').textContent = 'Stop following';
  $('follow-state').textContent = 'connecting';
  src.onopen = () => { $('follow-state').textContent = 'following'; };
  src.onerror = () => {
    $('follow-state').textContent = src.readyState === EventSource.CLOSED ? 'stopped (log in again?)' : 'reconnecting';
  };
  src.addEventListener('record', (ev) => {
    let r;
    try { r = JSON.parse(ev.data); } catch (e) { return; }
    const li = el('li', r.clock + '  ' + r.act + '  ' + r.kind + '  ' + r.actor + '  ' + JSON.stringify(r.body), 'mono');
    li.dataset.clock = r.clock;
    $('live').prepend(li);
    if (r.kind === 'agent.session.checkpoint' || r.kind === 'core.erasure') openThread(thread); // the checkpoints, the records, the status
    else loadRecords(thread);
  });
  src.addEventListener('corrupt', (ev) => {
    $('live').prepend(el('li', 'a stored record that does not verify: ' + ev.data, 'mono status-failed'));
  });
}

function stopFollow() {
  if (state.source) state.source.close();
  state.source = null;
  $('follow').textContent = 'Follow live';
  $('follow-state').textContent = '';
}

// --- runs ---

async function loadRuns() {
  try {
    const data = await api('GET', '/v1/runs');
    const body = $('runs').tBodies[0];
    body.replaceChildren();
    for (const r of data.runs) {
      const tr = document.createElement('tr');
      tr.dataset.run = r.run_id;
      const name = el('td');
      name.append(button(r.run_id, () => openRun(r.thread, r.run_id), 'link'));
      tr.append(name, el('td', r.thread), el('td', r.status, 'status-' + r.status), el('td', r.phase), el('td', r.updated));
      body.append(tr);
    }
    if (!data.runs.length) body.append(emptyRow(5, 'no runs'));
  } catch (err) {
    if (err.status !== 401) say('Runs: ' + err.message, 'error');
  }
}

const plural = (n, word) => n + ' ' + word + (n === 1 ? '' : 's');

function fact(dl, name, value) {
  dl.append(el('dt', name), el('dd', value));
}

async function openRun(thread, run) {
  try {
    const d = await api('GET', '/v1/runs/' + encodeURIComponent(run) + '?thread=' + encodeURIComponent(thread));
    $('run').hidden = false;
    $('run-name').textContent = run + ' on ' + thread;
    const dl = $('run-facts');
    dl.replaceChildren();
    fact(dl, 'status', d.status);
    fact(dl, 'phase', d.phase);
    fact(dl, 'updated', d.updated);
    fact(dl, 'effects', d.effects.length + ' recorded for ' + plural(d.effect_calls, 'call') + ', ' + d.replayed_effect_count + ' replayed');
    if (d.snapshot) {
      fact(dl, 'step', d.snapshot.step);
      fact(dl, 'calls', d.snapshot.llm_calls + ' LLM, ' + d.snapshot.tool_calls + ' tool');
      fact(dl, 'cost', '$' + d.snapshot.total_cost_usd);
    }
    if (d.waiting_for) fact(dl, 'waits for', d.waiting_for);
    if (d.problem) fact(dl, 'problem', d.problem);
    showRunActions(thread, run, d);
    $('phases').replaceChildren(...d.phases.map((p) => el('li', p.phase + '  ' + p.time + '  ' + short(p.id), 'mono')));
    $('effects').replaceChildren(...d.effects.map((e) => el('li', e.call_id + '  ' + e.tool + '  ' + e.time, 'mono')));
    $('run-result').textContent = d.terminal_result === null ? '(none yet)' : JSON.stringify(d.terminal_result, null, 2);
  } catch (err) {
    say('Run ' + run + ': ' + err.message, 'error');
  }
}

// showRunActions offers what the login's right may do to the run, and
// what the server says the run allows: the signal it waits for
// (waiting_for), a cancel (cancellable).
function showRunActions(thread, run, d) {
  const writes = state.right === 'write' || state.right === 'admin';
  const waiting = !!d.waiting_for;
  $('run-actions').hidden = !writes || !(waiting || d.cancellable);
  $('run-signal').hidden = !waiting;
  $('run-cancel').hidden = !d.cancellable;
  $('run-signal-name').textContent = d.waiting_for || '';
  $('run-signal-send').onclick = () => signalRun(thread, run, d.waiting_for);
  $('run-cancel-send').onclick = () => cancelRun(thread, run);
}

async function signalRun(thread, run, name) {
  let data;
  try {
    data = JSON.parse($('run-signal-data').value);
  } catch (e) {
    say('The data is not JSON: ' + e.message, 'error');
    return;
  }
  try {
    await api('POST', '/v1/runs/' + encodeURIComponent(run) + '/signal', { thread, name, data, actor: actor() });
    say('Sent ' + name + ' to ' + run, 'ok');
  } catch (err) {
    say('Signal ' + run + ': ' + err.message, 'error');
  }
  await openRun(thread, run);
  await loadRuns();
}

async function cancelRun(thread, run) {
  try {
    await api('POST', '/v1/runs/' + encodeURIComponent(run) + '/cancel', { thread, reason: $('run-cancel-reason').value.trim(), actor: actor() });
    say('Cancelled ' + run, 'ok');
  } catch (err) {
    say('Cancel ' + run + ': ' + err.message, 'error');
  }
  await openRun(thread, run);
  await loadRuns();
}

// --- start ---

document.addEventListener('DOMContentLoaded', async () => {
  $('login-form').addEventListener('submit', logIn);
  $('logout').addEventListener('click', logOut);
  $('threads-filter').addEventListener('submit', loadThreads);
  $('threads-reload').addEventListener('click', () => loadThreads());
  $('sessions-reload').addEventListener('click', loadSessions);
  $('resumable').addEventListener('change', loadSessions);
  $('runs-reload').addEventListener('click', loadRuns);
  $('follow').addEventListener('click', follow);
  try {
    showApp(await api('GET', '/v1/login'));
  } catch (err) {
    showLogin(err.status === 401 ? '' : 'The server did not answer: ' + err.message);
  }
});
