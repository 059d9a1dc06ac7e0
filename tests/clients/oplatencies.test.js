'use strict';
/*
 * Operation latencies as mongod reports them: serverStatus().opLatencies
 * (reads, writes, commands, transactions, each {latency, ops} in
 * microseconds, with {opLatencies: {histograms: true}} MongoDB's
 * histogram buckets too) and $collStats {latencyStats: {...}} per
 * collection (mongosh's db.c.latencyStats()). Issue 13 uses them to tell
 * time spent inside the server from time spent reaching it.
 *
 * The tests in this file run one at a time against one server, so the
 * reads and writes counted between two serverStatus calls are exactly the
 * test's own; commands are counted with >= where the driver's own
 * connection handshakes could add some.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer({ args: ['--setParameter', 'enableTestCommands=1'] });
const admin = () => srv.client.db('admin');
const KINDS = ['reads', 'writes', 'commands', 'transactions'];

/* MongoDB's bucket lower bounds (µs): 0, then powers of two to 1024, two per power from 2048 to 2^21, powers to 2^40. */
function mongoBounds() {
  const b = [0];
  for (let k = 1; k <= 10; k++) b.push(2 ** k);
  for (let k = 11; k <= 20; k++) b.push(2 ** k, 3 * 2 ** (k - 1));
  for (let k = 21; k <= 40; k++) b.push(2 ** k);
  return b;
}

const num = (v) => Number(v);

async function lat(histograms = false) {
  const s = await admin().command({ serverStatus: 1, opLatencies: { histograms } });
  return s.opLatencies;
}

/* Each kind's histogram as a Map micros -> count, checked for shape on the way. */
function buckets(kind) {
  const bounds = new Set(mongoBounds());
  assert.ok(Array.isArray(kind.histogram), 'histogram is an array');
  const m = new Map();
  let prev = -1;
  let sum = 0;
  for (const e of kind.histogram) {
    assert.deepEqual(Object.keys(e), ['micros', 'count']);
    const micros = num(e.micros);
    assert.ok(bounds.has(micros), `micros ${micros} is one of MongoDB's bucket bounds`);
    assert.ok(micros > prev, 'buckets ascend');
    assert.ok(num(e.count) > 0, 'only buckets that hold operations are listed');
    prev = micros;
    sum += num(e.count);
    m.set(micros, num(e.count));
  }
  assert.equal(sum, num(kind.ops), 'the buckets hold every operation');
  return m;
}

h.test('serverStatus opLatencies counts each read, write and command once, with its time in microseconds', async () => {
  const db = srv.freshDb('lat');
  const c = db.collection('c');
  await c.insertOne({ _id: -1 }); /* the collection exists before the counted part */
  const before = await lat();
  for (const k of KINDS) {
    assert.deepEqual(Object.keys(before[k]), ['latency', 'ops', 'queryableEncryptionLatencyMicros'], `${k} without histograms`);
    assert.equal(before[k].queryableEncryptionLatencyMicros, 0);
    assert.equal(typeof before[k].ops, 'number');
  }
  for (let i = 0; i < 25; i++) await c.insertOne({ _id: i, v: 'x' });
  for (let i = 0; i < 40; i++) assert.equal((await c.findOne({ _id: i % 25 }))._id, i % 25);
  for (let i = 0; i < 5; i++) assert.equal(await c.countDocuments({}), 26); /* an aggregate: a read */
  await c.updateOne({ _id: 1 }, { $set: { v: 'y' } });
  await c.deleteOne({ _id: 2 });
  for (let i = 0; i < 3; i++) await admin().command({ ping: 1 });
  const after = await lat();
  assert.equal(after.reads.ops - before.reads.ops, 45);
  assert.equal(after.writes.ops - before.writes.ops, 27);
  /* the three pings and the first serverStatus (counted when it ended), and any handshake of the driver's */
  assert.ok(after.commands.ops - before.commands.ops >= 4, `commands ${before.commands.ops} -> ${after.commands.ops}`);
  assert.equal(after.transactions.ops, 0, 'a standalone server runs no transactions');
  for (const k of ['reads', 'writes', 'commands'])
    assert.ok(after[k].latency > before[k].latency, `${k} latency grows`);
  /* No read took longer than this test has run: the sum is in microseconds, not ms or ns. */
  assert.ok(after.reads.latency - before.reads.latency < 45 * 1e6);

  const full = await lat(true);
  for (const k of KINDS) buckets(full[k]);
  const off = await admin().command({ serverStatus: 1, opLatencies: 0 });
  assert.equal(off.opLatencies, undefined, '{opLatencies: 0} leaves the section out');
  assert.ok(off.opcounters, 'and keeps the others');
});

