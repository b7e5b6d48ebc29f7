// @ts-nocheck — browser code, inlined into the page beside client.ts and handed to it (page.ts): the Partitions
// card's row per partition (holder, epoch, expiry counted down by client.ts, backlog, last attempt, pause and drain
// state) with its own drain / pause / resume, and the card's summary line. `h` is the page's helpers: $, el, when, ago, act.
export function partitionTableClient(h) {
  const { $, el, when, ago, act } = h;
  return function renderPartitionTable(o) {
    const ps = o.partitions;
    const ex = o.execution;
    const held = ps.filter((p) => p.held);
    const paused = ps.filter((p) => p.paused);
    const drains = ps.filter((p) => p.pendingDrain);
    $('#partitions-card').hidden = false;
    $('#timeline-title').textContent = 'Leadership timeline (partition 0)';
    const due = ps.reduce((n, p) => n + p.backlog.due, 0);
    $('#partitions-summary').textContent = held.length + ' of ' + ps.length + ' led · ' + ps.reduce((n, p) => n + p.backlog.scheduled, 0) + ' scheduled, ' + due + ' due'
      + (ex.paused ? ' · cluster paused' : paused.length ? ' · ' + paused.length + ' paused' : '') + (drains.length ? ' · ' + drains.length + ' draining' : '');
    $('#partitions').replaceChildren(el('table', { id: 'partitions-table' },
      el('tr', {}, ...['partition', 'holder', 'epoch', 'expires in', ['backlog', el('div', { class: 'muted' }, 'scheduled / due')], 'last attempt', 'state', ''].map((t) => el('th', {}, t))),
      ...ps.map((p) => el('tr', { 'data-partition': p.partition, class: p.held ? 'held' : 'unheld' },
        el('td', {}, el('b', {}, p.partition)),
        el('td', { class: 'holder ' + (p.held ? '' : 'err') }, p.held ? p.holderId : 'none', p.held || !p.lastHolderId ? null : el('div', { class: 'muted' }, 'last: ' + p.lastHolderId)),
        el('td', { class: 'epoch' }, p.leaseEpoch || '—'),
        p.expiresInMs === null ? el('td', { class: 'expires muted' }, '—') : el('td', { class: 'expires', 'data-ms': p.expiresInMs }),
        el('td', { class: 'backlog', title: 'scheduled / due now' }, p.backlog.scheduled + ' / ', el('span', { class: p.backlog.due ? 'due' : '' }, p.backlog.due)),
        el('td', { class: 'last', title: p.lastAttemptAt || '' }, p.lastAttemptAgeMs === null ? '—' : ago(p.lastAttemptAgeMs) + ' ago'),
        // The pause flag (its reason below), and a pending drain, which the partition's leader completes at its next refresh.
        el('td', { class: 'state ' + (p.heldBy ? 'err' : 'ok'), title: p.paused ? 'paused since ' + when(p.pausedAt) + ' by ' + p.pausedBy + (p.pauseReason ? ': ' + p.pauseReason : '') : p.heldBy ? 'the cluster is paused' : '' },
          p.paused ? 'PAUSED' : p.heldBy ? 'PAUSED (cluster)' : 'running', p.paused && p.pauseReason ? el('div', { class: 'muted reason' }, p.pauseReason) : null,
          p.pendingDrain ? el('div', { class: 'drain err', title: 'asked at ' + when(p.pendingDrain.requestedAt) + ' by ' + p.pendingDrain.requestedBy },
            'drain pending') : null,
          p.failingMaintenance ? el('div', { class: 'maint err', title: p.failingMaintenance.lastError || '' },
            p.failingMaintenance.task + ' failing (' + p.failingMaintenance.failures + ')') : null),
        el('td', { class: 'actions' },
          el('button', { class: 'small', id: 'btn-drain-p' + p.partition, onclick: () => act('Drain partition ' + p.partition, 'Its leader finishes its in-flight attempts and releases the lease; any instance may take it over.', 'POST', 'ops/lease/release?partition=' + p.partition) }, 'Drain'),
          p.paused
            ? el('button', { class: 'small', id: 'btn-resume-p' + p.partition, onclick: () => act('Resume partition ' + p.partition, 'Its leader starts attempts again.', 'POST', 'ops/execution/resume?partition=' + p.partition) }, 'Resume')
            : el('button', { class: 'small', id: 'btn-pause-p' + p.partition, onclick: () => act('Pause partition ' + p.partition, 'Its leader stops starting attempts (in-flight ones finish); other partitions go on. Reason (optional):', 'POST', 'ops/execution/pause?partition=' + p.partition, (r) => (r ? { reason: r } : undefined), { type: 'text', placeholder: 'reason' }) }, 'Pause'))))));
  };
}
