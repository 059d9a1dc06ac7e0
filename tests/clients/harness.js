'use strict';
/*
 * Test harness for the client-level suites.
 *
 * Each test file starts its own mayflyd (binary from $MAYFLYD, default
 * build-asan/mayflyd under the repository root) on a free port with a fresh
 * temporary --dbpath, waits until the port accepts TCP connections (deadline
 * 20 s), and stops it with SIGTERM after the file's tests. The server can be
 * restarted on the same dbpath and killed with SIGKILL (durability tests).
 *
 * Server stderr (JSON log lines, sanitizer reports) is kept in memory; the
 * last lines are appended to any failing test's error message and printed if
 * the server fails to start or exits unexpectedly.
 *
 * Usage in a test file:
 *   const h = require('./harness');
 *   const srv = h.useServer();          // registers before/after hooks
 *   h.test('name', async () => { const db = srv.freshDb(); ... });
 */
const { execFile, spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const nodeTest = require('node:test');
const { MongoClient, BSON } = require('mongodb');

const REPO_ROOT = path.resolve(__dirname, '..', '..');
const START_DEADLINE_MS = 20000;
const STOP_DEADLINE_MS = 15000;
const STDERR_KEEP_LINES = 400;

function binaryPath() {
  const p = process.env.MAYFLYD || 'build-asan/mayflyd';
  return path.isAbsolute(p) ? p : path.join(REPO_ROOT, p);
}

/* The first port of the kernel's ephemeral range (outgoing connections' local ports). */
function ephemeralLow() {
  try {
    const low = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (low > 12000) return low;
  } catch { /* not Linux: the IANA range's start */ }
  return 49152;
}

function portFree(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.unref();
    s.on('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/*
 * Returns a TCP port that was free a moment ago on 127.0.0.1, and whose
 * port + 1000 (a server's default HTTP console) was too. Ports come from
 * below the ephemeral range: a port the kernel hands out (listen(0)) is also
 * what it gives outgoing connections, so a server restarted on its port
 * could find it taken by any process's client connection ("address already
 * in use", seen in CI with three files running at once).
 */
async function freePort() {
  const top = ephemeralLow() - 1001;
  for (let i = 0; i < 200; i++) {
    const p = 10000 + Math.floor(Math.random() * (top - 10000));
    if (await portFree(p) && await portFree(p + 1000)) return p;
  }
  throw new Error('freePort: no free port found below the ephemeral range');
}

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

/* Polls fn every intervalMs until it returns a truthy value, and returns that value;
   throws with msg and the last value returned once timeoutMs has passed. */
async function waitFor(fn, msg, timeoutMs = 8000, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${msg} (last: ${JSON.stringify(last)})`);
    await sleep(intervalMs);
  }
}

function tryConnect(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' });
    const done = (ok) => { sock.destroy(); resolve(ok); };
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
    sock.setTimeout(1000, () => done(false));
  });
}

class MayflyServer {
  constructor(opts = {}) {
    this.binary = opts.binary || binaryPath();
    this.dbpath = opts.dbpath || fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-test-'));
    this.ownsDbpath = !opts.dbpath;
    this.extraArgs = opts.args || [];
    this.wrapper = opts.wrapper || []; // a command that execs the server (e.g. prlimit): its pid stays the server's
    this.port = null;
    this.proc = null;
    this.stderrLines = [];
    this.stderrPartial = '';
    this.exitInfo = null;
    this.expectingExit = false;
    this.unexpectedExits = [];
  }

  get uri() {
    return `mongodb://127.0.0.1:${this.port}/?directConnection=true&serverSelectionTimeoutMS=5000`;
  }

  get pid() { return this.proc ? this.proc.pid : null; }

  args() {
    return ['--port', String(this.port), '--bind_ip', '127.0.0.1', '--dbpath', this.dbpath,
      ...this.extraArgs];
  }

  async start() {
    if (!fs.existsSync(this.binary)) {
      throw new Error(`mayflyd binary not found at ${this.binary} (set MAYFLYD)`);
    }
    if (this.port === null) this.port = await freePort();
    this.exitInfo = null;
    this.expectingExit = false;
    const argv = [...this.wrapper.slice(1), this.binary, ...this.args()];
    const proc = spawn(this.wrapper.length ? this.wrapper[0] : this.binary, this.wrapper.length ? argv : this.args(), {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ASAN_OPTIONS: process.env.ASAN_OPTIONS || 'detect_leaks=1' },
    });
    this.proc = proc;
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => this.onStderr(chunk));
    // 'close' (not 'exit') so that stderr, including sanitizer reports written
    // at exit, has been fully read before anyone looks at the tail.
    proc.on('close', (code, signal) => {
      this.exitInfo = { code, signal };
      if (!this.expectingExit) {
        this.unexpectedExits.push({ code, signal });
        process.stderr.write(`\n[harness] mayflyd (pid ${proc.pid}) exited unexpectedly: ` +
          `code=${code} signal=${signal}\n${this.stderrTail(60)}\n`);
      }
    });
    const deadline = Date.now() + START_DEADLINE_MS;
    for (;;) {
      if (this.exitInfo) {
        throw new Error(`mayflyd exited during start-up (code=${this.exitInfo.code} ` +
          `signal=${this.exitInfo.signal})\n--- server stderr tail ---\n${this.stderrTail(60)}`);
      }
      if (await tryConnect(this.port)) return this;
      if (Date.now() > deadline) {
        const tail = this.stderrTail(60);
        await this.kill9();
        throw new Error(`mayflyd did not accept connections on port ${this.port} within ` +
          `${START_DEADLINE_MS} ms\n--- server stderr tail ---\n${tail}`);
      }
      await sleep(50);
    }
  }

  onStderr(chunk) {
    const text = this.stderrPartial + chunk;
    const lines = text.split('\n');
    this.stderrPartial = lines.pop();
    for (const l of lines) this.stderrLines.push(l);
    if (this.stderrLines.length > STDERR_KEEP_LINES * 2) {
      this.stderrLines.splice(0, this.stderrLines.length - STDERR_KEEP_LINES);
    }
  }

  stderrTail(n = 40) {
    const lines = this.stderrLines.slice(-n);
    if (this.stderrPartial) lines.push(this.stderrPartial);
    return lines.join('\n');
  }

  waitExit(ms) {
    return new Promise((resolve) => {
      if (!this.proc || this.exitInfo) return resolve(this.exitInfo);
      const t = setTimeout(() => resolve(null), ms);
      this.proc.once('close', () => { clearTimeout(t); setImmediate(() => resolve(this.exitInfo)); });
    });
  }

  /* SIGTERM and wait; SIGKILL after STOP_DEADLINE_MS. Returns {code, signal, forced}. */
  async stop() {
    if (!this.proc || this.exitInfo) return this.exitInfo;
    this.expectingExit = true;
    this.proc.kill('SIGTERM');
    let info = await this.waitExit(STOP_DEADLINE_MS);
    if (!info) {
      this.proc.kill('SIGKILL');
      info = await this.waitExit(5000);
      return { ...(info || {}), forced: true };
    }
    return info;
  }

  async kill9() {
    if (!this.proc || this.exitInfo) return this.exitInfo;
    this.expectingExit = true;
    this.proc.kill('SIGKILL');
    return this.waitExit(10000);
  }

  /* Restarts on the same dbpath and port (graceful stop unless kill9 is set). */
  async restart({ kill9 = false } = {}) {
    const info = kill9 ? await this.kill9() : await this.stop();
    await this.start();
    return info;
  }

  cleanup() {
    if (this.ownsDbpath) fs.rmSync(this.dbpath, { recursive: true, force: true });
  }
}

let currentServer = null;
let dbCounter = 0;

/*
 * Registers before/after hooks that start one server (and one MongoClient) for
 * the calling test file. Returns a handle whose fields are filled in by the
 * before hook: server, client, uri, freshDb(), newClient().
 */
function useServer(opts = {}) {
  const handle = {
    server: null,
    client: null,
    clients: [],
    get uri() { return this.server.uri; },
    get port() { return this.server.port; },
    freshDb(tag = 'db') {
      dbCounter += 1;
      const name = `t${process.pid % 10000}_${dbCounter}_${tag}`.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 60);
      return this.client.db(name);
    },
    async newClient(extra = {}) {
      const c = new MongoClient(this.server.uri, { ...extra });
      await c.connect();
      this.clients.push(c);
      return c;
    },
    /* A connection string logging in as user (password pwd, authSource source) on this server (--auth suites). */
    authUri(user, pwd, source = 'admin') {
      return `mongodb://${encodeURIComponent(user)}:${encodeURIComponent(pwd)}@127.0.0.1:${this.port}/` +
        `?directConnection=true&authSource=${source}&serverSelectionTimeoutMS=5000`;
    },
    /* A one-connection client logged in as user (rejects with the server's error, e.g. 18); closed after the suite. */
    async login(user, pwd, source = 'admin') {
      const c = new MongoClient(this.authUri(user, pwd, source), { maxPoolSize: 1 });
      this.clients.push(c);
      await c.connect();
      await c.db(source).command({ connectionStatus: 1 });
      return c;
    },
    async reconnect() {
      if (this.client) await this.client.close(true).catch(() => {});
      this.client = await this.newClient();
      return this.client;
    },
  };
  nodeTest.before(async () => {
    handle.server = new MayflyServer(opts);
    currentServer = handle.server;
    await handle.server.start();
    handle.client = await handle.newClient();
  }, { timeout: START_DEADLINE_MS + 15000 });
  nodeTest.after(async () => {
    for (const c of handle.clients) await c.close(true).catch(() => {});
    if (!handle.server) return;
    const info = await handle.server.stop();
    const unexpected = handle.server.unexpectedExits;
    handle.server.cleanup();
    if (unexpected.length) {
      throw new Error(`mayflyd exited unexpectedly during the tests: ${JSON.stringify(unexpected)}`);
    }
    if (info && (info.forced || (info.code !== 0 && info.code !== null) ||
        (info.signal && info.signal !== 'SIGTERM'))) {
      throw new Error(`mayflyd did not shut down cleanly on SIGTERM: ${JSON.stringify(info)}\n` +
        `--- server stderr tail ---\n${handle.server.stderrTail(60)}`);
    }
  }, { timeout: STOP_DEADLINE_MS + 15000 });
  return handle;
}

