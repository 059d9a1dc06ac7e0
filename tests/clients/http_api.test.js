'use strict';
/*
 * The HTTP port (SPEC I1): --httpPort, the TTL JSON API (GET/POST/PATCH
 * /api/ttl) and Prometheus metrics (GET /metrics).
 *
 *   - the port: --httpPort N on --bind_ip; absent, the MongoDB port + 1000;
 *     --httpPort 0 turns it off; a busy explicit port stops start-up (non-zero
 *     exit), a busy default port is logged and skipped;
 *   - GET /api/ttl's shape, cross-checked against serverStatus.metrics.ttl;
 *     POST creates a TTL index (key as a field name or {field: 1}), PATCH
 *     changes expireAfterSeconds or archive; bad input answers 400 with
 *     {error, code, codeName} (67, 9 FailedToParse, 27 IndexNotFound),
 *     unknown paths 404, a wrong method 405;
 *   - access: without --auth, writes from loopback only (403 from another
 *     address); with --auth, HTTP Basic of a SCRAM user: 401 with
 *     WWW-Authenticate: Basic without credentials or with a wrong password,
 *     403 code 13 for a user whose roles do not allow the write;
 *   - /metrics checked strictly against the text exposition format 0.0.4
 *     (HELP/TYPE per family, contiguous families, no duplicate series, label
 *     escapes, histogram buckets), the required families, and values moving
 *     after inserts and TTL deletes.
 *
 * The file's main server runs with an explicit free --httpPort; tests of the
 * port itself, of a non-loopback peer and of --auth start servers of their own.
 */
const assert = require('node:assert/strict');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const nodeTest = require('node:test');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const mainArgs = ['--setParameter', 'ttlMonitorSleepSecs=1'];
let HTTP_PORT = null;
// Runs before useServer's hook (registration order): the array is read when the server is constructed.
nodeTest.before(async () => {
  HTTP_PORT = await h.freePort();
  mainArgs.push('--httpPort', String(HTTP_PORT));
});
const srv = h.useServer({ args: mainArgs });

/* ------------------------------------------------------------------ helpers */

/*
 * One HTTP request. body: a string (sent as is) or an object (JSON). Resolves
 * with {status, headers, text, json} (json: the parsed body when it parses).
 */
