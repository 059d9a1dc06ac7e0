'use strict';
// $setWindowFields through the Node driver: the manual's cakeSales examples,
// every window function, document and range windows, both execution paths
// (streaming aggregate, materialising $facet / $lookup / views / $documents),
// the memory limits, and MongoDB 8.0's error codes.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const CAKES = [
  { _id: 0, type: 'chocolate', orderDate: new Date('2020-05-18T14:10:30Z'), state: 'CA', price: 13, quantity: 120 },
  { _id: 1, type: 'chocolate', orderDate: new Date('2021-03-20T11:30:05Z'), state: 'WA', price: 14, quantity: 140 },
  { _id: 2, type: 'vanilla', orderDate: new Date('2021-01-11T06:31:15Z'), state: 'CA', price: 12, quantity: 145 },
  { _id: 3, type: 'vanilla', orderDate: new Date('2020-02-08T13:13:23Z'), state: 'WA', price: 13, quantity: 104 },
  { _id: 4, type: 'strawberry', orderDate: new Date('2019-05-18T16:09:01Z'), state: 'CA', price: 41, quantity: 162 },
  { _id: 5, type: 'strawberry', orderDate: new Date('2019-01-08T06:12:03Z'), state: 'WA', price: 43, quantity: 134 },
];

async function cakes(tag) {
  const c = srv.freshDb(tag).collection('cakeSales');
  await c.insertMany(CAKES.map((d) => ({ ...d })));
  return c;
}

/* { _id: value of field } for the results of a pipeline. */
function byId(docs, field) {
  const m = {};
  for (const d of docs) m[d._id] = field.split('.').reduce((o, k) => (o == null ? o : o[k]), d);
  return m;
}

function close(actual, expected, eps = 1e-9) {
  assert.ok(Math.abs(actual - expected) <= eps, `${actual} is not close to ${expected}`);
}

/* Runs a collectionless pipeline ($documents, the materialising path). */
function docsAgg(db, docs, stage) {
  return db.aggregate([{ $documents: docs }, { $setWindowFields: stage }]).toArray();
}

h.test('manual: cumulative quantity per state ($sum over documents [unbounded, current])', async () => {
  const c = await cakes('cum');
  const r = await c.aggregate([{
    $setWindowFields: {
      partitionBy: '$state', sortBy: { orderDate: 1 },
      output: { cumulativeQuantityForState: { $sum: '$quantity', window: { documents: ['unbounded', 'current'] } } },
    },
  }]).toArray();
  assert.equal(r.length, 6);
  assert.deepEqual(r.map((d) => d._id), [4, 0, 2, 5, 3, 1]); // partitions in key order, sorted inside
  assert.deepEqual(byId(r, 'cumulativeQuantityForState'), { 4: 162, 0: 282, 2: 427, 5: 134, 3: 238, 1: 378 });
  assert.deepEqual(r[0], { ...CAKES[4], cumulativeQuantityForState: 162 });
});

h.test('manual: per-year partition ($year expression), cumulative sum and moving average [-1, 0]', async () => {
  const c = await cakes('year');
  const r = await c.aggregate([{
    $setWindowFields: {
      partitionBy: { $year: '$orderDate' }, sortBy: { orderDate: 1 },
      output: {
        cumulativeQuantityForYear: { $sum: '$quantity', window: { documents: ['unbounded', 'current'] } },
        averageQuantity: { $avg: '$quantity', window: { documents: [-1, 0] } },
      },
    },
  }]).toArray();
  assert.deepEqual(byId(r, 'cumulativeQuantityForYear'), { 5: 134, 4: 296, 3: 104, 0: 224, 2: 145, 1: 285 });
  assert.deepEqual(byId(r, 'averageQuantity'), { 5: 134, 4: 148, 3: 104, 0: 112, 2: 145, 1: 142.5 });
  assert.ok(r.every((d) => !('__internal_setWindowFields_partition_key' in d) && !('k' in d)));
});

h.test('manual: range windows with a unit (months, positive and negative bounds)', async () => {
  const c = await cakes('range_unit');
  const r = await c.aggregate([{
    $setWindowFields: {
      partitionBy: '$state', sortBy: { orderDate: 1 },
      output: {
        recentOrders: { $push: '$price', window: { range: ['unbounded', 10], unit: 'month' } },
        olderOrders: { $push: '$price', window: { range: ['unbounded', -10], unit: 'month' } },
      },
    },
  }]).toArray();
  assert.deepEqual(byId(r, 'recentOrders'),
    { 4: [41], 0: [41, 13, 12], 2: [41, 13, 12], 5: [43], 3: [43, 13], 1: [43, 13, 14] });
  assert.deepEqual(byId(r, 'olderOrders'), { 4: [], 0: [41], 2: [41], 5: [], 3: [43], 1: [43, 13] });
});

h.test('manual: numeric range window [-10, 10] over price', async () => {
  const c = await cakes('range_num');
  const r = await c.aggregate([{
    $setWindowFields: {
      partitionBy: '$state', sortBy: { price: 1 },
      output: { quantityFromSimilarOrders: { $sum: '$quantity', window: { range: [-10, 10] } } },
    },
  }]).toArray();
  assert.deepEqual(byId(r, 'quantityFromSimilarOrders'), { 2: 265, 0: 265, 4: 162, 3: 244, 1: 244, 5: 134 });
});

h.test('range bounds: 0 takes ties, "current" is the current document itself', async () => {
  const db = srv.freshDb('range_cur');
  const r = await docsAgg(db, [{ _id: 1, s: 1, v: 1 }, { _id: 2, s: 1, v: 10 }, { _id: 3, s: 2, v: 100 }, { _id: 4, s: 3.5, v: 1000 }],
    {
      sortBy: { s: 1 },
      output: {
        ties: { $sum: '$v', window: { range: [0, 0] } },
        fromCur: { $push: '$v', window: { range: ['current', 1] } },
        frac: { $sum: '$v', window: { range: [-0.5, 1.5] } },
      },
    });
  assert.deepEqual(byId(r, 'ties'), { 1: 11, 2: 11, 3: 100, 4: 1000 });
  assert.deepEqual(byId(r, 'fromCur'), { 1: [1, 10, 100], 2: [10, 100], 3: [100], 4: [1000] });
  assert.deepEqual(byId(r, 'frac'), { 1: 111, 2: 111, 3: 1100, 4: 1000 });
});

h.test('range windows: gaps, ties, empty windows and unbounded sides (mongod\'s range.js)', async () => {
  const c = srv.freshDb('range_js').collection('c');
  await c.insertMany([0, 1, 1.5, 2, 3, 100, 100, 101].map((x) => ({ x })));
  const run = async (lower, upper, more = []) => (await c.aggregate([
    { $setWindowFields: { partitionBy: '$partition', sortBy: { x: 1 }, output: { y: { $push: '$x', window: { range: [lower, upper] } } } } },
    ...more, { $unset: '_id' }]).toArray()).map((d) => d.y);
  assert.deepEqual(await run(-1, 0), [[0], [0, 1], [1, 1.5], [1, 1.5, 2], [2, 3], [100, 100], [100, 100], [100, 100, 101]]);
  assert.deepEqual(await run(0, 'unbounded'), [[0, 1, 1.5, 2, 3, 100, 100, 101], [1, 1.5, 2, 3, 100, 100, 101],
    [1.5, 2, 3, 100, 100, 101], [2, 3, 100, 100, 101], [3, 100, 100, 101], [100, 100, 101], [100, 100, 101], [101]]);
  assert.deepEqual(await run('current', 'current', [{ $match: { x: 100 } }]), [[100], [100]]);
  assert.deepEqual(await run('current', 1, [{ $match: { x: 100 } }]), [[100, 100, 101], [100, 101]]);
  assert.deepEqual(await run(-97, 'current', [{ $match: { x: 100 } }]), [[3, 100], [3, 100, 100]]);
  assert.deepEqual(await run(-1, -1), [[], [0], [], [1], [2], [], [], [100, 100]]);
  assert.deepEqual(await run(1, 1), [[1], [2], [], [3], [], [101], [101], []]);
  assert.deepEqual(await run('unbounded', -99), [[], [], [], [], [], [0, 1], [0, 1], [0, 1, 1.5, 2]]);
  assert.deepEqual(await run(99, 'unbounded'), [[100, 100, 101], [100, 100, 101], [101], [101], [], [], [], []]);
  assert.deepEqual(await run(999, 999), [[], [], [], [], [], [], [], []]);
  await c.insertMany([{}, { x: null }, { x: '' }, { x: {} }]);
  await assert.rejects(run(999, 999), { code: 5429414, message: /Invalid range: Expected the sortBy field to be a number/ });
  await assert.rejects(run('unbounded', 'unbounded'), { code: 5429414 });
});

