'use strict';
/*
 * TLS (mongod's --tlsMode and friends) through the Node driver, mongosh and
 * raw TLS sockets. Certificates are made at test time with the openssl CLI in
 * a temporary directory: a CA, a server certificate for CN=localhost
 * (subjectAltName DNS:localhost, IP:127.0.0.1), a client certificate
 * (CN=client) from that CA, and a second CA the server does not trust with its
 * own client certificate (CN=intruder).
 *
 * One server per scenario (a describe block), stopped with SIGTERM at its end
 * and required to exit 0:
 *   - requireTLS: CRUD over TLS, plain clients closed at once (driver, raw
 *     socket, mongosh), a client that does not trust the CA refused and one
 *     with tlsAllowInvalidCertificates accepted, 5 MB documents, 20 MB of
 *     results, 200 pipelined inserts on one raw TLS connection, a message
 *     sent one byte per TLS record;
 *   - the old spellings --sslMode requireSSL --sslPEMKeyFile;
 *   - preferTLS and allowTLS: plain and TLS clients side by side;
 *   - disabled (no TLS flags): TLS clients refused, plain ones served;
 *   - --tlsCAFile: client certificates required (none or another CA's
 *     refused, the CA's accepted and logged with its subject); with
 *     --tlsAllowConnectionsWithoutCertificates a client without one is
 *     served; with --tlsAllowInvalidCertificates another CA's is accepted;
 *   - bad TLS configuration: the server exits non-zero at start, saying why;
 *   - --auth over requireTLS: the localhost exception and SCRAM over TLS.
 */
const assert = require('node:assert/strict');
const { execFile, execFileSync, spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');
const { describe, before, after, test } = require('node:test');
const { MongoClient } = require('mongodb');
const h = require('./harness');

const MONGOSH = path.join(h.REPO_ROOT, 'node_modules', '.bin', 'mongosh');
const FAIL_FAST_MS = 1500; // serverSelectionTimeoutMS for clients that must be refused

/* ------------------------------------------------------------ certificates */

let certsCache = null;

function openssl(dir, args) {
  try {
    execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    if (e.code === 'ENOENT') {
      throw new Error('the openssl command-line tool is not installed; these tests make their certificates ' +
        'with it (bash scripts/deps.sh installs it, or apt-get install openssl)');
    }
    throw new Error(`openssl ${args.join(' ')} failed: ${e.message}\n${e.stderr || ''}`);
  }
}

/* Makes (once) the CA, server and client certificates; returns their paths. */
function certs() {
  if (certsCache) return certsCache;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-tls-'));
  try {
    certsCache = makeCerts(dir);
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return certsCache;
}

function makeCerts(dir) {
  const key = (name, subj) => openssl(dir, ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`,
    '-out', `${name}.csr`, '-subj', subj]);
  const sign = (name, ca, ext) => openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`,
    '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.crt`, '-days', '2',
    ...(ext ? ['-extfile', ext] : [])]);
  const bundle = (name, out) => fs.writeFileSync(path.join(dir, out),
    fs.readFileSync(path.join(dir, `${name}.crt`), 'utf8') + fs.readFileSync(path.join(dir, `${name}.key`), 'utf8'));
  for (const [ca, cn] of [['ca', 'mayfly-test-ca'], ['otherca', 'mayfly-untrusted-ca']]) {
    openssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${ca}.key`, '-out', `${ca}.pem`,
      '-days', '2', '-subj', `/CN=${cn}`]);
  }
  fs.writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  key('srv', '/CN=localhost');
  sign('srv', 'ca', 'server.ext');
  bundle('srv', 'server.pem');
  key('cli', '/CN=client');
  sign('cli', 'ca');
  bundle('cli', 'client.pem');
  key('intruder', '/CN=intruder');
  sign('intruder', 'otherca');
  bundle('intruder', 'intruder.pem');
  fs.writeFileSync(path.join(dir, 'garbage.pem'), 'this is not a PEM file\n');
  const p = (f) => path.join(dir, f);
  return {
    dir,
    ca: p('ca.pem'), // the CA the server's and client.pem's certificates come from
    otherCa: p('otherca.pem'), // a CA nobody here trusts
    server: p('server.pem'), // server certificate + key
    serverCertOnly: p('srv.crt'), // a certificate without its key
    client: p('client.pem'), // client certificate (CN=client) + key, signed by ca
    intruder: p('intruder.pem'), // client certificate (CN=intruder) + key, signed by otherCa
    garbage: p('garbage.pem'),
  };
}

after(() => { if (certsCache) fs.rmSync(certsCache.dir, { recursive: true, force: true }); });

/* ------------------------------------------------------------ scenarios */

/*
 * A describe block with its own server started with args (a function of the
 * certificates). Returns a context whose server, port and clients are filled
 * in by the before hook.
 */
function scenario(name, args, body) {
  describe(name, () => {
    const ctx = {
      server: null,
      clients: [],
      get port() { return this.server.port; },
      uri(query = {}) {
        const q = new URLSearchParams({ directConnection: 'true', serverSelectionTimeoutMS: '5000', ...query });
        return `mongodb://127.0.0.1:${this.server.port}/?${q}`;
      },
    };
    before(async () => {
      ctx.server = new h.MayflyServer({ args: args(certs()) });
      await ctx.server.start();
    }, { timeout: 60000 });
    after(async () => {
      for (const c of ctx.clients) await c.close(true).catch(() => {});
      if (!ctx.server) return;
      const info = await ctx.server.stop();
      const unexpected = ctx.server.unexpectedExits;
      ctx.server.cleanup();
      if (unexpected.length) {
        throw new Error(`mayflyd exited unexpectedly during "${name}": ${JSON.stringify(unexpected)}`);
      }
      if (info && (info.forced || (info.code !== 0 && info.code !== null) ||
          (info.signal && info.signal !== 'SIGTERM'))) {
        throw new Error(`mayflyd did not shut down cleanly on SIGTERM: ${JSON.stringify(info)}\n` +
          `--- server stderr tail ---\n${ctx.server.stderrTail(60)}`);
      }
    }, { timeout: 40000 });
    body(ctx);
  });
}

