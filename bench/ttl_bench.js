'use strict';
/*
 * Expiry benchmark (issue 4): mayfly's TTL monitor against Redis's key expiry,
 * side by side in one run. Prints figures only; no assertions.
 *
 *   node bench/ttl_bench.js [--docs N] [--sample N] [--poll MS] [--spread SECS]
 *   (MAYFLYD_ARGS="--setParameter name=value ..." passes extra flags to mayflyd)
 *   (or bash bench/ttl_bench.sh, which builds build/mayflyd first)
 *
 * Servers. mayflyd (binary from $MAYFLYD, default build/mayflyd, the release
 * build) and redis-server (from $REDIS_SERVER, default `redis-server` on PATH)
 * are started by this script on free loopback ports, each with a fresh temp
 * directory (Redis: --save '' --appendonly no, default hz and expiry effort).
 * Both are killed and the directories removed at the end, also on error or
 * Ctrl-C. The phases run one system at a time, so the two never share the CPU.
 *
 * Phase 1, spread expiry. N small documents (keys) whose expiry times are
 * spread evenly over 60 s, starting a little after the load is expected to
 * end (the load rate is calibrated first with a short load). mayfly: TTL index
 * {at: 1} with expireAfterSeconds 0, `at` = the expiry time, insertMany of
 * 1,000 documents, 4 in flight. Redis: SET key val PXAT <ms> (the absolute
 * form of PX, so the exact expiry instant is known), pipelined 1,000 commands
 * per write, 8 writes in flight. Lateness = time from a document's expiry to
 * its physical removal:
 *   - mayfly: a random sample of --sample _ids is polled every --poll ms with
 *     find({_id: {$in: due}}), where `due` holds only the sampled _ids whose
 *     expiry has passed and that were still present last time (a few dozen at
 *     a time), so polling costs little. A document found absent was removed
 *     between the previous poll and this reply; the estimate is the midpoint
 *     of that interval (clipped at the expiry). mayfly's own
 *     serverStatus().metrics.ttl.lateness (every deleted document, log2
 *     histogram) is reported too.
 *   - Redis: polling with EXISTS would itself expire the key (lazy expiry),
 *     so it cannot see physical removal. Instead keyspace notifications
 *     (notify-keyspace-events Ex) are enabled and a subscriber records the
 *     arrival time of every `expired` event; nothing else touches the keys,
 *     so every event comes from Redis's active expiry cycle. The same sample
 *     of keys and all N keys are reported.
 *
 * Phase 2, mass expiry. N documents (keys) that all expire at one instant T,
 * a few seconds after the load ends. mayfly: estimatedDocumentCount() polled
 * every 50 ms; Redis: DBSIZE of its own logical database polled every 50 ms
 * (DBSIZE counts expired keys until they are reclaimed; DBSIZE itself does
 * not expire anything, and nothing reads the keys, so only active expiry
 * removes them). Reported: time from T to the first deletion and to zero,
 * and the deletion rate N / (zero - first deletion) (also N / (zero - T)).
 *
 * Phase 3, foreground latency. Before phase 2's load, one client on its own
 * connection alternates a single-document insert and a find by _id (Redis:
 * SET and GET, in another logical database) for 5 s on the idle server; the
 * same loop runs again from T until the mass expiry is over. p50/p99 of each
 * operation, idle vs. during the expiry.
 *
 * Targets for mayfly (2-core machine): phase-1 lateness p99 < 1 s (the
 * client-observed sample), phase-2 deletion rate >= 300,000 docs/s, phase-3
 * p99 during the expiry <= 3x idle (insert and find each). Peak RSS is
 * /proc/<pid>/status VmHWM at the end.
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { freePort, tryConnect } = require('../tests/clients/harness');

/* ---------- arguments ---------- */

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`bad value for --${name}`);
  return v;
}
const N = Math.floor(arg('docs', 1000000));
const SAMPLE = Math.min(N, Math.floor(arg('sample', 2000)));
const POLL_MS = arg('poll', 25);
const SPREAD_MS = arg('spread', 60) * 1000;   /* phase-1 expiry window */
const BATCH = 1000;
const MONGO_INFLIGHT = 4;
const REDIS_INFLIGHT = 8;
const IDLE_MS = 5000;
const TAIL_CAP_MS = 30000;   /* longest wait after the last expiry */
const PAYLOAD = 'payload-0123456789';

