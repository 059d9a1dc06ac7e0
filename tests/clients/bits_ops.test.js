'use strict';
// The bit query operators ($bitsAllSet, $bitsAllClear, $bitsAnySet,
// $bitsAnyClear) and the $bit update operator through the Node driver, to
// MongoDB 8.0 behaviour: the manual's examples with the manual's results,
// argument forms and their error codes (mongod's expression_parser.cpp and
// bit_node.cpp), and the contexts a filter appears in.
const assert = require('node:assert/strict');
const { Binary, Long, Int32, Double, Decimal128 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

function bin(b64) { return new Binary(Buffer.from(b64, 'base64'), 0); }

/* The manual's collection (reference/operator/query/bitsAllSet and the others). */
async function docsFixture(tag) {
  const c = srv.freshDb(tag).collection('collection');
  await c.insertMany([
    { _id: 1, a: 54, binaryValueofA: '00110110' },
    { _id: 2, a: 20, binaryValueofA: '00010100' },
    { _id: 3, a: new Double(20.0), binaryValueofA: '00010100' },
    { _id: 4, a: bin('Zg=='), binaryValueofA: '01100110' },
  ]);
  return c;
}

async function ids(c, filter) {
  return (await c.find(filter).sort({ _id: 1 }).toArray()).map((d) => d._id);
}

// ------------------------------------------------------- the manual's examples

h.test('$bitsAllSet: the manual\'s position list, integer and BinData bitmask examples', async () => {
  const c = await docsFixture('allset');
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: [1, 5] } }), [1, 4]);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: 50 } }), [1]);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: bin('MA==') } }), [1]);
});

h.test('$bitsAllClear: the manual\'s examples', async () => {
  const c = await docsFixture('allclear');
  assert.deepEqual(await ids(c, { a: { $bitsAllClear: [1, 5] } }), [2, 3]);
  assert.deepEqual(await ids(c, { a: { $bitsAllClear: 35 } }), [2, 3]);
  assert.deepEqual(await ids(c, { a: { $bitsAllClear: bin('IA==') } }), [2, 3]);
});

h.test('$bitsAnySet: the manual\'s examples', async () => {
  const c = await docsFixture('anyset');
  assert.deepEqual(await ids(c, { a: { $bitsAnySet: [1, 5] } }), [1, 4]);
  assert.deepEqual(await ids(c, { a: { $bitsAnySet: 35 } }), [1, 4]);
  assert.deepEqual(await ids(c, { a: { $bitsAnySet: bin('MA==') } }), [1, 2, 3, 4]);
});

h.test('$bitsAnyClear: the manual\'s examples', async () => {
  const c = await docsFixture('anyclear');
  assert.deepEqual(await ids(c, { a: { $bitsAnyClear: [1, 5] } }), [2, 3]);
  assert.deepEqual(await ids(c, { a: { $bitsAnyClear: 35 } }), [1, 2, 3, 4]);
  assert.deepEqual(await ids(c, { a: { $bitsAnyClear: bin('MA==') } }), [2, 3, 4]);
});

h.test('numbers are sign-extended, BinData zero-extended (the manual\'s -5 / +5 and ww== examples)', async () => {
  const c = srv.freshDb('ext').collection('c');
  await c.insertMany([{ _id: 1, a: -5 }, { _id: 2, a: 5 }, { _id: 3, a: bin('ww==') }]);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: [200] } }), [1]);
  assert.deepEqual(await ids(c, { a: { $bitsAllClear: [200] } }), [2, 3]);
  // x = 11000011: every bit other than 0, 1, 6 and 7 is clear (5 = 101 has bit 2).
  assert.deepEqual(await ids(c, { a: { $bitsAllClear: [2, 3, 4, 5, 8, 100] } }), [3]);
  assert.deepEqual(await ids(c, { a: { $bitsAllClear: [3, 4, 5, 8, 100] } }), [2, 3]);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: [0, 1, 6, 7] } }), [1, 3]);
  // -5 is ...11111011 in two's complement.
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: [0, 1, 3, 63] } }), [1]);
  assert.deepEqual(await ids(c, { a: { $bitsAnyClear: [2] } }), [1, 3]);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: Long.fromString('9223372036854775807') } }), []);
});

// ------------------------------------------------------- which values take part

h.test('only whole numbers of every numeric type and BinData are tested; other types never match', async () => {
  const c = srv.freshDb('types').collection('c');
  await c.insertMany([
    { _id: 1, a: new Int32(3) },
    { _id: 2, a: Long.fromNumber(3) },
    { _id: 3, a: new Double(3.0) },
    { _id: 4, a: new Double(3.5) },
    { _id: 5, a: Decimal128.fromString('3') },
    { _id: 6, a: '3' },
    { _id: 7, a: true },
    { _id: 8, a: null },
    { _id: 9 },
    { _id: 10, a: new Double(1e300) },
    { _id: 11, a: new Double(NaN) },
    { _id: 12, a: new Date(3) },
    { _id: 13, a: { x: 3 } },
  ]);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: 3 } }), [1, 2, 3, 5]);
  assert.deepEqual(await ids(c, { a: { $bitsAnyClear: 3 } }), []);
  assert.deepEqual(await ids(c, { a: { $bitsAllClear: 4 } }), [1, 2, 3, 5]);
  // 3.5, 1e300 (beyond int64) and NaN never match, not even an empty position list.
  assert.deepEqual(await ids(c, { a: { $bitsAllClear: [] } }), [1, 2, 3, 5]);
  assert.deepEqual(await ids(c, { a: { $bitsAnySet: [] } }), []);
  assert.deepEqual(await ids(c, { a: { $not: { $bitsAllSet: 1 } } }), [4, 6, 7, 8, 9, 10, 11, 12, 13]);
});

