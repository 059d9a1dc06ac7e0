'use strict';
// updateOne/updateMany/replaceOne with every update operator, positional and
// array filters, upserts, and the findOneAnd* (findAndModify) helpers.
const assert = require('node:assert/strict');
const { Timestamp, Long, Double, ObjectId } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

/* Inserts doc into a fresh collection, applies update to it, returns the result doc. */
async function applyUpdate(tag, doc, update, opts = {}) {
  const c = srv.freshDb(tag).collection('c');
  await c.insertOne({ _id: 1, ...doc });
  const r = await c.updateOne({ _id: 1 }, update, opts);
  assert.equal(r.matchedCount, 1);
  return { doc: await c.findOne({ _id: 1 }), r, c };
}

h.test('$set sets top-level and nested fields, creating paths', async () => {
  const { doc, r } = await applyUpdate('set', { a: 1, n: { x: 1 } }, { $set: { a: 2, 'n.y': 3, 'p.q.r': 4 } });
  assert.equal(r.modifiedCount, 1);
  assert.deepEqual(doc, { _id: 1, a: 2, n: { x: 1, y: 3 }, p: { q: { r: 4 } } });
});

h.test('$set to the same value reports modifiedCount 0', async () => {
  const { r } = await applyUpdate('setsame', { a: 1 }, { $set: { a: 1 } });
  assert.equal(r.modifiedCount, 0);
});

h.test('$set on an array index and past the end pads with null', async () => {
  const { doc } = await applyUpdate('setidx', { a: [1, 2] }, { $set: { 'a.1': 9, 'a.4': 5 } });
  assert.deepEqual(doc.a, [1, 9, null, null, 5]);
});

h.test('$set through a scalar fails with PathNotViable (28)', async () => {
  const c = srv.freshDb('setbad').collection('c');
  await c.insertOne({ _id: 1, a: 5 });
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { 'a.b': 1 } }), 28);
});

h.test('$unset removes fields and ignores missing ones', async () => {
  const { doc } = await applyUpdate('unset', { a: 1, b: 2, n: { x: 1, y: 2 } }, { $unset: { a: '', 'n.x': 1, zz: 1 } });
  assert.deepEqual(doc, { _id: 1, b: 2, n: { y: 2 } });
});

h.test('$unset of an array element sets it to null', async () => {
  const { doc } = await applyUpdate('unsetarr', { a: [1, 2, 3] }, { $unset: { 'a.1': 1 } });
  assert.deepEqual(doc.a, [1, null, 3]);
});

h.test('$inc increments, creates missing fields and keeps numeric types', async () => {
  const { doc } = await applyUpdate('inc', { a: 1, d: 1.5, l: Long.fromNumber(10) },
    { $inc: { a: 2, d: 1, l: 5, m: -3 } });
  assert.equal(doc.a, 3);
  assert.equal(doc.d, 2.5);
  assert.equal(Number(doc.l), 15);
  assert.equal(doc.m, -3);
});

h.test('$inc on a non-numeric field fails with TypeMismatch (14)', async () => {
  const c = srv.freshDb('incbad').collection('c');
  await c.insertOne({ _id: 1, a: 'x' });
  await h.expectCode(c.updateOne({ _id: 1 }, { $inc: { a: 1 } }), 14);
  await h.expectCode(c.updateOne({ _id: 1 }, { $inc: { b: 'y' } }), 14);
});

h.test('$mul multiplies and sets missing fields to 0', async () => {
  const { doc } = await applyUpdate('mul', { a: 3, d: 2.5 }, { $mul: { a: 4, d: 2, z: 7 } });
  assert.equal(doc.a, 12);
  assert.equal(doc.d, 5);
  assert.equal(doc.z, 0);
});

h.test('$min and $max', async () => {
  const { doc } = await applyUpdate('minmax', { lo: 5, hi: 5, d: new Date(1000) },
    { $min: { lo: 3, newmin: 1 }, $max: { hi: 10, d: new Date(2000) } });
  assert.equal(doc.lo, 3);
  assert.equal(doc.hi, 10);
  assert.equal(doc.newmin, 1);
  assert.equal(doc.d.getTime(), 2000);
  const { doc: d2, r } = await applyUpdate('minmax2', { lo: 5 }, { $min: { lo: 9 } });
  assert.equal(d2.lo, 5);
  assert.equal(r.modifiedCount, 0);
});

