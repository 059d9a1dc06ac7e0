'use strict';
/*
 * Archive-on-expire benchmark (SPEC I2): what archive: true costs a mass
 * expiry, and how small the archive is. Prints figures only; no assertions.
 *
 *   node bench/archive_bench.js [--docs N] [--rounds R]
 *   N=200000 node bench/archive_bench.js          (the same, from the environment)
 *   node bench/archive_bench.js 200000            (or as the first argument)
 *   (MAYFLYD=path picks the binary, default build/mayflyd, the release build:
 *    make -j2; MAYFLYD_ARGS="--setParameter name=value ..." passes extra flags)
 *
 * Each run starts a fresh mayflyd (bench/lib/common.js: free loopback port,
 * fresh temp --dbpath, --setParameter ttlMonitorEnabled=false), one run
 * without and one with archive (R rounds alternate plain/archive, default
 * 1). A run:
 *   1. creates a TTL index {expiresAt: 1}, expireAfterSeconds 0 (plus
 *      archive: true for the archive run), through the createIndexes command;
 *   2. loads N documents of a realistic shape (~250 bytes of BSON: dates,
 *      a few strings from small vocabularies and some unique ones, numbers,
 *      a small nested document with an array) that are all already expired,
 *      insertMany of 1,000, 4 in flight; the monitor is off, so nothing goes;
 *   3. reads collStats (size = BSON bytes, storageSize = the compressed
 *      table on disk, after an fsync so the checkpoint has written it);
 *   4. turns the monitor on (setParameter ttlMonitorEnabled: true) and polls
 *      estimatedDocumentCount every 20 ms until it is 0: deletion rate =
 *      N / (time from switching on to empty);
 *   5. reads collStats again (archiveSize, archiveCount, archiveSegments) and
 *      the bytes under <dbpath>/archive.
 * Reported: deletions/s plain and archive, archiving cost = 1 - rate_archive /
 * rate_plain (target < 30%), data size before (size and storageSize), archive
 * bytes per document (archiveSize / N) and data size / archive size (target
 * >= 3x, against both size and storageSize).
 */
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { MongoClient, ObjectId, BSON } = require('mongodb');
const { options, mayflydPath, sleep, nowMs, log, rng, inBatches, fmtInt, loadavg, printTable,
  startMayflyd, stopServer, removeTempDir, runMain } = require('./lib/common');

/* ---------- arguments ---------- */

const { num: arg } = options();
function docsArg() {
  const first = process.argv[2];
  if (first !== undefined && /^\d+$/.test(first)) return Number(first);
  if (process.env.N) {
    const v = Number(process.env.N);
    if (!Number.isFinite(v) || v <= 0) throw new Error(`bad N=${process.env.N}`);
    return arg('docs', v);
  }
  return arg('docs', 1000000);
}
const N = Math.floor(docsArg());
const ROUNDS = Math.floor(arg('rounds', 1));
const BATCH = 1000;
const INFLIGHT = 4;
const POLL_MS = 20;
const DRAIN_CAP_MS = Math.max(120000, N / 10);   /* longest wait for the collection to empty */
const MAYFLYD = mayflydPath();

/* ---------- small helpers ---------- */

const fmtBytes = (b) => (b === null || b === undefined || Number.isNaN(b) ? 'n/a'
  : b >= 1048576 ? `${(b / 1048576).toFixed(1)} MiB` : b >= 1024 ? `${(b / 1024).toFixed(1)} KiB` : `${Math.round(b)} B`);

function duBytes(dir) {
  let total = 0;
  let ents;
  try { ents = fs.readdirSync(dir, { withFileTypes: true }); } catch (_) { return 0; }
  for (const e of ents) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += duBytes(p);
    else { try { total += fs.statSync(p).size; } catch (_) { /* gone */ } }
  }
  return total;
}

/* ---------- the documents ---------- */

const EVENTS = ['page_view', 'click', 'add_to_cart', 'checkout', 'login', 'logout', 'search', 'signup'];
const PATHS = ['/', '/products', '/products/shoes', '/products/shirts', '/cart', '/checkout', '/account', '/search',
  '/blog/how-to-choose-running-shoes', '/help/returns'];
const COUNTRIES = ['DE', 'FR', 'US', 'GB', 'NL', 'ES', 'IT', 'PL', 'SE', 'JP'];
const DEVICES = ['desktop', 'mobile', 'tablet'];
const BROWSERS = ['Chrome/126.0 Windows', 'Safari/17.5 iOS', 'Firefox/127.0 Linux', 'Safari/17.5 macOS', 'Edge/126.0 Windows'];
const TAGS = ['new', 'returning', 'promo', 'newsletter', 'ad', 'organic', 'referral'];

