// Microsoft Entra access tokens used as database passwords (Azure Database for PostgreSQL / MySQL flexible
// servers). The server checks a token only when a connection authenticates, so pooled connections outlive
// their token; each NEW connection needs a valid one. EntraTokenSource keeps one cached and refreshes it
// before it expires (in the background, so no connection waits on Entra), without touching the pool.
import type { AccessToken, TokenCredential } from '@azure/identity';

/** The Entra resource of Azure Database for PostgreSQL and MySQL (both "OSS RDBMS"). */
export const OSS_RDBMS_SCOPE = 'https://ossrdbms-aad.database.windows.net/.default';

export interface EntraTokenOptions {
  scope?: string;
  /** Refresh this long before expiry (default 5 min, capped at half the token's lifetime). */
  refreshBeforeMs?: number;
  /** Retry delay after a failed background refresh (default 10 s; the cached token is used meanwhile). */
  retryMs?: number;
  onRefreshError?: (e: unknown) => void;
}

/** The app's identity: a user-assigned managed identity by client id (Azure), the credential the composition
 *  root uses unless a test injects its own. Loaded lazily: local backends never load @azure/identity. */
export async function managedIdentityCredential(clientId: string): Promise<TokenCredential> {
  const { ManagedIdentityCredential } = await import('@azure/identity');
  return new ManagedIdentityCredential({ clientId });
}

export class EntraTokenSource {
  private cached: AccessToken | null = null;
  private fetching: Promise<AccessToken> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly scope: string;
  private readonly refreshBeforeMs: number;
  private readonly retryMs: number;

  constructor(private readonly credential: TokenCredential, private readonly opts: EntraTokenOptions = {}) {
    this.scope = opts.scope ?? OSS_RDBMS_SCOPE;
    this.refreshBeforeMs = opts.refreshBeforeMs ?? 5 * 60_000;
    this.retryMs = opts.retryMs ?? 10_000;
  }

  /** A token valid now: the cached one, or (none yet, or it expired) a fresh one. Throws if Entra fails. */
  async token(): Promise<string> {
    if (this.cached && this.cached.expiresOnTimestamp > Date.now()) return this.cached.token;
    return (await this.fetch()).token;
  }

  /** The cached token, synchronously (drivers that read a password without awaiting); null before the first. */
  current(): string | null {
    return this.cached && this.cached.expiresOnTimestamp > Date.now() ? this.cached.token : null;
  }

  /** Stop the background refresh (pool closed). */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private fetch(): Promise<AccessToken> {
    this.fetching ??= (async () => {
      try {
        const t = await this.credential.getToken(this.scope);
        if (!t?.token) throw new Error(`no Entra token for ${this.scope}`);
        this.cached = t;
        this.schedule(t);
        return t;
      } finally {
        this.fetching = null;
      }
    })();
    return this.fetching;
  }

  /** Next refresh: the credential's refreshAfter hint, else refreshBeforeMs (at most half the lifetime) early. */
  private schedule(t: AccessToken): void {
    if (this.closed) return;
    const now = Date.now();
    const lifetime = t.expiresOnTimestamp - now;
    const at = t.refreshAfterTimestamp ?? t.expiresOnTimestamp - Math.min(this.refreshBeforeMs, lifetime / 2);
    this.arm(Math.max(0, at - now));
  }

  private arm(delayMs: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.fetch().catch((e: unknown) => {
        this.opts.onRefreshError?.(e);
        // Keep the cached token (still valid until its expiry) and try again soon.
        if (!this.closed) this.arm(this.retryMs);
      });
    }, delayMs);
    this.timer.unref(); // never keeps the process alive
  }
}
