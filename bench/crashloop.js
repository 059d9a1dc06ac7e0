'use strict';
/*
 * Crash loop (issue 10, "Crash loops"): N cycles of kill -9 at a random moment
 * while journaled writes, a mass TTL expiry and index builds run, each followed
 * by a restart on the same dbpath and a check that nothing acknowledged was
 * lost, nothing not yet due was expired and validate is clean.
 *
 *   node bench/crashloop.js [N] [--cycles N] [--seed S] [--writers N]
 *        [--due-docs N] [--future-docs N] [--index-docs N]
 *        [--min-window MS] [--max-window MS] [--logdir DIR] [--keep]
 *   (CYCLES=N and SEED=S in the environment work too; default 100 cycles,
 *    a random seed that is printed; or bash bench/crashloop.sh, which builds
 *    build/mayflyd first)
 *
 * The server is $MAYFLYD (default build/mayflyd, the release build), started
 * by this script on a free loopback port with one temporary --dbpath kept for
 * every cycle. Exit status: 0 when every cycle passed, 1 on any violation,
 * 2 when the loop could not run (bad arguments, server never started).
 *
 * Set-up (once, before cycle 1): database `crashloop` with
 *   - `acked`: documents written by the writers below;
 *   - `idx`: --index-docs documents (default 5000) inserted with j: true;
 *   - `ttl`: a TTL index {at: 1} with expireAfterSeconds: 0.
 *
 * Each cycle, on the running server, for a random window of --min-window to
 * --max-window ms (default 500-3000), all at once:
 *   (a) writers (--writers, default 8) with writeConcern {w: 1, j: true} and
 *       retryWrites off: 6 of them insertOne / insertMany (2-20 documents) /
 *       updateOne ($set) / replaceOne / deleteOne on their own documents of
 *       `acked`, 2 of them update `idx` documents (the field the index builds
 *       cover). Every document carries v (a per-document version that each
 *       write raises by one) and h = "<_id>#<v>" (and in `idx`, k and s
 *       derived from _id and v), so a torn write shows. Each document has one
 *       writer, which sends one write at a time, so a document has at most
 *       one write in flight when the server dies: after the restart it must
 *       be in its last acknowledged state or in the in-flight one.
 *   (b) a mass expiry: --due-docs (default 30000) documents in `ttl`, `at`
 *       spread from 1 s ago to the end of the window (insertMany of 1,000,
 *       w: 1), so the TTL monitor is deleting throughout; and between those
 *       batches --future-docs (default 300) documents due later (half in
 *       5-120 s, half in 1 hour to 1 year), inserted with j: true in batches
 *       of 20 and recorded when acknowledged.
 *   (c) index builds: createIndexes / dropIndexes of {k: 1} and
 *       {s: 1, k: -1} on `idx` in turn, with writeConcern j: true, so some
 *       build is usually running when the server dies. DDL is synced before
 *       it is acknowledged (docs/ARCHITECTURE.md), so the set of indexes
 *       after the restart must be the last acknowledged one, or include the
 *       in-flight change.
 * Then SIGKILL, restart on the same dbpath and port, and the checks:
 *   1. every document of `acked` and `idx` is in its acknowledged state or
 *      its in-flight one (absent after an acknowledged delete), with h (k, s)
 *      consistent with v; no document that no write ever produced;
 *   2. every acknowledged future TTL document whose `at` is still after the
 *      moment the check's read returned is present, with its `at`;
 *   3. the index set of `idx` as in (c);
 *   4. validate (full: true; mayfly always does the full check of records and
 *      every index's entries) reports valid on every collection of every
 *      database;
 *   5. the server did not exit by itself, and every write error happened
 *      after the kill (an error before it is a violation too).
 * What was observed becomes the next cycle's acknowledged state. At the end
 * the server is stopped with SIGTERM and must exit 0.
 *
 * Output: one line per cycle: the window; writes acknowledged in it (by
 * kind) and index DDL; what was in flight at the kill (documents, and the
 * index build or drop if any); due documents inserted and the server's
 * metrics.ttl.deletedDocuments (since that server's start, so it includes
 * the previous cycle's leftovers); the slowest acknowledged operation and
 * the oldest one in flight at the kill; the restart time (SIGKILL to
 * accepting connections); what the check read; ok or the violations. Then
 * a summary: cycles, writes acknowledged, violations, restart p50/max.
 * Client operations that neither finish nor fail 15 s after the kill are
 * abandoned and named in the cycle's line (the Node driver can wait forever
 * for 'drain' on a socket destroyed mid-write); they are not violations.
 *
 * Randomness: one seed (--seed) drives each cycle's window length and every
 * task's choices, each from its own stream derived from (seed, cycle, task),
 * so the same seed gives the same windows and the same sequence of choices;
 * how far each task gets inside a window still depends on timing.
 *
 * Logs: each server incarnation's stderr goes to <logdir>/server-NNN.log
 * (incarnation 1 ran cycle 1's window, incarnation n+1 is the restart after
 * cycle n's kill and runs cycle n+1's window). The per-cycle lines go to
 * stdout and <logdir>/cycles.log. On a violation, <logdir>/violation-cycle-N.json
 * holds the seed, the cycle, every finding and the two server logs that
 * matter; the logdir and dbpath are kept. Without violations both are removed
 * unless --keep (a --logdir given is always kept).
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { MongoClient } = require('mongodb');
const { freePort, tryConnect } = require('../tests/clients/harness');

const REPO_ROOT = path.resolve(__dirname, '..');
const DB = 'crashloop';
const START_DEADLINE_MS = 120000;   /* recovery after many crashes, in the ASan build */
const CHECK_DEADLINE_MS = 300000;
const INDEX_SPECS = [
  { name: 'k_1', key: { k: 1 } },
  { name: 's_1_k_-1', key: { s: 1, k: -1 } },
];
const J = { w: 1, j: true };