/* node:test's test() with the scenario server's stderr tail on failure. */
function t(ctx, name, optsOrFn, maybeFn) {
  const fn = typeof optsOrFn === 'function' ? optsOrFn : maybeFn;
  const opts = typeof optsOrFn === 'function' ? {} : optsOrFn;
  return test(name, { timeout: 60000, ...opts }, async () => {
    try {
      await fn();
    } catch (err) {
      const s = ctx.server;
      if (s) {
        const died = s.exitInfo && !s.expectingExit;
        const note = `\n--- mayflyd stderr tail${died ? ` (SERVER EXITED: ${JSON.stringify(s.exitInfo)})` : ''}` +
          ` ---\n${s.stderrTail(20)}`;
        try { err.message = `${err.message}${note}`; } catch (_) { /* frozen */ }
      }
      throw err;
    }
  });
}

/* ------------------------------------------------------------ helpers */

let dbCounter = 0;
function dbName(tag) {
  dbCounter += 1;
  return `tls_${process.pid % 10000}_${dbCounter}_${tag}`.replace(/[^A-Za-z0-9_]/g, '_');
}

/* A connected client (closed with the scenario); what says which one, for the failure message. */
async function connected(ctx, what, opts = {}, query = {}) {
  const c = new MongoClient(ctx.uri(query), opts);
  ctx.clients.push(c);
  try {
    await c.connect();
    await c.db('admin').command({ ping: 1 });
  } catch (e) {
    e.message = `${what} should connect: ${e.name}: ${e.message}`;
    throw e;
  }
  return c;
}

/* Asserts that a client with these options cannot connect (and run ping); returns the error. */
async function refused(ctx, what, opts = {}, msgRe) {
  const c = new MongoClient(ctx.uri({ serverSelectionTimeoutMS: String(FAIL_FAST_MS) }), opts);
  let err = null;
  try {
    await c.connect();
    await c.db('admin').command({ ping: 1 });
  } catch (e) {
    err = e;
  } finally {
    await c.close(true).catch(() => {});
  }
  assert.ok(err, `${what} should be refused, but it connected and ran ping`);
  assert.equal(err.name, 'MongoServerSelectionError', `${what}: ${err.name}: ${err.message}`);
  if (msgRe) assert.match(err.message, msgRe, `${what}: the driver's reason`);
  return err;
}

/* Inserts, reads, updates and deletes through client; checks every answer. */
async function crud(client, tag) {
  const c = client.db(dbName(tag)).collection('c');
  const docs = Array.from({ length: 50 }, (_, i) => ({ _id: i, v: i * 2, s: `doc-${i}` }));
  assert.equal((await c.insertMany(docs)).insertedCount, 50);
  assert.deepEqual(await c.findOne({ _id: 7 }), { _id: 7, v: 14, s: 'doc-7' });
  assert.deepEqual((await c.find({ v: { $gte: 90 } }).sort({ _id: -1 }).toArray()).map((d) => d._id), [49, 48, 47, 46, 45]);
  const u = await c.updateMany({ v: { $lt: 10 } }, { $inc: { v: 1000 } });
  assert.equal(u.modifiedCount, 5);
  assert.equal((await c.deleteMany({ v: { $gte: 1000 } })).deletedCount, 5);
  assert.equal(await c.countDocuments(), 45);
  const agg = await c.aggregate([{ $group: { _id: null, s: { $sum: '$v' } } }]).toArray();
  assert.equal(agg[0].s, docs.slice(5).reduce((a, d) => a + d.v, 0));
  return c;
}

