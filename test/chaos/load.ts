// The load generator: POSTs intents to random instances (also to a stopped or dying one: its callers time
// out, as a load balancer's would) and records every answer. 201/200 = accepted: the intent must exist and
// end terminal. Some requests replay an accepted key (must answer 200 with the same intent id), some
// intents are cancelled (a 200 cancel must end `cancelled`), a few carry mode "permanent" (provider 422).
// With `partitionKeys` (issue 25, --partitions > 1) a share of intents carries one of a few partitionKeys, each key
// submitted one at a time (the next only after the previous was answered), so the checker knows their order.
import type { ChaosCluster } from './cluster.js';
import type { Rng } from './rng.js';

export interface LoadOptions {
  ratePerSec: number; maxInFlight: number; replayRate: number; cancelRate: number; permanentRate: number; maxAttempts: number;
  /** Share of intents allowed a single attempt (0: none, and no random draw, so seeded runs stay as they were):
   *  an attempt charged but never sent then fails its intent, which the checker catches. */
  lowBudgetRate?: number;
  /** Issue 25: this many partitionKeys per run (0 or absent: none, and no draw, so P = 1 runs stay as they were). */
  partitionKeys?: number;
  /** Share of intents that carry a partitionKey (when one is free: not awaiting its previous submit's answer). */
  keyedRate?: number;
}

export const DEFAULT_LOAD: LoadOptions = { ratePerSec: 12, maxInFlight: 32, replayRate: 0.05, cancelRate: 0.04, permanentRate: 0.04, maxAttempts: 25 };

export type Answer = number | 'timeout' | 'error';

export interface Accepted {
  key: string; n: number; mode: string; intentId: string; status: number; at: number; maxAttempts?: number;
  /** Issue 25: the submitted partitionKey, and when the submit was sent (the previous of its key was answered before). */
  partitionKey?: string; sentAt?: number;
}
export interface ReplayRecord { key: string; expectedId: string; answer: Answer; intentId: string | null }
export interface CancelRecord { intentId: string; answer: Answer }

const REQUEST_TIMEOUT_MS = 4_000;

async function call(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ answer: Answer; intentId: string | null }> {
  try {
    const r = await fetch(url, {
      method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      headers: { 'content-type': 'application/json', ...headers },
    });
    const text = await r.text();
    let intentId: string | null = null;
    try {
      intentId = (JSON.parse(text) as { intentId?: string }).intentId ?? null;
    } catch { /* problem+json or empty */ }
    return { answer: r.status, intentId };
  } catch (e) {
    const name = (e as Error).name;
    return { answer: name === 'TimeoutError' || name === 'AbortError' ? 'timeout' : 'error', intentId: null };
  }
}

export class LoadGenerator {
  readonly accepted = new Map<string, Accepted>();
  readonly replays: ReplayRecord[] = [];
  readonly cancels: CancelRecord[] = [];
  readonly answers = new Map<string, number>();
  sent = 0;
  private inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private n = 0;
  /** partitionKeys whose submit is awaiting its answer. */
  private readonly keysBusy = new Set<string>();

  /** `keyRng`: its own stream (which intents carry a key, which key), so the main draws are as without keys. */
  constructor(private readonly cluster: ChaosCluster, private readonly rng: Rng, private readonly runTag: string,
    private readonly o: LoadOptions = DEFAULT_LOAD, private readonly keyRng: Rng | null = null) {}

  start(): void {
    this.timer = setInterval(() => this.fire(), Math.max(5, Math.round(1000 / this.o.ratePerSec)));
  }

  /** Stop sending; wait for every request already sent to be answered or time out. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  private api(): string | null {
    const withHost = this.cluster.slots.filter((s) => s.host);
    return withHost.length ? this.rng.pick(withHost).host!.api : null;
  }

  private track(p: Promise<void>): void {
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  private count(a: Answer): void {
    const k = String(a);
    this.answers.set(k, (this.answers.get(k) ?? 0) + 1);
  }

  private fire(): void {
    if (this.inFlight.size >= this.o.maxInFlight) return;
    const api = this.api();
    if (!api) return;
    const done = [...this.accepted.values()];
    if (done.length > 0 && this.rng.chance(this.o.replayRate)) {
      const prev = this.rng.pick(done);
      this.track(this.replay(api, prev));
      return;
    }
    const n = ++this.n;
    const key = `${this.runTag}-k${n}`;
    const mode = this.rng.chance(this.o.permanentRate) ? 'permanent' : 'ok';
    const cancelAfter = this.rng.chance(this.o.cancelRate) ? this.rng.int(0, 600) : null;
    const maxAttempts = this.o.lowBudgetRate && this.rng.chance(this.o.lowBudgetRate) ? 1 : this.o.maxAttempts;
    this.track(this.submit(api, key, n, mode, cancelAfter, maxAttempts, this.pickPartitionKey()));
  }

  /** A free partitionKey for this intent, or none. */
  private pickPartitionKey(): string | undefined {
    const r = this.keyRng;
    if (!r || !this.o.partitionKeys || !r.chance(this.o.keyedRate ?? 0.3)) return undefined;
    const pk = `${this.runTag}-pk${r.int(0, this.o.partitionKeys - 1)}`;
    return this.keysBusy.has(pk) ? undefined : pk;
  }

  private body(n: number, mode: string, maxAttempts: number, partitionKey?: string) {
    return { payload: { n, mode, run: this.runTag }, maxAttempts, ...(partitionKey === undefined ? {} : { partitionKey }) };
  }

  private async submit(api: string, key: string, n: number, mode: string, cancelAfter: number | null, maxAttempts: number, partitionKey?: string): Promise<void> {
    this.sent++;
    const sentAt = Date.now();
    if (partitionKey !== undefined) this.keysBusy.add(partitionKey);
    const r = await call(`${api}/intents`, this.body(n, mode, maxAttempts, partitionKey), { 'idempotency-key': key })
      .finally(() => partitionKey !== undefined && this.keysBusy.delete(partitionKey));
    this.count(r.answer);
    if ((r.answer === 201 || r.answer === 200) && r.intentId) {
      this.accepted.set(key, {
        key, n, mode, intentId: r.intentId, status: r.answer, at: Date.now(), maxAttempts, ...(partitionKey === undefined ? {} : { partitionKey, sentAt }),
      });
      if (cancelAfter !== null) {
        await new Promise((res) => setTimeout(res, cancelAfter));
        const target = this.api() ?? api;
        const c = await call(`${target}/intents/${r.intentId}/cancel`, {});
        this.cancels.push({ intentId: r.intentId, answer: c.answer });
      }
    }
  }

  private async replay(api: string, prev: Accepted): Promise<void> {
    const r = await call(`${api}/intents`, this.body(prev.n, prev.mode, prev.maxAttempts ?? this.o.maxAttempts, prev.partitionKey), { 'idempotency-key': prev.key });
    this.replays.push({ key: prev.key, expectedId: prev.intentId, answer: r.answer, intentId: r.intentId });
  }
}