h.test('manual: $rank, $denseRank and $documentNumber (ties)', async () => {
  const c = await cakes('rank');
  const r = await c.aggregate([{
    $setWindowFields: { partitionBy: '$state', sortBy: { quantity: -1 }, output: { rankQuantityForState: { $rank: {} } } },
  }]).toArray();
  assert.deepEqual(byId(r, 'rankQuantityForState'), { 4: 1, 2: 2, 0: 3, 1: 1, 5: 2, 3: 3 });

  const db = srv.freshDb('rank_ties');
  const t = await docsAgg(db, [{ _id: 1, s: 5 }, { _id: 2, s: 5 }, { _id: 3, s: 7 }, { _id: 4, s: 9 }, { _id: 5, s: 9 }],
    { sortBy: { s: 1 }, output: { r: { $rank: {} }, d: { $denseRank: {} }, n: { $documentNumber: {} } } });
  assert.deepEqual(byId(t, 'r'), { 1: 1, 2: 1, 3: 3, 4: 4, 5: 4 });
  assert.deepEqual(byId(t, 'd'), { 1: 1, 2: 1, 3: 2, 4: 3, 5: 3 });
  assert.deepEqual(byId(t, 'n'), { 1: 1, 2: 2, 3: 3, 4: 4, 5: 5 });
});

h.test('manual: $shift with a default, forwards and backwards', async () => {
  const c = await cakes('shift');
  const r = await c.aggregate([{
    $setWindowFields: {
      partitionBy: '$state', sortBy: { quantity: -1 },
      output: {
        shiftQuantityForState: { $shift: { output: '$quantity', by: 1, default: 'Not available' } },
        prev: { $shift: { output: '$quantity', by: -1 } },
      },
    },
  }]).toArray();
  assert.deepEqual(byId(r, 'shiftQuantityForState'),
    { 4: 145, 2: 120, 0: 'Not available', 1: 134, 5: 104, 3: 'Not available' });
  assert.deepEqual(byId(r, 'prev'), { 4: null, 2: 162, 0: 145, 1: null, 5: 140, 3: 134 });
  // A missing value in the shifted document also gives the default (mongod's shift.js).
  const m = await docsAgg(srv.freshDb('shift_missing'), [{ _id: 1 }, { _id: 2 }],
    { sortBy: { _id: 1 }, output: { a: { $shift: { output: '$b', by: 1, default: 'c' } }, z: { $shift: { output: '$b', by: 0 } } } });
  assert.deepEqual(m, [{ _id: 1, a: 'c', z: null }, { _id: 2, a: 'c', z: null }]);
});

h.test('accumulators over the default window (whole partition) and sliding windows', async () => {
  const c = await cakes('accs');
  const r = await c.aggregate([{
    $setWindowFields: {
      partitionBy: '$state', sortBy: { orderDate: 1 },
      output: {
        first: { $first: '$quantity' },
        last: { $last: '$quantity' },
        total: { $sum: '$quantity' },
        n: { $count: {} },
        minNear: { $min: '$quantity', window: { documents: [-1, 1] } },
        maxBefore: { $max: '$quantity', window: { documents: ['unbounded', -1] } },
        types: { $addToSet: '$type', window: { documents: [0, 'unbounded'] } },
        next: { $first: '$price', window: { documents: [1, 1] } },
        avgAll: { $avg: '$price' },
      },
    },
  }]).toArray();
  assert.deepEqual(byId(r, 'first'), { 4: 162, 0: 162, 2: 162, 5: 134, 3: 134, 1: 134 });
  assert.deepEqual(byId(r, 'last'), { 4: 145, 0: 145, 2: 145, 5: 140, 3: 140, 1: 140 });
  assert.deepEqual(byId(r, 'total'), { 4: 427, 0: 427, 2: 427, 5: 378, 3: 378, 1: 378 });
  assert.deepEqual(byId(r, 'n'), { 4: 3, 0: 3, 2: 3, 5: 3, 3: 3, 1: 3 });
  assert.deepEqual(byId(r, 'minNear'), { 4: 120, 0: 120, 2: 120, 5: 104, 3: 104, 1: 104 });
  assert.deepEqual(byId(r, 'maxBefore'), { 4: null, 0: 162, 2: 162, 5: null, 3: 134, 1: 134 });
  assert.deepEqual(byId(r, 'types'), {
    4: ['chocolate', 'strawberry', 'vanilla'], 0: ['chocolate', 'vanilla'], 2: ['vanilla'],
    5: ['chocolate', 'strawberry', 'vanilla'], 3: ['chocolate', 'vanilla'], 1: ['chocolate'],
  });
  assert.deepEqual(byId(r, 'next'), { 4: 13, 0: 12, 2: null, 5: 13, 3: 14, 1: null });
  assert.deepEqual(byId(r, 'avgAll'), { 4: 22, 0: 22, 2: 22, 5: 70 / 3, 3: 70 / 3, 1: 70 / 3 });
});

h.test('document windows: every bounds pair of mongod\'s window_function_helpers.js, against a reference', async () => {
  const c = srv.freshDb('bounds_ref').collection('ticker');
  const docs = [];
  for (let i = 0; i < 10; i++) {
    docs.push({ _id: i, partIndex: i, ticker: 'T1', price: 500 - i * 10 });
    docs.push({ _id: i + 10, partIndex: i, ticker: 'T2', price: 400 + i * 10 });
  }
  await c.insertMany(docs);
  const bounds = [['unbounded', 0], ['unbounded', -1], ['unbounded', 1], ['unbounded', 5], ['unbounded', 'unbounded'],
    [0, 'unbounded'], [0, 1], ['current', 2], [0, 5], ['current', 4], [-1, 1], [-2, 'unbounded'], [1, 'unbounded'],
    [-3, -1], [1, 3], [-2, 3], [-5, -5], [2, 3]];
  const accs = {
    $sum: (v) => v.reduce((a, b) => a + b, 0),
    $avg: (v) => (v.length ? v.reduce((a, b) => a + b, 0) / v.length : null),
    $min: (v) => (v.length ? Math.min(...v) : null),
    $max: (v) => (v.length ? Math.max(...v) : null),
    $push: (v) => v,
    $addToSet: (v) => [...new Set(v)].sort((a, b) => a - b),
    $first: (v) => (v.length ? v[0] : null),
    $last: (v) => (v.length ? v[v.length - 1] : null),
    $stdDevPop: (v) => {
      if (!v.length) return null;
      const m = v.reduce((a, b) => a + b, 0) / v.length;
      return Math.sqrt(v.reduce((a, b) => a + (b - m) * (b - m), 0) / v.length);
    },
  };
  // The N family (mongod's n_accumulators.js runs them through the same bounds), with n = 4.
  const asc = (v) => v.slice().sort((a, b) => a - b);
  const nfuncs = {
    firstN: [{ $firstN: { input: '$price', n: 4 } }, (v) => v.slice(0, 4)],
    lastN: [{ $lastN: { input: '$price', n: 4 } }, (v) => v.slice(-4)],
    minN: [{ $minN: { input: '$price', n: 4 } }, (v) => asc(v).slice(0, 4)],
    maxN: [{ $maxN: { input: '$price', n: 4 } }, (v) => asc(v).reverse().slice(0, 4)],
    topN: [{ $topN: { output: '$price', sortBy: { price: 1 }, n: 4 } }, (v) => asc(v).slice(0, 4)],
    bottomN: [{ $bottomN: { output: '$price', sortBy: { price: 1 }, n: 4 } }, (v) => asc(v).slice(-4)],
    top: [{ $top: { output: '$price', sortBy: { price: 1 } } }, (v) => (v.length ? asc(v)[0] : null)],
    bottom: [{ $bottom: { output: '$price', sortBy: { price: 1 } } }, (v) => (v.length ? asc(v)[v.length - 1] : null)],
  };
  const at = (b, i) => (b === 'unbounded' ? null : b === 'current' ? i : i + b);
  for (const partitionBy of [null, '$ticker', { $toLower: '$ticker' }]) {
    const parts = partitionBy === null ? [docs.slice().sort((a, b) => a._id - b._id)] :
      ['T1', 'T2'].map((t) => docs.filter((d) => d.ticker === t).sort((a, b) => a._id - b._id));
    for (const [lo, hi] of bounds) {
      const output = {};
      for (const a of Object.keys(accs)) output[a.slice(1)] = { [a]: '$price', window: { documents: [lo, hi] } };
      for (const [name, [spec]] of Object.entries(nfuncs)) output[name] = { ...spec, window: { documents: [lo, hi] } };
      const r = await c.aggregate([{ $setWindowFields: { partitionBy, sortBy: { _id: 1 }, output } }]).toArray();
      const got = Object.fromEntries(r.map((d) => [d._id, d]));
      for (const part of parts) {
        part.forEach((d, i) => {
          const l = Math.max(0, at(lo, i) ?? 0), h = Math.min(part.length - 1, at(hi, i) ?? part.length - 1);
          const vals = l <= h ? part.slice(l, h + 1).map((x) => x.price) : [];
          for (const [a, f] of Object.entries(accs)) {
            const want = f(vals), have = got[d._id][a.slice(1)];
            const what = `${a} [${lo}, ${hi}] partitionBy ${JSON.stringify(partitionBy)} _id ${d._id}`;
            if (a === '$stdDevPop' && want !== null) close(have, want, 1e-9);
            else assert.deepEqual(have, want, what);
          }
          for (const [name, [, f]] of Object.entries(nfuncs)) {
            assert.deepEqual(got[d._id][name], f(vals), `${name} [${lo}, ${hi}] partitionBy ${JSON.stringify(partitionBy)} _id ${d._id}`);
          }
        });
      }
    }
  }
});

