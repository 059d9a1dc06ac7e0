'use strict';
/*
 * Update operators at their edges, as MongoDB 8.0 answers (a review of the
 * update language against mongod's update nodes): $push's $slice and
 * $position at the ends of the 64-bit range, $pull's conditions of fields
 * on nested arrays, $rename of a source that cannot be traversed,
 * $push $sort field names, arrayFilters' element types, $$CLUSTER_TIME on
 * a standalone server, and a statement's constants (c; bulkWrite's
 * constants) for pipeline updates.
 */
const assert = require('node:assert/strict');
const { Long, Double } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

/* Runs one update statement on a collection holding doc; returns the reply and the document after. */
async function update(tag, doc, u, extra = {}) {
  const db = srv.freshDb(tag);
  await db.collection('c').insertOne(doc);
  const r = await db.command({ update: 'c', updates: [{ q: { _id: doc._id }, u, ...extra }] });
  return { r, after: await db.collection('c').findOne({ _id: doc._id }), db };
}

function writeError(r, code, msg) {
  assert.equal(r.writeErrors?.length, 1, JSON.stringify(r));
  assert.equal(r.writeErrors[0].code, code, JSON.stringify(r));
  if (msg) assert.equal(r.writeErrors[0].errmsg, msg);
}

h.test('$push $slice and $position of NumberLong(-2^63) count from the end without overflowing', async () => {
  const min = Long.MIN_VALUE;
  let { r, after } = await update('ue_slice_min', { _id: 1, a: [3, 1, 2] }, { $push: { a: { $each: [5], $slice: min } } });
  assert.equal(r.nModified, 1);
  assert.deepEqual(after.a, [3, 1, 2, 5]); // keep the last 2^63: everything
  ({ r, after } = await update('ue_pos_min', { _id: 1, a: [3, 1, 2] }, { $push: { a: { $each: [5], $position: min } } }));
  assert.equal(r.nModified, 1);
  assert.deepEqual(after.a, [5, 3, 1, 2]); // 2^63 from the end: the front
  ({ after } = await update('ue_slice_max', { _id: 1, a: [3, 1, 2] },
    { $push: { a: { $each: [5], $slice: Long.MAX_VALUE, $position: Long.MAX_VALUE } } }));
  assert.deepEqual(after.a, [3, 1, 2, 5]);
  ({ after } = await update('ue_slice_neg', { _id: 1, a: [3, 1, 2] }, { $push: { a: { $each: [5], $slice: -2 } } }));
  assert.deepEqual(after.a, [2, 5]);
});

h.test('$pull with a condition of fields removes documents only, never nested arrays', async () => {
  let { after } = await update('ue_pull_empty', { _id: 1, a: [1, { x: 1 }, [2], []] }, { $pull: { a: {} } });
  assert.deepEqual(after.a, [1, [2], []]);
  ({ after } = await update('ue_pull_field', { _id: 1, a: [1, { x: 1 }, [{ x: 1 }], []] }, { $pull: { a: { x: 1 } } }));
  assert.deepEqual(after.a, [1, [{ x: 1 }], []]);
  // An operator condition applies to each element itself, arrays included.
  ({ after } = await update('ue_pull_op', { _id: 1, a: [1, { x: 1 }, [2], []] }, { $pull: { a: { $size: 0 } } }));
  assert.deepEqual(after.a, [1, { x: 1 }, [2]]);
});

