// 007: the provider protection state the leader last recorded (circuit breaker), one row per lease name, so
// that any instance (the dashboard, /api/execution readers) can show it without asking the leader.
export const m007ProviderState = `
CREATE TABLE IF NOT EXISTS submission_manager_provider_state (
  lease_name  varchar(64)  PRIMARY KEY,
  breaker     varchar(16)  NOT NULL CHECK (breaker IN ('closed', 'half_open', 'open')),
  changed_at  timestamptz  NOT NULL,
  holder_id   varchar(128) NOT NULL
);
`;
