'use strict';
/*
 * Replica-set benchmark (issue 9). Prints figures only; no assertions (a
 * failed driver call aborts the run).
 *
 *   node bench/repl_bench.js [--seconds S] [--kills N] [--expire-docs M] [--phases abc] [--quick]
 *   (or bash bench/repl_bench.sh, which builds build/mayflyd first)
 *   env: REPL_BENCH_KILLS, REPL_BENCH_EXPIRE_DOCS, REPL_BENCH_SECONDS set the same
 *        defaults (arguments win); REPL_BENCH_QUICK=1 is --quick.
 *
 * Servers: mayflyd from $MAYFLYD (default build/mayflyd, the release build),
 * each on free loopback ports with a fresh temporary --dbpath, started with
 * tests/clients/harness.js (MayflyServer) and tests/clients/rs_harness.js
 * (ReplSet: --replSet rs0 --raftPort R, replSetInitiate on member 0, wait
 * for one primary and two secondaries). Everything is stopped and removed at
 * the end, also on error or Ctrl-C.
 *
 * (a) insertOne throughput: for S seconds (default 5) each, small documents
 *     inserted with insertOne through one client, with 1 and with 16
 *     operations in flight, w: 1 and w: "majority", on a standalone mayflyd
 *     and on a 3-member loopback set (replicaSet URI client). ops/s and
 *     p50/p99 latency in ms.
 * (b) Failover time over N kills (default 20): kill -9 of the primary; the
 *     time until another member reports isWritablePrimary in hello (raw
 *     connections polled every 10 ms) and until a w: "majority" insertOne
 *     through the replicaSet URI client succeeds (what an application sees;
 *     includes the driver's rediscovery); the killed member is restarted and
 *     the time until it reports secondary: true is noted. median / p90 / max.
 * (c) Replication lag during a mass expiry: M documents (default 1,000,000;
 *     --quick: 100,000) loaded into a collection with a TTL index of 10 years
 *     on dates a day old, then collMod lowers it to 60 s so all are due at
 *     once. Every 100 ms each member is asked for its own applied optime
 *     (replSetGetStatus, its self entry: optime.ts and lastAppliedWallTime,
 *     else optimeDate) and its document count (estimatedDocumentCount).
 *     Reported per secondary: the most seconds behind (a secondary whose
 *     applied optime is ts at time t is behind by t minus the first moment
 *     the primary was seen past ts; 0 when it has applied what the primary
 *     has), the largest count lag in seconds (a secondary at count n at time
 *     t lags by t minus the moment the primary first reached n), when it
 *     reached zero relative to the primary, and the largest raw gap between
 *     the primary's and its applied wall times in one sample (what
 *     rs.printSecondaryReplicationInfo shows; it counts the idle time before
 *     the expiry while the first entries travel). Plus
 *     metrics.ttl.deletedDocuments of every member.
 *
 * --quick: S = 2, N = 5, M = 100,000.
 */
const path = require('node:path');
const { MongoClient } = require('mongodb');

process.env.MAYFLYD = process.env.MAYFLYD || path.join(__dirname, '..', 'build', 'mayflyd');
const h = require('../tests/clients/harness');
const R = require('../tests/clients/rs_harness');

function flag(name) { return process.argv.includes(`--${name}`); }
function arg(name, envName, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  const raw = i >= 0 ? process.argv[i + 1] : process.env[envName];
  if (raw === undefined) return dflt;
  const v = Number(raw);
  if (!Number.isFinite(v) || v <= 0) {
    console.error(`repl_bench: --${name} (${envName}) needs a positive number`);
    process.exit(2);
  }
  return v;
}
function strArg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? String(process.argv[i + 1]) : dflt;
}

const QUICK = flag('quick') || process.env.REPL_BENCH_QUICK === '1';
const SECONDS = arg('seconds', 'REPL_BENCH_SECONDS', QUICK ? 2 : 5);
const KILLS = Math.floor(arg('kills', 'REPL_BENCH_KILLS', QUICK ? 5 : 20));
const EXPIRE_DOCS = Math.floor(arg('expire-docs', 'REPL_BENCH_EXPIRE_DOCS', QUICK ? 100000 : 1000000));
const PHASES = strArg('phases', 'abc');
const BINARY = process.env.MAYFLYD;

const hr = R.hr;
const sleep = h.sleep;
const log = (...a) => console.log(`[${new Date().toISOString().slice(11, 23)}]`, ...a);