h.test('a slow find lands in the bucket of its duration', async () => {
  const db = srv.freshDb('slow');
  const c = db.collection('c');
  await c.insertOne({ _id: 1 });
  const app = 'oplat-slow';
  const client = await srv.newClient({ appName: app });
  await admin().command({ configureFailPoint: 'failCommand', mode: { times: 1 },
    data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 150, appName: app } });
  const before = await lat(true);
  const t0 = Date.now();
  assert.equal((await client.db(db.databaseName).collection('c').findOne({ _id: 1 }))._id, 1);
  const tookMs = Date.now() - t0;
  const after = await lat(true);
  assert.equal(after.reads.ops - before.reads.ops, 1);
  const us = after.reads.latency - before.reads.latency;
  assert.ok(us >= 150000 && us <= tookMs * 1000 + 1000, `the find took ${us} µs inside the server, ${tookMs} ms at the client`);
  /* 150 ms and up to 196 ms fall in [131072, 196608) µs; more only if the machine stalled */
  const b0 = buckets(before.reads), b1 = buckets(after.reads);
  const grew = [...b1].filter(([micros, n]) => n > (b0.get(micros) || 0)).map(([micros]) => micros);
  assert.equal(grew.length, 1);
  assert.ok(grew[0] >= 131072 && grew[0] <= us, `bucket ${grew[0]} for ${us} µs`);

});

h.test('$collStats latencyStats: a collection\'s own reads and writes, histograms on request; a drop starts it again', async () => {
  const db = srv.freshDb('coll');
  const a = db.collection('a');
  const b = db.collection('b');
  for (let i = 0; i < 7; i++) await a.insertOne({ _id: i });
  for (let i = 0; i < 11; i++) await a.findOne({ _id: i % 7 });
  for (let i = 0; i < 3; i++) await b.insertOne({ _id: i });
  const [s1] = await a.aggregate([{ $collStats: { latencyStats: {} } }]).toArray();
  assert.equal(s1.ns, `${db.databaseName}.a`);
  assert.deepEqual(Object.keys(s1.latencyStats), KINDS);
  assert.equal(s1.latencyStats.writes.ops, 7);
  assert.equal(s1.latencyStats.reads.ops, 11);
  assert.equal(s1.latencyStats.reads.histogram, undefined);
  assert.ok(s1.latencyStats.writes.latency > 0);
  assert.equal(s1.storageStats, undefined, 'only the sections asked for');

  /* The first $collStats was an aggregate on a: a read of a, counted once it ended. */
  const [s2] = await a.aggregate([{ $collStats: { latencyStats: { histograms: true } } }]).toArray();
  assert.equal(s2.latencyStats.reads.ops, 12);
  for (const k of KINDS) buckets(s2.latencyStats[k]);
  const [sb] = await b.aggregate([{ $collStats: { latencyStats: {} } }]).toArray();
  assert.equal(sb.latencyStats.writes.ops, 3);
  assert.equal(sb.latencyStats.reads.ops, 0);

  await a.drop();
  await a.insertOne({ _id: 'again' });
  const [s3] = await a.aggregate([{ $collStats: { latencyStats: {} } }]).toArray();
  assert.equal(s3.latencyStats.writes.ops, 1, 'the dropped collection\'s writes are forgotten');
  assert.equal(s3.latencyStats.reads.ops, 0);
});

h.test('mongosh: db.serverStatus({opLatencies: {histograms: true}}) and db.c.latencyStats()', { timeout: 120000 }, async () => {
  const db = srv.freshDb('sh');
  await db.collection('c').insertMany([{ _id: 1 }, { _id: 2 }]);
  await db.collection('c').findOne({ _id: 1 });
  const out = await h.mongosh(srv.port, db.databaseName, `
    const s = db.serverStatus({ opLatencies: { histograms: true } }).opLatencies;
    print("hist=" + Array.isArray(s.reads.histogram) + " reads=" + (s.reads.ops > 0));
    const r = db.c.latencyStats({ histograms: true });
    const l = (Array.isArray(r) ? r : r.toArray())[0].latencyStats;
    print("writes=" + l.writes.ops + " reads=" + l.reads.ops + " buckets=" + l.writes.histogram.length);
  `);
  assert.match(out, /hist=true reads=true/);
  assert.match(out, /writes=1 reads=1 buckets=1/);
});

