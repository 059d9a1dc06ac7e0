'use strict';
/*
 * Aggregate explain with the stages left after the pushed-down plan, as
 * mongod 8.0 answers it (src/mongo/db/query/explain.cpp explainPipeline,
 * src/mongo/db/pipeline/pipeline.cpp writeExplainOps): {explainVersion,
 * stages: [{$cursor: {queryPlanner, executionStats}}, ...], serverInfo,
 * serverParameters, command}. At executionStats / allPlansExecution the
 * pipeline runs to its end and every stage carries nReturned and
 * executionTimeMillisEstimate, plus its own counters ($group, $sort:
 * document_source_group_base.cpp, document_source_sort.cpp; $lookup:
 * document_source_lookup.cpp). jstests/aggregation/explain_per_stage_exec_stats.js
 * and explain_writing_aggs.js are the models.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

// Test commands for the maxTimeAlwaysTimeOut fail point.
const srv = h.useServer({ args: ['--setParameter', 'enableTestCommands=1'] });

const num = (v) => Number(v);
const stageName = (s) => Object.keys(s)[0];
const byName = (ex, name) => ex.stages.filter((s) => stageName(s) === name);

async function filled(db, name, n) {
  const c = db.collection(name);
  const docs = [];
  for (let i = 0; i < n; i++) docs.push({ _id: i, a: i, b: i % 50 });
  await c.insertMany(docs);
  return c;
}

// explain_per_stage_exec_stats.js's pipeline: every stage counts what it really returned.
const PIPELINE = [
  { $match: { a: { $gt: 500 } } },
  { $addFields: { arr: [1, 2] } },
  { $unwind: { path: '$arr' } },
  { $sort: { a: -1 } },
  { $skip: 100 },
  { $project: { arr: 0 } },
  { $group: { _id: '$b', count: { $sum: 1 } } },
  { $limit: 10 },
];

h.test('executionStats: every stage, $cursor first, carries nReturned and executionTimeMillisEstimate with the real counts of the run', async () => {
  const db = srv.freshDb('aec_exec');
  const c = await filled(db, 'c', 1000);
  const ex = await c.aggregate(PIPELINE).explain('executionStats');
  assert.deepEqual(Object.keys(ex).filter((k) => k !== 'ok'),
    ['explainVersion', 'stages', 'serverInfo', 'serverParameters', 'command']);
  assert.deepEqual(ex.stages.map(stageName),
    ['$cursor', '$addFields', '$unwind', '$sort', '$skip', '$project', '$group', '$limit']);
  for (const s of ex.stages) {
    assert.equal(typeof num(s.nReturned), 'number', JSON.stringify(s));
    assert.ok(Number.isInteger(num(s.executionTimeMillisEstimate)) && num(s.executionTimeMillisEstimate) >= 0,
      JSON.stringify(s));
  }
  const n = ex.stages.map((s) => num(s.nReturned));
  // a in 501..999: 499 documents; unwound twice; 100 skipped; of the 50 groups of b the $limit takes 10.
  assert.deepEqual(n, [499, 499, 998, 998, 898, 898, 10, 10]);
  const cursor = ex.stages[0].$cursor;
  assert.deepEqual(Object.keys(cursor), ['queryPlanner', 'executionStats']);
  assert.equal(cursor.queryPlanner.namespace, `${db.databaseName}.c`);
  assert.deepEqual(cursor.queryPlanner.parsedQuery, { a: { $gt: 500 } });
  assert.equal(cursor.executionStats.nReturned, 499);
  assert.equal(cursor.executionStats.totalDocsExamined, 1000);
  // The $sort shows its pattern as sortKey, and the results are the run's.
  assert.deepEqual(ex.stages[3].$sort, { sortKey: { a: -1 } });
  const res = await c.aggregate(PIPELINE).toArray();
  assert.equal(res.length, 10);
});

h.test('a pipeline the find layer runs whole explains as that find, with queryPlanner.optimizedPipeline: true', async () => {
  const db = srv.freshDb('aec_optimized');
  const c = await filled(db, 'c', 100);
  for (const verbosity of ['queryPlanner', 'executionStats']) {
    const ex = await c.aggregate([{ $match: { a: { $lt: 30 } } }, { $skip: 5 }, { $limit: 10 }]).explain(verbosity);
    assert.equal(ex.stages, undefined);
    assert.equal(ex.queryPlanner.optimizedPipeline, true);
    if (verbosity === 'executionStats') assert.equal(ex.executionStats.nReturned, 10);
  }
  const staged = await c.aggregate([{ $match: { a: { $lt: 30 } } }, { $addFields: { z: 1 } }]).explain('queryPlanner');
  assert.equal(staged.stages[0].$cursor.queryPlanner.optimizedPipeline, undefined);
  const find = await c.find({ a: { $lt: 30 } }).explain('queryPlanner');
  assert.equal(find.queryPlanner.optimizedPipeline, undefined);
});

h.test('queryPlanner verbosity: the same stages, without any statistics and without running', async () => {
  const db = srv.freshDb('aec_qp');
  const c = await filled(db, 'c', 200);
  const ex = await c.aggregate(PIPELINE).explain('queryPlanner');
  assert.deepEqual(Object.keys(ex).filter((k) => k !== 'ok'),
    ['explainVersion', 'stages', 'serverInfo', 'serverParameters', 'command']);
  assert.equal(ex.queryPlanner, undefined);
  assert.deepEqual(Object.keys(ex.stages[0]), ['$cursor']);
  assert.deepEqual(Object.keys(ex.stages[0].$cursor), ['queryPlanner']);
  for (const s of ex.stages.slice(1)) assert.deepEqual(Object.keys(s), [stageName(s)], JSON.stringify(s));
  assert.deepEqual(ex.stages[1], { $addFields: { arr: [1, 2] } });
});

h.test('allPlansExecution: the stages carry the same statistics, and $cursor its allPlansExecution', async () => {
  const db = srv.freshDb('aec_all');
  const c = await filled(db, 'c', 300);
  const ex = await c.aggregate([{ $match: { b: { $lt: 10 } } }, { $group: { _id: '$b', n: { $sum: 1 } } }])
    .explain('allPlansExecution');
  assert.ok(Array.isArray(ex.stages[0].$cursor.executionStats.allPlansExecution));
  assert.equal(num(ex.stages[0].nReturned), 60);
  const g = ex.stages[1];
  assert.equal(num(g.nReturned), 10);
  assert.ok('executionTimeMillisEstimate' in g);
});

h.test('$group reports mongod 8.0\'s counters: maxAccumulatorMemoryUsageBytes per accumulator, totalOutputDataSizeBytes, spills', async () => {
  const db = srv.freshDb('aec_group');
  const c = await filled(db, 'c', 500);
  const ex = await c.aggregate([{ $addFields: { x: 1 } }, { $group: { _id: '$b', n: { $sum: 1 }, all: { $push: '$a' } } }])
    .explain('executionStats');
  const g = byName(ex, '$group')[0];
  assert.deepEqual(Object.keys(g), ['$group', 'maxAccumulatorMemoryUsageBytes', 'totalOutputDataSizeBytes', 'usedDisk',
    'spills', 'spilledDataStorageSize', 'numBytesSpilledEstimate', 'spilledRecords', 'nReturned',
    'executionTimeMillisEstimate']);
  assert.deepEqual(Object.keys(g.maxAccumulatorMemoryUsageBytes), ['n', 'all']);
  assert.ok(num(g.maxAccumulatorMemoryUsageBytes.all) > num(g.maxAccumulatorMemoryUsageBytes.n));
  assert.ok(num(g.totalOutputDataSizeBytes) > 0);
  assert.equal(g.usedDisk, false);
  assert.equal(num(g.spills), 0);
  assert.equal(num(g.nReturned), 50);
});

h.test('a $group and a $sort past their memory budget with allowDiskUse show usedDisk, spills and spilled bytes', async () => {
  const db = srv.freshDb('aec_spill');
  const c = await filled(db, 'c', 3000);
  const admin = srv.client.db('admin');
  await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 20000,
    internalDocumentSourceGroupMaxMemoryBytes: 20000 });
  try {
    const ex = await c.aggregate([{ $addFields: { pad: 'x'.repeat(50) } }, { $sort: { b: 1, a: -1 } },
      { $group: { _id: '$a', v: { $push: '$pad' } } }], { allowDiskUse: true }).explain('executionStats');
    const s = byName(ex, '$sort')[0];
    assert.equal(s.usedDisk, true, JSON.stringify(s));
    assert.ok(num(s.spills) > 0 && num(s.spilledDataStorageSize) > 0, JSON.stringify(s));
    assert.ok(num(s.totalDataSizeSortedBytesEstimate) > 3000 * 50);
    assert.equal(num(s.nReturned), 3000);
    const g = byName(ex, '$group')[0];
    assert.equal(g.usedDisk, true, JSON.stringify(g));
    assert.ok(num(g.spills) > 0 && num(g.spilledRecords) > 0 && num(g.numBytesSpilledEstimate) > 0, JSON.stringify(g));
    assert.equal(num(g.nReturned), 3000);
    // Without allowDiskUse the run fails as the aggregate does (292).
    await h.expectCode(c.aggregate([{ $addFields: { pad: 'x'.repeat(50) } }, { $sort: { b: 1, a: -1 } }],
      { allowDiskUse: false }).explain('executionStats'), 292);
  } finally {
    await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 104857600,
      internalDocumentSourceGroupMaxMemoryBytes: 104857600 });
  }
});

h.test('$sort absorbs the $limit after it ({sortKey, limit}), and a $skip between stays after it with the limit grown', async () => {
  const db = srv.freshDb('aec_sortlimit');
  const c = await filled(db, 'c', 100);
  const ex = await c.aggregate([{ $addFields: { z: 1 } }, { $sort: { b: -1, a: 1 } }, { $limit: 5 }]).explain('executionStats');
  assert.deepEqual(ex.stages.map(stageName), ['$cursor', '$addFields', '$sort']);
  assert.deepEqual(ex.stages[2].$sort, { sortKey: { b: -1, a: 1 }, limit: 5 });
  assert.equal(num(ex.stages[2].nReturned), 5);
  const sx = await c.aggregate([{ $addFields: { z: 1 } }, { $sort: { a: 1 } }, { $skip: 2 }, { $limit: 3 }])
    .explain('executionStats');
  assert.deepEqual(sx.stages.map(stageName), ['$cursor', '$addFields', '$sort', '$skip']);
  assert.deepEqual(sx.stages[2].$sort, { sortKey: { a: 1 }, limit: 5 });
  assert.equal(num(sx.stages[2].nReturned), 5);
  assert.equal(num(sx.stages[3].nReturned), 3);
  const qp = await c.aggregate([{ $addFields: { z: 1 } }, { $sort: { a: 1 } }, { $limit: 4 }]).explain('queryPlanner');
  assert.deepEqual(qp.stages[2], { $sort: { sortKey: { a: 1 }, limit: 4 } });
});

h.test('a $limit after a stage that is not pushed down stops the run: the stages before it return only what it took', async () => {
  const db = srv.freshDb('aec_early');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 50 }, (_, i) => ({ _id: i, arr: [1, 2, 3] })));
  const ex = await c.aggregate([{ $unwind: '$arr' }, { $limit: 7 }]).explain('executionStats');
  assert.deepEqual(ex.stages.map(stageName), ['$cursor', '$unwind', '$limit']);
  assert.equal(num(ex.stages[1].nReturned), 7);
  assert.equal(num(ex.stages[2].nReturned), 7);
  // The source was read only as far as the run needed (a batch), not the whole collection counted as returned.
  assert.ok(num(ex.stages[0].nReturned) >= 3 && num(ex.stages[0].nReturned) <= 50);
});

h.test('$lookup reports what its reads examined: an index on foreignField (indexesUsed) or collection scans', async () => {
  const db = srv.freshDb('aec_lookup');
  const l = db.collection('l');
  const f = db.collection('f');
  await l.insertMany([{ _id: 1, k: 'a' }, { _id: 2, k: 'b' }, { _id: 3, k: 'z' }]);
  await f.insertMany([{ fk: 'a' }, { fk: 'a' }, { fk: 'b' }, { fk: 'c' }]);
  const pipeline = [{ $lookup: { from: 'f', localField: 'k', foreignField: 'fk', as: 'j' } }];
  const scan = await l.aggregate(pipeline).explain('executionStats');
  const ls = byName(scan, '$lookup')[0];
  assert.deepEqual(Object.keys(ls), ['$lookup', 'totalDocsExamined', 'totalKeysExamined', 'collectionScans',
    'indexesUsed', 'nReturned', 'executionTimeMillisEstimate']);
  assert.equal(num(ls.collectionScans), 3);
  assert.equal(num(ls.totalDocsExamined), 12);
  assert.equal(num(ls.totalKeysExamined), 0);
  assert.deepEqual(ls.indexesUsed, []);
  assert.equal(num(ls.nReturned), 3);
  await f.createIndex({ fk: 1 });
  const ix = await l.aggregate(pipeline).explain('executionStats');
  const li = byName(ix, '$lookup')[0];
  assert.equal(num(li.collectionScans), 0);
  assert.deepEqual(li.indexesUsed, ['fk_1']);
  assert.equal(num(li.totalDocsExamined), 3); // a: 2, b: 1, z: none
  assert.ok(num(li.totalKeysExamined) >= 3);
  // At queryPlanner the stage is the spec alone.
  const qp = await l.aggregate(pipeline).explain('queryPlanner');
  assert.deepEqual(byName(qp, '$lookup')[0], pipeline[0]);
});

h.test('$out at executionStats runs the pipeline but writes nothing: no target collection, $out returns nothing', async () => {
  const db = srv.freshDb('aec_out');
  const c = await filled(db, 'src', 20);
  const ex = await c.aggregate([{ $addFields: { y: 1 } }, { $out: 'target' }]).explain('executionStats');
  assert.deepEqual(ex.stages.map(stageName), ['$cursor', '$addFields', '$out']);
  assert.equal(num(ex.stages[1].nReturned), 20);
  assert.equal(num(ex.stages[2].nReturned), 0);
  const merge = await c.aggregate([{ $addFields: { y: 1 } }, { $merge: { into: 'target' } }]).explain('allPlansExecution');
  assert.equal(num(merge.stages[2].nReturned), 0);
  assert.deepEqual(await db.listCollections({ name: 'target' }).toArray(), []);
});

h.test('a count-only $group takes its input counted at the source: $cursor\'s nReturned is that count', async () => {
  const db = srv.freshDb('aec_count');
  const c = await filled(db, 'c', 120);
  const ex = await c.aggregate([{ $match: { b: { $gte: 40 } } }, { $group: { _id: 1, n: { $sum: 1 } } }])
    .explain('executionStats');
  assert.equal(num(ex.stages[0].nReturned), 20); // b 40..49 of i < 120: 40..49 and 90..99
  assert.equal(num(ex.stages[1].nReturned), 1);
});

h.test('explain of a distinct on a view is the aggregation it runs over the view\'s collection (ParsedDistinct::asAggregationCommand)', async () => {
  const db = srv.freshDb('aec_distinct');
  await db.collection('b').insertMany([{ _id: 1, a: [1, 2], k: 'x' }, { _id: 2, a: 2, k: 'y' }, { _id: 3, a: { b: 3 }, k: 'x' },
    { _id: 4, k: 'x' }]);
  await db.command({ create: 'v', viewOn: 'b', pipeline: [{ $match: { k: 'x' } }] });
  assert.deepEqual((await db.command({ distinct: 'v', key: 'a' })).values, [1, 2, { b: 3 }]);
  const ex = await db.command({ explain: { distinct: 'v', key: 'a', query: { _id: { $gte: 1 } } }, verbosity: 'executionStats' });
  assert.equal(ex.stages[0].$cursor.queryPlanner.namespace, `${db.databaseName}.b`);
  // The view's $match and the distinct's query are one $match (merge_matches), the plan's filter.
  assert.deepEqual(ex.stages[0].$cursor.queryPlanner.parsedQuery, { $and: [{ k: 'x' }, { _id: { $gte: 1 } }] });
  const rest = ex.stages.slice(1);
  assert.deepEqual(rest.map(stageName), ['$replaceRoot', '$unwind', '$group']);
  assert.deepEqual(rest[0].$replaceRoot, { newRoot: { _internalUnwoundField: { $_internalFindAllValuesAtPath: 'a' } } });
  assert.deepEqual(rest[1].$unwind, { path: '$_internalUnwoundField', preserveNullAndEmptyArrays: true });
  assert.deepEqual(rest[2].$group, { _id: null, distinct: { $addToSet: '$_internalUnwoundField' } });
  // The view's three documents; a: [1, 2] unwinds to two, a missing one stays once.
  assert.deepEqual(ex.stages.map((s) => num(s.nReturned)), [3, 3, 4, 1]);
  assert.equal(ex.command.aggregate, 'v');
  const qp = await db.command({ explain: { distinct: 'v', key: 'a' }, verbosity: 'queryPlanner' });
  assert.deepEqual(qp.stages.map(stageName), ['$cursor', '$replaceRoot', '$unwind', '$group']);
  assert.equal(qp.stages[1].nReturned, undefined);
  // A distinct on the collection itself keeps the find-layer explain.
  const coll = await db.command({ explain: { distinct: 'b', key: 'a' }, verbosity: 'executionStats' });
  assert.ok(coll.queryPlanner && coll.executionStats && !coll.stages);
});

h.test('the explained run stops at maxTimeMS like the aggregate: 50 MaxTimeMSExpired, and the server keeps serving', async () => {
  const db = srv.freshDb('aec_maxtime');
  const c = await filled(db, 'c', 100);
  const admin = srv.client.db('admin');
  await admin.command({ configureFailPoint: 'maxTimeAlwaysTimeOut', mode: 'alwaysOn' });
  try {
    await h.expectCode(db.command({
      explain: { aggregate: 'c', pipeline: [{ $addFields: { z: 1 } }, { $sort: { a: -1 } }], cursor: {} },
      verbosity: 'executionStats',
      maxTimeMS: 1000,
    }), 50);
  } finally {
    await admin.command({ configureFailPoint: 'maxTimeAlwaysTimeOut', mode: 'off' });
  }
  const ok = await c.aggregate([{ $addFields: { z: 1 } }]).explain('executionStats');
  assert.equal(num(ok.stages[1].nReturned), 100);
});

/*
 * DocumentSourceMatch::doOptimizeAt: a $match right after another joins it,
 * {$and: [first, second]}, so the whole of both is the plan's filter. A view
 * with a $match read with a filter was planned on the view's $match alone: a
 * collection scan where the reader's predicate had an index.
 */
