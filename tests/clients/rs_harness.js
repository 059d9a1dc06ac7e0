'use strict';
/*
 * Replica-set harness for the client-level suites (issue 9), built on
 * harness.js.
 *
 * useReplSet(n, opts) registers before/after hooks for the calling test file.
 * The before hook starts n members plus opts.spares extra ones, each a
 * MayflyServer (binary from $MAYFLYD, default build-asan/mayflyd) on its own
 * free client port and free raft port with a fresh temporary --dbpath:
 *
 *   mayflyd --port P --bind_ip 127.0.0.1 --dbpath D --replSet rs0 --raftPort R [opts.args]
 *
 * then sends replSetInitiate {_id: "rs0", members: [{_id: i, host:
 * "127.0.0.1:P_i"}]} (the first n members only) to member 0, and waits until
 * exactly one member reports isWritablePrimary in hello and every other one
 * reports secondary, all naming the same primary. Spares run with --replSet but are not in the config (for
 * replSetReconfig, rs.add() and the bad-config cases). The after hook closes
 * every client and stops every member that is still running with SIGTERM; a
 * member that exited on its own during the tests, or did not exit 0 on
 * SIGTERM (e.g. a LeakSanitizer report), fails the file.
 *
 * The returned ReplSet (fields filled in by the before hook):
 *   members[i]          {index, port, raftPort, host: '127.0.0.1:P', server (MayflyServer), inSet}
 *   uri                 mongodb://127.0.0.1:p0,.../?replicaSet=rs0&serverSelectionTimeoutMS=20000
 *   client              a MongoClient on uri
 *   direct(i, {readPreference})   a cached directConnection MongoClient to member i
 *                       (retryWrites=false; the driver sends $readPreference
 *                       primaryPreferred on a direct connection, so reads work
 *                       on secondaries)
 *   reader(i)           direct(i) with readPreference secondaryPreferred
 *   adminCommand(i, cmd)  a command on member i's admin database (direct(i))
 *   raw(i, db, cmd)     one OP_MSG exactly as given (no $readPreference unless
 *                       cmd has one): the reply body, or null
 *   hello(i)            hello over a raw connection (null if no answer)
 *   primaryIndex()      the member that reports isWritablePrimary now, or -1
 *   waitForPrimary({exclude, timeoutMs})  index of the only writable primary
 *   waitForSecondary(i) until member i reports secondary: true
 *   waitForSteadyState()  every member PRIMARY or SECONDARY, agreeing on the primary
 *   kill(i, {kill9})    SIGKILL (default) or SIGTERM; restart(i) on the same port and dbpath
 *   waitForReplication(dbName, collName, {filter, timeoutMs, members})
 *                       until every running member (full scan by _id) holds
 *                       the same documents as the primary; returns them
 *   waitUntil(fn, {timeoutMs, what})   polls fn until truthy
 *   onEach(fn), setParameterAll(params), ttlDeleted(i), freshDb(tag), uriFor(db)
 *
 * The ReplSet class also works outside node:test (start()/stop(); the
 * benchmark bench/repl_bench.js uses it). mongoshUri(uri, script) runs
 * mongosh --eval against any URI (e.g. the set's, from uriFor()).
 *
 * Failing tests (rs_harness.test) get every member's stderr tail appended.
 * Ports are never hard-coded.
 */
const { execFile } = require('node:child_process');
const net = require('node:net');
const path = require('node:path');
const nodeTest = require('node:test');
const { MongoClient, BSON } = require('mongodb');
const h = require('./harness');

const SET_NAME = 'rs0';
const PRIMARY_DEADLINE_MS = 30000;
const STDERR_TAIL_LINES = 12;
/* Log lines left out of failure messages: every poll's connection comes and goes. */
const NOISE = /"c":"NETWORK".*connection (accepted|ended)/;

let currentSet = null;

function hr() { return Number(process.hrtime.bigint()) / 1e6; }

/* EJSON (canonical) of a value: a comparison key that keeps BSON types apart. */
function ejson(v) { return BSON.EJSON.stringify(v, { relaxed: false }); }

class ReplSet {
  constructor(n = 3, opts = {}) {
    this.n = n;
    this.spares = opts.spares || 0;
    this.setName = opts.setName || SET_NAME;
    this.extraArgs = opts.args || [];
    this.binary = opts.binary;
    this.uriOptions = opts.uriOptions || 'serverSelectionTimeoutMS=20000';
    this.members = [];
    this.client = null;
    this.clients = [];
    this.cache = new Map();   /* `${i}|${readPreference}` -> MongoClient */
    this.usedPorts = new Set();
    this.dbCounter = 0;
  }

