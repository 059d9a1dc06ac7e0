'use strict';
/*
 * Change streams as MongoDB 8.0 answers them, where a sweep found mayfly
 * differing: $changeStreamSplitLargeEvent (its checks, small events as
 * they are, large ones in fragments, resuming from a fragment), the
 * readConcern a stream accepts (majority only), a resume token from
 * another stream (280), the order of an event's fields
 * (change_stream_event_transform.cpp), updateDescription.disambiguatedPaths
 * and a modify event's stateBeforeChange under showExpandedEvents.
 * Raw aggregate / getMore commands, so that every reply is seen as sent.
 */
const assert = require('node:assert/strict');
const h = require('./harness');
const R = require('./rs_harness');

/* One member is enough: events come from its own oplog. */
const rs = R.useReplSet(1);

/* Opens a stream by aggregate on coll (a collection name, or 1 for the database); returns the reply's cursor. */
async function openRaw(db, coll, pipeline, extra = {}) {
  const r = await db.command({ aggregate: coll, pipeline, cursor: {}, ...extra });
  return r.cursor;
}

/* getMores on cursor id until n events came (or ms passed); returns them. */
async function collect(db, coll, cursor, n, ms = 10000) {
  const out = [...cursor.firstBatch];
  const deadline = Date.now() + ms;
  let id = h.cursorId(cursor.id);
  while (out.length < n && Date.now() < deadline) {
    const r = await db.command({ getMore: id, collection: coll === 1 ? '$cmd.aggregate' : coll, maxTimeMS: 200 });
    out.push(...r.cursor.nextBatch);
    id = h.cursorId(r.cursor.id);
  }
  return out;
}

R.test('$changeStream refuses any explicit readConcern but majority (72), as mongod', async () => {
  const db = rs.freshDb('rc');
  await db.createCollection('c');
  for (const level of ['local', 'linearizable', 'available', 'snapshot']) {
    await h.expectCode(openRaw(db, 'c', [{ $changeStream: {} }], { readConcern: { level } }), 72,
      new RegExp(`^Aggregation stage \\$changeStream cannot run with a readConcern other than 'majority'\\. ` +
        `Current readConcern: ${level}$`));
  }
  const ok = await openRaw(db, 'c', [{ $changeStream: {} }], { readConcern: { level: 'majority' } });
  assert.ok(ok.postBatchResumeToken);
  await openRaw(db, 'c', [{ $changeStream: {} }]);
});

R.test('a resume token from another collection\'s stream is 280 ChangeStreamFatalError', async () => {
  const db = rs.freshDb('tok');
  await db.createCollection('a');
  await db.createCollection('b');
  const sa = await openRaw(db, 'a', [{ $changeStream: {} }]);
  await db.collection('a').insertOne({ _id: 1 });
  await db.collection('b').insertOne({ _id: 2 });
  await db.collection('a').insertOne({ _id: 3 });
  const evs = await collect(db, 'a', sa, 2);
  assert.equal(evs.length, 2);
  const tokA = evs[0]._id;
  // From its own token the stream goes on with the next event.
  const again = await collect(db, 'a', await openRaw(db, 'a', [{ $changeStream: { resumeAfter: tokA } }]), 1);
  assert.deepEqual(again[0].documentKey, { _id: 3 });
  // On b, a's token is not found: b's next event surpasses it.
  // (mongod fails the aggregate itself when that event is in its first batch, as here.)
  const err = await h.expectCode(
    openRaw(db, 'b', [{ $changeStream: { resumeAfter: tokA } }]).then((c) => collect(db, 'b', c, 1)), 280);
  assert.match(err.message, /^cannot resume stream; the resume token was not found\. \{_data: "[0-9A-F]+"\}$/);
  await h.expectCode(openRaw(db, 'b', [{ $changeStream: { startAfter: tokA } }]).then((c) => collect(db, 'b', c, 1)), 280);
  // A high-water mark (postBatchResumeToken between events) names no event: any stream takes it.
  const pb = (await openRaw(db, 'a', [{ $changeStream: {} }])).postBatchResumeToken;
  await openRaw(db, 'b', [{ $changeStream: { resumeAfter: pb } }]);
});

