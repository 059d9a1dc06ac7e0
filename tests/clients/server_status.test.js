'use strict';
/*
 * serverStatus's default sections as monitoring agents read them (percona
 * mongodb_exporter, Datadog, agents that take getJSONObject("opcountersRepl")),
 * on a standalone: asserts, extra_info, globalLock, locks,
 * logicalSessionRecordCache, opcountersRepl, transactions, with mongod 8.0's
 * names and types, values that move when they should, and the section
 * toggles; and getDiagnosticData, whose serverStatus the exporter's
 * diagnosticdata collector scrapes. The replica-set fields (repl, a
 * secondary's opcountersRepl, retried writes) are in replset.test.js.
 */
const assert = require('node:assert/strict');
const { Long } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

const isInt = (v) => typeof v === 'number' || v instanceof Long;
const num = (v) => Number(v);
const status = (extra = {}) => srv.client.db('admin').command({ serverStatus: 1, ...extra });

h.test('serverStatus has mongod 8.0\'s default sections with their fields and types', async () => {
  const r = await status();
  for (const k of ['regular', 'warning', 'msg', 'user', 'tripwire', 'rollovers']) {
    assert.ok(isInt(r.asserts[k]), `asserts.${k}: ${r.asserts[k]}`);
  }
  assert.equal(r.extra_info.note, 'fields vary by platform');
  for (const k of ['user_time_us', 'system_time_us', 'maximum_resident_set_kb', 'input_blocks', 'output_blocks',
    'page_reclaims', 'page_faults', 'voluntary_context_switches', 'involuntary_context_switches']) {
    assert.ok(isInt(r.extra_info[k]), `extra_info.${k}: ${r.extra_info[k]}`);
  }
  assert.ok(num(r.extra_info.maximum_resident_set_kb) > 1000, 'the peak RSS is in kilobytes');
  assert.ok(isInt(r.globalLock.totalTime) && num(r.globalLock.totalTime) > 0, 'globalLock.totalTime');
  for (const part of ['currentQueue', 'activeClients']) {
    for (const k of ['total', 'readers', 'writers']) {
      assert.ok(isInt(r.globalLock[part][k]), `globalLock.${part}.${k}`);
    }
    assert.equal(num(r.globalLock[part].total), num(r.globalLock[part].readers) + num(r.globalLock[part].writers));
  }
  assert.equal(typeof r.locks, 'object');
  const lsc = r.logicalSessionRecordCache;
  for (const k of ['activeSessionsCount', 'sessionsCollectionJobCount', 'lastSessionsCollectionJobDurationMillis',
    'lastSessionsCollectionJobEntriesRefreshed', 'lastSessionsCollectionJobEntriesEnded',
    'lastSessionsCollectionJobCursorsClosed', 'transactionReaperJobCount', 'lastTransactionReaperJobDurationMillis',
    'lastTransactionReaperJobEntriesCleanedUp', 'sessionCatalogSize']) {
    assert.ok(isInt(lsc[k]), `logicalSessionRecordCache.${k}`);
  }
  assert.ok(lsc.lastSessionsCollectionJobTimestamp instanceof Date);
  assert.ok(lsc.lastTransactionReaperJobTimestamp instanceof Date);
  for (const k of ['insert', 'query', 'update', 'delete', 'getmore', 'command']) {
    assert.equal(num(r.opcountersRepl[k]), 0, `a standalone applies no replicated ${k}`);
  }
  for (const k of ['retriedCommandsCount', 'retriedStatementsCount', 'transactionsCollectionWriteCount',
    'currentActive', 'currentInactive', 'currentOpen', 'totalAborted', 'totalCommitted', 'totalStarted']) {
    assert.equal(num(r.transactions[k]), 0, `transactions.${k} on a standalone`);
  }
  assert.equal(r.repl, undefined, 'no repl section on a standalone');
  // metrics.getLastError: write-concern waits (a standalone waits for no other member).
  const gle = r.metrics.getLastError;
  assert.ok(isInt(gle.wtime.num) && isInt(gle.wtime.totalMillis) && isInt(gle.wtimeouts), JSON.stringify(gle));
  assert.equal(num(gle.wtime.num), 0);
});