/* ---------- seeded randomness ---------- */

function mix32(a) {
  a = Math.imul(a ^ (a >>> 16), 0x85ebca6b);
  a = Math.imul(a ^ (a >>> 13), 0xc2b2ae35);
  return (a ^ (a >>> 16)) >>> 0;
}

/* mulberry32 over a state derived from (seed, cycle, stream). */
function rngFor(seed, cycle, stream) {
  let s = mix32(mix32(mix32(seed >>> 0) ^ (cycle * 0x9e3779b1)) ^ (stream * 0x85ebca77));
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));   /* inclusive */
  next.pick = (arr) => arr[Math.floor(next() * arr.length)];
  return next;
}

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

/* Resolves with promise's value, or with onTimeout after ms; leaves no timer behind. */
function within(promise, ms, onTimeout) {
  let timer;
  return Promise.race([promise, new Promise((r) => { timer = setTimeout(() => r(onTimeout), ms); })])
    .finally(() => clearTimeout(timer));
}

/* ---------- the server ---------- */


function fileTail(file, n) {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-n).join('\n');
  } catch (_) {
    return '';
  }
}

class Server {
  constructor({ binary, dbpath, logdir, args = [] }) {
    this.binary = binary;
    this.dbpath = dbpath;
    this.logdir = logdir;
    this.args = args;
    this.port = null;
    this.proc = null;
    this.exitInfo = null;
    this.expecting = false;
    this.incarnation = 0;
    this.logFile = null;
    this.unexpected = [];   /* {incarnation, code, signal} of exits nobody asked for */
  }

  get uri() {
    return `mongodb://127.0.0.1:${this.port}/?directConnection=true&serverSelectionTimeoutMS=5000&retryWrites=false&retryReads=false`;
  }

  async start() {
    if (!fs.existsSync(this.binary)) throw new Error(`mayflyd binary not found at ${this.binary} (set MAYFLYD)`);
    for (let attempt = 0; ; attempt++) {
      if (this.port === null) this.port = await freePort();
      this.incarnation += 1;
      this.logFile = path.join(this.logdir, `server-${String(this.incarnation).padStart(3, '0')}.log`);
      const fd = fs.openSync(this.logFile, 'w');
      const t0 = Date.now();
      const proc = spawn(this.binary, ['--port', String(this.port), '--bind_ip', '127.0.0.1',
        '--dbpath', this.dbpath, ...this.args], {
        stdio: ['ignore', fd, fd],
        env: { ...process.env, ASAN_OPTIONS: process.env.ASAN_OPTIONS || 'detect_leaks=1' },
      });
      fs.closeSync(fd);
      this.proc = proc;
      this.exitInfo = null;
      this.expecting = false;
      const inc = this.incarnation;
      proc.on('exit', (code, signal) => {
        if (this.proc === proc) this.exitInfo = { code, signal };
        if (!this.expecting || this.proc !== proc) this.unexpected.push({ incarnation: inc, code, signal });
      });
      for (;;) {
        if (this.exitInfo) break;
        if (await tryConnect(this.port)) return Date.now() - t0;
        if (Date.now() - t0 > START_DEADLINE_MS) {
          await this.kill9();
          throw new Error(`mayflyd did not accept connections on port ${this.port} within ` +
            `${START_DEADLINE_MS} ms; log ${this.logFile}:\n${fileTail(this.logFile, 40)}`);
        }
        await sleep(20);
      }
      /* It exited during start-up: a port someone else took is retried on a new port. */
      this.unexpected.pop();
      const tail = fileTail(this.logFile, 40);
      if (attempt < 3 && /address already in use|EADDRINUSE/i.test(tail)) {
        this.port = null;
        continue;
      }
      throw new Error(`mayflyd exited during start-up (${JSON.stringify(this.exitInfo)}); ` +
        `log ${this.logFile}:\n${tail}`);
    }
  }

  waitExit(ms) {
    return new Promise((resolve) => {
      if (!this.proc || this.exitInfo) return resolve(this.exitInfo);
      const t = setTimeout(() => resolve(null), ms);
      this.proc.once('exit', () => { clearTimeout(t); setImmediate(() => resolve(this.exitInfo)); });
    });
  }

  async kill9() {
    if (!this.proc || this.exitInfo) return this.exitInfo;
    this.expecting = true;
    this.proc.kill('SIGKILL');
    return this.waitExit(30000);
  }

