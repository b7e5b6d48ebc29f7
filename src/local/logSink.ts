// Where the local host's pino JSON logs go: a file (default `.data/host.log`) or stderr, so stdout stays
// readable (where it listens, leadership changes, demo provider calls). Records emitted inside an
// invocation reach the InvocationContext's log handler first (as in Azure), which tags them with the
// invocation id and function name and writes them to the same sink.
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import path from 'node:path';
import { format } from 'node:util';

export interface LogSink {
  write(line: string): void;
  /** Human description for the start banner. */
  readonly where: string;
  close(): Promise<void>;
}

export function openLogSink(file: string | null): LogSink {
  if (file === null) {
    return { where: 'stderr', write: (line) => void process.stderr.write(line.endsWith('\n') ? line : `${line}\n`), close: async () => {} };
  }
  mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const stream: WriteStream = createWriteStream(file, { flags: 'a' });
  stream.on('error', (e) => process.stderr.write(`log file ${file}: ${e.message}\n`));
  return {
    where: file,
    write: (line) => void stream.write(line.endsWith('\n') ? line : `${line}\n`),
    close: () => new Promise<void>((r) => stream.end(() => r())),
  };
}

const LEVELS: Record<string, string> = {
  trace: 'trace', debug: 'debug', information: 'info', warning: 'warn', error: 'error', critical: 'fatal', none: 'info',
};

/** An InvocationContext logHandler that writes to `sink`: pino JSON lines keep their fields and gain the
 *  invocation's id and function name; plain `context.log(...)` calls become JSON lines of the same shape. */
export function invocationLogHandler(sink: LogSink, invocationId: string, functionName: string, holderId: string) {
  let tag: string | undefined; // built on the first record: most invocations log nothing
  return (level: string, ...args: unknown[]): void => {
    tag ??= `"invocation_id":${JSON.stringify(invocationId)},"function":${JSON.stringify(functionName)}`;
    const first = args[0];
    if (args.length === 1 && typeof first === 'string' && first.startsWith('{') && first.endsWith('}')) {
      sink.write(first === '{}' ? `{${tag}}` : `{${tag},${first.slice(1)}`);
      return;
    }
    sink.write(JSON.stringify({
      level: LEVELS[level] ?? 'info', time: new Date().toISOString(), holder_id: holderId,
      invocation_id: invocationId, function: functionName, msg: format(...args),
    }));
  };
}
