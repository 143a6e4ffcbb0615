// A real OpenID Provider for the sign-in tests (issue 21): npm oidc-provider
// (a certified OP; installed by .ci/install-tools, TFREG_OIDC_PROVIDER names
// its package directory) with static clients, test users with groups, RS256
// and ES256 keys made at start, key rotation while running, and login and
// consent forms a test drives over plain HTTP with a cookie jar.
//
//   node tests/oidc/provider.mjs [CONFIG.json]     (or the JSON in $OIDC_CONFIG)
//
// Configuration (every field optional except clients and users):
//   listen           "127.0.0.1:0"  host:port; port 0 = the kernel's pick
//   issuer           default "<scheme>://<listen host>:<port>"; "{port}" in it
//                    is replaced by the port listened on
//   tls              {"cert": PEM path, "key": PEM path}: serve HTTPS
//   clients          oidc-provider client metadata, passed through, e.g.
//                    {"client_id": "tfreg", "client_secret": "s3cret",
//                     "redirect_uris": ["https://127.0.0.1:8443/oauth/callback"]}
//                    (confidential; client_secret_basic unless
//                    token_endpoint_auth_method says client_secret_post) or
//                    {"client_id": "cli", "application_type": "native",
//                     "token_endpoint_auth_method": "none",
//                     "redirect_uris": ["http://localhost/login"]}
//                    (public; any loopback port). grant_types defaults to
//                    ["authorization_code"], response_types to ["code"].
//                    "id_token_signed_response_alg": "ES256" for ES256 tokens.
//   users            [{"sub", "email", "name", "groups": [..], "password"?}];
//                    a user with a password must give it, others any password
//   skip_consent     false: true = no consent page, native clients included
//                    (the registry is a first-party client)
//   id_token_ttl     3600 (seconds)
//   exit_on_stdin_close  false: true = exit when stdin ends (a test that dies
//                    leaves no provider behind: give the child a piped stdin)
//
// Always: PKCE required (S256 only, which is all oidc-provider 9 supports),
// conformIdTokenClaims false (the granted scopes' claims are in the ID token),
// scopes openid email profile groups offline_access; claims: email ->
// email, email_verified; profile -> name, preferred_username, groups; groups -> groups.
//
// On ready, ONE line of JSON on stdout:
//   {"issuer", "port", "url", "jwks_uri", "signing_kid", "es256_kid", "pid"}
// Everything else (oidc-provider's warnings, request errors) goes to stderr;
// on Node.js 20 it warns "Unsupported runtime" and works.
//
// Signing in over HTTP (curl -b jar -c jar, never following redirects):
//  1. GET  /auth?response_type=code&client_id=..&redirect_uri=..&scope=openid
//          email profile groups&state=..&nonce=..&code_challenge=..
//          &code_challenge_method=S256
//       -> 303, Location: /interaction/<uid> (cookies _interaction, _interaction_resume)
//  2. POST /interaction/<uid>  form: prompt=login&login=<sub>&password=<any>
//       -> 303, Location: <issuer>/auth/<uid>  (unknown sub: 400, JSON error)
//  3. GET  /auth/<uid>
//       -> 303, Location: /interaction/<uid2> (consent), or with skip_consent
//          the redirect_uri?code=..&state=..&iss=..
//  4. POST /interaction/<uid2> form: prompt=consent
//       -> 303, Location: <issuer>/auth/<uid2>
//  5. GET  /auth/<uid2>  -> 303, Location: <redirect_uri>?code=..&state=..&iss=..
//  6. POST /token (client_secret_basic: -u client_id:secret) form:
//       grant_type=authorization_code&code=..&redirect_uri=..&code_verifier=..
//       -> 200 {"access_token" (opaque), "id_token", "expires_in", "scope", "token_type"}
// (GET /interaction/<uid> shows the same forms as HTML, for a browser.)
// A second sign-in in the same jar skips step 2 (the OP's session cookie).
//
// Test-only endpoints (not OpenID; under /_test/):
//   GET  /_test/keys     {"signing_kid", "es256_kid", "published_kids": [..]}
//   POST /_test/rotate   new RSA and EC keys sign from now on; the old ones
//                        stay published unless ?retire=1. Answers as /_test/keys.
//                        SIGUSR2 does the same as POST /_test/rotate.
//   POST /_test/sign     body JSON {"claims": {..}, "alg": "RS256"|"ES256",
//                        "key": "current"|"unpublished", "header": {..}}
//                        -> the compact JWT (text/plain), signed by the current
//                        key of that alg, or by a key never published (kid
//                        rsa-unpublished / ec-unpublished; "header": {"kid":
//                        "rsa-1"} makes it claim a published kid). Claims
//                        default: iss = issuer, iat = now, exp = now + 300,
//                        jti = random; a claim given as null is left out.
//                        For CI token exchange tests (GitHub/GitLab-shaped claims).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const packageDir = process.env.TFREG_OIDC_PROVIDER
  || path.join(here, '..', '..', '.tools', 'npm', 'node_modules', 'oidc-provider');
