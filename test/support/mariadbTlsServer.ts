// A MariaDB server of the test's own that requires TLS, like Azure Database for MySQL: mariadb-install-db in a
// temp dir (as the `mysql` OS user when running as root), a throwaway certificate for 127.0.0.1,
// require_secure_transport ON, a free port. The machine's shared MariaDB has TLS disabled, and an Entra token
// must never travel unencrypted, so the app's verified-TLS options need a server like this.
// The admin connects as root over the server's own Unix socket (no password, reachable only through the temp dir).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { freePort } from './azurite.js';

export interface MariadbTlsServer {
  port: number;
  /** The server's Unix socket (root without a password, e.g. for the mysql client's -S). */
  socket: string;
  caPem: string;
  admin(): Promise<mysql.Connection>;
  stop(): Promise<void>;
}

const INSTALL = process.env.MARIADB_INSTALL_DB ?? '/usr/bin/mariadb-install-db';
const SERVER = process.env.MARIADBD ?? '/usr/sbin/mariadbd';

/** Why no server can be started here (null: it can). */
export function mariadbTlsUnavailable(): string | null {
  for (const bin of [INSTALL, SERVER]) if (!existsSync(bin)) return `no ${bin} (MARIADB_INSTALL_DB / MARIADBD)`;
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return null;
  } catch {
    return 'no openssl';
  }
}

export async function startMariadbTls(timeoutMs = 30_000): Promise<MariadbTlsServer> {
  const dir = mkdtempSync(path.join(tmpdir(), 'sm-mariadb-tls-'));
  const asRoot = userInfo().uid === 0;
  const as = (args: string[]) => (asRoot ? ['runuser', ['-u', 'mysql', '--', ...args]] as const : [args[0]!, args.slice(1)] as const);
  const owned = (file: string) => {
    if (asRoot) chownSync(file, Number(execFileSync('id', ['-u', 'mysql']).toString()), Number(execFileSync('id', ['-g', 'mysql']).toString()));
  };
  owned(dir);
  const key = path.join(dir, 'key.pem');
  const crt = path.join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', crt, '-days', '2',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'pipe' });
  owned(key);
  owned(crt);
  const data = path.join(dir, 'data');
  const [icmd, iargs] = as([INSTALL, '--no-defaults', `--datadir=${data}`, '--auth-root-authentication-method=normal', '--skip-test-db']);
  execFileSync(icmd, [...iargs], { stdio: 'pipe' });
  const port = await freePort();
  const socket = path.join(dir, 'sock');
  const [scmd, sargs] = as([SERVER, '--no-defaults', `--datadir=${data}`, `--socket=${socket}`, `--port=${port}`,
    '--bind-address=127.0.0.1', `--pid-file=${path.join(dir, 'pid')}`, `--log-error=${path.join(dir, 'err.log')}`,
    `--ssl-cert=${crt}`, `--ssl-key=${key}`, '--require-secure-transport=ON', '--skip-name-resolve',
    '--innodb-buffer-pool-size=16M', '--innodb-log-file-size=8M']);
  const child: ChildProcess = spawn(scmd, [...sargs], { stdio: 'ignore' });
  const admin = () => mysql.createConnection({ socketPath: socket, user: 'root' });
  const stop = async () => {
    try {
      execFileSync('mysqladmin', ['-S', socket, '-uroot', 'shutdown'], { stdio: 'ignore' });
    } catch {
      child.kill('SIGKILL');
    }
    if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await (await admin()).end();
      break;
    } catch (e) {
      if (Date.now() > deadline || child.exitCode !== null) {
        const log = existsSync(path.join(dir, 'err.log')) ? readFileSync(path.join(dir, 'err.log'), 'utf8').slice(-2_000) : '';
        await stop();
        throw new Error(`MariaDB did not start: ${(e as Error).message}\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { port, socket, caPem: readFileSync(crt, 'utf8'), admin, stop };
}