function makeDocs(r, start, end, baseMs) {
  const docs = new Array(end - start);
  for (let i = start; i < end; i++) {
    const created = baseMs - 3600000 + Math.floor(r() * 3000000);
    const pick = (a) => a[Math.floor(r() * a.length)];
    docs[i - start] = {
      _id: new ObjectId(),
      expiresAt: new Date(baseMs - 1000 - (i % 60000)),   /* all already expired */
      createdAt: new Date(created),
      userId: `user-${Math.floor(r() * 200000)}`,
      event: pick(EVENTS),
      path: pick(PATHS),
      browser: pick(BROWSERS),
      ip: `10.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}`,
      durationMs: Math.floor(r() * 5000),
      amount: Math.round(r() * 100000) / 100,
      meta: {
        country: pick(COUNTRIES),
        device: pick(DEVICES),
        session: Math.floor(r() * 0xffffffff).toString(16).padStart(8, '0'),
        tags: [pick(TAGS), pick(TAGS)],
      },
    };
  }
  return docs;
}

/* ---------- one run on a fresh server ---------- */

/* mayflyd with the TTL monitor off (switched on by the run), its HTTP console on no port. */
const startServer = () => startMayflyd('archivebench-', ['--httpPort', '0', '--setParameter', 'ttlMonitorEnabled=false']);

/* Stops a run's server (SIGTERM; SIGKILL after 30 s) and removes its dbpath. */
async function stopRunServer(s) {
  await stopServer(s, 30000);
  removeTempDir(s.dir);
}

async function run(archive) {
  const name = archive ? 'archive' : 'plain';
  const s = await startServer();
  const client = new MongoClient(`mongodb://127.0.0.1:${s.port}/?directConnection=true`, { maxPoolSize: INFLIGHT + 2 });
  await client.connect();
  try {
    const adminDb = client.db('admin');
    const db = client.db('archivebench');
    const coll = db.collection('events');
    const spec = { key: { expiresAt: 1 }, name: 'expiresAt_1', expireAfterSeconds: 0 };
    if (archive) spec.archive = true;
    await db.command({ createIndexes: 'events', indexes: [spec] });

    const r = rng(4242);
    const baseMs = Date.now();
    const t0 = nowMs();
    let lastLog = Date.now();
    await inBatches(N, BATCH, INFLIGHT, async (start, end) => {
      await coll.insertMany(makeDocs(r, start, end, baseMs), { ordered: false });
      if (Date.now() - lastLog > 5000) { lastLog = Date.now(); log(`${name}: loaded ${end.toLocaleString('en-US')}`); }
    });
    const loadMs = nowMs() - t0;
    log(`${name}: loaded ${N.toLocaleString('en-US')} docs in ${(loadMs / 1000).toFixed(1)} s (${fmtInt(N / loadMs * 1000)} docs/s)`);
    await adminDb.command({ fsync: 1 }).catch((e) => log(`${name}: fsync: ${e.message} (storageSize may be stale)`));
    const before = await db.command({ collStats: 'events' });
    const count0 = await coll.estimatedDocumentCount();

    const tOn = nowMs();
    await adminDb.command({ setParameter: 1, ttlMonitorEnabled: true });
    let first = null;
    let zero = null;
    let c = count0;
    lastLog = Date.now();
    while (nowMs() - tOn < DRAIN_CAP_MS) {
      c = await coll.estimatedDocumentCount();
      const now = nowMs();
      if (first === null && c < count0) first = now;
      if (c === 0) { zero = now; break; }
      if (Date.now() - lastLog > 2000) { lastLog = Date.now(); log(`${name}: ${c.toLocaleString('en-US')} left`); }
      await sleep(POLL_MS);
    }
    const drainMs = zero === null ? null : zero - tOn;
    log(`${name}: ${zero === null ? `NOT empty after ${DRAIN_CAP_MS} ms (${c} left)` : `empty ${(drainMs / 1000).toFixed(2)} s after the monitor was switched on`}`);
    const after = await db.command({ collStats: 'events' });
    const ss = await adminDb.command({ serverStatus: 1 });
    const res = {
      name,
      count0,
      loadRate: N / loadMs * 1000,
      drainMs,
      firstMs: first === null ? null : first - tOn,
      rate: drainMs ? N / (drainMs / 1000) : null,
      rateFromFirst: zero !== null && first !== null && zero > first ? N / ((zero - first) / 1000) : null,
      size: Number(before.size),
      storageSize: Number(before.storageSize),
      avgObjSize: Number(before.avgObjSize),
      archiveSize: after.archiveSize === undefined ? null : Number(after.archiveSize),
      archiveCount: after.archiveCount === undefined ? null : Number(after.archiveCount),
      archiveSegments: after.archiveSegments === undefined ? null : Number(after.archiveSegments),
      archiveDirBytes: duBytes(path.join(s.dir, 'archive')),
      deleted: ss.metrics && ss.metrics.ttl ? Number(ss.metrics.ttl.deletedDocuments) : null,
    };
    return res;
  } finally {
    await client.close().catch(() => {});
    await stopRunServer(s);
  }
}

/* ---------- report ---------- */