  /*
   * A free port no member uses: neither as its client or raft port nor as a
   * member's HTTP console port (its client port + 1000). Each port handed out
   * reserves p + 1000 too, since it may become a client port (a raft port
   * once landed on its own member's console port: "raft: start ... I/O error").
   */
  async freshPort() {
    for (;;) {
      const p = await h.freePort();
      if (!this.usedPorts.has(p) && !this.usedPorts.has(p + 1000)) {
        this.usedPorts.add(p);
        this.usedPorts.add(p + 1000);
        return p;
      }
    }
  }

  /* The members named in the replica-set config (not the spares, until added). */
  get inSetMembers() { return this.members.filter((m) => m.inSet); }

  get hosts() { return this.members.slice(0, this.n).map((m) => m.host); }

  get uri() {
    return `mongodb://${this.hosts.join(',')}/?replicaSet=${this.setName}&${this.uriOptions}`;
  }

  /* The set's URI with a database and extra options (for mongosh and new clients). */
  uriFor(dbName = '', extra = '') {
    return `mongodb://${this.hosts.join(',')}/${dbName}?replicaSet=${this.setName}&${this.uriOptions}` +
      (extra ? `&${extra}` : '');
  }

  isRunning(i) {
    const s = this.members[i].server;
    return Boolean(s.proc) && !s.exitInfo;
  }

