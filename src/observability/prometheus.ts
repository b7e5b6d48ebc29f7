// Prometheus text exposition (format 0.0.4) of the metrics an OpenTelemetry SDK reader collected.
// Monotonic sums → counter (`_total` suffix ensured), non-monotonic sums and gauges → gauge, explicit-bucket
// histograms → histogram with cumulative `_bucket{le=…}`, `_sum`, `_count`. Output is sorted (stable diffs).
import { DataPointType, type MetricData, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { Attributes } from '@opentelemetry/api';

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const sanitizeName = (n: string) => n.replace(/[^a-zA-Z0-9_:]/g, '_').replace(/^([0-9])/, '_$1');
const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const escapeHelp = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

function labels(attrs: Attributes, extra: [string, string][] = []): string {
  const pairs: [string, string][] = Object.entries(attrs)
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => [sanitizeName(k), Array.isArray(v) ? v.join(',') : String(v)]);
  pairs.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  pairs.push(...extra);
  return pairs.length === 0 ? '' : `{${pairs.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',')}}`;
}

interface Family {
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  help: string;
  lines: string[];
}

function family(m: MetricData): Family | null {
  const base = sanitizeName(m.descriptor.name);
  const help = m.descriptor.description || m.descriptor.name;
  switch (m.dataPointType) {
    case DataPointType.SUM: {
      const counter = m.isMonotonic;
      const name = counter && !base.endsWith('_total') ? `${base}_total` : base;
      const lines = m.dataPoints.map((p) => `${name}${labels(p.attributes)} ${formatValue(p.value)}`);
      return { name, type: counter ? 'counter' : 'gauge', help, lines };
    }
    case DataPointType.GAUGE: {
      const lines = m.dataPoints.map((p) => `${base}${labels(p.attributes)} ${formatValue(p.value)}`);
      return { name: base, type: 'gauge', help, lines };
    }
    case DataPointType.HISTOGRAM: {
      const lines: string[] = [];
      const points = [...m.dataPoints].sort((a, b) => (labels(a.attributes) < labels(b.attributes) ? -1 : 1));
      for (const p of points) {
        const { boundaries, counts } = p.value.buckets;
        let cumulative = 0;
        boundaries.forEach((b, i) => {
          cumulative += counts[i] ?? 0;
          lines.push(`${base}_bucket${labels(p.attributes, [['le', formatValue(b)]])} ${cumulative}`);
        });
        lines.push(`${base}_bucket${labels(p.attributes, [['le', '+Inf']])} ${p.value.count}`);
        lines.push(`${base}_sum${labels(p.attributes)} ${formatValue(p.value.sum ?? 0)}`);
        lines.push(`${base}_count${labels(p.attributes)} ${p.value.count}`);
      }
      return { name: base, type: 'histogram', help, lines };
    }
    default:
      return null; // exponential histograms are not used here
  }
}

/** Render everything collected (all scopes of every ResourceMetrics) as one exposition document. */
export function renderPrometheus(collected: ResourceMetrics | ResourceMetrics[]): string {
  const families = new Map<string, Family>();
  for (const rm of Array.isArray(collected) ? collected : [collected]) {
    for (const sm of rm.scopeMetrics) {
      for (const m of sm.metrics) {
        const f = family(m);
        if (!f) continue;
        const seen = families.get(f.name);
        if (seen) seen.lines.push(...f.lines);
        else families.set(f.name, f);
      }
    }
  }
  const out: string[] = [];
  for (const f of [...families.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    // Histogram lines stay in bucket order (their points are sorted by labels above).
    out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`, ...(f.type === 'histogram' ? f.lines : f.lines.sort()));
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}
