'use strict';
/*
 * The blocking sort's statistics in explain, as mongod 8.0 prints them.
 * find's SORT stage (plan_explainer_impl.cpp statsToBSON, SortStats):
 * sortPattern, memLimit (internalQueryMaxBlockingSortMemoryUsageBytes),
 * limitAmount, type ("simple", or "default" when canUseSimpleSort fails:
 * unfetched input, metadata other than the sort key, record ids kept for
 * showRecordId), and at executionStats totalDataSizeSorted, usedDisk,
 * spills, spilledDataStorageSize. The aggregate $sort stage
 * (DocumentSourceSort::serialize) has totalDataSizeSortedBytesEstimate,
 * usedDisk, spills, spilledDataStorageSize. jstests/noPassthrough/
 * explain_sort_exec_stats.js is the model (a low memory limit spills).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const num = (v) => Number(v);

function findStage(st, name) {
  for (let s = st; s; s = s.inputStage) if (s.stage === name) return s;
  return null;
}

async function filled(db, n) {
  const c = db.collection('c');
  const docs = [];
  for (let i = 0; i < n; i++) docs.push({ _id: i, a: i % 97, b: i, pad: 'x'.repeat(100) });
  await c.insertMany(docs);
  return c;
}

async function withSortLimit(bytes, fn) {
  const admin = srv.client.db('admin');
  await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: bytes });
  try {
    await fn();
  } finally {
    await admin.command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 104857600 });
  }
}

h.test('find SORT at executionStats: totalDataSizeSorted, usedDisk, spills, spilledDataStorageSize in memory', async () => {
  const c = await filled(srv.freshDb('sst_mem'), 500);
  const run = async () => (await c.find({}).sort({ a: 1, b: -1 }).explain('executionStats')).executionStats;
  const es = await run();
  const s = findStage(es.executionStages, 'SORT');
  assert.ok(s, JSON.stringify(es.executionStages));
  assert.deepEqual(s.sortPattern, { a: 1, b: -1 });
  assert.equal(num(s.memLimit), 104857600);
  assert.equal(s.type, 'simple');
  assert.equal(s.limitAmount, undefined);
  assert.equal(num(s.nReturned), 500);
  // Every document entered the sort: at least its 100 padding bytes each.
  assert.ok(num(s.totalDataSizeSorted) > 500 * 100, JSON.stringify(s));
  assert.equal(s.usedDisk, false);
  assert.equal(num(s.spills), 0);
  assert.equal(num(s.spilledDataStorageSize), 0);
  // The same query twice sorts the same bytes.
  const s2 = findStage((await run()).executionStages, 'SORT');
  assert.equal(num(s2.totalDataSizeSorted), num(s.totalDataSizeSorted));
  // A filter sorts fewer bytes: only what reaches the sort counts.
  const few = findStage((await c.find({ a: 3 }).sort({ b: 1 }).explain('executionStats')).executionStats.executionStages,
    'SORT');
  assert.ok(num(few.totalDataSizeSorted) > 0 && num(few.totalDataSizeSorted) < num(s.totalDataSizeSorted) / 20,
    JSON.stringify(few));
  // At queryPlanner nothing ran: none of the statistics.
  const qp = await c.find({}).sort({ a: 1 }).explain('queryPlanner');
  const q = findStage(qp.queryPlanner.winningPlan, 'SORT');
  assert.equal(q.type, 'simple');
  for (const k of ['totalDataSizeSorted', 'usedDisk', 'spills', 'spilledDataStorageSize'])
    assert.equal(q[k], undefined, k);
  // A top-k sort keeps its limitAmount and still reports its statistics.
  const tk = findStage((await c.find({}).sort({ b: -1 }).skip(2).limit(5).explain('executionStats'))
    .executionStats.executionStages, 'SORT');
  assert.equal(num(tk.limitAmount), 7);
  assert.equal(num(tk.nReturned), 7);
  assert.ok(num(tk.totalDataSizeSorted) > 0);
  assert.equal(tk.usedDisk, false);
});

h.test('find SORT spills under a small internalQueryMaxBlockingSortMemoryUsageBytes', async () => {
  const c = await filled(srv.freshDb('sst_spill'), 3000);
  await withSortLimit(20000, async () => {
    const es = (await c.find({}).sort({ a: 1, b: 1 }).allowDiskUse(true).explain('executionStats')).executionStats;
    const s = findStage(es.executionStages, 'SORT');
    assert.equal(num(s.memLimit), 20000);
    assert.equal(s.usedDisk, true, JSON.stringify(s));
    assert.ok(num(s.spills) > 0, JSON.stringify(s));
    assert.ok(num(s.spilledDataStorageSize) > 0, JSON.stringify(s));
    assert.ok(num(s.totalDataSizeSorted) > 3000 * 100);
    assert.equal(num(s.nReturned), 3000);
    assert.equal(num(es.nReturned), 3000);
    // The find itself returns the same documents in order.
    const got = await c.find({}, { projection: { _id: 1 } }).sort({ a: 1, b: 1 }).allowDiskUse(true).toArray();
    assert.equal(got.length, 3000);
    // Without allowDiskUse the explain fails as the find does (292).
    await h.expectCode(c.find({}).sort({ a: 1, b: 1 }).allowDiskUse(false).explain('executionStats'), 292);
    await h.expectCode(c.find({}).sort({ a: 1, b: 1 }).allowDiskUse(false).toArray(), 292);
  });
});

h.test('find SORT type: default for showRecordId and $meta, simple otherwise', async () => {
  const db = srv.freshDb('sst_type');
  const c = await filled(db, 50);
  const typeOf = async (cur) => findStage((await cur.explain('queryPlanner')).queryPlanner.winningPlan, 'SORT').type;
  assert.equal(await typeOf(c.find({}).sort({ b: 1 })), 'simple');
  assert.equal(await typeOf(c.find({}).sort({ b: 1 }).showRecordId(true)), 'default');
  assert.equal(await typeOf(c.find({}, { projection: { r: { $meta: 'recordId' } } }).sort({ b: 1 })), 'default');
  // Only the sort key's metadata keeps the simple sort.
  assert.equal(await typeOf(c.find({}, { projection: { k: { $meta: 'sortKey' } } }).sort({ b: 1 })), 'simple');
  const t = db.collection('t');
  await t.insertMany([{ _id: 1, s: 'dog cat' }, { _id: 2, s: 'dog dog' }, { _id: 3, s: 'cat' }]);
  await t.createIndex({ s: 'text' });
  const ex = await t.find({ $text: { $search: 'dog' } }, { projection: { sc: { $meta: 'textScore' } } })
    .sort({ sc: { $meta: 'textScore' } }).explain('executionStats');
  const ts = findStage(ex.executionStats.executionStages, 'SORT');
  assert.ok(ts, JSON.stringify(ex.executionStats.executionStages));
  assert.equal(ts.type, 'default');
  assert.equal(num(ts.nReturned), 2);
  assert.ok(num(ts.totalDataSizeSorted) > 0 && ts.usedDisk === false, JSON.stringify(ts));
  // showRecordId at executionStats: default, with the statistics.
  const rs = findStage((await c.find({}).sort({ b: 1 }).showRecordId(true).explain('executionStats'))
    .executionStats.executionStages, 'SORT');
  assert.equal(rs.type, 'default');
  assert.ok(num(rs.totalDataSizeSorted) > 50 * 100, JSON.stringify(rs));
});

h.test('aggregate $sort at executionStats: totalDataSizeSortedBytesEstimate, usedDisk, spills, spilledDataStorageSize', async () => {
  const c = await filled(srv.freshDb('sst_agg'), 3000);
  const pipeline = [{ $addFields: { z: 1 } }, { $sort: { a: 1, b: -1 } }];
  const sortOf = (ex) => ex.stages.find((s) => s.$sort);
  const mem = sortOf(await c.aggregate(pipeline).explain('executionStats'));
  assert.deepEqual(mem.$sort, { sortKey: { a: 1, b: -1 } });
  assert.ok(num(mem.totalDataSizeSortedBytesEstimate) > 3000 * 100, JSON.stringify(mem));
  assert.equal(mem.usedDisk, false);
  assert.equal(num(mem.spills), 0);
  assert.equal(num(mem.spilledDataStorageSize), 0);
  const again = sortOf(await c.aggregate(pipeline).explain('executionStats'));
  assert.equal(num(again.totalDataSizeSortedBytesEstimate), num(mem.totalDataSizeSortedBytesEstimate));
  await withSortLimit(20000, async () => {
    const sp = sortOf(await c.aggregate(pipeline, { allowDiskUse: true }).explain('executionStats'));
    assert.equal(sp.usedDisk, true, JSON.stringify(sp));
    assert.ok(num(sp.spills) > 0 && num(sp.spilledDataStorageSize) > 0, JSON.stringify(sp));
    assert.equal(num(sp.totalDataSizeSortedBytesEstimate), num(mem.totalDataSizeSortedBytesEstimate));
    // A $sort first: a SORT in the plan (as mongod pushes it down) or a $sort stage; it spills either way.
    const ex = await c.aggregate([{ $sort: { a: 1, b: -1 } }], { allowDiskUse: true }).explain('executionStats');
    const es = ex.executionStats || ex.stages[0].$cursor.executionStats;
    const s = findStage(es.executionStages, 'SORT') || sortOf(ex);
    assert.ok(s, JSON.stringify(ex));
    assert.equal(s.usedDisk, true, JSON.stringify(s));
    assert.ok(num(s.spills) > 0, JSON.stringify(s));
  });
});

h.test('the SORT under a findAndModify or an update with a sort reports its statistics too', async () => {
  const db = srv.freshDb('sst_write');
  const c = await filled(db, 200);
  const ex = await db.command({ explain: { findAndModify: 'c', query: { a: { $lt: 10 } }, sort: { b: -1 },
    update: { $set: { z: 1 } } }, verbosity: 'executionStats' });
  const s = findStage(ex.executionStats.executionStages, 'SORT');
  assert.ok(s, JSON.stringify(ex.executionStats.executionStages));
  assert.equal(s.type, 'simple');
  assert.ok(num(s.totalDataSizeSorted) > 0, JSON.stringify(s));
  assert.equal(s.usedDisk, false);
  assert.equal(num(s.spills), 0);
  assert.equal(num(s.spilledDataStorageSize), 0);
  // Explain changed nothing.
  assert.equal(await c.countDocuments({ z: 1 }), 0);
  // The memLimit follows the parameter.
  await withSortLimit(5000000, async () => {
    const f = findStage((await c.find({}).sort({ b: 1 }).explain('queryPlanner')).queryPlanner.winningPlan, 'SORT');
    assert.equal(num(f.memLimit), 5000000);
  });
});