/* Resolves with the first stderr line matching re (polling up to ms); fails if none appears. */
async function waitLog(server, re, ms = 5000, from = 0) {
  const deadline = Date.now() + ms;
  for (;;) {
    const line = server.stderrLines.slice(from).find((l) => re.test(l));
    if (line) return line;
    if (Date.now() > deadline) {
      assert.fail(`no server log line matching ${re} within ${ms} ms`);
    }
    await h.sleep(50);
  }
}

/* Runs mongosh on uri; resolves {code, stdout, stderr} (never rejects). */
function mongoshRun(uri, script) {
  return new Promise((resolve) => {
    execFile(MONGOSH, [uri, '--quiet', '--norc', '--eval', script], {
      timeout: 45000, env: { ...process.env, MONGOSH_SKIP_NODE_VERSION_CHECK: '1', NO_COLOR: '1' },
    }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code === undefined ? -1 : err.code) : 0, stdout: stdout.trim(), stderr, err });
    });
  });
}

/* mongosh must succeed and print expected (a regular expression) on stdout. */
async function mongoshOk(ctx, query, db, script, expected) {
  const q = new URLSearchParams({ directConnection: 'true', serverSelectionTimeoutMS: '5000', ...query });
  const uri = `mongodb://127.0.0.1:${ctx.port}/${db}?${q}`;
  const r = await mongoshRun(uri, script);
  assert.equal(r.code, 0, `mongosh ${uri} failed (exit ${r.code})\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  assert.match(r.stdout, expected, `mongosh ${uri} stdout`);
  return r.stdout;
}

/* mongosh must fail to connect. */
async function mongoshRefused(ctx, query, what) {
  const q = new URLSearchParams({ directConnection: 'true', serverSelectionTimeoutMS: String(FAIL_FAST_MS), ...query });
  const uri = `mongodb://127.0.0.1:${ctx.port}/test?${q}`;
  const r = await mongoshRun(uri, 'print("CONNECTED-" + db.runCommand({ping: 1}).ok)');
  assert.notEqual(r.code, 0, `${what}: mongosh ${uri} should fail to connect\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  assert.doesNotMatch(r.stdout, /CONNECTED-1/, `${what}: mongosh ran ping`);
  assert.match(`${r.stdout}\n${r.stderr}`, /MongoServerSelectionError|closed|ECONNRESET|certificate|socket/i,
    `${what}: mongosh's error`);
}

/* A raw OP_MSG connection over TLS (harness.RawConn with a TLS socket). */
class TlsRawConn extends h.RawConn {
  constructor(port, tlsOpts) {
    super(port);
    this.tlsOpts = tlsOpts;
  }

  connect() {
    return new Promise((resolve, reject) => {
      let settled = false;
      this.sock = tls.connect({ port: this.port, host: '127.0.0.1', ...this.tlsOpts });
      this.sock.once('secureConnect', () => { settled = true; resolve(this); });
      this.sock.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); this.wake(); });
      this.sock.on('close', () => { this.onClose(); if (!settled) { settled = true; reject(new Error('closed during the TLS handshake')); } });
      this.sock.on('error', (e) => { this.onClose(); if (!settled) { settled = true; reject(e); } });
    });
  }
}

/* ========================================================= requireTLS */