const { default: Provider, interactionPolicy } = await import(
  pathToFileURL(path.join(packageDir, 'lib', 'index.js')).href
);
const { createMemoryAdapter } = await import(
  pathToFileURL(path.join(packageDir, 'lib', 'adapters', 'memory_adapter.js')).href
);

function fail(message) {
  process.stderr.write(`oidc provider: ${message}\n`);
  process.exit(2);
}

const configText = process.argv[2]
  ? fs.readFileSync(process.argv[2], 'utf8')
  : process.env.OIDC_CONFIG;
if (!configText) fail('give a JSON config file as the argument or the JSON in OIDC_CONFIG');
let config;
try {
  config = JSON.parse(configText);
} catch (err) {
  fail(`config is not JSON: ${err.message}`);
}
if (!Array.isArray(config.clients) || config.clients.length === 0) fail('config.clients: at least one client');
if (!Array.isArray(config.users)) fail('config.users: a list of users');
const users = new Map();
for (const user of config.users) {
  if (typeof user.sub !== 'string' || !user.sub) fail('every user needs a sub');
  users.set(user.sub, user);
}

const listen = config.listen || '127.0.0.1:0';
const colon = listen.lastIndexOf(':');
if (colon < 0) fail(`listen: host:port, not ${listen}`);
const listenHost = listen.slice(0, colon).replace(/^\[|\]$/g, '');
const listenPort = Number(listen.slice(colon + 1));
const tls = config.tls
  ? { cert: fs.readFileSync(config.tls.cert), key: fs.readFileSync(config.tls.key) }
  : undefined;

// ---- keys --------------------------------------------------------------------
let generation = 0;
function newKeys(label) {
  const name = label || String(generation += 1);
  const rsa = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
  const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  return {
    rsa: { ...rsa.export({ format: 'jwk' }), kid: `rsa-${name}`, alg: 'RS256', use: 'sig' },
    ec: { ...ec.export({ format: 'jwk' }), kid: `ec-${name}`, alg: 'ES256', use: 'sig' },
  };
}
// Newest first: oidc-provider signs with the first key of an algorithm.
let keySets = [newKeys()];
const unpublished = newKeys('unpublished');

// ---- the provider ------------------------------------------------------------
// Shared by every provider instance (a rotation makes a new one): sessions,
// interactions, codes and grants survive it.
const cookieKeys = [crypto.randomBytes(32).toString('base64url')];
const adapter = createMemoryAdapter(15);
let issuer;
let current; // { provider, callback }

async function loadExistingGrant(ctx) {
  const grantId = ctx.oidc.result?.consent?.grantId
    || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
  if (grantId) return ctx.oidc.provider.Grant.find(grantId);
  if (!config.skip_consent) return undefined;
  // First-party client: grant what was asked for, with no consent page.
  const grant = new ctx.oidc.provider.Grant({
    clientId: ctx.oidc.client.clientId,
    accountId: ctx.oidc.session.accountId,
  });
  grant.addOIDCScope(ctx.oidc.params.scope || 'openid');
  await grant.save();
  return grant;
}

// skip_consent: no consent page, for native (public) clients too, which
// oidc-provider otherwise always asks (its native_client_prompt check).
function policy() {
  const base = interactionPolicy.base();
  if (config.skip_consent) base.get('consent').checks.remove('native_client_prompt');
  return base;
}

function makeProvider() {
  const provider = new Provider(issuer, {
    clients: config.clients.map((client) => ({
      grant_types: ['authorization_code'],
      response_types: ['code'],
      ...client,
    })),
    adapter,
    jwks: { keys: keySets.flatMap((set) => [set.rsa, set.ec]) },
    cookies: { keys: cookieKeys },
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    scopes: ['openid', 'email', 'profile', 'groups', 'offline_access'],
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      // groups also with profile: tfreg asks for `openid email profile` by
      // default (a provider that needs a `groups` scope is configured with
      // --oidc-scopes), as Keycloak's and Entra's groups come.
      profile: ['name', 'preferred_username', 'groups'],
      groups: ['groups'],
    },
    features: {
      devInteractions: { enabled: true },
      rpInitiatedLogout: { enabled: true },
    },
    ttl: { IdToken: config.id_token_ttl || 3600 },
    loadExistingGrant,
    interactions: { policy: policy() },
    async findAccount(_ctx, sub) {
      const user = users.get(sub);
      if (!user) return undefined;
      return {
        accountId: sub,
        async claims() {
          return {
            sub,
            email: user.email,
            email_verified: user.email !== undefined ? true : undefined,
            name: user.name,
            preferred_username: user.preferred_username || sub,
            groups: user.groups || [],
          };
        },
      };
    },
  });
  provider.on('server_error', (_ctx, err) => process.stderr.write(`oidc provider: server_error: ${err.stack}\n`));
  return { provider, callback: provider.callback() };
}

