'use strict';
/*
 * Counts over index keys, and exact numeric bounds (issue 13: no operation's
 * cost grows with anything but its own work).
 *
 * Indexes keep KEY FORMAT 2 (src/index/keystring.c): equal numbers of any
 * type share a key and unequal ones never do, Decimal128 included. So a
 * numeric equality or range is answered exactly by the bounds, as a string
 * one was: an exclusive bound reads no key at its end, and a count whose
 * filter the bounds answer whole reads keys only (COUNT over an IXSCAN with
 * no FETCH, totalDocsExamined 0), as mongod's count does. Every count here
 * is compared with the same count over a collection scan
 * (hint {$natural: 1}), on values chosen to tie keys if anything could:
 * decimals a hair from an integer, int64 beyond 2^53, -0.0, NaN, Infinity,
 * numbers of every type, strings under a collation, null and missing.
 */
const assert = require('node:assert/strict');
const { Decimal128, Long, Double, Int32 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const D = (s) => Decimal128.fromString(s);

/* Values of a: every numeric type and the ties a lossy key would make. */
const A_VALUES = [
  new Int32(5), Long.fromNumber(5), new Double(5), D('5'), D('5.000'), D('5.0000000000000000000000000000001'),
  D('4.9999999999999999999999999999999'), new Double(5.5), D('5.5'), new Int32(2), new Int32(9), new Double(-0),
  new Int32(0), new Double(NaN), D('NaN'), new Double(Infinity), D('Infinity'), new Double(-Infinity),
  Long.fromString('9007199254740993'), new Double(9007199254740992), Long.fromString('9007199254740992'),
  D('9007199254740993'), D('1E+400'), D('-1E+400'), D('0.1'), new Double(0.1), 'x', 'X', '', null,
  new Date(5), true, false, [], { b: 1 },
];

async function seeded(tag) {
  const db = srv.freshDb(tag);
  const c = db.collection('c');
  const docs = [];
  let id = 0;
  for (let r = 0; r < 3; r++) {
    for (const a of A_VALUES.filter((v) => !Array.isArray(v))) {
      docs.push({ _id: id++, a, b: r, s: r === 0 ? undefined : a, str: typeof a === 'string' ? a : 'q', p: r });
    }
    docs.push({ _id: id++, b: r }); // a missing
  }
  await c.insertMany(docs.map((d) => Object.fromEntries(Object.entries(d).filter(([, v]) => v !== undefined))));
  await c.createIndex({ a: 1 });
  await c.createIndex({ a: -1, b: 1 });
  await c.createIndex({ s: 1 }, { sparse: true });
  await c.createIndex({ p: 1, a: 1 }, { partialFilterExpression: { p: { $gt: 0 } } });
  await c.createIndex({ str: 1 }, { collation: { locale: 'en', strength: 2 } });
  return { db, c };
}

/* count with hint against the same count over a collection scan; returns the count's explain executionStats. */
async function sameAsScan(db, query, hint, collation) {
  const extra = collation ? { collation } : {};
  const viaIndex = await db.command({ count: 'c', query, hint, ...extra });
  const viaScan = await db.command({ count: 'c', query, hint: { $natural: 1 }, ...extra });
  assert.equal(viaIndex.n, viaScan.n, `count ${JSON.stringify(query)} hinted ${JSON.stringify(hint)}`);
  const e = await db.command({ explain: { count: 'c', query, hint, ...extra }, verbosity: 'executionStats' });
  return { n: viaIndex.n, e };
}

function stages(plan) {
  const out = [];
  for (let s = plan; s; s = s.inputStage) out.push(s.stage);
  return out;
}

const NUMERIC = [
  5, new Double(5), Long.fromNumber(5), D('5'), D('5.0000000000000000000000000000001'),
  D('4.9999999999999999999999999999999'), 5.5, D('5.5'), -0, 0, NaN, D('NaN'), Infinity, -Infinity,
  Long.fromString('9007199254740993'), 9007199254740992, D('9007199254740993'), D('1E+400'), 0.1, D('0.1'),
];

h.test('a numeric equality, $in or range on a format 2 index counts over keys only, and equals the collection scan\'s count', async () => {
  const { db } = await seeded('cnteq');
  for (const v of NUMERIC) {
    for (const q of [{ a: v }, { a: { $gt: v } }, { a: { $gte: v } }, { a: { $lt: v } }, { a: { $lte: v } }]) {
      for (const hint of ['a_1', 'a_-1_b_1']) {
        const { e } = await sameAsScan(db, q, hint);
        if (String(v) === 'NaN') continue; // NaN gives no bounds (a full scan): the matcher decides
        if (!(Math.abs(Number(String(v))) < 2 ** 64)) continue; // the ends of format 2's range: see the last test
        assert.equal(e.executionStats.totalDocsExamined, 0, `docs read for ${JSON.stringify(q)} on ${hint}`);
        assert.deepEqual(stages(e.queryPlanner.winningPlan), ['COUNT', 'IXSCAN'], JSON.stringify(q));
      }
    }
  }
  const q = { a: { $in: [5, D('5.5'), Long.fromString('9007199254740993'), 'x'] } };
  const { n, e } = await sameAsScan(db, q, 'a_1');
  assert.equal(n, 3 * 10, 'five 5s, two 5.5s, two 2^53 + 1 (Long and Decimal128, not the 2^53s) and \'x\' per round');
  assert.equal(e.executionStats.totalDocsExamined, 0);
  assert.equal(e.executionStats.totalKeysExamined, n);
});

h.test('an exclusive numeric bound reads no key at its end: keys examined equal the documents counted', async () => {
  const { db, c } = await seeded('cntexcl');
  for (const [q, expect] of [[{ a: { $gt: 2, $lt: 9 } }, 9], [{ a: { $gt: 5 } }, 11], [{ a: { $lt: 5 } }, 8]]) {
    const e = await c.find(q).hint('a_1').explain('executionStats');
    const n = await c.countDocuments(q);
    assert.equal(n, expect * 3, `${JSON.stringify(q)}: ${n}`);
    assert.equal(e.executionStats.nReturned, n);
    assert.equal(e.executionStats.totalKeysExamined, n, `${JSON.stringify(q)}: keys at the excluded ends were read`);
    assert.equal(e.executionStats.totalDocsExamined, n);
  }
});

h.test('counts the bounds do not answer whole still fetch, and every one equals the collection scan\'s', async () => {
  const { db } = await seeded('cntfetch');
  const cases = [
    [{ a: null }, 'a_1'], // null also matches missing: the matcher decides
    [{ a: 5, b: 1 }, 'a_1'], // b is not in the index
    [{ a: { $ne: 5 } }, 'a_1'],
    [{ a: { $exists: true } }, 'a_1'],
    [{ a: { $type: 'decimal' } }, 'a_1'],
    [{ a: 5, b: { $gt: 0 } }, 'a_-1_b_1'],
    [{ s: { $gt: 0 } }, 's_1'],
    [{ p: { $gt: 0 }, a: 5 }, 'p_1_a_1'],
    [{ a: { $in: [/x/i, 5] } }, 'a_1'],
    [{ a: { $elemMatch: { $gt: 1 } } }, 'a_1'],
  ];
  for (const [q, hint] of cases) {
    const { e } = await sameAsScan(db, q, hint);
    assert.ok(JSON.stringify(e).includes('"stage":"IXSCAN"'), JSON.stringify(q));
  }
  // Exact ones beside them: the compound index's two fields, the sparse index's range, a collated string.
  for (const [q, hint, collation] of [[{ a: 5, b: 1 }, 'a_-1_b_1'], [{ s: { $gte: 5 } }, 's_1'],
    [{ str: 'X' }, 'str_1', { locale: 'en', strength: 2 }]]) {
    const { n, e } = await sameAsScan(db, q, hint, collation);
    assert.ok(n > 0, JSON.stringify(q));
    assert.equal(e.executionStats.totalDocsExamined, 0, JSON.stringify(q));
  }
});

h.test('on a multikey index a count still de-duplicates: a document whose array holds several matching values counts once', async () => {
  const db = srv.freshDb('cntmk');
  const c = db.collection('c');
  await c.createIndex({ t: 1, k: 1 });
  await c.insertMany([{ _id: 1, t: [1, 2, 3], k: 1 }, { _id: 2, t: [2], k: 1 }, { _id: 3, t: 9, k: 1 }, { _id: 4, t: [], k: 2 }]);
  for (const q of [{ t: { $gte: 1, $lte: 3 } }, { t: { $in: [1, 2, 3] } }, { k: 1, t: 2 }, { t: 2, k: 1 }, { k: 1 }]) {
    const { n } = await sameAsScan(db, q, 't_1_k_1');
    assert.equal(n, await c.countDocuments(q));
  }
  assert.equal((await db.command({ count: 'c', query: { t: { $in: [1, 2, 3] } }, hint: 't_1_k_1' })).n, 2);
});

/* The $cursor stage's (or the whole) executionStats of an aggregate's explain. */
function cursorStats(e) {
  return e.stages ? e.stages[0].$cursor.executionStats : e.executionStats;
}

h.test('countDocuments (a $match then a $group by a constant with $sum: 1) and $count read keys only when the bounds answer the filter; other pipelines still fetch', async () => {
  const { db, c } = await seeded('cntagg');
  for (const v of NUMERIC.filter((x) => String(x) !== 'NaN')) {
    for (const q of [{ a: v }, { a: { $gt: v } }, { a: { $lte: v } }]) {
      for (const opts of [{}, { skip: 2 }, { limit: 3 }, { skip: 1, limit: 2 }]) {
        assert.equal(await c.countDocuments(q, { ...opts, hint: 'a_1' }),
          await c.countDocuments(q, { ...opts, hint: { $natural: 1 } }), `${JSON.stringify(q)} ${JSON.stringify(opts)}`);
      }
    }
  }
  const q = { a: { $gte: 5, $lt: 9 } };
  const want = await c.countDocuments(q, { hint: { $natural: 1 } });
  assert.ok(want > 0);
  // The drivers' countDocuments pipeline, $count, and a $group with several constant accumulators.
  const pipelines = [
    [{ $match: q }, { $group: { _id: 1, n: { $sum: 1 } } }],
    [{ $match: q }, { $count: 'n' }],
    [{ $match: q }, { $group: { _id: null, n: { $sum: 2 }, m: { $count: {} } } }],
  ];
  const expect = [[{ _id: 1, n: want }], [{ n: want }], [{ _id: null, n: 2 * want, m: want }]];
  for (let i = 0; i < pipelines.length; i++) {
    assert.deepEqual(await c.aggregate(pipelines[i], { hint: 'a_1' }).toArray(), expect[i]);
    const es = cursorStats(await c.aggregate(pipelines[i], { hint: 'a_1' }).explain('executionStats'));
    assert.equal(es.totalDocsExamined, 0, JSON.stringify(pipelines[i]));
    assert.equal(es.totalKeysExamined, want);
  }
  // Reading a field, grouping by one, or a filter the bounds do not answer: the documents are fetched.
  for (const p of [[{ $match: q }, { $group: { _id: null, n: { $sum: '$b' } } }], [{ $match: q }, { $group: { _id: '$b', n: { $sum: 1 } } }],
    [{ $match: { ...q, b: 1 } }, { $count: 'n' }], [{ $match: q }, { $project: { a: 1 } }, { $count: 'n' }]]) {
    const es = cursorStats(await c.aggregate(p, { hint: 'a_1' }).explain('executionStats'));
    assert.ok(es.totalDocsExamined > 0, JSON.stringify(p));
  }
  assert.deepEqual(await c.aggregate([{ $match: q }, { $group: { _id: null, n: { $sum: '$b' } } }], { hint: 'a_1' }).toArray(),
    await c.aggregate([{ $match: q }, { $group: { _id: null, n: { $sum: '$b' } } }], { hint: { $natural: 1 } }).toArray());
});

h.test('at the ends of key format 2\'s range bounds are not exact and the documents are checked: Infinity beside a decimal past a long double (1E+5000), integral decimals past 2^65 whose residuals share a key, and documents holding them', async () => {
  // helper-97's review: keystring.c gives 1E+5000 Infinity's key, and clamps the residual of 2^66 + 4001 and + 4002 alike.
  const db = srv.freshDb('cntends');
  const c = db.collection('c');
  const B = 73786976294838206464n; // 2^66
  await c.insertMany([
    { _id: 1, a: Infinity }, { _id: 2, a: D('1E+5000') }, { _id: 3, a: 7 }, { _id: 4, a: D((B + 4001n).toString()) },
    { _id: 5, a: D((B + 4002n).toString()) }, { _id: 6, a: { b: Infinity } }, { _id: 7, a: { b: D('1E+5000') } },
    { _id: 8, a: -Infinity }, { _id: 9, a: D('-1E+5000') },
  ]);
  await c.createIndex({ a: 1 });
  await c.createIndex({ a: -1, z: 1 });
  const queries = [
    { a: Infinity }, { a: D('1E+5000') }, { a: { $lt: Infinity } }, { a: { $gt: D('1E+5000') } }, { a: { $gte: D('1E+5000') } },
    { a: -Infinity }, { a: { $gt: -Infinity } }, { a: { $lt: D('-1E+5000') } },
    { a: D((B + 4001n).toString()) }, { a: { $gt: D((B + 4001n).toString()) } }, { a: { $lt: D((B + 4002n).toString()) } },
    { a: { b: Infinity } }, { a: { b: D('1E+5000') } }, { a: { $in: [Infinity, 7] } },
    // Two values with one key: one interval, or their documents came back twice (iv_dedup).
    { a: { $in: [Infinity, D('1E+5000')] } }, { a: { $in: [{ b: Infinity }, { b: D('1E+5000') }, 7] } },
  ];
  for (const q of queries) {
    for (const hint of ['a_1', 'a_-1_z_1']) {
      const { n } = await sameAsScan(db, q, hint);
      assert.equal(await c.countDocuments(q, { hint }), n, `countDocuments ${JSON.stringify(q)} via ${hint}`);
      const ids = async (hh) => (await c.find(q, { hint: hh, projection: { _id: 1 } }).toArray()).map((d) => d._id).sort();
      assert.deepEqual(await ids(hint), await ids({ $natural: 1 }), `find ${JSON.stringify(q)} via ${hint}`);
    }
  }
  assert.equal((await db.command({ count: 'c', query: { a: Infinity }, hint: 'a_1' })).n, 1);
  assert.equal((await db.command({ count: 'c', query: { a: { $lt: Infinity } }, hint: 'a_1' })).n, 6);
});
