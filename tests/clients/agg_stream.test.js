'use strict';
// Streaming aggregation: push-down into the query planner, cursors that
// resume across getMore, and blocking stages that spill to disk past their
// memory budget (internalQueryMaxBlockingSortMemoryUsageBytes /
// internalDocumentSourceGroupMaxMemoryBytes), through the Node driver.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const h = require('./harness');

const srv = h.useServer();

const SMALL_BUDGET = 100000; // bytes: small enough that the data sets below spill many runs
const DEFAULT_BUDGET = 104857600;

async function setBudgets(bytes) {
  const admin = srv.client.db('admin');
  await admin.command({
    setParameter: 1,
    internalQueryMaxBlockingSortMemoryUsageBytes: bytes,
    internalDocumentSourceGroupMaxMemoryBytes: bytes,
  });
}

function spillFiles() {
  const dir = path.join(srv.server.dbpath, '_tmp');
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.startsWith('agg-')) : [];
}

/* The $cursor stage of an aggregate explain, or the explain itself when everything was pushed down. */
function cursorStage(ex) {
  if (ex.stages) {
    assert.ok(ex.stages[0].$cursor, `first stage is $cursor: ${JSON.stringify(ex.stages[0])}`);
    return ex.stages[0].$cursor;
  }
  return ex;
}

function stageNames(plan) {
  const names = [];
  for (let s = plan; s; s = s.inputStage) names.push(s.stage);
  return names;
}

async function filled(tag, n, pad) {
  const c = srv.freshDb(tag).collection('c');
  const filler = 'x'.repeat(pad);
  for (let base = 0; base < n; base += 10000) {
    const docs = [];
    for (let i = base; i < Math.min(n, base + 10000); i++) {
      docs.push({ _id: i, g: i % 1000, v: (i * 7919) % 100003, m: i % 13, pad: filler });
    }
    await c.insertMany(docs, { ordered: false });
  }
  return c;
}

let big; // 100k documents, shared by the push-down tests

h.test('$limit: 1 over 100k documents returns one document and examines one', { timeout: 300000 }, async () => {
  big = await filled('big', 100000, 16);
  const r = await big.aggregate([{ $limit: 1 }]).toArray();
  assert.equal(r.length, 1);
  const ex = await big.aggregate([{ $limit: 1 }]).explain('executionStats');
  const cs = cursorStage(ex);
  assert.ok(stageNames(cs.queryPlanner.winningPlan).includes('LIMIT'),
    `pushed-down LIMIT: ${JSON.stringify(cs.queryPlanner.winningPlan)}`);
  assert.equal(cs.executionStats.totalDocsExamined, 1);
  assert.equal(cs.executionStats.nReturned, 1);
  // A $project after the limit is pushed down too (the plan's PROJECTION); a stage left after it
  // shows after $cursor, which carries the plan's own statistics.
  const ex2 = await big.aggregate([{ $limit: 1 }, { $project: { v: 1 } }, { $addFields: { w: 1 } }])
    .explain('executionStats');
  assert.ok(ex2.stages, 'stages after $cursor');
  assert.equal(ex2.stages[0].$cursor.executionStats.totalDocsExamined, 1);
  const names2 = stageNames(ex2.stages[0].$cursor.queryPlanner.winningPlan);
  assert.ok(names2[0].startsWith('PROJECTION') && names2.includes('LIMIT'), names2.join(','));
  assert.equal(Object.keys(ex2.stages[1])[0], '$addFields');
  assert.equal(ex2.stages[1].nReturned, 1); // executionStats: each stage's own count (agg_explain_compat.test.js)
  const r2 = await big.aggregate([{ $limit: 1 }, { $project: { v: 1 } }, { $addFields: { w: 1 } }]).toArray();
  assert.deepEqual(Object.keys(r2[0]), ['_id', 'v', 'w']);
  // Same cost as find().limit(1).
  const fx = await big.find().limit(1).explain('executionStats');
  assert.equal(fx.executionStats.totalDocsExamined, cs.executionStats.totalDocsExamined);
});

