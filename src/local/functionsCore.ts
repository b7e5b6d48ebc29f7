// A stand-in for `@azure/functions-core`, the module the Azure Functions Node worker supplies to
// `@azure/functions`. Installing it before the function files load makes their top-level
// `app.http(...)` / `app.timer(...)` / `app.hook.*` calls register here, exactly as they would with the
// real worker — so the local host (and tests) serve what is registered, not a hand-written list.
import { createRequire } from 'node:module';
import Module from 'node:module';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export interface BindingMetadata {
  type: string;
  direction: 'in' | 'out';
  name?: string;
  route?: string;
  methods?: string[];
  authLevel?: string;
  schedule?: string;
  runOnStartup?: boolean;
  useMonitor?: boolean;
  [k: string]: unknown;
}

export interface RegisteredFunction {
  name: string;
  bindings: Record<string, BindingMetadata>;
  handler: (...args: unknown[]) => unknown;
  trigger: BindingMetadata;
}

export interface Registry {
  functions: RegisteredFunction[];
  hooks: { name: string; callback: (ctx: unknown) => unknown }[];
}

const registry: Registry = { functions: [], hooks: [] };
let installed = false;

const coreApi = {
  version: '4.0.0-local',
  hostVersion: '4.0.0-local',
  setProgrammingModel(_model: unknown) {},
  getProgrammingModel() {
    return undefined;
  },
  registerFunction(metadata: { name: string; bindings: Record<string, BindingMetadata> }, handler: RegisteredFunction['handler']) {
    const trigger = Object.values(metadata.bindings).find((b) => /trigger$/i.test(b.type));
    if (!trigger) throw new Error(`function ${metadata.name} has no trigger binding`);
    if (registry.functions.some((f) => f.name === metadata.name)) throw new Error(`duplicate function name ${metadata.name}`);
    registry.functions.push({ name: metadata.name, bindings: metadata.bindings, handler, trigger });
    return { dispose() {} };
  },
  registerHook(name: string, callback: (ctx: unknown) => unknown) {
    const entry = { name, callback };
    registry.hooks.push(entry);
    return { dispose: () => registry.hooks.splice(registry.hooks.indexOf(entry), 1) };
  },
  log(_level: string, _category: string, message: string) {
    if (process.env.LOCAL_HOST_DEBUG) console.error(`[functions-core] ${message}`);
  },
};

/** Make `require('@azure/functions-core')` (from inside @azure/functions) return the stand-in. */
export function installFunctionsCore(): Registry {
  if (installed) return registry;
  installed = true;
  const proto = Module.prototype as unknown as { require: (id: string) => unknown };
  const original = proto.require;
  proto.require = function patched(this: unknown, id: string) {
    if (id === '@azure/functions-core') return coreApi;
    return original.call(this, id);
  };
  // @azure/functions may already be cached in test-mode if something imported it first: that is a bug
  // in the caller's ordering, so say so rather than silently registering nothing.
  const req = createRequire(import.meta.url);
  const cached = Object.keys(req.cache).some((k) => k.includes(`${path.sep}@azure${path.sep}functions${path.sep}`));
  if (cached) throw new Error('installFunctionsCore() must run before @azure/functions is first loaded');
  return registry;
}

/** Resolve package.json `main` (a glob like `dist/functions/*.js`) the way the worker does. */
export function functionFiles(projectRoot: string): string[] {
  const pkg = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { main?: string };
  if (!pkg.main) throw new Error('package.json has no "main" (expected a glob of the compiled function files)');
  const dir = path.join(projectRoot, path.dirname(pkg.main));
  const pattern = new RegExp(`^${path.basename(pkg.main).replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);
  return readdirSync(dir).filter((f) => pattern.test(f)).sort().map((f) => path.join(dir, f));
}

/** Install the stand-in, then import every function file; returns what registered. */
export async function loadRegisteredFunctions(projectRoot: string): Promise<Registry> {
  const reg = installFunctionsCore();
  for (const file of functionFiles(projectRoot)) await import(pathToFileURL(file).href);
  return reg;
}
