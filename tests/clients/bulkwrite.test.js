'use strict';
/*
 * Client-level bulkWrite (MongoDB 8.0, issue 12) through the Node driver's
 * MongoClient.bulkWrite and as a raw command: several namespaces in one
 * request, ordered and unordered, verbose results and errorsOnly, upserts,
 * sort, arrayFilters, pipelines, let, the results cursor with getMore, and
 * the checks done before anything is written. Also 8.0's sort on
 * updateOne / replaceOne.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

function nsOf(db, c) { return `${db.databaseName}.${c}`; }

h.test('MongoClient.bulkWrite across two collections: counts and verbose per-operation results', async () => {
  const db = srv.freshDb('bw');
  await db.collection('b').insertMany([{ _id: 1, x: 1 }, { _id: 2, x: 2 }, { _id: 3, x: 3 }]);
  const a = nsOf(db, 'a');
  const b = nsOf(db, 'b');
  const r = await srv.client.bulkWrite([
    { name: 'insertOne', namespace: a, document: { _id: 'a1', v: 1 } },
    { name: 'insertOne', namespace: a, document: { _id: 'a2', v: 2 } },
    { name: 'updateOne', namespace: b, filter: { _id: 1 }, update: { $set: { x: 10 } } },
    { name: 'updateMany', namespace: b, filter: { x: { $gte: 2 } }, update: { $inc: { x: 100 } } },
    { name: 'replaceOne', namespace: b, filter: { _id: 9 }, replacement: { x: 9 }, upsert: true },
    { name: 'deleteOne', namespace: a, filter: { _id: 'a2' } },
    { name: 'deleteMany', namespace: b, filter: { x: { $gt: 100 } } },
  ], { verboseResults: true });
  // The ops run in order: the updateMany sees _id 1 already at x: 10.
  assert.equal(r.insertedCount, 2);
  assert.equal(r.matchedCount, 4);
  assert.equal(r.modifiedCount, 4);
  assert.equal(r.upsertedCount, 1);
  assert.equal(r.deletedCount, 4);
  assert.deepEqual(r.insertResults.get(0), { insertedId: 'a1' });
  assert.equal(r.updateResults.get(3).matchedCount, 3);
  assert.equal(r.updateResults.get(4).didUpsert, true);
  assert.equal(r.updateResults.get(4).upsertedId, 9);
  assert.equal(r.deleteResults.get(6).deletedCount, 3);
  assert.deepEqual(await db.collection('a').find().toArray(), [{ _id: 'a1', v: 1 }]);
  assert.deepEqual(await db.collection('b').find().sort({ _id: 1 }).toArray(), [{ _id: 9, x: 9 }]);
});

h.test('ordered stops at the first error; unordered carries on and reports every error with its index', async () => {
  const db = srv.freshDb('bwerr');
  const ns = nsOf(db, 'c');
  await db.collection('c').insertOne({ _id: 1 });
  const ops = [
    { name: 'insertOne', namespace: ns, document: { _id: 2 } },
    { name: 'insertOne', namespace: ns, document: { _id: 1 } },
    { name: 'insertOne', namespace: ns, document: { _id: 3 } },
    { name: 'updateOne', namespace: ns, filter: { _id: 2 }, update: { $inc: { s: 'x' } } },
    { name: 'insertOne', namespace: ns, document: { _id: 4 } },
  ];
  const e1 = await srv.client.bulkWrite(ops).then(() => null, (e) => e);
  assert.ok(e1, 'ordered bulk write failed');
  assert.equal(e1.writeErrors.get(1).code, 11000);
  assert.equal(e1.partialResult.insertedCount, 1);
  assert.deepEqual((await db.collection('c').find().sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 2]);

  await db.collection('c').deleteMany({ _id: { $ne: 1 } });
  const e2 = await srv.client.bulkWrite(ops, { ordered: false }).then(() => null, (e) => e);
  assert.ok(e2);
  assert.deepEqual([...e2.writeErrors.keys()].sort(), [1, 3]);
  assert.equal(e2.writeErrors.get(1).code, 11000);
  assert.equal(e2.writeErrors.get(3).code, 14);
  assert.equal(e2.partialResult.insertedCount, 3);
  assert.deepEqual((await db.collection('c').find().sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 2, 3, 4]);
});

h.test('the raw reply: cursor of items (errorsOnly keeps errors), totals, getMore over a small batchSize', async () => {
  const db = srv.freshDb('bwraw');
  const admin = srv.client.db('admin');
  const ns = nsOf(db, 'r');
  const ops = [];
  for (let i = 0; i < 10; i++) ops.push({ insert: 0, document: { _id: i } });
  ops.push({ insert: 0, document: { _id: 0 } });
  ops.push({ update: 0, filter: { _id: 1 }, updateMods: { $set: { y: 1 } } });
  ops.push({ update: 0, filter: { _id: 'new' }, updateMods: { $set: { y: 2 } }, upsert: true });
  ops.push({ delete: 0, filter: { _id: { $gte: 8 } }, multi: true });
  const r = await admin.command({ bulkWrite: 1, ops, nsInfo: [{ ns }], ordered: false, cursor: { batchSize: 5 } });
  assert.equal(r.ok, 1);
  assert.equal(r.nErrors, 1);
  assert.equal(r.nInserted, 10);
  assert.equal(r.nMatched, 1);
  assert.equal(r.nModified, 1);
  assert.equal(r.nUpserted, 1);
  assert.equal(r.nDeleted, 2);
  assert.equal(r.cursor.ns, 'admin.$cmd.bulkWrite');
  assert.equal(r.cursor.firstBatch.length, 5);
  assert.notEqual(Number(r.cursor.id), 0);
  assert.deepEqual(r.cursor.firstBatch[0], { ok: 1, idx: 0, n: 1 });
  let items = [...r.cursor.firstBatch];
  let id = r.cursor.id;
  while (Number(id) !== 0) {
    const m = await admin.command({ getMore: h.cursorId(id), collection: '$cmd.bulkWrite' });
    items = items.concat(m.cursor.nextBatch);
    id = m.cursor.id;
  }
  assert.equal(items.length, 14);
  assert.deepEqual(items.map((d) => d.idx), [...Array(14).keys()]);
  const dup = items[10];
  assert.equal(dup.ok, 0);
  assert.equal(dup.code, 11000);
  assert.equal(dup.codeName, undefined); // BulkWriteReplyItem::serialize writes code and errmsg only
  assert.deepEqual(dup.keyValue, { _id: 0 });
  assert.deepEqual(items[11], { ok: 1, idx: 11, n: 1, nModified: 1 });
  assert.deepEqual(items[12], { ok: 1, idx: 12, n: 1, nModified: 0, upserted: { _id: 'new' } });
  assert.deepEqual(items[13], { ok: 1, idx: 13, n: 2 });

  const e = await admin.command({ bulkWrite: 1, ops: [{ insert: 0, document: { _id: 1 } }, { insert: 0, document: { _id: 100 } }], nsInfo: [{ ns }], errorsOnly: true, ordered: false });
  assert.equal(e.nErrors, 1);
  assert.equal(e.nInserted, 1);
  assert.equal(e.cursor.firstBatch.length, 1);
  assert.equal(e.cursor.firstBatch[0].idx, 0);
});

h.test('updates: arrayFilters, a pipeline, sort, hint, let; 9 for sort with multi', async () => {
  const db = srv.freshDb('bwupd');
  const c = db.collection('u');
  const ns = nsOf(db, 'u');
  await c.insertMany([{ _id: 1, k: 3, a: [1, 5, 9] }, { _id: 2, k: 1, a: [2] }, { _id: 3, k: 2, a: [7] }]);
  await c.createIndex({ k: 1 });
  const admin = srv.client.db('admin');
  const r = await admin.command({
    bulkWrite: 1,
    nsInfo: [{ ns }],
    let: { bonus: 1000 },
    ops: [
      { update: 0, filter: { _id: 1 }, updateMods: { $set: { 'a.$[big]': 0 } }, arrayFilters: [{ big: { $gt: 4 } }] },
      { update: 0, filter: { _id: 2 }, updateMods: [{ $set: { k: { $add: ['$k', '$$bonus'] } } }] },
      { update: 0, filter: {}, updateMods: { $set: { first: true } }, sort: { k: -1 } },
      { update: 0, filter: { k: { $gte: 0 } }, updateMods: { $set: { h: 1 } }, hint: { k: 1 }, multi: true },
    ],
  });
  assert.equal(r.nErrors, 0, JSON.stringify(r.cursor.firstBatch));
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [
    { _id: 1, k: 3, a: [1, 0, 0], h: 1 },
    { _id: 2, k: 1001, a: [2], first: true, h: 1 },
    { _id: 3, k: 2, a: [7], h: 1 },
  ]);
  const bad = await admin.command({ bulkWrite: 1, nsInfo: [{ ns }], ops: [{ update: 0, filter: {}, updateMods: { $set: { z: 1 } }, sort: { k: 1 }, multi: true }] });
  assert.equal(bad.nErrors, 1);
  assert.equal(bad.cursor.firstBatch[0].code, 9);
});

h.test('8.0 updateOne / replaceOne with sort change the first document in sort order', async () => {
  const c = srv.freshDb('sortupd').collection('s');
  await c.insertMany([{ _id: 1, rank: 2 }, { _id: 2, rank: 9 }, { _id: 3, rank: 5 }]);
  const r1 = await c.updateOne({}, { $set: { top: true } }, { sort: { rank: -1 } });
  assert.equal(r1.matchedCount, 1);
  assert.equal(r1.modifiedCount, 1);
  assert.deepEqual(await c.findOne({ top: true }), { _id: 2, rank: 9, top: true });
  const r2 = await c.replaceOne({ rank: { $lt: 9 } }, { rank: 0 }, { sort: { rank: 1 } });
  assert.equal(r2.modifiedCount, 1);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, rank: 0 });
  const r3 = await c.updateOne({ _id: 7 }, { $set: { rank: 7 } }, { sort: { rank: 1 }, upsert: true });
  assert.equal(r3.upsertedId, 7);
  await h.expectCode(c.s.db.command({ update: 's', updates: [{ q: {}, u: { $set: { z: 1 } }, multi: true, sort: { rank: 1 } }] })
    .then((r) => { if (r.writeErrors) throw r.writeErrors[0]; return r; }), 9);
});

h.test('the request is checked before anything is written: shape, namespaces and nsInfo indexes', async () => {
  const db = srv.freshDb('bwchk');
  const admin = srv.client.db('admin');
  const ns = nsOf(db, 'k');
  const good = { insert: 0, document: { _id: 1 } };
  const cases = [
    [{ insert: 0 }, 40414],
    [{ delete: 0, filter: {}, bogus: 1 }, 40415],
    [{ document: {}, insert: 0 }, 40415],
    [{ insert: 5, document: { _id: 2 } }, 2],
    [{ insert: -1, document: {} }, 2],
    [{ update: 0, filter: {}, updateMods: 5 }, 9],
    [{ update: 0, updateMods: { $set: { a: 1 } } }, 40414],
    [{ delete: 0, filter: {}, multi: 1 }, 14],
  ];
  for (const [bad, code] of cases) {
    await h.expectCode(admin.command({ bulkWrite: 1, ops: [good, bad], nsInfo: [{ ns }] }), code);
  }
  assert.equal(await db.collection('k').countDocuments({}), 0, 'nothing written');
  await h.expectCode(admin.command({ bulkWrite: 1, ops: [good], nsInfo: [{ ns: 'nodot' }] }), 73);
  await h.expectCode(admin.command({ bulkWrite: 1, ops: [], nsInfo: [{ ns }] }), 16);
  await h.expectCode(db.command({ bulkWrite: 1, ops: [good], nsInfo: [{ ns }] }), 13);
  await h.expectCode(admin.command({ bulkWrite: 1, ops: [good], nsInfo: [{ ns }], unknownOption: 1 }), 40415);
});

h.test('w: 0 bulkWrite is applied; a view in nsInfo gives a per-operation 166', async () => {
  const db = srv.freshDb('bwmisc');
  const ns = nsOf(db, 'w');
  await srv.client.bulkWrite([{ name: 'insertOne', namespace: ns, document: { _id: 1 } }], { writeConcern: { w: 0 }, ordered: false });
  const deadline = Date.now() + 5000;
  while ((await db.collection('w').countDocuments({})) === 0 && Date.now() < deadline) await h.sleep(20);
  assert.equal(await db.collection('w').countDocuments({}), 1);
  await db.createCollection('v', { viewOn: 'w', pipeline: [] });
  const r = await srv.client.db('admin').command({ bulkWrite: 1, ops: [{ insert: 0, document: { _id: 2 } }], nsInfo: [{ ns: nsOf(db, 'v') }] });
  assert.equal(r.nErrors, 1);
  assert.equal(r.cursor.firstBatch[0].code, 166);
});
