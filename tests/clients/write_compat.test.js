'use strict';
/*
 * The write path's replies as mongod 8.0 builds them, through the Node
 * driver and raw commands: what a failed statement adds to the update and
 * delete commands' counters (write_commands.cpp's populateReply), and the
 * shape of 8.0's bulkWrite reply items and totals (bulk_write.cpp's
 * BulkWriteReplies, bulk_write_parser.cpp's BulkWriteReplyItem::serialize).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

h.test('a multi-update that fails midway adds nothing to n / nModified; what it changed stays changed', async () => {
  const db = srv.freshDb('wc_updn');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, v: 1 }, { _id: 2, v: 'x' }, { _id: 3, v: 3 }, { _id: 4, v: 4 }]);
  const r = await db.command({
    update: 'c',
    updates: [
      { q: { _id: 4 }, u: { $set: { w: 1 } } },
      { q: {}, u: { $inc: { v: 1 } }, multi: true },
      { q: { _id: 3 }, u: { $set: { w: 1 } } },
    ],
    ordered: false,
  });
  // Only statements 0 and 2 count, as mongod's populateReply skips a failed statement's result.
  assert.equal(r.n, 2, JSON.stringify(r));
  assert.equal(r.nModified, 2, JSON.stringify(r));
  assert.equal(r.writeErrors.length, 1);
  assert.equal(r.writeErrors[0].index, 1);
  assert.equal(r.writeErrors[0].code, 14);
  // The document the multi-update reached before its error keeps its change (no rollback, as mongod).
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, v: 2 });

  // Through the driver's collection bulkWrite: the failed updateMany adds nothing to matched / modified.
  const e = await c.bulkWrite([
    { updateOne: { filter: { _id: 4 }, update: { $set: { z: 1 } } } },
    { updateMany: { filter: {}, update: { $inc: { v: 1 } } } },
  ], { ordered: false }).then(() => null, (err) => err);
  assert.ok(e, 'the bulk write failed');
  assert.equal(e.result.matchedCount, 1);
  assert.equal(e.result.modifiedCount, 1);
});

h.test('bulkWrite: a failed multi-update adds nothing to nMatched / nModified', async () => {
  const db = srv.freshDb('wc_bwn');
  await db.collection('c').insertMany([{ _id: 1, v: 1 }, { _id: 2, v: 'x' }]);
  const admin = srv.client.db('admin');
  const r = await admin.command({
    bulkWrite: 1,
    ops: [
      { update: 0, filter: {}, updateMods: { $inc: { v: 1 } }, multi: true },
      { update: 0, filter: { _id: 2 }, updateMods: { $set: { w: 1 } } },
    ],
    nsInfo: [{ ns: `${db.databaseName}.c` }],
    ordered: false,
  });
  assert.equal(r.nErrors, 1);
  assert.equal(r.nMatched, 1, JSON.stringify(r));
  assert.equal(r.nModified, 1, JSON.stringify(r));
  assert.deepEqual(r.cursor.firstBatch[1], { ok: 1, idx: 1, n: 1, nModified: 1 });
  // Through the driver: the partial result counts the second op only.
  const e = await srv.client.bulkWrite([
    { name: 'updateMany', namespace: `${db.databaseName}.c`, filter: {}, update: { $inc: { v: 1 } } },
    { name: 'updateOne', namespace: `${db.databaseName}.c`, filter: { _id: 1 }, update: { $set: { w: 2 } } },
  ], { ordered: false }).then(() => null, (err) => err);
  assert.ok(e, 'the client bulk write failed');
  assert.equal(e.partialResult.matchedCount, 1);
  assert.equal(e.partialResult.modifiedCount, 1);
});

h.test('bulkWrite error items: n: 0, nModified only for updates, no codeName; ok is a double', async () => {
  const db = srv.freshDb('wc_bwitems');
  await db.collection('c').insertMany([{ _id: 1, v: 'x' }]);
  const admin = srv.client.db('admin');
  const r = await admin.command({
    bulkWrite: 1,
    ops: [
      { insert: 0, document: { _id: 1 } },
      { update: 0, filter: { _id: 1 }, updateMods: { $inc: { v: 1 } } },
      { delete: 0, filter: { $bad: 1 } },
      { insert: 0, document: { _id: 2 } },
    ],
    nsInfo: [{ ns: `${db.databaseName}.c` }],
    ordered: false,
  }, { promoteValues: false });
  // The reply's fields in BulkWriteCommandReply's order.
  assert.deepEqual(Object.keys(r), ['cursor', 'nErrors', 'nInserted', 'nMatched', 'nModified', 'nUpserted', 'nDeleted', 'ok']);
  const items = r.cursor.firstBatch;
  assert.equal(items.length, 4);
  // Field order and presence as BulkWriteReplyItem::serialize: ok, idx, code, errmsg, extra info, n, [nModified].
  assert.deepEqual(Object.keys(items[0]), ['ok', 'idx', 'code', 'errmsg', 'keyPattern', 'keyValue', 'n']);
  assert.equal(items[0].ok._bsontype, 'Double');
  assert.equal(Number(items[0].ok), 0);
  assert.equal(Number(items[0].code), 11000);
  assert.equal(Number(items[0].n), 0);
  assert.deepEqual(Object.keys(items[1]), ['ok', 'idx', 'code', 'errmsg', 'n', 'nModified']);
  assert.equal(Number(items[1].code), 14);
  assert.equal(Number(items[1].nModified), 0);
  assert.deepEqual(Object.keys(items[2]), ['ok', 'idx', 'code', 'errmsg', 'n']);
  assert.equal(Number(items[2].code), 2);
  assert.deepEqual(Object.keys(items[3]), ['ok', 'idx', 'n']);
  assert.equal(items[3].ok._bsontype, 'Double');
  assert.equal(Number(items[3].ok), 1);
});

h.test('bulkWrite: an op naming a missing nsInfo entry is 2 with the op printed as mongod prints a document', async () => {
  const admin = srv.client.db('admin');
  const err = await admin.command({
    bulkWrite: 1,
    ops: [{ insert: 1, document: { a: 'x' } }],
    nsInfo: [{ ns: 'wc_idx.c' }],
  }).then(() => null, (e) => e);
  assert.ok(err);
  assert.equal(err.code, 2);
  assert.equal(err.message, 'BulkWrite ops entry { insert: 1, document: { a: "x" } } has an invalid nsInfo index.');
});

h.test('writes to system.views are refused as mongod\'s userAllowedWriteNS (73); a view stays a view', async () => {
  const db = srv.freshDb('wc_sysviews');
  await db.collection('src').insertOne({ _id: 1 });
  await db.createCollection('v', { viewOn: 'src', pipeline: [] });
  const ns = `${db.databaseName}.system.views`;
  for (const cmd of [
    { insert: 'system.views', documents: [{ _id: `${db.databaseName}.x`, viewOn: 'src', pipeline: [] }] },
    { update: 'system.views', updates: [{ q: {}, u: { $set: { viewOn: 'zzz' } }, multi: true }] },
    { delete: 'system.views', deletes: [{ q: {}, limit: 0 }] },
    { findAndModify: 'system.views', query: {}, update: { $set: { viewOn: 'zzz' } } },
  ]) {
    await h.expectCode(db.command(cmd), 73, new RegExp(`^cannot write to ${ns.replace(/\./g, '\\.')}$`));
  }
  await h.expectCode(db.command({ insert: 'system.profile', documents: [{}] }), 73,
    new RegExp(`^cannot write to ${db.databaseName}\\.system\\.profile$`));
  // Nothing was created or changed: the view reads its source, no collection named x appeared.
  assert.deepEqual(await db.collection('v').find().toArray(), [{ _id: 1 }]);
  assert.deepEqual((await db.listCollections({ name: { $in: ['x', 'system.views'] } }).toArray())
    .filter((c) => c.type === 'collection' && c.name === 'x'), []);
});

h.test('a ".system." inside a collection name is 2 "Invalid namespace" for every write command', async () => {
  const db = srv.freshDb('wc_dotsys');
  const re = new RegExp(`^Invalid namespace: ${db.databaseName}\\.a\\.system\\.b$`);
  await h.expectCode(db.command({ insert: 'a.system.b', documents: [{}] }), 2, re);
  await h.expectCode(db.command({ update: 'a.system.b', updates: [{ q: {}, u: { $set: { z: 1 } }, upsert: true }] }), 2, re);
  await h.expectCode(db.command({ delete: 'a.system.b', deletes: [{ q: {}, limit: 0 }] }), 2, re);
  await h.expectCode(db.command({ findAndModify: 'a.system.b', query: {}, update: { $set: { z: 1 } }, upsert: true }), 2, re);
  assert.deepEqual(await db.listCollections().toArray(), []);
});

h.test('bulkWrite checks each op\'s namespace as mongod: an insert fails the command, an update or delete its op', async () => {
  const db = srv.freshDb('wc_bwns');
  const admin = srv.client.db('admin');
  const d = db.databaseName;
  // An insert naming a namespace no client may write: the whole command fails (handleInsertOp checks outside its try).
  await h.expectCode(admin.command({ bulkWrite: 1, ops: [{ insert: 0, document: { a: 1 } }], nsInfo: [{ ns: `${d}.system.profile` }] }),
    73, new RegExp(`^cannot write to ${d}\\.system\\.profile$`));
  await h.expectCode(admin.command({ bulkWrite: 1, ops: [{ insert: 0, document: { a: 1 } }], nsInfo: [{ ns: `${d}.system.foo` }] }),
    73, new RegExp(`^Invalid system namespace: ${d}\\.system\\.foo$`));
  // Inserts grouped just ahead of such an insert are not written either: mongod checks it before flushing them.
  await h.expectCode(admin.command({
    bulkWrite: 1,
    ops: [{ insert: 0, document: { _id: 1 } }, { insert: 1, document: { a: 1 } }],
    nsInfo: [{ ns: `${d}.ok` }, { ns: `${d}.system.views` }],
  }), 73);
  assert.equal(await db.collection('ok').countDocuments(), 0);
  // Updates and deletes: an error item for that op; the others run.
  const r = await admin.command({
    bulkWrite: 1,
    ops: [
      { update: 1, filter: {}, updateMods: { $set: { b: 1 } }, upsert: true },
      { delete: 2, filter: {} },
      { insert: 0, document: { _id: 2 } },
      { update: 3, filter: {}, updateMods: { $set: { b: 1 } } },
    ],
    nsInfo: [{ ns: `${d}.ok` }, { ns: `${d}.system.foo` }, { ns: `${d}.a.system.b` }, { ns: `${d}.x$y` }],
    ordered: false,
  });
  assert.equal(r.nErrors, 3);
  assert.equal(r.nInserted, 1);
  assert.deepEqual(r.cursor.firstBatch.map((i) => [i.idx, i.code ?? 0]), [[0, 73], [1, 2], [2, 0], [3, 73]]);
  assert.equal(r.cursor.firstBatch[0].errmsg, `Invalid system namespace: ${d}.system.foo`);
  assert.equal(r.cursor.firstBatch[3].errmsg, 'Invalid collection name: x$y');
  assert.deepEqual((await db.listCollections().toArray()).map((c) => c.name), ['ok']);
});

h.test('positional $ takes the position of mongod\'s normalized filter: the $and child last in sorted order, an $or only as one $in', async () => {
  // mongod matches with the canonical query's normalized tree (MatchExpression::normalize: optimize, then
  // sortTree by match type, then path): every array predicate of an $and records its position, so the last
  // one in that order wins; an $or's equalities and regexes on one path are joined into one $in (7.0+), whose
  // position is the first element matching any of them; an $or of two or more units records none.
  const db = srv.freshDb('wc_pos');
  const c = db.collection('c');
  const cases = [
    // [document, filter, update, expected document]
    [{ items: [{ sku: 'abc', qty: 1 }, { sku: 'x', qty: 10 }] }, { 'items.sku': 'abc', 'items.qty': { $gt: 5 } },
      { $set: { 'items.$.hit': true } }, { items: [{ sku: 'abc', qty: 1 }, { sku: 'x', qty: 10, hit: true }] }],
    [{ items: [{ sku: 'abc', qty: 1 }, { sku: 'x', qty: 10 }] }, { 'items.qty': { $gt: 5 }, 'items.sku': 'abc' },
      { $set: { 'items.$.hit': true } }, { items: [{ sku: 'abc', qty: 1 }, { sku: 'x', qty: 10, hit: true }] }],
    [{ a: [1, 2, 3] }, { a: { $gt: 0, $gte: 2 } }, { $set: { 'a.$': 9 } }, { a: [1, 9, 3] }],
    [{ a: [1, 2, 3] }, { $and: [{ a: 3 }, { a: { $gt: 0 } }] }, { $set: { 'a.$': 9 } }, { a: [9, 2, 3] }],
    [{ a: [1, 2], b: [4, 5] }, { a: 1, b: 5 }, { $set: { 'a.$': 9 } }, { a: [1, 9], b: [4, 5] }],
    [{ a: [1, 2, 3] }, { $or: [{ a: { $gt: 2 } }] }, { $set: { 'a.$': 9 } }, { a: [1, 2, 9] }],
    [{ a: [1, 2, 3] }, { $or: [{ a: 3 }, { a: 2 }] }, { $set: { 'a.$': 9 } }, { a: [1, 9, 3] }],
    [{ a: ['x', 'yz', 'q'] }, { $or: [{ a: 'q' }, { a: /z/ }] }, { $set: { 'a.$': 'W' } }, { a: ['x', 'W', 'q'] }],
    [{ a: [1, 2, 3], b: [7] }, { $and: [{ b: 7 }, { $or: [{ a: 3 }, { a: 2 }] }] }, { $set: { 'a.$': 9 } }, { a: [1, 9, 3], b: [7] }],
  ];
  for (const [i, [doc, q, u, want]] of cases.entries()) {
    await c.insertOne({ _id: i, ...doc });
    const r = await c.updateOne({ _id: i, ...q }, u);
    assert.equal(r.modifiedCount, 1, JSON.stringify(q));
    assert.deepEqual(await c.findOne({ _id: i }, { projection: { _id: 0 } }), want, JSON.stringify(q));
  }
  // The positional projection follows the same rule.
  await c.insertOne({ _id: 'p', items: [{ sku: 'abc', qty: 1 }, { sku: 'x', qty: 10 }] });
  const got = await c.findOne({ _id: 'p', 'items.sku': 'abc', 'items.qty': { $gt: 5 } }, { projection: { _id: 0, 'items.$': 1 } });
  assert.deepEqual(got, { items: [{ sku: 'x', qty: 10 }] });
});

h.test('positional $ after an $or of two or more units: no position (OrMatchExpression passes no MatchDetails), 2 / 51246', async () => {
  // mongod's OrMatchExpression::matches gives its children no MatchDetails, so an $or that stays an $or
  // after optimize() (not one child, not one $in) records no array position even when it matched through one.
  const db = srv.freshDb('wc_posor');
  const c = db.collection('c');
  await c.insertOne({ _id: 1, items: [{ sku: 'x', qty: 1 }, { sku: 'abc', qty: 2 }], b: [7] });
  for (const q of [
    { $or: [{ 'items.sku': 'abc' }, { 'items.qty': 7 }] },
    { $or: [{ 'items.qty': { $gt: 1 } }, { 'items.sku': 'zz' }] },
    { _id: 1, $or: [{ 'items.sku': 'abc' }, { b: 7 }, { 'items.sku': 'x' }] },
  ]) {
    await assert.rejects(c.updateOne(q, { $set: { 'items.$.hit': true } }),
      (e) => e.code === 2 && /positional operator did not find the match needed from the query/.test(e.message), JSON.stringify(q));
    await assert.rejects(c.findOne(q, { projection: { 'items.$': 1 } }), (e) => e.code === 51246, JSON.stringify(q));
  }
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, items: [{ sku: 'x', qty: 1 }, { sku: 'abc', qty: 2 }], b: [7] });
  // Equalities on one path are one $in, which does record: the first element matching any of them.
  const r = await c.updateOne({ $or: [{ 'items.sku': 'abc' }, { 'items.sku': 'x' }] }, { $set: { 'items.$.hit': true } });
  assert.equal(r.modifiedCount, 1);
  assert.deepEqual((await c.findOne({ _id: 1 })).items, [{ sku: 'x', qty: 1, hit: true }, { sku: 'abc', qty: 2 }]);
});

h.test('an upsert\'s update errors name the new document "no id", as mongod applies the update before adding _id', async () => {
  const db = srv.freshDb('wc_noid');
  const one = async (q, u) => {
    const r = await db.command({ update: 'c', updates: [{ q, u, upsert: true }] });
    assert.equal(r.writeErrors?.length, 1, JSON.stringify(r));
    return r.writeErrors[0];
  };
  let e = await one({ a: 5 }, { $push: { a: 1 } });
  assert.equal(e.code, 2);
  assert.equal(e.errmsg, "The field 'a' must be an array but is of type int in document {no id}");
  e = await one({ a: 'x' }, { $inc: { a: 1 } });
  assert.equal(e.code, 14);
  assert.equal(e.errmsg, "Cannot apply $inc to a value of non-numeric type. {no id} has the field 'a' of non-numeric type string");
  // With an _id among the query's equalities the document has it from the start.
  e = await one({ _id: 5, a: 5 }, { $push: { a: 1 } });
  assert.equal(e.errmsg, "The field 'a' must be an array but is of type int in document {_id: 5}");
  assert.equal(await db.collection('c').countDocuments(), 0);
});

h.test('an insert into a view is a write error 166 per document (the first when ordered), as mongod\'s insertBatchAndHandleErrors', async () => {
  const db = srv.freshDb('wc_insview');
  await db.collection('src').insertOne({ _id: 1 });
  await db.createCollection('v', { viewOn: 'src', pipeline: [] });
  const msg = `Namespace ${db.databaseName}.v is a view, not a collection`;
  let r = await db.command({ insert: 'v', documents: [{ _id: 2 }, { _id: 3 }] });
  assert.equal(r.ok, 1);
  assert.equal(r.n, 0);
  assert.deepEqual(r.writeErrors, [{ index: 0, code: 166, errmsg: msg }]);
  r = await db.command({ insert: 'v', documents: [{ _id: 2 }, { _id: 3 }, { _id: 4 }], ordered: false });
  assert.equal(r.n, 0);
  assert.deepEqual(r.writeErrors.map((e) => [e.index, e.code]), [[0, 166], [1, 166], [2, 166]]);
  // Through the driver: insertOne fails with the code; nothing reached the view's source.
  await h.expectCode(db.collection('v').insertOne({ _id: 5 }), 166);
  assert.deepEqual(await db.collection('src').find().toArray(), [{ _id: 1 }]);
});
