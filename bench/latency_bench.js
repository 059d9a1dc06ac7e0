'use strict';
/*
 * Request latency, connection scaling and ingest (issue 13, "performance
 * against peers"): mayfly against Redis, side by side in one run. Prints
 * figures only; it asserts no timing.
 *
 *   node bench/latency_bench.js [--rounds R] [--reqs N] [--secs S] [--docs D] [--ingest-rounds K]
 *                               [--only latency|scaling|ingest]
 *   (or bash bench/latency_bench.sh, which builds build/mayflyd first)
 *   MAYFLYD=path (default build/mayflyd, the release build), REDIS_SERVER=path
 *   (default redis-server on PATH), MAYFLYD_ARGS="--flag value ..." (extra
 *   mayflyd flags, e.g. to compare server parameters).
 *
 * Servers. Both are started by this script (bench/lib/common.js) on free
 * loopback ports with fresh temp directories (Redis: --save '' --appendonly
 * no, io-threads off, i.e. its defaults). Both are stopped and the directories removed at the end,
 * also on error or Ctrl-C. The header prints the machine (nproc, CPU model,
 * kernel, load average at start) and both servers' versions: the figures
 * mean little without them, and other work on the machine skews them.
 *
 * The client. Phases 1 and 2 use the same raw socket client for both servers
 * (node `net`, TCP_NODELAY, no driver): mayfly gets hand-built OP_MSG
 * messages (header + flagBits + one kind-0 body, as in tests/clients/
 * harness.js buildOpMsg), Redis RESP arrays. Every request buffer is built
 * before its timer starts (mayfly: one BSON template per operation, the _id
 * and requestId patched in place), and the timed part ends when the complete
 * reply has been framed (mayfly: the message length; Redis: one RESP reply),
 * so the client's own cost is small and alike for both. Replies are checked
 * outside the timed part (mayfly: ok: 1, no writeErrors, n / the found
 * document; Redis: no error reply, the expected value); a wrong reply aborts.
 *
 * Phase 1, request latency on one connection, one request outstanding at a
 * time, process.hrtime.bigint() around each request-response. Operations:
 *   ping                       vs PING
 *   find {_id: k}, limit 1,    vs GET k      (K = 10,000 documents / keys
 *     singleBatch                              loaded first, k uniformly random)
 *   insert of one small doc    vs SET k v    (w:1, the default; {_id, v: 32 B})
 * Per operation, alternating rounds of --reqs requests (default 1,000):
 * mayfly round, Redis round, --rounds times each (default 5), after one
 * unrecorded warm-up round each. Reported per operation: p50 / p90 / p99 in
 * µs over all rounds, the spread of the per-round p50s, the ratio
 * mayfly/Redis of the p50s beside the issue's target (ping <= 1.3x, find
 * <= 2x, insert <= 2.5x), and each server's CPU time per 1,000 requests:
 * utime+stime of the whole process from /proc/<pid>/stat (clock ticks, so
 * coarse: 10 ms a tick) and the sum of its threads' run times (ns) from
 * /proc/<pid>/task/<tid>/schedstat, both summed over the recorded rounds. The lead
 * uses the mayfly figure to compare changes to the network path.
 *
 * Phase 2, scaling. Throughput (ops/s) of a one-document insert and of find
 * by _id (Redis: SET and GET) with 1, 8 and 64 connections, each running a
 * closed loop (next request when the reply is in), --secs seconds per cell
 * (default 3) after a 0.5 s warm-up whose operations are not counted; p50 /
 * p99 latency per cell, and the ratio 8-conn/1-conn throughput (mayfly's
 * target: >= 1.6x on 2 cores). All connections live in this one Node
 * process, which shares the machine's cores with the server: on a 2-core box
 * the client's CPU caps the 8- and 64-connection cells of both servers, so
 * the Redis column is the reference for what the client can drive.
 *
 * Phase 3, ingest. mayfly: insert batches of 1,000 documents {_id: i, at:
 * Date, v: 'x' * 32} into a collection with one TTL index ({at: 1},
 * expireAfterSeconds 3600), 4 batches in flight, --docs documents (default
 * 1,000,000), three ways:
 *   - raw: the same kind of client as Redis's, on 4 raw sockets (one batch
 *     in flight on each): each batch is one OP_MSG whose documents are
 *     written straight into a Buffer, as the Redis loader writes its RESP
 *     text (the encoder is checked against js-bson's serialize at start);
 *   - raw on one connection: the same, one batch in flight. Its server CPU
 *     per document against the first's shows what concurrent inserts into
 *     one collection cost inside WiredTiger (docs/ARCHITECTURE.md, "Storage
 *     layout"); shown, not the target's loader;
 *   - driver: insertMany through the Node driver (its BSON serialisation
 *     costs the client ~2 µs per document, on the cores the server uses).
 * Redis: SET key val PX 3600000, pipelined 1,000 commands per write, 8
 * writes in flight (bench/ttl_bench.js's loader), into the Redis above and
 * into a second one that journals as mayfly does (--appendonly yes
 * --appendfsync everysec; shown, not the target's peer). --ingest-rounds
 * rounds (default 5), the five loaders alternating in each, then the storage
 * floor (build/storage_floor, bench/storage_floor.c: the same three inserts
 * per document through src/storage alone, the server's WiredTiger
 * configuration, one thread per core; the server's ceiling with this storage
 * layout on this machine, shown beside the loaders), a fresh
 * collection / FLUSHDB each time; the table shows each loader's median round and the
 * server's and the client's CPU per document in that round. The target
 * (ingest at least Redis's rate) compares the raw loader with Redis's.
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { MongoClient, BSON } = require('mongodb');
const { buildOpMsg } = require('../tests/clients/harness');
const { options, mayflydPath, mayflydExtraArgs, sleep, log, rng, inBatches, quantiles, cpuOf, machine, sourceRev,
  fmtInt, loadavg, printTable, procCpuSec, startMayflyd, startRedis, stopAll, runMain, connectLoopback, makeTempDir } = require('./lib/common');

/* ---------- arguments ---------- */

