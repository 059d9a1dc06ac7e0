'use strict';
// Slow queries must not starve everything else (issue 7): with more slow
// queries running than the old fixed pool had workers (4), hello / ping /
// serverStatus from another client, and a simple find on another collection
// from yet another client, still answer while the slow ones run; and
// serverStatus().connections.active counts the connections with a command in
// progress. Also: SIGTERM with commands in flight shuts down cleanly and the
// data survives a restart.
//
// Nothing here asserts speed: "promptly" means "before any slow query has
// finished", an ordering, and the slow queries are calibrated to run for
// several seconds on this machine.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { MongoClient } = require('mongodb');
const h = require('./harness');

// Two warm workers (fewer than the slow queries on any machine), so the pool must grow.
const WARM = 2;
const srv = h.useServer({ args: ['--workers', String(WARM)] });

const NDOCS = 50000;
const NSLOW = 8;
const LIVENESS_MS = 120000; // a bound many times the expected time, for liveness only

async function fillBig(coll, n = NDOCS) {
  const docs = [];
  for (let i = 0; i < n; i++) docs.push({ i, s: `item-${i}`, g: i % 97 });
  await coll.insertMany(docs, { ordered: false });
}

// A filter that matches nothing and costs `work` additions per document.
function slowFilter(work, tag) {
  return {
    $expr: {
      $eq: [{ $reduce: { input: { $range: [0, work] }, initialValue: 0, in: { $add: ['$$value', '$$this'] } } },
        -1],
    },
    tag: { $ne: tag },
  };
}

// Picks a per-document cost so that one slow query alone runs about 2 s here
// (8 of them at once then run for several seconds on a couple of cores).
async function calibrate(coll) {
  const work = 20;
  const t0 = Date.now();
  await coll.find(slowFilter(work, 'calibrate')).maxTimeMS(LIVENESS_MS).toArray();
  const ms = Math.max(1, Date.now() - t0);
  return Math.max(work, Math.min(20000, Math.round(work * 2000 / ms)));
}

// The server's thread count (Linux /proc), or null where unavailable.
function threadCount() {
  try {
    return fs.readdirSync(`/proc/${srv.server.pid}/task`).length;
  } catch (_) {
    return null;
  }
}

async function clients(n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(await srv.newClient({ maxPoolSize: 2 }));
  return out;
}

// Waits until currentOp shows `n` running operations whose comment is `tag`.
async function waitRunning(admin, tag, n) {
  const deadline = Date.now() + LIVENESS_MS;
  for (;;) {
    const r = await admin.command({ currentOp: 1 });
    const mine = r.inprog.filter((op) => op.command && op.command.comment === tag);
    if (mine.length >= n) return mine.length;
    if (Date.now() > deadline) throw new Error(`only ${mine.length} of ${n} slow queries seen running`);
    await h.sleep(50);
  }
}

