// @ts-nocheck — browser code: compiled by tsc like the rest and inlined into the page as
// `(${dashboardClient})()`, so the dashboard needs no build toolchain. Plain DOM, uPlot for the charts.
// Every request goes to the page's own base path (route-prefix aware) with the page's `?code=` key, if any.
// Inlined beside it and handed in: `partitionClient` (partitionClient.ts) renders the Partitions card's count and
// changes, `partitionTableClient` (partitionTable.ts) its row per partition, `chartsClient` (charts.ts) the charts.
export function dashboardClient(partitionClient, partitionTableClient, chartsClient): void {
  const $ = (sel) => document.querySelector(sel);
  const el = (tag, attrs, ...kids) => {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'onclick') n.addEventListener('click', v);
      else if (v !== null && v !== undefined) n.setAttribute(k, String(v));
    }
    for (const k of kids.flat()) n.append(k instanceof Node ? k : document.createTextNode(k === null || k === undefined ? '' : String(k)));
    return n;
  };
  // replaceChildren would show a null child as the text "null": optional parts are left out instead.
  const fill = (sel, ...kids) => $(sel).replaceChildren(...kids.filter((k) => k !== null && k !== undefined));
  const params = new URLSearchParams(location.search);
  const code = params.get('code');
  const base = location.pathname.replace(/dashboard\/?$/, '');
  const withCode = (path) => base + path + (code ? (path.includes('?') ? '&' : '?') + 'code=' + encodeURIComponent(code) : '');
  async function api(method, path, body) {
    const res = await fetch(withCode(path), {
      method, credentials: 'same-origin',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = { raw: text.slice(0, 200) }; }
    return { status: res.status, ok: res.ok, json };
  }
  const ago = (ms) => (ms < 1000 ? ms + ' ms' : ms < 120000 ? (ms / 1000).toFixed(1) + ' s' : Math.round(ms / 60000) + ' min');
  const when = (iso) => (iso ? new Date(iso).toISOString().replace('T', ' ').replace('Z', '') : '—');

  // Confirmation step for every action; the result is shown in #result.
  function confirmAction(title, detail, withInput) {
    const d = $('#confirm');
    $('#confirm-title').textContent = title;
    $('#confirm-detail').textContent = detail;
    const input = $('#confirm-input');
    input.hidden = !withInput;
    input.value = '';
    if (withInput) { input.type = withInput.type; input.placeholder = withInput.placeholder || ''; }
    d.showModal();
    return new Promise((resolve) => {
      d.addEventListener('close', () => resolve(d.returnValue === 'ok' ? { input: input.value } : null), { once: true });
    });
  }
  function showResult(what, r) {
    const box = $('#result');
    box.className = r.ok ? 'result ok' : 'result err';
    box.textContent = what + ': HTTP ' + r.status + ' — ' + summary(r.json);
    box.hidden = false;
  }
  function summary(j) {
    if (!j) return '';
    // The cluster's pause (no ?partition=): its flag, over every partition of the recorded layout.
    if (j.scope === 'cluster' && typeof j.paused === 'boolean') return 'cluster ' + (j.paused ? 'paused' : j.running ? 'running' : 'not paused, partitions ' + j.stillHeld.join(', ') + ' paused on their own') + ' (' + j.partitionCount + ' partition' + (j.partitionCount === 1 ? '' : 's') + ')';
    // Several partitions at once (a drain with no ?partition=, more than one recorded): every partition's request in `partitions`.
    if (Array.isArray(j.partitions)) return j.partitions.length + ' partitions: ' + summary(j.partitions[0]);
    if (j.detail) return j.detail;
    if (j.change) return (j.created ? 'change recorded: ' : 'already in progress: ') + j.change.fromCount + ' → ' + j.change.toCount + ' (' + j.change.state + ')';
    if (j.unchanged) return 'unchanged: the count already is ' + j.count;
    if (typeof j.redriven === 'number') return j.redriven + ' redriven' + (j.notRedriven && j.notRedriven.length ? ', ' + j.notRedriven.length + ' not failed' : '') + (j.more ? ' (more remain)' : '');
    if (typeof j.paused === 'boolean') return j.paused ? 'paused' : 'running';
    if (j.status) return 'status ' + j.status;
    if (j.released !== undefined) return 'released epoch ' + j.leaseEpoch;
    return JSON.stringify(j).slice(0, 200);
  }
  async function act(title, detail, method, path, body, input) {
    const c = await confirmAction(title, detail, input);
    if (!c) return;
    const r = await api(method, path, typeof body === 'function' ? body(c.input) : body);
    showResult(title, r);
    await route();
  }

  const renderPartitionLayout = partitionClient({ $, el, when, ago, act });
  const renderPartitionTable = partitionTableClient({ $, el, when, ago, act });
  const drawCharts = chartsClient({ $ });

  // Overview.
  let fetchedAt = 0;
  let leader = null;
  const expiry = (ms) => (ms > 0 ? 'expires in ' + (ms / 1000).toFixed(1) + ' s' : 'expired ' + ago(-ms) + ' ago');
  function tickCountdown() {
    const since = Date.now() - fetchedAt;
    for (const c of document.querySelectorAll('#partitions-table td.expires[data-ms]')) {
      const left = Number(c.dataset.ms) - since;
      c.textContent = left > 0 ? 'in ' + (left / 1000).toFixed(1) + ' s' : 'expired ' + (left > -120000 ? Math.round(-left / 1000) + ' s' : ago(-left)) + ' ago';
      c.className = 'expires ' + (left > 0 ? 'ok' : 'err');
    }
    const c = $('#countdown');
    if (!c || !leader) return;
    const left = leader.expiresInMs - since;
    c.textContent = expiry(left);
    c.className = left > 0 ? 'ok' : 'err';
  }
  setInterval(tickCountdown, 250);

  // What leaders recorded in SQL: the provider breaker (partition 0's leader) and maintenance failures (partition 0's
  // records; with several partitions, every partition's failing task, else partition 0's records).
  const failing = (m) => m.task + ' FAILING (' + m.failures + ' in a row, last ' + when(m.changedAt) + ' on ' + m.holderId + '): ' + m.lastError;
  const leaderRecords = (o) => {
    const parts = (o.partitions || []).filter((p) => p.failingMaintenance);
    return [
      el('div', { class: 'muted', id: 'provider-breaker' }, o.providerBreaker
        ? 'provider breaker ' + o.providerBreaker.state.replace('_', '-') + ' since ' + when(o.providerBreaker.changedAt) + ' (' + o.providerBreaker.holderId + ')'
        : 'provider breaker closed (never opened)'),
      parts.length
        ? el('div', { class: 'err', id: 'maintenance' }, parts.map((p) => 'partition ' + p.partition + ': ' + failing(p.failingMaintenance)).join(' · '))
        : el('div', { class: o.maintenance.some((m) => m.failures) ? 'err' : 'muted', id: 'maintenance' }, o.maintenance.map((m) => m.failures
          ? failing(m) : m.task + ' ok again since ' + when(m.changedAt) + ' (' + m.holderId + ')').join(' · ')
          || 'retention: no failure recorded')];
  };

  function renderOverview(o) {
    fetchedAt = Date.now();
    if (o.partitions) return renderPartitioned(o);
    leader = o.leader;
    $('#leader').replaceChildren(o.leader
      ? el('div', {}, el('div', { class: 'big', id: 'leader-holder' }, o.leader.holderId),
        el('div', {}, 'epoch ', el('b', { id: 'leader-epoch' }, o.leader.leaseEpoch), ' · ', el('span', { id: 'countdown' })),
        el('div', { class: 'muted' }, 'last renew ', when(o.leader.renewedAt), ' · acquired ', when(o.leader.acquiredAt)))
      : el('div', { class: 'big err', id: 'leader-holder' }, 'no leader yet'));
    // One partition: the cluster's flag or partition 0's own (a pause recorded by an earlier release) holds it; Resume clears both.
    const ex = o.execution;
    const own = !ex.paused && ex.partitionPaused;
    fill('#execution',
      el('div', { class: 'big ' + (ex.paused || ex.partitionPaused ? 'err' : 'ok'), id: 'paused-flag' }, ex.paused ? 'PAUSED' : own ? 'PAUSED (partition 0)' : 'running'),
      el('div', { class: 'muted' }, own ? 'since ' + when(ex.partitionPausedAt) + ' by ' + ex.partitionPausedBy + (ex.partitionPauseReason ? ' — ' + ex.partitionPauseReason : '')
        : ex.changedAt ? 'since ' + when(ex.changedAt) + ' by ' + ex.changedBy + (ex.reason ? ' — ' + ex.reason : '') : 'never paused'),
      beyondLayout(ex),
      ...leaderRecords(o),
      el('div', { class: 'muted', id: 'handovers' }, (() => {
        const pending = o.handovers.filter((h) => h.status === 'pending');
        const last = o.handovers.find((h) => h.status === 'completed');
        return (pending.length ? pending.length + ' pending handover (asked ' + when(pending[0].requestedAt) + ' by ' + pending[0].requestedBy + ')' : 'no pending handover')
          + (last ? ' · last completed ' + when(last.completedAt) + ' by ' + last.completedBy : '');
      })()),
      el('div', { class: 'buttons' },
        ex.paused || ex.partitionPaused || ex.pausedBeyondLayout.length
          ? el('button', { id: 'btn-resume', onclick: () => act('Resume execution', 'Leaders start attempts again (every pause flag is cleared).', 'POST', 'ops/execution/resume?partition=all') }, 'Resume')
          : null,
        ex.paused ? null
          : el('button', { id: 'btn-pause', onclick: () => act('Pause execution', 'Every leader stops starting attempts (in-flight ones finish). Reason (optional):', 'POST', 'ops/execution/pause', (r) => (r ? { reason: r } : undefined), { type: 'text', placeholder: 'reason' }) }, 'Pause'),
        el('button', { id: 'btn-drain', onclick: () => act('Drain the leader', 'The leader finishes in-flight attempts and releases the lease; a follower takes over.', 'POST', 'ops/lease/release') }, 'Drain leader')));
    renderCommon(o);
  }

  // Pause rows of partitions a shrink removed: they hold nothing until a grow brings the partition back (Resume clears them).
  function beyondLayout(ex) {
    return ex.pausedBeyondLayout.length ? el('div', { class: 'muted err', id: 'paused-beyond' }, 'paused beyond the recorded count: partition '
      + ex.pausedBeyondLayout.join(', ') + ' (held again if a count change brings it back)') : null;
  }

  // More than one partition recorded: the Leader card sums the partitions' leaders, the Execution card acts on the
  // cluster (no ?partition=), the Partitions card has a row per partition with its own drain / pause / resume.
  function renderPartitioned(o) {
    leader = null;
    const ps = o.partitions;
    const held = ps.filter((p) => p.held);
    const holders = new Map();
    for (const p of held) holders.set(p.holderId, (holders.get(p.holderId) || []).concat(p.partition));
    $('#leader-title').textContent = 'Leaders';
    $('#leader').replaceChildren(
      el('div', { class: 'big ' + (held.length === ps.length ? 'ok' : 'err'), id: 'leader-summary' }, held.length + ' of ' + ps.length + ' partitions led'),
      el('div', { class: 'muted' }, held.length ? 'by ' + holders.size + ' instance' + (holders.size === 1 ? '' : 's') : 'no leader yet'),
      ...[...holders].map(([h, list]) => el('div', { class: 'holder-parts' }, el('b', {}, h), ': ' + list.join(', '))));
    // The cluster's pause holds every partition (Pause all / Resume all); a partition's own pause is independent.
    const ex = o.execution;
    const paused = ps.filter((p) => p.paused);
    const drains = ps.filter((p) => p.pendingDrain);
    fill('#execution',
      el('div', { class: 'big ' + (ex.paused || paused.length ? 'err' : 'ok'), id: 'paused-flag' },
        ex.paused ? 'PAUSED' : paused.length === 0 ? 'running' : 'PAUSED ' + paused.length + ' of ' + ps.length),
      ex.paused ? el('div', { class: 'muted', id: 'cluster-pause' }, 'cluster paused since ' + when(ex.changedAt) + ' by ' + ex.changedBy + (ex.reason ? ' — ' + ex.reason : '')) : null,
      el('div', { class: 'muted' }, paused.length ? 'partition pauses: ' + paused.map((p) => p.partition + (p.pauseReason ? ' (' + p.pauseReason + ')' : '')).join(', ') : 'no partition paused on its own'),
      beyondLayout(ex),
      ...leaderRecords(o),
      el('div', { class: 'muted', id: 'handovers' }, drains.length ? drains.length + ' pending drain' + (drains.length === 1 ? '' : 's') + ' (partition ' + drains.map((p) => p.partition).join(', ') + ')' : 'no pending drain'),
      el('div', { class: 'buttons' },
        ex.paused || paused.length || ex.pausedBeyondLayout.length
          ? el('button', { id: 'btn-resume', onclick: () => act('Resume everything', 'Every partition\'s leader starts attempts again: the cluster\'s pause and every partition\'s own are cleared.', 'POST', 'ops/execution/resume?partition=all') }, 'Resume all')
          : null,
        ex.paused ? null
          : el('button', { id: 'btn-pause', onclick: () => act('Pause the cluster', 'Every partition\'s leader, whatever the count becomes, stops sending (calls already sent finish). Reason (optional):', 'POST', 'ops/execution/pause', (r) => (r ? { reason: r } : undefined), { type: 'text', placeholder: 'reason' }) }, 'Pause all'),
        el('button', { id: 'btn-drain', onclick: () => act('Drain every leader', 'Each partition\'s leader finishes its in-flight attempts and releases its lease; any instance may take it over.', 'POST', 'ops/lease/release') }, 'Drain all')));
    renderPartitionTable(o);
    renderCommon(o);
  }

  // The parts of the overview that are the same whatever the partition count.
  function renderCommon(o) {
    tickCountdown();
    const s = o.intentsByStatus;
    $('#counts').replaceChildren(...['scheduled', 'in_flight', 'succeeded', 'failed', 'cancelled'].map((k) =>
      el('div', { class: 'count ' + k }, el('div', { class: 'n', id: 'count-' + k }, ((o.intentsCapped || []).includes(k) ? '≥ ' : '') + s[k]), el('div', {}, k.replace('_', ' ')))),
    el('div', { class: 'count' }, el('div', { class: 'n', id: 'due-now' }, o.dueNow), el('div', {}, 'due now')),
    el('div', { class: 'count' }, el('div', { class: 'n', id: 'oldest-due' }, o.dueNow ? ago(o.oldestDueAgeMs) : '—'), el('div', {}, 'oldest due')),
    el('div', { class: 'count' }, el('div', { class: 'n small' }, o.lastAttemptAt ? when(o.lastAttemptAt) : '—'), el('div', {}, 'last attempt')));
    drawCharts(o);
    $('#failures').replaceChildren(el('table', { id: 'failures-table' },
      el('tr', {}, el('th', {}, 'intent'), el('th', {}, 'failed at'), el('th', {}, 'attempts'), el('th', {}, 'last error'), el('th', {}, '')),
      ...o.failures.map((f) => el('tr', {}, el('td', {}, el('a', { href: '#/intent/' + f.intentId }, f.intentId)), el('td', {}, when(f.failedAt)),
        el('td', {}, f.attemptCount), el('td', { class: 'error' }, f.lastError),
        el('td', {}, el('button', { class: 'redrive-one', onclick: () => act('Redrive ' + f.intentId, 'Back to scheduled with a fresh attempt budget.', 'POST', 'ops/intents/redrive', { ids: [f.intentId] }) }, 'Redrive'))))));
    $('#btn-redrive-filter').onclick = () => act('Redrive failed intents', 'All failed intents whose last error contains (empty = any), at most 100 per call:', 'POST', 'ops/intents/redrive',
      (t) => ({ filter: t ? { errorContains: t } : {}, limit: 100 }), { type: 'text', placeholder: 'last error contains…' });
    $('#timeline').replaceChildren(el('table', {}, el('tr', {}, el('th', {}, 'at'), el('th', {}, 'event'), el('th', {}, 'epoch'), el('th', {}, 'holder')),
      ...o.timeline.map((e) => el('tr', {}, el('td', {}, when(e.at)), el('td', {}, e.event), el('td', {}, e.leaseEpoch), el('td', {}, e.holderId)))));
    $('#redrives').replaceChildren(el('table', {}, el('tr', {}, el('th', {}, 'at'), el('th', {}, 'by'), el('th', {}, 'redriven'), el('th', {}, 'reason')),
      ...o.redrives.map((r) => el('tr', {}, el('td', {}, when(r.requestedAt)), el('td', {}, r.requestedBy), el('td', {}, r.redriven), el('td', {}, r.reason)))));
    $('#served').textContent = 'database time ' + when(o.dbNow) + ' · served by ' + o.servedBy + ' (' + o.version + ') · cluster ' + o.leaseName;
  }

  // Instances: their heartbeat rows (GET instances); live = seen within INSTANCE_LIVE_WINDOW_MS (database time).
  function renderInstances(r) {
    const box = $('#instances');
    if (!r.ok) { box.replaceChildren(el('div', { class: 'err' }, 'instances: ' + summary(r.json))); return; }
    const list = r.json.instances;
    const live = list.filter((i) => i.live);
    $('#instances-summary').textContent = live.length + ' live' + (list.length > live.length ? ', ' + (list.length - live.length) + ' gone' : '')
      + ' · live = a heartbeat within ' + ago(r.json.liveWindowMs);
    box.replaceChildren(list.length === 0
      ? el('div', { class: 'muted' }, 'no instance has written a heartbeat yet')
      : el('table', { id: 'instances-table' },
        el('tr', {}, ...['holder', 'version', 'roles', 'last seen', 'partitions led', 'started'].map((h) => el('th', {}, h))),
        ...list.map((i) => el('tr', { class: i.live ? 'live' : 'gone', 'data-holder': i.holderId },
          el('td', {}, i.holderId), el('td', {}, i.version), el('td', {}, i.roles.join(', ') || '—'),
          el('td', { class: i.live ? 'ok' : 'err' }, ago(i.lastSeenAgeMs) + ' ago' + (i.live ? '' : ' (gone)')),
          el('td', {}, i.partitions.length ? i.partitions.join(', ') : '—'), el('td', {}, when(i.startedAt))))));
  }

  async function runSearch(ev) {
    if (ev) ev.preventDefault();
    const f = new FormData($('#search'));
    const q = new URLSearchParams({ data: 'search' });
    for (const k of ['intentId', 'key', 'status']) if (f.get(k)) q.set(k, String(f.get(k)).trim());
    for (const k of ['from', 'to']) if (f.get(k)) q.set(k, new Date(String(f.get(k)) + 'Z').toISOString());
    const r = await api('GET', 'dashboard?' + q.toString());
    const out = $('#search-results');
    if (!r.ok) { out.replaceChildren(el('div', { class: 'err' }, summary(r.json))); return; }
    out.replaceChildren(el('table', { id: 'search-table' }, el('tr', {}, el('th', {}, 'intent'), el('th', {}, 'key'), el('th', {}, 'status'), el('th', {}, 'created'), el('th', {}, 'attempts')),
      ...r.json.items.map((i) => el('tr', {}, el('td', {}, el('a', { href: '#/intent/' + i.intentId }, i.intentId)), el('td', {}, i.idempotencyKey),
        el('td', { class: 'status ' + i.status }, i.status), el('td', {}, when(i.createdAt)), el('td', {}, i.attemptCount + '/' + i.maxAttempts)))),
    el('div', { class: 'muted' }, r.json.items.length + ' shown' + (r.json.nextBefore ? ' (more: narrow the search)' : '')));
  }

  async function renderIntent(id, withPayload) {
    const r = await api('GET', 'dashboard?data=intent&id=' + encodeURIComponent(id) + (withPayload ? '&payload=1' : ''));
    const page = $('#intent-page');
    if (!r.ok) { page.replaceChildren(el('div', { class: 'err' }, 'HTTP ' + r.status + ': ' + summary(r.json))); return; }
    const { intent: i, contract: c, attempts, redrives } = r.json;
    const actions = [];
    if (i.status === 'scheduled' || i.status === 'in_flight') actions.push(el('button', { id: 'btn-cancel', onclick: () => act('Cancel ' + i.intentId, 'The intent becomes cancelled (an in-flight call still finishes).', 'POST', 'intents/' + i.intentId + '/cancel') }, 'Cancel'));
    if (i.status === 'scheduled') actions.push(el('button', { id: 'btn-reschedule', onclick: () => act('Reschedule ' + i.intentId, 'Next attempt not before (UTC):', 'POST', 'intents/' + i.intentId + '/reschedule', (t) => ({ notBefore: new Date(t + 'Z').toISOString() }), { type: 'datetime-local' }) }, 'Reschedule'));
    if (i.status === 'failed') actions.push(el('button', { id: 'btn-redrive', onclick: () => act('Redrive ' + i.intentId, 'Back to scheduled with a fresh attempt budget; attempt numbers continue.', 'POST', 'ops/intents/redrive', { ids: [i.intentId] }) }, 'Redrive'));
    page.replaceChildren(
      el('h2', {}, 'Intent ', el('code', { id: 'intent-id' }, i.intentId)),
      el('div', { class: 'cards' },
        el('div', { class: 'card' }, el('div', { class: 'big status ' + i.status, id: 'intent-status' }, i.status),
          el('div', {}, 'attempts ', el('b', { id: 'intent-attempts' }, i.attemptCount), ' of ', i.maxAttempts), el('div', {}, 'key: ', i.idempotencyKey || '—'),
          el('div', {}, 'created ', when(i.createdAt)), el('div', {}, 'next attempt ', when(i.nextAttemptAt)), el('div', {}, 'modified ', when(i.lastModifiedAt)),
          el('div', { class: 'error' }, i.lastError || ''), el('div', { class: 'buttons' }, ...actions)),
        el('div', { class: 'card' }, el('h3', {}, 'Contract'), el('div', {}, 'retry: ', JSON.stringify(c.retry)),
          el('div', {}, 'provider: ', c.providerHost === null ? 'default (PROVIDER_URL)' : c.providerHost),
          c.payload === null
            ? el('div', { id: 'payload' }, 'payload: ' + c.payloadBytes + ' bytes (redacted) ', el('button', { id: 'btn-payload', onclick: () => renderIntent(id, true) }, 'Show payload'))
            : el('pre', { id: 'payload' }, JSON.stringify(c.payload, null, 2)))),
      el('h3', {}, 'Attempt log'),
      el('table', { id: 'attempts-table' }, el('tr', {}, ...['#', 'epoch', 'holder', 'started', 'finished', 'outcome', 'HTTP', 'ms', 'error'].map((h) => el('th', {}, h))),
        ...attempts.map((a) => el('tr', {}, el('td', {}, a.attemptNo), el('td', {}, a.leaseEpoch), el('td', {}, a.holderId), el('td', {}, when(a.startedAt)),
          el('td', {}, when(a.finishedAt)), el('td', { class: 'status ' + a.outcome }, a.outcome), el('td', {}, a.httpStatus), el('td', {}, a.durationMs), el('td', { class: 'error' }, a.error)))),
      el('h3', {}, 'Redrives'),
      redrives.length ? el('ul', {}, ...redrives.map((x) => el('li', {}, when(x.requestedAt) + ' by ' + x.requestedBy + ' after ' + x.attemptsBefore + ' attempts' + (x.reason ? ' — ' + x.reason : '')))) : el('div', { class: 'muted' }, 'never redriven'));
  }

  let timer = null;
  async function route() {
    clearTimeout(timer);
    const m = /^#\/intent\/([0-9a-fA-F-]{36})$/.exec(location.hash);
    $('#overview-page').hidden = !!m;
    $('#intent-page').hidden = !m;
    if (m) return renderIntent(m[1], false);
    const r = await api('GET', 'dashboard?data=overview');
    if (r.ok) renderOverview(r.json);
    else showResult('Overview', r);
    renderPartitionLayout(await api('GET', 'ops/partitions'));
    renderInstances(await api('GET', 'instances'));
    document.body.dataset.loaded = 'true';
    timer = setTimeout(route, 5000);
  }
  $('#search').addEventListener('submit', runSearch);
  window.addEventListener('hashchange', route);
  route();
}
