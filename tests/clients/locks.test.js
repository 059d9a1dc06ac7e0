'use strict';
/*
 * Locks per collection (issue 7): DDL on one collection never waits for a
 * long query on another; DDL on the same collection waits for it and both
 * end correctly; a storm of DDL and reads/writes across a few collections
 * neither deadlocks nor loses the server.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const SLOW = { $expr: { $eq: [{ $strLenCP: { $concat: ['$s', '$s', '$s', '$s', '$s', '$s', '$s', '$s'] } }, -1] } };

async function fill(coll, n) {
  const s = 'some text for the slow filter to concatenate';
  for (let base = 0; base < n; base += 5000) {
    const docs = [];
    for (let i = base; i < Math.min(n, base + 5000); i++) docs.push({ _id: i, s, k: i % 10 });
    await coll.insertMany(docs, { ordered: false });
  }
}

async function queryRunning(ns) {
  const r = await srv.client.db('admin').command({ currentOp: 1, ns });
  return r.inprog.some((o) => o.op === 'query');
}

h.test('DDL on other collections completes while a long query runs', { timeout: 240000 }, async () => {
  const db = srv.freshDb('lk1');
  const big = db.collection('big');
  await fill(big, 150000);
  await db.collection('e').insertOne({ x: 1 });
  await db.collection('f').insertOne({ x: 1 });
  await db.collection('d').insertOne({ x: 1 });
  const c2 = await srv.newClient();
  let finished = false;
  const slow = c2.db(db.databaseName).collection('big').find(SLOW).toArray().then(() => { finished = true; });
  const deadline = Date.now() + 30000;
  while (!(await queryRunning(big.namespace)) && Date.now() < deadline) await h.sleep(2);
  assert.ok(await queryRunning(big.namespace), 'the long query is running');

  await db.createCollection('b');
  await db.collection('c').insertOne({ implicit: true });
  await db.collection('d').createIndex({ x: 1 });
  await db.collection('e').drop();
  await db.collection('f').rename('g');
  await db.collection('g').updateOne({ x: 1 }, { $set: { y: 2 } });
  const doneBeforeQuery = !finished;
  assert.ok(await queryRunning(big.namespace) || finished);
  await slow;
  await c2.close();
  assert.ok(doneBeforeQuery, 'the DDL on other collections did not wait for the query');
  const names = (await db.listCollections().toArray()).map((c) => c.name).sort();
  assert.deepEqual(names, ['b', 'big', 'c', 'd', 'g']);
  assert.equal((await db.collection('g').findOne({ x: 1 })).y, 2);
});

h.test('a drop of the collection a query reads waits for the query, and both end correctly', { timeout: 240000 }, async () => {
  const db = srv.freshDb('lk2');
  const big = db.collection('big');
  await fill(big, 60000);
  const c2 = await srv.newClient();
  const slow = c2.db(db.databaseName).collection('big').find(SLOW).toArray().then((r) => r, (e) => e);
  const deadline = Date.now() + 30000;
  while (!(await queryRunning(big.namespace)) && Date.now() < deadline) await h.sleep(2);
  assert.equal(await big.drop(), true);
  const r = await slow;
  await c2.close();
  assert.ok(Array.isArray(r), `the query completed: ${r && r.message}`);
  assert.equal(r.length, 0);
  assert.equal((await db.listCollections().toArray()).length, 0);
});

h.test('a storm of DDL with reads, writes and $lookup across collections never deadlocks', { timeout: 240000 }, async () => {
  const db = srv.freshDb('lk3');
  const names = ['a', 'b', 'c', 'd'];
  for (const n of names) await db.collection(n).insertMany(Array.from({ length: 200 }, (_, i) => ({ i, k: i % 5 })));
  const clients = await Promise.all(Array.from({ length: 6 }, () => srv.newClient()));
  const expected = new Set([26, 48, 27, 85, 86, 175, 276, 11000, 112, 20, 73, 2, 166, 24]);
  const unexpected = [];
  const until = Date.now() + 6000;
  const pick = (a) => a[Math.floor(Math.random() * a.length)];
  async function guard(p) {
    try { await p; } catch (e) { if (!expected.has(e.code)) unexpected.push(`${e.code} ${e.message}`); }
  }
  async function ddl(c) {
    const d = c.db(db.databaseName);
    while (Date.now() < until) {
      const n = pick(names);
      switch (Math.floor(Math.random() * 6)) {
        case 0: await guard(d.collection(n).drop()); break;
        case 1: await guard(d.createCollection(n)); break;
        case 2: {
          const to = pick(names.filter((x) => x !== n));
          await guard(d.collection(n).rename(to, { dropTarget: Math.random() < 0.5 }));
          break;
        }
        case 3: await guard(d.collection(n).createIndex({ k: 1 })); break;
        case 4: await guard(d.collection(n).dropIndex('k_1')); break;
        default: await guard(d.command({ collMod: n, validationLevel: 'off' })); break;
      }
    }
  }
  async function work(c) {
    const d = c.db(db.databaseName);
    while (Date.now() < until) {
      const n = pick(names);
      switch (Math.floor(Math.random() * 5)) {
        case 0: await guard(d.collection(n).insertMany(Array.from({ length: 20 }, (_, i) => ({ i, k: i % 5 })))); break;
        case 1: await guard(d.collection(n).find({ k: 2 }).toArray()); break;
        case 2: await guard(d.collection(n).updateMany({ k: 1 }, { $inc: { u: 1 } })); break;
        case 3: await guard(d.collection(n).deleteMany({ k: 4 })); break;
        default:
          await guard(d.collection(n).aggregate([{ $limit: 50 }, { $lookup: { from: pick(names), localField: 'i', foreignField: 'i', as: 'm' } }]).toArray());
      }
    }
  }
  await Promise.all([ddl(clients[0]), ddl(clients[1]), work(clients[2]), work(clients[3]), work(clients[4]), work(clients[5])]);
  await Promise.all(clients.map((c) => c.close()));
  assert.deepEqual(unexpected, []);
  const ping = await srv.client.db('admin').command({ ping: 1 });
  assert.equal(ping.ok, 1);
  for (const c of await db.listCollections().toArray()) {
    const v = await db.command({ validate: c.name });
    assert.equal(v.valid, true, `${c.name}: ${JSON.stringify(v.errors)}`);
  }
});