function request({ port = HTTP_PORT, host = '127.0.0.1', method = 'GET', path = '/api/ttl', body, headers = {},
  auth, localAddress } = {}) {
  return new Promise((resolve, reject) => {
    const hdrs = { ...headers };
    let payload = null;
    if (body !== undefined) {
      payload = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
      if (!hdrs['Content-Type']) hdrs['Content-Type'] = 'application/json';
      hdrs['Content-Length'] = payload.length;
    }
    if (auth) hdrs.Authorization = 'Basic ' + Buffer.from(`${auth.user}:${auth.pwd}`).toString('base64');
    const req = http.request({ host, port, method, path, headers: hdrs, localAddress, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch (_) { json = undefined; }
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.setTimeout(15000, () => req.destroy(new Error(`HTTP ${method} ${path} timed out`)));
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

const show = (r) => `${r.status} ${JSON.stringify(r.headers['content-type'])} ${r.text.slice(0, 400)}`;

/* Asserts an API error answer: status (one of), JSON {error: string, code, codeName: string}. */
function assertApiError(r, statuses, code, what) {
  const want = Array.isArray(statuses) ? statuses : [statuses];
  assert.ok(want.includes(r.status), `${what}: HTTP status ${want.join('|')} expected, got ${show(r)}`);
  assert.ok(r.json && typeof r.json === 'object', `${what}: a JSON body expected, got ${show(r)}`);
  assert.equal(typeof r.json.error, 'string', `${what}: "error" (errmsg) string expected: ${show(r)}`);
  assert.ok(r.json.error.length > 0, `${what}: empty "error": ${show(r)}`);
  if (code !== undefined) assert.equal(r.json.code, code, `${what}: code ${code} expected: ${show(r)}`);
  else assert.equal(typeof r.json.code, 'number', `${what}: numeric "code" expected: ${show(r)}`);
  assert.equal(typeof r.json.codeName, 'string', `${what}: "codeName" string expected: ${show(r)}`);
}

const waitFor = (fn, msg, ms = 10000, iv) => h.waitFor(fn, msg, ms, iv);

/* True when something accepts TCP connections on 127.0.0.1:port. */
function listening(port, host = '127.0.0.1') {
  return new Promise((resolve) => {
    const s = net.connect({ port, host });
    const done = (ok) => { s.destroy(); resolve(ok); };
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
    s.setTimeout(1000, () => done(false));
  });
}

/* Holds a TCP port (listening) until close() is called. */
function holdPort(port, host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const s = net.createServer((c) => c.destroy());
    s.once('error', reject);
    s.listen(port, host, () => resolve(s));
  });
}

/* A free MongoDB port P whose P + 1000 is free too (for the default HTTP port). */
async function portPairFree() {
  for (let i = 0; i < 50; i++) {
    const p = await h.freePort();
    if (p + 1000 > 65535) continue;
    try {
      const s = await holdPort(p + 1000);
      await new Promise((r) => s.close(r));
      return p;
    } catch (_) { /* busy; try another */ }
  }
  throw new Error('no port P with P+1000 free found');
}

/* A MayflyServer whose --bind_ip is ours (the harness always passes 127.0.0.1). */
class BoundServer extends h.MayflyServer {
  constructor(opts) { super(opts); this.bindIp = opts.bindIp || '127.0.0.1'; }
  args() {
    return ['--port', String(this.port), '--bind_ip', this.bindIp, '--dbpath', this.dbpath, ...this.extraArgs];
  }
}

/* Runs fn(server) on a server of its own; always stopped and removed afterwards. */
async function withServer(opts, fn) {
  const s = new BoundServer(opts);
  if (opts.port) s.port = opts.port;
  try {
    await s.start();
    return await fn(s);
  } finally {
    await s.stop();
    s.cleanup();
  }
}

function isIsoDate(s) {
  return typeof s === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(s) &&
    !Number.isNaN(Date.parse(s));
}

async function serverStatusTtl() {
  const ss = await srv.client.db('admin').command({ serverStatus: 1 });
  return ss.metrics.ttl;
}

async function listIndex(coll, name) {
  return (await coll.listIndexes().toArray()).find((ix) => ix.name === name);
}

/* --------------------------------------------------- Prometheus 0.0.4 parser */

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const FLOAT = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN)$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseFloatProm(v) {
  if (v === '+Inf') return Infinity;
  if (v === '-Inf') return -Infinity;
  if (v === 'NaN') return NaN;
  return Number(v);
}

/* Parses `{k="v",...}` starting at s[i] === '{'; returns [labels, index after '}']. Throws on bad syntax. */
function parseLabels(s, i, where) {
  const labels = {};
  i += 1;
  for (;;) {
    if (s[i] === '}') return [labels, i + 1];
    const m = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(s.slice(i));
    if (!m) throw new Error(`${where}: bad label name at column ${i}`);
    const name = m[0];
    i += name.length;
    if (s[i] !== '=') throw new Error(`${where}: '=' expected after label ${name}`);
    i += 1;
    if (s[i] !== '"') throw new Error(`${where}: '"' expected for label ${name}`);
    i += 1;
    let val = '';
    for (;;) {
      if (i >= s.length) throw new Error(`${where}: unterminated value of label ${name}`);
      const c = s[i];
      if (c === '\\') {
        const n = s[i + 1];
        if (n === '\\') val += '\\';
        else if (n === '"') val += '"';
        else if (n === 'n') val += '\n';
        else throw new Error(`${where}: bad escape \\${n} in label ${name}`);
        i += 2;
      } else if (c === '"') {
        i += 1;
        break;
      } else {
        val += c;
        i += 1;
      }
    }
    if (name.startsWith('__')) throw new Error(`${where}: reserved label name ${name}`);
    if (Object.prototype.hasOwnProperty.call(labels, name)) throw new Error(`${where}: label ${name} twice`);
    labels[name] = val;
    if (s[i] === ',') { i += 1; continue; }
    if (s[i] === '}') return [labels, i + 1];
    throw new Error(`${where}: ',' or '}' expected after label ${name}, got ${JSON.stringify(s[i])}`);
  }
}

const seriesKey = (name, labels) => name + '{' + Object.keys(labels).sort()
  .map((k) => `${k}=${JSON.stringify(labels[k])}`).join(',') + '}';

/*
 * Parses and checks a whole exposition. Returns {families: Map(name -> {type,
 * help, samples: [{name, labels, value}]})}; throws with every problem found.
 */
function parseExposition(text) {
  const problems = [];
  const families = new Map();
  const order = [];
  const seen = new Set();
  let current = null;          // family the last sample belonged to
  const closed = new Set();    // families whose samples ended
  if (!text.endsWith('\n')) problems.push('the exposition does not end with a newline');
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const fam = (name) => {
    if (!families.has(name)) { families.set(name, { name, type: null, help: null, helpCount: 0, typeCount: 0, samples: [] }); order.push(name); }
    return families.get(name);
  };
  /* The family a sample name belongs to: a declared histogram/summary's _bucket/_sum/_count, else the name. */
  const familyOf = (name) => {
    for (const suf of ['_bucket', '_sum', '_count']) {
      if (name.endsWith(suf)) {
        const base = name.slice(0, -suf.length);
        const f = families.get(base);
        if (f && (f.type === 'histogram' || (f.type === 'summary' && suf !== '_bucket'))) return base;
      }
    }
    return name;
  };
  lines.forEach((line, idx) => {
    const where = `line ${idx + 1} ${JSON.stringify(line.slice(0, 120))}`;
    if (line === '') return;   // blank lines are ignored by the format
    if (line.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s(.*))?$/.exec(line);
      if (!m) return;           // another comment
      const [, kind, name, rest = ''] = m;
      if (!METRIC_NAME.test(name)) { problems.push(`${where}: bad metric name in ${kind}`); return; }
      const f = fam(name);
      if (f.samples.length) problems.push(`${where}: ${kind} after samples of ${name}`);
      if (kind === 'HELP') {
        f.helpCount += 1;
        if (/\\[^\\n]|\\$/.test(rest)) problems.push(`${where}: bad escape in HELP text`);
        f.help = rest;
      } else {
        f.typeCount += 1;
        if (!TYPES.has(rest.trim()) || rest !== rest.trim()) problems.push(`${where}: bad TYPE ${JSON.stringify(rest)}`);
        f.type = rest.trim();
      }
      return;
    }
    const nm = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line);
    if (!nm) { problems.push(`${where}: no metric name`); return; }
    const name = nm[0];
    let i = name.length;
    let labels = {};
    if (line[i] === '{') {
      try { [labels, i] = parseLabels(line, i, where); } catch (e) { problems.push(e.message); return; }
    }
    const rest = line.slice(i);
    const vm = /^ +(\S+)(?: +(-?\d+))?$/.exec(rest);
    if (!vm) { problems.push(`${where}: expected " value [timestamp]" after name/labels`); return; }
    if (!FLOAT.test(vm[1])) { problems.push(`${where}: bad value ${JSON.stringify(vm[1])}`); return; }
    const value = parseFloatProm(vm[1]);
    const fname = familyOf(name);
    const f = families.get(fname);
    if (!f || f.typeCount === 0) problems.push(`${where}: sample of ${fname} before (or without) its # TYPE line`);
    if (!f || f.helpCount === 0) problems.push(`${where}: sample of ${fname} before (or without) its # HELP line`);
    const ff = fam(fname);
    if (current !== fname) {
      if (closed.has(fname)) problems.push(`${where}: samples of ${fname} are not contiguous`);
      if (current !== null) closed.add(current);
      current = fname;
    }
    const key = seriesKey(name, labels);
    if (seen.has(key)) problems.push(`${where}: duplicate series ${key}`);
    seen.add(key);
    if (ff.type === 'counter' || ff.type === 'gauge' || ff.type === 'untyped') {
      if (name !== fname) problems.push(`${where}: sample name ${name} is not its family's ${fname}`);
    }
    if (ff.type === 'histogram' && name === fname) problems.push(`${where}: histogram sample without _bucket/_sum/_count`);
    ff.samples.push({ name, labels, value });
  });
  for (const f of families.values()) {
    if (f.helpCount !== 1) problems.push(`family ${f.name}: ${f.helpCount} # HELP lines (1 expected)`);
    if (f.typeCount !== 1) problems.push(`family ${f.name}: ${f.typeCount} # TYPE lines (1 expected)`);
    if (f.type === 'histogram') checkHistogram(f, problems);
    if (f.type === 'summary') checkSummary(f, problems);
  }
  if (problems.length) throw new Error(`/metrics is not valid text format 0.0.4:\n  ${problems.join('\n  ')}`);
  return { families, order };
}

