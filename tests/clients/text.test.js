'use strict';
// Text search as MongoDB 8.0 answers it: text indexes (createIndex with
// "text" fields, weights, default_language, language_override; listIndexes'
// normalised spec; one per collection), $text ($search terms, "phrases",
// -negations, $language, $caseSensitive, $diacriticSensitive), Snowball
// stemming, stop words, {$meta: "textScore"} in find projections, find sorts,
// $sort, $project and $addFields, explain's TEXT stages, and the error codes.
// The articles / stores collections are the manual's ($text, text indexes).
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const ids = (docs) => docs.map((d) => d._id);
const sorted = (a) => [...a].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));

const articles = [
  { _id: 1, subject: 'coffee', author: 'xyz', views: 50 },
  { _id: 2, subject: 'Coffee Shopping', author: 'efg', views: 5 },
  { _id: 3, subject: 'Baking a cake', author: 'abc', views: 90 },
  { _id: 4, subject: 'baking', author: 'xyz', views: 100 },
  { _id: 5, subject: 'Café Con Leche', author: 'abc', views: 200 },
  { _id: 6, subject: 'Сырники', author: 'jkl', views: 80 },
  { _id: 7, subject: 'coffee and cream', author: 'efg', views: 10 },
  { _id: 8, subject: 'Cafe con Leche', author: 'xyz', views: 10 },
];

async function articlesColl(name) {
  const db = srv.freshDb(name);
  const c = db.collection('articles');
  assert.equal(await c.createIndex({ subject: 'text' }), 'subject_text');
  await c.insertMany(articles);
  return { db, c };
}

const search = (c, text, opts = {}) => c.find({ $text: text }, opts).toArray();

h.test('createIndex text: listIndexes shows the normalised spec; options kept', async () => {
  const db = srv.freshDb('spec');
  const c = db.collection('c');
  assert.equal(await c.createIndex({ subject: 'text' }), 'subject_text');
  const idx = await c.indexes();
  assert.deepEqual(idx[1], {
    v: 2, key: { _fts: 'text', _ftsx: 1 }, name: 'subject_text', weights: { subject: 1 },
    default_language: 'english', language_override: 'language', textIndexVersion: 3,
  });
  const d = db.collection('d');
  assert.equal(await d.createIndex({ content: 'text', keywords: 'text', about: 'text' },
    { weights: { content: 10, keywords: 5 }, name: 'TextIndex', default_language: 'spanish',
      language_override: 'idioma' }), 'TextIndex');
  const [, t] = await d.indexes();
  assert.deepEqual(t.key, { _fts: 'text', _ftsx: 1 });
  assert.deepEqual(t.weights, { about: 1, content: 10, keywords: 5 });
  assert.equal(t.default_language, 'spanish');
  assert.equal(t.language_override, 'idioma');
  assert.equal(t.textIndexVersion, 3);
  const w = db.collection('w');
  assert.equal(await w.createIndex({ '$**': 'text' }), '$**_text');
  assert.deepEqual((await w.indexes())[1].weights, { '$**': 1 });
});

h.test('one text index per collection: a second one is 85 IndexOptionsConflict', async () => {
  const db = srv.freshDb('one');
  const c = db.collection('c');
  await c.createIndex({ a: 'text' });
  await assert.rejects(c.createIndex({ b: 'text' }), (e) => e.code === 85 && e.codeName === 'IndexOptionsConflict');
  // the same index again is a no-op
  assert.equal(await c.createIndex({ a: 'text' }), 'a_text');
});

h.test('bad text index options: 67 CannotCreateIndex with mongod\'s messages', async () => {
  const db = srv.freshDb('badopts');
  const c = db.collection('c');
  await c.insertOne({ _id: 1 });
  const errOf = async (key, opts) => {
    try { await c.createIndex(key, opts); } catch (e) { return [e.code, e.message]; }
    return null;
  };
  const cases = [
    [{ a: 'text' }, { default_language: 'klingon' }, 'default_language is not valid'],
    [{ a: 'text' }, { language_override: '$x' }, 'language_override is not valid'],
    [{ a: 'text' }, { weights: { a: 'x' } }, 'weight for text index needs numeric type'],
    [{ a: 'text' }, { weights: 3 }, "text index option 'weights' must be an object"],
    [{ a: 'text' }, { weights: { b: 0.5 } }, 'text index weight must be in the exclusive interval (0,100000) but found: 0'],
    [{ a: 'text' }, { weights: { 'b.$c': 2 } }, 'weight cannot have path component with $ prefix'],
    [{ a: 'text' }, { textIndexVersion: 4 }, 'bad textIndexVersion: 4'],
    [{ a: 'text', b: 1, c: 'text' }, {}, "'text' fields in index must all be adjacent"],
    [{ a: 2, b: 'text' }, {}, 'expected value 1 or -1 for non-text key in compound index'],
    [{ _fts: 1, b: 'text' }, {}, 'expecting _fts:"text"'],
  ];
  for (const [key, opts, msg] of cases) {
    const r = await errOf(key, opts);
    assert.ok(r !== null, `${JSON.stringify(key)} ${JSON.stringify(opts)} accepted`);
    assert.equal(r[0], 67, `${JSON.stringify(opts)}: ${r[1]}`);
    assert.ok(r[1].includes(msg), `${JSON.stringify(opts)}: ${r[1]}`);
  }
  // Option types come first, as mongod's validateIndexSpec checks them before the text plugin's rules: 14.
  for (const [opts, msg] of [[{ default_language: 5 }, "The field 'default_language' must be a string, but got int"],
    [{ language_override: 1 }, "The field 'language_override' must be a string, but got int"],
    [{ textIndexVersion: 'x' }, "The field 'textIndexVersion' must be a number, but got string"]]) {
    const r = await errOf({ a: 'text' }, opts);
    assert.deepEqual(r && [r[0], r[1].includes(msg)], [14, true], `${JSON.stringify(opts)}: ${r && r[1]}`);
  }
  // weights belong to text indexes only: 67.
  const w = await errOf({ a: 1 }, { weights: { a: 2 } });
  assert.equal(w[0], 67);
  assert.ok(w[1].endsWith("the field 'weights' can only be specified with text indexes"), w[1]);
  assert.equal((await c.indexes()).length, 1);
  // weights are whole numbers (numberInt); textIndexVersion 2 is kept
  assert.equal(await c.createIndex({ a: 'text' }, { weights: { a: 2.7 }, textIndexVersion: 2 }), 'a_text');
  const [, t] = await c.indexes();
  assert.deepEqual([t.weights, t.textIndexVersion], [{ a: 2 }, 2]);
});

