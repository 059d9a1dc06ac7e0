'use strict';
// Executor errors carry mongod's context. An error that arises while a plan
// runs (an expression that fails on a document, a duplicate key, a failed
// update, a document too large) is reported as mongod's commands report what
// their plan executor throws: "<context> :: caused by :: <message>", the code
// and the extra fields (keyPattern, keyValue) kept. Errors of parsing and
// planning (an unknown stage or modifier, a $merge target without a unique
// index for its on fields) come bare, as mongod's; a planner's refusal (a hint
// naming no index) has mongod's "error processing query: <canonical query>
// planner returned error :: caused by :: <reason>" (index_edges_compat.test.js).
// Applications match these messages: Mongoose users test
// err.message.includes('Plan executor error during findAndModify') to tell a
// duplicate from other failures of findOneAndUpdate.
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const mongoose = require('mongoose');
const h = require('./harness');

const srv = h.useServer();

const HINT = /^error processing query: ns=.*planner returned error :: caused by :: hint provided does not correspond to an existing index$/s;
const FIND = 'Executor error during find command :: caused by :: ';
const GETMORE = 'Executor error during getMore :: caused by :: ';
const AGG = 'PlanExecutor error during aggregation :: caused by :: ';
const FAM = 'Plan executor error during findAndModify :: caused by :: ';

/* The error promise rejects with, checked for code and exact message. */
async function fails(promise, code, message) {
  let err;
  try {
    await promise;
  } catch (e) {
    err = e;
  }
  assert.ok(err, `expected error ${code} "${message}", got success`);
  assert.equal(err.code, code, err.message);
  if (message instanceof RegExp) assert.match(err.message, message);
  else assert.equal(err.message, message);
  return err;
}

async function seeded(tag) {
  const db = srv.freshDb(tag);
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 1, b: 0, u: 1 }, { _id: 2, a: 'x', b: 2, u: 2 }]);
  await c.createIndex({ u: 1 }, { unique: true });
  return { db, c };
}

h.test('find: an expression failing on a document is "Executor error during find command"; parse and plan errors are bare', async () => {
  const { c } = await seeded('execfind');
  const div = { $expr: { $divide: ['$a', '$b'] } };
  await fails(c.find(div).toArray(), 2, `${FIND}can't $divide by zero`);
  // A sort no index provides runs as a blocking sort over the plan's results: still the find's executor.
  await fails(c.find(div).sort({ z: 1 }).toArray(), 2, `${FIND}can't $divide by zero`);
  await fails(c.find({}, { projection: { x: { $add: ['$a', 'y'] } } }).sort({ _id: -1 }).toArray(), 14,
    `${FIND}$add only supports numeric or date types, not string`);
  await fails(c.find({}).hint({ nope: 1 }).toArray(), 2, HINT);
  await fails(c.find({ a: { $bogus: 1 } }).toArray(), 2, 'unknown operator: $bogus');
  assert.deepEqual(await c.find({ $expr: { $eq: ['$b', 0] } }).toArray(), [{ _id: 1, a: 1, b: 0, u: 1 }]);
});

h.test('a positional projection with no matching element carries its command\'s context once: find, getMore, findAndModify', async () => {
  const db = srv.freshDb('execpos');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: [1, 2] }, { _id: 2, a: [3] }]);
  const MISS = "positional operator '.$' couldn't find a matching element in the array";
  await fails(c.find({ a: { $exists: true } }, { projection: { 'a.$': 1 } }).toArray(), 51246, `${FIND}${MISS}`);
  const r = await db.command({ find: 'c', filter: { a: { $exists: true }, _id: { $lte: 2 } }, projection: { 'a.$': 1 }, batchSize: 0 });
  await fails(db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c' }), 51246, `${GETMORE}${MISS}`);
  await fails(c.findOneAndUpdate({ _id: 1 }, { $set: { b: 1 } }, { projection: { 'a.$': 1 } }), 51246, `${FAM}${MISS}`);
});