const REPO = path.resolve(__dirname, '..');
const MAYFLYD = (() => {
  const p = process.env.MAYFLYD || 'build/mayflyd';
  return path.isAbsolute(p) ? p : path.join(REPO, p);
})();
const REDIS_SERVER = process.env.REDIS_SERVER || 'redis-server';

/* ---------- small helpers ---------- */

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const hr = () => Number(process.hrtime.bigint()) / 1e6;   /* monotonic ms */
const log = (...a) => console.log(`[${new Date().toISOString().slice(11, 23)}]`, ...a);


function procKb(pid, key) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) : null;
  } catch (_) { return null; }
}

/* Quantile of a numeric array or typed array (sorted copy). */
function quantiles(values) {
  const a = Float64Array.from(values).sort();
  const q = (p) => (a.length ? a[Math.min(a.length - 1, Math.max(0, Math.ceil(p * a.length) - 1))] : NaN);
  return { n: a.length, p50: q(0.5), p99: q(0.99), max: a.length ? a[a.length - 1] : NaN };
}

/* Deterministic PRNG (xorshift32) so the samples are the same every run. */
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x / 4294967296; };
}

function sampleIndices(n, k, seed) {
  const r = rng(seed);
  const set = new Set();
  while (set.size < k) set.add(Math.floor(r() * n));
  return Array.from(set).sort((a, b) => a - b);
}

/* ---------- child processes and clean-up ---------- */

const children = [];   /* {name, proc, dir} */
let cleanedUp = false;

function spawnServer(name, bin, args, dir) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'], cwd: dir });
  const entry = { name, proc, dir, tail: [], exited: null };
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (c) => {
    entry.tail.push(c);
    if (entry.tail.length > 50) entry.tail.splice(0, entry.tail.length - 25);
  });
  proc.on('exit', (code, signal) => { entry.exited = { code, signal }; });
  proc.on('error', (e) => { entry.exited = { error: e.message }; });
  children.push(entry);
  return entry;
}

async function waitUp(entry, port) {
  const deadline = Date.now() + 20000;
  for (;;) {
    if (entry.exited) {
      throw new Error(`${entry.name} exited during start-up ${JSON.stringify(entry.exited)}\n${entry.tail.join('')}`);
    }
    if (await tryConnect(port)) return;
    if (Date.now() > deadline) throw new Error(`${entry.name} did not start on port ${port}`);
    await sleep(50);
  }
}

/* Synchronous so it can run from 'exit' as well: SIGKILL what is left, remove the directories. */
function cleanupSync() {
  if (cleanedUp) return;
  cleanedUp = true;
  for (const c of children) {
    if (!c.exited) { try { c.proc.kill('SIGKILL'); } catch (_) { /* gone */ } }
    try { fs.rmSync(c.dir, { recursive: true, force: true }); } catch (_) { /* best effort */ }
  }
}

/* Graceful stop: SIGTERM, wait up to `ms`, then SIGKILL; then remove directories. */
async function stopAll(ms = 10000) {
  for (const c of children) if (!c.exited) c.proc.kill('SIGTERM');
  const deadline = Date.now() + ms;
  while (children.some((c) => !c.exited) && Date.now() < deadline) await sleep(50);
  cleanupSync();
}

process.on('exit', cleanupSync);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => { cleanupSync(); process.exit(130); });
}

/* ---------- a minimal pipelined RESP client ---------- */

function encode(args) {
  let s = `*${args.length}\r\n`;
  for (const a of args) {
    const v = String(a);
    s += `$${Buffer.byteLength(v)}\r\n${v}\r\n`;
  }
  return s;
}

class Resp {
  constructor(port) {
    this.port = port;
    this.buf = null;
    this.queue = [];      /* pending requests: {left, results, resolve, reject, error} */
    this.qhead = 0;
    this.onPush = null;   /* subscriber mode: called with (reply, arrivalMs) */
  }

  connect() {
    return new Promise((resolve, reject) => {
      this.sock = net.connect({ port: this.port, host: '127.0.0.1' }, resolve);
      this.sock.setNoDelay(true);
      this.sock.once('error', reject);
      this.sock.on('data', (d) => this.onData(d));
      this.sock.on('close', () => this.failAll(new Error('redis connection closed')));
    });
  }

  close() { this.sock.destroy(); }

  failAll(e) {
    for (let i = this.qhead; i < this.queue.length; i++) this.queue[i].reject(e);
    this.queue = [];
    this.qhead = 0;
  }

