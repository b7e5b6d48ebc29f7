// The gate the executor consults before dequeueing and before each provider call.
import type { LeaseToken } from '../store/ports.js';

export interface LeaderGate {
  /** The current token if this instance leads and is before its local deadline; otherwise null. */
  requireLeader(): LeaseToken | null;
  /** True iff this instance still leads with exactly this epoch (checked just before a provider call). */
  ensureEpoch(epoch: number): boolean;
  /** Milliseconds left before the local deadline (0 when not leading). */
  remainingMs(): number;
  /** Drop leadership now (fence failed, SQL error): nothing new may start. */
  drop(reason: string, sqlError?: unknown): void;
}