const { num: arg } = options();
const ROUNDS = Math.floor(arg('rounds', 5));
const REQS = Math.floor(arg('reqs', 1000));
const SECS = arg('secs', 3);
const DOCS = Math.floor(arg('docs', 1000000));
const INGEST_ROUNDS = Math.max(1, Math.floor(arg('ingest-rounds', 5)));
const ONLY = (() => {
  const i = process.argv.indexOf('--only');
  if (i < 0) return null;
  const v = process.argv[i + 1];
  if (!['latency', 'scaling', 'ingest'].includes(v)) throw new Error('--only takes latency, scaling or ingest');
  return v;
})();
const runs = (phase) => ONLY === null || ONLY === phase;

const K = 10000;                 /* documents / keys read by find / GET */
const CONNS = [1, 8, 64];
const WARM_MS = 500;
const BATCH = 1000;
const MONGO_INFLIGHT = 4;
const REDIS_INFLIGHT = 8;
const VALUE = 'x'.repeat(32);
const DB = 'latbench';
const TARGETS = { ping: 1.3, find: 2, insert: 2.5 };
const SCALE_TARGET = 1.6;
const OP_MSG = 2013;

const MAYFLYD = mayflydPath();

/* ---------- wire framing ---------- */

/* Length of the complete OP_MSG at the start of buf, or 0. */
function frameMongo(buf) {
  if (buf.length < 4) return 0;
  const len = buf.readInt32LE(0);
  return buf.length >= len ? len : 0;
}

/* End offset of one complete RESP reply at off, or -1 (simple types, bulk
 * strings and arrays of them: all this bench receives). */
function respEnd(buf, off) {
  if (off >= buf.length) return -1;
  const nl = buf.indexOf(10, off);
  if (nl < 0) return -1;
  const t = buf[off];
  if (t === 43 || t === 45 || t === 58) return nl + 1;           /* + - : */
  const n = Number(buf.toString('latin1', off + 1, nl - 1));
  if (t === 36) {                                                  /* $ */
    if (n < 0) return nl + 1;
    return nl + 1 + n + 2 <= buf.length ? nl + 1 + n + 2 : -1;
  }
  if (t === 42) {                                                  /* * */
    let o = nl + 1;
    for (let i = 0; i < n; i++) { o = respEnd(buf, o); if (o < 0) return -1; }
    return o;
  }
  throw new Error(`bad RESP type byte ${t}`);
}
function frameRedis(buf) { const e = respEnd(buf, 0); return e < 0 ? 0 : e; }

/* The value of a one-line or bulk-string RESP reply (checks only). */
function respValue(frame) {
  const t = frame[0];
  const nl = frame.indexOf(10);
  const line = frame.toString('latin1', 1, nl - 1);
  if (t === 45) return new Error(line);
  if (t === 36) return Number(line) < 0 ? null : frame.toString('latin1', nl + 1, frame.length - 2);
  return line;
}

function resp(args) {
  let s = `*${args.length}\r\n`;
  for (const a of args) {
    const v = String(a);
    s += `$${Buffer.byteLength(v)}\r\n${v}\r\n`;
  }
  return Buffer.from(s, 'latin1');
}

/*
 * A raw connection with one request outstanding at a time. send(buf, cb)
 * writes buf and calls cb(frame, ns) with the complete reply and the
 * request-response time in ns (hrtime.bigint taken just before the write and
 * as soon as the reply is framed, before anything else runs).
 */
class Conn {
  constructor(port, frame) {
    this.port = port;
    this.frame = frame;
    this.buf = null;
    this.cb = null;
    this.t0 = 0n;
    this.err = null;
  }

  async connect() {
    try {
      this.sock = await connectLoopback(this.port, (d) => this.onData(d), () => {
        if (this.cb) { const cb = this.cb; this.cb = null; cb(null, 0n, this.err || new Error('connection closed')); }
      });
    } catch (e) {
      this.err = e;
      throw e;
    }
    return this;
  }

  onData(d) {
    const buf = this.buf ? Buffer.concat([this.buf, d]) : d;
    const len = this.frame(buf);
    if (len === 0) { this.buf = buf; return; }
    const t1 = process.hrtime.bigint();
    this.buf = null;
    const cb = this.cb;
    this.cb = null;
    if (!cb || len !== buf.length) {
      this.err = new Error(cb ? 'unexpected bytes after a reply' : 'a reply nobody asked for');
      this.sock.destroy();
      if (cb) cb(null, 0n, this.err);
      return;
    }
    cb(buf, t1 - this.t0, null);
  }