function pct(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
function summary(values, unit = 'ms', digits = 0) {
  const s = [...values].sort((a, b) => a - b);
  if (!s.length) return 'n/a';
  const f = (v) => `${v.toFixed(digits)}${unit}`;
  return `median ${f(pct(s, 0.5))}  p90 ${f(pct(s, 0.9))}  max ${f(s[s.length - 1])}  min ${f(s[0])}  (n=${s.length})`;
}

/* ---------- (a) insertOne throughput ---------- */

/* insertOne for SECONDS with inflight operations at once; {ops, opsPerSec, p50, p99} or {error}. */
async function throughput(coll, writeConcern, inflight) {
  const lat = [];
  let n = 0;
  let error = null;
  const t0 = hr();
  const end = t0 + SECONDS * 1000;
  async function worker(w) {
    for (let k = 0; hr() < end && !error; k++) {
      const s = hr();
      try {
        await coll.insertOne({ w, k, v: 'payload-0123456789', at: new Date() }, { writeConcern });
      } catch (e) {
        error = e;
        return;
      }
      lat.push(hr() - s);
      n += 1;
    }
  }
  await Promise.all(Array.from({ length: inflight }, (_, w) => worker(w)));
  if (error) return { error: `${error.code || ''} ${error.message}`.trim() };
  const secs = (hr() - t0) / 1000;
  lat.sort((a, b) => a - b);
  return { ops: n, opsPerSec: n / secs, p50: pct(lat, 0.5), p99: pct(lat, 0.99) };
}

function fmtTp(r) {
  if (r.error) return `error: ${r.error}`.padEnd(40);
  return `${r.opsPerSec.toFixed(0).padStart(7)} ops/s  p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms`.padEnd(40);
}

async function phaseThroughput(rs) {
  console.log(`\n(a) insertOne throughput, ${SECONDS} s per cell`);
  const rows = [];
  const solo = new h.MayflyServer({ binary: BINARY });
  cleanups.push(async () => { await solo.stop(); solo.cleanup(); });
  await solo.start();
  const sc = new MongoClient(solo.uri);
  await sc.connect();
  try {
    for (const inflight of [1, 16]) {
      for (const [wname, wc] of [['w:1', { w: 1 }], ['w:majority', { w: 'majority' }]]) {
        const coll = sc.db('bench').collection(`solo_${inflight}_${wname.replace(/\W/g, '')}`);
        rows.push({ who: 'standalone', inflight, wname, r: await throughput(coll, wc, inflight) });
      }
    }
  } finally {
    await sc.close();
    await solo.stop();
    solo.cleanup();
  }
  for (const inflight of [1, 16]) {
    for (const [wname, wc] of [['w:1', { w: 1 }], ['w:majority', { w: 'majority' }]]) {
      const coll = rs.client.db('bench').collection(`rs_${inflight}_${wname.replace(/\W/g, '')}`);
      rows.push({ who: '3-member set', inflight, wname, r: await throughput(coll, wc, inflight) });
    }
  }
  console.log(`${'node'.padEnd(14)}${'in flight'.padEnd(11)}${'w:1'.padEnd(42)}w:majority`);
  for (const who of ['standalone', '3-member set']) {
    for (const inflight of [1, 16]) {
      const cell = (w) => rows.find((x) => x.who === who && x.inflight === inflight && x.wname === w).r;
      console.log(`${who.padEnd(14)}${String(inflight).padEnd(11)}${fmtTp(cell('w:1'))}  ${fmtTp(cell('w:majority'))}`);
    }
  }
  for (const inflight of [1, 16]) {
    for (const w of ['w:1', 'w:majority']) {
      const a = rows.find((x) => x.who === 'standalone' && x.inflight === inflight && x.wname === w).r;
      const b = rows.find((x) => x.who === '3-member set' && x.inflight === inflight && x.wname === w).r;
      if (!a.error && !b.error) {
        console.log(`  set / standalone, ${w}, ${inflight} in flight: ${(b.opsPerSec / a.opsPerSec).toFixed(2)}x`);
      }
    }
  }
}

/* ---------- (b) failover time ---------- */

async function phaseFailover(rs) {
  console.log(`\n(b) failover over ${KILLS} kill -9 of the primary`);
  const elect = [];
  const writable = [];
  const rejoin = [];
  const coll = rs.client.db('bench').collection('failover');
  await coll.insertOne({ warm: true }, { writeConcern: { w: 'majority' } });
  for (let round = 1; round <= KILLS; round++) {
    await rs.waitForSteadyState({ timeoutMs: 60000 });
    const p = await rs.waitForPrimary();
    const t0 = hr();
    await rs.kill(p, { kill9: true });   // returns once the process is gone
    let writeMs = null;
    const writeDone = (async () => {
      for (let k = 0; hr() - t0 < 60000; k++) {
        try {
          await coll.insertOne({ round, k }, { writeConcern: { w: 'majority', wtimeout: 20000 } });
          writeMs = hr() - t0;
          return;
        } catch (_) {
          await sleep(5);
        }
      }
    })();
    const np = await rs.waitForPrimary({ exclude: [p], timeoutMs: 60000, pollMs: 10 });
    const electMs = hr() - t0;
    await writeDone;
    const tr = hr();
    await rs.restart(p);
    await rs.waitForSecondary(p, { timeoutMs: 60000 });
    const rejoinMs = hr() - tr;
    elect.push(electMs);
    if (writeMs !== null) writable.push(writeMs);
    rejoin.push(rejoinMs);
    log(`kill ${String(round).padStart(2)}: member ${p} -> member ${np} primary after ${electMs.toFixed(0)} ms; ` +
      `first majority write after ${writeMs === null ? 'n/a' : writeMs.toFixed(0) + ' ms'}; ` +
      `member ${p} SECONDARY ${rejoinMs.toFixed(0)} ms after restart`);
  }
  console.log(`  new primary (hello isWritablePrimary): ${summary(elect)}`);
  console.log(`  first w:majority insert through the replicaSet URI client: ${summary(writable)}`);
  console.log(`  restarted member back to SECONDARY: ${summary(rejoin)}`);
}

/* ---------- (c) replication lag during a mass expiry ---------- */

/* Member i's own applied optime from replSetGetStatus: {ts: [secs, inc], wall: ms} or null. */
async function appliedOptime(rs, i) {
  try {
    const st = await rs.adminCommand(i, { replSetGetStatus: 1 });
    const self = st.members.find((m) => m.self);
    if (!self || !self.optime || !self.optime.ts) return null;
    const d = self.lastAppliedWallTime || self.optimeDate;
    return { ts: [self.optime.ts.high >>> 0, self.optime.ts.low >>> 0], wall: d instanceof Date ? d.getTime() : null };
  } catch (_) {
    return null;
  }
}

function tsLess(a, b) { return a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]); }

