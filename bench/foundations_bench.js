'use strict';
/*
 * Engine-foundations benchmark (issue 7). Prints figures only; no
 * assertions (a failed driver call aborts the run).
 *
 *   node bench/foundations_bench.js [--docs N] [--ops K]
 *   (or bash bench/foundations_bench.sh, which builds build/mayflyd first)
 *
 * Server: mayflyd from $MAYFLYD (default build/mayflyd, the release build)
 * on a free loopback port with a fresh temporary --dbpath
 * (bench/lib/common.js: tests/clients/harness.js MayflyServer); removed at
 * the end, also on error or Ctrl-C.
 *
 * Phases (N = --docs, default 1,000,000 documents of about 1 KB):
 *   1. Load: N documents {_id: i, k: hash(i), g: i % 1000, pad: 1 KB} into
 *      big with insertMany(1,000); docs/s printed.
 *   2. Latency while idle: K (default 2,000) operations, alternating an
 *      insertOne and a findOne by _id, one connection, on another collection
 *      ("other") and then on big itself; p50/p99 in microseconds.
 *   3. The same measurements while createIndex({k: 1}) builds on big (the
 *      operations run from their own connections as soon as the build
 *      starts, until K operations are done or the build ends; the number of
 *      operations that completed during the build is printed), and the p99
 *      ratio to idle. A build that blocks the collection or the whole server
 *      shows as a p99 close to the build time.
 *   4. Start-up: the server stopped cleanly and started again on the same
 *      dbpath, time from spawn until ping answers; the same for an empty
 *      dbpath. Then kill -9 and start again (recovery) likewise.
 */
const { MongoClient } = require('mongodb');
const { options, percentile, sortedCopy, procStatusKb, mayflyServer, stopMayfly, runMain } = require('./lib/common');

const { num: arg } = options('foundations_bench');
const N = arg('docs', 1000000);
const K = arg('ops', 2000);
const PAD = 'x'.repeat(1000);

/* p50/p99/max of latencies; NaN when there are none (a build faster than the first operation). */
function fmtLat(name, lat) {
  const s = sortedCopy(lat);
  return `${name}: n=${s.length} p50=${percentile(s, 0.5).toFixed(0)}us p99=${percentile(s, 0.99).toFixed(0)}us ` +
    `max=${percentile(s, 1).toFixed(0)}us`;
}

/* Alternating insertOne / findOne by _id on coll until stop() or K ops; returns latencies in us. */
async function measure(coll, stop) {
  const lat = [];
  let id = 0;
  const tag = `${process.pid}-${Math.random()}`;
  while (lat.length < K && !(stop && stop())) {
    const t0 = process.hrtime.bigint();
    if (lat.length % 2 === 0) await coll.insertOne({ _id: `${tag}-${id++}`, v: id });
    else await coll.findOne({ _id: `${tag}-${id - 1}` });
    lat.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  return lat;
}

async function timeStartup(srv) {
  const t0 = Date.now();
  await srv.start();
  const c = new MongoClient(srv.uri);
  await c.db('admin').command({ ping: 1 });
  const ms = Date.now() - t0;
  await c.close();
  return ms;
}

async function main() {
  const srv = mayflyServer();
  try {
    await srv.start();
    const client = new MongoClient(srv.uri, { maxPoolSize: 20 });
    const db = client.db('bench');
    const big = db.collection('big');
    console.log(`foundations_bench: ${N} documents of ~1 KB, ${K} operations per latency sample`);

    let t0 = Date.now();
    for (let base = 0; base < N; base += 1000) {
      const docs = [];
      for (let i = base; i < Math.min(N, base + 1000); i++) {
        docs.push({ _id: i, k: Number((BigInt(i) * 2654435761n) % 4294967296n), g: i % 1000, pad: PAD });
      }
      await big.insertMany(docs, { ordered: false });
    }
    let s = (Date.now() - t0) / 1000;
    console.log(`load: ${N} docs in ${s.toFixed(1)} s (${Math.round(N / s)} docs/s)`);

    const c2 = new MongoClient(srv.uri);
    const other = c2.db('bench').collection('other');
    await other.insertOne({ _id: 'warm' });
    const idleOther = await measure(other);
    const idleBig = await measure(c2.db('bench').collection('big'));
    console.log(`idle  ${fmtLat('other collection', idleOther)}`);
    console.log(`idle  ${fmtLat('same collection ', idleBig)}`);

    let building = true;
    t0 = Date.now();
    const build = big.createIndex({ k: 1 }).then(() => { building = false; });
    await new Promise((r) => setTimeout(r, 20)); // let the build start
    const c3 = new MongoClient(srv.uri);
    const [duringOther, duringBig] = await Promise.all([
      measure(c2.db('bench').collection('other'), () => !building),
      measure(c3.db('bench').collection('big'), () => !building),
    ]);
    await build;
    s = (Date.now() - t0) / 1000;
    console.log(`createIndex({k: 1}) on ${N} docs: ${s.toFixed(1)} s`);
    console.log(`build ${fmtLat('other collection', duringOther)}`);
    console.log(`build ${fmtLat('same collection ', duringBig)}`);
    const p99 = (l) => percentile(sortedCopy(l), 0.99);
    console.log(`p99 during the build / idle: other ${(p99(duringOther) / p99(idleOther)).toFixed(2)}x, ` +
      `same ${(p99(duringBig) / p99(idleBig)).toFixed(2)}x (target <= 3x)`);
    await c2.close();
    await c3.close();
    await client.close();

    await srv.stop();
    const withData = await timeStartup(srv);
    console.log(`start-up after clean shutdown with ${N} docs: ${withData} ms (target < 1000 ms)`);
    await srv.kill9();
    const recovered = await timeStartup(srv);
    console.log(`start-up after kill -9 with ${N} docs: ${recovered} ms`);
    const empty = mayflyServer();
    const emptyMs = await timeStartup(empty);
    console.log(`start-up on an empty dbpath: ${emptyMs} ms`);
    await stopMayfly(empty);
    const hwm = procStatusKb(srv.pid, 'VmHWM');
    if (hwm !== null) console.log(`server peak RSS after restart: ${Math.round(hwm / 1024)} MiB`);
  } finally {
    await stopMayfly(srv);
  }
}

runMain(main);
