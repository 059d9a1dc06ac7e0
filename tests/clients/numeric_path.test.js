'use strict';
/*
 * Paths with a numeric component ("a.0"), as mongod's matcher reads them,
 * with and without an index on the path. At an array a numeric component
 * is both a position and a field name of the array's documents; a value
 * that a position gave at the path's end is taken whole, so {"a.0": 42}
 * does not match {a: [[42]]} (mf_path_walk_whole). An index on such a path
 * keeps the positional value (getFieldDottedOrArray), which misses what the
 * field-name reading finds ({a: [{"0": 42}]}), so once an array was seen on
 * the path the planner takes no bounds from it and the documents decide.
 * Until session 57 a collection scan matched {a: [[42]]} and an index scan
 * missed {a: [{"0": 42}]}. The expected answers are those mongod gives
 * (jstests/core/match_numeric_components.js).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

/* Every nesting of 42 under a, up to four levels, as arrays and as {"0": ...} documents; _id is the position. */
const DOCS = [
  42, [42], { 0: 42 }, [[42]], [{ 0: 42 }], { 0: [42] }, { 0: { 0: 42 } }, [[[42]]], [[{ 0: 42 }]], [{ 0: [42] }],
  [{ 0: { 0: 42 } }], { 0: [[42]] }, { 0: [{ 0: 42 }] }, { 0: { 0: [42] } }, { 0: { 0: { 0: 42 } } }, [[[[42]]]],
  [[[{ 0: 42 }]]], [[{ 0: [42] }]], [[{ 0: { 0: 42 } }]], [{ 0: [[42]] }], [{ 0: [{ 0: 42 }] }], [{ 0: { 0: [42] } }],
  [{ 0: { 0: { 0: 42 } } }], { 0: [[[42]]] }, { 0: [[{ 0: 42 }]] }, { 0: [{ 0: [42] }] }, { 0: [{ 0: { 0: 42 } }] },
  { 0: { 0: [[42]] } }, { 0: { 0: [{ 0: 42 }] } }, { 0: { 0: { 0: [42] } } }, { 0: { 0: { 0: { 0: 42 } } } },
].map((a, i) => ({ _id: i, a }));

const A0 = [1, 2, 4, 5, 9];
const ALL = DOCS.map((d) => d._id);
const not = (ids) => ALL.filter((i) => !ids.includes(i));
const CASES = [
  [{ 'a.0': 42 }, A0],
  [{ 'a.0': { $gt: 41 } }, A0],
  [{ 'a.0': { $in: [41, 42, 43] } }, A0],
  [{ 'a.0': { $all: [42] } }, A0],
  [{ 'a.0': { $type: 'number' } }, A0],
  [{ 'a.0': { $mod: [42, 0] } }, A0],
  [{ $or: [{ 'a.0': 42 }, { notARealField: 123 }] }, A0],
  [{ _id: { $lt: 15 }, 'a.0': { $gt: 41 } }, A0],
  [{ 'a.0': { $ne: 42 } }, not(A0)],
  [{ 'a.0': { $nin: [41, 42, 43] } }, not(A0)],
  [{ 'a.0': { $exists: false } }, [0]],
  [{ 'a.0': { $exists: true } }, not([0])],
  [{ 'a.0.0': 42 }, [3, 4, 5, 6, 8, 9, 10, 12, 13, 17, 20, 21, 25]],
  [{ a: { $elemMatch: { '0.0': { $eq: 42 } } } }, [7, 8, 9, 10, 16, 17, 20, 21]],
  [{ 'a.00': 42 }, []], // "00" names no position: mongod compares the component with the element names
  [{ 'a.0': { $all: [{ $elemMatch: { 0: 42 } }] } }, [7, 8, 11, 12, 15, 17, 19, 20, 23, 25]],
];

async function ids(c, filter, hint) {
  return (await c.find(filter, hint ? { hint } : {}).toArray()).map((d) => d._id).sort((x, y) => x - y);
}

h.test('a numeric path component matches as mongod\'s matcher does, with no index', async () => {
  const c = srv.freshDb('nump').collection('c');
  await c.insertMany(DOCS);
  for (const [f, want] of CASES) {
    assert.deepEqual(await ids(c, f), want, JSON.stringify(f));
    assert.equal(await c.countDocuments(f), want.length, `countDocuments ${JSON.stringify(f)}`);
  }
});

h.test('an index on a path with a numeric component answers as the collection scan does', async () => {
  const db = srv.freshDb('numpix');
  const c = db.collection('c');
  await c.createIndex({ 'a.0': 1 });
  await c.createIndex({ 'a.0.0': 1 });
  await c.insertMany(DOCS); // after the indexes: their flags come from these writes
  for (const [f, want] of CASES) {
    assert.deepEqual(await ids(c, f), want, JSON.stringify(f));
    assert.equal(await c.countDocuments(f), want.length, `countDocuments ${JSON.stringify(f)}`);
    assert.equal((await db.command({ count: 'c', query: f })).n, want.length, `count ${JSON.stringify(f)}`);
  }
  for (const hint of [{ 'a.0': 1 }, { 'a.0.0': 1 }]) {
    assert.deepEqual(await ids(c, { 'a.0': 42 }, hint), A0, JSON.stringify(hint));
    assert.equal((await db.command({ count: 'c', query: { 'a.0': 42 }, hint })).n, A0.length);
  }
  // Built over existing documents, the same.
  const c2 = db.collection('c2');
  await c2.insertMany(DOCS);
  await c2.createIndex({ 'a.0': 1 });
  for (const [f, want] of CASES) assert.deepEqual(await ids(c2, f), want, `built: ${JSON.stringify(f)}`);
  // A document with a numeric field name and no array on the path keeps the index's bounds.
  const m = db.collection('m');
  await m.createIndex({ 'scores.2024': 1 });
  await m.insertMany(Array.from({ length: 200 }, (_, i) => ({ _id: i, scores: { 2024: i % 20, 2025: i } })));
  const e = await m.find({ 'scores.2024': 7 }).explain('executionStats');
  assert.equal(e.executionStats.nReturned, 10);
  assert.equal(e.executionStats.totalKeysExamined, 10, JSON.stringify(e.queryPlanner.winningPlan));
});

