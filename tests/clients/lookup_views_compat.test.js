'use strict';
/*
 * $lookup, $graphLookup, $unionWith, $out, $merge and views as applications
 * meet them, checked against MongoDB 8.0's source: the $out / $merge target
 * checks (document_source_out.cpp, document_source_merge.cpp), $merge's
 * supported mode combinations and 'let' rules (merge_processor.cpp's
 * strategy table, document_source_merge.cpp's create), and the view
 * catalog's reserved names (create_collection.cpp's _createView).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

async function agg(db, coll, pipeline, opts = {}) {
  const r = await db.command({ aggregate: coll, pipeline, cursor: {}, ...opts });
  return r.cursor.firstBatch;
}

h.test('$out refuses system collections (17385) and the admin, config and local databases (31321), as mongod', async () => {
  const db = srv.freshDb('lv_outns');
  await db.collection('s').insertMany([{ _id: 1 }, { _id: 2 }]);
  await h.expectCode(agg(db, 's', [{ $out: 'system.foo' }]), 17385, /^Can't \$out to special collection: system\.foo$/);
  for (const target of ['admin', 'config', 'local']) {
    const dbName = target;
    await h.expectCode(agg(db, 's', [{ $out: { db: dbName, coll: 'lv_out_x' } }]), 31321,
      new RegExp(`^Can't \\$out to internal database: ${dbName}$`));
    assert.equal(await srv.client.db(dbName).collection('lv_out_x').countDocuments(), 0, dbName);
  }
  // An invalid collection name reads as document_source_out.cpp's isValid() check.
  await h.expectCode(agg(db, 's', [{ $out: 'a$b' }]), 73, new RegExp(`^Invalid \\$out target namespace, ${db.databaseName}\\.a\\$b$`));
  // Through mongosh, as a shell user writes it.
  const out = await h.mongosh(srv.port, db.databaseName,
    `try { db.s.aggregate([{$out: {db: 'admin', coll: 'x'}}]); print('no error') } catch (e) { print(e.code + ' ' + e.codeName) }`);
  assert.equal(out, '31321 Location31321');
  // An ordinary target still works.
  await agg(db, 's', [{ $out: 'fine' }]);
  assert.equal(await db.collection('fine').countDocuments(), 2);
});

h.test('$merge refuses system collections (31319) and the admin, config and local databases (31320), as mongod', async () => {
  const db = srv.freshDb('lv_mergens');
  await db.collection('s').insertMany([{ _id: 1 }, { _id: 2 }]);
  await h.expectCode(agg(db, 's', [{ $merge: 'system.x' }]), 31319, /^Cannot \$merge to special collection: system\.x$/);
  await h.expectCode(agg(db, 's', [{ $merge: { into: 'system.js' } }]), 31319);
  for (const dbName of ['admin', 'config', 'local']) {
    await h.expectCode(agg(db, 's', [{ $merge: { into: { db: dbName, coll: 'lv_merge_x' } } }]), 31320,
      new RegExp(`^Cannot \\$merge to internal database: ${dbName}$`));
    assert.equal(await srv.client.db(dbName).collection('lv_merge_x').countDocuments(), 0, dbName);
  }
  await h.expectCode(agg(db, 's', [{ $merge: { into: 'a$b' } }]), 73,
    new RegExp(`^Invalid \\$merge target namespace: '${db.databaseName}\\.a\\$b'$`));
  // Through the driver's aggregate cursor.
  const e = await db.collection('s').aggregate([{ $merge: { into: { db: 'admin', coll: 'y' } } }]).toArray().then(() => null, (x) => x);
  assert.equal(e && e.code, 31320);
  assert.equal(e.codeName, 'Location31320');
});

h.test('$merge mode combinations merge_processor.cpp has no strategy for are 51181; every supported one still runs', async () => {
  const db = srv.freshDb('lv_mergemodes');
  await db.collection('s').insertMany([{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }]);
  for (const [wm, wnm] of [['keepExisting', 'fail'], ['keepExisting', 'discard'], ['fail', 'fail'], ['fail', 'discard']]) {
    await h.expectCode(agg(db, 's', [{ $merge: { into: 't', whenMatched: wm, whenNotMatched: wnm } }]), 51181,
      new RegExp(`^Combination of \\$merge modes 'whenMatched: ${wm}' and 'whenNotMatched: ${wnm}' is not supported$`));
  }
  // Nothing was written by the refused combinations (the target does not even exist).
  assert.equal((await db.listCollections({ name: 't' }).toArray()).length, 0);
  const expected = {
    'replace/insert': [{ _id: 1, v: 'a' }, { _id: 2, v: 'b' }, { _id: 5 }],
    'replace/discard': [{ _id: 1, v: 'a' }, { _id: 5 }],
    'merge/insert': [{ _id: 1, w: 'old', v: 'a' }, { _id: 2, v: 'b' }, { _id: 5 }],
    'merge/discard': [{ _id: 1, w: 'old', v: 'a' }, { _id: 5 }],
    'keepExisting/insert': [{ _id: 1, w: 'old' }, { _id: 2, v: 'b' }, { _id: 5 }],
    'pipeline/insert': [{ _id: 1, w: 'old', z: 'a' }, { _id: 2, v: 'b' }, { _id: 5 }],
    'pipeline/discard': [{ _id: 1, w: 'old', z: 'a' }, { _id: 5 }],
  };
  for (const [key, want] of Object.entries(expected)) {
    const [wm, wnm] = key.split('/');
    await db.collection('t').deleteMany({});
    await db.collection('t').insertMany([{ _id: 1, w: 'old' }, { _id: 5 }]);
    const whenMatched = wm === 'pipeline' ? [{ $set: { z: '$$new.v' } }] : wm;
    await agg(db, 's', [{ $merge: { into: 't', whenMatched, whenNotMatched: wnm } }]);
    assert.deepEqual(await db.collection('t').find().sort({ _id: 1 }).toArray(), want, key);
  }
  // whenNotMatched fail with a source document that has no match: 13113, as before.
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', whenMatched: 'replace', whenNotMatched: 'fail' } }]), 13113);
});

h.test('$merge takes let only with a whenMatched pipeline (51199), and "new" only as $$ROOT (51273)', async () => {
  const db = srv.freshDb('lv_mergelet');
  await db.collection('s').insertMany([{ _id: 1, v: 'a' }]);
  await db.collection('t').insertOne({ _id: 1, w: 'old' });
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', let: { x: 1 } } }]), 51199,
    /^Cannot use 'let' variables with 'whenMatched: merge' mode$/);
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', let: { x: 1 }, whenMatched: 'replace' } }]), 51199,
    /^Cannot use 'let' variables with 'whenMatched: replace' mode$/);
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', let: { new: 1 }, whenMatched: [{ $set: { a: '$$new' } }] } }]), 51273,
    /^'let' may not define a value for the reserved 'new' variable other than '\$\$ROOT'$/);
  await h.expectCode(agg(db, 's', [{ $merge: { into: 't', let: { new: '$v' }, whenMatched: [{ $set: { a: '$$new' } }] } }]), 51273);
  // The target is untouched by the refused stages.
  assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 1, w: 'old' }]);
  // new: "$$ROOT" spelled out, beside another variable, is accepted.
  await agg(db, 's', [{ $merge: { into: 't', let: { new: '$$ROOT', y: '$v' }, whenMatched: [{ $set: { a: '$$new.v', b: '$$y' } }] } }]);
  assert.deepEqual(await db.collection('t').find().toArray(), [{ _id: 1, w: 'old', a: 'a', b: 'a' }]);
});

h.test('a view cannot be called system.views: 73 "Cannot create a view called ..." (create and createView)', async () => {
  const db = srv.freshDb('lv_sysviews');
  await db.collection('s').insertOne({ _id: 1 });
  await h.expectCode(db.command({ create: 'system.views', viewOn: 's', pipeline: [] }), 73,
    /^Cannot create a view called 'system\.views': this is a reserved system namespace$/);
  await h.expectCode(db.createCollection('system.views', { viewOn: 's' }), 73);
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => `${c.name}:${c.type}`);
  assert.deepEqual(names, ['s:collection']);
  // An ordinary view next to it is fine.
  await db.command({ create: 'v', viewOn: 's', pipeline: [] });
  assert.deepEqual(await db.collection('v').find().toArray(), [{ _id: 1 }]);
});
