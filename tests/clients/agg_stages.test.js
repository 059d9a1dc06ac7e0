'use strict';
// The later aggregation stages and accumulators: $top/$bottom(N), $firstN/$lastN,
// $minN/$maxN, $setUnion/$concatArrays, $median/$percentile in $group and $bucket,
// $redact, $bucketAuto, $unionWith, $graphLookup. Each is run at top level (the
// streaming path), inside $facet, inside a $lookup sub-pipeline and through a
// view (the materialising paths). Expected values are the MongoDB manual's.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

let viewCounter = 0;

/*
 * everywhere: runs pipeline over collection c at top level, inside $facet,
 * inside a $lookup sub-pipeline and on a view of c, and checks that each
 * answers expected.
 */
async function everywhere(db, c, pipeline, expected) {
  const top = await db.collection(c).aggregate(pipeline).toArray();
  assert.deepEqual(top, expected, 'top level');
  const [f] = await db.collection(c).aggregate([{ $facet: { r: pipeline } }]).toArray();
  assert.deepEqual(f.r, expected, 'inside $facet');
  const [l] = await db.aggregate([{ $documents: [{ x: 1 }] }, { $lookup: { from: c, pipeline, as: 'r' } }]).toArray();
  assert.deepEqual(l.r, expected, 'inside $lookup');
  viewCounter += 1;
  const v = `v${viewCounter}`;
  await db.createCollection(v, { viewOn: c, pipeline });
  assert.deepEqual(await db.collection(v).find().toArray(), expected, 'on a view');
  assert.deepEqual(await db.collection(v).aggregate([]).toArray(), expected, 'aggregate on a view');
}

const GAMESCORES = [
  { playerId: 'PlayerA', gameId: 'G1', score: 31 },
  { playerId: 'PlayerB', gameId: 'G1', score: 33 },
  { playerId: 'PlayerC', gameId: 'G1', score: 99 },
  { playerId: 'PlayerD', gameId: 'G1', score: 1 },
  { playerId: 'PlayerA', gameId: 'G2', score: 10 },
  { playerId: 'PlayerB', gameId: 'G2', score: 14 },
  { playerId: 'PlayerC', gameId: 'G2', score: 66 },
  { playerId: 'PlayerD', gameId: 'G2', score: 80 },
];

async function gamescores(tag) {
  const db = srv.freshDb(tag);
  await db.collection('gamescores').insertMany(GAMESCORES.map((d) => ({ ...d })));
  return db;
}

h.test('$topN / $bottomN / $top / $bottom (manual examples)', async () => {
  const db = await gamescores('topn');
  await everywhere(db, 'gamescores', [
    { $match: { gameId: 'G1' } },
    { $group: { _id: '$gameId', playerId: { $topN: { output: ['$playerId', '$score'], sortBy: { score: -1 }, n: 3 } } } },
  ], [{ _id: 'G1', playerId: [['PlayerC', 99], ['PlayerB', 33], ['PlayerA', 31]] }]);
  await everywhere(db, 'gamescores', [
    { $match: { gameId: 'G1' } },
    { $group: { _id: '$gameId', playerId: { $bottomN: { output: ['$playerId', '$score'], sortBy: { score: -1 }, n: 3 } } } },
  ], [{ _id: 'G1', playerId: [['PlayerB', 33], ['PlayerA', 31], ['PlayerD', 1]] }]);
  await everywhere(db, 'gamescores', [
    { $group: {
      _id: '$gameId',
      top: { $top: { output: ['$playerId', '$score'], sortBy: { score: -1 } } },
      bottom: { $bottom: { output: ['$playerId', '$score'], sortBy: { score: -1 } } },
    } },
    { $sort: { _id: 1 } },
  ], [
    { _id: 'G1', top: ['PlayerC', 99], bottom: ['PlayerD', 1] },
    { _id: 'G2', top: ['PlayerD', 80], bottom: ['PlayerA', 10] },
  ]);
  // n computed from the group key (the key document is n's root), as in the manual.
  await everywhere(db, 'gamescores', [
    { $group: { _id: { gameId: '$gameId' }, gamescores: { $topN: {
      output: '$score', sortBy: { score: -1 },
      n: { $cond: { if: { $eq: ['$gameId', 'G2'] }, then: 1, else: 3 } } } } } },
    { $sort: { _id: 1 } },
  ], [{ _id: { gameId: 'G1' }, gamescores: [99, 33, 31] }, { _id: { gameId: 'G2' }, gamescores: [80] }]);
  // A missing output is null; ties keep the first document seen; fewer than n values.
  const c = db.collection('ties');
  await c.insertMany([{ _id: 1, k: 1, v: 'a' }, { _id: 2, k: 1 }, { _id: 3, k: 0, v: 'c' }]);
  const r = await c.aggregate([{ $sort: { _id: 1 } }, { $group: { _id: null,
    t: { $topN: { n: 5, output: '$v', sortBy: { k: -1 } } },
    t1: { $top: { output: '$v', sortBy: { k: -1 } } },
    b1: { $bottom: { output: '$v', sortBy: { k: -1 } } },
    b2: { $bottomN: { n: 2, output: '$_id', sortBy: { k: 1, _id: -1 } } } } }]).toArray();
  assert.deepEqual(r, [{ _id: null, t: ['a', null, 'c'], t1: 'a', b1: 'c', b2: [2, 1] }]);
});

