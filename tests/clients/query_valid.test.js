'use strict';
// Query validity and find projections as mongod 8.0's sources have them:
//  - parsed_find_command::isValid runs right after the filter parses, before
//    the projection and the sort: one $text, one $near, and the refused
//    combinations ($text with a $natural sort, any hint, tailable or $near;
//    $near with a $natural sort or hint or tailable), all 2 BadValue. The
//    sort it sees is the command's own, so a tailable cursor's {$natural: 1}
//    counts.
//  - CanonicalQuery::isValidNormalized runs on the normalised filter, after
//    the projection and sort parse: the $near must be the root or a child of
//    the root $and. Normalising flattens nested $and and unwraps a
//    one-element $or (ListOfMatchExpression's optimizer), so those are
//    valid. 8.0 words the refusal "geo $near must be top-level expr"; mayfly
//    still says "geoNear must be top-level expr" (NOT_TOP_LEVEL below), which
//    geo.test.js and explain share.
//  - projection_parser.cpp accepts {$meta} anywhere in a find projection
//    (nested too); 17307 for a non-string argument (ExpressionMeta::parse); a
//    text score the query cannot give is 40218 at parse time, also from
//    inside an expression. ProjectionNode::applyExpressions sets a computed
//    field with MutableDocument::setField: an existing field keeps its place,
//    a scalar or missing parent becomes a document of the computed fields.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const TEXT = { $text: { $search: 'hello' } };
const NOT_TOP_LEVEL = 'geoNear must be top-level expr';
const NEAR = { $near: [0, 0] };

async function setup(tag) {
  const db = srv.freshDb(tag);
  const c = db.collection('t');
  await c.createIndex({ s: 'text' });
  await c.createIndex({ loc: '2d' });
  await c.insertMany([
    { _id: 1, s: 'hello world', x: 5, a: { b: 1, c: 2 }, loc: [0, 0] },
    { _id: 2, s: 'hello', x: 7, a: 5, loc: [3, 3] },
    { _id: 3, s: 'nothing here', x: 9, loc: [1, 1] },
  ]);
  return { db, c };
}

const bad = (re) => new RegExp(`^${re.replace(/[$.()[\]{}]/g, '\\$&')}$`);

h.test('isValid refusals: $text and $near combinations, in mongod 8.0\'s order and words', async () => {
  const { db } = await setup('isvalid');
  await db.createCollection('cap', { capped: true, size: 65536 });
  await db.collection('cap').createIndex({ s: 'text' });
  await db.collection('cap').createIndex({ loc: '2d' });
  const find = (cmd) => db.command({ find: 't', ...cmd });
  const cases = [
    [{ filter: TEXT, sort: { $natural: 1 } }, 'text expression not allowed with $natural sort order'],
    [{ filter: TEXT, hint: { $natural: 1 } }, 'text and hint not allowed in same query'],
    [{ filter: TEXT, hint: { x: 1 } }, 'text and hint not allowed in same query'],
    [{ filter: TEXT, hint: 's_text' }, 'text and hint not allowed in same query'],
    [{ filter: { ...TEXT, loc: NEAR } }, 'text and geoNear not allowed in same query'],
    [{ filter: { loc: NEAR }, sort: { $natural: -1 } }, 'geoNear expression not allowed with $natural sort order'],
    [{ filter: { loc: NEAR }, hint: { $natural: 1 } }, 'geoNear expression not allowed with $natural hint'],
    [{ filter: { $and: [TEXT, TEXT] } }, 'Too many text expressions'],
    [{ filter: { $nor: [TEXT] } }, 'text expression not allowed in nor'],
    [{ filter: { $and: [{ loc: NEAR }, { loc: NEAR }] } }, 'Too many geoNear expressions'],
    [{ sort: { $natural: 1 }, hint: { x: 1 } }, 'index hint not allowed with $natural sort order'],
    [{ sort: { $natural: 1 }, hint: { $natural: -1 } }, '$natural hint must be in the same direction as $natural sort order'],
  ];
  for (const [cmd, msg] of cases) await h.expectCode(find(cmd), 2, bad(msg));
  await h.expectCode(db.command({ find: 'cap', filter: TEXT, tailable: true }), 2,
    bad('text and tailable cursor not allowed in same query'));
  await h.expectCode(db.command({ find: 'cap', filter: { loc: NEAR }, tailable: true }), 2,
    bad('Tailable cursors and geo $near cannot be used together'));
  // A tailable cursor's {$natural: 1} sort is a $natural sort to isValid, which checks it before tailable.
  await h.expectCode(db.command({ find: 'cap', filter: TEXT, tailable: true, sort: { $natural: 1 } }), 2,
    bad('text expression not allowed with $natural sort order'));
  await h.expectCode(db.command({ find: 'cap', filter: { loc: NEAR }, tailable: true, sort: { $natural: 1 } }), 2,
    bad('geoNear expression not allowed with $natural sort order'));
});

