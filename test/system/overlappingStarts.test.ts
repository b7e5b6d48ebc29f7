// A slot freed while a fenced START is on the wire need not wait for it: a second START goes out beside it. The
// first START's reply is held on a promise this test controls, and the provider holds every call until the test
// answers them, so the order is pinned without timing. Two starts in flight never take the same intent, and calls in
// flight + intents being started never exceed the concurrency (counted at every START, from the STARTs' arguments
// and the provider's answers: a lower bound of what the leader counts). Once on an executor without provider
// protection (the slots alone hold the bound), once on the app (its guard asked for exactly what is started).
import { describe, expect, it } from 'vitest';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import { dialects, type DialectContext } from '../support/dialects.js';
import { submitVia, waitUntil } from '../support/apps.js';
import { buildExecutor, type Built } from '../support/executorHarness.js';
import { submit } from '../support/instances.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { delegateExecution, useWrappedApp } from '../support/wrappedApp.js';
import type { ExecutionStore } from '../../src/store/intentPorts.js';
import type { TickSummary } from '../../src/executor/tickSummary.js';

const CONCURRENCY = 4; // a start batch of 1

/** An executor under test: its execution port wrapped by `wrap`, how to submit an intent and run a leader tick. */
interface Leader {
  submit(n: number): Promise<string>;
  tick(budgetMs: number): Promise<TickSummary>;
}

/** The scenario: intent 0 alone (the first START, reply held), then CONCURRENCY more while it is held. */
async function overlappingStarts(provider: RecordingProvider, open: (wrap: (base: ExecutionStore) => ExecutionStore) => Promise<Leader>) {
  let releaseStart!: () => void;
  const startHeld = new Promise<void>((r) => (releaseStart = r));
  let answerCalls!: () => void;
  const callsHeld = new Promise<void>((r) => (answerCalls = r));
  const requested: string[][] = []; // every START's intents, in call order
  let startsInFlight = 0;
  let maxStartsInFlight = 0;
  let rowsInStarts = 0; // intents of the STARTs not yet answered to the leader
  let startedNotAnswered = 0; // attempts started whose provider call has not been answered
  let maxOutstanding = 0;
  const leader = await open((base) => delegateExecution(base, {
    async fencedStartAttempts(t, r) {
      const nth = requested.push(r.map((x) => x.intentId));
      startsInFlight++;
      rowsInStarts += r.length;
      maxStartsInFlight = Math.max(maxStartsInFlight, startsInFlight);
      maxOutstanding = Math.max(maxOutstanding, rowsInStarts + startedNotAnswered);
      try {
        const out = await base.fencedStartAttempts(t, r);
        if (nth === 1) await startHeld; // the first START's reply waits until the second START has gone out
        if (out.kind === 'ok') startedNotAnswered += out.value.length;
        return out;
      } finally {
        startsInFlight--;
        rowsInStarts -= r.length;
      }
    },
  }));
  provider.answer = async () => {
    await callsHeld;
    startedNotAnswered--;
    return { status: 200 };
  };
  try {
    const first = await leader.submit(0);
    const tick = leader.tick(3_000);
    await waitUntil('the first START is out, its reply held', () => requested.length === 1, 10_000);
    expect(requested[0]).toEqual([first]);
    const later: string[] = [];
    for (let n = 1; n <= CONCURRENCY; n++) later.push(await leader.submit(n));
    await waitUntil('a second START went out beside the first', () => requested.length === 2, 10_000);
    expect(maxStartsInFlight).toBe(2); // counted when it went out: the first one's reply still held
    await waitUntil('every slot taken, the first START\'s reply still held', () => requested.flat().length >= CONCURRENCY, 10_000);

    releaseStart();
    await waitUntil('the concurrency in calls at the provider', () => provider.calls.length >= CONCURRENCY, 10_000);
    expect(requested.flat()).toHaveLength(CONCURRENCY); // every slot taken: the last intent waits for a call to end
    answerCalls();
    await waitUntil('the last intent sent once a slot was free', () => provider.calls.length === CONCURRENCY + 1, 10_000);
    const sum = await tick;

    expect(sum.role).toBe('leader');
    expect(maxStartsInFlight).toBe(2); // never more
    expect(maxOutstanding).toBeLessThanOrEqual(CONCURRENCY);
    const all = requested.flat();
    expect(new Set(all).size).toBe(all.length); // no intent in two STARTs
    expect(all.sort()).toEqual([first, ...later].sort());
    expect(provider.calls.map((c) => c.intentId).sort()).toEqual([first, ...later].sort()); // each sent once
  } finally { // a failed step must not leave the leader waiting on the holds
    releaseStart();
    answerCalls();
  }
}

describe.each(dialects)('overlapping fenced starts, no provider protection: $name', (dialect) => {
  const t = {} as { ctx: DialectContext; provider: RecordingProvider };
  useDialectWithProvider(dialect, (ctx, provider) => {
    t.ctx = ctx;
    t.provider = provider;
  });

  it('a second START goes out while the first one\'s reply is held; no intent twice, no slot overcommitted', async () => {
    let built: Built | null = null;
    try {
      await overlappingStarts(t.provider, async (wrap) => {
        const b = await buildExecutor(t.ctx, { providerUrl: t.provider.url, concurrency: CONCURRENCY, leaseMs: 10_000,
          wrapStore: (s) => wrap(s) });
        built = b;
        return { submit: async (n) => (await submit(b.stores, { n })).intentId, tick: (ms) => b.executor.tick(ms) };
      });
    } finally {
      const b = built as Built | null;
      await b?.executor.drain();
      await b?.lease.release();
      await b?.stores.close();
    }
  });
});

describe.each(dialects)('overlapping fenced starts, the app with its provider guard: $name', (dialect) => {
  const f = useWrappedApp(dialect);

  it('a second START goes out while the first one\'s reply is held; no intent twice, no slot overcommitted', async () => {
    await overlappingStarts(f.provider, async (wrap) => {
      const { app } = await f.open(wrap, { DUE_NOTICES: 'off', EXECUTOR_CONCURRENCY: String(CONCURRENCY), LEASE_DURATION_MS: '10000',
        PROVIDER_TIMEOUT_MS: '3000' });
      return { submit: (n) => submitVia(app, { n }), tick: (ms) => app.executor.tick(ms) };
    });
  });
});
