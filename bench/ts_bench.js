'use strict';
/*
 * Time-series benchmark (issue 8): a time-series collection against a plain
 * collection with a TTL index on the same field, in one run, one server.
 * Prints figures only; no assertions.
 *
 *   node bench/ts_bench.js [--docs N] [--sensors S] [--batch B]
 *   (or bash bench/ts_bench.sh, which builds build/mayflyd first)
 *
 * Server: mayflyd from $MAYFLYD (default build/mayflyd, the release build;
 * MAYFLYD_ARGS="--flag value ..." adds flags) on a free loopback port with a
 * fresh temporary --dbpath (bench/lib/common.js), stopped and removed at the
 * end, also on error or Ctrl-C.
 *
 * Phase 1, load. N measurements {sensor, t, temp, hum} from S sensors, one
 * per sensor per second, in time order, inserted with insertMany of B
 * documents (2 in flight) into
 *   - ts:    createCollection {timeseries: {timeField: 't', metaField:
 *            'sensor', granularity: 'seconds'}, expireAfterSeconds: 10 years}
 *   - plain: a collection with createIndex({t: 1}, {expireAfterSeconds:
 *            10 years}).
 * The times lie two days in the past, so nothing is due yet. Reported:
 * documents per second for each, then bytes on disk after fsync (collStats
 * storageSize + totalIndexSize; the buckets collection for ts).
 *
 * Phase 2, mass expiry. collMod makes everything due at once (ts: the
 * collection's expireAfterSeconds -> 60; plain: the TTL index's -> 60), one
 * collection at a time. The remaining count is polled every 20 ms
 * (estimatedDocumentCount of system.buckets.ts / of plain). Reported: time
 * from the collMod to zero, and measurements removed per second (N / that
 * time) for each, and the ratio.
 *
 * Phase 3, bucket expiry lateness. A collection with bucketMaxSpanSeconds =
 * bucketRoundingSeconds = 1 and expireAfterSeconds 1 gets one measurement
 * for each of 200 sensors at now + 3 s + i * 50 ms, so each sensor's bucket
 * is due at its rounded start + 1 s + 1 s, spread over 10 s. The buckets'
 * metas are polled every 10 ms; a bucket's lateness is the midpoint of the
 * poll interval in which it disappeared, minus its due instant. Reported:
 * p50 / p99 / max, and whether any bucket went before it was due.
 *
 * Targets: ts at least 3x smaller on disk than plain; ts measurements
 * removed at least 5x faster per second than plain TTL deletes.
 */
const { MongoClient } = require('mongodb');
const { options, sleep, inBatches, percentile, procStatusKb, startMayflyd, runMain } = require('./lib/common');

const { num: arg } = options();
const N = Math.floor(arg('docs', 1000000));
const SENSORS = Math.floor(arg('sensors', 100));
const BATCH = Math.floor(arg('batch', 10000));
const TEN_YEARS = 10 * 365 * 86400;

async function load(coll) {
  const base = Date.now() - 2 * 86400e3;
  const t0 = Date.now();
  await inBatches(N, BATCH, 2, async (from, to) => {
    const docs = [];
    for (let i = from; i < to; i++) {
      const s = i % SENSORS;
      const k = Math.floor(i / SENSORS);
      docs.push({ sensor: `sensor-${s}`, t: new Date(base + k * 1000), temp: 20 + ((i * 7) % 100) / 10, hum: (i * 13) % 100 });
    }
    await coll.insertMany(docs, { ordered: false });
  });
  return N / ((Date.now() - t0) / 1000);
}

async function onDisk(db, name) {
  try {
    await db.admin().command({ fsync: 1 });
  } catch (e) {
    /* an older server without fsync: sizes are as of the last checkpoint */
  }
  const st = await db.command({ collStats: name });
  if (process.env.TS_BENCH_VERBOSE)
    console.log(`  ${name}: storageSize ${st.storageSize} indexes ${JSON.stringify(st.indexSizes)} size ${st.size}`);
  return st.storageSize + st.totalIndexSize;
}

async function expireAll(db, countColl, collModCmd) {
  const t0 = Date.now();
  await db.command(collModCmd);
  let first = 0;
  const total = await countColl.estimatedDocumentCount();
  for (;;) {
    const n = await countColl.estimatedDocumentCount();
    if (!first && n < total) first = Date.now();
    if (n === 0) break;
    if (Date.now() - t0 > 600000) throw new Error('mass expiry did not finish in 10 minutes');
    await sleep(20);
  }
  return { ms: Date.now() - t0, firstMs: first ? first - t0 : 0 };
}