  /* Sends `cmds` (arrays of arguments) in one write; resolves with the replies
   * (or with the count only if keep is false). A Redis error reply rejects. */
  pipeline(cmds, keep = true) {
    let s = '';
    for (const c of cmds) s += encode(c);
    return new Promise((resolve, reject) => {
      this.queue.push({ left: cmds.length, results: keep ? [] : null, resolve, reject, error: null });
      this.sock.write(s);
    });
  }

  async cmd(...args) { return (await this.pipeline([args]))[0]; }

  onData(d) {
    const now = Date.now();
    let buf = this.buf ? Buffer.concat([this.buf, d]) : d;
    let off = 0;
    for (;;) {
      const r = parseReply(buf, off);
      if (r === null) break;
      off = r.off;
      this.deliver(r.value, now);
    }
    this.buf = off < buf.length ? buf.subarray(off) : null;
  }

  deliver(v, now) {
    if (this.onPush && Array.isArray(v) && v[0] === 'message') { this.onPush(v, now); return; }
    const q = this.queue[this.qhead];
    if (!q) { if (this.onPush) this.onPush(v, now); return; }
    if (v instanceof Error && !q.error) q.error = v;
    if (q.results) q.results.push(v);
    if (--q.left === 0) {
      this.queue[this.qhead++] = undefined;
      if (this.qhead > 1024 && this.qhead * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.qhead);
        this.qhead = 0;
      }
      if (q.error) q.reject(q.error); else q.resolve(q.results || null);
    }
  }
}

/* Parses one reply at `off`; returns {value, off} or null if incomplete. */
function parseReply(buf, off) {
  if (off >= buf.length) return null;
  const nl = buf.indexOf(10, off);
  if (nl < 0) return null;
  const type = buf[off];
  const line = buf.toString('latin1', off + 1, nl - 1);
  const next = nl + 1;
  switch (type) {
    case 43: return { value: line, off: next };                 /* + */
    case 45: return { value: new Error(line), off: next };      /* - */
    case 58: return { value: Number(line), off: next };         /* : */
    case 36: {                                                  /* $ */
      const len = Number(line);
      if (len < 0) return { value: null, off: next };
      if (next + len + 2 > buf.length) return null;
      return { value: buf.toString('latin1', next, next + len), off: next + len + 2 };
    }
    case 42: {                                                  /* * */
      const n = Number(line);
      if (n < 0) return { value: null, off: next };
      const arr = [];
      let o = next;
      for (let i = 0; i < n; i++) {
        const r = parseReply(buf, o);
        if (r === null) return null;
        arr.push(r.value);
        o = r.off;
      }
      return { value: arr, off: o };
    }
    default: throw new Error(`bad RESP type byte ${type}`);
  }
}

/* ---------- loaders ---------- */

/* insertMany of BATCH docs, MONGO_INFLIGHT in flight; expiry(i) gives the `at` ms. */
async function loadMongo(coll, n, idBase, expiry) {
  let next = 0;
  const t0 = hr();
  await Promise.all(Array.from({ length: MONGO_INFLIGHT }, async () => {
    while (next < n) {
      const start = next;
      const end = Math.min(n, start + BATCH);
      next = end;
      const docs = new Array(end - start);
      for (let i = start; i < end; i++) docs[i - start] = { _id: idBase + i, at: new Date(expiry(i)), p: PAYLOAD };
      await coll.insertMany(docs, { ordered: false });
    }
  }));
  return hr() - t0;
}

/* SET prefix+i PAYLOAD PXAT expiry(i), BATCH per write, REDIS_INFLIGHT writes in flight. */
async function loadRedis(r, n, prefix, expiry) {
  let next = 0;
  const t0 = hr();
  await Promise.all(Array.from({ length: REDIS_INFLIGHT }, async () => {
    while (next < n) {
      const start = next;
      const end = Math.min(n, start + BATCH);
      next = end;
      const cmds = new Array(end - start);
      for (let i = start; i < end; i++) cmds[i - start] = ['SET', prefix + i, PAYLOAD, 'PXAT', Math.round(expiry(i))];
      await r.pipeline(cmds, false);
    }
  }));
  return hr() - t0;
}

/* ---------- phase 1: spread expiry ---------- */