h.test('$sum / $avg types, nulls and non-numbers; $min / $max skip nulls; empty windows', async () => {
  const db = srv.freshDb('types');
  const r = await docsAgg(db, [
    { _id: 1, v: 1 }, { _id: 2, v: 2.5 }, { _id: 3, v: 'x' }, { _id: 4, v: null }, { _id: 5 }, { _id: 6, v: 3 },
  ], {
    sortBy: { _id: 1 },
    output: {
      s: { $sum: '$v' }, a: { $avg: '$v' }, mn: { $min: '$v' }, mx: { $max: '$v' },
      ints: { $sum: '$_id', window: { documents: [-1, 0] } },
      none: { $sum: '$v', window: { documents: [6, 9] } },
      noneAvg: { $avg: '$v', window: { documents: [6, 9] } },
      noneCount: { $count: {}, window: { documents: [-9, -6] } },
      pushNone: { $push: '$v', window: { documents: [-9, -6] } },
      self: { $first: '$v', window: { documents: [0, 0] } },
    },
  });
  assert.ok(!('self' in r[4]), 'a missing value leaves the field unset');
  assert.equal(r[3].self, null);
  assert.equal(r[2].self, 'x');
  assert.equal(r[0].s, 6.5);
  assert.equal(r[0].a, 6.5 / 3);
  assert.equal(r[0].mn, 1);
  assert.equal(r[0].mx, 'x'); // strings sort above numbers
  assert.deepEqual(byId(r, 'ints'), { 1: 1, 2: 3, 3: 5, 4: 7, 5: 9, 6: 11 });
  assert.equal(r[0].none, 0);
  assert.equal(r[5].none, 0);
  assert.equal(r[0].noneAvg, null);
  assert.equal(r[0].noneCount, 0);
  assert.deepEqual(r[0].pushNone, []);
  assert.equal(r[0].s, 6.5);
  // Longs stay longs; exact integer sums past 2^53 while sliding.
  const big = await db.aggregate([
    { $documents: [{ i: 1, v: { $toLong: '9007199254740993' } }, { i: 2, v: { $toLong: '2' } }, { i: 3, v: { $toLong: '-9007199254740993' } }] },
    { $setWindowFields: { sortBy: { i: 1 }, output: { s: { $sum: '$v', window: { documents: [-1, 0] } } } } },
    { $project: { _id: 0, s: { $toString: '$s' }, t: { $type: '$s' } } },
  ]).toArray();
  assert.deepEqual(big, [{ s: '9007199254740993', t: 'long' }, { s: '9007199254740995', t: 'long' },
    { s: '-9007199254740991', t: 'long' }]);
  // A removable (left-bounded) window narrows a long sum that fits to int, as mongod's RemovableSum;
  // a left-unbounded one keeps $group's long.
  const narrow = await db.aggregate([
    { $documents: [{ i: 1, v: { $toLong: 5 } }, { i: 2, v: 7 }] },
    { $setWindowFields: { sortBy: { i: 1 }, output: { r: { $sum: '$v', window: { documents: [-1, 0] } }, u: { $sum: '$v', window: { documents: ['unbounded', 'current'] } } } } },
    { $project: { _id: 0, r: { $type: '$r' }, u: { $type: '$u' } } },
  ]).toArray();
  assert.deepEqual(narrow, [{ r: 'int', u: 'long' }, { r: 'int', u: 'long' }]);
});

h.test('$stdDevPop, $stdDevSamp, $covariancePop, $covarianceSamp', async () => {
  const db = srv.freshDb('stats');
  const r = await docsAgg(db, [{ _id: 1, x: 1, y: 2 }, { _id: 2, x: 2, y: 5 }, { _id: 3, x: 3, y: 7 }], {
    sortBy: { x: 1 },
    output: {
      sp: { $stdDevPop: '$y' },
      ss: { $stdDevSamp: '$y', window: { documents: ['unbounded', 'current'] } },
      cp: { $covariancePop: ['$x', '$y'] },
      cs: { $covarianceSamp: ['$x', '$y'], window: { documents: [-1, 0] } },
    },
  });
  for (const d of r) close(d.sp, Math.sqrt(38 / 9));
  assert.equal(r[0].ss, null);
  close(r[1].ss, Math.sqrt(4.5));
  close(r[2].ss, Math.sqrt(19 / 3));
  for (const d of r) close(d.cp, 5 / 3);
  assert.equal(r[0].cs, null);
  close(r[1].cs, 1.5);
  close(r[2].cs, 1);
  // Non-finite points stay out of the moments but make the answer infinite or NaN (mongod's order of checks).
  const inf = await docsAgg(db, [{ x: 1, y: 2 }, { x: 2, y: Infinity }, { x: 3, y: 4 }, { x: -Infinity, y: 1 }], {
    sortBy: { x: 1 },
    output: {
      cp: { $covariancePop: ['$x', '$y'], window: { documents: ['unbounded', 'current'] } },
      cs: { $covarianceSamp: ['$x', '$y'], window: { documents: ['unbounded', 'current'] } },
    },
  });
  assert.deepEqual(inf.map((d) => [d.cp, d.cs]), [[null, null], [0, null], [0, null], [NaN, NaN]]);
  // mongod's covariance.js: the online answers agree with the offline formula over every bounds pair.
  const pts = [...Array(10).keys()].map((i) => ({ _id: i, x: Math.sin(i + 1) * 7, y: Math.cos(i * 3) * 5 }));
  const bounds = [['unbounded', 0], ['unbounded', -1], [0, 'unbounded'], [0, 1], ['current', 2], [-1, 1], [-2, 'unbounded'],
    [1, 'unbounded'], [-3, -1], [1, 3], [-2, 3]];
  for (const b of bounds) {
    const got = await docsAgg(db, pts, { sortBy: { _id: 1 }, output: {
      p: { $covariancePop: ['$x', '$y'], window: { documents: b } }, s: { $covarianceSamp: ['$x', '$y'], window: { documents: b } },
      sp: { $stdDevPop: '$x', window: { documents: b } }, ss: { $stdDevSamp: '$x', window: { documents: b } } } });
    got.forEach((d, i) => {
      const l = Math.max(0, b[0] === 'unbounded' ? 0 : b[0] === 'current' ? i : i + b[0]);
      const h = Math.min(9, b[1] === 'unbounded' ? 9 : b[1] === 'current' ? i : i + b[1]);
      const w = l <= h ? pts.slice(l, h + 1) : [];
      const mx = w.reduce((a, q) => a + q.x, 0) / w.length, my = w.reduce((a, q) => a + q.y, 0) / w.length;
      const cxy = w.reduce((a, q) => a + (q.x - mx) * (q.y - my), 0), m2 = w.reduce((a, q) => a + (q.x - mx) ** 2, 0);
      const want = [w.length < 1 ? null : cxy / w.length, w.length < 2 ? null : cxy / (w.length - 1),
        w.length < 1 ? null : Math.sqrt(m2 / w.length), w.length < 2 ? null : Math.sqrt(m2 / (w.length - 1))];
      [d.p, d.s, d.sp, d.ss].forEach((v, k) => {
        if (want[k] === null) assert.equal(v, null, `${b} ${i} ${k}`);
        else close(v, want[k], 1e-9);
      });
    });
  }
  const sd = await docsAgg(db, [{ x: 1, y: 2 }, { x: 2, y: Infinity }, { x: 3, y: 4 }],
    { sortBy: { x: 1 }, output: { p: { $stdDevPop: '$y', window: { documents: [-1, 0] } }, s: { $stdDevSamp: '$y', window: { documents: [0, 0] } } } });
  assert.deepEqual(sd.map((d) => [d.p, d.s]), [[0, null], [NaN, NaN], [NaN, null]]);
});

h.test('$expMovingAvg with N and with alpha', async () => {
  const db = srv.freshDb('ema');
  const prices = [13, 15.4, 12, 11.7];
  const r = await docsAgg(db, prices.map((p, i) => ({ _id: i, stock: 'ABC', price: p })), {
    partitionBy: '$stock', sortBy: { _id: 1 },
    output: {
      n2: { $expMovingAvg: { input: '$price', N: 2 } },
      a75: { $expMovingAvg: { input: '$price', alpha: 0.75 } },
    },
  });
  const ema = (alpha) => { let cur; return prices.map((p) => (cur = cur === undefined ? p : p * alpha + cur * (1 - alpha))); };
  ema(2 / 3).forEach((v, i) => close(r[i].n2, v));
  ema(0.75).forEach((v, i) => close(r[i].a75, v));
  assert.equal(r[1].a75, 14.8);
});

