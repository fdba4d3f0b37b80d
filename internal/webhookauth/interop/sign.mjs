// sign.mjs signs a sample AdCP webhook with the official @adcp/sdk
// webhook-signing code (signWebhook from @adcp/sdk/signing/client) and
// prints {url, method, headers, body, jwks} as JSON on stdout. The Go test
// TestInteropADCPSDK verifies the result with webhook.Verifier.
//
// Usage: node sign.mjs <url> [ed25519|ecdsa-p256-sha256]
//
// With "verify" as the first argument it instead reads the same JSON shape
// from stdin (produced by the Go signer, plus "now") and verifies it with
// the SDK's verifyWebhookSignature, printing {"ok":true} or the error code.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { signWebhook } from '@adcp/sdk/signing/client';
import { verifyWebhookSignature } from '@adcp/sdk/signing/server';

async function verify() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const byKid = new Map(input.jwks.keys.map((k) => [k.kid, k]));
  const replay = {
    async isCapHit() { return false; },
    async has() { return false; },
    async insert() { return 'ok'; },
  };
  const revocation = { async isRevoked() { return false; } };
  try {
    const res = await verifyWebhookSignature(
      { method: input.method, url: input.url, headers: input.headers, body: input.body },
      {
        jwks: { resolve: async (kid) => byKid.get(kid) ?? null },
        replayStore: replay,
        revocationStore: revocation,
        now: () => input.now,
      },
    );
    process.stdout.write(JSON.stringify({ ok: true, keyid: res.keyid }) + '\n');
  } catch (err) {
    process.stdout.write(JSON.stringify({ ok: false, code: err.code ?? String(err) }) + '\n');
  }
}

function sign(url, alg) {
  const { publicKey, privateKey } = alg === 'ecdsa-p256-sha256'
    ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
    : generateKeyPairSync('ed25519');
  const kid = `sdk-interop-${alg}`;
  const pub = publicKey.export({ format: 'jwk' });
  const jwk = {
    ...pub,
    kid,
    alg: alg === 'ed25519' ? 'EdDSA' : 'ES256',
    use: 'sig',
    key_ops: ['verify'],
    adcp_use: 'webhook-signing',
  };
  const body = JSON.stringify({
    idempotency_key: `whk_${randomUUID()}`,
    task_id: 'task_456',
    operation_id: 'op_abc',
    task_type: 'create_media_buy',
    status: 'completed',
    timestamp: new Date().toISOString(),
    result: { media_buy_id: 'mb_001', note: 'café ☃' },
  });
  const request = { method: 'POST', url, headers: { 'Content-Type': 'application/json' }, body };
  const signed = signWebhook(request, { keyid: kid, alg, privateKey: privateKey.export({ format: 'jwk' }) });
  process.stdout.write(JSON.stringify({
    url,
    method: 'POST',
    headers: signed.headers,
    body,
    jwks: { keys: [jwk] },
    signature_base: signed.signatureBase,
  }) + '\n');
}

const [mode, alg] = process.argv.slice(2);
if (mode === 'verify') {
  await verify();
} else {
  sign(mode ?? 'https://buyer.example.com/adcp/webhook/op_abc', alg ?? 'ed25519');
}
