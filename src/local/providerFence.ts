// The consumer-side fence a provider applies (docs/provider-fencing.md), in one process: the highest layout
// generation seen (X-Layout-Generation) and the highest epoch seen per partition (X-Lease-Epoch, X-Lease-Partition).
// A request is stale when its generation is lower than the highest seen (a change of the partition count switched
// after its sender's epoch began, so that epoch ended), or its epoch is lower than its partition's highest (a newer
// leader of that partition exists). Never a live leader: after a switch every live leader acquired after it and
// carries the newest generation, and a partition's live leader holds its highest epoch (epochs only grow). A request
// without a generation (an older release) is judged by the per-partition rule alone and raises no generation.
// Check and raise are one synchronous step (one thread): nothing runs between them.

/** The fencing headers of one request, as read. */
export interface FenceHeaders {
  partition: number;
  epoch: number;
  /** Absent (or not a non-negative integer): the sender sends none. */
  generation: number | undefined;
}

export type FenceVerdict =
  | { stale: false }
  | { stale: true; kind: 'generation'; seen: number; detail: string }
  | { stale: true; kind: 'epoch'; seen: number; detail: string };

type Headers = Record<string, string | string[] | undefined>;

const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
const count = (v: string | undefined): number | undefined => (v !== undefined && /^\d{1,15}$/.test(v.trim()) ? Number(v) : undefined);

/** The fencing headers of a request (a missing partition is 0, as with one partition; a missing epoch 0). */
export function fenceHeaders(h: Headers): FenceHeaders {
  return {
    partition: count(one(h['x-lease-partition'])) ?? 0,
    epoch: count(one(h['x-lease-epoch'])) ?? 0,
    generation: count(one(h['x-layout-generation'])),
  };
}

export class ProviderFence {
  private generation = 0;
  private readonly highest = new Map<number, number>(); // partition → highest epoch seen

  /** Judge a request, and raise the highest values when it is not stale. */
  admit(r: FenceHeaders): FenceVerdict {
    if (r.generation !== undefined && r.generation < this.generation) {
      return { stale: true, kind: 'generation', seen: this.generation,
        detail: `X-Layout-Generation ${r.generation} is lower than ${this.generation}, already seen: the partition count changed since this leader's epoch began` };
    }
    const seen = this.highest.get(r.partition) ?? 0;
    if (r.epoch < seen) {
      return { stale: true, kind: 'epoch', seen,
        detail: `X-Lease-Epoch ${r.epoch} is lower than ${seen}, already seen for partition ${r.partition}: a newer leader exists` };
    }
    if (r.generation !== undefined) this.generation = r.generation;
    this.highest.set(r.partition, r.epoch);
    return { stale: false };
  }
}
