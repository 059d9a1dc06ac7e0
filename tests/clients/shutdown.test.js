'use strict';
/*
 * The shutdown command, as mongod's: {shutdown: 1} on admin stops the server
 * cleanly (exit 0, data kept, a restart finds it), from the Node driver and
 * from mongosh's db.shutdownServer(); it is refused on another database
 * (13), with wrong field types (14) and unknown fields (40415), changing
 * nothing. (The loopback rule, 13 without access control from another host,
 * needs a non-loopback client, which these machines do not have.)
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const h = require('./harness');

async function started() {
  const server = new h.MayflyServer();
  await server.start();
  const client = new MongoClient(server.uri, { serverSelectionTimeoutMS: 3000 });
  await client.connect();
  return { server, client };
}

h.test('shutdown from the Node driver: refused where mongod refuses it, then a clean stop that keeps the data', { timeout: 60000 }, async () => {
  const { server, client } = await started();
  try {
    await client.db('keep').collection('c').insertOne({ _id: 1, v: 'kept' }, { writeConcern: { w: 1, j: true } });
    await h.expectCode(client.db('keep').command({ shutdown: 1 }), 13, /^shutdown may only be run against the admin database\.$/);
    await h.expectCode(client.db('admin').command({ shutdown: 1, force: 'yes' }), 14, /shutdown\.force/);
    await h.expectCode(client.db('admin').command({ shutdown: 1, timeoutSecs: 'x' }), 14, /shutdown\.timeoutSecs/);
    await h.expectCode(client.db('admin').command({ shutdown: 1, bogus: 1 }), 40415);
    assert.equal((await client.db('admin').command({ ping: 1 })).ok, 1, 'still serving after the refusals');

    server.expectingExit = true;
    // The reply may or may not arrive before the connection closes (mongod sends none).
    await client.db('admin').command({ shutdown: 1, force: true, timeoutSecs: 5 }).catch((e) => {
      assert.match(e.name, /MongoNetworkError|MongoServerSelectionError|MongoTopologyClosedError/, String(e));
    });
    const info = await server.waitExit(20000);
    assert.ok(info, 'the server exited');
    assert.equal(info.code, 0, `clean exit: ${JSON.stringify(info)}`);
    assert.ok(server.stderrLines.some((l) => /shutdown command received/.test(l)), 'logged as the shutdown command');
    assert.ok(server.stderrLines.some((l) => /shutdown complete/.test(l)));
  } finally {
    await client.close(true).catch(() => {});
  }
  await server.start();
  const again = new MongoClient(server.uri);
  await again.connect();
  try {
    assert.deepEqual(await again.db('keep').collection('c').findOne({ _id: 1 }), { _id: 1, v: 'kept' });
  } finally {
    await again.close(true);
    await server.stop();
    server.cleanup();
  }
});

h.test("mongosh's db.shutdownServer() stops the server cleanly", { timeout: 60000 }, async () => {
  const { server, client } = await started();
  await client.close(true);
  server.expectingExit = true;
  await h.mongosh(server.port, 'admin', 'db.shutdownServer()').catch(() => {}); // mongosh may report the closed connection
  const info = await server.waitExit(20000);
  assert.ok(info, 'the server exited');
  assert.equal(info.code, 0, `clean exit: ${JSON.stringify(info)}`);
  server.cleanup();
});