function groupBy(samples, dropLabel) {
  const g = new Map();
  for (const s of samples) {
    const rest = { ...s.labels };
    delete rest[dropLabel];
    const k = seriesKey('', rest);
    if (!g.has(k)) g.set(k, { labels: rest, buckets: [], sum: null, count: null, quantiles: [] });
    const e = g.get(k);
    if (s.name.endsWith('_bucket')) e.buckets.push(s);
    else if (s.name.endsWith('_sum')) e.sum = s.value;
    else if (s.name.endsWith('_count')) e.count = s.value;
    else e.quantiles.push(s);
  }
  return g;
}

function checkHistogram(f, problems) {
  if (!f.samples.length) return;
  for (const [k, e] of groupBy(f.samples, 'le')) {
    const w = `histogram ${f.name}${k}`;
    if (!e.buckets.length) { problems.push(`${w}: no _bucket samples`); continue; }
    let prevLe = -Infinity;
    let prevCount = -Infinity;
    for (const b of e.buckets) {
      if (!Object.prototype.hasOwnProperty.call(b.labels, 'le')) { problems.push(`${w}: _bucket without le`); continue; }
      const le = b.labels.le;
      if (!FLOAT.test(le)) { problems.push(`${w}: le=${JSON.stringify(le)} is not a float`); continue; }
      const lv = parseFloatProm(le);
      if (!(lv > prevLe)) problems.push(`${w}: le=${le} not ascending (after ${prevLe})`);
      if (!(b.value >= prevCount)) problems.push(`${w}: cumulative count ${b.value} at le=${le} below ${prevCount}`);
      prevLe = lv;
      prevCount = b.value;
    }
    const last = e.buckets[e.buckets.length - 1];
    if (last.labels.le !== '+Inf') problems.push(`${w}: the last bucket is le=${JSON.stringify(last.labels.le)}, not "+Inf"`);
    if (e.count === null) problems.push(`${w}: no _count`);
    else if (last.value !== e.count) problems.push(`${w}: le="+Inf" bucket ${last.value} != _count ${e.count}`);
    if (e.sum === null) problems.push(`${w}: no _sum`);
  }
}

function checkSummary(f, problems) {
  for (const [k, e] of groupBy(f.samples, 'quantile')) {
    if (e.count === null || e.sum === null) problems.push(`summary ${f.name}${k}: _sum and _count required`);
    for (const q of e.quantiles) {
      if (!('quantile' in q.labels)) problems.push(`summary ${f.name}${k}: sample without quantile`);
    }
  }
}

async function scrape(opts = {}) {
  const r = await request({ path: '/metrics', ...opts });
  assert.equal(r.status, 200, `GET /metrics: ${show(r)}`);
  return r;
}

function value(parsed, family, labels = {}) {
  const f = parsed.families.get(family);
  assert.ok(f, `family ${family} missing`);
  const s = f.samples.filter((x) => Object.entries(labels).every(([k, v]) => x.labels[k] === v) &&
    !x.name.endsWith('_bucket') && !x.name.endsWith('_sum') && (!x.name.endsWith('_count') || f.type !== 'histogram'));
  assert.equal(s.length, 1, `one sample of ${family}${JSON.stringify(labels)} expected, got ${JSON.stringify(s)}`);
  return s[0].value;
}

function histCount(parsed, family) {
  const f = parsed.families.get(family);
  const c = f.samples.find((x) => x.name === `${family}_count` && Object.keys(x.labels).length === 0);
  assert.ok(c, `${family}_count missing`);
  return c.value;
}

/* ------------------------------------------------------------ the port (1) */

h.test('port: --httpPort N serves /api/ttl and /metrics on --bind_ip:N', async () => {
  const r = await request({ path: '/api/ttl' });
  assert.equal(r.status, 200, show(r));
  const m = await request({ path: '/metrics' });
  assert.equal(m.status, 200, show(m));
});

h.test('port: without --httpPort the HTTP port is the MongoDB port + 1000', async () => {
  const port = await portPairFree();
  await withServer({ port }, async (s) => {
    const r = await waitFor(async () => {
      try { return await request({ port: s.port + 1000, path: '/api/ttl' }); } catch (_) { return null; }
    }, `HTTP on the default port ${s.port + 1000}`, 5000);
    assert.equal(r.status, 200, show(r));
    assert.ok(r.json && Array.isArray(r.json.indexes), show(r));
  });
});

h.test('port: --httpPort 0 turns the HTTP port off (nothing on MongoDB port + 1000)', async () => {
  const port = await portPairFree();
  await withServer({ port, args: ['--httpPort', '0'] }, async (s) => {
    const c = new MongoClient(s.uri);
    try {
      await c.connect();
      assert.equal((await c.db('admin').command({ ping: 1 })).ok, 1);
    } finally { await c.close(); }
    await h.sleep(300);
    assert.equal(await listening(s.port + 1000), false, `something listens on ${s.port + 1000} with --httpPort 0`);
  });
});

h.test('port: a busy explicit --httpPort stops start-up with a non-zero exit', async () => {
  const busy = await h.freePort();
  const holder = await holdPort(busy);
  const s = new BoundServer({ args: ['--httpPort', String(busy)] });
  try {
    let started = false;
    try {
      await s.start();
      started = true;
    } catch (e) {
      assert.match(e.message, /exited during start-up/, `start-up should fail by exiting: ${e.message}`);
    }
    assert.equal(started, false, `mayflyd started although --httpPort ${busy} is busy`);
    assert.ok(s.exitInfo, 'exit info recorded');
    assert.ok(s.exitInfo.code !== 0 && s.exitInfo.code !== null,
      `a non-zero exit code expected, got ${JSON.stringify(s.exitInfo)}\n${s.stderrTail(10)}`);
  } finally {
    await s.stop();
    s.cleanup();
    await new Promise((r) => holder.close(r));
  }
});

h.test('port: a busy default HTTP port is logged and skipped; MongoDB is still served', async () => {
  const port = await portPairFree();
  const holder = await holdPort(port + 1000);
  try {
    await withServer({ port }, async (s) => {
      const c = new MongoClient(s.uri);
      try {
        await c.connect();
        await c.db('x').collection('c').insertOne({ a: 1 });
        assert.equal(await c.db('x').collection('c').countDocuments(), 1);
      } finally { await c.close(); }
      const logged = s.stderrLines.concat([s.stderrPartial]).some((l) => l.includes(String(port + 1000)));
      assert.ok(logged, `no log line names the busy default HTTP port ${port + 1000}:\n${s.stderrTail(30)}`);
    });
  } finally {
    await new Promise((r) => holder.close(r));
  }
});

