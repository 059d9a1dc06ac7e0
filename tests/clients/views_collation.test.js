'use strict';
/*
 * Views read by an aggregation ($lookup, $graphLookup, $unionWith, nested
 * sub-pipelines) must have the operation's collation as their default, as
 * mongod's collatorCompatibleWithPipeline checks (167
 * OptionNotSupportedOnView): the cases of MongoDB's
 * jstests/core/views/views_collation.js for lookups into views.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const lookup = (from) => ({ $lookup: { from, localField: 'x', foreignField: 'x', as: 'result' } });
const nested = (outer, from) => ({ $lookup: { from: outer, pipeline: [{ $lookup: { from, localField: 'x', foreignField: 'x', as: 'inner' } }], as: 'result' } });
const graph = (from) => ({ $graphLookup: { from, startWith: '$_id', connectFromField: '_id', connectToField: 'matchedId', as: 'matched' } });
const union = (coll) => ({ $unionWith: { coll } });

async function setup() {
  const db = srv.freshDb('views_coll');
  await db.command({ create: 'simpleCollection' });
  await db.command({ create: 'ukCollection', collation: { locale: 'uk' } });
  await db.command({ create: 'filCollection', collation: { locale: 'fil' } });
  await db.command({ create: 'simpleView', viewOn: 'ukCollection' });
  await db.command({ create: 'filView', viewOn: 'ukCollection', collation: { locale: 'fil' } });
  await db.command({ create: 'simpleView2', viewOn: 'simpleCollection', collation: { locale: 'simple' } });
  await db.collection('ukCollection').insertMany([{ _id: 1, x: 'a' }, { _id: 2, x: 'b' }]);
  await db.collection('simpleCollection').insertOne({ _id: 1, x: 'a' });
  return db;
}

const agg = (db, coll, pipeline, extra = {}) => db.command({ aggregate: coll, pipeline, cursor: {}, ...extra });

h.test('lookups into a view whose collation is the operation\'s run', async () => {
  const db = await setup();
  for (const st of [lookup('simpleView'), nested('simpleCollection', 'simpleView'), graph('simpleView'), union('simpleView')]) {
    await agg(db, 'simpleCollection', [st]);
    await agg(db, 'ukCollection', [st], { collation: { locale: 'simple' } });
    await agg(db, 'simpleView2', [st]);
  }
  for (const st of [lookup('filView'), nested('filCollection', 'filView'), graph('filView')]) {
    await agg(db, 'filCollection', [st]);
    await agg(db, 'ukCollection', [st], { collation: { locale: 'fil' } });
  }
  // Collections keep their own collation: only views are checked.
  await agg(db, 'simpleView2', [lookup('simpleView'), graph('ukCollection')]);
  const r = await agg(db, 'simpleCollection', [lookup('simpleView')]);
  assert.deepEqual(r.cursor.firstBatch, [{ _id: 1, x: 'a', result: [{ _id: 1, x: 'a' }] }]);
});

h.test('lookups into a view with another collation are 167 OptionNotSupportedOnView', async () => {
  const db = await setup();
  const refused = (p) => assert.rejects(p, (e) => e.code === 167 && e.codeName === 'OptionNotSupportedOnView');
  for (const st of [lookup('simpleView'), nested('simpleCollection', 'simpleView'), graph('simpleView'), union('simpleView')]) {
    await refused(agg(db, 'simpleCollection', [st], { collation: { locale: 'en' } }));
    await refused(agg(db, 'ukCollection', [st])); // the collection's default (uk) is the operation's
  }
  for (const st of [lookup('filView'), nested('simpleCollection', 'filView'), graph('filView'), { $facet: { f: [lookup('filView')] } }]) {
    await refused(agg(db, 'simpleCollection', [st]));
    await refused(agg(db, 'filCollection', [st], { collation: { locale: 'zh' } }));
  }
  await refused(agg(db, 'filView', [lookup('simpleView')]));
  await refused(agg(db, 'simpleView', [lookup('filView')]));
  await refused(agg(db, 'simpleCollection', [lookup('filView'), graph('simpleView')]));
  await refused(db.command({ explain: { aggregate: 'simpleCollection', pipeline: [lookup('filView')], cursor: {} } }));
  await refused(agg(db, 'simpleCollection', [lookup('filView')], { explain: true }));
  await db.command({ explain: { aggregate: 'filCollection', pipeline: [lookup('filView')], cursor: {} } });
  await assert.rejects(agg(db, 'simpleCollection', [lookup('filView')]),
    (e) => e.message === `Cannot override a view's default collation${db.databaseName}.filView`);
});