h.test('$firstN / $lastN / $minN / $maxN (manual examples)', async () => {
  const db = await gamescores('firstn');
  await everywhere(db, 'gamescores', [
    { $group: {
      _id: '$gameId',
      first: { $firstN: { input: '$score', n: 3 } },
      last: { $lastN: { input: '$score', n: 3 } },
      max: { $maxN: { input: ['$score', '$playerId'], n: 3 } },
      min: { $minN: { input: ['$score', '$playerId'], n: 3 } },
    } },
    { $sort: { _id: 1 } },
  ], [
    { _id: 'G1', first: [31, 33, 99], last: [33, 99, 1],
      max: [[99, 'PlayerC'], [33, 'PlayerB'], [31, 'PlayerA']],
      min: [[1, 'PlayerD'], [31, 'PlayerA'], [33, 'PlayerB']] },
    { _id: 'G2', first: [10, 14, 66], last: [14, 66, 80],
      max: [[80, 'PlayerD'], [66, 'PlayerC'], [14, 'PlayerB']],
      min: [[10, 'PlayerA'], [14, 'PlayerB'], [66, 'PlayerC']] },
  ]);
  await everywhere(db, 'gamescores', [
    { $group: { _id: { gameId: '$gameId' }, gamescores: { $firstN: {
      input: '$score', n: { $cond: { if: { $eq: ['$gameId', 'G2'] }, then: 1, else: 3 } } } } } },
    { $sort: { _id: 1 } },
  ], [{ _id: { gameId: 'G1' }, gamescores: [31, 33, 99] }, { _id: { gameId: 'G2' }, gamescores: [10] }]);
  // null and missing: $firstN/$lastN keep them (missing as null), $minN/$maxN skip them.
  const c = db.collection('nulls');
  await c.insertMany([{ _id: 1, v: null }, { _id: 2 }, { _id: 3, v: 5 }, { _id: 4, v: 2 }]);
  const r = await c.aggregate([{ $sort: { _id: 1 } }, { $group: { _id: null,
    f: { $firstN: { input: '$v', n: 2 } }, l: { $lastN: { input: '$v', n: 3 } },
    mn: { $minN: { input: '$v', n: 3 } }, mx: { $maxN: { input: '$v', n: 3 } } } }]).toArray();
  assert.deepEqual(r, [{ _id: null, f: [null, null], l: [null, 5, 2], mn: [2, 5], mx: [5, 2] }]);
});

h.test('$topN ... $percentile parse errors and bad n answer MongoDB\'s codes', async () => {
  const db = await gamescores('nerrs');
  const c = db.collection('gamescores');
  const g = (acc) => c.aggregate([{ $group: { _id: '$gameId', a: acc } }]).toArray();
  await h.expectCode(g({ $firstN: 3 }), 5787801);
  await h.expectCode(g({ $minN: 3 }), 5787900);
  await h.expectCode(g({ $maxN: { input: '$score', n: 2, x: 1 } }), 5787901);
  await h.expectCode(g({ $lastN: { input: '$score' } }), 5787906);
  await h.expectCode(g({ $lastN: { n: 2 } }), 5787907);
  await h.expectCode(g({ $firstN: { input: '$score', n: 'a' } }), 5787902);
  await h.expectCode(g({ $firstN: { input: '$score', n: 1.5 } }), 5787903);
  await h.expectCode(g({ $firstN: { input: '$score', n: 0 } }), 5787908);
  await h.expectCode(g({ $minN: { input: '$score', n: -2 } }), 5787908);
  await h.expectCode(g({ $top: [] }), 5788001);
  await h.expectCode(g({ $top: { output: '$x', sortBy: { a: 1 }, n: 1 } }), 5788002);
  await h.expectCode(g({ $topN: { output: '$x', sortBy: { a: 1 } } }), 5788003);
  await h.expectCode(g({ $bottomN: { n: 2, sortBy: { a: 1 } } }), 5788004);
  await h.expectCode(g({ $bottom: { output: '$x' } }), 5788005);
  await h.expectCode(g({ $topN: { output: '$x', sortBy: { a: 1 }, n: 0 } }), 5787908);
  await h.expectCode(g({ $percentile: 1 }), 7429703);
  await h.expectCode(g({ $percentile: { input: '$score', method: 'approximate' } }), 40414);
  await h.expectCode(g({ $percentile: { input: '$score', p: [0.5] } }), 40414);
  await h.expectCode(g({ $median: { input: '$score', method: 'exact' } }), 2);
  await h.expectCode(g({ $median: { input: '$score', method: 'approximate', p: [0.5] } }), 40415);
  await h.expectCode(g({ $percentile: { input: '$score', p: '$score', method: 'approximate' } }), 7750300);
  await h.expectCode(g({ $percentile: { input: '$score', p: [], method: 'approximate' } }), 7750301);
  await h.expectCode(g({ $percentile: { input: '$score', p: ['a'], method: 'approximate' } }), 7750302);
  await h.expectCode(g({ $percentile: { input: '$score', p: [1.5], method: 'approximate' } }), 7750303);
  await h.expectCode(g({ $setUnion: '$score' }), 14);
  await h.expectCode(g({ $concatArrays: '$score' }), 14);
});