scenario('requireTLS', (c) => ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', c.server], (ctx) => {
  let client = null;
  const tlsOpts = () => ({ tls: true, tlsCAFile: certs().ca });

  t(ctx, 'the Node driver with tls and tlsCAFile does CRUD; the server logs the TLS connection', async () => {
    const from = ctx.server.stderrLines.length;
    client = await connected(ctx, 'a TLS client trusting the CA', tlsOpts());
    await crud(client, 'req');
    const line = await waitLog(ctx.server, /TLS connection from 127\.0\.0\.1:\d+ \(TLSv1\.[23] .*no client certificate\)/, 5000, from);
    assert.match(line, /"s":"I"/);
  });

  t(ctx, 'tls=true&tlsCAFile= in the URI works as the options do', async () => {
    const c = await connected(ctx, 'a TLS client from the URI', {}, { tls: 'true', tlsCAFile: certs().ca });
    assert.equal((await c.db('admin').command({ hello: 1 })).isWritablePrimary, true);
  });

  t(ctx, 'a plain client is refused: the driver fails server selection and the server logs why', async () => {
    const from = ctx.server.stderrLines.length;
    await refused(ctx, 'a plain client', {}, /closed|reset|socket/i);
    await waitLog(ctx.server, /a connection without TLS, but --tlsMode is requireTLS/, 5000, from);
  });

  t(ctx, 'a plain raw hello gets no answer: the connection is closed at once', async () => {
    const conn = await h.rawConnect(ctx.port);
    try {
      await conn.send(h.buildOpMsg(1, { hello: 1, $db: 'admin' }));
      assert.equal(await conn.readReply(5000), null, 'no reply to a plain hello');
      assert.equal(conn.closed, true);
    } finally { conn.close(); }
    assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1, 'TLS clients are still served');
  });

  t(ctx, 'a TLS client that does not trust the CA is refused with a certificate verify error', async () => {
    await refused(ctx, 'a TLS client trusting another CA', { tls: true, tlsCAFile: certs().otherCa },
      /certificate|issuer|self.signed/i);
    // Without any CA file the system store is used, which knows nothing of the test CA either.
    await refused(ctx, 'a TLS client with the system CAs', { tls: true }, /certificate|issuer|self.signed/i);
  });

  t(ctx, 'tlsAllowInvalidCertificates=true on the client connects without trusting the CA', async () => {
    const c = await connected(ctx, 'tlsAllowInvalidCertificates=true', {},
      { tls: 'true', tlsAllowInvalidCertificates: 'true' });
    const coll = c.db(dbName('inv')).collection('c');
    await coll.insertOne({ _id: 1, x: 'y' });
    assert.deepEqual(await coll.findOne(), { _id: 1, x: 'y' });
    const c2 = await connected(ctx, 'tlsInsecure=true', {}, { tls: 'true', tlsInsecure: 'true' });
    assert.equal(await c2.db(coll.dbName).collection('c').countDocuments(), 1);
  });

  t(ctx, 'mongosh with ?tls=true&tlsCAFile= inserts and reads; plain mongosh cannot connect', { timeout: 90000 }, async () => {
    const db = dbName('sh');
    await mongoshOk(ctx, { tls: 'true', tlsCAFile: certs().ca }, db,
      'db.c.insertOne({_id: 1, via: "mongosh"}); print("GOT=" + JSON.stringify(db.c.find().toArray()))',
      /GOT=\[\{"_id":1,"via":"mongosh"\}\]/);
    assert.deepEqual(await client.db(db).collection('c').findOne(), { _id: 1, via: 'mongosh' });
    await mongoshRefused(ctx, {}, 'plain mongosh on requireTLS');
    await mongoshRefused(ctx, { tls: 'true', tlsCAFile: certs().otherCa }, 'mongosh trusting another CA');
  });

  t(ctx, 'a 5 MB document goes in and comes back intact; 20 MB of results over batches', async () => {
    const c = client.db(dbName('big')).collection('c');
    const blob = crypto.randomBytes(5 * 1024 * 1024); // incompressible, many TLS records
    const s = 'é'.repeat(100000) + crypto.randomBytes(200000).toString('base64');
    await c.insertOne({ _id: 'big', blob, s });
    const back = await c.findOne({ _id: 'big' });
    assert.ok(Buffer.from(back.blob.buffer).equals(blob), 'the 5 MB binary comes back byte for byte');
    assert.equal(back.s, s);
    const mb = crypto.randomBytes(1024 * 1024);
    await c.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, i, mb })));
    const all = await c.find({ i: { $exists: true } }).sort({ _id: 1 }).toArray();
    assert.equal(all.length, 20);
    for (const d of all) assert.ok(Buffer.from(d.mb.buffer).equals(mb), `document ${d._id} intact`);
  });

  t(ctx, '200 inserts pipelined on one raw TLS connection, a 2 MB one among them, answer in order', async () => {
    const db = dbName('pipe');
    const conn = new TlsRawConn(ctx.port, { ca: fs.readFileSync(certs().ca) });
    await conn.connect();
    try {
      const big = crypto.randomBytes(2 * 1024 * 1024);
      const msgs = [];
      for (let i = 1; i <= 200; i++) {
        const doc = i === 100 ? { _id: i, big } : { _id: i, s: `small-${i}` };
        msgs.push(h.buildOpMsg(i, { insert: 'c', documents: [doc], $db: db }));
      }
      assert.equal(await conn.send(Buffer.concat(msgs)), true, 'one write of all 200 messages');
      for (let i = 1; i <= 200; i++) {
        const r = await conn.readReply(20000);
        assert.ok(r, `reply ${i} (the server closed the connection)`);
        assert.equal(conn.lastResponseTo, i, 'replies come in request order');
        assert.deepEqual([r.ok, r.n], [1, 1], `insert ${i}: ${JSON.stringify(r).slice(0, 200)}`);
      }
      const cnt = await conn.command(db, { count: 'c' });
      assert.equal(cnt.n, 200);
    } finally { conn.close(); }
    const doc = await client.db(db).collection('c').findOne({ _id: 100 });
    assert.equal(doc.big.buffer.length, 2 * 1024 * 1024);
  });

  t(ctx, 'a hello sent one byte per TLS record is answered', async () => {
    const conn = new TlsRawConn(ctx.port, { ca: fs.readFileSync(certs().ca) });
    await conn.connect();
    try {
      conn.sock.setNoDelay(true);
      const msg = h.buildOpMsg(7, { hello: 1, $db: 'admin' });
      for (let i = 0; i < msg.length; i++) {
        await conn.send(msg.subarray(i, i + 1));
        if (i % 16 === 0) await h.sleep(1);
      }
      const r = await conn.readReply(10000);
      assert.ok(r, 'a reply');
      assert.equal(r.isWritablePrimary, true);
      assert.equal(conn.lastResponseTo, 7);
    } finally { conn.close(); }
  });

  t(ctx, '200 concurrent insertOne through one pooled TLS connection', async () => {
    const c = await connected(ctx, 'a one-connection TLS client', { ...tlsOpts(), maxPoolSize: 1 });
    const coll = c.db(dbName('conc')).collection('c');
    const rs = await Promise.all(Array.from({ length: 200 }, (_, i) => coll.insertOne({ _id: i, pad: 'x'.repeat(i * 50) })));
    assert.equal(rs.length, 200);
    assert.equal(await coll.countDocuments(), 200);
  });
});