h.test('a leading $match on an indexed field is an IXSCAN; an index-provided $sort is pushed down', async () => {
  const c = big || await filled('big2', 20000, 16);
  await c.createIndex({ g: 1 });
  const ex = await c.aggregate([{ $match: { g: 7 } }, { $group: { _id: null, n: { $sum: 1 } } }]).explain('executionStats');
  const cs = cursorStage(ex);
  assert.ok(stageNames(cs.queryPlanner.winningPlan).includes('IXSCAN'), JSON.stringify(cs.queryPlanner.winningPlan));
  // The $group reads no field and the bounds answer the $match: keys only (count_keys.test.js).
  assert.equal(cs.executionStats.totalDocsExamined, 0);
  assert.equal(cs.executionStats.totalKeysExamined, c === big ? 100 : 20);
  assert.equal(Object.keys(ex.stages[1])[0], '$group');
  assert.equal(ex.stages[1].nReturned, 1);
  const r = await c.aggregate([{ $match: { g: 7 } }, { $group: { _id: null, n: { $sum: 1 } } }]).toArray();
  assert.deepEqual(r, [{ _id: null, n: c === big ? 100 : 20 }]);
  // $sort on the indexed field then $limit: no in-memory SORT, the limit is pushed down too.
  const sx = await c.aggregate([{ $sort: { g: -1 } }, { $limit: 3 }]).explain('executionStats');
  const names = stageNames(cursorStage(sx).queryPlanner.winningPlan);
  assert.ok(names.includes('IXSCAN') && !names.includes('SORT') && names.includes('LIMIT'), names.join(','));
  assert.equal(cursorStage(sx).executionStats.totalDocsExamined, 3);
  // A writing pipeline materialises, but its leading $match is still planned (and explained) the same way.
  const ox = await c.aggregate([{ $match: { g: 7 } }, { $out: 'out7' }]).explain('queryPlanner');
  assert.ok(stageNames(ox.stages[0].$cursor.queryPlanner.winningPlan).includes('IXSCAN'));
  assert.deepEqual(Object.keys(ox.stages[1]), ['$out']);
  const top = await c.aggregate([{ $sort: { g: -1 } }, { $limit: 3 }]).toArray();
  assert.deepEqual(top.map((d) => d.g), [999, 999, 999]);
});

h.test('getMore across batches of a streaming pipeline returns every document exactly once', async () => {
  const c = await filled('getmore', 3000, 8);
  const pipelines = [
    [{ $match: { g: { $lt: 500 } } }, { $project: { v: 1 } }],
    [{ $project: { g: 1, arr: ['$g', '$m'] } }, { $unwind: { path: '$arr', includeArrayIndex: 'ix' } }, { $match: { g: { $lt: 500 } } }],
    [{ $addFields: { w: { $mod: ['$v', 3] } } }, { $skip: 17 }, { $limit: 1400 }],
  ];
  const expectCounts = [1500, 3000, 1400];
  for (let k = 0; k < pipelines.length; k++) {
    const cur = c.aggregate(pipelines[k], { batchSize: 7 });
    const seen = new Map();
    for await (const d of cur) {
      const key = k === 1 ? `${d._id}:${d.ix}` : String(d._id);
      seen.set(key, (seen.get(key) || 0) + 1);
    }
    assert.equal(seen.size, expectCounts[k], `pipeline ${k}`);
    for (const [key, n] of seen) assert.equal(n, 1, `pipeline ${k}: ${key} returned ${n} times`);
  }
  // The skip/limit pipeline returns exactly the documents after the first 17 in scan order.
  const all = await c.aggregate(pipelines[2], { batchSize: 50 }).toArray();
  assert.equal(all[0]._id, 17);
  assert.equal(all[all.length - 1]._id, 17 + 1399);
});

function round(docs) {
  return docs.map((d) => ({ ...d, sd: d.sd === undefined ? undefined : Math.round(d.sd * 1e6) / 1e6,
    avg: d.avg === undefined ? undefined : Math.round(d.avg * 1e6) / 1e6 }));
}

