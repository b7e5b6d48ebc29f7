// 014 (SQL Server twin of the PostgreSQL m014): the layout generation, raised by 1 by a change's fenced switch and
// sent to the provider beside partition and epoch (docs/provider-fencing.md). Additive: NOT NULL with a default, so
// existing rows get 0 and a previous release keeps working on this schema.
export const m014LayoutGeneration = `
IF COL_LENGTH(N'submission_manager_partition_count', N'layout_generation') IS NULL
  ALTER TABLE submission_manager_partition_count ADD layout_generation bigint NOT NULL
    CONSTRAINT df_partition_count_layout_generation DEFAULT (0);
GO
`;