h.test('getMore: what fails in a later batch is "Executor error during getMore", a dropped collection included', async () => {
  const { db, c } = await seeded('execgetmore');
  await c.deleteOne({ _id: 2 });
  await c.insertMany(Array.from({ length: 5 }, (_, i) => ({ _id: 10 + i, a: 1, b: 1, u: 10 + i })));
  // _id order: 1 (b 0) first; sorted descending, the bad document comes last, past the first batch.
  const r = await db.command({ find: 'c', filter: { $expr: { $divide: ['$a', '$b'] } }, sort: { _id: -1 }, hint: { _id: 1 }, batchSize: 2 });
  assert.equal(r.cursor.firstBatch.length, 2);
  await fails(db.command({ getMore: h.cursorId(r.cursor.id), collection: 'c' }), 2, `${GETMORE}can't $divide by zero`);
  const r2 = await db.command({ find: 'c', batchSize: 1 });
  await c.drop();
  const err = await db.command({ getMore: h.cursorId(r2.cursor.id), collection: 'c' }).catch((e) => e);
  assert.equal(err.code, 175, err.message);
  assert.match(err.message, /^Executor error during getMore :: caused by :: collection dropped\. UUID [0-9a-f-]{36}$/);
});

h.test('aggregate: runtime errors, a $merge duplicate included, are "PlanExecutor error during aggregation"; parse-time ones are bare', async () => {
  const { db, c } = await seeded('execagg');
  await fails(c.aggregate([{ $project: { x: { $divide: ['$a', '$b'] } } }]).toArray(), 2, `${AGG}can't $divide by zero`);
  await fails(c.aggregate([{ $bogus: 1 }]).toArray(), 40324, "Unrecognized pipeline stage name: '$bogus'");
  await fails(c.aggregate([], { hint: { nope: 1 } }).toArray(), 2, HINT);
  await fails(c.aggregate([{ $project: { _id: 0, u: 1 } }, { $merge: { into: 'other', on: 'zz' } }]).toArray(), 51183,
    'Cannot find index to verify that join fields will be unique');
  await fails(c.aggregate([{ $project: { _id: 0, u: 1 } }, { $merge: { into: 'c', on: 'zz' } }]).toArray(), 51183,
    'Cannot find index to verify that join fields will be unique');
  const e = await fails(c.aggregate([{ $project: { _id: 0, u: 1 } }, { $merge: { into: 'c', on: '_id' } }]).toArray(), 11000,
    `${AGG}E11000 duplicate key error collection: ${db.databaseName}.c index: u_1 dup key: { u: 1 }`);
  assert.deepEqual(e.keyValue, { u: 1 });
  // Streamed into another collection, batch by batch: the same context.
  await db.collection('t').createIndex({ u: 1 }, { unique: true });
  await db.collection('t').insertOne({ _id: 'old', u: 2 });
  await fails(c.aggregate([{ $merge: { into: 't' } }]).toArray(), 11000,
    `${AGG}E11000 duplicate key error collection: ${db.databaseName}.t index: u_1 dup key: { u: 2 }`);
  await fails(c.aggregate([{ $project: { u: 1 } }, { $merge: { into: 'fresh', whenNotMatched: 'fail' } }]).toArray(), 13113,
    `${AGG}$merge could not find a matching document in the target collection for at least one document in the source collection`);
  // A pipeline run whole (over $documents, or merging into its own collection) fails the same way.
  await fails(db.aggregate([{ $documents: [{ x: 0 }] }, { $project: { y: { $divide: [1, '$x'] } } }]).toArray(), 2,
    `${AGG}can't $divide by zero`);
  await fails(c.aggregate([{ $project: { y: { $divide: [1, '$b'] } } }, { $merge: { into: 'c' } }]).toArray(), 2,
    `${AGG}can't $divide by zero`);
  // Collectionless: $documents into a collection.
  await fails(db.aggregate([{ $documents: [{ u: 1 }] }, { $merge: { into: 'c' } }]).toArray(), 11000,
    `${AGG}E11000 duplicate key error collection: ${db.databaseName}.c index: u_1 dup key: { u: 1 }`);
  assert.equal(await c.countDocuments(), 2, 'the failed $merge into c changed nothing');
});

