'use strict';
/*
 * $group over a DISTINCT_SCAN (mongod 8.0's $groupByDistinctScan,
 * pipeline_d.cpp tryDistinctGroupRewrite + get_executor.cpp
 * tryGetExecutorDistinct with STRICT_DISTINCT_ONLY): a pipeline whose
 * leading stages are an optional $match, an optional $sort (no $limit after
 * it), then a $group by one field path ("$x" or {f: "$x"}) whose
 * accumulators are all $first, all $last, or none, reads one index entry
 * per group from an index holding x (in the $sort's order; $last scans the
 * other way) instead of every document. The $group becomes
 * {$groupByDistinctScan: {newRoot: {...}}} over PROJECTION_COVERED (the
 * fields the group reads, {a: 1, b: 1, _id: 0}) or FETCH over the
 * DISTINCT_SCAN. Not when the index is multikey on x ($last: multikey at
 * all), the $sort is not the index's, a bound before x is not one point, the
 * filter is not answered by the bounds, the collation differs, or the
 * accumulators are anything else: then the pipeline runs as before.
 *
 * Results are compared with the same pipeline forced through a collection
 * scan (hint {$natural: 1}) as canonical extended JSON (number types kept),
 * sorted where the $group's output order is not defined.
 */
const assert = require('node:assert/strict');
const { BSON, Long, Double, Int32 } = require('mongodb');

const { EJSON } = BSON;
const h = require('./harness');

const srv = h.useServer();

function planStages(plan) {
  const out = [];
  for (let s = plan; s; s = s.inputStage) out.push(s.stage);
  return out;
}

function findStage(plan, name) {
  for (let s = plan; s; s = s.inputStage) if (s.stage === name) return s;
  return null;
}

const raw = { promoteValues: false, promoteLongs: false };

async function run(coll, pipeline, opts = {}) {
  const docs = await coll.aggregate(pipeline, { ...raw, ...opts }).toArray();
  return docs.map((d) => EJSON.stringify(d, { relaxed: false }));
}

/* The pipeline through the planner's choice and through a collection scan (sorted unless ordered). */
async function both(coll, pipeline, { ordered = false, opts = {} } = {}) {
  let viaIndex = await run(coll, pipeline, opts);
  let viaScan = await run(coll, pipeline, { ...opts, hint: { $natural: 1 } });
  if (!ordered) {
    viaIndex = viaIndex.slice().sort();
    viaScan = viaScan.slice().sort();
  }
  return { viaIndex, viaScan };
}

async function explain(coll, pipeline, opts = {}, verbosity = 'executionStats') {
  return coll.db.command({ explain: { aggregate: coll.collectionName, pipeline, cursor: {}, ...opts }, verbosity });
}

/* The $cursor's winning plan when the pipeline has stages after it, else the plan. */
function winning(e) {
  if (e.stages) return e.stages[0].$cursor.queryPlanner.winningPlan;
  return e.queryPlanner.winningPlan;
}

/* groups: the $group stages explain shows for later stages (a $count desugars to $group + $project). */
async function assertDistinct(coll, pipeline, opts = {}, groups = 0) {
  const e = await explain(coll, pipeline, opts);
  const st = planStages(winning(e));
  assert.ok(st.includes('DISTINCT_SCAN'), `DISTINCT_SCAN expected, plan ${st.join(' > ')}`);
  assert.ok(!st.includes('SORT'), `no blocking SORT, plan ${st.join(' > ')}`);
  assert.ok(e.stages && e.stages[1].$groupByDistinctScan, `$groupByDistinctScan expected: ${JSON.stringify(e.stages)}`);
  assert.equal(e.stages.filter((s) => s.$group).length, groups, 'the $group is gone');
  return e;
}

async function assertNoDistinct(coll, pipeline, opts = {}) {
  const e = await explain(coll, pipeline, opts);
  const st = planStages(winning(e));
  assert.ok(!st.includes('DISTINCT_SCAN'), `no DISTINCT_SCAN expected, plan ${st.join(' > ')}`);
  assert.ok(!JSON.stringify(e).includes('$groupByDistinctScan'));
  return e;
}

