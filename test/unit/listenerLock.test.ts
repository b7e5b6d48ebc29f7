// The local host's listener lock (the Functions host's timer singleton): host.json parsing with the host's
// ranges; the ListenerLock state machine on the in-process store with short periods (one holder, crash → the
// lease runs out first, graceful stop → next poll, transient renew errors keep the lock, a lost lease stops the
// listener); and the store contract against both stores, the blob one on a real Azurite.
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { BlobLockStore } from '../../src/local/blobLockStore.js';
import { parseTimeSpan, readSingletonSettings } from '../../src/local/hostJson.js';
import { ListenerLock, MemoryLockStore, type ListenerLockStore } from '../../src/local/listenerLock.js';
import { startAzurite, startBlobProxy, type Azurite } from '../support/azurite.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('host.json singleton settings', () => {
  const root = (json: unknown) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sm-hostjson-'));
    writeFileSync(path.join(dir, 'host.json'), JSON.stringify(json));
    return dir;
  };
  it.each([['00:00:15', 15_000], ['00:01:00', 60_000], ['1.00:00:00', 86_400_000], ['00:00:15.5', 15_500], ['00:30', 1_800_000],
    ['15', null], ['00:61:00', null], ['abc', null]])('parseTimeSpan(%s) = %s', (text, ms) => {
    expect(parseTimeSpan(text)).toBe(ms);
  });
  it('defaults are the host defaults (60 s / 60 s); this repository chooses 15 s / 15 s', () => {
    expect(readSingletonSettings(root({ version: '2.0' }), {})).toEqual({ listenerLockPeriodMs: 60_000, listenerLockRecoveryPollingMs: 60_000 });
    expect(readSingletonSettings(path.resolve('.'), {})).toEqual({ listenerLockPeriodMs: 15_000, listenerLockRecoveryPollingMs: 15_000 });
  });
  it('app settings AzureFunctionsJobHost__singleton__* override host.json (names case-insensitive)', () => {
    const dir = root({ singleton: { listenerLockPeriod: '00:00:20' } });
    expect(readSingletonSettings(dir, { azurefunctionsjobhost__singleton__listenerLockPeriod: '00:00:30' }).listenerLockPeriodMs).toBe(30_000);
    expect(readSingletonSettings(dir, { AzureFunctionsJobHost__singleton__listenerLockRecoveryPollingInterval: '10675199.02:48:05.4775807' })
      .listenerLockRecoveryPollingMs).toBeNull();
  });
  it.each([
    [{ listenerLockPeriod: '00:00:10' }, /host.json singleton.listenerLockPeriod: "00:00:10" must be between 00:00:15 and 00:01:00/],
    [{ listenerLockPeriod: '00:02:00' }, /listenerLockPeriod.*between/],
    [{ listenerLockRecoveryPollingInterval: '00:00:05' }, /listenerLockRecoveryPollingInterval: "00:00:05" must be at least 00:00:15/],
    [{ listenerLockPeriod: 15 }, /is not a TimeSpan/],
  ])('out of the host range fails at start naming the setting: %j', (singleton, re) => {
    expect(() => readSingletonSettings(root({ singleton }), {})).toThrow(ConfigError);
    expect(() => readSingletonSettings(root({ singleton }), {})).toThrow(re);
  });
});

/** A store that records every successful acquire/renew (time, owner) and can fail or delay on demand. */
class ObservedStore implements ListenerLockStore {
  readonly where = 'observed';
  readonly log: { atMs: number; owner: string; op: 'acquire' | 'renew' }[] = [];
  /** Every acquire attempt: when it was sent (before the store saw it), by whom, and whether it took the lock. */
  readonly attempts: { sentAtMs: number; owner: string; got: boolean }[] = [];
  failRenewOf: string | null = null;
  delayRenewOfMs = new Map<string, number>();
  private readonly owners = new Map<string, string>();
  constructor(private readonly inner: ListenerLockStore) {}
  async tryAcquire(lockId: string, owner: string, periodMs: number) {
    const sentAtMs = performance.now();
    const id = await this.inner.tryAcquire(lockId, owner, periodMs);
    this.attempts.push({ sentAtMs, owner, got: id !== null });
    if (id) {
      this.owners.set(id, owner);
      this.log.push({ atMs: performance.now(), owner, op: 'acquire' });
    }
    return id;
  }
  async renew(lockId: string, leaseId: string) {
    const owner = this.owners.get(leaseId)!;
    if (this.failRenewOf === owner) throw new Error('storage unavailable (injected)');
    const d = this.delayRenewOfMs.get(owner);
    if (d) await sleep(d);
    const r = await this.inner.renew(lockId, leaseId);
    if (r === 'renewed') this.log.push({ atMs: performance.now(), owner, op: 'renew' });
    return r;
  }
  release(lockId: string, leaseId: string) {
    return this.inner.release(lockId, leaseId);
  }
  owner(lockId: string) {
    return this.inner.owner(lockId);
  }
  close() {
    return this.inner.close();
  }
}

