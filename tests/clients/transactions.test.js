'use strict';
/*
 * Multi-document transactions, the way applications use them, on a
 * 3-member replica set (and a standalone's refusal), with MongoDB 8.0's
 * semantics:
 *
 *   - the Node driver's session.withTransaction() and startTransaction() /
 *     commitTransaction() / abortTransaction() over two collections and two
 *     databases: atomic commit, nothing visible to another client before it,
 *     the transaction reading its own writes (getMores included) from one
 *     snapshot, abort leaving nothing behind;
 *   - write conflicts (112 WriteConflict labelled TransientTransactionError)
 *     and withTransaction's retries, a duplicate key aborting the transaction;
 *   - the raw protocol: lsid / txnNumber / autocommit / startTransaction
 *     checks and every finished-transaction error (251, 225, 256, 117, 72,
 *     263), the transactionLifetimeLimitSeconds expiry, statements sent to a
 *     secondary (10107);
 *   - replication: a committed transaction on every member, an aborted one
 *     on none;
 *   - Mongoose's connection.transaction() and session.withTransaction();
 *   - a standalone: 20 IllegalOperation.
 *
 * Codes and messages are mongod 8.0's, from its source:
 *   initialize_operation_session_info.cpp   lsid/txnNumber/autocommit/startTransaction (72, 20, 263)
 *   transaction/transaction_participant.cpp 251 NoSuchTransaction, 225 TransactionTooOld,
 *                                           256 TransactionCommitted, 117 ConflictingOperationInProgress,
 *                                           10107 NotWritablePrimary
 *   service_entry_point_common.cpp          72 writeConcern / readConcern inside a transaction
 *   commands.cpp (canUseTransactions)       263 OperationNotSupportedInTransaction
 *   write_ops_exec.cpp (handleError)        a write error in a transaction aborts it
 *   error_labels.cpp                        which errors carry TransientTransactionError
 * and the jstests named on each case (jstests/core/txns/...). Nothing here
 * times the server: time limits are only guards against a hang.
 */
const assert = require('node:assert/strict');
const { Long, UUID, Timestamp } = require('mongodb');
const mongoose = require('mongoose');
const h = require('./harness');
const R = require('./rs_harness');

const rs = R.useReplSet(3);
const standalone = h.useServer();

const MAJ = { writeConcern: { w: 'majority', wtimeout: 20000 } };
const TTE = 'TransientTransactionError';

/* ---------------------------------------------------------------- helpers */

let outsideClient = null;
/* A database handle on a second MongoClient: its reads run outside every transaction of the tests. */
async function outside(dbName) {
  if (!outsideClient) outsideClient = await rs.newClient();
  return outsideClient.db(dbName);
}

/* A fresh database with the given collections created (w: majority) and seeded. */
/*
 * fn, again after a not-primary error (10107, 11602, 189), up to 5 times: tests that step the primary
 * down leave the set electing for a moment, and DDL (createCollection) is not retried by the driver.
 */
async function retryNotPrimary(fn) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (attempt >= 5 || ![10107, 11602, 189].includes(err.code)) throw err;
      await rs.waitForSteadyState();
    }
  }
}

async function freshDbWith(tag, collections, seed = {}) {
  const db = rs.freshDb(tag);
  for (const name of collections) await retryNotPrimary(() => db.createCollection(name, MAJ));
  for (const [name, docs] of Object.entries(seed)) await db.collection(name).insertMany(docs, MAJ);
  return db;
}

function sorted(coll, filter = {}, opts = {}) {
  return coll.find(filter, opts).sort({ _id: 1 }).toArray();
}

async function ids(coll, filter = {}) {
  return (await sorted(coll, filter)).map((d) => d._id);
}

