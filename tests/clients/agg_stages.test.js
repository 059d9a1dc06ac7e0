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

h.test('$redact with $$DESCEND / $$PRUNE / $$KEEP (manual examples)', async () => {
  const db = srv.freshDb('redact');
  await db.collection('forecasts').insertOne({
    _id: 1, title: '123 Department Report', tags: ['G', 'STLW'], year: 2014,
    subsections: [
      { subtitle: 'Section 1: Overview', tags: ['SI', 'G'], content: 'Section 1: This is the content of section 1.' },
      { subtitle: 'Section 2: Analysis', tags: ['STLW'], content: 'Section 2: This is the content of section 2.' },
      { subtitle: 'Section 3: Budgeting', tags: ['TK'],
        content: { text: 'Section 3: This is the content of section 3.', tags: ['HCS'] } },
    ],
  });
  const userAccess = ['STLW', 'G'];
  await everywhere(db, 'forecasts', [
    { $match: { year: 2014 } },
    { $redact: { $cond: { if: { $gt: [{ $size: { $setIntersection: ['$tags', userAccess] } }, 0] },
      then: '$$DESCEND', else: '$$PRUNE' } } },
  ], [{
    _id: 1, title: '123 Department Report', tags: ['G', 'STLW'], year: 2014,
    subsections: [
      { subtitle: 'Section 1: Overview', tags: ['SI', 'G'], content: 'Section 1: This is the content of section 1.' },
      { subtitle: 'Section 2: Analysis', tags: ['STLW'], content: 'Section 2: This is the content of section 2.' },
    ],
  }]);
  await db.collection('accounts').insertOne({
    _id: 1, level: 1, acct_id: 'xyz123',
    cc: { level: 5, type: 'yy', num: 0, exp_date: new Date('2015-11-01T00:00:00.000Z'),
      billing_addr: { level: 5, addr1: '123 ABC Street', city: 'Some City' },
      shipping_addr: [{ level: 3, addr1: '987 XYZ Ave', city: 'Some City' },
        { level: 3, addr1: 'PO Box 0123', city: 'Some City' }] },
    status: 'A',
  });
  await everywhere(db, 'accounts', [
    { $match: { status: 'A' } },
    { $redact: { $cond: { if: { $eq: ['$level', 5] }, then: '$$PRUNE', else: '$$DESCEND' } } },
  ], [{ _id: 1, level: 1, acct_id: 'xyz123', status: 'A' }]);
  await everywhere(db, 'accounts', [{ $redact: '$$KEEP' }, { $project: { status: 1 } }], [{ _id: 1, status: 'A' }]);
  await everywhere(db, 'accounts', [{ $redact: { $cond: [{ $eq: ['$level', 3] }, '$$PRUNE', '$$DESCEND'] } },
    { $project: { ship: '$cc.shipping_addr' } }], [{ _id: 1, ship: [] }]);
  await h.expectCode(db.collection('accounts').aggregate([{ $redact: 5 }]).toArray(), 17053);
  await h.expectCode(db.collection('accounts').aggregate([{ $redact: '$$NOPE' }]).toArray(), 17276);
});

const ARTWORK = [
  { _id: 1, title: 'The Pillars of Society', artist: 'Grosz', year: 1926, price: 199.99 },
  { _id: 2, title: 'Melancholy III', artist: 'Munch', year: 1902, price: 280.00 },
  { _id: 3, title: 'Dancer', artist: 'Miro', year: 1925, price: 76.04 },
  { _id: 4, title: 'The Great Wave off Kanagawa', artist: 'Hokusai', price: 167.30 },
  { _id: 5, title: 'The Persistence of Memory', artist: 'Dali', year: 1931, price: 483.00 },
  { _id: 6, title: 'Composition VII', artist: 'Kandinsky', year: 1913, price: 385.00 },
  { _id: 7, title: 'The Scream', artist: 'Munch', price: 159.00 },
  { _id: 8, title: 'Blue Flower', artist: "O'Keefe", year: 1918, price: 118.42 },
];

