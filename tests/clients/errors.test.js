'use strict';
// Bad input through the driver and raw OP_MSG: each case must produce the
// MongoDB error, and afterwards the server must still answer ping on this and
// other connections.
const assert = require('node:assert/strict');
const { BSON, MongoClient } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();
let other; // A second, independent client that must be unaffected.

async function stillServing() {
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1, 'ping on the same client');
  if (!other) other = await srv.newClient();
  assert.equal((await other.db('admin').command({ ping: 1 })).ok, 1, 'ping on another client');
}

/* Runs a raw command over a fresh socket and returns the reply body. */
async function raw(db, cmd, sequences, opts) {
  const conn = await h.rawConnect(srv.port);
  try {
    const r = await conn.command(db, cmd, sequences, opts);
    assert.ok(r, 'server replied (did not close the connection)');
    return r;
  } finally { conn.close(); }
}

/* Returns the error code from a command reply or its first write error. */
function replyCode(r) {
  if (r.ok === 0) return r.code;
  if (r.writeErrors && r.writeErrors.length) return r.writeErrors[0].code;
  return undefined;
}

h.test('{find: 1} (collection name of the wrong type) fails with InvalidNamespace', async () => {
  const db = srv.freshDb('findint');
  await h.expectCode(db.command({ find: 1 }), [73, 2, 14]);
  await stillServing();
});

h.test('{insert: "c", documents: 5} fails with TypeMismatch (14)', async () => {
  const db = srv.freshDb('docs5');
  const e = await h.expectCode(db.command({ insert: 'c', documents: 5 }), 14);
  assert.match(e.errmsg, /documents/);
  await stillServing();
});

h.test('find with filter: "x" fails with TypeMismatch (14)', async () => {
  const db = srv.freshDb('filterstr');
  await h.expectCode(db.command({ find: 'c', filter: 'x' }), [14, 2]);
  await stillServing();
});

h.test('wrong types for sort, projection, limit, batchSize fail with 14', async () => {
  const db = srv.freshDb('types');
  await db.collection('c').insertOne({ a: 1 });
  await h.expectCode(db.command({ find: 'c', sort: 1 }), 14);
  await h.expectCode(db.command({ find: 'c', projection: 'a' }), 14);
  await h.expectCode(db.command({ find: 'c', limit: 'x' }), 14);
  await h.expectCode(db.command({ find: 'c', batchSize: 'x' }), 14);
  await h.expectCode(db.command({ update: 'c', updates: {} }), 14);
  await h.expectCode(db.command({ delete: 'c', deletes: 'x' }), 14);
  await stillServing();
});

h.test('bad sort specifications fail as mongod\'s sort_pattern.cpp: 15975 not 1 or -1 (1.5 too), 15974 not a number, 17312 an object that is not $meta, 31138 an unknown $meta, 9 extra $meta keys, FieldPath\'s 40352/40353/15998/16410', async () => {
  const db = srv.freshDb('sortspec');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 2 }, { _id: 2, a: 1 }]);
  const cases = [
    [{ a: 2 }, 15975, /^\$sort key ordering must be 1 \(for ascending\) or -1 \(for descending\)$/],
    [{ a: 1.5 }, 15975, /^\$sort key ordering must be 1/],
    [{ a: 0 }, 15975, /^\$sort key ordering must be 1/],
    [{ a: 'x' }, 15974, /^Illegal key in \$sort specification: a: "x"$/],
    [{ a: true }, 15974, /^Illegal key in \$sort specification: a: true$/],
    [{ a: { x: 1 } }, 17312, /^\$meta is the only expression supported by \$sort right now$/],
    [{ a: { $meta: 'foo' } }, 31138, /^Illegal \$meta sort: \$meta: "foo"$/],
    [{ a: { $meta: 'textScore', b: 1 } }, 9, /^Cannot have additional keys in a \$meta sort specification$/],
    // The path is a FieldPath (helper-65: '' was 2 BadValue; 'a.' and '$a' were accepted).
    [{ '': 1 }, 40352, /^FieldPath cannot be constructed with empty string$/],
    [{ 'a.': 1 }, 40353, /^FieldPath must not end with a '\.'\.$/],
    [{ 'a..b': 1 }, 15998, /^FieldPath field names may not be empty strings\.$/],
    [{ $a: 1 }, 16410, /^FieldPath field names may not start with '\$'\. Consider using \$getField or \$setField\.$/],
  ];
  for (const [sort, code, msg] of cases) {
    await h.expectCode(db.command({ find: 'c', sort }), code, msg);
    await h.expectCode(c.aggregate([{ $sort: sort }]).toArray(), code, msg);
  }
  // {$natural: ±1} is find's record order, not a path (helper-67: the FieldPath check refused it, breaking
  // mongosh's rs.printReplicationInfo(), which reads local.oplog.rs that way).
  assert.deepEqual((await c.find({}, { sort: { $natural: -1 } }).toArray()).map((d) => d._id), [2, 1]);
  assert.deepEqual((await db.command({ find: 'c', sort: { $natural: 1 }, limit: 1 })).cursor.firstBatch.map((d) => d._id), [1]);
  // A DBRef's $id is a field name FieldPath accepts.
  assert.equal((await c.find({}, { sort: { 'r.$id': 1 } }).toArray()).length, 2);
  // 1.0 and a long -1 are 1 and -1.
  assert.deepEqual((await c.find({}, { sort: { a: 1.0 } }).toArray()).map((d) => d._id), [2, 1]);
  assert.deepEqual((await db.command({ find: 'c', sort: { a: require('mongodb').Long.fromNumber(-1) } })).cursor.firstBatch.map((d) => d._id), [1, 2]);
  await stillServing();
});