h.test('arrays match when one element matches; $elemMatch, $not and $nor compose', async () => {
  const c = srv.freshDb('arr').collection('c');
  await c.insertMany([
    { _id: 1, a: [1, 2, 'x'] },
    { _id: 2, a: [4, 8] },
    { _id: 3, a: 6 },
    { _id: 4, a: 'no' },
    { _id: 5, b: [{ f: 7 }, { f: 8 }] },
  ]);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: [1] } }), [1, 3]);
  assert.deepEqual(await ids(c, { a: { $elemMatch: { $bitsAllSet: 8, $gt: 4 } } }), [2]);
  assert.deepEqual(await ids(c, { a: { $elemMatch: { $bitsAnySet: 1 } } }), [1]);
  assert.deepEqual(await ids(c, { a: { $not: { $bitsAnySet: [1] } } }), [2, 4, 5]);
  // [1, 2, 'x'] has 2, with bit 0 clear.
  assert.deepEqual(await ids(c, { $nor: [{ a: { $bitsAllClear: 1 } }] }), [4, 5]);
  assert.deepEqual(await ids(c, { b: { $elemMatch: { f: { $bitsAllSet: [0, 1, 2] } } } }), [5]);
  assert.deepEqual(await ids(c, { 'b.f': { $bitsAllSet: 8 } }), [5]);
  assert.deepEqual(await ids(c, { $or: [{ a: { $bitsAllSet: 4 } }, { 'b.f': { $bitsAnySet: 1 } }] }), [2, 3, 5]);
});

h.test('count, delete, update filters and aggregate $match use the bit tests', async () => {
  const c = await docsFixture('ctx');
  assert.equal(await c.countDocuments({ a: { $bitsAnySet: [1, 5] } }), 2);
  assert.equal((await c.db.command({ count: 'collection', query: { a: { $bitsAllSet: 4 } } })).n, 4);
  const agg = await c.aggregate([{ $match: { a: { $bitsAllClear: [1, 5] } } }, { $sort: { _id: 1 } }]).toArray();
  assert.deepEqual(agg.map((d) => d._id), [2, 3]);
  const u = await c.updateMany({ a: { $bitsAllSet: [2, 4] } }, { $set: { hit: true } });
  assert.equal(u.matchedCount, 3);
  assert.deepEqual(await ids(c, { hit: true }), [1, 2, 3]);
  const d = await c.deleteMany({ a: { $bitsAnyClear: [1] } });
  assert.equal(d.deletedCount, 2);
  assert.deepEqual(await ids(c, {}), [1, 4]);
});

h.test('an indexed field gives the same answers (the index is not used for the bit test)', async () => {
  const c = srv.freshDb('ix').collection('c');
  const docs = [];
  for (let i = 0; i < 64; i++) docs.push({ _id: i, a: i, s: i % 3 });
  await c.insertMany(docs);
  const want = await ids(c, { a: { $bitsAllSet: [0, 3] }, s: 1 });
  await c.createIndex({ a: 1 });
  await c.createIndex({ s: 1 });
  await c.createIndex({ a: 1, s: 1 }, { sparse: true });
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: [0, 3] }, s: 1 }), want);
  assert.deepEqual(want, docs.filter((d) => (d.a & 9) === 9 && d.s === 1).map((d) => d._id));
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: [0, 3] } }),
    docs.filter((d) => (d.a & 9) === 9).map((d) => d._id));
  const hinted = await c.find({ a: { $bitsAnyClear: 1 } }).hint({ a: 1 }).sort({ _id: 1 }).toArray();
  assert.deepEqual(hinted.map((d) => d._id), docs.filter((d) => (d.a & 1) === 0).map((d) => d._id));
});

// ------------------------------------------------------- argument errors

h.test('a bitmask must be a non-negative whole 64-bit number: 9 FailedToParse', async () => {
  const c = await docsFixture('maskerr');
  for (const op of ['$bitsAllSet', '$bitsAllClear', '$bitsAnySet', '$bitsAnyClear']) {
    await h.expectCode(c.find({ a: { [op]: -1 } }).toArray(), 9, /Expected a non-negative number in/);
    await h.expectCode(c.find({ a: { [op]: 1.5 } }).toArray(), 9, /Expected an integer/);
    await h.expectCode(c.find({ a: { [op]: NaN } }).toArray(), 9, /found NaN/);
    await h.expectCode(c.find({ a: { [op]: 1e20 } }).toArray(), 9, /Cannot represent as a 64-bit integer/);
    await h.expectCode(c.find({ a: { [op]: Decimal128.fromString('2.5') } }).toArray(), 9);
  }
  // A whole double and a Long are fine.
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: new Double(4.0) } }), [1, 2, 3, 4]);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: Long.fromNumber(4) } }), [1, 2, 3, 4]);
});