  send(buf, cb) {
    this.cb = cb;
    this.t0 = process.hrtime.bigint();
    this.sock.write(buf);
  }

  /* Promise form: resolves {frame, ns}. */
  request(buf) {
    return new Promise((resolve, reject) => {
      this.send(buf, (frame, ns, err) => (err ? reject(err) : resolve({ frame, ns })));
    });
  }

  close() { this.sock.destroy(); }
}

/* ---------- mayfly requests: templates patched in place ---------- */

const MARK = 0x5a5a5a5a;   /* an int32 placeholder for the key, searched for in the template */

/* An OP_MSG for body with the int32 key slot located: make(k, reqId) returns a fresh buffer. */
function mongoTemplate(body) {
  const tpl = buildOpMsg(1, { ...body, $db: DB });
  const needle = Buffer.alloc(4);
  needle.writeInt32LE(MARK);
  const slots = [];
  for (let o = tpl.indexOf(needle, 16); o >= 0; o = tpl.indexOf(needle, o + 4)) slots.push(o);
  return (k, reqId) => {
    const b = Buffer.from(tpl);
    b.writeInt32LE(reqId, 4);
    for (const s of slots) b.writeInt32LE(k, s);
    return b;
  };
}

function mongoBody(frame) {
  if (frame.readInt32LE(12) !== OP_MSG || frame[20] !== 0) throw new Error('mayfly: not an OP_MSG reply');
  const len = frame.readInt32LE(21);
  return BSON.deserialize(frame.subarray(21, 21 + len), { promoteLongs: true });
}

/*
 * One benchmark operation on either server: req(k, seq) builds the request
 * for key k (seq: a request counter), check(frame, k) throws on a wrong reply.
 */
function mongoOps() {
  let reqId = 1;
  const ping = mongoTemplate({ ping: 1 });
  const find = mongoTemplate({ find: 'data', filter: { _id: MARK }, limit: 1, singleBatch: true });
  const insert = mongoTemplate({ insert: 'ins', documents: [{ _id: MARK, v: VALUE }] });
  const ok = (b) => { if (b.ok !== 1) throw new Error(`mayfly: error reply ${JSON.stringify(b)}`); return b; };
  return {
    ping: { req: () => ping(0, reqId++), check: (f) => ok(mongoBody(f)) },
    find: {
      req: (k) => find(k, reqId++),
      check: (f, k) => {
        const b = ok(mongoBody(f));
        const d = b.cursor && b.cursor.firstBatch && b.cursor.firstBatch[0];
        if (!d || d._id !== k) throw new Error(`mayfly: find _id ${k} returned ${JSON.stringify(b)}`);
      },
    },
    insert: {
      req: (k) => insert(k, reqId++),
      check: (f) => {
        const b = ok(mongoBody(f));
        if (b.n !== 1 || b.writeErrors) throw new Error(`mayfly: insert replied ${JSON.stringify(b)}`);
      },
    },
  };
}

function redisOps() {
  const val = (f) => { const v = respValue(f); if (v instanceof Error) throw new Error(`redis: ${v.message}`); return v; };
  return {
    ping: { req: () => resp(['PING']), check: (f) => { if (val(f) !== 'PONG') throw new Error('redis: PING'); } },
    find: { req: (k) => resp(['GET', `d:${k}`]), check: (f, k) => { if (val(f) !== VALUE) throw new Error(`redis: GET d:${k}`); } },
    insert: { req: (k) => resp(['SET', `i:${k}`, VALUE]), check: (f) => { if (val(f) !== 'OK') throw new Error('redis: SET'); } },
  };
}

/* Keys for insert: unique across the whole run (both phases). */
let nextInsertKey = 1;
const findRng = rng(4242);

function keysFor(op, n) {
  const ks = new Int32Array(n);
  for (let i = 0; i < n; i++) ks[i] = op === 'insert' ? nextInsertKey++ : op === 'find' ? Math.floor(findRng() * K) : 0;
  return ks;
}

/* ---------- phase 1: latency ---------- */

/* n requests of op on conn, one at a time; returns {us: latencies (µs), cpu: {ticksMs, schedNs}}. */
async function latencyRound(conn, op, keys, pid) {
  const reqs = Array.from(keys, (k) => op.req(k));
  const frames = new Array(keys.length);
  const us = new Float64Array(keys.length);
  const c0 = cpuOf(pid);
  for (let i = 0; i < reqs.length; i++) {
    const { frame, ns } = await conn.request(reqs[i]);
    us[i] = Number(ns) / 1000;
    frames[i] = frame;
  }
  const c1 = cpuOf(pid);
  for (let i = 0; i < frames.length; i++) op.check(frames[i], keys[i]);
  return { us, cpu: { ticksMs: c1.ticksMs - c0.ticksMs, schedNs: c1.schedNs - c0.schedNs } };
}

