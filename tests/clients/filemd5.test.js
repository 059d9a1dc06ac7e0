'use strict';
/*
 * filemd5 (MongoDB 8.0's CmdFileMD5, dbcommands.cpp), which legacy GridFS
 * clients (mgo, the legacy Java GridFSInputFile.validate, old pymongo / PHP)
 * run after an upload: {filemd5: <files_id>, root: <bucket>} answers
 * {numChunks, md5} over <root>.chunks in n order. Errors as mongod: 73 for a
 * root that is not a string, 10040 "chunks out of order" for a gap, a
 * duplicate or a first n other than 0, 50848 / 50849 for a chunk without
 * BinData data (both with mongod's "Executor error during filemd5 command"
 * context), 291 when no index answers {files_id, n} (mongod plans it with
 * NO_TABLE_SCAN). partialOk (mongos's resumable md5state) is refused with
 * 115 (README).
 */
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { Binary, GridFSBucket, ObjectId } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();
const md5 = (buf) => crypto.createHash('md5').update(buf).digest('hex');
const EMPTY_MD5 = 'd41d8cd98f00b204e9800998ecf8427e';

async function upload(db, bucketName, data, chunkSizeBytes) {
  const bucket = new GridFSBucket(db, { bucketName, chunkSizeBytes });
  const up = bucket.openUploadStream('x');
  await new Promise((resolve, reject) => up.on('finish', resolve).on('error', reject).end(data));
  return up.id;
}

h.test('filemd5 of a GridFS upload: numChunks and the MD5 of the file, default root fs and a named bucket', async () => {
  const db = srv.freshDb('md5');
  const data = crypto.randomBytes(600000);
  const id = await upload(db, 'fs', data, 255 * 1024);
  const r = await db.command({ filemd5: id, root: 'fs' });
  assert.deepEqual(Object.keys(r).slice(0, 2), ['numChunks', 'md5']);
  assert.equal(r.numChunks, 3);
  assert.equal(r.md5, md5(data));
  // root absent or empty: "fs".
  assert.equal((await db.command({ filemd5: id })).md5, md5(data));
  assert.equal((await db.command({ filemd5: id, root: '' })).numChunks, 3);
  // Another bucket, and a file of exactly one chunk, and an empty file.
  const small = Buffer.from('hello gridfs');
  const id2 = await upload(db, 'photos', small, 1024);
  assert.deepEqual([(await db.command({ filemd5: id2, root: 'photos' })).numChunks, (await db.command({ filemd5: id2, root: 'photos' })).md5],
    [1, md5(small)]);
  const id3 = await upload(db, 'photos', Buffer.alloc(0), 1024);
  const r3 = await db.command({ filemd5: id3, root: 'photos' });
  assert.equal(r3.numChunks, 0);
  assert.equal(r3.md5, EMPTY_MD5);
  // Another file's chunks are not counted; an unknown files_id is 0 chunks.
  assert.equal((await db.command({ filemd5: new ObjectId(), root: 'fs' })).numChunks, 0);
});

h.test('filemd5 without the chunks collection: 0 chunks, the MD5 of nothing', async () => {
  const db = srv.freshDb('md5none');
  const r = await db.command({ filemd5: 'nofile', root: 'nobucket' });
  assert.equal(r.numChunks, 0);
  assert.equal(r.md5, EMPTY_MD5);
});

h.test('filemd5 hashes chunks in n order whatever their insertion order; BinData subtypes 0 and 2', async () => {
  const db = srv.freshDb('md5order');
  const chunks = db.collection('b.chunks');
  await chunks.createIndex({ files_id: 1, n: 1 }, { unique: true });
  const parts = ['one', 'two', 'three', 'four'].map((s) => Buffer.from(s));
  await chunks.insertMany([2, 0, 3, 1].map((n) => ({ files_id: 'f', n, data: new Binary(parts[n], n === 3 ? 2 : 0) })));
  const r = await db.command({ filemd5: 'f', root: 'b' });
  assert.equal(r.numChunks, 4);
  assert.equal(r.md5, md5(Buffer.concat(parts)));
});

h.test('filemd5: a gap, a duplicate or a first n other than 0 is 10040 "chunks out of order"', async () => {
  const db = srv.freshDb('md5gap');
  const chunks = db.collection('fs.chunks');
  await chunks.createIndex({ files_id: 1, n: 1 });
  const d = () => new Binary(Buffer.from('x'));
  await chunks.insertMany([{ files_id: 'gap', n: 0, data: d() }, { files_id: 'gap', n: 2, data: d() }]);
  await chunks.insertMany([{ files_id: 'dup', n: 0, data: d() }, { files_id: 'dup', n: 0, data: d() }]);
  await chunks.insertMany([{ files_id: 'one', n: 1, data: d() }]);
  for (const id of ['gap', 'dup', 'one']) {
    const err = await h.expectCode(db.command({ filemd5: id }), 10040);
    assert.equal(err.errmsg, 'Executor error during filemd5 command :: caused by :: chunks out of order');
  }
});

h.test('filemd5: a chunk without data is 50848, data that is not BinData 50849 (mongod wording)', async () => {
  const db = srv.freshDb('md5data');
  const chunks = db.collection('fs.chunks');
  await chunks.createIndex({ files_id: 1, n: 1 });
  await chunks.insertMany([{ files_id: 'nodata', n: 0 }, { files_id: 'str', n: 0, data: 'text' }]);
  let err = await h.expectCode(db.command({ filemd5: 'nodata' }), 50848);
  assert.match(err.errmsg, /^Executor error during filemd5 command :: caused by :: The element that calls binDataClean\(\) must be type of BinData, but type of misisng found/);
  err = await h.expectCode(db.command({ filemd5: 'str' }), 50849);
  assert.equal(err.errmsg, 'Executor error during filemd5 command :: caused by :: The element that calls binDataClean() must be type of BinData, but type of string found.');
});

h.test('filemd5: root not a string 73; no index on the chunks 291; a view 166; partialOk 115', async () => {
  const db = srv.freshDb('md5err');
  for (const root of [5, null, { a: 1 }]) {
    const err = await h.expectCode(db.command({ filemd5: 1, root }), 73);
    assert.equal(err.errmsg, "'root' must be of type String");
  }
  await db.collection('noidx.chunks').insertOne({ files_id: 1, n: 0, data: new Binary(Buffer.from('a')) });
  await h.expectCode(db.command({ filemd5: 1, root: 'noidx' }), 291, /No indexed plans available/);
  // An index on files_id alone is enough for mongod's planner.
  await db.collection('noidx.chunks').createIndex({ files_id: 1 });
  assert.equal((await db.command({ filemd5: 1, root: 'noidx' })).md5, md5(Buffer.from('a')));
  await db.createCollection('v.chunks', { viewOn: 'noidx.chunks', pipeline: [] });
  await h.expectCode(db.command({ filemd5: 1, root: 'v' }), 166);
  await h.expectCode(db.command({ filemd5: 1, root: 'noidx', partialOk: true }), 115);
  // partialOk false is the ordinary command.
  assert.equal((await db.command({ filemd5: 1, root: 'noidx', partialOk: false, startAt: 3 })).numChunks, 1);
});
