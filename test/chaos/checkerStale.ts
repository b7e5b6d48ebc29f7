// Consumer-side fencing, recomputed from the provider's own record (appended at arrival, in arrival order), not taken
// from its flags. A request is stale when a request of a newer layout generation, or of a newer epoch of its own
// partition, arrived before it (docs/provider-fencing.md): its sender's epoch had ended (a switch of the partition
// count takes every lease; a newer epoch of a partition exists only once its older one ended). Records without a
// generation (older runs, an older release's requests) are judged by the per-partition rule alone. Only requests
// judged fresh raise the highest values, as the provider's rule does. With the fencing provider no stale request may
// be acted on: `stale_accepted`.
import type { ProviderRecord } from './providerProcess.js';

export interface StaleCounts {
  /** Stale requests the provider acted on (any answer but its 409 refusal), and those it refused. */
  staleAccepted: number;
  staleRefused: number;
}

export function staleRequests(provider: readonly ProviderRecord[], fail: (check: string, message: string) => void): StaleCounts {
  let generation = 0;
  const highest = new Map<number, number>(); // partition → highest epoch
  const out: StaleCounts = { staleAccepted: 0, staleRefused: 0 };
  for (const p of provider) {
    const part = p.partition ?? 0;
    const why = p.generation !== undefined && p.generation < generation ? `layout generation ${p.generation} < ${generation} seen`
      : p.epoch < (highest.get(part) ?? 0) ? `epoch ${p.epoch} < ${highest.get(part)} seen for partition ${part}` : null;
    if (why === null) {
      if (p.generation !== undefined) generation = p.generation;
      highest.set(part, p.epoch);
    } else if (p.status === 409 && p.refused) out.staleRefused++;
    else {
      out.staleAccepted++;
      if (p.fenced) fail('stale_accepted', `provider call ${p.key}#${p.attemptNo}: ${why}, answered ${p.status}`);
    }
  }
  return out;
}