  /* SIGTERM; {code, signal, forced} (forced: it needed a SIGKILL after 60 s). */
  async stop() {
    if (!this.proc || this.exitInfo) return this.exitInfo;
    this.expecting = true;
    this.proc.kill('SIGTERM');
    const info = await this.waitExit(60000);
    if (info) return info;
    this.proc.kill('SIGKILL');
    return { ...(await this.waitExit(10000)), forced: true };
  }

  pidStatus() {
    try {
      const st = fs.readFileSync(`/proc/${this.proc.pid}/status`, 'utf8');
      const m = /VmRSS:\s+(\d+)/.exec(st);
      return m ? Number(m[1]) : null;
    } catch (_) {
      return null;
    }
  }
}

/* ---------- the model of acknowledged state ---------- */

/*
 * One entry per document ever written to `acked` or `idx`:
 *   ack: the acknowledged version v, or null (absent: deleted, or never
 *        acknowledged);
 *   pend: undefined, or the version (null for a delete) of the write in
 *        flight when the server died (or that failed).
 * A document of `acked` has _id "<writer>-<n>"; of `idx`, an integer.
 */
function docKey(coll, id) { return `${coll}|${id}`; }

function idxFields(id, v) {
  return { k: (id * 7919 + v * 104729) % 1000, s: `s${(id + v) % 37}` };
}

function makeDoc(coll, id, v, w) {
  if (coll === 'idx') return { _id: id, v, h: `${id}#${v}`, ...idxFields(id, v), w };
  return { _id: id, v, h: `${id}#${v}`, w, pad: 'x'.repeat((v * 37 + id.length * 11) % 240) };
}

/* Why doc (or its absence: doc null) does not match version v (null: absent), or null if it does. */
function mismatch(coll, id, doc, v) {
  if (v === null) return doc ? `present with v=${doc.v}` : null;
  if (!doc) return 'missing';
  const want = makeDoc(coll, id, v, doc.w);
  for (const [f, val] of Object.entries(want)) {
    if (doc[f] !== val) return `field ${f} is ${JSON.stringify(doc[f])}, expected ${JSON.stringify(val)} (v=${v})`;
  }
  if (Object.keys(doc).length !== Object.keys(want).length) return `unexpected fields ${Object.keys(doc).join(',')}`;
  return null;
}

/* ---------- one cycle's tasks ---------- */

class CycleState {
  constructor(cycle, rngSeed) {
    this.cycle = cycle;
    this.seed = rngSeed;
    this.killed = false;
    this.errorsBeforeKill = [];
    this.errorsAfterKill = 0;
    this.acks = { insert: 0, update: 0, replace: 0, delete: 0, idxUpdate: 0, future: 0, ddl: 0 };
    this.inflightAtKill = 0;
    this.dueInserted = 0;
    this.futureSent = 0;
    this.ddlInflight = null;
    this.ttlDeletedSeen = null;
    this.inflight = new Map();                 /* task -> {op, since} */
    this.slowest = { task: null, op: null, ms: 0 };   /* the slowest operation that completed before the kill */
  }

  fail(task, err) {
    if (this.killed) { this.errorsAfterKill += 1; return; }
    this.errorsBeforeKill.push(`${task}: ${err && (err.codeName || err.code || err.name)}: ${err && err.message}`);
  }

  get ackedWrites() {
    const a = this.acks;
    return a.insert + a.update + a.replace + a.delete + a.idxUpdate + a.future;
  }
}

/* Runs one client operation of task, keeping what is in flight and the slowest one. */
async function timed(st, task, op, fn) {
  const since = Date.now();
  st.inflight.set(task, { op, since });
  try {
    return await fn();
  } finally {
    st.inflight.delete(task);
    const ms = Date.now() - since;
    if (!st.killed && ms > st.slowest.ms) st.slowest = { task, op, ms };
  }
}