/* Wraps node:test's test() so that a failure carries the server's stderr tail. */
function test(name, optsOrFn, maybeFn) {
  const fn = typeof optsOrFn === 'function' ? optsOrFn : maybeFn;
  const opts = typeof optsOrFn === 'function' ? {} : optsOrFn;
  return nodeTest.test(name, { timeout: 60000, ...opts }, async (t) => {
    try {
      await fn(t);
    } catch (err) {
      if (currentServer) {
        const tail = currentServer.stderrTail(15);
        const died = currentServer.exitInfo && !currentServer.expectingExit;
        const note = `\n--- mayflyd stderr tail${died ? ' (SERVER EXITED: ' +
          JSON.stringify(currentServer.exitInfo) + ')' : ''} ---\n${tail}`;
        try { err.message = `${err.message}${note}`; } catch (_) { /* frozen */ }
      }
      throw err;
    }
  });
}

/* Asserts that promise rejects with a server error whose code is in codes. */
async function expectCode(promise, codes, msgRe) {
  const want = Array.isArray(codes) ? codes : [codes];
  let err = null;
  try {
    const r = await promise;
    throw Object.assign(new Error(`expected error code ${want.join('|')}, got success: ` +
      JSON.stringify(r)), { __noMatch: true });
  } catch (e) {
    if (e.__noMatch) throw e;
    err = e;
  }
  const code = err.code !== undefined ? err.code :
    (err.writeErrors && err.writeErrors[0] ? err.writeErrors[0].code : undefined);
  if (!want.includes(code)) {
    const e2 = new Error(`expected error code ${want.join('|')}, got ${code} (${err.name}: ${err.message})`);
    e2.cause = err;
    throw e2;
  }
  if (msgRe && !msgRe.test(err.errmsg || err.message)) {
    throw new Error(`error message ${JSON.stringify(err.errmsg || err.message)} does not match ${msgRe}`);
  }
  return err;
}

