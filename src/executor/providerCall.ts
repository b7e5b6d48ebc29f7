// One attempt's provider call: the gate just before it (leadership, lease left, no pause in a control read at most one
// refresh interval old; an attempt whose call was not sent is aborted, and its guard permit goes back), the call
// clipped to the lease deadline, its result for the guard and the execution state.
import type { Clock } from '../lease/clock.js';
import type { LeaseManager } from '../lease/leaseManager.js';
import type { ProviderPermits } from '../provider/partitionPermits.js';
import type { Provider, ProviderResult } from '../provider/provider.js';
import { aborted, decide } from '../provider/retryPolicy.js';
import type { AttemptCompletion, StartedAttempt } from '../store/intentPorts.js';
import type { LeaseToken } from '../store/ports.js';
import type { ExecutionState } from './executionState.js';
import type { ExecutorOps } from './executorOps.js';
import type { StallWatch } from './stallWatch.js';
import type { EpochLayout } from './epochLayout.js';
import type { ExecutorSettings } from './tickSummary.js';

/** A provider call with less time than this before the lease deadline is not sent (aborted instead); one whose
 *  request would be written with less than half of it left is dropped unsent by the HTTP client (a stall after the gate). */
const MIN_CALL_MS = 100;
/** A call that failed without an HTTP status this long past its own timeout ran while this process stalled. */
const STALL_MS = 500;
/** A call's timer starts from the event loop's cached time, up to a few ms before ours: a timeout may end that early. */
const TIMER_SLACK_MS = 25;

/** What a provider call uses, and nothing more (built once by the executor). */
export interface ProviderCallDeps {
  provider: Provider;
  settings: Pick<ExecutorSettings, 'providerTimeoutMs' | 'partition'>;
  clock: Clock;
  random: () => number;
  /** The lease left: the call is clipped to it, and not sent with less than MIN_CALL_MS. */
  lease: Pick<LeaseManager, 'remainingMs'>;
  guard: ProviderPermits | null;
  /** Stalls of this process while calls are out (a timeout they caused is not the provider's failure). */
  stalls: StallWatch;
  /** mayStart: a pause read after the attempt was started holds its call too (the gate aborts it); freshControl: the
   *  read it rests on began within one refresh interval (re-read after a stall). */
  ops: Pick<ExecutorOps, 'blockedNotLeader' | 'mayStart' | 'freshControl' | 'staleControlHeld'>;
  /** Where the attempt's completion is recorded, to be written under the fence. */
  state: Pick<ExecutionState, 'record'>;
  /** The layout generation of the token's epoch (absent or unread: the request carries none). */
  layout?: Pick<EpochLayout, 'generationOf'>;
}

/** A ready attempt's call, which the guard's beginCall let out (ExecutionState.sendReady): stopped at its gate, its
 *  permit goes back as begun. `stopped`: why the caller's batch sends nothing more (null: it may), asked after the
 *  control read too.
 *  `grantedAtMs`: when its guard permit was taken (a provider hold begun since then keeps it unsent; ProviderGuard). */
export async function callProvider(d: ProviderCallDeps, token: LeaseToken, a: StartedAttempt, leading: () => boolean,
  stopped: () => string | null, grantedAtMs: number): Promise<void> {
  const { lease, settings: s, clock, random } = d;
  const record = (c: AttemptCompletion) => d.state.record({ ...c, attemptEpoch: token.leaseEpoch });
  const release = () => d.guard?.release(1, grantedAtMs, true); // not sent after all: the permit and its call's place go back
  // Without fresh flags a pause recorded since may be unread: not sent (aborted, no attempt used), the permit goes back.
  const stale = (reason: string) => {
    d.ops.staleControlHeld('send');
    release();
    return record(aborted(a, reason));
  };
  let fresh: boolean;
  try {
    fresh = await d.ops.freshControl(); // no SQL unless the flags are older than one refresh interval
  } catch {
    return stale('control read failed');
  }
  if (!fresh) return stale('no control read answered within one refresh interval'); // two late reads in a row
  const leaseLeftMs = lease.remainingMs();
  const timeoutMs = Math.min(s.providerTimeoutMs, leaseLeftMs);
  if (!leading() || timeoutMs < MIN_CALL_MS) {
    d.ops.blockedNotLeader();
    release(); // not sent: the permit goes back
    return record(aborted(a, 'leadership lost before the provider call'));
  }
  if (!d.ops.mayStart()) { // paused since this attempt was started: nothing goes out after the pause is read
    release();
    return record(aborted(a, 'execution paused before the provider call'));
  }
  // A drain or handover the control read just brought, or a provider hold begun while it ran: nothing goes out.
  const hold = d.guard?.holdNow(grantedAtMs) ?? null;
  const stop = stopped() ?? (hold === null ? null : `provider calls held (${hold})`);
  if (stop !== null) {
    release();
    return record(aborted(a, stop));
  }
  const t = clock.nowMs();
  const unwatch = d.stalls.watch();
  let result: ProviderResult;
  let durationMs = 0;
  try {
    const layoutGeneration = d.layout?.generationOf(token.leaseEpoch);
    result = await d.provider.submit(
      { intentId: a.intentId, attemptNo: a.attemptNo, leaseEpoch: token.leaseEpoch, partition: s.partition ?? 0,
        ...(layoutGeneration === undefined ? {} : { layoutGeneration }), payload: a.contract.payload, url: a.contract.provider.url },
      { timeoutMs, sendWithinMs: leaseLeftMs - MIN_CALL_MS / 2 },
    );
    durationMs = clock.nowMs() - t;
  } catch (e) {
    // Not known whether the call went out: a retryable attempt, not an abort.
    result = { kind: 'retryable', httpStatus: null, error: `internal error: ${(e as Error).message}`, retryAfterMs: null };
  }
  // A timeout or socket error that surfaced long after the call's own timeout, or after a call that ran for less
  // than its timeout because this process stalled meanwhile (the timer fired on time after a pause), is our stall,
  // not the provider's failure: it must not open the breaker (a short pause would otherwise stop every call for a
  // cool-down: 30 s by default).
  const elapsed = clock.nowMs() - t;
  const lost = d.stalls.stalledMs(t, t + elapsed);
  unwatch();
  if (result.kind === 'notSent') { // not written: the permit goes back, and decide() records it as aborted
    d.ops.blockedNotLeader();
    release();
    return record(decide(result, { ...a, durationMs: 0 }, a.contract.retry, random));
  }
  const noAnswer = result.kind === 'retryable' && result.httpStatus === null;
  const stalled = noAnswer && (elapsed > timeoutMs + STALL_MS || (lost > 0 && elapsed - lost < timeoutMs));
  // Nor is a timeout the lease cut short (the call had less than PROVIDER_TIMEOUT_MS): the provider was not given its time.
  const cutShort = noAnswer && timeoutMs < s.providerTimeoutMs && elapsed >= timeoutMs - TIMER_SLACK_MS;
  if (stalled || cutShort) d.guard?.onInconclusive(grantedAtMs);
  else d.guard?.onResult(result, grantedAtMs);
  record(decide(result, { ...a, durationMs }, a.contract.retry, random));
}
