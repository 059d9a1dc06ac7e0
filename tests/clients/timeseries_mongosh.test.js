'use strict';
/*
 * Time-series collections from mongosh (SPEC F1, F5, H1): the seeds'
 * createCollection verbatim, show collections, insertMany, find,
 * db.weather24h.stats() (timeseries.bucketsNs / bucketCount), collMod and
 * getCollectionInfos().
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

function mongosh(dbName, script) {
  return h.mongosh(srv.port, dbName, script);
}

h.test('F1/F5 (mongosh): the seeds\' weather24h collection, its measurements, stats() and collMod', { timeout: 120000 }, async () => {
  const db = srv.freshDb('tssh');
  const out = await mongosh(db.databaseName, `
    db.createCollection( "weather24h", { timeseries: { timeField: "timestamp", metaField: "sensor", granularity: "hours" }, expireAfterSeconds: 86400 } );
    db.weather24h.insertMany([
      { sensor: "MDB_NYC", timestamp: new Date(), temp: 12 },
      { sensor: "MDB_NYC", timestamp: new Date(), temp: 13 },
      { sensor: "MDB_SF", timestamp: new Date(), temp: 20 },
    ]);
    print("collections=" + db.getCollectionNames().join(","));
    print("count=" + db.weather24h.countDocuments({ sensor: "MDB_NYC" }));
    print("temps=" + db.weather24h.find({}, { _id: 0, temp: 1 }).sort({ temp: 1 }).toArray().map((d) => d.temp).join(","));
    const st = db.weather24h.stats();
    print("bucketsNs=" + st.timeseries.bucketsNs);
    print("bucketCount=" + st.timeseries.bucketCount);
    db.runCommand({ collMod: "weather24h", expireAfterSeconds: 600 });
    const info = db.getCollectionInfos({ name: "weather24h" })[0];
    print("type=" + info.type + " expire=" + info.options.expireAfterSeconds + " gran=" + info.options.timeseries.granularity);
  `);
  assert.match(out, /collections=.*weather24h/);
  assert.match(out, /count=2/);
  assert.match(out, /temps=12,13,20/);
  assert.match(out, new RegExp(`bucketsNs=${db.databaseName}\\.system\\.buckets\\.weather24h`));
  assert.match(out, /bucketCount=2/);
  assert.match(out, /type=timeseries expire=600 gran=hours/);
});