describe('ListenerLock (in-process store, short periods)', () => {
  const PERIOD = 300;
  const RECOVERY = 200;
  /** The store's lease clock at a third of the speed, for the tests whose point is that a holder renewing on time
   *  keeps the lock: its leases last 900 ms while renewals come 150 ms apart, so a loaded machine's late timers cannot
   *  lapse one (the crash and stop tests judge the lease's end itself, on the real clock). */
  const slowLeaseClock = () => performance.now() / 3;
  const cluster = (store: ListenerLockStore, n = 3) => {
    const events: { atMs: number; owner: string; kind: string }[] = [];
    const locks = Array.from({ length: n }, (_, i) => {
      const owner = `inst-${i + 1}`;
      return new ListenerLock({
        store, lockId: 'Host.Functions.executorTimer.Listener', owner, periodMs: PERIOD, recoveryPollingMs: RECOVERY,
        onAcquired: () => events.push({ atMs: performance.now(), owner, kind: 'acquired' }),
        onReleased: (r) => events.push({ atMs: performance.now(), owner, kind: r }),
        onError: () => {},
      });
    });
    const holders = () => locks.filter((l) => l.held).length;
    return { locks, events, holders };
  };

  it('three start at once: exactly one holds, renewing, and keeps it', async () => {
    const store = new ObservedStore(new MemoryLockStore(slowLeaseClock));
    const c = cluster(store);
    await Promise.all(c.locks.map((l) => l.start()));
    for (let i = 0; i < 15; i++) {
      expect(c.holders()).toBe(1);
      await sleep(PERIOD / 5);
    }
    expect(c.events.filter((e) => e.kind === 'acquired')).toHaveLength(1);
    expect(store.log.filter((e) => e.op === 'renew').length).toBeGreaterThanOrEqual(3);
    await Promise.all(c.locks.map((l) => l.stop()));
  });

  it('a crashed holder keeps the lock until its lease runs out; then another takes it at a recovery poll', async () => {
    const store = new ObservedStore(new MemoryLockStore());
    const c = cluster(store);
    await Promise.all(c.locks.map((l) => l.start()));
    const first = c.locks.find((l) => l.held)!;
    const firstOwner = c.events[0]!.owner;
    first.abandon(); // a crash: nothing released, nothing renewed
    const lastOwn = Math.max(...store.log.filter((e) => e.owner === firstOwner).map((e) => e.atMs));
    while (!c.events.some((e) => e.kind === 'acquired' && e.owner !== firstOwner)) await sleep(10);
    const next = c.events.find((e) => e.kind === 'acquired' && e.owner !== firstOwner)!;
    expect(next.atMs).toBeGreaterThanOrEqual(lastOwn + PERIOD - 1); // never before the lease ran out
    // … and the first poll sent once it had (the last renewal's reply + the period) takes it: judged by the polls'
    // order, not by how punctually a loaded machine's timers fired (was: ≤ period + one poll + 500 ms of the crash).
    const take = store.attempts.find((a) => a.owner !== firstOwner && a.got)!;
    expect(store.attempts.filter((a) => a.owner !== firstOwner && a.sentAtMs >= lastOwn + PERIOD && a.sentAtMs < take.sentAtMs)).toEqual([]);
    await Promise.all(c.locks.map((l) => l.stop()));
  });

  it('a graceful stop releases: another takes it at its next poll, before the lease would have run out', async () => {
    const store = new ObservedStore(new MemoryLockStore());
    const c = cluster(store, 2);
    await Promise.all(c.locks.map((l) => l.start()));
    const first = c.locks.find((l) => l.held)!;
    const firstOwner = c.events[0]!.owner;
    await sleep(RECOVERY / 2);
    await first.stop();
    const stoppedAt = performance.now();
    while (!c.events.some((e) => e.kind === 'acquired' && e.owner !== firstOwner)) await sleep(5);
    expect(c.events.find((e) => e.owner === firstOwner && e.kind === 'stopped')).toBeTruthy();
    // The first poll sent after the release takes it (was: within one poll + 100 ms of the stop, by the runner's clock).
    const take = store.attempts.find((a) => a.owner !== firstOwner && a.got)!;
    expect(take.sentAtMs).toBeGreaterThan(stoppedAt);
    expect(store.attempts.filter((a) => a.owner !== firstOwner && a.sentAtMs > stoppedAt && a.sentAtMs < take.sentAtMs)).toEqual([]);
    await Promise.all(c.locks.map((l) => l.stop()));
  });

  it('transient renew errors shorter than the lease: the holder keeps the lock and nobody else takes it', async () => {
    const store = new ObservedStore(new MemoryLockStore(slowLeaseClock));
    const c = cluster(store);
    await Promise.all(c.locks.map((l) => l.start()));
    const owner = c.events[0]!.owner;
    store.failRenewOf = owner;
    await sleep(PERIOD / 2 + 50); // one failed renewal, retried sooner
    store.failRenewOf = null;
    await sleep(PERIOD * 2);
    expect(c.events.map((e) => [e.owner, e.kind])).toEqual([[owner, 'acquired']]);
    await Promise.all(c.locks.map((l) => l.stop()));
  });

  it('a holder whose renewal stalls past the lease loses it: the listener stops, another holds it, one holder after', async () => {
    const store = new ObservedStore(new MemoryLockStore());
    const c = cluster(store, 2);
    await Promise.all(c.locks.map((l) => l.start()));
    const owner = c.events[0]!.owner;
    store.delayRenewOfMs.set(owner, PERIOD * 3); // a paused process: its renewal arrives after someone else acquired
    while (!c.events.some((e) => e.owner === owner && e.kind === 'lost')) await sleep(10);
    store.delayRenewOfMs.clear();
    const other = c.events.find((e) => e.kind === 'acquired' && e.owner !== owner)!;
    const lost = c.events.find((e) => e.owner === owner && e.kind === 'lost')!;
    expect(other.atMs).toBeLessThan(lost.atMs); // the lock moved; the old holder learns it at its renewal
    await sleep(PERIOD);
    expect(c.holders()).toBe(1);
    await Promise.all(c.locks.map((l) => l.stop()));
  });
});

