'use strict';
/*
 * How the write commands parse their arguments, as mongod 8.0's IDL does:
 * write_ops.idl's types (ordered, multi and upsert are 'bool': a number is
 * 14 TypeMismatch, null the default; bypassDocumentValidation is a
 * 'safeBool'), the delete statements' limit read by write_ops_parsers.cpp's
 * readMultiDeleteProperty (any type, BSONElement::numberDouble), find's
 * fields (ntoreturn left find_command.idl in 7.0) and write concern's w
 * (write_concern_idl.cpp's deserializeWriteConcernW).
 */
const assert = require('node:assert/strict');
const { Double } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

h.test('ordered is an IDL bool on insert, update, delete and bulkWrite: a number is 14, null the default', async () => {
  const db = srv.freshDb('wp_ordered');
  const c = db.collection('c');
  await h.expectCode(db.command({ insert: 'c', documents: [{ _id: 1 }], ordered: 0 }), 14,
    /^BSON field 'insert\.ordered' is the wrong type 'int', expected type 'bool'$/);
  await h.expectCode(db.command({ update: 'c', updates: [{ q: {}, u: { $set: { a: 1 } } }], ordered: new Double(1) }), 14,
    /^BSON field 'update\.ordered' is the wrong type 'double', expected type 'bool'$/);
  await h.expectCode(db.command({ delete: 'c', deletes: [{ q: {}, limit: 0 }], ordered: 'yes' }), 14,
    /^BSON field 'delete\.ordered' is the wrong type 'string', expected type 'bool'$/);
  await h.expectCode(srv.client.db('admin').command({
    bulkWrite: 1, ops: [{ insert: 0, document: { _id: 1 } }], nsInfo: [{ ns: `${db.databaseName}.c` }], ordered: 1,
  }), 14, /^BSON field 'bulkWrite\.ordered' is the wrong type 'int', expected type 'bool'$/);
  assert.equal(await c.countDocuments(), 0, 'nothing ran');
  // null is ordered's default (true): the batch stops at its first error.
  const r = await db.command({ insert: 'c', documents: [{ _id: 1 }, { _id: 1 }, { _id: 2 }], ordered: null });
  assert.equal(r.n, 1, JSON.stringify(r));
  assert.equal(r.writeErrors.length, 1);
  // A bool works as before; bypassDocumentValidation, a safeBool, still takes a number.
  const u = await db.command({ insert: 'c', documents: [{ _id: 1 }, { _id: 3 }], ordered: false, bypassDocumentValidation: 1 });
  assert.equal(u.n, 1, JSON.stringify(u));
});

h.test('update statements: multi and upsert are IDL bools (14 for a number), null is false; u not a document or pipeline is 9', async () => {
  const db = srv.freshDb('wp_multi');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 1 }]);
  await h.expectCode(db.command({ update: 'c', updates: [{ q: {}, u: { $set: { b: 1 } }, multi: 1 }] }), 14,
    /^BSON field 'update\.updates\.multi' is the wrong type 'int', expected type 'bool'$/);
  await h.expectCode(db.command({ update: 'c', updates: [{ q: { _id: 9 }, u: { $set: { b: 1 } }, upsert: new Double(1) }] }), 14,
    /^BSON field 'update\.updates\.upsert' is the wrong type 'double', expected type 'bool'$/);
  // The whole command fails at parse time: an earlier valid statement did not run either.
  await h.expectCode(db.command({
    update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { c: 1 } } }, { q: {}, u: { $set: { b: 1 } }, multi: 0 }],
  }), 14, /update\.updates\.multi/);
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [{ _id: 1, a: 1 }, { _id: 2, a: 1 }]);
  // u is write_ops.idl's update_modification (type any): neither a document nor a pipeline is 9 at parse time.
  for (const u of ['x', 1, null]) {
    await h.expectCode(db.command({ update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { c: 1 } } }, { q: {}, u }] }), 9,
      /^Update argument must be either an object or an array$/);
  }
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [{ _id: 1, a: 1 }, { _id: 2, a: 1 }]);
  // null is the default: one document, no upsert.
  const r = await db.command({ update: 'c', updates: [{ q: {}, u: { $set: { b: 1 } }, multi: null, upsert: null }] });
  assert.equal(r.n, 1, JSON.stringify(r));
  const r2 = await db.command({ update: 'c', updates: [{ q: { _id: 7 }, u: { $set: { b: 1 } }, upsert: null }] });
  assert.equal(r2.n, 0, JSON.stringify(r2));
  assert.equal(await c.countDocuments(), 2);
  // findAndModify's upsert is a safeBool (find_and_modify.idl): a number still works there.
  const f = await db.command({ findAndModify: 'c', query: { _id: 8 }, update: { $set: { b: 1 } }, upsert: 1, new: 1 });
  assert.deepEqual(f.value, { _id: 8, b: 1 });
});