h.test('bit positions must be non-negative 32-bit integers: 2 BadValue', async () => {
  const c = await docsFixture('poserr');
  await h.expectCode(c.find({ a: { $bitsAllSet: [-1] } }).toArray(), 2,
    /Failed to parse bit position\. Expected a non-negative number in/);
  await h.expectCode(c.find({ a: { $bitsAllSet: [1.5] } }).toArray(), 2, /Failed to parse bit position/);
  await h.expectCode(c.find({ a: { $bitsAnySet: ['1'] } }).toArray(), 2, /Expected a number in/);
  await h.expectCode(c.find({ a: { $bitsAnyClear: [1, null] } }).toArray(), 2);
  await h.expectCode(c.find({ a: { $bitsAllClear: [2147483648] } }).toArray(), 2, /in an int/);
  await h.expectCode(c.find({ a: { $bitsAllClear: [NaN] } }).toArray(), 2);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: [new Double(1.0), Long.fromNumber(5)] } }), [1, 4]);
});

h.test('other operand types: 2 BadValue "takes an Array, a number, or a BinData"', async () => {
  const c = await docsFixture('typeerr');
  for (const bad of ['1', null, true, { x: 1 }, new Date(0)]) {
    await h.expectCode(c.find({ a: { $bitsAllSet: bad } }).toArray(), 2,
      /^a takes an Array, a number, or a BinData but received: \$bitsAllSet: /);
  }
  await h.expectCode(c.countDocuments({ a: { $bitsAnyClear: 'x' } }), 2);
  await h.expectCode(c.deleteMany({ a: { $bitsAnySet: -3 } }), 9);
  await h.expectCode(c.updateOne({ a: { $bitsAllClear: [-3] } }, { $set: { x: 1 } }), 2);
  await h.expectCode(c.aggregate([{ $match: { a: { $bitsAllSet: {} } } }]).toArray(), 2);
  await h.expectCode(c.find({ a: { $elemMatch: { $bitsAllSet: 'x' } } }).toArray(), 2);
  await h.expectCode(c.find({ a: { $not: { $bitsAllSet: 0.5 } } }).toArray(), 9);
});

// ------------------------------------------------------- $bit update operator

async function typeOf(c, id, field) {
  const r = await c.aggregate([{ $match: { _id: id } }, { $project: { t: { $type: `$${field}` } } }]).toArray();
  return r[0].t;
}

h.test('$bit: the manual\'s and / or / xor examples', async () => {
  const c = srv.freshDb('bitdocs').collection('switches');
  await c.insertMany([
    { _id: 1, expdata: new Int32(13) },
    { _id: 2, expdata: new Int32(3) },
    { _id: 3, expdata: new Int32(1) },
  ]);
  let r = await c.updateOne({ _id: 1 }, { $bit: { expdata: { and: new Int32(10) } } });
  assert.equal(r.modifiedCount, 1);
  r = await c.updateOne({ _id: 2 }, { $bit: { expdata: { or: new Int32(5) } } });
  assert.equal(r.modifiedCount, 1);
  r = await c.updateOne({ _id: 3 }, { $bit: { expdata: { xor: new Int32(5) } } });
  assert.equal(r.modifiedCount, 1);
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(),
    [{ _id: 1, expdata: 8 }, { _id: 2, expdata: 7 }, { _id: 3, expdata: 4 }]);
  for (const id of [1, 2, 3]) assert.equal(await typeOf(c, id, 'expdata'), 'int');
  // The manual's NumberLong form: int op long gives a long.
  await c.updateOne({ _id: 3 }, { $bit: { expdata: { xor: Long.fromNumber(1) } } });
  assert.deepEqual(await c.findOne({ _id: 3 }), { _id: 3, expdata: 5 });
  assert.equal(await typeOf(c, 3, 'expdata'), 'long');
});

h.test('$bit: types, operation order, missing fields, no-ops and negative values', async () => {
  const c = srv.freshDb('bittypes').collection('c');
  await c.insertMany([{ _id: 1, a: Long.fromNumber(12), b: new Int32(6) }]);
  await c.updateOne({ _id: 1 }, { $bit: { a: { and: new Int32(4) }, b: { or: new Int32(1), and: new Int32(3) } } });
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, a: 4, b: 3 });
  assert.equal(await typeOf(c, 1, 'a'), 'long');
  assert.equal(await typeOf(c, 1, 'b'), 'int');
  // A missing field starts from int32 0.
  await c.updateOne({ _id: 1 }, { $bit: { m: { or: new Int32(5) }, n: { xor: Long.fromNumber(3) }, 'o.p': { and: new Int32(7) } } });
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, a: 4, b: 3, m: 5, n: 3, o: { p: 0 } });
  assert.equal(await typeOf(c, 1, 'm'), 'int');
  assert.equal(await typeOf(c, 1, 'n'), 'long');
  // An unchanged value is a no-op.
  const r = await c.updateOne({ _id: 1 }, { $bit: { b: { and: new Int32(-1) } } });
  assert.equal(r.matchedCount, 1);
  assert.equal(r.modifiedCount, 0);
  // Negative values are two's complement.
  await c.updateOne({ _id: 1 }, { $bit: { b: { xor: new Int32(-1) } } });
  assert.equal((await c.findOne({ _id: 1 })).b, -4);
  await c.updateOne({ _id: 1 }, { $bit: { a: { or: Long.fromString('-9223372036854775808') } } });
  const d = await c.findOne({ _id: 1 }, { promoteLongs: false });
  assert.equal(d.a.toString(), '-9223372036854775804');
});