/* ----------------------------------------------------------- /api/ttl (2) */

h.test('GET /api/ttl: 200 application/json with every TTL index and the monitor figures of serverStatus.metrics.ttl', async () => {
  const db = srv.freshDb('get');
  const coll = db.collection('events');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
  await coll.createIndex({ plain: 1 });   // not TTL: must not be listed
  const before = await serverStatusTtl();
  const r = await request({ path: '/api/ttl' });
  const after = await serverStatusTtl();
  assert.equal(r.status, 200, show(r));
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, show(r));
  const j = r.json;
  assert.ok(j && Array.isArray(j.indexes), `indexes array: ${show(r)}`);
  const mine = j.indexes.filter((x) => x.db === db.databaseName && x.collection === 'events');
  assert.equal(mine.length, 1, `one TTL index of ${db.databaseName}.events listed (the plain index not): ${JSON.stringify(mine)}`);
  const ix = mine[0];
  assert.equal(ix.name, 'at_1');
  assert.deepEqual(ix.key, { at: 1 });
  assert.equal(ix.expireAfterSeconds, 3600);
  assert.equal(ix.archive, false);
  assert.ok(ix.nextDueAt === null || isIsoDate(ix.nextDueAt), `nextDueAt ISO-8601 or null: ${JSON.stringify(ix.nextDueAt)}`);
  assert.equal(typeof ix.backlog, 'number', `backlog: ${JSON.stringify(ix)}`);
  assert.ok(ix.backlog >= 0);
  for (const k of ['deletedDocuments', 'passes', 'deletesPerSecond']) {
    assert.equal(typeof j[k], 'number', `${k} numeric: ${show(r)}`);
  }
  assert.ok(j.deletedDocuments >= before.deletedDocuments && j.deletedDocuments <= after.deletedDocuments,
    `deletedDocuments ${j.deletedDocuments} between serverStatus's ${before.deletedDocuments} and ${after.deletedDocuments}`);
  assert.ok(j.passes >= before.passes && j.passes <= after.passes,
    `passes ${j.passes} between serverStatus's ${before.passes} and ${after.passes}`);
  const lat = j.lateness;
  assert.ok(lat && typeof lat === 'object', `lateness: ${show(r)}`);
  for (const k of ['p50Ms', 'p99Ms', 'maxMs', 'count']) assert.equal(typeof lat[k], 'number', `lateness.${k}: ${JSON.stringify(lat)}`);
  assert.ok(lat.histogram && typeof lat.histogram === 'object' && !Array.isArray(lat.histogram), `lateness.histogram: ${JSON.stringify(lat)}`);
  let total = 0;
  for (const [k, v] of Object.entries(lat.histogram)) {
    assert.match(k, /^lt\d+ms$/, `histogram bucket name ${k}`);
    assert.equal(typeof v, 'number');
    total += v;
  }
  assert.equal(total, lat.count, `histogram buckets sum to lateness.count: ${JSON.stringify(lat)}`);
  // Same names as serverStatus.metrics.ttl.
  for (const k of ['deletedDocuments', 'passes', 'deletesPerSecond', 'lateness']) {
    assert.ok(k in after, `serverStatus.metrics.ttl has ${k} too: ${JSON.stringify(after)}`);
  }
  for (const k of ['p50Ms', 'p99Ms', 'maxMs', 'count', 'histogram']) {
    assert.ok(k in after.lateness, `serverStatus.metrics.ttl.lateness has ${k}: ${JSON.stringify(after.lateness)}`);
  }
});

h.test('GET /api/ttl: nextDueAt is the next expiry of a pending document; lateness/deletions move after expiry', async () => {
  const db = srv.freshDb('due');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 60 });
  const at = new Date(Math.floor(Date.now() / 1000) * 1000 + 3600000);
  await coll.insertOne({ _id: 1, at });
  const due = at.getTime() + 60000;
  const ix = await waitFor(async () => {
    const r = await request({ path: '/api/ttl' });
    const e = (r.json.indexes || []).find((x) => x.db === db.databaseName && x.collection === 'c');
    return e && e.nextDueAt ? e : null;
  }, 'nextDueAt set for an index with one pending document');
  assert.ok(isIsoDate(ix.nextDueAt), ix.nextDueAt);
  assert.ok(Math.abs(Date.parse(ix.nextDueAt) - due) <= 1000, `nextDueAt ${ix.nextDueAt}, expected ~${new Date(due).toISOString()}`);

  const base = (await request({ path: '/api/ttl' })).json;
  await coll.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: 100 + i, at: new Date(Date.now() - 120000) })));
  await waitFor(async () => (await coll.countDocuments({ _id: { $gte: 100 } })) === 0, 'expired documents deleted');
  const now = await waitFor(async () => {
    const j = (await request({ path: '/api/ttl' })).json;
    return j.deletedDocuments >= base.deletedDocuments + 20 && j.lateness.count >= base.lateness.count + 20 ? j : null;
  }, 'deletedDocuments and lateness.count grow by 20');
  assert.ok(now.passes >= base.passes);
});

h.test('POST /api/ttl {db, collection, key: "field", expireAfterSeconds} creates <field>_1, listed with expireAfterSeconds', async () => {
  const db = srv.freshDb('post');
  const r = await request({ method: 'POST', body: { db: db.databaseName, collection: 'c', key: 'createdAt', expireAfterSeconds: 120 } });
  assert.equal(r.status, 200, show(r));
  assert.match(r.headers['content-type'] || '', /^application\/json\b/, show(r));
  assert.equal(r.json.ok, 1, show(r));
  assert.equal(r.json.name, 'createdAt_1', show(r));
  const ix = await listIndex(db.collection('c'), 'createdAt_1');
  assert.ok(ix, 'index listed');
  assert.deepEqual(ix.key, { createdAt: 1 });
  assert.equal(ix.expireAfterSeconds, 120);
  const g = await request({ path: '/api/ttl' });
  assert.ok(g.json.indexes.some((x) => x.db === db.databaseName && x.collection === 'c' && x.name === 'createdAt_1' &&
    x.expireAfterSeconds === 120), `the new index in GET /api/ttl: ${g.text.slice(0, 500)}`);
});

