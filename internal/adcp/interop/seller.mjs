// A seller built on the official AdCP TypeScript SDK's own server framework
// (@adcp/sdk 6.11.0, AdCP 3.0.6), used by internal/adcp/interop_test.go to
// check the Go client against a peer nobody here wrote.
//
// Usage: node internal/adcp/interop/seller.mjs
//   env BUYFLOW_INTEROP_TOKEN  bearer token the seller accepts (required unless OAuth is on)
//   env BUYFLOW_INTEROP_OAUTH_CLIENT_ID, BUYFLOW_INTEROP_OAUTH_CLIENT_SECRET  require OAuth 2.0
//     instead: the seller runs its own authorization server on another loopback port (RFC 8414
//     metadata and a client credentials token endpoint that checks this client, and mints 60 s
//     JWTs for the resource asked, RFC 8707, with the SDK's own test authorization server) and
//     the SDK's serve() verifies bearer JWTs (verifyBearer: issuer, audience = this MCP URL,
//     scope adcp:buy), publishes RFC 9728 protected-resource metadata and names it in the
//     WWW-Authenticate of every 401. Scenario token_expires (below) makes the token of the
//     first create_media_buy with a given idempotency key expire as it arrives.
//   env BUYFLOW_INTEROP_SIGNING=1  require signed create_media_buy (RFC 9421, the AdCP
//     request-signing profile) with the SDK's own verifier (signedRequests: its preTransport
//     answers an unsigned or badly signed create 401 WWW-Authenticate: Signature
//     error="request_signature_*"), declared in get_adcp_capabilities.request_signing. The
//     buyer's keys come from the JWKS URL set by POST /signing {"jwks_url": ...} (the buyer's
//     stack starts after the seller); {"revoked_kids": [...]} revokes keys, as a seller that
//     rotates to reject a buyer's old key does. Refused requests are recorded too.
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
//   token_expires   (OAuth only) sync, but the first attempt's token is refused as expired
//
// GET /recorded returns what the seller saw and did, for tests that assert on the seller's
// side: creates (one per create the framework ran, replays excluded), updates, and every
// webhook attempt (url, headers, body, HTTP status, or dropped: true); with OAuth also every
// token grant (grants: client, resource, scope, the token) and every refused request
// (auth_refusals: why, and the tool and idempotency key of a refused tools/call).
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { createTestAuthorizationServer } from '@adcp/sdk/compliance-fixtures';
import { HttpsJwksResolver, InMemoryReplayStore, InMemoryRevocationStore } from '@adcp/sdk/signing/server';
import {
  AdcpError,
  AuthError,
  createAdcpServerFromPlatform,
  extractBearerToken,
  tagAuthenticatorNeedsRawBody,
  verifyBearer,
  createIdempotencyStore,
  createInMemoryTaskRegistry,
  InMemoryStateStore,
  memoryBackend,
  serve,
  verifyApiKey,
} from '@adcp/sdk/server';

const token = process.env.BUYFLOW_INTEROP_TOKEN;
const oauthClient = process.env.BUYFLOW_INTEROP_OAUTH_CLIENT_ID;
const oauthSecret = process.env.BUYFLOW_INTEROP_OAUTH_CLIENT_SECRET;
if (!token && !(oauthClient && oauthSecret)) {
  console.error('BUYFLOW_INTEROP_TOKEN, or BUYFLOW_INTEROP_OAUTH_CLIENT_ID and _SECRET, are required');
  process.exit(2);
}
const delayMs = Number(process.env.BUYFLOW_INTEROP_DELAY_MS ?? '300');
const signingOn = process.env.BUYFLOW_INTEROP_SIGNING === '1';

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
const recorded = { creates: [], updates: [], webhooks: [], grants: [], auth_refusals: [], signed: [] };
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