h.test('$bit through "$", "$[]", "$[name]" with arrayFilters, upserts and findOneAndUpdate', async () => {
  const c = srv.freshDb('bitpaths').collection('c');
  await c.insertMany([
    { _id: 1, arr: [1, 2, 3] },
    { _id: 2, arr: [{ v: 1 }, { v: 8 }] },
  ]);
  await c.updateOne({ _id: 1, arr: 2 }, { $bit: { 'arr.$': { or: new Int32(4) } } });
  assert.deepEqual((await c.findOne({ _id: 1 })).arr, [1, 6, 3]);
  await c.updateOne({ _id: 1 }, { $bit: { 'arr.$[]': { and: new Int32(2) } } });
  assert.deepEqual((await c.findOne({ _id: 1 })).arr, [0, 2, 2]);
  await c.updateOne({ _id: 2 }, { $bit: { 'arr.$[e].v': { xor: new Int32(3) } } },
    { arrayFilters: [{ 'e.v': { $bitsAllSet: 8 } }] });
  assert.deepEqual((await c.findOne({ _id: 2 })).arr, [{ v: 1 }, { v: 11 }]);
  await c.updateOne({ _id: 1 }, { $bit: { 'arr.5': { or: new Int32(9) } } });
  assert.deepEqual((await c.findOne({ _id: 1 })).arr, [0, 2, 2, null, null, 9]);
  const up = await c.updateOne({ _id: 3, k: 'x' }, { $bit: { f: { or: new Int32(5) } } }, { upsert: true });
  assert.equal(up.upsertedId, 3);
  assert.deepEqual(await c.findOne({ _id: 3 }), { _id: 3, k: 'x', f: 5 });
  const fm = await c.findOneAndUpdate({ _id: 3 }, { $bit: { f: { and: new Int32(4) } } },
    { returnDocument: 'after', includeResultMetadata: false });
  assert.deepEqual(fm, { _id: 3, k: 'x', f: 4 });
  const many = await c.updateMany({}, { $bit: { g: { or: new Int32(1) } } });
  assert.equal(many.modifiedCount, 3);
  // update_bit_examples.js: elements 9 and 10 created past the end, with null padding.
  await c.insertOne({ _id: 4, a: [new Int32(0)] });
  await c.updateOne({ _id: 4 }, { $bit: { 'a.9': { or: new Int32(0) }, 'a.10': { or: new Int32(0) } } });
  assert.deepEqual((await c.findOne({ _id: 4 })).a, [0, null, null, null, null, null, null, null, null, 0, 0]);
});

h.test('$bit errors: operand shape 2, non-integral targets 2, _id 66, conflicts 40', async () => {
  const c = srv.freshDb('biterr').collection('c');
  await c.insertMany([{ _id: 1, a: 1.5, s: 'x', arr: [1], o: { x: 1 }, i: 3 }]);
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { i: 5 } }), 2,
    /The \$bit modifier is not compatible with a int\. You must pass in an embedded document/);
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { i: { not: new Int32(1) } } }), 2,
    /only supports 'and', 'or', and 'xor', not 'not'/);
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { i: { and: 1.5 } } }), 2,
    /must be an Integer\(32\/64 bit\); a 'double' is not supported here/);
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { i: { and: 'x' } } }), 2);
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { i: {} } }), 2, /at least one bitwise operation/);
  for (const f of ['a', 's', 'arr', 'o']) {
    await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { [f]: { or: new Int32(1) } } }), 2,
      /Cannot apply \$bit to a value of non-integral type\._id: 1 has the field .* of non-integer type/);
  }
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: 5 }), 9);
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { _id: { or: new Int32(2) } } }), 66);
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { i: { or: new Int32(1) } }, $set: { i: 2 } }), 40);
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { 's.t': { or: new Int32(1) } } }), 28);
  // Nothing changed.
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, a: 1.5, s: 'x', arr: [1], o: { x: 1 }, i: 3 });
});

// ------------------------------------------------------- other operators' argument errors
// Codes and messages from mongod's expression_parser.cpp / matcher_type_set.cpp.

