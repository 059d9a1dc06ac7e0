'use strict';
/*
 * Aggregate explain of the stages that hold pipelines of their own, and of
 * pipelines with no $cursor, as mongod 8.0 answers it:
 * - $unionWith (document_source_union_with.cpp serialize): at queryPlanner,
 *   or at executionStats once the run read the other side, {coll, pipeline}
 *   holds that sub-pipeline explained as its own aggregate
 *   (NonShardServerProcessInterface::preparePipelineAndExplain): {$cursor}
 *   first, then its stages, each with its counters at executionStats; when
 *   the run never read it, the stages as written.
 * - $facet (document_source_facet.cpp serialize): each facet's
 *   writeExplainOps, led by {$internalFacetTeeConsumer: {}}, with per-stage
 *   counters at executionStats.
 * - {aggregate: 1} and a leading $collStats (Explain::explainPipeline with
 *   no $cursor): {explainVersion, stages, serverInfo, serverParameters,
 *   command}; $documents as the $queue / $project / $unwind / $replaceRoot
 *   it desugars to (document_source_documents.cpp), $currentOp with its
 *   options in DocumentSourceCurrentOp::serialize's order.
 * - $sortByCount, $bucket, $count as the $group + $sort / $project they
 *   desugar to (their createFromBson; shapes as in
 *   document_source_sort_by_count_test.cpp, document_source_bucket_test.cpp).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const num = (v) => Number(v);
const names = (stages) => stages.map((s) => Object.keys(s)[0]);
const counts = (stages) => stages.map((s) => num(s.nReturned));
const TOP = ['explainVersion', 'stages', 'serverInfo', 'serverParameters', 'command', 'ok'];

async function explain(db, cmd, verbosity) {
  return db.command({ explain: cmd, verbosity });
}

async function two(db) {
  await db.collection('a').insertMany([{ _id: 1, x: 1 }, { _id: 2, x: 2 }, { _id: 3, x: 3 }]);
  await db.collection('b').insertMany([{ _id: 11, x: 1 }, { _id: 12, x: 5 }, { _id: 13, x: 5 }]);
}

h.test('$unionWith at queryPlanner: the sub-pipeline explained as its own aggregate, $cursor over the other collection first', async () => {
  const db = srv.freshDb('ae2_union_qp');
  await two(db);
  const ex = await explain(db, {
    aggregate: 'a',
    pipeline: [{ $match: { x: { $gt: 1 } } },
      { $unionWith: { coll: 'b', pipeline: [{ $match: { x: 5 } }, { $group: { _id: '$x', n: { $sum: 1 } } }] } },
      { $unionWith: 'b' }],
    cursor: {},
  }, 'queryPlanner');
  assert.deepEqual(names(ex.stages), ['$cursor', '$unionWith', '$unionWith']);
  const u = ex.stages[1].$unionWith;
  assert.deepEqual(Object.keys(u), ['coll', 'pipeline']);
  assert.equal(u.coll, 'b');
  assert.deepEqual(names(u.pipeline), ['$cursor', '$group']);
  const qp = u.pipeline[0].$cursor.queryPlanner;
  assert.equal(qp.namespace, `${db.databaseName}.b`);
  assert.deepEqual(qp.parsedQuery, { x: 5 });
  assert.equal(qp.winningPlan.stage, 'COLLSCAN');
  assert.deepEqual(u.pipeline[1], { $group: { _id: '$x', n: { $sum: 1 } } });
  assert.ok(!('executionStats' in u.pipeline[0].$cursor));
  assert.ok(!('nReturned' in u.pipeline[0]) && !('nReturned' in ex.stages[1]));
  // The string form explains the same way: {coll, pipeline: [{$cursor}]}.
  const s = ex.stages[2].$unionWith;
  assert.equal(s.coll, 'b');
  assert.deepEqual(names(s.pipeline), ['$cursor']);
  assert.deepEqual(s.pipeline[0].$cursor.queryPlanner.parsedQuery, {});
});

h.test('$unionWith at executionStats: the sub-pipeline runs again on its own, every stage counted', async () => {
  const db = srv.freshDb('ae2_union_es');
  await two(db);
  const ex = await explain(db, {
    aggregate: 'a',
    pipeline: [{ $match: { x: { $gt: 1 } } },
      { $unionWith: { coll: 'b', pipeline: [{ $match: { x: 5 } }, { $group: { _id: '$x', n: { $sum: 1 } } }] } }],
    cursor: {},
  }, 'executionStats');
  assert.deepEqual(names(ex.stages), ['$cursor', '$unionWith']);
  // 2 of a, then the one group of b.
  assert.deepEqual(counts(ex.stages), [2, 3]);
  const sub = ex.stages[1].$unionWith.pipeline;
  assert.deepEqual(names(sub), ['$cursor', '$group']);
  assert.deepEqual(counts(sub), [2, 1]);
  const es = sub[0].$cursor.executionStats;
  assert.equal(es.executionSuccess, true);
  assert.equal(num(es.nReturned), 2);
  assert.equal(num(es.totalDocsExamined), 3);
  assert.equal(es.executionStages.stage, 'COLLSCAN');
  assert.deepEqual(sub[1].maxAccumulatorMemoryUsageBytes && Object.keys(sub[1].maxAccumulatorMemoryUsageBytes), ['n']);
  for (const st of sub) assert.ok(Number.isInteger(num(st.executionTimeMillisEstimate)), JSON.stringify(st));

  // A sub-pipeline pushed down whole: {$cursor} alone, with what its plan returned.
  const all = await explain(db, { aggregate: 'a', pipeline: [{ $unionWith: 'b' }], cursor: {} }, 'executionStats');
  const only = all.stages[1].$unionWith.pipeline;
  assert.deepEqual(names(only), ['$cursor']);
  assert.equal(num(only[0].nReturned), 3);
  assert.equal(num(only[0].$cursor.executionStats.nReturned), 3);
  assert.equal(num(all.stages[1].nReturned), 6);
});

h.test('$unionWith the run never read (a $limit the first side fills): its stages as written, no $cursor', async () => {
  const db = srv.freshDb('ae2_union_unread');
  await two(db);
  const ex = await explain(db, {
    aggregate: 'a', pipeline: [{ $unionWith: { coll: 'b', pipeline: [{ $set: { y: 1 } }] } }, { $limit: 1 }], cursor: {},
  }, 'executionStats');
  assert.deepEqual(names(ex.stages), ['$cursor', '$unionWith', '$limit']);
  assert.deepEqual(ex.stages[1].$unionWith, { coll: 'b', pipeline: [{ $set: { y: 1 } }] });
  assert.deepEqual(counts(ex.stages), [1, 1, 1]);
  // Past the first side, it is read: explained.
  const read = await explain(db, {
    aggregate: 'a', pipeline: [{ $unionWith: { coll: 'b', pipeline: [{ $set: { y: 1 } }] } }, { $limit: 4 }], cursor: {},
  }, 'executionStats');
  assert.deepEqual(names(read.stages[1].$unionWith.pipeline), ['$cursor', '$set']);
  assert.deepEqual(counts(read.stages[1].$unionWith.pipeline), [3, 3]);
});

h.test('$unionWith of a view explains the resolved pipeline; of $documents, the stages $documents desugars to', async () => {
  const db = srv.freshDb('ae2_union_view');
  await two(db);
  await db.createCollection('bv', { viewOn: 'b', pipeline: [{ $match: { x: 5 } }, { $set: { via: 'view' } }] });
  const ex = await explain(db, { aggregate: 'a', pipeline: [{ $unionWith: 'bv' }], cursor: {} }, 'executionStats');
  const sub = ex.stages[1].$unionWith;
  assert.equal(sub.coll, 'bv');
  assert.deepEqual(names(sub.pipeline), ['$cursor', '$set']);
  assert.equal(sub.pipeline[0].$cursor.queryPlanner.namespace, `${db.databaseName}.b`);
  assert.deepEqual(sub.pipeline[0].$cursor.queryPlanner.parsedQuery, { x: 5 });
  assert.deepEqual(counts(sub.pipeline), [2, 2]);
  assert.equal(num(ex.stages[1].nReturned), 5);

  const d = await explain(db, {
    aggregate: 'a', pipeline: [{ $unionWith: { pipeline: [{ $documents: [{ z: 1 }, { z: 2 }] }] } }], cursor: {},
  }, 'queryPlanner');
  const du = d.stages[1].$unionWith;
  assert.deepEqual(Object.keys(du), ['pipeline']);
  assert.deepEqual(du.pipeline, [
    { $queue: [{}] },
    { $project: { _id: true, _tempDocumentsField: { $const: [{ z: 1 }, { z: 2 }] } } },
    { $unwind: { path: '$_tempDocumentsField' } },
    { $replaceRoot: { newRoot: '$_tempDocumentsField' } },
  ]);
});

h.test('$facet: each facet explained, led by $internalFacetTeeConsumer; at executionStats each stage counted', async () => {
  const db = srv.freshDb('ae2_facet');
  await two(db);
  const cmd = {
    aggregate: 'a',
    pipeline: [{ $facet: {
      p: [{ $match: { x: { $gt: 1 } } }, { $group: { _id: null, n: { $sum: 1 } } }],
      q: [{ $sort: { x: -1 } }, { $limit: 1 }],
    } }],
    cursor: {},
  };
  const qp = await explain(db, cmd, 'queryPlanner');
  assert.deepEqual(names(qp.stages), ['$cursor', '$facet']);
  assert.deepEqual(qp.stages[1], { $facet: {
    p: [{ $internalFacetTeeConsumer: {} }, { $match: { x: { $gt: 1 } } }, { $group: { _id: null, n: { $sum: 1 } } }],
    q: [{ $internalFacetTeeConsumer: {} }, { $sort: { sortKey: { x: -1 }, limit: 1 } }],
  } });

  const es = await explain(db, cmd, 'executionStats');
  const f = es.stages[1];
  assert.equal(num(f.nReturned), 1);
  assert.deepEqual(Object.keys(f.$facet), ['p', 'q']);
  assert.deepEqual(names(f.$facet.p), ['$internalFacetTeeConsumer', '$match', '$group']);
  assert.deepEqual(counts(f.$facet.p), [3, 2, 1]);
  assert.deepEqual(counts(f.$facet.q), [3, 1]);
  const g = f.$facet.p[2];
  for (const k of ['maxAccumulatorMemoryUsageBytes', 'totalOutputDataSizeBytes', 'usedDisk', 'spills', 'nReturned',
    'executionTimeMillisEstimate']) assert.ok(k in g, k);
  const s = f.$facet.q[1];
  assert.equal(s.usedDisk, false);
  assert.ok(num(s.totalDataSizeSortedBytesEstimate) > 0);
  // The results are unchanged by the explain path.
  assert.deepEqual(await db.collection('a').aggregate(cmd.pipeline).toArray(),
    [{ p: [{ _id: null, n: 2 }], q: [{ _id: 3, x: 3 }] }]);
});

h.test('{aggregate: 1} with $documents: stages with no $cursor, $documents desugared, counted at executionStats', async () => {
  const db = srv.freshDb('ae2_docs');
  const cmd = { aggregate: 1, pipeline: [{ $documents: [{ a: 1 }, { a: 2 }, { a: 1 }] }, { $match: { a: 1 } }], cursor: {} };
  const qp = await explain(db, cmd, 'queryPlanner');
  assert.deepEqual(Object.keys(qp), TOP);
  assert.equal(qp.explainVersion, '1');
  assert.deepEqual(qp.stages, [
    { $queue: [{}] },
    { $project: { _id: true, _tempDocumentsField: { $const: [{ a: 1 }, { a: 2 }, { a: 1 }] } } },
    { $unwind: { path: '$_tempDocumentsField' } },
    { $replaceRoot: { newRoot: '$_tempDocumentsField' } },
    { $match: { a: 1 } },
  ]);
  assert.equal(qp.command.aggregate, 1);
  const es = await explain(db, cmd, 'executionStats');
  assert.deepEqual(counts(es.stages), [1, 1, 3, 3, 2]);
  // The aggregate command's explain option answers the same.
  const opt = await db.command({ ...cmd, explain: true });
  assert.deepEqual(names(opt.stages), names(qp.stages));
  // A pipeline that needs a collection is refused as aggregate refuses it.
  await assert.rejects(explain(db, { aggregate: 1, pipeline: [{ $match: {} }], cursor: {} }, 'queryPlanner'),
    (e) => e.code === 73 && /a collection is required/.test(e.message));
});

h.test('{aggregate: 1} with $currentOp (admin): its options in mongod\'s order; a leading $collStats likewise stands alone', async () => {
  const admin = srv.client.db('admin');
  const cop = await explain(admin, {
    aggregate: 1, pipeline: [{ $currentOp: { allUsers: true, idleConnections: true } }, { $limit: 1 }], cursor: {},
  }, 'executionStats');
  assert.deepEqual(Object.keys(cop), TOP);
  assert.deepEqual(names(cop.stages), ['$currentOp', '$limit']);
  assert.deepEqual(cop.stages[0].$currentOp, { idleConnections: true, allUsers: true });
  assert.deepEqual(counts(cop.stages), [1, 1]);

  const db = srv.freshDb('ae2_collstats');
  await two(db);
  const cmd = { aggregate: 'a', pipeline: [{ $collStats: { count: {} } }, { $project: { count: 1, _id: 0 } }], cursor: {} };
  const qp = await explain(db, cmd, 'queryPlanner');
  assert.deepEqual(Object.keys(qp), TOP);
  assert.deepEqual(qp.stages, [{ $collStats: { count: {} } }, { $project: { count: 1, _id: 0 } }]);
  const es = await explain(db, cmd, 'executionStats');
  assert.deepEqual(names(es.stages), ['$collStats', '$project']);
  assert.deepEqual(counts(es.stages), [1, 1]);
  // Over a missing collection only running it fails (26); queryPlanner does not run it. A bad spec is 40415 either way.
  const none = { aggregate: 'none', pipeline: [{ $collStats: { count: {} } }], cursor: {} };
  assert.deepEqual((await explain(db, none, 'queryPlanner')).stages, [{ $collStats: { count: {} } }]);
  await h.expectCode(explain(db, none, 'executionStats'), 26);
  await h.expectCode(explain(db, { aggregate: 'a', pipeline: [{ $collStats: { bogus: 1 } }], cursor: {} }, 'queryPlanner'),
    40415);
});

h.test('$sortByCount, $bucket and $count explain as the $group + $sort / $project they desugar to', async () => {
  const db = srv.freshDb('ae2_desugar');
  await db.collection('c').insertMany([{ _id: 1, x: 1 }, { _id: 2, x: 2 }, { _id: 3, x: 2 }, { _id: 4, x: 7 }]);
  const cmd = {
    aggregate: 'c',
    pipeline: [{ $sortByCount: '$x' }, { $bucket: { groupBy: '$count', boundaries: [0, 2, 10], default: 'big' } },
      { $count: 'n' }],
    cursor: {},
  };
  const qp = await explain(db, cmd, 'queryPlanner');
  assert.deepEqual(qp.stages.slice(1), [
    { $group: { _id: '$x', count: { $sum: { $const: 1 } } } },
    { $sort: { sortKey: { count: -1 } } },
    { $group: {
      _id: { $switch: {
        branches: [
          { case: { $and: [{ $gte: ['$count', { $const: 0 }] }, { $lt: ['$count', { $const: 2 }] }] }, then: { $const: 0 } },
          { case: { $and: [{ $gte: ['$count', { $const: 2 }] }, { $lt: ['$count', { $const: 10 }] }] }, then: { $const: 2 } },
        ],
        default: { $const: 'big' },
      } },
      count: { $sum: { $const: 1 } },
    } },
    { $sort: { sortKey: { _id: 1 } } },
    { $group: { _id: { $const: null }, n: { $sum: { $const: 1 } } } },
    { $project: { n: true, _id: false } },
  ]);
  const es = await explain(db, cmd, 'executionStats');
  // 3 values of x; counts 1, 2, 1 fall in buckets 0 and 2; one count of those.
  assert.deepEqual(counts(es.stages), [4, 3, 3, 2, 2, 1, 1]);
  assert.deepEqual(Object.keys(es.stages[1].maxAccumulatorMemoryUsageBytes), ['count']);
  assert.equal(es.stages[2].usedDisk, false);
  assert.ok(num(es.stages[2].totalDataSizeSortedBytesEstimate) > 0);
  assert.deepEqual(Object.keys(es.stages[5].maxAccumulatorMemoryUsageBytes), ['n']);
  assert.deepEqual(await db.collection('c').aggregate(cmd.pipeline).toArray(), [{ n: 2 }]);
  // With an output: its accumulators, constants as {$const}.
  const o = await explain(db, {
    aggregate: 'c', pipeline: [{ $bucket: { groupBy: '$x', boundaries: [0, 5], default: 9, output: { s: { $sum: 1 }, m: { $max: '$x' } } } }],
    cursor: {},
  }, 'queryPlanner');
  const g = o.stages[1].$group;
  assert.deepEqual(Object.keys(g), ['_id', 's', 'm']);
  assert.deepEqual(g.s, { $sum: { $const: 1 } });
  assert.deepEqual(g.m, { $max: '$x' });
  assert.deepEqual(o.stages[2], { $sort: { sortKey: { _id: 1 } } });
});