h.test('asserts.user counts failing commands and write errors; opcounters count the failed command', async () => {
  const db = srv.freshDb('asserts');
  const a0 = (await status()).asserts.user;
  const o0 = (await status()).opcounters.command;
  await h.expectCode(db.command({ collMod: 'missing', validator: {} }), 26);
  await h.expectCode(db.command({ noSuchCommand: 1 }), 59);
  const a1 = (await status()).asserts.user;
  assert.ok(num(a1) >= num(a0) + 2, `asserts.user ${a0} -> ${a1}`);
  assert.ok(num((await status()).opcounters.command) > num(o0));
  await db.collection('c').insertOne({ _id: 1 });
  await assert.rejects(db.collection('c').insertOne({ _id: 1 }), (e) => e.code === 11000);
  const a2 = (await status()).asserts.user;
  assert.ok(num(a2) >= num(a1) + 1, `a duplicate key write error is a user assert: ${a1} -> ${a2}`);
});

h.test('metrics.commands counts each command run and failed by name (and <UNKNOWN>); metrics.document counts documents inserted, updated, deleted and returned', async () => {
  // mongod's metrics tree, as mongodb_exporter's metrics_commands / metrics_document collectors read it.
  const db = srv.freshDb('metrics');
  const c = db.collection('c');
  const m0 = (await status()).metrics;
  assert.ok(m0.commands.find && isInt(m0.commands.find.total) && isInt(m0.commands.find.failed), JSON.stringify(m0.commands.find));
  const names = Object.keys(m0.commands);
  assert.equal(names[0], '<UNKNOWN>');
  assert.deepEqual(names.slice(1), [...names.slice(1)].sort(), 'commands by name');
  await c.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
  await c.updateMany({}, { $set: { x: 1 } });
  await c.deleteOne({ _id: 3 });
  assert.equal((await c.find({}).toArray()).length, 2);
  await h.expectCode(db.command({ find: 'c', filter: { $bogus: 1 } }), 2);
  await h.expectCode(db.command({ noSuchCommandHere: 1 }), 59);
  const m1 = (await status()).metrics;
  assert.equal(num(m1.commands.find.total) - num(m0.commands.find.total), 2);
  assert.equal(num(m1.commands.find.failed) - num(m0.commands.find.failed), 1);
  assert.equal(num(m1.commands.insert.total) - num(m0.commands.insert.total), 1);
  assert.equal(num(m1.commands.insert.failed) - num(m0.commands.insert.failed), 0);
  assert.equal(num(m1.commands['<UNKNOWN>']) - num(m0.commands['<UNKNOWN>']), 1);
  assert.equal(num(m1.commands.serverStatus.total) - num(m0.commands.serverStatus.total), 1, 'the first serverStatus counted by the second');
  assert.equal(num(m1.document.inserted) - num(m0.document.inserted), 3);
  assert.equal(num(m1.document.updated) - num(m0.document.updated), 3);
  assert.equal(num(m1.document.deleted) - num(m0.document.deleted), 1);
  assert.equal(num(m1.document.returned) - num(m0.document.returned), 2);
});

