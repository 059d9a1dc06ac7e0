'use strict';
/*
 * countDocuments and $count count at the source (issue 13: an operation
 * costs its own work). A $count, or a $group by a constant whose
 * accumulators are $count and $sum of constants (the drivers'
 * countDocuments pipeline), heading the stages that are not pushed down
 * reads no field of its input, so the source counts its documents
 * (mf_agg_env_t.pull_count) instead of building each one (a copy of every
 * matching document, or an empty one per index key) for the stage to fold
 * one at a time; $sum of a constant adds it n times at once
 * (mf_sum_add_times). Every answer here is compared with the same pipeline
 * with a stage in front of the count ($set), which takes the documents one
 * at a time, types included (promoteValues: false).
 */
const assert = require('node:assert/strict');
const { Long, Double, Int32, Decimal128 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const RAW = { promoteValues: false, promoteLongs: false };

async function seeded(tag) {
  const db = srv.freshDb(tag);
  const c = db.collection('c');
  const docs = [];
  for (let i = 0; i < 3000; i++) docs.push({ _id: i, a: i % 100, b: i % 7 === 0 ? 'x' : 'y', t: new Date(i) });
  await c.insertMany(docs);
  await c.createIndex({ a: 1 });
  return { db, c };
}

/* The pipeline's answer, and the same with a $set in front of its count stage (one document at a time). */
async function both(c, pre, count) {
  const fast = await c.aggregate([...pre, count], RAW).toArray();
  const slow = await c.aggregate([...pre, { $set: { zz: 1 } }, count], RAW).toArray();
  assert.deepEqual(fast, slow, JSON.stringify([...pre, count]));
  return fast;
}

h.test('countDocuments counts at the source: filters on indexed and unindexed fields, skip, limit, nothing matched', async () => {
  const { c } = await seeded('cpcd');
  const cases = [
    [{}, {}, 3000], [{ a: 5 }, {}, 30], [{ a: { $lt: 10 } }, {}, 300], [{ a: { $lt: 10 }, b: 'x' }, {}, 43],
    [{ b: 'x' }, {}, 429], [{ a: 5 }, { skip: 10 }, 20], [{ a: 5 }, { limit: 7 }, 7], [{ a: 5 }, { skip: 25, limit: 10 }, 5],
    [{ a: 5 }, { skip: 40 }, 0], [{ a: 1000 }, {}, 0], [{ b: 'z' }, {}, 0], [{ a: { $in: [1, 2, 3] } }, { limit: 1 }, 1],
  ];
  for (const [f, o, n] of cases) {
    assert.equal(await c.countDocuments(f, o), n, JSON.stringify([f, o]));
    const pre = [{ $match: f }];
    if (o.skip) pre.push({ $skip: o.skip });
    if (o.limit) pre.push({ $limit: o.limit });
    const r = await both(c, pre, { $group: { _id: 1, n: { $sum: 1 } } });
    assert.deepEqual(r, n ? [{ _id: new Int32(1), n: new Int32(n) }] : []);
  }
  assert.equal(await c.countDocuments({ a: 5 }, { hint: { $natural: 1 } }), 30);
  assert.equal(await c.countDocuments({ a: 5 }, { hint: { a: 1 } }), 30);
});

h.test('$count and $group with $count and $sum of constants: the same values and types as one document at a time', async () => {
  const { c } = await seeded('cpgrp');
  for (const f of [{}, { a: { $gte: 50 } }, { b: 'x' }, { a: -1 }]) {
    const pre = [{ $match: f }];
    const r = await both(c, pre, { $count: 'total' });
    if (r.length) assert.ok(r[0].total instanceof Int32);
    await both(c, pre, {
      $group: {
        _id: null, n: { $sum: 1 }, two: { $sum: 2 }, half: { $sum: 0.5 }, tenth: { $sum: 0.1 }, long: { $sum: Long.fromNumber(3) },
        big: { $sum: 1 << 30 }, huge: { $sum: Long.fromString('4611686018427387904') }, neg: { $sum: -7 },
        dec: { $sum: Decimal128.fromString('0.1') }, none: { $sum: 'x' }, nul: { $sum: null }, cnt: { $count: {} },
      },
    });
    await both(c, pre, { $group: { _id: 'k' } });
    await both(c, pre, { $group: { _id: { $add: [1, 2] }, n: { $sum: { $add: [1, 1] } } } });
  }
  // Types: int32 while the total fits, then int64, then double (as mongod's $sum).
  const [g] = await c.aggregate([{ $group: { _id: null, i: { $sum: 1 }, l: { $sum: 1 << 30 }, d: { $sum: Long.fromString('4611686018427387904') } } }], RAW).toArray();
  assert.deepEqual(g.i, new Int32(3000));
  assert.deepEqual(g.l, Long.fromNumber(3000 * 2 ** 30));
  assert.ok(g.d instanceof Double, String(g.d && g.d.constructor.name));
  // After $limit, $skip and a pushed-down $project the count is of what reaches it.
  await both(c, [{ $match: { a: { $lt: 20 } } }, { $skip: 5 }, { $limit: 100 }, { $project: { a: 1 } }], { $count: 'n' });
  assert.deepEqual(await c.aggregate([{ $match: { a: { $lt: 20 } } }, { $limit: 100 }, { $count: 'n' }]).toArray(), [{ n: 100 }]);
});

h.test('a count over a view, a sorted source and a time-series collection', async () => {
  const { db, c } = await seeded('cpview');
  await db.createCollection('v', { viewOn: 'c', pipeline: [{ $match: { b: 'x' } }] });
  assert.equal(await db.collection('v').countDocuments({ a: { $lt: 50 } }), await c.countDocuments({ b: 'x', a: { $lt: 50 } }));
  await both(c, [{ $match: { a: { $gt: 3 } } }, { $sort: { a: -1 } }], { $count: 'n' });
  await both(c, [{ $sort: { b: 1 } }, { $limit: 2500 }], { $group: { _id: 0, n: { $sum: 1 } } });
  await db.createCollection('ts', { timeseries: { timeField: 't', metaField: 'm' } });
  const ts = db.collection('ts');
  await ts.insertMany(Array.from({ length: 500 }, (_, i) => ({ t: new Date(1e12 + i * 1000), m: i % 3, v: i })));
  assert.equal(await ts.countDocuments({ m: 1 }), 167);
  assert.equal(await ts.countDocuments({}), 500);
});

h.test('a count at the source still stops at maxTimeMS', async () => {
  const { c } = await seeded('cpmax');
  for (let k = 1; k < 70; k++) {
    await c.insertMany(Array.from({ length: 3000 }, (_, i) => ({ _id: k * 3000 + i, a: i % 100, b: 'y' })));
  }
  const want = await c.countDocuments({ b: 'y' });
  assert.equal(want, 210000 - 429);
  // 209,571 documents checked against an unindexed filter take tens of milliseconds: past 1 ms, 50 MaxTimeMSExpired.
  let expired = 0;
  for (let k = 0; k < 5; k++) {
    try {
      assert.deepEqual(await c.aggregate([{ $match: { b: 'y' } }, { $count: 'n' }], { maxTimeMS: 1 }).toArray(), [{ n: want }]);
    } catch (e) {
      assert.equal(e.code, 50, String(e));
      expired++;
    }
  }
  assert.ok(expired > 0, 'no count stopped at maxTimeMS 1');
});

h.test('what a count at the source must not skip: $meta in the $group, a pushed-down $project that fails (helper-100)', async () => {
  const db = srv.freshDb('cpmeta');
  const t = db.collection('t');
  await t.insertMany([{ _id: 1, t: 'dog cat' }, { _id: 2, t: 'dog dog' }, { _id: 3, t: 'cat' }]);
  await t.createIndex({ t: 'text' });
  const [g] = await t.aggregate([{ $match: { $text: { $search: 'dog' } } }, { $group: { _id: null, n: { $sum: { $meta: 'textScore' } } } }]).toArray();
  assert.equal(g.n, 2.25);
  const byScore = await t.aggregate([{ $match: { $text: { $search: 'dog' } } }, { $group: { _id: { $meta: 'textScore' }, n: { $sum: 1 } } }, { $sort: { _id: 1 } }]).toArray();
  assert.deepEqual(byScore, [{ _id: 0.75, n: 1 }, { _id: 1.5, n: 1 }]);
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 0 }, { _id: 3, a: 'x' }]);
  await h.expectCode(c.aggregate([{ $project: { x: { $divide: [1, '$a'] } } }, { $count: 'n' }]).toArray(), 2);
  await h.expectCode(c.aggregate([{ $project: { x: { $toInt: '$a' } } }, { $group: { _id: null, n: { $sum: 1 } } }]).toArray(), 241);
  await h.expectCode(c.aggregate([{ $match: { _id: { $gt: 0 } } }, { $limit: 5 }, { $project: { x: { $add: [1, '$a'] } } }, { $count: 'n' }]).toArray(), 14);
  assert.deepEqual(await c.aggregate([{ $project: { a: 1 } }, { $count: 'n' }]).toArray(), [{ n: 3 }]);
});
