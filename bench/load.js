'use strict';
/*
 * Load (issue 10, "Load"): C concurrent connections doing mixed reads and
 * writes for D seconds against a release mayflyd; reports throughput per
 * phase, errors (must be 0), the server's RSS and open file descriptors at
 * the start and the end.
 *
 *   node bench/load.js [--conns C] [--duration SECS] [--phases P] [--docs N]
 *   (CONNS=C and DURATION=SECS in the environment work too; defaults 1000
 *    connections, 600 s, 10 phases, 100,000 documents; or bash bench/load.sh,
 *    which builds build/mayflyd first and raises the open-files limit)
 *
 * Open files: this process holds C sockets and the server C more, and the
 * server inherits this process's limits. The soft limit (ulimit -n) must be
 * at least C + 256; load.sh raises it (to the hard limit if needed), and the
 * script refuses to start below it, saying which `ulimit -n` to run.
 *
 * The server: $MAYFLYD (default build/mayflyd), started by this script with
 * its default flags (workers, maxWorkers, maxConns) on a free loopback port
 * with a temporary --dbpath, stderr to <dbpath>.log; SIGTERM at the end
 * (it must exit 0), the directory removed.
 *
 * Data: database `load`, `items` with N documents {_id: 0..N-1, g: _id % 1000,
 * n: 0, s: 100 bytes} and an index {g: 1}; `own` for per-connection inserts
 * and deletes.
 *
 * Clients: C raw TCP connections speaking OP_MSG (no driver: each connection
 * is exactly one server connection, no monitoring sockets), each opened with
 * a `hello` and then a closed loop, one request in flight at a time, no
 * think time, choosing by weight:
 *   40% find by _id (must return exactly that document)
 *   15% find by g with limit 20 (index; must return 20 documents)
 *    5% aggregate $match on g + $group count (must count N/1000)
 *   20% update by _id with $inc and $set (n must be 1)
 *   10% insert into `own` (_id "<conn>-<seq>")
 *   10% delete the connection's oldest own document (n must be 1)
 * with a delete instead of an insert when the connection owns 64 documents
 * and an insert instead of a delete when it owns none, so the data set stays
 * bounded.
 * An error is any reply with ok != 1, writeErrors or writeConcernError, a
 * reply that does not say what it must (above), a connection closed by the
 * server, or no reply within 60 s.
 *
 * Output: one line per phase (D / P seconds): operations and ops/s in total
 * and per kind, latency p50/p99/max, errors, server RSS (VmRSS), threads and
 * open fds (/proc/<pid>/fd), and the server's connections.current (from one
 * extra monitoring connection, so C + 1); then a summary: RSS and fds after
 * start-up, at the start of the load (C connections open), at the end (still
 * open), and after the C connections closed; VmHWM; total throughput;
 * errors. Exit status 0 when there was no error and the server exited 0 on
 * SIGTERM, 1 otherwise, 2 when it could not run.
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { BSON, MongoClient } = require('mongodb');
const { freePort, tryConnect } = require('../tests/clients/harness');

const REPO_ROOT = path.resolve(__dirname, '..');
const OP_MSG = 2013;
const REPLY_TIMEOUT_MS = 60000;
const OWN_KEEP = 64;

/* ---------- arguments ---------- */

function parseArgs(argv) {
  const o = {
    conns: Number(process.env.CONNS) || 1000,
    duration: Number(process.env.DURATION) || 600,
    phases: 10,
    docs: 100000,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = Number(argv[i + 1]);
    const key = { '--conns': 'conns', '--duration': 'duration', '--phases': 'phases', '--docs': 'docs' }[a];
    if (!key || !Number.isFinite(v) || v <= 0) {
      console.error(`load: bad argument ${a} ${argv[i + 1] ?? ''}`);
      process.exit(2);
    }
    o[key] = v;
    i++;
  }
  o.conns = Math.floor(o.conns);
  o.phases = Math.floor(o.phases);
  o.docs = Math.max(1000, Math.floor(o.docs / 1000) * 1000);
  return o;
}

/* ---------- helpers ---------- */

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }


function softNofile(pid = 'self') {
  const m = /Max open files\s+(\S+)\s+(\S+)/.exec(fs.readFileSync(`/proc/${pid}/limits`, 'utf8'));
  const n = (x) => (x === 'unlimited' ? Infinity : Number(x));
  return { soft: n(m[1]), hard: n(m[2]) };
}

