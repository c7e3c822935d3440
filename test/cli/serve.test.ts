import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

const BIN = 'trainer/cli/bin.js';

/** `esopt serve` in a child: resolves with its --json line, then the exit once SIGTERM is sent. */
function serve(args: string[], env: NodeJS.ProcessEnv = process.env) {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--json', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const ready = new Promise<{ openaiBaseUrl: string }>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(JSON.parse(out.slice(0, out.indexOf('\n'))));
    });
    child.once('exit', (code) => reject(new Error(`serve exited ${code} before it was ready: ${err}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { ready, stop: () => (child.kill('SIGTERM'), exited) };
}

describe('esopt serve', () => {
  it('serves chat completions with --full-weights rebuild-session, the same text as with inputs', async () => {
    const texts = [];
    for (const weights of ['inputs', 'rebuild-session']) {
      const s = serve(['--model', 'tiny', '--full-weights', weights]);
      const { openaiBaseUrl } = await s.ready;
      const res = await fetch(`${openaiBaseUrl}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'base', messages: [{ role: 'user', content: 'hello' }], temperature: 0, max_tokens: 8 }),
      });
      expect(res.status).toBe(200);
      texts.push(((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0].message.content);
      expect(await s.stop()).toBe(0);
    }
    expect(texts[1]).toBe(texts[0]);
  }, 60_000);

  it('off loopback starts only with ESOPT_TOKEN of 32+ characters, and then wants it', async () => {
    const { ESOPT_TOKEN: _token, ...without } = process.env;
    for (const token of [undefined, 's'.repeat(31)]) {
      const refused = spawnSync(process.execPath, [BIN, 'serve', '--host', '0.0.0.0', '--port', '0'], { env: token === undefined ? without : { ...without, ESOPT_TOKEN: token }, encoding: 'utf8', timeout: 20_000 });
      expect(refused.status).toBe(2);
      expect(refused.stderr).toContain('at least 32 characters');
      expect(refused.stderr).toContain('--host 127.0.0.1');
    }
    const long = 't'.repeat(32);
    const s = serve(['--host', '0.0.0.0', '--model', 'tiny'], { ...without, ESOPT_TOKEN: long });
    try {
      const base = (await s.ready).openaiBaseUrl.replace('0.0.0.0', '127.0.0.1');
      const body = JSON.stringify({ model: 'base', messages: [{ role: 'user', content: 'hello' }], temperature: 0, max_tokens: 2 });
      expect((await fetch(`${base}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).status).toBe(401);
      expect((await fetch(`${base}/models`, { headers: { authorization: `Bearer ${long}` } })).status).toBe(200);
    } finally {
      expect(await s.stop()).toBe(0);
    }
  }, 60_000);

  it('names a bad --full-weights and exits 2', () => {
    const bad = spawnSync(process.execPath, [BIN, 'serve', '--full-weights', 'cached'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--full-weights');
  });
});
