// A small matcher for Azure Functions route templates (ASP.NET-style): literal segments (case-insensitive),
// `{name}`, optional `{name?}` (trailing segments only), constraints `{name:guid}`, `{name:int}`,
// `{name:minlength(3)}` … (several may chain: `{id:alpha:maxlength(8)}`), and a trailing catch-all
// `{*rest}`. What it does not support (defaults `{x=1}`, regex constraints, several parameters in one
// segment) fails when the route is compiled, naming the template, rather than matching wrongly.

type Check = (v: string) => boolean;

const isGuid: Check = (v) => /^[0-9a-f]{32}$/i.test(v) ||
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v.replace(/^\{(.*)\}$/, '$1'));

const intIn = (min: bigint, max: bigint): Check => (v) => /^-?\d+$/.test(v) && BigInt(v) >= min && BigInt(v) <= max;
const SIMPLE: Record<string, Check> = {
  guid: isGuid,
  int: intIn(-(2n ** 31n), 2n ** 31n - 1n),
  long: intIn(-(2n ** 63n), 2n ** 63n - 1n),
  alpha: (v) => /^[a-z]+$/i.test(v),
  bool: (v) => /^(true|false)$/i.test(v),
  decimal: (v) => /^-?\d+(\.\d+)?$/.test(v),
  double: (v) => v.trim() !== '' && Number.isFinite(Number(v)),
  float: (v) => v.trim() !== '' && Number.isFinite(Number(v)),
  datetime: (v) => !Number.isNaN(Date.parse(v)),
};
const WITH_ARG: Record<string, (n: number) => Check> = {
  minlength: (n) => (v) => v.length >= n,
  maxlength: (n) => (v) => v.length <= n,
  length: (n) => (v) => v.length === n,
  min: (n) => (v) => /^-?\d+$/.test(v) && Number(v) >= n,
  max: (n) => (v) => /^-?\d+$/.test(v) && Number(v) <= n,
};

type Segment =
  | { kind: 'literal'; value: string }
  | { kind: 'param'; name: string; optional: boolean; catchAll: boolean; checks: Check[] };

export interface CompiledRoute {
  template: string;
  /** Route parameters when `path` (without prefix, no leading slash, still URL-encoded) matches; else null. */
  match(path: string): Record<string, string> | null;
  /** For precedence: more literal segments win, then fewer optional/catch-all parameters. */
  specificity: [number, number];
}

function parseConstraint(template: string, c: string): Check {
  const simple = SIMPLE[c.toLowerCase()];
  if (simple) return simple;
  const m = /^([a-z]+)\((-?\d+)\)$/i.exec(c);
  const withArg = m ? WITH_ARG[m[1]!.toLowerCase()] : undefined;
  if (m && withArg) return withArg(Number(m[2]));
  throw new Error(`route "${template}": unsupported constraint "${c}"`);
}

function parseSegment(template: string, seg: string): Segment {
  if (!seg.includes('{') && !seg.includes('}')) return { kind: 'literal', value: seg.toLowerCase() };
  const m = /^\{(\*{1,2})?([A-Za-z_][A-Za-z0-9_]*)((?::[^:{}?=]+)*)(\?)?\}$/.exec(seg);
  if (!m) throw new Error(`route "${template}": unsupported segment "${seg}"`);
  const checks = m[3] ? m[3].slice(1).split(':').map((c) => parseConstraint(template, c)) : [];
  return { kind: 'param', name: m[2]!, optional: m[4] === '?', catchAll: m[1] !== undefined, checks };
}

export function compileRoute(template: string): CompiledRoute {
  const trimmed = template.replace(/^\/+|\/+$/g, '');
  const segments = trimmed === '' ? [] : trimmed.split('/').map((s) => parseSegment(template, s));
  segments.forEach((s, i) => {
    const rest = segments.slice(i + 1);
    if (s.kind === 'param' && s.catchAll && rest.length > 0) throw new Error(`route "${template}": catch-all must be last`);
    if (s.kind === 'param' && s.optional && rest.some((r) => r.kind === 'literal' || !r.optional)) {
      throw new Error(`route "${template}": optional parameter {${s.name}?} must be followed only by optional parameters`);
    }
  });
  const literals = segments.filter((s) => s.kind === 'literal').length;
  const loose = segments.filter((s) => s.kind === 'param' && (s.optional || s.catchAll)).length;
  return {
    template,
    specificity: [literals, -loose],
    match(path) {
      const raw = path.replace(/^\/+|\/+$/g, '');
      const parts = raw === '' ? [] : raw.split('/');
      let decoded: string[];
      try {
        decoded = parts.map((p) => decodeURIComponent(p));
      } catch {
        return null;
      }
      const params: Record<string, string> = {};
      for (let i = 0; i < segments.length; i++) {
        const s = segments[i]!;
        const value = decoded[i];
        if (s.kind === 'literal') {
          if (value === undefined || value.toLowerCase() !== s.value) return null;
          continue;
        }
        if (s.catchAll) {
          const rest = decoded.slice(i).join('/'); // a catch-all also matches nothing
          if (rest !== '' && !s.checks.every((c) => c(rest))) return null;
          if (rest !== '') params[s.name] = rest;
          return params;
        }
        if (value === undefined || value === '') {
          if (!s.optional) return null;
          continue;
        }
        if (!s.checks.every((c) => c(value))) return null;
        params[s.name] = value;
      }
      return decoded.length > segments.length ? null : params;
    },
  };
}

/** Most specific first, so `intents/latest` wins over `intents/{id}` when both match. */
export function bySpecificity(a: CompiledRoute, b: CompiledRoute): number {
  return b.specificity[0] - a.specificity[0] || b.specificity[1] - a.specificity[1];
}
