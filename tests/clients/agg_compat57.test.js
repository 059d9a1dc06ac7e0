'use strict';
// Aggregation points of session 57: a document's text score is metadata, which mongod
// keeps through $addFields / $set as through $project (the stages copy the input's
// metadata), so a {$meta: "textScore"} after them, or a $sort on it, still reads it.
// Until session 57 $addFields / $set dropped it: a later {$meta: "textScore"} failed with
// 40218 and a {$sort: {s: {$meta: "textScore"}}} after them sorted on nothing.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

h.test('the text score passes through $addFields and $set', async () => {
  const t = srv.freshDb('ac57').collection('t');
  await t.insertMany([{ _id: 1, t: 'dog cat' }, { _id: 2, t: 'dog dog' }, { _id: 3, t: 'cat' }, { _id: 4, t: 'dog' }]);
  await t.createIndex({ t: 'text' });
  const m = { $match: { $text: { $search: 'dog' } } };
  const scores = (await t.aggregate([m, { $project: { s: { $meta: 'textScore' } } }]).toArray())
    .reduce((o, d) => ({ ...o, [d._id]: d.s }), {});
  assert.deepEqual(Object.keys(scores).sort(), ['1', '2', '4']);
  for (const mid of [{ $set: { q: 1 } }, { $addFields: { q: { $add: ['$_id', 1] } } }, { $set: { 'x.y': 1 } }]) {
    const got = await t.aggregate([m, mid, { $project: { s: { $meta: 'textScore' } } }]).toArray();
    assert.deepEqual(got.reduce((o, d) => ({ ...o, [d._id]: d.s }), {}), scores, JSON.stringify(mid));
    const sorted = await t.aggregate([m, mid, { $sort: { s: { $meta: 'textScore' }, _id: 1 } }, { $project: { _id: 1 } }]).toArray();
    const want = Object.keys(scores).map(Number).sort((a, b) => scores[b] - scores[a] || a - b);
    assert.deepEqual(sorted.map((d) => d._id), want, JSON.stringify(mid));
  }
  // The hidden score never reaches the client.
  const out = await t.aggregate([m, { $set: { q: 1 } }]).toArray();
  assert.ok(out.every((d) => Object.keys(d).join() === '_id,t,q'), JSON.stringify(out));
});

// $replaceRoot / $replaceWith keep the input's metadata too (mongod's
// ReplaceRootTransformation: copyMetaDataFrom(input)); until session 58 the new
// root lost the score.
h.test('the text score passes through $replaceRoot and $replaceWith', async () => {
  const t = srv.freshDb('ac58').collection('t');
  await t.insertMany([{ _id: 1, t: 'dog cat', sub: { k: 'a' } }, { _id: 2, t: 'dog dog', sub: { k: 'b' } },
    { _id: 3, t: 'cat', sub: { k: 'c' } }, { _id: 4, t: 'dog', sub: { k: 'd' } }]);
  await t.createIndex({ t: 'text' });
  const m = { $match: { $text: { $search: 'dog' } } };
  const byId = (await t.aggregate([m, { $project: { s: { $meta: 'textScore' } } }]).toArray())
    .reduce((o, d) => ({ ...o, [d._id]: d.s }), {});
  const key = { 1: 'a', 2: 'b', 4: 'd' };
  const want = Object.fromEntries(Object.entries(byId).map(([id, s]) => [key[id], s]));
  for (const mid of [{ $replaceWith: '$sub' }, { $replaceRoot: { newRoot: '$sub' } },
    { $replaceWith: { k: '$sub.k' } }, { $replaceWith: { $mergeObjects: ['$sub', { z: 1 }] } }]) {
    const got = await t.aggregate([m, mid, { $project: { _id: 0, k: 1, s: { $meta: 'textScore' } } }]).toArray();
    assert.deepEqual(got.reduce((o, d) => ({ ...o, [d.k]: d.s }), {}), want, JSON.stringify(mid));
    const sorted = await t.aggregate([m, mid, { $sort: { s: { $meta: 'textScore' }, k: 1 } }]).toArray();
    const order = Object.keys(want).sort((a, b) => want[b] - want[a] || (a < b ? -1 : 1));
    assert.deepEqual(sorted.map((d) => d.k), order, JSON.stringify(mid));
    // The hidden score never reaches the client.
    assert.ok(sorted.every((d) => Object.keys(d).every((f) => !f.startsWith('$'))), JSON.stringify(sorted));
  }
  // The score is metadata, never a field: $$ROOT does not show it, before or after the new root (helper-103).
  for (const pre of [[], [{ $replaceWith: '$sub' }]]) {
    const seen = await t.aggregate([m, ...pre, { $project: { _id: 0, n: { $objectToArray: '$$ROOT' } } }]).toArray();
    assert.ok(seen.every((d) => d.n.every((kv) => !kv.k.startsWith('$'))), JSON.stringify(seen));
    const sized = await t.aggregate([m, ...pre, { $match: { $expr: { $eq: [{ $size: { $objectToArray: '$$ROOT' } }, pre.length ? 1 : 3] } } }]).toArray();
    assert.equal(sized.length, 3, JSON.stringify(pre));
  }
  // Twice in a row, and through $$ROOT.
  const twice = await t.aggregate([m, { $replaceWith: '$$ROOT' }, { $replaceWith: '$sub' },
    { $project: { _id: 0, k: 1, s: { $meta: 'textScore' } } }]).toArray();
  assert.deepEqual(twice.reduce((o, d) => ({ ...o, [d.k]: d.s }), {}), want);
});

