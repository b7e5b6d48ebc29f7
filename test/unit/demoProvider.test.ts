// The demo provider's consumer-side fence (DEMO_PROVIDER_FENCE), over real HTTP through the app's own HttpProvider:
// with the fence on, an epoch lower than the highest seen for its partition is refused with 409 problem+json
// (stale-epoch) — which the executor classifies as permanent — and counted; epochs are compared per partition
// only, and an equal epoch is the same leader. With the fence off the same request is accepted, and counted too.
import { afterEach, describe, expect, it } from 'vitest';
import { startDemoProvider, type DemoCall, type DemoProvider } from '../../src/local/demoProvider.js';
import { loadLocalSettings } from '../../src/local/localSettings.js';
import { HttpProvider } from '../../src/provider/httpProvider.js';

describe('demo provider: fencing by epoch per partition', () => {
  const open: { demo: DemoProvider; http: HttpProvider }[] = [];
  afterEach(async () => {
    for (const o of open.splice(0)) {
      o.http.close();
      await o.demo.close();
    }
  });

  async function start(fence: boolean) {
    const calls: DemoCall[] = [];
    const demo = await startDemoProvider({ latencyMs: 0, failureRate: 0, fence, onCall: (c) => calls.push(c) });
    const http = new HttpProvider(demo.url);
    open.push({ demo, http });
    let n = 0;
    const send = (partition: number, leaseEpoch: number, layoutGeneration?: number) => http.submit(
      { intentId: `0190f3c2-7d6a-7000-8000-${String(++n).padStart(12, '0')}`, attemptNo: 1, leaseEpoch, partition,
        ...(layoutGeneration === undefined ? {} : { layoutGeneration }), payload: {}, url: null },
      { timeoutMs: 5_000 });
    return { demo, calls, send };
  }

  it('on: a lower epoch of the same partition is refused (409 stale-epoch, permanent); other partitions and equal epochs pass', async () => {
    const { demo, calls, send } = await start(true);
    expect(await send(0, 2)).toEqual({ kind: 'success', httpStatus: 200 });
    const refused = await send(0, 1);
    expect(refused).toMatchObject({ kind: 'permanent', httpStatus: 409 });
    expect(refused.kind === 'permanent' && refused.error).toMatch(/stale-epoch.*X-Lease-Epoch 1 is lower than 2, already seen for partition 0/);
    expect(await send(1, 1)).toEqual({ kind: 'success', httpStatus: 200 }); // partition 1 has its own epochs
    expect(await send(0, 2)).toEqual({ kind: 'success', httpStatus: 200 }); // the same leader again
    expect(await send(0, 3)).toEqual({ kind: 'success', httpStatus: 200 });
    expect(await send(0, 2)).toMatchObject({ kind: 'permanent', httpStatus: 409 });
    expect(demo.stale()).toEqual({ refused: 2, accepted: 0 });
    expect(calls.filter((c) => c.status === 409).map((c) => [c.partition, c.leaseEpoch])).toEqual([[0, 1], [0, 2]]);
  });

  it('on: a lower layout generation is refused whatever its partition (stale-layout); without one, the per-partition rule alone', async () => {
    const { demo, calls, send } = await start(true);
    expect(await send(1, 1, 0)).toEqual({ kind: 'success', httpStatus: 200 }); // A, partition 1, before the count changed
    expect(await send(0, 2, 1)).toEqual({ kind: 'success', httpStatus: 200 }); // B, partition 0, after the switch
    const late = await send(1, 1, 0); // A wakes: its partition's epoch is still the highest seen for partition 1
    expect(late).toMatchObject({ kind: 'permanent', httpStatus: 409 });
    expect(late.kind === 'permanent' && late.error).toMatch(/stale-layout.*X-Layout-Generation 0 is lower than 1, already seen/);
    expect(await send(1, 1)).toEqual({ kind: 'success', httpStatus: 200 }); // no generation (an older release): per partition only
    expect(await send(1, 2, 1)).toEqual({ kind: 'success', httpStatus: 200 }); // a live leader of the new layout
    expect(await send(2, 1, 2)).toEqual({ kind: 'success', httpStatus: 200 }); // the next change's
    expect(await send(0, 2, 1)).toMatchObject({ kind: 'permanent', httpStatus: 409 });
    expect(demo.stale()).toEqual({ refused: 2, accepted: 0 });
    expect(calls.filter((c) => c.status === 409).map((c) => [c.partition, c.leaseEpoch, c.layoutGeneration])).toEqual([[1, 1, 0], [0, 2, 1]]);
  });

  it('off (the local default): the stale request is accepted, and counted as such', async () => {
    const { demo, send } = await start(false);
    expect(await send(0, 2)).toEqual({ kind: 'success', httpStatus: 200 });
    expect(await send(0, 1)).toEqual({ kind: 'success', httpStatus: 200 });
    expect(demo.stale()).toEqual({ refused: 0, accepted: 1 });
  });

  it('DEMO_PROVIDER_FENCE: on|off, default off; anything else names the setting', () => {
    expect(loadLocalSettings({}).demoProvider.fence).toBe(false);
    expect(loadLocalSettings({ DEMO_PROVIDER_FENCE: 'on' }).demoProvider.fence).toBe(true);
    expect(() => loadLocalSettings({ DEMO_PROVIDER_FENCE: 'yes' })).toThrow(/^DEMO_PROVIDER_FENCE: .*\(got "yes"\)/);
  });
});