h.test('$size takes a non-negative 32-bit whole number: 2 "Failed to parse $size. ..."', async () => {
  const c = srv.freshDb('size').collection('c');
  await c.insertMany([{ _id: 1, a: [1, 2] }, { _id: 2, a: [1] }]);
  await h.expectCode(c.find({ a: { $size: 1.5 } }).toArray(), 2, /^Failed to parse \$size\. Expected an integer: \$size: 1\.5$/);
  await h.expectCode(c.find({ a: { $size: -1 } }).toArray(), 2,
    /^Failed to parse \$size\. Expected a non-negative number in: \$size: -1$/);
  await h.expectCode(c.find({ a: { $size: '2' } }).toArray(), 2, /Expected a number in: \$size: "2"/);
  await h.expectCode(c.find({ a: { $size: 2 ** 31 } }).toArray(), 2, /in an int/);
  await h.expectCode(c.find({ a: { $size: { $gt: 1 } } }).toArray(), 2);
  await h.expectCode(c.countDocuments({ a: { $size: NaN } }), 2, /found NaN/);
  assert.deepEqual(await ids(c, { a: { $size: new Double(2.0) } }), [1]);
  assert.deepEqual(await ids(c, { a: { $size: Long.fromNumber(1) } }), [2]);
});

h.test('comparisons refuse a regex, $expr only at the top level, $where on a field, $type 0', async () => {
  const c = srv.freshDb('cmp').collection('c');
  await c.insertMany([{ _id: 1, a: [{ b: 1 }], s: 'x' }]);
  for (const op of ['$gt', '$gte', '$lt', '$lte']) {
    await h.expectCode(c.find({ s: { [op]: /x/ } }).toArray(), 2,
      /^Can't have RegEx as arg to predicate over field 's'\.$/);
  }
  assert.deepEqual(await ids(c, { s: { $eq: /x/ } }), []);
  await h.expectCode(c.find({ a: { $elemMatch: { b: 1, $expr: { $eq: [1, 1] } } } }).toArray(), 2,
    /\$expr can only be applied to the top-level document/);
  await h.expectCode(c.find({ a: { $elemMatch: { $and: [{ $expr: true }] } } }).toArray(), 2);
  assert.deepEqual(await ids(c, { $and: [{ $expr: { $eq: ['$s', 'x'] } }] }), [1]);
  await h.expectCode(c.find({ s: { $where: 'true' } }).toArray(), 2, /\$where cannot be applied to a field/);
  await h.expectCode(c.find({ s: { $type: 0 } }).toArray(), 2, /Instead use \{\$exists:false\}/);
  await h.expectCode(c.find({ s: { $type: 'strin' } }).toArray(), 2, /Unknown type name alias: strin/);
  await h.expectCode(c.find({ s: { $type: true } }).toArray(), 14);
  await h.expectCode(c.find({ s: { $type: [] } }).toArray(), 9);
  await h.expectCode(c.find({ $foo: 1 }).toArray(), 2,
    /unknown top level operator: \$foo\. If you have a field name that starts with a '\$' symbol, consider using \$getField or \$setField\./);
  await h.expectCode(c.find({ $not: { s: 1 } }).toArray(), 2, /use \$nor/);
  await h.expectCode(c.find({ $alwaysTrue: 2 }).toArray(), 9, /\$alwaysTrue must be an integer value of 1/);
  assert.deepEqual(await ids(c, { $alwaysTrue: 1 }), [1]);
});

h.test('$regex flags in both $regex and $options: 51075 when $options comes last, 51074 when the regex does', async () => {
  const c = srv.freshDb('rxopt').collection('c');
  await c.insertMany([{ _id: 1, s: 'ABC' }]);
  await h.expectCode(c.find({ s: { $regex: /a/i, $options: 'm' } }).toArray(), 51075);
  await h.expectCode(c.find({ s: { $options: 'm', $regex: /a/i } }).toArray(), 51074);
  await h.expectCode(c.find({ s: { $regex: 'a', $options: 'q' } }).toArray(), 51108, /^ invalid flag in regex options: q$/);
  await h.expectCode(c.find({ s: { $options: 'i' } }).toArray(), 2, /\$options needs a \$regex/);
  assert.deepEqual(await ids(c, { s: { $options: 'i', $regex: /a/ } }), [1]);
  assert.deepEqual(await ids(c, { s: { $regex: 'a', $options: 'i' } }), [1]);
});

h.test('$mod operands are checked in mongod\'s order; $sampleRate takes a number in [0, 1]', async () => {
  const c = srv.freshDb('modsample').collection('c');
  const docs = [];
  for (let i = 0; i < 400; i++) docs.push({ _id: i, a: i });
  await c.insertMany(docs);
  await h.expectCode(c.find({ a: { $mod: ['x'] } }).toArray(), 2, /^malformed mod, divisor not a number$/);
  await h.expectCode(c.find({ a: { $mod: [2] } }).toArray(), 2, /^malformed mod, not enough elements$/);
  await h.expectCode(c.find({ a: { $mod: [2, 'x', 3] } }).toArray(), 2, /^malformed mod, remainder not a number$/);
  await h.expectCode(c.find({ a: { $mod: [2, 1, 3] } }).toArray(), 2, /^malformed mod, too many elements$/);
  await h.expectCode(c.find({ a: { $mod: [0, 1] } }).toArray(), 2, /^divisor cannot be 0$/);
  assert.equal(await c.countDocuments({ a: { $mod: [new Double(4.5), 1] } }), 100);

  assert.equal(await c.countDocuments({ $sampleRate: 1 }), 400);
  assert.equal(await c.countDocuments({ $sampleRate: 0 }), 0);
  const half = await c.countDocuments({ $sampleRate: 0.5, a: { $gte: 0 } });
  assert.ok(half > 120 && half < 280, `$sampleRate 0.5 kept ${half} of 400`);
  await h.expectCode(c.find({ $sampleRate: 1.5 }).toArray(), 2, /must be in \[0, 1\]/);
  await h.expectCode(c.find({ $sampleRate: NaN }).toArray(), 2, /must be in \[0, 1\]/);
  await h.expectCode(c.find({ $sampleRate: '0.5' }).toArray(), 2, /must be a numeric type/);
  await h.expectCode(c.find({ a: { $elemMatch: { $sampleRate: 0.5 } } }).toArray(), 2,
    /\$sampleRate can only be applied to the top-level document/);
});

h.test('a validator with a bit test: 121 with mongod\'s reason "bitwise operator failed to match"', async () => {
  const db = srv.freshDb('valid');
  await db.createCollection('flags', { validator: { f: { $bitsAllSet: [0, 2] } } });
  const c = db.collection('flags');
  await c.insertOne({ _id: 1, f: 5 });
  const e = await h.expectCode(c.insertOne({ _id: 2, f: 4 }), 121);
  const det = e.errInfo.details;
  assert.equal(det.operatorName, '$bitsAllSet');
  assert.deepEqual(det.specifiedAs, { f: { $bitsAllSet: [0, 2] } });
  assert.equal(det.reason, 'bitwise operator failed to match');
  assert.equal(det.consideredValue, 4);
  await h.expectCode(c.updateOne({ _id: 1 }, { $bit: { f: { and: new Int32(1) } } }), 121);
  await c.updateOne({ _id: 1 }, { $bit: { f: { or: new Int32(2) } } });
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, f: 7 });
});