/* A writer on `acked`: writes to the documents it owns, one at a time. */
async function accWriter(ctx, st, w, rng) {
  const coll = ctx.db.collection('acked');
  const owned = ctx.owned[w];   /* ids this writer created, in every cycle */
  const model = ctx.model;
  const pickPresent = () => {
    for (let tries = 0; tries < 8 && owned.length; tries++) {
      const id = rng.pick(owned);
      const e = model.get(docKey('acked', id));
      if (e.ack !== null && e.pend === undefined) return [id, e];
    }
    return [null, null];
  };
  while (!st.killed) {
    const r = rng();
    try {
      if (r < 0.30 || owned.length < 5) {
        const id = `${w}-${ctx.nextId[w]++}`;
        const e = { ack: null, pend: 1 };
        model.set(docKey('acked', id), e);
        owned.push(id);
        await timed(st, `writer ${w}`, 'insertOne', () => coll.insertOne(makeDoc('acked', id, 1, w), { writeConcern: J }));
        e.ack = 1; e.pend = undefined; st.acks.insert += 1;
      } else if (r < 0.42) {
        const n = rng.int(2, 20);
        const docs = [];
        const es = [];
        for (let i = 0; i < n; i++) {
          const id = `${w}-${ctx.nextId[w]++}`;
          const e = { ack: null, pend: 1 };
          model.set(docKey('acked', id), e);
          owned.push(id);
          docs.push(makeDoc('acked', id, 1, w));
          es.push(e);
        }
        await timed(st, `writer ${w}`, `insertMany(${n})`, () => coll.insertMany(docs, { writeConcern: J, ordered: true }));
        for (const e of es) { e.ack = 1; e.pend = undefined; }
        st.acks.insert += n;
      } else {
        const [id, e] = pickPresent();
        if (id === null) continue;
        if (r < 0.78) {
          const v = e.ack + 1;
          e.pend = v;
          const d = makeDoc('acked', id, v, w);
          const res = await timed(st, `writer ${w}`, 'updateOne', () => coll.updateOne({ _id: id, v: e.ack },
            { $set: { v, h: d.h, pad: d.pad } }, { writeConcern: J }));
          if (res.modifiedCount !== 1) throw new Error(`updateOne ${id} v${e.ack}->${v} matched ${res.matchedCount}`);
          e.ack = v; e.pend = undefined; st.acks.update += 1;
        } else if (r < 0.90) {
          const v = e.ack + 1;
          e.pend = v;
          const d = makeDoc('acked', id, v, w);
          delete d._id;
          const res = await timed(st, `writer ${w}`, 'replaceOne', () => coll.replaceOne({ _id: id }, d, { writeConcern: J }));
          if (res.modifiedCount !== 1) throw new Error(`replaceOne ${id} matched ${res.matchedCount}`);
          e.ack = v; e.pend = undefined; st.acks.replace += 1;
        } else {
          e.pend = null;
          const res = await timed(st, `writer ${w}`, 'deleteOne', () => coll.deleteOne({ _id: id }, { writeConcern: J }));
          if (res.deletedCount !== 1) throw new Error(`deleteOne ${id} deleted ${res.deletedCount}`);
          e.ack = null; e.pend = undefined; st.acks.delete += 1;
        }
      }
    } catch (err) {
      st.fail(`writer ${w}`, err);
      return;
    }
  }
}

/* A writer on `idx`: updates the documents whose _id % nIdx == which. */
async function idxWriter(ctx, st, which, nIdx, rng) {
  const coll = ctx.db.collection('idx');
  while (!st.killed) {
    let id = rng.int(0, ctx.indexDocs - 1);
    id -= id % nIdx; id += which;
    if (id >= ctx.indexDocs) continue;
    const e = ctx.model.get(docKey('idx', id));
    if (e.ack === null || e.pend !== undefined) continue;
    const v = e.ack + 1;
    e.pend = v;
    const d = makeDoc('idx', id, v, e.w);
    try {
      const res = await timed(st, `idx writer ${which}`, 'updateOne', () => coll.updateOne({ _id: id },
        { $set: { v, h: d.h, k: d.k, s: d.s } }, { writeConcern: J }));
      if (res.modifiedCount !== 1) throw new Error(`idx updateOne ${id} matched ${res.matchedCount}`);
      e.ack = v; e.pend = undefined; st.acks.idxUpdate += 1;
    } catch (err) {
      st.fail(`idx writer ${which}`, err);
      return;
    }
  }
}

/* The mass expiry and the documents due later. */
async function ttlTask(ctx, st, rng, windowMs) {
  const coll = ctx.db.collection('ttl');
  const t0 = Date.now();
  const from = t0 - 1000;
  const span = windowMs + 1000;
  let dueLeft = ctx.dueDocs;
  let futureLeft = ctx.futureDocs;
  let n = 0;
  try {
    while (!st.killed && (dueLeft > 0 || futureLeft > 0)) {
      if (dueLeft > 0) {
        const b = Math.min(1000, dueLeft);
        const docs = [];
        for (let i = 0; i < b; i++) {
          docs.push({ _id: `d${st.cycle}-${n++}`, kind: 'due', at: new Date(from + Math.floor(rng() * span)) });
        }
        await timed(st, 'ttl', `insertMany(${b} due)`, () => coll.insertMany(docs, { writeConcern: { w: 1 }, ordered: false }));
        dueLeft -= b;
        st.dueInserted += b;
      }
      if (st.killed || futureLeft <= 0) continue;
      const b = Math.min(20, futureLeft);
      const docs = [];
      const now = Date.now();
      for (let i = 0; i < b; i++) {
        const near = rng() < 0.5;
        const at = near ? now + rng.int(5000, 120000) : now + rng.int(3600e3, 365 * 86400e3);
        docs.push({ _id: `f${st.cycle}-${n++}`, kind: 'future', at: new Date(at) });
      }
      for (const d of docs) ctx.futurePending.set(d._id, d.at.getTime());
      st.futureSent += b;
      await timed(st, 'ttl', `insertMany(${b} future)`, () => coll.insertMany(docs, { writeConcern: J, ordered: true }));
      for (const d of docs) { ctx.futurePending.delete(d._id); ctx.future.set(d._id, d.at.getTime()); }
      st.acks.future += b;
      futureLeft -= b;
      if (dueLeft <= 0) await sleep(rng.int(5, 40));
    }
  } catch (err) {
    st.fail('ttl', err);
  }
}

