'use strict';
// $out and $merge stream: the pipeline's output goes to the target a batch
// at a time (reading under the collection's lock, writing without it), so
// memory is one batch, not the whole output. $out still replaces its target
// atomically: any failure (memory limit, maxTimeMS, a bad document) leaves
// the old target whole and no temporary collection behind, and a temporary
// collection left by a crash is dropped at start-up. Through the Node driver.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();
const J = { writeConcern: { w: 1, j: true } };

async function filled(db, n, pad = 100) {
  const c = db.collection('src');
  const filler = 'x'.repeat(pad);
  for (let base = 0; base < n; base += 5000) {
    const docs = [];
    for (let i = base; i < Math.min(n, base + 5000); i++) docs.push({ _id: i, g: i % 7, v: (i * 7919) % 100003, pad: filler });
    await c.insertMany(docs);
  }
  return c;
}

async function tempCollections(db) {
  return (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).filter((n) => n.startsWith('tmp.agg_out.'));
}

h.test('$out of 25,000 documents (many batches) writes exactly the pipeline output, keeping the target\'s indexes', async () => {
  const db = srv.freshDb('os_big');
  const src = await filled(db, 25000);
  await db.collection('dst').insertOne({ _id: 'old' });
  await db.collection('dst').createIndex({ v: 1 });
  const r = await src.aggregate([{ $match: { g: { $ne: 3 } } }, { $project: { pad: 0 } }, { $out: 'dst' }]).toArray();
  assert.deepEqual(r, []);
  const dst = db.collection('dst');
  const want = [...Array(25000).keys()].filter((i) => i % 7 !== 3).length;
  assert.equal(await dst.countDocuments(), want);
  assert.equal(await dst.countDocuments({ _id: 'old' }), 0);
  assert.equal(await dst.countDocuments({ pad: { $exists: true } }), 0);
  assert.ok((await dst.indexes()).some((i) => i.name === 'v_1'));
  assert.deepEqual(await tempCollections(db), []);
  // $out onto the collection it reads replaces it with its own output.
  await src.aggregate([{ $match: { g: 0 } }, { $out: 'src' }]).toArray();
  assert.equal(await src.countDocuments(), [...Array(25000).keys()].filter((i) => i % 7 === 0).length);
});

h.test('a failing $out leaves the old target whole and no temporary collection: 292, maxTimeMS, a bad document', async () => {
  const db = srv.freshDb('os_fail');
  const src = await filled(db, 20000);
  await db.collection('dst').insertMany([{ _id: 1, keep: true }, { _id: 2, keep: true }]);
  await srv.client.db('admin').command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 100000 });
  try {
    await assert.rejects(src.aggregate([{ $sort: { v: 1 } }, { $out: 'dst' }], { allowDiskUse: false }).toArray(), (e) => e.code === 292);
  } finally {
    await srv.client.db('admin').command({ setParameter: 1, internalQueryMaxBlockingSortMemoryUsageBytes: 104857600 });
  }
  await assert.rejects(
    db.command({ aggregate: 'src', pipeline: [{ $addFields: { w: { $range: [0, 200] } } }, { $out: 'dst' }], cursor: {}, maxTimeMS: 1 }),
    (e) => e.code === 50);
  // The failing document comes after several full batches have been written to the temporary collection.
  await assert.rejects(
    src.aggregate([{ $sort: { _id: 1 } }, { $addFields: { _id: { $cond: [{ $eq: ['$_id', 15000] }, { $literal: [1, 2] }, '$_id'] } } }, { $out: 'dst' }]).toArray());
  assert.deepEqual(await db.collection('dst').find().sort({ _id: 1 }).toArray(), [{ _id: 1, keep: true }, { _id: 2, keep: true }]);
  assert.deepEqual(await tempCollections(db), []);
});