h.test('isValid comes before the projection and the sort parse; the $near\'s place after them', async () => {
  const { db } = await setup('order');
  const find = (cmd) => db.command({ find: 't', ...cmd });
  await h.expectCode(find({ filter: TEXT, hint: { x: 1 }, projection: { a: 1, b: 0 } }), 2,
    bad('text and hint not allowed in same query'));
  await h.expectCode(find({ filter: TEXT, hint: { x: 1 }, sort: { x: 'up' } }), 2,
    bad('text and hint not allowed in same query'));
  // $text with a $near anywhere is isValid's, before the $near's place is looked at.
  await h.expectCode(find({ filter: { $or: [{ loc: NEAR }, { x: 5 }], ...TEXT } }), 2,
    bad('text and geoNear not allowed in same query'));
  // The projection's metadata (40218) is checked before the $near's place.
  await h.expectCode(find({ filter: { $or: [{ loc: NEAR }, { x: 5 }] }, projection: { sc: { $meta: 'textScore' } } }),
    40218, bad('query requires text score metadata, but it is not available'));
});

h.test('a $near must be top-level once the filter is normalised', async () => {
  const { c } = await setup('toplevel');
  const filters = [
    { $or: [{ loc: NEAR }, { x: 5 }] },
    { $nor: [{ loc: NEAR }] },
    { arr: { $elemMatch: { loc: NEAR } } },
    { loc: { $not: NEAR } },
    { $and: [{ $or: [{ loc: NEAR }, { x: 1 }] }] },
  ];
  for (const f of filters) {
    await h.expectCode(c.find(f).toArray(), 2, bad(NOT_TOP_LEVEL));
  }
  // Nested $and flattens, a one-element $or unwraps: these are top-level, nearest first.
  assert.deepEqual((await c.find({ $or: [{ loc: NEAR }] }).toArray()).map((d) => d._id), [1, 3, 2]);
  assert.deepEqual((await c.find({ $or: [{ loc: NEAR, x: { $gt: 5 } }] }).toArray()).map((d) => d._id), [3, 2]);
  assert.deepEqual((await c.find({ $and: [{ $and: [{ loc: NEAR }] }, { x: { $lt: 9 } }] }).toArray())
    .map((d) => d._id), [1, 2]);
  assert.deepEqual((await c.find({ $and: [{ x: { $gte: 7 } }, { $or: [{ $and: [{ loc: NEAR }] }] }] }).toArray())
    .map((d) => d._id), [3, 2]);
  // Explain takes the same normalised filter: the $geoNear plan, not the refusal.
  const stages = async (f) => (await c.find(f).explain('executionStats')).stages.map((st) => Object.keys(st)[0]);
  assert.deepEqual(await stages({ $or: [{ loc: NEAR }] }), await stages({ loc: NEAR }));
  assert.deepEqual(await stages({ $or: [{ loc: NEAR }] }), ['$cursor', '$geoNear']);
  await h.expectCode(c.find({ $or: [{ loc: NEAR }, { x: 5 }] }).explain(), 2, bad(NOT_TOP_LEVEL));
});

