'use strict';
/*
 * The query tree in mongod 8.0's planner errors, operator family by
 * operator family. A hint naming no index makes QueryPlanner::plan fail,
 * and get_executor.cpp's finishPrepare reports "error processing query:
 * <CanonicalQuery::toString> planner returned error :: caused by ::
 * <reason>", where the tree is MatchExpression::debugString of the filter
 * after optimize and sortTree. The expected lines follow mongod's source:
 * expression_leaf.cpp (comparisons, regex, mod, exists, $in, bit tests),
 * expression_array.cpp ($size, $elemMatch), expression_type.h ($type: the
 * type set printed as a BSON object), expression_tree.cpp ($and / $or /
 * $nor / $not and ListOfMatchExpression's optimizer, with its $or-to-$in
 * rewrite), expression_geo.cpp ("GEO raw = ..."), expression_expr.cpp and
 * rewrite_expr.cpp ($expr folded by Expression::optimize, serialized, and
 * the $_internalExpr* predicates RewriteExpr puts beside it),
 * expression_parser.cpp's $sampleRate, and the golden outputs of
 * debug_string_test.cpp.
 */
const assert = require('node:assert/strict');
const { Binary, BSONRegExp } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const TAIL = 'Sort: {}\nProj: {}\n planner returned error :: caused by :: hint provided does not correspond to an existing index';

// The tree mongod shows for filter, from a find hinted at an index that does not exist (code 2).
async function tree(db, filter) {
  const ns = `${db.databaseName}.c`;
  let e = null;
  try {
    await db.command({ find: 'c', filter, hint: 'nope' });
  } catch (err) {
    e = err;
  }
  assert.ok(e, `expected a planner error for ${JSON.stringify(filter)}`);
  assert.equal(e.code, 2);
  const head = `error processing query: ns=${ns}Tree: `;
  assert.ok(e.message.startsWith(head) && e.message.endsWith(TAIL), e.message);
  return e.message.slice(head.length, e.message.length - TAIL.length);
}

async function setup(name) {
  const db = srv.freshDb(name);
  await db.collection('c').insertOne({ _id: 1, a: 1 });
  return db;
}

h.test('leaf operators: comparisons, $type as a type set object, $size, $mod, $exists, $regex with options', async () => {
  const db = await setup('pm_leaf');
  assert.equal(await tree(db, { a: { $gte: 2, $lt: 'x' } }), '$and\n    a $lt "x"\n    a $gte 2\n');
  // MatcherTypeSet::toBSONArray().toString(): "number" first, then each code once, in BSONType order.
  assert.equal(await tree(db, { a: { $type: ['string', 'number', 'minKey', 2, 'maxKey'] } }),
    'a $type: { 0: "number", 1: -1, 2: 2, 3: 127 }\n');
  assert.equal(await tree(db, { a: { $type: 'bool' } }), 'a $type: { 0: 8 }\n');
  assert.equal(await tree(db, { a: { $size: 3 } }), 'a $size : 3\n');
  assert.equal(await tree(db, { a: { $mod: [4, 1] } }), 'a mod 4 % x == 1\n');
  assert.equal(await tree(db, { a: { $mod: [-3.7, 2.9] } }), 'a mod -3 % x == 2\n');
  assert.equal(await tree(db, { a: { $exists: true } }), 'a exists\n');
  assert.equal(await tree(db, { a: { $exists: 0 } }), '$not\n    a exists\n');
  assert.equal(await tree(db, { a: { $regex: 'x.y', $options: 'im' } }), 'a regex /x.y/im\n');
  assert.equal(await tree(db, { a: new BSONRegExp('^b', 'sx') }), 'a regex /^b/sx\n');
  assert.equal(await tree(db, { a: { $in: [3, 1, 'z', 1, /q/i] } }), 'a $in [ 1 3 "z" /q/i ]\n');
  assert.equal(await tree(db, { a: { $in: [4] } }), 'a $eq 4\n');
  assert.equal(await tree(db, { a: { $in: [/r/] } }), 'a regex /r/\n');
  assert.equal(await tree(db, { a: { $in: [] } }), '$alwaysFalse\n');
  assert.equal(await tree(db, { a: { $nin: [] }, b: 1 }), '$and\n    b $eq 1\n    $not\n        $alwaysFalse\n');
  assert.equal(await tree(db, { a: { $nin: [2, 1] }, b: { $ne: null } }), // two $not compare by their children: EQ before MATCH_IN
    '$and\n    $not\n        b $eq null\n    $not\n        a $in [ 1 2 ]\n');
});

