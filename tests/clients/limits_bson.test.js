'use strict';
/*
 * The 16 MiB limits of documents in flight (moved out of limits.test.js,
 * whose other tests judge file and connection limits and run alone): what a
 * pipeline, a projection, a cursor batch and $out / $merge build
 * past 16 MiB + 16 KiB, each answered with mongod's code and message while
 * the connection and server carry on.
 */
const assert = require('node:assert/strict');
const { BSON } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

async function stillServing() {
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1);
}

/*
 * Documents a pipeline or a projection builds past 16 MiB + 16 KiB (mongod's
 * BSONObjMaxInternalSize, 16793600) fail with 10334 BSONObjectTooLarge when
 * they leave the pipeline, worded as mongod's BSONObj size check (with the
 * context mongod's aggregate and find add to what their executor throws); inside the
 * pipeline they may be larger. A cursor batch holds at most 16 MiB (its
 * first document always goes in), so no reply comes near maxMessageSizeBytes.
 */
const MB = 1024 * 1024;
const TOO_LARGE = (size, first, during = 'PlanExecutor error during aggregation') => new RegExp(`^${during} :: caused by :: BSONObj size: ${size === undefined ? '\\d+ \\(0x[0-9A-F]+\\)' : `${size} \\(0x${size.toString(16).toUpperCase()}\\)`}` +
  ` is invalid\\. Size must be between 0 and 16793600\\(16MB\\) First element: ${first}$`);

h.test('pipeline output over 16 MiB + 16 KiB is 10334 BSONObjectTooLarge from $group, $lookup, $project, $addFields, $replaceRoot, $facet; larger documents inside the pipeline are fine', { timeout: 120000 }, async () => {
  const db = srv.freshDb('bigout');
  const c = db.collection('c');
  const s = 'x'.repeat(4 * MB);
  await c.insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i, b: s })));
  const tooLarge = async (pipeline, first, what) => {
    await assert.rejects(c.aggregate(pipeline).toArray(), (e) => {
      assert.equal(e.code, 10334, `${what}: ${e.message}`);
      assert.equal(e.codeName, 'BSONObjectTooLarge');
      assert.match(e.message, TOO_LARGE(undefined, first), what);
      return true;
    });
  };
  const five = ['$b', '$b', '$b', '$b', '$b'];
  await tooLarge([{ $group: { _id: null, all: { $push: '$b' } } }], '_id: null', '$group $push');
  await tooLarge([{ $limit: 1 }, { $lookup: { from: 'c', pipeline: [], as: 'all' } }], '_id: 0', '$lookup');
  await tooLarge([{ $limit: 1 }, { $lookup: { from: 'c', localField: '_id', foreignField: 'x', as: 'none' } },
    { $project: { a: five } }], '_id: 0', '$project');
  await tooLarge([{ $limit: 1 }, { $addFields: { a: five } }], '_id: 0', '$addFields');
  await tooLarge([{ $limit: 1 }, { $replaceRoot: { newRoot: { k: 'key', a: five } } }], 'k: "key"', '$replaceRoot');
  await tooLarge([{ $facet: { all: [] } }], 'all: \\[ .*', '$facet');
  await tooLarge([{ $group: { _id: null, all: { $push: '$$ROOT' } } }, { $replaceRoot: { newRoot: { s: 'x'.repeat(200), all: '$all' } } }],
    `s: "${'x'.repeat(150)}\\.\\.\\."`, 'a long first string is cut as mongod cuts it');
  // 20 MB inside the pipeline, a small document out of it: as mongod, no error.
  assert.deepEqual(await c.aggregate([{ $group: { _id: null, all: { $push: '$b' } } }, { $project: { n: { $size: '$all' } } }]).toArray(),
    [{ _id: null, n: 5 }]);
  assert.deepEqual(await c.aggregate([{ $limit: 1 }, { $addFields: { a: five } }, { $project: { n: { $size: '$a' } } }]).toArray(),
    [{ _id: 0, n: 5 }]);
  // 60 MB: was a 62 MB reply past maxMessageSizeBytes (48000000); now the same error, and the connection carries on.
  await c.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: 10 + i, b: s })));
  await tooLarge([{ $group: { _id: null, all: { $push: '$b' } } }], '_id: null', '$group of 60 MB');
  await tooLarge([{ $sort: { _id: 1 } }, { $group: { _id: null, all: { $push: '$b' } } }], '_id: null', 'materialised $group of 60 MB');
  assert.equal(await c.countDocuments(), 15);
  await stillServing();
});