async function lateness(db) {
  await db.createCollection('late', { timeseries: { timeField: 't', metaField: 'sensor', bucketMaxSpanSeconds: 1, bucketRoundingSeconds: 1 }, expireAfterSeconds: 1 });
  const coll = db.collection('late');
  const start = Date.now() + 3000;
  const due = new Map();
  const docs = [];
  for (let i = 0; i < 200; i++) {
    const t = start + i * 50;
    docs.push({ sensor: i, t: new Date(t), v: i });
    due.set(i, Math.floor(t / 1000) * 1000 + 1000 + 1000);
  }
  await coll.insertMany(docs);
  const buckets = db.collection('system.buckets.late');
  const late = [];
  let early = 0;
  let prev = Date.now();
  while (due.size > 0) {
    const present = new Set((await buckets.find({}, { projection: { meta: 1 } }).toArray()).map((b) => b.meta));
    const now = Date.now();
    for (const [s, d] of due) {
      if (!present.has(s)) {
        /* Gone between the previous reply (prev) and this one (now). Early only if gone by a reply that came before it was due. */
        const at = (prev + now) / 2;
        if (now < d) early++;
        late.push(Math.max(0, at - d));
        due.delete(s);
      }
    }
    prev = now;
    if (now - start > 60000) break;
    await sleep(10);
  }
  late.sort((a, b) => a - b);
  return { p50: percentile(late, 0.5), p99: percentile(late, 0.99), max: late[late.length - 1], early, n: late.length };
}

async function main() {
  const srv = await startMayflyd('mayfly-tsbench-');
  const client = new MongoClient(srv.uri, { serverSelectionTimeoutMS: 20000 });
  try {
    await client.connect();
    const db = client.db('tsbench');
    await db.createCollection('ts', { timeseries: { timeField: 't', metaField: 'sensor', granularity: 'seconds' }, expireAfterSeconds: TEN_YEARS });
    await db.createCollection('plain');
    await db.collection('plain').createIndex({ t: 1 }, { expireAfterSeconds: TEN_YEARS });
    console.log(`time-series benchmark: ${N} measurements from ${SENSORS} sensors, insertMany of ${BATCH}`);

    const tsRate = await load(db.collection('ts'));
    const plainRate = await load(db.collection('plain'));
    console.log(`load          ts ${Math.round(tsRate)} docs/s   plain ${Math.round(plainRate)} docs/s`);
    const buckets = await db.collection('system.buckets.ts').estimatedDocumentCount();
    const tsBytes = await onDisk(db, 'ts');
    const plainBytes = await onDisk(db, 'plain');
    console.log(`on disk       ts ${(tsBytes / 1048576).toFixed(1)} MiB (${buckets} buckets)   plain ${(plainBytes / 1048576).toFixed(1)} MiB   plain/ts ${(plainBytes / tsBytes).toFixed(2)}x (target >= 3x)`);

    const tsExp = await expireAll(db, db.collection('system.buckets.ts'), { collMod: 'ts', expireAfterSeconds: 60 });
    const plainExp = await expireAll(db, db.collection('plain'), { collMod: 'plain', index: { keyPattern: { t: 1 }, expireAfterSeconds: 60 } });
    const tsDel = N / (tsExp.ms / 1000);
    const plainDel = N / (plainExp.ms / 1000);
    console.log(`mass expiry   ts ${tsExp.ms} ms (first deletion after ${tsExp.firstMs} ms) = ${Math.round(tsDel)} measurements/s`);
    console.log(`              plain ${plainExp.ms} ms (first deletion after ${plainExp.firstMs} ms) = ${Math.round(plainDel)} docs/s   ts/plain ${(tsDel / plainDel).toFixed(2)}x (target >= 5x)`);

    const l = await lateness(db);
    console.log(`bucket expiry lateness (${l.n} buckets, client polling every 10 ms): p50 ${l.p50.toFixed(0)} ms  p99 ${l.p99.toFixed(0)} ms  max ${l.max.toFixed(0)} ms  early ${l.early}`);
    const st = await db.admin().command({ serverStatus: 1 });
    const lat = st.metrics.ttl.lateness;
    console.log(`server TTL lateness (all deletions of the run, incl. the mass expiry's long-due ones): p50 ${lat.p50Ms} ms p99 ${lat.p99Ms} ms`);
    const hwm = procStatusKb(srv.proc.pid, 'VmHWM');
    if (hwm !== null) console.log(`peak RSS ${(hwm / 1024).toFixed(0)} MiB`);
  } finally {
    await client.close().catch(() => {});
  }
}

runMain(main);
