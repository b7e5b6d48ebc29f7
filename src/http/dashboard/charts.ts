// @ts-nocheck — browser code, inlined into the page beside client.ts and handed to it (page.ts): the overview's
// charts of the last hour (attempts and errors per minute, error rate), drawn with uPlot (a global of the page) and
// updated in place at each refresh. `h` is the page's helpers: $.
export function chartsClient(h) {
  const { $ } = h;
  const charts = {};
  function chart(id, title, series, data) {
    const host = $('#' + id);
    const opts = {
      title, width: Math.max(300, host.clientWidth || 500), height: 200, scales: { x: { time: true } },
      series: [{}].concat(series), axes: [{}, { size: 50 }],
    };
    if (charts[id]) charts[id].setData(data);
    else charts[id] = new uPlot(opts, data, host);
  }
  function drawCharts(o) {
    const end = Math.floor(Date.parse(o.dbNow) / 60000) * 60;
    const xs = [], started = [], errors = [], rate = [];
    const byMinute = new Map(o.attemptsPerMinute.map((m) => [Date.parse(m.minute) / 1000, m]));
    for (let t = end - 59 * 60; t <= end; t += 60) {
      const m = byMinute.get(t);
      xs.push(t); started.push(m ? m.started : 0); errors.push(m ? m.errors : 0);
      rate.push(m && m.started ? Math.round((1000 * m.errors) / m.started) / 10 : 0);
    }
    chart('chart-attempts', 'Attempts per minute (last hour)', [
      { label: 'attempts', stroke: '#2563eb', fill: 'rgba(37,99,235,0.15)' }, { label: 'errors', stroke: '#dc2626' }], [xs, started, errors]);
    chart('chart-errors', 'Error rate % (last hour)', [{ label: 'error rate %', stroke: '#dc2626', fill: 'rgba(220,38,38,0.12)' }], [xs, rate]);
    $('#charts').dataset.points = String(xs.length);
  }
  return drawCharts;
}