/* Polls the sampled _ids that are due; returns the lateness (ms) of each. */
async function pollMongoSample(coll, sample, expiryOf, deadlineMs) {
  const order = sample.slice().sort((a, b) => expiryOf(a) - expiryOf(b));
  let nextDue = 0;
  let active = [];                 /* due, still present at the last poll */
  const lastSeen = new Map();      /* _id -> wall-clock send time of the last poll that saw it */
  const lateness = [];
  let polls = 0;
  while ((nextDue < order.length || active.length) && Date.now() < deadlineMs) {
    const now = Date.now();
    while (nextDue < order.length && expiryOf(order[nextDue]) <= now) active.push(order[nextDue++]);
    if (active.length) {
      const t0 = Date.now();
      const present = new Set((await coll.find({ _id: { $in: active } }, { projection: { _id: 1 } }).toArray())
        .map((d) => d._id));
      const t1 = Date.now();
      polls++;
      const still = [];
      for (const id of active) {
        if (present.has(id)) { still.push(id); lastSeen.set(id, t0); continue; }
        const exp = expiryOf(id);
        const lo = Math.max(exp, lastSeen.has(id) ? lastSeen.get(id) : exp);
        lateness.push((lo + t1) / 2 - exp);
      }
      active = still;
    }
    await sleep(POLL_MS);
  }
  return { lateness, missing: order.length - lateness.length, polls };
}

async function phase1Mayfly(db, calibRate) {
  const coll = db.collection('spread');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const estLoad = (N / calibRate) * 1000;
  const loadStart = Date.now();
  const w0 = loadStart + estLoad * 1.3 + 2000;     /* expiry window [w0, w0 + 60 s) */
  const expiry = (i) => w0 + (SPREAD_MS * i) / N;
  log(`mayfly phase 1: loading ${N} docs, expiries spread over ${SPREAD_MS / 1000} s from +${((w0 - loadStart) / 1000).toFixed(1)} s`);
  const loadMs = await loadMongo(coll, N, 0, expiry);
  const loadEnd = Date.now();
  log(`mayfly phase 1: loaded in ${(loadMs / 1000).toFixed(1)} s (${(N / loadMs * 1000).toFixed(0)} docs/s)` +
    (loadEnd > w0 ? `; WARNING: load overran the window start by ${loadEnd - w0} ms` : ''));
  const sample = sampleIndices(N, SAMPLE, 12345);
  const res = await pollMongoSample(coll, sample, expiry, w0 + SPREAD_MS + TAIL_CAP_MS);
  /* Let the rest of the collection drain (bounded) before reading the server's histogram. */
  const drainDeadline = w0 + SPREAD_MS + TAIL_CAP_MS;
  let left = await coll.estimatedDocumentCount();
  while (left > 0 && Date.now() < drainDeadline) { await sleep(100); left = await coll.estimatedDocumentCount(); }
  const ss = await db.admin().command({ serverStatus: 1 });
  const ttl = ss.metrics && ss.metrics.ttl ? ss.metrics.ttl : {};
  log(`mayfly phase 1: done; ${res.polls} sample polls, ${left} docs left, server ttl.lateness ${JSON.stringify(ttl.lateness && { count: ttl.lateness.count, p50Ms: ttl.lateness.p50Ms, p99Ms: ttl.lateness.p99Ms, maxMs: ttl.lateness.maxMs })}`);
  return { ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - w0), sample: quantiles(res.lateness),
    sampleMissing: res.missing, leftover: left, server: ttl.lateness || null };
}