h.test('bit tests list their bit positions: a mask number\'s set bits, a list as given, a BinData mask\'s set bits', async () => {
  const db = await setup('pm_bits');
  assert.equal(await tree(db, { a: { $bitsAllSet: 5 } }), 'a $bitsAllSet: [0, 2]\n');
  assert.equal(await tree(db, { a: { $bitsAnyClear: [3, 1, 1] } }), 'a $bitsAnyClear: [3, 1, 1]\n');
  assert.equal(await tree(db, { a: { $bitsAllClear: new Binary(Buffer.from([3, 0x80])) } }), 'a $bitsAllClear: [0, 1, 15]\n');
  assert.equal(await tree(db, { a: { $bitsAnySet: 0 } }), 'a $bitsAnySet: []\n');
  // BITS_ALL_SET .. BITS_ANY_CLEAR sort after $in and before $not.
  assert.equal(await tree(db, { b: { $bitsAnySet: [1] }, a: { $bitsAllClear: [2] }, c: { $in: [1, 2] }, d: { $not: { $size: 1 } } }),
    '$and\n    c $in [ 1 2 ]\n    a $bitsAllClear: [2]\n    b $bitsAnySet: [1]\n    $not\n        d $size : 1\n');
});

h.test('$elemMatch (obj and value, its operators sorted), $not of a regex or of operators, $nor, $all', async () => {
  const db = await setup('pm_tree');
  assert.equal(await tree(db, { a: { $elemMatch: { $gt: 1, $lt: 5 } } }), 'a $elemMatch (value)\n     $lt 5\n     $gt 1\n');
  assert.equal(await tree(db, { a: { $elemMatch: { c: { $gt: 2 }, b: 1 } } }), 'a $elemMatch (obj)\n    $and\n        b $eq 1\n        c $gt 2\n');
  assert.equal(await tree(db, { a: { $elemMatch: { b: 1 } } }), 'a $elemMatch (obj)\n    b $eq 1\n');
  assert.equal(await tree(db, { a: { $not: new BSONRegExp('x', 's') } }), '$not\n    a regex /x/s\n');
  assert.equal(await tree(db, { a: { $not: { $gt: 1, $lt: 5 } } }), '$not\n    $and\n        a $lt 5\n        a $gt 1\n');
  assert.equal(await tree(db, { a: { $not: { $gt: 1 } } }), '$not\n    a $gt 1\n');
  assert.equal(await tree(db, { $nor: [{ b: 2 }, { a: 1 }] }), '$nor\n    a $eq 1\n    b $eq 2\n');
  assert.equal(await tree(db, { $nor: [{ a: 1 }] }), '$not\n    a $eq 1\n');
  assert.equal(await tree(db, { a: { $all: [2, 1] } }), '$and\n    a $eq 2\n    a $eq 1\n');
  assert.equal(await tree(db, { a: { $all: [] } }), '$alwaysFalse\n');
  assert.equal(await tree(db, { a: { $all: [{ $elemMatch: { b: 1 } }] } }), 'a $elemMatch (obj)\n    b $eq 1\n');
});

