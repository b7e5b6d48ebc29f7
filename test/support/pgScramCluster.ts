// A PostgreSQL cluster of the test's own that checks passwords: initdb in a temp dir (as the `postgres` OS user
// when running as root), TLS with a throwaway certificate for 127.0.0.1, `hostssl … scram-sha-256` as the only
// TCP rule, a free port. The machine's shared server trusts loopback, so a wrong password would go unnoticed there.
// The admin connects over the cluster's own Unix socket (trust, reachable only through the temp dir).
import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './azurite.js';

export interface ScramCluster {
  port: number;
  /** Directory of the cluster's Unix socket (trust: the superuser without a password, e.g. for psql -h). */
  socketDir: string;
  /** PEM of the self-signed certificate the server presents (CN/SAN 127.0.0.1 and localhost). */
  caPem: string;
  /** Superuser client over the Unix socket (no password). */
  admin(database?: string): Promise<pg.Client>;
  stop(): Promise<void>;
}

const BIN = process.env.PG_BIN_DIR ?? '/usr/lib/postgresql/15/bin';

/** Why no cluster can be started here (null: it can). */
export function scramClusterUnavailable(): string | null {
  try {
    execFileSync(path.join(BIN, 'initdb'), ['--version'], { stdio: 'ignore' });
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    execFileSync('psql', ['--version'], { stdio: 'ignore' });
    return null;
  } catch (e) {
    return `no initdb in ${BIN} (PG_BIN_DIR), openssl or psql: ${(e as Error).message}`;
  }
}

export async function startScramCluster(): Promise<ScramCluster> {
  const dir = mkdtempSync(path.join(tmpdir(), 'sm-pg-scram-'));
  const data = path.join(dir, 'data');
  const asRoot = userInfo().uid === 0;
  const run = (cmd: string, args: string[]) =>
    execFileSync(asRoot ? 'runuser' : cmd, asRoot ? ['-u', 'postgres', '--', cmd, ...args] : args, { stdio: 'pipe' });
  const owned = (file: string) => {
    if (asRoot) {
      const id = (name: string) => Number(execFileSync('id', [name, 'postgres']).toString().trim());
      chownSync(file, id('-u'), id('-g'));
    }
  };
  owned(dir);
  const key = path.join(dir, 'server.key');
  const crt = path.join(dir, 'server.crt');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', crt, '-days', '2',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'pipe' });
  execFileSync('chmod', ['600', key]);
  owned(key);
  owned(crt);
  run(path.join(BIN, 'initdb'), ['-D', data, '-U', 'postgres', '--auth-local=trust', '--auth-host=scram-sha-256', '-E', 'UTF8']);
  const hba = path.join(data, 'pg_hba.conf');
  writeFileSync(hba, 'local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\nhost all all all reject\n');
  owned(hba);
  const port = await freePort();
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file=${crt} -c ssl_key_file=${key} ` +
    '-c password_encryption=scram-sha-256 -c fsync=off -c max_connections=50';
  run(path.join(BIN, 'pg_ctl'), ['-D', data, '-l', path.join(dir, 'log'), '-o', opts, '-w', '-t', '60', 'start']);
  return {
    port,
    socketDir: dir,
    caPem: readFileSync(crt, 'utf8'),
    async admin(database = 'postgres') {
      const c = new pg.Client({ host: dir, port, user: 'postgres', database });
      await c.connect();
      return c;
    },
    async stop() {
      try {
        run(path.join(BIN, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