h.test('manual: $search "coffee" finds 1, 2, 7 (case-insensitive, stemmed)', async () => {
  const { c } = await articlesColl('coffee');
  assert.deepEqual(sorted(ids(await search(c, { $search: 'coffee' }))), [1, 2, 7]);
  // any of the terms: bake coffee cake
  assert.deepEqual(sorted(ids(await search(c, { $search: 'bake coffee cake' }))), [1, 2, 3, 4, 7]);
  // stemming: coffees / shop match coffee / shopping
  assert.deepEqual(sorted(ids(await search(c, { $search: 'coffees' }))), [1, 2, 7]);
  assert.deepEqual(sorted(ids(await search(c, { $search: 'shop' }))), [2]);
  // stop words alone find nothing
  assert.deepEqual(await search(c, { $search: 'and the a' }), []);
  assert.deepEqual(await search(c, { $search: 'tea' }), []);
});

h.test('$text inside $or: the union of the text matches and the other branches, which must be indexed (291 otherwise), in find, count, aggregate, delete and across getMores', async () => {
  // mongod's TEXT under OR (planner: "other non-TEXT clauses under OR have to be indexed as well");
  // jstests/core/fts6.js (SERVER-13039).
  const { db, c } = await articlesColl('textor');
  const err = async (p) => { try { await p; } catch (e) { return e.code; } return null; };
  assert.equal(await err(c.find({ $or: [{ $text: { $search: 'coffee' } }, { views: 90 }] }).toArray()), 291, 'views is not indexed');
  await c.createIndex({ views: 1 });
  await c.createIndex({ author: 1 });
  const or = (search, other) => ({ $or: [{ $text: { $search: search } }, other] });
  assert.deepEqual(sorted(ids(await c.find(or('coffee', { views: 90 })).toArray())), [1, 2, 3, 7]);
  assert.deepEqual(sorted(ids(await c.find(or('coffee -shopping', { views: { $gte: 100 } })).toArray())), [1, 4, 5, 7],
    'a negated term keeps 2 out of the text branch only');
  assert.deepEqual(sorted(ids(await c.find(or('"coffee and"', { author: 'abc' })).toArray())), [3, 5, 7], 'a phrase');
  // fts6.js: an equality outside the $or applies to both branches.
  assert.deepEqual(ids(await c.find({ author: 'efg', $or: [{ _id: 1 }, { $text: { $search: 'cream' } }] }).toArray()), [7]);
  assert.deepEqual(ids(await c.find({ author: 'xyz', $or: [{ _id: 1 }, { $text: { $search: 'cream' } }] }).toArray()), [1]);
  // Sorted by score: documents the text search does not match have none and come last.
  const bySc = await c.find(or('coffee', { views: 90 }), { sort: { s: { $meta: 'textScore' } } }).toArray();
  assert.deepEqual(bySc.map((d) => d._id).slice(-1), [3]);
  // Across getMores, in count, aggregate's leading $match, and a delete.
  assert.deepEqual(sorted(ids(await c.find(or('coffee', { author: 'xyz' }), { batchSize: 1 }).toArray())), [1, 2, 4, 7, 8]);
  assert.equal(await c.countDocuments(or('coffee', { author: 'xyz' })), 5);
  assert.deepEqual(sorted(ids(await c.aggregate([{ $match: or('baking', { views: 10 }) }]).toArray())), [3, 4, 7, 8]);
  // The plan: FETCH over an OR of the text index's term scans and the other branch's index scan.
  const plan = (await c.find(or('coffee', { views: 90 })).explain()).queryPlanner.winningPlan;
  assert.equal(plan.stage, 'FETCH');
  assert.equal(plan.inputStage.stage, 'OR');
  assert.deepEqual(plan.inputStage.inputStages.map((s) => s.indexName).sort(), ['subject_text', 'views_1']);
  assert.equal((await c.deleteMany(or('cake', { views: 200 }))).deletedCount, 2);
  assert.deepEqual(sorted(ids(await c.find().toArray())), [1, 2, 4, 6, 7, 8]);
  // Still refused: $text under $nor, and a $text under $or whose other branch no index serves.
  assert.equal(await err(c.find({ $nor: [{ $text: { $search: 'x' } }, { views: 1 }] }).toArray()), 2);
  assert.equal(await err(c.find(or('coffee', { subject: 'x' })).toArray()), 291);
  // mongosh, as users type it.
  const out = await h.mongosh(srv.port, db.databaseName,
    'print(db.articles.find({$or: [{$text: {$search: "coffee"}}, {author: "xyz"}]}).sort({_id: 1}).toArray().map((d) => d._id).join(","))');
  assert.equal(out, '1,2,4,7,8');
});

