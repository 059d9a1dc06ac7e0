'use strict';
// Aggregation points checked against mongod 8.0's sources:
//  - the date arithmetic operators' 'unit' (src/mongo/db/pipeline/expression.cpp,
//    parseTimeUnit and ExpressionDateArithmetics / ExpressionDateTrunc ::optimize):
//    a non-string is 5439013 "<op> requires 'unit' to be a string, but got <type>",
//    an unknown name (case-sensitive) 5439014 "<op> parameter 'unit' value cannot be
//    recognized as a time unit: <name>", a null or missing unit gives null, an absent
//    'unit' argument is the operator's own parse error (5166402, 5166305, 5439010).
//    The messages are matched without their leading stage context.
//  - $subtract of a Date and a number, and $add of one (exec/expression/evaluate_math.cpp's
//    evaluateSubtract and AddState::addToDateValue; jstests/aggregation/expressions/subtract.js):
//    a double becomes whole milliseconds through llround (half away from zero), a decimal
//    through Decimal128::toLong (half to even); NaN, a double beyond int64 or a result beyond
//    int64 is 15 Overflow "date overflow".
//  - {$meta: "sortKey" | "recordId" | "indexKey"} in a pipeline (ExpressionMeta's evaluate in
//    exec/expression/evaluate_meta.cpp, DepsTracker::kDefaultUnavailableMetadata in
//    pipeline/dependencies.h): they parse; sortKey is DocumentMetadataFields::serializeSortKey's
//    array (one element per sort field, even for one, missing values as null) after a $sort,
//    missing without one; recordId and indexKey are missing (no pipeline stage sets them).
const assert = require('node:assert/strict');
const { Decimal128, Double } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const at = (ms) => new Date(ms);

h.test('date operators: a bad unit is 5439013 / 5439014, a null one gives null', async () => {
  const c = srv.freshDb('c56unit').collection('c');
  await c.insertOne({ _id: 1, d: at(0), n: 5, s: 'fortnight' });
  const run = (e) => c.aggregate([{ $project: { _id: 0, r: e } }]).toArray();
  const ops = [
    ['$dateAdd', (u) => ({ $dateAdd: { startDate: '$d', unit: u, amount: 1 } })],
    ['$dateSubtract', (u) => ({ $dateSubtract: { startDate: '$d', unit: u, amount: 1 } })],
    ['$dateDiff', (u) => ({ $dateDiff: { startDate: '$d', endDate: '$d', unit: u } })],
    ['$dateTrunc', (u) => ({ $dateTrunc: { date: '$d', unit: u } })],
  ];
  for (const [name, mk] of ops) {
    const esc = name.replace('$', '\\$');
    // Constant units (checked when mongod optimizes the expression) and field values (at evaluation).
    for (const u of ['fortnight', '$s']) {
      await h.expectCode(run(mk(u)), 5439014,
        new RegExp(`${esc} parameter 'unit' value cannot be recognized as a time unit: fortnight$`));
    }
    await h.expectCode(run(mk('Day')), 5439014,
      new RegExp(`${esc} parameter 'unit' value cannot be recognized as a time unit: Day$`));
    for (const u of [5, '$n']) {
      await h.expectCode(run(mk(u)), 5439013, new RegExp(`${esc} requires 'unit' to be a string, but got int$`));
    }
    await h.expectCode(run(mk(true)), 5439013, new RegExp(`${esc} requires 'unit' to be a string, but got bool$`));
    for (const u of [null, '$missing']) {
      assert.deepEqual(await run(mk(u)), [{ r: null }], `${name} unit ${u}`);
    }
  }
  await h.expectCode(run({ $dateAdd: { startDate: '$d', amount: 1 } }), 5166402,
    /\$dateAdd requires startDate, unit, and amount to be present$/);
  await h.expectCode(run({ $dateSubtract: { startDate: '$d', amount: 1 } }), 5166402,
    /\$dateSubtract requires startDate, unit, and amount to be present$/);
  await h.expectCode(run({ $dateDiff: { startDate: '$d', endDate: '$d' } }), 5166305,
    /Missing 'unit' parameter to \$dateDiff$/);
  await h.expectCode(run({ $dateTrunc: { date: '$d' } }), 5439010, /Missing 'unit' parameter to \$dateTrunc$/);
});

