// 019: ix_intents_status_id (status, intent_id): the API list filtered by status (GET /api/intents?status=) reads its
// page as one range of this index from the cursor, in id order, instead of walking the primary key from the oldest
// intent past every row of another status (the open intents hold the newest ids, so every settled one came first).
// Intake pays one index entry per insert (docs/benchmarks.md, "Every operation on a large table"). Additive (a new
// index no statement of a previous release names). Plain CREATE INDEX (the migration runs in one transaction, which
// CONCURRENTLY refuses): the build holds a SHARE lock on submission_intents, writes wait for it.
export const m019StatusIndex = `
CREATE INDEX IF NOT EXISTS ix_intents_status_id ON submission_intents (status, intent_id);
`;
