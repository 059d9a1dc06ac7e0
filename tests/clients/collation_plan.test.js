'use strict';
/*
 * An index of another collation than the query's (issue 13: no operation's
 * cost grows with anything but its own work). Such an index keeps its own
 * sort keys for strings, so it cannot answer a string predicate or give a
 * string order; but numbers, dates, ObjectIds, booleans and null compare
 * alike under every collation, and mongod uses the index for them
 * (QueryPlannerIXSelect's collation check, getFieldsWithStringBounds for the
 * sort, IDHACK for a non-collatable _id). Until session 57 mayfly skipped
 * such an index whatever the predicate: find({_id: 1}).collation({locale:
 * 'fr'}) read the whole collection, and with notablescan on it was refused.
 * Every answer here is compared with a collection scan's under the same
 * collation.
 */
const assert = require('node:assert/strict');
const { ObjectId, MaxKey } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const FR = { locale: 'fr' };
const FR1 = { locale: 'fr', strength: 1 };

function stages(plan) {
  const out = [];
  for (let s = plan; s; s = s.inputStage) out.push(s.stage);
  return out;
}

async function planOf(cursor) {
  const e = await cursor.explain('executionStats');
  return { stages: stages(e.queryPlanner.winningPlan), stats: e.executionStats };
}

async function seeded(tag, createOpts) {
  const db = srv.freshDb(tag);
  if (createOpts) await db.createCollection('c', createOpts);
  const c = db.collection('c');
  const docs = [];
  const vals = [1, 2, 5, 5.5, 7, -1, 'a', 'A', 'b', 'B', 'é', 'e', 'E', null, new Date(5), true,
    new ObjectId('000000000000000000000001'), { x: 'a' }, { x: 1 }];
  for (let i = 0; i < 200; i++) docs.push({ _id: i, a: vals[i % vals.length], b: vals[(i * 7) % vals.length], n: i % 10 });
  await c.insertMany(docs);
  return { db, c };
}

/* The same query with an index plan and as a collection scan, under one collation: equal answers. */
async function sameAsScan(c, filter, collation, { sort, label } = {}) {
  const opts = collation ? { collation } : {};
  let cur = c.find(filter, opts);
  let scan = c.find(filter, opts).hint({ $natural: 1 });
  if (sort) {
    cur = cur.sort(sort);
    scan = scan.sort(sort);
  }
  const got = await cur.toArray();
  const want = await scan.toArray();
  if (sort) assert.deepEqual(got, want, label || JSON.stringify(filter));
  else assert.deepEqual(got.map((d) => d._id).sort((x, y) => x - y), want.map((d) => d._id).sort((x, y) => x - y),
    label || JSON.stringify(filter));
  assert.equal(await c.countDocuments(filter, opts), want.length, `countDocuments ${JSON.stringify(filter)}`);
  return got;
}

h.test('a query under a collation uses an index of another collation for a numeric, date, ObjectId or null predicate', async () => {
  const { c } = await seeded('cpnum');
  await c.createIndex({ a: 1 });
  for (const f of [{ a: 5 }, { a: { $gt: 1, $lt: 7 } }, { a: { $in: [1, 7, null] } }, { a: new Date(5) },
    { a: new ObjectId('000000000000000000000001') }, { a: true }, { a: { $gte: 2 }, b: 'a' }]) {
    await sameAsScan(c, f, FR1);
    const p = await planOf(c.find(f).collation(FR1));
    assert.ok(p.stages.includes('IXSCAN'), `${JSON.stringify(f)}: ${p.stages}`);
  }
  // A point on the index reads its keys only.
  const p = await planOf(c.find({ a: 5 }).collation(FR));
  assert.equal(p.stats.totalKeysExamined, (await c.countDocuments({ a: 5 })));
  // The string part of a filter is checked on the documents under the query's collation: 'b' matches 'B' at strength 1.
  const got = await c.find({ a: { $gte: 1 }, b: 'b' }).collation(FR1).toArray();
  assert.ok(got.length > 0 && got.every((d) => d.b === 'B'), JSON.stringify(got));
  assert.equal(await c.countDocuments({ a: { $gte: 1 }, b: 'b' }), 0);
});

