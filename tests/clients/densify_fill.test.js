'use strict';
// $densify and $fill through the Node driver, as MongoDB 8.0 answers them:
// numeric and date densification with each kind of bounds, partitions
// (including 'full' across partitions, whose output follows the field's
// order), calendar months, types, the generation cap, both execution paths
// (a streaming aggregate over a collection, a materialising $documents /
// $facet pipeline), and the parse errors with mongod's codes; $fill's value,
// locf and linear outputs, partitions and errors.
const assert = require('node:assert/strict');
const { Double, Decimal128, Long } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

/* Documents without _id (the generated ones have none). */
function strip(docs) {
  return docs.map((d) => {
    const o = { ...d };
    delete o._id;
    return o;
  });
}

/* A collection holding docs (ids added), for the streaming path. */
async function coll(tag, docs) {
  const c = srv.freshDb(tag).collection('c');
  if (docs.length) await c.insertMany(docs.map((d) => ({ ...d })));
  return c;
}

/* Runs stage over docs through a collection (streaming) and through $documents (materialising); both must agree. */
async function both(tag, docs, stages) {
  const c = await coll(tag, docs);
  const streamed = strip(await c.aggregate([{ $project: { _id: 0 } }, ...stages]).toArray());
  const db = srv.freshDb(`${tag}_docs`);
  const materialised = await db.aggregate([{ $documents: docs }, ...stages]).toArray();
  assert.deepStrictEqual(materialised, streamed);
  return streamed;
}

const D = (s) => new Date(s);

/* ------------------------------------------------------------------------ */
/* $densify: numbers                                                        */
/* ------------------------------------------------------------------------ */

h.test('$densify full: fills every step between the smallest and largest value', async () => {
  const out = await both('full', [{ v: 4 }, { v: 0 }, { v: 2, x: 'keep' }],
    [{ $densify: { field: 'v', range: { step: 1, bounds: 'full' } } }]);
  assert.deepStrictEqual(out, [{ v: 0 }, { v: 1 }, { v: 2, x: 'keep' }, { v: 3 }, { v: 4 }]);
});

h.test('$densify: documents whose field is missing or null pass through unchanged, first', async () => {
  const out = await both('nulls', [{ v: 2 }, { v: null, a: 1 }, { v: 0 }, { a: 2 }],
    [{ $densify: { field: 'v', range: { step: 1, bounds: 'full' } } }]);
  assert.deepStrictEqual(out, [{ v: null, a: 1 }, { a: 2 }, { v: 0 }, { v: 1 }, { v: 2 }]);
});

h.test('$densify: a value off the step keeps the step from the last value on it', async () => {
  const out = await both('offstep', [{ v: 0 }, { v: 5 }, { v: 12 }],
    [{ $densify: { field: 'v', range: { step: 4, bounds: 'full' } } }]);
  assert.deepStrictEqual(out, [{ v: 0 }, { v: 4 }, { v: 5 }, { v: 8 }, { v: 12 }]);
});

h.test('$densify explicit bounds: generated from the lower bound, up to but not including the upper', async () => {
  const out = await both('explicit', [{ v: 2 }, { v: 7 }, { v: 15 }, { v: -3 }],
    [{ $densify: { field: 'v', range: { step: 2, bounds: [0, 10] } } }]);
  assert.deepStrictEqual(out, [{ v: -3 }, { v: 0 }, { v: 2 }, { v: 4 }, { v: 6 }, { v: 7 }, { v: 8 }, { v: 15 }]);
});

h.test('$densify explicit bounds over no documents generate the whole range', async () => {
  const out = await both('explicit_empty', [], [{ $densify: { field: 'v', range: { step: 3, bounds: [1, 10] } } }]);
  assert.deepStrictEqual(out, [{ v: 1 }, { v: 4 }, { v: 7 }]);
  const db = srv.freshDb('explicit_empty2');
  const none = await db.aggregate([{ $documents: [] }, { $densify: { field: 'v', range: { step: 1, bounds: 'full' } } }]).toArray();
  assert.deepStrictEqual(none, []);
});

h.test('$densify: a nested field, and the documents of a dotted path', async () => {
  const out = await both('nested', [{ m: { t: 0, k: 'a' } }, { m: { t: 3 } }],
    [{ $densify: { field: 'm.t', range: { step: 1, bounds: 'full' } } }]);
  assert.deepStrictEqual(out, [{ m: { t: 0, k: 'a' } }, { m: { t: 1 } }, { m: { t: 2 } }, { m: { t: 3 } }]);
});