// ------------------------------------------------------- MongoDB's own bit test cases
// The data and expected counts of mongodb/mongo jstests/core/query/bittest.js, with an
// index on a that the plan must not use (COLLSCAN).

async function bitCounts(tag, docs, cases) {
  const c = srv.freshDb(tag).collection('c');
  await c.insertMany(docs.map((a, i) => ({ _id: i, a })));
  await c.createIndex({ a: 1 });
  for (const [filter, want] of cases) {
    const q = { a: filter };
    const got = await c.countDocuments(q);
    assert.equal(got, want, `${JSON.stringify(filter)}: ${got} documents, want ${want}`);
  }
  const plan = await c.find({ a: cases[0][0] }).explain('queryPlanner');
  assert.equal(plan.queryPlanner.winningPlan.stage, 'COLLSCAN', JSON.stringify(plan.queryPlanner.winningPlan));
}

h.test('bittest.js: numbers, bitmasks and position lists', async () => {
  await bitCounts('bt1', [0, 1, 54, 88, 255, 1e18], [
    [{ $bitsAllSet: 0 }, 6], [{ $bitsAllSet: 1 }, 2], [{ $bitsAllSet: 16 }, 3], [{ $bitsAllSet: 54 }, 2],
    [{ $bitsAllSet: 55 }, 1], [{ $bitsAllSet: 88 }, 2], [{ $bitsAllSet: 255 }, 1],
    [{ $bitsAllClear: 0 }, 6], [{ $bitsAllClear: 1 }, 4], [{ $bitsAllClear: 16 }, 3],
    [{ $bitsAllClear: 129 }, 4], [{ $bitsAllClear: 255 }, 2],
    [{ $bitsAnySet: 0 }, 0], [{ $bitsAnySet: 9 }, 3], [{ $bitsAnySet: 255 }, 4],
    [{ $bitsAnyClear: 0 }, 0], [{ $bitsAnyClear: 18 }, 4], [{ $bitsAnyClear: 24 }, 4], [{ $bitsAnyClear: 255 }, 5],
    [{ $bitsAllSet: [] }, 6], [{ $bitsAllSet: [0] }, 2], [{ $bitsAllSet: [4] }, 3], [{ $bitsAllSet: [1, 2, 4, 5] }, 2],
    [{ $bitsAllSet: [0, 1, 2, 4, 5] }, 1], [{ $bitsAllSet: [3, 4, 6] }, 2], [{ $bitsAllSet: [0, 1, 2, 3, 4, 5, 6, 7] }, 1],
    [{ $bitsAllClear: [] }, 6], [{ $bitsAllClear: [0] }, 4], [{ $bitsAllClear: [4] }, 3], [{ $bitsAllClear: [1, 7] }, 4],
    [{ $bitsAllClear: [0, 1, 2, 3, 4, 5, 6, 7] }, 2], [{ $bitsAnySet: [] }, 0], [{ $bitsAnySet: [1, 3] }, 3],
    [{ $bitsAnySet: [0, 1, 2, 3, 4, 5, 6, 7] }, 4], [{ $bitsAnyClear: [] }, 0], [{ $bitsAnyClear: [1, 4] }, 4],
    [{ $bitsAnyClear: [3, 4] }, 4], [{ $bitsAnyClear: [0, 1, 2, 3, 4, 5, 6, 7] }, 5],
    [{ $bitsAllSet: 54, $bitsAllClear: 201 }, 1],
  ]);
  const L = (s) => Long.fromString(s);
  await bitCounts('bt2', [0, 1, L('9223372036854775807'), L('6917529027641081856'), L('2305843009213693952')], [
    [{ $bitsAllSet: 0 }, 5], [{ $bitsAllSet: 1 }, 2], [{ $bitsAllSet: L('9223372036854775807') }, 1],
    [{ $bitsAllSet: L('6917529027641081856') }, 2], [{ $bitsAllSet: L('2305843009213693952') }, 3],
    [{ $bitsAllClear: 0 }, 5], [{ $bitsAllClear: 1 }, 3], [{ $bitsAllClear: L('9223372036854775807') }, 1],
    [{ $bitsAllClear: L('6917529027641081856') }, 2], [{ $bitsAllClear: L('2305843009213693952') }, 2],
    [{ $bitsAnySet: 0 }, 0], [{ $bitsAnySet: 1 }, 2], [{ $bitsAnySet: L('9223372036854775807') }, 4],
    [{ $bitsAnySet: L('6917529027641081856') }, 3], [{ $bitsAnySet: L('2305843009213693952') }, 3],
    [{ $bitsAnyClear: 0 }, 0], [{ $bitsAnyClear: 1 }, 3], [{ $bitsAnyClear: L('9223372036854775807') }, 4],
    [{ $bitsAnyClear: L('6917529027641081856') }, 3], [{ $bitsAnyClear: L('2305843009213693952') }, 2],
  ]);
});

