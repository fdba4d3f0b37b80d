// A seller built on the official AdCP TypeScript SDK's own server framework
// (@adcp/sdk 6.11.0, AdCP 3.0.6), used by internal/adcp/interop_test.go to
// check the Go client against a peer nobody here wrote.
//
// Usage: node internal/adcp/interop/seller.mjs
//   env BUYFLOW_INTEROP_TOKEN  bearer token the seller accepts (required)
//   env BUYFLOW_INTEROP_DELAY_MS  how long an async create stays submitted (default 300)
//   env BUYFLOW_INTEROP_WEBHOOKS=1  sign webhooks (RFC 9421, Ed25519, the framework's own
//     emitter) with a fresh key served at /.well-known/jwks.json, and post them to the
//     request's push_notification_config.url (loopback http allowed: the process must also
//     have ADCP_DECISIONING_ALLOW_HTTP_WEBHOOKS=1)
// It binds 127.0.0.1 on a free port and prints one line to stdout:
//   LISTENING http://127.0.0.1:<port>/mcp
//
// create_media_buy answers by the scenario in the request's context ("sdk", or "path" for
// the client interop test):
//   sync (default)  an inline media buy (status pending_creatives)
//   async           a background task (submitted + task_id) that completes after the delay
//                   with an active buy, read back through tasks/get or its webhook
//   async_fail      the same task, failed after the delay with PRODUCT_UNAVAILABLE
//   async_lost      async, but its webhooks are dropped before they leave (a lost webhook:
//                   only polling finds the completion)
//   error_arm       the spec's Error arm: errors[] with POLICY_VIOLATION
//   throw           a thrown AdcpError BUDGET_TOO_LOW (as is any budget under 100)
//
// GET /recorded returns what the seller saw and did, for tests that assert on the seller's
// side: creates (one per create the framework ran, replays excluded), updates, and every
// webhook attempt (url, headers, body, HTTP status, or dropped: true).
import { generateKeyPairSync } from 'node:crypto';
import {
  AdcpError,
  createAdcpServerFromPlatform,
  createIdempotencyStore,
  createInMemoryTaskRegistry,
  InMemoryStateStore,
  memoryBackend,
  serve,
  verifyApiKey,
} from '@adcp/sdk/server';

const token = process.env.BUYFLOW_INTEROP_TOKEN;
if (!token) {
  console.error('BUYFLOW_INTEROP_TOKEN is required');
  process.exit(2);
}
const delayMs = Number(process.env.BUYFLOW_INTEROP_DELAY_MS ?? '300');

const ACCOUNT = {
  id: 'acc_interop',
  name: 'Interop Account',
  status: 'active',
  operator: 'seller.interop.example',
  ctx_metadata: {},
  authInfo: { kind: 'api_key' },
};

const buys = new Map();
let seq = 0;

// What the seller saw and did (GET /recorded).
const recorded = { creates: [], updates: [], webhooks: [] };
// The webhook URLs of creates whose webhooks are dropped (scenario async_lost).
const lostURLs = new Set();

function scenarioOf(req) {
  return req.context?.sdk ?? req.context?.path ?? 'sync';
}

const webhooksOn = process.env.BUYFLOW_INTEROP_WEBHOOKS === '1';
let jwks = { keys: [] };
let webhooks;
if (webhooksOn) {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const kid = 'buyflow-interop-sdk-seller';
  const meta = { kid, alg: 'EdDSA', use: 'sig', adcp_use: 'webhook-signing' };
  jwks = { keys: [{ ...publicKey.export({ format: 'jwk' }), ...meta, key_ops: ['verify'] }] };
  webhooks = {
    signerKey: { keyid: kid, alg: 'ed25519', privateKey: { ...privateKey.export({ format: 'jwk' }), ...meta } },
    // One attempt per event is enough on loopback; a refused webhook stays refused.
    retries: { maxAttempts: 2, initialDelayMs: 200, maxDelayMs: 500 },
    // Records every attempt, and drops those of tasks whose webhooks are to be lost.
    fetch: async (url, init) => {
      const body = typeof init?.body === 'string' ? init.body : Buffer.from(init?.body ?? '').toString('utf8');
      const headers = Object.fromEntries(new Headers(init?.headers ?? {}).entries());
      let taskId;
      try {
        taskId = JSON.parse(body).task_id;
      } catch {}
      const at = Date.now();
      if (lostURLs.has(String(url))) {
        recorded.webhooks.push({ at, url: String(url), task_id: taskId, headers, body, dropped: true });
        return new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } });
      }
      const res = await fetch(url, init);
      const text = await res.clone().text();
      recorded.webhooks.push({ at, url: String(url), task_id: taskId, headers, body, status: res.status, answer: text });
      return res;
    },
  };
}