h.test('$bucketAuto (manual examples) and granularity series', async () => {
  const db = srv.freshDb('bauto');
  await db.collection('artwork').insertMany(ARTWORK.map((d) => ({ ...d })));
  await everywhere(db, 'artwork', [{ $bucketAuto: { groupBy: '$price', buckets: 4 } }], [
    { _id: { min: 76.04, max: 159.00 }, count: 2 },
    { _id: { min: 159.00, max: 199.99 }, count: 2 },
    { _id: { min: 199.99, max: 385.00 }, count: 2 },
    { _id: { min: 385.00, max: 483.00 }, count: 2 },
  ]);
  // Documents without year group as null (the smallest value).
  await everywhere(db, 'artwork', [{ $bucketAuto: { groupBy: '$year', buckets: 3,
    output: { count: { $sum: 1 }, years: { $push: '$year' }, titles: { $firstN: { input: '$_id', n: 1 } } } } }], [
    { _id: { min: null, max: 1913 }, count: 3, years: [1902], titles: [4] },
    { _id: { min: 1913, max: 1926 }, count: 3, years: [1913, 1918, 1925], titles: [6] },
    { _id: { min: 1926, max: 1931 }, count: 2, years: [1926, 1931], titles: [1] },
  ]);
  const things = db.collection('things');
  await things.insertMany(Array.from({ length: 100 }, (_, i) => ({ _id: i })));
  const auto = async (granularity) => (await things.aggregate([
    { $bucketAuto: { groupBy: '$_id', buckets: 5, ...(granularity ? { granularity } : {}) } }]).toArray())
    .map((b) => [b._id.min, b._id.max, b.count]);
  assert.deepEqual(await auto(), [[0, 20, 20], [20, 40, 20], [40, 60, 20], [60, 80, 20], [80, 99, 20]]);
  assert.deepEqual(await auto('R20'), [[0, 20, 20], [20, 40, 20], [40, 63, 23], [63, 90, 27], [90, 100, 10]]);
  assert.deepEqual(await auto('E24'), [[0, 20, 20], [20, 43, 23], [43, 68, 25], [68, 91, 23], [91, 100, 9]]);
  assert.deepEqual(await auto('1-2-5'), [[0, 20, 20], [20, 50, 30], [50, 100, 50]]);
  assert.deepEqual(await auto('POWERSOF2'), [[0, 32, 32], [32, 64, 32], [64, 128, 36]]);
  // Equal values are never split between buckets.
  const eq = db.collection('eq');
  await eq.insertMany([1, 1, 1, 1, 2, 3].map((v, i) => ({ _id: i, v })));
  assert.deepEqual((await eq.aggregate([{ $bucketAuto: { groupBy: '$v', buckets: 3 } }]).toArray())
    .map((b) => [b._id.min, b._id.max, b.count]), [[1, 2, 4], [2, 3, 2]]);
  const c = db.collection('artwork');
  const ba = (spec) => c.aggregate([{ $bucketAuto: spec }]).toArray();
  await h.expectCode(ba(5), 40240);
  await h.expectCode(ba({ groupBy: 'price', buckets: 2 }), 40239);
  await h.expectCode(ba({ groupBy: '$price', buckets: 'a' }), 40241);
  await h.expectCode(ba({ groupBy: '$price', buckets: 1.5 }), 40242);
  await h.expectCode(ba({ groupBy: '$price', buckets: 0 }), 40243);
  await h.expectCode(ba({ groupBy: '$price', buckets: 2, output: 1 }), 40244);
  await h.expectCode(ba({ groupBy: '$price', buckets: 2, x: 1 }), 40245);
  await h.expectCode(ba({ groupBy: '$price' }), 40246);
  await h.expectCode(ba({ groupBy: '$price', buckets: 2, granularity: 'R7' }), 40257);
  await h.expectCode(ba({ groupBy: '$price', buckets: 2, granularity: 5 }), 40261);
  await h.expectCode(ba({ groupBy: '$title', buckets: 2, granularity: 'R5' }), 40258);
  await h.expectCode(ba({ groupBy: '$price', buckets: 2, output: { f: { $firstN: { n: '$_id', input: '$price' } } } }),
    4544714);
  assert.equal((await ba({ groupBy: '$price', buckets: 2, output: { f: { $firstN: { n: { $add: [1, 1] },
    input: '$_id' } } } })).length, 2);
  await h.expectCode(ba({ groupBy: { $multiply: ['$price', -1] }, buckets: 2, granularity: 'R5' }), 40260);
});