R.test('field order: a transaction\'s txnNumber and lsid first; collectionUUID before wallTime; rename\'s to first', async () => {
  const db = rs.freshDb('order');
  const c = db.collection('c');
  await c.insertOne({ _id: 0 });
  const cur = await openRaw(db, 'c', [{ $changeStream: { showExpandedEvents: true } }]);
  const session = rs.client.startSession();
  try {
    await session.withTransaction(async () => {
      await c.insertOne({ _id: 1 }, { session });
      await c.updateOne({ _id: 0 }, { $set: { x: 1 } }, { session });
    });
  } finally {
    await session.endSession();
  }
  await c.insertOne({ _id: 2 });
  const evs = await collect(db, 'c', cur, 3);
  assert.deepEqual(Object.keys(evs[0]), ['txnNumber', 'lsid', '_id', 'operationType', 'clusterTime', 'collectionUUID',
    'wallTime', 'fullDocument', 'ns', 'documentKey']);
  assert.deepEqual(Object.keys(evs[1]), ['txnNumber', 'lsid', '_id', 'operationType', 'clusterTime', 'collectionUUID',
    'wallTime', 'ns', 'documentKey', 'updateDescription']);
  assert.deepEqual(Object.keys(evs[2]), ['_id', 'operationType', 'clusterTime', 'collectionUUID', 'wallTime',
    'fullDocument', 'ns', 'documentKey']);

  // Without showExpandedEvents there is no collectionUUID.
  const plain = await openRaw(db, 'c', [{ $changeStream: {} }]);
  await c.deleteOne({ _id: 2 });
  const [del] = await collect(db, 'c', plain, 1);
  assert.deepEqual(Object.keys(del), ['_id', 'operationType', 'clusterTime', 'wallTime', 'ns', 'documentKey']);

  // mongod adds a rename's top-level "to" while reading the op, before the resume token.
  const dbs = await openRaw(db, 1, [{ $changeStream: { showExpandedEvents: true } }]);
  await rs.client.db('admin').command({ renameCollection: `${db.databaseName}.c`, to: `${db.databaseName}.d` });
  // A view's create names no collectionUUID (ChangeStreamViewDefinitionEventTransformation).
  await db.createCollection('v', { viewOn: 'd', pipeline: [] });
  const [ren, vcr] = await collect(db, 1, dbs, 2);
  assert.deepEqual(Object.keys(ren), ['to', '_id', 'operationType', 'clusterTime', 'collectionUUID', 'wallTime', 'ns',
    'operationDescription']);
  assert.equal(vcr.operationType, 'create');
  assert.deepEqual(Object.keys(vcr), ['_id', 'operationType', 'clusterTime', 'wallTime', 'ns', 'operationDescription']);
});

R.test('$changeStreamSplitLargeEvent: its checks, small events unchanged', async () => {
  const db = rs.freshDb('split');
  await db.createCollection('c');
  await h.expectCode(openRaw(db, 'c', [{ $changeStream: {} }, { $changeStreamSplitLargeEvent: { a: 1 } }]), 7182800,
    /^\$changeStreamSplitLargeEvent spec should be an empty object$/);
  await h.expectCode(openRaw(db, 'c', [{ $changeStream: {} }, { $changeStreamSplitLargeEvent: 1 }]), 7182800);
  await h.expectCode(openRaw(db, 'c', [{ $changeStream: {} }, { $changeStreamSplitLargeEvent: {} }, { $match: {} }]),
    7182802, /^\$changeStreamSplitLargeEvent must be the last stage in the pipeline$/);
  const cur = await openRaw(db, 'c', [{ $changeStream: {} }, { $match: { operationType: 'insert' } },
    { $changeStreamSplitLargeEvent: {} }]);
  await db.collection('c').insertOne({ _id: 1, a: 'x' });
  const [ev] = await collect(db, 'c', cur, 1);
  assert.deepEqual(Object.keys(ev), ['_id', 'operationType', 'clusterTime', 'wallTime', 'fullDocument', 'ns', 'documentKey']);
  assert.equal(ev.splitEvent, undefined);
  // A fragment's token needs the stage to resume from.
  const frag = { _data: `${ev._id._data}0001` };
  await h.expectCode(openRaw(db, 'c', [{ $changeStream: { resumeAfter: frag } }]), 280,
    /must include a \$changeStreamSplitLargeEvent stage/);
  // Resuming from a fragment of an event that is not large is 280.
  await h.expectCode(openRaw(db, 'c', [{ $changeStream: { resumeAfter: frag } }, { $changeStreamSplitLargeEvent: {} }])
    .then((c) => collect(db, 'c', c, 1)), 280, /not large enough to be split/);
  // Outside a change stream: parsed (7182800 for a bad spec), then refused with 20, as mongod's pipeline validation.
  await h.expectCode(db.collection('c').aggregate([{ $changeStreamSplitLargeEvent: {} }]).toArray(), 20,
    /^\$changeStreamSplitLargeEvent can only be used in a \$changeStream pipeline$/);
  await h.expectCode(db.collection('c').aggregate([{ $changeStreamSplitLargeEvent: 1 }]).toArray(), 7182800);
});