h.test('$subtract and $add of a Date and a number round as mongod: llround for doubles, half-even for decimals', async () => {
  const c = srv.freshDb('c56round').collection('c');
  await c.insertOne({ _id: 1, d: at(0), e: at(1683794065002) });
  const one = async (e) => (await c.aggregate([{ $project: { _id: 0, r: e } }]).toArray())[0].r;
  const dbl = (x) => new Double(x);
  // Doubles: half away from zero (llround).
  assert.deepEqual(await one({ $add: ['$d', dbl(1.5)] }), at(2));
  assert.deepEqual(await one({ $add: ['$d', dbl(2.5)] }), at(3));
  assert.deepEqual(await one({ $add: ['$d', dbl(-0.5)] }), at(-1));
  assert.deepEqual(await one({ $add: ['$d', dbl(-1.5)] }), at(-2));
  assert.deepEqual(await one({ $add: ['$d', dbl(0.4)] }), at(0));
  assert.deepEqual(await one({ $subtract: ['$d', dbl(1.5)] }), at(-2));
  assert.deepEqual(await one({ $subtract: ['$d', dbl(2.5)] }), at(-3));
  assert.deepEqual(await one({ $subtract: ['$d', dbl(-0.5)] }), at(1));
  assert.deepEqual(await one({ $subtract: ['$d', dbl(0.5)] }), at(-1));
  // subtract.js's cases.
  assert.deepEqual(await one({ $subtract: ['$e', dbl(0.5)] }), at(1683794065001));
  assert.deepEqual(await one({ $subtract: ['$e', dbl(1.4)] }), at(1683794065001));
  assert.deepEqual(await one({ $subtract: ['$e', dbl(1.5)] }), at(1683794065000));
  assert.deepEqual(await one({ $subtract: ['$e', dbl(1.7)] }), at(1683794065000));
  // Decimals: half to even (Decimal128::toLong).
  assert.deepEqual(await one({ $subtract: ['$e', Decimal128.fromString('1.4')] }), at(1683794065001));
  assert.deepEqual(await one({ $subtract: ['$e', Decimal128.fromString('1.5')] }), at(1683794065000));
  assert.deepEqual(await one({ $subtract: ['$e', Decimal128.fromString('2.5')] }), at(1683794065000));
  assert.deepEqual(await one({ $subtract: ['$d', Decimal128.fromString('-0.5')] }), at(0));
  assert.deepEqual(await one({ $add: ['$d', Decimal128.fromString('2.5')] }), at(2));
  assert.deepEqual(await one({ $add: ['$d', Decimal128.fromString('3.5')] }), at(4));
  // Integers are exact.
  assert.deepEqual(await one({ $subtract: ['$d', 7] }), at(-7));
});

h.test('$subtract of a Date and a number past int64 or NaN is 15 Overflow "date overflow"', async () => {
  const c = srv.freshDb('c56ovf').collection('c');
  await c.insertOne({ _id: 1, d: at(10), m: at(-1) });
  const run = (e) => c.aggregate([{ $project: { _id: 0, r: e } }]).toArray();
  const OVF = /^PlanExecutor error during aggregation :: caused by :: date overflow$/;
  await h.expectCode(run({ $subtract: ['$d', { $toLong: '-9223372036854775808' }] }), 15, OVF);
  await h.expectCode(run({ $subtract: ['$d', new Double(-9223372036854775808)] }), 15, OVF);
  await h.expectCode(run({ $subtract: ['$d', Decimal128.fromString('-9223372036854775808')] }), 15, OVF);
  await h.expectCode(run({ $subtract: ['$m', new Double(NaN)] }), 15, OVF);
  await h.expectCode(run({ $subtract: ['$m', Decimal128.fromString('NaN')] }), 15, OVF);
  await h.expectCode(run({ $subtract: ['$m', new Double(Infinity)] }), 15, OVF);
  await h.expectCode(run({ $add: ['$m', new Double(NaN)] }), 15, OVF);
  // The server is still up and answers.
  assert.deepEqual(await run({ $subtract: ['$d', 4] }), [{ r: at(6) }]);
});

