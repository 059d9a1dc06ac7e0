'use strict';
/*
 * Decimal128 as MongoDB 8.0 computes it: exact IEEE 754 decimal128
 * arithmetic (34 digits, half to even, exponents kept: 0.10 + 0.20 is
 * 0.30), a double operand rounded to 15 digits first (Decimal128(double)),
 * and exact comparison in queries, sorts and $group keys, through an index
 * too. And $sum / $avg as mongod's AccumulatorSum: a compensated
 * (double-double) total, exact for integers even when a partial sum passes
 * the int64 range. Expected values are mongod's (its jstests and the Intel
 * decimal library's results), not computed here.
 */
const assert = require('node:assert/strict');
const { Decimal128, Long } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();
const D = (s) => Decimal128.fromString(s);
const BIG = '12345678901234567890.123';
const BIG2 = '12345678901234567890.122';

async function one(db, expr, doc = {}) {
  const coll = db.collection('one');
  await coll.deleteMany({});
  await coll.insertOne({ _id: 1, ...doc });
  const [r] = await coll.aggregate([{ $project: { _id: 0, r: expr } }]).toArray();
  return r.r;
}

function str(v) {
  return v instanceof Decimal128 ? `D:${v.toString()}` : `${v?._bsontype ?? typeof v}:${v}`;
}

h.test('arithmetic expressions on decimals are exact', async () => {
  const db = srv.freshDb('arith');
  const cases = [
    [{ $add: [D(BIG), D('1')] }, 'D:12345678901234567891.123'],
    [{ $add: [D('0.10'), D('0.20')] }, 'D:0.30'],
    [{ $subtract: [D('9007199254740993'), D('1')] }, 'D:9007199254740992'],
    [{ $multiply: [D('12345678901234567890'), 10] }, 'D:123456789012345678900'],
    [{ $divide: [D('1'), D('3')] }, 'D:0.3333333333333333333333333333333333'],
    [{ $abs: D(`-${BIG}`) }, `D:${BIG}`],
    [{ $round: [D('1.005'), 2] }, 'D:1.00'],
    [{ $round: [D('2.675'), 2] }, 'D:2.68'],
    [{ $round: [D('1.5'), 3] }, 'D:1.500'],
    [{ $round: [D('1234'), -2] }, 'D:1.2E+3'],
    [{ $trunc: [D('-2.679'), 2] }, 'D:-2.67'],
    [{ $ceil: D('1.01') }, 'D:2'],
    [{ $floor: D('-1.01') }, 'D:-2'],
    // A double operand becomes a decimal of 15 significant digits.
    [{ $add: [D('0.1'), 0.2] }, 'D:0.300000000000000'],
    [{ $toDecimal: 2.5 }, 'D:2.50000000000000'],
    [{ $toDecimal: true }, 'D:1'],
    [{ $toLong: D('9007199254740993') }, 'long:9007199254740993'],
    [{ $cmp: [D(BIG), D(BIG2)] }, 'number:1'],
    [{ $eq: [D('1.10'), D('1.1')] }, 'boolean:true'],
  ];
  for (const [expr, want] of cases) {
    const got = await one(db, expr);
    const shown = got instanceof Long ? `long:${got.toString()}` : str(got);
    assert.equal(shown, want, JSON.stringify(expr));
  }
});

h.test('$sum and $avg over decimals, in $group and as expressions', async () => {
  const db = srv.freshDb('sum');
  const coll = db.collection('c');
  await coll.insertMany([{ g: 1, v: D(BIG) }, { g: 1, v: D('1') }, { g: 2, v: D('1') }, { g: 2, v: D('2') }, { g: 2, v: 1 }]);
  const out = await coll.aggregate([{ $group: { _id: '$g', s: { $sum: '$v' }, a: { $avg: '$v' } } }, { $sort: { _id: 1 } }]).toArray();
  assert.equal(out[0].s.toString(), '12345678901234567891.123');
  assert.equal(out[0].a.toString(), '6172839450617283945.5615');
  assert.equal(out[1].s.toString(), '4');
  assert.ok(out[1].a instanceof Decimal128);
  assert.equal(out[1].a.toString(), '1.333333333333333333333333333333333');
  assert.equal((await one(db, { $sum: [D(BIG), D('1')] })).toString(), '12345678901234567891.123');
  assert.equal((await one(db, { $avg: [D('1'), D('2')] })).toString(), '1.5');
});

