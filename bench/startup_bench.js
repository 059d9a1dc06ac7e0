'use strict';
/*
 * Start-up benchmark for mayflyd: how long a restart takes with many
 * documents. Prints figures only; no assertions.
 *
 *   node bench/startup_bench.js [--docs N]      (default 1,000,000)
 *   (MAYFLYD = binary, default build/mayflyd, the release build)
 *
 * The server (tests/clients/harness.js MayflyServer, fresh temporary
 * --dbpath) is loaded with N documents {_id: i, a: [i, i + 1], s: "..."} in
 * one collection with an index on a, stopped cleanly, and started again.
 * Printed: the time from spawning mayflyd to its first accepted TCP
 * connection, and, from its log, the time between the "starting" line and
 * "catalog loaded" (the catalog load, which reads stored counts instead of
 * scanning documents); then estimatedDocumentCount after the restart. The
 * same after kill -9 (WiredTiger recovery included).
 */
const path = require('node:path');
const h = require(path.join(__dirname, '..', 'tests', 'clients', 'harness.js'));
const { MongoClient } = require('mongodb');

const args = process.argv.slice(2);
const docsArg = args.indexOf('--docs');
const N = docsArg >= 0 ? Number(args[docsArg + 1]) : 1000000;
if (!process.env.MAYFLYD) process.env.MAYFLYD = 'build/mayflyd';

function logTime(srv, what) {
  for (let i = srv.stderrLines.length - 1; i >= 0; i--) {
    const l = srv.stderrLines[i];
    if (l.includes(what)) {
      try { return Date.parse(JSON.parse(l).t.$date); } catch (_) { return null; }
    }
  }
  return null;
}

async function timedStart(srv, label) {
  const t0 = Date.now();
  await srv.start();
  const up = Date.now() - t0;
  const a = logTime(srv, 'starting: pid'), b = logTime(srv, 'catalog loaded');
  const c = new MongoClient(srv.uri);
  await c.connect();
  const n = await c.db('bench').collection('c').estimatedDocumentCount();
  await c.close();
  console.log(`${label}: accepting connections after ${up} ms; catalog load ${a && b ? b - a : '?'} ms; ` +
    `estimatedDocumentCount ${n}`);
}

async function main() {
  const srv = new h.MayflyServer();
  const stop = async () => { await srv.stop().catch(() => {}); srv.cleanup(); };
  process.on('SIGINT', async () => { await stop(); process.exit(130); });
  try {
    await srv.start();
    const client = new MongoClient(srv.uri);
    await client.connect();
    const coll = client.db('bench').collection('c');
    await coll.createIndex({ a: 1 });
    const t0 = Date.now();
    const B = 10000;
    for (let i = 0; i < N; i += B) {
      const docs = [];
      for (let k = i; k < Math.min(N, i + B); k++) docs.push({ _id: k, a: [k, k + 1], s: 'payload-' + k });
      await coll.insertMany(docs, { ordered: false });
    }
    console.log(`loaded ${N} documents in ${Date.now() - t0} ms`);
    await client.close();
    await srv.stop();
    await timedStart(srv, 'clean restart');
    await srv.kill9();
    await timedStart(srv, 'restart after kill -9');
  } finally {
    await stop();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