/* ========================================================= --sslMode */

scenario('--sslMode requireSSL --sslPEMKeyFile (the old spellings)',
  (c) => ['--sslMode', 'requireSSL', '--sslPEMKeyFile', c.server], (ctx) => {
    t(ctx, 'TLS clients are served, plain ones refused', async () => {
      const c = await connected(ctx, 'a TLS client', { tls: true, tlsCAFile: certs().ca });
      await crud(c, 'ssl');
      await refused(ctx, 'a plain client');
    });
  });

/* ========================================================= preferTLS / allowTLS */

for (const mode of ['preferTLS', 'allowTLS']) {
  scenario(mode, (c) => ['--tlsMode', mode, '--tlsCertificateKeyFile', c.server], (ctx) => {
    t(ctx, 'plain and TLS clients work side by side on the same data', async () => {
      const plain = await connected(ctx, 'a plain client');
      const secure = await connected(ctx, 'a TLS client', { tls: true, tlsCAFile: certs().ca });
      const from = ctx.server.stderrLines.length;
      const db = dbName(mode);
      await crud(secure, `${mode}_tls`);
      await crud(plain, `${mode}_plain`);
      await plain.db(db).collection('c').insertOne({ _id: 'plain' });
      await secure.db(db).collection('c').insertOne({ _id: 'tls' });
      assert.deepEqual((await plain.db(db).collection('c').find().sort({ _id: 1 }).toArray()).map((d) => d._id), ['plain', 'tls']);
      assert.deepEqual((await secure.db(db).collection('c').find().sort({ _id: 1 }).toArray()).map((d) => d._id), ['plain', 'tls']);
      assert.equal(ctx.server.stderrLines.slice(from).filter((l) => /without TLS/.test(l)).length, 0);
    });

    t(ctx, 'a TLS client that does not trust the CA is still refused', async () => {
      await refused(ctx, 'a TLS client trusting another CA', { tls: true, tlsCAFile: certs().otherCa },
        /certificate|issuer|self.signed/i);
    });

    t(ctx, 'mongosh connects both with and without TLS', { timeout: 90000 }, async () => {
      const db = dbName(`${mode}_sh`);
      await mongoshOk(ctx, {}, db, 'db.c.insertOne({_id: "plain"}); print("N=" + db.c.countDocuments())', /N=1/);
      await mongoshOk(ctx, { tls: 'true', tlsCAFile: certs().ca }, db,
        'db.c.insertOne({_id: "tls"}); print("N=" + db.c.countDocuments())', /N=2/);
    });
  });
}

/* ========================================================= disabled */