describe.each(['memory', 'azurite'] as const)('ListenerLockStore contract: %s', (kind) => {
  let azurite: Azurite | null = null;
  let store: ListenerLockStore;
  const lockId = `Host.Functions.t${Date.now()}.Listener`;
  beforeAll(async () => {
    if (kind === 'memory') store = new MemoryLockStore();
    else {
      azurite = await startAzurite();
      store = await BlobLockStore.open(azurite.connectionString, 'contract-test');
    }
  }, 60_000);
  afterAll(async () => {
    await store?.close();
    await azurite?.stop();
  });

  it('acquire (creating the blob), conflict, owner, renew, lost after release + re-acquire by another, release', async () => {
    const a = await store.tryAcquire(lockId, 'inst-a', 15_000);
    expect(a).toBeTruthy();
    expect(await store.tryAcquire(lockId, 'inst-b', 15_000)).toBeNull();
    expect(await store.owner(lockId)).toBe('inst-a');
    expect(await store.renew(lockId, a!)).toBe('renewed');
    await store.release(lockId, a!);
    expect(await store.owner(lockId)).toBeNull();
    const b = await store.tryAcquire(lockId, 'inst-b', 15_000);
    expect(b).toBeTruthy();
    expect(await store.owner(lockId)).toBe('inst-b');
    expect(await store.renew(lockId, a!)).toBe('lost');
    await store.release(lockId, a!); // not ours: ignored
    expect(await store.owner(lockId)).toBe('inst-b');
    await store.release(lockId, b!);
  });

  it.runIf(kind === 'azurite')('writing the owner fails after the lease was taken: the lease is released, another acquires at once', async () => {
    const proxy = await startBlobProxy(azurite!);
    const flaky = await BlobLockStore.open(proxy.connectionString, 'contract-test');
    try {
      const id = `${lockId}.metadata`;
      await store.release(id, (await store.tryAcquire(id, 'creator', 15_000))!); // the blob exists, free
      proxy.fail = (req) => req.method === 'PUT' && /[?&]comp=metadata/.test(req.url ?? ''); // Set Blob Metadata
      await expect(flaky.tryAcquire(id, 'inst-a', 15_000)).rejects.toThrow();
      expect(proxy.failed).toBeGreaterThan(0);
      expect(await store.owner(id)).toBeNull(); // not leased: released, not left for 15 s
      const b = await store.tryAcquire(id, 'inst-b', 15_000);
      expect(b).toBeTruthy();
      expect(await store.owner(id)).toBe('inst-b');
      await store.release(id, b!);
    } finally {
      await flaky.close();
      await proxy.close();
    }
  }, 30_000);

  it.runIf(kind === 'azurite')('unreachable storage fails at start naming AzureWebJobsStorage and the command', async () => {
    await expect(BlobLockStore.open('DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=' +
      'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;', 'x'))
      .rejects.toThrow(/AzureWebJobsStorage: .* is not reachable.*npm run azurite/);
  }, 30_000);
});
