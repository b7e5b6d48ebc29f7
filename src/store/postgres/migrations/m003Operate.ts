// 003: operate — the newest-attempt / attempts-per-minute index the cluster overview and the dashboard read.
export const m003Operate = `
CREATE INDEX IF NOT EXISTS ix_attempts_started_at ON submission_attempts (started_at);
`;