/* Resolves with p's value, or fails after ms: a guard against a hang, never a timing assertion. */
async function guard(p, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`gave up after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([p, t]);
  } finally {
    clearTimeout(timer);
  }
}

/* One command to the current primary over a raw OP_MSG connection: exactly these fields, no driver. */
async function primaryCmd(dbName, body) {
  const p = await rs.waitForPrimary();
  const r = await rs.raw(p, dbName, body, 20000);
  assert.ok(r, `the primary (member ${p}) did not answer ${Object.keys(body)[0]}`);
  return r;
}

function expectOk(r, what = 'command') {
  assert.equal(r.ok, 1, `${what}: expected ok: 1, got ${JSON.stringify(r)}`);
  return r;
}

function expectError(r, code, codeName, msgRe) {
  assert.equal(r.ok, 0, `expected ${codeName} (${code}), got success: ${JSON.stringify(r)}`);
  assert.equal(r.code, code, `expected ${codeName} (${code}), got ${r.code} ${r.codeName}: ${r.errmsg}`);
  assert.equal(r.codeName, codeName);
  if (msgRe) assert.match(r.errmsg, msgRe);
  return r;
}

const labelsOf = (r) => r.errorLabels || [];

/* After a step-down: a retryable write through the set's client, so its driver has found the new primary. */
async function afterStepDown(db) {
  await db.collection('after_stepdown').insertOne({ at: new Date() }, MAJ);
}

/*
 * A logical session driven by hand, as a driver would: every statement of
 * transaction n carries lsid, txnNumber n and autocommit: false; the first
 * one also startTransaction: true. commit/abort go to the admin database.
 */
class RawSession {
  constructor(dbName) {
    this.dbName = dbName;
    this.lsid = { id: new UUID() };
  }

  fields(n) { return { lsid: this.lsid, txnNumber: Long.fromNumber(n), autocommit: false }; }

  start(n, body) { return primaryCmd(this.dbName, { ...body, ...this.fields(n), startTransaction: true }); }

  next(n, body) { return primaryCmd(this.dbName, { ...body, ...this.fields(n) }); }

  commit(n, extra = {}) { return primaryCmd('admin', { commitTransaction: 1, ...this.fields(n), ...extra }); }

  abort(n, extra = {}) { return primaryCmd('admin', { abortTransaction: 1, ...this.fields(n), ...extra }); }
}

/* ------------------------------------------------ the Node driver's API */

R.test('withTransaction: writes to two collections commit together; inside, reads see them; another client sees nothing until the commit', async () => {
  // jstests/core/txns/multi_statement_transaction.js, find_and_modify_in_transaction.js,
  // aggregation_in_transaction.js (read-your-own-writes; isolation from other clients).
  const db = await freshDbWith('wt', ['accounts', 'audit'], {
    accounts: [{ _id: 'a', balance: 100 }, { _id: 'b', balance: 50 }, { _id: 'c', balance: 0 }],
  });
  const accounts = db.collection('accounts');
  const audit = db.collection('audit');
  const out = await outside(db.databaseName);
  const before = await sorted(out.collection('accounts'));
  const session = rs.client.startSession();
  let attempts = 0;
  try {
    await session.withTransaction(async () => {
      attempts += 1;
      await accounts.updateOne({ _id: 'a' }, { $inc: { balance: -30 } }, { session });
      await accounts.updateOne({ _id: 'b' }, { $inc: { balance: 30 } }, { session });
      await audit.insertOne({ _id: 1, from: 'a', to: 'b', amount: 30 }, { session });
      await audit.insertMany([{ _id: 2, note: 'closing c' }, { _id: 3, note: 'done' }], { session });
      assert.equal((await accounts.deleteOne({ _id: 'c' }, { session })).deletedCount, 1);
      const fam = await accounts.findOneAndUpdate({ _id: 'a' }, { $set: { last: 1 } }, { session, returnDocument: 'after' });
      assert.deepEqual(fam, { _id: 'a', balance: 70, last: 1 });

      // Inside the transaction: its own writes, through find, countDocuments (an aggregate), distinct and aggregate.
      assert.deepEqual(await sorted(accounts, {}, { session }), [{ _id: 'a', balance: 70, last: 1 }, { _id: 'b', balance: 80 }]);
      assert.equal(await accounts.countDocuments({}, { session }), 2);
      assert.equal(await audit.countDocuments({}, { session }), 3);
      assert.deepEqual((await accounts.distinct('_id', {}, { session })).sort(), ['a', 'b']);
      const [sum] = await accounts.aggregate([{ $group: { _id: null, total: { $sum: '$balance' } } }], { session }).toArray();
      assert.equal(sum.total, 150);
      assert.deepEqual(await audit.findOne({ _id: 1 }, { session }), { _id: 1, from: 'a', to: 'b', amount: 30 });

      // Outside, mid-transaction: nothing of it.
      assert.deepEqual(await sorted(out.collection('accounts')), before);
      assert.equal(await out.collection('audit').countDocuments(), 0);
      assert.equal(await out.collection('audit').findOne({ _id: 1 }), null);
    });
  } finally {
    await session.endSession();
  }
  assert.equal(attempts, 1, 'nothing conflicted, so the callback ran once');
  assert.deepEqual(await sorted(out.collection('accounts')), [{ _id: 'a', balance: 70, last: 1 }, { _id: 'b', balance: 80 }]);
  assert.deepEqual(await ids(out.collection('audit')), [1, 2, 3]);
});

R.test('withTransaction across two databases: both writes commit together, neither is visible before the commit', async () => {
  // The manual's "transactions ... across multiple operations, collections, databases".
  const shop = await freshDbWith('shop', ['orders']);
  const stock = await freshDbWith('stock', ['items'], { items: [{ _id: 'widget', qty: 5 }] });
  const outShop = await outside(shop.databaseName);
  const outStock = await outside(stock.databaseName);
  const session = rs.client.startSession();
  try {
    await session.withTransaction(async () => {
      await shop.collection('orders').insertOne({ _id: 'o1', item: 'widget', qty: 2 }, { session });
      const r = await stock.collection('items').updateOne({ _id: 'widget', qty: { $gte: 2 } }, { $inc: { qty: -2 } }, { session });
      assert.equal(r.modifiedCount, 1);
      assert.deepEqual(await shop.collection('orders').findOne({ _id: 'o1' }, { session }), { _id: 'o1', item: 'widget', qty: 2 });
      assert.deepEqual(await stock.collection('items').findOne({ _id: 'widget' }, { session }), { _id: 'widget', qty: 3 });
      assert.equal(await outShop.collection('orders').countDocuments(), 0);
      assert.deepEqual(await outStock.collection('items').findOne({ _id: 'widget' }), { _id: 'widget', qty: 5 });
    });
  } finally {
    await session.endSession();
  }
  assert.deepEqual(await sorted(outShop.collection('orders')), [{ _id: 'o1', item: 'widget', qty: 2 }]);
  assert.deepEqual(await outStock.collection('items').findOne({ _id: 'widget' }), { _id: 'widget', qty: 3 });
});

R.test('a cursor inside a transaction: find and aggregate with a small batchSize read the transaction\'s own inserts through getMores in the transaction', async () => {
  // jstests/core/txns/multi_statement_transaction.js (reads of the transaction's writes); the
  // getMores carry the transaction's lsid, txnNumber and autocommit: false.
  const db = await freshDbWith('getmore', ['c'], { c: [0, 1, 2, 3].map((i) => ({ _id: i })) });
  const mon = await rs.newClient(rs.uri, { monitorCommands: true });
  const getMores = [];
  mon.on('commandStarted', (e) => { if (e.commandName === 'getMore') getMores.push(e.command); });
  const c = mon.db(db.databaseName).collection('c');
  const out = (await outside(db.databaseName)).collection('c');
  const session = mon.startSession();
  const added = Array.from({ length: 10 }, (_, i) => 100 + i);
  try {
    session.startTransaction();
    await c.insertMany(added.map((_id) => ({ _id })), { session });
    const found = await c.find({}, { session, batchSize: 3 }).sort({ _id: 1 }).toArray();
    assert.deepEqual(found.map((d) => d._id), [0, 1, 2, 3, ...added]);
    const agg = await c.aggregate([{ $match: { _id: { $gte: 100 } } }, { $sort: { _id: 1 } }], { session, batchSize: 2 }).toArray();
    assert.deepEqual(agg.map((d) => d._id), added);
    assert.ok(getMores.length >= 8, `the cursors needed getMores (${getMores.length} sent)`);
    for (const g of getMores) {
      assert.equal(g.autocommit, false, 'a getMore in a transaction carries autocommit: false');
      assert.ok(g.txnNumber !== undefined, 'a getMore in a transaction carries its txnNumber');
      assert.equal(g.startTransaction, undefined);
    }
    assert.deepEqual(await ids(out), [0, 1, 2, 3], 'another client sees none of the inserts before the commit');
    await session.commitTransaction();
  } finally {
    await session.endSession();
  }
  assert.deepEqual(await ids(out), [0, 1, 2, 3, ...added]);
});

R.test('a cursor belongs to its transaction: a getMore without the transaction answers 50740, in another transaction 50741, and a cursor opened outside one answers 50739 to a getMore inside one', async () => {
  // getmore_cmd.cpp's validateTxnNumber (codes 50739, 50740, 50741, mongod's messages).
  const db = await freshDbWith('curtxn', ['c'], { c: [0, 1, 2, 3, 4, 5].map((i) => ({ _id: i })) });
  const s = new RawSession(db.databaseName);
  const opened = await s.start(1, { find: 'c', filter: {}, sort: { _id: 1 }, batchSize: 2 });
  expectOk(opened, 'find in the transaction');
  const cid = h.cursorId(opened.cursor.id);
  assert.ok(Number(cid) !== 0, 'the find left a cursor open');
  // In its own transaction: the next batch.
  const more = await s.next(1, { getMore: cid, collection: 'c', batchSize: 2 });
  expectOk(more, 'getMore in the transaction');
  assert.deepEqual(more.cursor.nextBatch.map((d) => d._id), [2, 3]);
  // The same session without the transaction's fields.
  const bare = await primaryCmd(db.databaseName, { getMore: cid, collection: 'c', lsid: s.lsid });
  expectError(bare, 50740, 'Location50740', /which was created in transaction 1, without a txnNumber/);
  // The cursor is still there for its transaction.
  const again = await s.next(1, { getMore: cid, collection: 'c', batchSize: 2 });
  expectOk(again, 'getMore in the transaction after a refused one');
  assert.deepEqual(again.cursor.nextBatch.map((d) => d._id), [4, 5]);
  expectOk(await s.commit(1));

  // A cursor of transaction 2, used from transaction 3 of the same session.
  const o2 = await s.start(2, { find: 'c', filter: {}, batchSize: 1 });
  expectOk(o2);
  expectOk(await s.commit(2));
  expectOk(await s.start(3, { find: 'c', filter: { _id: 0 } }));
  const other = await s.next(3, { getMore: h.cursorId(o2.cursor.id), collection: 'c' });
  expectError(other, 50741, 'Location50741', /which was created in transaction 2, in transaction 3/);

  // A failed statement aborts its transaction, as any.
  expectError(await s.abort(3), 251, 'NoSuchTransaction');

  // A cursor opened outside any transaction, read from inside one.
  const plain = await primaryCmd(db.databaseName, { find: 'c', filter: {}, batchSize: 1, lsid: s.lsid });
  expectOk(plain);
  expectOk(await s.start(4, { find: 'c', filter: { _id: 0 } }));
  const inside = await s.next(4, { getMore: h.cursorId(plain.cursor.id), collection: 'c' });
  expectError(inside, 50739, 'Location50739', /which was not created in a transaction, in transaction 4/);
});

R.test('startTransaction then abortTransaction: none of the inserts, updates or deletes remain, and the session runs a new transaction afterwards', async () => {
  // jstests/core/txns/multi_statement_transaction_abort.js
  const db = await freshDbWith('abort', ['c'], { c: [{ _id: 1, v: 1 }, { _id: 2, v: 2 }] });
  const c = db.collection('c');
  const out = (await outside(db.databaseName)).collection('c');
  const session = rs.client.startSession();
  try {
    session.startTransaction();
    await c.insertOne({ _id: 3, v: 3 }, { session });
    await c.updateOne({ _id: 1 }, { $set: { v: 10 } }, { session });
    await c.deleteOne({ _id: 2 }, { session });
    assert.deepEqual(await sorted(c, {}, { session }), [{ _id: 1, v: 10 }, { _id: 3, v: 3 }]);
    await session.abortTransaction();

    assert.deepEqual(await sorted(out), [{ _id: 1, v: 1 }, { _id: 2, v: 2 }], 'another client sees the documents as they were');
    assert.deepEqual(await sorted(c, {}, { session }), [{ _id: 1, v: 1 }, { _id: 2, v: 2 }], 'so does the session, outside a transaction');

    session.startTransaction();
    await c.insertOne({ _id: 4, v: 4 }, { session });
    await session.commitTransaction();
  } finally {
    await session.endSession();
  }
  assert.deepEqual(await sorted(out), [{ _id: 1, v: 1 }, { _id: 2, v: 2 }, { _id: 4, v: 4 }]);
});

R.test('a transaction reads one snapshot: writes committed by others after its first read stay invisible to it', async () => {
  // jstests/core/txns/repeatable_reads_in_transaction.js
  const seed = [{ _id: 0 }, { _id: 1 }, { _id: 2 }];
  const db = await freshDbWith('snapshot', ['c'], { c: seed });
  const c = db.collection('c');
  const reader = rs.client.startSession();
  const writer = rs.client.startSession();
  try {
    reader.startTransaction();
    assert.deepEqual(await sorted(c, {}, { session: reader }), seed);

    await writer.withTransaction(async () => {
      await c.insertOne({ _id: 3 }, { session: writer });
      await c.updateOne({ _id: 1 }, { $set: { a: 1 } }, { session: writer });
      await c.deleteOne({ _id: 2 }, { session: writer });
    });
    assert.deepEqual(await sorted(c, {}, { session: reader }), seed, 'another transaction\'s committed writes are not seen');

    await c.insertOne({ _id: 4 }, MAJ);
    assert.deepEqual(await sorted(c, {}, { session: reader }), seed, 'a write outside any transaction is not seen');
    assert.equal(await c.countDocuments({}, { session: reader }), 3);
    await reader.commitTransaction();
  } finally {
    await reader.endSession();
    await writer.endSession();
  }
  assert.deepEqual(await sorted(c), [{ _id: 0 }, { _id: 1, a: 1 }, { _id: 3 }, { _id: 4 }]);
});

/* ------------------------------------------------------- write conflicts */

R.test('write conflict: the second of two transactions to write a document gets WriteConflict (112) labelled TransientTransactionError; the first commits, the second is aborted', async () => {
  // jstests/core/txns/transactions_write_conflicts.js with libs/write_conflicts.js
  // T1StartsFirstAndWins: update-update and insert-insert (the same _id conflicts, it is not E11000).
  const db = await freshDbWith('wc1', ['c'], { c: [{ _id: 1 }] });
  const c = db.collection('c');
  const s1 = rs.client.startSession();
  const s2 = rs.client.startSession();
  try {
    s1.startTransaction();
    s2.startTransaction();
    await c.updateOne({ _id: 1 }, { $set: { t1: 1 } }, { session: s1 });
    const err = await h.expectCode(c.updateOne({ _id: 1 }, { $set: { t2: 1 } }, { session: s2 }), 112);
    assert.equal(err.codeName, 'WriteConflict');
    // Applications match this text (WriteConflictException's message in mongod 5.0+).
    assert.match(err.message, /WriteConflict error: this operation conflicted with another operation\. Please retry your operation or multi-document transaction\./);
    assert.ok(err.errorLabels.includes(TTE), `errorLabels ${JSON.stringify(err.errorLabels)}`);
    assert.ok(err.hasErrorLabel(TTE));
    await s1.commitTransaction();
    const commitErr = await h.expectCode(s2.commitTransaction(), 251);
    assert.equal(commitErr.codeName, 'NoSuchTransaction');
    assert.deepEqual(await sorted(c), [{ _id: 1, t1: 1 }]);

    s1.startTransaction();
    s2.startTransaction();
    await c.insertOne({ _id: 'k', t1: 1 }, { session: s1 });
    const insErr = await h.expectCode(c.insertOne({ _id: 'k', t2: 1 }, { session: s2 }), 112);
    assert.ok(insErr.hasErrorLabel(TTE));
    await s1.commitTransaction();
    await h.expectCode(s2.commitTransaction(), 251);
  } finally {
    await s1.endSession().catch(() => {});
    await s2.endSession().catch(() => {});
  }
  assert.deepEqual(await sorted(c), [{ _id: 1, t1: 1 }, { _id: 'k', t1: 1 }]);
});

R.test('write conflict with a transaction that committed after this one\'s snapshot: WriteConflict (112), then commitTransaction answers NoSuchTransaction (251)', async () => {
  // jstests/core/txns/libs/write_conflicts.js T2StartsSecondAndWins (first updater wins, snapshot isolation).
  const db = await freshDbWith('wc2', ['c'], { c: [{ _id: 1 }] });
  const c = db.collection('c');
  const s1 = rs.client.startSession();
  const s2 = rs.client.startSession();
  try {
    s1.startTransaction();
    assert.deepEqual(await c.find({}, { session: s1 }).toArray(), [{ _id: 1 }]);   // T1's snapshot
    await s2.withTransaction(async () => { await c.updateOne({ _id: 1 }, { $set: { t2: 1 } }, { session: s2 }); });
    const err = await h.expectCode(c.updateOne({ _id: 1 }, { $set: { t1: 1 } }, { session: s1 }), 112);
    assert.ok(err.hasErrorLabel(TTE));
    const commitErr = await h.expectCode(s1.commitTransaction(), 251);
    assert.ok(commitErr.hasErrorLabel(TTE), 'NoSuchTransaction on commit without a write concern error is transient (error_labels.cpp)');
  } finally {
    await s1.endSession().catch(() => {});
    await s2.endSession().catch(() => {});
  }
  assert.deepEqual(await sorted(c), [{ _id: 1, t2: 1 }]);
});

R.test('withTransaction retries a transaction that hit a write conflict: both increments apply', async () => {
  // The convenient transaction API retries on TransientTransactionError (transactions-convenient-api spec).
  const db = await freshDbWith('retry', ['c'], { c: [{ _id: 'counter', n: 0 }] });
  const c = db.collection('c');
  const holder = rs.client.startSession();
  const retrier = rs.client.startSession();
  const seen = [];
  let attempts = 0;
  let signalConflict;
  const conflicted = new Promise((resolve) => { signalConflict = resolve; });
  try {
    holder.startTransaction();
    await c.updateOne({ _id: 'counter' }, { $inc: { n: 1 } }, { session: holder });
    const done = retrier.withTransaction(async () => {
      attempts += 1;
      try {
        await c.updateOne({ _id: 'counter' }, { $inc: { n: 1 } }, { session: retrier });
      } catch (e) {
        seen.push(e);
        signalConflict();
        throw e;
      }
    }).then(() => null, (e) => e);
    await guard(conflicted, 20000, 'the second transaction to meet the first one\'s write');
    await holder.commitTransaction();
    const failure = await guard(done, 40000, 'withTransaction to retry and commit');
    assert.equal(failure, null, `withTransaction failed: ${failure && failure.message}`);
  } finally {
    await holder.endSession().catch(() => {});
    await retrier.endSession().catch(() => {});
  }
  assert.ok(attempts >= 2, `the callback was retried (${attempts} attempts)`);
  assert.equal(seen[0].code, 112, `the first attempt failed with ${seen[0].code} ${seen[0].message}`);
  for (const e of seen) assert.ok(e.hasErrorLabel(TTE), `every failed attempt is transient: ${e.code} ${e.message}`);
  assert.deepEqual(await c.findOne({ _id: 'counter' }), { _id: 'counter', n: 2 });
});

R.test('concurrent withTransaction increments of one counter: every one applies exactly once', async () => {
  const db = await freshDbWith('contend', ['c', 'log'], { c: [{ _id: 'counter', n: 0 }] });
  const c = db.collection('c');
  const log = db.collection('log');
  const WORKERS = 4;
  const EACH = 5;
  async function worker(w) {
    const session = rs.client.startSession();
    try {
      for (let k = 0; k < EACH; k++) {
        await session.withTransaction(async () => {
          const before = await c.findOne({ _id: 'counter' }, { session });
          await c.updateOne({ _id: 'counter' }, { $inc: { n: 1 } }, { session });
          await log.insertOne({ _id: `${w}-${k}`, saw: before.n }, { session });
        });
      }
    } finally {
      await session.endSession();
    }
  }
  await guard(Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w))), 80000, 'the workers');
  assert.deepEqual(await c.findOne({ _id: 'counter' }), { _id: 'counter', n: WORKERS * EACH });
  const entries = await log.find().toArray();
  assert.equal(entries.length, WORKERS * EACH);
  // Serializable increments: each committed transaction saw a distinct counter value 0..19.
  assert.deepEqual(entries.map((e) => e.saw).sort((a, b) => a - b), Array.from({ length: WORKERS * EACH }, (_, i) => i));
});

R.test('a duplicate key inside a transaction: the insert reports E11000 (no TransientTransactionError) and the whole transaction is aborted', async () => {
  // jstests/core/txns/multi_statement_transaction_write_error.js (writeErrors, no errorLabels);
  // write_ops_exec.cpp handleError: a write error in a transaction aborts it, so commit answers 251.
  const db = await freshDbWith('dupkey', ['c'], { c: [{ _id: 'taken' }] });
  const out = (await outside(db.databaseName)).collection('c');
  const s = new RawSession(db.databaseName);
  expectOk(await s.start(1, { insert: 'c', documents: [{ _id: 'fresh' }] }), 'first insert');
  const dup = expectOk(await s.next(1, { insert: 'c', documents: [{ _id: 'taken' }] }), 'duplicate insert');
  assert.equal(dup.n, 0);
  assert.equal(dup.writeErrors.length, 1, JSON.stringify(dup));
  assert.equal(dup.writeErrors[0].index, 0);
  assert.equal(dup.writeErrors[0].code, 11000);
  assert.match(dup.writeErrors[0].errmsg, /E11000 duplicate key error/);
  assert.equal(dup.errorLabels, undefined, 'a duplicate key is not transient');
  const commit = expectError(await s.commit(1), 251, 'NoSuchTransaction', /has been aborted/);
  assert.ok(labelsOf(commit).includes(TTE));
  assert.deepEqual(await ids(out), ['taken'], 'the first insert was rolled back with the transaction');

  // Through the driver: withTransaction does not retry it and rejects with the E11000.
  const c = db.collection('c');
  const session = rs.client.startSession();
  let attempts = 0;
  try {
    const err = await h.expectCode(session.withTransaction(async () => {
      attempts += 1;
      await c.insertOne({ _id: 'fresh2' }, { session });
      await c.insertOne({ _id: 'taken' }, { session });
    }), 11000);
    assert.equal(err.hasErrorLabel(TTE), false);
  } finally {
    await session.endSession();
  }
  assert.equal(attempts, 1);
  assert.deepEqual(await ids(out), ['taken']);
});

R.test('a duplicate key in a multi-document insert or update inside a transaction answers that write error (11000 at its index), ordered or not, and aborts the transaction', async () => {
  // write_ops_exec.cpp handleError: in a transaction the first write error ends the batch (ordered or
  // not) and aborts the transaction; only a WriteConflict fails the command as a whole. A probe of real
  // apps found the multi-document case answering 112, which withTransaction retried for two minutes.
  const db = await freshDbWith('dupmulti', ['c'], { c: [{ _id: 1, e: 'a' }, { _id: 2, e: 'b' }] });
  await db.collection('c').createIndex({ e: 1 }, { unique: true, ...MAJ });
  const out = (await outside(db.databaseName)).collection('c');
  const cases = [
    { insert: 'c', documents: [{ _id: 10, e: 'n' }, { _id: 11, e: 'a' }, { _id: 12, e: 'o' }] },
    { insert: 'c', documents: [{ _id: 10, e: 'n' }, { _id: 1, e: 'm' }, { _id: 12, e: 'o' }], ordered: false },
    { update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { x: 1 } } }, { q: { _id: 2 }, u: { $set: { e: 'a' } } }] },
  ];
  for (const [k, body] of cases.entries()) {
    const s = new RawSession(db.databaseName);
    const r = expectOk(await s.start(1, body), `case ${k}`);
    assert.equal(r.errorLabels, undefined, `case ${k}: ${JSON.stringify(r)}`);
    assert.equal(r.n, 1, `case ${k}: the statement before the duplicate counts: ${JSON.stringify(r)}`);
    assert.deepEqual(r.writeErrors.map((w) => [w.index, w.code]), [[1, 11000]], `case ${k}: only the first error`);
    expectError(await s.commit(1), 251, 'NoSuchTransaction', /has been aborted/);
  }
  assert.deepEqual(await sorted(out), [{ _id: 1, e: 'a' }, { _id: 2, e: 'b' }], 'nothing of the aborted transactions');

  // Mongoose-style: an insertMany with a duplicate inside withTransaction rejects with 11000 after one attempt.
  const session = rs.client.startSession();
  let attempts = 0;
  try {
    await h.expectCode(session.withTransaction(async () => {
      attempts += 1;
      await db.collection('c').insertMany([{ _id: 20, e: 'z' }, { _id: 21, e: 'b' }], { session });
    }), 11000);
  } finally {
    await session.endSession();
  }
  assert.equal(attempts, 1);
});

R.test('a commit retried on a new primary after a step-down answers ok (its session row replicated with it); a late statement answers 256; commit on a secondary is 10107 labelled RetryableWriteError', async () => {
  // transaction_participant.cpp: the commit's config.transactions row replicates with it, so
  // commitTransaction retried after a failover answers as the commit did; error_labels.cpp gives
  // commit and abort RetryableWriteError on not-primary errors.
  const db = await freshDbWith('retrycommit', ['c']);
  const s = new RawSession(db.databaseName);
  expectOk(await s.start(1, { insert: 'c', documents: [{ _id: 'committed' }] }));
  expectOk(await s.commit(1, { writeConcern: { w: 'majority' } }));
  const p = await rs.waitForPrimary();
  const sec = rs.inSetMembers.map((m) => m.index).find((i) => i !== p);
  const onSec = await rs.raw(sec, 'admin', { commitTransaction: 1, ...s.fields(1) }, 20000);
  assert.equal(onSec.code, 10107, JSON.stringify(onSec));
  assert.ok(labelsOf(onSec).includes('RetryableWriteError'), JSON.stringify(onSec));
  try {
    await rs.adminCommand(p, { replSetStepDown: 5, secondaryCatchUpPeriodSecs: 5 });
  } catch (err) {
    if (!/closed|ECONNRESET|network/i.test(String(err.message))) throw err;
  }
  const np = await rs.waitForPrimary({ exclude: [p], timeoutMs: 15000 });
  assert.notEqual(np, p);
  expectOk(await s.commit(1), 'the retried commit on the new primary');
  expectError(await s.next(1, { insert: 'c', documents: [{ _id: 'late' }] }), 256, 'TransactionCommitted');
  expectError(await s.abort(1), 256, 'TransactionCommitted');
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), ['committed'], 'applied once');
  await rs.waitForSteadyState();
  await afterStepDown(db);
});

R.test('readConcern atClusterTime older than what the member has applied answers SnapshotTooOld (239): mayfly keeps no history (minSnapshotHistoryWindowInSeconds 0)', async () => {
  // mongod answers 239 for a time before its snapshot history window; mayfly's window is empty, and a
  // probe found the option accepted silently (a read "at" 1970 that saw today's data).
  const db = await freshDbWith('atct', ['c'], { c: [{ _id: 1 }] });
  const r = await primaryCmd(db.databaseName, {
    find: 'c', filter: {}, readConcern: { level: 'snapshot', atClusterTime: new Timestamp({ t: 1, i: 1 }) },
  });
  expectError(r, 239, 'SnapshotTooOld', /older than the oldest available timestamp/);
});

R.test('a step-down aborts the open transactions at once (not after transactionLifetimeLimitSeconds); their next statement answers 10107 labelled TransientTransactionError', async () => {
  // mongod aborts unprepared transactions on step-down (TransactionParticipant's abort on stepdown);
  // error_labels.cpp: a retriable error on a transaction's statement is a TransientTransactionError.
  const db = await freshDbWith('stepdown', ['c']);
  const s = new RawSession(db.databaseName);
  expectOk(await s.start(1, { insert: 'c', documents: [{ _id: 'open' }] }));
  const p = await rs.waitForPrimary();
  const open = async () => (await rs.adminCommand(p, { serverStatus: 1 })).transactions.currentOpen;
  assert.equal(Number(await open()), 1);
  try {
    await rs.adminCommand(p, { replSetStepDown: 5, secondaryCatchUpPeriodSecs: 5 });
  } catch (err) {
    if (!/closed|ECONNRESET|network/i.test(String(err.message))) throw err;
  }
  await rs.waitUntil(async () => Number(await open()) === 0, { timeoutMs: 10000, what: 'the old primary aborted its transaction' });
  const r = await rs.raw(p, db.databaseName, { insert: 'c', documents: [{ _id: 'late' }], ...s.fields(1) }, 20000);
  assert.equal(r.code, 10107, JSON.stringify(r));
  assert.ok(labelsOf(r).includes(TTE), JSON.stringify(r));
  await rs.waitForPrimary({ exclude: [p], timeoutMs: 15000 });
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), [], 'nothing of it committed');
  await rs.waitForSteadyState();
  await afterStepDown(db);
});

R.test('in a transaction: an unordered update batch stops at its first error; capped collections take no writes (263); statements are not profiled', async () => {
  // write_ops_exec.cpp (the first error ends the batch in a transaction, ordered or not);
  // jstests/core/txns/transaction_ops_against_capped_collection.js; profile entries are not written
  // inside a transaction.
  const db = await freshDbWith('misc', ['c'], { c: [{ _id: 1, n: 0 }, { _id: 2, s: 'text' }, { _id: 3, n: 0 }] });
  await retryNotPrimary(() => db.createCollection('capped', { capped: true, size: 4096, ...MAJ }));
  const s = new RawSession(db.databaseName);
  const r = expectOk(await s.start(1, {
    update: 'c', ordered: false,
    updates: [{ q: { _id: 1 }, u: { $inc: { n: 1 } } }, { q: { _id: 2 }, u: { $inc: { s: 1 } } }, { q: { _id: 3 }, u: { $inc: { n: 1 } } }],
  }));
  assert.equal(r.n, 1, JSON.stringify(r));
  assert.deepEqual(r.writeErrors.map((w) => [w.index, w.code]), [[1, 14]]);
  expectError(await s.commit(1), 251, 'NoSuchTransaction');

  expectError(await s.start(2, { insert: 'capped', documents: [{ _id: 1 }] }), 263, 'OperationNotSupportedInTransaction',
    /capped collection/);

  const p = await rs.waitForPrimary();
  await rs.raw(p, db.databaseName, { profile: 2 });
  try {
    expectOk(await s.start(3, { insert: 'c', documents: [{ _id: 'profiled?' }] }));
    expectOk(await s.commit(3));
  } finally {
    await rs.raw(p, db.databaseName, { profile: 0 });
  }
  const prof = await rs.raw(p, db.databaseName, { find: 'system.profile', filter: { 'command.insert': 'c' } });
  assert.deepEqual(prof.cursor ? prof.cursor.firstBatch : [], [], 'no profile document for the transaction\'s statement');
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), [1, 2, 3, 'profiled?']);
});

/* ------------------------------------- the raw protocol: session fields */

R.test('a transaction number never started: commitTransaction, abortTransaction and a statement continuing it answer NoSuchTransaction (251) labelled TransientTransactionError', async () => {
  // jstests/core/txns/multi_statement_transaction_command_args.js ("omitting startTransaction");
  // transaction_participant.cpp _continueMultiDocumentTransaction.
  const db = await freshDbWith('nosuch', ['c']);
  const s = new RawSession(db.databaseName);
  const notStarted = /does not match any in-progress transactions/;
  for (const r of [await s.commit(1), await s.abort(1), await s.next(2, { insert: 'c', documents: [{ _id: 'ghost' }] })]) {
    expectError(r, 251, 'NoSuchTransaction', notStarted);
    assert.ok(labelsOf(r).includes(TTE), `errorLabels ${JSON.stringify(r.errorLabels)}`);
  }
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), []);
});

R.test('a transaction cannot start below or at the number of the session\'s last retryable write (225, 117), as mongod keeps one txnNumber per session', async () => {
  // Found by helper-64: a retryable write at 9, then startTransaction at 1 was accepted and committed.
  const db = await freshDbWith('rw_then_txn', ['c']);
  const s = new RawSession(db.databaseName);
  expectOk(await primaryCmd(db.databaseName, { insert: 'c', documents: [{ _id: 'rw9' }], lsid: s.lsid, txnNumber: Long.fromNumber(9) }));
  const tooOld = /Cannot start transaction 1 on session because a newer transaction 9 has already started/;
  expectError(await s.start(1, { insert: 'c', documents: [{ _id: 't1' }] }), 225, 'TransactionTooOld', tooOld);
  expectError(await s.start(9, { insert: 'c', documents: [{ _id: 't9' }] }), 117, 'ConflictingOperationInProgress');
  // An older retryable write after it is still 225 (its own check); a newer transaction runs.
  const old = await primaryCmd(db.databaseName, { insert: 'c', documents: [{ _id: 'rw5' }], lsid: s.lsid, txnNumber: Long.fromNumber(5) });
  assert.equal(old.code, 225, JSON.stringify(old));
  expectOk(await s.start(10, { insert: 'c', documents: [{ _id: 't10' }] }));
  expectOk(await s.commit(10));
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), ['rw9', 't10']);
});

R.test('on a replica set, a txnNumber on a command that is neither a transaction\'s nor a retryable write is 50768; count with readConcern snapshot outside a transaction is 72, as mongod', async () => {
  const db = await freshDbWith('txn_args', ['c'], { c: [{ _id: 1 }] });
  const lsid = { id: new UUID() };
  const r = await primaryCmd(db.databaseName, { find: 'c', filter: {}, lsid, txnNumber: Long.fromNumber(1) });
  expectError(r, 50768, 'Location50768',
    /^txnNumber may only be provided for multi-document transactions and retryable write commands\. autocommit:false was not provided, and find is not a retryable write command\.$/);
  const c = await primaryCmd(db.databaseName, { count: 'c', readConcern: { level: 'snapshot' } });
  expectError(c, 72, 'InvalidOptions', /read concern snapshot not supported/);
  // find, aggregate and distinct take it.
  expectOk(await primaryCmd(db.databaseName, { find: 'c', filter: {}, readConcern: { level: 'snapshot' } }));
  expectOk(await primaryCmd(db.databaseName, { distinct: 'c', key: '_id', readConcern: { level: 'snapshot' } }));
});

R.test('an older transaction number than the session\'s newest is refused with TransactionTooOld (225); the newer transaction is unaffected', async () => {
  // transaction_participant.cpp beginOrContinue (txnNumber < active txnNumber).
  const db = await freshDbWith('tooold', ['c']);
  const s = new RawSession(db.databaseName);
  expectOk(await s.start(5, { insert: 'c', documents: [{ _id: 't5' }] }));
  const tooOld = /Cannot start transaction .*because a newer transaction .*has already started/;
  const r1 = expectError(await s.start(4, { insert: 'c', documents: [{ _id: 't4' }] }), 225, 'TransactionTooOld', tooOld);
  assert.equal(labelsOf(r1).includes(TTE), false);
  expectError(await s.next(4, { insert: 'c', documents: [{ _id: 't4' }] }), 225, 'TransactionTooOld', tooOld);
  expectError(await s.commit(4), 225, 'TransactionTooOld');
  // A retryable write (no autocommit) with the older number too.
  expectError(await primaryCmd(db.databaseName, { insert: 'c', documents: [{ _id: 'rw4' }], lsid: s.lsid, txnNumber: Long.fromNumber(4) }),
    225, 'TransactionTooOld', /txnNumber 4 is prohibited on session .*because a newer transaction/);
  expectOk(await s.commit(5), 'commit of the newer transaction');
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), ['t5']);
});

R.test('a retryable write (no autocommit) with a transaction\'s own number is 72 while it runs and after it committed; the transaction is untouched and commits', async () => {
  // transaction_participant.cpp _beginOrContinueRetryableWrite (found by helper-115: the write ran outside
  // the transaction, and the commit then answered 112 though it committed).
  const db = await freshDbWith('rw_same', ['c']);
  const s = new RawSession(db.databaseName);
  const msg = /^Must specify autocommit=false on all operations of a multi-statement transaction\.$/;
  expectOk(await s.start(3, { insert: 'c', documents: [{ _id: 't3' }] }));
  expectError(await primaryCmd(db.databaseName, { update: 'c', updates: [{ q: { _id: 'rw' }, u: { $set: { x: 1 } }, upsert: true }],
    lsid: s.lsid, txnNumber: Long.fromNumber(3) }), 72, 'InvalidOptions', msg);
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), [], 'nothing outside the transaction');
  expectOk(await s.commit(3));
  expectError(await primaryCmd(db.databaseName, { insert: 'c', documents: [{ _id: 'late' }], lsid: s.lsid, txnNumber: Long.fromNumber(3) }),
    72, 'InvalidOptions', msg);
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), ['t3']);
});

R.test('after a commit: commitTransaction again succeeds, abortTransaction and further statements answer TransactionCommitted (256), restarting the number ConflictingOperationInProgress (117)', async () => {
  // jstests/core/txns/finished_transaction_error_handling.js, errors_on_committed_transaction.js,
  // multi_statement_transaction_command_args.js ("start an already in progress transaction").
  const db = await freshDbWith('committed', ['c']);
  const s = new RawSession(db.databaseName);
  const restart = /Only servers in a sharded cluster can start a new transaction at the active transaction number/;

  // In progress: starting the same number again is refused and does not disturb the transaction.
  expectOk(await s.start(1, { insert: 'c', documents: [{ _id: 'c1' }] }));
  expectError(await s.start(1, { insert: 'c', documents: [{ _id: 'c2' }] }), 117, 'ConflictingOperationInProgress', restart);
  expectOk(await s.commit(1), 'commit');

  expectOk(await s.commit(1), 'commitTransaction is retryable');
  expectError(await s.abort(1), 256, 'TransactionCommitted', /has been committed/);
  expectError(await s.next(1, { insert: 'c', documents: [{ _id: 'c3' }] }), 256, 'TransactionCommitted', /has been committed/);
  expectError(await s.start(1, { insert: 'c', documents: [{ _id: 'c4' }] }), 117, 'ConflictingOperationInProgress', restart);
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), ['c1']);
});

R.test('after an abort: commit, abort and further statements answer NoSuchTransaction (251), restarting the number 117; the next number starts afresh', async () => {
  // jstests/core/txns/finished_transaction_error_handling.js
  const db = await freshDbWith('aborted', ['c']);
  const s = new RawSession(db.databaseName);
  expectOk(await s.start(1, { insert: 'c', documents: [{ _id: 'a1' }] }));
  expectOk(await s.abort(1), 'abort');
  expectError(await s.commit(1), 251, 'NoSuchTransaction', /has been aborted/);
  expectError(await s.abort(1), 251, 'NoSuchTransaction');
  expectError(await s.next(1, { insert: 'c', documents: [{ _id: 'a2' }] }), 251, 'NoSuchTransaction');
  expectError(await s.start(1, { insert: 'c', documents: [{ _id: 'a2' }] }), 117, 'ConflictingOperationInProgress');
  expectOk(await s.start(2, { insert: 'c', documents: [{ _id: 'b1' }] }));
  expectOk(await s.commit(2), 'commit of the next transaction');
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), ['b1']);
});

R.test('writeConcern on a statement inside a transaction and readConcern after its first statement are refused with InvalidOptions (72); the transaction goes on', async () => {
  // jstests/core/txns/no_read_or_write_concern_inside_txn.js
  const db = await freshDbWith('concerns', ['c']);
  const s = new RawSession(db.databaseName);
  const onlyFirst = /^Only the first command in a transaction may specify a readConcern$/;
  const noWc = /^writeConcern is not allowed within a multi-statement transaction$/;
  expectOk(await s.start(1, { insert: 'c', documents: [{ _id: 0 }], readConcern: { level: 'snapshot' } }));
  expectError(await s.next(1, { insert: 'c', documents: [{ _id: 1 }], readConcern: { level: 'snapshot' } }), 72, 'InvalidOptions', onlyFirst);
  expectError(await s.next(1, { find: 'c', filter: { _id: 1 }, readConcern: { level: 'majority' } }), 72, 'InvalidOptions', onlyFirst);
  expectError(await s.next(1, { insert: 'c', documents: [{ _id: 3 }], readConcern: { level: 'local' } }), 72, 'InvalidOptions', onlyFirst);
  expectError(await s.next(1, { insert: 'c', documents: [{ _id: 7 }], writeConcern: { w: 'majority' } }), 72, 'InvalidOptions', noWc);
  expectError(await s.next(1, { insert: 'c', documents: [{ _id: 8 }], writeConcern: { w: 1 } }), 72, 'InvalidOptions', noWc);
  expectOk(await s.commit(1, { writeConcern: { w: 'majority' } }), 'commit with a write concern');

  // A first statement with a writeConcern: refused, and no transaction is left open.
  expectError(await s.start(2, { insert: 'c', documents: [{ _id: 4 }], readConcern: { level: 'snapshot' }, writeConcern: { w: 1 } }),
    72, 'InvalidOptions', noWc);
  expectError(await s.commit(2), 251, 'NoSuchTransaction');
  expectOk(await s.start(3, { insert: 'c', documents: [{ _id: 6 }], readConcern: { level: 'snapshot' } }));
  expectOk(await s.abort(3, { writeConcern: { w: 'majority' } }), 'abort with a write concern');
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), [0]);
});

R.test('malformed transaction fields: autocommit: true, startTransaction without autocommit or false, autocommit without txnNumber, txnNumber without lsid answer InvalidOptions (72)', async () => {
  // initialize_operation_session_info.cpp; jstests/core/txns/multi_statement_transaction_command_args.js
  const db = await freshDbWith('fields', ['c']);
  const dbName = db.databaseName;
  const s = new RawSession(dbName);
  const lsid = s.lsid;
  const find = { find: 'c', filter: {} };

  expectError(await primaryCmd(dbName, { ...find, lsid, txnNumber: Long.fromNumber(1), startTransaction: true, autocommit: true }),
    72, 'InvalidOptions', /^Specifying autocommit=true is not allowed\.$/);
  expectError(await s.commit(1), 251, 'NoSuchTransaction');

  // autocommit: true on a later statement fails without affecting the transaction.
  expectOk(await s.start(2, find));
  expectError(await primaryCmd(dbName, { insert: 'c', documents: [{ _id: 'x' }], lsid, txnNumber: Long.fromNumber(2), autocommit: true }),
    72, 'InvalidOptions', /^Specifying autocommit=true is not allowed\.$/);
  expectOk(await s.next(2, { insert: 'c', documents: [{ _id: 'y' }] }));
  expectOk(await s.commit(2));

  expectError(await primaryCmd(dbName, { ...find, lsid, txnNumber: Long.fromNumber(3), startTransaction: true }),
    72, 'InvalidOptions', /^'startTransaction' field requires 'autocommit' field to also be specified$/);
  expectError(await primaryCmd(dbName, { ...find, lsid, txnNumber: Long.fromNumber(4), startTransaction: false, autocommit: false }),
    72, 'InvalidOptions', /^Specifying startTransaction=false is not allowed\.$/);
  expectError(await primaryCmd(dbName, { ...find, lsid, autocommit: false }),
    72, 'InvalidOptions', /^'autocommit' field requires a transaction number to also be specified$/);
  expectError(await primaryCmd(dbName, { ...find, txnNumber: Long.fromNumber(5), autocommit: false, startTransaction: true }),
    72, 'InvalidOptions', /^Transaction number requires a session ID to also be specified$/);
  // A retryable write's txnNumber without an lsid, or a negative one, writes nothing.
  expectError(await primaryCmd(dbName, { insert: 'c', documents: [{ _id: 'nolsid' }], txnNumber: Long.fromNumber(6) }),
    72, 'InvalidOptions', /^Transaction number requires a session ID to also be specified$/);
  expectError(await primaryCmd(dbName, { insert: 'c', documents: [{ _id: 'neg' }], lsid, txnNumber: Long.fromNumber(-1) }),
    72, 'InvalidOptions', /^Transaction number cannot be negative$/);
  expectError(await primaryCmd(dbName, { ...find, lsid, txnNumber: Long.fromNumber(-2), autocommit: false, startTransaction: true }),
    72, 'InvalidOptions', /^Transaction number cannot be negative$/);
  // validateSessionOptions: a commit, an abort or killCursors cannot open a transaction, and none is left open.
  expectError(await primaryCmd('admin', { commitTransaction: 1, lsid, txnNumber: Long.fromNumber(7), startTransaction: true, autocommit: false }),
    263, 'OperationNotSupportedInTransaction', /^Cannot start a transaction with a commit$/);
  expectError(await primaryCmd('admin', { abortTransaction: 1, lsid, txnNumber: Long.fromNumber(8), startTransaction: true, autocommit: false }),
    263, 'OperationNotSupportedInTransaction', /^Cannot start a transaction with an abort$/);
  expectError(await primaryCmd(dbName, { killCursors: 'c', cursors: [Long.fromNumber(1)], lsid, txnNumber: Long.fromNumber(9), startTransaction: true, autocommit: false }),
    263, 'OperationNotSupportedInTransaction', /^Cannot run killCursors as the first operation in a multi-document transaction\.$/);
  expectError(await s.commit(9), 251, 'NoSuchTransaction');
  expectOk(await s.start(10, { insert: 'c', documents: [{ _id: 'z' }] }));
  expectOk(await s.commit(10));
  assert.deepEqual(await ids((await outside(dbName)).collection('c')), ['y', 'z']);
});

R.test('commands not allowed in a transaction answer OperationNotSupportedInTransaction (263): as the first statement no transaction starts; later, the transaction goes on and commits', async () => {
  // jstests/core/txns/commands_not_allowed_in_txn.js; commands.cpp CommandHelpers::canUseTransactions;
  // initialize_operation_session_info.cpp for commands that need no authentication (ping, buildInfo ...).
  const db = await freshDbWith('notallowed', ['c', 'dropme']);
  const dbName = db.databaseName;
  const s = new RawSession(dbName);
  const anyNotAllowed = /Cannot run .* in a multi-document transaction\.|This command is not supported in transactions/;
  const commands = [
    [{ count: 'c' }, /^Cannot run 'count' in a multi-document transaction\. Please see http:\/\/dochub\.mongodb\.org\/core\/transaction-count for a recommended alternative\.$/],
    [{ count: 'c', query: { a: 1 } }, /^Cannot run 'count' in a multi-document transaction\./],
    [{ explain: { find: 'c' } }, /^Cannot run 'explain' in a multi-document transaction\.$/],
    [{ drop: 'dropme' }, /^Cannot run 'drop' in a multi-document transaction\.$/],
    [{ createUser: 'txn_user', pwd: 'pw-txn', roles: [] }, /^Cannot run 'createUser' in a multi-document transaction\.$/],
    [{ ping: 1 }, anyNotAllowed],
    [{ buildInfo: 1 }, anyNotAllowed],
    [{ listCommands: 1 }, anyNotAllowed],
  ];
  let n = 0;
  for (const [command, msg] of commands) {
    const what = Object.keys(command)[0];
    n += 1;
    expectError(await s.start(n, command), 263, 'OperationNotSupportedInTransaction', msg);
    expectError(await s.commit(n), 251, 'NoSuchTransaction');

    n += 1;
    expectOk(await s.start(n, { insert: 'c', documents: [{ _id: `${what}-${n}` }] }), `insert before ${what}`);
    expectError(await s.next(n, command), 263, 'OperationNotSupportedInTransaction', msg);
    expectOk(await s.commit(n), `commit after a refused ${what}`);
  }
  // A read in the local database is refused too.
  n += 1;
  expectError(await new RawSession('local').start(n, { find: 'txn_probe', filter: {} }), 263, 'OperationNotSupportedInTransaction',
    /Cannot run command against the 'local' database in a transaction/);

  const out = await outside(dbName);
  assert.equal((await out.collection('c').find().toArray()).length, commands.length, 'each committed transaction\'s insert is there');
  assert.deepEqual((await out.listCollections({ name: 'dropme' }).toArray()).map((x) => x.name), ['dropme'], 'the drop did not run');
  const users = await out.command({ usersInfo: 'txn_user' });
  assert.deepEqual(users.users, [], 'the createUser did not run');

  // Through the driver: estimatedDocumentCount is a count, refused inside a transaction.
  const session = rs.client.startSession();
  try {
    session.startTransaction();
    await db.collection('c').insertOne({ _id: 'driver' }, { session });
    await h.expectCode(db.collection('c').estimatedDocumentCount({ session }), 263);
    await session.commitTransaction();
  } finally {
    await session.endSession();
  }
  assert.ok(await out.collection('c').findOne({ _id: 'driver' }), 'the transaction survived the refused count');
});

R.test('a transaction idle past transactionLifetimeLimitSeconds is aborted by the server: its next statement and its commit answer NoSuchTransaction (251)', async () => {
  // jstests/core/txns/abort_expired_transaction.js (the limit lowered to 1 s, then restored).
  const db = await freshDbWith('expire', ['c']);
  const p = await rs.waitForPrimary();
  const got = await rs.adminCommand(p, { getParameter: 1, transactionLifetimeLimitSeconds: 1 });
  const original = got.transactionLifetimeLimitSeconds;
  assert.equal(original, 60, 'mongod\'s default transaction lifetime is 60 s');
  const s = new RawSession(db.databaseName);
  try {
    await rs.adminCommand(p, { setParameter: 1, transactionLifetimeLimitSeconds: 1 });
    const before = Number((await rs.serverStatus(p)).transactions.totalAborted);
    expectOk(await s.start(1, { insert: 'c', documents: [{ _id: 'expiring' }] }));
    await rs.waitUntil(async () => {
      const t = (await rs.serverStatus(p)).transactions;
      return Number(t.totalAborted) > before && Number(t.currentOpen) === 0;
    }, { timeoutMs: 30000, what: 'the server to abort the expired transaction (serverStatus.transactions.totalAborted)' });
  } finally {
    await rs.adminCommand(p, { setParameter: 1, transactionLifetimeLimitSeconds: original });
  }
  const next = expectError(await s.next(1, { insert: 'c', documents: [{ _id: 'late' }] }), 251, 'NoSuchTransaction');
  assert.ok(labelsOf(next).includes(TTE));
  expectError(await s.commit(1), 251, 'NoSuchTransaction');
  assert.deepEqual(await ids((await outside(db.databaseName)).collection('c')), []);
  assert.equal((await rs.adminCommand(p, { getParameter: 1, transactionLifetimeLimitSeconds: 1 })).transactionLifetimeLimitSeconds, original);
});

/* ------------------------------------------------------------ replication */

R.test('replication: a transaction committed with w: "majority" is on every member in full, an aborted one on none', async () => {
  const db = await freshDbWith('repl', ['orders', 'lines'], { orders: [{ _id: 0, status: 'old' }] });
  const dbName = db.databaseName;
  const orders = db.collection('orders');
  const lines = db.collection('lines');
  const session = rs.client.startSession();
  try {
    await session.withTransaction(async () => {
      await orders.insertMany([1, 2, 3, 4, 5].map((i) => ({ _id: i, status: 'new' })), { session });
      await lines.insertMany(Array.from({ length: 15 }, (_, i) => ({ _id: i, order: 1 + (i % 5) })), { session });
      await orders.updateOne({ _id: 0 }, { $set: { status: 'closed' } }, { session });
    }, { readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' }, readPreference: 'primary' });

    const wantOrders = [{ _id: 0, status: 'closed' }, ...[1, 2, 3, 4, 5].map((i) => ({ _id: i, status: 'new' }))];
    assert.deepEqual(await rs.waitForReplication(dbName, 'orders'), wantOrders);
    assert.equal((await rs.waitForReplication(dbName, 'lines')).length, 15);
    await rs.onEach(async (i) => {
      assert.deepEqual(await rs.docsOn(i, dbName, 'orders'), wantOrders, `member ${i}'s orders`);
      assert.equal((await rs.docsOn(i, dbName, 'lines')).length, 15, `member ${i}'s lines`);
    });

    session.startTransaction({ writeConcern: { w: 'majority' } });
    await orders.insertOne({ _id: 'aborted-order' }, { session });
    await lines.insertOne({ _id: 'aborted-line' }, { session });
    await orders.updateOne({ _id: 0 }, { $set: { status: 'reopened' } }, { session });
    await session.abortTransaction();
  } finally {
    await session.endSession();
  }
  // A later write, replicated everywhere, comes after anything the aborted transaction could have logged.
  await orders.insertOne({ _id: 'marker' }, MAJ);
  const after = await rs.waitForReplication(dbName, 'orders');
  assert.ok(after.some((d) => d._id === 'marker'));
  await rs.onEach(async (i) => {
    const o = await rs.docsOn(i, dbName, 'orders');
    assert.ok(!o.some((d) => d._id === 'aborted-order'), `member ${i} has none of the aborted transaction's orders`);
    assert.deepEqual(o.find((d) => d._id === 0), { _id: 0, status: 'closed' }, `member ${i}: the aborted update is not applied`);
    assert.equal((await rs.docsOn(i, dbName, 'lines', { _id: 'aborted-line' })).length, 0, `member ${i}'s lines`);
  });
});

