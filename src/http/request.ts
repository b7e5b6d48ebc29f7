// The framework-neutral request (functionsHost.ts adapts @azure/functions to it, tests build it directly) and the
// transport rules every handler shares. Guarantees of readJsonBody, in this order: Content-Length > 256 KiB → 413;
// content type not application/json (charset=utf-8 allowed) → 415; actual body > 256 KiB → 413; malformed JSON →
// 400. It never throws for bad input, so bad input never reaches a use-case or the store.
import { malformedJson, payloadTooLarge, unsupportedMediaType, type ApiResponse } from './problem.js';

export interface ApiRequest {
  method: string;
  /** Full URL including the query string. */
  url: string;
  headers: { get(name: string): string | null };
  /** Route parameters (`id` in `intents/{id}`, `intents/{id}/cancel`, …). */
  params: Record<string, string>;
  text(): Promise<string>;
}

export type ApiHandler = (req: ApiRequest) => Promise<ApiResponse>;

export const MAX_BODY_BYTES = 256 * 1024;

/** application/json, optionally with charset=utf-8 (any case, optionally quoted); other parameters ignored. */
export function isJsonContentType(value: string | null): boolean {
  if (value === null) return false;
  if (value === 'application/json') return true; // the usual form, without splitting
  const [type, ...params] = value.split(';').map((p) => p.trim().toLowerCase());
  if (type !== 'application/json') return false;
  return params.every((p) => !p.startsWith('charset=') || p.replace(/^charset=\s*"?|"?$/g, '') === 'utf-8');
}

type BodyResult = { ok: true; value: unknown } | { ok: false; response: ApiResponse };

/** Reads a JSON body under the size and media-type rules above; never throws for bad input. */
export async function readJsonBody(req: ApiRequest, instance: string): Promise<BodyResult> {
  const declared = req.headers.get('content-length');
  if (declared !== null && /^\s*\d+\s*$/.test(declared) && Number(declared) > MAX_BODY_BYTES) {
    return { ok: false, response: payloadTooLarge(MAX_BODY_BYTES, instance) };
  }
  const contentType = req.headers.get('content-type');
  if (!isJsonContentType(contentType)) return { ok: false, response: unsupportedMediaType(contentType, instance) };
  const text = await req.text();
  // UTF-16 units never outnumber UTF-8 bytes, so the cheap length test can only short-cut a true 413.
  if (text.length > MAX_BODY_BYTES || Buffer.byteLength(text, 'utf8') > MAX_BODY_BYTES) {
    return { ok: false, response: payloadTooLarge(MAX_BODY_BYTES, instance) };
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, response: malformedJson(instance) };
  }
}

export function parseUrl(raw: string): URL {
  return new URL(raw, 'http://localhost');
}

/** `scheme://authority/plain/path[?…]`: a path of unreserved characters and `/` only, which URL parsing
 *  leaves as it is (no dot segments, no percent-encoding); anything else goes through URL. */
const PLAIN_PATH = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\]*(\/[A-Za-z0-9\-_~/]*)(?:[?#]|$)/;

/** The request's path (problem `instance`), exactly URL's pathname. */
export function pathOf(raw: string): string {
  return PLAIN_PATH.exec(raw)?.[1] ?? parseUrl(raw).pathname;
}

/** Who asked, for the records of admin actions: the Easy Auth principal when present (else "admin"), at the
 *  instance that served the request (its holder id); at most 128 characters. */
export const requester = (req: ApiRequest, holderId: string): string =>
  `${req.headers.get('x-ms-client-principal-name') ?? 'admin'}@${holderId}`.slice(0, 128);