async function seedABC(db) {
  const coll = db.collection('c');
  await coll.insertMany([
    { _id: 0, a: 1, b: 1, c: 1 },
    { _id: 1, a: 1, b: 2, c: 2 },
    { _id: 2, a: 1, b: 3, c: 3 },
    { _id: 3, a: 2, b: 2, c: 2 },
    { _id: 4, b: 5, c: 1 },
    { _id: 5, a: null, b: 4, c: 1.5 },
    { _id: 6, a: 'x', b: 7, c: 9 },
    { _id: 7, a: 3.5, b: 8, c: 0 },
  ]);
  await coll.createIndex({ a: 1, b: 1, c: 1 });
  return coll;
}

h.test('$group by an indexed field with no accumulators: DISTINCT_SCAN, covered, same groups as a scan', async () => {
  const db = srv.freshDb();
  const coll = await seedABC(db);
  const p = [{ $group: { _id: '$a' } }];
  const r = await both(coll, p);
  assert.deepEqual(r.viaIndex, r.viaScan);
  assert.equal(r.viaIndex.length, 5); /* 1, 2, 3.5, 'x', null (null and missing: one group) */
  const e = await assertDistinct(coll, p);
  const w = winning(e);
  assert.equal(w.stage, 'PROJECTION_COVERED');
  assert.deepEqual(w.transformBy, { a: 1, _id: 0 });
  assert.equal(w.inputStage.stage, 'DISTINCT_SCAN');
  assert.deepEqual(w.inputStage.keyPattern, { a: 1, b: 1, c: 1 });
  assert.deepEqual(e.stages[1].$groupByDistinctScan, { newRoot: { _id: '$a' } });
  const es = e.stages[0].$cursor.executionStats;
  assert.equal(es.totalDocsExamined, 0);
  assert.ok(es.totalKeysExamined <= 7, `one key per group, got ${es.totalKeysExamined}`);
  assert.equal(e.stages[1].nReturned, 5);
  /* queryPlanner: the same stages, no counters */
  const q = await explain(coll, p, {}, 'queryPlanner');
  assert.deepEqual(q.stages.map((s) => Object.keys(s)[0]), ['$cursor', '$groupByDistinctScan']);
  assert.equal(q.stages[1].nReturned, undefined);
  assert.equal(findStage(winning(q), 'DISTINCT_SCAN').indexName, 'a_1_b_1_c_1');
  /* the simple rule without a covered projection: PROJECTION_SIMPLE over FETCH over DISTINCT_SCAN */
  const f = await assertDistinct(coll, [{ $group: { _id: '$a', z: { $first: '$z' } } }]);
  assert.deepEqual(planStages(winning(f)), ['PROJECTION_SIMPLE', 'FETCH', 'DISTINCT_SCAN']);
  assert.deepEqual(winning(f).transformBy, { a: 1, z: 1, _id: 0 });
});