/* createIndexes / dropIndexes on `idx`, in turn. */
async function indexTask(ctx, st, rng) {
  const db = ctx.db;
  try {
    while (!st.killed) {
      const spec = rng.pick(INDEX_SPECS);
      const exists = ctx.indexes.has(spec.name);
      st.ddlInflight = { op: exists ? 'drop' : 'create', name: spec.name };
      if (exists) {
        await timed(st, 'index', `dropIndexes ${spec.name}`, () => db.command({ dropIndexes: 'idx', index: spec.name, writeConcern: J }));
        ctx.indexes.delete(spec.name);
      } else {
        await timed(st, 'index', `createIndexes ${spec.name}`, () => db.command({ createIndexes: 'idx',
          indexes: [{ key: spec.key, name: spec.name }], writeConcern: J }));
        ctx.indexes.add(spec.name);
      }
      st.ddlInflight = null;
      st.acks.ddl += 1;
      await sleep(rng.int(0, 30));
    }
  } catch (err) {
    st.fail('index', err);
  }
}

/* Samples serverStatus' TTL counter while the window runs (informational). */
async function statusTask(ctx, st) {
  while (!st.killed) {
    try {
      const s = await timed(st, 'status', 'serverStatus', () => ctx.db.admin().command({ serverStatus: 1 }));
      const t = s.metrics && s.metrics.ttl;
      if (t && !st.killed) st.ttlDeletedSeen = Number(t.deletedDocuments);
    } catch (_) { /* the server may be gone */ }
    await sleep(100);
  }
}

/* ---------- the checks ---------- */

async function checkAfterRestart(ctx, st, violations) {
  const client = new MongoClient(ctx.server.uri, { maxPoolSize: 4 });
  await client.connect();
  const db = client.db(DB);
  const found = { docs: 0, futures: 0, collections: 0, dueLeft: 0 };
  const add = (kind, detail) => violations.push({ cycle: st.cycle, kind, detail });
  try {
    /* 1. documents of `acked` and `idx` */
    for (const coll of ['acked', 'idx']) {
      const docs = await db.collection(coll).find({}).toArray();
      const seen = new Set();
      for (const d of docs) {
        const id = d._id;
        seen.add(docKey(coll, id));
        const e = ctx.model.get(docKey(coll, id));
        if (!e) { add('phantom document', `${coll} ${JSON.stringify(id)} was never written: ${JSON.stringify(d)}`); continue; }
        const okAck = mismatch(coll, id, d, e.ack);
        const okPend = e.pend === undefined ? okAck : mismatch(coll, id, d, e.pend);
        if (okAck !== null && okPend !== null) {
          add('wrong document', `${coll} ${JSON.stringify(id)}: acknowledged v=${e.ack}` +
            `${e.pend !== undefined ? `, in flight ${e.pend === null ? 'delete' : `v=${e.pend}`}` : ''}: ` +
            `${okAck}; found ${JSON.stringify(d)}`);
        }
        e.ack = okAck === null ? e.ack : (okPend === null ? e.pend : d.v);
        e.pend = undefined;
      }
      found.docs += docs.length;
      for (const [key, e] of ctx.model) {
        if (!key.startsWith(`${coll}|`) || seen.has(key)) continue;
        if (e.ack !== null && e.pend !== null) {
          add('lost write', `${coll} ${key.slice(coll.length + 1)}: acknowledged v=${e.ack} ` +
            `(j: true)${e.pend !== undefined ? `, in flight v=${e.pend}` : ''}, missing after restart`);
        }
        e.ack = null;
        e.pend = undefined;
      }
    }

    /* 2. documents due later */
    const fut = await db.collection('ttl').find({ kind: 'future' }, { projection: { at: 1 } }).toArray();
    const tAfter = Date.now();
    const present = new Map(fut.map((d) => [d._id, d.at instanceof Date ? d.at.getTime() : NaN]));
    for (const [id, at] of ctx.future) {
      if (at <= tAfter) { ctx.future.delete(id); continue; }   /* due now: may be gone */
      if (!present.has(id)) {
        add('expired early', `ttl ${id} (at ${new Date(at).toISOString()}, ${((at - tAfter) / 1000).toFixed(1)} s ` +
          'after the check) was acknowledged with j: true and is gone');
        ctx.future.delete(id);
      } else if (present.get(id) !== at) {
        add('wrong document', `ttl ${id}: at ${new Date(present.get(id)).toISOString()}, acknowledged ${new Date(at).toISOString()}`);
      }
    }
    for (const [id, at] of ctx.futurePending) {   /* an in-flight batch that made it: tracked from now on */
      if (present.has(id) && at > tAfter) ctx.future.set(id, at);
    }
    ctx.futurePending.clear();
    found.futures = ctx.future.size;
    found.dueLeft = await db.collection('ttl').countDocuments({ kind: 'due' });

    /* 3. the index set of `idx` */
    const names = new Set((await db.collection('idx').listIndexes().toArray()).map((i) => i.name));
    for (const spec of INDEX_SPECS) {
      const want = ctx.indexes.has(spec.name);
      const flight = st.ddlInflight && st.ddlInflight.name === spec.name;
      if (names.has(spec.name) !== want && !flight) {
        add('lost DDL', `index ${spec.name} is ${names.has(spec.name) ? 'present' : 'absent'} after the restart; ` +
          `the last acknowledged (j: true) ${want ? 'createIndexes' : 'dropIndexes'} said otherwise`);
      }
      if (names.has(spec.name)) ctx.indexes.add(spec.name); else ctx.indexes.delete(spec.name);
    }
    if (!names.has('_id_')) add('lost DDL', 'idx has no _id_ index');
    if (!(await db.collection('ttl').listIndexes().toArray()).some((i) => i.name === 'at_1' && i.expireAfterSeconds === 0)) {
      add('lost DDL', 'the TTL index at_1 of ttl is gone or changed');
    }

    /* 4. validate every collection of every database */
    const dbs = (await client.db('admin').command({ listDatabases: 1, nameOnly: true })).databases;
    for (const { name: dbName } of dbs) {
      const d = client.db(dbName);
      const colls = await d.listCollections({}, { nameOnly: false }).toArray();
      for (const c of colls) {
        if (c.type === 'view') continue;
        let v;
        try {
          v = await d.command({ validate: c.name, full: true });
        } catch (err) {
          add('validate failed', `${dbName}.${c.name}: ${err.codeName || err.code}: ${err.message}`);
          continue;
        }
        found.collections += 1;
        if (v.valid !== true) {
          add('validate invalid', `${dbName}.${c.name}: errors ${JSON.stringify(v.errors)} warnings ` +
            `${JSON.stringify(v.warnings)} missing ${v.missingIndexEntriesCount} extra ${v.extraIndexEntriesCount} ` +
            `corrupt ${v.nInvalidDocuments}`);
        }
      }
    }
  } finally {
    await client.close(true).catch(() => {});
  }
  return found;
}