h.test('$or: equalities and regexes on one path become a $in, $in branches do not join, a lone $in is optimised again', async () => {
  const db = await setup('pm_or');
  assert.equal(await tree(db, { $or: [{ a: 2 }, { a: /x/ }, { a: 1 }] }), 'a $in [ 1 2 /x/ ]\n');
  assert.equal(await tree(db, { $or: [{ a: 1 }, { a: 1 }] }), 'a $eq 1\n');
  assert.equal(await tree(db, { $or: [{ a: 1 }, { b: 1 }, { a: 2 }] }), '$or\n    b $eq 1\n    a $in [ 1 2 ]\n');
  assert.equal(await tree(db, { $or: [{ a: { $in: [1, 2] } }, { a: 3 }, { b: 1 }] }), '$or\n    a $eq 3\n    b $eq 1\n    a $in [ 1 2 ]\n');
  assert.equal(await tree(db, { $or: [{ a: { $in: [1, 2] } }, { a: 3 }, { a: 4 }] }), '$or\n    a $in [ 1 2 ]\n    a $in [ 3 4 ]\n');
  assert.equal(await tree(db, { $or: [{ a: { $eq: /x/ } }, { a: 1 }] }), '$or\n    a $eq /x/\n    a $eq 1\n');
  assert.equal(await tree(db, { $or: [{ $or: [{ a: 1 }, { b: 1 }] }, { c: 1 }] }), '$or\n    a $eq 1\n    b $eq 1\n    c $eq 1\n');
  assert.equal(await tree(db, { $or: [{ a: 1 }, { $and: [] }].slice(0, 1) }), 'a $eq 1\n');
});

h.test('geo: GeoMatchExpression is "GEO raw = " and its serialization ({ <path>: <operator document> })', async () => {
  const db = await setup('pm_geo');
  assert.equal(await tree(db, { loc: { $geoWithin: { $center: [[0, 0], 1] } } }), 'GEO raw = { loc: { $geoWithin: { $center: [ [ 0, 0 ], 1 ] } } }\n');
  assert.equal(await tree(db, { loc: { $geoIntersects: { $geometry: { type: 'Point', coordinates: [1, 2] } } }, a: 1 }),
    '$and\n    a $eq 1\n    GEO raw = { loc: { $geoIntersects: { $geometry: { type: "Point", coordinates: [ 1, 2 ] } } } }\n');
  assert.equal(await tree(db, { loc: { $within: { $box: [[0, 0], [1, 1]] } } }), 'GEO raw = { loc: { $within: { $box: [ [ 0, 0 ], [ 1, 1 ] ] } } }\n');
});

