// The share of the cluster-wide provider limits one process may use (issue 25): PROVIDER_RATE_LIMIT_PER_SEC and
// PROVIDER_MAX_IN_FLIGHT hold for the cluster, and each partition carries a fixed part of them, so a process's share
// is the sum of the parts of the partitions it leads now. A partition has one leader at a time (its lease), so the
// shares of all processes add up to the cluster limits without any process knowing the others:
// - rate: each partition R / P; a process leading n partitions gets R × n / P (exact: the rates add up to R);
// - in flight: partition k gets floor(M / P), plus one for k < M mod P (the parts add up to exactly M);
//   a process gets the sum over the partitions it leads, but never less than 1 while it leads any: with M < P some
//   partitions carry no permit, and a leader of only such partitions still sends one call at a time, so the cluster
//   may then have up to M + (leaders of only permit-less partitions) in flight. M ≥ P keeps the cap exact.
// With one partition the share is the configured limits themselves (nothing changes).
// Hand-offs keep the sums: a partition stops counting for its process from the moment it starts handing back (drain,
// fair-share hand-back, a count change's drain, shutdown), and its lease is released only once the process's calls in
// flight fit the share of the partitions it keeps (fitsShare), so the next leader's share never adds to calls still
// out under the old one.
// May import: nothing (a leaf; limits.ts's GuardSettings is structurally the same `Limits`).

export interface Limits {
  /** Calls per second; 0 = unlimited. */
  ratePerSec: number;
  /** Calls in flight; 0 = unlimited. */
  maxInFlight: number;
}

/** Partition k's fixed part of the cluster's in-flight cap `maxInFlight` over `partitions` partitions. */
export function partitionInFlightQuota(maxInFlight: number, partitions: number, k: number): number {
  return Math.floor(maxInFlight / partitions) + (k < maxInFlight % partitions ? 1 : 0);
}

/** A process's share, and its led partitions' own parts of the cap together (`parts`): each part at least 1, so
 *  with M < P they exceed the share; the room their waiting attempts may hold (CallSlots). 0 when leading nothing or
 *  the cap is unlimited; the cap itself with one partition. */
export interface Share extends Limits {
  parts: number;
}

/** Partition k's own part of the cap as its permits count it: its quota, at least 1 (0: unlimited or one partition). */
export function ownPart(cluster: Limits, partitions: number, k: number): number {
  return partitions > 1 && cluster.maxInFlight > 0 ? Math.max(1, partitionInFlightQuota(cluster.maxInFlight, partitions, k)) : 0;
}

/**
 * The limits a process leading the partitions `led` (of `partitions`) may use, out of the cluster's `cluster`.
 * Unlimited (0) stays unlimited. A process leading nothing gets the smallest partition's part (floored at 1 in
 * flight): it sends nothing then (only leaders ask the guard), and the value is never 0, which would read as unlimited.
 */
export function shareOf(cluster: Limits, partitions: number, led: readonly number[]): Share {
  if (partitions <= 1) return { ratePerSec: cluster.ratePerSec, maxInFlight: cluster.maxInFlight, parts: cluster.maxInFlight };
  const ks = led.length > 0 ? led : [partitions - 1];
  let inFlight = 0;
  for (const k of ks) inFlight += partitionInFlightQuota(cluster.maxInFlight, partitions, k);
  let parts = 0;
  for (const k of led) parts += ownPart(cluster, partitions, k);
  return {
    ratePerSec: cluster.ratePerSec > 0 ? (cluster.ratePerSec * ks.length) / partitions : 0,
    maxInFlight: cluster.maxInFlight > 0 ? Math.max(1, inFlight) : 0,
    parts,
  };
}

/**
 * The release condition: may a process holding `inFlight` permits let a partition go, keeping the partitions `kept`
 * (led, not handing back) of `partitions`? Only when its calls fit their share; keeping nothing, only with none in
 * flight. An unlimited cap (0) always fits.
 */
export function fitsShare(inFlight: number, cluster: Limits, partitions: number, kept: readonly number[]): boolean {
  if (cluster.maxInFlight <= 0) return true;
  if (kept.length === 0) return inFlight === 0;
  return inFlight <= shareOf(cluster, partitions, kept).maxInFlight;
}