h.test('$densify: the type of a generated value is the type of the value stepped from plus the step', async () => {
  const c = await coll('types', [{ v: new Double(0.5) }, { v: 3 }]);
  const out = await c.aggregate([{ $project: { _id: 0 } }, { $densify: { field: 'v', range: { step: 1, bounds: 'full' } } }],
    { promoteValues: false }).toArray();
  assert.deepStrictEqual(out.map((d) => [d.v._bsontype, Number(d.v.valueOf())]),
    [['Double', 0.5], ['Double', 1.5], ['Double', 2.5], ['Int32', 3]]);
  const dec = await c.aggregate([{ $project: { _id: 0 } }, { $densify: { field: 'v', range: { step: Decimal128.fromString('1'), bounds: 'full' } } }],
    { promoteValues: false }).toArray();
  assert.deepStrictEqual(dec.map((d) => [d.v._bsontype, d.v.toString()]),
    [['Double', '0.5'], ['Decimal128', '1.5'], ['Decimal128', '2.5'], ['Int32', '3']]);
});

h.test('$densify: a $limit after it stops the generation (a huge range, three documents)', async () => {
  const c = await coll('lazy', [{ v: 0 }]);
  const out = await c.aggregate([{ $project: { _id: 0 } }, { $densify: { field: 'v', range: { step: 1, bounds: [0, 100000000] } } }, { $limit: 3 }]).toArray();
  assert.deepStrictEqual(out, [{ v: 0 }, { v: 1 }, { v: 2 }]);
});

/* ------------------------------------------------------------------------ */
/* $densify: partitions                                                     */
/* ------------------------------------------------------------------------ */

const PARTS = [{ v: 1, p: 'a' }, { v: 4, p: 'a' }, { v: 2, p: 'b' }, { v: 6, p: 'b' }];

h.test('$densify bounds "partition": each partition between its own smallest and largest value', async () => {
  const out = await both('part', PARTS,
    [{ $densify: { field: 'v', partitionByFields: ['p'], range: { step: 1, bounds: 'partition' } } }]);
  assert.deepStrictEqual(out, [
    { v: 1, p: 'a' }, { p: 'a', v: 2 }, { p: 'a', v: 3 }, { v: 4, p: 'a' },
    { v: 2, p: 'b' }, { p: 'b', v: 3 }, { p: 'b', v: 4 }, { p: 'b', v: 5 }, { v: 6, p: 'b' },
  ]);
});

h.test('$densify bounds "full" with partitions: every partition over the global range, in the field\'s order', async () => {
  const out = await both('partfull', PARTS,
    [{ $densify: { field: 'v', partitionByFields: ['p'], range: { step: 1, bounds: 'full' } } }]);
  // mongod sorts by the field only for "full": partitions interleave, the tails come after the input.
  assert.deepStrictEqual(out, [
    { v: 1, p: 'a' }, { p: 'b', v: 1 }, { v: 2, p: 'b' }, { p: 'a', v: 2 }, { p: 'a', v: 3 }, { v: 4, p: 'a' },
    { p: 'b', v: 3 }, { p: 'b', v: 4 }, { p: 'b', v: 5 }, { v: 6, p: 'b' }, { p: 'a', v: 5 }, { p: 'a', v: 6 },
  ]);
});

h.test('$densify explicit bounds with partitions: each partition over the bounds', async () => {
  const out = await both('partexp', [{ v: 1, p: 'a' }, { v: 2, p: 'b' }, { v: 9, p: 'b' }],
    [{ $densify: { field: 'v', partitionByFields: ['p'], range: { step: 1, bounds: [0, 4] } } }]);
  assert.deepStrictEqual(out, [
    { p: 'a', v: 0 }, { v: 1, p: 'a' },
    { p: 'b', v: 0 }, { p: 'b', v: 1 }, { v: 2, p: 'b' }, { p: 'b', v: 3 }, { v: 9, p: 'b' },
    { p: 'a', v: 2 }, { p: 'a', v: 3 },
  ]);
});