h.test('$elemMatch on an indexed positional path: nested arrays are taken whole', async () => {
  const c = srv.freshDb('numpem').collection('c');
  await c.insertMany([
    { _id: 0, f0: 'zz', f1: 5 }, { _id: 1, f0: 'zz', f1: [3, 5] }, { _id: 4, f0: 'zz', f1: [3, 5, [7, 9]] },
    { _id: 2, f0: 'zz', f1: [[3, 5], [5, 7]] }, { _id: 3, f0: 'zz', f1: [[[0], [3, 5]], [[0], [5, 7]]] },
  ]);
  const q1 = { 'f1.0': { $elemMatch: { $eq: 5 } } };
  const q2 = { 'f1.0': { $elemMatch: { $eq: [3, 5] } } };
  const q3 = { f0: 'zz', 'f1.0': { $elemMatch: { $eq: 5 } } };
  const check = async () => {
    assert.deepEqual(await ids(c, q1), [2]);
    assert.deepEqual(await ids(c, q2), [3]);
    assert.deepEqual(await ids(c, q3), [2]);
    assert.deepEqual(await ids(c, { 'f1.0.1': { $elemMatch: { $eq: 3 } } }), [3]);
  };
  await check();
  await c.createIndex({ 'f1.0': 1 });
  await c.createIndex({ f0: 1, 'f1.0': 1 });
  await c.createIndex({ 'f1.0.1': 1 });
  await check();
});

h.test('seeded random documents and filters on positional paths: every index answers as the collection scan does', async () => {
  const db = srv.freshDb('numprand');
  const c = db.collection('c');
  let seed = Number(process.env.MF_SEED || 571);
  const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
  const leaf = () => pick([1, 2, 3, 'x', null, true]);
  // Values mixing arrays, arrays of arrays and documents with numeric and plain field names.
  const val = (d) => {
    const r = rnd();
    if (d > 2 || r < 0.3) return leaf();
    if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 3) + 1 }, () => val(d + 1));
    const o = {};
    for (const k of ['0', '1', 'b']) if (rnd() < 0.5) o[k] = val(d + 1);
    return o;
  };
  const docs = Array.from({ length: 400 }, (_, i) => ({ _id: i, a: val(0) }));
  await c.insertMany(docs);
  const paths = ['a.0', 'a.1', 'a.0.b', 'a.b.0', 'a.0.0', 'a.0.1'];
  for (const p of paths) await c.createIndex({ [p]: 1 });
  const ops = [(v) => v, (v) => ({ $gt: v }), (v) => ({ $lte: v }), (v) => ({ $in: [v, leaf()] }), (v) => ({ $ne: v }),
    () => ({ $exists: rnd() < 0.5 }), (v) => ({ $elemMatch: { $eq: v } })];
  const n = Number(process.env.MF_FILTERS || 150);
  for (let i = 0; i < n; i++) {
    const f = { [pick(paths)]: pick(ops)(leaf()) };
    if (rnd() < 0.3) f[pick(['a.b', 'a.0', 'a.1'])] = pick(ops)(leaf());
    const want = (await c.find(f).hint({ $natural: 1 }).toArray()).map((d) => d._id).sort((x, y) => x - y);
    const got = (await c.find(f).toArray()).map((d) => d._id).sort((x, y) => x - y);
    assert.deepEqual(got, want, `#${i} ${JSON.stringify(f)}`);
    assert.equal(await c.countDocuments(f), want.length, `countDocuments #${i} ${JSON.stringify(f)}`);
    for (const hint of [{ [Object.keys(f)[0]]: 1 }]) {
      if (!paths.includes(Object.keys(f)[0])) continue;
      const viaHint = (await c.find(f).hint(hint).toArray()).map((d) => d._id).sort((x, y) => x - y);
      assert.deepEqual(viaHint, want, `hinted #${i} ${JSON.stringify(f)}`);
    }
  }
});

h.test('the multikey flag a positional path learns, and a validator\'s collation, survive a kill -9 and a clean restart', { timeout: 90000 }, async () => {
  const dbName = srv.freshDb('numprst').databaseName;
  let db = srv.client.db(dbName);
  await db.collection('c').createIndex({ 'a.0': 1 });
  await db.collection('c').insertMany(DOCS, { writeConcern: { w: 1, j: true } });
  await db.createCollection('v', { collation: { locale: 'en', strength: 2 }, validator: { s: { $in: ['b', 'a'] } } });
  for (const how of [{ kill9: true }, {}]) {
    await srv.server.restart(how);
    await srv.reconnect();
    db = srv.client.db(dbName);
    const c = db.collection('c');
    for (const [f, want] of CASES) assert.deepEqual(await ids(c, f), want, `${JSON.stringify(how)} ${JSON.stringify(f)}`);
    const ix = (await c.find({ 'a.0': 42 }).hint({ 'a.0': 1 }).explain()).queryPlanner.winningPlan;
    assert.match(JSON.stringify(ix), /"isMultiKey":true/, JSON.stringify(ix));
    await db.collection('v').insertOne({ s: 'A' }); // the collection's strength 2 still applies
    await h.expectCode(db.collection('v').insertOne({ s: 'c' }), 121);
  }
});