R.test('replication: a secondary shows a committed transaction whole or not at all, never a part of it', async () => {
  // mongod's secondaries apply a transaction's applyOps as one batch, read at batch boundaries.
  // mayfly's applier replays one entry's ops as several commands (one per run of a kind on one
  // namespace): they run in one storage transaction, so a reader on the secondary never sees some.
  const db = await freshDbWith('whole', ['a', 'b']);
  const dbName = db.databaseName;
  const p = await rs.waitForPrimary();
  const sec = rs.inSetMembers.map((m) => m.index).find((i) => i !== p);
  const onSec = rs.reader(sec).db(dbName).collection('a');
  const ROUNDS = 5;
  const PER = 400;
  const seen = new Set();
  for (let round = 0; round < ROUNDS; round++) {
    const session = rs.client.startSession();
    let done = false;
    const poller = (async () => {
      while (!done) seen.add(await onSec.countDocuments({ round }));
      seen.add(await onSec.countDocuments({ round }));
    })();
    try {
      await session.withTransaction(async () => {
        // a, b, a, b: four runs, so four commands on the secondary.
        for (let part = 0; part < 4; part++) {
          const coll = db.collection(part % 2 === 0 ? 'a' : 'b');
          await coll.insertMany(Array.from({ length: PER }, (_, k) => ({ _id: `${round}-${part}-${k}`, round })), { session });
        }
      }, { writeConcern: { w: 'majority' } });
      await rs.waitUntil(async () => (await onSec.countDocuments({ round })) === 2 * PER,
        { timeoutMs: 20000, what: `round ${round} on the secondary` });
    } finally {
      done = true;
      await poller;
      await session.endSession();
    }
  }
  const counts = [...seen].sort((x, y) => x - y);
  console.log(`# counts of one round's documents a secondary reported while applying: ${counts.join(', ')}`);
  assert.deepEqual(counts.filter((n) => n !== 0 && n !== 2 * PER), [], 'no partial transaction was visible');
  assert.ok(counts.includes(2 * PER));
});

