'use strict';
// findAndModify with a positional ("a.$") projection, and the _id a
// replacement-style upsert takes from its filter (MongoDB 8.0 behaviour).
const assert = require('node:assert/strict');
const { ObjectId } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

/* A fresh collection holding {_id: 42, a: [1, 2, 3]}. */
async function famColl(tag) {
  const db = srv.freshDb(tag);
  const c = db.collection('c');
  await c.insertOne({ _id: 42, a: [1, 2, 3] });
  return { db, c };
}

/* ---------- findAndModify with a positional projection ---------- */

h.test('findAndModify remove:true projects the removed document positionally', async () => {
  const { db, c } = await famColl('fam_pos_remove');
  const r = await db.command({ findAndModify: 'c', query: { _id: 42, a: 2 }, remove: true, fields: { 'a.$': 1 } });
  assert.deepEqual(r.value, { _id: 42, a: [2] });
  assert.equal(r.lastErrorObject.n, 1);
  assert.equal(await c.countDocuments({}), 0);
});

h.test('findAndModify update new:false returns the pre-image projected positionally', async () => {
  const { db, c } = await famColl('fam_pos_old');
  const r = await db.command({
    findAndModify: 'c', query: { _id: 42, a: 3 }, update: { $set: { b: 1 } }, fields: { 'a.$': 1 },
  });
  assert.deepEqual(r.value, { _id: 42, a: [3] });
  assert.equal(r.lastErrorObject.updatedExisting, true);
  assert.deepEqual(await c.findOne({ _id: 42 }), { _id: 42, a: [1, 2, 3], b: 1 });
});

h.test('findOneAndUpdate (returnDocument before) with a positional projection', async () => {
  const { c } = await famColl('fam_pos_driver');
  const v = await c.findOneAndUpdate({ a: { $gt: 1 } }, { $inc: { n: 1 } },
    { projection: { 'a.$': 1 }, returnDocument: 'before' });
  assert.deepEqual(v, { _id: 42, a: [2] });
  assert.deepEqual(await c.findOne({ _id: 42 }), { _id: 42, a: [1, 2, 3], n: 1 });
});

h.test('findAndModify new:true with a positional projection is refused (2) and writes nothing', async () => {
  const { db, c } = await famColl('fam_pos_new');
  await h.expectCode(db.command({
    findAndModify: 'c', query: { _id: 42, a: 2 }, update: { $set: { b: 1 } }, new: true, fields: { 'a.$': 1 },
  }), 2, /^cannot use a positional projection and return the new document$/);
  assert.deepEqual(await c.findOne({ _id: 42 }), { _id: 42, a: [1, 2, 3] });
});

h.test('findAndModify upsert new:true with a positional projection is refused before the insert', async () => {
  const { db, c } = await famColl('fam_pos_upsert_new');
  await h.expectCode(db.command({
    findAndModify: 'c', query: { _id: 7, a: 2 }, update: { $set: { b: 1 } }, upsert: true, new: true,
    fields: { 'a.$': 1 },
  }), 2, /positional projection and return the new document/);
  assert.equal(await c.countDocuments({}), 1);
  assert.equal(await c.findOne({ _id: 7 }), null);
});

h.test('findAndModify upsert new:false with a positional projection inserts and returns null', async () => {
  const { db, c } = await famColl('fam_pos_upsert_old');
  const r = await db.command({
    findAndModify: 'c', query: { _id: 7, a: 2 }, update: { $set: { b: 1 } }, upsert: true, fields: { 'a.$': 1 },
  });
  assert.equal(r.value, null);
  assert.equal(r.lastErrorObject.upserted, 7);
  assert.deepEqual(await c.findOne({ _id: 7 }), { _id: 7, a: 2, b: 1 });
});