h.test('find projections: {$meta: "textScore"} beside inclusions, over an existing field, nested', async () => {
  const { c } = await setup('meta');
  const q = (projection) => c.find(TEXT, { projection, sort: { _id: 1 } }).toArray();
  const score = (await q({ sc: { $meta: 'textScore' }, _id: 1 })).map((d) => d.sc);
  assert.equal(score.length, 2);
  const [s1, s2] = score;
  assert.deepEqual(await q({ score: { $meta: 'textScore' }, x: 1 }), [
    { _id: 1, x: 5, score: s1 }, { _id: 2, x: 7, score: s2 }]);
  assert.deepEqual(await q({ score: { $meta: 'textScore' }, x: 0, loc: 0 }), [
    { _id: 1, s: 'hello world', a: { b: 1, c: 2 }, score: s1 }, { _id: 2, s: 'hello', a: 5, score: s2 }]);
  // An exclusion projection sets the score in place over an existing field.
  assert.deepEqual(await q({ x: { $meta: 'textScore' }, loc: 0 }), [
    { _id: 1, s: 'hello world', x: s1, a: { b: 1, c: 2 } }, { _id: 2, s: 'hello', x: s2, a: 5 }]);
  // Nested: in place in a sub-document; a scalar or missing parent becomes a document of it.
  assert.deepEqual(await q({ a: { b: { $meta: 'textScore' } }, loc: 0, s: 0 }), [
    { _id: 1, x: 5, a: { b: s1, c: 2 } }, { _id: 2, x: 7, a: { b: s2 } }]);
  assert.deepEqual(await q({ 'n.m': { $meta: 'textScore' }, loc: 0, s: 0, a: 0 }), [
    { _id: 1, x: 5, n: { m: s1 } }, { _id: 2, x: 7, n: { m: s2 } }]);
  // Inclusion: the nested score comes after the included fields.
  assert.deepEqual(await q({ a: { sc: { $meta: 'textScore' }, c: 1 } }), [
    { _id: 1, a: { c: 2, sc: s1 } }, { _id: 2, a: { sc: s2 } }]);
});

h.test('find projections: {$meta: "textScore"} inside an expression, 40218 without $text, 17307', async () => {
  const { c } = await setup('metaexpr');
  const docs = await c.find(TEXT, {
    projection: { sc: { $meta: 'textScore' }, twice: { $multiply: [{ $meta: 'textScore' }, 2] } },
    sort: { _id: 1 },
  }).toArray();
  assert.equal(docs.length, 2);
  for (const d of docs) assert.equal(d.twice, d.sc * 2);
  // Unavailable metadata is refused when the query is parsed, even when nothing matches.
  const none = { x: 1000 };
  const msg = bad('query requires text score metadata, but it is not available');
  await h.expectCode(c.find(none, { projection: { k: { $add: [{ $meta: 'textScore' }, 1] } } }).toArray(), 40218, msg);
  await h.expectCode(c.find(none, { projection: { a: { k: { $meta: 'textScore' } } } }).toArray(), 40218, msg);
  // A $literal is a constant: it reads no metadata, with or without $text.
  assert.deepEqual(await c.find(none, { projection: { _id: 0, k: { $literal: { $meta: 'textScore' } } } }).toArray(), []);
  assert.deepEqual((await c.find({ x: 5 }, { projection: { _id: 0, k: { $literal: { $meta: 'textScore' } } } }).toArray()),
    [{ k: { $meta: 'textScore' } }]);
  await h.expectCode(c.find(none, { projection: { k: { $meta: 1 } } }).toArray(), 17307,
    bad('$meta only supports string arguments'));
  await h.expectCode(c.find(none, { projection: { k: { $meta: 'foo' } } }).toArray(), 17308,
    bad('Unsupported argument to $meta: foo'));
});