h.test('manual: $expMovingAvg over stockPrices (N and alpha, mongod\'s Decimal128 arithmetic rounded to double)', async () => {
  const c = srv.freshDb('stock').collection('stockPrices');
  const day = (d) => new Date(`2020-05-${d}T20:00:00Z`);
  await c.insertMany([
    { stock: 'ABC', date: day(18), price: 13 }, { stock: 'ABC', date: day(19), price: 15.4 },
    { stock: 'ABC', date: day(20), price: 12 }, { stock: 'ABC', date: day(21), price: 11.7 },
    { stock: 'DEF', date: day(18), price: 82 }, { stock: 'DEF', date: day(19), price: 94 },
    { stock: 'DEF', date: day(20), price: 112 }, { stock: 'DEF', date: day(21), price: 97.3 },
  ]);
  const r = await c.aggregate([{
    $setWindowFields: {
      partitionBy: '$stock', sortBy: { date: 1 },
      output: {
        expMovingAvgForStock: { $expMovingAvg: { input: '$price', N: 2 } },
        alpha: { $expMovingAvg: { input: '$price', alpha: 0.75 } },
      },
    },
  }]).toArray();
  assert.deepEqual(r.map((d) => d.expMovingAvgForStock), [13, 14.6, 12.866666666666667, 12.088888888888889, 82, 90, 104.66666666666667, 99.75555555555556]);
  assert.deepEqual(r.map((d) => d.alpha), [13, 14.8, 12.7, 11.95, 82, 91, 106.75, 99.6625]);
});

h.test('manual: $derivative over deliveryFleet (miles per hour over 30 s ranges)', async () => {
  const c = srv.freshDb('fleet').collection('deliveryFleet');
  const at = (t) => new Date(`2020-05-18T14:${t}Z`);
  await c.insertMany([
    { truckID: '1', timeStamp: at('10:30'), miles: 1295.1 }, { truckID: '1', timeStamp: at('11:00'), miles: 1295.63 },
    { truckID: '1', timeStamp: at('11:30'), miles: 1296.25 }, { truckID: '1', timeStamp: at('12:00'), miles: 1296.76 },
    { truckID: '2', timeStamp: at('10:30'), miles: 10234.1 }, { truckID: '2', timeStamp: at('11:00'), miles: 10234.33 },
    { truckID: '2', timeStamp: at('11:30'), miles: 10234.73 }, { truckID: '2', timeStamp: at('12:00'), miles: 10235.13 },
  ]);
  const r = await c.aggregate([
    {
      $setWindowFields: {
        partitionBy: '$truckID', sortBy: { timeStamp: 1 },
        output: { truckAverageSpeed: { $derivative: { input: '$miles', unit: 'hour' }, window: { range: [-30, 0], unit: 'second' } } },
      },
    },
    { $match: { truckAverageSpeed: { $gt: 50 } } },
  ]).toArray();
  assert.deepEqual(r.map((d) => [d.truckID, d.miles, d.truckAverageSpeed]),
    [['1', 1295.63, 63.60000000002401], ['1', 1296.25, 74.3999999999869], ['1', 1296.76, 61.199999999998916]]);
});

h.test('manual: $integral over powerConsumption (kilowatt-hours over a range window with units)', async () => {
  const c = srv.freshDb('power').collection('powerConsumption');
  const at = (t) => new Date(`2020-05-18T14:${t}Z`);
  await c.insertMany([
    { powerMeterID: '1', timeStamp: at('10:30'), kilowatts: 2.95 }, { powerMeterID: '1', timeStamp: at('11:00'), kilowatts: 2.7 },
    { powerMeterID: '1', timeStamp: at('11:30'), kilowatts: 2.6 }, { powerMeterID: '1', timeStamp: at('12:00'), kilowatts: 2.98 },
    { powerMeterID: '2', timeStamp: at('10:30'), kilowatts: 2.5 }, { powerMeterID: '2', timeStamp: at('11:00'), kilowatts: 2.25 },
    { powerMeterID: '2', timeStamp: at('11:30'), kilowatts: 2.75 }, { powerMeterID: '2', timeStamp: at('12:00'), kilowatts: 2.82 },
  ]);
  const r = await c.aggregate([{
    $setWindowFields: {
      partitionBy: '$powerMeterID', sortBy: { timeStamp: 1 },
      output: { powerMeterKilowattHours: { $integral: { input: '$kilowatts', unit: 'hour' }, window: { range: ['unbounded', 'current'], unit: 'hour' } } },
    },
  }]).toArray();
  assert.deepEqual(r.map((d) => d.powerMeterKilowattHours),
    [0, 0.023541666666666666, 0.045625, 0.068875, 0, 0.019791666666666666, 0.040625, 0.06383333333333334]);
});

h.test('$derivative and $integral with a date sortBy and unit', async () => {
  const c = srv.freshDb('deriv').collection('fleet');
  const t0 = Date.parse('2021-01-01T00:00:00Z');
  await c.insertMany([0, 30, 90, 90].map((miles, i) => ({ _id: i, truck: 'A', ts: new Date(t0 + i * 1800000), miles })));
  const r = await c.aggregate([{
    $setWindowFields: {
      partitionBy: '$truck', sortBy: { ts: 1 },
      output: {
        speed: { $derivative: { input: '$miles', unit: 'hour' }, window: { documents: [-1, 0] } },
        dist: { $integral: { input: '$miles', unit: 'hour' }, window: { documents: ['unbounded', 'current'] } },
        avgSpeed: { $derivative: { input: '$miles', unit: 'hour' }, window: { range: [-1, 0], unit: 'hour' } },
      },
    },
  }]).toArray();
  assert.deepEqual(byId(r, 'speed'), { 0: null, 1: 60, 2: 120, 3: 0 });
  assert.deepEqual(byId(r, 'dist'), { 0: 0, 1: 7.5, 2: 37.5, 3: 82.5 });
  assert.deepEqual(byId(r, 'avgSpeed'), { 0: null, 1: 60, 2: 90, 3: 60 });
  // mongod's integral.js: dates in milliseconds scaled to the unit at the end.
  const ms = srv.freshDb('integral_ms').collection('c');
  await ms.insertMany([0, 2, 4, 6].map((t) => ({ x: new Date(Date.parse('2020-01-01T00:00:00Z') + t), y: t })));
  const ir = await ms.aggregate([{ $setWindowFields: { sortBy: { x: 1 }, output: { integral: { $integral: { input: '$y', unit: 'second' }, window: { documents: [-1, 1] } } } } }]).toArray();
  assert.deepEqual(ir.map((d) => d.integral), [0.002, 0.008, 0.016, 0.010]);
  const rs = srv.freshDb('integral_range').collection('c');
  await rs.insertMany([[0, 0.0], [4, 2.4], [10, 5.6], [18, 6.8]].map(([t, y]) => ({ time: new Date(Date.parse('2020-01-01T00:00:00Z') + t * 1000), y })));
  const rr = (bounds) => rs.aggregate([{ $setWindowFields: { sortBy: { time: 1 }, output: { i: { $integral: { input: '$y', unit: 'second' }, window: { range: bounds, unit: 'second' } } } } }]).toArray();
  assert.deepEqual((await rr([-1, -1])).map((d) => d.i), [null, null, null, null]);
  assert.deepEqual((await rr([-2, 0])).map((d) => d.i), [0, 0, 0, 0]);
  assert.deepEqual((await rr([-6, 6])).map((d) => d.i), [4.8, 28.8, 24.0, 0]);
  // Numeric sortBy without unit.
  const db = srv.freshDb('deriv_num');
  const n = await docsAgg(db, [{ t: 0, y: 0 }, { t: 2, y: 4 }, { t: 4, y: 4 }],
    { sortBy: { t: 1 }, output: { d: { $derivative: { input: '$y' }, window: { documents: ['unbounded', 'current'] } }, i: { $integral: { input: '$y' } } } });
  assert.deepEqual(n.map((d) => [d.d, d.i]), [[null, 12], [2, 12], [1, 12]]);
  await assert.rejects(c.aggregate([{ $setWindowFields: { sortBy: { ts: 1 }, output: { d: { $derivative: { input: '$miles' }, window: { documents: [-1, 0] } } } } }]).toArray(), { code: 5624901 });
  await assert.rejects(docsAgg(db, [{ t: 0, y: 0 }, { t: 1, y: 4 }], { sortBy: { t: 1 }, output: { d: { $derivative: { input: '$y', unit: 'second' }, window: { documents: [-1, 0] } } } }), { code: 5624900 });
  await assert.rejects(docsAgg(db, [{ t: 0, y: 0 }, { t: 1 }], { sortBy: { t: 1 }, output: { d: { $derivative: { input: '$y' }, window: { documents: [-1, 0] } } } }), { code: 5624903 });
  await assert.rejects(docsAgg(db, [{ t: 0 }], { sortBy: { t: 1 }, output: { d: { $derivative: { input: '$y' } } } }), { code: 9 });
  await assert.rejects(docsAgg(db, [{ t: 0 }], { sortBy: { t: 1 }, output: { d: { $integral: { input: '$y', unit: 'month' } } } }), { code: 5490710 });
  await assert.rejects(docsAgg(db, [{ t: 0 }], { output: { d: { $integral: { input: '$y' } } } }), { code: 9 });
  await assert.rejects(docsAgg(db, [{ t: 0, y: 1 }, { t: 1, y: 'x' }], { sortBy: { t: 1 }, output: { d: { $integral: { input: '$y' } } } }), { code: 5423900 });
  await assert.rejects(docsAgg(db, [{ t: 0, y: 1 }], { sortBy: { t: 1 }, output: { d: { $integral: { input: '$y', unit: 'hour' } } } }), { code: 5423901 });
  await assert.rejects(c.aggregate([{ $setWindowFields: { sortBy: { ts: 1 }, output: { d: { $integral: { input: '$miles' } } } } }]).toArray(), { code: 5423902 });
  // An error after some documents were computed leaks nothing (LeakSanitizer checks at shutdown).
  await assert.rejects(docsAgg(db, [{ t: 0, y: 1 }, { t: 1, y: 2 }, { t: 2, y: 'x' }], { sortBy: { t: 1 }, output: { p: { $push: '$y', window: { documents: [-1, 0] } }, d: { $integral: { input: '$y' }, window: { documents: [-1, 0] } } } }), { code: 5423900 });
});