h.test('POST /api/ttl with key {field: 1} and archive: true', async () => {
  const db = srv.freshDb('post2');
  const r = await request({ method: 'POST', body: { db: db.databaseName, collection: 'c', key: { at: 1 }, expireAfterSeconds: 0 } });
  assert.equal(r.status, 200, show(r));
  assert.equal(r.json.name, 'at_1', show(r));
  assert.equal((await listIndex(db.collection('c'), 'at_1')).expireAfterSeconds, 0);
  const a = await request({ method: 'POST', body: { db: db.databaseName, collection: 'a', key: 'at', expireAfterSeconds: 5, archive: true } });
  assert.equal(a.status, 200, `POST with archive: true: ${show(a)}`);
  const ix = await listIndex(db.collection('a'), 'at_1');
  assert.equal(ix.archive, true, `listIndexes shows archive: true: ${JSON.stringify(ix)}`);
  const g = await request({ path: '/api/ttl' });
  const e = g.json.indexes.find((x) => x.db === db.databaseName && x.collection === 'a');
  assert.equal(e && e.archive, true, `GET /api/ttl shows archive: true: ${JSON.stringify(e)}`);
});

h.test('PATCH /api/ttl changes expireAfterSeconds (answers _old and _new) and archive', async () => {
  const db = srv.freshDb('patch');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 100 });
  const r = await request({ method: 'PATCH', body: { db: db.databaseName, collection: 'c', name: 'at_1', expireAfterSeconds: 250 } });
  assert.equal(r.status, 200, show(r));
  assert.equal(r.json.ok, 1, show(r));
  assert.equal(r.json.expireAfterSeconds_old, 100, show(r));
  assert.equal(r.json.expireAfterSeconds_new, 250, show(r));
  assert.equal((await listIndex(coll, 'at_1')).expireAfterSeconds, 250);

  const on = await request({ method: 'PATCH', body: { db: db.databaseName, collection: 'c', name: 'at_1', archive: true } });
  assert.equal(on.status, 200, `PATCH archive: true: ${show(on)}`);
  assert.equal(on.json.ok, 1, show(on));
  assert.equal((await listIndex(coll, 'at_1')).archive, true);
  const off = await request({ method: 'PATCH', body: { db: db.databaseName, collection: 'c', name: 'at_1', archive: false } });
  assert.equal(off.status, 200, `PATCH archive: false: ${show(off)}`);
  assert.notEqual((await listIndex(coll, 'at_1')).archive, true);
});

h.test('bad input: negative expireAfterSeconds answers 400 code 67; nothing is created', async () => {
  const db = srv.freshDb('neg');
  const r = await request({ method: 'POST', body: { db: db.databaseName, collection: 'c', key: 'at', expireAfterSeconds: -1 } });
  assertApiError(r, 400, 67, 'POST negative expireAfterSeconds');
  assert.equal(r.json.codeName, 'CannotCreateIndex', show(r));
  const names = (await db.collection('c').listIndexes().toArray().catch(() => [])).map((x) => x.name);
  assert.ok(!names.includes('at_1'), `no index made: ${names}`);
  await db.collection('d').createIndex({ at: 1 }, { expireAfterSeconds: 10 });
  const p = await request({ method: 'PATCH', body: { db: db.databaseName, collection: 'd', name: 'at_1', expireAfterSeconds: -5 } });
  assertApiError(p, 400, undefined, 'PATCH negative expireAfterSeconds');
  assert.equal((await listIndex(db.collection('d'), 'at_1')).expireAfterSeconds, 10);
});

h.test('bad input: a non-numeric expireAfterSeconds (string, object, null, bool) answers 400 with code 67; the server lives on', async () => {
  const db = srv.freshDb('nonnum');
  await db.collection('d').createIndex({ at: 1 }, { expireAfterSeconds: 10 });
  for (const v of ['3600', 'abc', { n: 1 }, null, true, [1]]) {
    const r = await request({ method: 'POST', body: { db: db.databaseName, collection: 'c', key: 'at', expireAfterSeconds: v } });
    assertApiError(r, 400, 67, `POST expireAfterSeconds ${JSON.stringify(v)}`);
    const p = await request({ method: 'PATCH', body: { db: db.databaseName, collection: 'd', name: 'at_1', expireAfterSeconds: v } });
    assertApiError(p, 400, undefined, `PATCH expireAfterSeconds ${JSON.stringify(v)}`);
  }
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1);
  assert.equal((await listIndex(db.collection('d'), 'at_1')).expireAfterSeconds, 10);
  assert.equal((await request({ path: '/api/ttl' })).status, 200);
});

h.test('bad input: malformed JSON answers 400 code 9 FailedToParse', async () => {
  for (const [method, body] of [['POST', '{"db": "x", "collection": '], ['POST', 'not json'], ['PATCH', '{"db":"x",}']]) {
    const r = await request({ method, body });
    assertApiError(r, 400, 9, `${method} ${JSON.stringify(body)}`);
    assert.equal(r.json.codeName, 'FailedToParse', show(r));
  }
});

h.test('bad input: missing db or collection answers 400', async () => {
  const cases = [
    ['POST', { collection: 'c', key: 'at', expireAfterSeconds: 1 }],
    ['POST', { db: 'missingfields', key: 'at', expireAfterSeconds: 1 }],
    ['PATCH', { collection: 'c', name: 'at_1', expireAfterSeconds: 1 }],
    ['PATCH', { db: 'missingfields', name: 'at_1', expireAfterSeconds: 1 }],
  ];
  for (const [method, body] of cases) {
    const r = await request({ method, body });
    assertApiError(r, 400, undefined, `${method} ${JSON.stringify(body)}`);
  }
});

h.test('bad input: PATCH of a missing index answers 400 or 404 with code 27 IndexNotFound', async () => {
  const db = srv.freshDb('missing');
  await db.collection('c').createIndex({ at: 1 }, { expireAfterSeconds: 10 });
  const r = await request({ method: 'PATCH', body: { db: db.databaseName, collection: 'c', name: 'nope_1', expireAfterSeconds: 5 } });
  assertApiError(r, [400, 404], 27, 'PATCH of a missing index');
  assert.equal(r.json.codeName, 'IndexNotFound', show(r));
});

