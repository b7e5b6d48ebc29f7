// A TokenCredential stand-in for the app's managed identity: each getToken hands out a new short-lived random
// "token" after `rotate` made it the database user's only valid password, as if Entra had issued it and the
// server accepted nothing older. Only the credential differs from production; pool, token cache and driver
// options are the app's own.
import { randomBytes } from 'node:crypto';
import type { AccessToken, TokenCredential } from '@azure/identity';

export class RotatingCredential implements TokenCredential {
  /** `mark`: what `rotate` returned, a server-side watermark (a connection opened after it used a later token). */
  readonly issued: Array<{ token: string; mark: number; scope: string }> = [];

  constructor(private readonly rotate: (token: string) => Promise<number>, private readonly lifetimeMs: number) {}

  async getToken(scopes: string | string[]): Promise<AccessToken> {
    const token = `tok-${randomBytes(16).toString('hex')}`;
    const mark = await this.rotate(token);
    this.issued.push({ token, mark, scope: ([] as string[]).concat(scopes).join(' ') });
    return { token, expiresOnTimestamp: Date.now() + this.lifetimeMs };
  }

  /** Resolves once `count` tokens have been issued (the cache refreshed count − 1 times). */
  async waitForIssued(count: number, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.issued.length < count) {
      if (Date.now() > deadline) throw new Error(`only ${this.issued.length} of ${count} tokens issued in ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/** Drive `request` from `workers` loops until stopped; every failure is kept (the tests expect none). */
export function steadyLoad(request: () => Promise<void>, workers = 2) {
  let stopped = false;
  const failures: unknown[] = [];
  let ok = 0;
  const loops = Array.from({ length: workers }, async () => {
    while (!stopped) {
      try {
        await request();
        ok++;
      } catch (e) {
        failures.push(e);
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  });
  return {
    async stop() {
      stopped = true;
      await Promise.all(loops);
      return { ok, failures };
    },
  };
}