h.test('manual: phrases, negation, diacritics, $language', async () => {
  const { db, c } = await articlesColl('phrase');
  assert.deepEqual(ids(await search(c, { $search: '"coffee shop"' })), [2]);
  assert.deepEqual(sorted(ids(await search(c, { $search: 'coffee -shop' }))), [1, 7]);
  assert.deepEqual(sorted(ids(await search(c, { $search: 'coffee -"and cream"' }))), [1, 2]);
  // two phrases: both must appear
  assert.deepEqual(ids(await search(c, { $search: '"coffee" "cream"' })), [7]);
  // diacritic-insensitive by default: café = cafe
  assert.deepEqual(sorted(ids(await search(c, { $search: 'CAFÉ' }))), [5, 8]);
  assert.deepEqual(ids(await search(c, { $search: 'CAFÉ', $diacriticSensitive: true })), [5]);
  assert.deepEqual(ids(await search(c, { $search: 'Coffee', $caseSensitive: true })), [2]);
  assert.deepEqual(await search(c, { $search: '"coffee shop"', $caseSensitive: true }), []);
  assert.deepEqual(ids(await search(c, { $search: '"Coffee Shop"', $caseSensitive: true })), [2]);
  // validate walks the text index like any other
  const v = await db.command({ validate: 'articles' });
  assert.equal(v.valid, true);
  assert.deepEqual(sorted(ids(await search(c, { $search: 'leche', $language: 'es' }))), [5, 8]);
  // a combining acute accent is a diacritic too; the document was indexed in English, whose stemmer leaves Cyrillic alone
  assert.deepEqual(ids(await search(c, { $search: 'сы\u0301рники' })), [6]);
  assert.deepEqual(await search(c, { $search: 'сырники', $language: 'ru' }), []); // Russian stems it to сырник
});

h.test('stemming: running/run, language "none" keeps words as they are', async () => {
  const db = srv.freshDb('stem');
  const c = db.collection('c');
  await c.createIndex({ t: 'text' });
  await c.insertMany([
    { _id: 1, t: 'I was running fast' },
    { _id: 2, t: 'they run' },
    { _id: 3, t: 'the runner', language: 'none' },
    { _id: 4, t: 'Los niños corren', language: 'spanish' },
    { _id: 5, t: 'el corredor', language: 'es' },
  ]);
  assert.deepEqual(sorted(ids(await search(c, { $search: 'run' }))), [1, 2]);
  assert.deepEqual(sorted(ids(await search(c, { $search: 'runs' }))), [1, 2]);
  // language none: no stemming, and "the" is no stop word there
  assert.deepEqual(ids(await search(c, { $search: 'the', $language: 'none' })), [3]);
  assert.deepEqual(ids(await search(c, { $search: 'runner', $language: 'none' })), [3]);
  assert.deepEqual(ids(await search(c, { $search: 'corre', $language: 'spanish' })), [4]);
  // Spanish stop words (mongod's list, diacritics folded): "los", "él"/"el" are not indexed
  assert.deepEqual(await search(c, { $search: 'los el', $language: 'spanish' }), []);
  assert.deepEqual(ids(await search(c, { $search: 'ninos', $language: 'spanish' })), [4]);
  // an unsupported language in a document: 17262 on insert, nothing written
  await assert.rejects(c.insertOne({ _id: 9, t: 'x', language: 'klingon' }),
    (e) => e.code === 17262 && /language override unsupported: klingon/.test(e.message));
  await assert.rejects(c.insertOne({ _id: 9, t: 'x', language: 5 }), (e) => e.code === 17261);
  assert.equal(await c.countDocuments({ _id: 9 }), 0);
  // an index build over such a document fails the same way, and leaves no index
  const o = db.collection('other');
  await o.insertMany([{ _id: 1, t: 'x' }, { _id: 2, t: 'y', language: 'klingon' }]);
  await assert.rejects(o.createIndex({ t: 'text' }), (e) => e.code === 17262);
  assert.equal((await o.indexes()).length, 1);
});

