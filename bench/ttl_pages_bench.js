'use strict';
/*
 * Mass expiry from pages the inserts built against pages read from disk
 * (issue 13, target (4): why the deletion rate depends on the documents'
 * history). Prints figures only; no assertions.
 *
 *   node bench/ttl_pages_bench.js [--docs N] [--rounds R] [--inflight B] [--fg 0|1]
 *   (or bash bench/ttl_pages_bench.sh, which builds build/mayflyd first)
 *
 * Each round runs two cases, alternating, each on a fresh mayflyd (in a
 * session of its own, as ttl_bench starts it) and a fresh directory:
 *   fresh:     N documents {_id: i, at: <a past Date>, p: <18 bytes>} in a
 *              collection with a TTL index on `at` (expireAfterSeconds 0),
 *              loaded with the monitor off (ttlMonitorEnabled false) in
 *              insertMany batches of 1,000, --inflight (default 4) at a
 *              time, as ttl_bench loads; fsync (a checkpoint); the monitor
 *              on; timed until the collection is empty;
 *   restarted: the same load and fsync, then mayflyd is stopped (SIGTERM, a
 *              clean shutdown) and started again on the same directory with
 *              the monitor off, so the tables' pages are read back from disk
 *              when touched; then the same expiry.
 * Reported per case: the deletion rate (N over the time from turning the
 * monitor on to an empty collection, counted every 20 ms) and the server's
 * CPU per deleted document (utime + stime of mayflyd over the same span),
 * the median and range over the rounds. --fg 1 runs ttl_bench's foreground
 * loop (one connection alternating insertOne and findOne by _id into another
 * collection) during each expiry, as ttl_bench's phase 2 does.
 *
 * What it shows. WiredTiger keeps the documents an insert workload added in
 * the in-memory pages the inserts built (skip lists of single allocations,
 * pages up to memory_page_max), also after a checkpoint has written them.
 * The first deletions on such a page make it dirty and over its memory
 * limit, so the deleting thread reconciles and splits the whole page (a
 * forced eviction) before going on: work the restarted case, whose pages
 * come from disk as compact images, does not do. WiredTiger 3.2 has no call
 * that evicts one table's clean pages, and a smaller memory_page_max only
 * makes the pages and their forced evictions smaller: with 256 KB, callgrind
 * counted 1.77 G instructions for 100,000 deletions against 1.73 G, and six
 * alternating rounds of 500,000 at full speed showed no difference.
 *
 * Measured (2-core VM, 1,000,000 documents, 4 rounds, no foreground loop):
 * restarted 2.03-2.06 µs of CPU per document (median) against 2.55-2.65
 * fresh, with one or four load batches in flight; callgrind, 100,000: 14.0 k
 * instructions per deletion against 16.6 k, the difference mostly forced
 * eviction (__wt_evict, 3.4 k per document fresh, 0.6 k restarted). With
 * the foreground loop (--fg 1, 3 rounds) the two were within the noise
 * (medians 417 k and 438 k docs/s): there the loop's CPU, not the
 * deletions', sets the rate. The machine varies by 20-30 % between runs, so
 * use several rounds.
 */
const { MongoClient } = require('mongodb');
const {
  options, sleep, log, inBatches, fmtInt, printTable, cpuSec, stopServer, startMayflyd, stopAll, runMain,
  removeTempDir,
} = require('./lib/common');

const { num, str } = options('ttl_pages_bench');
const N = Math.floor(num('docs', 1000000));
const ROUNDS = Math.max(1, Math.floor(num('rounds', 3)));
const FG = str('fg', '0') !== '0';
const INFLIGHT = Math.max(1, Math.floor(num('inflight', 4)));

async function connect(entry) {
  const client = new MongoClient(entry.uri, { maxPoolSize: 8 });
  await client.connect();
  return client;
}