// mongod's DocumentSourceReplaceRoot::createFromBson: a $replaceRoot whose
// specification is not an object fails with 40229 (40228 is the result that is not
// one), and $replaceWith's result error names the 'replacement document'.
h.test('$replaceRoot and $replaceWith errors: codes and wording', async () => {
  const t = srv.freshDb('ac58e').collection('t');
  await t.insertOne({ _id: 1, s: 'x' });
  await h.expectCode(t.aggregate([{ $replaceRoot: 5 }]).toArray(), 40229);
  await h.expectCode(t.aggregate([{ $replaceRoot: { newRoot: '$s' } }]).toArray(), 40228);
  await assert.rejects(t.aggregate([{ $replaceWith: '$s' }]).toArray(),
    (e) => e.code === 40228 && /^PlanExecutor error during aggregation :: caused by :: 'replacement document' must evaluate to an object/.test(e.message));
  await assert.rejects(t.aggregate([{ $replaceRoot: { newRoot: '$nope' } }]).toArray(),
    (e) => e.code === 40228 && /^PlanExecutor error during aggregation :: caused by :: 'newRoot' expression must evaluate to an object, but resulting value was: MISSING/.test(e.message));
});

// mongod's Pipeline::validateTopLevelPipeline: $documents, independent of any collection,
// runs only as {aggregate: 1} (found by helper-101: mayfly ran it on any collection).
h.test('$documents on a collection is refused with 73; on the database and in sub-pipelines it runs', async () => {
  const db = srv.freshDb('ac58d');
  await db.collection('c').insertOne({ _id: 1, k: 1 });
  await h.expectCode(db.collection('c').aggregate([{ $documents: [{ x: 1 }] }]).toArray(), 73,
    /^'\$documents' can only be run with \{aggregate: 1\}$/);
  assert.deepEqual(await db.aggregate([{ $documents: [{ x: 1 }] }]).toArray(), [{ x: 1 }]);
  const joined = await db.collection('c').aggregate([
    { $lookup: { let: { k: '$k' }, pipeline: [{ $documents: [{ k: 1, v: 'a' }, { k: 2, v: 'b' }] },
      { $match: { $expr: { $eq: ['$k', '$$k'] } } }], as: 'j' } },
  ]).toArray();
  assert.deepEqual(joined, [{ _id: 1, k: 1, j: [{ k: 1, v: 'a' }] }]);
});