h.test('$out and $merge write only documents the target\'s validator accepts (121 DocumentValidationFailure), unless bypassDocumentValidation: true, as mongod', async () => {
  const db = srv.freshDb('os_valid');
  const validator = { v: { $type: 'string' } };
  await db.createCollection('val', { validator });
  await db.collection('val').insertOne({ _id: 'old', v: 'kept' });
  await db.createCollection('val2', { validator });
  await db.collection('val2').insertOne({ _id: 1, v: 'str' });
  const src = db.collection('vsrc');
  await src.insertMany([{ _id: 1, v: 1 }, { _id: 2, v: 2 }]);
  const code = (p) => p.then(() => null, (e) => e.code);

  // $out: refused, the old contents stay; with bypass the documents go in.
  assert.equal(await code(src.aggregate([{ $out: 'val' }]).toArray()), 121);
  assert.deepEqual(await db.collection('val').find().toArray(), [{ _id: 'old', v: 'kept' }]);
  assert.deepEqual(await tempCollections(db), []);
  await src.aggregate([{ $out: 'val' }], { bypassDocumentValidation: true }).toArray();
  assert.equal(await db.collection('val').countDocuments(), 2);
  assert.deepEqual((await db.listCollections({ name: 'val' }).toArray())[0].options.validator, validator, '$out keeps the validator');

  // $merge: an insert (_id 2) and a merge into a matching document (_id 1) are both checked.
  assert.equal(await code(src.aggregate([{ $match: { _id: 2 } }, { $merge: { into: 'val2' } }]).toArray()), 121);
  assert.equal(await code(src.aggregate([{ $match: { _id: 1 } }, { $merge: { into: 'val2' } }]).toArray()), 121);
  assert.deepEqual(await db.collection('val2').find().toArray(), [{ _id: 1, v: 'str' }]);
  // A document that passes goes in; bypass lets the others in.
  await db.collection('vsrc').insertOne({ _id: 3, v: 'fine' });
  await src.aggregate([{ $match: { _id: 3 } }, { $merge: { into: 'val2' } }]).toArray();
  await src.aggregate([{ $match: { _id: { $lt: 3 } } }, { $merge: { into: 'val2' } }], { bypassDocumentValidation: true }).toArray();
  assert.deepEqual(await db.collection('val2').find().sort({ _id: 1 }).toArray(), [{ _id: 1, v: 1 }, { _id: 2, v: 2 }, { _id: 3, v: 'fine' }]);
});

h.test('$merge whenMatched: "fail" answers mongod\'s duplicate key error with $merge\'s context, keyPattern and keyValue, on _id and on a unique field', async () => {
  const db = srv.freshDb('os_mfail');
  await db.collection('t').insertMany([{ _id: 1, k: 'a' }]);
  await db.collection('t').createIndex({ k: 1 }, { unique: true });
  const src = db.collection('s');
  await src.insertMany([{ _id: 1, k: 'b' }, { _id: 2, k: 'a' }]);
  const e1 = await src.aggregate([{ $match: { _id: 1 } }, { $merge: { into: 't', whenMatched: 'fail' } }]).toArray().then(() => null, (e) => e);
  assert.equal(e1.code, 11000);
  assert.equal(e1.errmsg, `PlanExecutor error during aggregation :: caused by :: $merge failed due to a DuplicateKey error :: caused by :: E11000 duplicate key error collection: ${db.databaseName}.t index: _id_ dup key: { _id: 1 }`);
  assert.deepEqual([e1.errorResponse.keyPattern, e1.errorResponse.keyValue], [{ _id: 1 }, { _id: 1 }]);
  const e2 = await src.aggregate([{ $match: { _id: 2 } }, { $project: { _id: 0 } }, { $merge: { into: 't', on: 'k', whenMatched: 'fail' } }]).toArray().then(() => null, (e) => e);
  assert.equal(e2.code, 11000);
  assert.match(e2.errmsg, /^PlanExecutor error during aggregation :: caused by :: \$merge failed due to a DuplicateKey error :: caused by :: E11000 duplicate key error collection: \S+\.t index: k_1 dup key: \{ k: "a" \}$/);
  assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 1, k: 'a' }], 'nothing written');
});