// OAuth: the authorization server (its own loopback port) and the authenticator serve() runs
// before any request reaches MCP.
const TOKEN_SECONDS = 60;
const SCOPE = 'adcp:buy';
let oauth;
if (oauthClient) {
  const front = createServer();
  await new Promise(resolve => front.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${front.address().port}`;
  // The SDK's fixture signs the JWTs and serves their JWKS; this front is the server a
  // client talks to, so that the token endpoint checks the client and records each grant.
  const as = await createTestAuthorizationServer({ issuer, tokenLifetimeSeconds: TOKEN_SECONDS });
  const json = (res, status, doc) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(doc));
  };
  front.on('request', (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/.well-known/oauth-authorization-server') {
      return json(res, 200, {
        issuer,
        token_endpoint: `${issuer}/token`,
        jwks_uri: as.jwksUri,
        grant_types_supported: ['client_credentials'],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
        response_types_supported: ['token'],
        scopes_supported: [SCOPE],
      });
    }
    if (req.method !== 'POST' || path !== '/token') return json(res, 404, { error: 'not_found' });
    let body = '';
    req.on('data', c => (body += c));
    req.on('end', async () => {
      const form = new URLSearchParams(body);
      let id = form.get('client_id');
      let secret = form.get('client_secret');
      const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '');
      if (basic) {
        const [u, p] = Buffer.from(basic[1], 'base64').toString('utf8').split(':');
        [id, secret] = [decodeURIComponent(u), decodeURIComponent(p ?? '')];
      }
      if (form.get('grant_type') !== 'client_credentials') return json(res, 400, { error: 'unsupported_grant_type' });
      if (id !== oauthClient || secret !== oauthSecret) return json(res, 401, { error: 'invalid_client' });
      const resource = form.get('resource');
      if (!resource) return json(res, 400, { error: 'invalid_target', error_description: 'resource (RFC 8707) is required' });
      const scope = form.get('scope') ?? SCOPE;
      // A jti makes every token unique, as a real server's are: two grants in one second
      // would otherwise mint the same JWT.
      const access = await as.issueToken({ sub: id, aud: resource, scope, expiresInSeconds: TOKEN_SECONDS, claims: { jti: randomUUID() } });
      recorded.grants.push({ at: Date.now(), client_id: id, resource, scope, token: access });
      json(res, 200, { access_token: access, token_type: 'Bearer', expires_in: TOKEN_SECONDS, scope });
    });
  });
  const bearer = verifyBearer({ jwksUri: as.jwksUri, issuer, audience: (_req, { publicUrl }) => publicUrl, requiredScopes: [SCOPE] });
  // Tokens this seller treats as expired before their time, and the creates that expired one.
  const expired = new Set();
  const expiredAt = new Set();
  const authenticate = tagAuthenticatorNeedsRawBody(async req => {
    const presented = extractBearerToken(req);
    let call;
    try {
      const msg = JSON.parse(req.rawBody ?? '');
      if (msg?.method === 'tools/call') call = msg.params;
    } catch {}
    const refuse = why => {
      recorded.auth_refusals.push({ at: Date.now(), why, tool: call?.name, idempotency_key: call?.arguments?.idempotency_key });
      throw new AuthError('The access token is missing, invalid or expired.');
    };
    if (!presented) {
      recorded.auth_refusals.push({ at: Date.now(), why: 'no token', tool: call?.name });
      return null; // serve() answers 401 with the challenge
    }
    if (expired.has(presented)) refuse('expired');
    const key = call?.arguments?.idempotency_key;
    const scenario = call?.arguments?.context?.sdk ?? call?.arguments?.context?.path;
    if (call?.name === 'create_media_buy' && scenario === 'token_expires' && !expiredAt.has(key)) {
      expiredAt.add(key);
      expired.add(presented);
      refuse('expired');
    }
    try {
      return await bearer(req);
    } catch (err) {
      refuse('invalid');
    }
  });
  oauth = {
    authenticate,
    publicUrl: host => `http://${host}/mcp`,
    protectedResource: { authorization_servers: [issuer], scopes_supported: [SCOPE], bearer_methods_supported: ['header'] },
    close: async () => {
      front.close();
      await as.close();
    },
  };
}

// With explicit accounts the framework projects an account block into the capabilities and
// then drops the capabilities passed to it (request_signing among them); the signing sellers
// leave the require_operator_auth claim out so that their request_signing is declared.
if (signingOn) platform.capabilities.requireOperatorAuth = false;

// Request signing: the SDK's verifier over the buyer's JWKS, set (and keys revoked) through
// POST /signing once the buyer's stack runs.
const requestSigning = { supported: true, covers_content_digest: 'required', required_for: ['create_media_buy'] };
let buyerJwks;
const revocations = new InMemoryRevocationStore();
const signedRequests = signingOn
  ? {
      jwks: { resolve: async kid => (buyerJwks ? buyerJwks.resolve(kid) : null) },
      replayStore: new InMemoryReplayStore(),
      revocationStore: revocations,
      required_for: requestSigning.required_for,
      covers_content_digest: requestSigning.covers_content_digest,
    }
  : undefined;

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
      ...(signingOn
        ? {
            signedRequests,
            // The framework refuses signedRequests unless the capabilities claim the
            // signed-requests specialism and declare request_signing.
            capabilities: { specialisms: [...platform.capabilities.specialisms, 'signed-requests'], request_signing: requestSigning },
          }
        : {}),
    }),
  {
    port: 0,
    ...(oauth
      ? { authenticate: oauth.authenticate, publicUrl: oauth.publicUrl, protectedResource: oauth.protectedResource }
      : { authenticate: verifyApiKey({ keys: { [token]: { principal: 'buyflow-interop' } } }) }),
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
  if (req.method === 'POST' && path === '/signing') {
    let raw = '';
    req.on('data', c => (raw += c));
    req.on('end', () => {
      const cfg = JSON.parse(raw || '{}');
      if (cfg.jwks_url) buyerJwks = new HttpsJwksResolver(cfg.jwks_url, { allowPrivateIp: true, minCooldownSeconds: 0 });
      if (cfg.revoked_kids) revocations.load({ revoked_kids: cfg.revoked_kids });
      res.writeHead(204);
      res.end();
    });
    return;
  }
  if (signingOn && req.method === 'POST' && path === '/mcp') {
    // Record what the verifier answered each signed or refused request (after it ran).
    const input = req.headers['signature-input'];
    res.on('finish', () => {
      if (input || res.statusCode === 401) {
        recorded.signed.push({ at: Date.now(), status: res.statusCode, signature_input: input ?? '',
          challenge: String(res.getHeader('www-authenticate') ?? '') });
      }
    });
  }
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
  process.on(sig, () => server.close(async () => {
    await oauth?.close();
    process.exit(0);
  }));
}
