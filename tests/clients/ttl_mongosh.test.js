'use strict';
/*
 * TTL indexes from mongosh (SPEC H1, A1, C4): db.c.createIndex with
 * expireAfterSeconds, getIndexes() printing it, and a later mongosh session
 * seeing the expired document gone.
 *
 * The server runs with ttlMonitorSleepSecs=1 (precise expiry is on by default).
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'ttlMonitorSleepSecs=1'] });

function mongosh(dbName, script) {
  return h.mongosh(srv.port, dbName, script);
}

h.test('A1 (mongosh): createIndex({at:1},{expireAfterSeconds:1}) makes a TTL index, getIndexes() prints it, and a later session sees the document gone', { timeout: 120000 }, async () => {
  const db = srv.freshDb('ttlsh');
  const out1 = await mongosh(db.databaseName, `
    print("name=" + db.c.createIndex({ at: 1 }, { expireAfterSeconds: 1 }));
    db.c.insertOne({ _id: "old", at: new Date() });
    db.c.insertOne({ _id: "keep", at: new Date(Date.now() + 3600000) });
    print("count=" + db.c.countDocuments());
    printjson(db.c.getIndexes());
  `);
  assert.match(out1, /name=at_1/);
  assert.match(out1, /count=2/);
  assert.match(out1, /expireAfterSeconds: 1\b/);
  assert.match(out1, /name: 'at_1'/);
  const coll = db.collection('c');
  const deadline = Date.now() + 10000;
  let out2;
  for (;;) {
    await h.sleep(1000);
    out2 = await mongosh(db.databaseName, `
      print("ids=" + db.c.find({}, { _id: 1 }).sort({ _id: 1 }).toArray().map((d) => d._id).join(","));
    `);
    if (/ids=keep$/m.test(out2) || Date.now() > deadline) break;
  }
  assert.match(out2, /ids=keep$/m, 'the later mongosh session still sees the expired document');
  assert.deepEqual((await coll.find().toArray()).map((d) => d._id), ['keep']);
});

h.test('B1 (mongosh): db.runCommand collMod changes expireAfterSeconds and getIndexes() shows it', { timeout: 120000 }, async () => {
  const db = srv.freshDb('ttlshmod');
  const out = await mongosh(db.databaseName, `
    db.c.createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
    const r = db.runCommand({ collMod: "c", index: { keyPattern: { at: 1 }, expireAfterSeconds: 60 } });
    print("old=" + r.expireAfterSeconds_old + " new=" + r.expireAfterSeconds_new);
    print("now=" + db.c.getIndexes().filter((i) => i.name === "at_1")[0].expireAfterSeconds);
    try { db.c.createIndex({ at: 1 }, { expireAfterSeconds: -1, name: "neg" }); } catch (e) { print("err=" + e.code); }
  `);
  assert.match(out, /old=3600 new=60/);
  assert.match(out, /now=60/);
  assert.match(out, /err=67/);
});