h.test('bittest.js: negative numbers are sign-extended', async () => {
  const all = [...Array(64).keys()];
  await bitCounts('bt3', [-0, -1, -54, -1e18], [
    [{ $bitsAllSet: 0 }, 4], [{ $bitsAllSet: 2 }, 2], [{ $bitsAllSet: 127 }, 1], [{ $bitsAllSet: 74 }, 2],
    [{ $bitsAllClear: 0 }, 4], [{ $bitsAllClear: 53 }, 3], [{ $bitsAllClear: 127 }, 2],
    [{ $bitsAnySet: 0 }, 0], [{ $bitsAnySet: 2 }, 2], [{ $bitsAnySet: 127 }, 2],
    [{ $bitsAnyClear: 0 }, 0], [{ $bitsAnyClear: 53 }, 3], [{ $bitsAnyClear: 127 }, 3],
    [{ $bitsAllSet: [] }, 4], [{ $bitsAllSet: [1] }, 2], [{ $bitsAllSet: all }, 1], [{ $bitsAllSet: [1, 7, 6, 3, 100] }, 2],
    [{ $bitsAllClear: [] }, 4], [{ $bitsAllClear: [5, 4, 2, 0] }, 3], [{ $bitsAllClear: all }, 1],
    [{ $bitsAnySet: [] }, 0], [{ $bitsAnySet: [1] }, 2], [{ $bitsAnySet: all }, 3],
    [{ $bitsAnyClear: [] }, 0], [{ $bitsAnyClear: [0, 2, 4, 5, 100] }, 3], [{ $bitsAnyClear: all }, 3],
    [{ $bitsAllSet: 74, $bitsAllClear: 53 }, 1],
  ]);
});

h.test('bittest.js: BinData values and masks of any length', async () => {
  const B = (b64, t = 0) => new Binary(Buffer.from(b64, 'base64'), t);
  await bitCounts('bt4', [B('AAAAAAAAAAAAAAAAAAAAAAAAAAAA'), B('AANgAAAAAAAAAAAAAAAAAAAAAAAA'),
    B('JANgqwetkqwklEWRbWERKKJREtbq'), B('////////////////////////////')], [
    [{ $bitsAllSet: B('AAAAAAAAAAAAAAAAAAAAAAAAAAAA') }, 4], [{ $bitsAllSet: B('AANgAAAAAAAAAAAAAAAAAAAAAAAA') }, 3],
    [{ $bitsAllSet: B('JANgqwetkqwklEWRbWERKKJREtbq') }, 2], [{ $bitsAllSet: B('////////////////////////////') }, 1],
    [{ $bitsAllClear: B('AAAAAAAAAAAAAAAAAAAAAAAAAAAA') }, 4], [{ $bitsAllClear: B('AAyfAAAAAAAAAAAAAAAAAAAAAAAA') }, 3],
    [{ $bitsAllClear: B('JAyfqwetkqwklEWRbWERKKJREtbq') }, 2], [{ $bitsAllClear: B('////////////////////////////') }, 1],
    [{ $bitsAnySet: B('AAAAAAAAAAAAAAAAAAAAAAAAAAAA') }, 0], [{ $bitsAnySet: B('AAyfAAAAAAAAAAAAAAAAAAAAAAAA') }, 1],
    [{ $bitsAnySet: B('JAyfqwetkqwklEWRbWERKKJREtbq') }, 2], [{ $bitsAnySet: B('////////////////////////////') }, 3],
    [{ $bitsAnyClear: B('AAAAAAAAAAAAAAAAAAAAAAAAAAAA') }, 0], [{ $bitsAnyClear: B('AANgAAAAAAAAAAAAAAAAAAAAAAAA') }, 1],
    [{ $bitsAnyClear: B('JANgqwetkqwklEWRbWERKKJREtbq') }, 2], [{ $bitsAnyClear: B('////////////////////////////') }, 3],
    [{ $bitsAllSet: B('AANgAAAAAAAAAAAAAAAAAAAAAAAA'), $bitsAllClear: B('//yf////////////////////////') }, 1],
  ]);
  const fox = 'VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==';
  await bitCounts('bt5', [B('ZG9n'), B('JA4A8gAxqTwciCuF5GGzAA=='), B('JA4A8gAxqTwciCuF5GGzAA==', 1), B(fox),
    B('BAAAADEyMzQ=', 2)], [
    [{ $bitsAllSet: B('ZG9n') }, 1], [{ $bitsAllSet: B('JA4A8gAxqTwciCuF5GGzAA==') }, 2],
    [{ $bitsAllSet: B('BAAAADEyMzQ=', 2) }, 1], [{ $bitsAllSet: B(fox) }, 1],
    [{ $bitsAllClear: B('AAAAAAAAAAAAAAAAAAAAAAAAAAAA') }, 5], [{ $bitsAllClear: B('JA4A8gAxqTwciCuF5GGzAA==') }, 0],
    [{ $bitsAnySet: B('AAAAAAAAAAAAAAAAAAAAAAAAAAAA') }, 0], [{ $bitsAnySet: B('JA4A8gAxqTwciCuF5GGzAA==') }, 5],
    [{ $bitsAnyClear: B('AAAAAAAAAAAAAAAAAAAAAAAAAAAA') }, 0], [{ $bitsAnyClear: B(fox) }, 4],
  ]);
});

