'use strict';
// Update-language details checked against MongoDB 8.0's source: conflicting
// array update paths (UpdateObjectNode / UpdateArrayNode merges), $push $sort
// by a field pattern (PatternElementCmp), arrayFilters over $and / $or /
// $nor and without $expr, and exact codes and messages of path and
// arithmetic errors.
const assert = require('node:assert/strict');
const { Long } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

/* A fresh collection holding doc as _id 1. */
async function coll(tag, doc) {
  const c = srv.freshDb(tag).collection('c');
  await c.insertOne({ _id: 1, ...doc });
  return c;
}

/* Escapes s for an exact-match RegExp. */
function exact(s) {
  return new RegExp(`^${s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
}

/* Expects update to fail with code and exactly msg, leaving the document as before. */
async function refused(c, q, update, opts, code, msg) {
  const before = await c.findOne({ _id: 1 });
  await h.expectCode(c.updateOne(q, update, opts), code, exact(msg));
  assert.deepEqual(await c.findOne({ _id: 1 }), before);
}

h.test('an array path and an index path under the same array conflict when parsed (40)', async () => {
  const c = await coll('cparse', { a: [1, 2], o: { b: [1] } });
  await refused(c, {}, { $set: { 'a.$[]': 0, 'a.0': 1 } }, {}, 40,
    "Updating the path 'a.0' would create a conflict at 'a'");
  await refused(c, {}, { $set: { 'a.0': 1, 'a.$[]': 0 } }, {}, 40,
    "Updating the path 'a.$[]' would create a conflict at 'a'");
  await refused(c, { a: 1 }, { $set: { 'a.$': 1, 'a.$[]': 0 } }, {}, 40,
    "Updating the path 'a.$[]' would create a conflict at 'a'");
  await refused(c, {}, { $set: { 'a.$[x]': 1, 'a.x': 1 } }, { arrayFilters: [{ x: 1 }] }, 40,
    "Updating the path 'a.x' would create a conflict at 'a'");
  await refused(c, {}, { $set: { 'o.b': 1 }, $inc: { 'o.b.$[]': 1 } }, {}, 40,
    "Updating the path 'o.b.$[]' would create a conflict at 'o.b'");
});

h.test('array filters that select the same element conflict when applied (40)', async () => {
  const c = await coll('capply', { a: [1, 2] });
  await refused(c, {}, { $set: { 'a.$[x]': 0, 'a.$[y]': 1 } },
    { arrayFilters: [{ x: { $gte: 1 } }, { y: { $gte: 2 } }] }, 40, "Update created a conflict at 'a.1'");
  await refused(c, {}, { $set: { 'a.$[]': 0, 'a.$[x]': 5 } }, { arrayFilters: [{ x: 2 }] }, 40,
    "Update created a conflict at 'a.1'");
  // Disjoint filters, or "$[]" with a filter nothing passes, are fine.
  let r = await c.updateOne({}, { $set: { 'a.$[x]': 0, 'a.$[y]': 9 } }, { arrayFilters: [{ x: 1 }, { y: 2 }] });
  assert.equal(r.modifiedCount, 1);
  assert.deepEqual((await c.findOne()).a, [0, 9]);
  r = await c.updateOne({}, { $inc: { 'a.$[]': 1 }, $set: { 'a.$[x]': 5 } }, { arrayFilters: [{ x: 7 }] });
  assert.deepEqual((await c.findOne()).a, [1, 10]);
});

h.test('filters are judged on the document before the update', async () => {
  // x makes 1 into 5, which y would pass; mongod evaluates both filters first.
  const c = await coll('corig', { a: [1, 5] });
  await c.updateOne({}, { $set: { 'a.$[x]': 5, 'a.$[y]': 1 } }, { arrayFilters: [{ x: 1 }, { y: 5 }] });
  assert.deepEqual((await c.findOne()).a, [5, 1]);
});

h.test('nested array updates merge and conflict as mongod does', async () => {
  // Same leaf under two outer filters that both pass element 0: named as written below the merge.
  const c = await coll('cnest', { a: [{ x: 0, b: [{ y: 0, c: 0 }] }, { x: 1, b: [{ y: 0, c: 0 }] }] });
  await refused(c, {}, { $set: { 'a.$[i].b.$[k].c': 1, 'a.$[j].b.$[k].c': 2 } },
    { arrayFilters: [{ 'i.x': 0 }, { 'j.x': 0 }, { 'k.y': 0 }] }, 40, "Update created a conflict at 'a.0.b.$[k].c'");
  await c.updateOne({}, { $set: { 'a.$[i].b.$[k].c': 1, 'a.$[j].b.$[k].c': 2 } },
    { arrayFilters: [{ 'i.x': 0 }, { 'j.x': 1 }, { 'k.y': 0 }] });
  assert.deepEqual((await c.findOne()).a, [{ x: 0, b: [{ y: 0, c: 1 }] }, { x: 1, b: [{ y: 0, c: 2 }] }]);

  // Different inner identifiers meeting on one element: the concrete path.
  const d = await coll('cnest2', { a: [{ x: 0, b: [{ y: 0, c: 0 }] }, { x: 1, b: [{ y: 0, c: 0 }, { y: 1, c: 0 }] }] });
  await refused(d, {}, { $set: { 'a.$[i].b.$[k].c': 1, 'a.$[j].b.$[m].c': 2 } },
    { arrayFilters: [{ 'i.x': 0 }, { 'j.x': 0 }, { 'k.y': 0 }, { 'm.y': 0 }] }, 40,
    "Update created a conflict at 'a.0.b.0.c'");
  await d.updateOne({}, { $set: { 'a.$[i].b.$[k].c': 1, 'a.$[j].b.$[m].c': 2 } },
    { arrayFilters: [{ 'i.x': 1 }, { 'j.x': 1 }, { 'k.y': 0 }, { 'm.y': 1 }] });
  assert.deepEqual((await d.findOne()).a,
    [{ x: 0, b: [{ y: 0, c: 0 }] }, { x: 1, b: [{ y: 0, c: 1 }, { y: 1, c: 2 }] }]);

  // Different fields under one element merge without conflict.
  const e = await coll('cnest3', { a: [{ x: 0, b: [{ y: 0, c: 0, d: 0 }] }] });
  await e.updateOne({}, { $set: { 'a.$[i].b.$[k].c': 1, 'a.$[j].b.$[k].d': 1 } },
    { arrayFilters: [{ 'i.x': 0 }, { 'j.x': 0 }, { 'k.y': 0 }] });
  assert.deepEqual((await e.findOne()).a, [{ x: 0, b: [{ y: 0, c: 1, d: 1 }] }]);

  // An object node merged with an array node conflicts where they meet.
  const f = await coll('cnest4', { a: [[1]] });
  await refused(f, {}, { $set: { 'a.$[x].b': 0, 'a.$[y].$[z]': 5 } },
    { arrayFilters: [{ x: { $exists: true } }, { y: { $exists: true } }, { z: 1 }] }, 40,
    "Update created a conflict at 'a.0'");
  // $unset and $set reaching one field through two filters.
  const g = await coll('cnest5', { a: [{ b: 1 }] });
  await refused(g, {}, { $unset: { 'a.$[x].b': 1 }, $set: { 'a.$[y].b': 2 } },
    { arrayFilters: [{ 'x.b': 1 }, { 'y.b': 1 }] }, 40, "Update created a conflict at 'a.0.b'");
});

h.test('"$" conflicts with the index it resolves to', async () => {
  const c = await coll('cpos', { a: [1, 2, 3] });
  await refused(c, { a: 2 }, { $set: { 'a.$': 9, 'a.1': 5 } }, {}, 40, "Update created a conflict at 'a.1'");
  await c.updateOne({ a: 2 }, { $set: { 'a.$': 9, 'a.0': 5 } });
  assert.deepEqual((await c.findOne()).a, [5, 9, 3]);

  const d = await coll('cpos2', { a: [{ b: 1 }, { b: 2 }] });
  await refused(d, { 'a.b': 2 }, { $set: { 'a.$.b': 9, 'a.1.b': 8 } }, {}, 40,
    "Update created a conflict at 'a.1.b'");
  await d.updateOne({ 'a.b': 2 }, { $set: { 'a.$.b': 9, 'a.1.c': 8 } });
  assert.deepEqual((await d.findOne()).a, [{ b: 1 }, { b: 9, c: 8 }]);
});

h.test('$push $sort by a field pattern compares whole values, not find sort keys', async () => {
  // b: [3, 1] vs b: [2] compare as arrays ([2] first), not by their smallest element.
  const c = await coll('psort', { a: [{ b: [3, 1] }, { b: [2] }] });
  let r = await c.updateOne({ _id: 1 }, { $push: { a: { $each: [], $sort: { b: 1 } } } });
  assert.equal(r.modifiedCount, 1);
  assert.deepEqual((await c.findOne()).a, [{ b: [2] }, { b: [3, 1] }]);

  // 'b.c' does not walk into the array b: both keys are null, the order stays.
  const d = await coll('psort2', { a: [{ b: [{ c: 2 }] }, { b: [{ c: 1 }] }] });
  r = await d.updateOne({ _id: 1 }, { $push: { a: { $each: [], $sort: { 'b.c': 1 } } } });
  assert.equal(r.modifiedCount, 0);
  assert.deepEqual((await d.findOne()).a, [{ b: [{ c: 2 }] }, { b: [{ c: 1 }] }]);

  // An index into an array is followed; missing and non-documents sort as null.
  const e = await coll('psort3', { a: [7, { b: [1, 9] }, { b: [5, 0] }] });
  await e.updateOne({ _id: 1 }, { $push: { a: { $each: [{ b: [3] }], $sort: { 'b.0': -1 } } } });
  assert.deepEqual((await e.findOne()).a, [{ b: [5, 0] }, { b: [3] }, { b: [1, 9] }, 7]);
  await e.updateOne({ _id: 1 }, { $push: { a: { $each: [{ x: 1 }], $sort: { 'b.0': 1, x: -1 } } } });
  assert.deepEqual((await e.findOne()).a, [{ x: 1 }, 7, { b: [1, 9] }, { b: [3] }, { b: [5, 0] }]);
});

h.test('arrayFilters may name their identifier inside $and / $or / $nor', async () => {
  const c = await coll('afl', { a: [1, 2, 3] });
  await c.updateOne({}, { $set: { 'a.$[x]': 0 } }, { arrayFilters: [{ $or: [{ x: 1 }, { x: 3 }] }] });
  assert.deepEqual((await c.findOne()).a, [0, 2, 0]);
  await c.updateOne({}, { $set: { 'a.$[x]': 5 } }, { arrayFilters: [{ $and: [{ x: { $gt: 0 } }, { x: { $lt: 3 } }] }] });
  assert.deepEqual((await c.findOne()).a, [0, 5, 0]);
  await c.updateOne({}, { $set: { 'a.$[x]': 7 } }, { arrayFilters: [{ $nor: [{ x: 5 }] }] });
  assert.deepEqual((await c.findOne()).a, [7, 5, 7]);
  // Clauses without a field do not count.
  await c.updateOne({}, { $set: { 'a.$[x]': 1 } }, { arrayFilters: [{ $and: [{ $alwaysTrue: 1 }, { x: 5 }] }] });
  assert.deepEqual((await c.findOne()).a, [7, 1, 7]);
  await refused(c, {}, { $set: { 'a.$[x]': 0 } }, { arrayFilters: [{ $or: [{ x: 1 }, { y: 1 }] }] }, 9,
    "Error parsing array filter :: caused by :: Expected a single top-level field name, found 'x' and 'y'");
  await refused(c, {}, { $set: { 'a.$[x]': 0 } }, { arrayFilters: [{ $alwaysTrue: 1 }] }, 9,
    'Cannot use an expression without a top-level field name in arrayFilters');
});

h.test('arrayFilters refuse $expr with 224 and wrap parse errors', async () => {
  const c = await coll('afexpr', { a: [1, 5] });
  await refused(c, {}, { $set: { 'a.$[x]': 0 } }, { arrayFilters: [{ $expr: { $gt: ['$x', 3] } }] }, 224,
    'Error parsing array filter :: caused by :: $expr is not allowed in this context');
  await refused(c, {}, { $set: { 'a.$[x]': 0 } }, { arrayFilters: [{ x: { $foo: 1 } }] }, 2,
    'Error parsing array filter :: caused by :: unknown operator: $foo');
});

h.test('positional path errors carry mongod\'s messages', async () => {
  const c = await coll('posmsg', { a: [1] });
  await refused(c, { a: 1 }, { $set: { $: 0 } }, {}, 2,
    "Cannot have positional (i.e. '$') element in the first position in path '$'");
  await refused(c, {}, { $set: { '$[]': 0 } }, {}, 2,
    "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '$[]'");
  await refused(c, {}, { $set: { '$[x].b': 0 } }, {}, 2,
    "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '$[x].b'");
  await refused(c, { a: 1 }, { $set: { '$.$': 0 } }, {}, 2,
    "Too many positional (i.e. '$') elements found in path '$.$'");

  // An upsert has no matched position: checked before the seed's scalar a is looked at.
  const u = srv.freshDb('posups').collection('c');
  await h.expectCode(u.updateOne({ a: 2 }, { $set: { 'a.$': 9 } }, { upsert: true }), 2,
    exact('The positional operator did not find the match needed from the query.'));
  assert.equal(await u.countDocuments(), 0);
});

h.test('integer overflow in $inc / $mul shows the value as SafeNum does', async () => {
  const c = await coll('ovf', { a: Long.MAX_VALUE, i: 5 });
  await refused(c, { _id: 1 }, { $inc: { a: 1 } }, {}, 2,
    'Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}');
  await refused(c, { _id: 1 }, { $mul: { a: 2 } }, {}, 2,
    'Failed to apply $mul operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}');
  await refused(c, { _id: 1 }, { $inc: { i: Long.MAX_VALUE } }, {}, 2,
    'Failed to apply $inc operations to current value ((NumberInt)5) for document {_id: 1}');
});
