// The layout generation this executor's current epoch sends to the provider (X-Layout-Generation,
// docs/provider-fencing.md). Read once per epoch, after its acquire (REBUILD, after the fenced orphan recovery) and
// before any start of that epoch. Why that is the generation of the epoch: only a change's switch raises it, and the
// switch is fenced by every partition lease, so it commits only after the changer took ours, i.e. after our epoch
// ended; every provider call follows a fenced start under our epoch that succeeded after the read, which proves our
// epoch (so no switch) lasted from the acquire to past the read. A read after a switch (a deposed leader) yields a
// newer generation, but then no start of ours succeeds, so it is never sent.

export class EpochLayout {
  private read: (() => Promise<number>) | null = null;
  private current: { epoch: number; generation: number } | null = null;

  /** Where the generation is read (the partition store's layout); unset: no generation is sent. */
  readFrom(read: () => Promise<number>): void {
    this.read = read;
  }

  /** Read the generation for `epoch` (throws on an SQL failure: the caller steps down, as for any leader read). */
  async readFor(epoch: number): Promise<void> {
    if (!this.read) return;
    const generation = await this.read();
    this.current = { epoch, generation };
  }

  /** The generation read for `epoch`; undefined when none was (no reader, or another epoch's): sent without it. */
  generationOf(epoch: number): number | undefined {
    return this.current?.epoch === epoch ? this.current.generation : undefined;
  }

  /** Leadership lost: the next epoch reads its own. */
  reset(): void {
    this.current = null;
  }
}