scenario('disabled (no TLS flags)', () => [], (ctx) => {
  t(ctx, 'a plain client works; a TLS client is refused and the server logs why', async () => {
    const plain = await connected(ctx, 'a plain client');
    await crud(plain, 'dis');
    const from = ctx.server.stderrLines.length;
    await refused(ctx, 'a TLS client', { tls: true, tlsCAFile: certs().ca });
    await waitLog(ctx.server, /a TLS handshake, but TLS is disabled/, 5000, from);
    await refused(ctx, 'a TLS client with tlsAllowInvalidCertificates', { tls: true, tlsAllowInvalidCertificates: true });
    assert.equal((await plain.db('admin').command({ ping: 1 })).ok, 1);
  });

  t(ctx, 'a raw TLS handshake is closed before it completes', async () => {
    const conn = new TlsRawConn(ctx.port, { ca: fs.readFileSync(certs().ca) });
    await assert.rejects(conn.connect(), /closed|reset|socket|disconnected|EPIPE/i);
    conn.close();
  });

  t(ctx, 'mongosh without TLS works; with tls=true it cannot connect', { timeout: 90000 }, async () => {
    await mongoshOk(ctx, {}, dbName('dis_sh'), 'print("PING=" + db.runCommand({ping: 1}).ok)', /PING=1/);
    await mongoshRefused(ctx, { tls: 'true', tlsCAFile: certs().ca }, 'mongosh with TLS on a server without it');
  });
});

/* ========================================================= client certificates */

scenario('--tlsCAFile: client certificates required',
  (c) => ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', c.server, '--tlsCAFile', c.ca], (ctx) => {
    t(ctx, 'a client without a certificate is refused', async () => {
      const from = ctx.server.stderrLines.length;
      await refused(ctx, 'a TLS client without a certificate', { tls: true, tlsCAFile: certs().ca },
        /certificate required|alert|closed|reset/i);
      await waitLog(ctx.server, /TLS handshake failed: .*peer did not return a certificate/, 5000, from);
    });

    t(ctx, "a client with the CA's certificate works and the server logs its subject", async () => {
      const from = ctx.server.stderrLines.length;
      const c = await connected(ctx, 'a client with client.pem',
        { tls: true, tlsCAFile: certs().ca, tlsCertificateKeyFile: certs().client });
      await crud(c, 'cert');
      await waitLog(ctx.server, /TLS connection from 127\.0\.0\.1:\d+ \(TLSv1\.[23] [^,]*, \/CN=client\)/, 5000, from);
    });

    t(ctx, 'a client certificate from another CA is refused', async () => {
      const from = ctx.server.stderrLines.length;
      await refused(ctx, 'a client with intruder.pem (another CA)',
        { tls: true, tlsCAFile: certs().ca, tlsCertificateKeyFile: certs().intruder });
      await waitLog(ctx.server, /TLS handshake failed: .*certificate verify failed/, 5000, from);
    });

    t(ctx, 'a plain client is refused', async () => {
      await refused(ctx, 'a plain client');
    });

    t(ctx, 'mongosh with tlsCertificateKeyFile works; without a certificate it cannot connect', { timeout: 90000 }, async () => {
      await mongoshOk(ctx, { tls: 'true', tlsCAFile: certs().ca, tlsCertificateKeyFile: certs().client },
        dbName('cert_sh'), 'db.c.insertOne({_id: 1}); print("N=" + db.c.countDocuments())', /N=1/);
      await mongoshRefused(ctx, { tls: 'true', tlsCAFile: certs().ca }, 'mongosh without a client certificate');
    });
  });

scenario('--tlsCAFile --tlsAllowConnectionsWithoutCertificates',
  (c) => ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', c.server, '--tlsCAFile', c.ca,
    '--tlsAllowConnectionsWithoutCertificates'], (ctx) => {
    t(ctx, 'a client without a certificate works, and so does one with the CA\'s', async () => {
      const none = await connected(ctx, 'a TLS client without a certificate', { tls: true, tlsCAFile: certs().ca });
      await crud(none, 'nocert');
      const from = ctx.server.stderrLines.length;
      const withCert = await connected(ctx, 'a client with client.pem',
        { tls: true, tlsCAFile: certs().ca, tlsCertificateKeyFile: certs().client });
      await crud(withCert, 'withcert');
      await waitLog(ctx.server, /TLS connection from .*\/CN=client\)/, 5000, from);
    });

    t(ctx, 'a client certificate from another CA is still refused', async () => {
      const from = ctx.server.stderrLines.length;
      await refused(ctx, 'a client with intruder.pem (another CA)',
        { tls: true, tlsCAFile: certs().ca, tlsCertificateKeyFile: certs().intruder });
      await waitLog(ctx.server, /TLS handshake failed: .*certificate verify failed/, 5000, from);
    });
  });