h.test('textScore: projection, sort, and weights affect the order', async () => {
  const { c } = await articlesColl('score');
  const r = await c.find({ $text: { $search: 'coffee' } }, { projection: { score: { $meta: 'textScore' } } })
    .sort({ score: { $meta: 'textScore' } }).toArray();
  // mongod's scores: "coffee" alone 1.0; two-word subject 0.75; three words (one a stop word) 0.75
  assert.deepEqual(r.map((d) => [d._id, d.score]), [[1, 1], [2, 0.75], [7, 0.75]]);
  assert.equal(r[0].subject, 'coffee'); // $meta alone keeps every field
  // without a sort: the score is there too
  const one = await c.find({ $text: { $search: 'cake' } }, { projection: { score: { $meta: 'textScore' }, _id: 0 } }).toArray();
  assert.deepEqual(one, [{ subject: 'Baking a cake', author: 'abc', views: 90, score: 0.75 }]);
  const incl = await c.find({ $text: { $search: 'cake' } }, { projection: { subject: 1, score: { $meta: 'textScore' } } }).toArray();
  assert.deepEqual(incl, [{ _id: 3, subject: 'Baking a cake', score: 0.75 }]);

  // weights: a match in the heavier field scores higher
  const db = srv.freshDb('weights');
  const b = db.collection('blog');
  await b.createIndex({ content: 'text', keywords: 'text' }, { weights: { content: 10, keywords: 2 } });
  await b.insertMany([
    { _id: 1, content: 'This morning I had a cup of coffee.', keywords: ['breakfast'] },
    { _id: 2, content: 'Animals and plants.', keywords: ['coffee', 'garden'] },
    { _id: 3, content: 'nothing here', keywords: ['tea'] },
  ]);
  const w = await b.find({ $text: { $search: 'coffee' } }, { projection: { s: { $meta: 'textScore' } } })
    .sort({ s: { $meta: 'textScore' } }).toArray();
  assert.deepEqual(ids(w), [1, 2]); // 10 * (0.5 / 3 + 0.5) beats 2
  assert.ok(w[0].s > w[1].s);
  assert.equal(w[1].s, 2); // the array element "coffee" alone: weight 2 (no bonus: its term is "coffe")
});