R.test('a transaction statement sent to a secondary is refused with NotWritablePrimary (10107)', async () => {
  // transaction_participant.cpp beginOrContinue ("Not primary so we cannot begin or continue a transaction").
  const db = await freshDbWith('secondary', ['c']);
  const p = await rs.waitForPrimary();
  const sec = rs.inSetMembers.map((m) => m.index).find((i) => i !== p);
  const lsid = { id: new UUID() };
  const r = await rs.raw(sec, db.databaseName, {
    find: 'c', filter: {}, lsid, txnNumber: Long.fromNumber(1), startTransaction: true, autocommit: false,
    $readPreference: { mode: 'secondaryPreferred' },
  }, 20000);
  assert.ok(r, `member ${sec} did not answer`);
  expectError(r, 10107, 'NotWritablePrimary');
});

R.test('a time-series collection takes no writes in a transaction (263, as mongod); the transaction is not started', async () => {
  // write_ops_exec.cpp: "Cannot insert into a time-series collection in a multi-document transaction".
  const db = rs.freshDb('txnts');
  await retryNotPrimary(() => db.createCollection('ts', { timeseries: { timeField: 't', metaField: 'm' }, ...MAJ }));
  const s = new RawSession(db.databaseName);
  expectError(await s.start(1, { insert: 'ts', documents: [{ t: new Date(), m: 1, v: 1 }] }), 263,
    'OperationNotSupportedInTransaction', /time-series collection in a multi-document transaction/);
  expectError(await s.commit(1), 251, 'NoSuchTransaction');
  assert.equal(await (await outside(db.databaseName)).collection('ts').countDocuments(), 0);
});