h.test('fast commands and a simple find answer while 8 slow queries run', { timeout: 300000 }, async () => {
  const db = srv.freshDb('stalls');
  const big = db.collection('big');
  await fillBig(big);
  await db.collection('small').insertMany([{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
  const work = await calibrate(big);
  const threadsBefore = threadCount();

  const slowClients = await clients(NSLOW);
  const probe = await srv.newClient();
  const other = await srv.newClient();
  const admin = probe.db('admin');
  const tag = `slow-${Date.now()}`;

  let finished = 0;
  const slow = slowClients.map((c) => c.db(db.databaseName).collection('big')
    .find(slowFilter(work, tag)).comment(tag).maxTimeMS(LIVENESS_MS).toArray()
    .then((docs) => { finished += 1; return docs; }));
  const seen = await waitRunning(admin, tag, NSLOW);
  assert.equal(finished, 0, 'the slow queries were still running when currentOp saw them');
  assert.ok(seen >= NSLOW);

  // The probes: each must come back while every slow query is still running.
  const ping = await admin.command({ ping: 1 });
  assert.equal(ping.ok, 1);
  assert.equal(finished, 0, 'ping answered before any slow query finished');
  const hello = await admin.command({ hello: 1 });
  assert.equal(hello.isWritablePrimary, true);
  assert.equal(finished, 0, 'hello answered before any slow query finished');
  const status = await admin.command({ serverStatus: 1 });
  assert.equal(status.ok, 1);
  assert.equal(finished, 0, 'serverStatus answered before any slow query finished');
  // 8 slow queries plus this serverStatus are in progress.
  assert.ok(Number(status.connections.active) >= NSLOW + 1,
    `connections.active ${status.connections.active} counts the running commands`);
  const threadsBusy = threadCount();
  if (threadsBefore !== null) {
    // 8 running queries need at least NSLOW - WARM workers beyond the warm ones.
    assert.ok(threadsBusy >= threadsBefore + NSLOW - WARM, `threads grew: ${threadsBefore} -> ${threadsBusy}`);
  }

  // A plain find on another collection from yet another client: the pool grew past the old 4.
  const small = await other.db(db.databaseName).collection('small').find({}).sort({ _id: 1 }).toArray();
  assert.deepEqual(small.map((d) => d.v), ['a', 'b']);
  assert.equal(finished, 0, 'a simple find answered before any slow query finished');
  // A fresh connection's handshake (hello on a new socket) goes through too.
  const fresh = new MongoClient(srv.uri);
  await fresh.connect();
  assert.equal((await fresh.db('admin').command({ ping: 1 })).ok, 1);
  await fresh.close();
  assert.equal(finished, 0, 'a new client connected before any slow query finished');

  const results = await Promise.all(slow);
  for (const r of results) assert.equal(r.length, 0);
  assert.equal(finished, NSLOW);

  // Back to just the asking connection (a driver's heartbeat may briefly add one).
  const deadline = Date.now() + LIVENESS_MS;
  let active;
  for (;;) {
    active = Number((await admin.command({ serverStatus: 1 })).connections.active);
    if (active === 1 || Date.now() > deadline) break;
    await h.sleep(100);
  }
  assert.equal(active, 1, 'connections.active is 1 (this serverStatus) once the slow queries are done');

  // The extra workers retire after idling a few seconds (each closing its storage session).
  if (threadsBefore !== null) {
    let now;
    for (;;) {
      now = threadCount();
      if (now <= threadsBefore + 1 || Date.now() > deadline + LIVENESS_MS) break;
      await h.sleep(250);
    }
    assert.ok(now <= threadsBefore + 1, `idle workers retired: ${threadsBusy} -> ${now} (started at ${threadsBefore})`);
    // And the server still serves data commands on the shrunk pool.
    assert.equal(await big.countDocuments({ g: 0 }), Math.floor((NDOCS - 1) / 97) + 1);
  }
});

h.test('connections.active is 1 on an idle server: the asking connection', async () => {
  const r = await srv.client.db('admin').command({ serverStatus: 1 });
  assert.ok(Number(r.connections.active) >= 1);
  assert.ok(Number(r.connections.active) <= Number(r.connections.current));
});

h.test('a connection still runs its commands in order while the pool grows', async () => {
  const db = srv.freshDb('order');
  const coll = db.collection('c');
  const c = await srv.newClient({ maxPoolSize: 1 });
  const cc = c.db(db.databaseName).collection('c');
  // One connection: an insert, then a ping (fast lane), then a find (data lane): the find sees the insert.
  const ops = [];
  for (let i = 0; i < 20; i++) {
    ops.push(cc.insertOne({ i }));
    ops.push(c.db('admin').command({ ping: 1 }));
    ops.push(cc.countDocuments({}).then((n) => ({ n, i })));
  }
  const res = await Promise.all(ops);
  for (const r of res) {
    if (r && r.n !== undefined) assert.ok(r.n >= r.i + 1, `count ${r.n} after insert ${r.i}`);
  }
  assert.equal(await coll.countDocuments({}), 20);
});

h.test('SIGTERM with commands in flight exits cleanly; data intact after restart', { timeout: 300000 }, async (t) => {
  const s = new h.MayflyServer();
  await s.start();
  let c = new MongoClient(s.uri);
  try {
    await c.connect();
    const coll = c.db('keep').collection('big');
    await fillBig(coll, 20000);
    await coll.createIndex({ g: 1 });
    const work = await calibrate(coll);
    const tag = `term-${Date.now()}`;
    const busy = [];
    for (let i = 0; i < 6; i++) {
      const bc = new MongoClient(s.uri);
      await bc.connect();
      busy.push(bc);
    }
    const inflight = busy.map((bc) => bc.db('keep').collection('big').find(slowFilter(work, tag))
      .comment(tag).maxTimeMS(LIVENESS_MS).toArray().then(() => 'done', (e) => `error: ${e.message}`));
    const deadline = Date.now() + LIVENESS_MS;
    for (;;) {
      const r = await c.db('admin').command({ currentOp: 1 });
      if (r.inprog.filter((op) => op.command && op.command.comment === tag).length >= 6) break;
      if (Date.now() > deadline) throw new Error('slow queries never showed in currentOp');
      await h.sleep(50);
    }
    await c.close(true);
    s.expectingExit = true;
    s.proc.kill('SIGTERM');
    const info = await s.waitExit(LIVENESS_MS);
    assert.ok(info, 'mayflyd exited after SIGTERM');
    assert.equal(info.code, 0, `clean exit: ${JSON.stringify(info)}\n${s.stderrTail(20)}`);
    assert.match(s.stderrTail(400), /shutdown complete/);
    // Every in-flight query settles (its reply is written before its connection closes).
    const outcomes = await Promise.all(inflight);
    assert.equal(outcomes.length, 6);
    t.diagnostic(`in-flight outcomes: ${JSON.stringify(outcomes)}`);
    for (const bc of busy) await bc.close(true).catch(() => {});

    await s.start();
    c = new MongoClient(s.uri);
    await c.connect();
    const again = c.db('keep').collection('big');
    assert.equal(await again.countDocuments({}), 20000);
    assert.equal(await again.countDocuments({ g: 5 }), Math.floor((20000 - 1 - 5) / 97) + 1);
    const idx = await again.listIndexes().toArray();
    assert.ok(idx.some((i) => i.key.g === 1), 'the index survived');
  } finally {
    await c.close(true).catch(() => {});
    const info = await s.stop();
    s.cleanup();
    assert.ok(info && !info.forced && info.code === 0, `second shutdown clean: ${JSON.stringify(info)}`);
  }
});