h.test('$locf and $linearFill', async () => {
  const db = srv.freshDb('fill');
  const r = await docsAgg(db, [{ _id: 1, t: 1, a: 1 }, { _id: 2, t: 2, a: 2 }, { _id: 3, t: 4, a: null }, { _id: 4, t: 5, a: 8 }, { _id: 5, t: 6 }, { _id: 0, t: 0 }],
    { sortBy: { t: 1 }, output: { lf: { $linearFill: '$a' }, locf: { $locf: '$a' } } });
  assert.deepEqual(byId(r, 'lf'), { 0: null, 1: 1, 2: 2, 3: 6, 4: 8, 5: null });
  assert.deepEqual(byId(r, 'locf'), { 0: null, 1: 1, 2: 2, 3: 2, 4: 8, 5: 8 });
  await assert.rejects(docsAgg(db, [{ t: 1 }], { output: { lf: { $linearFill: '$a' } } }), { code: 605001 });
  // mongod's linear_fill.js: interpolation order of operations, dates, and its errors.
  const lf = async (docs, sortBy = { x: 1 }) => (await docsAgg(db, docs, { sortBy, output: { y: { $linearFill: '$y' } } })).map((d) => d.y);
  assert.deepEqual(await lf([{ x: 0.5, y: 0 }, { x: 1, y: null }, { x: 4.384, y: null }, { x: 9, y: null }, { x: 10.09283, y: 11.28374 }]),
    [0, 0.5881340542884634, 4.5686253337127845, 9.998278922903879, 11.28374]);
  const day = (y) => new Date(Date.UTC(y, 11, 28));
  assert.deepEqual(await lf([{ x: day(2002), y: -10 }, { x: day(2003), y: null }, { x: day(2004), y: null }, { x: day(2005), y: 200 }]),
    [-10, 59.93613138686132, 130.06386861313868, 200]);
  assert.deepEqual(await lf([{ x: 0, y: null }, { x: 1, y: null }, { x: 10, y: 10 }, { x: 11, y: null }, { x: 13, y: 13 }]), [null, null, 10, 11, 13]);
  await assert.rejects(lf([{ x: 10, y: 10 }, { x: 10, y: null }, { x: 11, y: 11 }]), { code: 6050106 });
  await assert.rejects(lf([{ x: null, y: 0 }, { x: 1, y: null }]), { code: 14 });
  await assert.rejects(lf([{ x: 0, y: 'str' }, { x: 1, y: null }]), { code: 14 });
  await assert.rejects(lf([{ x: 1, y: 10 }, { x: 2, y: null }, { x: new Date(), y: 20 }]), { code: 14 });
  await assert.rejects(docsAgg(db, [{ t: 1 }], { sortBy: { t: 1 }, output: { l: { $locf: '$a', window: { documents: [-1, 0] } } } }), { code: 9 });
});

h.test('$firstN $lastN $minN $maxN $topN $bottomN $top $bottom', async () => {
  const db = srv.freshDb('nfuncs');
  const docs = [{ _id: 1, t: 1, a: 5 }, { _id: 2, t: 2, a: null }, { _id: 3, t: 3, a: 9 }, { _id: 4, t: 4, a: 1 }];
  const r = await docsAgg(db, docs, {
    sortBy: { t: 1 },
    output: {
      fn: { $firstN: { input: '$a', n: 2 } },
      ln: { $lastN: { input: '$a', n: 2 }, window: { documents: ['unbounded', 'current'] } },
      mn: { $minN: { input: '$a', n: 2 } },
      mx: { $maxN: { input: '$a', n: 3 }, window: { documents: [-1, 1] } },
      tn: { $topN: { output: '$t', sortBy: { a: -1 }, n: 2 } },
      bn: { $bottomN: { output: '$t', sortBy: { a: -1 }, n: 2 } },
      top: { $top: { output: '$t', sortBy: { a: 1 } } },
      bottom: { $bottom: { output: ['$t', '$a'], sortBy: { a: 1 } } },
    },
  });
  assert.deepEqual(byId(r, 'fn'), { 1: [5, null], 2: [5, null], 3: [5, null], 4: [5, null] });
  assert.deepEqual(byId(r, 'ln'), { 1: [5], 2: [5, null], 3: [null, 9], 4: [9, 1] });
  assert.deepEqual(byId(r, 'mn'), { 1: [1, 5], 2: [1, 5], 3: [1, 5], 4: [1, 5] });
  assert.deepEqual(byId(r, 'mx'), { 1: [5], 2: [9, 5], 3: [9, 1], 4: [9, 1] });
  assert.deepEqual(byId(r, 'tn'), { 1: [3, 1], 2: [3, 1], 3: [3, 1], 4: [3, 1] });
  assert.deepEqual(byId(r, 'bn'), { 1: [4, 2], 2: [4, 2], 3: [4, 2], 4: [4, 2] });
  assert.deepEqual(byId(r, 'top'), { 1: 2, 2: 2, 3: 2, 4: 2 });
  assert.deepEqual(byId(r, 'bottom'), { 1: [3, 9], 2: [3, 9], 3: [3, 9], 4: [3, 9] });
  const bad = (n) => docsAgg(db, docs, { output: { x: { $firstN: { input: '$a', n } } } });
  await assert.rejects(bad('two'), { code: 5787902 });
  await assert.rejects(bad(1.5), { code: 5787903 });
  await assert.rejects(bad(0), { code: 5787908 });
  await assert.rejects(docsAgg(db, docs, { output: { x: { $firstN: { input: '$a' } } } }), { code: 5787906 });
  await assert.rejects(docsAgg(db, docs, { output: { x: { $firstN: { n: 1 } } } }), { code: 5787907 });
  await assert.rejects(docsAgg(db, docs, { output: { x: { $firstN: { input: '$a', n: '$a' } } } }), { code: 5787902 });
  // Each family has its own codes (mongod's n_accumulators.js).
  const e = (spec) => docsAgg(db, docs, { sortBy: { t: 1 }, output: { x: spec } });
  await assert.rejects(e({ $firstN: 'x' }), { code: 5787801 });
  await assert.rejects(e({ $minN: 'x' }), { code: 5787900 });
  await assert.rejects(e({ $minN: { input: '$a', n: 1, foo: 1 } }), { code: 5787901 });
  await assert.rejects(e({ $topN: 'x' }), { code: 5788001 });
  await assert.rejects(e({ $topN: { output: '$a', sortBy: { a: 1 } } }), { code: 5788003 });
  await assert.rejects(e({ $topN: { n: 2, sortBy: { a: 1 } } }), { code: 5788004 });
  await assert.rejects(e({ $bottomN: { n: 2, output: '$a' } }), { code: 5788005 });
  await assert.rejects(e({ $top: { n: 2, output: '$a', sortBy: { a: 1 } } }), { code: 5788002 });
  await assert.rejects(e({ $bottom: { output: '$a' } }), { code: 5788005 });
  await assert.rejects(e({ $topN: { output: '$a', sortBy: { a: 1 }, n: 2.1 } }), { code: 5787903 });
});

h.test('$median and $percentile', async () => {
  const db = srv.freshDb('quant');
  const r = await docsAgg(db, [1, 2, 8, null, 'x', 4].map((v, i) => ({ _id: i, v })), {
    sortBy: { _id: 1 },
    output: {
      med: { $median: { input: '$v', method: 'approximate' } },
      pc: { $percentile: { input: '$v', p: [0.25, 0.9], method: 'approximate' } },
      run: { $median: { input: '$v', method: 'approximate' }, window: { documents: ['unbounded', 'current'] } },
    },
  });
  assert.ok(r.every((d) => d.med === 2 && d.pc[0] === 1 && d.pc[1] === 8));
  assert.deepEqual(byId(r, 'run'), { 0: 1, 1: 1, 2: 2, 3: 2, 4: 2, 5: 2 });
  // mongod's percentile.js errors.
  const e = (spec) => docsAgg(db, [{ v: 1 }], { sortBy: { v: 1 }, output: { x: spec } });
  await assert.rejects(e({ $percentile: 'x' }), { code: 7429703 });
  await assert.rejects(e({ $median: 'x' }), { code: 7436100 });
  await assert.rejects(e({ $median: { input: '$v', method: false } }), { code: 14 });
  await assert.rejects(e({ $median: { input: '$v', method: 'continuous' } }), { code: 2 });
  await assert.rejects(e({ $percentile: { input: '$v', method: 'approximate' } }), { code: 40414 });
  await assert.rejects(e({ $median: { p: [0.5], input: '$v', method: 'approximate' } }), { code: 40415 });
  await assert.rejects(e({ $percentile: { p: ['$v'], input: '$v', method: 'approximate' } }), { code: 7750300 });
  await assert.rejects(e({ $percentile: { p: [], input: '$v', method: 'approximate' } }), { code: 7750301 });
  await assert.rejects(e({ $percentile: { p: ['a'], input: '$v', method: 'approximate' } }), { code: 7750302 });
  await assert.rejects(e({ $percentile: { p: [1.5], input: '$v', method: 'approximate' } }), { code: 7750303 });
  await assert.rejects(e({ $median: { input: '$v', method: 'approximate' }, extra: 1 }), { code: 9 });
  await assert.rejects(e({ $median: { input: '$v', method: 'approximate' }, window: [-1, 1] }), { code: 9 });
});