h.test('$densify: several and nested partition fields; a missing one is left out of generated documents', async () => {
  const out = await both('multipart', [
    { v: 0, p: { x: 1 }, q: 'u' }, { v: 2, p: { x: 1 }, q: 'u' },
    { v: 0, q: 'w' }, { v: 2, q: 'w' },
  ], [{ $densify: { field: 'v', partitionByFields: ['q', 'p.x'], range: { step: 1, bounds: 'partition' } } }]);
  assert.deepStrictEqual(out, [
    { v: 0, p: { x: 1 }, q: 'u' }, { q: 'u', p: { x: 1 }, v: 1 }, { v: 2, p: { x: 1 }, q: 'u' },
    { v: 0, q: 'w' }, { q: 'w', p: {}, v: 1 }, { v: 2, q: 'w' },
  ]);
});

h.test('$densify: numerically equal partition values are one partition', async () => {
  const c = await coll('eqpart', [{ v: 0, p: 1 }, { v: 2, p: new Double(1) }]);
  const out = await c.aggregate([{ $project: { _id: 0 } },
    { $densify: { field: 'v', partitionByFields: ['p'], range: { step: 1, bounds: 'partition' } } }]).toArray();
  assert.deepStrictEqual(out, [{ v: 0, p: 1 }, { p: 1, v: 1 }, { v: 2, p: 1 }]);
});

/* ------------------------------------------------------------------------ */
/* $densify: dates                                                          */
/* ------------------------------------------------------------------------ */

h.test('$densify dates by the hour, full', async () => {
  const out = await both('hours', [{ t: D('2024-03-10T00:00:00Z') }, { t: D('2024-03-10T03:00:00Z') }],
    [{ $densify: { field: 't', range: { step: 1, unit: 'hour', bounds: 'full' } } }]);
  assert.deepStrictEqual(out, [0, 1, 2, 3].map((i) => ({ t: D(`2024-03-10T0${i}:00:00Z`) })));
});

h.test('$densify by the month across month ends: each step adds a month to the previous value (UTC)', async () => {
  const out = await both('months', [{ t: D('2024-01-31T10:00:00Z') }, { t: D('2024-06-01T00:00:00Z') }],
    [{ $densify: { field: 't', range: { step: 1, unit: 'month', bounds: 'full' } } }]);
  assert.deepStrictEqual(out, [
    { t: D('2024-01-31T10:00:00Z') }, { t: D('2024-02-29T10:00:00Z') }, { t: D('2024-03-29T10:00:00Z') },
    { t: D('2024-04-29T10:00:00Z') }, { t: D('2024-05-29T10:00:00Z') }, { t: D('2024-06-01T00:00:00Z') },
  ]);
});

h.test('$densify by quarter and by year, explicit date bounds', async () => {
  const q = await both('quarters', [{ t: D('2023-05-15T00:00:00Z') }],
    [{ $densify: { field: 't', range: { step: 1, unit: 'quarter', bounds: [D('2023-01-01T00:00:00Z'), D('2024-01-01T00:00:00Z')] } } }]);
  assert.deepStrictEqual(q, [
    { t: D('2023-01-01T00:00:00Z') }, { t: D('2023-04-01T00:00:00Z') }, { t: D('2023-05-15T00:00:00Z') },
    { t: D('2023-07-01T00:00:00Z') }, { t: D('2023-10-01T00:00:00Z') },
  ]);
  const y = await both('years', [], [{ $densify: { field: 't', range: { step: 2, unit: 'year', bounds: [D('2020-02-29T00:00:00Z'), D('2026-01-01T00:00:00Z')] } } }]);
  assert.deepStrictEqual(y, [{ t: D('2020-02-29T00:00:00Z') }, { t: D('2022-02-28T00:00:00Z') }, { t: D('2024-02-28T00:00:00Z') }]);
});

h.test('$densify dates by the day with partitions, "partition" bounds', async () => {
  const out = await both('days', [
    { t: D('2024-01-01T00:00:00Z'), s: 'x' }, { t: D('2024-01-03T00:00:00Z'), s: 'x' },
    { t: D('2024-01-05T00:00:00Z'), s: 'y' }, { t: D('2024-01-06T00:00:00Z'), s: 'y' },
  ], [{ $densify: { field: 't', partitionByFields: ['s'], range: { step: 1, unit: 'day', bounds: 'partition' } } }]);
  assert.deepStrictEqual(out, [
    { t: D('2024-01-01T00:00:00Z'), s: 'x' }, { s: 'x', t: D('2024-01-02T00:00:00Z') }, { t: D('2024-01-03T00:00:00Z'), s: 'x' },
    { t: D('2024-01-05T00:00:00Z'), s: 'y' }, { t: D('2024-01-06T00:00:00Z'), s: 'y' },
  ]);
});