const median = (a) => { const s = a.filter((x) => x !== null).sort((x, y) => x - y); return s.length ? s[Math.floor((s.length - 1) / 2)] : null; };

async function main() {
  if (!fs.existsSync(MAYFLYD)) throw new Error(`mayflyd not found at ${MAYFLYD} (run make -j2)`);
  const sample = makeDocs(rng(1), 0, 1, Date.now())[0];
  log(`mayflyd ${MAYFLYD}; docs=${N.toLocaleString('en-US')} (~${BSON.calculateObjectSize(sample)} bytes of BSON each), ` +
    `rounds=${ROUNDS}, cores=${os.cpus().length}, loadavg ${loadavg()}`);
  const plain = [];
  const arch = [];
  for (let i = 0; i < ROUNDS; i++) {
    plain.push(await run(false));
    arch.push(await run(true));
  }
  const p = plain[plain.length - 1];
  const a = arch[arch.length - 1];
  const ratePlain = median(plain.map((x) => x.rate));
  const rateArch = median(arch.map((x) => x.rate));
  const cost = ratePlain && rateArch ? 1 - rateArch / ratePlain : null;
  const perDoc = a.archiveSize !== null ? a.archiveSize / N : null;
  const ratioSize = a.archiveSize ? a.size / a.archiveSize : null;
  const ratioStorage = a.archiveSize ? a.storageSize / a.archiveSize : null;

  console.log('');
  console.log(`Archive-on-expire benchmark, ${N.toLocaleString('en-US')} expired documents per run, ${os.cpus().length} cores` +
    (ROUNDS > 1 ? ` (rates: median of ${ROUNDS} rounds; sizes: last round)` : ''));
  printTable([
    ['metric', 'plain', 'archive: true'], '-',
    ['ingest (docs/s)', fmtInt(median(plain.map((x) => x.loadRate))), fmtInt(median(arch.map((x) => x.loadRate)))],
    ['first deletion after monitor on', p.firstMs === null ? 'n/a' : `${Math.round(p.firstMs)} ms`, a.firstMs === null ? 'n/a' : `${Math.round(a.firstMs)} ms`],
    ['empty after monitor on', p.drainMs === null ? 'n/a' : `${(p.drainMs / 1000).toFixed(2)} s`, a.drainMs === null ? 'n/a' : `${(a.drainMs / 1000).toFixed(2)} s`],
    ['deletions/s (monitor on..empty)', fmtInt(ratePlain), fmtInt(rateArch)],
    ['deletions/s (first deletion..empty)', fmtInt(median(plain.map((x) => x.rateFromFirst))), fmtInt(median(arch.map((x) => x.rateFromFirst)))],
    ['collStats size before (BSON)', fmtBytes(p.size), fmtBytes(a.size)],
    ['collStats storageSize before (disk)', fmtBytes(p.storageSize), fmtBytes(a.storageSize)],
    ['avgObjSize', fmtInt(p.avgObjSize), fmtInt(a.avgObjSize)],
    ['collStats archiveSize after', fmtBytes(p.archiveSize), fmtBytes(a.archiveSize)],
    ['collStats archiveCount / archiveSegments', `${fmtInt(p.archiveCount)} / ${fmtInt(p.archiveSegments)}`, `${fmtInt(a.archiveCount)} / ${fmtInt(a.archiveSegments)}`],
    ['bytes under <dbpath>/archive', fmtBytes(p.archiveDirBytes), fmtBytes(a.archiveDirBytes)],
    ['TTL deletedDocuments (serverStatus)', fmtInt(p.deleted), fmtInt(a.deleted)],
  ]);
  const ok = (b) => (b === null ? 'n/a' : b ? 'MET' : 'NOT MET');
  console.log('');
  printTable([
    ['figure', 'value', 'target'], '-',
    ['archiving cost = 1 - rate_archive / rate_plain', cost === null ? 'n/a' : `${(cost * 100).toFixed(1)}%`, `< 30% (${ok(cost === null ? null : cost < 0.3)})`],
    ['archive bytes per document', perDoc === null ? 'n/a' : perDoc.toFixed(1), ''],
    ['data size / archive size (collStats size)', ratioSize === null ? 'n/a' : `${ratioSize.toFixed(2)}x`, `>= 3x (${ok(ratioSize === null ? null : ratioSize >= 3)})`],
    ['storageSize / archive size', ratioStorage === null ? 'n/a' : `${ratioStorage.toFixed(2)}x`, ''],
  ]);
  if (a.archiveCount !== null && a.archiveCount !== N) console.log(`note: archiveCount ${a.archiveCount} != ${N} documents expired`);
  if (ROUNDS > 1) {
    console.log(`per round deletions/s: plain ${plain.map((x) => fmtInt(x.rate)).join(', ')}; archive ${arch.map((x) => fmtInt(x.rate)).join(', ')}`);
  }
  console.log(`loadavg at end ${loadavg()}`);
}

runMain(main);