R.test('implicit collection creation inside a transaction: an insert, an upsert and a findAndModify upsert create their collections at commit', async () => {
  // jstests/core/txns/implicit_collection_creation_in_txn.js
  const db = rs.freshDb('implicit');
  const session = rs.client.startSession();
  try {
    await session.withTransaction(async () => {
      await db.collection('by_insert').insertOne({ _id: 'doc' }, { session });
      await db.collection('by_upsert').updateOne({ _id: 'doc' }, { $set: { updated: true } }, { session, upsert: true });
      const fam = await db.collection('by_fam').findOneAndUpdate({ _id: 'doc' }, { $set: { updated: true } },
        { session, upsert: true, returnDocument: 'before' });
      assert.equal(fam, null);
      assert.deepEqual(await db.collection('by_upsert').findOne({}, { session }), { _id: 'doc', updated: true });
    });
  } finally {
    await session.endSession();
  }
  const out = await outside(db.databaseName);
  assert.deepEqual((await out.listCollections().toArray()).map((c) => c.name).sort(), ['by_fam', 'by_insert', 'by_upsert']);
  assert.deepEqual(await out.collection('by_insert').findOne(), { _id: 'doc' });
  assert.deepEqual(await out.collection('by_upsert').findOne(), { _id: 'doc', updated: true });
  assert.deepEqual(await out.collection('by_fam').findOne(), { _id: 'doc', updated: true });
});

