'use strict';
/*
 * The notablescan parameter, as mongod's (jstests/core/notablescan.js and
 * get_executor.cpp's NO_TABLE_SCAN): with it on, a query with a filter that
 * no index can answer fails with 291 NoQueryExecutionPlans instead of
 * scanning the collection, and so does a $natural hint. An empty filter,
 * the admin, local and config databases and system.* collections are
 * exempt, and the server's own work (the TTL monitor) never asks.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'ttlMonitorSleepSecs=1'] });

const admin = () => srv.client.db('admin');
const NO_PLAN = /planner returned error :: caused by :: No indexed plans available, and running with 'notablescan'$/;

async function withNoTableScan(fn) {
  const r = await admin().command({ setParameter: 1, notablescan: true });
  assert.equal(r.was, false);
  try {
    await fn();
  } finally {
    await admin().command({ setParameter: 1, notablescan: false });
  }
}

h.test('notablescan: a filtered query no index answers fails with 291 (find, count, aggregate, update, delete, explain); an empty filter and indexed queries run', async () => {
  const db = srv.freshDb('nts');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 1, b: 1 }, { _id: 2, a: 2, b: null }]);
  assert.equal((await admin().command({ getParameter: 1, notablescan: 1 })).notablescan, false);
  await withNoTableScan(async () => {
    assert.equal((await admin().command({ getParameter: 1, notablescan: 1 })).notablescan, true);
    const e = await h.expectCode(c.find({ a: 1 }).toArray(), 291, NO_PLAN);
    assert.equal(e.codeName, 'NoQueryExecutionPlans');
    await h.expectCode(db.command({ count: 'c', query: { a: 1 } }), 291, NO_PLAN);
    await h.expectCode(c.countDocuments({ a: 1 }), 291, NO_PLAN);
    await h.expectCode(c.aggregate([{ $match: { b: 1 } }]).toArray(), 291, NO_PLAN);
    await h.expectCode(c.distinct('a', { b: 1 }), 291, NO_PLAN);
    await h.expectCode(c.updateOne({ b: 1 }, { $set: { x: 1 } }), 291, NO_PLAN);
    await h.expectCode(c.deleteMany({ b: 1 }), 291, NO_PLAN);
    await h.expectCode(c.find({ a: 1 }).explain(), 291, NO_PLAN);
    await h.expectCode(c.find({ a: 1 }).hint({ $natural: 1 }).toArray(), 291,
      /hint \$natural is not allowed, because 'notablescan' is enabled$/);
    // A tailable cursor always scans (jstests/core/notablescan_capped.js).
    await db.createCollection('capped', { capped: true, size: 4096 });
    await db.collection('capped').insertOne({ a: 1 });
    await h.expectCode(db.collection('capped').find({ a: 1 }, { tailable: true }).next(), 291,
      /Running with 'notablescan', so tailable cursors \(which always do a table scan\) are not allowed$/);
    assert.deepEqual((await db.collection('capped').find({}, { tailable: true }).next()).a, 1);
    // An empty filter is exempt (SERVER-274), as are _id lookups.
    assert.equal((await c.find({}).toArray()).length, 2);
    assert.equal(await c.countDocuments({}), 2);
    assert.equal((await c.aggregate([{ $group: { _id: null, n: { $sum: 1 } } }]).toArray())[0].n, 2);
    assert.deepEqual(await c.findOne({ _id: 2 }), { _id: 2, a: 2, b: null });
    // With an index on a, queries it answers run, the rest of the filter checked on the documents.
    await c.createIndex({ a: 1 });
    assert.equal((await c.find({ a: 1, b: 1 }).toArray()).length, 1);
    assert.equal((await c.find({ a: 2, b: null }).toArray()).length, 1);
    assert.equal((await c.find({ a: { $in: [] } }).toArray()).length, 0);
    assert.equal((await c.updateOne({ a: 1 }, { $set: { x: 1 } })).modifiedCount, 1);
    assert.equal(await c.countDocuments({ a: { $gte: 1 } }), 2);
    // A query the index cannot answer still fails.
    await h.expectCode(c.find({ b: 1 }).toArray(), 291, NO_PLAN);
    // An $in of no values matches nothing: mongod plans it as EOF, no index needed.
    assert.deepEqual(await c.find({ b: { $in: [] } }).toArray(), []);
    assert.deepEqual(await c.find({ b: { $in: [] }, x: 1 }).sort({ b: 1 }).toArray(), []);
    assert.equal(await c.countDocuments({ b: { $in: [] } }), 0);
    assert.equal((await c.deleteMany({ b: { $in: [] } })).deletedCount, 0);
    assert.equal((await c.updateMany({ b: { $in: [] } }, { $set: { y: 1 } })).matchedCount, 0);
    const eof = await c.find({ b: { $in: [] } }).explain();
    assert.equal(eof.queryPlanner.winningPlan.stage, 'EOF');
    assert.deepEqual(await c.find({ $and: [{ x: 1 }, { b: { $in: [] } }] }).toArray(), []);
    assert.deepEqual(await c.find({ $or: [{ b: { $in: [] } }, { $and: [{ x: { $in: [] } }] }] }).toArray(), []);
    await h.expectCode(c.find({ $or: [{ b: { $in: [] } }, { x: 1 }] }).toArray(), 291, NO_PLAN);
    // An embedded document that merely holds a field named $in is an equality: refused as any other.
    await h.expectCode(c.find({ b: { x: 1, $in: [] } }).toArray(), 291, NO_PLAN);
  });
  // Off again: the same query scans.
  assert.equal((await c.find({ b: 1 }).toArray()).length, 1);
});

h.test('notablescan: admin, local, config and system.* collections are exempt, and the TTL monitor keeps deleting', async () => {
  await withNoTableScan(async () => {
    for (const name of ['local', 'config', 'admin']) {
      const o = srv.client.db(name).collection('nts_exempt');
      await o.insertOne({ q: 1 });
      assert.equal((await o.find({ q: 1 }).toArray()).length, 1, name);
      await o.drop();
    }
    const db = srv.freshDb('ntsttl');
    await db.command({ profile: 2 });
    await db.collection('c').insertOne({ q: 1 });
    assert.ok((await db.collection('system.profile').find({ op: 'insert' }).toArray()).length >= 1);
    await db.command({ profile: 0 });
    // Documents already due under a TTL index go, unindexed queries elsewhere refused meanwhile.
    const t = db.collection('t');
    await t.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
    await t.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, at: new Date(Date.now() - 1000), g: i % 2 })));
    await h.waitFor(async () => (await t.countDocuments({})) === 0, 'the TTL monitor did not delete with notablescan on', 10000);
    await h.expectCode(t.find({ g: 1 }).toArray(), 291, NO_PLAN);
  });
});

h.test('notablescan can be set at startup (--setParameter notablescan=true)', async () => {
  const { MongoClient } = require('mongodb');
  const s = new h.MayflyServer({ args: ['--setParameter', 'notablescan=true'] });
  await s.start();
  let cl;
  try {
    cl = await MongoClient.connect(s.uri);
    assert.equal((await cl.db('admin').command({ getParameter: 1, notablescan: 1 })).notablescan, true);
    const c = cl.db('x').collection('c');
    await c.insertOne({ a: 1 });
    await h.expectCode(c.find({ a: 1 }).toArray(), 291, NO_PLAN);
  } finally {
    if (cl) await cl.close();
    await s.stop();
    s.cleanup();
  }
});