h.test('an unknown path answers 404; a wrong method on /api/ttl answers 405', async () => {
  for (const p of ['/api/nope', '/api/ttl/extra', '/nothing-here']) {
    const r = await request({ path: p });
    assert.equal(r.status, 404, `GET ${p}: ${show(r)}`);
  }
  for (const m of ['PUT', 'DELETE']) {
    const r = await request({ method: m, body: {} });
    assert.equal(r.status, 405, `${m} /api/ttl: ${show(r)}`);
  }
});

h.test('access without --auth: writes from a non-loopback address answer 403 (reads are served)', async (t) => {
  const addrs = Object.values(os.networkInterfaces()).flat()
    .filter((a) => a && a.family === 'IPv4' && !a.internal && !a.address.startsWith('127.'));
  if (!addrs.length) { t.skip('no non-loopback IPv4 address on this machine'); return; }
  const addr = addrs[0].address;
  const hp = await h.freePort();
  await withServer({ bindIp: '0.0.0.0', args: ['--httpPort', String(hp)] }, async () => {
    const body = { db: 'remote', collection: 'c', key: 'at', expireAfterSeconds: 10 };
    const r = await request({ host: addr, port: hp, localAddress: addr, method: 'POST', body });
    assert.equal(r.status, 403, `POST from ${addr}: ${show(r)}`);
    const p = await request({ host: addr, port: hp, localAddress: addr, method: 'PATCH',
      body: { db: 'remote', collection: 'c', name: 'at_1', expireAfterSeconds: 5 } });
    assert.equal(p.status, 403, `PATCH from ${addr}: ${show(p)}`);
    const g = await request({ host: addr, port: hp, localAddress: addr, path: '/api/ttl' });
    assert.equal(g.status, 200, `GET from ${addr}: ${show(g)}`);
    assert.ok(!g.json.indexes.some((x) => x.db === 'remote'), 'the refused POST created nothing');
    const l = await request({ port: hp, method: 'POST', body });
    assert.equal(l.status, 200, `the same POST from loopback: ${show(l)}`);
  });
});