h.test('a command slower than slowms is logged as mongod\'s "Slow query" (getLog global); a fast one is not', async () => {
  const db = srv.freshDb('slowlog');
  const c = db.collection('c');
  await c.insertOne({ _id: 1 });
  const app = 'oplat-slowlog';
  const client = await srv.newClient({ appName: app });
  /* This client's finds only: the test's other commands (the insert creating the collection) may be slow too. */
  const mine = async () => (await admin().command({ getLog: 'global' })).log.map((l) => JSON.parse(l))
    .filter((l) => l.msg === 'Slow query' && l.attr && l.attr.appName === app && l.attr.command && l.attr.command.find);
  await db.command({ profile: 0, slowms: 60 });
  try {
    await client.db(db.databaseName).collection('c').findOne({ _id: 1 }, { comment: 'fast' }); /* not logged */
    await admin().command({ configureFailPoint: 'failCommand', mode: { times: 1 },
      data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 120, appName: app } });
    await client.db(db.databaseName).collection('c').findOne({ _id: 1 }, { comment: 'the slow one' });
    const all = await mine();
    /* The fast find took under 60 ms unless the machine stalled it: it may show up, the slow one must, once. */
    const lines = all.filter((x) => x.attr.command.comment === 'the slow one');
    assert.equal(lines.length, 1, JSON.stringify(all));
    const [l] = lines;
    assert.equal(l.s, 'I');
    assert.equal(l.c, 'COMMAND');
    assert.equal(l.id, 51803);
    assert.match(l.ctx, /^conn\d+$/);
    assert.equal(l.attr.type, 'command');
    assert.equal(l.attr.ns, `${db.databaseName}.c`);
    assert.equal(l.attr.appName, app);
    assert.equal(l.attr.command.find, 'c');
    assert.equal(l.attr.command.comment, 'the slow one');
    assert.equal(l.attr.ok, 1);
    assert.equal(l.attr.protocol, 'op_msg');
    assert.ok(l.attr.durationMillis >= 120, `durationMillis ${l.attr.durationMillis}`);
    assert.ok(l.attr.reslen > 0);

    /* A failed slow command is logged with its error. */
    await admin().command({ configureFailPoint: 'failCommand', mode: { times: 1 },
      data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 100, errorCode: 2, appName: app } });
    await assert.rejects(client.db(db.databaseName).collection('c').findOne({ _id: 2 }), (e) => e.code === 2);
    const failed = (await mine()).filter((x) => x.attr.ok === 0 && x.attr.command.filter._id === 2);
    assert.equal(failed.length, 1);
    assert.equal(failed[0].attr.errCode, 2);
    assert.equal(failed[0].attr.errName, 'BadValue');
  } finally {
    await db.command({ profile: 0, slowms: 100 });
  }
});

h.test('the profiler and the slow-query log report what a query read: planSummary (COLLSCAN, IXSCAN { a: 1 }, IDHACK), keysExamined, docsExamined, nreturned, appName', async () => {
  const db = srv.freshDb('profscan');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: i, a: i % 5, b: i })));
  await c.createIndex({ a: 1 });
  const app = 'profscan-app';
  const client = await srv.newClient({ appName: app });
  const mc = client.db(db.databaseName).collection('c');
  await db.command({ profile: 2, slowms: 0 });
  try {
    assert.equal((await mc.find({ b: { $gte: 15 } }, { comment: 'scan' }).toArray()).length, 5);
    assert.equal((await mc.find({ a: 2 }, { comment: 'ix' }).toArray()).length, 4);
    assert.ok(await mc.findOne({ _id: 3 }, { comment: 'id' }));
  } finally {
    await db.command({ profile: 0, slowms: 100 });
  }
  const prof = async (comment) => {
    const docs = await db.collection('system.profile').find({ 'command.comment': comment }).toArray();
    assert.equal(docs.length, 1, comment);
    return docs[0];
  };
  const scan = await prof('scan');
  assert.equal(scan.planSummary, 'COLLSCAN');
  assert.equal(scan.docsExamined, 20);
  assert.equal(scan.keysExamined, 0);
  assert.equal(scan.nreturned, 5);
  assert.equal(scan.appName, app);
  const ix = await prof('ix');
  assert.equal(ix.planSummary, 'IXSCAN { a: 1 }');
  assert.equal(ix.keysExamined, 4);
  assert.equal(ix.docsExamined, 4);
  assert.equal(ix.nreturned, 4);
  const id = await prof('id');
  assert.equal(id.planSummary, 'IDHACK');
  assert.equal(id.nreturned, 1);
  // mongod's way of finding unindexed queries in the profile.
  const collscans = await db.collection('system.profile').find({ planSummary: 'COLLSCAN', appName: app }).toArray();
  assert.deepEqual(collscans.map((d) => d.command.comment), ['scan']);
  // The slow-query log carries the same figures.
  const lines = (await admin().command({ getLog: 'global' })).log.map((l) => JSON.parse(l))
    .filter((l) => l.msg === 'Slow query' && l.attr.appName === app && l.attr.command.comment === 'ix');
  assert.equal(lines.length, 1);
  assert.equal(lines[0].attr.planSummary, 'IXSCAN { a: 1 }');
  assert.equal(lines[0].attr.keysExamined, 4);
  assert.equal(lines[0].attr.docsExamined, 4);
  assert.equal(lines[0].attr.nreturned, 4);
  assert.equal(lines[0].attr.cursorExhausted, true);
  assert.equal(lines[0].attr.numYields, 0);
});