  freshDb(tag = 'db') {
    this.dbCounter += 1;
    const name = `r${process.pid % 10000}_${this.dbCounter}_${tag}`.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 60);
    return this.client.db(name);
  }

  async newClient(uri = this.uri, extra = {}) {
    const c = new MongoClient(uri, extra);
    this.clients.push(c);
    await c.connect();
    return c;
  }

  /* A cached directConnection client to member i (reconnects by itself after a restart). */
  direct(i, { readPreference } = {}) {
    const key = `${i}|${readPreference || ''}`;
    let c = this.cache.get(key);
    if (!c) {
      const rp = readPreference ? `&readPreference=${readPreference}` : '';
      c = new MongoClient(`mongodb://127.0.0.1:${this.members[i].port}/?directConnection=true` +
        `&serverSelectionTimeoutMS=5000&retryWrites=false${rp}`);
      this.cache.set(key, c);
    }
    return c;
  }

  /* Reads on member i whatever its state: $readPreference secondaryPreferred. */
  reader(i) { return this.direct(i, { readPreference: 'secondaryPreferred' }); }

  async dropCached(i) {
    this.closeRaw(i);
    for (const [key, c] of [...this.cache]) {
      if (key.startsWith(`${i}|`)) {
        this.cache.delete(key);
        await c.close(true).catch(() => {});
      }
    }
  }

  adminCommand(i, cmd) { return this.direct(i).db('admin').command(cmd); }

  /*
   * One command over a raw OP_MSG connection to member i (exactly the fields
   * given: no $readPreference unless cmd has one); the reply body, or null if
   * the member does not answer within ms. The connection is kept for the next
   * call (fewer connection lines in the servers' logs) and dropped on any
   * error or time-out.
   */
  async raw(i, dbName, cmd, ms = 5000) {
    if (!this.isRunning(i)) return null;
    const m = this.members[i];
    let conn = m.rawConn && !m.rawConn.closed ? m.rawConn : null;
    m.rawConn = null;
    try {
      if (!conn) conn = await h.rawConnect(m.port);
      await conn.send(h.buildOpMsg(conn.reqId++, { ...cmd, $db: dbName }));
      const r = await conn.readReply(ms);
      if (r && !conn.closed && !m.rawConn) { m.rawConn = conn; conn = null; }
      return r;
    } catch (_) {
      return null;
    } finally {
      if (conn) conn.close();
    }
  }

  closeRaw(i) {
    const m = this.members[i];
    if (m.rawConn) { m.rawConn.close(); m.rawConn = null; }
  }

  /* hello over a raw connection (no driver monitoring, no server selection). */
  async hello(i, ms = 2000) {
    const r = await this.raw(i, 'admin', { hello: 1 }, ms);
    return r && r.ok === 1 ? r : null;
  }

  async hellos(indexes = this.members.map((m) => m.index)) {
    return Promise.all(indexes.map((i) => this.hello(i)));
  }

  /* The index of the member reporting isWritablePrimary now (-1: none or more than one). */
  async primaryIndex({ exclude = [] } = {}) {
    const idx = this.members.map((m) => m.index).filter((i) => !exclude.includes(i) && this.isRunning(i));
    const hs = await this.hellos(idx);
    const prim = idx.filter((_, k) => hs[k] && hs[k].isWritablePrimary === true);
    return prim.length === 1 ? prim[0] : -1;
  }

  /*
   * Waits until exactly one running member (not in exclude) reports
   * isWritablePrimary; returns its index. Polls every pollMs.
   */
  async waitForPrimary({ exclude = [], timeoutMs = PRIMARY_DEADLINE_MS, pollMs = 50 } = {}) {
    const t0 = hr();
    let last = [];
    for (;;) {
      const idx = this.members.map((m) => m.index).filter((i) => !exclude.includes(i) && this.isRunning(i));
      const hs = await this.hellos(idx);
      last = idx.map((i, k) => ({ i, isWritablePrimary: hs[k] && hs[k].isWritablePrimary, secondary: hs[k] && hs[k].secondary }));
      const prim = idx.filter((_, k) => hs[k] && hs[k].isWritablePrimary === true);
      if (prim.length === 1) {
        this.lastPrimaryWaitMs = hr() - t0;
        return prim[0];
      }
      if (hr() - t0 > timeoutMs) {
        throw new Error(`no single writable primary among members ${idx.join(',')} within ${timeoutMs} ms ` +
          `(exclude ${JSON.stringify(exclude)}); last hellos: ${JSON.stringify(last)}`);
      }
      await h.sleep(pollMs);
    }
  }

  /* Waits until member i reports secondary: true in hello. */
  async waitForSecondary(i, { timeoutMs = PRIMARY_DEADLINE_MS } = {}) {
    return this.waitUntil(async () => {
      const r = await this.hello(i);
      return r && r.secondary === true && r.isWritablePrimary === false ? r : null;
    }, { timeoutMs, what: `member ${i} (${this.members[i].host}) to report secondary: true` });
  }

  /* Waits until every running member of the set is PRIMARY or SECONDARY and they agree on the primary. */
  async waitForSteadyState({ timeoutMs = PRIMARY_DEADLINE_MS } = {}) {
    return this.waitUntil(async () => {
      const idx = this.inSetMembers.map((m) => m.index).filter((i) => this.isRunning(i));
      const hs = await this.hellos(idx);
      if (hs.some((r) => !r || !(r.isWritablePrimary || r.secondary))) return false;
      const prim = hs.filter((r) => r.isWritablePrimary);
      if (prim.length !== 1) return false;
      return hs.every((r) => r.primary === prim[0].me) ? prim[0] : false;
    }, { timeoutMs, what: 'every member to be PRIMARY or SECONDARY, agreeing on one primary' });
  }

  /* Polls fn every pollMs until it returns a truthy value (returned); throws after timeoutMs. */
  async waitUntil(fn, { timeoutMs = 15000, pollMs = 100, what = 'condition' } = {}) {
    const t0 = hr();
    let lastErr = null;
    for (;;) {
      try {
        const v = await fn();
        if (v) return v;
      } catch (e) {
        lastErr = e;
      }
      if (hr() - t0 > timeoutMs) {
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}` +
          (lastErr ? ` (last error: ${lastErr.message})` : ''));
      }
      await h.sleep(pollMs);
    }
  }

  /* All documents of dbName.collName on member i, sorted by _id (a full scan; any member state). */
  docsOn(i, dbName, collName, filter = {}) {
    return this.reader(i).db(dbName).collection(collName).find(filter).sort({ _id: 1 }).toArray();
  }

  /*
   * Waits until every running member of the set (or opts.members) holds the
   * same documents of dbName.collName (matching filter) as the current
   * primary, compared as canonical EJSON; returns the primary's documents.
   */
  async waitForReplication(dbName, collName, { filter = {}, timeoutMs = 20000, members } = {}) {
    const p = await this.waitForPrimary();
    const idx = (members || this.inSetMembers.map((m) => m.index)).filter((i) => this.isRunning(i));
    let want = null;
    let diff = '';
    await this.waitUntil(async () => {
      want = await this.docsOn(p, dbName, collName, filter);
      const wantKey = ejson(want);
      const got = await Promise.all(idx.map((i) => this.docsOn(i, dbName, collName, filter)));
      const bad = idx.filter((_, k) => ejson(got[k]) !== wantKey);
      diff = bad.map((i) => `member ${i}: ${got[idx.indexOf(i)].length} docs vs primary's ${want.length}`).join('; ');
      return bad.length === 0;
    }, { timeoutMs, what: `${dbName}.${collName} to be the same on members ${idx.join(',')} as on primary ${p}` })
      .catch((e) => { e.message += ` [${diff}]`; throw e; });
    return want;
  }

  /* Runs fn(i) on every running member of the set; resolves with the results by index. */
  async onEach(fn, members) {
    const idx = (members || this.inSetMembers.map((m) => m.index)).filter((i) => this.isRunning(i));
    const out = {};
    await Promise.all(idx.map(async (i) => { out[i] = await fn(i); }));
    return out;
  }

  async serverStatus(i) { return this.adminCommand(i, { serverStatus: 1 }); }

  async ttlDeleted(i) {
    const st = await this.serverStatus(i);
    return Number(st.metrics.ttl.deletedDocuments);
  }

  /* setParameter on every running member (server parameters are per node, never replicated). */
  async setParameterAll(params, members) {
    return this.onEach((i) => this.adminCommand(i, { setParameter: 1, ...params }), members);
  }

  /* SIGKILL (kill9, default) or SIGTERM member i; returns its exit info. */
  async kill(i, { kill9 = true } = {}) {
    await this.dropCached(i);
    const s = this.members[i].server;
    return kill9 ? s.kill9() : s.stop();
  }

  /* Starts member i again on the same port, raft port and dbpath. */
  async restart(i) {
    await this.dropCached(i);
    await this.members[i].server.start();
  }

  /* Starts every member, initiates the set with the first n, waits for a primary and the secondaries. */
  async start() {
    const total = this.n + this.spares;
    for (let i = 0; i < total; i++) {
      const port = await this.freshPort();
      const raftPort = await this.freshPort();
      const server = new h.MayflyServer({
        binary: this.binary,
        args: ['--replSet', this.setName, '--raftPort', String(raftPort), ...this.extraArgs],
      });
      server.port = port;
      this.members.push({ index: i, port, raftPort, host: `127.0.0.1:${port}`, server, inSet: i < this.n });
    }
    await Promise.all(this.members.map((m) => m.server.start()));
    const config = {
      _id: this.setName,
      members: this.members.slice(0, this.n).map((m) => ({ _id: m.index, host: m.host })),
    };
    this.initiateReply = await this.adminCommand(0, { replSetInitiate: config });
    await this.waitForPrimary();
    await this.waitForSteadyState();
    this.client = await this.newClient(this.uri);
    return this;
  }

  /* Closes every client and stops every running member; returns a list of problems (empty: clean). */
  async stop() {
    const problems = [];
    for (const c of [...this.clients, ...this.cache.values()]) await c.close(true).catch(() => {});
    this.cache.clear();
    for (const m of this.members) this.closeRaw(m.index);
    await Promise.all(this.members.map(async (m) => {
      const s = m.server;
      const wasRunning = Boolean(s.proc) && !s.exitInfo;
      const info = await s.stop();
      if (s.unexpectedExits.length) {
        problems.push(`member ${m.index} (${m.host}) exited unexpectedly during the tests: ` +
          `${JSON.stringify(s.unexpectedExits)}`);
      }
      if (wasRunning && info && (info.forced || (info.code !== 0 && info.code !== null) ||
          (info.signal && info.signal !== 'SIGTERM'))) {
        problems.push(`member ${m.index} (${m.host}) did not shut down cleanly on SIGTERM: ` +
          `${JSON.stringify(info)}\n--- member ${m.index} stderr tail ---\n${s.stderrTail(60)}`);
      }
    }));
    for (const m of this.members) m.server.cleanup();
    return problems;
  }

  /* The last lines of every member's stderr, for failure messages. */
  stderrTails(n = STDERR_TAIL_LINES) {
    return this.members.map((m) => {
      const s = m.server;
      const died = s.exitInfo && !s.expectingExit;
      const lines = s.stderrTail(400).split('\n').filter((l) => !NOISE.test(l)).slice(-n).join('\n');
      return `--- member ${m.index} ${m.host} raft ${m.raftPort}` +
        `${died ? ' (EXITED: ' + JSON.stringify(s.exitInfo) + ')' : ''} stderr tail ---\n${lines}`;
    }).join('\n');
  }
}

