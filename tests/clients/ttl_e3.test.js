'use strict';
/*
 * SPEC E3: a node started standalone whose local.system.replset holds a
 * document (a member taken out of its set) does not run the TTL monitor,
 * and logs that it does not; without such a document the same data expires.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();
const J = { writeConcern: { w: 1, j: true } };

h.test('E3 a standalone holding a replica-set config runs no TTL monitor and says why; removing the config brings expiry back', { timeout: 60000 }, async () => {
  const dbName = srv.freshDb('e3').databaseName;
  let c = srv.client.db(dbName).collection('c');
  await c.createIndex({ at: 1 }, { expireAfterSeconds: 0 });
  await srv.client.db('local').collection('system.replset').insertOne({ _id: 'rs0', version: 1, members: [{ _id: 0, host: '127.0.0.1:27017' }] }, J);
  await c.insertOne({ _id: 'due', at: new Date(Date.now() + 1500) }, J);
  await srv.server.restart({ kill9: false });
  await srv.reconnect();
  c = srv.client.db(dbName).collection('c');
  await h.sleep(3500);
  assert.equal(await c.countDocuments({ _id: 'due' }), 1, 'not expired: the TTL monitor does not run');
  const st = await srv.client.db('admin').command({ serverStatus: 1 });
  assert.equal(st.metrics.ttl.deletedDocuments, 0);
  assert.match(srv.server.stderrTail(200), /TTL monitor not running: this node holds a replica-set configuration/);

  await srv.client.db('local').collection('system.replset').deleteMany({}, J);
  await srv.server.restart({ kill9: false });
  await srv.reconnect();
  c = srv.client.db(dbName).collection('c');
  const deadline = Date.now() + 5000;
  while ((await c.countDocuments({ _id: 'due' })) > 0 && Date.now() < deadline) await h.sleep(100);
  assert.equal(await c.countDocuments({ _id: 'due' }), 0, 'expired once the node holds no replica-set config');
});