async function phaseLatency(sys) {
  const result = {};
  for (const name of ['ping', 'find', 'insert']) {
    const acc = {};
    for (const s of sys) {
      acc[s.name] = { us: [], roundP50: [], ticksMs: 0, schedNs: 0, n: 0 };
      await latencyRound(s.conn, s.ops[name], keysFor(name, REQS), s.pid);   /* warm-up */
    }
    for (let r = 0; r < ROUNDS; r++) {
      for (const s of sys) {
        const keys = keysFor(name, REQS);
        const { us, cpu } = await latencyRound(s.conn, s.ops[name], keys, s.pid);
        const a = acc[s.name];
        for (const x of us) a.us.push(x);
        a.roundP50.push(quantiles(us).p50);
        a.ticksMs += cpu.ticksMs;
        a.schedNs += cpu.schedNs;
        a.n += us.length;
      }
    }
    result[name] = {};
    for (const s of sys) {
      const a = acc[s.name];
      result[name][s.name] = {
        q: quantiles(a.us),
        p50lo: Math.min(...a.roundP50),
        p50hi: Math.max(...a.roundP50),
        cpuTicksMsPer1k: (a.ticksMs / a.n) * 1000,
        cpuSchedMsPer1k: (a.schedNs / 1e6 / a.n) * 1000,
      };
    }
    const m = result[name].mayfly.q.p50;
    const rd = result[name].redis.q.p50;
    log(`latency ${name}: mayfly p50 ${m.toFixed(1)} µs, redis p50 ${rd.toFixed(1)} µs (${(m / rd).toFixed(2)}x)`);
  }
  return result;
}

/* ---------- phase 2: scaling ---------- */

/*
 * nconn connections, each a closed loop of op for WARM_MS + SECS s; only the
 * operations completed after the warm-up count. Returns {opsPerSec, q}.
 */
async function scalingCell(sys, opName, nconn) {
  const conns = [];
  try {
    for (let i = 0; i < nconn; i++) conns.push(await new Conn(sys.port, sys.frame).connect());
    const op = sys.ops[opName];
    let measuring = false;
    let stop = false;
    let count = 0;
    let checked = 0;
    const lat = [];
    let failure = null;
    const loops = conns.map((c) => new Promise((resolve) => {
      const next = () => {
        if (stop || failure) { resolve(); return; }
        const kk = opName === 'insert' ? nextInsertKey++ : opName === 'find' ? Math.floor(findRng() * K) : 0;
        c.send(op.req(kk), (frame, ns, err) => {
          if (err) { failure = failure || err; resolve(); return; }
          if (measuring && !stop) { count++; lat.push(Number(ns) / 1000); }
          /* Check one reply in 16 (all of them would cost the client more than the server). */
          if ((checked++ & 15) === 0) {
            try { op.check(frame, kk); } catch (e) { failure = failure || e; }
          }
          next();
        });
      };
      next();
    }));
    await sleep(WARM_MS);
    measuring = true;
    const t0 = process.hrtime.bigint();
    const s0 = procCpuSec(sys.pid);
    const self0 = process.cpuUsage();
    await sleep(SECS * 1000);
    stop = true;
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const serverSec = procCpuSec(sys.pid) - s0;
    const self = process.cpuUsage(self0);
    await Promise.all(loops);
    if (failure) throw failure;
    const ops = Math.max(1, count);
    return { opsPerSec: count / secs, q: quantiles(lat), serverUs: (serverSec * 1e6) / ops,
      clientUs: (self.user + self.system) / ops };
  } finally {
    for (const c of conns) c.close();
  }
}

async function phaseScaling(sys) {
  const result = {};
  for (const opName of ['insert', 'find']) {
    result[opName] = {};
    for (const s of sys) result[opName][s.name] = {};
    for (const n of CONNS) {
      for (const s of sys) {
        const cell = await scalingCell(s, opName, n);
        result[opName][s.name][n] = cell;
        log(`scaling ${opName} x${n} ${s.name}: ${Math.round(cell.opsPerSec)} ops/s, ` +
          `p50 ${cell.q.p50.toFixed(0)} µs, p99 ${cell.q.p99.toFixed(0)} µs`);
      }
    }
  }
  return result;
}

/* ---------- phase 3: ingest ---------- */

/* Server and client CPU around fn(): {docsPerSec, serverUs, clientUs} per document (fn resolves with seconds). */
async function measured(pid, fn) {
  const s0 = procCpuSec(pid);
  const c0 = process.cpuUsage();
  const secs = await fn();
  const c = process.cpuUsage(c0);
  return { docsPerSec: DOCS / secs, serverUs: ((procCpuSec(pid) - s0) * 1e6) / DOCS,
    clientUs: (c.user + c.system) / DOCS };
}

/*
 * An empty collection with the TTL index, in a database the other loader's
 * collection has also left (dropped), and a checkpoint (fsync) writes what
 * is left of the last round out before this one starts: every round starts
 * from the same empty cache, as Redis's does after FLUSHDB.
 */
const INGEST_COLLS = ['ingest', 'ingest_raw'];
async function freshIngestColl(client, name) {
  const coll = client.db(DB).collection(name);
  for (const c of INGEST_COLLS) await client.db(DB).collection(c).drop().catch(() => {});
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
  await client.db('admin').command({ fsync: 1 });
  return coll;
}