h.test('$rename moves fields, including into nested paths', async () => {
  const { doc } = await applyUpdate('rename', { a: 1, n: { x: 2 }, keep: 3 }, { $rename: { a: 'b', 'n.x': 'm.y', nosuch: 'q' } });
  assert.deepEqual(doc, { _id: 1, keep: 3, n: {}, b: 1, m: { y: 2 } });
});

h.test('$push appends; $each/$slice/$sort/$position modifiers', async () => {
  let { doc } = await applyUpdate('push', { a: [1] }, { $push: { a: 2, newarr: 'x' } });
  assert.deepEqual(doc.a, [1, 2]);
  assert.deepEqual(doc.newarr, ['x']);
  ({ doc } = await applyUpdate('pusheach', { a: [1] }, { $push: { a: { $each: [2, 3] } } }));
  assert.deepEqual(doc.a, [1, 2, 3]);
  ({ doc } = await applyUpdate('pushpos', { a: [1, 2] }, { $push: { a: { $each: [9, 8], $position: 1 } } }));
  assert.deepEqual(doc.a, [1, 9, 8, 2]);
  ({ doc } = await applyUpdate('pushslice', { a: [1, 2, 3] }, { $push: { a: { $each: [4, 5], $slice: -3 } } }));
  assert.deepEqual(doc.a, [3, 4, 5]);
  ({ doc } = await applyUpdate('pushsort', { a: [5, 1] }, { $push: { a: { $each: [3], $sort: -1 } } }));
  assert.deepEqual(doc.a, [5, 3, 1]);
  ({ doc } = await applyUpdate('pushsortdoc', { a: [{ s: 2 }, { s: 9 }] },
    { $push: { a: { $each: [{ s: 5 }, { s: 1 }], $sort: { s: 1 }, $slice: 3 } } }));
  assert.deepEqual(doc.a, [{ s: 1 }, { s: 2 }, { s: 5 }]);
});

h.test('$push onto a non-array fails with BadValue (2)', async () => {
  const c = srv.freshDb('pushbad').collection('c');
  await c.insertOne({ _id: 1, a: 5 });
  await h.expectCode(c.updateOne({ _id: 1 }, { $push: { a: 1 } }), 2);
});

h.test('$addToSet adds only missing values, with $each', async () => {
  const { doc } = await applyUpdate('ats', { a: [1, 2], o: [{ x: 1 }] },
    { $addToSet: { a: { $each: [2, 3, 3] }, o: { x: 1 }, n: 'new' } });
  assert.deepEqual(doc.a, [1, 2, 3]);
  assert.deepEqual(doc.o, [{ x: 1 }]);
  assert.deepEqual(doc.n, ['new']);
});

h.test('$pull by value and by condition', async () => {
  let { doc } = await applyUpdate('pull', { a: [1, 2, 3, 2, 4] }, { $pull: { a: 2 } });
  assert.deepEqual(doc.a, [1, 3, 4]);
  ({ doc } = await applyUpdate('pullcond', { a: [1, 5, 7, 2] }, { $pull: { a: { $gte: 5 } } }));
  assert.deepEqual(doc.a, [1, 2]);
  ({ doc } = await applyUpdate('pulldoc', { a: [{ k: 1, v: 'x' }, { k: 2, v: 'y' }] }, { $pull: { a: { k: 1 } } }));
  assert.deepEqual(doc.a, [{ k: 2, v: 'y' }]);
});

h.test('$pullAll removes every listed value', async () => {
  const { doc } = await applyUpdate('pullall', { a: [1, 2, 3, 1, 4] }, { $pullAll: { a: [1, 4] } });
  assert.deepEqual(doc.a, [2, 3]);
});