h.test('metrics.queryExecutor counts keys and documents examined and the queries that scanned a whole collection (tailable ones apart)', async () => {
  // As mongodb_exporter's metrics_queryExecutor collector reads them: scanned = keys, scannedObjects = documents.
  const db = srv.freshDb('qexec');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, a: i })));
  await c.createIndex({ a: 1 });
  await db.createCollection('capped', { capped: true, size: 4096 });
  await db.collection('capped').insertOne({ x: 1 });
  const q0 = (await status()).metrics.queryExecutor;
  assert.equal((await c.find({ a: { $gte: 7 } }).toArray()).length, 3); // IXSCAN: 3 keys (and a 4th to end), 3 documents
  const q1 = (await status()).metrics.queryExecutor;
  const keys = num(q1.scanned) - num(q0.scanned);
  assert.ok(keys >= 3 && keys <= 4, `keys examined by the index scan: ${keys}`);
  assert.equal(num(q1.scannedObjects) - num(q0.scannedObjects), 3);
  assert.equal(num(q1.collectionScans.total) - num(q0.collectionScans.total), 0, 'an index scan is no collection scan');
  assert.equal((await c.find({ b: 1 }).toArray()).length, 0); // COLLSCAN over 10 documents
  const q2 = (await status()).metrics.queryExecutor;
  assert.equal(num(q2.scannedObjects) - num(q1.scannedObjects), 10);
  assert.equal(num(q2.scanned) - num(q1.scanned), 0);
  assert.equal(num(q2.collectionScans.total) - num(q1.collectionScans.total), 1);
  assert.equal(num(q2.collectionScans.nonTailable) - num(q1.collectionScans.nonTailable), 1);
  const tail = await db.command({ find: 'capped', filter: {}, tailable: true });
  assert.equal(tail.cursor.firstBatch.length, 1);
  const q3 = (await status()).metrics.queryExecutor;
  assert.equal(num(q3.collectionScans.total) - num(q2.collectionScans.total), 1, 'a tailable cursor scans the collection');
  assert.equal(num(q3.collectionScans.nonTailable) - num(q2.collectionScans.nonTailable), 0, '... and is not counted as nonTailable');
  await db.command({ killCursors: 'capped', cursors: [tail.cursor.id] });
  const op = (await status()).metrics.operation;
  assert.ok(isInt(op.writeConflicts), `metrics.operation.writeConflicts: ${op.writeConflicts}`);
});

h.test('metrics.operation.scanAndOrder counts the operations that sorted in memory, and their profile entries say hasSortStage', async () => {
  const db = srv.freshDb('sandord');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, a: i, b: 20 - i })));
  await c.createIndex({ a: 1 });
  await db.command({ profile: 2 });
  const sao = async () => num((await status()).metrics.operation.scanAndOrder);
  const s0 = await sao();
  assert.deepEqual((await c.find({}).sort({ a: -1 }).limit(2).toArray()).map((d) => d._id), [19, 18]);
  assert.equal(await sao(), s0, 'an index provides the order: no sort stage');
  assert.deepEqual((await c.find({ b: { $gt: 0 } }).sort({ b: 1 }).limit(2).toArray()).map((d) => d._id), [19, 18]);
  const s1 = await sao();
  assert.equal(s1, s0 + 1, 'a find sorting on an unindexed field');
  const agg = await c.aggregate([{ $sort: { b: -1 } }, { $limit: 1 }]).toArray();
  assert.equal(agg[0]._id, 0);
  assert.equal(await sao(), s1 + 1, 'an aggregate $sort no index provides');
  await c.aggregate([{ $sortByCount: '$a' }]).toArray();
  assert.equal(await sao(), s1 + 2, '$sortByCount is a $group and a $sort');
  // A sorted find read in batches: each getMore runs the same plan, and counts as mongod's does.
  const batches = await c.find({ b: { $gt: 0 } }).sort({ b: 1 }).batchSize(8).toArray();
  assert.equal(batches.length, 20);
  assert.equal(await sao(), s1 + 5, 'the find and its two getMores');
  await db.command({ profile: 0 });
  const entries = await db.collection('system.profile').find({ ns: `${db.databaseName}.c`, op: { $in: ['query', 'command', 'getmore'] } }).toArray();
  assert.equal(entries.filter((e) => e.op === 'getmore' && e.hasSortStage === true).length, 2, 'the getMores say hasSortStage');
  const sorted = entries.filter((e) => e.hasSortStage === true);
  assert.equal(sorted.length, 6, `entries with hasSortStage: ${JSON.stringify(entries.map((e) => [e.op, e.planSummary, e.hasSortStage]))}`);
  assert.ok(sorted.some((e) => e.command && e.command.sort && e.command.sort.b === 1), 'the find that sorted');
  const unsorted = entries.find((e) => e.command && e.command.sort && e.command.sort.a === -1);
  assert.ok(unsorted && unsorted.hasSortStage === undefined, 'an index-ordered find has no hasSortStage field, as mongod');
});