h.test('profiler entries carry mongod\'s write counters and cursor fields: nMatched / nModified / nUpserted, ninserted, ndeleted, findAndModify\'s, cursorid and cursorExhausted, numYield', async () => {
  // OpDebug::append (curop.cpp): the additive metrics a write sets, the cursor id while it stays open.
  const db = srv.freshDb('profwrites');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 1 }, { _id: 3, a: 2 }]);
  await db.command({ profile: 2, slowms: 0 });
  try {
    await c.insertMany([{ _id: 10 }, { _id: 11 }], { comment: 'ins' });
    await c.updateMany({ a: 1 }, { $set: { b: 1 } }, { comment: 'upd' });
    await c.updateMany({ a: 1 }, { $set: { b: 1 } }, { comment: 'noop' });
    await c.updateOne({ _id: 99 }, { $set: { b: 2 } }, { upsert: true, comment: 'ups' });
    await c.findOneAndUpdate({ _id: 3 }, { $set: { b: 3 } }, { comment: 'fam' });
    await c.findOneAndDelete({ _id: 99 }, { comment: 'famdel' });
    await c.deleteMany({ _id: { $in: [10, 11] } }, { comment: 'del' });
    await c.find({}, { batchSize: 2, comment: 'open' }).next();
    await c.find({}, { comment: 'all' }).toArray();
  } finally {
    await db.command({ profile: 0, slowms: 100 });
  }
  const prof = async (comment, op) => {
    const docs = await db.collection('system.profile').find({ 'command.comment': comment, ...(op ? { op } : {}) }).toArray();
    assert.equal(docs.length, 1, comment);
    return docs[0];
  };
  const pick = (d, keys) => Object.fromEntries(keys.map((k) => [k, d[k]]));
  assert.equal((await prof('ins')).ninserted, 2);
  assert.deepEqual(pick(await prof('upd'), ['nMatched', 'nModified', 'nUpserted']), { nMatched: 2, nModified: 2, nUpserted: 0 });
  assert.deepEqual(pick(await prof('noop'), ['nMatched', 'nModified', 'nUpserted']), { nMatched: 2, nModified: 0, nUpserted: 0 });
  assert.deepEqual(pick(await prof('ups'), ['nMatched', 'nModified', 'nUpserted']), { nMatched: 0, nModified: 0, nUpserted: 1 });
  assert.deepEqual(pick(await prof('fam'), ['nMatched', 'nModified', 'nUpserted']), { nMatched: 1, nModified: 1, nUpserted: 0 });
  assert.equal((await prof('famdel')).ndeleted, 1);
  assert.equal((await prof('del')).ndeleted, 2);
  // A write with one statement is profiled as that statement, as mongod: {q, u, multi, upsert} or {q, limit}, and the comment.
  assert.deepEqual((await prof('upd')).command, { q: { a: 1 }, u: { $set: { b: 1 } }, multi: true, upsert: false, comment: 'upd' });
  assert.deepEqual((await prof('ups')).command, { q: { _id: 99 }, u: { $set: { b: 2 } }, multi: false, upsert: true, comment: 'ups' });
  assert.deepEqual((await prof('del')).command, { q: { _id: { $in: [10, 11] } }, limit: 0, comment: 'del' });
  assert.equal((await prof('upd')).op, 'update');
  assert.equal((await prof('del')).op, 'remove');
  const open = await prof('open', 'query');
  assert.ok(open.cursorid > 0, 'the find left its cursor open');
  assert.equal(open.cursorExhausted, undefined);
  const all = await prof('all', 'query');
  assert.equal(all.cursorExhausted, true);
  assert.equal(all.cursorid, undefined);
  assert.equal(all.numYield, 0);
  // The slow-query log carries the write counters too (slowms 0 above).
  const upd = (await admin().command({ getLog: 'global' })).log.map((l) => JSON.parse(l))
    .filter((l) => l.msg === 'Slow query' && l.attr.command.comment === 'upd' && l.attr.ns === `${db.databaseName}.c`);
  assert.equal(upd.length, 1);
  assert.deepEqual(pick(upd[0].attr, ['nMatched', 'nModified', 'nUpserted']), { nMatched: 2, nModified: 2, nUpserted: 0 });
  const keys = Object.keys(all);
  assert.ok(keys.indexOf('docsExamined') < keys.indexOf('cursorExhausted') && keys.indexOf('cursorExhausted') < keys.indexOf('numYield') &&
    keys.indexOf('numYield') < keys.indexOf('nreturned'), `mongod's order: ${keys}`);
});