R.test('$changeStreamSplitLargeEvent splits an event over 16 MB into fragments, and resumes from one', { timeout: 120000 }, async () => {
  const db = rs.freshDb('splitbig');
  const c = db.collection('c');
  await db.createCollection('c');
  const big = 'x'.repeat(7 * 1024 * 1024);
  // The stage after $changeStream makes the event about 21 MB: three copies of the 7 MB string.
  const pipeline = [{ $changeStream: {} },
    { $addFields: { copy1: '$fullDocument.s', copy2: '$fullDocument.s' } },
    { $changeStreamSplitLargeEvent: {} }];
  const cur = await openRaw(db, 'c', pipeline);
  await c.insertOne({ _id: 1, s: big });
  await c.insertOne({ _id: 2 });
  const evs = await collect(db, 'c', cur, 3, 20000);
  assert.equal(evs.length, 3, JSON.stringify(evs.map((e) => e.splitEvent)));
  assert.deepEqual(evs[0].splitEvent, { fragment: 1, of: 2 });
  assert.deepEqual(evs[1].splitEvent, { fragment: 2, of: 2 });
  assert.equal(evs[2].splitEvent, undefined);
  assert.deepEqual(evs[2].documentKey, { _id: 2 });
  // Smallest fields first, _id and splitEvent leading every fragment.
  assert.deepEqual(Object.keys(evs[0]).slice(0, 2), ['_id', 'splitEvent']);
  assert.equal(evs[0].operationType, 'insert');
  const fields = new Set([...Object.keys(evs[0]), ...Object.keys(evs[1])]);
  for (const f of ['operationType', 'clusterTime', 'wallTime', 'ns', 'documentKey', 'fullDocument', 'copy1', 'copy2']) {
    assert.ok(fields.has(f), f);
  }
  assert.ok(evs[0]._id._data < evs[1]._id._data && evs[1]._id._data < evs[2]._id._data, 'tokens go forward');
  // Resuming after fragment 1 returns fragment 2 then the next event.
  const res = await collect(db, 'c', await openRaw(db, 'c', [{ $changeStream: { resumeAfter: evs[0]._id } },
    ...pipeline.slice(1)]), 2, 20000);
  assert.deepEqual(res.map((e) => e.splitEvent), [{ fragment: 2, of: 2 }, undefined]);
  assert.deepEqual(res[0]._id, evs[1]._id);
  // Resuming after the last fragment (what a driver sends once it read the whole event) goes on with the next
  // event (helper-126: it was 280 "produced a different split").
  const last = await collect(db, 'c', await openRaw(db, 'c', [{ $changeStream: { resumeAfter: evs[1]._id } },
    ...pipeline.slice(1)]), 1, 20000);
  assert.deepEqual(last.map((e) => e.documentKey), [{ _id: 2 }]);
  // Without the stage the event is too large to return.
  await h.expectCode(openRaw(db, 'c', [{ $changeStream: { startAtOperationTime: evs[0].clusterTime } },
    { $addFields: { copy1: '$fullDocument.s', copy2: '$fullDocument.s' } }]), 10334);
});