// mongod's evaluateRoundOrTrunc: an integer with a negative place is quantized as a
// decimal; the result becomes a long past the int range and fails with 51080 past the
// long range (found by helper-101: mayfly wrapped around); a double is rounded as its
// 34-digit decimal.
h.test('$round and $trunc with a negative place: int to long, long overflow 51080, doubles via decimal', async () => {
  const db = srv.freshDb('ac58r');
  const { Int32, Long, Double } = require('mongodb');
  const one = async (e) => (await db.aggregate([{ $documents: [{}] }, { $project: { _id: 0, r: e } }],
    { promoteLongs: false, promoteValues: false }).toArray())[0].r;
  let r = await one({ $round: [new Int32(2147483647), -1] });
  assert.ok(r instanceof Long && r.toString() === '2147483650', String(r));
  r = await one({ $round: [new Int32(-2147483648), -1] });
  assert.ok(r instanceof Long && r.toString() === '-2147483650', String(r));
  r = await one({ $round: [new Int32(1250), -2] });
  assert.ok(r instanceof Int32 && r.value === 1200, String(r)); /* half to even */
  r = await one({ $trunc: [Long.fromString('9223372036854775807'), -1] });
  assert.ok(r instanceof Long && r.toString() === '9223372036854775800', String(r));
  await h.expectCode(db.aggregate([{ $documents: [{}] }, { $project: { r: { $round: [Long.fromString('9223372036854775807'), -1] } } }]).toArray(), 51080,
    /invalid conversion from Decimal128 result in \$round resulting from arguments: \[9223372036854775807, -1\]/);
  r = await one({ $round: [new Double(2.675), 2] });
  assert.equal(r.value, 2.67);
  r = await one({ $round: [new Double(-1234.5678), -2] });
  assert.equal(r.value, -1200);
  r = await one({ $trunc: [new Double(-1234.5678), 1] });
  assert.equal(r.value, -1234.5);
});

// mongod computes these in Decimal128 (Intel's bid128_pow, _exp, _log, _sqrt, _sin ...,
// fmod exact): 34 digits, where mayfly went through a double and kept 15 (found by
// helper-101). $pow keeps every digit the coefficient has room for (Decimal128::power
// adds a zero of the smallest exponent).
h.test('decimal math keeps 34 digits: $pow, $sqrt, $exp, $ln, $log10, $log, trigonometry, $mod', async () => {
  const db = srv.freshDb('ac58m');
  const { Decimal128 } = require('mongodb');
  const D = (s) => Decimal128.fromString(s);
  const cases = [
    [{ $pow: [D('3'), 40] }, '12157665459056928801.00000000000000'],
    [{ $pow: [D('1.05'), 10] }, '1.628894626777441406250000000000000'],
    [{ $pow: [2, D('0.5')] }, '1.414213562373095048801688724209698'],
    [{ $sqrt: D('2') }, '1.414213562373095048801688724209698'],
    [{ $sqrt: D('4') }, '2'],
    [{ $exp: D('1') }, '2.718281828459045235360287471352662'],
    [{ $ln: D('2') }, '0.6931471805599453094172321214581766'],
    [{ $log10: D('2') }, '0.3010299956639811952137388947244930'],
    [{ $log: [D('8'), 2] }, '3'],
    [{ $log: [8, D('2')] }, '3'],
    [{ $sin: D('1') }, '0.8414709848078965066525023216302990'],
    [{ $atan2: [D('1'), 1] }, '0.7853981633974483096156608458198757'],
    [{ $degreesToRadians: D('180') }, '3.141592653589793238462643383279503'],
    [{ $mod: [D('12345678901234567.89'), 1] }, '0.89'],
    [{ $mod: [D('-10.5'), D('3')] }, '-1.5'],
  ];
  const doc = (await db.aggregate([{ $documents: [{}] },
    { $project: Object.fromEntries(cases.map((c, i) => [`r${i}`, c[0]])) }]).toArray())[0];
  cases.forEach(([e, want], i) => {
    assert.ok(doc[`r${i}`] instanceof Decimal128, JSON.stringify(e));
    assert.equal(doc[`r${i}`].toString(), want, JSON.stringify(e));
  });
  // The domain errors are unchanged.
  await h.expectCode(db.aggregate([{ $documents: [{ x: D('-1') }] }, { $project: { r: { $sqrt: '$x' } } }]).toArray(), 28714);
  await h.expectCode(db.aggregate([{ $documents: [{ x: D('0') }] }, { $project: { r: { $ln: '$x' } } }]).toArray(), 28766);
  await h.expectCode(db.aggregate([{ $documents: [{ x: D('2') }] }, { $project: { r: { $asin: '$x' } } }]).toArray(), 50989);
});