const SALES = {
  sales_2017: [
    { store: 'General Store', item: 'Chocolates', quantity: 150 }, { store: 'ShopMart', item: 'Chocolates', quantity: 50 },
    { store: 'General Store', item: 'Cookies', quantity: 100 }, { store: 'ShopMart', item: 'Pie', quantity: 10 },
    { store: 'Specialty Shop', item: 'Chocolates', quantity: 25 }],
  sales_2018: [
    { store: 'General Store', item: 'Cookies', quantity: 120 }, { store: 'ShopMart', item: 'Chocolates', quantity: 75 },
    { store: 'Specialty Shop', item: 'Chocolates', quantity: 40 }],
  sales_2019: [
    { store: 'General Store', item: 'Cheese', quantity: 30 }, { store: 'Specialty Shop', item: 'Chocolates', quantity: 125 },
    { store: 'Specialty Shop', item: 'Cookies', quantity: 35 }, { store: 'Specialty Shop', item: 'Pie', quantity: 12 },
    { store: 'ShopMart', item: 'Cheese', quantity: 20 }],
  sales_2020: [
    { store: 'ShopMart', item: 'Cheese', quantity: 25 }, { store: 'ShopMart', item: 'Pie', quantity: 10 },
    { store: 'Specialty Shop', item: 'Chocolates', quantity: 15 }, { store: 'Specialty Shop', item: 'Pie', quantity: 15 },
    { store: 'General Store', item: 'Cheese', quantity: 50 }],
};

h.test('$unionWith (manual examples), with pipelines, $documents, nesting and views', async () => {
  const db = srv.freshDb('union');
  for (const [name, docs] of Object.entries(SALES)) await db.collection(name).insertMany(docs.map((d) => ({ ...d })));
  await everywhere(db, 'sales_2017', [
    { $unionWith: 'sales_2018' }, { $unionWith: 'sales_2019' }, { $unionWith: 'sales_2020' },
    { $group: { _id: '$item', total: { $sum: '$quantity' } } },
    { $sort: { total: -1 } },
  ], [{ _id: 'Chocolates', total: 480 }, { _id: 'Cookies', total: 255 }, { _id: 'Cheese', total: 125 },
    { _id: 'Pie', total: 47 }]);
  const byYear = [];
  for (const [name, docs] of Object.entries(SALES)) {
    for (const d of docs) byYear.push({ _id: name.slice(6), store: d.store, item: d.item, quantity: d.quantity });
  }
  byYear.sort((a, b) => (a._id + a.store + a.item < b._id + b.store + b.item ? -1 : 1));
  await everywhere(db, 'sales_2017', [
    { $set: { _id: '2017' } },
    { $unionWith: { coll: 'sales_2018', pipeline: [{ $set: { _id: '2018' } }] } },
    { $unionWith: { coll: 'sales_2019', pipeline: [{ $set: { _id: '2019' } }] } },
    { $unionWith: { coll: 'sales_2020', pipeline: [{ $set: { _id: '2020' } }] } },
    { $sort: { _id: 1, store: 1, item: 1 } },
  ], byYear);
  // Nested $unionWith, a $documents pipeline without coll, a view as the other side, a missing collection.
  await db.createCollection('big_sales', { viewOn: 'sales_2019', pipeline: [{ $match: { quantity: { $gte: 30 } } }] });
  await everywhere(db, 'sales_2018', [
    { $project: { _id: 0, q: '$quantity' } },
    { $unionWith: { coll: 'sales_2020', pipeline: [{ $project: { _id: 0, q: '$quantity' } },
      { $unionWith: { pipeline: [{ $documents: [{ q: 1 }, { q: 2 }] }] } }] } },
    { $unionWith: { coll: 'big_sales', pipeline: [{ $project: { _id: 0, q: '$quantity' } }] } },
    { $unionWith: 'nonexistent' },
    { $sort: { q: 1 } },
  ], [1, 2, 10, 15, 15, 25, 30, 35, 40, 50, 75, 120, 125].map((q) => ({ q })));
  const [only] = await db.aggregate([{ $documents: [{ a: 1 }] }, { $unionWith: { pipeline: [{ $documents: [{ a: 2 }] }] } },
    { $group: { _id: null, a: { $push: '$a' } } }]).toArray();
  assert.deepEqual(only.a, [1, 2]);
  const c = db.collection('sales_2017');
  await h.expectCode(c.aggregate([{ $unionWith: 5 }]).toArray(), 9);
  await h.expectCode(c.aggregate([{ $unionWith: {} }]).toArray(), 9);
  await h.expectCode(c.aggregate([{ $unionWith: { pipeline: [{ $match: {} }] } }]).toArray(), 9);
  await h.expectCode(c.aggregate([{ $unionWith: { coll: 5 } }]).toArray(), 14);
  await h.expectCode(c.aggregate([{ $unionWith: { coll: 'x', foo: 1 } }]).toArray(), 40415);
  await h.expectCode(c.aggregate([{ $unionWith: { coll: 'x', pipeline: [{ $out: 'y' }] } }]).toArray(), 31441);
});

