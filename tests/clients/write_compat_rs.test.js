'use strict';
/*
 * The write path on a replica set member, as mongod 8.0's
 * userAllowedWriteNS (db/ops/insert.cpp): a client's insert, update,
 * delete, findAndModify or bulkWrite on local.oplog.rs is refused with 73
 * "cannot write to local.oplog.rs", so the oplog that replication and change
 * streams read stays as the server wrote it.
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const h = require('./harness');
const { useReplSet, test } = require('./rs_harness');

const set = useReplSet(1);

test('a client cannot write to local.oplog.rs on a replica set (73); the oplog and a change stream carry on', async () => {
  const c = new MongoClient(set.uri, { retryWrites: false });
  await c.connect();
  try {
    const db = c.db('wcrs');
    const local = c.db('local');
    const admin = c.db('admin');
    const cs = db.collection('x').watch();
    const first = cs.next();
    await db.collection('x').insertOne({ _id: 1 });
    assert.equal((await first).operationType, 'insert');
    const before = await local.collection('oplog.rs').countDocuments({});
    const re = /^cannot write to local\.oplog\.rs$/;
    await h.expectCode(local.command({ insert: 'oplog.rs', documents: [{ junk: 1 }] }), 73, re);
    await h.expectCode(local.command({ update: 'oplog.rs', updates: [{ q: {}, u: { $set: { op: 'zz' } }, multi: true }] }), 73, re);
    await h.expectCode(local.command({ delete: 'oplog.rs', deletes: [{ q: {}, limit: 0 }] }), 73, re);
    await h.expectCode(local.command({ findAndModify: 'oplog.rs', query: {}, remove: true }), 73, re);
    const bw = await admin.command({
      bulkWrite: 1, ops: [{ update: 0, filter: {}, updateMods: { $set: { op: 'zz' } }, multi: true }], nsInfo: [{ ns: 'local.oplog.rs' }],
    });
    assert.equal(bw.nErrors, 1);
    assert.equal(bw.cursor.firstBatch[0].code, 73);
    await h.expectCode(admin.command({ bulkWrite: 1, ops: [{ insert: 0, document: { junk: 1 } }], nsInfo: [{ ns: 'local.oplog.rs' }] }), 73, re);
    // Nothing was written to the oplog: no junk entry, no entry rewritten, none removed.
    assert.equal(await local.collection('oplog.rs').countDocuments({ junk: 1 }), 0);
    assert.equal(await local.collection('oplog.rs').countDocuments({ op: 'zz' }), 0);
    assert.ok(await local.collection('oplog.rs').countDocuments({}) >= before);
    // Replication's reader is untouched: the change stream sees the next insert.
    const second = cs.next();
    await db.collection('x').insertOne({ _id: 2 });
    const ev = await second;
    assert.equal(ev.operationType, 'insert');
    assert.deepEqual(ev.documentKey, { _id: 2 });
    await cs.close();
  } finally {
    await c.close();
  }
});