h.test('a profile filter decides what level 1 profiles and the slow-query log shows, in place of slowms; profile -1 reports it with mongod\'s note; "unset" removes it', async () => {
  const db = srv.freshDb('proffilter');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 10 }, (_, i) => ({ _id: i, a: i })));
  const note = 'When a filter expression is set, slowms and sampleRate are not used for profiling and slow-query log lines.';
  // A filter on the profile entry's fields: only collection scans, however fast (slowms stays at 100).
  const set = await db.command({ profile: 1, filter: { planSummary: 'COLLSCAN' } });
  assert.equal(set.was, 0);
  assert.equal(set.filter, undefined, 'no filter was set before');
  assert.equal(set.note, note);
  try {
    const got = await db.command({ profile: -1 });
    assert.equal(got.was, 1);
    assert.deepEqual(got.filter, { planSummary: 'COLLSCAN' });
    assert.equal(got.note, note);
    assert.equal((await c.find({ a: { $gte: 5 } }, { comment: 'pf-scan' }).toArray()).length, 5);
    assert.ok(await c.findOne({ _id: 3 }, { comment: 'pf-id' }));
    const prof = await db.collection('system.profile').find({ 'command.comment': { $in: ['pf-scan', 'pf-id'] } }).toArray();
    assert.deepEqual(prof.map((d) => d.command.comment), ['pf-scan'], 'the IDHACK find does not pass the filter');
    const lines = (await admin().command({ getLog: 'global' })).log.map((l) => JSON.parse(l))
      .filter((l) => l.msg === 'Slow query' && l.attr.command.comment !== undefined && String(l.attr.command.comment).startsWith('pf-'));
    assert.deepEqual(lines.map((l) => l.attr.command.comment), ['pf-scan'], 'the slow-query log follows the filter too');
    // A filter that does not parse changes nothing.
    await h.expectCode(db.command({ profile: -1, filter: { $bogus: 1 } }), 2);
    await h.expectCode(db.command({ profile: -1, filter: 5 }), 2);
    // Nor does one that needs metadata a profile entry has not (mongod's 4910201).
    const meta = await db.command({ profile: -1, filter: { $expr: { $gt: [{ $meta: 'textScore' }, 1] } } }).catch((e) => e);
    assert.equal(meta.code, 4910201);
    assert.equal(meta.errmsg, 'Profile filter is not allowed to depend on metadata');
    assert.deepEqual((await db.command({ profile: -1 })).filter, { planSummary: 'COLLSCAN' });
    // -1 with a filter replaces the filter and keeps the level.
    const repl = await db.command({ profile: -1, filter: { op: 'query', 'command.comment': 'pf-2' } });
    assert.deepEqual(repl.filter, { planSummary: 'COLLSCAN' }, 'the reply shows the filter as it was');
    assert.equal(repl.was, 1);
    assert.ok(await c.findOne({ _id: 4 }, { comment: 'pf-2' }));
    assert.equal(await db.collection('system.profile').countDocuments({ 'command.comment': 'pf-2' }), 1);
  } finally {
    const off = await db.command({ profile: 0, filter: 'unset' });
    assert.deepEqual(off.filter, { op: 'query', 'command.comment': 'pf-2' });
    assert.equal(off.note, note, 'a request that names a filter gets the note');
  }
  const after = await db.command({ profile: -1 });
  assert.equal(after.was, 0);
  assert.equal(after.filter, undefined);
  assert.equal(after.note, undefined);
});

h.test('secrets are blanked in the slow-query log and the profiler (createUser pwd: "xxx"), as mongod', async () => {
  const db = srv.freshDb('redact');
  await db.command({ profile: 2, slowms: 0 }); /* every command over 0 ms is logged, and profiled */
  try {
    await db.command({ createUser: 'redactme', pwd: 'hunter2-secret', roles: [] }); /* SCRAM hashing: over 0 ms */
  } finally {
    await db.command({ profile: 0, slowms: 100 });
  }
  const lines = (await admin().command({ getLog: 'global' })).log.filter((l) => l.includes('redactme'));
  for (const l of lines) assert.ok(!l.includes('hunter2-secret'), l);
  const slow = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'Slow query' && l.attr.command.createUser);
  assert.equal(slow.length, 1, 'the createUser was logged as slow');
  assert.equal(slow[0].attr.command.pwd, 'xxx');
  const prof = await db.collection('system.profile').find({ 'command.createUser': 'redactme' }).toArray();
  assert.equal(prof.length, 1);
  assert.equal(prof[0].command.pwd, 'xxx');
  await db.command({ dropUser: 'redactme' });
  /* Other commands carrying such fields (refused or ignored) leave the server answering. */
  await db.command({ ping: 1, pwd: 'not-for-logs', payload: 'neither' }).catch(() => {});
  await db.command({ find: 'c', filter: {}, pwd: 1 }).catch(() => {});
  assert.equal((await admin().command({ ping: 1 })).ok, 1);
});