h.test('$merge streams into its target, and into the collection it reads (then it collects first)', async () => {
  const db = srv.freshDb('os_merge');
  const src = await filled(db, 12000, 10);
  await db.collection('tot').insertOne({ _id: 0, seen: 'before' });
  await src.aggregate([{ $project: { g: 1 } }, { $merge: { into: 'tot', whenMatched: 'merge', whenNotMatched: 'insert' } }]).toArray();
  assert.equal(await db.collection('tot').countDocuments(), 12000);
  assert.deepEqual(await db.collection('tot').findOne({ _id: 0 }), { _id: 0, seen: 'before', g: 0 });
  await src.aggregate([{ $match: { g: 2 } }, { $project: { twice: { $multiply: ['$v', 2] } } }, { $merge: { into: 'src', whenMatched: 'merge' } }]).toArray();
  assert.equal(await src.countDocuments(), 12000);
  assert.equal(await src.countDocuments({ twice: { $exists: true } }), [...Array(12000).keys()].filter((i) => i % 7 === 2).length);
  const d = await src.findOne({ _id: 9 });
  assert.equal(d.twice, d.v * 2);
  // Through a view: the view's pipeline runs first.
  await db.createCollection('g1', { viewOn: 'src', pipeline: [{ $match: { g: 1 } }] });
  await db.collection('g1').aggregate([{ $group: { _id: 'g1', n: { $sum: 1 } } }, { $merge: { into: 'stats' } }]).toArray();
  assert.equal((await db.collection('stats').findOne({ _id: 'g1' })).n, [...Array(12000).keys()].filter((i) => i % 7 === 1).length);
});

h.test('$merge on _id into a collated collection matches as the aggregation\'s collation does: under the target\'s (en, strength 2) "abc" merges into "ABC"; under simple it does not match and the insert is a duplicate key, as mongod', async () => {
  const db = srv.freshDb('os_merge_coll');
  const ci = { locale: 'en', strength: 2 };
  await db.createCollection('t', { collation: ci });
  await db.collection('t').insertOne({ _id: 'ABC', v: 1 });
  await db.collection('s').insertOne({ _id: 'abc', w: 2 });
  await db.collection('s').aggregate([{ $merge: { into: 't', whenMatched: 'merge', whenNotMatched: 'insert' } }], { collation: ci }).toArray();
  assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 'ABC', v: 1, w: 2 }]);
  await assert.rejects(db.collection('s').aggregate([{ $merge: { into: 't', whenMatched: 'merge', whenNotMatched: 'insert' } }]).toArray(),
    (e) => e.code === 11000);
  assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 'ABC', v: 1, w: 2 }]);
  // The simple-collation fast path still finds exact matches.
  await db.collection('s2').insertOne({ _id: 'x', v: 1 });
  await db.collection('s').aggregate([{ $set: { _id: 'x', w: 3 } }, { $merge: { into: 's2', whenMatched: 'merge' } }]).toArray();
  assert.deepEqual(await db.collection('s2').find().toArray(), [{ _id: 'x', v: 1, w: 3 }]);
});

h.test('a temporary $out collection left by a crash is dropped at start-up', async () => {
  const dbName = srv.freshDb('os_crash').databaseName;
  let db = srv.client.db(dbName);
  await db.createCollection('tmp.agg_out.0123456789abcdef01234567');
  await db.collection('tmp.agg_out.0123456789abcdef01234567').insertOne({ _id: 1 }, J);
  await db.collection('kept').insertOne({ _id: 1 }, J);
  await srv.server.restart({ kill9: true });
  await srv.reconnect();
  db = srv.client.db(dbName);
  assert.deepEqual(await tempCollections(db), []);
  assert.equal(await db.collection('kept').countDocuments(), 1);
});