function procStats(pid) {
  try {
    const st = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k) => { const m = new RegExp(`${k}:\\s+(\\d+)`).exec(st); return m ? Number(m[1]) : null; };
    return { rssKB: kb('VmRSS'), hwmKB: kb('VmHWM'), threads: kb('Threads'), fds: fs.readdirSync(`/proc/${pid}/fd`).length };
  } catch (_) {
    return { rssKB: null, hwmKB: null, threads: null, fds: null };
  }
}

const mb = (kb) => (kb === null ? '?' : `${(kb / 1024).toFixed(1)} MB`);

/* Log-bucketed latency histogram (about 2% resolution), in microseconds. */
class Hist {
  constructor() { this.b = new Map(); this.n = 0; this.max = 0; }
  add(us) {
    const k = us < 1 ? 0 : Math.floor(Math.log(us) / Math.log(1.02));
    this.b.set(k, (this.b.get(k) || 0) + 1);
    this.n += 1;
    if (us > this.max) this.max = us;
  }
  q(p) {
    if (!this.n) return 0;
    const want = Math.ceil(this.n * p);
    let acc = 0;
    for (const k of [...this.b.keys()].sort((x, y) => x - y)) {
      acc += this.b.get(k);
      if (acc >= want) return Math.pow(1.02, k + 0.5);
    }
    return this.max;
  }
}

const ms = (us) => (us / 1000).toFixed(us < 10000 ? 2 : 0);

/* ---------- a raw OP_MSG connection ---------- */

let reqIds = 1;
function opMsg(body) {
  const bodyBuf = BSON.serialize(body);
  const header = Buffer.alloc(21);
  header.writeInt32LE(21 + bodyBuf.length, 0);
  header.writeInt32LE(reqIds++, 4);
  header.writeInt32LE(0, 8);
  header.writeInt32LE(OP_MSG, 12);
  header.writeUInt32LE(0, 16);
  header[20] = 0;
  return Buffer.concat([header, bodyBuf]);
}

class Conn {
  constructor(port, id) {
    this.port = port;
    this.id = id;
    this.chunks = [];
    this.len = 0;
    this.pending = null;
    this.closed = false;
  }

  open() {
    return new Promise((resolve, reject) => {
      const sock = net.connect({ port: this.port, host: '127.0.0.1' });
      this.sock = sock;
      sock.setNoDelay(true);
      sock.once('connect', () => resolve(this));
      sock.once('error', (e) => { if (sock.connecting) reject(e); });
      sock.on('error', () => {});
      sock.on('data', (d) => this.onData(d));
      sock.on('close', () => {
        this.closed = true;
        if (this.pending) { const p = this.pending; this.pending = null; p.reject(new Error('connection closed by the server')); }
      });
    });
  }

  onData(d) {
    this.chunks.push(d);
    this.len += d.length;
    if (this.len < 4) return;
    let buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    this.chunks = [buf];
    const mlen = buf.readInt32LE(0);
    if (buf.length < mlen) return;
    const msg = buf.subarray(0, mlen);
    buf = buf.subarray(mlen);
    this.chunks = buf.length ? [buf] : [];
    this.len = buf.length;
    const p = this.pending;
    this.pending = null;
    if (!p) return;
    clearTimeout(p.timer);
    try {
      if (msg.readInt32LE(12) !== OP_MSG || msg[20] !== 0) throw new Error('unexpected reply shape');
      p.resolve(BSON.deserialize(msg.subarray(21)));
    } catch (e) {
      p.reject(e);
    }
  }

  command(body) {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('connection closed by the server'));
      const timer = setTimeout(() => {
        if (this.pending) { this.pending = null; reject(new Error(`no reply within ${REPLY_TIMEOUT_MS} ms`)); }
      }, REPLY_TIMEOUT_MS);
      this.pending = { resolve, reject, timer };
      this.sock.write(opMsg(body));
    });
  }

  close() { this.sock.destroy(); }
}

/* ---------- the workload ---------- */

const KINDS = ['findId', 'findRange', 'agg', 'update', 'insert', 'delete'];
const WEIGHTS = [40, 15, 5, 20, 10, 10];
const CUM = WEIGHTS.reduce((a, w) => { a.push((a.length ? a[a.length - 1] : 0) + w); return a; }, []);

function pickKind() {
  const r = Math.random() * 100;
  for (let i = 0; i < CUM.length; i++) if (r < CUM[i]) return KINDS[i];
  return KINDS[0];
}