h.test('aggregate: $match $text first, $sort / $project / $addFields with textScore', async () => {
  const { c } = await articlesColl('agg');
  const r = await c.aggregate([
    { $match: { $text: { $search: 'cake coffee' } } },
    { $addFields: { score: { $meta: 'textScore' } } },
    { $sort: { score: { $meta: 'textScore' }, _id: 1 } },
    { $project: { _id: 1, score: 1 } },
  ]).toArray();
  assert.deepEqual(r, [{ _id: 1, score: 1 }, { _id: 2, score: 0.75 }, { _id: 3, score: 0.75 }, { _id: 7, score: 0.75 }]);
  const p = await c.aggregate([
    { $match: { $text: { $search: 'leche' } } },
    { $project: { s: { $meta: 'textScore' } } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.deepEqual(p, [{ _id: 5, s: 0.6666666666666666 }, { _id: 8, s: 0.6666666666666666 }]);
  // the score is metadata: it survives an inclusion $project
  const kept = await c.aggregate([{ $match: { $text: { $search: 'coffee' } } }, { $project: { subject: 1 } },
    { $sort: { s: { $meta: 'textScore' }, _id: -1 } }, { $project: { s: { $meta: 'textScore' } } }]).toArray();
  assert.deepEqual(kept, [{ _id: 1, s: 1 }, { _id: 7, s: 0.75 }, { _id: 2, s: 0.75 }]);
  // the hidden score never shows
  const all = await c.aggregate([{ $match: { $text: { $search: 'coffee' } } }, { $sort: { _id: 1 } }]).toArray();
  assert.deepEqual(Object.keys(all[0]), ['_id', 'subject', 'author', 'views']);
  const g = await c.aggregate([{ $match: { $text: { $search: 'coffee' } } },
    { $group: { _id: null, n: { $sum: 1 } } }]).toArray();
  assert.deepEqual(g, [{ _id: null, n: 3 }]);
  await assert.rejects(c.aggregate([{ $match: { views: { $gt: 1 } } }, { $match: { $text: { $search: 'x' } } }]).toArray(),
    (e) => e.code === 17313);
  // a $facet's sub-pipeline reads no text plan: $text heading it is refused
  await assert.rejects(c.aggregate([{ $facet: { f: [{ $match: { $text: { $search: 'x' } } }] } }]).toArray(),
    (e) => e.code === 17313);
  // a $facet after $text sees the scores
  const f = await c.aggregate([{ $match: { $text: { $search: 'coffee' } } },
    { $facet: { top: [{ $sort: { s: { $meta: 'textScore' } } }, { $limit: 1 }, { $project: { _id: 1 } }] } }]).toArray();
  assert.deepEqual(f, [{ top: [{ _id: 1 }] }]);
  // embedded documents never show the hidden score either
  const emb = await c.aggregate([{ $match: { $text: { $search: 'cake' } } }, { $facet: { all: [{ $match: {} }] } },
    { $project: { all: 1 } }]).toArray();
  assert.deepEqual(emb, [{ all: [{ _id: 3, subject: 'Baking a cake', author: 'abc', views: 90 }] }]);
  const grp = await c.aggregate([{ $match: { $text: { $search: 'cake' } } }, { $group: { _id: null, d: { $push: '$$ROOT' } } }]).toArray();
  assert.deepEqual(grp, [{ _id: null, d: [{ _id: 3, subject: 'Baking a cake', author: 'abc', views: 90 }] }]);
});

h.test('$text with other predicates, count, update and delete through the text index', async () => {
  const { c } = await articlesColl('mixed');
  assert.deepEqual(ids(await c.find({ $text: { $search: 'coffee' }, views: { $gt: 20 } }).toArray()), [1]);
  assert.deepEqual(sorted(ids(await c.find({ $and: [{ $text: { $search: 'coffee' } }, { author: 'efg' }] }).toArray())), [2, 7]);
  assert.equal(await c.countDocuments({ $text: { $search: 'coffee' } }), 3);
  const u = await c.updateMany({ $text: { $search: 'baking' } }, { $inc: { views: 1 } });
  assert.equal(u.modifiedCount, 2);
  // updates maintain the index: the new subject is found, the old words are gone
  await c.updateOne({ _id: 4 }, { $set: { subject: 'tea time' } });
  assert.deepEqual(ids(await search(c, { $search: 'tea' })), [4]);
  assert.deepEqual(ids(await search(c, { $search: 'baking' })), [3]);
  const d = await c.deleteMany({ $text: { $search: 'leche' } });
  assert.equal(d.deletedCount, 2);
  assert.deepEqual(await search(c, { $search: 'cafe' }), []);
});

h.test('explain: TEXT_MATCH over FETCH over TEXT_OR with one IXSCAN per term', async () => {
  const { c } = await articlesColl('explain');
  const e = await c.find({ $text: { $search: 'coffee cake' } }).explain('executionStats');
  const w = e.queryPlanner.winningPlan;
  assert.equal(w.stage, 'TEXT_MATCH');
  assert.equal(w.indexName, 'subject_text');
  assert.deepEqual(w.indexPrefix, {});
  assert.deepEqual(w.parsedTextQuery, { terms: ['cake', 'coffe'], negatedTerms: [], phrases: [], negatedPhrases: [] });
  assert.equal(w.textIndexVersion, 3);
  const e2 = await c.find({ $text: { $search: 'coffee -cream "Coffee Shop" -"and"' } }).explain();
  assert.deepEqual(e2.queryPlanner.winningPlan.parsedTextQuery,
    { terms: ['coffe', 'shop'], negatedTerms: ['cream'], phrases: ['coffee shop'], negatedPhrases: ['and'] });
  assert.equal(w.inputStage.stage, 'FETCH');
  assert.equal(w.inputStage.inputStage.stage, 'TEXT_OR');
  assert.equal(w.inputStage.inputStage.inputStages.length, 2);
  assert.equal(w.inputStage.inputStage.inputStages[0].indexName, 'subject_text');
  assert.equal(e.executionStats.nReturned, 4);
  assert.equal(e.executionStats.totalDocsExamined, 4);
  assert.equal(e.executionStats.executionStages.stage, 'TEXT_MATCH');
  assert.equal(e.executionStats.executionStages.nReturned, 4);
});

h.test('errors: no text index, bad $text operands, misplaced $text, textScore without $text', async () => {
  const db = srv.freshDb('errs');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 'coffee' }]);
  const err = async (p) => { try { await p; } catch (e) { return [e.code, e.message]; } return null; };
  assert.deepEqual(await err(c.find({ $text: { $search: 'x' } }).toArray()), [27, 'text index required for $text query']);
  await c.createIndex({ a: 'text' });
  assert.deepEqual(await err(c.find({ $text: 'x' }).toArray()), [2, '$text expects an object']);
  assert.equal((await err(c.find({ $text: {} }).toArray()))[0], 4);
  assert.equal((await err(c.find({ $text: { $search: 1 } }).toArray()))[0], 14);
  assert.equal((await err(c.find({ $text: { $search: 'x', $caseSensitive: 1 } }).toArray()))[0], 14);
  assert.deepEqual(await err(c.find({ $text: { $search: 'x', foo: 1 } }).toArray()), [2, 'extra fields in $text']);
  assert.equal((await err(c.find({ $text: { $search: 'x', $language: 'klingon' } }).toArray()))[0], 2);
  assert.deepEqual(await err(c.find({ $and: [{ $text: { $search: 'x' } }, { $text: { $search: 'y' } }] }).toArray()),
    [2, 'Too many text expressions']);
  assert.deepEqual(await err(c.find({ $nor: [{ $text: { $search: 'x' } }] }).toArray()),
    [2, 'text expression not allowed in nor']);
  assert.equal((await err(c.find({ $or: [{ $text: { $search: 'x' } }, { b: 1 }] }).toArray()))[0], 291, 'b is not indexed');
  // expression_parser.cpp's parseText: BadValue for both, the level checked first.
  assert.deepEqual(await err(c.find({ r: { $elemMatch: { $text: { $search: 'x' } } } }).toArray()),
    [2, '$text can only be applied to the top-level document']);
  assert.deepEqual(await err(db.createCollection('v', { validator: { $text: { $search: 'x' } } })),
    [2, '$text is not allowed in this context']);
  assert.equal((await err(c.createIndex({ z: 1 }, { partialFilterExpression: { $text: { $search: 'x' } } })))[0], 2); // parsed with every special feature banned
  assert.equal((await err(c.find({}, { projection: { s: { $meta: 'textScore' } } }).toArray()))[0], 40218);
  assert.equal((await err(c.find({}).sort({ s: { $meta: 'textScore' } }).toArray()))[0], 40218);
  assert.equal((await err(c.aggregate([{ $project: { s: { $meta: 'textScore' } } }]).toArray()))[0], 40218);
  assert.equal((await err(c.aggregate([{ $sort: { s: { $meta: 'textScore' } } }]).toArray()))[0], 40218);
  // refused up front, even when nothing matches
  assert.equal((await err(c.find({ a: 'none' }, { projection: { s: { $meta: 'textScore' } } }).toArray()))[0], 40218);
  assert.equal((await err(db.collection('empty').aggregate([{ $sort: { s: { $meta: 'textScore' } } }]).toArray()))[0], 40218);
  assert.equal((await err(c.find({ $text: { $search: 'x' } }, { projection: { s: { $meta: 'foo' } } }).toArray()))[0], 17308);
});