/* ---------- the loop ---------- */

async function setup(ctx) {
  const client = new MongoClient(ctx.server.uri, { maxPoolSize: 4 });
  await client.connect();
  try {
    const db = client.db(DB);
    await db.dropDatabase();
    await db.createCollection('acked', { writeConcern: J });
    await db.collection('ttl').createIndex({ at: 1 }, { expireAfterSeconds: 0, writeConcern: J });
    const coll = db.collection('idx');
    for (let i = 0; i < ctx.indexDocs; i += 1000) {
      const docs = [];
      for (let id = i; id < Math.min(ctx.indexDocs, i + 1000); id++) docs.push(makeDoc('idx', id, 0, -1));
      await coll.insertMany(docs, { writeConcern: J });
      for (const d of docs) ctx.model.set(docKey('idx', d._id), { ack: 0, pend: undefined, w: -1 });
    }
    return ctx.indexDocs;
  } finally {
    await client.close(true);
  }
}

function parseSeed(s) {
  if (s === undefined || s === null || s === '') return null;
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new Error(`bad seed ${s} (an integer 0..4294967295)`);
  return n;
}

/*
 * Runs the crash loop. opts: cycles (100), seed (random), binary ($MAYFLYD or
 * build/mayflyd), writers (8), dueDocs (30000), futureDocs (300), indexDocs
 * (5000), minWindow (500), maxWindow (3000) ms, logdir (a new temp dir), keep
 * (false), log (a function given each output line; console.log).
 * Resolves with {seed, cycles, cyclesRun, ackedWrites, ackedDdl, violations,
 * logdir, dbpath, elapsedMs, finalExit}; violations is a list of
 * {cycle, kind, detail}. Rejects only when the loop cannot run at all.
 */