h.test('$inc and $mul on decimals are exact; a double operand is rounded to 15 digits', async () => {
  const db = srv.freshDb('inc');
  const coll = db.collection('c');
  await coll.insertMany([
    { _id: 1, v: D('1234567890123456789012345678901234') },
    { _id: 2, v: D('1.111111111111111111111111111111111') },
    { _id: 3, v: D('1E+6000') },
    { _id: 4, v: D('0.1') },
    { _id: 5, v: 2.5 },
    { _id: 6 },
  ]);
  await coll.updateOne({ _id: 1 }, { $inc: { v: D('0.5') } });
  await coll.updateOne({ _id: 2 }, { $mul: { v: D('1.111111111111111111111111111111111') } });
  await coll.updateOne({ _id: 3 }, { $inc: { v: D('1') } });
  await coll.updateOne({ _id: 4 }, { $inc: { v: 0.2 } });
  await coll.updateOne({ _id: 5 }, { $mul: { v: D('2') } });
  await coll.updateOne({ _id: 6 }, { $mul: { v: D('1.50') } });
  const got = Object.fromEntries((await coll.find().toArray()).map((d) => [d._id, d.v.toString()]));
  assert.deepEqual(got, {
    1: '1234567890123456789012345678901234', // 34 digits: ...234.5 rounds half to even
    2: '1.234567901234567901234567901234568',
    3: '1.000000000000000000000000000000000E+6000',
    4: '0.300000000000000',
    5: '5.00000000000000',
    6: '0.00',
  });
});

for (const indexed of [false, true]) {
  h.test(`decimals that differ past 19 digits compare exactly in find, sort and $group${indexed ? ' (through an index)' : ''}`, async () => {
    const db = srv.freshDb(indexed ? 'cmpix' : 'cmp');
    const coll = db.collection('c');
    await coll.insertMany([{ _id: 1, v: D(BIG) }, { _id: 2, v: D(BIG2) }, { _id: 3, v: D('1.10') }, { _id: 4, v: 1.1 }, { _id: 5, v: D('1.1') }]);
    const hint = indexed ? { v: 1 } : { $natural: 1 };
    if (indexed) await coll.createIndex({ v: 1 });
    const ids = async (f) => (await coll.find(f).hint(hint).toArray()).map((d) => d._id).sort();
    assert.deepEqual(await ids({ v: D(BIG) }), [1]);
    assert.deepEqual(await ids({ v: { $gt: D(BIG2) } }), [1]);
    assert.deepEqual(await ids({ v: { $gte: D(BIG2) } }), [1, 2]);
    assert.deepEqual(await ids({ v: { $lt: D(BIG) } }), [2, 3, 4, 5]);
    assert.deepEqual(await ids({ v: { $lte: D(BIG2), $gt: D('2') } }), [2]);
    // 1.10 and 1.1 are one value; the double 1.1 is another (compared at 34 digits, as mongod).
    assert.deepEqual(await ids({ v: D('1.1') }), [3, 5]);
    assert.deepEqual(await ids({ v: 1.1 }), [4]);
    assert.deepEqual(await ids({ v: { $in: [D(BIG2), 1.1] } }), [2, 4]);
    // A bound at a plain number shares its key with a decimal that differs from it past 19 digits.
    await coll.insertMany([{ _id: 6, v: D('1.00000000000000000001') }, { _id: 7, v: D('0.99999999999999999999') }, { _id: 8, v: 1 }]);
    assert.deepEqual(await ids({ v: { $gt: 1, $lt: 2 } }), [3, 4, 5, 6]);
    assert.deepEqual(await ids({ v: { $lt: 1, $gt: 0 } }), [7]);
    assert.deepEqual(await ids({ v: 1 }), [8]);
    assert.deepEqual(await ids({ v: { $gte: 1, $lte: 1 } }), [8]);
    // NaN: a decimal NaN equals a double NaN, and $lte/$gte NaN match both.
    await coll.insertMany([{ _id: 9, v: NaN }, { _id: 10, v: D('NaN') }]);
    assert.deepEqual(await ids({ v: { $lte: D('NaN') } }), [10, 9].sort());
    assert.deepEqual(await ids({ v: { $gte: NaN } }), [10, 9].sort());
    await coll.deleteMany({ _id: { $gte: 6 } });
    const groups = await coll.aggregate([{ $group: { _id: '$v', n: { $sum: 1 } } }, { $sort: { _id: 1 } }]).toArray();
    assert.deepEqual(groups.map((g) => [g._id.toString(), g.n]),
      [['1.10', 2], ['1.1', 1], [BIG2, 1], [BIG, 1]]);
    // A sort orders them exactly, in memory or by the index (whose keys carry a fractional decimal's exact value).
    const sorted = (await coll.find({ v: { $gt: 100 } }).sort({ v: -1 }).hint(hint).toArray()).map((d) => d._id);
    assert.deepEqual(sorted, [1, 2]);
    const asc = (await coll.find({ v: { $gt: 100 } }).sort({ v: 1 }).hint(hint).toArray()).map((d) => d._id);
    assert.deepEqual(asc, [2, 1]);
  });
}