/* ------------------------------------------------------------------------ */
/* $densify: other contexts and limits                                      */
/* ------------------------------------------------------------------------ */

h.test('$densify inside $facet and after other stages', async () => {
  const c = await coll('facet', [{ v: 0, k: 1 }, { v: 3, k: 1 }, { v: 100, k: 2 }]);
  const [r] = await c.aggregate([{ $match: { k: 1 } }, { $project: { _id: 0, k: 0 } },
    { $facet: { d: [{ $densify: { field: 'v', range: { step: 1, bounds: 'full' } } }], n: [{ $count: 'n' }] } }]).toArray();
  assert.deepStrictEqual(r, { d: [{ v: 0 }, { v: 1 }, { v: 2 }, { v: 3 }], n: [{ n: 2 }] });
});

h.test('$densify stops past internalQueryMaxAllowedDensifyDocs (5897900); input documents do not count', async () => {
  const admin = srv.client.db('admin');
  const c = await coll('cap', [{ v: 0 }, { v: 12 }]);
  const run = (stage) => c.aggregate([{ $project: { _id: 0 } }, { $densify: stage }]).toArray();
  await admin.command({ setParameter: 1, internalQueryMaxAllowedDensifyDocs: 10 });
  try {
    await assert.rejects(run({ field: 'v', range: { step: 1, bounds: 'full' } }),
      { code: 5897900, message: /Generated 11 documents in \$densify, which is over the limit of 10/ });
    const db = srv.freshDb('cap2');
    await assert.rejects(db.aggregate([{ $documents: [] }, { $densify: { field: 'v', range: { step: 1, bounds: [0, 11] } } }]).toArray(),
      { code: 5897900 });
    assert.equal((await db.aggregate([{ $documents: [] }, { $densify: { field: 'v', range: { step: 1, bounds: [0, 10] } } }]).toArray()).length, 10);
    await c.insertOne({ v: 5 });
    assert.equal((await run({ field: 'v', range: { step: 1, bounds: 'full' } })).length, 13);
  } finally {
    await admin.command({ setParameter: 1, internalQueryMaxAllowedDensifyDocs: 500000 });
  }
  const p = await admin.command({ getParameter: 1, internalQueryMaxAllowedDensifyDocs: 1 });
  assert.equal(p.internalQueryMaxAllowedDensifyDocs, 500000);
});

h.test('$densify run-time type errors: 5733201 and 6053600', async () => {
  // Raised as the pipeline runs: with the context mongod's aggregate adds to what its executor throws.
  const X = 'PlanExecutor error during aggregation :: caused by :: ';
  const db = srv.freshDb('rt');
  const run = (docs, range) => db.aggregate([{ $documents: docs }, { $densify: { field: 'v', range } }]).toArray();
  await assert.rejects(run([{ v: 1 }, { v: 'x' }], { step: 1, bounds: 'full' }),
    { code: 5733201, message: `${X}Densify field type must be numeric or a date` });
  await assert.rejects(run([{ v: 1 }], { step: 1, unit: 'day', bounds: 'full' }),
    { code: 6053600, message: `${X}Encountered numeric densify value in collection when step has a date unit.` });
  await assert.rejects(run([{ v: D('2024-01-01') }], { step: 1, bounds: 'full' }),
    { code: 6053600, message: `${X}Encountered date densify value in collection when step does not have a date unit.` });
});

