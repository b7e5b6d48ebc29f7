// The fencing invariant as a checker over the commit-ordered audit sequence: no fenced write of epoch e
// may carry a sequence number greater than the acquire event of any epoch > e.
export interface AuditEntry { seq: number; leaseEpoch: number; action: string }
export interface AcquireEntry { seq: number; leaseEpoch: number; event: string }

export function staleWrites(audit: AuditEntry[], events: AcquireEntry[]): string[] {
  const acquires = events.filter((e) => e.event === 'acquired');
  const violations: string[] = [];
  for (const w of audit) {
    const newer = acquires.find((a) => a.leaseEpoch > w.leaseEpoch && a.seq < w.seq);
    if (newer) violations.push(`write seq ${w.seq} (${w.action}, epoch ${w.leaseEpoch}) committed after epoch ${newer.leaseEpoch} was acquired at seq ${newer.seq}`);
  }
  return violations;
}
