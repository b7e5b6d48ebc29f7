// 012: the provider holds every process observes (issue 25, EXECUTOR_PARTITIONS > 1): when the breaker a leader opened
// closes again (open_until: changed_at + its cool-down; NULL unless open) and until when a 429/503 Retry-After paused
// the provider (paused_until; only ever moved later). Database time; the other processes read them at every
// SCHEDULE_REFRESH_INTERVAL_MS and hold back too (src/provider/clusterGuard.ts). Nullable: existing rows stay valid.
export const m012ProviderHolds = `
ALTER TABLE submission_manager_provider_state ADD COLUMN IF NOT EXISTS open_until timestamptz NULL;
ALTER TABLE submission_manager_provider_state ADD COLUMN IF NOT EXISTS paused_until timestamptz NULL;
`;
