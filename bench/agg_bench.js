'use strict';
/*
 * Streaming aggregation benchmark for mayflyd. Prints figures only; no
 * assertions (a failed driver call still aborts the run).
 *
 *   node bench/agg_bench.js [--docs N] [--reps R] [--budget-mb M]
 *   (or bash bench/agg_bench.sh, which builds build/mayflyd first)
 *
 * Server. mayflyd (binary from $MAYFLYD, default build/mayflyd, the release
 * build) is started on a free loopback port with a fresh temporary --dbpath
 * (bench/lib/common.js: tests/clients/harness.js MayflyServer), stopped and
 * removed at the end, also on error or Ctrl-C.
 *
 * Data: N documents (default 1,000,000) of about 1 KB: {_id: i, k, pad}
 * where k = (i * 2654435761) mod 2^32 (unique, unrelated to _id order) and
 * pad a 1,000-character string, loaded with insertMany(1,000).
 *
 * Phases:
 *   1. aggregate([{$limit: 1}]) vs find().limit(1): R round trips each
 *      (default 300, after 20 warm-up ones), mean and median latency in ms
 *      and the ratio; explain executionStats docsExamined of both.
 *   2. aggregate([{$sort: {k: 1}}]) over the whole collection with the
 *      default 100 MB sort budget, so it spills sorted runs to <dbpath>/_tmp:
 *      (--budget-mb M sets internalQueryMaxBlockingSortMemoryUsageBytes first);
 *      the cursor is drained (batchSize 1,000) counting documents and
 *      checking the order, without keeping them. Before it, a collection
 *      scan warms the WiredTiger cache, and the server's VmHWM is
 *      reset (echo 5 > /proc/<pid>/clear_refs) before each measured drain;
 *      the figure is the peak RSS during the drain (VmHWM) minus the RSS
 *      just before it, for the sort and, as a baseline for cache and
 *      allocator churn, for the same scan without the sort. Elapsed time
 *      and docs/s. Then the sort once more, measured the same way: the
 *      first one starts with the free memory that loading and scanning left
 *      in the allocator (which it may reuse, or return to the OS), the
 *      repeat with what a sort leaves.
 */
const fs = require('node:fs');
const { MongoClient } = require('mongodb');
const { options, nowMs, percentile, sortedCopy, procStatusKb, mayflyServer, stopMayfly, runMain } =
  require('./lib/common');

const { num: arg } = options('agg_bench');
const N = Math.round(arg('docs', 1000000));
const REPS = Math.round(arg('reps', 300));
const BUDGET_MB = arg('budget-mb', 100);
const BATCH = 1000;
const PAD = 'p'.repeat(1000);

function kOf(i) { return Math.imul(i, 2654435761 | 0) >>> 0; }

