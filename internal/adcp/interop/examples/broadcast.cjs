// Serves the official @adcp/sdk 6.11.0 example BroadcastTvSeller (the class of
// examples/decisioning-platform-broadcast-tv.ts, loaded from the installed package, never
// copied here). The example ships the class only; this is the server around it, as the SDK's
// own examples build theirs (hello_seller_adapter_guaranteed.ts): framework state hoisted so
// that it outlives a request, bearer auth. Run it with deploy.cjs preloaded and tsx:
//
//   node --require ./deploy.cjs --import tsx ./broadcast.cjs
//     env BUYFLOW_EXAMPLE_TOKEN  the bearer token it accepts (required)
//     env PORT                   its port (default: a free one)
'use strict';
const path = require('node:path');
const {
  createAdcpServerFromPlatform,
  createIdempotencyStore,
  createInMemoryTaskRegistry,
  InMemoryStateStore,
  memoryBackend,
  serve,
  verifyApiKey,
} = require('@adcp/sdk/server');

const token = process.env.BUYFLOW_EXAMPLE_TOKEN;
if (!token) {
  console.error('BUYFLOW_EXAMPLE_TOKEN is required');
  process.exit(2);
}
// The package's exports map hides examples/: it sits beside dist/ in the package root.
const root = path.resolve(path.dirname(require.resolve('@adcp/sdk')), '..', '..');
const { BroadcastTvSeller } = require(path.join(root, 'examples', 'decisioning-platform-broadcast-tv.ts'));

const platform = new BroadcastTvSeller();
const idempotency = createIdempotencyStore({ backend: memoryBackend(), ttlSeconds: 86_400 });
const stateStore = new InMemoryStateStore();
const taskRegistry = createInMemoryTaskRegistry();

serve(
  ({ taskStore }) =>
    createAdcpServerFromPlatform(platform, {
      name: 'broadcast-tv-seller',
      version: '1.0.0',
      taskStore,
      taskRegistry,
      stateStore,
      idempotency,
      resolveSessionKey: ctx => ctx.account?.id ?? 'anonymous',
    }),
  { port: Number(process.env.PORT ?? 0), authenticate: verifyApiKey({ keys: { [token]: { principal: 'buyflow' } } }) }
);
