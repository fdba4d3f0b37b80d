// A seller built on the official AdCP TypeScript SDK's own server framework
// (@adcp/sdk 6.11.0, AdCP 3.0.6), used by internal/adcp/interop_test.go to
// check the Go client against a peer nobody here wrote.
//
// Usage: node internal/adcp/interop/seller.mjs
//   env BUYFLOW_INTEROP_TOKEN  bearer token the seller accepts (required)
//   env BUYFLOW_INTEROP_DELAY_MS  how long an async create stays submitted (default 300)
// It binds 127.0.0.1 on a free port and prints one line to stdout:
//   LISTENING http://127.0.0.1:<port>/mcp
//
// create_media_buy answers synchronously unless the request's context says
// {"path":"async"}; then it hands off to a background task (status
// submitted + task_id) that completes after the delay and is read back
// through the framework's tasks/get tool.
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

function makeBuy(req, status) {
  seq += 1;
  const id = `mb_interop_${seq}`;
  const buy = {
    media_buy_id: id,
    status,
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
      const total = (req.packages ?? []).reduce((s, p) => s + (p.budget ?? 0), 0);
      if (total < 100) {
        throw new AdcpError('BUDGET_TOO_LOW', {
          recovery: 'correctable',
          message: 'total package budget below 100',
          field: 'packages[0].budget',
        });
      }
      if (req.context?.path === 'async') {
        return Promise.resolve(
          ctx.handoffToTask(async () => {
            await new Promise(r => setTimeout(r, delayMs));
            return makeBuy(req, 'active');
          })
        );
      }
      return Promise.resolve(makeBuy(req, 'pending_creatives'));
    },
    updateMediaBuy: async (buyId, patch) => {
      const buy = buys.get(buyId);
      if (!buy) {
        throw new AdcpError('MEDIA_BUY_NOT_FOUND', { recovery: 'terminal', message: `media buy ${buyId} not found` });
      }
      if (patch.canceled === true) buy.status = 'canceled';
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
      media_buys: [...buys.values()].filter(b => !req.media_buy_ids || req.media_buy_ids.includes(b.media_buy_id)),
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
    }),
  {
    port: 0,
    authenticate: verifyApiKey({ keys: { [token]: { principal: 'buyflow-interop' } } }),
    // serve() listens on all interfaces; keep it from listening so we can
    // bind loopback ourselves.
    readinessCheck: () => new Promise(() => {}),
  }
);

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  process.stdout.write(`LISTENING http://127.0.0.1:${port}/mcp\n`);
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => server.close(() => process.exit(0)));
}