h.test('$graphLookup (manual examples): hierarchy, maxDepth/depthField with cycles, restrictSearchWithMatch', async () => {
  const db = srv.freshDb('graph');
  await db.collection('employees').insertMany([
    { _id: 1, name: 'Dev' }, { _id: 2, name: 'Eliot', reportsTo: 'Dev' }, { _id: 3, name: 'Ron', reportsTo: 'Eliot' },
    { _id: 4, name: 'Andrew', reportsTo: 'Eliot' }, { _id: 5, name: 'Asya', reportsTo: 'Ron' },
    { _id: 6, name: 'Dan', reportsTo: 'Andrew' }]);
  await everywhere(db, 'employees', [
    { $graphLookup: { from: 'employees', startWith: '$reportsTo', connectFromField: 'reportsTo',
      connectToField: 'name', as: 'reportingHierarchy' } },
    { $unwind: { path: '$reportingHierarchy', preserveNullAndEmptyArrays: true } },
    { $sort: { _id: 1, 'reportingHierarchy._id': 1 } },
    { $group: { _id: '$_id', name: { $first: '$name' }, h: { $push: '$reportingHierarchy.name' } } },
    { $sort: { _id: 1 } },
  ], [
    { _id: 1, name: 'Dev', h: [] }, { _id: 2, name: 'Eliot', h: ['Dev'] }, { _id: 3, name: 'Ron', h: ['Dev', 'Eliot'] },
    { _id: 4, name: 'Andrew', h: ['Dev', 'Eliot'] }, { _id: 5, name: 'Asya', h: ['Dev', 'Eliot', 'Ron'] },
    { _id: 6, name: 'Dan', h: ['Dev', 'Eliot', 'Andrew'] },
  ]);
  await db.collection('airports').insertMany([
    { _id: 0, airport: 'JFK', connects: ['BOS', 'ORD'] }, { _id: 1, airport: 'BOS', connects: ['JFK', 'PWM'] },
    { _id: 2, airport: 'ORD', connects: ['JFK'] }, { _id: 3, airport: 'PWM', connects: ['BOS', 'LHR'] },
    { _id: 4, airport: 'LHR', connects: ['PWM'] }]);
  await db.collection('travelers').insertMany([
    { _id: 1, name: 'Dev', nearestAirport: 'JFK' }, { _id: 2, name: 'Eliot', nearestAirport: 'JFK' },
    { _id: 3, name: 'Jeff', nearestAirport: 'BOS' }]);
  await everywhere(db, 'travelers', [
    { $graphLookup: { from: 'airports', startWith: '$nearestAirport', connectFromField: 'connects',
      connectToField: 'airport', maxDepth: 2, depthField: 'numConnections', as: 'destinations' } },
    { $unwind: '$destinations' },
    { $sort: { _id: 1, 'destinations.numConnections': 1, 'destinations.airport': 1 } },
    { $group: { _id: '$name', d: { $push: { $concatArrays: [['$destinations.airport', '$destinations.numConnections']] } } } },
    { $sort: { _id: 1 } },
  ], [
    { _id: 'Dev', d: [['JFK', 0], ['BOS', 1], ['ORD', 1], ['PWM', 2]] },
    { _id: 'Eliot', d: [['JFK', 0], ['BOS', 1], ['ORD', 1], ['PWM', 2]] },
    { _id: 'Jeff', d: [['BOS', 0], ['JFK', 1], ['PWM', 1], ['LHR', 2], ['ORD', 2]] },
  ]);
  const [depth0] = await db.collection('travelers').aggregate([{ $match: { _id: 3 } },
    { $graphLookup: { from: 'airports', startWith: '$nearestAirport', connectFromField: 'connects',
      connectToField: 'airport', maxDepth: 0, as: 'd' } }]).toArray();
  assert.deepEqual(depth0.d, [{ _id: 1, airport: 'BOS', connects: ['JFK', 'PWM'] }]);
  await db.collection('people').insertMany([
    { _id: 1, name: 'Tanya Jordan', friends: ['Shirley Soto', 'Terry Hawkins', 'Carole Hale'], hobbies: ['tennis', 'unicycling', 'golf'] },
    { _id: 2, name: 'Carole Hale', friends: ['Joseph Dennis', 'Tanya Jordan', 'Terry Hawkins'], hobbies: ['archery', 'golf', 'woodworking'] },
    { _id: 3, name: 'Terry Hawkins', friends: ['Tanya Jordan', 'Carole Hale', 'Angelo Ward'], hobbies: ['knitting', 'frisbee'] },
    { _id: 4, name: 'Joseph Dennis', friends: ['Angelo Ward', 'Carole Hale'], hobbies: ['tennis', 'golf', 'topiary'] },
    { _id: 5, name: 'Angelo Ward', friends: ['Terry Hawkins', 'Shirley Soto', 'Joseph Dennis'], hobbies: ['travel', 'ceramics', 'golf'] },
    { _id: 6, name: 'Shirley Soto', friends: ['Angelo Ward', 'Tanya Jordan', 'Carole Hale'], hobbies: ['frisbee', 'set theory'] }]);
  // A view as 'from'.
  await db.createCollection('people_v', { viewOn: 'people', pipeline: [] });
  await everywhere(db, 'people', [
    { $match: { name: 'Tanya Jordan' } },
    { $graphLookup: { from: 'people_v', startWith: '$friends', connectFromField: 'friends', connectToField: 'name',
      as: 'golfers', restrictSearchWithMatch: { hobbies: 'golf' } } },
    { $unwind: '$golfers' }, { $sort: { 'golfers.name': 1 } },
    { $group: { _id: '$name', golf: { $push: '$golfers.name' } } },
  ], [{ _id: 'Tanya Jordan', golf: ['Angelo Ward', 'Carole Hale', 'Joseph Dennis', 'Tanya Jordan'] }]);
  // A missing startWith finds nothing, even documents whose connectToField is null; an explicit null finds those.
  await db.collection('nulls').insertMany([{ _id: 1, to: null }, { _id: 2 }, { _id: 3, to: 1 }]);
  assert.deepEqual(await db.collection('nulls').aggregate([{ $match: { _id: { $in: [2, 1] } } }, { $sort: { _id: 1 } },
    { $graphLookup: { from: 'nulls', startWith: '$to', connectFromField: 'x', connectToField: 'to', as: 'g' } },
    { $project: { n: { $size: '$g' }, ids: '$g._id' } }]).toArray(), [{ _id: 1, n: 1, ids: [1] }, { _id: 2, n: 0, ids: [] }]);
  const c = db.collection('employees');
  const gl = (spec) => c.aggregate([{ $graphLookup: spec }]).toArray();
  const base = { from: 'employees', startWith: '$reportsTo', connectFromField: 'reportsTo', connectToField: 'name', as: 'h' };
  await h.expectCode(gl({ ...base, maxDepth: 'a' }), 40100);
  await h.expectCode(gl({ ...base, maxDepth: -1 }), 40101);
  await h.expectCode(gl({ ...base, maxDepth: 1.5 }), 40102);
  await h.expectCode(gl({ ...base, as: 5 }), 40103);
  await h.expectCode(gl({ ...base, foo: 1 }), 40104);
  await h.expectCode(gl({ from: 'employees', startWith: '$reportsTo', as: 'h' }), 40105);
  await h.expectCode(gl({ ...base, restrictSearchWithMatch: 1 }), 40185);
  // Documents without _id (a $project in a view removes it) cannot be de-duplicated: 40271.
  await db.createCollection('noid_v', { viewOn: 'employees', pipeline: [{ $project: { _id: 0 } }] });
  await h.expectCode(gl({ ...base, from: 'noid_v' }), 40271);
});

