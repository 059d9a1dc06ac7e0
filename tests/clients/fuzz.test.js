'use strict';
// Deterministic command fuzzing: thousands of well-formed BSON commands with
// random field values and shapes. Every command must get a reply (ok 0 or 1)
// on a live connection, and the server must never exit. Under the ASan build
// this also catches memory errors on unusual input.
const assert = require('node:assert/strict');
const { ObjectId, Long, Double, Decimal128, Binary, BSONRegExp, Timestamp, MinKey, MaxKey } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

function rng(seed) {
  let x = seed >>> 0;
  return () => { x = (x * 1664525 + 1013904223) >>> 0; return x / 4294967296; };
}

const FIELDS = ['a', 'b', '_id', 'a.b', 'a.0', 'a.$', 'a.$[]', 'a.$[x]', '$a', '', 'x.y.z', 'arr'];
const OPS = ['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$and', '$or', '$nor', '$not', '$exists',
  '$type', '$all', '$elemMatch', '$size', '$regex', '$options', '$mod', '$expr', '$set', '$unset', '$inc', '$push',
  '$each', '$slice', '$sort', '$position', '$addToSet', '$pull', '$pullAll', '$pop', '$rename', '$min', '$max',
  '$mul', '$currentDate', '$setOnInsert', '$match', '$group', '$project', '$sum', '$avg', '$first', '$limit',
  '$skip', '$unwind', '$lookup', '$count', '$add', '$concat', '$cond', '$foo', '$literal', '$replaceRoot'];

function makeValue(r, depth) {
  const k = Math.floor(r() * 22);
  switch (k) {
    case 0: return Math.floor(r() * 10) - 3;
    case 1: return r() * 1e6 - 5e5;
    case 2: return new Double(r() < 0.5 ? NaN : Infinity);
    case 3: return Long.fromNumber(Math.floor(r() * 1e12) - 5e11);
    case 4: return Decimal128.fromString(String(Math.floor(r() * 1000) / 10));
    case 5: return ['', 'x', 'abc', '$a', '$$ROOT', '.', 'a.b', '\u00e9', '(', '^a'][Math.floor(r() * 10)];
    case 6: return null;
    case 7: return r() < 0.5;
    case 8: return new Date(Math.floor(r() * 2e12));
    case 9: return new ObjectId();
    case 10: return new Binary(Buffer.from([1, 2, 3]));
    case 11: return new BSONRegExp(['a', '(', 'x+', '[a-'][Math.floor(r() * 4)], 'i');
    case 12: return new Timestamp({ t: 1, i: 1 });
    case 13: return r() < 0.5 ? new MinKey() : new MaxKey();
    case 14: return Long.fromString(r() < 0.5 ? '9223372036854775807' : '-9223372036854775808');
    case 15: return 2147483647;
    default: {
      if (depth > 4) return 1;
      if (k < 19) {
        const n = Math.floor(r() * 4);
        return Array.from({ length: n }, () => makeValue(r, depth + 1));
      }
      return makeDoc(r, depth + 1);
    }
  }
}

function makeDoc(r, depth) {
  const d = {};
  const n = Math.floor(r() * 4);
  for (let i = 0; i < n; i++) {
    const key = r() < 0.5 ? OPS[Math.floor(r() * OPS.length)] : FIELDS[Math.floor(r() * FIELDS.length)];
    d[key] = makeValue(r, depth);
  }
  return d;
}

function makeCommand(r, coll) {
  const v = () => makeValue(r, 0);
  const doc = () => makeDoc(r, 0);
  const pick = Math.floor(r() * 12);
  switch (pick) {
    case 0: return { find: coll, filter: doc(), projection: r() < 0.3 ? doc() : undefined, sort: r() < 0.3 ? doc() : undefined, limit: r() < 0.2 ? v() : undefined };
    case 1: return { insert: coll, documents: [doc(), { ...doc(), _id: v() }] };
    case 2: return { update: coll, updates: [{ q: doc(), u: r() < 0.2 ? [doc()] : doc(), upsert: r() < 0.3, multi: r() < 0.3, arrayFilters: r() < 0.2 ? [doc()] : undefined }] };
    case 3: return { delete: coll, deletes: [{ q: doc(), limit: r() < 0.5 ? 0 : 1 }] };
    case 4: return { aggregate: coll, pipeline: [doc(), doc()], cursor: {} };
    case 5: return { findAndModify: coll, query: doc(), update: r() < 0.7 ? doc() : undefined, remove: r() < 0.3, new: r() < 0.5, sort: r() < 0.3 ? doc() : undefined };
    case 6: return { count: coll, query: doc() };
    case 7: return { distinct: coll, key: r() < 0.7 ? FIELDS[Math.floor(r() * FIELDS.length)] : v(), query: doc() };
    case 8: return { createIndexes: coll, indexes: [{ key: doc(), name: `i${Math.floor(r() * 5)}` }] };
    case 9: return { find: coll, filter: { [FIELDS[Math.floor(r() * FIELDS.length)]]: { [OPS[Math.floor(r() * OPS.length)]]: v() } } };
    case 10: return { update: coll, updates: [{ q: {}, u: { [OPS[Math.floor(r() * OPS.length)]]: { [FIELDS[Math.floor(r() * FIELDS.length)]]: v() } }, multi: true }] };
    default: return { [['find', 'insert', 'getMore', 'killCursors', 'listIndexes', 'dropIndexes', 'collStats', 'validate'][Math.floor(r() * 8)]]: r() < 0.7 ? coll : v(), filter: v(), documents: v(), cursors: v(), index: v() };
  }
}

