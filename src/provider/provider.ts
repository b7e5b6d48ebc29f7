// The provider port: one HTTP submission per attempt. Implementations never throw for provider failures;
// they classify them (success / retryable / permanent).

/** Sockets per provider origin in the HTTP client's pool (httpProvider.ts); EXECUTOR_CONCURRENCY may not exceed it
 *  (src/config.ts): a call beyond it would queue inside the pool, unseen by the gate, and could be written late. */
export const PROVIDER_POOL_CONNECTIONS = 256;
export interface ProviderRequest {
  intentId: string;
  attemptNo: number;
  leaseEpoch: number;
  payload: Record<string, unknown>;
  /** The contract's provider URL (null → the configured default). */
  url: string | null;
}

export type ProviderResult =
  | { kind: 'success'; httpStatus: number }
  | { kind: 'retryable'; httpStatus: number | null; error: string; retryAfterMs: number | null }
  | { kind: 'permanent'; httpStatus: number; error: string };

export interface Provider {
  /** `timeoutMs` is the hard bound for this call (already clipped to the lease deadline by the caller). */
  submit(req: ProviderRequest, timeoutMs: number): Promise<ProviderResult>;
}