h.test('aggregate: an expression over constants that fails is "Failed to optimize pipeline", in any stage, also over an empty collection; a malformed one stays the stage\'s parse error', async () => {
  const { db, c } = await seeded('execopt');
  const D = { $divide: [1, 0] };
  const OPT = 'Failed to optimize pipeline :: caused by :: ';
  const empty = db.collection('empty');
  for (const coll of [c, empty]) {
    for (const p of [[{ $project: { x: D } }], [{ $addFields: { x: D } }], [{ $match: { $expr: D } }], [{ $group: { _id: D } }],
      [{ $group: { _id: null, s: { $sum: D } } }], [{ $replaceRoot: { newRoot: { x: D } } }],
      [{ $match: { a: 1 } }, { $project: { x: { $cond: [true, 1, D] } } }]]) {
      await fails(coll.aggregate(p).toArray(), 2, `${OPT}can't $divide by zero`);
    }
  }
  // A constant time zone is opened as the pipeline is optimized; one from a field as it runs.
  await fails(c.aggregate([{ $project: { h: { $hour: { date: new Date(0), timezone: 'Nowhere/Else' } } } }]).toArray(), 40485,
    `${OPT}unrecognized time zone identifier: "Nowhere/Else"`);
  await fails(c.aggregate([{ $project: { x: { $bogus: 1 } } }]).toArray(), 168, "Invalid $project :: caused by :: Unrecognized expression '$bogus'");
  // The other commands that optimize a pipeline: explain, a find on a view (run as an aggregation).
  await fails(db.command({ explain: { aggregate: 'c', pipeline: [{ $project: { x: D } }], cursor: {} } }), 2, `${OPT}can't $divide by zero`);
  await db.createCollection('v', { viewOn: 'c', pipeline: [] });
  await fails(db.collection('v').find({}, { projection: { x: D } }).toArray(), 2, `${OPT}can't $divide by zero`);
  await fails(db.collection('v').find({ $expr: D }).toArray(), 2, `${OPT}can't $divide by zero`);
  // An update's pipeline is not optimized by mongod: its error is the expression's own.
  const w = await c.updateOne({ _id: 1 }, [{ $set: { x: D } }]).catch((e) => e);
  assert.equal(w.code, 2);
  assert.equal(w.message, "can't $divide by zero");
});

h.test('findAndModify: a duplicate key, an update that fails on the document or an immutable _id are "Plan executor error during findAndModify"', async () => {
  const { db, c } = await seeded('execfam');
  const e = await fails(c.findOneAndUpdate({ _id: 1 }, { $set: { u: 2 } }), 11000,
    `${FAM}E11000 duplicate key error collection: ${db.databaseName}.c index: u_1 dup key: { u: 2 }`);
  assert.deepEqual(e.keyPattern, { u: 1 });
  assert.deepEqual(e.keyValue, { u: 2 });
  await fails(c.findOneAndUpdate({ _id: 2 }, { $inc: { a: 1 } }), 14,
    `${FAM}Cannot apply $inc to a value of non-numeric type. {_id: 2} has the field 'a' of non-numeric type string`);
  await fails(c.findOneAndUpdate({ _id: 9 }, { $set: { u: 2 } }, { upsert: true }), 11000,
    `${FAM}E11000 duplicate key error collection: ${db.databaseName}.c index: u_1 dup key: { u: 2 }`);
  await fails(c.findOneAndUpdate({ _id: 1 }, { $set: { _id: 5 } }), 66,
    `${FAM}Performing an update on the path '_id' would modify the immutable field '_id'`);
  await fails(c.findOneAndUpdate({ _id: 2 }, [{ $set: { v: { $abs: '$a' } } }]), 28765,
    `${FAM}$abs only supports numeric types, not string`);
  // Parsing and planning: bare.
  await fails(c.findOneAndUpdate({ _id: 1 }, { $inc: { a: 'x' } }), 14, 'Cannot increment with non-numeric argument: {a: "x"}');
  await fails(c.findOneAndUpdate({ _id: 1 }, { $set: { u: 5 } }, { hint: { nope: 1 } }), 2,
    HINT);
  // updateOne with a sort picks its document as findAndModify does, but is an update: its write error is bare.
  const w = await c.updateOne({ _id: 1 }, { $set: { u: 2 } }, { sort: { _id: 1 } }).catch((x) => x);
  assert.equal(w.code, 11000);
  assert.equal(w.message, `E11000 duplicate key error collection: ${db.databaseName}.c index: u_1 dup key: { u: 2 }`);
  assert.deepEqual(await c.find().sort({ _id: 1 }).toArray(), [{ _id: 1, a: 1, b: 0, u: 1 }, { _id: 2, a: 'x', b: 2, u: 2 }]);
});