async function checkCount(coll) {
  const n = await coll.estimatedDocumentCount();
  if (n !== DOCS) throw new Error(`mayfly: ${n} documents after ingest, expected ${DOCS}`);
}

async function ingestMongo(client, pid) {
  const coll = await freshIngestColl(client, 'ingest');
  const m = await measured(pid, async () => {
    const t0 = process.hrtime.bigint();
    await inBatches(DOCS, BATCH, MONGO_INFLIGHT, async (start, end) => {
      const docs = new Array(end - start);
      const at = new Date();
      for (let i = start; i < end; i++) docs[i - start] = { _id: i, at, v: VALUE };
      const r = await coll.insertMany(docs, { ordered: false });
      if (r.insertedCount !== end - start) throw new Error(`mayfly: insertMany inserted ${r.insertedCount}`);
    });
    return Number(process.hrtime.bigint() - t0) / 1e9;
  });
  await checkCount(coll);
  return m;
}

/*
 * The raw loader's documents: {_id: int32 i, at: Date(ms), v: VALUE}, each
 * DOC_BYTES long, written at off in buf. Checked against js-bson once
 * (rawEncoderCheck) so that the two loaders insert the same documents.
 */
const VALUE_BUF = Buffer.from(VALUE, 'utf8');
const DOC_BYTES = 4 + (1 + 4 + 4) + (1 + 3 + 8) + (1 + 2 + 4 + VALUE_BUF.length + 1) + 1;
function writeDoc(buf, off, i, atMs) {
  buf.writeInt32LE(DOC_BYTES, off); off += 4;
  buf[off++] = 0x10; off += buf.write('_id\0', off, 'latin1'); buf.writeInt32LE(i, off); off += 4;
  buf[off++] = 0x09; off += buf.write('at\0', off, 'latin1'); buf.writeBigInt64LE(BigInt(atMs), off); off += 8;
  buf[off++] = 0x02; off += buf.write('v\0', off, 'latin1'); buf.writeInt32LE(VALUE_BUF.length + 1, off); off += 4;
  off += VALUE_BUF.copy(buf, off); buf[off++] = 0;
  buf[off++] = 0;
  return off;
}

function rawEncoderCheck() {
  const at = new Date(1767225600123);
  const mine = Buffer.alloc(DOC_BYTES);
  writeDoc(mine, 0, 123456, at.getTime());
  const ref = Buffer.from(BSON.serialize({ _id: 123456, at, v: VALUE }));
  if (!mine.equals(ref)) throw new Error('the raw loader\'s document encoding differs from js-bson\'s');
}

/* One OP_MSG insert of documents [start, end) into coll: body section, then a 'documents' sequence. */
function rawInsertMsg(coll, start, end, reqId) {
  const body = Buffer.from(BSON.serialize({ insert: coll, ordered: false, $db: DB }));
  const ident = 'documents\0';
  const seqLen = 4 + ident.length + (end - start) * DOC_BYTES;
  const total = 16 + 4 + 1 + body.length + 1 + seqLen;
  const b = Buffer.allocUnsafe(total);
  b.writeInt32LE(total, 0); b.writeInt32LE(reqId, 4); b.writeInt32LE(0, 8); b.writeInt32LE(OP_MSG, 12);
  b.writeUInt32LE(0, 16);
  b[20] = 0;
  let off = 21 + body.copy(b, 21);
  b[off++] = 1;
  b.writeInt32LE(seqLen, off); off += 4;
  off += b.write(ident, off, 'latin1');
  const atMs = Date.now();
  for (let i = start; i < end; i++) off = writeDoc(b, off, i, atMs);
  return b;
}

async function ingestMongoRaw(client, port, pid, nconns = MONGO_INFLIGHT) {
  const coll = await freshIngestColl(client, 'ingest_raw');
  const conns = await Promise.all(Array.from({ length: nconns }, () => new Conn(port, frameMongo).connect()));
  let reqId = 1;
  let w = 0;
  try {
    const m = await measured(pid, async () => {
      const t0 = process.hrtime.bigint();
      await Promise.all(conns.map(async (conn) => {
        for (;;) {
          const start = w * BATCH;
          if (start >= DOCS) return;
          w++;
          const end = Math.min(DOCS, start + BATCH);
          const reply = mongoBody((await conn.request(rawInsertMsg('ingest_raw', start, end, reqId++))).frame);
          if (reply.ok !== 1 || reply.n !== end - start) throw new Error(`mayfly: raw insert replied ${JSON.stringify(reply)}`);
        }
      }));
      return Number(process.hrtime.bigint() - t0) / 1e9;
    });
    await checkCount(coll);
    return m;
  } finally {
    for (const c of conns) c.close();
  }
}

/* A pipelining RESP connection: pipeline(cmds) resolves when all replies are in. */
class RespPipe {
  constructor(port) { this.port = port; this.buf = null; this.queue = []; this.qhead = 0; }

  async connect() {
    this.sock = await connectLoopback(this.port, (d) => this.onData(d), () => {
      for (let i = this.qhead; i < this.queue.length; i++) this.queue[i].reject(new Error('redis connection closed'));
      this.queue = [];
      this.qhead = 0;
    });
  }