h.test('$sort and $group give identical results spilling (lowered budget) and in memory', { timeout: 180000 }, async () => {
  const c = await filled('spill', 20000, 200);
  const sortP = [{ $sort: { v: 1, _id: 1 } }, { $project: { pad: 0 } }];
  const groupP = [
    { $group: {
      _id: '$g', n: { $sum: 1 }, s: { $sum: '$v' }, avg: { $avg: '$v' }, f: { $first: '$_id' }, l: { $last: '$_id' },
      p: { $push: '$v' }, set: { $addToSet: '$m' }, mn: { $min: '$v' }, mx: { $max: '$v' }, sd: { $stdDevPop: '$v' },
    } },
    { $sort: { _id: 1 } },
  ];
  const sortGroupP = [{ $sort: { v: -1 } }, { $group: { _id: '$m', top: { $first: '$v' }, ids: { $push: '$_id' } } },
    { $sort: { _id: 1 } }];
  const bucketP = [{ $bucket: { groupBy: '$v', boundaries: [0, 1000, 50000, 100003], output: { n: { $sum: 1 } } } }];
  const sbcP = [{ $sortByCount: '$m' }];
  const memSort = await c.aggregate(sortP).toArray();
  const memGroup = await c.aggregate(groupP).toArray();
  const memSortGroup = await c.aggregate(sortGroupP).toArray();
  const memBucket = await c.aggregate(bucketP).toArray();
  const memSbc = await c.aggregate(sbcP).toArray();
  assert.equal(memSort.length, 20000);
  assert.equal(memGroup.length, 1000);
  for (let i = 1; i < memSort.length; i++) assert.ok(memSort[i - 1].v <= memSort[i].v);
  await setBudgets(SMALL_BUDGET);
  try {
    // While a spilled sort's cursor is open its runs are on disk; closing the cursor removes them.
    const cur = c.aggregate([{ $sort: { v: 1 } }], { batchSize: 5 });
    await cur.next();
    assert.ok(spillFiles().length > 1, `spill files while the cursor is open: ${spillFiles()}`);
    await cur.close();
    assert.deepEqual(spillFiles(), []);

    assert.deepEqual(await c.aggregate(sortP).toArray(), memSort);
    assert.deepEqual(round(await c.aggregate(groupP).toArray()), round(memGroup));
    assert.deepEqual(await c.aggregate(sortGroupP).toArray(), memSortGroup);
    assert.deepEqual(await c.aggregate(bucketP).toArray(), memBucket);
    assert.deepEqual(await c.aggregate(sbcP).toArray(), memSbc);
    assert.deepEqual(spillFiles(), [], 'exhausted cursors leave no files');
  } finally {
    await setBudgets(DEFAULT_BUDGET);
  }
});

h.test('allowDiskUse: false past the budget answers 292 QueryExceededMemoryLimitNoDiskUseAllowed', { timeout: 120000 }, async () => {
  const c = await filled('nodisk', 5000, 200);
  await setBudgets(SMALL_BUDGET);
  try {
    for (const p of [[{ $sort: { v: 1 } }], [{ $group: { _id: '$_id', p: { $push: '$pad' } } }]]) {
      await assert.rejects(c.aggregate(p, { allowDiskUse: false }).toArray(), (e) => {
        assert.equal(e.code, 292);
        assert.equal(e.codeName, 'QueryExceededMemoryLimitNoDiskUseAllowed');
        assert.match(e.message, p[0].$sort ? /Sort exceeded memory limit of 100000 bytes/ : /Exceeded memory limit for \$group/);
        return true;
      });
    }
    // The default (allowDiskUseByDefault: true) spills instead.
    assert.equal((await c.aggregate([{ $sort: { v: 1 } }]).toArray()).length, 5000);
    // $sort + $limit is a top-k sort: it holds about k documents, so it stays under the budget.
    const top = await c.aggregate([{ $sort: { v: -1, _id: 1 } }, { $skip: 2 }, { $limit: 5 }, { $project: { v: 1 } }],
      { allowDiskUse: false }).toArray();
    const allV = (await c.find({}, { projection: { v: 1 } }).toArray()).sort((a, b) => b.v - a.v || a._id - b._id);
    assert.deepEqual(top, allV.slice(2, 7));
    // Under the budget, allowDiskUse: false is fine.
    const small = await c.aggregate([{ $match: { _id: { $lt: 10 } } }, { $sort: { v: -1 } }], { allowDiskUse: false }).toArray();
    assert.equal(small.length, 10);
  } finally {
    await setBudgets(DEFAULT_BUDGET);
  }
  const gp = await srv.client.db('admin').command({ getParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 1 });
  assert.equal(Number(gp.internalQueryMaxBlockingSortMemoryUsageBytes), DEFAULT_BUDGET);
});

