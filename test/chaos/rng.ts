// Seeded randomness for the campaign: the same seed gives the same fault schedule, load mix and provider
// answers (the timing of real processes still varies run to run).
export interface Rng {
  /** [0, 1) */
  next(): number;
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
  weighted<T extends string>(weights: Record<T, number>): T;
}

/** mulberry32: tiny, fast, good enough for schedules. */
export function createRng(seed: number): Rng {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  const rng: Rng = {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: (items) => items[Math.floor(next() * items.length)]!,
    chance: (p) => next() < p,
    weighted(weights) {
      const entries = Object.entries(weights) as [keyof typeof weights, number][];
      const total = entries.reduce((s, [, w]) => s + w, 0);
      let x = next() * total;
      for (const [k, w] of entries) {
        if ((x -= w) < 0) return k;
      }
      return entries[entries.length - 1]![0];
    },
  };
  return rng;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