function makeBuy(req, status) {
  seq += 1;
  const id = `mb_interop_${seq}`;
  const buy = {
    media_buy_id: id,
    status,
    currency: 'USD',
    confirmed_at: new Date().toISOString(),
    revision: 1,
    packages: (req.packages ?? []).map((p, i) => ({
      package_id: `pkg_${seq}_${i}`,
      product_id: p.product_id,
      budget: p.budget,
      ...(p.context ? { context: p.context } : {}),
    })),
  };
  buys.set(id, buy);
  return buy;
}

const platform = {
  capabilities: {
    specialisms: ['sales-non-guaranteed'],
    channels: ['display', 'olv'],
    pricingModels: ['cpm'],
    config: {},
  },
  statusMappers: {},
  accounts: {
    resolution: 'explicit',
    // Inline {account_id} refs and ref-less tools (tasks/get) resolve to the
    // one test account, so the framework's tenant boundary admits polls.
    resolve: async ref => {
      if (ref && 'account_id' in ref && ref.account_id !== ACCOUNT.id) return null;
      return ACCOUNT;
    },
  },
  sales: {
    getProducts: async () => ({
      products: [
        {
          product_id: 'prod_display',
          name: 'Run of site display',
          description: 'Display on every page',
          delivery_type: 'non_guaranteed',
          format_ids: [{ id: 'display_300x250', agent_url: 'https://creative.interop.example/mcp' }],
          publisher_properties: [{ publisher_domain: 'publisher.interop.example', selection_type: 'all' }],
          pricing_options: [{ pricing_option_id: 'cpm_5', pricing_model: 'cpm', fixed_price: 5, currency: 'USD' }],
        },
      ],
    }),
    createMediaBuy: (req, ctx) => {
      const scenario = scenarioOf(req);
      const create = {
        at: Date.now(),
        scenario,
        idempotency_key: req.idempotency_key,
        operation_id: req.context?.operation_id,
        push_url: req.push_notification_config?.url,
      };
      recorded.creates.push(create);
      const total = (req.packages ?? []).reduce((s, p) => s + (p.budget ?? 0), 0);
      if (total < 100 || scenario === 'throw') {
        throw new AdcpError('BUDGET_TOO_LOW', {
          recovery: 'correctable',
          message: 'total package budget below 100',
          field: 'packages[0].budget',
        });
      }
      if (scenario === 'error_arm') {
        return Promise.resolve({
          errors: [{ code: 'POLICY_VIOLATION', message: 'the publisher declined this creative category', recovery: 'terminal' }],
        });
      }
      if (scenario.startsWith('async')) {
        if (scenario === 'async_lost' && create.push_url) lostURLs.add(create.push_url);
        const handoff = ctx.handoffToTask(async () => {
          await new Promise(r => setTimeout(r, delayMs));
          create.finished_at = Date.now();
          if (scenario === 'async_fail') {
            throw new AdcpError('PRODUCT_UNAVAILABLE', {
              recovery: 'correctable',
              message: 'the inventory sold out during review',
            });
          }
          const buy = makeBuy(req, 'active');
          create.media_buy_id = buy.media_buy_id;
          return buy;
        });
        return Promise.resolve(handoff);
      }
      const buy = makeBuy(req, 'pending_creatives');
      create.media_buy_id = buy.media_buy_id;
      return Promise.resolve(buy);
    },
    updateMediaBuy: async (buyId, patch) => {
      recorded.updates.push({ at: Date.now(), media_buy_id: buyId, canceled: patch.canceled === true, paused: patch.paused });
      const buy = buys.get(buyId);
      if (!buy) {
        throw new AdcpError('MEDIA_BUY_NOT_FOUND', { recovery: 'terminal', message: `media buy ${buyId} not found` });
      }
      if (patch.canceled === true) buy.status = 'canceled';
      else if (patch.paused === true) buy.status = 'paused';
      else if (patch.paused === false) buy.status = 'active';
      for (const up of patch.packages ?? []) {
        const pkg = buy.packages.find(p => p.package_id === up.package_id);
        if (!pkg) throw new AdcpError('PACKAGE_NOT_FOUND', { recovery: 'correctable', message: `package ${up.package_id} not found` });
        if (up.budget !== undefined) pkg.budget = up.budget;
      }
      if (patch.end_time) buy.end_time = patch.end_time;
      buy.revision += 1;
      return { media_buy_id: buyId, status: buy.status, revision: buy.revision };
    },
    syncCreatives: async creatives => creatives.map(c => ({ creative_id: c.creative_id ?? 'cr_1', action: 'created', status: 'approved' })),
    getMediaBuyDelivery: async filter => ({
      currency: 'USD',
      reporting_period: { start: filter.start_date ?? '2030-01-01', end: filter.end_date ?? '2030-01-31' },
      media_buy_deliveries: [],
    }),
    getMediaBuys: async req => ({
      media_buys: [...buys.values()]
        .filter(b => !req.media_buy_ids || req.media_buy_ids.includes(b.media_buy_id))
        .map(b => ({ ...b, total_budget: b.packages.reduce((sum, p) => sum + (p.budget ?? 0), 0) })),
    }),
  },
};

