// 011: instance heartbeats (issue 25). One row per live process, upserted every INSTANCE_HEARTBEAT_MS with database
// time: `every-instance` timers count the live rows for their fair share of the partitions (src/lease/fairShare.ts)
// and the dashboard lists them. partitions_led is the ascending comma list of the partitions the instance leads
// ('' = none), written by the instance itself: a report, not a lease (the lease rows alone decide who executes).
// A graceful stop deletes its row; rows of instances that died are pruned by the others. The last_seen_at index
// serves the live-window scan and the prune.
export const m011Instances = `
CREATE TABLE IF NOT EXISTS submission_manager_instances (
  holder_id       varchar(128) PRIMARY KEY,
  version         varchar(64)  NOT NULL,
  roles           varchar(64)  NOT NULL,
  started_at      timestamptz  NOT NULL,
  last_seen_at    timestamptz  NOT NULL,
  partitions_led  varchar(400) NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS ix_instances_last_seen ON submission_manager_instances (last_seen_at);
`;
