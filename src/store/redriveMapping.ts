// Row ↔ domain mapping of the redrive tables, shared by both dialects (same column names).
import type { RedriveRecord, RedriveResult, RedriveSelector } from './redrivePorts.js';
import { num } from './rowMapping.js';

export interface RedrivenDbRow {
  requested_at: Date;
  intent_id: string | null;
  attempts_before: number | string | null;
  max_attempts: number | string | null;
}

export const toRedriveResult = (redriveId: string, rows: RedrivenDbRow[]): RedriveResult => ({
  redriveId,
  requestedAt: rows[0]!.requested_at,
  redriven: rows.filter((r) => r.intent_id !== null)
    .map((r) => ({ intentId: r.intent_id!, attemptsBefore: num(r.attempts_before), maxAttempts: num(r.max_attempts) })),
});

export interface RedriveRecordDbRow {
  redrive_id: string;
  requested_at: Date;
  requested_by: string;
  reason: string | null;
  selector: string;
  redriven: number | string;
}

export const toRedriveRecord = (r: RedriveRecordDbRow): RedriveRecord => ({
  redriveId: r.redrive_id,
  requestedAt: r.requested_at,
  requestedBy: r.requested_by,
  reason: r.reason,
  selector: r.selector,
  redriven: num(r.redriven),
});

/** The selector as recorded (ISO instants; ids or filter). */
export const selectorText = (s: RedriveSelector): string => JSON.stringify(s.ids !== null
  ? { ids: s.ids, limit: s.limit }
  : { status: 'failed', failedFrom: s.failedFrom?.toISOString() ?? null, failedTo: s.failedTo?.toISOString() ?? null,
      errorContains: s.errorContains, limit: s.limit });