h.test('$rename of a source that cannot be traversed is 28 PathNotViable; inside an array by index, 2', async () => {
  let { r, after } = await update('ue_ren_scalar', { _id: 1, a: 5 }, { $rename: { 'a.b': 'c' } });
  writeError(r, 28, 'cannot use the part (a of a.b) to traverse the element ({a: 5})');
  assert.deepEqual(after, { _id: 1, a: 5 });
  ({ r } = await update('ue_ren_arr', { _id: 1, a: [{ b: 1 }] }, { $rename: { 'a.b': 'c' } }));
  writeError(r, 28);
  assert.match(r.writeErrors[0].errmsg, /^cannot use the part \(a of a\.b\) to traverse the element \(\{a: \[/);
  ({ r } = await update('ue_ren_idx', { _id: 1, a: [{ b: 1 }] }, { $rename: { 'a.0.b': 'c' } }));
  writeError(r, 2, "The source field cannot be an array element, 'a.0.b' in doc with _id: 1 has an array field called 'a'");
  // Missing sources, through an index past the end or a missing field, change nothing.
  ({ r, after } = await update('ue_ren_past', { _id: 1, a: [{ b: 1 }] }, { $rename: { 'a.5.b': 'c' } }));
  assert.equal(r.writeErrors, undefined);
  assert.equal(r.n, 1);
  assert.equal(r.nModified, 0);
  ({ r } = await update('ue_ren_missing', { _id: 1, x: { y: 1 } }, { $rename: { 'x.z.w': 'c' } }));
  assert.equal(r.writeErrors, undefined);
  assert.equal(r.nModified, 0);
});

h.test('$push $sort field names: empty parts are 2 BadValue, a $-prefixed name is a field', async () => {
  let { r } = await update('ue_sort_dot', { _id: 1, a: [3, 1] }, { $push: { a: { $each: [], $sort: { '.x': 1 } } } });
  writeError(r, 2, 'The $sort field is a dotted field but has an empty part: .x');
  ({ r } = await update('ue_sort_empty', { _id: 1, a: [3, 1] }, { $push: { a: { $each: [], $sort: { '': 1 } } } }));
  writeError(r, 2, 'The $sort field cannot be empty');
  ({ r } = await update('ue_sort_val', { _id: 1, a: [3, 1] }, { $push: { a: { $each: [], $sort: { '.x': 2 } } } }));
  writeError(r, 2, 'The $sort element value must be either 1 or -1');
  const db = srv.freshDb('ue_sort_dollar');
  const c = db.collection('c');
  await db.command({ insert: 'c', documents: [{ _id: 1, a: [{ k: 2 }, { k: 1 }] }] });
  const r2 = await db.command({ update: 'c', updates: [{ q: { _id: 1 }, u: { $push: { a: { $each: [], $sort: { $x: 1, k: 1 } } } } }] });
  assert.equal(r2.writeErrors, undefined, JSON.stringify(r2));
  assert.deepEqual((await c.findOne()).a, [{ k: 1 }, { k: 2 }]);
});

h.test('arrayFilters elements that are not documents fail the whole command with 14', async () => {
  const db = srv.freshDb('ue_af');
  await db.collection('c').insertOne({ _id: 1, a: [1, 2] });
  await assert.rejects(db.command({ update: 'c', updates: [{ q: {}, u: { $set: { 'a.$[e]': 0 } }, arrayFilters: [{ e: 1 }, 1] }] }),
    (e) => e.code === 14 && e.message === "BSON field 'update.updates.arrayFilters.1' is the wrong type 'int', expected type 'object'");
  await assert.rejects(db.command({ findAndModify: 'c', query: {}, update: { $set: { 'a.$[e]': 0 } }, arrayFilters: ['x'] }),
    (e) => e.code === 14 && e.message === "BSON field 'findAndModify.arrayFilters.0' is the wrong type 'string', expected type 'object'");
  assert.deepEqual(await db.collection('c').findOne(), { _id: 1, a: [1, 2] });
});

h.test('bulkWrite arrayFilters elements that are not documents fail the whole command with 14', async () => {
  const db = srv.freshDb('ue_bw_af');
  await db.collection('c').insertOne({ _id: 1, a: [1, 2] });
  await assert.rejects(srv.client.db('admin').command({
    bulkWrite: 1,
    ops: [{ update: 0, filter: {}, updateMods: { $set: { 'a.$[e]': 0 } }, arrayFilters: [{ e: 1 }, 5] }],
    nsInfo: [{ ns: `${db.databaseName}.c` }],
  }), (e) => e.code === 14 && e.message === "BSON field 'bulkWrite.ops.arrayFilters.1' is the wrong type 'int', expected type 'object'");
  assert.deepEqual(await db.collection('c').findOne(), { _id: 1, a: [1, 2] });
});

h.test('$$CLUSTER_TIME on a standalone server is 51144 where it is evaluated', async () => {
  const { r, after } = await update('ue_ct', { _id: 1 }, [{ $set: { t: '$$CLUSTER_TIME' } }]);
  writeError(r, 51144, "Builtin variable '$$CLUSTER_TIME' is not available");
  assert.deepEqual(after, { _id: 1 });
  const db = srv.freshDb('ue_ct_agg');
  await assert.rejects(db.aggregate([{ $documents: [{ a: 1 }] }, { $project: { t: '$$CLUSTER_TIME' } }]).toArray(),
    (e) => e.code === 51144);
  // In a query's $expr too: the query fails, it does not match nothing.
  await db.collection('c').insertOne({ _id: 1, a: 1 });
  await assert.rejects(db.collection('c').find({ $expr: { $lt: ['$a', '$$CLUSTER_TIME'] } }).toArray(), (e) => e.code === 51144);
});

h.test('a statement\'s constants are the variables of its pipeline update; any other update refuses them (51198)', async () => {
  let { r, after } = await update('ue_c', { _id: 1 }, [{ $set: { v: '$$v', w: { $add: ['$$v', 1] } } }], { c: { v: 10 } });
  assert.equal(r.nModified, 1);
  assert.deepEqual(after, { _id: 1, v: 10, w: 11 });
  ({ r, after } = await update('ue_c_mod', { _id: 1 }, { $set: { v: 1 } }, { c: { v: 10 } }));
  writeError(r, 51198, 'Constant values may only be specified for pipeline updates');
  assert.deepEqual(after, { _id: 1 });
  // Constants are named as variables a user reads (validateNameForUserRead): an uppercase first letter is fine.
  ({ r, after } = await update('ue_c_upper', { _id: 1 }, [{ $set: { z: '$$X' } }], { c: { X: 3 } }));
  assert.deepEqual(after, { _id: 1, z: 3 });
  ({ r } = await update('ue_c_name', { _id: 1 }, [{ $set: { v: 1 } }], { c: { '1x': 10 } }));
  writeError(r, 16867);
  ({ r } = await update('ue_c_none', { _id: 1 }, [{ $set: { v: '$$v' } }]));
  writeError(r, 17276);
  // bulkWrite's constants, per operation.
  const db = srv.freshDb('ue_c_bulk');
  await db.collection('c').insertOne({ _id: 1 });
  const bw = await srv.client.db('admin').command({
    bulkWrite: 1,
    ops: [{ update: 0, filter: { _id: 1 }, updateMods: [{ $set: { k: '$$k' } }], constants: { k: 'z' } },
      { update: 0, filter: { _id: 1 }, updateMods: { $set: { k: 1 } }, constants: { k: 'z' } }],
    nsInfo: [{ ns: `${db.databaseName}.c` }],
    ordered: false,
  });
  const res = bw.cursor.firstBatch;
  assert.equal(res[0].ok, 1);
  assert.equal(res[1].code, 51198);
  assert.deepEqual(await db.collection('c').findOne(), { _id: 1, k: 'z' });
});

h.test('$currentDate options and $addToSet\'s extra fields are refused with mongod\'s messages', async () => {
  const typeMsg = "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}";
  let { r } = await update('ue_cd_empty', { _id: 1 }, { $currentDate: { a: {} } });
  writeError(r, 2, typeMsg);
  ({ r } = await update('ue_cd_bad', { _id: 1 }, { $currentDate: { a: { $type: 'bad' } } }));
  writeError(r, 2, typeMsg);
  ({ r } = await update('ue_cd_opt', { _id: 1 }, { $currentDate: { a: { $type: 'x', other: 1 } } }));
  writeError(r, 2, 'Unrecognized $currentDate option: other');
  ({ r } = await update('ue_cd_num', { _id: 1 }, { $currentDate: { a: 1 } }));
  writeError(r, 2, "int is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({$type: 'timestamp/date'}).");
  let after;
  ({ r, after } = await update('ue_cd_ts', { _id: 1 }, { $currentDate: { a: { $type: 'timestamp' } } }));
  assert.equal(r.nModified, 1);
  assert.equal(after.a._bsontype, 'Timestamp');
  ({ r } = await update('ue_ats', { _id: 1 }, { $addToSet: { a: { $each: [1], x: 1 } } }));
  writeError(r, 2, 'Found unexpected fields after $each in $addToSet: { $each: [ 1 ], x: 1 }');
});

h.test('upsertSupplied: an upsert inserts the constants\' new document over the query\'s _id; a match runs the pipeline', async () => {
  const db = srv.freshDb('ue_supplied');
  const c = db.collection('c');
  await c.insertOne({ _id: 1, a: 1 });
  const stmt = (q, extra = {}) => ({ q, u: [{ $set: { x: 1 } }], c: { new: { skey: 'M' } }, upsert: true, upsertSupplied: true, ...extra });
  let r = await db.command({ update: 'c', updates: [stmt({ _id: 2, k: 5 })] });
  assert.deepEqual(r.upserted, [{ index: 0, _id: 2 }]);
  assert.deepEqual(await c.findOne({ _id: 2 }), { _id: 2, skey: 'M' });
  r = await db.command({ update: 'c', updates: [stmt({ _id: 1 })] });
  assert.equal(r.nModified, 1);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, a: 1, x: 1 });
  r = await db.command({ update: 'c', updates: [stmt({ _id: 3 }, { upsert: false })] });
  writeError(r, 9, "cannot specify 'upsertSupplied: true' for a non-upsert operation");
  r = await db.command({ update: 'c', updates: [stmt({ _id: 3 }, { c: { old: {} } })] });
  writeError(r, 9, "the parameter 'upsertSupplied' is set to 'true', but no document was supplied");
  assert.equal(await c.countDocuments(), 2);
  // Checked before the constants (9, not 51198), and the new document is parsed only to be inserted.
  r = await db.command({ update: 'c', updates: [{ q: { _id: 3 }, u: { $set: { x: 1 } }, c: { new: {} }, upsertSupplied: true }] });
  writeError(r, 9, "cannot specify 'upsertSupplied: true' for a non-upsert operation");
  r = await db.command({ update: 'c', updates: [stmt({ _id: 1 }, { u: [{ $set: { y: 2 } }], c: { new: { $foo: 1 } } })] });
  assert.equal(r.writeErrors, undefined, JSON.stringify(r));
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, a: 1, x: 1, y: 2 });
  // With 8.0's sort (the first document in sort order is updated): the upsert inserts the supplied document too.
  r = await db.command({ update: 'c', updates: [stmt({ _id: 4, k: 5 }, { sort: { a: -1 } })] });
  assert.deepEqual(r.upserted, [{ index: 0, _id: 4 }], JSON.stringify(r));
  assert.deepEqual(await c.findOne({ _id: 4 }), { _id: 4, skey: 'M' });
  r = await db.command({ update: 'c', updates: [stmt({ a: 1 }, { sort: { _id: -1 }, u: [{ $set: { z: 3 } }] })] });
  assert.equal(r.nModified, 1);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, a: 1, x: 1, y: 2, z: 3 });
  await c.deleteOne({ _id: 4 });
  // bulkWrite's upsertSupplied and constants (the insert takes constants.new, not the pipeline).
  const bw = await srv.client.db('admin').command({
    bulkWrite: 1,
    ops: [{ update: 0, filter: { _id: 9 }, updateMods: [{ $set: { skey: 'MongoDB2' } }], upsert: true, upsertSupplied: true,
      constants: { new: { skey: 'MongoDB' } } }],
    nsInfo: [{ ns: `${db.databaseName}.c` }],
  });
  assert.deepEqual(bw.cursor.firstBatch[0].upserted, { _id: 9 });
  assert.deepEqual(await c.findOne({ _id: 9 }), { _id: 9, skey: 'MongoDB' });
});