R.test('an aborted transaction leaves no collection behind: those its insert, upsert, create or createIndexes created are dropped again, unless another client wrote to them meanwhile', async () => {
  // jstests/core/txns/create_collection.js, create_indexes.js: a collection created in a transaction
  // exists only if it commits. mayfly creates it outside the transaction; the abort drops it again.
  const db = rs.freshDb('undo');
  const out = await outside(db.databaseName);
  const names = async () => (await out.listCollections().toArray()).map((c) => c.name).sort();
  const s = new RawSession(db.databaseName);
  expectOk(await s.start(1, { insert: 'by_insert', documents: [{ _id: 1 }] }));
  expectOk(await s.next(1, { update: 'by_upsert', updates: [{ q: { _id: 1 }, u: { $set: { v: 1 } }, upsert: true }] }));
  expectOk(await s.next(1, { create: 'by_create' }));
  const cix = expectOk(await s.next(1, { createIndexes: 'by_cix', indexes: [{ key: { a: 1 }, name: 'a_1' }] }));
  assert.equal(cix.createdCollectionAutomatically, true, JSON.stringify(cix));
  assert.equal(cix.numIndexesAfter, 2);
  // Another client writes to one of them while the transaction is open: that document must survive the abort.
  await out.collection('by_create').insertOne({ _id: 'other client' });
  expectOk(await s.abort(1), 'abort');
  assert.deepEqual(await names(), ['by_create'], 'only the collection another client wrote to stays');
  assert.deepEqual(await out.collection('by_create').find().toArray(), [{ _id: 'other client' }]);

  // Committed, they stay: createIndexes on a collection the transaction created and has not used yet.
  expectOk(await s.start(2, { create: 'kept' }));
  expectOk(await s.next(2, { createIndexes: 'kept', indexes: [{ key: { k: 1 }, name: 'k_1', unique: true }] }));
  expectOk(await s.next(2, { insert: 'kept', documents: [{ _id: 1, k: 1 }] }));
  expectOk(await s.commit(2));
  assert.deepEqual((await out.collection('kept').indexes()).map((i) => i.name).sort(), ['_id_', 'k_1']);
  await assert.rejects(out.collection('kept').insertOne({ k: 1 }), (e) => e.code === 11000, 'the unique index built in the transaction holds');

  // A statement that fails aborts the transaction and undoes its creations too (a duplicate key here).
  expectOk(await s.start(3, { insert: 'dup_then_abort', documents: [{ _id: 1 }] }));
  const dup = expectOk(await s.next(3, { insert: 'dup_then_abort', documents: [{ _id: 1 }] }));
  assert.equal(dup.writeErrors[0].code, 11000);
  expectError(await s.commit(3), 251, 'NoSuchTransaction');
  assert.deepEqual((await names()).includes('dup_then_abort'), false, 'the failed transaction\'s collection is gone');

  // Through the driver: session.abortTransaction() after an insert into a new collection.
  const session = rs.client.startSession();
  try {
    session.startTransaction();
    await db.collection('driver_new').insertOne({ _id: 1 }, { session });
    await session.abortTransaction();
  } finally {
    await session.endSession();
  }
  assert.deepEqual((await names()).includes('driver_new'), false);
});

