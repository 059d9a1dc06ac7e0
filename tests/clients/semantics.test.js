'use strict';
// Corner cases of query matching, sorting and update semantics, each checked
// against MongoDB 8.0 behaviour.
const assert = require('node:assert/strict');
const { Double, Int32, Decimal128 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

async function load(tag, docs) {
  const c = srv.freshDb(tag).collection('c');
  await c.insertMany(docs);
  return c;
}
const ids = async (cur) => (await cur.toArray()).map((d) => d._id);

h.test('$exists with $ne: null excludes null and missing', async () => {
  const c = await load('existsne', [{ _id: 1, a: null }, { _id: 2 }, { _id: 3, a: 0 }, { _id: 4, a: false }]);
  assert.deepEqual(await ids(c.find({ a: { $exists: true, $ne: null } }).sort({ _id: 1 })), [3, 4]);
});

h.test('$in with an array value matches the whole array or an element', async () => {
  const c = await load('inarr', [{ _id: 1, a: [1, 2] }, { _id: 2, a: [[1, 2], 3] }, { _id: 3, a: [2, 1] }, { _id: 4, a: 1 }]);
  assert.deepEqual(await ids(c.find({ a: { $in: [[1, 2]] } }).sort({ _id: 1 })), [1, 2]);
  assert.deepEqual(await ids(c.find({ a: [1, 2] }).sort({ _id: 1 })), [1, 2]);
});

h.test('$regex ignores non-string values but matches string elements of arrays', async () => {
  const c = await load('regexnonstr', [{ _id: 1, a: 5 }, { _id: 2, a: ['ax', 1] }, { _id: 3, a: 'bx' }, { _id: 4, a: { x: 'x' } }]);
  assert.deepEqual(await ids(c.find({ a: /x/ }).sort({ _id: 1 })), [2, 3]);
});

h.test('$size through a dotted path over an array of documents', async () => {
  const c = await load('sizedotted', [{ _id: 1, a: [{ b: [1, 2] }, { b: [1] }] }, { _id: 2, a: [{ b: [1, 2, 3] }] }]);
  assert.deepEqual(await ids(c.find({ 'a.b': { $size: 2 } })), [1]);
});

h.test('$type distinguishes int, long, double and decimal', async () => {
  const { Long } = require('mongodb');
  const c = await load('typenum', [
    { _id: 1, v: new Int32(5) }, { _id: 2, v: new Double(5) }, { _id: 3, v: Long.fromNumber(5) },
    { _id: 4, v: Decimal128.fromString('5') },
  ]);
  assert.deepEqual(await ids(c.find({ v: { $type: 'int' } })), [1]);
  assert.deepEqual(await ids(c.find({ v: { $type: 'double' } })), [2]);
  assert.deepEqual(await ids(c.find({ v: { $type: 'long' } })), [3]);
  assert.deepEqual(await ids(c.find({ v: { $type: 'decimal' } })), [4]);
  assert.deepEqual(await ids(c.find({ v: { $type: 16 } })), [1]);
});

h.test('embedded document equality is exact, including field order', async () => {
  const c = await load('docorder', [{ _id: 1, a: { x: 1, y: 2 } }, { _id: 2, a: { y: 2, x: 1 } }, { _id: 3, a: { x: 1, y: 2, z: 3 } }]);
  assert.deepEqual(await ids(c.find({ a: { x: 1, y: 2 } })), [1]);
  assert.deepEqual(await ids(c.find({ a: { $eq: { y: 2, x: 1 } } })), [2]);
});

h.test('null equality through arrays of documents matches elements lacking the field', async () => {
  const c = await load('nullarr', [{ _id: 1, a: [{ b: 1 }, { c: 2 }] }, { _id: 2, a: [{ b: 1 }] }, { _id: 3, a: [1, null] }]);
  assert.deepEqual(await ids(c.find({ 'a.b': null }).sort({ _id: 1 })), [1]);
  assert.deepEqual(await ids(c.find({ a: null })), [3]);
});

h.test('range conditions on an array may be met by different elements', async () => {
  const c = await load('rangearr', [{ _id: 1, a: [0, 5] }, { _id: 2, a: [2] }]);
  assert.deepEqual(await ids(c.find({ $and: [{ a: { $gt: 1 } }, { a: { $lt: 3 } }] }).sort({ _id: 1 })), [1, 2]);
  assert.deepEqual(await ids(c.find({ a: { $elemMatch: { $gt: 1, $lt: 3 } } })), [2]);
});

h.test('$nin and $ne match documents where the field is missing', async () => {
  const c = await load('ninmissing', [{ _id: 1, a: 1 }, { _id: 2 }, { _id: 3, a: [1, 2] }, { _id: 4, a: [3] }]);
  assert.deepEqual(await ids(c.find({ a: { $nin: [1] } }).sort({ _id: 1 })), [2, 4]);
  assert.deepEqual(await ids(c.find({ a: { $ne: 1 } }).sort({ _id: 1 })), [2, 4]);
});

h.test('sort by a dotted path through an array uses the min (asc) or max (desc) element', async () => {
  const c = await load('sortdotted', [{ _id: 1, a: [{ b: 3 }, { b: 1 }] }, { _id: 2, a: { b: 2 } }]);
  assert.deepEqual(await ids(c.find().sort({ 'a.b': 1 })), [1, 2]);
  assert.deepEqual(await ids(c.find().sort({ 'a.b': -1 })), [1, 2]);
});

h.test('sort is stable with respect to the filter: sort keys only from matching documents', async () => {
  const c = await load('sortlimit', Array.from({ length: 30 }, (_, i) => ({ _id: i, g: i % 3, v: (i * 7) % 30 })));
  const r = await c.find({ g: 1 }).sort({ v: -1 }).limit(3).toArray();
  assert.deepEqual(r.map((d) => d.v), [28, 25, 22]);
});

// ------------------------------------------------------------------ updates

async function upd(tag, doc, update) {
  const c = srv.freshDb(tag).collection('c');
  await c.insertOne({ _id: 1, ...doc });
  const r = await c.updateOne({ _id: 1 }, update);
  return { doc: await c.findOne({ _id: 1 }), r };
}

h.test('$set of a numeric path component on a missing field creates an object, not an array', async () => {
  const { doc } = await upd('numobj', {}, { $set: { 'a.5': 1 } });
  assert.deepEqual(doc.a, { 5: 1 });
});

h.test('$set into an array element document and past the end of an empty array', async () => {
  let { doc } = await upd('setelem', { a: [{ b: 0 }, { b: 0 }] }, { $set: { 'a.1.b': 1 } });
  assert.deepEqual(doc.a, [{ b: 0 }, { b: 1 }]);
  ({ doc } = await upd('setpad', { a: [] }, { $set: { 'a.2': 'x' } }));
  assert.deepEqual(doc.a, [null, null, 'x']);
});

h.test('$push creates intermediate documents', async () => {
  const { doc } = await upd('pushnested', {}, { $push: { 'n.list': 1 } });
  assert.deepEqual(doc.n, { list: [1] });
});

h.test('$addToSet compares documents with field order', async () => {
  const { doc } = await upd('atsorder', { a: [{ y: 2, x: 1 }] }, { $addToSet: { a: { x: 1, y: 2 } } });
  assert.equal(doc.a.length, 2);
});

h.test('$inc with Decimal128 and $mul of int by double', async () => {
  let { doc } = await upd('incdec', { d: Decimal128.fromString('1.1') }, { $inc: { d: Decimal128.fromString('2.2') } });
  assert.equal(doc.d.toString(), '3.3');
  ({ doc } = await upd('mulmix', { m: 3 }, { $mul: { m: 1.5 } }));
  assert.equal(doc.m, 4.5);
});

h.test('$max and $min compare across types in BSON order', async () => {
  let { doc } = await upd('maxtype', { a: 5 }, { $max: { a: 'str' } });
  assert.equal(doc.a, 'str');
  ({ doc } = await upd('mintype', { a: 5 }, { $min: { a: null } }));
  assert.equal(doc.a, null);
});

h.test('$pop on an empty or missing array is a no-op', async () => {
  const { doc, r } = await upd('popempty', { a: [] }, { $pop: { a: 1, missing: 1 } });
  assert.deepEqual(doc, { _id: 1, a: [] });
  assert.equal(r.modifiedCount, 0);
});

h.test('$pull with $in and $rename over an existing target', async () => {
  let { doc } = await upd('pullin', { a: [1, 2, 3, 4] }, { $pull: { a: { $in: [2, 4] } } });
  assert.deepEqual(doc.a, [1, 3]);
  ({ doc } = await upd('renameover', { a: 1, b: 2 }, { $rename: { a: 'b' } }));
  assert.deepEqual(doc, { _id: 1, b: 1 });
});

h.test('$unset of a missing nested path changes nothing', async () => {
  const { r } = await upd('unsetmissing', { a: { b: 1 } }, { $unset: { 'a.c': '', 'x.y': '' } });
  assert.equal(r.modifiedCount, 0);
});

h.test('an empty $set operand is a no-op (MongoDB 5.0+)', async () => {
  const db = srv.freshDb('emptyset');
  await db.collection('c').insertOne({ _id: 1, a: 1 });
  const r = await db.command({ update: 'c', updates: [{ q: { _id: 1 }, u: { $set: {} } }] });
  assert.equal(r.ok, 1);
  assert.equal(r.writeErrors, undefined, JSON.stringify(r.writeErrors));
  assert.equal(r.n, 1);
  assert.equal(r.nModified, 0);
});

h.test('an empty replacement document leaves only _id', async () => {
  const db = srv.freshDb('emptyrepl');
  await db.collection('c').insertOne({ _id: 1, a: 1 });
  const r = await db.command({ update: 'c', updates: [{ q: { _id: 1 }, u: {} }] });
  assert.equal(r.nModified, 1);
  assert.deepEqual(await db.collection('c').findOne({ _id: 1 }), { _id: 1 });
});

h.test('upsert takes _id from $eq and fields from $and', async () => {
  const c = srv.freshDb('upserteq').collection('c');
  const r1 = await c.updateOne({ _id: { $eq: 5 } }, { $set: { v: 1 } }, { upsert: true });
  assert.equal(r1.upsertedId, 5);
  const r2 = await c.updateOne({ $and: [{ a: 1 }, { b: 2 }] }, { $set: { c: 3 } }, { upsert: true });
  const d = await c.findOne({ _id: r2.upsertedId });
  assert.deepEqual({ a: d.a, b: d.b, c: d.c }, { a: 1, b: 2, c: 3 });
});

h.test('upsert with a query on _id that conflicts with $set of _id fails', async () => {
  const c = srv.freshDb('upsertid').collection('c');
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { _id: 2 } }, { upsert: true }), 66);
});

h.test('update of a field that the query matched through an array with $ and multi', async () => {
  const c = await load('posmulti', [{ _id: 1, a: [1, 2, 1] }, { _id: 2, a: [1] }, { _id: 3, a: [3] }]);
  const r = await c.updateMany({ a: 1 }, { $set: { 'a.$': 9 } });
  assert.equal(r.modifiedCount, 2);
  assert.deepEqual((await c.find().sort({ _id: 1 }).toArray()).map((d) => d.a), [[9, 2, 1], [9], [3]]);
});

h.test('updateMany reports writeErrors for the failing document and stops', async () => {
  const db = srv.freshDb('updpartial');
  await db.collection('c').insertMany([{ _id: 1, n: 1 }, { _id: 2, n: 'x' }, { _id: 3, n: 3 }]);
  const r = await db.command({ update: 'c', updates: [{ q: {}, u: { $inc: { n: 1 } }, multi: true }] });
  assert.equal(r.ok, 1);
  assert.equal(r.writeErrors.length, 1);
  assert.equal(r.writeErrors[0].code, 14);
  assert.equal(r.writeErrors[0].index, 0);
});