h.test('exactly 16793600 bytes leave a pipeline; 16793601 are 10334 with the size in decimal and hex', { timeout: 60000 }, async () => {
  const c = srv.freshDb('edge').collection('c');
  const L = 8000000;
  await c.insertOne({ _id: 1, a: 'a'.repeat(L) });
  // {_id: int32, a: string L, b: string M} is 30 + L + M bytes.
  const M = 16793600 - 30 - L;
  const [d] = await c.aggregate([{ $project: { a: 1, b: { $literal: 'b'.repeat(M) } } }]).toArray();
  assert.equal(BSON.calculateObjectSize(d), 16793600);
  await assert.rejects(c.aggregate([{ $project: { a: 1, b: { $literal: 'b'.repeat(M + 1) } } }]).toArray(),
    (e) => e.code === 10334 && TOO_LARGE(16793601, '_id: 1').test(e.message));
  await stillServing();
});

h.test('find: a projection building a document over 16 MiB + 16 KiB is 10334 (first batch and getMore)', { timeout: 60000 }, async () => {
  const db = srv.freshDb('bigfind');
  const c = db.collection('c');
  const s = 'y'.repeat(4 * MB);
  await c.insertMany([{ _id: 1, b: 'small' }, { _id: 2, b: s }]);
  const projection = { x1: '$b', x2: '$b', x3: '$b', x4: '$b', x5: '$b' };
  await assert.rejects(c.find({ _id: 2 }, { projection }).toArray(), (e) => e.code === 10334 && TOO_LARGE(undefined, '_id: 2', 'Executor error during find command').test(e.message));
  // The oversize document comes second: the first batch (1 document) is fine, the getMore fails.
  const r = await db.command({ find: 'c', sort: { _id: 1 }, projection, batchSize: 1 });
  assert.equal(r.cursor.firstBatch.length, 1);
  await assert.rejects(db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c' }),
    (e) => e.code === 10334 && TOO_LARGE(undefined, '_id: 2', 'Executor error during getMore').test(e.message));
  await stillServing();
});

h.test('a cursor batch stops at 16 MiB, as mongod\'s: a document with no room starts the next batch (find, aggregate streamed and materialised, getMore)', { timeout: 120000 }, async () => {
  const db = srv.freshDb('batch16');
  const c = db.collection('c');
  const s = 'z'.repeat(6 * MB);
  await c.insertMany(Array.from({ length: 7 }, (_, i) => ({ _id: i, s })));
  const ids = (batch) => batch.map((d) => d._id);
  const bytes = (batch) => batch.reduce((n, d) => n + BSON.calculateObjectSize(d), 0);
  const check = async (first, what) => {
    const got = [];
    let cur = first.cursor;
    let batch = cur.firstBatch;
    for (;;) {
      assert.ok(batch.length <= 2, `${what}: at most two 6 MB documents in a batch, got ${batch.length}`);
      assert.ok(bytes(batch) <= 16 * MB, `${what}: a batch within 16 MiB`);
      got.push(...ids(batch));
      if (Number(cur.id) === 0) break;
      cur = (await db.command({ getMore: h.cursorId(cur.id), collection: 'c', batchSize: 100 })).cursor;
      batch = cur.nextBatch;
    }
    assert.deepEqual(got, [0, 1, 2, 3, 4, 5, 6], `${what}: every document once, in order`);
  };
  const f = await db.command({ find: 'c', sort: { _id: 1 }, batchSize: 100 });
  assert.deepEqual(ids(f.cursor.firstBatch), [0, 1], 'the third document waits for the getMore');
  await check(f, 'find');
  await check(await db.command({ find: 'c', filter: { _id: { $gte: 0 } }, projection: { s: 1 }, batchSize: 100 }), 'find with a projection');
  await check(await db.command({ find: 'c', limit: 7, batchSize: 100 }), 'find with a limit');
  await check(await db.command({ aggregate: 'c', pipeline: [{ $match: {} }], cursor: { batchSize: 100 } }), 'aggregate, streamed');
  await check(await db.command({ aggregate: 'c', pipeline: [{ $sort: { _id: 1 } }, { $addFields: { k: 1 } }], cursor: { batchSize: 100 } }), 'aggregate, sorted');
  // The driver walks the same batches.
  assert.deepEqual((await c.find({}, { projection: { _id: 1 } }).toArray()).length, 7);
  assert.deepEqual((await c.find().sort({ _id: 1 }).toArray()).map((d) => d._id), [0, 1, 2, 3, 4, 5, 6]);
  await stillServing();
});

h.test('$out and $merge of a document over 16 MiB + 16 KiB fail with 10334 and leave the target as it was', { timeout: 60000 }, async () => {
  const db = srv.freshDb('bigwrite');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: i, b: 'w'.repeat(4 * MB) })));
  await db.collection('t').insertOne({ _id: 'old' });
  const group = { $group: { _id: null, all: { $push: '$b' } } };
  for (const last of [{ $out: 't' }, { $merge: { into: 't' } }]) {
    await assert.rejects(c.aggregate([group, last]).toArray(), (e) => e.code === 10334 && TOO_LARGE(undefined, '_id: null').test(e.message),
      Object.keys(last)[0]);
    assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 'old' }], `${Object.keys(last)[0]} left the target alone`);
  }
  await stillServing();
});