/* ---- Raw wire-protocol client (OP_MSG) for tests that bypass the driver. ---- */

const OP_MSG = 2013;

/* Builds an OP_MSG: body document plus optional {identifier: docs[]} sequences. */
function buildOpMsg(requestId, body, sequences = {}, { rawBody } = {}) {
  const parts = [];
  const bodyBuf = rawBody || Buffer.from(BSON.serialize(body));
  parts.push(Buffer.from([0]), bodyBuf);
  for (const [ident, docs] of Object.entries(sequences)) {
    const docBufs = docs.map((d) => (Buffer.isBuffer(d) ? d : Buffer.from(BSON.serialize(d))));
    const idBuf = Buffer.from(ident + '\0', 'utf8');
    const size = 4 + idBuf.length + docBufs.reduce((a, b) => a + b.length, 0);
    const sz = Buffer.alloc(4); sz.writeInt32LE(size);
    parts.push(Buffer.from([1]), sz, idBuf, ...docBufs);
  }
  const flags = Buffer.alloc(4);
  const payload = Buffer.concat([flags, ...parts]);
  const header = Buffer.alloc(16);
  header.writeInt32LE(16 + payload.length, 0);
  header.writeInt32LE(requestId, 4);
  header.writeInt32LE(0, 8);
  header.writeInt32LE(OP_MSG, 12);
  return Buffer.concat([header, payload]);
}