R.test('showExpandedEvents: updateDescription.disambiguatedPaths, as mongod\'s diff parser builds it', async () => {
  const db = rs.freshDb('disamb');
  const c = db.collection('c');
  await c.insertOne({ _id: 1, a: 1, arr: [{ y: 1 }, { y: 2 }], o: { 1: { x: 1 } }, 'd.x': { c: 1 } });
  const cur = await openRaw(db, 'c', [{ $changeStream: { showExpandedEvents: true } }]);
  const plain = await openRaw(db, 'c', [{ $changeStream: {} }]);
  await c.updateOne({ _id: 1 }, { $set: { a: 2 } });
  // An array index alone is not ambiguous (change_stream_document_diff_parser.cpp: "the presence of an array
  // index is not itself sufficient"); a numeric-looking field name below the top level is.
  await c.updateOne({ _id: 1 }, { $set: { 'arr.1.y': 5 } });
  await c.updateOne({ _id: 1 }, { $set: { 'o.1.x': 5 } });
  // A field name holding a dot, changed inside by a pipeline update.
  await c.updateOne({ _id: 1 }, [{ $replaceWith: { $setField: { field: 'd.x', input: '$$ROOT', value: { c: 2 } } } }]);
  const evs = await collect(db, 'c', cur, 4);
  assert.deepEqual(evs.map((e) => e.operationType), ['update', 'update', 'update', 'update']);
  assert.deepEqual(Object.keys(evs[0].updateDescription),
    ['updatedFields', 'removedFields', 'truncatedArrays', 'disambiguatedPaths']);
  assert.deepEqual(evs[0].updateDescription.disambiguatedPaths, {});
  assert.deepEqual(evs[1].updateDescription.updatedFields, { 'arr.1.y': 5 });
  assert.deepEqual(evs[1].updateDescription.disambiguatedPaths, {});
  assert.deepEqual(evs[2].updateDescription.updatedFields, { 'o.1.x': 5 });
  assert.deepEqual(evs[2].updateDescription.disambiguatedPaths, { 'o.1.x': ['o', '1', 'x'] });
  assert.deepEqual(evs[3].updateDescription.updatedFields, { 'd.x.c': 2 });
  assert.deepEqual(evs[3].updateDescription.disambiguatedPaths, { 'd.x.c': ['d.x', 'c'] });
  // Below an ambiguous part, array indexes are named as numbers.
  await c.updateOne({ _id: 1 }, { $set: { 'o.1.list': [1, 2] } });
  await c.updateOne({ _id: 1 }, { $set: { 'o.1.list.1': 3 } });
  const [, idx] = await collect(db, 'c', { firstBatch: [], id: cur.id }, 2);
  assert.deepEqual(idx.updateDescription.disambiguatedPaths, { 'o.1.list.1': ['o', '1', 'list', 1] });
  // Without showExpandedEvents, none.
  const [p0] = await collect(db, 'c', plain, 1);
  assert.deepEqual(Object.keys(p0.updateDescription), ['updatedFields', 'removedFields', 'truncatedArrays']);
});

R.test('showExpandedEvents: a modify event carries stateBeforeChange, from the collMod entry\'s o2 as mongod logs it', async () => {
  const db = rs.freshDb('modify');
  await db.createCollection('c', { validator: { a: { $exists: true } } });
  await db.collection('c').createIndex({ t: 1 }, { expireAfterSeconds: 100 });
  const cur = await openRaw(db, 'c', [{ $changeStream: { showExpandedEvents: true } }]);
  await db.command({ collMod: 'c', validationLevel: 'moderate' });
  await db.command({ collMod: 'c', index: { keyPattern: { t: 1 }, expireAfterSeconds: 200 } });
  await db.command({ collMod: 'c', index: { name: 't_1', hidden: true } });
  const [m1, m2, m3] = await collect(db, 'c', cur, 3);
  assert.deepEqual(Object.keys(m1), ['_id', 'operationType', 'clusterTime', 'collectionUUID', 'wallTime', 'ns',
    'operationDescription', 'stateBeforeChange']);
  assert.equal(m1.operationType, 'modify');
  assert.deepEqual(m1.operationDescription, { validationLevel: 'moderate' });
  assert.deepEqual(Object.keys(m1.stateBeforeChange), ['collectionOptions']);
  const opts = m1.stateBeforeChange.collectionOptions;
  assert.equal(Object.keys(opts)[0], 'uuid');
  assert.equal(opts.uuid.toString('hex'), m1.collectionUUID.toString('hex'));
  assert.deepEqual(opts.validator, { a: { $exists: true } });
  assert.notEqual(opts.validationLevel, 'moderate');
  // The next one sees the first's change in its state before.
  assert.equal(m2.stateBeforeChange.collectionOptions.validationLevel, 'moderate');
  assert.deepEqual(m2.stateBeforeChange.indexOptions, { expireAfterSeconds: 100 });
  assert.deepEqual(m3.stateBeforeChange.indexOptions, { hidden: false });
  // The applier ignores o2: the collMods reached the oplog and were applied.
  const ix = (await db.collection('c').indexes()).find((i) => i.name === 't_1');
  assert.equal(ix.expireAfterSeconds, 200);
  assert.equal(ix.hidden, true);
});