h.test('extra_info.user_time_us grows with work; globalLock.totalTime with time', async () => {
  const db = srv.freshDb('rusage');
  const r0 = await status();
  const docs = [];
  for (let i = 0; i < 2000; i++) docs.push({ _id: i, s: 'x'.repeat(100), k: i % 7 });
  await db.collection('c').insertMany(docs);
  for (let i = 0; i < 20; i++) {
    await db.collection('c').aggregate([{ $group: { _id: '$k', n: { $sum: 1 } } }]).toArray();
  }
  const r1 = await status();
  const cpu = (r) => num(r.extra_info.user_time_us) + num(r.extra_info.system_time_us);
  assert.ok(cpu(r1) > cpu(r0), `CPU time ${cpu(r0)} -> ${cpu(r1)}`);
  assert.ok(num(r1.extra_info.user_time_us) >= num(r0.extra_info.user_time_us));
  assert.ok(num(r1.globalLock.totalTime) > num(r0.globalLock.totalTime));
});

h.test('locks.Collection counts shared and exclusive collection locks, with mongod\'s nonzero-only modes', async () => {
  const db = srv.freshDb('locks');
  await db.collection('c').insertOne({ x: 1 });
  const l0 = (await status()).locks.Collection;
  assert.ok(l0 && isInt(l0.acquireCount.R), 'shared acquisitions (mode S, "R")');
  await db.collection('c').find().toArray();
  await db.collection('c').createIndex({ x: 1 });
  const l1 = (await status()).locks.Collection;
  assert.ok(num(l1.acquireCount.R) > num(l0.acquireCount.R), 'a find takes the shared lock');
  assert.ok(num(l1.acquireCount.W) > num(l0.acquireCount.W || 0), 'createIndexes takes the exclusive lock');
  for (const part of ['acquireCount', 'acquireWaitCount', 'timeAcquiringMicros']) {
    for (const [mode, v] of Object.entries(l1[part] || {})) {
      assert.ok(['R', 'W'].includes(mode) && num(v) > 0, `${part}.${mode} = ${v}`);
    }
  }
});

h.test('logicalSessionRecordCache.activeSessionsCount counts a session once a command used it', async () => {
  const c = await srv.newClient();
  try {
    const before = num((await status()).logicalSessionRecordCache.activeSessionsCount);
    const s = c.startSession();
    await c.db('admin').command({ ping: 1 }, { session: s });
    const after = num((await status()).logicalSessionRecordCache.activeSessionsCount);
    assert.ok(after >= before + 1, `activeSessionsCount ${before} -> ${after}`);
    await s.endSession();
  } finally {
    await c.close();
  }
});

h.test('section toggles: {<section>: 0} leaves a default section out, the rest stay', async () => {
  const off = { asserts: 0, extra_info: 0, globalLock: 0, locks: false, logicalSessionRecordCache: 0,
    opcountersRepl: 0, transactions: 0, metrics: 0, opLatencies: 0 };
  const r = await status(off);
  for (const k of Object.keys(off)) assert.equal(r[k], undefined, `${k} left out`);
  assert.ok(r.opcounters && r.connections && r.mem && r.network, 'the other sections stay');
  const all = await status({ locks: 1, asserts: true });
  assert.ok(all.locks && all.asserts && all.extra_info);
});

h.test('getDiagnosticData answers mongod\'s FTDC sample: {data: {start, serverStatus: {start, ..., end}, end}}', async () => {
  const r = await srv.client.db('admin').command({ getDiagnosticData: 1 });
  assert.equal(r.ok, 1);
  const d = r.data;
  assert.ok(d.start instanceof Date && d.end instanceof Date && d.end >= d.start);
  const ss = d.serverStatus;
  assert.ok(ss.start instanceof Date && ss.end instanceof Date && ss.start >= d.start && ss.end <= d.end);
  assert.equal(ss.ok, 1);
  assert.equal(ss.process, 'mayflyd');
  for (const k of ['asserts', 'connections', 'extra_info', 'globalLock', 'locks', 'logicalSessionRecordCache',
    'network', 'opcounters', 'opcountersRepl', 'mem', 'transactions', 'wiredTiger', 'metrics']) {
    assert.ok(ss[k], `data.serverStatus.${k}`);
  }
  assert.equal(d.replSetGetStatus, undefined, 'no replSetGetStatus on a standalone');
  // Admin only, as mongod.
  await h.expectCode(srv.client.db('test').command({ getDiagnosticData: 1 }), 13);
});

