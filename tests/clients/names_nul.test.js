'use strict';
/*
 * Names with a NUL byte inside. The server reads names as C strings, where
 * "victim\0x" is "victim": every command that names a namespace or an index
 * refuses such a name (73 InvalidNamespace, 27 IndexNotFound for an index,
 * 2 BadValue for a hint) instead of acting on the object the name's start
 * names (found by a hostile-input probe: a rename with dropTarget dropped
 * another collection, $out overwrote one, dropIndexes dropped an index).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

async function setup(tag) {
  const db = srv.freshDb(tag);
  await db.collection('keep').insertMany([{ k: 1 }, { k: 2 }]);
  await db.collection('keep').createIndex({ k: 1 });
  await db.collection('src').insertOne({ a: 1 });
  return db;
}

async function unchanged(db) {
  assert.equal(await db.collection('keep').countDocuments(), 2, 'keep still holds its documents');
  assert.ok((await db.collection('keep').indexes()).some((i) => i.name === 'k_1'), 'k_1 is still there');
}

h.test('renameCollection with a NUL in either name is 73 and renames or drops nothing', async () => {
  const db = await setup('nulrename');
  const admin = srv.client.db('admin');
  const n = db.databaseName;
  await h.expectCode(admin.command({ renameCollection: `${n}.keep\u0000x`, to: `${n}.moved` }), 73);
  await h.expectCode(admin.command({ renameCollection: `${n}.src`, to: `${n}.keep\u0000x`, dropTarget: true }), 73);
  await unchanged(db);
  assert.equal(await db.collection('src').countDocuments(), 1);
  assert.equal((await db.listCollections({ name: 'moved' }).toArray()).length, 0);
});

h.test('$out, $merge and $lookup with a NUL in a collection or database name are 73 and write nothing', async () => {
  const db = await setup('nulout');
  const agg = (pipeline) => db.command({ aggregate: 'src', pipeline, cursor: {} });
  await h.expectCode(agg([{ $out: 'keep\u0000x' }]), 73);
  await h.expectCode(agg([{ $out: { db: `${db.databaseName}\u0000x`, coll: 'keep' } }]), 73);
  await h.expectCode(agg([{ $merge: { into: 'keep\u0000x' } }]), 73);
  await h.expectCode(agg([{ $merge: 'keep\u0000x' }]), 73);
  await h.expectCode(agg([{ $merge: { into: { db: db.databaseName, coll: 'keep\u0000' } } }]), 73);
  await h.expectCode(agg([{ $lookup: { from: 'keep\u0000x', pipeline: [], as: 'j' } }]), 73);
  await h.expectCode(agg([{ $facet: { f: [{ $unionWith: { coll: 'src', pipeline: [{ $lookup: { from: 'k\u0000', pipeline: [], as: 'j' } }] } }] } }]), 73);
  await h.expectCode(db.command({ create: 'v', viewOn: 'keep\u0000x', pipeline: [] }), 73);
  await h.expectCode(db.command({ cloneCollectionAsCapped: 'src', toCollection: 'newc\u0000x', size: 100000 }), 73);
  assert.equal((await db.listCollections({ name: 'newc' }).toArray()).length, 0);
  await unchanged(db);
});

h.test('dropIndexes and collMod with a NUL in an index name are 27; a hint with one is 2', async () => {
  const db = await setup('nulindex');
  await h.expectCode(db.command({ dropIndexes: 'keep', index: 'k_1\u0000junk' }), 27);
  await h.expectCode(db.command({ dropIndexes: 'keep', index: ['k_1\u0000x'] }), 27);
  await h.expectCode(db.command({ collMod: 'keep', index: { name: 'k_1\u0000', hidden: true } }), 27);
  await h.expectCode(db.command({ find: 'keep', hint: 'k_1\u0000x' }), 2);
  await unchanged(db);
  assert.equal((await db.collection('keep').indexes()).find((i) => i.name === 'k_1').hidden, undefined);
  /* A NUL in data is data: string values with one are stored and found as they are. */
  await db.collection('keep').insertOne({ _id: 'a\u0000b', name: 'x\u0000y' });
  assert.equal((await db.collection('keep').findOne({ name: 'x\u0000y' }))._id, 'a\u0000b');
});
