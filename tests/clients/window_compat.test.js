'use strict';
// $setWindowFields points checked against MongoDB 8.0's source:
//  - $expMovingAvg computes in Decimal128 (AccumulatorExpMovingAvg) and returns a
//    decimal once a decimal input has been seen, a double before;
//  - $derivative and $integral compute through $subtract/$add/$multiply/$divide
//    (WindowFunctionExecDerivative, WindowFunctionIntegral), so a decimal input gives a
//    decimal result, integer and date differences stay exact, and a non-numeric
//    $derivative input fails with $subtract's 14 TypeMismatch instead of giving null;
//  - $percentile / $median read 'p' as mongod's parseP (7750300-7750303), the same
//    way as a window function and as a $group accumulator.
const assert = require('node:assert/strict');
const { Decimal128 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const D = (s) => Decimal128.fromString(s);
const ALL_SO_FAR = { documents: ['unbounded', 'current'] };

/* A value as "<BSON type>(<value>)", so that assertions see the type as well. */
function typed(v) {
  if (v === null || v === undefined) return v;
  if (v instanceof Date) return `Date(${v.toISOString()})`;
  if (v._bsontype) return `${v._bsontype}(${v.toString()})`;
  return v;
}

/*
 * Runs a $documents + $setWindowFields pipeline without promoting values; returns field of
 * each result, typed. A failure is rethrown with its code as a plain number.
 */
async function windowed(db, docs, stage, field) {
  try {
    const r = await db.aggregate([{ $documents: docs }, { $setWindowFields: stage }], { promoteValues: false }).toArray();
    return r.map((d) => typed(d[field]));
  } catch (e) {
    if (e && e.code && e.code._bsontype) e.code = e.code.valueOf();
    throw e;
  }
}

h.test('$integral and $derivative keep Decimal128 once an input is decimal', async () => {
  const db = srv.freshDb('wdec');
  const docs = [{ _id: 1, x: 0, v: D('1') }, { _id: 2, x: 2, v: 3 }];
  const stage = (fn) => ({ sortBy: { x: 1 }, output: { r: { [fn]: { input: '$v' }, window: ALL_SO_FAR } } });
  assert.deepEqual(await windowed(db, docs, stage('$integral'), 'r'), ['Int32(0)', 'Decimal128(4)']);
  assert.deepEqual(await windowed(db, docs, stage('$derivative'), 'r'), [null, 'Decimal128(1)']);
  // All numbers not decimal: doubles, and a window of one point integrates to int 0 (an empty $sum).
  const ints = [{ _id: 1, x: 0, v: 1 }, { _id: 2, x: 2, v: 3 }];
  assert.deepEqual(await windowed(db, ints, stage('$integral'), 'r'), ['Int32(0)', 'Double(4)']);
  assert.deepEqual(await windowed(db, ints, stage('$derivative'), 'r'), [null, 'Double(1)']);
  // A decimal sortBy value is enough, too.
  const decX = [{ _id: 1, x: D('0'), v: 1 }, { _id: 2, x: 2, v: 3 }];
  assert.deepEqual(await windowed(db, decX, stage('$integral'), 'r'), ['Int32(0)', 'Decimal128(4)']);
  assert.deepEqual(await windowed(db, decX, stage('$derivative'), 'r'), [null, 'Decimal128(1)']);
});

h.test('$integral and $derivative over dates with a unit: decimal arithmetic scaled last', async () => {
  const db = srv.freshDb('wdate');
  const t = (s) => new Date(Date.UTC(2024, 0, 1) + s * 1000);
  const docs = [{ _id: 1, x: t(0), v: D('1') }, { _id: 2, x: t(2), v: 3 }, { _id: 3, x: t(3), v: 3 }];
  const stage = (fn) => ({ sortBy: { x: 1 }, output: { r: { [fn]: { input: '$v', unit: 'second' }, window: ALL_SO_FAR } } });
  // (1 + 3) * 2000 ms / 2.0, then the double 3000 of the next trapezoid, summed and divided by 1000 ms.
  assert.deepEqual(await windowed(db, docs, stage('$integral'), 'r'), ['Double(0)', 'Decimal128(4)', 'Decimal128(7)']);
  // (3 - 1) / 2000 ms * 1000: decimal arithmetic keeps the exponent.
  assert.deepEqual(await windowed(db, docs, stage('$derivative'), 'r'),
    [null, 'Decimal128(1.000)', 'Decimal128(0.6666666666666666666666666666666667)']);
  const plain = docs.map((d) => ({ ...d, v: d._id === 1 ? 1 : d.v }));
  assert.deepEqual(await windowed(db, plain, stage('$integral'), 'r'), ['Double(0)', 'Double(4)', 'Double(7)']);
  assert.deepEqual(await windowed(db, plain, stage('$derivative'), 'r'), [null, 'Double(1)', 'Double(0.6666666666666666)']);
});

h.test('$expMovingAvg computes in Decimal128 and returns a decimal once it has seen one', async () => {
  const db = srv.freshDb('wema');
  const n2 = { sortBy: { x: 1 }, output: { e: { $expMovingAvg: { input: '$v', N: 2 } } } };
  assert.deepEqual(await windowed(db, [{ x: 0, v: D('1.1') }, { x: 1, v: 2 }], n2, 'e'),
    ['Decimal128(1.1)', 'Decimal128(1.700000000000000000000000000000000)']);
  const a3 = { sortBy: { x: 1 }, output: { e: { $expMovingAvg: { input: '$v', alpha: 0.3 } } } };
  const docs = [{ x: 0, v: 1.1 }, { x: 1, v: 2 }, { x: 2, v: D('3') }, { x: 3, v: 4 }, { x: 4, v: 'skip' }];
  assert.deepEqual(await windowed(db, docs, a3, 'e'), ['Double(1.1)', 'Double(1.37)',
    'Decimal128(1.859000000000000000000000000000000)', 'Decimal128(2.501300000000000000000000000000000)',
    'Decimal128(2.501300000000000000000000000000000)']);
  // Doubles only: the decimal average rounded to a double (1/3 of 1 and 2/3 of 2 is 5/3).
  assert.deepEqual(await windowed(db, [{ x: 0, v: 1 }, { x: 1, v: 2 }], n2, 'e'), ['Double(1)', 'Double(1.6666666666666667)']);
});

h.test('$derivative of a non-numeric input fails as $subtract does; $integral with 5423900', async () => {
  const db = srv.freshDb('wtype');
  const der = (docs) => windowed(db, docs, { sortBy: { x: 1 }, output: { r: { $derivative: { input: '$v' }, window: ALL_SO_FAR } } }, 'r');
  const itg = (docs) => windowed(db, docs, { sortBy: { x: 1 }, output: { r: { $integral: { input: '$v' }, window: ALL_SO_FAR } } }, 'r');
  await assert.rejects(der([{ x: 0, v: 1 }, { x: 2, v: 'a' }]), { code: 14, message: /can't \$subtract int from string/ });
  // The first window holds one document: its rise is 'a' - 'a', which fails before any divide.
  await assert.rejects(der([{ x: 0, v: 'a' }, { x: 2, v: 1 }]), { code: 14, message: /can't \$subtract string from string/ });
  // A null end is still 5624903 (the $subtract gives null first).
  await assert.rejects(der([{ x: 0, v: null }, { x: 2, v: 'a' }]), { code: 5624903 });
  // Dates subtract to milliseconds, so a date input has a derivative.
  assert.deepEqual(await der([{ x: 0, v: new Date(0) }, { x: 2, v: new Date(3000) }]), [null, 'Double(1500)']);
  await assert.rejects(itg([{ x: 0, v: 1 }, { x: 2, v: 'a' }]), { code: 5423900 });
  await assert.rejects(itg([{ x: 0, v: 1 }, { x: 2 }]), { code: 5423900 });
});

/* The error of $percentile with p (method 'approximate') as a window function and as a $group accumulator. */
async function pErrors(db, p) {
  const spec = { $percentile: { input: '$v', p, method: 'approximate' } };
  const out = [];
  for (const pipeline of [
    [{ $documents: [{ x: 1, v: 1 }] }, { $setWindowFields: { sortBy: { x: 1 }, output: { r: spec } } }],
    [{ $documents: [{ x: 1, v: 1 }] }, { $group: { _id: null, r: spec } }],
  ]) {
    try {
      await db.aggregate(pipeline).toArray();
      out.push('ok');
    } catch (e) {
      out.push(`${e.code} ${e.message.split(':: caused by :: ').pop()}`);
    }
  }
  return out;
}

h.test('$percentile p is read as mongod\'s parseP, with the same messages in $setWindowFields and $group', async () => {
  const db = srv.freshDb('wpct');
  const msg = "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: ";
  const both = (s) => [s, s];
  assert.deepEqual(await pErrors(db, '$x'),
    both(`7750300 The $percentile 'p' field must be an array of constant values, but found value: "$x".`));
  assert.deepEqual(await pErrors(db, [0.5, '$x']),
    both(`7750300 The $percentile 'p' field must be an array of constant values, but found value: [ 0.5, "$x" ].`));
  assert.deepEqual(await pErrors(db, []), both(`7750301 ${msg}[]`));
  assert.deepEqual(await pErrors(db, 0.5), both(`7750301 ${msg}0.5`));
  assert.deepEqual(await pErrors(db, 'a'), both(`7750301 ${msg}"a"`));
  assert.deepEqual(await pErrors(db, {}), both(`7750301 ${msg}{}`));
  assert.deepEqual(await pErrors(db, { $literal: [] }), both(`7750301 ${msg}[]`));
  assert.deepEqual(await pErrors(db, ['a']), both(`7750302 ${msg}"a"`));
  assert.deepEqual(await pErrors(db, [0.5, null]), both(`7750302 ${msg}null`));
  assert.deepEqual(await pErrors(db, [[0.5]]), both(`7750302 ${msg}[0.5]`));
  assert.deepEqual(await pErrors(db, [1.5]), both(`7750303 ${msg}1.5`));
  assert.deepEqual(await pErrors(db, [-0.1]), both(`7750303 ${msg}-0.1`));
  assert.deepEqual(await pErrors(db, [0.1, 1.00000001]), both(`7750303 ${msg}1`));
  // Constant expressions fold: a $literal array, an array of constant expressions.
  assert.deepEqual(await pErrors(db, { $literal: [0.5] }), both('ok'));
  assert.deepEqual(await pErrors(db, [{ $add: [0.25, 0.25] }, 1]), both('ok'));
  const r = await db.aggregate([{ $documents: [{ x: 1, v: 1 }, { x: 2, v: 3 }] },
    { $setWindowFields: { sortBy: { x: 1 }, output: { r: { $percentile: { input: '$v', p: { $literal: [0.5, 1] }, method: 'approximate' } } } } }]).toArray();
  assert.deepEqual(r.map((d) => d.r), [[1, 3], [1, 3]]);
});
