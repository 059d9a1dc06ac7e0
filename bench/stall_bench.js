'use strict';
/*
 * Stall benchmark (issue 7): how long do ping, hello, serverStatus and a
 * one-document find from other clients take while slow queries run? Prints
 * figures only, no assertions.
 *
 *   node bench/stall_bench.js [--slow N] [--docs D] [--secs S]
 *   (MAYFLYD=path/to/mayflyd; default build/mayflyd, the release build)
 *
 * mayflyd is started on a free loopback port with a fresh temporary --dbpath
 * (bench/lib/common.js: tests/clients/harness.js MayflyServer), removed at
 * the end, also on error or Ctrl-C. D documents (default 50,000) are
 * loaded; the slow query is a find whose $expr filter $reduce-s a $range per
 * document and matches nothing, its per-document cost calibrated so that one
 * query alone runs about S seconds (default 2). Then N (default 8) slow
 * queries start at once from N clients, and until they have all finished a
 * probe client loops over ping / hello / serverStatus and another runs
 * findOne({_id}) on a small collection; each call's latency is recorded.
 * Printed: the slow queries' wall time, and for each probe the count, p50,
 * p99 and max latency in ms; also serverStatus().connections.active seen
 * while they ran and the server's peak thread count (/proc).
 */
const fs = require('node:fs');
const { MongoClient } = require('mongodb');
const { options, percentile, sortedCopy, mayflyServer, stopMayfly, runMain } = require('./lib/common');

const { num: arg } = options('stall_bench');
const NSLOW = arg('slow', 8);
const NDOCS = arg('docs', 50000);
const SECS = arg('secs', 2);

function slowFilter(work) {
  return {
    $expr: {
      $eq: [{ $reduce: { input: { $range: [0, work] }, initialValue: 0, in: { $add: ['$$value', '$$this'] } } },
        -1],
    },
  };
}

function threads(pid) {
  try { return fs.readdirSync(`/proc/${pid}/task`).length; } catch (_) { return NaN; }
}

async function main() {
  const srv = mayflyServer();
  await srv.start();
  const clients = [];
  const connect = async () => { const c = new MongoClient(srv.uri); await c.connect(); clients.push(c); return c; };
  try {
    const main = await connect();
    const db = main.db('stall');
    const docs = [];
    for (let i = 0; i < NDOCS; i++) docs.push({ i, s: `item-${i}` });
    await db.collection('big').insertMany(docs, { ordered: false });
    await db.collection('small').insertMany([{ _id: 1 }, { _id: 2 }]);

    let work = 20;
    let t0 = Date.now();
    await db.collection('big').find(slowFilter(work)).toArray();
    work = Math.max(20, Math.round(work * SECS * 1000 / Math.max(1, Date.now() - t0)));
    t0 = Date.now();
    await db.collection('big').find(slowFilter(work)).toArray();
    console.log(`one slow query alone: ${Date.now() - t0} ms (per-document $range ${work})`);

    const slowClients = [];
    for (let i = 0; i < NSLOW; i++) slowClients.push(await connect());
    const probe = await connect();
    const finder = await connect();
    const lat = { ping: [], hello: [], serverStatus: [], findOne: [] };
    let running = true;
    let maxActive = 0;
    let maxThreads = threads(srv.pid);
    const threadsBefore = maxThreads;

    t0 = Date.now();
    const slow = Promise.all(slowClients.map((c) => c.db('stall').collection('big').find(slowFilter(work)).toArray()))
      .then(() => { running = false; return Date.now() - t0; });
    const probing = (async () => {
      const admin = probe.db('admin');
      while (running) {
        for (const name of ['ping', 'hello', 'serverStatus']) {
          const s = process.hrtime.bigint();
          const r = await admin.command({ [name]: 1 });
          lat[name].push(Number(process.hrtime.bigint() - s) / 1e6);
          if (name === 'serverStatus') maxActive = Math.max(maxActive, Number(r.connections.active));
        }
        maxThreads = Math.max(maxThreads, threads(srv.pid));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const finding = (async () => {
      const coll = finder.db('stall').collection('small');
      while (running) {
        const s = process.hrtime.bigint();
        await coll.findOne({ _id: 1 });
        lat.findOne.push(Number(process.hrtime.bigint() - s) / 1e6);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const wall = await slow;
    await Promise.all([probing, finding]);
    console.log(`${NSLOW} slow queries at once: ${wall} ms until all finished`);
    for (const [k, xs] of Object.entries(lat)) {
      const pct = (p) => percentile(sortedCopy(xs), p);
      console.log(`  ${k.padEnd(13)} n=${String(xs.length).padStart(5)}  p50 ${pct(0.5).toFixed(1)} ms` +
        `  p99 ${pct(0.99).toFixed(1)} ms  max ${Math.max(...xs).toFixed(1)} ms`);
    }
    console.log(`  connections.active seen: up to ${maxActive}; server threads ${threadsBefore} -> peak ${maxThreads}`);
  } finally {
    for (const c of clients) await c.close(true).catch(() => {});
    await stopMayfly(srv);
  }
}

runMain(main);
