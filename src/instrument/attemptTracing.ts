// Attempt spans without touching the executor: the composition root wraps the execution store and the
// provider. The fenced start returns each attempt's contract, whose `trace.traceparent` (the submit span) is
// remembered per attempt; the provider call of that attempt then runs inside `withAttemptSpan`, linked to the
// submit, so the HTTP provider's traceparent header is the attempt span's. Entries leave the map when the
// call is made or the attempt is completed (an attempt aborted before its call), so it holds at most the
// attempts in flight.
import type { ExecutionStore } from '../store/intentPorts.js';
import type { Provider } from '../provider/provider.js';
import { withAttemptSpan } from '../observability/tracing.js';

const key = (intentId: string, attemptNo: number) => `${intentId}#${attemptNo}`;

export function traceAttempts(store: ExecutionStore, provider: Provider): { store: ExecutionStore; provider: Provider } {
  const submitOf = new Map<string, string | null>();
  return {
    store: {
      rebuildStart: (graceMs) => store.rebuildStart(graceMs),
      loadScheduled: (afterId, limit) => store.loadScheduled(afterId, limit),
      refreshPage: (cursor, limit, graceMs) => store.refreshPage(cursor, limit, graceMs),
      fencedRecoverOrphans: (token) => store.fencedRecoverOrphans(token),
      async fencedStartAttempts(token, requests) {
        const out = await store.fencedStartAttempts(token, requests);
        if (out.kind === 'ok') for (const a of out.value) submitOf.set(key(a.intentId, a.attemptNo), a.contract.trace?.traceparent ?? null);
        return out;
      },
      async fencedCompleteAttempts(token, completions) {
        for (const c of completions) submitOf.delete(key(c.intentId, c.attemptNo));
        return store.fencedCompleteAttempts(token, completions);
      },
    },
    provider: {
      submit(req, bounds) {
        const k = key(req.intentId, req.attemptNo);
        const submit = submitOf.get(k);
        submitOf.delete(k);
        return withAttemptSpan(req, submit, () => provider.submit(req, bounds), (r) => ({ kind: r.kind, httpStatus: r.httpStatus }));
      },
    },
  };
}