h.test('a tailable awaitData getMore\'s wait for documents is not its latency, nor slow (as mongod\'s paused timer)', async () => {
  const db = srv.freshDb('tail');
  await db.createCollection('capped', { capped: true, size: 4096 });
  await db.collection('capped').insertOne({ _id: 1 });
  const r = await db.command({ find: 'capped', filter: {}, tailable: true, awaitData: true, batchSize: 10 });
  const id = r.cursor.id;
  await db.command({ profile: 0, slowms: 100 });
  const before = await db.collection('capped').aggregate([{ $collStats: { latencyStats: {} } }]).toArray();
  const t0 = Date.now();
  const more = await db.command({ getMore: h.cursorId(id), collection: 'capped', maxTimeMS: 400 });
  assert.ok(Date.now() - t0 >= 350, 'the getMore waited for documents');
  assert.equal(more.cursor.nextBatch.length, 0);
  const after = await db.collection('capped').aggregate([{ $collStats: { latencyStats: {} } }]).toArray();
  /* the first $collStats is a read of the collection too */
  assert.equal(after[0].latencyStats.reads.ops - before[0].latencyStats.reads.ops, 2);
  const us = after[0].latencyStats.reads.latency - before[0].latencyStats.reads.latency;
  assert.ok(us < 300000, `the getMore counted ${us} µs for a 400 ms wait`);
  const slow = (await admin().command({ getLog: 'global' })).log.map((l) => JSON.parse(l))
    .filter((l) => l.msg === 'Slow query' && l.attr && l.attr.command && l.attr.command.getMore !== undefined &&
      l.attr.ns === `${db.databaseName}.capped`);
  assert.equal(slow.length, 0, JSON.stringify(slow));
  await db.command({ killCursors: 'capped', cursors: [id] });
});

h.test('$collStats gives only the sections asked for: latencyStats alone needs no collection; storageStats does (26)', async () => {
  const db = srv.freshDb('sections');
  const [only] = await db.collection('ghost').aggregate([{ $collStats: { latencyStats: {} } }]).toArray();
  assert.deepEqual(Object.keys(only), ['ns', 'host', 'localTime', 'latencyStats']);
  assert.equal(only.latencyStats.reads.ops, 0);
  await h.expectCode(db.collection('ghost').aggregate([{ $collStats: { storageStats: {} } }]).toArray(), 26,
    /^PlanExecutor error during aggregation :: caused by :: Unable to retrieve storageStats in \$collStats stage :: caused by :: Collection \[.*\.ghost\] not found\.$/);
  await db.collection('real').insertOne({ _id: 1 });
  // A view has no storage: 166, as collStats on it (mongosh's db.view.stats()).
  await db.createCollection('view', { viewOn: 'real', pipeline: [] });
  await h.expectCode(db.collection('view').aggregate([{ $collStats: { storageStats: {} } }]).toArray(), 166,
    /Unable to retrieve storageStats in \$collStats stage :: caused by :: Namespace .*\.view is a view, not a collection$/);
  await h.expectCode(db.command({ collStats: 'view' }), 166);
  const [both] = await db.collection('real').aggregate([{ $collStats: { storageStats: {}, count: {} } }]).toArray();
  assert.equal(both.count, 1);
  assert.equal(both.storageStats.count, 1);
  assert.equal(both.latencyStats, undefined);
});

/* Found in review (session 30): the per-namespace table, the slow-query threshold, sampleRate and the log ring's size. */
const statsOf = async (db, coll) => {
  const [s] = await db.collection(coll).aggregate([{ $collStats: { latencyStats: {} } }]).toArray();
  return Object.fromEntries(KINDS.map((k) => [k, num(s.latencyStats[k].ops)]));
};
const none = { reads: 0, writes: 0, commands: 0, transactions: 0 };