scenario('--tlsCAFile --tlsAllowInvalidCertificates',
  (c) => ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', c.server, '--tlsCAFile', c.ca,
    '--tlsAllowInvalidCertificates'], (ctx) => {
    t(ctx, 'a client certificate from another CA is accepted', async () => {
      const from = ctx.server.stderrLines.length;
      const c = await connected(ctx, 'a client with intruder.pem (another CA)',
        { tls: true, tlsCAFile: certs().ca, tlsCertificateKeyFile: certs().intruder });
      await crud(c, 'invcert');
      await waitLog(ctx.server, /TLS connection from .*\/CN=intruder\)/, 5000, from);
      await connected(ctx, 'a client with client.pem',
        { tls: true, tlsCAFile: certs().ca, tlsCertificateKeyFile: certs().client });
    });

    t(ctx, 'a client without any certificate is still refused (as mongod does)', async () => {
      const from = ctx.server.stderrLines.length;
      await refused(ctx, 'a TLS client without a certificate', { tls: true, tlsCAFile: certs().ca });
      await waitLog(ctx.server, /TLS handshake failed: .*peer did not return a certificate/, 5000, from);
    });
  });

/* ========================================================= bad configuration */

/* ========================================================= counters */

scenario('serverStatus network over TLS', (c) => ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', c.server], (ctx) => {
  t(ctx, 'bytesIn, bytesOut and numRequests count the messages inside TLS, as mongod does, not its records', async () => {
    // The only connection to this server: nothing else moves its counters.
    const conn = new TlsRawConn(ctx.port, { ca: fs.readFileSync(certs().ca) });
    await conn.connect();
    try {
      let plainIn = 0; // reply bytes as the client reads them, decrypted
      conn.sock.on('data', (d) => { plainIn += d.length; });
      const status = async () => (await conn.command('admin', { serverStatus: 1 })).network;
      const n0 = await status();
      const n0Reply = plainIn;
      let sent = 0;
      const replies0 = plainIn;
      for (let i = 0; i < 20; i++) {
        // Documents of 40 KB: three TLS records each, whose headers and tags old counting added in.
        const msg = h.buildOpMsg(100 + i, { insert: 'c', documents: [{ _id: i, pad: 'p'.repeat(40000) }], $db: 'net' });
        sent += msg.length;
        await conn.send(msg);
        const r = await conn.readReply(10000);
        assert.equal(r.n, 1);
      }
      const insertReplies = plainIn - replies0;
      const req = h.buildOpMsg(999, { serverStatus: 1, $db: 'admin' });
      await conn.send(req);
      const n1 = (await conn.readReply(10000)).network;
      assert.equal(n1.numRequests - n0.numRequests, 21, 'the inserts and one serverStatus');
      assert.equal(n1.bytesIn - n0.bytesIn, sent + req.length, 'bytesIn: the messages sent');
      assert.equal(n1.bytesOut - n0.bytesOut, n0Reply + insertReplies, 'bytesOut: the replies read');
      assert.equal(n1.physicalBytesIn - n0.physicalBytesIn, n1.bytesIn - n0.bytesIn);
    } finally { conn.close(); }
  });
});

describe('bad TLS configuration: the server exits non-zero at start', () => {
  /* Starts mayflyd with args; resolves {code, signal, stderr} once it exits (fails after 10 s). */
  async function startExpectingExit(args) {
    const dbpath = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-tlsbad-'));
    const port = await h.freePort();
    const proc = spawn(h.binaryPath(), ['--port', String(port), '--bind_ip', '127.0.0.1', '--dbpath', dbpath, ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ASAN_OPTIONS: process.env.ASAN_OPTIONS || 'detect_leaks=1' },
    });
    let stderr = '';
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d) => { stderr += d; });
    try {
      return await new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          proc.kill('SIGKILL');
          reject(new Error(`mayflyd ${args.join(' ')} still running after 10 s (expected it to exit)\n${stderr}`));
        }, 10000);
        proc.on('close', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stderr }); });
        proc.on('error', (e) => { clearTimeout(timer); reject(e); });
      });
    } finally {
      fs.rmSync(dbpath, { recursive: true, force: true });
    }
  }

  const cases = [
    ['a tlsCertificateKeyFile that does not exist', (c) => ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', path.join(c.dir, 'nope.pem')],
      /cannot read the certificate of tlsCertificateKeyFile/],
    ['a tlsCertificateKeyFile that is not PEM', (c) => ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', c.garbage],
      /cannot read the certificate of tlsCertificateKeyFile/],
    ['a tlsCertificateKeyFile without the private key', (c) => ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', c.serverCertOnly],
      /private key of tlsCertificateKeyFile/],
    ['requireTLS without tlsCertificateKeyFile', () => ['--tlsMode', 'requireTLS'],
      /tlsCertificateKeyFile/],
    ['a tlsCAFile that does not exist', (c) => ['--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', c.server,
      '--tlsCAFile', path.join(c.dir, 'nope-ca.pem')], /tlsCAFile/],
    ['an unknown --tlsMode', (c) => ['--tlsMode', 'sometimesTLS', '--tlsCertificateKeyFile', c.server],
      /tlsMode/],
  ];
  for (const [what, args, re] of cases) {
    test(what, { timeout: 20000 }, async () => {
      const r = await startExpectingExit(args(certs()));
      assert.ok(r.code !== 0 && r.code !== null, `exit status ${JSON.stringify({ code: r.code, signal: r.signal })}, ` +
        `expected a non-zero exit code\n${r.stderr.slice(-3000)}`);
      assert.match(r.stderr, re, `the reason in the log:\n${r.stderr.slice(-3000)}`);
      assert.doesNotMatch(r.stderr, /AddressSanitizer|LeakSanitizer/, 'no sanitizer report');
    });
  }
});