h.test('$pop removes the last or first element', async () => {
  let { doc } = await applyUpdate('pop', { a: [1, 2, 3] }, { $pop: { a: 1 } });
  assert.deepEqual(doc.a, [1, 2]);
  ({ doc } = await applyUpdate('popfirst', { a: [1, 2, 3] }, { $pop: { a: -1 } }));
  assert.deepEqual(doc.a, [2, 3]);
});

h.test('$currentDate sets a date or a timestamp', async () => {
  const before = Date.now();
  const { doc } = await applyUpdate('curdate', {}, { $currentDate: { d: true, d2: { $type: 'date' }, ts: { $type: 'timestamp' } } });
  assert.ok(doc.d instanceof Date);
  assert.ok(doc.d2 instanceof Date);
  assert.ok(Math.abs(doc.d.getTime() - before) < 60000);
  assert.ok(doc.ts instanceof Timestamp, `ts is a Timestamp, got ${doc.ts}`);
  assert.ok(Math.abs(doc.ts.high * 1000 - before) < 60000, 'timestamp seconds are now');
  // The server's one clock: every document an updateMany stamps gets its own, later Timestamp.
  const c = srv.freshDb('curdatemany').collection('c');
  await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  await c.updateMany({}, { $currentDate: { ts: { $type: 'timestamp' } } });
  const ts = (await c.find().sort({ _id: 1 }).toArray()).map((d) => d.ts);
  assert.ok(ts[1].greaterThan(ts[0]) && ts[2].greaterThan(ts[1]), JSON.stringify(ts));
});

h.test('$setOnInsert applies only when an upsert inserts', async () => {
  const c = srv.freshDb('soi').collection('c');
  const r1 = await c.updateOne({ _id: 'u' }, { $set: { a: 1 }, $setOnInsert: { created: true } }, { upsert: true });
  assert.equal(r1.upsertedCount, 1);
  assert.equal(r1.upsertedId, 'u');
  assert.deepEqual(await c.findOne({ _id: 'u' }), { _id: 'u', a: 1, created: true });
  const r2 = await c.updateOne({ _id: 'u' }, { $set: { a: 2 }, $setOnInsert: { created: false } }, { upsert: true });
  assert.equal(r2.upsertedCount, 0);
  assert.equal(r2.matchedCount, 1);
  assert.deepEqual(await c.findOne({ _id: 'u' }), { _id: 'u', a: 2, created: true });
});

h.test('upsert builds the new document from equality fields of the query', async () => {
  const c = srv.freshDb('upsert').collection('c');
  const r = await c.updateOne({ k: 'x', n: { $gt: 5 }, 'p.q': 3 }, { $inc: { count: 1 } }, { upsert: true });
  assert.equal(r.upsertedCount, 1);
  assert.ok(r.upsertedId instanceof ObjectId);
  const d = await c.findOne({ _id: r.upsertedId });
  assert.deepEqual({ ...d, _id: undefined }, { _id: undefined, k: 'x', p: { q: 3 }, count: 1 });
});

h.test('upsert: $all seeds as an AND of equalities (jstests/sharding/upsert_sharded.js): {$all: [1]} gives x: 1, {$all: [[1]]} gives x: [1], two elements are 54', async () => {
  const c = srv.freshDb('upsert_all').collection('c');
  const seeded = async (q) => {
    const r = await c.updateOne(q, { $set: { a: 1 } }, { upsert: true });
    const d = await c.findOneAndDelete({ _id: r.upsertedId });
    delete d._id;
    return d;
  };
  assert.deepEqual(await seeded({ x: { $all: [1] } }), { x: 1, a: 1 });
  assert.deepEqual(await seeded({ 'x.x': { $all: [1] } }), { x: { x: 1 }, a: 1 });
  assert.deepEqual(await seeded({ x: { $all: [[1]] } }), { x: [1], a: 1 });
  assert.deepEqual(await seeded({ x: { $all: [{ $elemMatch: { y: 1 } }] } }), { a: 1 }, '$elemMatch seeds nothing');
  await h.expectCode(c.updateOne({ x: { $all: [1, 2] } }, { $set: { a: 1 } }, { upsert: true }), 54, /path 'x' is matched twice/);
});