h.test('a command that merely carries a string first (ping: "x") adds no namespace to the latency table', async () => {
  const db = srv.freshDb('nsjunk');
  for (let i = 0; i < 20; i++) await db.command({ ping: `junk${i}` });
  await db.command({ buildInfo: 'junk0' });
  assert.deepEqual(await statsOf(db, 'junk0'), none);
  assert.deepEqual(await statsOf(db, 'junk19'), none);
  /* A read or a write adds its collection; commands on it count from then on. */
  await db.collection('real').insertOne({ _id: 1 });
  await db.collection('real').findOne({ _id: 1 });
  await db.command({ collStats: 'real' });
  const real = await statsOf(db, 'real');
  assert.equal(real.writes, 1);
  assert.equal(real.reads, 1);
  assert.ok(real.commands >= 1, JSON.stringify(real));
});

h.test('renameCollection leaves neither name its past latencies; a drop leaves none of its own', async () => {
  const db = srv.freshDb('nsrename');
  await db.collection('a').insertOne({ _id: 1 });
  await db.collection('a').findOne({ _id: 1 });
  await admin().command({ renameCollection: `${db.databaseName}.a`, to: `${db.databaseName}.b` });
  await db.createCollection('a');
  assert.deepEqual(await statsOf(db, 'a'), none, 'a new collection under the old name starts empty');
  assert.deepEqual(await statsOf(db, 'b'), none, 'the renamed collection starts empty (mongod: collectionDropped)');
  /* dropTarget: the target's history goes with it. */
  await db.collection('s').insertOne({ _id: 1 });
  await db.collection('t').insertOne({ _id: 1 });
  await admin().command({ renameCollection: `${db.databaseName}.s`, to: `${db.databaseName}.t`, dropTarget: true });
  assert.deepEqual(await statsOf(db, 't'), none);
  await db.collection('d').insertOne({ _id: 1 });
  await db.collection('d').drop();
  assert.deepEqual(await statsOf(db, 'd'), none, 'the drop itself is not counted after it cleared the namespace');
});

h.test('slowms is inclusive and sampleRate samples the slow-query log; profile replies with the old settings', async () => {
  const db = srv.freshDb('sample');
  const app = 'oplat-sample';
  const client = await srv.newClient({ appName: app });
  const cdb = client.db(db.databaseName);
  await cdb.collection('c').insertOne({ _id: 1 });
  const mine = async (tag) => (await admin().command({ getLog: 'global' })).log.map((l) => JSON.parse(l))
    .filter((l) => l.msg === 'Slow query' && l.attr.appName === app && l.attr.command.comment === tag).length;
  try {
    const r0 = await db.command({ profile: 0, slowms: 0, sampleRate: 0 });
    assert.equal(num(r0.slowms), 100, 'the reply shows slowms as it was');
    assert.equal(r0.sampleRate, 1);
    const r1 = await db.command({ profile: -1 });
    assert.equal(num(r1.slowms), 0);
    assert.equal(r1.sampleRate, 0);
    /* The change is logged as mongod's id 48742, from the old settings to the new; a read (-1) is not. */
    const changes = (await admin().command({ getLog: 'global' })).log.map((l) => JSON.parse(l)).filter((l) => l.id === 48742);
    const last = changes[changes.length - 1];
    assert.equal(last.msg, 'Profiler settings changed');
    assert.deepEqual(last.attr, { from: { level: 0, slowms: 100, sampleRate: 1 }, to: { level: 0, slowms: 0, sampleRate: 0 } });
    for (let i = 0; i < 5; i++) await cdb.collection('c').findOne({ _id: 1 }, { comment: 'unsampled' });
    assert.equal(await mine('unsampled'), 0, 'sampleRate 0: nothing is logged');
    await db.command({ profile: 0, slowms: 0, sampleRate: 1 });
    for (let i = 0; i < 5; i++) await cdb.collection('c').findOne({ _id: 1 }, { comment: 'every' });
    assert.equal(await mine('every'), 5, 'slowms 0: every command is logged (mongod: duration >= slowms)');
    await db.command({ profile: 0, slowms: 0, sampleRate: 0.5 });
    for (let i = 0; i < 200; i++) await cdb.collection('c').findOne({ _id: 1 }, { comment: 'half' });
    const half = await mine('half');
    assert.ok(half > 40 && half < 160, `about half of 200 logged: ${half}`);
    await h.expectCode(db.command({ profile: 0, sampleRate: 1.5 }), [2]);
    await h.expectCode(db.command({ profile: 0, sampleRate: -0.1 }), [2]);
    await h.expectCode(db.command({ profile: 0, sampleRate: 'all' }), [14]);
    assert.equal((await db.command({ profile: -1 })).sampleRate, 0.5, 'a refused sampleRate changes nothing');
  } finally {
    await db.command({ profile: 0, slowms: 100, sampleRate: 1 });
  }
});