h.test('access: what a web page in a browser could send is refused (found by helper-67: a cross-site text/plain POST created a TTL index that emptied a collection)', async () => {
  const db = srv.freshDb('csrf');
  await db.collection('users').insertMany(Array.from({ length: 20 }, (_, i) => ({ i, createdAt: new Date(Date.now() - 864e5) })));
  const body = JSON.stringify({ db: db.databaseName, collection: 'users', key: 'createdAt', expireAfterSeconds: 0 });
  const hostHdr = `127.0.0.1:${HTTP_PORT}`;
  // A form or fetch without preflight can only send text/plain (and two form types): 415.
  for (const ct of ['text/plain;charset=UTF-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
    const r = await request({ method: 'POST', body, headers: { 'Content-Type': ct } });
    assertApiError(r, [415], 2);
  }
  // Another origin (or the browser's own word for it) is 403, whatever the content type.
  for (const headers of [{ Origin: 'https://evil.example' }, { Origin: 'null' }, { Origin: 'http://localhost:3000' },
    { 'Sec-Fetch-Site': 'cross-site' }, { 'Sec-Fetch-Site': 'same-site' }]) {
    const r = await request({ method: 'POST', body, headers });
    assertApiError(r, [403], 13);
    const p = await request({ method: 'PATCH', body: { db: db.databaseName, collection: 'users', name: 'createdAt_1', expireAfterSeconds: 0 }, headers });
    assertApiError(p, [403], 13);
  }
  // A name pointed at 127.0.0.1 by someone else's DNS (rebinding) is refused, reads included.
  const reb = await request({ path: '/api/ttl', headers: { Host: `evil.example:${HTTP_PORT}` } });
  assertApiError(reb, [403], 13);
  const rebw = await request({ method: 'POST', body, headers: { Host: `evil.example:${HTTP_PORT}`, Origin: `http://evil.example:${HTTP_PORT}` } });
  assertApiError(rebw, [403], 13);
  assert.equal(await listIndex(db.collection('users'), 'createdAt_1'), undefined, 'nothing was created');
  await h.sleep(1500);
  assert.equal(await db.collection('users').countDocuments(), 20, 'no document was deleted');
  // The console's own page: same origin, JSON. Every answer forbids framing.
  const ok = await request({ method: 'POST', headers: { Origin: `http://${hostHdr}`, 'Sec-Fetch-Site': 'same-origin' },
    body: { db: db.databaseName, collection: 'users', key: 'createdAt', expireAfterSeconds: 3600 } });
  assert.equal(ok.status, 200, show(ok));
  assert.equal(ok.headers['x-frame-options'], 'DENY');
  assert.match(ok.headers['content-security-policy'] || '', /frame-ancestors 'none'/);
  const short = os.hostname().split('.')[0];
  for (const host of [`localhost:${HTTP_PORT}`, `[::1]:${HTTP_PORT}`, `${os.hostname()}:${HTTP_PORT}`, `${short}.example.net:${HTTP_PORT}`]) {
    const g = await request({ path: '/api/ttl', headers: { Host: host } });
    assert.equal(g.status, 200, `Host ${host}: ${show(g)}`);
  }
});

h.test('access with --auth: 401 without credentials, Basic of a SCRAM user with readWrite/dbAdmin writes, read-only 403 code 13, wrong password 401', async () => {
  const hp = await h.freePort();
  await withServer({ args: ['--auth', '--httpPort', String(hp)] }, async (s) => {
    // The first user through the localhost exception.
    const anon = new MongoClient(s.uri);
    await anon.connect();
    try {
      await anon.db('admin').command({ createUser: 'root', pwd: 'rootpw', roles: ['root'] });
    } finally { await anon.close(); }
    const root = new MongoClient(s.uri, { auth: { username: 'root', password: 'rootpw' }, authSource: 'admin' });
    await root.connect();
    try {
      await root.db('admin').command({ createUser: 'writer', pwd: 'w-pw', roles: [{ role: 'readWrite', db: 'app' }, { role: 'dbAdmin', db: 'app' }] });
      await root.db('admin').command({ createUser: 'reader', pwd: 'r-pw', roles: [{ role: 'read', db: 'app' }] });
      await root.db('app').collection('c').insertOne({ x: 1 });

      const body = { db: 'app', collection: 'c', key: 'at', expireAfterSeconds: 30 };
      const checks401 = [
        ['POST /api/ttl', { port: hp, method: 'POST', body }],
        ['PATCH /api/ttl', { port: hp, method: 'PATCH', body: { db: 'app', collection: 'c', name: 'at_1', expireAfterSeconds: 1 } }],
        ['GET /api/ttl', { port: hp, path: '/api/ttl' }],
        ['GET /metrics', { port: hp, path: '/metrics' }],
      ];
      for (const [what, opts] of checks401) {
        const r = await request(opts);
        assert.equal(r.status, 401, `${what} without credentials: ${show(r)}`);
        assert.match(r.headers['www-authenticate'] || '', /^Basic\b/i, `${what}: WWW-Authenticate: Basic expected, headers ${JSON.stringify(r.headers)}`);
      }
      const bad = await request({ port: hp, method: 'POST', body, auth: { user: 'writer', pwd: 'wrong' } });
      assert.equal(bad.status, 401, `wrong password: ${show(bad)}`);
      const unknown = await request({ port: hp, method: 'POST', body, auth: { user: 'nobody', pwd: 'x' } });
      assert.equal(unknown.status, 401, `unknown user: ${show(unknown)}`);

      const ro = await request({ port: hp, method: 'POST', body, auth: { user: 'reader', pwd: 'r-pw' } });
      assertApiError(ro, 403, 13, 'POST as a read-only user');
      assert.equal(await listIndex(root.db('app').collection('c'), 'at_1'), undefined, 'the refused POST created nothing');

      const ok = await request({ port: hp, method: 'POST', body, auth: { user: 'writer', pwd: 'w-pw' } });
      assert.equal(ok.status, 200, `POST as readWrite+dbAdmin: ${show(ok)}`);
      assert.equal(ok.json.name, 'at_1');
      assert.equal((await listIndex(root.db('app').collection('c'), 'at_1')).expireAfterSeconds, 30);
      const patch = await request({ port: hp, method: 'PATCH', auth: { user: 'writer', pwd: 'w-pw' },
        body: { db: 'app', collection: 'c', name: 'at_1', expireAfterSeconds: 40 } });
      assert.equal(patch.status, 200, `PATCH as readWrite+dbAdmin: ${show(patch)}`);
      assert.equal(patch.json.expireAfterSeconds_new, 40, show(patch));
      const roPatch = await request({ port: hp, method: 'PATCH', auth: { user: 'reader', pwd: 'r-pw' },
        body: { db: 'app', collection: 'c', name: 'at_1', expireAfterSeconds: 50 } });
      assertApiError(roPatch, 403, 13, 'PATCH as a read-only user');

      const g = await request({ port: hp, path: '/api/ttl', auth: { user: 'root', pwd: 'rootpw' } });
      assert.equal(g.status, 200, `GET /api/ttl as root: ${show(g)}`);
      assert.ok(g.json.indexes.some((x) => x.db === 'app' && x.name === 'at_1' && x.expireAfterSeconds === 40), show(g));
      const m = await request({ port: hp, path: '/metrics', auth: { user: 'root', pwd: 'rootpw' } });
      assert.equal(m.status, 200, `GET /metrics as root: ${show(m)}`);
      parseExposition(m.text);
      // The SCRAM-SHA-256 login SASLprep's the Basic password as a driver does: "I\u00ADV" is "\u2163" is "IV".
      await root.db('admin').command({ createUser: 'viewer', pwd: '\u2163', roles: ['root'], mechanisms: ['SCRAM-SHA-256'] });
      for (const pwd of ['\u2163', 'I\u00ADV', 'IV']) {
        const mv = await request({ port: hp, path: '/metrics', auth: { user: 'viewer', pwd } });
        assert.equal(mv.status, 200, `GET /metrics as a SCRAM-SHA-256-only user with ${JSON.stringify(pwd)}: ${show(mv)}`);
      }
      const gBad = await request({ port: hp, path: '/metrics', auth: { user: 'root', pwd: 'nope' } });
      assert.equal(gBad.status, 401, `GET /metrics with a wrong password: ${show(gBad)}`);
    } finally { await root.close(); }
  });
});

/* ------------------------------------------------------------ /metrics (3) */

h.test('GET /metrics: Content-Type text/plain; version=0.0.4 and a strictly valid exposition', async () => {
  const db = srv.freshDb('prom');
  await db.collection('c').createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
  const r = await scrape();
  assert.match(r.headers['content-type'] || '', /^text\/plain; ?version=0\.0\.4(; ?charset=utf-8)?$/i, show(r));
  parseExposition(r.text);
});

h.test('GET /metrics: the required families, their types and labels; one backlog series per TTL index', async () => {
  const db = srv.freshDb('fams');
  await db.collection('c1').createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
  await db.collection('c2').createIndex({ 'x.y': 1 }, { expireAfterSeconds: 10, name: 'custom "name"\\' });
  const r = await scrape();
  const p = parseExposition(r.text);
  const want = {
    mayfly_ttl_deleted_documents_total: 'counter',
    mayfly_ttl_passes_total: 'counter',
    mayfly_ttl_backlog_documents: 'gauge',
    mayfly_ttl_lateness_seconds: 'histogram',
    mayfly_connections_current: 'gauge',
    mayfly_opcounters_total: 'counter',
    mayfly_memory_resident_bytes: 'gauge',
    mayfly_storage_cache_bytes: 'gauge',
    mayfly_archive_bytes: 'gauge',
  };
  for (const [name, type] of Object.entries(want)) {
    const f = p.families.get(name);
    assert.ok(f, `family ${name} missing`);
    assert.equal(f.type, type, `${name}: TYPE ${type} expected, got ${f.type}`);
  }
  assert.ok(value(p, 'mayfly_memory_resident_bytes') > 0, 'resident bytes > 0');
  assert.ok(value(p, 'mayfly_connections_current') >= 1, 'connections_current >= 1 (the test client)');
  assert.ok(value(p, 'mayfly_storage_cache_bytes') >= 0);
  const ops = p.families.get('mayfly_opcounters_total').samples;
  assert.deepEqual(ops.map((s) => s.labels.type).sort(), ['command', 'delete', 'getmore', 'insert', 'query', 'update']);
  for (const s of ops) assert.deepEqual(Object.keys(s.labels), ['type']);
  // Backlog: exactly one series per TTL index, labelled db/collection/index, the same set as GET /api/ttl.
  const backlog = p.families.get('mayfly_ttl_backlog_documents').samples;
  for (const s of backlog) assert.deepEqual(Object.keys(s.labels).sort(), ['collection', 'db', 'index'], JSON.stringify(s));
  const api = (await request({ path: '/api/ttl' })).json.indexes;
  const k = (d, c, n) => JSON.stringify([d, c, n]);
  assert.deepEqual(backlog.map((s) => k(s.labels.db, s.labels.collection, s.labels.index)).sort(),
    api.map((x) => k(x.db, x.collection, x.name)).sort(), 'backlog series = TTL indexes');
  assert.ok(backlog.some((s) => s.labels.db === db.databaseName && s.labels.index === 'custom "name"\\'),
    'a label value with " and \\ round-trips through the escapes');
  for (const s of p.families.get('mayfly_archive_bytes').samples) {
    assert.deepEqual(Object.keys(s.labels).sort(), ['collection', 'db'], JSON.stringify(s));
  }
});

h.test('GET /metrics: values move: opcounters insert after inserts, deleted_documents_total and the lateness histogram after TTL deletes', async () => {
  const db = srv.freshDb('move');
  const coll = db.collection('c');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const p0 = parseExposition((await scrape()).text);
  const ins0 = value(p0, 'mayfly_opcounters_total', { type: 'insert' });
  const del0 = value(p0, 'mayfly_ttl_deleted_documents_total');
  const lat0 = histCount(p0, 'mayfly_ttl_lateness_seconds');
  await coll.insertMany(Array.from({ length: 30 }, (_, i) => ({ _id: i, at: new Date(Date.now() - 5000) })));
  await waitFor(async () => (await coll.countDocuments()) === 0, 'TTL deletes the 30 documents');
  const p1 = await waitFor(async () => {
    const p = parseExposition((await scrape()).text);
    return value(p, 'mayfly_ttl_deleted_documents_total') >= del0 + 30 &&
      histCount(p, 'mayfly_ttl_lateness_seconds') >= lat0 + 30 ? p : null;
  }, 'deleted_documents_total and lateness count grow by >= 30');
  assert.ok(value(p1, 'mayfly_opcounters_total', { type: 'insert' }) >= ins0 + 30,
    `opcounters insert grows by >= 30 (insertMany of 30 counts each document): ${ins0} -> ${value(p1, 'mayfly_opcounters_total', { type: 'insert' })}`);
  // The passes counter never goes down.
  assert.ok(value(p1, 'mayfly_ttl_passes_total') >= value(p0, 'mayfly_ttl_passes_total'));
  // The lateness histogram: some finite bucket counts the (recent) deletes, not only +Inf.
  const buckets = p1.families.get('mayfly_ttl_lateness_seconds').samples.filter((s) => s.name.endsWith('_bucket') && s.labels.le !== '+Inf');
  const b0 = p0.families.get('mayfly_ttl_lateness_seconds').samples.filter((s) => s.name.endsWith('_bucket') && s.labels.le !== '+Inf');
  const grew = buckets.some((b, i) => b0[i] && b.value - b0[i].value >= 30);
  assert.ok(grew, 'some finite le bucket counts the 30 deletions (expired 5 s before insertion, lateness ~5 s)');
});

h.test('GET /metrics: mayfly_archive_bytes has a series for a collection with an archive', async () => {
  const db = srv.freshDb('parch');
  const coll = db.collection('c');
  await db.command({ createIndexes: 'c', indexes: [{ key: { at: 1 }, name: 'at_1', expireAfterSeconds: 0, archive: true }] });
  await coll.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, at: new Date(Date.now() - 1000), s: 'x'.repeat(50) })));
  await waitFor(async () => (await coll.countDocuments()) === 0, 'archived documents deleted');
  const p = await waitFor(async () => {
    const x = parseExposition((await scrape()).text);
    const s = x.families.get('mayfly_archive_bytes').samples.find((e) => e.labels.db === db.databaseName && e.labels.collection === 'c');
    return s && s.value > 0 ? x : null;
  }, `mayfly_archive_bytes{db="${db.databaseName}",collection="c"} > 0`);
  assert.ok(p);
});