h.test('a unique index tells apart decimals that differ past 19 digits, and from the number they round to; an index scan and sort over them are exact', async () => {
  const db = srv.freshDb('decuniq');
  const coll = db.collection('c');
  await coll.createIndex({ v: 1 }, { unique: true });
  const vals = ['1.0000000000000000000001', '1.0000000000000000000002', '0.1', '0.10000000000000000001',
    '0.10000000000000000002', '-1.0000000000000000000001', '1E-6000', '1.000000000000000000000000000000001'];
  for (const [i, v] of vals.entries()) await coll.insertOne({ _id: i, v: D(v) });
  await coll.insertOne({ _id: 'one', v: 1 });
  await coll.insertOne({ _id: 'zero', v: 0 });
  // Equal values are still duplicates: 1.00000000000000000000010 is 1.0000000000000000000001, 1.000 is 1.
  await h.expectCode(coll.insertOne({ v: D('1.00000000000000000000010') }), 11000);
  await h.expectCode(coll.insertOne({ v: D('1.000') }), 11000);
  // As mongod compares a double with a decimal (at 34 digits), the double 0.1 equals this decimal.
  await coll.insertOne({ _id: 'dbl', v: 0.1 });
  await h.expectCode(coll.insertOne({ v: D('0.1000000000000000055511151231257827') }), 11000);
  const order = (await coll.find({}).sort({ v: 1 }).hint({ v: 1 }).toArray()).map((d) => d.v.toString());
  assert.deepEqual(order, ['-1.0000000000000000000001', '0', '1.000000000000000E-6000', '0.1', '0.10000000000000000001',
    '0.10000000000000000002', '0.1', '1', '1.000000000000000000000000000000001', '1.0000000000000000000001',
    '1.0000000000000000000002'].map((x) => (x === '1.000000000000000E-6000' ? D('1E-6000').toString() : x)));
  const between = (await coll.find({ v: { $gt: D('1.00000000000000000000015'), $lt: 2 } }).hint({ v: 1 }).toArray()).map((d) => d._id);
  assert.deepEqual(between, [1]);
  assert.deepEqual((await coll.find({ v: D('1.0000000000000000000001') }).hint({ v: 1 }).toArray()).map((d) => d._id), [0]);
  assert.deepEqual((await coll.find({ v: 1 }).hint({ v: 1 }).toArray()).map((d) => d._id), ['one']);
});