h.test('getLog stays near a megabyte however long the slow-query lines are (escaped control bytes)', async () => {
  const db = srv.freshDb('biglog');
  await db.collection('c').insertOne({ _id: 1 });
  const big = '\x01'.repeat(9800); /* each byte renders as \u0001: 10 KB of command, 60 KB of JSON */
  await db.command({ profile: 0, slowms: 0 });
  try {
    for (let i = 0; i < 60; i++) await db.collection('c').findOne({ a: big, i });
  } finally {
    await db.command({ profile: 0, slowms: 100 });
  }
  const r = await admin().command({ getLog: 'global' });
  const bytes = r.log.reduce((n, l) => n + l.length, 0);
  assert.ok(bytes <= 1024 * 1024, `getLog holds ${bytes} bytes`);
  /* Cut to 1 KB of command, as {$truncated: "<its start>"} (mongod's shape for an over-long command). */
  const slow = r.log.map((l) => JSON.parse(l)).filter((l) => l.msg === 'Slow query' && l.attr.ns === `${db.databaseName}.c` &&
    typeof l.attr.command.$truncated === 'string' && l.attr.command.$truncated.startsWith('{ "find" : "c"'));
  assert.ok(slow.length >= 20, `recent slow lines kept: ${slow.length}`);
  for (const l of slow) assert.ok(JSON.stringify(l).length <= 20 * 1024, 'each line cut to about 16 KB');
  assert.equal((await admin().command({ ping: 1 })).ok, 1);
});

h.test('errors and log lines stay valid UTF-8 when cut: a long non-ASCII name in an error reply and in getLog', async () => {
  const db = srv.freshDb('utf8cut');
  const long = '\u00e9'.repeat(400); /* 800 bytes: past the error message's 512 */
  for (const shift of ['', 'x', 'xy', 'xyz']) {
    const e = await h.expectCode(db.command({ [shift + long]: 1 }), 59);
    assert.ok(e.message.length > 200, 'the message is there, cut');
    assert.ok(!e.message.includes('\ufffd'), 'cut between characters');
  }
  await h.expectCode(db.collection('c').find({ ['f' + long]: { $bogus: 1 } }).toArray(), 2);
  /* A value quoted in the message and cut there (the index spec shown), well inside the 512 bytes. */
  for (const pre of ['', 'a', 'aa', 'aaa']) {
    const e = await h.expectCode(db.command({ createIndexes: 'x', indexes: [{ key: { a: 1 }, name: 'p1',
      partialFilterExpression: { a: { $ne: pre + '\u00e9'.repeat(100) } } }] }), [67, 2]);
    assert.ok(e.message.length > 50);
  }
  /* An index name of 2,200 bytes: its log lines are cut at the logger's 2 KB, and getLog must still decode. */
  await db.collection('c').createIndex({ a: 1 }, { name: '\u00e9'.repeat(1100) });
  const r = await admin().command({ getLog: 'global' });
  assert.ok(r.log.length > 0);
  for (const l of r.log.slice(-50)) JSON.parse(l);
  assert.equal((await admin().command({ ping: 1 })).ok, 1);
});

h.test('profile levels: any number of databases keep one; dropDatabase forgets its level; system.profile cannot be dropped while profiling (20)', async () => {
  /* 300 databases turned off and then one turned on: the level is kept (a fixed table of 256 refused it silently). */
  for (let i = 0; i < 300; i++) await srv.client.db(`plv${i}`).command({ profile: 0 });
  const many = [];
  for (let i = 0; i < 260; i++) many.push(srv.client.db(`plw${i}`).command({ profile: 1, slowms: 100 }));
  await Promise.all(many);
  const db = srv.freshDb('plevels');
  await db.command({ profile: 2 });
  assert.equal((await db.command({ profile: -1 })).was, 2);
  assert.equal((await srv.client.db('plw259').command({ profile: -1 })).was, 1);
  await db.collection('c').insertOne({ a: 1 });
  assert.ok(await db.collection('system.profile').countDocuments({}) > 0, 'profiled');
  await h.expectCode(db.command({ drop: 'system.profile' }), 20, /turn off profiling/);
  const other = srv.freshDb('plevels2');
  await other.command({ profile: 1, slowms: 100000 });
  assert.equal((await other.command({ drop: 'system.profile' })).ok, 1, 'no system.profile to drop: ok, as mongod');
  await other.command({ profile: 0 });
  await db.dropDatabase();
  assert.equal((await db.command({ profile: -1 })).was, 0, 'a dropped database\'s level is forgotten');
  const names = (await db.listCollections().toArray()).map((c) => c.name);
  assert.deepEqual(names, [], 'dropDatabase\'s own profile entry did not create system.profile again');
  for (let i = 0; i < 260; i++) await srv.client.db(`plw${i}`).command({ profile: 0 });
});