h.test('missing required fields fail with 40414 (IDL required field)', async () => {
  const db = srv.freshDb('required');
  await h.expectCode(db.command({ insert: 'c' }), 40414);
  await h.expectCode(db.command({ update: 'c' }), 40414);
  await h.expectCode(db.command({ delete: 'c', deletes: [{ q: {} }] }), 40414);
  await stillServing();
});

h.test('unknown top-level field in a command fails with 40415', async () => {
  const db = srv.freshDb('unknownfield');
  await h.expectCode(db.command({ find: 'c', noSuchOption: 1 }), 40415);
  await stillServing();
});

h.test('unknown top-level query operator {$foo: 1} fails with BadValue (2)', async () => {
  const c = srv.freshDb('foo').collection('c');
  await c.insertOne({ a: 1 });
  const e = await h.expectCode(c.find({ $foo: 1 }).toArray(), 2);
  assert.match(e.errmsg, /unknown top level operator: \$foo/);
  await h.expectCode(c.deleteMany({ $foo: 1 }), 2);
  await h.expectCode(c.updateMany({ $foo: 1 }, { $set: { a: 1 } }), 2);
  await h.expectCode(c.countDocuments({ $foo: 1 }), 2);
  await stillServing();
});

h.test('a document over 16 MiB is refused by the driver or the server', async () => {
  const c = srv.freshDb('big').collection('c');
  const big = 'x'.repeat(16 * 1024 * 1024 + 10);
  let err;
  try { await c.insertOne({ big }); } catch (e) { err = e; }
  assert.ok(err, 'insert of a >16 MiB document failed');
  if (err.code !== undefined) assert.equal(err.code, 2, `code ${err.code}: mongod's fixDocumentForInsert answers BadValue`);
  assert.equal(await c.countDocuments(), 0);
  await stillServing();
});

h.test('the server refuses a >16 MiB document sent in an OP_MSG document sequence with 2 BadValue (mongod\'s insert check)', async () => {
  const db = srv.freshDb('bigseq');
  const big = { _id: 1, x: 'y'.repeat(16 * 1024 * 1024) };
  const r = await raw(db.databaseName, { insert: 'c' }, { documents: [big] });
  assert.equal(replyCode(r), 2, `reply: ${JSON.stringify({ ...r, writeErrors: r.writeErrors })}`);
  assert.match(r.writeErrors[0].errmsg, /^object to insert too large\. size in bytes: \d+, max size: 16777216$/);
  assert.equal(await db.collection('c').countDocuments(), 0);
  await stillServing();
});

