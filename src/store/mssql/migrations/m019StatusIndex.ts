// 019 (SQL Server twin of the PostgreSQL m019): ix_intents_status_id (status, intent_id): the API list filtered by
// status reads its page as one seek of this index from the cursor, in id order, a key lookup per row of the page,
// instead of a scan of the clustered primary key from the oldest intent past every row of another status. Additive (a
// new index no statement of a previous release names). Offline build (ONLINE = ON is an edition feature), guarded to
// run twice.
export const m019StatusIndex = `
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_status_id' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE INDEX ix_intents_status_id ON submission_intents (status, intent_id);
GO
`;