async function phase1Redis(port, r, calibRate) {
  const sub = new Resp(port);
  await sub.connect();
  const estLoad = (N / calibRate) * 1000;
  const loadStart = Date.now();
  const w0 = loadStart + estLoad * 1.3 + 2000;
  const expiry = (i) => w0 + (SPREAD_MS * i) / N;
  /* Lateness of every key, from the arrival of its `expired` event. */
  const all = new Float64Array(N);
  const perKey = new Float64Array(N).fill(NaN);
  let got = 0;
  let early = 0;
  sub.onPush = (m, now) => {
    const key = m[2];
    if (typeof key !== 'string' || !key.startsWith('s:')) return;
    const i = Number(key.slice(2));
    if (!(i >= 0 && i < N) || !Number.isNaN(perKey[i])) return;
    const late = now - Math.round(expiry(i));
    perKey[i] = late;
    if (late < 0) early++;
    all[got++] = late;
  };
  await sub.cmd('SUBSCRIBE', '__keyevent@0__:expired');
  log(`redis phase 1: loading ${N} keys, expiries spread over ${SPREAD_MS / 1000} s from +${((w0 - loadStart) / 1000).toFixed(1)} s`);
  const loadMs = await loadRedis(r, N, 's:', expiry);
  const loadEnd = Date.now();
  log(`redis phase 1: loaded in ${(loadMs / 1000).toFixed(1)} s (${(N / loadMs * 1000).toFixed(0)} keys/s)` +
    (loadEnd > w0 ? `; WARNING: load overran the window start by ${loadEnd - w0} ms` : ''));
  const deadline = w0 + SPREAD_MS + TAIL_CAP_MS;
  while (got < N && Date.now() < deadline) await sleep(100);
  const left = await r.cmd('DBSIZE');
  sub.close();
  /* The same sample of indices as mayfly's, read from the per-key record. */
  const sl = [];
  for (const i of sampleIndices(N, SAMPLE, 12345)) if (!Number.isNaN(perKey[i])) sl.push(perKey[i]);
  log(`redis phase 1: done; ${got} expired events, ${left} keys left${early ? `, ${early} events before expiry (clock?)` : ''}`);
  return { ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - w0), all: quantiles(all.subarray(0, got)),
    allMissing: N - got, leftover: left, sampleLateness: quantiles(sl) };
}

/* ---------- phase 2 + 3: mass expiry and foreground latency ---------- */

/* One foreground loop: alternating write and read; returns per-op latencies (ms) and start times. */
function foreground(write, read) {
  const st = { stop: false, writes: [], reads: [], done: null, n: 0 };
  st.done = (async () => {
    const r = rng(777);
    while (!st.stop) {
      const i = st.n++;
      let t0 = hr();
      await write(i);
      let t1 = hr();
      st.writes.push(t0, t1 - t0);
      const j = Math.floor(r() * (i + 1));
      t0 = hr();
      await read(j);
      t1 = hr();
      st.reads.push(t0, t1 - t0);
    }
  })();
  return st;
}

function fgStats(list, from = -Infinity, to = Infinity) {
  const v = [];
  for (let k = 0; k < list.length; k += 2) if (list[k] >= from && list[k] < to) v.push(list[k + 1]);
  return quantiles(v);
}

async function idleLatency(write, read) {
  const fg = foreground(write, read);
  await sleep(IDLE_MS);
  fg.stop = true;
  await fg.done;
  return { write: fgStats(fg.writes), read: fgStats(fg.reads), ops: fg.n };
}

/* Waits until count() is 0 while a foreground loop runs; T is the (wall-clock) expiry instant. */
async function massExpiry(name, count, T, write, read) {
  /* Wait until just before T. */
  while (Date.now() < T - 500) await sleep(50);
  const fg = foreground(write, read);
  while (Date.now() < T) await sleep(5);
  const tHr = hr() - (Date.now() - T);
  let first = null;
  let zero = null;
  let c = N;
  const deadline = T + 120000;
  let lastLog = Date.now();
  while (Date.now() < deadline) {
    c = await count();
    const now = Date.now();
    if (first === null && c < N) first = now;
    if (c === 0) { zero = now; break; }
    if (now - lastLog > 2000) { log(`${name} phase 2: ${c} left`); lastLog = now; }
    await sleep(50);
  }
  const zeroHr = hr();
  fg.stop = true;
  await fg.done;
  return {
    firstAfterMs: first === null ? null : first - T,
    zeroAfterMs: zero === null ? null : zero - T,
    left: c,
    rateSustained: zero !== null && first !== null && zero > first ? N / ((zero - first) / 1000) : null,
    rateFromT: zero !== null ? N / ((zero - T) / 1000) : null,
    write: fgStats(fg.writes, tHr, zeroHr),
    read: fgStats(fg.reads, tHr, zeroHr),
  };
}

