// The state of a suite of in-process apps on one dialect, written once: a fresh context and a recording provider
// before each test; after it, the test's loops stopped, then its apps closed, then the provider (hooks run as a
// stack: this teardown runs before the context closes). Tests assign `apps` and `loops` as they go.
import type { App } from '../../src/app.js';
import type { DialectContext, DialectHarness } from './dialects.js';
import { useDialectContext } from './dialectFixture.js';
import { startRecordingProvider, type RecordingProvider } from './recordingProvider.js';

export interface AppsState {
  readonly ctx: DialectContext;
  readonly provider: RecordingProvider;
  /** Closed after the test (after `loops` stopped). */
  apps: App[];
  /** Stopped after the test, before the apps close. */
  loops: { stop(): Promise<void> } | null;
}

export function useApps(dialect: DialectHarness, answer?: RecordingProvider['answer']): AppsState {
  let ctx: DialectContext | undefined;
  let provider: RecordingProvider | undefined;
  const state: AppsState = {
    get ctx() { return ctx!; },
    get provider() { return provider!; },
    apps: [],
    loops: null,
  };
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    provider = await startRecordingProvider(answer);
  }, async () => {
    await state.loops?.stop();
    state.loops = null;
    for (const a of state.apps.splice(0)) await a.close();
    await provider?.close();
    provider = undefined;
  });
  return state;
}