h.test('Mongoose: findOneAndUpdate onto a taken unique value is told apart by "Plan executor error during findAndModify", as applications test it', async () => {
  const db = srv.freshDb('execmongoose');
  const conn = await mongoose.createConnection(srv.uri, { dbName: db.databaseName }).asPromise();
  try {
    const Project = conn.model('Project', new mongoose.Schema({ name: { type: String, unique: true } }));
    await Project.init();
    const [a] = await Project.create([{ name: 'alpha' }, { name: 'beta' }]);
    const err = await Project.findByIdAndUpdate(a._id, { name: 'beta' }, { new: true, runValidators: true }).catch((e) => e);
    assert.equal(err.code, 11000);
    assert.ok(err.message.startsWith('Plan executor error during findAndModify'), err.message);
    assert.match(err.message, /E11000 duplicate key error collection: .*\.projects index: name_1 dup key: \{ name: "beta" \}$/);
    assert.equal((await Project.findById(a._id)).name, 'alpha');
  } finally {
    await conn.close();
  }
});

h.test('pymongo: find_one_and_update raises DuplicateKeyError whose message has the findAndModify context', () => {
  const script = `
import sys, pymongo
from pymongo.errors import DuplicateKeyError
c = pymongo.MongoClient(sys.argv[1])[sys.argv[2]].c
c.insert_many([{"_id": 1, "u": 1}, {"_id": 2, "u": 2}])
c.create_index("u", unique=True)
try:
    c.find_one_and_update({"_id": 1}, {"$set": {"u": 2}})
    print("no error")
except DuplicateKeyError as e:
    print(e.code, e.details["errmsg"])
`;
  const db = srv.freshDb('execpy');
  const out = execFileSync('/usr/bin/python3', ['-c', script, srv.uri, db.databaseName], { encoding: 'utf8' }).trim();
  assert.equal(out, `11000 ${FAM}E11000 duplicate key error collection: ${db.databaseName}.c index: u_1 dup key: { u: 2 }`);
});

h.test('distinct: an expression failing on a document is "Executor error during distinct command"; count\'s stays bare (8.0)', async () => {
  const { db, c } = await seeded('execdistinct');
  const div = { $expr: { $divide: ['$a', '$b'] } };
  await fails(c.distinct('a', div), 2, "Executor error during distinct command :: caused by :: can't $divide by zero");
  await fails(c.distinct('a', {}, { hint: { nope: 1 } }), 2, HINT);
  await fails(db.command({ count: 'c', query: div }), 2, "can't $divide by zero");
  assert.deepEqual(await c.distinct('a', { $expr: { $eq: ['$b', 0] } }), [1]);
});

h.test('$currentOp on a collection is refused while parsing, bare as mongod\'s: 73, no executor context', async () => {
  const { c } = await seeded('execcurop');
  await fails(c.aggregate([{ $currentOp: {} }]).toArray(), 73,
    "$currentOp must be run against the 'admin' database with {aggregate: 1}");
});
