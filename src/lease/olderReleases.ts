// The live instances (instances registry, within INSTANCE_LIVE_WINDOW_MS) that run a release older than count changes
// need (COUNT_CHANGE_MIN_VERSION): a change is neither requested (409) nor switched while any is live.
import type { InstanceStore } from '../store/instancePorts.js';
import { COUNT_CHANGE_MIN_VERSION, isOlderRelease } from '../config.js';

export async function liveOlderReleases(instances: Pick<InstanceStore, 'listLive'>, liveWindowMs: number):
Promise<{ holderId: string; version: string }[]> {
  const { instances: live } = await instances.listLive(liveWindowMs);
  return live.filter((i) => isOlderRelease(i.version, COUNT_CHANGE_MIN_VERSION)).map((i) => ({ holderId: i.holderId, version: i.version }));
}