/* ========================================================= --auth over TLS */

scenario('--auth with requireTLS', (c) => ['--auth', '--tlsMode', 'requireTLS', '--tlsCertificateKeyFile', c.server], (ctx) => {
  const USER = 'tlsroot';
  const PWD = 'tls-R00t!pw';
  const credUri = (user, pwd, extra = {}) => {
    const q = new URLSearchParams({ directConnection: 'true', serverSelectionTimeoutMS: '5000', authSource: 'admin',
      tls: 'true', tlsCAFile: certs().ca, ...extra });
    return `mongodb://${encodeURIComponent(user)}:${encodeURIComponent(pwd)}@127.0.0.1:${ctx.port}/?${q}`;
  };

  t(ctx, 'the first user is created through the localhost exception over TLS', async () => {
    const anon = await connected(ctx, 'an unauthenticated TLS client', { tls: true, tlsCAFile: certs().ca });
    await h.expectCode(anon.db('x').collection('c').findOne(), 13);
    const r = await anon.db('admin').command({ createUser: USER, pwd: PWD, roles: ['root'] });
    assert.equal(r.ok, 1);
    await h.expectCode(anon.db('admin').command({ createUser: 'second', pwd: 'x-pw-123', roles: [] }), 13);
  });

  for (const mech of ['SCRAM-SHA-256', 'SCRAM-SHA-1', null]) {
    t(ctx, `SCRAM login over TLS (${mech || 'default mechanism'}, authSource=admin) works`, async () => {
      const c = new MongoClient(credUri(USER, PWD, mech ? { authMechanism: mech } : {}));
      ctx.clients.push(c);
      await c.connect();
      const st = await c.db('admin').command({ connectionStatus: 1 });
      assert.deepEqual(st.authInfo.authenticatedUsers, [{ user: USER, db: 'admin' }]);
      await crud(c, 'auth');
    });
  }

  t(ctx, 'a wrong password over TLS answers 18', async () => {
    const c = new MongoClient(credUri(USER, 'wrong-password'));
    try {
      await assert.rejects(c.connect(), (e) => (e.code === 18 || (e.cause && e.cause.code === 18)) ||
        assert.fail(`expected 18 AuthenticationFailed, got ${e.code} ${e.name}: ${e.message}`));
    } finally { await c.close(true).catch(() => {}); }
  });

  t(ctx, 'credentials without TLS are refused before any authentication', async () => {
    const c = new MongoClient(`mongodb://${USER}:${encodeURIComponent(PWD)}@127.0.0.1:${ctx.port}/?directConnection=true&` +
      `authSource=admin&serverSelectionTimeoutMS=${FAIL_FAST_MS}`);
    try {
      await assert.rejects(c.connect(), (e) => e.name === 'MongoServerSelectionError' ||
        assert.fail(`expected MongoServerSelectionError, got ${e.name}: ${e.message}`));
    } finally { await c.close(true).catch(() => {}); }
  });

  t(ctx, 'mongosh logs in over TLS from a credentialed URI', { timeout: 90000 }, async () => {
    const r = await mongoshRun(credUri(USER, PWD).replace('/?', `/${dbName('auth_sh')}?`),
      'db.c.insertOne({_id: 1}); print("USERS=" + JSON.stringify(db.runCommand({connectionStatus: 1}).authInfo.authenticatedUsers.map(u => u.user)) + " N=" + db.c.countDocuments())');
    assert.equal(r.code, 0, `mongosh failed\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
    assert.match(r.stdout, new RegExp(`USERS=\\["${USER}"\\] N=1`));
  });
});