/* One case: load, fsync, (restart,) expire. Returns { rate, cpuUs, loadRate, fgOps }. */
async function runCase(restarted) {
  const off = ['--setParameter', 'ttlMonitorEnabled=false'];
  let entry = await startMayflyd('ttlpages-', off, { session: true });
  let client = await connect(entry);
  try {
    let coll = client.db('pages').collection('mass');
    await coll.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    const at = new Date(Date.now() - 1000);
    const t0 = Date.now();
    await inBatches(N, 1000, INFLIGHT, async (start, end) => {
      const docs = [];
      for (let i = start; i < end; i++) docs.push({ _id: i, at, p: 'payload-0123456789' });
      await coll.insertMany(docs, { ordered: false });
    });
    const loadRate = N / ((Date.now() - t0) / 1000);
    await client.db('admin').command({ fsync: 1 });
    if (restarted) {
      await client.close();
      await stopServer(entry, 60000);
      entry = await startMayflyd('ttlpages-', off, { session: true, reuse: entry });
      client = await connect(entry);
      coll = client.db('pages').collection('mass');
    }
    const fgColl = client.db('pages').collection('fg');
    let stop = false;
    let fgOps = 0;
    const fgDone = FG ? (async () => {
      for (let i = 0; !stop; i++) {
        await fgColl.insertOne({ _id: i, at: new Date(), p: 'payload' });
        await fgColl.findOne({ _id: Math.floor(Math.random() * (i + 1)) });
        fgOps += 2;
      }
    })() : Promise.resolve();
    await sleep(200);
    const c0 = cpuSec(entry.proc.pid);
    const e0 = Date.now();
    await client.db('admin').command({ setParameter: 1, ttlMonitorEnabled: true });
    while (await coll.estimatedDocumentCount() > 0) {
      if (Date.now() - e0 > 300000) throw new Error('expiry not done in 300 s');
      await sleep(20);
    }
    const secs = (Date.now() - e0) / 1000;
    const cpu = cpuSec(entry.proc.pid) - c0;
    stop = true;
    await fgDone;
    return { rate: N / secs, cpuUs: (cpu * 1e6) / N, loadRate, fgOps: fgOps / secs };
  } finally {
    await client.close().catch(() => {});
    await stopServer(entry, 60000);
    removeTempDir(entry.dir); /* a case's data is a few hundred MB: not kept until exit */
  }
}

function summary(xs, f, fmt) {
  const v = xs.map(f).sort((a, b) => a - b);
  return `${fmt(v[Math.floor(v.length / 2)])} (${fmt(v[0])}-${fmt(v[v.length - 1])})`;
}

runMain(async () => {
  log(`ttl_pages_bench: ${fmtInt(N)} docs, ${ROUNDS} rounds, ${INFLIGHT} batches in flight, foreground loop ${FG ? 'on' : 'off'}`);
  const res = { fresh: [], restarted: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const kind of r % 2 === 0 ? ['fresh', 'restarted'] : ['restarted', 'fresh']) {
      const x = await runCase(kind === 'restarted');
      res[kind].push(x);
      log(`round ${r + 1} ${kind}: ${fmtInt(x.rate)} docs/s, ${x.cpuUs.toFixed(2)} µs CPU/doc` +
        (FG ? `, foreground ${fmtInt(x.fgOps)} ops/s` : '') + ` (load ${fmtInt(x.loadRate)} docs/s)`);
    }
  }
  const rows = [['case', 'deletion rate, docs/s: median (range)', 'server CPU per doc, µs: median (range)'], '-'];
  for (const kind of ['fresh', 'restarted']) {
    rows.push([kind, summary(res[kind], (x) => x.rate, fmtInt), summary(res[kind], (x) => x.cpuUs, (v) => v.toFixed(2))]);
  }
  console.log('');
  console.log(`Mass expiry of ${fmtInt(N)} documents, pages built by the inserts (fresh) vs read from disk (restarted)` +
    (FG ? ', with the foreground loop' : ''));
  printTable(rows);
  await stopAll();
});