h.test('$indexStats: one document per index, accesses.ops counting the queries that used it (once per query, getMores not counted) since its creation', async () => {
  const db = srv.freshDb('ixstats');
  const t0 = Date.now() - 1000;
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 1, b: 'x' }, { _id: 2, a: 2, b: 'y' }]);
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: -1, a: 1 }, { name: 'b_a', unique: true });
  const r = await c.aggregate([{ $indexStats: {} }, { $sort: { name: 1 } }]).toArray();
  assert.deepEqual(r.map((d) => Object.keys(d)), Array(3).fill(['name', 'key', 'host', 'accesses', 'spec']));
  assert.deepEqual(r.map((d) => [d.name, d.key]), [['_id_', { _id: 1 }], ['a_1', { a: 1 }], ['b_a', { b: -1, a: 1 }]]);
  for (const d of r) {
    assert.match(d.host, /:\d+$/);
    assert.equal(d.accesses.ops, 0, 'no query yet');
    assert.ok(d.accesses.since instanceof Date);
    assert.ok(d.accesses.since.getTime() >= t0, 'since: when the index was created');
    assert.equal(d.spec.name, d.name);
  }
  assert.equal(r[2].spec.unique, true);
  // Queries: three on a, one by _id, one $or over a and b; a find read in batches counts once.
  for (let i = 0; i < 3; i++) await c.find({ a: 1 }).toArray();
  await c.findOne({ _id: 1 });
  await c.find({ $or: [{ a: 2 }, { b: 'x' }] }).toArray();
  await c.find({ a: { $gte: 0 } }, { batchSize: 1 }).toArray();
  await c.find({ a: 1 }).explain(); /* the explain's own run is counted too (a small difference from mongod) */
  const ops = Object.fromEntries((await c.aggregate([{ $indexStats: {} }]).toArray()).map((d) => [d.name, d.accesses.ops]));
  assert.equal(ops._id_, 1);
  assert.equal(ops.b_a, 1);
  assert.ok(ops.a_1 >= 5 && ops.a_1 <= 6, `a_1 used by 5 queries (and maybe the explain): ${ops.a_1}`);
  const [g] = await c.aggregate([{ $indexStats: {} }, { $group: { _id: null, n: { $sum: 1 },
    names: { $push: '$name' } } }, { $lookup: { from: 'c', pipeline: [{ $count: 'docs' }], as: 'l' } }]).toArray();
  assert.equal(g.n, 3);
  assert.deepEqual(g.l, [{ docs: 2 }]);
  assert.deepEqual(await db.collection('missing').aggregate([{ $indexStats: {} }]).toArray(), []);
  await h.expectCode(c.aggregate([{ $indexStats: { x: 1 } }]).toArray(), 28803);
  await h.expectCode(c.aggregate([{ $match: {} }, { $indexStats: {} }]).toArray(), 40602);
  await db.createCollection('v', { viewOn: 'c', pipeline: [] });
  await h.expectCode(db.collection('v').aggregate([{ $indexStats: {} }]).toArray(), 166);
});