h.test('$natural in a find\'s sort or hint is {$natural: 1} or {$natural: -1} alone: 2 BadValue, as mongod\'s validateFindCommandRequest', async () => {
  const db = srv.freshDb('natural');
  await db.createCollection('capped', { capped: true, size: 4096 });
  await db.collection('c').insertOne({ a: 1 });
  for (const sort of [{ $natural: 1, a: 1 }, { $natural: 2 }, { $natural: 'x' }, { a: 1, $natural: -1 }]) {
    await h.expectCode(db.command({ find: 'c', sort }), 2, /^\$natural sort cannot be set to a value other than -1 or 1\.$/);
  }
  for (const hint of [{ a: 1, $natural: 1 }, { $natural: 0 }]) {
    await h.expectCode(db.command({ find: 'c', hint }), 2, /^\$natural hint cannot be set to a value other than -1 or 1\.$/);
  }
  assert.equal((await db.command({ find: 'c', sort: { $natural: -1 } })).cursor.firstBatch.length, 1);
  assert.equal((await db.command({ find: 'c', sort: { $natural: 1.0 }, hint: { $natural: 1 } })).cursor.firstBatch.length, 1);
  // Tailable: a sort other than {$natural: 1}, then singleBatch.
  await h.expectCode(db.command({ find: 'capped', tailable: true, sort: { $natural: -1 } }), 2,
    /^cannot use tailable option with a sort other than \{\$natural: 1\}$/);
  await h.expectCode(db.command({ find: 'capped', tailable: true, singleBatch: true }), 2,
    /^cannot use tailable option with the 'singleBatch' option$/);
  assert.equal((await db.command({ find: 'capped', tailable: true, singleBatch: false })).ok, 1);
});

h.test('updateMany updates every match; updateOne only one', async () => {
  const c = srv.freshDb('many').collection('c');
  await c.insertMany([{ t: 1 }, { t: 1 }, { t: 1 }, { t: 2 }]);
  const r1 = await c.updateOne({ t: 1 }, { $set: { seen: true } });
  assert.equal(r1.matchedCount, 1);
  assert.equal(r1.modifiedCount, 1);
  const r2 = await c.updateMany({ t: 1 }, { $set: { seen: true } });
  assert.equal(r2.matchedCount, 3);
  assert.equal(r2.modifiedCount, 2);
  assert.equal(await c.countDocuments({ seen: true }), 3);
  const r3 = await c.updateMany({ t: 99 }, { $set: { x: 1 } });
  assert.equal(r3.matchedCount, 0);
});

h.test('replaceOne replaces the whole document and keeps _id', async () => {
  const c = srv.freshDb('replace').collection('c');
  await c.insertOne({ _id: 1, a: 1, b: 2 });
  const r = await c.replaceOne({ _id: 1 }, { c: 3 });
  assert.equal(r.modifiedCount, 1);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, c: 3 });
  const u = await c.replaceOne({ _id: 2 }, { z: 1 }, { upsert: true });
  assert.equal(u.upsertedId, 2);
  assert.deepEqual(await c.findOne({ _id: 2 }), { _id: 2, z: 1 });
});

h.test('changing _id fails with ImmutableField (66)', async () => {
  const c = srv.freshDb('immut').collection('c');
  await c.insertOne({ _id: 1, a: 1 });
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { _id: 2 } }), 66);
  await h.expectCode(c.replaceOne({ _id: 1 }, { _id: 2, a: 1 }), 66);
});

h.test('conflicting update paths fail with ConflictingUpdateOperators (40)', async () => {
  const c = srv.freshDb('conflict').collection('c');
  await c.insertOne({ _id: 1, a: { b: 1 } });
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { a: 1 }, $inc: { a: 1 } }), 40);
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { 'a.b': 1, a: 2 } }), 40);
});

