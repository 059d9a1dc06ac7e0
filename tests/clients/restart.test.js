'use strict';
/*
 * Engine state across restarts (issue 7), through the Node driver: the
 * multikey flag of an index (a query over an array field returns each
 * document once after a restart), renameCollection (one catalog transaction),
 * stored collection counts and sizes (read back at start-up instead of being
 * recounted; after kill -9 they may be off until validate recounts them, as
 * in mongod), and a command `let` with many variables.
 *
 * Writes that must survive kill -9 use j: true (README: Durability).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();
const J = { writeConcern: { w: 1, j: true } };

async function restart(kill9) {
  await srv.server.restart({ kill9 });
  await srv.reconnect();
}

for (const kill9 of [false, true]) {
  const how = kill9 ? 'kill -9' : 'clean restart';

  h.test(`a view redefined by collMod after ${how}: the new viewOn and pipeline are kept and read`, async () => {
    const dbName = srv.freshDb('viewmod').databaseName;
    let db = srv.client.db(dbName);
    await db.collection('a').insertOne({ _id: 1 }, J);
    await db.collection('b').insertOne({ _id: 2, k: 'x' }, J);
    await db.createCollection('v', { viewOn: 'a', pipeline: [] });
    await db.command({ collMod: 'v', viewOn: 'b', pipeline: [{ $project: { k: 0 } }] });

    await restart(kill9);
    db = srv.client.db(dbName);
    const [info] = await db.listCollections({ name: 'v' }).toArray();
    assert.deepEqual(info.options, { viewOn: 'b', pipeline: [{ $project: { k: 0 } }] });
    assert.deepEqual(await db.collection('v').find().toArray(), [{ _id: 2 }]);
  });

  h.test(`multikey index after ${how}: the array document is returned once`, async () => {
    const dbName = srv.freshDb('mk').databaseName;
    let c = srv.client.db(dbName).collection('c');
    await c.createIndex({ a: 1 });
    await c.insertOne({ _id: 1, a: [1, 2, 3] }, J);
    await c.insertOne({ _id: 2, a: 5 }, J);
    assert.equal((await c.find({ a: { $gte: 0 } }).toArray()).length, 2);

    await restart(kill9);
    c = srv.client.db(dbName).collection('c');
    const docs = await c.find({ a: { $gte: 0 } }).toArray();
    assert.deepEqual(docs.map((d) => d._id).sort(), [1, 2], `got ${JSON.stringify(docs)}`);
    assert.equal(await c.countDocuments({ a: { $gte: 0 } }), 2);
    assert.equal(await c.countDocuments({ a: { $gte: 1, $lte: 3 } }), 1);
    assert.deepEqual((await c.find({ a: { $gte: 0, $lte: 3 } }).toArray()).map((d) => d._id), [1]);
    const explain = await c.find({ a: { $gte: 0 } }).explain('executionStats');
    assert.equal(explain.executionStats.nReturned, 2);
    // A range an array satisfies with two different elements ($gte from one, $lte from another).
    await c.insertOne({ _id: 3, a: [0, 10] }, J);
    assert.deepEqual((await c.find({ a: { $gte: 5, $lte: 6 } }).sort({ _id: 1 }).toArray()).map((d) => d._id), [2, 3]);
  });

  h.test(`renameCollection then ${how}: one collection under the new name, data intact`, async () => {
    const db = srv.freshDb('ren');
    const dbName = db.databaseName;
    await db.collection('src').insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, v: i * 2 })), J);
    await db.collection('src').createIndex({ v: 1 });
    await db.collection('target').insertOne({ _id: 'old target' }, J);
    await srv.client.db('admin').command({ renameCollection: `${dbName}.src`, to: `${dbName}.dst` });
    await srv.client.db('admin').command({ renameCollection: `${dbName}.dst`, to: `${dbName}.target`, dropTarget: true });

    await restart(kill9);
    const db2 = srv.client.db(dbName);
    const names = (await db2.listCollections().toArray()).map((x) => x.name).sort();
    assert.deepEqual(names, ['target']);
    const t = db2.collection('target');
    assert.equal(await t.countDocuments(), 50);
    assert.equal(await t.findOne({ _id: 'old target' }), null);
    assert.deepEqual(await t.findOne({ v: 98 }), { _id: 49, v: 98 });
    assert.deepEqual((await t.listIndexes().toArray()).map((i) => i.name).sort(), ['_id_', 'v_1']);
  });

  h.test(`counts after ${how}: estimatedDocumentCount and collStats.count`, async () => {
    const dbName = srv.freshDb('cnt').databaseName;
    let c = srv.client.db(dbName).collection('c');
    await c.insertMany(Array.from({ length: 1000 }, (_, i) => ({ _id: i, pad: 'x'.repeat(i % 50) })), J);
    await c.deleteMany({ _id: { $lt: 100 } }, J);
    await c.updateOne({ _id: 500 }, { $set: { pad: 'y'.repeat(500) } }, J);
    const before = await srv.client.db(dbName).command({ collStats: 'c' });
    assert.equal(before.count, 900);

    await restart(kill9);
    c = srv.client.db(dbName).collection('c');
    if (kill9) {
      // The stored count may lag the last second of writes; validate recounts and fixes it.
      const v = await srv.client.db(dbName).command({ validate: 'c' });
      assert.equal(v.valid, true, JSON.stringify(v.errors));
      assert.equal(v.nrecords, 900);
    }
    assert.equal(await c.estimatedDocumentCount(), 900);
    const st = await srv.client.db(dbName).command({ collStats: 'c' });
    assert.equal(st.count, 900);
    assert.equal(st.size, before.size);
    assert.equal(await c.countDocuments(), 900);
    // Record ids continue after the restart: new documents neither collide nor vanish.
    await c.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: 5000 + i })), J);
    assert.equal(await c.estimatedDocumentCount(), 910);
    assert.equal(await c.countDocuments({ _id: { $gte: 5000 } }), 10);
  });
}

h.test('concurrent first multikey writes (several connections) all succeed and the flag survives kill -9', async () => {
  const dbName = srv.freshDb('mkc').databaseName;
  const clients = await Promise.all(Array.from({ length: 4 }, () => srv.newClient()));
  await clients[0].db(dbName).collection('c').createIndex({ tags: 1 });
  // Every writer's first document is multikey: they race to make the flag durable (write conflicts are retried).
  await Promise.all(clients.map((cl, k) => cl.db(dbName).collection('c').insertMany(
    Array.from({ length: 25 }, (_, i) => ({ _id: k * 100 + i, tags: [k, i, 'x'] })), J)));
  await restart(true);
  const c = srv.client.db(dbName).collection('c');
  assert.equal(await c.countDocuments({ tags: 'x' }), 100);
  const got = await c.find({ tags: { $gte: 0 } }).toArray();
  assert.equal(got.length, 100, `each document once, got ${got.length}`);
  assert.equal(new Set(got.map((d) => d._id)).size, 100);
});

h.test('aborted (duplicate key) writes do not move the stored count', async () => {
  const dbName = srv.freshDb('dup').databaseName;
  let c = srv.client.db(dbName).collection('c');
  await c.insertMany([{ _id: 1 }, { _id: 2 }], J);
  await h.expectCode(c.insertOne({ _id: 1 }), 11000);
  await h.expectCode(c.insertMany([{ _id: 3 }, { _id: 2 }], { ordered: true }), 11000);
  assert.equal(await c.estimatedDocumentCount(), 3);
  await restart(false);
  c = srv.client.db(dbName).collection('c');
  assert.equal(await c.estimatedDocumentCount(), 3);
  assert.equal(await c.countDocuments(), 3);
});

h.test('a command let with 100 (and 1000) variables', async () => {
  const db = srv.freshDb('let');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, x: i })));
  for (const n of [100, 1000]) {
    const vars = {};
    for (let i = 0; i < n; i++) vars[`v${i}`] = i;
    const docs = await c.find({ $expr: { $eq: ['$x', `$$v${n === 100 ? 7 : 9}`] } }, { let: vars, projection: { z: 0 } }).toArray();
    assert.deepEqual(docs, [{ _id: n === 100 ? 7 : 9, x: n === 100 ? 7 : 9 }]);
    const agg = await c.aggregate([
      { $match: { $expr: { $lte: ['$x', '$$v2'] } } },
      { $project: { _id: 1, y: { $add: ['$x', `$$v${n - 1}`] } } },
      { $sort: { _id: 1 } },
    ], { let: vars }).toArray();
    assert.deepEqual(agg, [{ _id: 0, y: n - 1 }, { _id: 1, y: n }, { _id: 2, y: n + 1 }]);
    const upd = await c.updateMany({ $expr: { $gte: ['$x', '$$v8'] } }, [{ $set: { z: `$$v${n - 1}` } }], { let: vars });
    assert.equal(upd.matchedCount, 2);
    assert.equal(await c.countDocuments({ z: n - 1 }), 2);
  }
  // A bad variable in a large let fails cleanly (and leaks nothing: the ASan build checks at exit).
  const bad = {};
  for (let i = 0; i < 99; i++) bad[`v${i}`] = i;
  bad.Bad = 1;
  await h.expectCode(c.find({}, { let: bad }).toArray(), [16867, 16868, 16866, 2, 9]);
});