h.test('the server refuses a >16 MiB document inline in the command with 2 BadValue', async () => {
  const db = srv.freshDb('biginline');
  // The document is just over 16 MiB; the command stays within 16 MiB + 16 KiB.
  const doc = { _id: 1, x: 'z'.repeat(16 * 1024 * 1024 + 100) };
  const r = await raw(db.databaseName, { insert: 'c', documents: [doc] });
  assert.equal(replyCode(r), 2, `reply: ${JSON.stringify(r).slice(0, 500)}`);
  await stillServing();
});

h.test('a document of exactly 16 MiB is accepted and read back', async () => {
  const c = srv.freshDb('exact').collection('c');
  const overhead = BSON.calculateObjectSize({ _id: 1, x: '' });
  const doc = { _id: 1, x: 'a'.repeat(16 * 1024 * 1024 - overhead) };
  assert.equal(BSON.calculateObjectSize(doc), 16 * 1024 * 1024);
  await c.insertOne(doc);
  const got = await c.findOne({ _id: 1 });
  assert.equal(got.x.length, doc.x.length);
  await stillServing();
});

h.test('an update that grows a document beyond 16 MiB fails with 10334 and mongod\'s update message; an upsert with 17420', async () => {
  const c = srv.freshDb('growbig').collection('c');
  await c.insertOne({ _id: 1, a: 'a'.repeat(9 * 1024 * 1024) });
  const e = await c.updateOne({ _id: 1 }, { $set: { b: 'b'.repeat(9 * 1024 * 1024) } }).then(() => null, (x) => x);
  assert.equal(e && e.code, 10334, String(e));
  assert.equal(e.errmsg || e.message, 'Resulting document after update is larger than 16777216');
  const f = await c.findOneAndUpdate({ _id: 1 }, { $set: { b: 'b'.repeat(9 * 1024 * 1024) } }).then(() => null, (x) => x);
  assert.equal(f && f.code, 10334, String(f));
  assert.equal((await c.findOne({ _id: 1 })).b, undefined);
  // The pipeline doubles a 9 MiB string into an 18 MiB document (the command itself stays under the limit).
  const u = await c.updateOne({ _id: 2 }, [{ $set: { a: 'a'.repeat(9 * 1024 * 1024) } }, { $set: { b: '$a' } }], { upsert: true })
    .then(() => null, (x) => x);
  assert.equal(u && u.code, 17420, String(u));
  assert.equal(u.errmsg || u.message, 'Document to upsert is larger than 16777216');
  assert.equal(await c.countDocuments({ _id: 2 }), 0);
  await stillServing();
});

h.test('$-prefixed field names inside _id are refused', async () => {
  const db = srv.freshDb('dollarid');
  const r = await raw(db.databaseName, { insert: 'c', documents: [{ _id: { $bad: 1 } }] });
  assert.equal(replyCode(r), 52, `reply: ${JSON.stringify(r)}`); // DollarPrefixedFieldName
  await stillServing();
});

h.test('$-prefixed top-level fields in inserted documents are allowed (MongoDB 5.0+)', async () => {
  const db = srv.freshDb('dollartop');
  const r = await db.command({ insert: 'c', documents: [{ _id: 1, $price: 5, n: { $x: 1 } }] });
  assert.equal(r.ok, 1);
  assert.equal(r.n, 1);
  await stillServing();
});

h.test('an _id that is an array or regex is refused (code 2)', async () => {
  const db = srv.freshDb('badid');
  let r = await raw(db.databaseName, { insert: 'c', documents: [{ _id: [1, 2] }] });
  assert.equal(replyCode(r), 2, JSON.stringify(r));
  r = await raw(db.databaseName, { insert: 'c', documents: [{ _id: /x/ }] });
  assert.equal(replyCode(r), 2, JSON.stringify(r));
  await stillServing();
});

h.test('invalid collection names fail with InvalidNamespace (73)', async () => {
  const db = srv.freshDb('badcoll');
  await h.expectCode(db.command({ insert: 'a$b', documents: [{}] }), 73);
  await h.expectCode(db.command({ insert: '', documents: [{}] }), 73);
  await h.expectCode(db.command({ create: 'bad\0name' }), [73, 2]);
  await stillServing();
});