/*
 * Registers before/after hooks that start a replica set of n members (plus
 * opts.spares uninitiated members with --replSet) for the calling file.
 * opts: {spares, args (extra mayflyd flags for every member), binary, uriOptions}.
 */
function useReplSet(n = 3, opts = {}) {
  const set = new ReplSet(n, opts);
  nodeTest.before(async () => {
    currentSet = set;
    try {
      await set.start();
    } catch (e) {
      e.message += `\n${set.stderrTails(40)}`;
      throw e;
    }
  }, { timeout: 120000 });
  nodeTest.after(async () => {
    const problems = await set.stop();
    if (problems.length) throw new Error(problems.join('\n'));
  }, { timeout: 60000 });
  return set;
}

/* node:test's test() whose failures carry every member's stderr tail. */
function test(name, optsOrFn, maybeFn) {
  const fn = typeof optsOrFn === 'function' ? optsOrFn : maybeFn;
  const opts = typeof optsOrFn === 'function' ? {} : optsOrFn;
  return nodeTest.test(name, { timeout: 90000, ...opts }, async (t) => {
    try {
      await fn(t);
    } catch (err) {
      if (currentSet) {
        try { err.message = `${err.message}\n${currentSet.stderrTails()}`; } catch (_) { /* frozen */ }
      }
      throw err;
    }
  });
}