// ---- test-only endpoints -------------------------------------------------------
function keysAnswer() {
  return {
    signing_kid: keySets[0].rsa.kid,
    es256_kid: keySets[0].ec.kid,
    published_kids: keySets.flatMap((set) => [set.rsa.kid, set.ec.kid]),
  };
}

function rotate(retire) {
  keySets = retire ? [newKeys()] : [newKeys(), ...keySets];
  current = makeProvider();
  process.stderr.write(`oidc provider: rotated: ${JSON.stringify(keysAnswer())}\n`);
  return keysAnswer();
}

function b64url(value) {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

function signJwt(request) {
  const alg = request.alg || 'RS256';
  if (alg !== 'RS256' && alg !== 'ES256') throw new Error('alg: RS256 or ES256');
  const set = request.key === 'unpublished' ? unpublished : keySets[0];
  const jwk = alg === 'RS256' ? set.rsa : set.ec;
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    iss: issuer, iat: now, exp: now + 300, jti: crypto.randomUUID(), ...(request.claims || {}),
  };
  for (const [name, value] of Object.entries(claims)) if (value === null) delete claims[name];
  const header = { alg, typ: 'JWT', kid: jwk.kid, ...(request.header || {}) };
  const input = `${b64url(header)}.${b64url(claims)}`;
  const key = crypto.createPrivateKey({ key: jwk, format: 'jwk' });
  const signature = crypto.sign('sha256', Buffer.from(input), alg === 'ES256' ? { key, dsaEncoding: 'ieee-p1363' } : key);
  return `${input}.${signature.toString('base64url')}`;
}

async function testEndpoint(req, res, url) {
  const send = (status, body, type = 'application/json') => {
    res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
    res.end(type === 'application/json' ? `${JSON.stringify(body)}\n` : body);
  };
  try {
    if (req.method === 'GET' && url.pathname === '/_test/keys') return send(200, keysAnswer());
    if (req.method === 'POST' && url.pathname === '/_test/rotate') {
      return send(200, rotate(url.searchParams.get('retire') === '1'));
    }
    if (req.method === 'POST' && url.pathname === '/_test/sign') {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const text = Buffer.concat(chunks).toString('utf8');
      return send(200, signJwt(text ? JSON.parse(text) : {}), 'text/plain');
    }
    return send(404, { error: 'not_found' });
  } catch (err) {
    return send(400, { error: 'invalid_request', error_description: err.message });
  }
}

// ---- the server ------------------------------------------------------------------
async function handle(req, res) {
  const url = new URL(req.url, 'http://x');
  if (url.pathname.startsWith('/_test/')) return testEndpoint(req, res, url);
  if (req.method === 'POST' && /^\/interaction\/[^/]+$/.test(url.pathname)) {
    // The dev login form takes any login: refuse a user the test did not
    // give (or a wrong password) before oidc-provider records the login. The
    // body read here is handed on as req.body, which oidc-provider reads when
    // the stream is already consumed.
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    req.body = Buffer.concat(chunks).toString('utf8');
    const form = new URLSearchParams(req.body);
    if (form.get('prompt') === 'login') {
      const user = users.get(form.get('login') || '');
      if (!user || (user.password !== undefined && user.password !== form.get('password'))) {
        res.writeHead(400, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(`${JSON.stringify({ error: 'unknown_user', error_description: 'no such test user or wrong password' })}\n`);
        return undefined;
      }
    }
  }
  return current.callback(req, res);
}

const server = tls ? https.createServer(tls, handle) : http.createServer(handle);
server.on('error', (err) => fail(`listen ${listen}: ${err.message}`));
server.listen(listenPort, listenHost, () => {
  const { port } = server.address();
  const scheme = tls ? 'https' : 'http';
  const hostForUrl = listenHost.includes(':') ? `[${listenHost}]` : listenHost;
  issuer = (config.issuer || `${scheme}://${hostForUrl}:{port}`).replaceAll('{port}', String(port));
  current = makeProvider();
  process.stdout.write(`${JSON.stringify({
    issuer,
    port,
    url: `${scheme}://${hostForUrl}:${port}`,
    jwks_uri: `${issuer}/jwks`,
    signing_kid: keySets[0].rsa.kid,
    es256_kid: keySets[0].ec.kid,
    pid: process.pid,
  })}\n`);
});

function stop() {
  server.close();
  server.closeAllConnections?.();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.on('SIGUSR2', () => rotate(false));
if (config.exit_on_stdin_close) {
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}