h.test('{$meta: "sortKey"} after a $sort is the sort key array; recordId and indexKey are missing', async () => {
  const c = srv.freshDb('c56meta').collection('c');
  await c.insertMany([{ _id: 1, a: 3, b: 'x' }, { _id: 2, a: [5, 1], b: 'y' }, { _id: 3, b: 'z' }]);
  const agg = (p) => c.aggregate(p).toArray();
  // One sort field: still an array (serializeSortKey); missing sorts (and shows) as null; an array's
  // ascending key is its smallest element.
  assert.deepEqual(await agg([{ $sort: { a: 1 } }, { $project: { k: { $meta: 'sortKey' } } }]),
    [{ _id: 3, k: [null] }, { _id: 2, k: [1] }, { _id: 1, k: [3] }]);
  // Compound: one element per field; descending takes an array's largest element.
  assert.deepEqual(await agg([{ $sort: { a: -1, b: 1 } }, { $addFields: { k: { $meta: 'sortKey' } } }]), [
    { _id: 2, a: [5, 1], b: 'y', k: [5, 'y'] },
    { _id: 1, a: 3, b: 'x', k: [3, 'x'] },
    { _id: 3, b: 'z', k: [null, 'z'] },
  ]);
  // Through $match / $limit, and inside an expression.
  assert.deepEqual(await agg([{ $sort: { _id: -1 } }, { $match: { b: { $ne: 'q' } } }, { $limit: 2 },
    { $set: { k: { $meta: 'sortKey' }, n: { $size: { $meta: 'sortKey' } } } }, { $project: { k: 1, n: 1 } }]),
  [{ _id: 3, k: [3], n: 1 }, { _id: 2, k: [2], n: 1 }]);
  // In a $facet sub-pipeline.
  assert.deepEqual(await agg([{ $facet: { f: [{ $sort: { a: 1 } }, { $project: { k: { $meta: 'sortKey' } } }] } }]),
    [{ f: [{ _id: 3, k: [null] }, { _id: 2, k: [1] }, { _id: 1, k: [3] }] }]);
  // No $sort: the metadata is absent and the field is left out (sortKey is never "unavailable").
  assert.deepEqual(await agg([{ $project: { k: { $meta: 'sortKey' } } }, { $sort: { _id: 1 } }]),
    [{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  // recordId and indexKey parse in a pipeline and evaluate to missing.
  assert.deepEqual(await agg([{ $sort: { _id: 1 } },
    { $project: { r: { $meta: 'recordId' }, i: { $meta: 'indexKey' } } }]), [{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  assert.deepEqual(await agg([{ $match: { _id: 1 } },
    { $addFields: { r: { $meta: 'recordId' }, i: { $meta: 'indexKey' } } }]), [{ _id: 1, a: 3, b: 'x' }]);
  // The argument is still checked: a non-string is 17307, an unknown name 17308.
  await h.expectCode(agg([{ $project: { k: { $meta: 5 } } }]), 17307, /\$meta only supports string arguments$/);
  await h.expectCode(agg([{ $project: { k: { $meta: 'sortkey' } } }]), 17308,
    /Unsupported argument to \$meta: sortkey$/);
});

h.test('$$NOW is one value for the whole operation, as mongod: every document of a 20,000-document aggregation and a find $expr see the command\'s start', async () => {
  const db = srv.freshDb('now56');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 20000 }, (_, i) => ({ _id: i, pad: 'x'.repeat(100) })));
  const before = Date.now();
  const r = await c.aggregate([{ $addFields: { t: '$$NOW' } }, { $group: { _id: '$t', n: { $sum: 1 } } }]).toArray();
  const after = Date.now();
  assert.equal(r.length, 1, `several $$NOW values: ${JSON.stringify(r.map((g) => g._id))}`);
  assert.equal(r[0].n, 20000);
  assert.ok(r[0]._id.getTime() >= before - 5 && r[0]._id.getTime() <= after + 5, `${r[0]._id.toISOString()} outside [${before}, ${after}]`);
  // In a find filter too: every document compares with the same instant.
  const n = await c.countDocuments({ $expr: { $lte: [{ $subtract: ['$$NOW', '$$NOW'] }, 0] } });
  assert.equal(n, 20000);
  // Across getMores: the cursor keeps the opening command's $$NOW (a streaming pipeline, a find's $expr).
  const seen = new Set();
  const cur = c.aggregate([{ $addFields: { t: '$$NOW' } }, { $project: { t: 1 } }], { batchSize: 100 });
  for (let i = 0; await cur.hasNext(); i++) {
    seen.add((await cur.next()).t.getTime());
    if (i % 100 === 99) await h.sleep(3);
  }
  assert.equal(seen.size, 1, `$$NOW changed between getMores: ${[...seen].join(', ')}`);
  const opened = Date.now();
  const fc = c.find({ $expr: { $lte: ['$$NOW', new Date(opened + 40)] } }).batchSize(1000);
  let got = 0;
  for (; await fc.hasNext(); got++) {
    await fc.next();
    if (got % 1000 === 999) await h.sleep(3);
  }
  assert.equal(got, 20000, 'a getMore saw a later $$NOW than the find');
});
