// The checker's stale-request rule (checkerStale.ts), table-driven both ways: a request is stale when a newer layout
// generation, or a newer epoch of its own partition, arrived before it; records without a generation (older runs)
// keep the per-partition rule; only fresh requests raise the highest values. A stale request acted on by a fencing
// provider is a violation; one it refused (409) is counted.
import { describe, expect, it } from 'vitest';
import { staleRequests } from './checkerStale.js';
import type { ProviderRecord } from './providerProcess.js';

type Req = [key: string, partition: number, epoch: number, generation?: number];
const X = 'x', Y = 'y';

const record = ([key, partition, epoch, generation]: Req, i: number, status = 200): ProviderRecord => ({
  key, attemptNo: i + 1, epoch, arrivedAt: 1_000 + i, status, delayMs: 0, staleEpoch: false, partition, fenced: true,
  refused: status === 409, ...(generation === undefined ? {} : { generation }),
});

/** The last request of `reqs` is judged after the others (all answered 200): is it stale? */
function lastIsStale(reqs: Req[]): boolean {
  const accepted = (rs: Req[]) => staleRequests(rs.map((r, i) => record(r, i)), () => {}).staleAccepted;
  return accepted(reqs) > accepted(reqs.slice(0, -1));
}

describe('checker: stale requests across layout generations and partitions', () => {
  it.each<[string, Req[], boolean]>([
    // The interleaving: A (partition 1, epoch 1, generation 0) is late; the count went 2 → 1; B (partition 0) sent X.
    ['an older generation after a newer one, same intent, another partition', [[X, 0, 2, 1], [X, 1, 1, 0]], true],
    ['an older generation after a newer one, another intent', [[Y, 0, 2, 1], [X, 1, 1, 0]], true],
    ['an older epoch of its own partition, same generation', [[X, 1, 3, 0], [X, 1, 2, 0]], true],
    ['an older epoch of its own partition, no generation (an older run)', [[X, 1, 3], [X, 1, 2]], true],
    ['an older epoch of another partition, same generation', [[X, 0, 3, 0], [X, 1, 2, 0]], false],
    ['the same generation and epoch again (the same leader)', [[X, 1, 2, 1], [Y, 1, 2, 1]], false],
    ['a newer generation after an older one', [[X, 1, 1, 0], [X, 0, 2, 1]], false],
    ['no generation after a newer one (an older release: per-partition rule only)', [[X, 0, 2, 1], [X, 1, 1]], false],
    ['a generation lower than one seen only from a stale request (which raised nothing)', [[X, 0, 5, 0], [X, 0, 4, 2], [Y, 1, 1, 0]], false],
  ])('%s → stale: %s', (_name, reqs, stale) => {
    expect(lastIsStale(reqs)).toBe(stale);
  });

  it('a stale request acted on is a violation with its evidence; one refused (409) is counted, not a violation', () => {
    const fails: string[] = [];
    const accepted = staleRequests([record([X, 0, 2, 1], 0), record([X, 1, 1, 0], 1)], (c, m) => fails.push(`${c}: ${m}`));
    expect(accepted).toEqual({ staleAccepted: 1, staleRefused: 0 });
    expect(fails).toEqual(['stale_accepted: provider call x#2: layout generation 0 < 1 seen, answered 200']);
    const refused = staleRequests([record([X, 0, 2, 1], 0), record([X, 1, 1, 0], 1, 409)], (c) => fails.push(c));
    expect(refused).toEqual({ staleAccepted: 0, staleRefused: 1 });
    expect(fails).toHaveLength(1);
  });
});