  onData(d) {
    const buf = this.buf ? Buffer.concat([this.buf, d]) : d;
    let off = 0;
    for (;;) {
      const e = respEnd(buf, off);
      if (e < 0) break;
      const q = this.queue[this.qhead];
      if (buf[off] === 45 && !q.error) q.error = new Error(buf.toString('latin1', off + 1, e - 2));
      off = e;
      if (--q.left === 0) {
        this.queue[this.qhead++] = undefined;
        if (q.error) q.reject(q.error); else q.resolve();
      }
    }
    this.buf = off < buf.length ? buf.subarray(off) : null;
    if (this.qhead > 1024 && this.qhead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.qhead);
      this.qhead = 0;
    }
  }

  pipeline(cmds) {
    let s = '';
    for (const c of cmds) {
      s += `*${c.length}\r\n`;
      for (const a of c) { const v = String(a); s += `$${Buffer.byteLength(v)}\r\n${v}\r\n`; }
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ left: cmds.length, resolve, reject, error: null });
      this.sock.write(s);
    });
  }

  close() { this.sock.destroy(); }
}

async function ingestRedis(port, pid) {
  const r = new RespPipe(port);
  await r.connect();
  try {
    await r.pipeline([['SELECT', '1'], ['FLUSHDB']]);
    return await measured(pid, async () => {
      const t0 = process.hrtime.bigint();
      await inBatches(DOCS, BATCH, REDIS_INFLIGHT, async (start, end) => {
        const cmds = new Array(end - start);
        for (let i = start; i < end; i++) cmds[i - start] = ['SET', `g:${i}`, VALUE, 'PX', 3600000];
        await r.pipeline(cmds);
      });
      return Number(process.hrtime.bigint() - t0) / 1e9;
    });
  } finally {
    r.close();
  }
}

/*
 * The storage floor (bench/storage_floor.c, built beside mayflyd): the same
 * three inserts per document through src/storage alone, with the server's
 * WiredTiger configuration, FLOOR_THREADS threads (one per core). What the
 * server's rate cannot exceed with this storage layout on this machine; the
 * difference is the server's own work per document (the socket, OP_MSG,
 * checks, key generation, observers). null when the binary is missing.
 */
const FLOOR_THREADS = os.cpus().length;
function floorBinary() {
  const p = path.join(path.dirname(mayflydPath()), 'storage_floor');
  return fs.existsSync(p) ? p : null;
}