h.test('$densify parse errors carry mongod\'s codes', async () => {
  const c = await coll('parse', [{ v: 1 }]);
  const run = (spec) => c.aggregate([{ $densify: spec }]).toArray();
  const cases = [
    ['x', 9, /The \$densify stage specification must be an object, found string/],
    [{ field: 'a', range: { step: 1 } }, 40414, /BSON field '\$densify.range.bounds' is missing but a required field/],
    [{ range: { step: 1, bounds: 'full' } }, 40414, /BSON field '\$densify.field' is missing/],
    [{ field: 'a', range: { bounds: 'full' } }, 40414, /BSON field '\$densify.range.step' is missing/],
    [{ field: 'a', range: { step: 1, bounds: 'full' }, other: 1 }, 40415, /BSON field '\$densify.other' is an unknown field./],
    [{ field: 1, range: { step: 1, bounds: 'full' } }, 14, /BSON field '\$densify.field' is the wrong type 'int', expected type 'string'/],
    [{ field: 'a', range: { step: 'x', bounds: 'full' } }, 14, /'\$densify.range.step' is the wrong type 'string'/],
    [{ field: 'a', partitionByFields: 'p', range: { step: 1, bounds: 'full' } }, 14, /'\$densify.partitionByFields' is the wrong type 'string', expected type 'array'/],
    [{ field: 'a', range: { step: 1, bounds: [D('2020-01-01'), D('2020-01-02')], unit: 1000 } }, 14, /'\$densify.range.unit' is the wrong type/],
    [{ field: 'a', range: { step: -1, bounds: [0, 1] } }, 5733401, /strictly positive numeric value/],
    [{ field: 'a', range: { step: 0, bounds: 'full' } }, 5733401, /strictly positive/],
    [{ field: 'a', range: { step: 1.5, unit: 'second', bounds: 'full' } }, 6586400, /must be a whole number when densifying a date range/],
    [{ field: 'a', range: { step: 1, unit: 'fortnight', bounds: 'full' } }, 9, /unknown time unit value: fortnight/],
    [{ field: 'a', range: { step: 1, bounds: [0, 1, 2] } }, 5733403, /exactly two elements/],
    [{ field: 'a', range: { step: 1, bounds: [D('2020-01-01')], unit: 'second' } }, 5733403, /exactly two elements/],
    [{ field: 'a', range: { step: 1, bounds: [2, 1] } }, 5733402, /ascending array/],
    [{ field: 'a', range: { step: 1, bounds: [D('2020-01-01'), 1], unit: 'second' } }, 5733402, /ascending/],
    [{ field: 'a', range: { step: 1, bounds: [1, 2], unit: 'second' } }, 5733409, /Numeric bounds may not have unit parameter/],
    [{ field: 'a', range: { step: 1, bounds: [1, D('2020-01-01')] } }, 5733406, /both dates or both numeric types/],
    [{ field: 'a', range: { step: 1, bounds: [D('2020-01-01'), /z/], unit: 'day' } }, 5733405, /both dates or both numeric types/],
    [{ field: 'a', range: { step: 1, bounds: [D('2020-01-01'), D('2020-02-01')] } }, 5733410, /A bounding array of dates must specify a unit/],
    [{ field: 'a', range: { step: 1, bounds: ['a', 'b'] } }, 5946800, /Explicit bounds must be numeric or dates/],
    [{ field: 'a', range: { step: 1, bounds: [0, 1.5] } }, 5876900, /must all have the same type/],
    [{ field: 'a', range: { step: 1, bounds: 'everything' } }, 5946802, /Bounds string must either be 'full' or 'partition'/],
    [{ field: 'a', range: { step: 1, bounds: 5 } }, 5733404, /must be the string 'full', 'partition', or an ascending array/],
    [{ field: '$a', range: { step: 1, bounds: [0, 1] } }, 16410, /FieldPath field names may not start with '\$'/],
    [{ field: 'a', partitionByFields: ['$b'], range: { step: 1, bounds: [0, 1] } }, 16410, /may not start with '\$'/],
    [{ field: '', range: { step: 1, bounds: 'full' } }, 40352, /FieldPath cannot be constructed with empty string/],
    [{ field: 'a.', range: { step: 1, bounds: 'full' } }, 40353, /FieldPath must not end with a '.'/],
    [{ field: 'a', partitionByFields: ['a'], range: { step: 1, bounds: 'full' } }, 8993000, /contains the field that is being densified/],
    [{ field: 'a', partitionByFields: ['a.b'], range: { step: 1, bounds: 'full' } }, 8993000, /contains the field that is being densified/],
    [{ field: 'a.b', partitionByFields: ['a'], range: { step: 1, bounds: 'full' } }, 9554500, /The field that is being densified contains/],
    [{ field: 'a', partitionByFields: [], range: { step: 1, bounds: 'partition' } }, 5733408, /without specifying a non-empty array of partitionByFields/],
    [{ field: 'a', range: { step: 1, bounds: 'partition' } }, 5733408, /You may have meant to specify 'full' bounds/],
  ];
  for (const [spec, code, message] of cases)
    await assert.rejects(run(spec), { code, message }, JSON.stringify(spec));
  // The same parser answers the internal stage, named as such.
  await assert.rejects(c.aggregate([{ $_internalDensify: { field: 'a' } }]).toArray(),
    { code: 40414, message: /BSON field '\$_internalDensify.range' is missing/ });
  // Valid specs parse.
  for (const spec of [
    { field: 'a', range: { step: 1, bounds: [1, 2] } },
    { field: 'a', partitionByFields: ['b', 'c'], range: { step: 1, bounds: [D('2020-01-01'), D('2021-01-01')], unit: 'week' } },
    { field: 'a', partitionByFields: ['b', 'c'], range: { step: 1, bounds: 'partition', unit: 'second' } },
    { field: 'a', partitionByFields: ['b'], range: { step: 1, bounds: 'full' } },
  ]) await c.aggregate([{ $densify: spec }]).toArray();
});