R.test('in a transaction, mongod\'s refusals of DDL answer 263 and abort it: createIndexes on an existing collection, create of a time-series collection, a view or a system collection', async () => {
  // create_collection.cpp (createCollection) and create_indexes.cpp (runCreateIndexesWithCoordinator).
  const db = await freshDbWith('ddlrefused', ['c']);
  const s = new RawSession(db.databaseName);
  const cases = [
    [{ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1' }] },
      /^Cannot create new indexes on existing collection \w+\.c in a multi-document transaction\.$/],
    [{ create: 'ts', timeseries: { timeField: 't' } }, /^Cannot create a time-series collection in a multi-document transaction\.$/],
    [{ create: 'v', viewOn: 'c', pipeline: [] }, /^Cannot create a view in a multi-document transaction\.$/],
    [{ create: 'system.js' }, /^Cannot create system collection \w+\.system\.js within a transaction\.$/],
  ];
  let n = 0;
  for (const [command, msg] of cases) {
    n += 1;
    expectOk(await s.start(n, { insert: 'c', documents: [{ _id: n }] }));
    expectError(await s.next(n, command), 263, 'OperationNotSupportedInTransaction', msg);
    expectError(await s.commit(n), 251, 'NoSuchTransaction', /has been aborted/);
  }
  const out = await outside(db.databaseName);
  assert.deepEqual((await out.listCollections().toArray()).map((c) => c.name), ['c']);
  assert.deepEqual((await out.collection('c').indexes()).map((i) => i.name), ['_id_']);
  assert.equal(await out.collection('c').countDocuments(), 0, 'no aborted insert remains');
});

R.test('MongoClient.bulkWrite in a transaction (MongoDB 8.0): its ops on two collections, one created by it, commit together; a duplicate key aborts the whole transaction', async () => {
  // The drivers' unified test transactions/client-bulkWrite.yml ("client bulkWrite in a transaction"), and
  // write_ops_exec.cpp handleError: a write error in a transaction aborts it.
  const db = await freshDbWith('cbw', ['coll0'], {
    coll0: [{ _id: 1, x: 11 }, { _id: 2, x: 22 }, { _id: 3, x: 33 }, { _id: 5, x: 55 }, { _id: 6, x: 66 }, { _id: 7, x: 77 }],
  });
  const ns = `${db.databaseName}.coll0`;
  const newNs = `${db.databaseName}.made_by_bulkwrite`;
  const out = await outside(db.databaseName);
  const session = rs.client.startSession();
  try {
    session.startTransaction();
    const res = await rs.client.bulkWrite([
      { name: 'insertOne', namespace: ns, document: { _id: 8, x: 88 } },
      { name: 'updateOne', namespace: ns, filter: { _id: 1 }, update: { $inc: { x: 1 } } },
      { name: 'updateMany', namespace: ns, filter: { $and: [{ _id: { $gt: 1 } }, { _id: { $lte: 3 } }] }, update: { $inc: { x: 2 } } },
      { name: 'replaceOne', namespace: ns, filter: { _id: 4 }, replacement: { x: 44 }, upsert: true },
      { name: 'deleteOne', namespace: ns, filter: { _id: 5 } },
      { name: 'deleteMany', namespace: ns, filter: { $and: [{ _id: { $gt: 5 } }, { _id: { $lte: 7 } }] } },
      { name: 'insertOne', namespace: newNs, document: { _id: 'new' } },
    ], { session, verboseResults: true });
    assert.equal(res.insertedCount, 2);
    assert.equal(res.upsertedCount, 1);
    assert.equal(res.matchedCount, 3);
    assert.equal(res.modifiedCount, 3);
    assert.equal(res.deletedCount, 3);
    assert.equal(res.insertResults.get(0).insertedId, 8);
    assert.deepEqual(res.updateResults.get(2), { matchedCount: 2, modifiedCount: 2, didUpsert: false });
    assert.equal(res.updateResults.get(3).upsertedId, 4);
    assert.equal(res.deleteResults.get(5).deletedCount, 2);
    // Inside, the transaction reads its own writes; outside, nothing has changed yet.
    assert.deepEqual(await db.collection('made_by_bulkwrite').findOne({}, { session }), { _id: 'new' });
    assert.deepEqual(await ids(out.collection('coll0')), [1, 2, 3, 5, 6, 7]);
    assert.equal(await out.collection('made_by_bulkwrite').countDocuments(), 0);
    await session.commitTransaction();
  } finally {
    await session.endSession();
  }
  assert.deepEqual(await sorted(out.collection('coll0')),
    [{ _id: 1, x: 12 }, { _id: 2, x: 24 }, { _id: 3, x: 35 }, { _id: 4, x: 44 }, { _id: 8, x: 88 }]);
  assert.deepEqual(await out.collection('made_by_bulkwrite').find().toArray(), [{ _id: 'new' }]);

  // A duplicate key: the request stops there (ordered: false is not honoured in a transaction), the
  // transaction is aborted, and its earlier writes are gone.
  const s2 = rs.client.startSession();
  try {
    s2.startTransaction();
    await db.collection('coll0').insertOne({ _id: 'before' }, { session: s2 });
    const err = await rs.client.bulkWrite([
      { name: 'insertOne', namespace: ns, document: { _id: 'in-bulk' } },
      { name: 'insertOne', namespace: ns, document: { _id: 1 } },
      { name: 'insertOne', namespace: ns, document: { _id: 'after-dup' } },
    ], { session: s2, ordered: false }).then(() => null, (e) => e);
    assert.ok(err, 'the bulkWrite with a duplicate key fails');
    assert.equal(err.writeErrors.get(1).code, 11000, `the duplicate is op 1: ${err.message}`);
    assert.equal(err.writeErrors.size, 1, 'the request stopped at its first error');
    await h.expectCode(s2.commitTransaction(), 251);
  } finally {
    await s2.endSession();
  }
  assert.deepEqual(await ids(out.collection('coll0')), [1, 2, 3, 4, 8], 'nothing of the aborted transaction remains');

  // A time-series collection takes no bulkWrite in a transaction either (263); the raw reply, on admin.
  await retryNotPrimary(() => db.createCollection('ts', { timeseries: { timeField: 't' }, ...MAJ }));
  const s = new RawSession('admin');
  expectError(await s.start(1, { bulkWrite: 1, ops: [{ insert: 0, document: { t: new Date() } }], nsInfo: [{ ns: `${db.databaseName}.ts` }] }),
    263, 'OperationNotSupportedInTransaction', /^Cannot write to a time-series collection in a multi-document transaction/);
  // Nor in local (50790), config (263) or a system collection (50791), as a transaction's write anywhere.
  const bw = (ns) => ({ bulkWrite: 1, ops: [{ insert: 0, document: { x: 1 } }], nsInfo: [{ ns }] });
  expectError(await s.start(2, bw('local.txn_bw')), 50790, 'Location50790', /^Cannot write to unreplicated collection local\.txn_bw within a transaction\.$/);
  expectError(await s.start(3, bw('config.txn_bw')), 263, 'OperationNotSupportedInTransaction');
  expectError(await s.start(4, bw(`${db.databaseName}.system.js`)), 50791, 'Location50791', /^Cannot write to system collection/);
  // The same for the plain write commands (helper-115: insert into system.js in a transaction was accepted).
  const sj = new RawSession(db.databaseName);
  expectError(await sj.start(5, { insert: 'system.js', documents: [{ _id: 'f' }] }), 50791, 'Location50791',
    new RegExp(`^Cannot write to system collection ${db.databaseName}\\.system\\.js within a transaction\\.$`));
  expectError(await sj.start(6, { update: 'system.js', updates: [{ q: {}, u: { $set: { a: 1 } }, upsert: true }] }), 50791, 'Location50791');
  expectError(await sj.start(7, { delete: 'system.js', deletes: [{ q: {}, limit: 0 }] }), 50791, 'Location50791');
  const localNames = (await rs.client.db('local').listCollections({ name: 'txn_bw' }).toArray()).map((x) => x.name);
  assert.deepEqual(localNames, [], 'nothing was created in local');
});

R.test('a write outside a transaction to a document the transaction changed waits for it to end: findOneAndUpdate, updateOne and findOneAndDelete then apply (maxTimeMS ends the wait with 50, also for updateOne, updateMany and deleteOne); the retries show as writeConflicts in the profiler and serverStatus metrics.operation', async () => {
  // mongod's writeConflictRetry: the outside write retries until the transaction commits or aborts.
  const db = await freshDbWith('outside_wait', ['acc'], { acc: [{ _id: 'a', n: 0 }, { _id: 'b', n: 0 }] });
  const acc = db.collection('acc');
  const conflicts = async () => Number((await rs.client.db('admin').command({ serverStatus: 1 })).metrics.operation.writeConflicts);
  const conflicts0 = await conflicts();
  await db.command({ profile: 2 });
  const session = rs.client.startSession();
  try {
    session.startTransaction();
    await acc.updateOne({ _id: 'a' }, { $inc: { n: 1 } }, { session });
    await acc.updateOne({ _id: 'b' }, { $inc: { n: 1 } }, { session });
    // While the transaction is open: a bounded wait ends with MaxTimeMSExpired, not an InternalError.
    await h.expectCode(acc.findOneAndUpdate({ _id: 'a' }, { $inc: { n: 10 } }, { maxTimeMS: 300 }), 50);
    // ... for updateOne, updateMany and deleteOne too (their retries are yield points), nothing written.
    await h.expectCode(acc.updateOne({ _id: 'a' }, { $inc: { n: 100 } }, { maxTimeMS: 300 }), 50);
    await h.expectCode(acc.updateMany({}, { $inc: { n: 100 } }, { maxTimeMS: 300 }), 50);
    await h.expectCode(acc.deleteOne({ _id: 'b' }, { maxTimeMS: 300 }), 50);
    // As mongod (write_ops_exec handleError), the interruption fails the whole command ({ok: 0, code: 50}),
    // not one statement's writeErrors: db.command rejects instead of answering ok: 1.
    for (const cmd of [{ update: 'acc', updates: [{ q: { _id: 'a' }, u: { $inc: { n: 1 } } }] },
      { delete: 'acc', deletes: [{ q: { _id: 'b' }, limit: 1 }] }]) {
      const e = await h.expectCode(db.command({ ...cmd, maxTimeMS: 300 }), 50);
      assert.equal(e.codeName, 'MaxTimeMSExpired');
      assert.equal(e.writeErrors, undefined);
    }
    const bw = await rs.client.db('admin').command({
      bulkWrite: 1, ops: [{ update: 0, filter: { _id: 'a' }, updateMods: { $inc: { n: 1 } } }],
      nsInfo: [{ ns: `${db.databaseName}.acc` }], maxTimeMS: 300,
    }).then(() => null, (e) => e);
    assert.equal(bw && bw.code, 50, 'bulkWrite too');
    // Unbounded ones wait, and go through once the transaction commits.
    const fam = acc.findOneAndUpdate({ _id: 'a' }, { $inc: { n: 10 } }, { returnDocument: 'after' });
    const upd = acc.updateOne({ _id: 'b' }, { $inc: { n: 10 } });
    await h.sleep(500);
    await session.commitTransaction();
    assert.deepEqual(await guard(fam, 20000, 'findOneAndUpdate'), { _id: 'a', n: 11 });
    assert.equal((await guard(upd, 20000, 'updateOne')).modifiedCount, 1);
  } finally {
    await session.endSession();
  }
  await db.command({ profile: 0 });
  const waited = await db.collection('system.profile').find({ 'command.findAndModify': 'acc', 'command.maxTimeMS': { $exists: false } }).toArray();
  assert.equal(waited.length, 1, JSON.stringify(waited));
  assert.ok(waited[0].writeConflicts >= 1, `the profiler counts the retries: ${JSON.stringify(waited[0])}`);
  const counted = await conflicts() - conflicts0;
  assert.ok(counted >= waited[0].writeConflicts + 1, `metrics.operation.writeConflicts counts every waiting write's retries: ${counted}`);
  const out = await outside(db.databaseName);
  assert.deepEqual(await sorted(out.collection('acc')), [{ _id: 'a', n: 11 }, { _id: 'b', n: 11 }]);

  // An abort releases them too: findOneAndDelete then deletes the document as it was before the transaction.
  const s2 = rs.client.startSession();
  try {
    s2.startTransaction();
    await acc.updateOne({ _id: 'a' }, { $set: { n: -1 } }, { session: s2 });
    const del = acc.findOneAndDelete({ _id: 'a' });
    await h.sleep(300);
    await s2.abortTransaction();
    assert.deepEqual(await guard(del, 20000, 'findOneAndDelete'), { _id: 'a', n: 11 });
  } finally {
    await s2.endSession();
  }
  assert.deepEqual(await ids(out.collection('acc')), ['b']);
});

R.test('an open transaction between its commands shows in currentOp as an idleSession (mongod\'s reportStashedState): its lsid, txnNumber, readConcern, times and the connection that ran it; $currentOp {idleSessions: false} leaves it out; gone once committed', async () => {
  const db = await freshDbWith('idle_session', ['c']);
  const session = rs.client.startSession();
  const admin = rs.client.db('admin');
  const mine = (docs) => docs.filter((d) => d.type === 'idleSession' && d.lsid && d.lsid.id.toString('hex') === session.id.id.toString('hex'));
  try {
    session.startTransaction({ readConcern: { level: 'snapshot' } });
    await db.collection('c').insertOne({ _id: 1 }, { session });
    await db.collection('c').insertOne({ _id: 2 }, { session });
    await h.sleep(50);
    const [row] = mine((await admin.command({ currentOp: 1 })).inprog);
    assert.ok(row, 'db.currentOp() lists the idle transaction');
    assert.equal(row.desc, 'inactive transaction');
    assert.equal(row.active, false);
    assert.equal(row.waitingForLock, false);
    assert.equal(typeof row.host, 'string');
    assert.equal(typeof row.client, 'string');
    assert.ok(Number(row.connectionId) > 0);
    assert.equal(row.clientMetadata.driver.name.startsWith('nodejs'), true, JSON.stringify(row.clientMetadata));
    assert.equal(row.lsid.uid.buffer.length, 32);
    const tx = row.transaction;
    assert.equal(Number(tx.parameters.txnNumber), Number(session.serverSession.txnNumber));
    assert.equal(tx.parameters.autocommit, false);
    assert.equal(tx.parameters.txnRetryCounter, 0);
    assert.deepEqual(tx.parameters.readConcern, { level: 'snapshot' });
    assert.equal(tx.readTimestamp._bsontype, 'Timestamp');
    assert.ok(tx.readTimestamp.t > 0, 'the optime its snapshot began at');
    const open = Number(tx.timeOpenMicros), active = Number(tx.timeActiveMicros), inactive = Number(tx.timeInactiveMicros);
    assert.ok(active > 0 && inactive >= 50000, JSON.stringify(tx));
    assert.equal(active + inactive, open, 'active + inactive = open, as mongod\'s invariant');
    const start = Date.parse(tx.startWallClockTime.replace(/([+-]\d\d)(\d\d)$/, '$1:$2'));
    const expiry = Date.parse(tx.expiryTime.replace(/([+-]\d\d)(\d\d)$/, '$1:$2'));
    assert.ok(Math.abs(Date.now() - start) < 60000, tx.startWallClockTime);
    assert.match(tx.startWallClockTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}$/);
    const limit = (await admin.command({ getParameter: 1, transactionLifetimeLimitSeconds: 1 })).transactionLifetimeLimitSeconds;
    assert.equal(expiry - start, limit * 1000);
    // A filter over its fields, as db.currentOp({transaction: {$exists: true}}) in mongod's jstests.
    const filtered = (await admin.command({ currentOp: 1, 'transaction.parameters.txnNumber': tx.parameters.txnNumber, 'lsid.id': row.lsid.id })).inprog;
    assert.equal(filtered.length, 1);
    // The aggregation stage: listed by default, left out with idleSessions: false.
    assert.equal(mine(await admin.aggregate([{ $currentOp: { allUsers: true } }]).toArray()).length, 1);
    assert.equal(mine(await admin.aggregate([{ $currentOp: { allUsers: true, idleSessions: false } }]).toArray()).length, 0);
    await session.commitTransaction();
    assert.equal(mine((await admin.command({ currentOp: 1 })).inprog).length, 0, 'a committed transaction is no longer listed');
  } finally {
    await session.endSession();
  }
});