h.test('a string, document or regex predicate never takes bounds from an index of another collation', async () => {
  const { c } = await seeded('cpstr');
  await c.createIndex({ a: 1 });
  for (const f of [{ a: 'a' }, { a: { $gt: 'a' } }, { a: { $in: ['b', 5] } }, { a: { x: 'A' } }, { a: /^a/ },
    { a: { $ne: 'e' } }, { a: { $type: 'string' } }]) {
    const got = await sameAsScan(c, f, FR1);
    const p = await planOf(c.find(f).collation(FR1));
    assert.ok(!p.stages.includes('IXSCAN'), `${JSON.stringify(f)}: ${p.stages}`);
    if (JSON.stringify(f) === '{"a":"a"}') assert.ok(got.some((d) => d.a === 'A'), 'strength 1: a matches A');
  }
  // Hinted, the index is scanned whole and the filter checked under the query's collation.
  const want = await c.find({ a: 'e' }).collation(FR1).hint({ $natural: 1 }).toArray();
  const got = await c.find({ a: 'e' }).collation(FR1).hint({ a: 1 }).toArray();
  assert.deepEqual(got.map((d) => d._id).sort((x, y) => x - y), want.map((d) => d._id).sort((x, y) => x - y));
  assert.ok(want.length > 0 && want.some((d) => d.a === 'é'));
});

h.test('an index of another collation gives its order only where the bounds hold no strings', async () => {
  const { c } = await seeded('cpsort');
  await c.createIndex({ a: 1 });
  // Numbers only: the index order, no SORT stage.
  await sameAsScan(c, { a: { $gte: 1 } }, FR, { sort: { a: 1, _id: 1 } });
  let p = await planOf(c.find({ a: { $gte: 1 } }).sort({ a: 1 }).collation(FR));
  assert.ok(!p.stages.includes('SORT') && p.stages.includes('IXSCAN'), String(p.stages));
  // Strings in the scanned range: sorted under the query's collation by a SORT stage, never in the index's order.
  const got = await sameAsScan(c, { n: { $gte: 0 } }, FR, { sort: { a: 1, _id: 1 } });
  const strs = got.map((d) => d.a).filter((v) => typeof v === 'string');
  const firstE = strs.indexOf('e');
  assert.ok(firstE >= 0 && strs.indexOf('é') > firstE && strs.indexOf('E') > firstE && strs.indexOf('b') < firstE,
    `French order of strings: ${strs}`);
  p = await planOf(c.find({}).sort({ a: 1 }).collation(FR));
  assert.ok(p.stages.includes('SORT'), String(p.stages));
  p = await planOf(c.find({ a: { $ne: 5 } }).sort({ a: 1 }).collation(FR));
  assert.ok(p.stages.includes('SORT'), String(p.stages));
  // min / max over an index of another collation: its range holds strings, so the query's order is a SORT's.
  const mm = await c.find({}).collation(FR1).hint({ a: 1 }).min({ a: 0 }).max({ a: new MaxKey() }).sort({ a: 1 }).toArray();
  const mmStrs = mm.map((d) => d.a).filter((v) => typeof v === 'string');
  assert.ok(mmStrs.length > 5);
  for (let i = 1; i < mmStrs.length; i++)
    assert.ok(mmStrs[i - 1].localeCompare(mmStrs[i], 'fr', { sensitivity: 'base' }) <= 0, `strength 1 order: ${mmStrs}`);
});