h.test('partitions: expressions, null and missing together, 1 and 1.0 together, arrays refused', async () => {
  const db = srv.freshDb('parts');
  const r = await docsAgg(db, [{ _id: 1, k: 'a', v: 1 }, { _id: 2, k: 'b', v: 2 }, { _id: 3, v: 3 }, { _id: 4, k: null, v: 4 },
    { _id: 5, k: 1, v: 5 }, { _id: 6, k: 1.0, v: 6 }], { partitionBy: '$k', output: { s: { $sum: '$v' } } });
  assert.deepEqual(byId(r, 's'), { 1: 1, 2: 2, 3: 7, 4: 7, 5: 11, 6: 11 });
  const e = await docsAgg(db, [{ _id: 1, v: 1 }, { _id: 2, v: 2 }, { _id: 3, v: 3 }],
    { partitionBy: { $mod: ['$v', 2] }, output: { s: { $sum: '$v' } } });
  assert.deepEqual(byId(e, 's'), { 1: 4, 2: 2, 3: 4 });
  await assert.rejects(docsAgg(db, [{ k: [1] }], { partitionBy: '$k', output: { s: { $sum: 1 } } }), { code: 14 });
  await assert.rejects(docsAgg(db, [{ k: 1 }], { partitionBy: { $literal: [1] }, output: { s: { $sum: 1 } } }), { code: 14 });
});

h.test('output paths: dotted paths nest like $addFields, existing fields are replaced in place', async () => {
  const db = srv.freshDb('paths');
  const r = await docsAgg(db, [{ _id: 1, a: { x: 1 }, v: 5, z: 0 }, { _id: 2, a: 3, v: 6, z: 0 }],
    { sortBy: { _id: 1 }, output: { 'a.b': { $sum: '$v' }, v: { $documentNumber: {} }, 'n.m': { $count: {} } } });
  assert.deepEqual(r, [
    { _id: 1, a: { x: 1, b: 11 }, v: 1, z: 0, n: { m: 2 } },
    { _id: 2, a: { b: 11 }, v: 2, z: 0, n: { m: 2 } },
  ]);
});

h.test('output paths through arrays and nested documents ($addFields semantics, mongod\'s sum.js)', async () => {
  const c = srv.freshDb('paths_arr').collection('c');
  await c.insertOne({ _id: 1, simpleArr: [1, 2, 3], docArr: [{ first: 1 }, { second: 0 }], nestedDoc: { 1: { 2: { 3: 1 } } }, deep: [[{ x: 1 }], 5] });
  const [r] = await c.aggregate([{
    $setWindowFields: {
      sortBy: { _id: 1 },
      output: {
        'docArr.a': { $sum: '$_id' }, 'simpleArr.0.b': { $sum: '$_id' }, 'nestedDoc.1.2.a': { $sum: '$_id' },
        'newField.a': { $sum: '$_id' }, 'deep.y': { $sum: '$_id' },
      },
    },
  }]).toArray();
  assert.deepEqual(r, {
    _id: 1,
    simpleArr: [{ 0: { b: 1 } }, { 0: { b: 1 } }, { 0: { b: 1 } }],
    docArr: [{ first: 1, a: 1 }, { second: 0, a: 1 }],
    nestedDoc: { 1: { 2: { 3: 1, a: 1 } } },
    deep: [[{ x: 1, y: 1 }], { y: 1 }],
    newField: { a: 1 },
  });
});

h.test('materialising paths: $facet, $lookup sub-pipeline and a view answer like the stream', async () => {
  const c = await cakes('paths_mat');
  const db = srv.client.db(c.dbName);
  const stage = { $setWindowFields: { partitionBy: '$state', sortBy: { orderDate: 1 }, output: { cum: { $sum: '$quantity', window: { documents: ['unbounded', 'current'] } } } } };
  const expected = { 4: 162, 0: 282, 2: 427, 5: 134, 3: 238, 1: 378 };
  const [f] = await c.aggregate([{ $facet: { w: [stage] } }]).toArray();
  assert.deepEqual(byId(f.w, 'cum'), expected);
  const [l] = await c.aggregate([{ $limit: 1 }, { $lookup: { from: 'cakeSales', pipeline: [stage], as: 'w' } }]).toArray();
  assert.deepEqual(byId(l.w, 'cum'), expected);
  await db.createCollection('cakeView', { viewOn: 'cakeSales', pipeline: [stage] });
  assert.deepEqual(byId(await db.collection('cakeView').find().toArray(), 'cum'), expected);
  // Later stages see the new fields; a $match before the stage narrows its input.
  const m = await c.aggregate([{ $match: { state: 'CA' } }, stage, { $match: { cum: { $gt: 200 } } }]).toArray();
  assert.deepEqual(m.map((d) => d._id), [0, 2]);
});

h.test('a streamed result across getMores, and $lookup let variables inside the stage', async () => {
  const db = srv.freshDb('getmore');
  const c = db.collection('g');
  await c.insertMany([...Array(1000).keys()].map((i) => ({ _id: i, p: i % 7, v: i })));
  const r = await c.aggregate([{ $setWindowFields: { partitionBy: '$p', sortBy: { v: 1 }, output: { n: { $documentNumber: {} } } } }], { batchSize: 3 }).toArray();
  assert.equal(r.length, 1000);
  assert.equal(new Set(r.map((d) => d._id)).size, 1000);
  assert.ok(r.every((d) => d.n === Math.floor(d.v / 7) + 1));
  await db.collection('o').insertMany([{ _id: 1, k: 2 }, { _id: 2, k: 3 }]);
  const l = await db.collection('o').aggregate([{
    $lookup: {
      from: 'g', let: { k: '$k' }, as: 'w',
      pipeline: [{ $match: { $expr: { $lt: ['$v', 4] } } },
        { $setWindowFields: { partitionBy: { $mod: ['$v', '$$k'] }, sortBy: { v: 1 }, output: { c: { $count: {} } } } },
        { $project: { _id: 0, v: 1, c: 1 } }],
    },
  }]).toArray();
  assert.deepEqual(l.map((d) => d.w), [
    [{ v: 0, c: 2 }, { v: 2, c: 2 }, { v: 1, c: 2 }, { v: 3, c: 2 }],
    [{ v: 0, c: 2 }, { v: 3, c: 2 }, { v: 1, c: 1 }, { v: 2, c: 1 }],
  ]);
});

h.test('an output past 16 MB fails with 10334 instead of building it', async () => {
  const c = srv.freshDb('big_out').collection('c');
  const pad = 'x'.repeat(1024 * 1024);
  for (let i = 0; i < 18; i++) await c.insertOne({ _id: i, pad });
  await assert.rejects(c.aggregate([{ $setWindowFields: { output: { all: { $push: '$pad' } } } }]).toArray(), { code: 10334 });
  const ok = await c.aggregate([{ $setWindowFields: { sortBy: { _id: 1 }, output: { two: { $push: '$_id', window: { documents: [-1, 0] } } } } }, { $project: { two: 1 } }]).toArray();
  assert.deepEqual(ok[17], { _id: 17, two: [16, 17] });
});

h.test('large partitions: [unbounded, current] and sliding windows stay linear', async () => {
  const c = srv.freshDb('large').collection('c');
  const n = 20000;
  const docs = [];
  for (let i = 0; i < n; i++) docs.push({ _id: i, v: i % 10 });
  await c.insertMany(docs);
  const t = Date.now();
  const r = await c.aggregate([{
    $setWindowFields: {
      sortBy: { _id: 1 },
      output: {
        s: { $sum: '$v', window: { documents: ['unbounded', 'current'] } },
        a: { $avg: '$v', window: { documents: [-1000, 1000] } },
        m: { $max: '$v', window: { documents: [-5000, 0] } },
        sd: { $stdDevPop: '$v', window: { documents: ['unbounded', 'current'] } },
        r: { $rank: {} },
        mn: { $minN: { input: '$v', n: 3 }, window: { documents: ['unbounded', 'current'] } },
        md: { $median: { input: '$v', method: 'approximate' }, window: { documents: ['unbounded', 'current'] } },
        mdSlide: { $median: { input: '$v', method: 'approximate' }, window: { documents: [-1000, 1000] } },
        set: { $addToSet: '$v', window: { documents: ['unbounded', 'current'] } },
        tp: { $topN: { n: 2, sortBy: { v: -1 }, output: '$_id' }, window: { documents: ['unbounded', 'current'] } },
      },
    },
  }, { $match: { _id: { $in: [0, 9, n - 1] } } }]).toArray();
  assert.deepEqual([r[2].mn, r[2].md, r[2].mdSlide, r[2].set, r[2].tp], [[0, 0, 0], 4, 5, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [9, 19]]);
  assert.deepEqual([r[1].mn, r[1].set.length, r[1].tp], [[0, 1, 2], 10, [9, 8]]);
  assert.ok(Date.now() - t < 15000, `took ${Date.now() - t} ms`);
  assert.deepEqual(r.map((d) => [d._id, d.s, d.m, d.r]), [[0, 0, 0, 1], [9, 45, 9, 10], [n - 1, 4.5 * n, 9, n]]);
  close(r[2].a, 4.5, 0.01);
  close(r[2].sd, Math.sqrt(8.25), 1e-9);
});