h.test('exact decimal keys persist: after a clean restart and after kill -9 the unique index still tells the decimals apart, finds, updates and deletes them, and validate finds every key', async () => {
  const name = srv.freshDb('decrestart').databaseName;
  let coll = srv.client.db(name).collection('c');
  await coll.createIndex({ v: 1 }, { unique: true });
  await coll.createIndex({ w: -1 });
  const vals = ['1.0000000000000000000001', '1.0000000000000000000002', '19.99', '0.10000000000000000001'];
  for (const [i, v] of vals.entries()) await coll.insertOne({ _id: D(v), v: D(v), w: D(v), i }, { writeConcern: { j: true } });
  for (const kill9 of [false, true]) {
    await srv.server.restart({ kill9 });
    await srv.reconnect();
    coll = srv.client.db(name).collection('c');
    const what = kill9 ? 'after kill -9' : 'after a clean restart';
    await h.expectCode(coll.insertOne({ v: D('1.00000000000000000000010') }), 11000);
    assert.deepEqual((await coll.find({ v: D('1.0000000000000000000002') }).hint({ v: 1 }).toArray()).map((d) => d.i), [1], what);
    assert.deepEqual((await coll.find({ _id: D('19.99') }).toArray()).map((d) => d.i), [kill9 ? 5 : 2], `${what}: by _id`);
    const desc = (await coll.find({ w: { $gt: 1 } }).sort({ w: -1 }).hint({ w: -1 }).toArray()).map((d) => d.i);
    assert.deepEqual(desc, kill9 ? [1, 5, 0] : [2, 1, 0], `${what}: the descending index orders them exactly`);
    const r = await srv.client.db(name).command({ validate: 'c', full: true });
    assert.equal(r.valid, true, `${what}: ${JSON.stringify(r.errors)}`);
    assert.equal(r.nrecords, 4);
    if (!kill9) {
      // Between the restarts: one replaced, one deleted, one added, durably.
      await coll.updateOne({ _id: D('19.99') }, { $set: { v: D('1.00000000000000000000015'), w: D('1.00000000000000000000015'), i: 5 } }, { writeConcern: { j: true } });
      await coll.deleteOne({ _id: D('0.10000000000000000001') }, { writeConcern: { j: true } });
      await coll.insertOne({ _id: 'new', v: D('0.10000000000000000002'), w: D('0.1'), i: 6 }, { writeConcern: { j: true } });
    }
  }
  assert.deepEqual((await coll.find({ v: { $gt: D('1.0000000000000000000001'), $lt: D('1.0000000000000000000002') } }).hint({ v: 1 }).toArray()).map((d) => d.i), [5]);
});

h.test('$sum and $avg are compensated: 0.1 ten times is 1, integers stay exact past 2^53 and past an int64 overflow', async () => {
  const db = srv.freshDb('dd');
  const coll = db.collection('c');
  const { Double } = require('mongodb');
  const sumOf = async (vals) => {
    await coll.deleteMany({});
    await coll.insertMany(vals.map((v, i) => ({ _id: i, v })));
    const [r] = await coll.aggregate([{ $group: { _id: null, s: { $sum: '$v' }, a: { $avg: '$v' } } }]).toArray();
    return r;
  };
  let r = await sumOf(Array(10).fill(0.1));
  assert.equal(r.s, 1);
  assert.equal(r.a, 0.1);
  r = await sumOf([1e16, 1.5, 1.5, -1e16]);
  assert.equal(r.s, 3);
  assert.equal(r.a, 0.75);
  r = await sumOf([Long.fromString('9007199254740993'), new Double(1)]);
  assert.equal(r.s, 9007199254740994);
  r = await sumOf([Long.MAX_VALUE, Long.fromNumber(1), Long.fromNumber(-1)]);
  assert.ok(r.s instanceof Long || typeof r.s === 'bigint', `an integer total back in range stays an integer: ${r.s}`);
  assert.equal(r.s.toString(), Long.MAX_VALUE.toString());
  r = await sumOf([Long.MAX_VALUE, Long.fromNumber(1)]);
  assert.equal(typeof r.s, 'number', 'out of the int64 range: a double');
  r = await sumOf([1, 2, 3]);
  assert.equal(r.s, 6);
  r = await sumOf([Infinity, 1, -Infinity]);
  assert.ok(Number.isNaN(r.s));
  const [e] = await coll.aggregate([{ $limit: 1 }, { $project: { _id: 0, s: { $sum: [1e16, 1.5, 1.5, -1e16] } } }]).toArray();
  assert.equal(e.s, 3);
});
