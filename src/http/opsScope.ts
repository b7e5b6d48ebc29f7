// Which partitions an operations request is about, from the layout SQL records: never this process's
// EXECUTOR_PARTITIONS (an HTTP-only instance, or one that runs fewer partitions, answers for the whole cluster).
import type { PartitionLayout } from '../store/partitionPorts.js';
import type { PartitionControl } from '../store/insightPorts.js';
import { LEASE_NAME_MAX_LENGTH, MAX_EXECUTOR_PARTITIONS, partitionLeaseName } from '../limits.js';
import type { HttpContext } from './context.js';
import { partitionRef } from './leases.js';
import { validationProblem, type ApiResponse } from './problem.js';
import { parseUrl, type ApiRequest } from './request.js';

export interface RecordedPartitions {
  /** LEASE_NAME (the partitions' lease names derive from it). */
  layoutBase: string;
  /** Partitions 0..span−1: the recorded count, or an active change's larger from/to count (both have leases then). */
  span: number;
  layout: PartitionLayout;
}

export async function recordedPartitions(app: Pick<HttpContext, 'stores' | 'config'>): Promise<RecordedPartitions> {
  const layout = await app.stores.partitions.readLayout();
  const span = Math.max(layout.count, layout.active?.fromCount ?? 0, layout.active?.toCount ?? 0);
  return { layoutBase: app.config.lease.name, span, layout };
}

/** "the recorded partition count is N" and the change in progress, if any (for errors and notes). */
export function describeLayout(layout: PartitionLayout): string {
  const a = layout.active;
  return `the recorded partition count is ${layout.count}` + (a ? `, changing from ${a.fromCount} to ${a.toCount} (${a.state})` : '');
}

/** `?partition=`: null when absent (the cluster), k when 0 ≤ k < span, else the 400 naming the range. */
export function partitionParam(req: ApiRequest, rec: RecordedPartitions, instance: string):
  { ok: true; partition: number | null } | { ok: false; response: ApiResponse } {
  const raw = parseUrl(req.url).searchParams.get('partition');
  if (raw === null) return { ok: true, partition: null };
  const k = /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(k) || k >= rec.span) {
    return { ok: false, response: validationProblem([{ path: 'partition', message: `must be an integer from 0 to ${rec.span - 1} (${describeLayout(rec.layout)})` }], instance) };
  }
  return { ok: true, partition: k };
}

/** The partitions whose control row can exist under this LEASE_NAME: 0..63 whose lease name fits lease_name. A shrink
 *  leaves the rows of the partitions it removed; they hold nothing until a count change brings the partition back. */
export function possiblePartitions(base: string): number[] {
  return Array.from({ length: MAX_EXECUTOR_PARTITIONS }, (_, k) => k).filter((k) => partitionLeaseName(base, k).length <= LEASE_NAME_MAX_LENGTH);
}

/** Control target of a resume or a read: any partition whose row can exist (beyond the recorded count too: a shrink
 *  leaves its flag), or `all` for a resume. A pause stays within the recorded layout (partitionParam). */
export function controlParam(req: ApiRequest, rec: RecordedPartitions, instance: string, change: 'pause' | 'resume' | null):
  { ok: true; partition: number | null | 'all' } | { ok: false; response: ApiResponse } {
  const raw = parseUrl(req.url).searchParams.get('partition');
  if (change === 'pause' || raw === null) return partitionParam(req, rec, instance);
  if (raw === 'all' && change === 'resume') return { ok: true, partition: 'all' };
  const possible = possiblePartitions(rec.layoutBase);
  const k = /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
  if (!possible.includes(k)) {
    return { ok: false, response: validationProblem([{ path: 'partition', message: `must be an integer from 0 to ${possible.length - 1}` +
      `${change === 'resume' ? ', or all (the cluster and every partition)' : ''} (${describeLayout(rec.layout)})` }], instance) };
  }
  return { ok: true, partition: k };
}

/** Every partition control row: those of the recorded layout (0..span−1, in order) and the paused ones beyond it. */
export async function partitionControlRows(app: HttpContext, rec: RecordedPartitions, atLeast = 0):
  Promise<{ rows: PartitionControl[]; beyond: PartitionControl[] }> {
  const possible = possiblePartitions(app.config.lease.name);
  const all = await app.stores.insights.partitionControls(possible.map((k) => partitionRef(app, k)));
  const shown = Math.max(rec.span, atLeast);
  return { rows: all.slice(0, shown), beyond: all.slice(rec.span).filter((c) => c.paused) };
}

/** What a partition's pause holds, said in every answer about one. */
export const partitionPauseNote = (k: number, layout: PartitionLayout, inLayout = true) => (!inLayout
  ? `partition ${k} is beyond the recorded layout (${describeLayout(layout)}): its flag holds nothing now, and holds partition ${k} ` +
    'again if a count change brings it back; resume it with ?partition=' + k + ' or ?partition=all'
  : `holds the intents that are in partition ${k} under the current layout (${describeLayout(layout)}); a count change moves ` +
  'intents between partitions and the pause does not follow them. The cluster\'s pause (no ?partition=) holds every partition.');

export const clusterPauseNote = 'the cluster\'s pause holds every partition of any layout, also after a count change; a partition\'s own ' +
  'flag (partitions[].paused) is independent: resuming the cluster leaves it set (stillHeld lists the partitions it holds; ' +
  'partitions[].inLayout false: a row beyond the recorded count, holding nothing until a count change brings it back). ' +
  'POST /api/ops/execution/resume?partition=all resumes everything: every partition\'s flag, then the cluster\'s.';