h.test('memory: the sort fails with 292 or spills with allowDiskUse; a partition past its limit fails with 5643011', async () => {
  const c = srv.freshDb('mem').collection('c');
  const docs = [];
  for (let i = 0; i < 3000; i++) docs.push({ _id: i, p: i % 3, v: i, pad: 'x'.repeat(100) });
  await c.insertMany(docs);
  const admin = srv.client.db('admin');
  const pipe = [{ $setWindowFields: { partitionBy: '$p', sortBy: { v: 1 }, output: { s: { $sum: '$v', window: { documents: ['unbounded', 'current'] } } } } }];
  try {
    await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 100000 });
    await assert.rejects(c.aggregate(pipe, { allowDiskUse: false }).toArray(), { code: 292 });
    const r = await c.aggregate(pipe, { allowDiskUse: true }).toArray();
    assert.equal(r.length, 3000);
    assert.deepEqual([r[0]._id, r[0].s, r[2999]._id, r[2999].s], [0, 0, 2999, 1500500]);
    await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 104857600, internalDocumentSourceSetWindowFieldsMaxMemoryBytes: 100000 });
    await assert.rejects(c.aggregate(pipe, { allowDiskUse: false }).toArray(), { code: 5643011 });
    assert.equal((await c.aggregate(pipe, { allowDiskUse: true }).toArray()).length, 3000);
    // mongod's own check (set_window_fields memory_limit.js): ten 1 KB documents in one partition.
    const m = srv.freshDb('mem2').collection('c');
    for (let i = 0; i < 10; i++) await m.insertOne({ _id: i, partitionKey: 1, largeStr: Array(1025).toString() });
    const limit = (bytes) => admin.command({ setParameter: 1, internalDocumentSourceSetWindowFieldsMaxMemoryBytes: bytes });
    const one = [{ $setWindowFields: { sortBy: { partitionKey: 1 }, output: { val: { $sum: '$_id' } } } }];
    await limit(1200);
    await assert.rejects(m.aggregate(one, { allowDiskUse: false }).toArray(), { code: 5643011 });
    await limit(1200 * 10 * 3 + 1024);
    assert.equal((await m.aggregate(one, { allowDiskUse: false }).toArray())[9].val, 45);
    await limit(1200 * 10 + 1024);
    await assert.rejects(m.aggregate([{ $setWindowFields: { sortBy: { partitionKey: 1 }, partitionBy: '$partitionKey', output: { val: { $max: '$largeStr', window: { documents: [-9, 9] } } } } }], { allowDiskUse: false }).toArray(), { code: 5643011 });
    // mongod's spill_to_disk.js: with allowDiskUse the partition may pass the limit, a function's values may not.
    const sp = srv.freshDb('mem3').collection('c');
    await sp.insertMany([...Array(6).keys()].map((i) => ({ _id: i, val: i, partition: 1 })).concat(
      [...Array(21).keys()].map((i) => ({ _id: i + 6, val: i, partition: 2 }))));
    const push = (b) => [{ $setWindowFields: { partitionBy: '$partition', sortBy: { partition: 1 }, output: { arr: { $push: '$val', window: { documents: [-b, b] } } } } }, { $sort: { _id: 1 } }];
    await limit(21 * 274 + 1);
    const pr = await sp.aggregate(push(25), { allowDiskUse: true }).toArray();
    assert.deepEqual([pr[0].arr, pr[26].arr.length], [[0, 1, 2, 3, 4, 5], 21]);
    await limit(750);
    await assert.rejects(sp.aggregate(push(21), { allowDiskUse: true }).toArray(), { code: 5414201 });
    const sum = await sp.aggregate([{ $setWindowFields: { partitionBy: '$partition', sortBy: { partition: 1 }, output: { s: { $sum: '$val', window: { documents: [-21, 21] } } } } }, { $sort: { _id: 1 } }], { allowDiskUse: true }).toArray();
    assert.deepEqual([sum[0].s, sum[26].s], [15, 210]);
  } finally {
    await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 104857600, internalDocumentSourceSetWindowFieldsMaxMemoryBytes: 104857600 });
  }
});

h.test('parse errors: stage shape, output fields, window functions', async () => {
  const db = srv.freshDb('parse');
  const agg = (stage) => db.aggregate([{ $documents: [{ a: 1 }] }, { $setWindowFields: stage }]).toArray();
  await assert.rejects(agg(1), { code: 9 });
  await assert.rejects(agg({ output: {}, foo: 1 }), { code: 40415 });
  await assert.rejects(agg({ sortBy: { a: 1 } }), { code: 40414 });
  await assert.rejects(agg({ sortBy: 1, output: {} }), { code: 14 });
  await assert.rejects(agg({ output: 1 }), { code: 14 });
  await assert.rejects(agg({ sortBy: { a: 'x' }, output: {} }), { code: 15974 });
  await assert.rejects(agg({ sortBy: { a: 2 }, output: {} }), { code: 15975 });
  await assert.rejects(agg({ output: { x: 1 } }), { code: 9 });
  await assert.rejects(agg({ output: { x: { $summ: '$a' } } }), { code: 9 });
  await assert.rejects(agg({ output: { x: { window: {} } } }), { code: 9 });
  await assert.rejects(agg({ output: { x: { $sum: '$a', $max: '$a' } } }), { code: 9 });
  await assert.rejects(agg({ output: { x: { $sum: '$a', foo: 1 } } }), { code: 9 });
  await assert.rejects(agg({ output: { x: { $sum: '$a' }, 'x.y': { $sum: '$a' } } }), { code: 6307900 });
  await assert.rejects(agg({ output: { $x: { $sum: '$a' } } }), { code: 16410 });
  await assert.rejects(agg({ output: { 'a.$x': { $sum: '$a' } } }), { code: 16410 });
  await assert.rejects(agg({ output: { 'a..x': { $sum: '$a' } } }), { code: 15998 });
  await assert.rejects(agg({ output: { 'a.': { $sum: '$a' } } }), { code: 15998 });
  await assert.rejects(agg({ output: { x: { $count: 1 } } }), { code: 9 });
  // Rank functions.
  await assert.rejects(agg({ output: { r: { $rank: {} } } }), { code: 5371602 });
  await assert.rejects(agg({ sortBy: { a: 1, b: 1 }, output: { r: { $denseRank: {} } } }), { code: 5371602 });
  await assert.rejects(agg({ sortBy: { a: 1 }, output: { r: { $rank: 1 } } }), { code: 5371603 });
  await assert.rejects(agg({ sortBy: { a: 1 }, output: { r: { $documentNumber: {}, window: { documents: [0, 0] } } } }), { code: 5371601 });
  // $shift and $expMovingAvg.
  await assert.rejects(agg({ output: { s: { $shift: { output: '$a', by: 1 } } } }), { code: 9 });
  await assert.rejects(agg({ sortBy: { a: 1 }, output: { s: { $shift: { output: '$a', by: 1 }, window: { documents: [0, 1] } } } }), { code: 9 });
  await assert.rejects(agg({ sortBy: { a: 1 }, output: { s: { $shift: { output: '$a', by: 1.5 } } } }), { code: 9 });
  await assert.rejects(agg({ sortBy: { a: 1 }, output: { s: { $shift: { output: '$a' } } } }), { code: 9 });
  await assert.rejects(agg({ sortBy: { a: 1 }, output: { s: { $shift: { output: '$a', by: 1, default: '$a' } } } }), { code: 9 });
  await assert.rejects(agg({ output: { e: { $expMovingAvg: { input: '$a', N: 2 } } } }), { code: 9 });
  await assert.rejects(agg({ sortBy: { a: 1 }, output: { e: { $expMovingAvg: { input: '$a', N: 2, alpha: 0.5 } } } }), { code: 9 });
  await assert.rejects(agg({ sortBy: { a: 1 }, output: { e: { $expMovingAvg: { input: '$a', alpha: 1 } } } }), { code: 9 });
  await assert.rejects(agg({ sortBy: { a: 1 }, output: { e: { $expMovingAvg: { input: '$a', N: 0 } } } }), { code: 9 });
});