h.test('$planCacheStats: no cached plans (mayfly keeps no plan cache), its codes', async () => {
  const db = srv.freshDb('plancache');
  const c = db.collection('c');
  await c.insertMany([{ a: 1 }, { a: 2 }]);
  await c.createIndex({ a: 1 });
  await c.find({ a: 1 }).toArray();
  assert.deepEqual(await c.aggregate([{ $planCacheStats: {} }]).toArray(), []);
  assert.deepEqual(await c.aggregate([{ $planCacheStats: { allHosts: false } }, { $count: 'n' }]).toArray(), []);
  await h.expectCode(c.aggregate([{ $planCacheStats: 1 }]).toArray(), 9);
  await h.expectCode(c.aggregate([{ $planCacheStats: { x: 1 } }]).toArray(), 40415);
  await h.expectCode(c.aggregate([{ $match: {} }, { $planCacheStats: {} }]).toArray(), 40602);
  await h.expectCode(db.collection('missing').aggregate([{ $planCacheStats: {} }]).toArray(), 50933);
});

h.test('the new accumulators stop at 100 MB per group (146), as $push does', { timeout: 60000 }, async () => {
  const c = srv.freshDb('acccap').collection('c');
  await c.insertMany(Array.from({ length: 14 }, (_, i) => ({ _id: i })));
  // An 8 MiB string per document (23 doublings), unique per document.
  const big = { $concat: [{ $toString: '$_id' },
    { $reduce: { input: { $range: [0, 23] }, initialValue: 'x', in: { $concat: ['$$value', '$$value'] } } }] };
  // One multi accumulator (they share accx_fold's check) and one array accumulator (acc_update's).
  for (const acc of [{ $topN: { n: 20, output: big, sortBy: { _id: 1 } } }, { $setUnion: { $split: [big, '|'] } }]) {
    await assert.rejects(c.aggregate([{ $group: { _id: null, a: acc } }]).toArray(),
      (e) => e.code === 146 && /used too much memory and cannot spill to disk/.test(e.message), JSON.stringify(acc));
  }
  const [ok] = await c.aggregate([{ $match: { _id: { $lt: 3 } } },
    { $group: { _id: null, a: { $lastN: { n: 20, input: { $strLenBytes: big } } } } }]).toArray();
  assert.deepEqual(ok.a, [8388609, 8388609, 8388609]);
});

