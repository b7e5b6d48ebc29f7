// bodyText (what the function handlers read a request body with) gives exactly what HttpRequest.text() gives:
// UTF-8, leading BOMs dropped as undici drops them, invalid bytes replaced, empty and absent bodies as ''.
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
// @ts-ignore compiled output has no declarations
import { installFunctionsCore } from '../../dist/src/local/functionsCore.js';
// @ts-ignore compiled output has no declarations
import { bodyText } from '../../dist/src/http/functionsHost.js';

installFunctionsCore();
const azf = createRequire(import.meta.url)('@azure/functions') as typeof import('@azure/functions');
const request = (bytes?: Buffer) => new azf.HttpRequest({
  method: bytes ? 'POST' : 'GET', url: 'http://localhost/api/intents', headers: { 'content-type': 'application/json' },
  ...(bytes ? { body: { bytes } } : {}),
});

describe('bodyText', () => {
  const bodies: [string, Buffer][] = [
    ['json', Buffer.from('{"payload":{"a":1}}')],
    ['multi-byte', Buffer.from('{"note":"é ü 漢字 🙂"}')],
    ['one BOM', Buffer.from('\uFEFF{"a":1}')],
    ['three BOMs', Buffer.from('\uFEFF\uFEFF\uFEFF{"a":1}')],
    ['invalid UTF-8', Buffer.from([0xff, 0xfe, 0x41, 0xc3])],
    ['empty', Buffer.alloc(0)],
    ['large', Buffer.from(`"${'x'.repeat(300_000)}"`)],
  ];
  for (const [name, bytes] of bodies) {
    it(`${name}: same as text()`, async () => {
      expect(await bodyText(request(bytes))).toBe(await request(bytes).text());
    });
  }
  it('no body: empty string', async () => {
    expect(await bodyText(request())).toBe('');
  });
});