/*
 * A raw connection. send() writes bytes; readReply() resolves with the next
 * decoded OP_MSG reply body, or null if the server closed the connection;
 * waitClosed() resolves true when the server closes the socket within ms.
 */
class RawConn {
  constructor(port) {
    this.port = port;
    this.buf = Buffer.alloc(0);
    this.closed = false;
    this.waiters = [];
    this.reqId = 1;
  }

  connect() {
    return new Promise((resolve, reject) => {
      this.sock = net.connect({ port: this.port, host: '127.0.0.1' });
      this.sock.once('connect', () => resolve(this));
      this.sock.once('error', (e) => { if (!this.sock.connecting) this.onClose(); else reject(e); });
      this.sock.on('data', (d) => { this.buf = Buffer.concat([this.buf, d]); this.wake(); });
      this.sock.on('close', () => this.onClose());
      this.sock.on('error', () => this.onClose());
    });
  }

  onClose() { this.closed = true; this.wake(); }
  wake() { const w = this.waiters; this.waiters = []; w.forEach((f) => f()); }
  waitEvent(ms) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.waiters.push(() => { clearTimeout(t); resolve(); });
    });
  }

  send(bytes) {
    return new Promise((resolve) => {
      if (this.closed) return resolve(false);
      this.sock.write(bytes, (err) => resolve(!err));
    });
  }

  async command(db, cmd, sequences, opts) {
    const body = { ...cmd, $db: db };
    await this.send(buildOpMsg(this.reqId++, body, sequences, opts));
    return this.readReply();
  }

  async readReply(ms = 20000) {
    const deadline = Date.now() + ms;
    for (;;) {
      if (this.buf.length >= 4) {
        const len = this.buf.readInt32LE(0);
        if (this.buf.length >= len) {
          const msg = this.buf.subarray(0, len);
          this.buf = this.buf.subarray(len);
          // Keep the reply's header and flags (OP_MSG flagBits, OP_REPLY responseFlags) for tests that inspect them.
          this.lastResponseTo = msg.readInt32LE(8);
          this.lastOpCode = msg.readInt32LE(12);
          this.lastFlags = msg.length >= 20 && (this.lastOpCode === OP_MSG || this.lastOpCode === 1) ? msg.readUInt32LE(16) : null;
          return decodeReply(msg);
        }
      }
      if (this.closed) return null;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for a reply');
      await this.waitEvent(left);
    }
  }

  async waitClosed(ms = 5000) {
    const deadline = Date.now() + ms;
    while (!this.closed) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await this.waitEvent(left);
    }
    return true;
  }

  close() { if (this.sock) this.sock.destroy(); }
}

