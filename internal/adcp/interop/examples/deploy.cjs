// The deployment the official @adcp/sdk 6.11.0 example sellers leave to whoever runs them,
// for a run on loopback next to buyflow's local stack. It is preloaded (node --require) before
// an example runs from the installed package (node_modules/@adcp/sdk/examples, never copied
// here), and changes nothing of the example's own code: it wraps the two framework calls
// every example makes, createAdcpServerFromPlatform and serve, in the module cache.
//
//   - Loopback webhook URLs: the framework refuses a push_notification_config.url on 127/8
//     (an SSRF guard) unless allowPrivateWebhookUrls is set; buyflow's local API is on
//     loopback, so every create would be refused without it. The process must also run with
//     ADCP_DECISIONING_ALLOW_HTTP_WEBHOOKS=1 (http, not https).
//   - Signed webhooks (BUYFLOW_EXAMPLE_WEBHOOKS=1): the framework's own RFC 9421 emitter with a
//     fresh Ed25519 key, published at /.well-known/jwks.json. Without it an example sends no
//     webhooks at all (hello_seller_adapter_guaranteed wires none) and buyers must poll.
//   - Loopback only: serve() listens on every interface; it is kept from listening and the
//     server is bound to 127.0.0.1 on the example's port instead, which then prints
//       LISTENING http://127.0.0.1:<port>/mcp
//   - A record of what the seller did (GET /recorded), for tests that assert on the seller's
//     side: every update_media_buy its platform ran (media_buy_id, canceled, paused, and the
//     status it answered or the error code it threw) and every webhook attempt.
'use strict';
const Module = require('node:module');
const { generateKeyPairSync } = require('node:crypto');

const recorded = { updates: [], webhooks: [] };

let jwks = { keys: [] };
let webhooks;
if (process.env.BUYFLOW_EXAMPLE_WEBHOOKS === '1') {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const kid = 'buyflow-sdk-example-seller';
  const meta = { kid, alg: 'EdDSA', use: 'sig', adcp_use: 'webhook-signing' };
  jwks = { keys: [{ ...publicKey.export({ format: 'jwk' }), ...meta, key_ops: ['verify'] }] };
  webhooks = {
    signerKey: { keyid: kid, alg: 'ed25519', privateKey: { ...privateKey.export({ format: 'jwk' }), ...meta } },
    retries: { maxAttempts: 2, initialDelayMs: 200, maxDelayMs: 500 },
    fetch: async (url, init) => {
      const body = typeof init?.body === 'string' ? init.body : Buffer.from(init?.body ?? '').toString('utf8');
      let taskId;
      try {
        taskId = JSON.parse(body).task_id;
      } catch {}
      const res = await fetch(url, init);
      recorded.webhooks.push({ at: Date.now(), url: String(url), task_id: taskId, body, status: res.status });
      return res;
    },
  };
}

// recordUpdates wraps the platform's update_media_buy so the record shows what reached it;
// once: serve() builds a server per request from the same platform.
const recording = Symbol('buyflow.recording');
function recordUpdates(platform) {
  const sales = platform?.sales;
  if (!sales || typeof sales.updateMediaBuy !== 'function' || sales[recording]) return;
  sales[recording] = true;
  const update = sales.updateMediaBuy;
  sales.updateMediaBuy = async (buyId, patch, ctx) => {
    const row = { at: Date.now(), media_buy_id: buyId, canceled: patch?.canceled === true, paused: patch?.paused };
    recorded.updates.push(row);
    try {
      const out = await update(buyId, patch, ctx);
      row.status = out?.status;
      return out;
    } catch (err) {
      row.error_code = err?.code ?? String(err);
      throw err;
    }
  };
}

function wrap(sdk) {
  const createAdcpServerFromPlatform = (platform, opts) => {
    recordUpdates(platform);
    return sdk.createAdcpServerFromPlatform(platform, {
      ...opts,
      allowPrivateWebhookUrls: true,
      ...(webhooks ? { webhooks } : {}),
    });
  };
  const serve = (factory, opts) => {
    const port = Number(opts?.port ?? process.env.PORT ?? 0);
    const server = sdk.serve(factory, { ...opts, readinessCheck: () => new Promise(() => {}) });
    // serve() routes only /mcp: the key and the record are served in front of it.
    const mcp = server.listeners('request');
    server.removeAllListeners('request');
    server.on('request', (req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (req.method === 'GET' && (path === '/.well-known/jwks.json' || path === '/recorded')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(path === '/recorded' ? recorded : jwks));
        return;
      }
      for (const h of mcp) h.call(server, req, res);
    });
    server.listen(port, '127.0.0.1', () => {
      process.stdout.write(`LISTENING http://127.0.0.1:${server.address().port}/mcp\n`);
    });
    for (const sig of ['SIGTERM', 'SIGINT']) {
      process.on(sig, () => server.close(() => process.exit(0)));
    }
    return server;
  };
  // The module's exports are getters: the overrides are own properties of an object that
  // inherits every other export.
  return Object.create(sdk, {
    createAdcpServerFromPlatform: { value: createAdcpServerFromPlatform, enumerable: true },
    serve: { value: serve, enumerable: true },
  });
}

let wrappedSDK;
const load = Module._load;
Module._load = function (request, parent, isMain) {
  const m = load.call(this, request, parent, isMain);
  if (request !== '@adcp/sdk/server') return m;
  wrappedSDK ??= wrap(m);
  return wrappedSDK;
};
