// 014: the layout generation (docs/provider-fencing.md): a number on the count row that a change's fenced switch
// raises by 1, sent to the provider beside partition and epoch (X-Layout-Generation) so a request made under an
// older layout compares as older whatever partition it names. Additive: a default of 0, existing rows stay valid and
// a previous release (which never names the column) keeps working on this schema.
export const m014LayoutGeneration = `
ALTER TABLE submission_manager_partition_count ADD COLUMN IF NOT EXISTS layout_generation bigint NOT NULL DEFAULT 0;
`;