h.test('unknown update operator fails with FailedToParse (9)', async () => {
  const c = srv.freshDb('unkop').collection('c');
  await c.insertOne({ _id: 1 });
  const db = srv.client.db(c.dbName);
  await h.expectCode(db.command({ update: 'c', updates: [{ q: {}, u: { $foo: { a: 1 } } }] }).then((r) => {
    if (r.writeErrors) { const e = new Error(r.writeErrors[0].errmsg); e.code = r.writeErrors[0].code; throw e; }
    return r;
  }), 9);
});

h.test('positional $ updates the first matched array element', async () => {
  const c = srv.freshDb('pos').collection('c');
  await c.insertOne({ _id: 1, a: [1, 2, 3, 2], o: [{ k: 'x', v: 1 }, { k: 'y', v: 2 }] });
  await c.updateOne({ a: 2 }, { $set: { 'a.$': 20 } });
  await c.updateOne({ 'o.k': 'y' }, { $inc: { 'o.$.v': 10 } });
  const d = await c.findOne({ _id: 1 });
  assert.deepEqual(d.a, [1, 20, 3, 2]);
  assert.deepEqual(d.o, [{ k: 'x', v: 1 }, { k: 'y', v: 12 }]);
});

h.test('positional $ without a matching array in the query fails with 2', async () => {
  const c = srv.freshDb('posbad').collection('c');
  await c.insertOne({ _id: 1, a: [1, 2] });
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { 'a.$': 5 } }), 2);
});

h.test('all-positional $[] updates every element', async () => {
  const { doc } = await applyUpdate('allpos', { a: [1, 2, 3], o: [{ v: 1 }, { v: 2 }] },
    { $inc: { 'a.$[]': 10, 'o.$[].v': 1 } });
  assert.deepEqual(doc.a, [11, 12, 13]);
  assert.deepEqual(doc.o, [{ v: 2 }, { v: 3 }]);
});

h.test('arrayFilters with $[identifier]', async () => {
  const { doc } = await applyUpdate('af', { a: [1, 5, 8, 2], o: [{ k: 'x', v: 1 }, { k: 'y', v: 2 }] },
    { $set: { 'a.$[big]': 0, 'o.$[e].v': 99 } },
    { arrayFilters: [{ big: { $gte: 5 } }, { 'e.k': 'y' }] });
  assert.deepEqual(doc.a, [1, 0, 0, 2]);
  assert.deepEqual(doc.o, [{ k: 'x', v: 1 }, { k: 'y', v: 99 }]);
});

h.test('an unused or missing array filter identifier is an error', async () => {
  const c = srv.freshDb('afbad').collection('c');
  await c.insertOne({ _id: 1, a: [1] });
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { 'a.$[x]': 1 } }), 2);
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { 'a.$[x]': 1 } }, { arrayFilters: [{ x: 1 }, { y: 2 }] }), 9);
});

h.test('pipeline-style update with $set stage', async () => {
  const { doc } = await applyUpdate('pipe', { a: 2, b: 3 }, [{ $set: { sum: { $add: ['$a', '$b'] } } }, { $unset: 'b' }]);
  assert.deepEqual(doc, { _id: 1, a: 2, sum: 5 });
});

// ---------------------------------------------------------------- findAndModify

h.test('findOneAndUpdate returns the document before or after', async () => {
  const c = srv.freshDb('fau').collection('c');
  await c.insertOne({ _id: 1, n: 1 });
  const before = await c.findOneAndUpdate({ _id: 1 }, { $inc: { n: 1 } });
  assert.deepEqual(before, { _id: 1, n: 1 });
  const after = await c.findOneAndUpdate({ _id: 1 }, { $inc: { n: 1 } }, { returnDocument: 'after' });
  assert.deepEqual(after, { _id: 1, n: 3 });
  assert.equal(await c.findOneAndUpdate({ _id: 99 }, { $inc: { n: 1 } }), null);
});