function ingestFloor() {
  const bin = floorBinary();
  if (!bin) return null;
  const dir = makeTempDir('mf-floor-');
  try {
    const out = execFileSync(bin, ['--dbpath', dir, '--docs', String(DOCS), '--threads', String(FLOOR_THREADS)],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    const r = JSON.parse(out.trim().split('\n').pop());
    return { docsPerSec: r.docsPerSec, serverUs: r.cpuUsPerDoc, clientUs: 0 };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/*
 * INGEST_ROUNDS rounds of the loaders, alternating; each loader's rounds
 * sorted by rate. redisAof is a second Redis with its journal on
 * (appendonly yes, appendfsync everysec: written at once, synced every
 * second, as mayfly's journal is written at commit and synced every 100
 * ms): shown beside the others, the target compares with the first.
 */
async function phaseIngest(client, mayfly, redis, redisAof) {
  rawEncoderCheck();
  const I = { raw: [], raw1: [], driver: [], redis: [], redisAof: [], floor: [] };
  for (let round = 1; round <= INGEST_ROUNDS; round++) {
    const a = await ingestMongoRaw(client, mayfly.port, mayfly.pid);
    I.raw.push(a);
    const b = await ingestRedis(redis.port, redis.pid);
    I.redis.push(b);
    const c = await ingestMongo(client, mayfly.pid);
    I.driver.push(c);
    const d = await ingestRedis(redisAof.port, redisAof.pid);
    I.redisAof.push(d);
    const e = await ingestMongoRaw(client, mayfly.port, mayfly.pid, 1);
    I.raw1.push(e);
    const f = ingestFloor();
    if (f) I.floor.push(f);
    log(`ingest round ${round}: mayfly raw ${fmtInt(a.docsPerSec)}, redis ${fmtInt(b.docsPerSec)}, ` +
      `mayfly driver ${fmtInt(c.docsPerSec)}, redis with appendonly ${fmtInt(d.docsPerSec)}, ` +
      `mayfly raw on one connection ${fmtInt(e.docsPerSec)}` +
      (f ? `, storage floor (${FLOOR_THREADS} threads) ${fmtInt(f.docsPerSec)}` : '') + ' docs/s');
  }
  for (const k of Object.keys(I)) I[k].sort((x, y) => x.docsPerSec - y.docsPerSec);
  return I;
}

/* ---------- report ---------- */

const fmtUs = (x) => (Number.isNaN(x) ? 'n/a' : x >= 100 ? x.toFixed(0) : x.toFixed(1));
const fmtX = (x) => (Number.isFinite(x) ? `${x.toFixed(2)}x` : 'n/a');

function reportLatency(L) {
  console.log('');
  console.log(`(1) request latency, one connection, one request at a time, raw socket client; ` +
    `${ROUNDS} rounds x ${REQS.toLocaleString('en-US')} requests per server (µs)`);
  const rows = [['operation', 'server', 'p50', 'p90', 'p99', 'round p50s', 'CPU ms/1k (ticks)', 'CPU ms/1k (schedstat)'], '-'];
  const label = { ping: ['ping', 'PING'], find: ['find {_id}', 'GET'], insert: ['insert 1 doc', 'SET'] };
  for (const name of ['ping', 'find', 'insert']) {
    for (const [i, s] of ['mayfly', 'redis'].entries()) {
      const x = L[name][s];
      rows.push([i === 0 ? label[name][0] : `  vs ${label[name][1]}`, s, fmtUs(x.q.p50), fmtUs(x.q.p90), fmtUs(x.q.p99),
        `${fmtUs(x.p50lo)}..${fmtUs(x.p50hi)}`, x.cpuTicksMsPer1k.toFixed(1), x.cpuSchedMsPer1k.toFixed(1)]);
    }
  }
  printTable(rows, { rightAlign: true });
  const t = [['operation', 'p50 mayfly/redis', 'p99 mayfly/redis', 'target (p50)', 'within'], '-'];
  for (const name of ['ping', 'find', 'insert']) {
    const r = L[name].mayfly.q.p50 / L[name].redis.q.p50;
    t.push([label[name][0], fmtX(r), fmtX(L[name].mayfly.q.p99 / L[name].redis.q.p99), `<= ${TARGETS[name]}x`, r <= TARGETS[name] ? 'yes' : 'no']);
  }
  printTable(t, { rightAlign: true });
}

function reportScaling(S) {
  console.log('');
  console.log(`(2) scaling: closed loop per connection, ${SECS} s per cell after ${WARM_MS} ms warm-up, ` +
    'raw socket client (ops/s; latency p50/p99 µs)');
  const rows = [['operation', 'server', ...CONNS.map((n) => `${n} conn ops/s`), ...CONNS.map((n) => `${n} conn p50/p99`), '8/1'], '-'];
  const label = { insert: ['insertOne', 'SET'], find: ['find {_id}', 'GET'] };
  for (const name of ['insert', 'find']) {
    for (const [i, s] of ['mayfly', 'redis'].entries()) {
      const c = S[name][s];
      rows.push([i === 0 ? label[name][0] : `  vs ${label[name][1]}`, s,
        ...CONNS.map((n) => fmtInt(c[n].opsPerSec)),
        ...CONNS.map((n) => `${fmtUs(c[n].q.p50)} / ${fmtUs(c[n].q.p99)}`),
        fmtX(c[8].opsPerSec / c[1].opsPerSec)]);
    }
  }
  printTable(rows, { rightAlign: true });
  /* What each operation cost the server and this client (whose loops run on the same 2 cores). */
  const cpu = [['operation', 'server', ...CONNS.map((n) => `${n} conn server / client CPU µs/op`)], '-'];
  for (const name of ['insert', 'find']) {
    for (const [i, s] of ['mayfly', 'redis'].entries()) {
      const c = S[name][s];
      cpu.push([i === 0 ? label[name][0] : `  vs ${label[name][1]}`, s,
        ...CONNS.map((n) => `${c[n].serverUs.toFixed(1)} / ${c[n].clientUs.toFixed(1)}`)]);
    }
  }
  printTable(cpu, { rightAlign: true });
  const t = [['operation', 'mayfly 8/1', 'target', 'within'], '-'];
  for (const name of ['insert', 'find']) {
    const r = S[name].mayfly[8].opsPerSec / S[name].mayfly[1].opsPerSec;
    t.push([label[name][0], fmtX(r), `>= ${SCALE_TARGET}x (2 cores)`, r >= SCALE_TARGET ? 'yes' : 'no']);
  }
  printTable(t, { rightAlign: true });
}

function reportIngest(I) {
  console.log('');
  console.log(`(3) ingest, ${DOCS.toLocaleString('en-US')} docs, TTL index {at: 1}, batches of ${BATCH}: mayfly raw socket ` +
    `(${MONGO_INFLIGHT} connections) and Node driver insertMany (${MONGO_INFLIGHT} in flight) vs redis SET .. PX pipelined ` +
    `(${REDIS_INFLIGHT} in flight); median of ${INGEST_ROUNDS} alternating rounds`);
  const med = (v) => v[Math.floor((v.length - 1) / 2)];
  const row = (name, v) => {
    const m = med(v);
    return [name, fmtInt(m.docsPerSec), `${fmtInt(v[0].docsPerSec)}..${fmtInt(v[v.length - 1].docsPerSec)}`,
      m.serverUs.toFixed(2), m.clientUs.toFixed(2)];
  };
  printTable([['loader', 'docs/s', 'rounds', 'server CPU µs/doc', 'client CPU µs/doc'], '-',
    row('mayfly, raw socket', I.raw), row('mayfly, raw socket, 1 connection', I.raw1),
    row('mayfly, Node driver', I.driver), row('redis', I.redis),
    row('redis, appendonly everysec', I.redisAof),
    ...(I.floor.length ? [row(`storage floor, ${FLOOR_THREADS} threads (no server)`, I.floor)] : [])], { rightAlign: true });
  console.log('one connection: the same raw loader with one batch in flight; its server CPU per document against ' +
    'the 4-connection row\'s is what concurrent inserts into one collection cost inside WiredTiger ' +
    '(docs/ARCHITECTURE.md, "Storage layout")');
  console.log('redis as the other benches run it keeps nothing (--save \'\' --appendonly no); the appendonly row is a ' +
    'Redis that journals as mayfly does (AOF rewrites run in forked children, whose CPU is not counted)');
  if (I.floor.length) {
    console.log(`storage floor: bench/storage_floor.c, the same three inserts per document (record, _id key, TTL key) ` +
      `through src/storage alone, with the server's WiredTiger configuration, in transactions of 500 written as the ` +
      `server's bulk inserts write them (the records, then each index's keys), on ${FLOOR_THREADS} threads; what the server cannot exceed with this storage layout here (its CPU ` +
      `includes WiredTiger's own threads). mayfly raw socket / floor: ${fmtX(med(I.raw).docsPerSec / med(I.floor).docsPerSec)}`);
  } else {
    console.log('storage floor: not run (build/storage_floor missing: make all builds it)');
  }
  const r = med(I.raw).docsPerSec / med(I.redis).docsPerSec;
  printTable([['target', 'mayfly raw / redis', 'within'], '-',
    ['ingest >= redis (raw socket clients)', fmtX(r), r >= 1 ? 'yes' : 'no']], { rightAlign: true });
}

/* ---------- main ---------- */

async function main() {
  const tStart = Date.now();
  const mc = machine();
  const extra = mayflydExtraArgs();
  const mayfly = await startMayflyd('latbench-mayfly-');
  const redis = await startRedis('latbench-redis-');
  const mPort = mayfly.port;
  const rPort = redis.port;

  const client = new MongoClient(`mongodb://127.0.0.1:${mPort}/?directConnection=true`, { maxPoolSize: MONGO_INFLIGHT });
  const mConn = new Conn(mPort, frameMongo);
  const rConn = new Conn(rPort, frameRedis);
  try {
    await client.connect();
    await mConn.connect();
    await rConn.connect();
    const bi = mongoBody((await mConn.request(buildOpMsg(1, { buildInfo: 1, $db: 'admin' }))).frame);
    const rinfo = respValue((await rConn.request(resp(['INFO', 'server']))).frame);
    const rver = (/redis_version:(\S+)/.exec(rinfo) || [])[1];
    console.log(`machine: nproc ${mc.nproc}, ${mc.model}, ${mc.kernel}, load average at start ` +
      `${mc.load.map((x) => x.toFixed(2)).join(' ')} (other work on the machine skews the figures)`);
    console.log(`mayflyd ${bi.version} ${MAYFLYD} (source ${sourceRev()})` +
      `${extra.length ? ` ${extra.join(' ')}` : ''}, pid ${mayfly.proc.pid}, port ${mPort}`);
    console.log(`redis-server ${rver}, pid ${redis.proc.pid}, port ${rPort}`);
    console.log(`node ${process.version}; rounds ${ROUNDS}, reqs ${REQS}, secs ${SECS}, docs ${DOCS}` +
      `${ONLY ? `, only ${ONLY}` : ''}`);

    const sys = [
      { name: 'mayfly', port: mPort, pid: mayfly.proc.pid, conn: mConn, frame: frameMongo, ops: mongoOps() },
      { name: 'redis', port: rPort, pid: redis.proc.pid, conn: rConn, frame: frameRedis, ops: redisOps() },
    ];

    let L = null;
    let S = null;
    let I = null;
    if (runs('latency') || runs('scaling')) {
      /* The documents / keys find and GET read. */
      const data = client.db(DB).collection('data');
      for (let i = 0; i < K; i += BATCH) {
        await data.insertMany(Array.from({ length: Math.min(BATCH, K - i) }, (_, j) => ({ _id: i + j, v: VALUE })));
      }
      const rp = new RespPipe(rPort);
      await rp.connect();
      await rp.pipeline(Array.from({ length: K }, (_, i) => ['SET', `d:${i}`, VALUE]));
      rp.close();
      log(`loaded ${K} documents / keys for find / GET`);
    }
    if (runs('latency')) L = await phaseLatency(sys);
    if (runs('scaling')) S = await phaseScaling(sys);
    if (runs('ingest')) {
      const aof = await startRedis('latbench-redisaof-', ['--appendonly', 'yes', '--appendfsync', 'everysec']);
      I = await phaseIngest(client, { port: mPort, pid: mayfly.proc.pid }, { port: rPort, pid: redis.proc.pid },
        { port: aof.port, pid: aof.proc.pid });
    }

    if (L) reportLatency(L);
    if (S) reportScaling(S);
    if (I) reportIngest(I);
    console.log('');
    console.log(`total run time ${((Date.now() - tStart) / 1000).toFixed(0)} s; ` +
      `load average at end ${loadavg()}`);
  } finally {
    try { mConn.close(); } catch (_) { /* not connected */ }
    try { rConn.close(); } catch (_) { /* not connected */ }
    await client.close().catch(() => {});
    await stopAll();
  }
}

runMain(main);
