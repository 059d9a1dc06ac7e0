'use strict';
// Aggregation stages and accumulators, and bulkWrite, through the Node driver.
const assert = require('node:assert/strict');
const { MongoBulkWriteError } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const SALES = [
  { _id: 1, item: 'a', qty: 2, price: 10, tags: ['x', 'y'], store: { city: 'Oslo' } },
  { _id: 2, item: 'b', qty: 1, price: 20, tags: ['y'], store: { city: 'Rome' } },
  { _id: 3, item: 'a', qty: 5, price: 10, tags: [], store: { city: 'Rome' } },
  { _id: 4, item: 'c', qty: 4, price: 5, tags: ['x'], store: { city: 'Oslo' } },
  { _id: 5, item: 'b', qty: 3, price: 20, store: { city: 'Lima' } },
];

async function sales(tag) {
  const c = srv.freshDb(tag).collection('sales');
  await c.insertMany(SALES.map((d) => ({ ...d })));
  return c;
}

h.test('$match and $sort', async () => {
  const c = await sales('match');
  const r = await c.aggregate([{ $match: { item: 'a' } }, { $sort: { qty: -1 } }]).toArray();
  assert.deepEqual(r.map((d) => d._id), [3, 1]);
});

h.test('$project inclusion, exclusion, computed fields and $literal', async () => {
  const c = await sales('project');
  const r = await c.aggregate([
    { $match: { _id: 1 } },
    { $project: { item: 1, total: { $multiply: ['$qty', '$price'] }, city: '$store.city', lit: { $literal: '$x' } } },
  ]).toArray();
  assert.deepEqual(r, [{ _id: 1, item: 'a', total: 20, city: 'Oslo', lit: '$x' }]);
  const ex = await c.aggregate([{ $match: { _id: 2 } }, { $project: { tags: 0, store: 0, _id: 0 } }]).toArray();
  assert.deepEqual(ex, [{ item: 'b', qty: 1, price: 20 }]);
});

h.test('$addFields and $set add computed fields; $unset removes', async () => {
  const c = await sales('addfields');
  const r = await c.aggregate([
    { $match: { _id: 2 } },
    { $addFields: { total: { $multiply: ['$qty', '$price'] } } },
    { $set: { 'store.country': 'IT', big: { $gt: ['$price', 15] } } },
    { $unset: ['tags', 'qty'] },
  ]).toArray();
  assert.deepEqual(r, [{ _id: 2, item: 'b', price: 20, store: { city: 'Rome', country: 'IT' }, total: 20, big: true }]);
});

h.test('$skip and $limit', async () => {
  const c = await sales('skiplimit');
  const r = await c.aggregate([{ $sort: { _id: 1 } }, { $skip: 1 }, { $limit: 2 }]).toArray();
  assert.deepEqual(r.map((d) => d._id), [2, 3]);
});

