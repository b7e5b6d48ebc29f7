// The key_order rule (issue 25), shared by the campaign's checker and the system tests: intents of one partitionKey,
// each submitted after the previous one was answered, are FIRST STARTED in that order (database start times of their
// attempt #1, non-decreasing in submit order): one executor per partition takes the earliest due first, and a change
// of the partition count (issue 26) moves every intent of a key to the same new partition, where the next executor
// again takes the earliest due first. Two first started by one batch (one statement: equal start times) are sent side
// by side, in no set order. Of the pairs started by different batches, first attempts that reached the provider the
// other way round are counted, not failed: a call's socket write can be overtaken.
// Pairs whose order is unknown (the later one sent before the earlier was answered) or that never started
// (cancelled) are not judged.

export interface KeyedSubmit { intentId: string; partitionKey?: string; sentAt?: number; at: number }
export interface FirstAttempt { intentId: string; attemptNo: number; startedAtMs?: number; holderId: string; epoch: number }
export interface Arrival { key: string; attemptNo: number; arrivedAt: number }

export interface KeyOrderStats {
  /** Pairs of same-key intents (submitted one after the other) whose start order was checked. */
  keyOrderPairs: number;
  /** … of which started by one batch (their calls sent side by side). */
  keySameBatch: number;
  /** … of those started by different batches, how many first attempts reached the provider in the other order. */
  keyArrivalInversions: number;
}

export function keyOrder(accepted: readonly KeyedSubmit[], attempts: readonly FirstAttempt[], provider: readonly Arrival[],
  fail: (check: string, message: string) => void): KeyOrderStats {
  const stats: KeyOrderStats = { keyOrderPairs: 0, keySameBatch: 0, keyArrivalInversions: 0 };
  const firstAttempt = new Map(attempts.filter((a) => a.attemptNo === 1).map((a) => [a.intentId, a]));
  const firstArrival = new Map(provider.filter((p) => p.attemptNo === 1).map((p) => [p.key, p.arrivedAt]));
  const byKey = new Map<string, KeyedSubmit[]>();
  for (const a of accepted) if (a.partitionKey !== undefined && a.sentAt !== undefined) byKey.set(a.partitionKey, [...(byKey.get(a.partitionKey) ?? []), a]);
  for (const [key, list] of byKey) {
    const sorted = [...list].sort((a, b) => a.sentAt! - b.sentAt!);
    for (let k = 1; k < sorted.length; k++) {
      const x = sorted[k - 1]!, y = sorted[k]!;
      const ax = firstAttempt.get(x.intentId), ay = firstAttempt.get(y.intentId);
      if (x.at > y.sentAt! || !ax?.startedAtMs || !ay?.startedAtMs) continue; // order unknown, or one never started (cancelled)
      stats.keyOrderPairs++;
      if (ax.startedAtMs > ay.startedAtMs) {
        fail('key_order', `partitionKey ${key}: intent ${y.intentId} (sent ${y.sentAt}) first started at ${ay.startedAtMs} by ${ay.holderId} (epoch ${ay.epoch}), ` +
          `before intent ${x.intentId} (answered ${x.at}), first started at ${ax.startedAtMs} by ${ax.holderId} (epoch ${ax.epoch})`);
      }
      if (ax.startedAtMs === ay.startedAtMs) {
        stats.keySameBatch++;
        continue;
      }
      const rx = firstArrival.get(x.intentId), ry = firstArrival.get(y.intentId);
      if (rx !== undefined && ry !== undefined && rx > ry) stats.keyArrivalInversions++;
    }
  }
  return stats;
}