h.test('bittest.js: NaN, infinities, fractions and out-of-range decimals never match', async () => {
  const D = (s) => Decimal128.fromString(s);
  await bitCounts('bt6', [0, 1, [1.1, 54], 88, 255, NaN, 1.1, -1.1, -Infinity, Infinity, D('Infinity'),
    D('-Infinity'), D('NaN'), D('9223372036854775808'), D('-9223372036854775809'), D('1.1'), D('-1.1')], [
    [{ $bitsAllSet: 0 }, 5], [{ $bitsAllSet: 1 }, 2], [{ $bitsAllSet: 16 }, 3], [{ $bitsAllSet: 54 }, 2],
    [{ $bitsAllSet: 55 }, 1], [{ $bitsAllSet: 88 }, 2], [{ $bitsAllSet: 255 }, 1],
    [{ $bitsAllClear: 0 }, 5], [{ $bitsAllClear: 1 }, 3], [{ $bitsAllClear: 16 }, 2],
    [{ $bitsAllClear: 129 }, 3], [{ $bitsAllClear: 255 }, 1],
    [{ $bitsAnySet: 0 }, 0], [{ $bitsAnySet: 9 }, 3], [{ $bitsAnySet: 255 }, 4],
    [{ $bitsAnyClear: 0 }, 0], [{ $bitsAnyClear: 18 }, 3], [{ $bitsAnyClear: 24 }, 3], [{ $bitsAnyClear: 255 }, 4],
  ]);
});

h.test('large BinData masks and far bit positions cost their own size', async () => {
  const c = srv.freshDb('big').collection('c');
  const ones = Buffer.alloc(1 << 20, 0xff);
  await c.insertMany([{ _id: 1, a: new Binary(ones, 0) }, { _id: 2, a: new Binary(Buffer.from([0xff]), 0) }, { _id: 3, a: -1 }]);
  // -1 has every bit set, sign-extended without end.
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: new Binary(ones, 0) } }), [1, 3]);
  assert.deepEqual(await ids(c, { a: { $bitsAnySet: new Binary(ones, 0) } }), [1, 2, 3]);
  assert.deepEqual(await ids(c, { a: { $bitsAllSet: [2147483647] } }), [3]);
  // BinData is zero-extended: bit 2^31-1 is clear in both.
  assert.deepEqual(await ids(c, { a: { $bitsAnyClear: [2147483647, 0] } }), [1, 2]);
});

h.test('$pull conditions: bit tests work, $expr and $jsonSchema are 224 as in mongod\'s PullNode', async () => {
  const c = srv.freshDb('pull').collection('c');
  await c.insertOne({ _id: 1, a: [1, 2, 3, 4, 5, 6, 7], d: [{ f: 1 }, { f: 2 }] });
  await c.updateOne({ _id: 1 }, { $pull: { a: { $bitsAllSet: [0, 1] } } });
  assert.deepEqual((await c.findOne({ _id: 1 })).a, [1, 2, 4, 5, 6]);
  await c.updateOne({ _id: 1 }, { $pull: { d: { f: { $bitsAnySet: 2 } } } });
  assert.deepEqual((await c.findOne({ _id: 1 })).d, [{ f: 1 }]);
  await h.expectCode(c.updateOne({ _id: 1 }, { $pull: { d: { $expr: { $eq: ['$f', 1] } } } }), 224,
    /^\$expr is not allowed in this context$/);
  await h.expectCode(c.updateOne({ _id: 1 }, { $pull: { d: { $jsonSchema: {} } } }), 224);
  await h.expectCode(c.updateOne({ _id: 1 }, { $pull: { d: { $or: [{ $expr: true }] } } }), 224);
  await h.expectCode(c.updateOne({ _id: 1 }, { $pull: { a: { $bitsAllSet: -1 } } }), 9);
});