h.test('_id equality under another collation than the _id index\'s is one lookup; a string _id is not', async () => {
  const db = srv.freshDb('cpid');
  const c = db.collection('c');
  const docs = [];
  for (let i = 0; i < 300; i++) docs.push({ _id: i, v: i });
  docs.push({ _id: 'abc', v: 'lower' }, { _id: 'ABC', v: 'upper' });
  await c.insertMany(docs);
  let p = await planOf(c.find({ _id: 7 }).collation(FR));
  assert.equal(p.stats.totalDocsExamined, 1);
  assert.equal(p.stats.totalKeysExamined, 1);
  assert.deepEqual(await c.findOne({ _id: 7 }, { collation: FR1 }), { _id: 7, v: 7 });
  // A string _id: both documents match at strength 1, which a lookup of one key would miss.
  const got = await c.find({ _id: 'abc' }).collation(FR1).toArray();
  assert.deepEqual(got.map((d) => d.v).sort(), ['lower', 'upper']);
  p = await planOf(c.find({ _id: 'abc' }).collation(FR1));
  assert.ok(p.stats.totalDocsExamined > 1, JSON.stringify(p.stats));
  // Updates and deletes take the same lookup.
  assert.equal((await c.updateOne({ _id: 8 }, { $set: { w: 1 } }, { collation: FR })).modifiedCount, 1);
  assert.equal((await c.deleteOne({ _id: 9 }, { collation: FR })).deletedCount, 1);
  assert.equal(await c.countDocuments({ _id: { $in: [8, 9] } }, { collation: FR }), 1);
});

h.test('a collection with a default collation: a simple-collation query uses its indexes for numbers', async () => {
  const { c } = await seeded('cpdef', { collation: { locale: 'en', strength: 2 } });
  await c.createIndex({ a: 1 });
  const simple = { locale: 'simple' };
  for (const f of [{ a: 5 }, { a: { $lt: 5 } }, { _id: 12 }, { a: 'a' }, { a: { $in: ['A', 2] } }]) {
    await sameAsScan(c, f, simple);
    await sameAsScan(c, f, null);
  }
  let p = await planOf(c.find({ a: { $lt: 5 } }).collation(simple));
  assert.ok(p.stages.includes('IXSCAN'), String(p.stages));
  p = await planOf(c.find({ a: 'a' }).collation(simple));
  assert.ok(!p.stages.includes('IXSCAN'), String(p.stages));
  // Under the simple collation 'a' does not match 'A'; under the default it does.
  assert.ok((await c.find({ a: 'a' }).collation(simple).toArray()).every((d) => d.a === 'a'));
  assert.ok((await c.find({ a: 'a' }).toArray()).some((d) => d.a === 'A'));
});

h.test('notablescan: a numeric predicate under another collation runs on the index; a string one is refused', async () => {
  const { db, c } = await seeded('cpnts');
  await c.createIndex({ a: 1 });
  const admin = srv.client.db('admin');
  await admin.command({ setParameter: 1, notablescan: true });
  try {
    assert.deepEqual((await c.findOne({ _id: 3 }, { collation: FR })).a, 5.5);
    assert.equal(await c.countDocuments({ a: 5 }, { collation: FR }), await c.countDocuments({ a: 5 }));
    await h.expectCode(c.find({ a: 'a' }).collation(FR).toArray(), 291);
    assert.ok(db);
  } finally {
    await admin.command({ setParameter: 1, notablescan: false });
  }
});

h.test('seeded random filters under collations: an index of any collation answers as the collection scan does', async () => {
  const { c } = await seeded('cprand');
  await c.createIndex({ a: 1 });
  await c.createIndex({ b: 1, a: 1 }, { collation: FR1 });
  await c.createIndex({ n: 1, a: -1 }, { collation: { locale: 'en' } });
  let seed = Number(process.env.MF_SEED || 57);
  const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
  const VALS = [1, 2, 5, 5.5, 7, 'a', 'A', 'é', 'e', null, new Date(5), true];
  const OPS = [(v) => v, (v) => ({ $gt: v }), (v) => ({ $lte: v }), (v) => ({ $in: [v, pick(VALS)] }), (v) => ({ $ne: v })];
  const COLLS = [null, FR, FR1, { locale: 'en' }, { locale: 'simple' }];
  for (let i = 0; i < Number(process.env.MF_FILTERS || 120); i++) {
    const f = {};
    for (const k of ['a', 'b', 'n']) if (rnd() < 0.6) f[k] = pick(OPS)(k === 'n' ? Math.floor(rnd() * 10) : pick(VALS));
    const sort = rnd() < 0.4 ? { [pick(['a', 'b', 'n'])]: pick([1, -1]), _id: 1 } : undefined;
    await sameAsScan(c, f, pick(COLLS), { sort, label: `#${i} ${JSON.stringify(f)} ${JSON.stringify(sort)}` });
  }
});