/* ------------------------------------------------------------------------ */
/* $fill                                                                    */
/* ------------------------------------------------------------------------ */

const READINGS = [
  { t: 1, a: 1, b: null, s: 'x' },
  { t: 2, s: 'x' },
  { t: 3, a: 5, b: 10, s: 'x' },
  { t: 4, s: 'x' },
  { t: 5, a: 2, s: 'y' },
  { t: 6, b: 3, s: 'y' },
  { t: 7, a: 8, s: 'y' },
];

h.test('$fill value: null and missing fields take the expression\'s value, order kept', async () => {
  const out = await both('fillval', [{ i: 2, a: null }, { i: 1, a: 3 }, { i: 0 }],
    [{ $fill: { output: { a: { value: { $multiply: ['$i', 10] } }, z: { value: 'zz' } } } }]);
  assert.deepStrictEqual(out, [{ i: 2, a: 20, z: 'zz' }, { i: 1, a: 3, z: 'zz' }, { i: 0, a: 0, z: 'zz' }]);
});

h.test('$fill locf and linear over sortBy', async () => {
  const out = await both('filllin', READINGS.slice(0, 4).reverse().map((d) => ({ t: d.t, a: d.a, b: d.b })).map((d) => {
    const o = {};
    for (const k of Object.keys(d)) if (d[k] !== undefined) o[k] = d[k];
    return o;
  }), [{ $fill: { sortBy: { t: 1 }, output: { a: { method: 'linear' }, b: { method: 'locf' } } } }]);
  assert.deepStrictEqual(out, [
    { t: 1, a: 1, b: null },
    { t: 2, a: 3, b: null },
    { t: 3, a: 5, b: 10 },
    { t: 4, a: null, b: 10 },
  ]);
});

h.test('$fill linear interpolates by the sortBy value, dates included; leading and trailing gaps stay null', async () => {
  const out = await both('filldate', [
    { t: D('2024-01-01T00:00:00Z') }, { t: D('2024-01-02T00:00:00Z'), y: 10 }, { t: D('2024-01-03T00:00:00Z') },
    { t: D('2024-01-05T00:00:00Z') }, { t: D('2024-01-06T00:00:00Z'), y: 60 }, { t: D('2024-01-07T00:00:00Z') },
  ], [{ $fill: { sortBy: { t: 1 }, output: { y: { method: 'linear' } } } }]);
  assert.deepStrictEqual(out.map((d) => d.y), [null, 10, 22.5, 47.5, 60, null]);
});

h.test('$fill with partitionByFields and partitionBy: each partition filled on its own', async () => {
  const stages = [{ $fill: { sortBy: { t: 1 }, partitionByFields: ['s'], output: { a: { method: 'locf' }, b: { value: 0 } } } }];
  const out = await both('fillpart', READINGS, stages);
  assert.deepStrictEqual(out, [
    { t: 1, a: 1, b: 0, s: 'x' }, { t: 2, s: 'x', a: 1, b: 0 }, { t: 3, a: 5, b: 10, s: 'x' }, { t: 4, s: 'x', a: 5, b: 0 },
    { t: 5, a: 2, s: 'y', b: 0 }, { t: 6, b: 3, s: 'y', a: 2 }, { t: 7, a: 8, s: 'y', b: 0 },
  ]);
  const byExpr = await both('fillpart2', READINGS,
    [{ $fill: { sortBy: { t: 1 }, partitionBy: { $toUpper: '$s' }, output: { a: { method: 'locf' }, b: { value: 0 } } } }]);
  assert.deepStrictEqual(byExpr, out);
  const lin = await both('fillpart3', READINGS, [{ $fill: { sortBy: { t: 1 }, partitionBy: '$s', output: { a: { method: 'linear' } } } }, { $project: { t: 1, a: 1 } }]);
  assert.deepStrictEqual(lin, [
    { t: 1, a: 1 }, { t: 2, a: 3 }, { t: 3, a: 5 }, { t: 4, a: null }, { t: 5, a: 2 }, { t: 6, a: 5 }, { t: 7, a: 8 },
  ]);
});

