'use strict';
/*
 * failCommand on a replica-set primary (issue 12): the driver's retryable
 * writes. A write sent with a txnNumber that fails with a retryable code, or
 * whose writeConcernError has one, carries "RetryableWriteError" (computed
 * by the server, as mongod does), and the driver retries it once; the
 * document is written exactly once.
 */
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');
const { useReplSet, test } = require('./rs_harness');

const set = useReplSet(1, { args: ['--setParameter', 'enableTestCommands=1'] });

async function client() {
  const c = new MongoClient(set.uri, { monitorCommands: true, retryWrites: true });
  const started = [];
  c.on('commandStarted', (e) => { if (e.commandName === 'insert') started.push(e.command); });
  await c.connect();
  return { c, started };
}

test('a retryable error on insert: RetryableWriteError, the driver retries with the same txnNumber', async () => {
  const { c, started } = await client();
  try {
    const admin = c.db('admin');
    await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 91 } });
    const coll = c.db('fprs').collection('a');
    await coll.insertOne({ _id: 1 });
    assert.equal(started.length, 2, 'the insert and its retry');
    assert.ok(started[0].txnNumber !== undefined);
    assert.equal(String(started[0].txnNumber), String(started[1].txnNumber));
    assert.equal(await coll.countDocuments({}), 1);
    // Without retryable codes there is no label and no retry.
    await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 2 } });
    const err = await coll.insertOne({ _id: 2 }).then(() => null, (e) => e);
    assert.equal(err.code, 2);
    assert.equal(err.hasErrorLabel('RetryableWriteError'), false);
    assert.equal(started.length, 3);
  } finally {
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await c.close();
  }
});

test('a retryable writeConcernError: the write ran, the retry answers it again, one document', async () => {
  const { c, started } = await client();
  try {
    await c.db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['insert'], writeConcernError: { code: 91, errmsg: 'Replication is being shut down' } },
    });
    const coll = c.db('fprs').collection('b');
    await coll.insertOne({ _id: 'w' });
    assert.equal(started.length, 2);
    assert.deepEqual(await coll.find({}).toArray(), [{ _id: 'w' }]);
  } finally {
    await c.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await c.close();
  }
});
