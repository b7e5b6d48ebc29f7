// The dashboard page: one HTML document with its CSS, uPlot (inlined from node_modules/uplot: one request,
// and no asset route that would need the function key again) and the client script (client.ts) inlined.
// Built once per process and cached.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dashboardClient } from './client.js';
import { partitionClient } from './partitionClient.js';
import { partitionTableClient } from './partitionTable.js';
import { chartsClient } from './charts.js';

const require = createRequire(import.meta.url);
let cached: string | null = null;

const CSS = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1f2937; }
header { background: #111827; color: #fff; padding: 10px 20px; display: flex; gap: 20px; align-items: baseline; }
header a { color: #93c5fd; } header .muted { color: #9ca3af; }
main { padding: 16px 20px; max-width: 1400px; }
.cards { display: flex; gap: 16px; flex-wrap: wrap; margin-bottom: 16px; }
.card { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 12px 16px; min-width: 280px; flex: 1; }
.card h3 { margin: 0 0 8px; font-size: 13px; text-transform: uppercase; color: #6b7280; }
.big { font-size: 20px; font-weight: 600; } .muted { color: #6b7280; font-size: 12px; }
.ok { color: #15803d; } .err { color: #b91c1c; } tr.gone td { color: #9ca3af; }
#counts { display: flex; gap: 10px; flex-wrap: wrap; }
.count { background: #f9fafb; border: 1px solid #e5e7eb; border-radius: 6px; padding: 6px 12px; text-align: center; min-width: 80px; }
.count .n { font-size: 22px; font-weight: 700; } .count .n.small { font-size: 12px; font-weight: 400; padding: 8px 0; }
.count.failed .n, .status.failed, .status.permanent_error, .status.retryable_error, .status.abandoned { color: #b91c1c; }
.count.succeeded .n, .status.succeeded { color: #15803d; } .count.in_flight .n, .status.in_flight { color: #b45309; }
#charts { display: flex; gap: 16px; flex-wrap: wrap; } #charts > div { flex: 1; min-width: 320px; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 13px; }
th, td { border-bottom: 1px solid #e5e7eb; padding: 4px 8px; text-align: left; vertical-align: top; }
td.error, div.error { color: #b91c1c; font-family: ui-monospace, monospace; font-size: 12px; word-break: break-word; }
button { background: #1d4ed8; color: #fff; border: 0; border-radius: 5px; padding: 5px 12px; cursor: pointer; margin-right: 6px; }
button.secondary { background: #6b7280; } .buttons { margin-top: 8px; } button.small { padding: 2px 8px; font-size: 12px; }
#partitions { overflow-x: auto; } #partitions-table th, #partitions-table td { vertical-align: middle; white-space: nowrap; padding: 4px 5px; }
#partitions-table .reason { max-width: 150px; overflow: hidden; text-overflow: ellipsis; } #partitions-table .drain, #partitions-table .maint { font-size: 12px; } #partitions-table td.actions { text-align: right; } #partitions-table td.actions button:last-child { margin-right: 0; } #partitions-table .due { font-weight: 700; }
#partition-layout { margin-bottom: 8px; } #partition-change-steps { margin: 6px 0; padding-left: 22px; } #partition-change-steps li.done { color: #15803d; }
#partition-change-steps li.current { font-weight: 600; color: #b45309; } #partition-change-steps li.todo { color: #9ca3af; } form#partition-count-form { margin: 6px 0; } button:disabled { opacity: 0.45; cursor: not-allowed; } #partitions-table tr.idle td { color: #9ca3af; }
form#search { display: flex; gap: 8px; flex-wrap: wrap; align-items: end; margin-bottom: 8px; }
form#search label { display: flex; flex-direction: column; font-size: 12px; color: #6b7280; }
input, select { padding: 4px 6px; border: 1px solid #d1d5db; border-radius: 4px; }
.result { position: sticky; top: 0; padding: 8px 12px; border-radius: 6px; margin-bottom: 12px; font-weight: 600; }
.result.ok { background: #dcfce7; } .result.err { background: #fee2e2; }
dialog { border: 1px solid #d1d5db; border-radius: 8px; min-width: 360px; } dialog input { width: 100%; box-sizing: border-box; margin: 8px 0; }
pre { background: #f3f4f6; padding: 8px; overflow: auto; max-height: 300px; }
`;

const BODY = `
<header><strong>SubmissionManager</strong><a href="#/">overview</a><span class="muted" id="served"></span></header>
<main>
  <div id="result" class="result" hidden></div>
  <section id="overview-page">
    <div class="cards">
      <div class="card"><h3 id="leader-title">Leader</h3><div id="leader">…</div></div>
      <div class="card"><h3>Execution</h3><div id="execution">…</div></div>
      <div class="card" style="flex:2"><h3>Intents</h3><div id="counts">…</div></div>
    </div>
    <div class="card" id="partitions-card" style="margin-bottom:16px" hidden><h3>Partitions <span class="muted" id="partitions-summary" style="text-transform:none"></span></h3><div id="partition-layout"></div><div id="partitions"></div></div>
    <div class="card" style="margin-bottom:16px"><h3>Instances <span class="muted" id="instances-summary" style="text-transform:none"></span></h3><div id="instances"></div></div>
    <div class="card"><div id="charts"><div id="chart-attempts"></div><div id="chart-errors"></div></div></div>
    <div class="cards" style="margin-top:16px">
      <div class="card" style="flex:2"><h3>Recent failures <button id="btn-redrive-filter" class="secondary">Redrive failed…</button></h3><div id="failures"></div></div>
    </div>
    <div class="card"><h3>Search intents</h3>
      <form id="search">
        <label>intent id<input name="intentId" size="38"></label>
        <label>idempotency key<input name="key" id="search-key"></label>
        <label>status<select name="status"><option value="">any</option><option>scheduled</option><option>in_flight</option><option>succeeded</option><option>failed</option><option>cancelled</option></select></label>
        <label>created from (UTC)<input name="from" type="datetime-local" step="1"></label>
        <label>created to (UTC)<input name="to" type="datetime-local" step="1"></label>
        <button type="submit" id="btn-search">Search</button>
      </form>
      <div id="search-results"></div>
    </div>
    <div class="cards" style="margin-top:16px">
      <div class="card"><h3 id="timeline-title">Leadership timeline</h3><div id="timeline"></div></div>
      <div class="card"><h3>Redrives</h3><div id="redrives"></div></div>
    </div>
  </section>
  <section id="intent-page" hidden></section>
</main>
<dialog id="confirm"><form method="dialog">
  <h3 id="confirm-title"></h3><p id="confirm-detail"></p><input id="confirm-input" hidden>
  <button value="ok" id="confirm-ok">Confirm</button><button value="cancel" class="secondary" formnovalidate>Cancel</button>
</form></dialog>`;

export function dashboardPage(): string {
  if (cached) return cached;
  const uplotDir = require.resolve('uplot/dist/uPlot.iife.min.js').replace(/uPlot\.iife\.min\.js$/, '');
  const uplotJs = readFileSync(`${uplotDir}uPlot.iife.min.js`, 'utf8');
  const uplotCss = readFileSync(`${uplotDir}uPlot.min.css`, 'utf8');
  const safe = (js: string) => js.replace(/<\/script/gi, '<\\/script');
  cached = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>SubmissionManager dashboard</title><style>${uplotCss}${CSS}</style></head>
<body>${BODY}
<script>${safe(uplotJs)}</script>
<script>(${safe(dashboardClient.toString())})(${[partitionClient, partitionTableClient, chartsClient].map((f) => safe(f.toString())).join(', ')});</script>
</body></html>`;
  return cached;
}