h.test('$fill locf without sortBy keeps the input order', async () => {
  const out = await both('fillnosort', [{ a: 3 }, {}, { a: null }, { a: 1 }, {}],
    [{ $fill: { output: { a: { method: 'locf' } } } }]);
  assert.deepStrictEqual(out, [{ a: 3 }, { a: 3 }, { a: 3 }, { a: 1 }, { a: 1 }]);
});

h.test('$fill and $densify together: densify the gaps, then carry values into them', async () => {
  const out = await both('filldens', [{ h: 0, temp: 20 }, { h: 3, temp: 26 }], [
    { $densify: { field: 'h', range: { step: 1, bounds: 'full' } } },
    { $fill: { sortBy: { h: 1 }, output: { temp: { method: 'linear' }, src: { value: 'interp' } } } },
  ]);
  assert.deepStrictEqual(out, [
    { h: 0, temp: 20, src: 'interp' }, { h: 1, temp: 22, src: 'interp' }, { h: 2, temp: 24, src: 'interp' }, { h: 3, temp: 26, src: 'interp' },
  ]);
});

h.test('$fill errors carry mongod\'s codes', async () => {
  const c = await coll('fillerr', [{ t: 1, a: 1 }, { t: 1, a: 2 }, { t: 2 }]);
  const run = (spec) => c.aggregate([{ $fill: spec }]).toArray();
  const cases = [
    ['test', 9, /The \$fill stage specification must be an object, found string/],
    [{}, 40414, /BSON field '\$fill.output' is missing but a required field/],
    [{ output: {} }, 6050203, /The output field in '\$fill' must contain an object with at least one element/],
    [{ output: { a: { method: 'random' } } }, 6050202, /Method must be either locf or linear/],
    [{ output: { a: 'random' } }, 6050200, /Each fill output specification must be an object with exactly one field/],
    [{ output: { a: { method: 'locf', second: 'locf' } } }, 40415, /BSON field '\$fill.second' is an unknown field./],
    [{ output: { a: { method: 'locf', value: 1 } } }, 6050201, /exactly one of 'method' or 'value' fields, not both/],
    [{ output: { a: { method: 5 } } }, 14, /BSON field '\$fill.method' is the wrong type 'int', expected type 'string'/],
    [{ output: { a: { method: 'locf' } }, partitionBy: { p: '$p' }, partitionByFields: ['p'] }, 6050204, /Maximum one of 'partitionBy' and 'partitionByFields/],
    [{ output: { a: { method: 'locf' } }, partitionBy: 5 }, 14, /'\$fill.partitionBy' is the wrong type 'int', expected types '\[string, object\]'/],
    [{ output: { a: { method: 'locf' } }, sortBy: 1 }, 14, /'\$fill.sortBy' is the wrong type 'int', expected type 'object'/],
    [{ output: { a: { method: 'locf' } }, foo: 1 }, 40415, /BSON field '\$fill.foo' is an unknown field./],
    [{ output: { a: { method: 'linear' } }, partitionBy: { p: '$p' } }, 605001, /./],
    [{ output: { a: { method: 'linear' } }, sortBy: { t: 1, a: 1 } }, 605001, /./],
  ];
  for (const [spec, code, message] of cases)
    await assert.rejects(run(spec), { code, message }, JSON.stringify(spec));
  // $linearFill refuses repeated sortBy values (mongod's 6050106).
  await assert.rejects(run({ sortBy: { t: 1 }, output: { a: { method: 'linear' } } }), { code: 6050106 });
  // An output with neither method nor value changes nothing.
  assert.equal((await run({ output: { a: {} } })).length, 3);
});