h.test('findOneAndUpdate with sort picks the first in sort order; projection applies', async () => {
  const c = srv.freshDb('fausort').collection('c');
  await c.insertMany([{ _id: 1, p: 5, x: 'a' }, { _id: 2, p: 9, x: 'b' }, { _id: 3, p: 1, x: 'c' }]);
  const d = await c.findOneAndUpdate({}, { $set: { taken: true } },
    { sort: { p: -1 }, returnDocument: 'after', projection: { x: 1, taken: 1, _id: 0 } });
  assert.deepEqual(d, { x: 'b', taken: true });
  assert.equal(await c.countDocuments({ taken: true }), 1);
});

h.test('findOneAndUpdate with upsert inserts and returns the new document', async () => {
  const c = srv.freshDb('fauups').collection('c');
  const d = await c.findOneAndUpdate({ _id: 'k' }, { $set: { v: 1 } }, { upsert: true, returnDocument: 'after' });
  assert.deepEqual(d, { _id: 'k', v: 1 });
  const before = await c.findOneAndUpdate({ _id: 'k2' }, { $set: { v: 1 } }, { upsert: true });
  assert.equal(before, null);
  const meta = await c.findOneAndUpdate({ _id: 'k3' }, { $set: { v: 1 } },
    { upsert: true, includeResultMetadata: true });
  assert.equal(meta.ok, 1);
  assert.equal(meta.lastErrorObject.updatedExisting, false);
  assert.equal(meta.lastErrorObject.upserted, 'k3');
  assert.equal(meta.lastErrorObject.n, 1);
});

h.test('findOneAndReplace', async () => {
  const c = srv.freshDb('far').collection('c');
  await c.insertOne({ _id: 1, a: 1 });
  const before = await c.findOneAndReplace({ a: 1 }, { b: 2 });
  assert.deepEqual(before, { _id: 1, a: 1 });
  const after = await c.findOneAndReplace({ b: 2 }, { b: 3 }, { returnDocument: 'after' });
  assert.deepEqual(after, { _id: 1, b: 3 });
  const up = await c.findOneAndReplace({ _id: 5 }, { z: 1 }, { upsert: true, returnDocument: 'after' });
  assert.deepEqual(up, { _id: 5, z: 1 });
});

h.test('findOneAndDelete returns the removed document, honouring sort', async () => {
  const c = srv.freshDb('fad').collection('c');
  await c.insertMany([{ _id: 1, p: 1 }, { _id: 2, p: 3 }, { _id: 3, p: 2 }]);
  const d = await c.findOneAndDelete({}, { sort: { p: -1 } });
  assert.deepEqual(d, { _id: 2, p: 3 });
  const d2 = await c.findOneAndDelete({ p: 1 }, { projection: { _id: 1 } });
  assert.deepEqual(d2, { _id: 1 });
  assert.equal(await c.countDocuments(), 1);
  assert.equal(await c.findOneAndDelete({ p: 42 }), null);
});

h.test('raw findAndModify reply shape', async () => {
  const db = srv.freshDb('fam');
  await db.collection('c').insertOne({ _id: 1, a: 1 });
  const r = await db.command({ findAndModify: 'c', query: { _id: 1 }, update: { $set: { a: 2 } }, new: true });
  assert.equal(r.ok, 1);
  assert.deepEqual(r.value, { _id: 1, a: 2 });
  assert.equal(r.lastErrorObject.n, 1);
  assert.equal(r.lastErrorObject.updatedExisting, true);
  const rm = await db.command({ findAndModify: 'c', query: { _id: 1 }, remove: true });
  assert.deepEqual(rm.value, { _id: 1, a: 2 });
  assert.equal(rm.lastErrorObject.n, 1);
  await h.expectCode(db.command({ findAndModify: 'c', query: {} }), 9);
});

h.test('update of a $-prefixed replacement field or empty field name is refused', async () => {
  const c = srv.freshDb('dollarrepl').collection('c');
  await c.insertOne({ _id: 1 });
  // $set of a top-level $-prefixed field name is not allowed in an update.
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { $bad: 1 } }), [52, 2]);
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { '': 1 } }), 56);
});

h.test('numeric types are preserved by $set and $inc with mixed types promote', async () => {
  const { doc } = await applyUpdate('promote', { i: 1 }, { $inc: { i: new Double(0.5) } });
  assert.equal(doc.i, 1.5);
});