class Stats {
  constructor() {
    this.ops = Object.fromEntries(KINDS.map((k) => [k, 0]));
    this.total = 0;
    this.hist = new Hist();
    this.errors = 0;
  }
}

async function worker(conn, ctx) {
  const own = [];
  let seq = 0;
  while (!ctx.stop) {
    let kind = pickKind();
    if (kind === 'delete' && own.length === 0) kind = 'insert';
    else if (kind === 'insert' && own.length >= OWN_KEEP) kind = 'delete';
    const t0 = process.hrtime.bigint();
    let why = null;
    try {
      let r;
      switch (kind) {
        case 'findId': {
          const id = Math.floor(Math.random() * ctx.docs);
          r = await conn.command({ find: 'items', filter: { _id: id }, limit: 1, singleBatch: true, $db: 'load' });
          const b = r.cursor && r.cursor.firstBatch;
          if (r.ok === 1 && (!b || b.length !== 1 || b[0]._id !== id)) why = `find _id ${id} returned ${b && b.length} documents`;
          break;
        }
        case 'findRange': {
          const g = Math.floor(Math.random() * 1000);
          r = await conn.command({ find: 'items', filter: { g }, limit: 20, singleBatch: true, $db: 'load' });
          const b = r.cursor && r.cursor.firstBatch;
          if (r.ok === 1 && (!b || b.length !== Math.min(20, ctx.docs / 1000) || b.some((d) => d.g !== g))) {
            why = `find g ${g} returned ${b && b.length} documents`;
          }
          break;
        }
        case 'agg': {
          const g = Math.floor(Math.random() * 1000);
          r = await conn.command({ aggregate: 'items', pipeline: [{ $match: { g } }, { $group: { _id: null, c: { $sum: 1 } } }],
            cursor: {}, $db: 'load' });
          const b = r.cursor && r.cursor.firstBatch;
          if (r.ok === 1 && (!b || b.length !== 1 || b[0].c !== ctx.docs / 1000)) why = `aggregate g ${g}: ${JSON.stringify(b)}`;
          break;
        }
        case 'update': {
          const id = Math.floor(Math.random() * ctx.docs);
          r = await conn.command({ update: 'items', updates: [{ q: { _id: id }, u: { $inc: { n: 1 }, $set: { t: new Date() } } }],
            $db: 'load' });
          if (r.ok === 1 && r.n !== 1) why = `update _id ${id}: n ${r.n}`;
          break;
        }
        case 'insert': {
          const id = `${conn.id}-${seq++}`;
          r = await conn.command({ insert: 'own', documents: [{ _id: id, at: new Date(), s: 'y'.repeat(64) }], $db: 'load' });
          if (r.ok === 1 && r.n !== 1) why = `insert ${id}: n ${r.n}`;
          else own.push(id);
          break;
        }
        case 'delete': {
          const old = own.shift();
          r = await conn.command({ delete: 'own', deletes: [{ q: { _id: old }, limit: 1 }], $db: 'load' });
          if (r.ok === 1 && r.n !== 1) why = `delete ${old}: n ${r.n}`;
          break;
        }
        default: break;
      }
      if (!why && r.ok !== 1) why = `${kind}: ${r.code} ${r.codeName}: ${r.errmsg}`;
      if (!why && r.writeErrors) why = `${kind}: writeErrors ${JSON.stringify(r.writeErrors)}`;
      if (!why && r.writeConcernError) why = `${kind}: writeConcernError ${JSON.stringify(r.writeConcernError)}`;
    } catch (e) {
      why = `${kind}: ${e.message}`;
    }
    const us = Number(process.hrtime.bigint() - t0) / 1000;
    const s = ctx.phase;
    if (why) {
      s.errors += 1;
      ctx.errors += 1;
      if (ctx.errorSamples.length < 20) ctx.errorSamples.push(`conn ${conn.id}: ${why}`);
      if (conn.closed) return;
    } else {
      s.ops[kind] += 1;
      s.total += 1;
      s.hist.add(us);
      ctx.all.ops[kind] += 1;
      ctx.all.total += 1;
      ctx.all.hist.add(us);
    }
  }
}