h.test('killing a streaming cursor mid-way and a $sort + $limit over an unindexed field', async () => {
  const c = await filled('kill', 2000, 8);
  const cur = c.aggregate([{ $project: { v: 1 } }], { batchSize: 3 });
  const first = await cur.next();
  assert.equal(first._id, 0);
  await cur.close();
  const r = await c.aggregate([{ $sort: { v: -1 } }, { $limit: 2 }, { $project: { v: 1, _id: 0 } }]).toArray();
  const all = (await c.find({}, { projection: { v: 1, _id: 0 } }).toArray()).map((d) => d.v).sort((a, b) => b - a);
  assert.deepEqual(r.map((d) => d.v), all.slice(0, 2));
});

h.test('$project and $unset use the find projection engine (same results, MongoDB error codes)', async () => {
  const c = srv.freshDb('proj').collection('c');
  await c.insertMany([
    { _id: 1, a: [{ b: 1, c: 2 }, { b: 3, c: 4 }, 5], x: { y: 1, z: 2 }, arr: [1, 2, 3, 4] },
    { _id: 2, a: { b: 7, c: 8 }, x: 3, arr: [] },
  ]);
  for (const spec of [{ 'a.b': 1 }, { 'a.c': 0, x: 0 }, { _id: 0, 'x.z': 1, n: { $add: [1, 2] } }]) {
    const viaFind = await c.find({}, { projection: spec }).sort({ _id: 1 }).toArray();
    const viaAgg = await c.aggregate([{ $sort: { _id: 1 } }, { $project: spec }]).toArray();
    assert.deepEqual(viaAgg, viaFind, JSON.stringify(spec));
  }
  // In a pipeline a one-operator sub-document is an expression: $slice is the expression, not find's $slice.
  const sl = await c.aggregate([{ $match: { _id: 1 } }, { $project: { s: { $slice: ['$arr', 1, 2] } } }]).toArray();
  assert.deepEqual(sl, [{ _id: 1, s: [2, 3] }]);
  const un = await c.aggregate([{ $match: { _id: 1 } }, { $unset: ['a.c', 'x.y', 'arr'] }]).toArray();
  assert.deepEqual(un, [{ _id: 1, a: [{ b: 1 }, { b: 3 }, 5], x: { z: 2 } }]);
  await assert.rejects(c.aggregate([{ $project: { a: 1, x: 0 } }]).toArray(), (e) => {
    assert.equal(e.code, 31254);
    assert.match(e.message, /^Invalid \$project :: caused by :: Cannot do exclusion on field x in inclusion projection/);
    return true;
  });
  await h.expectCode(c.findOne({}, { projection: { a: 1, x: 0 } }), 31254);
  await h.expectCode(c.aggregate([{ $project: {} }]).toArray(), 51272);
  await h.expectCode(c.aggregate([{ $project: { 'a.$': 1 } }]).toArray(), 31324);
  await h.expectCode(c.aggregate([{ $project: { a: { $elemMatch: { b: 1 } } } }]).toArray(), 168);
  // $addFields / $set through the same engine: in place, appended, through arrays, $$REMOVE removes.
  const af = await c.aggregate([{ $match: { _id: 1 } },
    { $set: { 'a.c': 0, x: '$$REMOVE', n: { $size: '$arr' }, 'o.p': true, arr: { $literal: 1 } } }]).toArray();
  assert.deepEqual(af, [{ _id: 1, a: [{ b: 1, c: 0 }, { b: 3, c: 0 }, { c: 0 }], arr: 1, n: 4, o: { p: true } }]);
  await h.expectCode(c.aggregate([{ $addFields: { a: 1, 'a.b': 2 } }]).toArray(), [31249, 31250]);
});

h.test('maxTimeMS interrupts a blocking pipeline (50 MaxTimeMSExpired)', async () => {
  const c = big || await filled('maxtime', 100000, 16);
  // Sorting and grouping 100k documents takes far longer than 1 ms; the stages check the deadline.
  for (const p of [[{ $sort: { v: 1 } }], [{ $group: { _id: '$v', n: { $sum: 1 } } }],
    [{ $project: { v: 1 } }, { $match: { nosuch: 1 } }]]) {
    await h.expectCode(c.aggregate(p, { maxTimeMS: 1 }).toArray(), 50);
  }
  // The server is still fine afterwards.
  assert.equal((await c.aggregate([{ $limit: 2 }]).toArray()).length, 2);
});
