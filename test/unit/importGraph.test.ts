// The import graph of src/ stays as scripts/importGraph.mjs describes it: no file-level circles (beyond the listed
// known one), every import between rooms allowed by ROOMS, so imports run down the floors except the listed
// up-floor exceptions, and each folder's README says what ROOMS says. `node scripts/importGraph.mjs` prints the report.
import { describe, expect, it } from 'vitest';
// @ts-ignore a plain module of scripts/ (no declarations)
import { KNOWN_CIRCLES, ROOMS, analyse, circlesOf, floorsOf, declaredImports, specifiersOf } from '../../scripts/importGraph.mjs';

describe('import graph of src/', () => {
  const a = analyse();
  const show = (edges: { from: string; to: string }[]) => edges.map((e) => `${e.from} → ${e.to}`);

  it('has no import circles but the known ones, and each known one still exists', () => {
    expect(a.unknownCircles).toEqual([]);
    expect(a.staleKnownCircles, 'a known circle is gone: remove it from KNOWN_CIRCLES').toEqual([]);
    expect(a.circles.length).toBe(KNOWN_CIRCLES.length);
  });

  it('every room is in ROOMS and every import between rooms is one ROOMS allows', () => {
    expect(a.unknownRooms).toEqual([]);
    expect(show(a.disallowed)).toEqual([]);
  });

  it('ROOMS allows nothing that no file imports (it stays a true description)', () => {
    expect(show(a.unused)).toEqual([]);
  });

  it('each room says, after "May import:" (a folder in its README.md, a file in its header), what ROOMS allows it', () => {
    const rooms = ROOMS as Record<string, { imports: string[]; up?: string[] }>;
    for (const [room, r] of Object.entries(rooms)) {
      expect(declaredImports(room)?.sort(), `src/${room}${room.endsWith('/') ? 'README.md' : ''}`).toEqual([...r.imports, ...(r.up ?? [])].sort());
    }
  });

  it('imports run down the floors, except the up-floor exceptions ROOMS lists', () => {
    const rooms = ROOMS as Record<string, { up?: string[] }>;
    const unlisted = a.upFloor.filter((e: { fromRoom: string; toRoom: string }) => !rooms[e.fromRoom]?.up?.includes(e.toRoom));
    expect(show(unlisted)).toEqual([]);
  });
});

describe('the checker', () => {
  it('reads every kind of import and nothing that only looks like one', () => {
    const text = [
      "import type { A } from './a.js';",
      'import {\n  b,\n  c,\n} from "../b.js";',
      "export { x } from './x.js';",
      "export type { Y } from './y.js';",
      "export * from './star.js';",
      "import './side.js';",
      "const m = await import('./dyn.js');",
      "// import z from './lineComment.js';",
      "/* import z from './blockComment.js'; */",
      "const s = \"import z from './string.js'\";",
      'const t = `from \'./template.js\' ${`nested ${"./n.js"}`} import(\'./t2.js\')`;',
      "const re = /from '.\\/regex.js'/g; const q = /[\"']/;",
      "const d = a / b; import { e } from './afterDivision.js';",
      "x.import('./method.js');",
    ].join('\n');
    expect(specifiersOf(text)).toEqual(['./a.js', '../b.js', './x.js', './y.js', './star.js', './side.js', './dyn.js', './afterDivision.js']);
  });

  it('finds circles, self-imports included', () => {
    const e = (from: string, to: string) => ({ from, to });
    expect(circlesOf([e('a', 'b'), e('b', 'c'), e('c', 'a'), e('c', 'd'), e('d', 'd'), e('e', 'a')])).toEqual([['a', 'b', 'c'], ['d']]);
  });

  it('refuses allowed imports that run in a circle', () => {
    expect(() => floorsOf({ 'a/': { imports: ['b/'] }, 'b/': { imports: ['a/'] } })).toThrow(/circle/);
  });
});