// Framework state that must outlive a single request: the SDK builds a fresh
// server per request (stateless MCP), so these are hoisted.
const idempotency = createIdempotencyStore({ backend: memoryBackend(), ttlSeconds: 86_400 });
const stateStore = new InMemoryStateStore();
const taskRegistry = createInMemoryTaskRegistry();

const server = serve(
  ({ taskStore }) =>
    createAdcpServerFromPlatform(platform, {
      name: 'buyflow-interop-seller',
      version: '0.0.1',
      taskStore,
      taskRegistry,
      stateStore,
      idempotency,
      resolveSessionKey: ctx => ctx.account?.id ?? 'anonymous',
      resolveIdempotencyPrincipal: ctx => ctx.authInfo?.clientId ?? ctx.account?.id ?? 'anonymous',
      // Strict request validation (the non-production default, made explicit):
      // every request buyflow sends is checked against the SDK's bundled
      // AdCP 3.0.6 schemas, so the interop run also proves our 3.1 requests
      // are acceptable to a 3.0 peer.
      validation: { requests: 'strict' },
      ...(webhooksOn ? { webhooks, allowPrivateWebhookUrls: true } : {}),
    }),
  {
    port: 0,
    authenticate: verifyApiKey({ keys: { [token]: { principal: 'buyflow-interop' } } }),
    // serve() listens on all interfaces; keep it from listening so we can
    // bind loopback ourselves.
    readinessCheck: () => new Promise(() => {}),
  }
);

// serve() routes only /mcp; the JWKS and the record are served in front of it.
const mcpHandlers = server.listeners('request');
server.removeAllListeners('request');
server.on('request', (req, res) => {
  const path = (req.url ?? '').split('?')[0];
  if (req.method === 'GET' && (path === '/.well-known/jwks.json' || path === '/recorded')) {
    const doc = path === '/recorded' ? recorded : jwks;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(doc));
    return;
  }
  for (const h of mcpHandlers) h.call(server, req, res);
});

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  process.stdout.write(`LISTENING http://127.0.0.1:${port}/mcp\n`);
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => server.close(() => process.exit(0)));
}