/* --------------------------------------------------------------- Mongoose */

const accountSchema = new mongoose.Schema({ name: { type: String, required: true }, balance: { type: Number, default: 0 } });
const ledgerSchema = new mongoose.Schema({ account: String, delta: Number });

/* A Mongoose connection to a fresh database on the set, with its models' collections created outside any transaction. */
async function mongooseDb(tag) {
  // Earlier tests step primaries down: start from a set whose members agree on one.
  await rs.waitForSteadyState();
  // The collections first, through the driver (Mongoose keeps a failed init): its init then finds them.
  const dbName = (await freshDbWith(tag, ['accounts', 'ledgers'])).databaseName;
  const conn = await mongoose.createConnection(rs.uriFor(dbName)).asPromise();
  try {
    const Account = conn.model('Account', accountSchema);
    const Ledger = conn.model('Ledger', ledgerSchema);
    await Account.init();
    await Ledger.init();
    return { conn, Account, Ledger, out: await outside(dbName) };
  } catch (err) {
    await conn.close(); /* an open connection would keep the test process alive */
    throw err;
  }
}

async function balances(out) {
  const docs = await out.collection('accounts').find().sort({ name: 1 }).toArray();
  return docs.map((d) => [d.name, d.balance]);
}

R.test('Mongoose connection.transaction(): Model.create, updateOne and insertMany commit together; a throw inside rolls all of it back', async () => {
  const { conn, Account, Ledger, out } = await mongooseDb('mgtxn');
  try {
    await Account.create({ name: 'ann', balance: 100 });
    await conn.transaction(async (session) => {
      await Account.create([{ name: 'bob' }, { name: 'cy' }], { session, ordered: true });
      await Account.updateOne({ name: 'ann' }, { $inc: { balance: -40 } }, { session });
      await Account.updateOne({ name: 'bob' }, { $inc: { balance: 40 } }, { session });
      await Ledger.insertMany([{ account: 'ann', delta: -40 }, { account: 'bob', delta: 40 }], { session });
      const inside = await Account.find({}, null, { session }).sort({ name: 1 }).lean();
      assert.deepEqual(inside.map((a) => [a.name, a.balance]), [['ann', 60], ['bob', 40], ['cy', 0]]);
      assert.deepEqual(await balances(out), [['ann', 100]], 'nothing is visible outside before the commit');
      assert.equal(await out.collection('ledgers').countDocuments(), 0);
    });
    assert.deepEqual(await balances(out), [['ann', 60], ['bob', 40], ['cy', 0]]);
    assert.equal(await out.collection('ledgers').countDocuments(), 2);

    const dave = new Account({ name: 'dave', balance: 5 });
    await assert.rejects(conn.transaction(async (session) => {
      await dave.save({ session });
      await Account.updateOne({ name: 'ann' }, { $inc: { balance: -60 } }, { session });
      await Ledger.create([{ account: 'ann', delta: -60 }], { session });
      assert.equal(await Account.countDocuments({}).session(session), 4);
      throw new Error('insufficient funds');
    }), /insufficient funds/);
    assert.equal(dave.isNew, true, 'Mongoose resets the state of a document saved in an aborted transaction');
    assert.deepEqual(await balances(out), [['ann', 60], ['bob', 40], ['cy', 0]]);
    assert.equal(await out.collection('ledgers').countDocuments(), 2);
  } finally {
    await conn.close();
  }
});

R.test('Mongoose session.withTransaction(): Model.updateOne and find({session}) commit; an error thrown in the callback aborts', async () => {
  const { conn, Account, out } = await mongooseDb('mgsess');
  try {
    await Account.create([{ name: 'ann', balance: 10 }, { name: 'bob', balance: 20 }], { ordered: true });
    const session = await conn.startSession();
    try {
      await session.withTransaction(async () => {
        await Account.updateOne({ name: 'ann' }, { $inc: { balance: 15 } }).session(session);
        const rich = await Account.find({ balance: { $gte: 20 } }).session(session).sort({ name: 1 }).lean();
        assert.deepEqual(rich.map((a) => a.name), ['ann', 'bob'], 'the update is seen inside the transaction');
        assert.deepEqual(await balances(out), [['ann', 10], ['bob', 20]]);
      });
      assert.deepEqual(await balances(out), [['ann', 25], ['bob', 20]]);

      await assert.rejects(session.withTransaction(async () => {
        await Account.updateOne({ name: 'bob' }, { $inc: { balance: -20 } }, { session });
        await Account.deleteOne({ name: 'ann' }, { session });
        assert.equal((await Account.find({}, null, { session }).lean()).length, 1);
        throw new Error('changed my mind');
      }), /changed my mind/);
    } finally {
      await session.endSession();
    }
    assert.deepEqual(await balances(out), [['ann', 25], ['bob', 20]]);
  } finally {
    await conn.close();
  }
});

R.test('durability: a committed transaction survives kill -9 of the primary and a clean restart of a secondary on every member; an open one leaves nothing', { timeout: 180000 }, async () => {
  // Every persisted property gets a test that writes, stops (cleanly and with kill -9), starts again and queries.
  const db = await freshDbWith('durable', ['c', 'd']);
  const dbName = db.databaseName;
  const committed = new RawSession(dbName);
  expectOk(await committed.start(1, { insert: 'c', documents: [{ _id: 'a1' }, { _id: 'a2' }] }));
  expectOk(await committed.next(1, { insert: 'd', documents: [{ _id: 'd1' }] }));
  expectOk(await committed.commit(1, { writeConcern: { w: 'majority' } }));
  const open = new RawSession(dbName);
  expectOk(await open.start(1, { insert: 'c', documents: [{ _id: 'b1' }] }));
  expectOk(await open.next(1, { insert: 'd', documents: [{ _id: 'b2' }] }));

  const p = await rs.waitForPrimary();
  await rs.kill(p, { kill9: true });
  const np = await rs.waitForPrimary({ exclude: [p], timeoutMs: 15000 });
  await rs.restart(p);
  await rs.waitForSecondary(p, { timeoutMs: 30000 });
  // A clean stop and start of a secondary too.
  const sec = rs.inSetMembers.map((m) => m.index).find((i) => i !== np && i !== p);
  await rs.kill(sec, { kill9: false });
  await rs.restart(sec);
  await rs.waitForSecondary(sec, { timeoutMs: 30000 });
  await rs.waitForSteadyState();
  await afterStepDown(db);
  assert.deepEqual((await rs.waitForReplication(dbName, 'c')).map((x) => x._id), ['a1', 'a2']);
  assert.deepEqual((await rs.waitForReplication(dbName, 'd')).map((x) => x._id), ['d1']);
  await rs.onEach(async (i) => {
    assert.deepEqual((await rs.docsOn(i, dbName, 'c')).map((x) => x._id), ['a1', 'a2'], `member ${i}'s c`);
    assert.deepEqual((await rs.docsOn(i, dbName, 'd')).map((x) => x._id), ['d1'], `member ${i}'s d`);
  });
  // The open transaction died with its primary: its commit anywhere answers 251.
  expectError(await open.commit(1), 251, 'NoSuchTransaction');
});

/* ------------------------------------------------------------- standalone */

h.test('a standalone refuses transactions: 20 IllegalOperation "Transaction numbers are only allowed on a replica set member or mongos"', async () => {
  // initialize_operation_session_info.cpp (isReplSetMemberOrMongos).
  const db = standalone.client.db(`t${process.pid % 10000}_standalone_txn`);
  await db.collection('c').insertOne({ _id: 'before' });
  const conn = await h.rawConnect(standalone.port);
  try {
    const lsid = { id: new UUID() };
    const r = await conn.command(db.databaseName, {
      insert: 'c', documents: [{ _id: 'raw' }], lsid, txnNumber: Long.fromNumber(1), startTransaction: true, autocommit: false,
    });
    expectError(r, 20, 'IllegalOperation', /^Transaction numbers are only allowed on a replica set member or mongos$/);
    expectError(await conn.command('admin', { commitTransaction: 1, lsid, txnNumber: Long.fromNumber(1), autocommit: false }),
      20, 'IllegalOperation');
  } finally {
    conn.close();
  }
  // The driver sends it to the server, which refuses it the same way; the Node driver reports a
  // write's code 20 as "This MongoDB deployment does not support retryable writes ..." with the
  // server's error as originalError (execute_operation.js, MMAPv1_RETRY_WRITES_ERROR_CODE).
  const session = standalone.client.startSession();
  try {
    const err = await session.withTransaction(async () => {
      await db.collection('c').insertOne({ _id: 'driver' }, { session });
    }).then(() => null, (e) => e);
    assert.ok(err, 'the driver\'s transaction was refused');
    const fromServer = err.code === 20 ? err : err.originalError;
    assert.ok(fromServer, `the error carries the server's: ${err.message}`);
    assert.equal(fromServer.code, 20, `${fromServer.code} ${fromServer.message}`);
    assert.equal(fromServer.codeName, 'IllegalOperation');
    assert.match(fromServer.errmsg, /^Transaction numbers are only allowed on a replica set member or mongos$/);
  } finally {
    await session.endSession();
  }
  assert.deepEqual((await db.collection('c').find().toArray()).map((d) => d._id), ['before']);
});
