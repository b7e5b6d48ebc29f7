// 006: an index matching the rebuild's loadScheduled (WHERE status = 'scheduled' AND intent_id > $1 ORDER BY
// intent_id LIMIT n): a partial index in intent_id order covering the schedule columns, so each page is an
// index range scan with no sort (before: a scan of ix_intents_due plus a sort on every page).
export const m006ScheduledIndex = `
CREATE INDEX IF NOT EXISTS ix_intents_scheduled ON submission_intents (intent_id)
  INCLUDE (next_attempt_at, attempt_count, max_attempts, last_modified_at) WHERE status = 'scheduled';
`;