/*
 * Raw bytes on one connection (the request reader, mf_http_reader_t): writes
 * data, reads until the server closes or `until` returns true on what came
 * back, and resolves with it as text.
 */
function rawHttp(data, until = null) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(HTTP_PORT, '127.0.0.1');
    const chunks = [];
    const timer = setTimeout(() => { sock.destroy(); reject(new Error('raw HTTP exchange timed out')); }, 15000);
    const done = () => { clearTimeout(timer); resolve(Buffer.concat(chunks).toString('latin1')); };
    sock.on('data', (c) => {
      chunks.push(c);
      if (until && until(Buffer.concat(chunks).toString('latin1'))) { sock.destroy(); done(); }
    });
    sock.on('end', done);
    sock.on('error', (e) => (e.code === 'ECONNRESET' ? done() : reject(e)));
    sock.write(data);
  });
}
const statuses = (text) => [...text.matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((m) => Number(m[1]));

h.test('requests: two pipelined in one write are both answered, in order, on the kept-alive connection', async () => {
  const req = (p) => `GET ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
  const text = await rawHttp(req('/api/ttl') + req('/no-such-path'), (t) => statuses(t).length >= 2 && /\}\s*$|Not Found/.test(t));
  assert.deepEqual(statuses(text).slice(0, 2), [200, 404], text.slice(0, 300));
});

h.test('requests: a URL over 8 KB answers 414, headers over 64 KB 431, a body over 1 MB 413, garbage 400; the port serves on', async () => {
  const long = await rawHttp(`GET /api/ttl?q=${'a'.repeat(9000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
  assert.deepEqual(statuses(long), [414], long.slice(0, 200));
  const hdrs = await rawHttp(`GET /api/ttl HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 80 }, (_, i) => `X-H${i}: ${'v'.repeat(1000)}\r\n`).join('')}\r\n`);
  assert.deepEqual(statuses(hdrs), [431], hdrs.slice(0, 200));
  const body = await rawHttp(`POST /api/ttl HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${2 * 1024 * 1024}\r\n\r\n{`);
  assert.deepEqual(statuses(body), [413], body.slice(0, 200));
  const junk = await rawHttp('\x00\x01 not http at all\r\n\r\n');
  assert.deepEqual(statuses(junk), [400], junk.slice(0, 200));
  // Each refusal closed its connection (rawHttp returned on the server's close); the port still answers.
  const r = await request({ path: '/api/ttl' });
  assert.equal(r.status, 200, show(r));
});
