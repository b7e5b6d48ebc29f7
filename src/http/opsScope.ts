// Which partitions an operations request is about, from the layout SQL records: never this process's
// EXECUTOR_PARTITIONS (an HTTP-only instance, or one that runs fewer partitions, answers for the whole cluster).
import type { PartitionLayout } from '../store/partitionPorts.js';
import type { HttpContext } from './context.js';
import { validationProblem, type ApiResponse } from './problem.js';
import { parseUrl, type ApiRequest } from './request.js';

export interface RecordedPartitions {
  /** Partitions 0..span−1: the recorded count, or an active change's larger from/to count (both have leases then). */
  span: number;
  layout: PartitionLayout;
}

export async function recordedPartitions(app: Pick<HttpContext, 'stores'>): Promise<RecordedPartitions> {
  const layout = await app.stores.partitions.readLayout();
  const span = Math.max(layout.count, layout.active?.fromCount ?? 0, layout.active?.toCount ?? 0);
  return { span, layout };
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

/** What a partition's pause holds, said in every answer about one. */
export const partitionPauseNote = (k: number, layout: PartitionLayout) =>
  `holds the intents that are in partition ${k} under the current layout (${describeLayout(layout)}); a count change moves ` +
  'intents between partitions and the pause does not follow them. The cluster\'s pause (no ?partition=) holds every partition.';

export const clusterPauseNote = 'the cluster\'s pause holds every partition of any layout, also after a count change; a partition\'s own ' +
  'flag (partitions[].paused) is independent: resuming the cluster leaves it set (partitions[].heldBy says what still holds each).';