h.test('mongod\'s comprehensive_parse.js matrix: 23 functions x 12 windows x 6 sortBys x 4 partitionBys, each code', async () => {
  const db = srv.freshDb('matrix');
  const coll = db.collection('cp');
  const day0 = Date.UTC(2021, 0, 1);
  await coll.insertMany([...Array(10).keys()].map((i) => ({ a: i, date: new Date(day0 + i * 86400000), array: [], partition: i % 2, partitionSeq: Math.trunc(i / 2) })));
  const functions = {
    sum: { $sum: '$a' }, avg: { $avg: '$a' }, stdDevSamp: { $stdDevSamp: '$a' }, stdDevPop: { $stdDevPop: '$a' },
    min: { $min: '$a' }, max: { $max: '$a' }, count: { $count: {} },
    derivative: { $derivative: { input: '$a' } }, derivative_date: { $derivative: { input: '$date', unit: 'millisecond' } },
    integral: { $integral: { input: '$a' } }, integral_date: { $integral: { input: '$a', unit: 'millisecond' } },
    covariancePop: { $covariancePop: ['$a', '$date'] }, covarianceSamp: { $covarianceSamp: ['$a', '$date'] },
    expMovingAvgN: { $expMovingAvg: { input: '$a', N: 3 } }, expMovingAvgAlpha: { $expMovingAvg: { input: '$a', alpha: 0.1 } },
    push: { $push: '$a' }, addToSet: { $addToSet: '$a' }, first: { $first: '$a' }, last: { $last: '$a' },
    shift: { $shift: { output: '$a', by: 1, default: 0 } }, documentNumber: { $documentNumber: {} }, rank: { $rank: {} },
    denseRank: { $denseRank: {} },
  };
  const windows = {
    none: null, left_unbounded_doc: { documents: ['unbounded', 'current'] }, right_unbounded_doc: { documents: ['current', 'unbounded'] },
    past_doc: { documents: [-1, 'current'] }, future_doc: { documents: ['current', 1] }, centered_doc: { documents: [-1, 1] },
    full_unbounded_range: { range: ['unbounded', 'unbounded'] }, left_unbounded_range: { range: ['unbounded', 'current'] },
    right_unbounded_range: { range: ['current', 'unbounded'] }, past_range: { range: [-2, 'current'] },
    future_range: { range: ['current', 2] }, centered_range: { range: [-2, 2] },
  };
  const sortBys = { none: null, asc: { partitionSeq: 1 }, desc: { partitionSeq: -1 }, asc_date: { date: 1 }, desc_date: { date: -1 }, multi: { partitionSeq: 1, partition: 1 } };
  const partitionBys = { none: null, field: '$partition', dynamic_array: '$array', static_array: { $const: [] } };
  // The expected answers, as the jstest states them: static errors first, then run-time ones.
  function expected(wf, win, sort, part) {
    if (win.endsWith('range') && (sort.endsWith('date') || sort.startsWith('desc'))) return 'SKIP';
    if (wf.startsWith('derivative')) {
      if (sort === 'none' || win === 'none' || sort === 'multi') return 9;
    } else if (wf.startsWith('integral')) {
      if (sort === 'none' || sort === 'multi') return 9;
    } else if (wf.startsWith('expMovingAvg')) {
      if (win !== 'none' || sort === 'none') return 9;
    } else if (wf === 'documentNumber' || wf === 'rank' || wf === 'denseRank') {
      if (win !== 'none') return 5371601;
      if (sort === 'none' || sort === 'multi') return 5371602;
    } else if (wf === 'shift') {
      if (sort === 'none' || win !== 'none') return 9;
    }
    if (win.endsWith('doc') && sort === 'none') return 5339901;
    if (win.endsWith('range') && (sort === 'none' || sort === 'multi')) return 5339902;
    if (part === 'static_array' || part === 'dynamic_array') return 14;
    if (wf === 'derivative_date' && !sort.endsWith('date')) return 5624900;
    if (wf === 'derivative' && sort.endsWith('date')) return 5624901;
    if (wf === 'integral_date' && !sort.endsWith('date')) return 5423901;
    if (wf === 'integral' && sort.endsWith('date')) return 5423902;
    return 0;
  }
  const wrong = [];
  let n = 0;
  for (const [wf, fn] of Object.entries(functions)) {
    for (const [win, window] of Object.entries(windows)) {
      for (const [sort, sortBy] of Object.entries(sortBys)) {
        for (const [part, partitionBy] of Object.entries(partitionBys)) {
          const want = expected(wf, win, sort, part);
          if (want === 'SKIP') continue;
          const spec = { output: { x: window ? { ...fn, window } : fn } };
          if (sortBy) spec.sortBy = sortBy;
          if (partitionBy) spec.partitionBy = partitionBy;
          const got = await db.command({ aggregate: 'cp', pipeline: [{ $setWindowFields: spec }], cursor: {} }).then(() => 0, (e) => e.code);
          n++;
          if (got !== want) wrong.push(`${wf} ${win} ${sort} ${part}: ${got}, want ${want}`);
        }
      }
    }
  }
  assert.equal(n, 4968);
  assert.deepEqual(wrong, []);
});

h.test('parse errors: window bounds', async () => {
  const db = srv.freshDb('bounds');
  const agg = (stage) => db.aggregate([{ $documents: [{ a: 1 }] }, { $setWindowFields: stage }]).toArray();
  const w = (window, sortBy = { a: 1 }) =>
    agg(sortBy === null ? { output: { x: { $sum: '$a', window } } } : { sortBy, output: { x: { $sum: '$a', window } } });
  await assert.rejects(w({ documents: [1, 0] }), { code: 5339900 });
  await assert.rejects(w({ documents: ['current', -1] }), { code: 5339900 });
  await assert.rejects(w({ range: [5, -5] }), { code: 5339900 });
  await assert.rejects(w({ documents: [-1, 0] }, null), { code: 5339901 });
  await assert.rejects(w({ range: [-1, 0] }, null), { code: 5339902 });
  await assert.rejects(w({ range: [-1, 0] }, { a: 1, b: 1 }), { code: 5339902 });
  await assert.rejects(w({ range: [-1, 0] }, { a: -1 }), { code: 8947401 });
  await assert.rejects(w({ documents: [-1.5, 0] }), { code: 9 });
  await assert.rejects(w({ documents: ['now', 0] }), { code: 9 });
  await assert.rejects(w({ documents: [0] }), { code: 9 });
  await assert.rejects(w({ documents: [0, 1], range: [0, 1] }), { code: 9 });
  await assert.rejects(w({ documents: [0, 1], unit: 'day' }), { code: 9 });
  await assert.rejects(w({ range: [0, 1], unit: 'fortnight' }), { code: 9 });
  await assert.rejects(w({ range: [0.5, 1], unit: 'day' }), { code: 9 });
  await assert.rejects(w({ range: ['a', 1] }), { code: 9 });
  await assert.rejects(w({ foo: 1 }), { code: 9 });
  await assert.rejects(w(5), { code: 9 });
  // An empty sortBy is present but has no field.
  assert.deepEqual(await w({ documents: [-1, 0] }, {}), [{ a: 1, x: 1 }]);
  await assert.rejects(w({ range: [-1, 0] }, {}), { code: 5339902 });
  await assert.rejects(agg({ sortBy: {}, output: { r: { $rank: {} } } }), { code: 5371602 });
  // Unbounded document windows need no sortBy; an empty window object is the default.
  const ok = await agg({ output: { x: { $sum: '$a', window: { documents: ['unbounded', 'unbounded'] } }, y: { $sum: '$a', window: {} } } });
  assert.deepEqual(ok, [{ a: 1, x: 1, y: 1 }]);
});

h.test('run-time errors of range windows: sortBy values must be numbers (or dates with a unit)', async () => {
  const db = srv.freshDb('range_err');
  const agg = (docs, window) => db.aggregate([{ $documents: docs }, { $setWindowFields: { sortBy: { s: 1 }, output: { x: { $sum: 1, window } } } }]).toArray();
  await assert.rejects(agg([{ s: 1 }, { s: null }], { range: [0, 0] }), { code: 5429414 });
  await assert.rejects(agg([{ s: 'a' }], { range: ['unbounded', 'unbounded'] }), { code: 5429414 });
  await assert.rejects(agg([{ s: new Date() }], { range: [0, 0] }), { code: 5429413 });
  await assert.rejects(agg([{ s: 1 }], { range: [0, 0], unit: 'day' }), { code: 5429513 });
  // Dates with unit: calendar months clamp to the month's end.
  const r = await agg([{ s: new Date('2021-01-31T00:00:00Z') }, { s: new Date('2021-02-28T00:00:00Z') }, { s: new Date('2021-03-01T00:00:00Z') }],
    { range: [0, 1], unit: 'month' });
  assert.deepEqual(r.map((d) => d.x), [2, 2, 1]);
  // Extreme dates saturate instead of overflowing (the server keeps running).
  const { Long } = require('mongodb');
  const ext = await db.aggregate([
    { $documents: [{ s: { $toDate: Long.fromString('9223372036854775000') } }, { s: { $toDate: Long.fromString('-9223372036854775000') } }] },
    { $setWindowFields: { sortBy: { s: 1 }, output: { w: { $sum: 1, window: { range: [-100, 100], unit: 'week' } }, m: { $sum: 1, window: { range: [-1, 1], unit: 'year' } } } } },
  ]).toArray();
  assert.deepEqual(ext.map((d) => d.w), [1, 1]);
  assert.ok(ext.every((d) => typeof d.m === 'number'));
});
