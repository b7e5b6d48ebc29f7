// The provider port: one HTTP submission per attempt. Implementations never throw for provider failures;
// they classify them (success / retryable / permanent).

export interface ProviderRequest {
  intentId: string;
  attemptNo: number;
  leaseEpoch: number;
  /** The executor partition whose lease (and epoch) this attempt runs under (issue 25; 0 with one partition).
   *  Epochs are per partition, so a provider that fences compares an epoch only with others of the same partition. */
  partition?: number;
  /** The layout generation current for `leaseEpoch` (raised by every change of the partition count): compares requests
   *  across partitions, which epochs cannot. Absent: not known (the provider applies the per-partition rule alone). */
  layoutGeneration?: number;
  payload: Record<string, unknown>;
  /** The contract's provider URL (null → the configured default). */
  url: string | null;
}

export type ProviderResult =
  | { kind: 'success'; httpStatus: number }
  | { kind: 'retryable'; httpStatus: number | null; error: string; retryAfterMs: number | null }
  | { kind: 'permanent'; httpStatus: number; error: string }
  /** Known not written: the send-by bound passed before the request went out (a stall between the gate and the
   *  socket). Never reached the provider, so it is recorded as aborted, not charged. */
  | { kind: 'notSent'; httpStatus: null; error: string };

export interface SubmitBounds {
  /** Hard bound for the whole call (already clipped to the lease deadline by the caller). */
  timeoutMs: number;
  /** The request is not written once this many ms (monotonic) have passed since `submit`: the lease may have
   *  expired meanwhile (a process stall while the connection was opening). Default: `timeoutMs`. */
  sendWithinMs?: number;
}

export interface Provider {
  submit(req: ProviderRequest, bounds: SubmitBounds): Promise<ProviderResult>;
}