function strip(cmd) {
  // BSON serialisation drops undefined values already; keep the command order.
  return JSON.parse(JSON.stringify(Object.keys(cmd))).reduce((o, k) => { if (cmd[k] !== undefined) o[k] = cmd[k]; return o; }, {});
}

h.test('20,000 random commands all get replies and the server survives', { timeout: 240000 }, async (t) => {
  const db = srv.freshDb('fuzz');
  await db.collection('c').insertMany([
    { _id: 1, a: [1, 2, { b: 3 }], b: 'x', arr: [{ k: 1 }] }, { _id: 2, a: { b: [1, 2] } }, { _id: 3 },
  ]);
  const r = rng(20261121);
  let conn = await h.rawConnect(srv.port);
  let replies = 0; let closed = 0; let oks = 0;
  for (let i = 0; i < 20000; i++) {
    const cmd = strip(makeCommand(r, 'c'));
    let reply;
    try {
      reply = await conn.command(db.databaseName, cmd);
    } catch (e) {
      throw new Error(`command ${i} got no reply within the deadline: ${JSON.stringify(cmd).slice(0, 300)} (${e.message})`);
    }
    if (reply === null) {
      // The server may close a connection on a protocol error, never on a well-formed command.
      closed += 1;
      assert.ok(srv.server.exitInfo === null, `server exited after command ${i}: ${JSON.stringify(cmd).slice(0, 300)}`);
      conn = await h.rawConnect(srv.port);
      continue;
    }
    replies += 1;
    assert.ok(reply.ok === 0 || reply.ok === 1, `command ${i} reply without ok: ${JSON.stringify(reply).slice(0, 200)}`);
    if (reply.ok === 1) oks += 1;
    else assert.equal(typeof reply.code, 'number', `error reply without code: ${JSON.stringify(reply).slice(0, 200)}`);
    if (i % 2000 === 1999) {
      // Periodically reset the collection so that it does not grow without bound.
      await db.collection('c').deleteMany({ _id: { $nin: [1, 2, 3] } });
    }
  }
  conn.close();
  t.diagnostic(`replies ${replies}, ok ${oks}, closed ${closed}`);
  assert.equal(closed, 0, `${closed} well-formed commands got their connection closed`);
  assert.ok(oks > 100, `only ${oks} of ${replies} commands succeeded: the fuzzer is too far off`);
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1);
  const v = await db.command({ validate: 'c' });
  assert.equal(v.valid, true);
});

h.test('5,000 byte-mutated OP_MSG messages never crash the server', { timeout: 240000 }, async (t) => {
  const db = srv.freshDb('mutate');
  await db.collection('c').insertOne({ _id: 1, a: [1, { b: 2 }] });
  const { BSON } = require('mongodb');
  const r = rng(777);
  const seeds = [
    { find: 'c', filter: { a: { $elemMatch: { b: 2 } } }, sort: { a: 1 }, $db: db.databaseName },
    { insert: 'c', documents: [{ x: 'abc', y: [1, 2, { z: null }] }], $db: db.databaseName },
    { update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { 'a.1.b': 3 } } }], $db: db.databaseName },
    { aggregate: 'c', pipeline: [{ $match: {} }, { $group: { _id: '$a', n: { $sum: 1 } } }], cursor: {}, $db: db.databaseName },
    { hello: 1, $db: 'admin' },
  ].map((b) => Buffer.from(BSON.serialize(b)));
  let conn = await h.rawConnect(srv.port);
  let replies = 0; let closes = 0;
  for (let i = 0; i < 5000; i++) {
    const body = Buffer.from(seeds[i % seeds.length]);
    const flips = 1 + Math.floor(r() * 3);
    for (let f = 0; f < flips; f++) {
      const pos = 4 + Math.floor(r() * (body.length - 5)); // keep the document length prefix
      body[pos] = Math.floor(r() * 256);
    }
    await conn.send(h.buildOpMsg(i + 1, null, {}, { rawBody: body }));
    const reply = await conn.readReply(10000).catch((e) => { throw new Error(`no reply to mutation ${i}: ${e.message}`); });
    if (reply === null) {
      closes += 1;
      assert.equal(srv.server.exitInfo, null, `server exited on mutation ${i}: ${body.toString('hex')}`);
      conn = await h.rawConnect(srv.port);
    } else {
      replies += 1;
    }
  }
  conn.close();
  t.diagnostic(`replies ${replies}, closed connections ${closes}`);
  assert.equal((await srv.client.db('admin').command({ ping: 1 })).ok, 1);
  assert.equal((await db.command({ validate: 'c' })).valid, true);
});