async function phaseExpiry(rs) {
  const M = EXPIRE_DOCS;
  console.log(`\n(c) replication lag during a mass expiry of ${M.toLocaleString('en-US')} documents`);
  const p = await rs.waitForPrimary();
  const secs = rs.members.filter((m) => m.inSet && m.index !== p).map((m) => m.index);
  const db = rs.client.db('bench_expiry');
  const c = db.collection('c');
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 10 * 365 * 86400, name: 'at_ttl' });
  const base = Date.now() - 86400e3;
  const BATCH = 1000;
  let next = 0;
  const t0 = hr();
  async function loader() {
    for (;;) {
      const from = next;
      if (from >= M) return;
      next = Math.min(M, from + BATCH);
      const docs = [];
      for (let k = from; k < next; k++) docs.push({ _id: k, at: new Date(base + (k % 3600) * 1000), v: 'payload-0123456789' });
      await c.insertMany(docs, { ordered: false, writeConcern: { w: 1 } });
    }
  }
  await Promise.all([loader(), loader(), loader(), loader()]);
  const loadS = (hr() - t0) / 1000;
  log(`loaded ${M} documents in ${loadS.toFixed(1)} s (${(M / loadS).toFixed(0)} docs/s, insertMany of ${BATCH}, 4 in flight, w:1)`);
  const counter = (i) => rs.reader(i).db('bench_expiry').collection('c');
  await rs.waitUntil(async () => {
    const n = await Promise.all([p, ...secs].map((i) => counter(i).estimatedDocumentCount()));
    return n.every((x) => x === M);
  }, { timeoutMs: 600000, pollMs: 200, what: 'every member to hold the loaded documents' });
  log(`every member holds ${M} documents (${((hr() - t0) / 1000).toFixed(1)} s after the load began)`);
  const ttl0 = await rs.onEach((i) => rs.ttlDeleted(i));

  const samples = [];   // {t, counts: {i: n}, wall: {i: ms}}
  const tc = hr();
  await db.command({ collMod: 'c', index: { name: 'at_ttl', expireAfterSeconds: 60 } });
  const zeroAt = {};
  const deadline = tc + Math.max(600000, M / 1000 * 1000);
  for (;;) {
    const t = hr() - tc;
    const [counts, optimes] = await Promise.all([
      Promise.all([p, ...secs].map((i) => counter(i).estimatedDocumentCount().catch(() => null))),
      Promise.all([p, ...secs].map((i) => appliedOptime(rs, i))),
    ]);
    const s = { t, counts: {}, op: {} };
    [p, ...secs].forEach((i, k) => {
      s.counts[i] = counts[k];
      s.op[i] = optimes[k];
      if (counts[k] === 0 && zeroAt[i] === undefined) zeroAt[i] = t;
    });
    samples.push(s);
    if ([p, ...secs].every((i) => zeroAt[i] !== undefined)) break;
    if (hr() > deadline) {
      log('gave up waiting for the expiry to finish on every member');
      break;
    }
    await sleep(100);
  }
  const ttl1 = await rs.onEach((i) => rs.ttlDeleted(i));

  // First moment (ms after the collMod) the primary's count was at or below n.
  const primaryReached = (n) => {
    for (const s of samples) if (s.counts[p] !== null && s.counts[p] <= n) return s.t;
    return null;
  };
  console.log(`  primary (member ${p}) expired all in ${zeroAt[p] === undefined ? 'n/a' : (zeroAt[p] / 1000).toFixed(2) + ' s'} ` +
    `(${zeroAt[p] ? (M / (zeroAt[p] / 1000)).toFixed(0) : 'n/a'} docs/s); metrics.ttl.deletedDocuments +${ttl1[p] - ttl0[p]}`);
  // First moment (ms after the collMod) the primary's applied optime was beyond ts.
  const primaryPassed = (ts) => {
    for (const s of samples) if (s.op[p] && tsLess(ts, s.op[p].ts)) return s.t;
    return null;
  };
  for (const i of secs) {
    let maxOpLag = 0;
    let maxWallGap = 0;
    let maxCountLag = 0;
    for (const s of samples) {
      const mine = s.op[i];
      const prim = s.op[p];
      if (mine && prim) {
        if (mine.wall !== null && prim.wall !== null) maxWallGap = Math.max(maxWallGap, prim.wall - mine.wall);
        if (tsLess(mine.ts, prim.ts)) {
          const tp = primaryPassed(mine.ts);
          if (tp !== null) maxOpLag = Math.max(maxOpLag, s.t - tp);
        }
      }
      const n = s.counts[i];
      if (n !== null && s.counts[p] !== null && n > s.counts[p]) {
        const tp = primaryReached(n);
        if (tp !== null) maxCountLag = Math.max(maxCountLag, s.t - tp);
      }
    }
    const done = zeroAt[i] === undefined ? 'n/a' : `${(zeroAt[i] / 1000).toFixed(2)} s`;
    const behind = zeroAt[i] !== undefined && zeroAt[p] !== undefined ? `${((zeroAt[i] - zeroAt[p]) / 1000).toFixed(2)} s` : 'n/a';
    console.log(`  secondary member ${i}: max ${(maxOpLag / 1000).toFixed(2)} s behind (applied optimes), ` +
      `max count lag ${(maxCountLag / 1000).toFixed(2)} s, reached zero at ${done} (${behind} after the primary); ` +
      `metrics.ttl.deletedDocuments +${ttl1[i] - ttl0[i]}`);
    console.log(`    (largest primary-minus-secondary applied wall time gap in one sample: ${(maxWallGap / 1000).toFixed(2)} s; ` +
      'after an idle spell this counts the idle time, as rs.printSecondaryReplicationInfo does)');
  }
  console.log(`  (${samples.length} samples every ~100 ms: lags below that read as 0 or 0.1 s)`);
}

