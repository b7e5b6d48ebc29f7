// pino JSON logs. Secrets and payload bodies never go to info level; SQL errors are logged by message/code.
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

export function createLogger(level: string, destination?: DestinationStream, base?: Record<string, unknown>): Logger {
  return pino(
    {
      level,
      base: base ?? null,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}

/** A logger that drops everything (tests that do not read logs). */
export const silentLogger: Logger = pino({ level: 'silent' });

/** The loggable shape of a SQL/driver error: message and code, never parameters. */
export function sqlErrorField(e: unknown): { message: string; code?: string } | undefined {
  if (e === undefined || e === null) return undefined;
  const err = e as { message?: unknown; code?: unknown };
  return {
    message: typeof err.message === 'string' ? err.message : String(e),
    ...(typeof err.code === 'string' ? { code: err.code } : {}),
  };
}
