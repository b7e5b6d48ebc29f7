// What the operations, partitions, health, metrics, redrive and dashboard handlers call: ports and read models only,
// built by the composition root (the App satisfies it). Nothing here reaches into the executor or the lease algorithm.
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Logger } from '../observability/logger.js';
import type { MetricsRegistry } from '../observability/metrics.js';
import type { Stores } from '../store/stores.js';
import type { ClusterViewCache } from './clusterView.js';

export interface HttpContext {
  config: { lease: { name: string }; partitions: { count: number; stuckSteps: number }; instances: { liveWindowMs: number } };
  logger: Logger;
  stores: Pick<Stores, 'intents' | 'ops' | 'redrive' | 'insights' | 'instances' | 'partitions' | 'lease'>;
  /** This instance's own lease state (its role says nothing about the cluster on Flex: see `cluster`). */
  lease: Pick<LeaseManager, 'holderId' | 'status'>;
  /** This instance's lease state per partition (partition k at index k; index 0 is `lease`). */
  partitionLeases(): Pick<LeaseManager, 'status'>[];
  /** The cluster's leader as SQL holds it (cached ≤ 1 s). */
  cluster: Pick<ClusterViewCache, 'get'>;
  /** This instance's series, rendered as Prometheus text. */
  metricsRegistry: Pick<MetricsRegistry, 'renderPrometheus'>;
  /** Intents in this instance's schedule (0 on followers). */
  scheduleSize(): number;
}