h.test('$group with $sum (values and counting) and $avg', async () => {
  const c = await sales('groupsum');
  const r = await c.aggregate([
    { $group: { _id: '$item', qty: { $sum: '$qty' }, n: { $sum: 1 }, avgQty: { $avg: '$qty' } } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.deepEqual(r, [
    { _id: 'a', qty: 7, n: 2, avgQty: 3.5 },
    { _id: 'b', qty: 4, n: 2, avgQty: 2 },
    { _id: 'c', qty: 4, n: 1, avgQty: 4 },
  ]);
});

h.test('$group with $min and $max', async () => {
  const c = await sales('groupminmax');
  const r = await c.aggregate([
    { $group: { _id: null, lo: { $min: '$qty' }, hi: { $max: '$qty' } } },
  ]).toArray();
  assert.deepEqual(r, [{ _id: null, lo: 1, hi: 5 }]);
});

h.test('$group with $first and $last after $sort', async () => {
  const c = await sales('groupfirst');
  const r = await c.aggregate([
    { $sort: { qty: 1 } },
    { $group: { _id: '$item', first: { $first: '$qty' }, last: { $last: '$qty' } } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.deepEqual(r, [
    { _id: 'a', first: 2, last: 5 }, { _id: 'b', first: 1, last: 3 }, { _id: 'c', first: 4, last: 4 },
  ]);
});

h.test('$group with $push and $addToSet', async () => {
  const c = await sales('grouppush');
  const r = await c.aggregate([
    { $sort: { _id: 1 } },
    { $group: { _id: '$store.city', items: { $push: '$item' }, uniq: { $addToSet: '$item' } } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.equal(r.length, 3);
  assert.deepEqual(r[0], { _id: 'Lima', items: ['b'], uniq: ['b'] });
  assert.deepEqual(r[1]._id, 'Oslo');
  assert.deepEqual(r[1].items, ['a', 'c']);
  assert.deepEqual(r[2].items, ['b', 'a']);
  assert.deepEqual([...r[2].uniq].sort(), ['a', 'b']);
});

h.test('$group with $count accumulator and compound _id', async () => {
  const c = await sales('groupcount');
  const r = await c.aggregate([
    { $group: { _id: { i: '$item', p: '$price' }, n: { $count: {} } } },
    { $sort: { '_id.i': 1 } },
  ]).toArray();
  assert.deepEqual(r, [
    { _id: { i: 'a', p: 10 }, n: 2 }, { _id: { i: 'b', p: 20 }, n: 2 }, { _id: { i: 'c', p: 5 }, n: 1 },
  ]);
});

h.test('$group with $stdDevPop and $stdDevSamp', async () => {
  const c = srv.freshDb('stddev').collection('c');
  await c.insertMany([{ v: 2 }, { v: 4 }, { v: 4 }, { v: 4 }, { v: 5 }, { v: 5 }, { v: 7 }, { v: 9 }]);
  const [r] = await c.aggregate([{ $group: { _id: null, pop: { $stdDevPop: '$v' }, samp: { $stdDevSamp: '$v' } } }]).toArray();
  assert.ok(Math.abs(r.pop - 2) < 1e-9, `pop ${r.pop}`);
  assert.ok(Math.abs(r.samp - 2.138089935299395) < 1e-9, `samp ${r.samp}`);
});

h.test('$group with $mergeObjects', async () => {
  const c = srv.freshDb('merge').collection('c');
  await c.insertMany([{ _id: 1, k: 1, o: { a: 1 } }, { _id: 2, k: 1, o: { b: 2 } }, { _id: 3, k: 1, o: { a: 3 } }]);
  const r = await c.aggregate([{ $sort: { _id: 1 } }, { $group: { _id: '$k', m: { $mergeObjects: '$o' } } }]).toArray();
  assert.deepEqual(r, [{ _id: 1, m: { a: 3, b: 2 } }]);
});

h.test('$group sums across int, long and double and ignores non-numbers', async () => {
  const c = srv.freshDb('summix').collection('c');
  await c.insertMany([{ v: 1 }, { v: 2.5 }, { v: 'x' }, { v: null }, {}]);
  const [r] = await c.aggregate([{ $group: { _id: null, s: { $sum: '$v' }, a: { $avg: '$v' } } }]).toArray();
  assert.equal(r.s, 3.5);
  assert.equal(r.a, 1.75);
});

h.test('$group without _id fails with 15955', async () => {
  const c = await sales('groupnoid');
  await h.expectCode(c.aggregate([{ $group: { n: { $sum: 1 } } }]).toArray(), 15955);
});

h.test('$count stage', async () => {
  const c = await sales('count');
  assert.deepEqual(await c.aggregate([{ $match: { price: { $gte: 10 } } }, { $count: 'n' }]).toArray(), [{ n: 4 }]);
  assert.deepEqual(await c.aggregate([{ $match: { price: 999 } }, { $count: 'n' }]).toArray(), []);
});

h.test('$unwind with and without preserveNullAndEmptyArrays and includeArrayIndex', async () => {
  const c = await sales('unwind');
  const r = await c.aggregate([{ $unwind: '$tags' }, { $project: { tags: 1 } }, { $sort: { _id: 1, tags: 1 } }]).toArray();
  assert.deepEqual(r, [{ _id: 1, tags: 'x' }, { _id: 1, tags: 'y' }, { _id: 2, tags: 'y' }, { _id: 4, tags: 'x' }]);
  const p = await c.aggregate([
    { $unwind: { path: '$tags', preserveNullAndEmptyArrays: true, includeArrayIndex: 'i' } },
    { $project: { tags: 1, i: 1 } }, { $sort: { _id: 1, tags: 1 } },
  ]).toArray();
  assert.deepEqual(p, [
    { _id: 1, tags: 'x', i: 0 }, { _id: 1, tags: 'y', i: 1 }, { _id: 2, tags: 'y', i: 0 },
    { _id: 3, i: null }, { _id: 4, tags: 'x', i: 0 }, { _id: 5, i: null },
  ]);
});

h.test('$replaceRoot and $replaceWith', async () => {
  const c = await sales('replaceroot');
  const r = await c.aggregate([{ $match: { _id: 1 } }, { $replaceRoot: { newRoot: '$store' } }]).toArray();
  assert.deepEqual(r, [{ city: 'Oslo' }]);
  const w = await c.aggregate([{ $match: { _id: 2 } }, { $replaceWith: { x: '$item', y: '$qty' } }]).toArray();
  assert.deepEqual(w, [{ x: 'b', y: 1 }]);
  await h.expectCode(c.aggregate([{ $replaceRoot: { newRoot: '$item' } }]).toArray(), 40228);
});

h.test('$sortByCount', async () => {
  const c = await sales('sortbycount');
  const r = await c.aggregate([{ $sortByCount: '$store.city' }]).toArray();
  assert.equal(r.length, 3);
  assert.deepEqual(r[2], { _id: 'Lima', count: 1 });
  assert.deepEqual(r.slice(0, 2).map((d) => d.count), [2, 2]);
});

h.test('$lookup with localField/foreignField', async () => {
  const db = srv.freshDb('lookup');
  await db.collection('orders').insertMany([{ _id: 1, item: 'a' }, { _id: 2, item: 'z' }, { _id: 3, item: ['a', 'b'] }]);
  await db.collection('items').insertMany([{ _id: 'a', name: 'Apple' }, { _id: 'b', name: 'Banana' }]);
  const r = await db.collection('orders').aggregate([
    { $lookup: { from: 'items', localField: 'item', foreignField: '_id', as: 'info' } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.deepEqual(r[0].info, [{ _id: 'a', name: 'Apple' }]);
  assert.deepEqual(r[1].info, []);
  assert.deepEqual(r[2].info.map((d) => d._id).sort(), ['a', 'b']);
});

h.test('$lookup with let and pipeline', async () => {
  const db = srv.freshDb('lookuppipe');
  await db.collection('o').insertMany([{ _id: 1, min: 5 }]);
  await db.collection('p').insertMany([{ _id: 'x', v: 3 }, { _id: 'y', v: 7 }, { _id: 'z', v: 9 }]);
  const r = await db.collection('o').aggregate([
    { $lookup: { from: 'p', let: { m: '$min' }, pipeline: [{ $match: { $expr: { $gte: ['$v', '$$m'] } } }, { $sort: { v: 1 } }, { $project: { _id: 1 } }], as: 'hits' } },
  ]).toArray();
  assert.deepEqual(r, [{ _id: 1, min: 5, hits: [{ _id: 'y' }, { _id: 'z' }] }]);
});

h.test('aggregate over many documents uses a cursor with getMore', async () => {
  const c = srv.freshDb('aggbig').collection('c');
  await c.insertMany(Array.from({ length: 1500 }, (_, i) => ({ _id: i, m: i % 3 })));
  const r = await c.aggregate([{ $match: { m: 0 } }, { $project: { _id: 1 } }], { batchSize: 100 }).toArray();
  assert.equal(r.length, 500);
});

h.test('raw aggregate requires a cursor option and reports unknown stages', async () => {
  const db = srv.freshDb('aggraw');
  await db.collection('c').insertOne({ a: 1 });
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [] }), 9);
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $nosuchstage: {} }], cursor: {} }), 40324);
  const r = await db.command({ aggregate: 'c', pipeline: [{ $project: { _id: 0 } }], cursor: {} });
  assert.deepEqual(r.cursor.firstBatch, [{ a: 1 }]);
  assert.equal(r.cursor.ns, `${db.databaseName}.c`);
});

h.test('aggregate on a missing collection returns nothing', async () => {
  const db = srv.freshDb('aggmissing');
  assert.deepEqual(await db.collection('none').aggregate([{ $match: {} }]).toArray(), []);
});

h.test('expression operators in $project', async () => {
  const c = srv.freshDb('exprops').collection('c');
  await c.insertOne({ _id: 1, a: 7, b: 2, s: 'Hello', arr: [3, 1, 2], d: new Date(Date.UTC(2024, 1, 29, 13, 5, 6)) });
  const [r] = await c.aggregate([{ $project: {
    _id: 0,
    add: { $add: ['$a', '$b'] }, sub: { $subtract: ['$a', '$b'] }, div: { $divide: ['$a', '$b'] },
    mod: { $mod: ['$a', '$b'] }, up: { $toUpper: '$s' }, cat: { $concat: ['$s', '!'] },
    sz: { $size: '$arr' }, cond: { $cond: [{ $gt: ['$a', 5] }, 'big', 'small'] },
    ifn: { $ifNull: ['$missing', 'dflt'] }, yr: { $year: '$d' }, mon: { $month: '$d' },
    sub2: { $substrCP: ['$s', 1, 3] }, inArr: { $in: [2, '$arr'] }, first: { $arrayElemAt: ['$arr', 0] },
  } }]).toArray();
  assert.deepEqual(r, {
    add: 9, sub: 5, div: 3.5, mod: 1, up: 'HELLO', cat: 'Hello!', sz: 3, cond: 'big', ifn: 'dflt',
    yr: 2024, mon: 2, sub2: 'ell', inArr: true, first: 3,
  });
});

// ---------------------------------------------------------------- bulkWrite

h.test('ordered bulkWrite with every operation kind', async () => {
  const c = srv.freshDb('bulk').collection('c');
  await c.insertMany([{ _id: 1, v: 1 }, { _id: 2, v: 2 }, { _id: 3, v: 3 }]);
  const r = await c.bulkWrite([
    { insertOne: { document: { _id: 4, v: 4 } } },
    { updateOne: { filter: { _id: 1 }, update: { $set: { v: 10 } } } },
    { updateMany: { filter: { v: { $gte: 3 } }, update: { $inc: { v: 100 } } } },
    { replaceOne: { filter: { _id: 2 }, replacement: { v: 'r' } } },
    { deleteOne: { filter: { _id: 3 } } },
    { updateOne: { filter: { _id: 9 }, update: { $set: { v: 9 } }, upsert: true } },
    { deleteMany: { filter: { v: 'nothing' } } },
  ], { ordered: true });
  assert.equal(r.insertedCount, 1);
  // updateMany matches _id 1 (now 10), 3 and 4.
  assert.equal(r.matchedCount, 5);
  assert.equal(r.modifiedCount, 5);
  assert.equal(r.deletedCount, 1);
  assert.equal(r.upsertedCount, 1);
  assert.equal(r.upsertedIds[5], 9);
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [
    { _id: 1, v: 110 }, { _id: 2, v: 'r' }, { _id: 4, v: 104 }, { _id: 9, v: 9 },
  ]);
});

h.test('ordered bulkWrite stops at the first error', async () => {
  const c = srv.freshDb('bulkord').collection('c');
  let err;
  try {
    await c.bulkWrite([
      { insertOne: { document: { _id: 1 } } },
      { insertOne: { document: { _id: 1 } } },
      { insertOne: { document: { _id: 2 } } },
    ], { ordered: true });
  } catch (e) { err = e; }
  assert.ok(err instanceof MongoBulkWriteError, `got ${err}`);
  assert.equal(err.writeErrors[0].index, 1);
  assert.equal(err.writeErrors[0].code, 11000);
  assert.equal(await c.countDocuments(), 1);
});

h.test('unordered bulkWrite continues past errors', async () => {
  const c = srv.freshDb('bulkunord').collection('c');
  await c.insertOne({ _id: 1, v: 'a' });
  let err;
  try {
    await c.bulkWrite([
      { insertOne: { document: { _id: 1 } } },
      { updateOne: { filter: { _id: 1 }, update: { $inc: { v: 1 } } } },
      { insertOne: { document: { _id: 2 } } },
      { deleteOne: { filter: { _id: 1 } } },
    ], { ordered: false });
  } catch (e) { err = e; }
  assert.ok(err instanceof MongoBulkWriteError, `got ${err}`);
  assert.deepEqual(err.writeErrors.map((w) => [w.index, w.code]), [[0, 11000], [1, 14]]);
  assert.deepEqual((await c.find().toArray()).map((d) => d._id), [2]);
});

h.test('$out replaces the target collection', async () => {
  const c = await sales('out');
  const db = srv.client.db(c.dbName);
  await db.collection('dest').insertOne({ _id: 'old' });
  const r = await c.aggregate([{ $match: { item: 'a' } }, { $project: { qty: 1 } }, { $out: 'dest' }]).toArray();
  assert.deepEqual(r, []);
  assert.deepEqual(await db.collection('dest').find().sort({ _id: 1 }).toArray(), [{ _id: 1, qty: 2 }, { _id: 3, qty: 5 }]);
});

h.test('$merge inserts new and merges matching documents', async () => {
  const c = await sales('merge');
  const db = srv.client.db(c.dbName);
  await db.collection('totals').insertOne({ _id: 'a', note: 'keep' });
  await c.aggregate([{ $group: { _id: '$item', qty: { $sum: '$qty' } } }, { $merge: { into: 'totals' } }]).toArray();
  assert.deepEqual(await db.collection('totals').find().sort({ _id: 1 }).toArray(), [
    { _id: 'a', note: 'keep', qty: 7 }, { _id: 'b', qty: 4 }, { _id: 'c', qty: 4 },
  ]);
});

h.test('$out and $merge targets as mongod checks them: a capped $out target 17152, a view 166, $merge on fields without a unique index 51183 (with one, it merges)', async () => {
  const c = await sales('outchecks');
  const db = srv.client.db(c.dbName);
  await db.createCollection('cap', { capped: true, size: 4096 });
  await db.collection('cap').insertOne({ _id: 'kept' });
  await db.createCollection('v', { viewOn: 'cap', pipeline: [] });
  await h.expectCode(c.aggregate([{ $out: 'cap' }]).toArray(), 17152, /^namespace '.*\.cap' is capped so it can't be used for \$out$/);
  assert.deepEqual(await db.collection('cap').find().toArray(), [{ _id: 'kept' }], 'the capped target is untouched');
  await h.expectCode(c.aggregate([{ $out: 'v' }]).toArray(), 166);
  await h.expectCode(c.aggregate([{ $merge: { into: 'v' } }]).toArray(), 166);
  await h.expectCode(c.aggregate([{ $project: { _id: 0, item: 1 } }, { $merge: { into: 'byitem', on: 'item' } }]).toArray(), 51183,
    /^Cannot find index to verify that join fields will be unique$/);
  await h.expectCode(c.aggregate([{ $merge: { into: 'cap', on: ['item', 'qty'] } }]).toArray(), 51183);
  await db.collection('byitem').createIndex({ item: 1 }, { unique: true });
  await db.collection('byitem').insertOne({ item: 'a', note: 'keep' });
  await c.aggregate([{ $group: { _id: null, item: { $first: 'a' }, n: { $sum: 1 } } }, { $project: { _id: 0 } },
    { $merge: { into: 'byitem', on: 'item' } }]).toArray();
  const docs = await db.collection('byitem').find({}, { projection: { _id: 0 } }).toArray();
  assert.deepEqual(docs, [{ item: 'a', note: 'keep', n: 5 }]);
});

h.test('$facet runs sub-pipelines over the same input', async () => {
  const c = await sales('facet');
  const r = await c.aggregate([{ $facet: {
    cheap: [{ $match: { price: { $lt: 15 } } }, { $project: { _id: 1 } }, { $sort: { _id: 1 } }],
    n: [{ $count: 'n' }],
  } }]).toArray();
  assert.deepEqual(r, [{ cheap: [{ _id: 1 }, { _id: 3 }, { _id: 4 }], n: [{ n: 5 }] }]);
});

h.test('$bucket groups by boundaries', async () => {
  const c = await sales('bucket');
  const r = await c.aggregate([{ $bucket: { groupBy: '$qty', boundaries: [0, 3, 6], output: { n: { $sum: 1 } } } }]).toArray();
  assert.deepEqual(r, [{ _id: 0, n: 2 }, { _id: 3, n: 3 }]);
});

h.test('$sample returns the requested number of distinct documents', async () => {
  const c = await sales('sample');
  const r = await c.aggregate([{ $sample: { size: 3 } }]).toArray();
  assert.equal(r.length, 3);
  assert.equal(new Set(r.map((d) => d._id)).size, 3);
});

h.test('array, conversion, date and conditional expressions', async () => {
  const c = srv.freshDb('exprops2').collection('c');
  await c.insertOne({ _id: 1, arr: [1, 2, 3, 4], n: '42', d: new Date(Date.UTC(2024, 0, 15, 10, 30, 0)), v: 7, o: { a: 1, b: 2 } });
  const [r] = await c.aggregate([{ $project: {
    _id: 0,
    mapped: { $map: { input: '$arr', as: 'x', in: { $multiply: ['$$x', 10] } } },
    filtered: { $filter: { input: '$arr', as: 'x', cond: { $gt: ['$$x', 2] } } },
    reduced: { $reduce: { input: '$arr', initialValue: 0, in: { $add: ['$$value', '$$this'] } } },
    toInt: { $toInt: '$n' }, toStr: { $toString: '$v' }, dstr: { $dateToString: { format: '%Y-%m-%d %H:%M', date: '$d' } },
    sw: { $switch: { branches: [{ case: { $lt: ['$v', 5] }, then: 'low' }, { case: { $lt: ['$v', 10] }, then: 'mid' }], default: 'high' } },
    slice: { $slice: ['$arr', 1, 2] }, rev: { $reverseArray: '$arr' }, cat: { $concatArrays: ['$arr', [5]] },
    objArr: { $objectToArray: '$o' }, isArr: { $isArray: '$arr' }, typ: { $type: '$n' },
    rnd: { $round: [{ $divide: ['$v', 3] }, 2] }, abs: { $abs: -3 }, maxA: { $max: '$arr' }, sumA: { $sum: '$arr' },
    split: { $split: ['a,b,c', ','] }, trim: { $trim: { input: '  x  ' } },
  } }]).toArray();
  assert.deepEqual(r, {
    mapped: [10, 20, 30, 40], filtered: [3, 4], reduced: 10, toInt: 42, toStr: '7', dstr: '2024-01-15 10:30',
    sw: 'mid', slice: [2, 3], rev: [4, 3, 2, 1], cat: [1, 2, 3, 4, 5], objArr: [{ k: 'a', v: 1 }, { k: 'b', v: 2 }],
    isArr: true, typ: 'string', rnd: 2.33, abs: 3, maxA: 4, sumA: 10, split: ['a', 'b', 'c'], trim: 'x',
  });
});

h.test('$indexOfArray and $indexOfBytes', async () => {
  const c = srv.freshDb('indexof').collection('c');
  await c.insertOne({ arr: [1, 2, 3], s: 'hello' });
  const [r] = await c.aggregate([{ $project: { _id: 0, i: { $indexOfArray: ['$arr', 3] }, j: { $indexOfBytes: ['$s', 'l'] } } }]).toArray();
  assert.deepEqual(r, { i: 2, j: 2 });
});

h.test('expression errors: $divide by zero (2) and $toInt of a bad string (241)', async () => {
  const c = srv.freshDb('exprerr').collection('c');
  await c.insertOne({ a: 1, s: 'x' });
  await h.expectCode(c.aggregate([{ $project: { q: { $divide: ['$a', 0] } } }]).toArray(), 2);
  await h.expectCode(c.aggregate([{ $project: { q: { $toInt: '$s' } } }]).toArray(), 241);
});

h.test('$limit and $skip after $project/$set/$unset run first (MongoDB\'s optimisation): a dropped document never fails an expression', async () => {
  const db = srv.freshDb('limitfirst');
  await db.collection('c').insertMany([{ _id: 1, a: 2 }, { _id: 2, a: 'not a number' }]);
  const one = await db.collection('c').aggregate([{ $sort: { _id: 1 } }, { $project: { y: { $multiply: ['$a', 2] } } }, { $limit: 1 }]).toArray();
  assert.deepEqual(one, [{ _id: 1, y: 4 }]);
  const skipped = await db.collection('c').aggregate([{ $sort: { _id: -1 } }, { $set: { y: { $multiply: ['$a', 2] } } }, { $unset: 'a' }, { $skip: 1 }, { $limit: 1 }]).toArray();
  assert.deepEqual(skipped, [{ _id: 1, y: 4 }]);
  await h.expectCode(db.collection('c').aggregate([{ $project: { y: { $multiply: ['$a', 2] } } }]).toArray(), 14);
});

// A TTL monitor pass visits every collection in namespace order while $out
// renames its temporary collection over the target: each must lock in that
// order too, or the two wait on each other until a lock times out (it did,
// once in CI, as "target namespace exists" after 10 s).
h.test('$out over an existing target while the TTL monitor sweeps never times out', async () => {
  const db = srv.freshDb('outttl');
  const src = db.collection('src');
  await src.insertMany([{ _id: 1, v: 1 }, { _id: 2, v: 2 }]);
  await db.collection('dest').insertOne({ _id: 'old' });
  const ttl = db.collection('ttl');
  await ttl.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  let stop = false;
  const churn = (async () => {
    // Documents already due: the monitor sweeps again and again.
    for (let i = 0; !stop; i++) await ttl.insertOne({ at: new Date(Date.now() - 1000), i });
  })();
  const lister = (async () => {
    while (!stop) await db.listCollections().toArray();
  })();
  try {
    for (let i = 0; i < 60; i++) {
      const t0 = Date.now();
      await src.aggregate([{ $match: {} }, { $set: { round: i } }, { $out: 'dest' }]).toArray();
      assert.ok(Date.now() - t0 < 5000, `round ${i} waited ${Date.now() - t0} ms`);
      assert.deepEqual((await db.collection('dest').find().sort({ _id: 1 }).toArray()).map((d) => [d._id, d.round]),
        [[1, i], [2, i]]);
    }
  } finally {
    stop = true;
    await churn;
    await lister;
  }
});

h.test('a projection value with an operator first and more fields is a sub-projection: 16410 in find and $project (projection_parser\'s parseSubObject)', async () => {
  const db = srv.freshDb('projexpr');
  const c = db.collection('c');
  await c.insertOne({ _id: 1, x: 2 });
  const fp = /FieldPath field names may not start with '\$'\. Consider using \$getField or \$setField\.$/;
  await h.expectCode(c.find({}, { projection: { s: { $meta: 'textScore', x: 1 } } }).toArray(), 16410, fp);
  await h.expectCode(c.aggregate([{ $project: { s: { $add: [1, 2], x: 1 } } }]).toArray(), 16410, fp);
  // The '$' field second: the same FieldPath error.
  await h.expectCode(c.find({}, { projection: { s: { x: 1, $meta: 'textScore' } } }).toArray(), 16410);
  assert.deepEqual(await c.aggregate([{ $project: { s: { $add: ['$x', 1] } } }]).toArray(), [{ _id: 1, s: 3 }]);
});