h.test('$merge whenMatched with a pipeline updates the matching document with $$new and let variables (incremental roll-ups); its errors as mongod', async () => {
  const db = srv.freshDb('mergepl');
  const src = db.collection('src');
  const out = db.collection('totals');
  await src.insertMany([{ g: 'a', v: 1 }, { g: 'a', v: 2 }, { g: 'b', v: 5 }]);
  const rollup = [
    { $group: { _id: '$g', n: { $sum: 1 }, total: { $sum: '$v' } } },
    { $merge: { into: 'totals', whenMatched: [{ $set: { n: { $add: ['$n', '$$new.n'] }, total: { $add: ['$total', '$$new.total'] } } }], whenNotMatched: 'insert' } },
  ];
  await src.aggregate(rollup).toArray();
  assert.deepEqual(await out.find().sort({ _id: 1 }).toArray(), [{ _id: 'a', n: 2, total: 3 }, { _id: 'b', n: 1, total: 5 }], 'first run: inserted');
  await src.aggregate(rollup).toArray();
  assert.deepEqual(await out.find().sort({ _id: 1 }).toArray(), [{ _id: 'a', n: 4, total: 6 }, { _id: 'b', n: 2, total: 10 }], 'second run: added to');
  // let variables, evaluated against the incoming document; $replaceWith keeps the target's _id.
  await src.aggregate([
    { $group: { _id: '$g', top: { $max: '$v' } } },
    { $merge: { into: 'totals', let: { best: '$top' }, whenMatched: [{ $replaceWith: { n: '$n', best: '$$best' } }] } },
  ]).toArray();
  assert.deepEqual(await out.find().sort({ _id: 1 }).toArray(), [{ _id: 'a', n: 4, best: 2 }, { _id: 'b', n: 2, best: 5 }]);
  await h.expectCode(src.aggregate([{ $group: { _id: '$g' } }, { $merge: { into: 'totals', whenMatched: [{ $set: { _id: 'x' } }] } }]).toArray(), 66);
  await h.expectCode(src.aggregate([{ $merge: { into: 'totals', whenMatched: [{ $match: {} }] } }]).toArray(), 72,
    /^\$match is not allowed to be used within an update$/);
  await h.expectCode(src.aggregate([{ $merge: { into: 'totals', whenMatched: [{ $set: { a: '$$nope' } }] } }]).toArray(), 17276);
  assert.deepEqual(await out.find().sort({ _id: 1 }).toArray(), [{ _id: 'a', n: 4, best: 2 }, { _id: 'b', n: 2, best: 5 }], 'the failed runs changed nothing');
});

h.test('$out and $merge write a top-level Timestamp(0, 0) as mongod\'s insert, replacement or $set upsert does: filled by $out, whenMatched replace and fail; kept by merge and keepExisting', async () => {
  const { Timestamp } = require('mongodb');
  const isZero = (ts) => ts.high === 0 && ts.low === 0;
  const db = srv.freshDb('outemptyts');
  await db.collection('s').insertOne({ _id: 1, a: 1 });
  await db.collection('s').updateOne({ _id: 1 }, { $set: { t: new Timestamp({ t: 0, i: 0 }) } }); /* $set keeps it */
  assert.ok(isZero((await db.collection('s').findOne()).t));
  await db.collection('s').aggregate([{ $out: 'o' }]).toArray();
  assert.ok(!isZero((await db.collection('o').findOne()).t), '$out');
  // Not matched: the default (merge) upserts {$set: doc} and keepExisting {$setOnInsert: doc}, which keep it;
  // replace upserts the document as a replacement and fail inserts it, which fill it (review helper-114).
  await db.collection('s').aggregate([{ $merge: { into: 'm' } }]).toArray();
  assert.ok(isZero((await db.collection('m').findOne()).t), '$merge inserting in merge mode');
  await db.collection('s').aggregate([{ $merge: { into: 'mk', whenMatched: 'keepExisting' } }]).toArray();
  assert.ok(isZero((await db.collection('mk').findOne()).t), '$merge inserting in keepExisting mode');
  await db.collection('s').aggregate([{ $merge: { into: 'mr', whenMatched: 'replace' } }]).toArray();
  assert.ok(!isZero((await db.collection('mr').findOne()).t), '$merge inserting in replace mode');
  await db.collection('s').aggregate([{ $merge: { into: 'mf', whenMatched: 'fail' } }]).toArray();
  assert.ok(!isZero((await db.collection('mf').findOne()).t), '$merge inserting in fail mode');
  await db.collection('m2').insertOne({ _id: 1, old: true });
  await db.collection('s').aggregate([{ $merge: { into: 'm2', whenMatched: 'replace' } }]).toArray();
  const r = await db.collection('m2').findOne();
  assert.ok(!isZero(r.t) && r.old === undefined, '$merge replacing');
  await db.collection('m3').insertOne({ _id: 1, old: true });
  await db.collection('s').aggregate([{ $merge: { into: 'm3', whenMatched: 'merge' } }]).toArray();
  assert.ok(isZero((await db.collection('m3').findOne()).t), '$merge merging ($set) keeps it');
});
