// 006 (SQL Server twin of the PostgreSQL m006): a filtered index in intent_id order covering the schedule
// columns, matching the rebuild's loadScheduled (status = 'scheduled' AND intent_id > @after_id ORDER BY
// intent_id): each page is an index seek with no sort. (The session ANSI settings filtered indexes need are
// pinned in pool.ts.)
export const m006ScheduledIndex = `
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_scheduled' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE INDEX ix_intents_scheduled ON submission_intents (intent_id)
    INCLUDE (status, next_attempt_at, attempt_count, max_attempts, last_modified_at) WHERE status = 'scheduled';
GO
`;