h.test('manual stores: $** wildcard index, language_override per document', async () => {
  const db = srv.freshDb('stores');
  const s = db.collection('stores');
  await s.insertMany([
    { _id: 1, name: 'Java Hut', description: 'Coffee and cakes' },
    { _id: 2, name: 'Burger Buns', description: 'Gourmet hamburgers' },
    { _id: 3, name: 'Coffee Shop', description: 'Just coffee' },
    { _id: 4, name: 'Clothes Clothes Clothes', description: 'Discount clothing' },
    { _id: 5, name: 'Java Shopping', description: 'Indonesian goods' },
  ]);
  await s.createIndex({ name: 'text', description: 'text' });
  assert.deepEqual(sorted(ids(await search(s, { $search: 'java coffee shop' }))), [1, 3, 5]);
  assert.deepEqual(ids(await search(s, { $search: '"coffee shop"' })), [3]);
  assert.deepEqual(sorted(ids(await search(s, { $search: 'java shop -coffee' }))), [5]);
  const r = await s.find({ $text: { $search: 'java coffee shop' } }, { projection: { score: { $meta: 'textScore' } } })
    .sort({ score: { $meta: 'textScore' }, _id: 1 }).toArray();
  // the manual's scores for this query
  assert.deepEqual(r.map((d) => [d._id, d.score]), [[3, 2.25], [1, 1.5], [5, 1.5]]);

  const q = db.collection('quotes');
  await q.createIndex({ '$**': 'text' }, { language_override: 'idioma' });
  await q.insertMany([
    { _id: 1, idioma: 'portuguese', original: 'A sorte protege os audazes.', t: { en: 'Fortune favors the bold.' } },
    { _id: 2, idioma: 'spanish', original: 'Nada hay más surrealista que la realidad.' },
    { _id: 3, original: 'is this a dagger which I see before me.' },
  ]);
  assert.deepEqual(ids(await search(q, { $search: 'dagger' })), [3]);
  assert.deepEqual(ids(await search(q, { $search: 'bold' })), [1]); // nested string, parent's language
  assert.deepEqual(ids(await search(q, { $search: 'realidad', $language: 'spanish' })), [2]);
  // the override field itself is not indexed
  assert.deepEqual(await search(q, { $search: 'spanish' }), []);
});

h.test('getMore over a text query and dropping the index', async () => {
  const db = srv.freshDb('more');
  const c = db.collection('c');
  await c.createIndex({ t: 'text' });
  const docs = [];
  for (let i = 0; i < 250; i++) docs.push({ _id: i, t: i % 2 ? 'red apple' : 'green apple pie' });
  await c.insertMany(docs);
  assert.equal((await c.find({ $text: { $search: 'apple' } }).batchSize(7).toArray()).length, 250);
  assert.equal((await c.find({ $text: { $search: 'pie red' } }).batchSize(10).toArray()).length, 250);
  assert.equal((await c.find({ $text: { $search: 'apple -pie' } }).toArray()).length, 125);
  // a long query: one scan per distinct term, each document once
  const words = [];
  for (let i = 0; i < 3000; i++) words.push(`w${i}x`);
  const t0 = Date.now();
  assert.equal((await c.find({ $text: { $search: `${words.join(' ')} apple -${words.join(' -')}` } }).toArray()).length, 250);
  assert.ok(Date.now() - t0 < 5000);
  await assert.rejects(c.find({ $text: { $search: 'apple', $caseSensitive: true }, $where: 'x' }).toArray(), (e) => e.code === 2);
  await c.dropIndex('t_text');
  await assert.rejects(c.find({ $text: { $search: 'apple' } }).toArray(), (e) => e.code === 27);
});

h.test('compound text indexes: equality on the prefix fields bounds the scan; suffix fields', async () => {
  const { db, c } = await articlesColl('compound');
  await c.dropIndex('subject_text');
  assert.equal(await c.createIndex({ author: 1, subject: 'text' }), 'author_1_subject_text');
  assert.deepEqual((await c.indexes())[1].key, { author: 1, _fts: 'text', _ftsx: 1 });
  assert.deepEqual(ids(await c.find({ author: 'xyz', $text: { $search: 'coffee leche' } }).sort({ _id: 1 }).toArray()), [1, 8]);
  assert.deepEqual(ids(await c.find({ $and: [{ author: { $eq: 'efg' } }, { $text: { $search: 'coffee' } }] })
    .sort({ _id: 1 }).toArray()), [2, 7]);
  const e = await c.find({ author: 'xyz', $text: { $search: 'coffee' } }).explain('executionStats');
  assert.equal(e.executionStats.totalKeysExamined, 1); // only xyz's "coffe" key
  await assert.rejects(c.find({ $text: { $search: 'coffee' } }).toArray(),
    (err) => err.code === 291 && /are equality predicates given for all prefix fields/.test(err.message));
  await assert.rejects(c.find({ author: { $in: ['xyz'] }, $text: { $search: 'coffee' } }).toArray(), (err) => err.code === 291);
  // a prefix field holding an array cannot be indexed: 201 CannotBuildIndexKeys
  await assert.rejects(c.insertOne({ _id: 20, author: ['a', 'b'], subject: 'x' }), (err) => err.code === 201);

  const s = db.collection('suffix');
  assert.equal(await s.createIndex({ subject: 'text', views: -1 }), 'subject_text_views_-1');
  assert.deepEqual((await s.indexes())[1].key, { _fts: 'text', _ftsx: 1, views: -1 });
  await s.insertMany(articles);
  assert.deepEqual(sorted(ids(await search(s, { $search: 'coffee' }))), [1, 2, 7]);
});