/* ---------- main ---------- */

const cleanups = [];
let rsGlobal = null;

async function cleanupAll() {
  for (const f of cleanups.splice(0)) await f().catch(() => {});
  if (rsGlobal) {
    const problems = await rsGlobal.stop().catch((e) => [String(e)]);
    rsGlobal = null;
    for (const pr of problems) console.error(`repl_bench: ${pr.split('\n')[0]}`);
  }
}

process.on('SIGINT', () => {
  cleanupAll().finally(() => process.exit(130));
});

async function main() {
  console.log(`repl_bench: mayflyd ${BINARY}; ${require('node:os').cpus().length} cores; phases ${PHASES}` +
    `${QUICK ? ' (quick)' : ''}`);
  const rs = new R.ReplSet(3, { binary: BINARY });
  rsGlobal = rs;
  const t0 = hr();
  await rs.start();
  log(`3-member set up, primary member ${await rs.primaryIndex()}, ${(hr() - t0).toFixed(0)} ms from spawn`);
  if (PHASES.includes('a')) await phaseThroughput(rs);
  if (PHASES.includes('b')) await phaseFailover(rs);
  if (PHASES.includes('c')) await phaseExpiry(rs);
}

main().then(() => cleanupAll(), async (e) => {
  console.error(`repl_bench: ${e.stack || e}`);
  if (rsGlobal) console.error(rsGlobal.stderrTails(20));
  await cleanupAll();
  process.exitCode = 1;
});