h.test('consecutive $match stages are one: a view\'s $match and the reader\'s filter plan together (an IXSCAN)', async () => {
  const db = srv.freshDb('aexmatch');
  const c = await filled(db, 'c', 1000);
  await c.createIndex({ a: 1 });
  await db.createCollection('v', { viewOn: 'c', pipeline: [{ $match: { b: 3 } }] });
  const ex = await db.collection('v').find({ a: { $lt: 100 } }).explain('executionStats');
  const cursor = ex.stages ? ex.stages[0].$cursor : ex;
  assert.deepEqual(cursor.queryPlanner.parsedQuery, { $and: [{ b: 3 }, { a: { $lt: 100 } }] });
  assert.match(JSON.stringify(cursor.queryPlanner.winningPlan), /"IXSCAN"/);
  assert.equal(num(cursor.executionStats.totalDocsExamined), 100);
  assert.deepEqual((await db.collection('v').find({ a: { $lt: 100 } }).toArray()).map((d) => d._id), [3, 53]);
  // In one pipeline: the two become one stage, three too; the results are those of the filters one after the other.
  const ex2 = await c.aggregate([{ $match: { b: 3 } }, { $match: { a: { $lt: 100 } } }, { $match: {} },
    { $group: { _id: null, n: { $sum: 1 } } }]).explain('executionStats');
  assert.deepEqual(ex2.stages.map(stageName), ['$cursor', '$group']);
  assert.equal(num(ex2.stages[0].$cursor.executionStats.totalKeysExamined), 100);
  assert.deepEqual(await c.aggregate([{ $match: { b: 3 } }, { $match: { a: { $lt: 100 } } }, { $project: { _id: 1 } }]).toArray(),
    [{ _id: 3 }, { _id: 53 }]);
  // Not across a stage the second depends on, and a $text in a later $match is still 17313.
  const ex3 = await c.aggregate([{ $match: { b: 3 } }, { $addFields: { z: 1 } }, { $match: { z: 1 } }]).explain('queryPlanner');
  assert.deepEqual(ex3.stages.map(stageName), ['$cursor', '$addFields', '$match']);
  await h.expectCode(c.aggregate([{ $match: { b: 3 } }, { $match: { $text: { $search: 'x' } } }]).toArray(), 17313);
});