h.test('text indexes survive a restart; a hidden text index is not used; no collation', async () => {
  const { db } = await articlesColl('restart');
  const name = db.databaseName;
  const t = db.collection('t');
  await t.createIndex({ kind: 1, body: 'text' }, { weights: { body: 3 }, default_language: 'spanish' });
  await t.insertMany([{ _id: 1, kind: 'a', body: 'los niños corren' }, { _id: 2, kind: 'b', body: 'corriendo' }]);
  await assert.rejects(db.collection('coll').createIndex({ a: 'text' }, { collation: { locale: 'fr' } }),
    (e) => e.code === 67 && /does not support collation/.test(e.message));
  await srv.server.restart();
  await srv.reconnect();
  const db2 = srv.client.db(name);
  const r = await db2.collection('articles').find({ $text: { $search: 'coffee' } }, { projection: { s: { $meta: 'textScore' } } })
    .sort({ s: { $meta: 'textScore' } }).toArray();
  assert.deepEqual(r.map((d) => [d._id, d.s]), [[1, 1], [2, 0.75], [7, 0.75]]);
  assert.deepEqual(ids(await db2.collection('t').find({ kind: 'b', $text: { $search: 'corre' } }).toArray()), [2]);
  await db2.collection('articles').insertOne({ _id: 9, subject: 'more coffee' });
  assert.equal(await db2.collection('articles').countDocuments({ $text: { $search: 'coffee' } }), 4);
  await db2.command({ collMod: 'articles', index: { name: 'subject_text', hidden: true } });
  await assert.rejects(db2.collection('articles').find({ $text: { $search: 'coffee' } }).toArray(), (e) => e.code === 27);
});

h.test('other commands over $text: distinct, findOneAndUpdate, explain of aggregate / count / delete', async () => {
  const { db, c } = await articlesColl('cmds');
  assert.deepEqual((await c.distinct('author', { $text: { $search: 'coffee' } })).sort(), ['efg', 'xyz']);
  const r = await c.findOneAndUpdate({ $text: { $search: 'cake' } }, { $set: { hit: true } }, { returnDocument: 'after' });
  assert.equal(r._id, 3);
  assert.equal(r.hit, true);
  const ea = await c.aggregate([{ $match: { $text: { $search: 'coffee' } } }, { $sort: { s: { $meta: 'textScore' } } }])
    .explain('executionStats');
  assert.match(JSON.stringify(ea), /TEXT_OR/);
  const ec = await db.command({ explain: { count: 'articles', query: { $text: { $search: 'coffee' } } }, verbosity: 'executionStats' });
  assert.match(JSON.stringify(ec.queryPlanner.winningPlan), /TEXT_MATCH/);
  const ed = await db.command({ explain: { delete: 'articles', deletes: [{ q: { $text: { $search: 'coffee' } }, limit: 0 }] } });
  assert.match(JSON.stringify(ed.queryPlanner.winningPlan), /TEXT_OR/);
  assert.equal(await c.countDocuments({ $text: { $search: 'coffee' } }), 3);
});

h.test('combinations CanonicalQuery::isValid refuses (2): $text with a hint, min/max, $natural, tailable or $near; $near with tailable; hint against $natural sort', async () => {
  const { db, c } = await articlesColl('combos');
  await c.createIndex({ views: 1 });
  await db.createCollection('capped', { capped: true, size: 4096 });
  await db.collection('places').createIndex({ loc: '2dsphere' });
  const err = async (p) => { try { await p; } catch (e) { return [e.code, e.message]; } return null; };
  const t = { $text: { $search: 'coffee' } };
  // A hint would bound the text search by another index and return documents that do not match it.
  assert.deepEqual(await err(c.find(t).hint({ views: 1 }).toArray()), [2, 'text and hint not allowed in same query']);
  assert.deepEqual(await err(c.find(t).hint('views_1').toArray()), [2, 'text and hint not allowed in same query']);
  assert.deepEqual(await err(c.find(t).hint({ views: 1 }).min({ views: 0 }).max({ views: 1000 }).toArray()),
    [2, 'text and hint not allowed in same query']);
  assert.deepEqual(await err(c.find(t).sort({ $natural: 1 }).toArray()), [2, 'text expression not allowed with $natural sort order']);
  assert.deepEqual(await err(db.collection('capped').find(t, { tailable: true }).toArray()),
    [2, 'text and tailable cursor not allowed in same query']);
  const near = { loc: { $near: { $geometry: { type: 'Point', coordinates: [0, 0] } } } };
  assert.deepEqual(await err(c.find({ ...t, ...near }).toArray()), [2, 'text and geoNear not allowed in same query']);
  assert.deepEqual(await err(db.collection('capped').find(near, { tailable: true }).toArray()),
    [2, 'Tailable cursors and geo $near cannot be used together']);
  assert.deepEqual(await err(db.collection('places').find(near).sort({ $natural: 1 }).toArray()),
    [2, 'geoNear expression not allowed with $natural sort order']);
  assert.deepEqual(await err(c.find({}).sort({ $natural: 1 }).hint({ views: 1 }).toArray()),
    [2, 'index hint not allowed with $natural sort order']);
  assert.deepEqual(await err(c.find({}).sort({ $natural: 1 }).hint({ $natural: -1 }).toArray()),
    [2, '$natural hint must be in the same direction as $natural sort order']);
  // What stays allowed: an empty hint with $text, a matching $natural hint, and the plain text search.
  assert.deepEqual(sorted(ids(await c.find(t).hint({}).toArray())), [1, 2, 7]);
  assert.equal((await c.find({}).sort({ $natural: -1 }).hint({ $natural: -1 }).toArray())[0]._id, 8);
  assert.deepEqual(sorted(ids(await search(c, { $search: 'coffee' }))), [1, 2, 7]);
});