const MONGOSH = path.join(h.REPO_ROOT, 'node_modules', '.bin', 'mongosh');

/* Runs script with mongosh --eval against uri; resolves with trimmed stdout (rejects after 60 s). */
function mongoshUri(uri, script) {
  return new Promise((resolve, reject) => {
    execFile(MONGOSH, [uri, '--quiet', '--norc', '--eval', script], {
      timeout: 60000, env: { ...process.env, MONGOSH_SKIP_NODE_VERSION_CHECK: '1', NO_COLOR: '1' },
    }, (err, stdout, stderr) => {
      if (err) {
        err.message += `\nstdout: ${stdout}\nstderr: ${stderr}`;
        return reject(err);
      }
      resolve(stdout.trim());
    });
  });
}

/* Compares two BSON Timestamps: <0, 0, >0. */
function tsCompare(a, b) {
  const ah = a.high >>> 0; const bh = b.high >>> 0;
  if (ah !== bh) return ah < bh ? -1 : 1;
  const al = a.low >>> 0; const bl = b.low >>> 0;
  return al === bl ? 0 : (al < bl ? -1 : 1);
}

/*
 * libraft's TCP handshake as a member sends it on the raft port: protocol
 * (1), server id and the address buffer's length, 8 bytes little-endian
 * each, then the address padded with NULs to a multiple of 8. claimedLen
 * replaces the length field; nul: false fills the padding with 'x' instead.
 */
function raftHandshake(id, address, { protocol = 1, claimedLen = 0, nul = true } = {}) {
  const alen = Buffer.byteLength(address) + (nul ? 1 : 0);
  const padded = Math.ceil(alen / 8) * 8;
  const b = Buffer.alloc(24 + padded, nul ? 0 : 0x78);
  b.writeBigUInt64LE(BigInt(protocol), 0);
  b.writeBigUInt64LE(BigInt(id), 8);
  b.writeBigUInt64LE(BigInt(claimedLen || padded), 16);
  b.write(address, 24, 'latin1');
  return b;
}

/*
 * Connects to a raft port, sends bytes, and waits (at most ms) for the
 * member to close the connection. Resolves {closed, ms, received} with the
 * bytes the member sent first (a keyed member's nonce).
 */
function raftProbe(port, bytes, ms = 3000) {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const chunks = [];
    const sock = net.connect({ host: '127.0.0.1', port }, () => sock.write(bytes));
    const timer = setTimeout(() => { sock.destroy(); finish(false); }, ms);
    let done = false;
    function finish(closed) {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ closed, ms: Date.now() - t0, received: Buffer.concat(chunks) });
    }
    sock.on('data', (d) => chunks.push(d));
    sock.on('error', (e) => (e.code === 'ECONNRESET' ? finish(true) : (clearTimeout(timer), reject(e))));
    sock.on('close', () => finish(true));
  });
}

module.exports = { ReplSet, useReplSet, test, mongoshUri, tsCompare, ejson, hr, SET_NAME, raftHandshake, raftProbe };