function resetHwm(pid) {
  try { fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'); return true; } catch (_) { return false; }
}

function stats(xs) {
  return { mean: xs.reduce((a, b) => a + b, 0) / xs.length, median: percentile(sortedCopy(xs), 0.5) };
}

let server = null;

async function load(coll) {
  const t0 = nowMs();
  for (let base = 0; base < N; base += BATCH) {
    const docs = [];
    for (let i = base; i < Math.min(N, base + BATCH); i++) docs.push({ _id: i, k: kOf(i), pad: PAD });
    await coll.insertMany(docs, { ordered: false });
  }
  const secs = (nowMs() - t0) / 1000;
  console.log(`loaded ${N} docs (~1 KB) in ${secs.toFixed(1)} s (${Math.round(N / secs)} docs/s)`);
}

async function timeIt(fn) {
  for (let i = 0; i < 20; i++) await fn();
  const xs = [];
  for (let i = 0; i < REPS; i++) {
    const t0 = nowMs();
    await fn();
    xs.push(nowMs() - t0);
  }
  return stats(xs);
}

async function phaseLimit(coll) {
  console.log('\n1. aggregate([{$limit: 1}]) vs find().limit(1)');
  const f = await timeIt(async () => { await coll.find().limit(1).toArray(); });
  const a = await timeIt(async () => { await coll.aggregate([{ $limit: 1 }]).toArray(); });
  console.log(`  find().limit(1):            mean ${f.mean.toFixed(3)} ms  median ${f.median.toFixed(3)} ms`);
  console.log(`  aggregate([{$limit: 1}]):   mean ${a.mean.toFixed(3)} ms  median ${a.median.toFixed(3)} ms`);
  console.log(`  ratio aggregate/find (median): ${(a.median / f.median).toFixed(2)}x`);
  const fx = await coll.find().limit(1).explain('executionStats');
  const ax = await coll.aggregate([{ $limit: 1 }]).explain('executionStats');
  const ae = ax.stages ? ax.stages[0].$cursor.executionStats : ax.executionStats;
  console.log(`  docsExamined: find ${fx.executionStats.totalDocsExamined}, aggregate ${ae.totalDocsExamined}`);
}

/* Drains pipeline, resetting VmHWM first; returns {n, secs, firstMs, ordered, before, hwm, after} (RSS in kB). */
async function drainMeasured(coll, pipeline) {
  const before = procStatusKb(server.pid, 'VmRSS');
  const reset = resetHwm(server.pid);
  const t0 = nowMs();
  let n = 0;
  let prev = -1;
  let ordered = true;
  let firstMs = null;
  for await (const d of coll.aggregate(pipeline, { batchSize: 1000 })) {
    if (firstMs === null) firstMs = nowMs() - t0;
    if (d.k < prev) ordered = false;
    prev = d.k;
    n++;
  }
  const secs = (nowMs() - t0) / 1000;
  return { n, secs, firstMs, ordered, reset, before, hwm: procStatusKb(server.pid, 'VmHWM'), after: procStatusKb(server.pid, 'VmRSS') };
}

function mib(kb) { return (kb / 1024).toFixed(1); }

async function phaseSort(coll) {
  console.log(`\n2. aggregate([{$sort: {k: 1}}, {$project: {k: 1}}]) over the whole collection (${BUDGET_MB} MB budget: spills)`);
  await coll.s.db.admin().command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: Math.round(BUDGET_MB * 1048576) });
  const w0 = nowMs();
  const none = await coll.find({ nosuchfield: 1 }).toArray(); // full scan: warms the cache
  console.log(`  warm-up collection scan: ${((nowMs() - w0) / 1000).toFixed(1)} s (${none.length} matches)`);
  // Baseline: the same full scan without the sort (WiredTiger cache churn, reply buffers).
  const base = await drainMeasured(coll, [{ $project: { k: 1 } }]);
  console.log(`  baseline, no sort: ${base.n} docs in ${base.secs.toFixed(1)} s; RSS before ${mib(base.before)} MiB, ` +
    `peak ${mib(base.hwm)} MiB (VmHWM${base.reset ? ' reset before' : ' NOT reset'}): growth ${mib(base.hwm - base.before)} MiB`);
  const r = await drainMeasured(coll, [{ $sort: { k: 1 } }, { $project: { k: 1 } }]);
  console.log(`  sort: ${r.n} docs in ${r.secs.toFixed(1)} s (${Math.round(r.n / r.secs)} docs/s), ` +
    `first batch after ${(r.firstMs / 1000).toFixed(1)} s, ordered: ${r.ordered}`);
  console.log(`  sort: RSS before ${mib(r.before)} MiB, peak ${mib(r.hwm)} MiB (VmHWM${r.reset ? ' reset before' : ' NOT reset'}), ` +
    `after ${mib(r.after)} MiB`);
  console.log(`  peak RSS growth during the sort: ${mib(r.hwm - r.before)} MiB ` +
    `(baseline scan without sort: ${mib(base.hwm - base.before)} MiB)`);
  // Again: the first sort starts with whatever the load and the scans left free in the
  // allocator (reusable, or returned to the OS during the sort); this one starts after a sort.
  const r2 = await drainMeasured(coll, [{ $sort: { k: 1 } }, { $project: { k: 1 } }]);
  console.log(`  sort repeated: ${r2.n} docs in ${r2.secs.toFixed(1)} s, ordered: ${r2.ordered}; RSS before ` +
    `${mib(r2.before)} MiB, peak ${mib(r2.hwm)} MiB, after ${mib(r2.after)} MiB: growth ${mib(r2.hwm - r2.before)} MiB`);
}

async function main() {
  server = mayflyServer();
  await server.start();
  const client = new MongoClient(server.uri, { maxPoolSize: 4 });
  try {
    await client.connect();
    const coll = client.db('aggbench').collection('c');
    const info = await client.db('admin').command({ buildInfo: 1 });
    console.log(`mayflyd ${info.version} pid ${server.pid} binary ${server.binary}; docs=${N} reps=${REPS}`);
    await load(coll);
    await phaseLimit(coll);
    await phaseSort(coll);
    const hwm = procStatusKb(server.pid, 'VmHWM');
    console.log(`\nserver VmHWM at the end: ${(hwm / 1024).toFixed(1)} MiB`);
  } finally {
    await client.close().catch(() => {});
    await stopMayfly(server);
  }
}

runMain(main);