function decodeReply(msg) {
  const opCode = msg.readInt32LE(12);
  if (opCode === OP_MSG) {
    // flags(4), then section kind 0 body.
    let off = 20;
    if (msg[off] !== 0) throw new Error('unexpected first section kind ' + msg[off]);
    off += 1;
    const len = msg.readInt32LE(off);
    const bytes = msg.subarray(off, off + len);
    try {
      return BSON.deserialize(bytes, { promoteLongs: true });
    } catch (_) {
      // Regular expressions JavaScript cannot compile (e.g. "(") stay BSONRegExp,
      // and strings that are not valid UTF-8 (echoed from fuzzed input) are tolerated.
      return BSON.deserialize(bytes, { promoteLongs: true, bsonRegExp: true, validation: { utf8: false } });
    }
  }
  if (opCode === 1) { // OP_REPLY: header, flags, cursorId(8), startingFrom(4), numberReturned(4), docs
    const off = 16 + 4 + 8 + 4 + 4;
    const len = msg.readInt32LE(off);
    return BSON.deserialize(msg.subarray(off, off + len));
  }
  return { __opCode: opCode, __raw: msg };
}

const MONGOSH = path.join(REPO_ROOT, 'node_modules', '.bin', 'mongosh');

/*
 * Runs script with mongosh --eval against database dbName of the server on
 * port; resolves with its trimmed stdout, rejects (with stdout and stderr in
 * the message) if mongosh fails or runs over 45 s.
 */
function mongosh(port, dbName, script) {
  return mongoshUri(`mongodb://127.0.0.1:${port}/${dbName}?directConnection=true&serverSelectionTimeoutMS=5000`, script);
}

/* mongosh --eval script against uri (credentials, TLS options ...); resolves to its trimmed stdout. */
function mongoshUri(uri, script) {
  return new Promise((resolve, reject) => {
    execFile(MONGOSH, [uri, '--quiet', '--norc', '--eval', script], {
      timeout: 45000, env: { ...process.env, MONGOSH_SKIP_NODE_VERSION_CHECK: '1', NO_COLOR: '1' },
    }, (err, stdout, stderr) => {
      if (err) {
        err.message += `\nstdout: ${stdout}\nstderr: ${stderr}`;
        return reject(err);
      }
      resolve(stdout.trim());
    });
  });
}

async function rawConnect(port) {
  const c = new RawConn(port);
  await c.connect();
  return c;
}

/*
 * A cursor id as a BSON long for a raw getMore / killCursors: the driver
 * hands a reply's id back as a JS number when it fits in 53 bits (one id in
 * about a thousand), which would be sent as a double (14, as mongod).
 */
function cursorId(v) {
  const { Long } = require('mongodb');
  return Long.isLong(v) ? v : Long.fromString(String(v));
}

module.exports = {
  cursorId,
  REPO_ROOT, MayflyServer, useServer, test, expectCode, freePort, tryConnect, sleep, waitFor,
  buildOpMsg, decodeReply, rawConnect, RawConn, binaryPath, mongosh, mongoshUri,
};