h.test('a partial index serves a query only under its own collation: another would match documents its filter kept out', async () => {
  const db = srv.freshDb('cppart');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, s: 'a', a: 1 }, { _id: 2, s: 'A', a: 1 }, { _id: 3, s: 'b', a: 1 }]);
  await c.createIndex({ a: 1 }, { partialFilterExpression: { s: 'a' } });
  await c.createIndex({ a: -1 }, { partialFilterExpression: { s: 'a' }, collation: FR1, name: 'a_fr1' });
  for (const coll of [null, FR1, FR, { locale: 'simple' }]) {
    for (const f of [{ s: 'a', a: 1 }, { s: 'A', a: 1 }, { s: 'a', a: { $gte: 1 } }]) {
      const got = await sameAsScan(c, f, coll, { label: `${JSON.stringify(f)} under ${JSON.stringify(coll)}` });
      if (coll === FR1) assert.equal(got.length, 2, JSON.stringify(f));
    }
  }
  // Under its own collation the partial index answers.
  const p = await planOf(c.find({ s: 'a', a: 1 }).collation(FR1));
  assert.ok(p.stages.includes('IXSCAN'), String(p.stages));
});

h.test('a partial filter is matched under its index\'s collation, on insert, update, build, validate and TTL', async () => {
  const db = srv.freshDb('cppfc');
  const c = db.collection('c');
  await c.insertOne({ _id: 1, s: 'A', a: 1 }); // before the build
  await c.createIndex({ a: 1 }, { partialFilterExpression: { s: 'a' }, collation: FR1 });
  await c.insertOne({ _id: 2, s: 'A', a: 1 }); // after it, under the collection's (simple) collation
  await c.insertOne({ _id: 3, s: 'b', a: 1 });
  await c.updateOne({ _id: 3 }, { $set: { s: 'À' } }); // into the index: 'À' is 'a' at strength 1
  const viaIndex = await c.find({ s: 'a', a: 1 }).collation(FR1).hint({ a: 1 }).toArray();
  assert.deepEqual(viaIndex.map((d) => d._id).sort(), [1, 2, 3]);
  const p = await planOf(c.find({ s: 'a', a: 1 }).collation(FR1));
  assert.ok(p.stages.includes('IXSCAN'), String(p.stages));
  assert.equal(p.stats.totalKeysExamined, 3);
  const v = await db.command({ validate: 'c', full: true });
  assert.equal(v.valid, true, JSON.stringify(v.errors));
  // A TTL index with a collation and a partial filter deletes every document it holds.
  const t = db.collection('t');
  await t.createIndex({ at: 1 }, { expireAfterSeconds: 0, partialFilterExpression: { s: 'a' }, collation: FR1 });
  const past = new Date(Date.now() - 60000);
  await t.insertMany([{ _id: 1, s: 'A', at: past }, { _id: 2, s: 'a', at: past }, { _id: 3, s: 'b', at: past }]);
  await h.waitFor(async () => (await t.countDocuments({})) === 1, 'the TTL monitor left a document its index holds', 20000);
  assert.deepEqual(await t.find().toArray(), [{ _id: 3, s: 'b', at: past }]);
  // A $in (or $or) in the filter is compiled under the index's collation too, whose order searches its list.
  const p2 = db.collection('p2');
  const five = (base) => ['B', 'b', 'A', 'a', 'c'].map((s, i) => ({ _id: base + i, s, t: i + 1 }));
  await p2.insertMany(five(0));
  await p2.createIndex({ t: 1 }, { name: 'pin', collation: { locale: 'en', strength: 1 }, partialFilterExpression: { s: { $in: ['a', 'B', 'c'] } } });
  await p2.insertMany(five(10));
  const q = { s: { $in: ['a', 'B', 'c'] }, t: { $gt: 0 } };
  const en1 = { locale: 'en', strength: 1 };
  assert.equal((await p2.find(q).collation(en1).hint({ $natural: 1 }).toArray()).length, 10);
  assert.equal((await p2.find(q).collation(en1).hint('pin').toArray()).length, 10);
  const v2 = await db.command({ validate: 'p2', full: true });
  assert.equal(v2.keysPerIndex.pin, 10, JSON.stringify(v2.keysPerIndex));
});