h.test('$text heading a $lookup or $unionWith sub-pipeline searches the other collection, with textScore, as mongod', async () => {
  const { db } = await articlesColl('subtext');
  const o = db.collection('o');
  await o.insertMany([{ _id: 'a', who: 'xyz', word: 'coffee' }, { _id: 'b', who: 'abc', word: 'cake' }]);
  // Uncorrelated, with the score in the sub-pipeline, and the hidden score never showing.
  const l = await o.aggregate([{ $match: { _id: 'a' } }, { $lookup: { from: 'articles', as: 'hits', pipeline: [
    { $match: { $text: { $search: 'coffee' } } }, { $sort: { s: { $meta: 'textScore' }, _id: 1 } },
    { $project: { _id: 1, s: { $meta: 'textScore' } } }] } }]).toArray();
  assert.deepEqual(l[0].hits, [{ _id: 1, s: 1 }, { _id: 2, s: 0.75 }, { _id: 7, s: 0.75 }]);
  const plain = await o.aggregate([{ $match: { _id: 'a' } }, { $lookup: { from: 'articles', as: 'hits',
    pipeline: [{ $match: { $text: { $search: 'cake' } } }] } }]).toArray();
  assert.deepEqual(plain[0].hits, [{ _id: 3, subject: 'Baking a cake', author: 'abc', views: 90 }]);
  // Correlated by localField/foreignField and by let: the search and the join together.
  const byField = await o.aggregate([{ $sort: { _id: 1 } }, { $lookup: { from: 'articles', localField: 'who', foreignField: 'author', as: 'h',
    pipeline: [{ $match: { $text: { $search: 'coffee cake' } } }, { $project: { _id: 1 } }] } }]).toArray();
  assert.deepEqual(byField.map((d) => [d._id, d.h.map((x) => x._id).sort()]), [['a', [1]], ['b', [3]]]);
  const byLet = await o.aggregate([{ $sort: { _id: 1 } }, { $lookup: { from: 'articles', let: { w: '$who' }, as: 'h',
    pipeline: [{ $match: { $text: { $search: 'coffee cake' }, $expr: { $eq: ['$author', '$$w'] } } }, { $project: { _id: 1 } }] } }]).toArray();
  assert.deepEqual(byLet.map((d) => [d._id, d.h.map((x) => x._id).sort()]), [['a', [1]], ['b', [3]]]);
  // $unionWith, streamed and inside a $facet.
  const u = await o.aggregate([{ $match: { _id: 'a' } }, { $unionWith: { coll: 'articles', pipeline: [
    { $match: { $text: { $search: 'leche' } } }, { $project: { _id: 1, s: { $meta: 'textScore' } } }] } }]).toArray();
  assert.deepEqual(u.map((d) => d._id).sort(), [5, 8, 'a']);
  assert.ok(u.filter((d) => d._id !== 'a').every((d) => Math.abs(d.s - 0.6666666666666666) < 1e-12));
  const uf = await o.aggregate([{ $match: { _id: 'a' } }, { $facet: { f: [{ $unionWith: { coll: 'articles', pipeline: [
    { $match: { $text: { $search: 'leche' } } }] } }] } }]).toArray();
  assert.deepEqual(uf[0].f.map((d) => Object.keys(d).join()).sort(), ['_id,subject,author,views', '_id,subject,author,views', '_id,who,word']);
  // A collection without a text index: 27, as a top-level search.
  await assert.rejects(o.aggregate([{ $lookup: { from: 'o', as: 'x', pipeline: [{ $match: { $text: { $search: 'x' } } }] } }]).toArray(),
    (e) => e.code === 27);
});

h.test('$graphLookup restrictSearchWithMatch is parsed with the default features: $text is 2 and $near 5626500, with mongod\'s context', async () => {
  const { db } = await articlesColl('glrestrict');
  await db.collection('o').insertOne({ _id: 'o' });
  const gl = (restrictSearchWithMatch) => db.collection('o').aggregate([{ $graphLookup: { from: 'articles', startWith: 1,
    connectFromField: '_id', connectToField: '_id', as: 'g', restrictSearchWithMatch } }]).toArray();
  await h.expectCode(gl({ $text: { $search: 'coffee' } }), 2,
    /^Failed to parse 'restrictSearchWithMatch' option to \$graphLookup :: caused by :: \$text is not allowed in this context$/);
  await h.expectCode(gl({ loc: { $near: [0, 0] } }), 5626500, /^Failed to parse 'restrictSearchWithMatch' option to \$graphLookup :: caused by :: \$geoNear, \$near/);
  const [ok] = await gl({ views: { $gt: 10 } });
  assert.deepEqual(ok.g.map((d) => d._id), [1]);
});