async function runCrashLoop(opts = {}) {
  const cycles = opts.cycles || 100;
  const seed = parseSeed(opts.seed) ?? (Math.floor(Math.random() * 0xffffffff) >>> 0);
  const bin = opts.binary || process.env.MAYFLYD || 'build/mayflyd';
  const binary = path.isAbsolute(bin) ? bin : path.join(REPO_ROOT, bin);
  const log = opts.log || ((l) => console.log(l));
  const nWriters = Math.max(2, opts.writers || 8);
  const nIdx = Math.max(1, Math.floor(nWriters / 4));
  const nAcc = nWriters - nIdx;
  const minWindow = opts.minWindow || 500;
  const maxWindow = Math.max(minWindow, opts.maxWindow || 3000);
  const ownLogdir = !opts.logdir;
  const logdir = opts.logdir || fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-crashloop-logs-'));
  fs.mkdirSync(logdir, { recursive: true });
  const dbpath = fs.mkdtempSync(path.join(os.tmpdir(), 'mayfly-crashloop-db-'));
  const cyclesLog = fs.createWriteStream(path.join(logdir, 'cycles.log'));
  const out = (l) => { log(l); cyclesLog.write(l + '\n'); };
  const server = new Server({ binary, dbpath, logdir, args: opts.serverArgs || [] });
  const ctx = {
    server, model: new Map(), owned: Array.from({ length: nAcc }, () => []),
    nextId: new Array(nAcc).fill(0), future: new Map(), futurePending: new Map(), indexes: new Set(),
    dueDocs: opts.dueDocs ?? 30000, futureDocs: opts.futureDocs ?? 300, indexDocs: opts.indexDocs || 5000,
    db: null,
  };
  const violations = [];
  const summary = { seed, cycles, cyclesRun: 0, ackedWrites: 0, ackedDdl: 0, violations, logdir, dbpath,
    binary, elapsedMs: 0, finalExit: null, restartMs: [], slowestAckMs: 0, stuckClientOps: 0 };
  const t0 = Date.now();
  out(`crashloop: ${cycles} cycles, seed ${seed}, server ${binary}, dbpath ${dbpath}, logs ${logdir}`);
  out(`crashloop: ${nAcc} writers on acked + ${nIdx} on idx (j: true), ${ctx.dueDocs} due + ` +
    `${ctx.futureDocs} future TTL docs per cycle, ${ctx.indexDocs} idx docs, window ${minWindow}-${maxWindow} ms`);
  try {
    await server.start();
    summary.ackedWrites += await setup(ctx);
  } catch (err) {
    await server.kill9().catch(() => {});
    cyclesLog.end();
    throw err;
  }

  for (let cycle = 1; cycle <= cycles; cycle++) {
    const st = new CycleState(cycle, seed);
    const windowMs = rngFor(seed, cycle, 0).int(minWindow, maxWindow);
    const windowInc = server.incarnation;
    const nv = violations.length;
    let line = `cycle ${String(cycle).padStart(3)}/${cycles} window ${String(windowMs).padStart(4)} ms`;
    let restartMs = null;
    let found = null;
    try {
      const client = new MongoClient(server.uri, { maxPoolSize: nWriters + 6, minPoolSize: 0 });
      await client.connect();
      ctx.db = client.db(DB);
      /* The index set the previous check saw is the starting point (also for cycle 1). */
      const names = new Set((await ctx.db.collection('idx').listIndexes().toArray()).map((i) => i.name));
      ctx.indexes = new Set(INDEX_SPECS.map((s) => s.name).filter((n) => names.has(n)));
      const tasks = [];
      for (let w = 0; w < nAcc; w++) tasks.push(accWriter(ctx, st, w, rngFor(seed, cycle, 10 + w)));
      for (let w = 0; w < nIdx; w++) tasks.push(idxWriter(ctx, st, w, nIdx, rngFor(seed, cycle, 100 + w)));
      tasks.push(ttlTask(ctx, st, rngFor(seed, cycle, 1), windowMs));
      tasks.push(indexTask(ctx, st, rngFor(seed, cycle, 2)));
      tasks.push(statusTask(ctx, st));
      await sleep(windowMs);
      if (server.exitInfo) {
        violations.push({ cycle, kind: 'server exited', detail: `mayflyd exited by itself during the window: ` +
          `${JSON.stringify(server.exitInfo)}; log ${server.logFile}:\n${fileTail(server.logFile, 30)}` });
      }
      st.killed = true;
      for (const e of ctx.model.values()) if (e.pend !== undefined) st.inflightAtKill += 1;
      const ddlAtKill = st.ddlInflight ? `${st.ddlInflight.op} ${st.ddlInflight.name}` : 'none';
      const killAt = Date.now();
      let oldest = null;
      for (const [task, f] of st.inflight) if (!oldest || f.since < oldest.since) oldest = { task, ...f };
      await server.kill9();
      /*
       * The tasks end with network errors. The Node driver can wait forever
       * for a socket's 'drain' when the server dies while a large message is
       * still being written (a destroyed socket emits neither 'drain' nor
       * 'error'); such an operation is abandoned after 15 s: it can only
       * fail, and a failure after the kill changes nothing.
       */
      const settled = await within(Promise.all(tasks).then(() => true), 15000, false);
      const stuck = settled ? [] : [...st.inflight].map(([task, f]) => `${task} ${f.op}`);
      await within(client.close(true).catch(() => {}), 5000);
      for (const e of st.errorsBeforeKill) violations.push({ cycle, kind: 'error before the kill', detail: e });
      summary.ackedWrites += st.ackedWrites;
      summary.ackedDdl += st.acks.ddl;
      line += `: acked ${st.ackedWrites} (ins ${st.acks.insert} upd ${st.acks.update + st.acks.replace} ` +
        `del ${st.acks.delete} idx ${st.acks.idxUpdate} future ${st.acks.future}) ddl ${st.acks.ddl}, ` +
        `in flight ${st.inflightAtKill} + ddl ${ddlAtKill}, due ${st.dueInserted} ` +
        `(TTL-deleted by this server since its start ${st.ttlDeletedSeen ?? '?'}); slowest ack ` +
        `${st.slowest.ms} ms (${st.slowest.task} ${st.slowest.op}), oldest in flight at kill ` +
        `${oldest ? `${killAt - oldest.since} ms (${oldest.task} ${oldest.op})` : 'none'}` +
        `${stuck.length ? `, client ops stuck after the kill: ${stuck.join(', ')}` : ''}`;
      if (stuck.length) summary.stuckClientOps += stuck.length;
      summary.slowestAckMs = Math.max(summary.slowestAckMs, st.slowest.ms);

      restartMs = await server.start();
      summary.restartMs.push(restartMs);
      let timer;
      found = await Promise.race([
        checkAfterRestart(ctx, st, violations),
        new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`the check took over ${CHECK_DEADLINE_MS} ms`)), CHECK_DEADLINE_MS); }),
      ]).finally(() => clearTimeout(timer));
      line += `; restart ${restartMs} ms; check: ${found.docs} docs, ${found.futures} future, ` +
        `${found.dueLeft} due left, ${found.collections} colls valid`;
      for (const u of server.unexpected.splice(0)) {
        violations.push({ cycle, kind: 'server exited', detail: `incarnation ${u.incarnation} exited by itself: ` +
          `code ${u.code} signal ${u.signal}` });
      }
    } catch (err) {
      violations.push({ cycle, kind: 'cycle failed', detail: `${err.stack || err}` });
    }
    summary.cyclesRun = cycle;
    const mine = violations.slice(nv);
    line += mine.length ? ` -> ${mine.length} VIOLATION(S)` : ' -> ok';
    out(line);
    if (mine.length) {
      for (const v of mine.slice(0, 20)) out(`  violation: ${v.kind}: ${v.detail.split('\n')[0]}`);
      if (mine.length > 20) out(`  ... ${mine.length - 20} more in the report`);
      const rep = path.join(logdir, `violation-cycle-${cycle}.json`);
      fs.writeFileSync(rep, JSON.stringify({
        seed, cycle, windowMs, rerun: `node bench/crashloop.js --cycles ${cycles} --seed ${seed}`,
        serverLogWindow: path.join(logdir, `server-${String(windowInc).padStart(3, '0')}.log`),
        serverLogRestart: server.logFile, dbpath, violations: mine,
      }, null, 2));
      out(`  report: ${rep}`);
    }
    /* A server that is not running (start failed, died during the check) ends the loop. */
    if (!server.proc || server.exitInfo) {
      try {
        await server.start();
      } catch (err) {
        violations.push({ cycle, kind: 'restart failed', detail: `${err.message}` });
        out(`  the server does not start any more: ${err.message.split('\n')[0]}; stopping`);
        break;
      }
    }
  }

  const fin = await server.stop();
  summary.finalExit = fin;
  if (!fin || fin.forced || fin.code !== 0) {
    violations.push({ cycle: summary.cyclesRun, kind: 'unclean shutdown',
      detail: `SIGTERM at the end: ${JSON.stringify(fin)}; log ${server.logFile}:\n${fileTail(server.logFile, 40)}` });
  }
  summary.elapsedMs = Date.now() - t0;
  const rs = summary.restartMs.slice().sort((a, b) => a - b);
  out(`crashloop summary: ${summary.cyclesRun} cycles, ${summary.ackedWrites} writes acknowledged with j: true ` +
    `(+ ${summary.ackedDdl} index DDL), ${violations.length} violations; restart p50 ${rs[rs.length >> 1] ?? '?'} ms ` +
    `max ${rs[rs.length - 1] ?? '?'} ms; slowest acknowledged operation ${summary.slowestAckMs} ms; ` +
    `${(summary.elapsedMs / 1000).toFixed(1)} s; seed ${seed}`);
  await new Promise((r) => cyclesLog.end(r));
  if (violations.length === 0 && !opts.keep) {
    fs.rmSync(dbpath, { recursive: true, force: true });
    if (ownLogdir) fs.rmSync(logdir, { recursive: true, force: true });
  } else {
    log(`crashloop: kept ${logdir} and ${dbpath}`);
  }
  return summary;
}