// Value::coerceToString streams a double with printf's %g (StringBuilder), so the string
// operators that coerce ($toUpper, $toLower, $substrBytes, $substrCP, $strcasecmp) see 6
// significant digits; $toString / $convert format doubles in full (found by helper-101).
h.test('string operators coerce a double with %g; $toString keeps every digit', async () => {
  const db = srv.freshDb('ac58s');
  const { Double } = require('mongodb');
  const doc = (await db.aggregate([{ $documents: [{ d: 1.23456789, e: new Double(1234567), f: 0.1, i: 1234567 }] }, {
    $project: {
      _id: 0, u: { $toUpper: '$d' }, l: { $toLower: '$e' }, s: { $substrBytes: ['$f', 0, 10] },
      c: { $strcasecmp: ['$d', '1.23457'] }, i: { $toUpper: '$i' }, t: { $toString: '$d' },
    },
  }]).toArray())[0];
  assert.deepEqual(doc, { u: '1.23457', l: '1.23457e+06', s: '0.1', c: 0, i: '1234567', t: '1.23456789' });
});

// maxTimeMS as mongod 8.0 parses it (parseMaxTimeMS: "<n> value for maxTimeMS is out of
// range [0, 2147483647]"; aggregate's IDL field refuses a wrong type with 14 and a negative
// value with 51024). Found by helper-102: mayfly said "negative value ..." with code 2.
h.test('maxTimeMS errors: the value and the range in the message; aggregate 14 and 51024', async () => {
  const db = srv.freshDb('ac58t');
  await db.collection('c').insertOne({});
  const agg = (m) => db.command({ aggregate: 'c', pipeline: [], cursor: {}, maxTimeMS: m });
  const find = (m) => db.command({ find: 'c', maxTimeMS: m });
  await h.expectCode(agg(-1123123), 51024, /^BSON field 'maxTimeMS' value must be >= 0, actual value '-1123123'$/);
  await h.expectCode(agg(-1.5), 51024, /actual value '-2'$/);
  await h.expectCode(agg('s'), 14, /^BSON field 'aggregate.maxTimeMS' is the wrong type 'string'/);
  await h.expectCode(agg(2147483648), 2, /^2147483648 value for maxTimeMS is out of range \[0, 2147483647\]$/);
  await h.expectCode(find(2147483648), 2, /^2147483648 value for maxTimeMS is out of range \[0, 2147483647\]$/);
  await h.expectCode(find(-1), 2, /^-1 value for maxTimeMS is out of range \[0, 2147483647\]$/);
  await h.expectCode(find('s'), 2, /^maxTimeMS must be a number$/);
  await h.expectCode(find(1.5), 2, /^maxTimeMS has non-integral value$/);
  assert.equal((await find(1000)).ok, 1);
  assert.equal((await agg(1000)).ok, 1);
});

