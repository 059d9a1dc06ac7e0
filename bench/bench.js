'use strict';
/*
 * Driver-based benchmark for mayflyd. Starts the server (binary from $MAYFLYD,
 * default build/mayflyd, the optimised build) on a free port with a temporary
 * dbpath (bench/lib/common.js; removed at the end, also on error or Ctrl-C)
 * and prints throughput figures and the server's peak RSS. No assertions: it
 * reports numbers only.
 *
 *   node bench/bench.js [--docs N] [--single N] [--lookups N]
 */
const { MongoClient } = require('mongodb');
const { procStatusKb, mayflyServer, stopMayfly, runMain } = require('./lib/common');

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

const N_DOCS = arg('docs', 100000);       // documents inserted with insertMany(1,000)
const N_SINGLE = arg('single', 10000);    // single insertOne calls
const N_LOOKUPS = arg('lookups', 20000);  // find-by-_id round trips
const N_SCANS = arg('scans', 5);          // full range scans

function makeDoc(i) {
  return { _id: i, k: i % 1000, name: `user-${i}`, score: (i * 7919) % 100000, tags: ['a', 'b', `t${i % 10}`],
    nested: { x: i, y: 'yy', z: [1, 2, 3] } };
}

function rate(n, ms) { return (n / (ms / 1000)).toFixed(0); }

async function timed(label, n, unit, fn) {
  const t0 = process.hrtime.bigint();
  await fn();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`${label.padEnd(54)} ${String(rate(n, ms)).padStart(10)} ${unit}/s   (${n} in ${ms.toFixed(0)} ms)`);
  return ms;
}

async function main() {
  const server = mayflyServer();
  await server.start();
  const client = new MongoClient(server.uri, { maxPoolSize: 10 });
  await client.connect();
  const db = client.db('bench');
  const coll = db.collection('docs');
  try {
    const hello = await db.admin().command({ buildInfo: 1 });
    console.log(`mayflyd ${hello.version} pid ${server.pid} port ${server.port} binary ${server.binary}`);
    console.log(`docs=${N_DOCS} single=${N_SINGLE} lookups=${N_LOOKUPS} scans=${N_SCANS}`);

    await timed('insertMany (batches of 1,000)', N_DOCS, 'docs', async () => {
      for (let i = 0; i < N_DOCS; i += 1000) {
        const batch = [];
        for (let j = i; j < Math.min(i + 1000, N_DOCS); j++) batch.push(makeDoc(j));
        await coll.insertMany(batch, { ordered: true });
      }
    });

    const single = db.collection('single');
    await timed('insertOne (sequential, 1 connection)', N_SINGLE, 'ops', async () => {
      for (let i = 0; i < N_SINGLE; i++) await single.insertOne(makeDoc(i));
    });

    await timed('insertOne (8 concurrent callers)', N_SINGLE, 'ops', async () => {
      let next = N_SINGLE;
      const end = 2 * N_SINGLE;
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (next < end) { const i = next++; await single.insertOne(makeDoc(i)); }
      }));
    });

    await timed('find by _id (sequential)', N_LOOKUPS, 'ops', async () => {
      let x = 12345;
      for (let i = 0; i < N_LOOKUPS; i++) {
        x = (x * 1103515245 + 12345) % 2147483648;
        const d = await coll.findOne({ _id: x % N_DOCS });
        if (!d) throw new Error('missing document');
      }
    });

    await timed('find by _id (8 concurrent callers)', N_LOOKUPS, 'ops', async () => {
      let done = 0;
      await Promise.all(Array.from({ length: 8 }, async (_, w) => {
        let x = 777 + w;
        while (done < N_LOOKUPS) {
          done++;
          x = (x * 1103515245 + 12345) % 2147483648;
          await coll.findOne({ _id: x % N_DOCS });
        }
      }));
    });

    let scanned = 0;
    await timed('range scan, filter on a field (no index)', N_SCANS * N_DOCS, 'docs', async () => {
      for (let s = 0; s < N_SCANS; s++) {
        const n = (await coll.find({ score: { $gte: 0 } }).toArray()).length;
        scanned += n;
      }
    });
    if (scanned !== N_SCANS * N_DOCS) console.log(`  (warning: scan returned ${scanned} docs)`);

    await timed('server-side scan: countDocuments(score >= 0)', N_SCANS * N_DOCS, 'docs', async () => {
      for (let s = 0; s < N_SCANS; s++) await coll.countDocuments({ score: { $gte: 0 } });
    });

    const sel = await coll.countDocuments({ k: { $lt: 100 } });
    await timed('filter k < 100 (no index), docs returned', N_SCANS * sel, 'docs', async () => {
      for (let s = 0; s < N_SCANS; s++) await coll.find({ k: { $lt: 100 } }).toArray();
    });

    await coll.createIndex({ k: 1 });
    await timed('filter k < 100 (index on k), docs returned', N_SCANS * sel, 'docs', async () => {
      for (let s = 0; s < N_SCANS; s++) await coll.find({ k: { $lt: 100 } }).toArray();
    });

    await timed('aggregate $group over all docs', N_DOCS, 'docs', async () => {
      await coll.aggregate([{ $group: { _id: '$k', n: { $sum: 1 }, avg: { $avg: '$score' } } }]).toArray();
    });

    await timed('updateMany $inc over all docs', N_DOCS, 'docs', async () => {
      await coll.updateMany({}, { $inc: { score: 1 } });
    });

    const hwm = procStatusKb(server.pid, 'VmHWM');
    const rss = procStatusKb(server.pid, 'VmRSS');
    console.log(`server peak RSS (VmHWM): ${hwm === null ? 'n/a' : (hwm / 1024).toFixed(1) + ' MiB'}; ` +
      `current RSS: ${rss === null ? 'n/a' : (rss / 1024).toFixed(1) + ' MiB'}`);
  } finally {
    await client.close();
    await stopMayfly(server);
  }
}

runMain(main);
