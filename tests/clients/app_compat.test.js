'use strict';
/*
 * What real applications met (session 34's probes of Mongoose plugins,
 * typegoose, Parse Server and auth libraries), each as MongoDB 8.0 answers:
 * - concurrent identical `create` commands all succeed (mongoose-sequence's
 *   counters, typegoose discriminators and migration scripts create one
 *   collection from several places at once; some answered 48);
 * - Atlas Search's stages and index commands answer 31082
 *   SearchNotEnabled, which applications test for to fall back to $text
 *   (they answered 40324 and 59).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

h.test('concurrent identical creates all succeed (plain, capped and time-series); different options still 48', async () => {
  const db = srv.freshDb('race');
  const client = await srv.newClient({ maxPoolSize: 16 });
  const cdb = client.db(db.databaseName);
  const specs = [
    (n) => ({ create: n }),
    (n) => ({ create: n, capped: true, size: 65536 }),
    (n) => ({ create: n, timeseries: { timeField: 't', metaField: 'm' }, expireAfterSeconds: 60 }),
  ];
  for (const [k, spec] of specs.entries()) {
    for (let round = 0; round < 8; round++) {
      const name = `c${k}_${round}`;
      const res = await Promise.all(Array.from({ length: 8 }, () => cdb.command(spec(name)).then(() => null, (e) => e)));
      const errs = res.filter(Boolean);
      assert.deepEqual(errs.map((e) => `${e.code} ${e.message}`), [], `${JSON.stringify(spec(name))}, round ${round}`);
    }
  }
  assert.equal((await cdb.listCollections({ name: 'c1_0' }).toArray())[0].options.capped, true);
  assert.equal((await cdb.listCollections({ name: 'c2_0' }).toArray())[0].type, 'timeseries');
  /* Racing creates with different options: one wins, the others are 48. */
  const res = await Promise.all(Array.from({ length: 6 }, (_, i) =>
    cdb.command(i % 2 ? { create: 'mixed' } : { create: 'mixed', capped: true, size: 4096 }).then(() => 0, (e) => e.code)));
  assert.ok(res.includes(0), JSON.stringify(res));
  assert.ok(res.every((c) => c === 0 || c === 48), JSON.stringify(res));
  const capped = (await cdb.listCollections({ name: 'mixed' }).toArray())[0].options.capped === true;
  assert.equal(res.filter((c) => c === 0).length, 3, `the three creates with the winner's options succeed (capped: ${capped})`);
});

h.test('$search, $searchMeta, $vectorSearch, $listSearchIndexes and the search index commands answer 31082 SearchNotEnabled', async () => {
  const db = srv.freshDb('search');
  const c = db.collection('c');
  await c.insertOne({ _id: 1, text: 'hello' });
  const stage = /^Using \$search and \$vectorSearch aggregation stages requires additional configuration\. Please connect to Atlas or an AtlasCLI local deployment to enable\./;
  const cmds = /^Using Atlas Search Database Commands and the \$listSearchIndexes aggregation stage requires additional configuration\./;
  for (const s of [{ $search: { text: { query: 'hello', path: 'text' } } }, { $searchMeta: {} },
    { $vectorSearch: { index: 'v', path: 'e', queryVector: [1, 2], numCandidates: 10, limit: 1 } }]) {
    await assert.rejects(c.aggregate([s]).toArray(),
      (e) => e.code === 31082 && e.codeName === 'SearchNotEnabled' && stage.test(e.message), JSON.stringify(s));
  }
  await assert.rejects(c.listSearchIndexes().toArray(), (e) => e.code === 31082 && cmds.test(e.message));
  await assert.rejects(c.createSearchIndex({ name: 'default', definition: { mappings: { dynamic: true } } }),
    (e) => e.code === 31082 && cmds.test(e.message));
  await assert.rejects(c.updateSearchIndex('default', { mappings: { dynamic: true } }), (e) => e.code === 31082);
  await assert.rejects(c.dropSearchIndex('default'), (e) => e.code === 31082);
  /* The server carries on, and $text is the fallback applications take. */
  await c.createIndex({ text: 'text' });
  assert.equal((await c.find({ $text: { $search: 'hello' } }).toArray()).length, 1);
});