h.test('a positional projection that finds no element fails the command and undoes the write', async () => {
  // The query does not constrain a, so "a.$" has no element: the error comes
  // while the write is still uncommitted, and the write is rolled back.
  const { db, c } = await famColl('fam_pos_nomatch');
  await h.expectCode(db.command({ findAndModify: 'c', query: { _id: 42 }, remove: true, fields: { 'a.$': 1 } }),
    51246, /^Plan executor error during findAndModify :: caused by :: positional operator '\.\$' couldn't find a matching element in the array$/);
  assert.deepEqual(await c.findOne({ _id: 42 }), { _id: 42, a: [1, 2, 3] });
  await h.expectCode(db.command({
    findAndModify: 'c', query: { _id: 42 }, update: { $set: { b: 1 } }, fields: { 'a.$': 1 },
  }), 51246);
  assert.deepEqual(await c.findOne({ _id: 42 }), { _id: 42, a: [1, 2, 3] });
});

h.test('a projection expression that fails on the new document leaves nothing written', async () => {
  const { db, c } = await famColl('fam_expr_fail');
  const bad = { z: { $toInt: 'abc' } };
  await h.expectCode(db.command({
    findAndModify: 'c', query: { _id: 42 }, update: { $set: { b: 1 } }, new: true, fields: bad,
  }), 241);
  assert.deepEqual(await c.findOne({ _id: 42 }), { _id: 42, a: [1, 2, 3] });
  await h.expectCode(db.command({
    findAndModify: 'c', query: { _id: 8 }, update: { $set: { b: 1 } }, upsert: true, new: true, fields: bad,
  }), 241);
  assert.equal(await c.findOne({ _id: 8 }), null);
});

h.test('findAndModify new:true with a non-positional projection still projects the new document', async () => {
  const { db } = await famColl('fam_new_proj');
  const r = await db.command({
    findAndModify: 'c', query: { _id: 42 }, update: { $set: { b: 1 } }, new: true,
    fields: { b: 1, a: { $elemMatch: { $gt: 1 } } },
  });
  assert.deepEqual(r.value, { _id: 42, a: [2], b: 1 });
  const u = await db.command({
    findAndModify: 'c', query: { _id: 9 }, update: { $set: { b: 2, d: 3 } }, upsert: true, new: true,
    fields: { d: 1 },
  });
  assert.deepEqual(u.value, { _id: 9, d: 3 });
});

/* ---------- replacement upserts take _id from the filter ---------- */

h.test('replaceOne upsert takes _id from a filter with other fields, and nothing else', async () => {
  const c = srv.freshDb('repl_upsert_id').collection('c');
  const r = await c.replaceOne({ _id: 5, q: 1 }, { x: 1 }, { upsert: true });
  assert.equal(r.upsertedId, 5);
  assert.deepEqual(await c.find().toArray(), [{ _id: 5, x: 1 }]);
});

h.test('replacement upsert finds the _id equality inside $and, $eq, a one-value $in and a one-clause $or', async () => {
  const c = srv.freshDb('repl_upsert_forms').collection('c');
  const cases = [
    [{ $and: [{ _id: 7 }, { q: 1 }] }, 7],
    [{ _id: { $eq: 8 }, q: { $gt: 0 } }, 8],
    [{ _id: { $in: [9] }, q: 1 }, 9],
    [{ $or: [{ _id: 10 }], q: 1 }, 10],
    [{ q: 1, $and: [{ r: 2 }, { $and: [{ _id: 'deep' }] }] }, 'deep'],
  ];
  for (const [filter, id] of cases) {
    const r = await c.replaceOne(filter, { x: 1 }, { upsert: true });
    assert.equal(r.upsertedId, id, JSON.stringify(filter));
    assert.deepEqual(await c.findOne({ _id: id }), { _id: id, x: 1 }, JSON.stringify(filter));
  }
});

h.test('update command with a replacement document and upsert takes _id from the filter', async () => {
  const db = srv.freshDb('repl_upsert_cmd');
  const r = await db.command({ update: 'c', updates: [{ q: { _id: 11, q: 1, s: 'x' }, u: { y: 2 }, upsert: true }] });
  assert.equal(r.n, 1);
  assert.deepEqual(r.upserted, [{ index: 0, _id: 11 }]);
  assert.deepEqual(await db.collection('c').find().toArray(), [{ _id: 11, y: 2 }]);
});

h.test('findOneAndReplace upsert takes _id from a filter with other fields', async () => {
  const c = srv.freshDb('repl_upsert_fam').collection('c');
  const v = await c.findOneAndReplace({ _id: 6, q: 1 }, { x: 1 }, { upsert: true, returnDocument: 'after' });
  assert.deepEqual(v, { _id: 6, x: 1 });
  assert.deepEqual(await c.find().toArray(), [{ _id: 6, x: 1 }]);
});

h.test('replacement upsert without an _id equality gets a new ObjectId and none of the filter', async () => {
  const c = srv.freshDb('repl_upsert_oid').collection('c');
  const r = await c.replaceOne({ q: 1, _id: { $gt: 0 } }, { x: 1 }, { upsert: true });
  assert.ok(r.upsertedId instanceof ObjectId);
  assert.deepEqual(await c.find().toArray(), [{ _id: r.upsertedId, x: 1 }]);
});

h.test('replacement upsert with a filter on a path under _id is refused (111), nothing inserted', async () => {
  const c = srv.freshDb('repl_upsert_dotted').collection('c');
  await h.expectCode(c.replaceOne({ '_id.a': 1, q: 1 }, { x: 1 }, { upsert: true }), 111,
    /field at '_id' must be exactly specified, field at sub-path '_id.a'found/);
  assert.equal(await c.countDocuments({}), 0);
});

h.test('operator upserts still seed every equality of the filter', async () => {
  const c = srv.freshDb('op_upsert_seed').collection('c');
  const r = await c.updateOne({ _id: 13, q: 1, $and: [{ r: 2 }] }, { $set: { x: 1 } }, { upsert: true });
  assert.equal(r.upsertedId, 13);
  assert.deepEqual(await c.findOne({ _id: 13 }), { _id: 13, q: 1, r: 2, x: 1 });
});
