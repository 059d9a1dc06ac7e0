'use strict';
// Durability: journaled writes survive kill -9; a clean SIGTERM restart keeps
// data, collections and indexes.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

h.test('every {j: true} acknowledged document survives kill -9 and restart', async () => {
  const db = srv.freshDb('crash');
  const c = db.collection('c', { writeConcern: { w: 1, j: true } });
  const acked = [];
  for (let i = 0; i < 200; i++) {
    await c.insertOne({ _id: i, v: `doc-${i}` });
    acked.push(i);
  }
  await c.insertMany(Array.from({ length: 1000 }, (_, i) => ({ _id: 1000 + i, v: 'bulk' })));
  for (let i = 0; i < 1000; i++) acked.push(1000 + i);
  await c.updateOne({ _id: 0 }, { $set: { updated: true } });
  await c.deleteOne({ _id: 1 });
  acked.splice(acked.indexOf(1), 1);

  const info = await srv.server.kill9();
  assert.equal(info.signal, 'SIGKILL');
  await srv.server.start();
  await srv.reconnect();

  const c2 = srv.client.db(db.databaseName).collection('c');
  const got = new Set((await c2.find({}, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
  const missing = acked.filter((id) => !got.has(id));
  assert.deepEqual(missing, [], `${missing.length} acknowledged documents lost`);
  assert.equal(got.has(1), false, 'deleted document stays deleted');
  assert.deepEqual(await c2.findOne({ _id: 0 }), { _id: 0, v: 'doc-0', updated: true });
  assert.equal(await c2.countDocuments(), acked.length);
});

h.test('writes during an unacknowledged crash window never corrupt the store', async () => {
  const db = srv.freshDb('crash2');
  const c = db.collection('c');
  // One journaled write first, so that the collection exists after recovery.
  await c.insertOne({ _id: 'first' }, { writeConcern: { w: 1, j: true } });
  // Fire writes without awaiting, then kill -9 in the middle.
  const pending = [];
  for (let i = 0; i < 500; i++) pending.push(c.insertOne({ _id: i, pad: 'x'.repeat(200) }).catch(() => null));
  await h.sleep(20);
  await srv.server.kill9();
  await Promise.all(pending);
  await srv.server.start();
  await srv.reconnect();
  const c2 = srv.client.db(db.databaseName).collection('c');
  const n = await c2.countDocuments();
  assert.ok(n >= 1 && n <= 501, `count ${n}`);
  assert.ok(await c2.findOne({ _id: 'first' }), 'the journaled document survived');
  const v = await srv.client.db(db.databaseName).command({ validate: 'c' });
  assert.equal(v.valid, true);
  // Still writable after recovery.
  await c2.insertOne({ _id: 'after' });
});

h.test('bulk inserts killed mid-way: records and every index agree after restart (validate)', async () => {
  // Bulk inserts (64 documents and more) write a transaction's records, then each
  // index's keys: a kill -9 between them must leave neither records without keys
  // nor keys without records, and the journaled batches must all be there.
  const db = srv.freshDb('crashbulk');
  const c = db.collection('c');
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
  await c.createIndex({ u: 1 }, { unique: true });
  await c.createIndex({ tags: 1 });
  const doc = (i) => ({ _id: i, at: new Date(), u: `u${i}`, tags: [i % 5, 'all'], pad: 'x'.repeat(100) });
  const batch = (k) => Array.from({ length: 1000 }, (_, i) => doc(k * 1000 + i));
  await c.insertMany(batch(0), { writeConcern: { w: 1, j: true } });
  // Four loaders' unacknowledged batches in flight when the server dies.
  const pending = [];
  for (let k = 1; k <= 40; k++) pending.push(c.insertMany(batch(k), { ordered: false }).catch(() => null));
  await h.sleep(60);
  await srv.server.kill9();
  await Promise.all(pending);
  await srv.server.start();
  await srv.reconnect();
  const db2 = srv.client.db(db.databaseName);
  const c2 = db2.collection('c');
  const v = await db2.command({ validate: 'c', full: true });
  assert.equal(v.valid, true, JSON.stringify(v.errors));
  assert.deepEqual(v.missingIndexEntries ?? [], []);
  assert.deepEqual(v.extraIndexEntries ?? [], []);
  const n = await c2.countDocuments();
  assert.ok(n >= 1000 && n <= 41000, `count ${n}`);
  assert.equal(n % 500, 0, `whole transactions only (${n})`);
  for (const hint of [{ _id: 1 }, { at: 1 }, { u: 1 }]) assert.equal(await c2.countDocuments({}, { hint }), n);
  assert.equal(await c2.countDocuments({ tags: 'all' }, { hint: { tags: 1 } }), n);
  for (let i = 0; i < 1000; i += 111) assert.equal((await c2.findOne({ u: `u${i}` })).u, `u${i}`, 'journaled batch');
  await c2.insertMany(batch(100));
  assert.equal(await c2.countDocuments(), n + 1000);
});

h.test('a clean SIGTERM restart keeps documents, collections and indexes', async () => {
  const db = srv.freshDb('clean');
  await db.collection('a').insertMany(Array.from({ length: 300 }, (_, i) => ({ _id: i, k: i % 7, s: `s${i}` })));
  await db.collection('a').createIndex({ k: 1 });
  await db.collection('a').createIndex({ s: 1 }, { unique: true });
  await db.createCollection('empty');
  await db.collection('b').insertOne({ _id: 'x', nested: { arr: [1, 2, 3] } });

  const info = await srv.server.stop();
  const tail = srv.server.stderrTail(30);
  await srv.server.start();
  await srv.reconnect();

  const db2 = srv.client.db(db.databaseName);
  const names = (await db2.listCollections().toArray()).map((c) => c.name).sort();
  assert.deepEqual(names, ['a', 'b', 'empty']);
  assert.equal(await db2.collection('a').countDocuments(), 300);
  assert.deepEqual(await db2.collection('b').findOne(), { _id: 'x', nested: { arr: [1, 2, 3] } });
  const idx = await db2.collection('a').indexes();
  assert.deepEqual(idx.map((i) => i.name).sort(), ['_id_', 'k_1', 's_1']);
  assert.equal(idx.find((i) => i.name === 's_1').unique, true);
  // The unique index is still enforced and the secondary index still answers.
  await h.expectCode(db2.collection('a').insertOne({ _id: 999, s: 's5' }), 11000);
  assert.equal(await db2.collection('a').countDocuments({ k: 3 }), 43);
  const dbs = await srv.client.db('admin').command({ listDatabases: 1, nameOnly: true });
  assert.ok(dbs.databases.some((d) => d.name === db.databaseName));
  // Checked last so that the data checks above still run: SIGTERM must exit 0 promptly.
  assert.equal(info.forced, undefined, 'server stopped within the deadline');
  assert.ok(info.code === 0 || info.signal === 'SIGTERM', `clean exit: ${JSON.stringify(info)}\n${tail}`);
});

h.test('dropped collections and databases stay dropped after restart', async () => {
  const db = srv.freshDb('dropped');
  await db.collection('keep').insertOne({ a: 1 });
  await db.collection('gone').insertOne({ a: 1 });
  await db.collection('gone').drop();
  const other = srv.freshDb('droppeddb');
  await other.collection('x').insertOne({ a: 1 });
  await other.dropDatabase();
  await srv.server.restart();
  await srv.reconnect();
  const names = (await srv.client.db(db.databaseName).listCollections().toArray()).map((c) => c.name);
  assert.deepEqual(names, ['keep']);
  const dbs = await srv.client.db('admin').command({ listDatabases: 1, nameOnly: true });
  assert.ok(!dbs.databases.some((d) => d.name === other.databaseName));
});