h.test('$bucketAuto sorts within the sort budget: 292 without allowDiskUse, the same buckets spilled', async () => {
  const db = srv.freshDb('baspill');
  const admin = srv.client.db('admin');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 2000 }, (_, i) => ({ _id: i, v: (i * 7919) % 2003, pad: 'y'.repeat(200) })));
  const pipeline = [{ $bucketAuto: { groupBy: '$v', buckets: 7, granularity: 'E12',
    output: { n: { $sum: 1 }, lo: { $min: '$v' }, top: { $top: { output: '$_id', sortBy: { v: -1 } } } } } }];
  const expect = await c.aggregate(pipeline).toArray();
  const old = await admin.command({ getParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 1 });
  await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 50000 });
  try {
    await h.expectCode(c.aggregate(pipeline, { allowDiskUse: false }).toArray(), 292);
    assert.deepEqual(await c.aggregate(pipeline, { allowDiskUse: true }).toArray(), expect);
  } finally {
    await admin.command({ setParameter: 1,
      internalQueryMaxBlockingSortMemoryUsageBytes: old.internalQueryMaxBlockingSortMemoryUsageBytes });
  }
  assert.equal(expect.reduce((a, b) => a + b.n, 0), 2000);
  for (let i = 1; i < expect.length; i++) assert.equal(expect[i]._id.min, expect[i - 1]._id.max);
  assert.equal(expect[0]._id.min, 0);
});

h.test('$topN/$bottomN/$minN/$maxN/$firstN/$lastN against a reference, with ties, spilled too; large n stays fast', { timeout: 60000 }, async () => {
  const db = srv.freshDb('multiref');
  const admin = srv.client.db('admin');
  const c = db.collection('c');
  let seed = 12345;
  const rnd = (m) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % m; };
  const docs = [];
  for (let i = 0; i < 3000; i++) {
    const d = { _id: i, g: i % 7, k: rnd(20) };
    const r = rnd(10);
    if (r === 0) d.v = null; else if (r > 1) d.v = rnd(50);
    docs.push(d);
  }
  await c.insertMany(docs);
  const ns = [1, 3, 50, 1000];
  const group = { _id: '$g' };
  for (const n of ns) {
    group[`top${n}`] = { $topN: { n, output: '$_id', sortBy: { k: 1 } } };
    group[`bot${n}`] = { $bottomN: { n, output: '$_id', sortBy: { k: 1 } } };
    group[`min${n}`] = { $minN: { n, input: '$v' } };
    group[`max${n}`] = { $maxN: { n, input: '$v' } };
    group[`first${n}`] = { $firstN: { n, input: '$v' } };
    group[`last${n}`] = { $lastN: { n, input: '$v' } };
  }
  const pipeline = [{ $sort: { _id: 1 } }, { $group: group }, { $sort: { _id: 1 } }];
  const expected = [];
  for (let g = 0; g < 7; g++) {
    const gd = docs.filter((d) => d.g === g);
    const e = { _id: g };
    const byKeyAsc = [...gd].sort((a, b) => a.k - b.k || a._id - b._id);
    const vals = gd.filter((d) => d.v !== undefined && d.v !== null).map((d) => d.v);
    for (const n of ns) {
      e[`top${n}`] = byKeyAsc.slice(0, n).map((d) => d._id);
      // mongod's $bottomN: a new document replaces the first kept (least key, earliest) only when its key is greater.
      const kept = [];
      for (const d of gd) {
        if (kept.length === n) {
          if (d.k <= kept[0].k) continue;
          kept.shift();
        }
        kept.push(d);
        kept.sort((a, b) => a.k - b.k || a._id - b._id);
      }
      e[`bot${n}`] = kept.map((d) => d._id);
      e[`min${n}`] = [...vals].sort((a, b) => a - b).slice(0, n);
      e[`max${n}`] = [...vals].sort((a, b) => b - a).slice(0, n);
      e[`first${n}`] = gd.slice(0, n).map((d) => (d.v === undefined ? null : d.v));
      e[`last${n}`] = gd.slice(-n).map((d) => (d.v === undefined ? null : d.v));
    }
    expected.push(e);
  }
  assert.deepEqual(await c.aggregate(pipeline).toArray(), expected);
  const old = await admin.command({ getParameter: 1, internalDocumentSourceGroupMaxMemoryBytes: 1 });
  await admin.command({ setParameter: 1, internalDocumentSourceGroupMaxMemoryBytes: 30000 });
  try {
    // Sorted by _id first, so each spilled run holds an earlier part of every group's input.
    assert.deepEqual(await c.aggregate(pipeline, { allowDiskUse: true }).toArray(), expected);
  } finally {
    await admin.command({ setParameter: 1,
      internalDocumentSourceGroupMaxMemoryBytes: old.internalDocumentSourceGroupMaxMemoryBytes });
  }
  // A large n over many documents: O(log n) per value, not O(n).
  const t0 = Date.now();
  const [big] = await db.aggregate([{ $documents: { $map: { input: { $range: [0, 30000] }, in: { x: '$$this' } } } },
    { $group: { _id: null, l: { $lastN: { n: 20000, input: '$x' } }, m: { $maxN: { n: 20000, input: '$x' } },
      t: { $topN: { n: 20000, output: '$x', sortBy: { x: -1 } } } } }]).toArray();
  assert.equal(big.l[0], 10000);
  assert.equal(big.m[0], 29999);
  assert.equal(big.m[19999], 10000);
  assert.deepEqual(big.t.slice(0, 2), [29999, 29998]);
  assert.ok(Date.now() - t0 < 10000, `took ${Date.now() - t0} ms`);
});