h.test('$currentOp {idleCursors: true} lists the cursors no operation is using, as mongod; a noCursorTimeout cursor outlives cursorTimeoutMillis', async () => {
  const db = srv.freshDb('idlecur');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i })));
  const admin = srv.client.db('admin');
  const before = Number((await admin.command({ getParameter: 1, cursorTimeoutMillis: 1 })).cursorTimeoutMillis);
  await admin.command({ setParameter: 1, cursorTimeoutMillis: 1000 });
  try {
    const plain = await db.command({ find: 'c', filter: { _id: { $gte: 0 } }, batchSize: 2 });
    const kept = await db.command({ find: 'c', filter: {}, batchSize: 3, noCursorTimeout: true });
    const idle = await admin.aggregate([{ $currentOp: { idleCursors: true } }, { $match: { type: 'idleCursor', ns: `${db.databaseName}.c` } }]).toArray();
    const byId = (id) => idle.find((o) => String(o.cursor.cursorId) === String(id));
    const p = byId(plain.cursor.id);
    const k = byId(kept.cursor.id);
    assert.ok(p && k, `both cursors listed: ${JSON.stringify(idle)}`);
    assert.equal(p.planSummary, 'IXSCAN { _id: 1 }');
    assert.equal(Number(p.cursor.nDocsReturned), 2);
    assert.equal(Number(p.cursor.nBatchesReturned), 1);
    assert.equal(p.cursor.noCursorTimeout, false);
    assert.equal(p.cursor.tailable, false);
    assert.equal(p.cursor.awaitData, false);
    assert.ok(p.cursor.createdDate instanceof Date && p.cursor.lastAccessDate instanceof Date);
    assert.equal(p.cursor.originatingCommand.find, 'c');
    assert.deepEqual(p.cursor.originatingCommand.filter, { _id: { $gte: 0 } });
    assert.equal(k.cursor.noCursorTimeout, true);
    assert.equal(Number(k.cursor.nDocsReturned), 3);
    // serverStatus metrics.cursor.open counts them: noTimeout one, pinned none (no command is using them).
    const open = (await admin.command({ serverStatus: 1 })).metrics.cursor.open;
    assert.ok(Number(open.total) >= 2 && Number(open.noTimeout) >= 1, JSON.stringify(open));
    assert.equal(Number(open.pinned), 0);
    // A cursor in use (this aggregate's own) is not idle; the plain $currentOp lists none.
    const noIdle = await admin.aggregate([{ $currentOp: {} }, { $match: { type: 'idleCursor' } }]).toArray();
    assert.equal(noIdle.length, 0);
    // A getMore counts another batch.
    await db.command({ getMore: h.cursorId(kept.cursor.id), collection: 'c', batchSize: 2 });
    const again = await admin.aggregate([{ $currentOp: { idleCursors: true } }, { $match: { type: 'idleCursor' } }]).toArray();
    const k2 = again.find((o) => String(o.cursor.cursorId) === String(kept.cursor.id));
    assert.equal(Number(k2.cursor.nDocsReturned), 5);
    assert.equal(Number(k2.cursor.nBatchesReturned), 2);
    // Past the timeout (the reaper looks each second) the plain cursor is gone; the noCursorTimeout one stays.
    await h.sleep(3500);
    await h.expectCode(db.command({ getMore: h.cursorId(plain.cursor.id), collection: 'c' }), 43);
    const rest = await db.command({ getMore: h.cursorId(kept.cursor.id), collection: 'c' });
    assert.equal(rest.cursor.nextBatch.length, 5);
  } finally {
    await admin.command({ setParameter: 1, cursorTimeoutMillis: before });
  }
});