h.test("delete's limit is readMultiDeleteProperty: any type, a non-number reads as 0 (every match)", async () => {
  const db = srv.freshDb('wp_limit');
  const c = db.collection('c');
  const seed = () => c.insertMany([{ _id: 1, k: 1 }, { _id: 2, k: 1 }, { _id: 3, k: 2 }]);
  await seed();
  // numberDouble() of a bool is 0: {limit: true} deletes every match, as mongod does.
  let r = await db.command({ delete: 'c', deletes: [{ q: { k: 1 }, limit: true }] });
  assert.equal(r.n, 2, JSON.stringify(r));
  await c.deleteMany({});
  await seed();
  r = await db.command({ delete: 'c', deletes: [{ q: { k: 1 }, limit: 'one' }] });
  assert.equal(r.n, 2, JSON.stringify(r));
  await c.deleteMany({});
  await seed();
  r = await db.command({ delete: 'c', deletes: [{ q: { k: 1 }, limit: 1 }] });
  assert.equal(r.n, 1, JSON.stringify(r));
  // A number other than 0 or 1 is still 9, the whole command refused.
  await h.expectCode(db.command({ delete: 'c', deletes: [{ q: {}, limit: 0 }, { q: {}, limit: 2 }] }), 9,
    /^The limit field in delete objects must be 0 or 1\. Got 2$/);
  assert.equal(await c.countDocuments(), 2);
  // limit stays required.
  await h.expectCode(db.command({ delete: 'c', deletes: [{ q: {} }] }), 40414,
    /^BSON field 'delete\.deletes\.limit' is missing but a required field$/);
});

h.test('find: ntoreturn is no find field in 8.0 (40415); the drivers\' fields still work', async () => {
  const db = srv.freshDb('wp_ntoreturn');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  await h.expectCode(db.command({ find: 'c', filter: {}, ntoreturn: 2 }), 40415,
    /^BSON field 'find\.ntoreturn' is an unknown field\.$/);
  assert.equal((await c.find({}, { limit: 2, batchSize: 1 }).toArray()).length, 2);
});

h.test('writeConcern w: null is the default, {} and non-number tags are 9, a fraction is truncated', async () => {
  const db = srv.freshDb('wp_wc');
  const c = db.collection('c');
  const ins = (w, id) => db.command({ insert: 'c', documents: [{ _id: id }], writeConcern: { w } });
  assert.equal((await ins(null, 1)).n, 1);
  assert.equal((await ins(1.5, 2)).n, 1);
  await h.expectCode(ins({}, 3), 9, /^tagged write concern requires tags$/);
  await h.expectCode(ins({ dc: 'east' }, 3), 9,
    /^tags must be a single level document with only number values; found: dc: "east"$/);
  await h.expectCode(ins(true, 3), 9, /^w has to be a number, string, or object; found: bool$/);
  await h.expectCode(ins(51, 3), 9, /^w has to be a non-negative number and not greater than 50; found: 51$/);
  assert.equal(await c.countDocuments(), 2);
});

h.test('update: sort with multi: true fails the command (9, ok: 0) where performUpdates meets it; earlier statements stay done', async () => {
  const db = srv.freshDb('wp_sortmulti');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, r: 2 }, { _id: 2, r: 1 }]);
  const reply = await db.command({
    update: 'c',
    updates: [
      { q: { _id: 1 }, u: { $set: { done: true } } },
      { q: {}, u: { $set: { z: 1 } }, multi: true, sort: { r: 1 } },
      { q: { _id: 2 }, u: { $set: { done: true } } },
    ],
    ordered: false,
  }).then((r) => r, (e) => e);
  assert.equal(reply.ok, 0, JSON.stringify(reply));
  assert.equal(reply.code, 9);
  assert.equal(reply.errorResponse?.errmsg ?? reply.errmsg, 'Cannot specify sort with multi=true');
  // mongod ran statement 0 before meeting statement 1, and stopped there even unordered.
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [{ _id: 1, r: 2, done: true }, { _id: 2, r: 1 }]);
  // sort with a single-document update is fine.
  const ok = await db.command({ update: 'c', updates: [{ q: {}, u: { $set: { first: true } }, sort: { r: 1 } }] });
  assert.equal(ok.nModified, 1);
  assert.deepEqual(await c.findOne({ first: true }), { _id: 2, r: 1, first: true });
});

h.test('delete takes bypassDocumentValidation (WriteCommandRequestBase, a safeBool) as insert and update do', async () => {
  const db = srv.freshDb('wp_delbypass');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1 }, { _id: 2 }]);
  assert.equal((await db.command({ delete: 'c', deletes: [{ q: { _id: 1 }, limit: 1 }], bypassDocumentValidation: true })).n, 1);
  assert.equal((await db.command({ delete: 'c', deletes: [{ q: { _id: 2 }, limit: 1 }], bypassDocumentValidation: 0 })).n, 1);
  await h.expectCode(db.command({ delete: 'c', deletes: [{ q: {}, limit: 0 }], bypassDocumentValidation: 'yes' }), 14,
    /^BSON field 'delete\.bypassDocumentValidation' is the wrong type 'string', expected types '\[bool, long, int, decimal, double'\]$/);
});