h.test('$graphLookup past 100 MB of visited documents: 40099', { timeout: 60000 }, async () => {
  const c = srv.freshDb('glmem').collection('c');
  const mb = 'g'.repeat(1 << 20);
  for (let i = 0; i < 104; i += 8) {
    await c.insertMany(Array.from({ length: 8 }, (_, k) => ({ _id: i + k, k: 1, s: mb })));
  }
  await h.expectCode(c.aggregate([{ $match: { _id: 0 } }, { $graphLookup: { from: 'c', startWith: '$k',
    connectFromField: 'k', connectToField: 'k', as: 'all' } }, { $project: { n: { $size: '$all' } } }]).toArray(), 40099);
  const [ok] = await c.aggregate([{ $match: { _id: 0 } }, { $graphLookup: { from: 'c', startWith: '$k',
    connectFromField: 'k', connectToField: 'k', as: 'all', restrictSearchWithMatch: { _id: { $lt: 10 } } } },
  { $project: { n: { $size: '$all' } } }]).toArray();
  assert.equal(ok.n, 10);
});

h.test('a streaming $unionWith reads the other collection as a stream kept across getMores', async () => {
  const db = srv.freshDb('unionstream');
  await db.collection('a').insertMany(Array.from({ length: 150 }, (_, i) => ({ _id: i, src: 'a' })));
  await db.collection('b').insertMany(Array.from({ length: 250 }, (_, i) => ({ _id: i, src: 'b', even: i % 2 === 0 })));
  await db.createCollection('bv', { viewOn: 'b', pipeline: [{ $match: { even: true } }] });
  const r = await db.collection('a').aggregate([
    { $unionWith: { coll: 'b', pipeline: [{ $match: { _id: { $gte: 50 } } }, { $unionWith: 'bv' }] } },
    { $project: { src: 1 } }], { batchSize: 7 }).toArray();
  assert.equal(r.length, 150 + 200 + 125);
  assert.deepEqual(r.slice(0, 150).map((d) => d._id), Array.from({ length: 150 }, (_, i) => i));
  assert.deepEqual(r.slice(150, 350).map((d) => d._id), Array.from({ length: 200 }, (_, i) => i + 50));
  assert.deepEqual(r.slice(350).map((d) => d._id), Array.from({ length: 125 }, (_, i) => i * 2));
  // A cursor closed halfway frees the inner stream.
  const cur = db.collection('a').aggregate([{ $unionWith: 'b' }], { batchSize: 5 });
  for (let i = 0; i < 160; i++) await cur.next();
  await cur.close();
  // Through a view whose pipeline holds the $unionWith, and a missing collection.
  await db.createCollection('ab', { viewOn: 'a', pipeline: [{ $unionWith: 'b' }, { $unionWith: 'nothing' }] });
  assert.equal((await db.collection('ab').find({}, { batchSize: 3 }).toArray()).length, 400);
  assert.deepEqual(await db.collection('ab').aggregate([{ $group: { _id: '$src', n: { $sum: 1 } } }, { $sort: { _id: 1 } }])
    .toArray(), [{ _id: 'a', n: 150 }, { _id: 'b', n: 250 }]);
});
