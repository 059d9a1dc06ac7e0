'use strict';
// Field paths of 200,000 components (a 400 KB key, well inside a 16 MB command): every
// command that takes a path answers, with a result or an error, and the server carries on.
// Until session 58 three of them ended the server: an update's $set (its applier recursed
// once a component and overflowed the worker's stack), a projection ($project, $addFields,
// $unset, find's projection, a pipeline update: the projection tree, one node a component)
// and an upsert's seed from such a filter (found by the update fuzz target). mongod refuses
// such paths with 15 Overflow ("FieldPath is too long" past 200 components, or the document
// depth limit for what an update would build).
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const deep = Array(200000).fill('a').join('.');

h.test('every command taking a 200,000-component path answers and the server carries on', async () => {
  const db = srv.freshDb('deep');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: { a: 1 }, x: [{ a: 1 }] }, { _id: 2 }]);
  const ops = {
    find: () => c.find({ [deep]: 1 }).toArray(),
    sort: () => c.find().sort({ [deep]: 1 }).toArray(),
    projectionInclude: () => c.find({}, { projection: { [deep]: 1 } }).toArray(),
    projectionExclude: () => c.find({}, { projection: { [deep]: 0 } }).toArray(),
    project: () => c.aggregate([{ $project: { [deep]: 1 } }]).toArray(),
    addFields: () => c.aggregate([{ $addFields: { [deep]: 1 } }]).toArray(),
    unset: () => c.aggregate([{ $unset: deep }]).toArray(),
    group: () => c.aggregate([{ $group: { _id: `$${deep}` } }]).toArray(),
    unwind: () => c.aggregate([{ $unwind: `$${deep}` }]).toArray(),
    sortStage: () => c.aggregate([{ $sort: { [deep]: 1 } }]).toArray(),
    lookup: () => c.aggregate([{ $lookup: { from: 'c', localField: deep, foreignField: deep, as: 'j' } }]).toArray(),
    distinct: () => c.distinct(deep),
    count: () => c.countDocuments({ [deep]: { $exists: false } }),
    elemMatch: () => c.find({ x: { $elemMatch: { [deep]: 1 } } }).toArray(),
    set: () => c.updateOne({ _id: 2 }, { $set: { [deep]: 1 } }),
    setOnExisting: () => c.updateOne({ _id: 1 }, { $set: { [`a.${deep}`]: 1 } }),
    inc: () => c.updateOne({ _id: 2 }, { $inc: { [deep]: 1 } }),
    unsetUpdate: () => c.updateOne({ _id: 1 }, { $unset: { [deep]: 1 } }),
    pull: () => c.updateOne({ _id: 1 }, { $pull: { x: { [deep]: 1 } } }),
    rename: () => c.updateOne({ _id: 1 }, { $rename: { x: deep } }),
    pipelineUpdate: () => c.updateOne({ _id: 1 }, [{ $set: { [deep]: 1 } }]),
    upsert: () => c.updateOne({ [deep]: 1 }, { $set: { y: 1 } }, { upsert: true }),
    findAndModify: () => c.findOneAndUpdate({ _id: 2 }, { $set: { [deep]: 1 } }),
    createIndex: () => c.createIndex({ [deep]: 1 }),
    partialIndex: () => c.createIndex({ z: 1 }, { name: 'pz', partialFilterExpression: { [deep]: 1 } }),
    validator: () => db.command({ collMod: 'c', validator: { [deep]: { $exists: false } } }),
    setWindowFields: () => c.aggregate([{ $setWindowFields: { sortBy: { [deep]: 1 }, output: { r: { $rank: {} } } } }]).toArray(),
    // helper-104: these three recursed once a component too (the update's conflict check, $setWindowFields' output).
    allElements: () => c.updateOne({ _id: 1 }, { $set: { [`x.$[].${deep}`]: 1 } }),
    positional: () => c.updateOne({ _id: 1, 'x.a': 1 }, { $set: { [`x.$.${deep}`]: 1 } }),
    windowOutput: () => c.aggregate([{ $setWindowFields: { sortBy: { _id: 1 }, output: { [deep]: { $sum: 1 } } } }]).toArray(),
    fillOutput: () => c.aggregate([{ $fill: { sortBy: { _id: 1 }, output: { [deep]: { method: 'locf' } } } }]).toArray(),
  };
  const answered = {};
  for (const [name, op] of Object.entries(ops)) {
    try {
      await op();
      answered[name] = 'ok';
    } catch (e) {
      assert.equal(typeof e.code, 'number', `${name}: no server error code (${e.message.slice(0, 200)})`);
      answered[name] = e.code;
    }
    assert.equal((await db.command({ ping: 1 })).ok, 1, `server gone after ${name}`);
  }
  // What must be refused is: a path past mongod's limits in a projection, or a write that would nest past them.
  for (const name of ['projectionInclude', 'project', 'addFields', 'unset', 'pipelineUpdate']) assert.equal(answered[name], 15, name);
  for (const name of ['set', 'inc', 'upsert', 'findAndModify']) assert.equal(answered[name], 15, name);
  assert.equal(answered.setOnExisting, 28); /* a.a is a number: the path cannot be created below it (as mongod) */
  for (const name of ['windowOutput', 'fillOutput']) assert.equal(answered[name], 15, name); /* FieldPath is too long */
  // Nothing was written.
  assert.deepEqual(await c.find({}, { projection: { _id: 1 } }).sort({ _id: 1 }).toArray(), [{ _id: 1 }, { _id: 2 }]);
});

// $fill took a field path into a fixed 1,024-byte buffer: a longer name was cut, and the
// fill wrote null over the documents' values (found by helper-104).
h.test('$fill on a field name past 1,024 bytes fills it', async () => {
  const c = srv.freshDb('longfill').collection('c');
  const L = 'x'.repeat(1100);
  await c.insertMany([{ _id: 1, [L]: 5 }, { _id: 2 }]);
  const out = await c.aggregate([{ $fill: { sortBy: { _id: 1 }, output: { [L]: { method: 'locf' } } } }]).toArray();
  assert.deepEqual(out.map((d) => d[L]), [5, 5]);
  const byValue = await c.aggregate([{ $fill: { output: { [L]: { value: 7 } } } }, { $sort: { _id: 1 } }]).toArray();
  assert.deepEqual(byValue.map((d) => d[L]), [5, 7]);
});
