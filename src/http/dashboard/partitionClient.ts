// @ts-nocheck — browser code, inlined into the page beside client.ts and handed to it (page.ts): the Partitions card's
// count and change part (issue 26), from GET ops/partitions. `h` is the page's helpers: $, el, when, ago, act.
// The newest change is shown step by step: requested → finished intents moved (execution goes on) → leases taken k/M → reassigning (rows moved; scan, then
// catch-up) → completed, each with its database time; older ones in a table; a form asks for a new count.
export function partitionClient(h) {
  const { $, el, when, ago, act } = h;
  const span = (from, to) => (from && to ? ' (' + ago(Math.max(0, Date.parse(to) - Date.parse(from))) + ')' : '');

  function steps(c, leases) {
    const m = Math.max(c.fromCount, c.toCount);
    const taken = c.state === 'pending' ? leases.filter((l) => l.heldByChanger).length : c.state === 'preparing' ? 0 : m;
    const phase = { preparing: 1, pending: 2, reassigning: 3, completed: 5, cancelled: 0 }[c.state];
    const scan = c.scanDoneAt ? 'scan done ' + when(c.scanDoneAt) + ', catch-up' + (c.completedAt ? ' done' : ' (rows modified since the switch)')
      : c.scanCursor ? 'scan after ' + c.scanCursor : 'scan not started';
    const list = [
      ['requested', 'requested ' + c.fromCount + ' → ' + c.toCount + ' by ' + c.requestedBy, c.requestedAt],
      ['preparing', 'finished intents moved' + (c.preparedAt ? '' : c.prepareCursor ? ' up to ' + c.prepareCursor : ' (not started)') + ' · execution goes on', c.preparedAt],
      ['leases', 'leases taken ' + taken + '/' + m + (c.changer ? ' by ' + c.changer : ' (partition leaders drain and release)'), c.claimedAt],
      ['reassigning', 'reassigning: ' + c.rowsMoved + ' rows moved · ' + (phase >= 3 ? scan : 'not yet'), c.switchedAt],
      c.state === 'cancelled' ? ['cancelled', 'cancelled by ' + c.cancelledBy + ' before its switch: the count stayed ' + c.fromCount, c.cancelledAt]
        : ['completed', c.completedAt ? 'completed' + span(c.requestedAt, c.completedAt) : 'completed', c.completedAt],
    ];
    return el('ol', { id: 'partition-change-steps', 'data-change': c.changeId, 'data-state': c.state },
      ...list.map(([key, text, at], i) => el('li', { 'data-step': key, class: i < phase ? 'done' : i === phase ? 'current' : 'todo' },
        text, el('span', { class: 'muted' }, at ? ' · ' + when(at) : ''))));
  }

  // A change whose changer's steps keep failing: why, and the way out (cancel before the switch; after it, remove the cause).
  function stuck(c) {
    const before = c.state === 'preparing' || c.state === 'pending';
    const failing = c.failedSteps > 0 ? el('div', { class: c.stuck ? 'err' : 'muted', id: 'partition-change-failing', 'data-stuck': c.stuck ? '1' : '0' },
      (c.stuck ? 'STUCK: ' : '') + c.failedSteps + ' step(s) in a row failed · last ' + when(c.lastFailedAt) + ' · ' + (c.lastStepError || '') +
      (before ? ' · cancel it, or remove the cause' : ' · switched: it rolls forward once the cause is removed') + ' (runbook: "A count change that does not progress")') : null;
    const cancel = before ? el('button', { id: 'btn-partition-cancel', onclick: () => act('Cancel the partition change',
      c.fromCount + ' → ' + c.toCount + ' (' + c.state + '): the count stays ' + c.fromCount + ', the changer lets its leases go and the leaders resume. Reason (optional):',
      'POST', 'ops/partitions/' + c.changeId + '/cancel', (r) => (r ? { reason: r } : undefined), { type: 'text', placeholder: 'reason' }) }, 'Cancel change') : null;
    const back = c.cancelledAt ? el('div', { class: 'muted', id: 'partition-change-moving-back' }, 'cancelled by ' + c.cancelledBy + ' ' + when(c.cancelledAt) +
      ': the finished intents its preparing pass moved go back (execution goes on); it ends as cancelled once they have') : null;
    return failing || cancel || back ? el('div', {}, back, failing, c.cancelledAt ? null : cancel) : null;
  }

  // What the operator typed survives the page's refresh (every 5 s) until it is submitted.
  let typed = null;
  function form(p) {
    const busy = p.active !== null;
    const input = el('input', { id: 'partition-count', type: 'number', min: 1, max: p.executorPartitions, value: typed ?? p.count, size: 4 });
    input.addEventListener('input', () => { typed = input.value; });
    const f = el('form', { id: 'partition-count-form', title: busy ? 'a change is in progress' : '' },
      el('label', {}, 'count ', input), ' ',
      el('button', { id: 'btn-partition-count', type: 'submit', disabled: busy ? 'disabled' : null }, 'Change count'),
      el('span', { class: 'muted' }, ' at most ' + p.executorPartitions + ' (EXECUTOR_PARTITIONS of this instance)'));
    f.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const n = Number(input.value);
      typed = null;
      act('Change the partition count to ' + n, 'From ' + p.count + ' to ' + n + ': every partition\'s leader drains and releases, one changer ' +
        'takes every lease, switches the count and moves the intents; execution pauses meanwhile.' +
        (n < p.count ? ' Deploy with the smaller EXECUTOR_PARTITIONS only after it completes.' : ''),
      'POST', 'ops/partitions', { count: n });
    });
    return f;
  }

  function history(changes) {
    if (!changes.length) return el('div', { class: 'muted', id: 'partition-changes' }, 'no change requested yet');
    return el('table', { id: 'partition-changes' },
      el('tr', {}, ...['requested', 'count', 'state', 'rows moved', 'switched', 'completed', 'by'].map((t) => el('th', {}, t))),
      ...changes.map((c) => el('tr', { 'data-change': c.changeId },
        el('td', {}, when(c.requestedAt)), el('td', {}, c.fromCount + ' → ' + c.toCount), el('td', { class: c.state === 'completed' ? 'ok' : c.state === 'cancelled' ? 'muted' : 'err' }, c.state),
        el('td', {}, c.rowsMoved), el('td', {}, when(c.switchedAt)), el('td', {}, when(c.completedAt) + span(c.requestedAt, c.completedAt)), el('td', {}, c.requestedBy))));
  }

  /** r: the GET ops/partitions response. Shows the card when there is anything to show (more than one partition
   *  recorded or runnable here, or any change); returns whether it did. */
  return function renderPartitionLayout(r) {
    const box = $('#partition-layout');
    if (!r.ok) { box.replaceChildren(el('div', { class: 'err' }, 'partitions: HTTP ' + r.status)); return true; }
    const p = r.json;
    const shown = p.count > 1 || p.executorPartitions > 1 || p.changes.length > 0;
    if (!shown) return false;
    const newest = p.active || p.changes[0] || null;
    // Rows of partitions at or above the recorded count (this instance's timers beyond it) are idle until it grows.
    for (const tr of document.querySelectorAll('#partitions-table tr[data-partition]')) {
      const idle = Number(tr.dataset.partition) >= p.count;
      tr.classList.toggle('idle', idle);
      tr.title = idle ? 'above the recorded count (' + p.count + '): idle until the count grows' : '';
    }
    box.replaceChildren(...[
      el('div', {}, 'recorded count ', el('b', { id: 'partition-count-recorded' }, p.count), el('span', { class: 'muted' },
        ' · recorded ' + when(p.recordedAt) + ' by ' + p.recordedBy + ' · layout generation ',
        el('span', { id: 'partition-layout-generation', title: 'raised by every change of the count; sent to the provider as X-Layout-Generation' }, p.generation))),
      p.active ? el('div', { class: 'err', id: 'partition-change-active' }, 'change in progress: ' + p.active.fromCount + ' → ' + p.active.toCount + ' (' + p.active.state + '); ' + (p.active.state === 'preparing'
        ? 'execution goes on while finished intents move, then pauses from the drain until it completes' : 'execution pauses until it completes'))
        : null,
      p.active ? stuck(p.active) : null,
      newest ? steps(newest, p.leases) : null,
      form(p),
      el('details', {}, el('summary', {}, 'recent changes'), history(p.changes))].filter((n) => n !== null));
    $('#partitions-card').hidden = false;
    return true;
  };
}