h.test('invalid database names fail with InvalidNamespace (73)', async () => {
  for (const name of ['bad.db', 'bad db', 'bad/db', 'x'.repeat(70), '']) {
    const r = await raw(name, { insert: 'c', documents: [{ a: 1 }] });
    assert.equal(r.ok, 0, `db ${JSON.stringify(name)} accepted`);
    assert.equal(r.code, 73, `db ${JSON.stringify(name)}: ${JSON.stringify(r)}`);
  }
  await stillServing();
});

h.test('a command without $db fails', async () => {
  const conn = await h.rawConnect(srv.port);
  try {
    await conn.send(h.buildOpMsg(1, { ping: 1 }));
    const r = await conn.readReply();
    if (r) assert.equal(r.ok, 0);
  } finally { conn.close(); }
  await stillServing();
});

function nested(depth) {
  let d = { leaf: 1 };
  for (let i = 0; i < depth; i++) d = { n: d };
  return d;
}

h.test('a document nested deeper than the limit is refused', async () => {
  const db = srv.freshDb('deep');
  // 250 levels is beyond both the storage (100 documented) and the BSON parse limit.
  const r = await raw(db.databaseName, { insert: 'c', documents: [{ _id: 1, d: nested(250) }] });
  assert.notEqual(replyCode(r), undefined, `accepted: ${JSON.stringify(r).slice(0, 200)}`);
  assert.equal(await db.collection('c').countDocuments(), 0);
  await stillServing();
});

h.test('a filter nested very deeply is refused without crashing', async () => {
  const db = srv.freshDb('deepfilter');
  let f = { a: 1 };
  for (let i = 0; i < 300; i++) f = { $and: [f] };
  const r = await raw(db.databaseName, { find: 'c', filter: f });
  assert.equal(r.ok, 0);
  await stillServing();
});

h.test('a moderately nested document (50 levels) is accepted', async () => {
  const c = srv.freshDb('nest50').collection('c');
  await c.insertOne({ _id: 1, d: nested(50) });
  assert.equal(await c.countDocuments(), 1);
  await stillServing();
});

h.test('an OP_MSG body with invalid BSON is rejected and the server keeps serving', async () => {
  const conn = await h.rawConnect(srv.port);
  const good = Buffer.from(BSON.serialize({ ping: 1, $db: 'admin' }));
  const bad = Buffer.from(good);
  bad.writeInt32LE(good.length + 1000, 0); // document length larger than the message
  await conn.send(h.buildOpMsg(1, null, {}, { rawBody: bad }));
  const r = await conn.readReply(5000).catch(() => null);
  if (r) assert.equal(r.ok, 0, 'invalid BSON must not succeed');
  conn.close();
  await stillServing();
});

h.test('a BSON string without its NUL terminator is rejected', async () => {
  const conn = await h.rawConnect(srv.port);
  const good = Buffer.from(BSON.serialize({ ping: 1, $db: 'admin', s: 'abc' }));
  const bad = Buffer.from(good);
  // The string value "abc\0" is the last element; overwrite its NUL.
  bad[bad.length - 2] = 0x41;
  await conn.send(h.buildOpMsg(1, null, {}, { rawBody: bad }));
  const r = await conn.readReply(5000).catch(() => null);
  if (r) assert.equal(r.ok, 0);
  conn.close();
  await stillServing();
});

h.test('a very large batch (100,001 documents) is refused or split by the driver', async () => {
  const db = srv.freshDb('bigbatch');
  const docs = Array.from({ length: 100001 }, (_, i) => ({ _id: i }));
  const r = await raw(db.databaseName, { insert: 'c' }, { documents: docs });
  // MongoDB: "Write batch sizes must be between 1 and 100000" (InvalidLength, 16).
  assert.equal(r.ok, 0, JSON.stringify(r).slice(0, 300));
  assert.equal(r.code, 16);
  await stillServing();
});

h.test('operations keep working after all the bad input', async () => {
  const c = srv.freshDb('after').collection('c');
  await c.insertOne({ _id: 1 });
  assert.equal(await c.countDocuments(), 1);
  const c2 = new MongoClient(srv.uri);
  await c2.connect();
  assert.equal((await c2.db('admin').command({ hello: 1 })).ok, 1);
  await c2.close();
});