h.test('$median and $percentile (manual example), $setUnion and $concatArrays', async () => {
  const db = srv.freshDb('pct');
  await db.collection('testScores').insertMany([
    { studentId: '2345', test01: 62, test02: 81, test03: 80 },
    { studentId: '2356', test01: 60, test02: 83, test03: 79 },
    { studentId: '2358', test01: 67, test02: 82, test03: 78 },
    { studentId: '2367', test01: 64, test02: 72, test03: 77 },
    { studentId: '2369', test01: 60, test02: 53, test03: 72 },
  ]);
  await everywhere(db, 'testScores', [{ $group: {
    _id: null,
    test01_median: { $median: { input: '$test01', method: 'approximate' } },
    test01_percentiles: { $percentile: { input: '$test01', p: [0.5, 0.75, 0.9, 0.95], method: 'approximate' } },
    none: { $median: { input: '$nothing', method: 'approximate' } },
    nonep: { $percentile: { input: '$nothing', p: [0.1, 1], method: 'approximate' } },
  } }], [{ _id: null, test01_median: 62, test01_percentiles: [62, 64, 67, 67], none: null, nonep: [null, null] }]);
  const c = db.collection('arrs');
  await c.insertMany([{ _id: 1, g: 1, a: [1, 2] }, { _id: 2, g: 1, a: [2, 3] }, { _id: 3, g: 1 }, { _id: 4, g: 2, a: [] }]);
  await everywhere(db, 'arrs', [
    { $sort: { _id: 1 } },
    { $group: { _id: '$g', u: { $setUnion: '$a' }, c: { $concatArrays: '$a' } } },
    // $setUnion's order is unspecified: sort it.
    { $unwind: { path: '$u', preserveNullAndEmptyArrays: true } },
    { $sort: { _id: 1, u: 1 } },
    { $group: { _id: '$_id', c: { $first: '$c' }, u: { $push: '$u' } } },
    { $sort: { _id: 1 } },
  ], [{ _id: 1, c: [1, 2, 2, 3], u: [1, 2, 3] }, { _id: 2, c: [], u: [] }]);
});

h.test('the new accumulators in $bucket output', async () => {
  const db = await gamescores('bucketacc');
  await everywhere(db, 'gamescores', [{ $bucket: {
    groupBy: '$score', boundaries: [0, 50, 100],
    output: { top: { $top: { output: '$playerId', sortBy: { score: -1 } } }, n: { $firstN: { input: '$score', n: 2 } },
      med: { $median: { input: '$score', method: 'approximate' } } },
  } }], [
    { _id: 0, top: 'PlayerB', n: [31, 33], med: 14 },
    { _id: 50, top: 'PlayerC', n: [99, 66], med: 80 },
  ]);
});

h.test('a spilling $group keeps the multi accumulators exact', async () => {
  const db = srv.freshDb('spill');
  const admin = srv.client.db('admin');
  const c = db.collection('big');
  const docs = [];
  for (let i = 0; i < 3000; i++) docs.push({ _id: i, g: i % 1000, v: (i * 7919) % 3001, pad: 'x'.repeat(100) });
  await c.insertMany(docs);
  const pipeline = [
    { $group: { _id: '$g',
      top: { $topN: { n: 2, output: '$v', sortBy: { v: -1 } } },
      first: { $firstN: { input: '$_id', n: 2 } }, last: { $lastN: { input: '$_id', n: 2 } },
      mx: { $maxN: { input: '$v', n: 2 } }, med: { $median: { input: '$v', method: 'approximate' } },
      u: { $concatArrays: { $split: [{ $toString: '$_id' }, '-'] } } } },
    { $sort: { _id: 1 } },
  ];
  const expect = await c.aggregate(pipeline).toArray();
  const old = await admin.command({ getParameter: 1, internalDocumentSourceGroupMaxMemoryBytes: 1 });
  await admin.command({ setParameter: 1, internalDocumentSourceGroupMaxMemoryBytes: 20000 });
  try {
    const spilled = await c.aggregate(pipeline, { allowDiskUse: true }).toArray();
    assert.deepEqual(spilled, expect);
  } finally {
    await admin.command({ setParameter: 1,
      internalDocumentSourceGroupMaxMemoryBytes: old.internalDocumentSourceGroupMaxMemoryBytes });
  }
  assert.equal(expect.length, 1000);
  const g7 = expect[7];
  const vals = [7, 1007, 2007].map((i) => (i * 7919) % 3001).sort((a, b) => b - a);
  assert.deepEqual(g7, { _id: 7, top: vals.slice(0, 2), first: [7, 1007], last: [1007, 2007], mx: vals.slice(0, 2),
    med: vals[1], u: ['7', '1007', '2007'] });
});