// $toHashedIndexKey (MongoDB 7.0+): the NumberLong a hashed index stores for the value; the
// manual's example hashes "string to hash" to 763543691661428748. Found by helper-101.
h.test('$toHashedIndexKey gives what a hashed index stores, as the manual shows', async () => {
  const db = srv.freshDb('ac58h');
  const { Long } = require('mongodb');
  const out = await db.aggregate([{ $documents: [{ val: 'string to hash' }, { val: 1 }, { val: 1.0 }, {}] },
    { $addFields: { h: { $toHashedIndexKey: '$val' } } }], { promoteLongs: false }).toArray();
  assert.ok(out[0].h instanceof Long && out[0].h.toString() === '763543691661428748', String(out[0].h));
  assert.equal(out[1].h.toString(), out[2].h.toString()); /* 1 and 1.0 hash alike, as in the index */
  const nul = await db.aggregate([{ $documents: [{ v: null }] }, { $project: { h: { $toHashedIndexKey: '$v' } } }],
    { promoteLongs: false }).toArray();
  assert.equal(out[3].h.toString(), nul[0].h.toString()); /* missing hashes as null */
  // The same value the index holds: a hashed index finds the document by it.
  const c = db.collection('c');
  await c.insertOne({ _id: 1, val: 'string to hash' });
  await c.createIndex({ val: 'hashed' });
  const ex = await c.find({ val: 'string to hash' }).explain();
  assert.match(JSON.stringify(ex.queryPlanner.winningPlan), /763543691661428748/);
});

// mongod 8.0's explain: explainVersion first, serverParameters after serverInfo (found by
// helper-102: mayfly put explainVersion last and had no serverParameters).
h.test('explain: explainVersion first, serverParameters after serverInfo', async () => {
  const db = srv.freshDb('ac58x');
  const c = db.collection('c');
  await c.insertOne({ a: 1 });
  for (const ex of [await c.find({ a: 1 }).explain(), await c.find({ a: 1 }).explain('executionStats'),
    await c.aggregate([{ $match: { a: 1 } }, { $project: { a: 1 } }]).explain()]) {
    const keys = Object.keys(ex);
    assert.equal(keys[0], 'explainVersion', keys.join());
    assert.deepEqual(keys.slice(-3), ['serverInfo', 'serverParameters', 'ok'], keys.join());
    assert.equal(ex.serverParameters.internalQueryMaxBlockingSortMemoryUsageBytes, 104857600);
    assert.equal(ex.serverParameters.internalQueryFrameworkControl, 'trySbeRestricted');
  }
});

// Decimal domains are checked in decimal, as mongod's Decimal128 checks: 1E-400 is not zero
// (a double made it one), and a base of 1 + 1e-25 is not 1 (found by helper-103).
h.test('decimal arguments are checked and computed past the double range', async () => {
  const db = srv.freshDb('ac58d2');
  const { Decimal128 } = require('mongodb');
  const D = (s) => Decimal128.fromString(s);
  const cases = [
    [{ $log10: D('1E-400') }, '-400'],
    [{ $ln: D('1E+5000') }, '11512.92546497022842008995727342182'],
    [{ $sqrt: D('1E+6000') }, '1E+3000'],
    [{ $sqrt: D('100') }, '10'],
    [{ $sqrt: D('4.00') }, '2.0'],
    [{ $divide: [1, D('1E-400')] }, '1E+400'],
    [{ $mod: [7, D('1E-400')] }, '0E-400'],
    [{ $pow: [D('10'), 4000] }, '1.000000000000000000000000000000000E+4000'],
    [{ $ln: D('1.0000000000000000000000001') }, '9.999999999999999999999999500000000E-26'],
  ];
  const doc = (await db.aggregate([{ $documents: [{}] },
    { $project: Object.fromEntries(cases.map((c, i) => [`r${i}`, c[0]])) }]).toArray())[0];
  cases.forEach(([e, want], i) => assert.equal(doc[`r${i}`].toString(), want, JSON.stringify(e)));
  await h.expectCode(db.aggregate([{ $documents: [{ x: D('-1E-400') }] }, { $project: { r: { $sqrt: '$x' } } }]).toArray(), 28714);
});