h.test('$expr: the optimised expression serialized, with the $_internalExpr* predicates RewriteExpr adds beside it', async () => {
  const db = await setup('pm_expr');
  assert.equal(await tree(db, { $expr: { $eq: ['$a', 5] } }), '$and\n    $expr {$eq: ["$a", {$const: 5}]}\n    a $_internalExprEq 5\n');
  // A constant on the left: the path goes left, the operator mirrored.
  assert.equal(await tree(db, { $expr: { $gt: [3, '$a.b'] } }), '$and\n    $expr {$gt: [{$const: 3}, "$a.b"]}\n    a.b $_internalExprLt 3\n');
  // Constant sub-expressions are folded; $literal is a constant.
  assert.equal(await tree(db, { $expr: { $lte: ['$a', { $add: [1, 2] }] } }), '$and\n    $expr {$lte: ["$a", {$const: 3}]}\n    a $_internalExprLte 3\n');
  assert.equal(await tree(db, { $expr: { $and: [{ $eq: ['$a', 1.5] }, { $gte: ['$b', { $literal: 'x' }] }] } }),
    '$and\n    $expr {$and: [{$eq: ["$a", {$const: 1.5}]}, {$gte: ["$b", {$const: "x"}]}]}\n    a $_internalExprEq 1.5\n    b $_internalExprGte "x"\n');
  // An $or rewrites only when every branch does.
  assert.equal(await tree(db, { $expr: { $or: [{ $eq: ['$a', 1] }, { $lt: ['$b', 'x'] }] } }),
    '$and\n    $or\n        a $_internalExprEq 1\n        b $_internalExprLt "x"\n    $expr {$or: [{$eq: ["$a", {$const: 1}]}, {$lt: ["$b", {$const: "x"}]}]}\n');
  assert.equal(await tree(db, { $expr: { $or: [{ $eq: ['$a', 1] }, { $lt: ['$b', '$c'] }] } }),
    '$expr {$or: [{$eq: ["$a", {$const: 1}]}, {$lt: ["$b", "$c"]}]}\n');
  // No rewrite against an array, a variable, or for other operators.
  assert.equal(await tree(db, { $expr: { $eq: ['$a', [1, 2]] } }), '$expr {$eq: ["$a", {$const: [1, 2]}]}\n');
  assert.equal(await tree(db, { $expr: { $eq: ['$$ROOT', 1] } }), '$expr {$eq: ["$$ROOT", {$const: 1}]}\n');
  assert.equal(await tree(db, { $expr: { $in: ['$a', [1, 2]] } }), '$expr {$in: ["$a", {$const: [1, 2]}]}\n');
  // A constant $expr is trivially true (dropped from an $and) or false.
  assert.equal(await tree(db, { $expr: true }), '$and\n');
  assert.equal(await tree(db, { $expr: 0 }), '$expr {$const: 0}\n');
  assert.equal(await tree(db, { x: 1, $expr: false }), '$alwaysFalse\n');
  assert.equal(await tree(db, { x: 1, $expr: { $eq: ['$a', 1] } }), '$and\n    x $eq 1\n    $expr {$eq: ["$a", {$const: 1}]}\n    a $_internalExprEq 1\n');
});

h.test('$sampleRate is the $expr it is parsed as: {$lt: [{$rand: {}}, x]}, and constant true / false at 1 / 0', async () => {
  const db = await setup('pm_sample');
  assert.equal(await tree(db, { $sampleRate: 0.25 }), '$expr {$lt: [{$rand: {}}, {$const: 0.25}]}\n');
  assert.equal(await tree(db, { $sampleRate: 0 }), '$expr {$const: false}\n');
  assert.equal(await tree(db, { x: 1, $sampleRate: 1 }), 'x $eq 1\n');
});

h.test('$jsonSchema and $comment: the message still ends with the reason, $comment is not in the tree', async () => {
  const db = await setup('pm_schema');
  const t = await tree(db, { $jsonSchema: { required: ['a'] }, x: 1 });
  assert.ok(t.startsWith('$and\n    x $eq 1\n'), t);
  assert.equal(await tree(db, { x: 1, $comment: 'why' }), 'x $eq 1\n');
});

h.test('$near without a usable geo index: 291 with the find\'s canonical query, GEONEAR as GeoNearExpression::toString', async () => {
  const db = await setup('pm_near');
  const ns = `${db.databaseName}.c`;
  const tail = 'Sort: {}\nProj: {}\n planner returned error :: caused by :: unable to find index for $geoNear query';
  let e = null;
  try {
    await db.collection('c').find({ loc: { $near: [0, 0] } }).toArray();
  } catch (err) {
    e = err;
  }
  assert.equal(e?.code, 291);
  // maxDistance unset is DBL_MAX, printed by an ostream (6 significant digits).
  assert.equal(e.message, `error processing query: ns=${ns}Tree: GEONEAR  field=loc maxdist=1.79769e+308 isNearSphere=0\n${tail}`);
  await db.collection('c').createIndex({ g: '2dsphere' });
  e = null;
  try {
    await db.collection('c').find({ a: 1, g: { $near: [0, 0], $maxDistance: 2 } }).limit(3).toArray();
  } catch (err) {
    e = err;
  }
  assert.equal(e?.code, 291);
  assert.equal(e.message, `error processing query: ns=${ns} limit=3Tree: $and\n    a $eq 1\n    GEONEAR  field=g maxdist=2 isNearSphere=0\n${tail}`);
});