h.test('$sort + $group $first: the first document in the sort order, covered and fetched', async () => {
  const db = srv.freshDb();
  const coll = await seedABC(db);
  const cases = [
    [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', f: { $first: '$b' } } }],
    [{ $sort: { a: -1, b: -1 } }, { $group: { _id: '$a', f: { $first: '$b' } } }],
    [{ $sort: { a: 1, b: 1, c: 1 } }, { $group: { _id: '$a', fb: { $first: '$b' }, fc: { $first: '$c' } } }],
    [{ $sort: { a: -1, b: -1 } }, { $group: { _id: '$a', doc: { $first: '$$ROOT' } } }],
    [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', s: { $first: { $add: ['$b', '$c'] } } } }],
    [{ $sort: { a: 1, b: 1 } }, { $group: { _id: { v: '$a' }, f: { $first: '$b' } } }],
    [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$$ROOT.a', f: { $first: '$$CURRENT.b' } } }],
  ];
  for (const p of cases) {
    const r = await both(coll, p);
    assert.deepEqual(r.viaIndex, r.viaScan, JSON.stringify(p));
    await assertDistinct(coll, p);
  }
  /* In the index's order the groups come out sorted, as the $sort asked. */
  const ids = async (p) => (await run(coll, p)).map((d) => JSON.parse(d)._id);
  const asc = await ids(cases[0]);
  assert.deepEqual(asc, [null, { $numberInt: '1' }, { $numberInt: '2' }, { $numberDouble: '3.5' }, 'x']);
  assert.deepEqual(await ids(cases[1]), asc.slice().reverse());
  /* the command's let variables in an accumulator, over getMore batches too */
  const lp = [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', s: { $first: { $add: ['$b', '$$x'] } } } }];
  const lr = await both(coll, lp, { opts: { let: { x: 10 }, batchSize: 2 } });
  assert.deepEqual(lr.viaIndex, lr.viaScan);
  assert.ok(lr.viaIndex.includes('{"_id":{"$numberInt":"1"},"s":{"$numberInt":"11"}}'), lr.viaIndex.join());
  await assertDistinct(coll, lp, { let: { x: 10 } });
  /* The whole document: FETCH over DISTINCT_SCAN, no projection. */
  const e = await explain(coll, cases[3]);
  assert.deepEqual(planStages(winning(e)), ['FETCH', 'DISTINCT_SCAN']);
  assert.equal(winning(e).inputStage.direction, 'backward');
  assert.deepEqual(e.stages[1].$groupByDistinctScan, { newRoot: { _id: '$a', doc: '$$ROOT' } });
  const er = await explain(coll, cases[6]);
  assert.deepEqual(er.stages[1].$groupByDistinctScan, { newRoot: { _id: '$a', f: '$$CURRENT.b' } });
  assert.deepEqual(winning(er).transformBy, { a: 1, b: 1, _id: 0 });
});

h.test('$last scans the index the other way: the last document in the sort order', async () => {
  const db = srv.freshDb();
  const coll = await seedABC(db);
  const cases = [
    [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', l: { $last: '$b' } } }],
    [{ $sort: { a: -1, b: -1 } }, { $group: { _id: '$a', l: { $last: '$b' } } }],
    [{ $sort: { a: 1, b: 1, c: 1 } }, { $group: { _id: '$a', doc: { $last: '$$ROOT' } } }],
    [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', lb: { $last: '$b' }, lc: { $last: '$c' } } }],
  ];
  for (const p of cases) {
    const r = await both(coll, p);
    assert.deepEqual(r.viaIndex, r.viaScan, JSON.stringify(p));
    await assertDistinct(coll, p);
  }
  const e = await explain(coll, cases[0]);
  const ds = findStage(winning(e), 'DISTINCT_SCAN');
  assert.equal(ds.direction, 'backward');
  assert.deepEqual(ds.indexBounds.a, ['[MaxKey, MinKey]']);
  const e2 = await explain(coll, cases[1]);
  assert.equal(findStage(winning(e2), 'DISTINCT_SCAN').direction, 'forward');
  /* Without a $sort or a filter the direction does not matter: forward (createDistinctScanSolution). */
  const e3 = await assertDistinct(coll, [{ $group: { _id: '$a', l: { $last: '$b' } } }]);
  assert.equal(findStage(winning(e3), 'DISTINCT_SCAN').direction, 'forward');
});

h.test('$match with a point before the key, then $sort and $group on the second field', async () => {
  const db = srv.freshDb();
  const coll = await seedABC(db);
  const cases = [
    [{ $match: { a: 1 } }, { $sort: { b: 1 } }, { $group: { _id: '$b' } }],
    [{ $match: { a: 1 } }, { $sort: { a: 1, b: 1 } }, { $group: { _id: '$b', c: { $first: '$c' } } }],
    [{ $match: { a: 1 } }, { $group: { _id: '$b' } }],
    [{ $match: { a: { $gte: 1, $lte: 2 } } }, { $group: { _id: '$a', f: { $first: '$b' } } }],
  ];
  for (const p of cases) {
    const r = await both(coll, p);
    assert.deepEqual(r.viaIndex, r.viaScan, JSON.stringify(p));
    await assertDistinct(coll, p);
  }
  const e = await explain(coll, cases[0]);
  const ds = findStage(winning(e), 'DISTINCT_SCAN');
  assert.deepEqual(ds.indexBounds, { a: ['[1, 1]'], b: ['[MinKey, MaxKey]'], c: ['[MinKey, MaxKey]'] });
});

h.test('number types and ties: a group keeps the type and values of its first entry in the sort', async () => {
  const db = srv.freshDb();
  const coll = db.collection('n');
  await coll.insertMany([
    { _id: 1, a: new Int32(1), b: 3 },
    { _id: 2, a: Long.fromNumber(1), b: 1 },
    { _id: 3, a: new Double(1), b: 2 },
    { _id: 4, a: new Double(2.0), b: new Int32(5) },
    { _id: 5, a: Long.fromNumber(2), b: Long.fromNumber(4) },
  ]);
  await coll.createIndex({ a: 1, b: 1 });
  const first = [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', f: { $first: '$b' }, id: { $first: '$_id' } } }];
  const r = await both(coll, first);
  assert.deepEqual(r.viaIndex, r.viaScan);
  await assertDistinct(coll, first);
  /*
   * $last: the values are the last document's; so is the _id, which the
   * transformation reads from that document, where a hashed $group keeps the
   * one it saw first (mongod's GroupFromFirstDocumentTransformation too).
   */
  const last = [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', l: { $last: '$b' }, id: { $last: '$_id' } } }];
  await assertDistinct(coll, last);
  assert.deepEqual((await run(coll, last)).sort(), [
    '{"_id":{"$numberDouble":"2.0"},"l":{"$numberInt":"5"},"id":{"$numberInt":"4"}}',
    '{"_id":{"$numberInt":"1"},"l":{"$numberInt":"3"},"id":{"$numberInt":"1"}}',
  ]);
  assert.deepEqual((await run(coll, last, { hint: { $natural: 1 } })).sort(), [
    '{"_id":{"$numberLong":"1"},"l":{"$numberInt":"3"},"id":{"$numberInt":"1"}}',
    '{"_id":{"$numberLong":"2"},"l":{"$numberInt":"5"},"id":{"$numberInt":"4"}}',
  ]);
  /* first of a=1 in (a, b) order is _id 2 (b 1), its a a NumberLong */
  const out = await run(coll, [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', id: { $first: '$_id' } } }]);
  assert.equal(out[0], '{"_id":{"$numberLong":"1"},"id":{"$numberInt":"2"}}');
  /*
   * A $sort on the key alone: the ties are ordered by the index (b, then the
   * record), as mongod's DISTINCT_SCAN reads them, which is the order of
   * the full (a, b) sort.
   */
  const tie = await run(coll, [{ $sort: { a: 1 } }, { $group: { _id: '$a', id: { $first: '$_id' } } }]);
  const full = await run(coll, [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', id: { $first: '$_id' } } }],
    { hint: { $natural: 1 } });
  assert.deepEqual(tie, full.slice().sort());
});

h.test('dotted paths, _id in the group, and many groups read over getMore batches', async () => {
  const db = srv.freshDb();
  const coll = db.collection('d');
  const docs = [];
  for (let i = 0; i < 600; i++) docs.push({ _id: i, foo: { a: i % 250, b: i }, v: `v${i}` });
  await coll.insertMany(docs);
  await coll.createIndex({ 'foo.a': 1, 'foo.b': 1 });
  for (const p of [
    [{ $sort: { 'foo.a': 1, 'foo.b': 1 } }, { $group: { _id: '$foo.a', f: { $first: '$foo.b' } } }],
    [{ $sort: { 'foo.a': -1, 'foo.b': -1 } }, { $group: { _id: '$foo.a', f: { $first: '$v' } } }],
    [{ $sort: { 'foo.a': 1, 'foo.b': 1 } }, { $group: { _id: '$foo.a', l: { $last: '$foo.b' } } }],
    [{ $group: { _id: '$foo.a' } }],
  ]) {
    const r = await both(coll, p, { opts: { batchSize: 40 } });
    assert.deepEqual(r.viaIndex, r.viaScan, JSON.stringify(p));
    assert.equal(r.viaIndex.length, 250);
    await assertDistinct(coll, p);
  }
  /* Ordered: the sort's order survives the batches. */
  const ordered = await run(coll, [{ $sort: { 'foo.a': -1, 'foo.b': 1 } }, { $group: { _id: '$foo.a' } }],
    { batchSize: 7 });
  assert.equal(ordered.length, 250);
  const e = await explain(coll, [{ $sort: { 'foo.a': 1, 'foo.b': 1 } }, { $group: { _id: '$foo.a', f: { $first: '$foo.b' } } }]);
  assert.equal(winning(e).stage, 'PROJECTION_DEFAULT');
  assert.deepEqual(winning(e).transformBy, { 'foo.a': 1, 'foo.b': 1, _id: 0 });
  /* A stage after the group runs over its output. */
  const after = [{ $group: { _id: '$foo.a' } }, { $match: { _id: { $lt: 10 } } }, { $count: 'n' }];
  assert.deepEqual(await coll.aggregate(after).toArray(), [{ n: 10 }]);
  const ea = await assertDistinct(coll, after, {}, 1);
  assert.deepEqual(ea.stages.slice(2).map((s) => Object.keys(s)[0]), ['$match', '$group', '$project']);
  assert.ok(ea.stages.length >= 3);
});

h.test('falls back to the pipeline as it was: multikey, $last on a multikey index, sorts, limits, accumulators', async () => {
  const db = srv.freshDb();
  const coll = db.collection('f');
  await coll.insertMany([
    { _id: 0, a: 1, b: 1, c: 1, mk: 1, aa: 1, mb: 2 },
    { _id: 1, a: 1, b: 2, c: 2, mk: [2, 3], aa: 1, mb: [1, 3] },
    { _id: 2, a: 2, b: 2, c: 3, mk: 3, aa: 2, mb: [] },
    { _id: 3, a: 2, b: 1, c: 2, mk: 2, aa: 2, mb: 5 },
  ]);
  await coll.createIndex({ a: 1, b: 1, c: 1 });
  await coll.createIndex({ mk: 1, b: 1 });
  await coll.createIndex({ aa: 1, mb: 1 });
  const fallbacks = [
    [{ $group: { _id: '$mk' } }],                                                   /* multikey key */
    [{ $sort: { mk: 1 } }, { $group: { _id: '$mk' } }],
    [{ $sort: { aa: 1, mb: 1 } }, { $group: { _id: '$aa', l: { $last: '$b' } } }], /* $last, multikey index */
    [{ $sort: { a: 1 } }, { $group: { _id: '$a', s: { $sum: '$b' } } }],          /* other accumulators */
    [{ $sort: { a: -1, b: -1 } }, { $group: { _id: '$a', f: { $first: '$b' }, l: { $last: '$b' } } }],
    [{ $sort: { a: 1, b: 1 } }, { $limit: 3 }, { $group: { _id: '$a' } }],         /* $limit before it */
    [{ $sort: { b: 1 } }, { $group: { _id: '$a', f: { $first: '$b' } } }],         /* not the index's order */
    [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$b' } }],                        /* b after an unbounded a */
    [{ $match: { a: { $gt: 0 } } }, { $sort: { b: 1 } }, { $group: { _id: '$b' } }],
    [{ $match: { a: 1, z: { $exists: false } } }, { $group: { _id: '$a' } }],      /* filter left to FETCH */
    [{ $group: { _id: { a: '$a', b: '$b' } } }],                                   /* compound key */
    [{ $group: { _id: { $toString: '$a' } } }],                                    /* an expression */
    [{ $project: { a: 1, b: 1 } }, { $group: { _id: '$a' } }],
    [{ $group: { _id: '$nothere' } }],                                             /* no index */
  ];
  for (const p of fallbacks) {
    const r = await both(coll, p);
    assert.deepEqual(r.viaIndex, r.viaScan, JSON.stringify(p));
    await assertNoDistinct(coll, p);
  }
  /* the $natural hint, and an index hint that does not hold the key */
  await assertNoDistinct(coll, [{ $group: { _id: '$a' } }], { hint: { $natural: 1 } });
  await assertNoDistinct(coll, [{ $group: { _id: '$a' } }], { hint: { mk: 1, b: 1 } });
  /* a hint naming an index that holds it */
  await assertDistinct(coll, [{ $group: { _id: '$a' } }], { hint: 'a_1_b_1_c_1' });
  /* an index filter on the query's shape (its projection is the group's fields, as mongod's) */
  await coll.createIndex({ a: 1 });
  let e = await assertDistinct(coll, [{ $group: { _id: '$a' } }]);
  assert.equal(findStage(winning(e), 'DISTINCT_SCAN').indexName, 'a_1'); /* fewest fields */
  await db.command({ planCacheSetFilter: 'f', query: {}, projection: { a: 1, _id: 0 }, indexes: ['a_1_b_1_c_1'] });
  e = await assertDistinct(coll, [{ $group: { _id: '$a' } }]);
  assert.equal(findStage(winning(e), 'DISTINCT_SCAN').indexName, 'a_1_b_1_c_1');
  assert.equal(e.stages[0].$cursor.queryPlanner.indexFilterSet, true);
  await db.command({ planCacheClearFilters: 'f' });
  /*
   * $first on a multikey index (not on the key) is still a DISTINCT_SCAN. The
   * $sort on aa alone leaves aa: 1 tied; the scan takes the first in the
   * index, whose next field mb keys each element: the document holding
   * [1, 3] (least element 1) before the one holding 2, as a sort by
   * {aa: 1, mb: 1} orders them.
   */
  const p = [{ $sort: { aa: 1 } }, { $group: { _id: '$aa', f: { $first: '$_id' } } }];
  await assertDistinct(coll, p);
  const byMb = [{ $sort: { aa: 1, mb: 1 } }, { $group: { _id: '$aa', f: { $first: '$_id' } } }];
  assert.deepEqual((await run(coll, p)).sort(), (await run(coll, byMb, { hint: { $natural: 1 } })).sort());
  assert.deepEqual(await run(coll, p), ['{"_id":{"$numberInt":"1"},"f":{"$numberInt":"1"}}',
    '{"_id":{"$numberInt":"2"},"f":{"$numberInt":"2"}}']);
});

h.test('a $sort on a later multikey field with no bound on it: DISTINCT_SCAN over FETCH, as mongod gives that sort', async () => {
  const db = srv.freshDb();
  const coll = db.collection('mks');
  await coll.insertMany([
    { _id: 7, aa: 1, mkB: 2, bb: 2 },
    { _id: 8, aa: 1, mkB: [1, 3], bb: 1 },
    { _id: 9, aa: 2, mkB: [], bb: 3 },
    { _id: 10, aa: 2, mkB: [5, 0], bb: 4 },
    { _id: 11, mkB: 4 },
    { _id: 12, aa: 3, mkB: [6, 7] },
    { _id: 13, aa: 3, mkB: 6.5 },
  ]);
  await coll.createIndex({ aa: 1, mkB: 1, c: 1 });
  for (const p of [
    [{ $sort: { aa: 1, mkB: 1 } }, { $group: { _id: '$aa', accum: { $first: '$mkB' }, id: { $first: '$_id' } } }],
    [{ $sort: { aa: -1, mkB: -1 } }, { $group: { _id: '$aa', accum: { $first: '$mkB' }, id: { $first: '$_id' } } }],
    [{ $match: { aa: { $gte: 2 } } }, { $sort: { aa: 1, mkB: 1 } }, { $group: { _id: '$aa', id: { $first: '$_id' } } }],
  ]) {
    const r = await both(coll, p);
    assert.deepEqual(r.viaIndex, r.viaScan, JSON.stringify(p));
    const e = await assertDistinct(coll, p);
    assert.deepEqual(planStages(winning(e)), ['FETCH', 'DISTINCT_SCAN']);
  }
  const ids = (await run(coll, [{ $sort: { aa: 1, mkB: 1 } }, { $group: { _id: '$aa', id: { $first: '$_id' } } }]))
    .map((d) => JSON.parse(d).id.$numberInt);
  assert.deepEqual(ids, ['11', '8', '9', '12']); /* [] (undefined) before 0; [1, 3] at 1 before 2 */
  /* a bound on the multikey field, or $last: no DISTINCT_SCAN */
  for (const p of [
    [{ $match: { mkB: { $ne: 9999 } } }, { $sort: { aa: 1, mkB: 1 } }, { $group: { _id: '$aa', f: { $first: '$mkB' } } }],
    [{ $match: { mkB: { $gt: -5 } } }, { $sort: { aa: 1, mkB: 1 } }, { $group: { _id: '$aa', f: { $first: '$mkB' } } }],
    [{ $sort: { aa: -1, mkB: -1 } }, { $group: { _id: '$aa', l: { $last: '$mkB' } } }],
  ]) {
    const r = await both(coll, p);
    assert.deepEqual(r.viaIndex, r.viaScan, JSON.stringify(p));
    await assertNoDistinct(coll, p);
  }
});

h.test('a sparse index leaves out the documents missing the key: no DISTINCT_SCAN without a filter', async () => {
  const db = srv.freshDb();
  const coll = db.collection('sp');
  await coll.insertMany([{ _id: 1, a: 1 }, { _id: 2 }, { _id: 3, a: 2 }, { _id: 4, a: null }]);
  await coll.createIndex({ a: 1 }, { sparse: true });
  const p = [{ $group: { _id: '$a', n: { $first: '$_id' } } }];
  const r = await both(coll, p);
  assert.deepEqual(r.viaIndex, r.viaScan);
  assert.equal(r.viaIndex.length, 3);
  await assertNoDistinct(coll, p);
  /* a filter that excludes null: the sparse index holds every match */
  const q = [{ $match: { a: { $gte: 1 } } }, { $group: { _id: '$a' } }];
  const r2 = await both(coll, q);
  assert.deepEqual(r2.viaIndex, r2.viaScan);
  await assertDistinct(coll, q);
});

h.test('the key turning into an array while the cursor is open ends the plan rather than split a group', async () => {
  const db = srv.freshDb();
  const coll = db.collection('mid');
  const docs = [];
  for (let i = 0; i < 5000; i++) docs.push({ _id: i, a: i, b: i });
  await coll.insertMany(docs);
  await coll.createIndex({ a: 1, b: 1 });
  const p = [{ $sort: { a: 1, b: 1 } }, { $group: { _id: '$a', f: { $first: '$b' } } }];
  await assertDistinct(coll, p);
  const cur = coll.aggregate(p, { batchSize: 5 });
  const got = [];
  for (let i = 0; i < 5; i++) got.push(await cur.next());
  assert.equal(got[4]._id, 4);
  await coll.insertOne({ _id: 10000, a: [4900, 4901], b: 0 });
  await assert.rejects(async () => { while (await cur.next()); }, (e) => e.code === 175, 'QueryPlanKilled');
  await cur.close();
  /* planned again: no DISTINCT_SCAN over an index multikey on the key, results as a scan's */
  await assertNoDistinct(coll, p);
  const r = await both(coll, p);
  assert.deepEqual(r.viaIndex, r.viaScan);
});

h.test('collation: the index and the query must have the same one', async () => {
  const db = srv.freshDb();
  const coll = db.collection('s');
  await coll.insertMany([
    { _id: 20, str: 'foo', d: 1 }, { _id: 21, str: 'FoO', d: 2 },
    { _id: 22, str: 'bar', d: 4 }, { _id: 23, str: 'bAr', d: 3 },
  ]);
  const ci = { locale: 'en_US', strength: 2 };
  await coll.createIndex({ str: 1, d: 1 });
  const p = [{ $sort: { str: 1, d: 1 } }, { $group: { _id: '$str', f: { $first: '$d' } } }];
  let r = await both(coll, p);
  assert.deepEqual(r.viaIndex, r.viaScan);
  await assertDistinct(coll, p);
  r = await both(coll, p, { opts: { collation: ci } });
  assert.deepEqual(r.viaIndex, r.viaScan);
  assert.equal(r.viaIndex.length, 2);
  await assertNoDistinct(coll, p, { collation: ci });
  await coll.dropIndexes();
  await coll.createIndex({ str: 1, d: 1 }, { collation: ci });
  r = await both(coll, p, { opts: { collation: ci } });
  assert.deepEqual(r.viaIndex, r.viaScan);
  /* the collation index: FETCH over DISTINCT_SCAN (its keys are collation keys) */
  const e = await assertDistinct(coll, p, { collation: ci });
  assert.deepEqual(planStages(winning(e)), ['FETCH', 'DISTINCT_SCAN']);
  await assertNoDistinct(coll, p);
});

h.test('measurement: 100,000 documents, 10 keys, $group $first by DISTINCT_SCAN vs collection scan', async (t) => {
  const db = srv.freshDb();
  const coll = db.collection('m');
  const batch = [];
  for (let i = 0; i < 100000; i++) batch.push({ _id: i, k: i % 10, v: i, pad: 'x'.repeat(20) });
  for (let i = 0; i < batch.length; i += 10000) await coll.insertMany(batch.slice(i, i + 10000), { ordered: false });
  await coll.createIndex({ k: 1, v: 1 });
  const p = [{ $sort: { k: 1, v: 1 } }, { $group: { _id: '$k', first: { $first: '$v' } } }];
  const time = async (opts) => {
    const t0 = process.hrtime.bigint();
    const out = await run(coll, p, opts);
    return { out, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
  };
  await time({}); /* warm */
  const viaIndex = await time({});
  const viaScan = await time({ hint: { $natural: 1 } });
  assert.deepEqual(viaIndex.out, viaScan.out.slice().sort());
  assert.equal(viaIndex.out.length, 10);
  const e = await assertDistinct(coll, p);
  const es = e.stages[0].$cursor.executionStats;
  t.diagnostic(`DISTINCT_SCAN ${viaIndex.ms.toFixed(1)} ms (keysExamined ${es.totalKeysExamined}), ` +
    `collection scan + sort ${viaScan.ms.toFixed(1)} ms`);
});