async function phase23Mayfly(db, fgDb, ingestRate) {
  const fgColl = fgDb.collection('fg');
  const write = (i) => fgColl.insertOne({ _id: i, v: PAYLOAD });
  const read = (j) => fgColl.findOne({ _id: j });
  log('mayfly phase 3: idle foreground latency (5 s)');
  const idle = await idleLatency(write, read);
  const base = 10000000;
  const coll = db.collection('mass');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  const loadStart = Date.now();
  const T = loadStart + (N / ingestRate) * 1000 * 2 + 3000;   /* same-key loads can be slower */
  log(`mayfly phase 2: loading ${N} docs that all expire at +${((T - loadStart) / 1000).toFixed(1)} s`);
  const loadMs = await loadMongo(coll, N, 0, () => T);
  const loadEnd = Date.now();
  log(`mayfly phase 2: loaded in ${(loadMs / 1000).toFixed(1)} s; expiry in ${((T - loadEnd) / 1000).toFixed(1)} s`);
  const fgColl2 = fgDb.collection('fg2');
  const write2 = (i) => fgColl2.insertOne({ _id: base + i, v: PAYLOAD });
  const read2 = (j) => fgColl2.findOne({ _id: base + j });
  const m = await massExpiry('mayfly', () => coll.estimatedDocumentCount(), T, write2, read2);
  log(`mayfly phase 2: all gone ${fmtMs(m.zeroAfterMs)} after expiry (first deletion after ${fmtMs(m.firstAfterMs)})`);
  const ss = await db.admin().command({ serverStatus: 1 });
  return { idle, ...m, ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - T),
    paceDocsPerSec: ss.metrics && ss.metrics.ttl ? ss.metrics.ttl.paceDocsPerSec : null };
}

async function phase23Redis(port, r, ingestRate) {
  const fgc = new Resp(port);
  await fgc.connect();
  await fgc.cmd('SELECT', '1');
  const write = (i) => fgc.cmd('SET', `fg:${i}`, PAYLOAD);
  const read = (j) => fgc.cmd('GET', `fg:${j}`);
  log('redis phase 3: idle foreground latency (5 s)');
  const idle = await idleLatency(write, read);
  const loader = new Resp(port);
  await loader.connect();
  await loader.cmd('SELECT', '2');
  const loadStart = Date.now();
  const T = loadStart + (N / ingestRate) * 1000 * 2 + 3000;   /* same-key loads can be slower */
  log(`redis phase 2: loading ${N} keys that all expire at +${((T - loadStart) / 1000).toFixed(1)} s`);
  const loadMs = await loadRedis(loader, N, 'm:', () => T);
  const loadEnd = Date.now();
  log(`redis phase 2: loaded in ${(loadMs / 1000).toFixed(1)} s; expiry in ${((T - loadEnd) / 1000).toFixed(1)} s`);
  const write2 = (i) => fgc.cmd('SET', `fg2:${i}`, PAYLOAD);
  const read2 = (j) => fgc.cmd('GET', `fg2:${j}`);
  const m = await massExpiry('redis', () => loader.cmd('DBSIZE'), T, write2, read2);
  log(`redis phase 2: all gone ${fmtMs(m.zeroAfterMs)} after expiry (first deletion after ${fmtMs(m.firstAfterMs)})`);
  fgc.close();
  loader.close();
  return { idle, ...m, ingest: N / loadMs * 1000, loadOverrunMs: Math.max(0, loadEnd - T) };
}

/* ---------- report ---------- */

const fmtInt = (x) => (x === null || x === undefined || Number.isNaN(x) ? 'n/a' : Math.round(x).toLocaleString('en-US'));
const fmtMs = (x) => (x === null || x === undefined || Number.isNaN(x) ? 'n/a'
  : x >= 100 ? `${Math.round(x)} ms` : x >= 1 ? `${x.toFixed(1)} ms` : `${x.toFixed(3)} ms`);
const fmtQ = (q) => `${fmtMs(q.p50)} / ${fmtMs(q.p99)} / ${fmtMs(q.max)}`;
const fmtQ2 = (q) => `${fmtMs(q.p50)} / ${fmtMs(q.p99)}`;
const fmtMiB = (kb) => (kb === null ? 'n/a' : `${(kb / 1024).toFixed(0)} MiB`);

function printTable(rows) {
  const w = [0, 0, 0];
  for (const r of rows) if (r.length === 3) for (let k = 0; k < 3; k++) w[k] = Math.max(w[k], String(r[k]).length);
  const line = `+-${'-'.repeat(w[0])}-+-${'-'.repeat(w[1])}-+-${'-'.repeat(w[2])}-+`;
  console.log(line);
  for (const r of rows) {
    if (r === '-') { console.log(line); continue; }
    console.log(`| ${String(r[0]).padEnd(w[0])} | ${String(r[1]).padEnd(w[1])} | ${String(r[2]).padEnd(w[2])} |`);
  }
  console.log(line);
}

/* ---------- main ---------- */