module.exports = { runCrashLoop, rngFor };

/* ---------- command line ---------- */

if (require.main === module) {
  const argv = process.argv.slice(2);
  const opts = { cycles: Number(process.env.CYCLES) || undefined, seed: process.env.SEED };
  const num = (flag, v) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) { console.error(`crashloop: bad value for ${flag}: ${v}`); process.exit(2); }
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => argv[++i];
    switch (a) {
      case '--cycles': opts.cycles = num(a, next()); break;
      case '--seed': opts.seed = next(); break;
      case '--writers': opts.writers = num(a, next()); break;
      case '--due-docs': opts.dueDocs = num(a, next()); break;
      case '--future-docs': opts.futureDocs = num(a, next()); break;
      case '--index-docs': opts.indexDocs = num(a, next()); break;
      case '--min-window': opts.minWindow = num(a, next()); break;
      case '--max-window': opts.maxWindow = num(a, next()); break;
      case '--logdir': opts.logdir = next(); break;
      case '--keep': opts.keep = true; break;
      default:
        if (/^\d+$/.test(a)) opts.cycles = Number(a);
        else { console.error(`crashloop: unknown argument ${a}`); process.exit(2); }
    }
  }
  runCrashLoop(opts).then((s) => {
    process.exit(s.violations.length ? 1 : 0);
  }, (err) => {
    console.error(`crashloop: ${err.stack || err}`);
    process.exit(2);
  });
}
