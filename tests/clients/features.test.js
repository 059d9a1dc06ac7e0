'use strict';
// Collection features applications commonly use: capped collections, schema
// validation, views, GridFS, maxTimeMS, and change streams (refused on a
// standalone), each to MongoDB 8.0 behaviour.
const assert = require('node:assert/strict');
const { GridFSBucket } = require('mongodb');
const crypto = require('node:crypto');
const h = require('./harness');

const srv = h.useServer();

h.test('capped collection keeps the newest documents within max', async () => {
  const db = srv.freshDb('capped');
  await db.createCollection('log', { capped: true, size: 100000, max: 5 });
  const c = db.collection('log');
  for (let i = 0; i < 10; i++) await c.insertOne({ _id: i });
  assert.deepEqual((await c.find().toArray()).map((d) => d._id), [5, 6, 7, 8, 9]);
  assert.equal(await c.isCapped(), true);
  const info = (await db.listCollections({ name: 'log' }).toArray())[0];
  assert.equal(info.options.capped, true);
});

h.test('a validator rejects non-conforming documents with 121', async () => {
  const db = srv.freshDb('validator');
  await db.createCollection('v', { validator: { a: { $type: 'number' }, b: { $exists: true } } });
  const c = db.collection('v');
  await c.insertOne({ a: 1, b: 'x' });
  const e = await h.expectCode(c.insertOne({ a: 'str', b: 1 }), 121);
  assert.ok(e.errInfo && e.errInfo.details, 'errInfo.details explains the failure');
  await h.expectCode(c.updateOne({ a: 1 }, { $unset: { b: '' } }), 121);
  // bypassDocumentValidation skips the check.
  await c.insertOne({ a: 'str' }, { bypassDocumentValidation: true });
  assert.equal(await c.countDocuments(), 2);
});

h.test('$jsonSchema validator', async () => {
  const db = srv.freshDb('jsonschema');
  await db.createCollection('s', { validator: { $jsonSchema: {
    bsonType: 'object', required: ['name'], properties: { name: { bsonType: 'string' }, age: { bsonType: 'int', minimum: 0 } },
  } } });
  const c = db.collection('s');
  await c.insertOne({ name: 'a', age: 3 });
  await h.expectCode(c.insertOne({ age: 3 }), 121);
  await h.expectCode(c.insertOne({ name: 'b', age: -1 }), 121);
});

h.test('a view answers find and aggregate and refuses writes', async () => {
  const db = srv.freshDb('views');
  await db.collection('base').insertMany([{ _id: 1, t: 'a', v: 1 }, { _id: 2, t: 'b', v: 2 }, { _id: 3, t: 'a', v: 3 }]);
  await db.createCollection('onlyA', { viewOn: 'base', pipeline: [{ $match: { t: 'a' } }, { $project: { t: 0 } }] });
  const v = db.collection('onlyA');
  assert.deepEqual(await v.find().sort({ _id: 1 }).toArray(), [{ _id: 1, v: 1 }, { _id: 3, v: 3 }]);
  assert.equal(await v.countDocuments({ v: { $gt: 1 } }), 1);
  const info = (await db.listCollections({ name: 'onlyA' }).toArray())[0];
  assert.equal(info.type, 'view');
  await h.expectCode(v.insertOne({ x: 1 }), 166);
});

h.test('GridFS upload and download round-trip a 1.5 MiB file', async () => {
  const db = srv.freshDb('gridfs');
  const bucket = new GridFSBucket(db, { chunkSizeBytes: 255 * 1024 });
  const data = crypto.randomBytes(1536 * 1024);
  const id = await new Promise((resolve, reject) => {
    const up = bucket.openUploadStream('blob.bin', { metadata: { k: 1 } });
    up.once('finish', () => resolve(up.id));
    up.once('error', reject);
    up.end(data);
  });
  const chunks = [];
  await new Promise((resolve, reject) => {
    bucket.openDownloadStream(id).on('data', (c) => chunks.push(c)).on('end', resolve).on('error', reject);
  });
  assert.ok(Buffer.concat(chunks).equals(data), 'downloaded bytes equal uploaded bytes');
  const files = await bucket.find({ filename: 'blob.bin' }).toArray();
  assert.equal(files.length, 1);
  assert.equal(files[0].length, data.length);
  assert.equal(await db.collection('fs.chunks').countDocuments({ files_id: id }), 7);
  await bucket.delete(id);
  assert.equal(await db.collection('fs.chunks').countDocuments(), 0);
});

h.test('maxTimeMS expiry fails with MaxTimeMSExpired (50)', async () => {
  const c = srv.freshDb('maxtime').collection('c');
  const docs = Array.from({ length: 50000 }, (_, i) => ({ _id: i, s: `value-${i}-${'x'.repeat(50)}` }));
  for (let i = 0; i < docs.length; i += 10000) await c.insertMany(docs.slice(i, i + 10000));
  const slow = { $expr: { $gt: [{ $strLenCP: { $concat: ['$s', '$s', '$s', '$s'] } }, 1e9] } };
  await h.expectCode(c.find(slow, { maxTimeMS: 1 }).toArray(), 50);
  await h.expectCode(c.aggregate([{ $match: slow }, { $sort: { s: -1 } }], { maxTimeMS: 1 }).toArray(), 50);
});

h.test('change streams are refused on a standalone (40573)', async () => {
  const db = srv.freshDb('changes');
  await db.collection('c').insertOne({ a: 1 });
  await h.expectCode(db.command({ aggregate: 'c', pipeline: [{ $changeStream: {} }], cursor: {} }), 40573);
});