/* ---------- main ---------- */

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const lim = softNofile();
  const need = o.conns + 256;
  if (lim.soft < need) {
    console.error(`load: the open-files limit is ${lim.soft}; ${o.conns} connections need at least ${need}: ` +
      `run \`ulimit -n ${Math.max(need, 4096)}\` first (hard limit ${lim.hard}), or use bench/load.sh`);
    process.exit(2);
  }
  const bin = process.env.MAYFLYD || 'build/mayflyd';
  const binary = path.isAbsolute(bin) ? bin : path.join(REPO_ROOT, bin);
  if (!fs.existsSync(binary)) { console.error(`load: no mayflyd at ${binary} (set MAYFLYD)`); process.exit(2); }
  const dbpath = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-load-'));
  const logFile = `${dbpath}.log`;
  const port = await freePort();
  const fd = fs.openSync(logFile, 'w');
  const proc = spawn(binary, ['--port', String(port), '--bind_ip', '127.0.0.1', '--dbpath', dbpath],
    { stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  let exitInfo = null;
  proc.on('exit', (code, signal) => { exitInfo = { code, signal }; });
  const cleanup = () => { if (!exitInfo) proc.kill('SIGKILL'); };
  process.on('SIGINT', () => { cleanup(); process.exit(130); });
  const t0 = Date.now();
  while (!(await tryConnect(port))) {
    if (exitInfo || Date.now() - t0 > 30000) {
      cleanup();
      console.error(`load: mayflyd did not start:\n${fs.readFileSync(logFile, 'utf8').slice(-3000)}`);
      process.exit(2);
    }
    await sleep(20);
  }
  const pid = proc.pid;
  const srvLim = softNofile(pid);
  const atStart = procStats(pid);
  console.log(`load: ${o.conns} connections, ${o.duration} s in ${o.phases} phases, ${o.docs} documents; ` +
    `server ${binary} pid ${pid} port ${port} (open-files limit ${srvLim.soft}); node ${process.version}, ${os.cpus().length} cores`);
  console.log(`load: mix ${KINDS.map((k, i) => `${k} ${WEIGHTS[i]}%`).join(', ')}`);

  /* Preload. */
  const client = new MongoClient(`mongodb://127.0.0.1:${port}/?directConnection=true`, { maxPoolSize: 4 });
  await client.connect();
  const db = client.db('load');
  const pad = 'x'.repeat(100);
  for (let i = 0; i < o.docs; i += 1000) {
    const docs = [];
    for (let id = i; id < i + 1000; id++) docs.push({ _id: id, g: id % 1000, n: 0, s: pad });
    await db.collection('items').insertMany(docs, { ordered: false });
  }
  await db.collection('items').createIndex({ g: 1 });
  await db.collection('own').insertOne({ _id: 'seed' });
  await client.close();
  await sleep(1000);
  const afterPreload = procStats(pid);

  /* Connections. */
  const tc = Date.now();
  const conns = [];
  for (let i = 0; i < o.conns; i += 100) {
    const batch = [];
    for (let j = i; j < Math.min(o.conns, i + 100); j++) batch.push(new Conn(port, j).open());
    conns.push(...await Promise.all(batch));
  }
  await Promise.all(conns.map(async (c) => {
    const r = await c.command({
      hello: 1,
      client: { application: { name: 'mayfly-load' }, driver: { name: 'mayfly-load', version: '1' }, os: { type: process.platform } },
      $db: 'admin',
    });
    if (r.ok !== 1) throw new Error(`hello: ${JSON.stringify(r)}`);
  }));
  const monitor = await new Conn(port, -1).open();
  const connectMs = Date.now() - tc;
  await sleep(500);
  const loadStart = procStats(pid);
  const ssStart = await monitor.command({ serverStatus: 1, $db: 'admin' });
  console.log(`load: ${o.conns} connections open in ${connectMs} ms (server connections.current ` +
    `${ssStart.connections && ssStart.connections.current})`);

  /* Load. */
  const ctx = { stop: false, docs: o.docs, phase: new Stats(), all: new Stats(), errors: 0, errorSamples: [] };
  const workers = conns.map((c) => worker(c, ctx));
  const phaseMs = (o.duration * 1000) / o.phases;
  const startAt = Date.now();
  const rows = [];
  for (let p = 1; p <= o.phases; p++) {
    const phaseStart = Date.now();
    const until = startAt + p * phaseMs;
    while (Date.now() < until && !exitInfo) await sleep(Math.min(1000, until - Date.now()));
    const s = ctx.phase;
    ctx.phase = new Stats();
    const secs = (Date.now() - phaseStart) / 1000;
    const ps = procStats(pid);
    let cur = '?';
    try {
      const ss = await monitor.command({ serverStatus: 1, $db: 'admin' });
      cur = ss.connections ? ss.connections.current : '?';
    } catch (_) { /* reported as an error below if the server is gone */ }
    const row = { phase: p, secs, ops: s.total, rate: s.total / secs, errors: s.errors, p50: s.hist.q(0.5),
      p99: s.hist.q(0.99), max: s.hist.max, ...ps, cur, per: s.ops };
    rows.push(row);
    console.log(`phase ${String(p).padStart(2)}/${o.phases} ${secs.toFixed(0)} s: ${row.rate.toFixed(0)} ops/s ` +
      `(${KINDS.map((k) => `${k} ${(s.ops[k] / secs).toFixed(0)}`).join(', ')}); latency p50 ${ms(row.p50)} ms ` +
      `p99 ${ms(row.p99)} ms max ${ms(row.max)} ms; errors ${s.errors}; server RSS ${mb(ps.rssKB)}, ` +
      `threads ${ps.threads}, fds ${ps.fds}, connections ${cur}`);
    if (exitInfo) break;
  }
  ctx.stop = true;
  await Promise.race([Promise.all(workers), sleep(REPLY_TIMEOUT_MS + 5000)]);
  const loadEnd = procStats(pid);
  const elapsed = (Date.now() - startAt) / 1000;
  for (const c of conns) c.close();
  /* Let the server notice the closed sockets and retire idle workers (5 s). */
  await sleep(8000);
  const afterClose = procStats(pid);
  let ssEnd = null;
  try { ssEnd = await monitor.command({ serverStatus: 1, $db: 'admin' }); } catch (_) { /* below */ }
  monitor.close();

  if (exitInfo) {
    ctx.errors += 1;
    ctx.errorSamples.push(`the server exited during the load: ${JSON.stringify(exitInfo)}`);
  }
  proc.kill('SIGTERM');
  const t1 = Date.now();
  while (!exitInfo && Date.now() - t1 < 60000) await sleep(50);
  if (!exitInfo) { proc.kill('SIGKILL'); await sleep(500); }
  const shutdownOk = exitInfo && exitInfo.code === 0;

  const a = ctx.all;
  const rates = rows.map((r) => r.rate);
  console.log('');
  console.log(`load summary: ${o.conns} connections, ${elapsed.toFixed(0)} s, ${a.total} operations, ` +
    `${(a.total / elapsed).toFixed(0)} ops/s (phases: min ${Math.min(...rates).toFixed(0)}, ` +
    `max ${Math.max(...rates).toFixed(0)}); reads ${((a.ops.findId + a.ops.findRange + a.ops.agg) / elapsed).toFixed(0)}/s, ` +
    `writes ${((a.ops.update + a.ops.insert + a.ops.delete) / elapsed).toFixed(0)}/s; ` +
    `latency p50 ${ms(a.hist.q(0.5))} ms p99 ${ms(a.hist.q(0.99))} ms max ${ms(a.hist.max)} ms`);
  console.log(`load summary: errors ${ctx.errors}`);
  for (const e of ctx.errorSamples) console.log(`  error: ${e}`);
  console.log(`load summary: server RSS after start-up ${mb(atStart.rssKB)}, after preload ${mb(afterPreload.rssKB)}, ` +
    `load start ${mb(loadStart.rssKB)}, load end ${mb(loadEnd.rssKB)}, after closing ${mb(afterClose.rssKB)}; ` +
    `peak ${mb(Math.max(afterClose.hwmKB || 0, loadEnd.rssKB || 0, ...rows.map((r) => r.rssKB || 0)))}`);
  console.log(`load summary: server open fds after start-up ${atStart.fds}, load start ${loadStart.fds}, ` +
    `load end ${loadEnd.fds}, after closing ${afterClose.fds}; threads load start ${loadStart.threads}, ` +
    `load end ${loadEnd.threads}, after closing ${afterClose.threads}`);
  if (ssEnd && ssEnd.connections) {
    console.log(`load summary: server connections after closing: current ${ssEnd.connections.current}, ` +
      `totalCreated ${ssEnd.connections.totalCreated}`);
  }
  console.log(`load summary: SIGTERM exit ${JSON.stringify(exitInfo)}`);
  if (ctx.errors === 0 && shutdownOk) {
    fs.rmSync(dbpath, { recursive: true, force: true });
    fs.rmSync(logFile, { force: true });
  } else {
    console.log(`load: kept ${dbpath} and ${logFile}`);
  }
  process.exit(ctx.errors === 0 && shutdownOk ? 0 : 1);
}

main().catch((e) => {
  console.error(`load: ${e.stack || e}`);
  process.exit(2);
});