h.test('a validator compares under the collection\'s collation, whatever a write\'s own', async () => {
  const db = srv.freshDb('cpval');
  // Simple collection: an update under strength 1 still has 'A' refused by {$in: ['a', 'b']}.
  await db.createCollection('s', { validator: { status: { $in: ['a', 'b'] } } });
  const s = db.collection('s');
  await s.insertOne({ _id: 1, status: 'a' });
  await h.expectCode(s.updateOne({ _id: 1 }, { $set: { status: 'A' } }, { collation: FR1 }), 121);
  await h.expectCode(s.insertOne({ _id: 2, status: 'B' }), 121);
  assert.equal((await s.updateOne({ _id: 1 }, { $set: { status: 'b' } }, { collation: FR1 })).modifiedCount, 1);
  // A collection of strength 2: its validator's $in takes any case, the list in any order.
  await db.createCollection('ci', { collation: { locale: 'en', strength: 2 }, validator: { status: { $in: ['c', 'B', 'a', 'idle'] } } });
  const ci = db.collection('ci');
  for (const [i, v] of ['A', 'b', 'C', 'IDLE', 'Idle'].entries()) await ci.insertOne({ _id: i, status: v });
  await h.expectCode(ci.insertOne({ _id: 9, status: 'd' }), 121);
  // Under a simple collation of its own, the write is still judged by the collection's.
  await ci.updateOne({ _id: 0 }, { $set: { status: 'a' } }, { collation: { locale: 'simple' } });
  assert.equal((await ci.findOne({ _id: 0 })).status, 'a');
  assert.equal(await ci.countDocuments({}), 5);
});

h.test('$jsonSchema compares without collation (enum, uniqueItems), in queries and validators, as mongod', async () => {
  const db = srv.freshDb('cpjs');
  const S1 = { locale: 'en', strength: 1 };
  await db.createCollection('c', { collation: S1 });
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 'str', l: ['x', 'X'] }, { _id: 2, a: 'STR', l: ['x', 'y'] }]);
  assert.deepEqual((await c.find({ $jsonSchema: { properties: { a: { enum: ['STR'] } } } }).toArray()).map((d) => d._id), [2]);
  assert.deepEqual((await c.find({ $jsonSchema: { properties: { l: { uniqueItems: true } } } }).toArray()).map((d) => d._id), [1, 2]);
  // The collection's collation still applies to the rest of the filter.
  assert.equal(await c.countDocuments({ a: 'str', $jsonSchema: { required: ['a'] } }), 2);
  await db.createCollection('v', { collation: S1, validator: { $jsonSchema: { properties: { a: { enum: ['STR'] } } } } });
  const e = await h.expectCode(db.collection('v').insertOne({ a: 'str' }), 121);
  // errInfo says why, compared the same way: the enum.
  assert.match(JSON.stringify(e.errInfo), /"operatorName":"enum"/, JSON.stringify(e.errInfo));
  await db.collection('v').insertOne({ a: 'STR' });
});