async function main() {
  if (!fs.existsSync(MAYFLYD)) throw new Error(`mayflyd not found at ${MAYFLYD} (run make all)`);
  const tStart = Date.now();
  const mPort = await freePort();
  const mDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ttlbench-mayfly-'));
  // MAYFLYD_ARGS: extra server flags, e.g. "--setParameter ttlMonitorYieldPercent=25".
  const extra = (process.env.MAYFLYD_ARGS || '').split(/\s+/).filter(Boolean);
  const mayfly = spawnServer('mayflyd', MAYFLYD, ['--port', String(mPort), '--bind_ip', '127.0.0.1', '--dbpath', mDir, ...extra], mDir);
  const rPort = await freePort();
  const rDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ttlbench-redis-'));
  const redis = spawnServer('redis-server', REDIS_SERVER, ['--port', String(rPort), '--bind', '127.0.0.1',
    '--save', '', '--appendonly', 'no', '--dir', rDir, '--daemonize', 'no', '--protected-mode', 'no',
    '--notify-keyspace-events', 'Ex'], rDir);
  await waitUp(mayfly, mPort);
  await waitUp(redis, rPort);

  const client = new MongoClient(`mongodb://127.0.0.1:${mPort}/?directConnection=true`, { maxPoolSize: 8 });
  const fgClient = new MongoClient(`mongodb://127.0.0.1:${mPort}/?directConnection=true`, { maxPoolSize: 1 });
  await client.connect();
  await fgClient.connect();
  const r = new Resp(rPort);
  await r.connect();
  try {
    const bi = await client.db('admin').command({ buildInfo: 1 });
    const rinfo = await r.cmd('INFO', 'server');
    const rver = (/redis_version:(\S+)/.exec(rinfo) || [])[1];
    log(`mayflyd ${bi.version} pid ${mayfly.proc.pid} port ${mPort}; redis ${rver} pid ${redis.proc.pid} port ${rPort}`);
    log(`docs=${N} sample=${SAMPLE} poll=${POLL_MS}ms cores=${os.cpus().length} ` +
      `loadavg=${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (other work on the machine skews the figures)`);
    const db = client.db('ttlbench');
    const fgDb = fgClient.db('ttlbench');

    /* Calibration: a short load into scratch space, to place the expiry windows after the loads. */
    const calibN = Math.min(N, 20000);
    const calib = db.collection('calib');
    await calib.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    const far = Date.now() + 86400000;
    await loadMongo(calib, 2000, -2000, () => far);   /* warm-up: connection pool, first pages */
    const mCal = calibN / (await loadMongo(calib, calibN, 0, () => far)) * 1000;
    await calib.drop();
    await r.cmd('SELECT', '3');
    const rCal = calibN / (await loadRedis(r, calibN, 'c:', () => far)) * 1000;
    await r.cmd('FLUSHDB');
    await r.cmd('SELECT', '0');
    log(`calibration: mayfly ${mCal.toFixed(0)} docs/s, redis ${rCal.toFixed(0)} keys/s`);

    const m1 = await phase1Mayfly(db, mCal);
    const r1 = await phase1Redis(rPort, r, rCal);
    await r.cmd('CONFIG', 'SET', 'notify-keyspace-events', '');

    const m23 = await phase23Mayfly(db, fgDb, m1.ingest);
    const r23 = await phase23Redis(rPort, r, r1.ingest);

    const mHwm = procKb(mayfly.proc.pid, 'VmHWM');
    const rHwm = procKb(redis.proc.pid, 'VmHWM');

    const sl = r1.sampleLateness;
    const rows = [
      ['metric', 'mayfly', 'redis'], '-',
      ['(1) ingest, spread-expiry load (docs/s)', fmtInt(m1.ingest), fmtInt(r1.ingest)],
      ['(1) lateness p50/p99/max, sample of ' + SAMPLE, fmtQ(m1.sample), fmtQ(sl)],
      ['(1) lateness p50/p99/max, all docs', m1.server ? `${fmtMs(m1.server.p50Ms)} / ${fmtMs(m1.server.p99Ms)} / ${fmtMs(m1.server.maxMs)} (server)` : 'n/a',
        `${fmtQ(r1.all)} (events)`],
      ['(1) not removed within 30 s of window end', `${m1.sampleMissing} of sample, ${m1.leftover} docs`, `${r1.allMissing} keys`],
      ['(2) ingest, same-instant load (docs/s)', fmtInt(m23.ingest), fmtInt(r23.ingest)],
      ['(2) first deletion after expiry', fmtMs(m23.firstAfterMs), fmtMs(r23.firstAfterMs)],
      ['(2) all gone after expiry', fmtMs(m23.zeroAfterMs), fmtMs(r23.zeroAfterMs)],
      ['(2) deletion rate, first..last (docs/s)', fmtInt(m23.rateSustained), fmtInt(r23.rateSustained)],
      ['(2) deletion rate, expiry..last (docs/s)', fmtInt(m23.rateFromT), fmtInt(r23.rateFromT)],
      ['(3) idle insert/SET p50/p99', fmtQ2(m23.idle.write), fmtQ2(r23.idle.write)],
      ['(3) idle find/GET p50/p99', fmtQ2(m23.idle.read), fmtQ2(r23.idle.read)],
      ['(3) during (2) insert/SET p50/p99', fmtQ2(m23.write), fmtQ2(r23.write)],
      ['(3) during (2) find/GET p50/p99', fmtQ2(m23.read), fmtQ2(r23.read)],
      ['(3) during (2) ops measured (insert+find)', fmtInt(m23.write.n + m23.read.n), fmtInt(r23.write.n + r23.read.n)],
      ['(3) p99 ratio during/idle, insert | find',
        `${(m23.write.p99 / m23.idle.write.p99).toFixed(2)}x | ${(m23.read.p99 / m23.idle.read.p99).toFixed(2)}x`,
        `${(r23.write.p99 / r23.idle.write.p99).toFixed(2)}x | ${(r23.read.p99 / r23.idle.read.p99).toFixed(2)}x`],
      ['peak RSS (VmHWM)', fmtMiB(mHwm), fmtMiB(rHwm)],
    ];
    console.log('');
    console.log(`TTL / expiry benchmark, ${N.toLocaleString('en-US')} docs per phase, ${os.cpus().length} cores` +
      ` (lateness sample polled every ${POLL_MS} ms; Redis lateness from keyspace events)`);
    printTable(rows);
    if (m1.loadOverrunMs || r1.loadOverrunMs || m23.loadOverrunMs || r23.loadOverrunMs) {
      const f = (x) => Math.round(x);
      console.log(`note: a load overran its expiry start (ms, phase 1/2): mayfly ${f(m1.loadOverrunMs)}/${f(m23.loadOverrunMs)}, ` +
        `redis ${f(r1.loadOverrunMs)}/${f(r23.loadOverrunMs)}; the monitor was then deleting during the load`);
    }

    const ok = (b) => (b ? 'MET' : 'NOT MET');
    const t1 = m1.sample.p99 < 1000 && m1.sampleMissing === 0;
    const t2 = m23.rateSustained !== null && m23.rateSustained >= 300000;
    const t3 = m23.write.p99 <= 3 * m23.idle.write.p99 && m23.read.p99 <= 3 * m23.idle.read.p99;
    console.log('');
    console.log('mayfly targets (2-core machine):');
    printTable([
      ['target', 'mayfly', 'result'], '-',
      ['(1) lateness p99 < 1 s', fmtMs(m1.sample.p99) + (m1.server ? ` (server: ${fmtMs(m1.server.p99Ms)})` : ''), ok(t1)],
      ['(2) >= 300,000 deletions/s', fmtInt(m23.rateSustained) + ` (from expiry: ${fmtInt(m23.rateFromT)})`, ok(t2)],
      ['(3) foreground p99 during (2) <= 3x idle',
        `insert ${fmtMs(m23.write.p99)} vs ${fmtMs(m23.idle.write.p99)}, find ${fmtMs(m23.read.p99)} vs ${fmtMs(m23.idle.read.p99)}`, ok(t3)],
    ]);
    if (m23.paceDocsPerSec !== null) console.log(`mayfly serverStatus ttl.paceDocsPerSec after (2): ${fmtInt(m23.paceDocsPerSec)}`);
    console.log(`total run time ${((Date.now() - tStart) / 1000).toFixed(0)} s; ` +
      `loadavg at end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  } finally {
    try { r.close(); } catch (_) { /* ignore */ }
    await client.close().catch(() => {});
    await fgClient.close().catch(() => {});
    await stopAll();
  }
}

main().then(() => process.exit(0), (e) => { console.error(e); cleanupSync(); process.exit(1); });