h.test('_id is immutable as 8.0\'s update nodes check it: per modifier, $rename\'s $set and $unset, replacements and pipelines', async () => {
  const perf = (p) => `Performing an update on the path '${p}' would modify the immutable field '_id'`;
  const altered = (v) => `After applying the update, the (immutable) field '_id' was found to have been altered to _id: ${v}`;
  const arrayId = "After applying the update to the document, the (immutable) field '_id' was found to be an array or array descendant.";
  // $rename: a $set at the destination (no no-op exemption: the same value fails too), then an $unset of the source.
  let { r, after } = await update('ue_id_ren1', { _id: 1, x: 2 }, { $rename: { _id: 'y' } });
  writeError(r, 66, perf('_id'));
  assert.deepEqual(after, { _id: 1, x: 2 });
  ({ r } = await update('ue_id_ren2', { _id: 1, x: 2 }, { $rename: { x: '_id' } }));
  writeError(r, 66, perf('_id'));
  ({ r } = await update('ue_id_ren3', { _id: 1, x: 1 }, { $rename: { x: '_id' } }));
  writeError(r, 66, perf('_id'));
  ({ r } = await update('ue_id_ren4', { _id: { a: 1 }, x: 1 }, { $rename: { x: '_id.a' } }));
  writeError(r, 66, perf('_id.a'));
  ({ r } = await update('ue_id_ren5', { _id: { a: 1 }, x: 2 }, { $rename: { '_id.a': 'y' } }));
  writeError(r, 66, perf('_id.a'));
  // A destination created under _id: the part that existed, as it is after the $set.
  ({ r } = await update('ue_id_ren6', { _id: { a: 1 }, x: 2 }, { $rename: { x: '_id.b' } }));
  writeError(r, 66, "Updating the path '_id' to _id: { a: 1, b: 2 } would modify the immutable field '_id'");
  ({ r } = await update('ue_id_ren7', { _id: { a: 1 } }, { $rename: { '_id.a': '_id.b' } }));
  writeError(r, 66, "Updating the path '_id' to _id: { a: 1, b: 1 } would modify the immutable field '_id'");
  // $set / $inc / $unset: a no-op by bytes passes; 1.0 over 1 is a change.
  ({ r } = await update('ue_id_set1', { _id: 1 }, { $set: { _id: 1 }, $inc: { a: 1 } }));
  assert.equal(r.nModified, 1, JSON.stringify(r));
  ({ r } = await update('ue_id_set2', { _id: 1 }, { $inc: { _id: 0 } }));
  assert.equal(r.writeErrors, undefined, JSON.stringify(r));
  ({ r } = await update('ue_id_set3', { _id: 1 }, { $set: { _id: new Double(1) } }));
  writeError(r, 66, perf('_id'));
  ({ r } = await update('ue_id_set4', { _id: 1 }, { $inc: { _id: new Double(0) } }));
  writeError(r, 66, perf('_id'));
  ({ r } = await update('ue_id_set5', { _id: { a: 1 } }, { $set: { '_id.a': 2 } }));
  writeError(r, 66, perf('_id.a'));
  ({ r } = await update('ue_id_set6', { _id: { a: 1 } }, { $unset: { '_id.a': 1 } }));
  writeError(r, 66, perf('_id.a'));
  ({ r } = await update('ue_id_set7', { _id: { a: 1 } }, { $set: { '_id.b': 2 } }));
  writeError(r, 66, "Updating the path '_id' to _id: { a: 1, b: 2 } would modify the immutable field '_id'");
  ({ r } = await update('ue_id_set8', { _id: { a: [1] } }, { $set: { '_id.a.3': 2 } }));
  writeError(r, 66, "Updating the path '_id.a' to a: [ 1, null, null, 2 ] would modify the immutable field '_id'");
  // A replacement and a pipeline replace the document: ObjectReplaceExecutor's checks.
  ({ r } = await update('ue_id_repl1', { _id: 1, a: 1 }, { _id: 2, a: 1 }));
  writeError(r, 66, altered('2'));
  ({ r } = await update('ue_id_pipe1', { _id: 1, a: 1 }, [{ $set: { _id: 2 } }]));
  writeError(r, 66, altered('2'));
  // Doubles print as mongod's appendDoubleNice: %.16g, ".0" when neither '.', 'E' nor 'N' shows (was %.17g: 0.10000000000000001).
  ({ r } = await update('ue_id_dbl1', { _id: 1 }, { _id: 0.1 }));
  writeError(r, 66, altered('0.1'));
  ({ r } = await update('ue_id_dbl2', { _id: 1 }, [{ $set: { _id: new Double(1e20) } }]));
  writeError(r, 66, altered('1e+20.0'));
  ({ r } = await update('ue_id_dbl3', { _id: 1 }, { _id: { a: new Double(3), b: 2.5e-7 } }));
  writeError(r, 66, altered('{ a: 3.0, b: 2.5e-07 }'));
  let idDb;
  ({ r, db: idDb } = await update('ue_id_pipe2', { _id: 1, a: 1 }, [{ $set: { _id: { $literal: new Double(1) }, b: 1 } }]));
  assert.equal(r.writeErrors, undefined, JSON.stringify(r));
  // An equal _id of another type is stored as given (ObjectReplaceExecutor writes the new document's _id).
  assert.equal(r.nModified, 1, JSON.stringify(r));
  const idType = async (d) => (await d.collection('c').aggregate([{ $project: { _id: 0, t: { $type: '$_id' } } }]).toArray())[0].t;
  assert.equal(await idType(idDb), 'double');
  ({ r, db: idDb } = await update('ue_id_repl2', { _id: 5, a: 1 }, { _id: new Double(5), a: 2 }));
  assert.equal(r.nModified, 1, JSON.stringify(r));
  assert.equal(await idType(idDb), 'double');
  ({ r } = await update('ue_id_pipe3', { _id: 1, a: 1 }, [{ $set: { _id: [1] } }]));
  writeError(r, 53, "The '_id' value cannot be of type array");
  ({ r } = await update('ue_id_pipe4', { _id: 1, a: 1 }, [{ $set: { _id: { $literal: /x/ } } }]));
  writeError(r, 53, "The '_id' value cannot be of type regex");
  // Upserts run the update over the query's equalities, _id immutable; an insert is not validated for storage there.
  const db = srv.freshDb('ue_id_ups');
  const ups = (q, u) => db.command({ update: 'c', updates: [{ q, u, upsert: true }] });
  writeError(await ups({ _id: 1 }, { $set: { _id: 2 } }), 66, perf('_id'));
  writeError(await ups({ _id: 1 }, { _id: 2, a: 1 }), 66, altered('2'));
  writeError(await ups({ _id: 1 }, [{ $set: { _id: 2 } }]), 66, altered('2'));
  writeError(await ups({ '_id.a': 1 }, { $set: { '_id.b': 2 } }), 66,
    "Updating the path '_id' to _id: { a: 1, b: 2 } would modify the immutable field '_id'");
  // Once the first $set has created _id, the second one's path exists in part.
  writeError(await ups({ x: 1 }, { $set: { '_id.a': 1, '_id.b': 2 } }), 66,
    "Updating the path '_id' to _id: { a: 1, b: 2 } would modify the immutable field '_id'");
  writeError(await ups({ x: 1 }, { _id: [1], a: 1 }), 54, arrayId);
  writeError(await ups({ x: 1 }, [{ $set: { _id: [1] } }]), 54, arrayId);
  writeError(await ups({ x: 1 }, { $set: { _id: [1] } }), 53, "The '_id' value cannot be of type array");
  r = await ups({ _id: 1 }, { $setOnInsert: { _id: 1 }, $set: { a: 1 } });
  assert.deepEqual(r.upserted, [{ index: 0, _id: 1 }], JSON.stringify(r));
  r = await ups({ x: 5 }, { $rename: { x: '_id' } });
  assert.deepEqual(r.upserted, [{ index: 0, _id: 5 }], JSON.stringify(r));
  assert.equal(await db.collection('c').countDocuments(), 2);
});
