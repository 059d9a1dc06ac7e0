'use strict';
/*
 * Index scans against collection scans, over random documents and filters
 * (a seeded generator, so every run asks the same questions): count,
 * countDocuments and find through each index must give what the same query
 * gives with hint {$natural: 1}. The values are the ones exact bounds could
 * get wrong (count_keys.test.js has the hand-picked cases): numbers of every
 * type near each other, Decimal128s past a double's precision, -0, NaN,
 * infinities, int64 past 2^53, strings, dates, null, missing, and arrays on
 * one field so that index is multikey.
 */
const assert = require('node:assert/strict');
const { Decimal128, Long, Double, Int32 } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();

/* mulberry32: a small seeded generator. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const D = (s) => Decimal128.fromString(s);
const POOL = [
  () => new Int32(3), () => Long.fromNumber(3), () => new Double(3), () => D('3'), () => D('3.00'),
  () => D('3.0000000000000000000000000000001'), () => D('2.9999999999999999999999999999999'), () => new Double(3.5),
  () => D('3.5'), () => new Int32(-1), () => new Double(-0), () => D('-0'), () => new Int32(0), () => new Double(0.1),
  () => D('0.1'), () => D('0.10000000000000000555'), () => new Double(Infinity), () => D('-Infinity'),
  () => Long.fromString('9007199254740993'), () => new Double(9007199254740992), () => D('9007199254740993'),
  () => Long.fromString('9223372036854775807'), () => new Double(9223372036854775807), () => D('1E+400'),
  () => new Double(NaN), () => 'a', () => 'b', () => '', () => new Date(3), () => null, () => true,
  // The ends of key format 2's range (helper-97): a decimal past a long double has Infinity's key, and integral
  // decimals past 2^65 share keys with their neighbours; and documents holding them.
  () => D('1E+5000'), () => D('73786976294838210465'), () => D('73786976294838210466'), () => ({ b: Infinity }),
  () => ({ b: D('1E+5000') }),
];

function pick(r, arr) { return arr[Math.floor(r() * arr.length)]; }

function randomDoc(r, id) {
  const d = { _id: id };
  if (r() < 0.9) d.a = pick(r, POOL)();
  if (r() < 0.9) d.b = pick(r, POOL)();
  if (r() < 0.8) d.m = r() < 0.3 ? [pick(r, POOL)(), pick(r, POOL)()] : pick(r, POOL)();
  return d;
}

function randomPred(r) {
  const v = pick(r, POOL)();
  switch (Math.floor(r() * 7)) {
    case 0: return v;
    case 1: return { $gt: v };
    case 2: return { $gte: v };
    case 3: return { $lt: v };
    case 4: return { $lte: v };
    case 5: return { $gt: v, $lt: pick(r, POOL)() };
    default: return { $in: [v, pick(r, POOL)(), pick(r, POOL)()] };
  }
}

function randomFilter(r) {
  const f = {};
  for (const field of ['a', 'b', 'm']) if (r() < 0.5) f[field] = randomPred(r);
  if (Object.keys(f).length === 0) f.a = randomPred(r);
  return f;
}

h.test('count, countDocuments and find through every index equal a collection scan over 300 random filters', { timeout: 180000 }, async () => {
  const r = rng(56);
  const db = srv.freshDb('cntdiff');
  const c = db.collection('c');
  await c.insertMany(Array.from({ length: 400 }, (_, i) => randomDoc(r, i)));
  const indexes = [{ a: 1 }, { a: -1, b: 1 }, { b: 1, a: 1 }, { m: 1, a: 1 }];
  for (const k of indexes) await c.createIndex(k);
  const names = (await c.listIndexes().toArray()).map((ix) => ix.name).filter((n) => n !== '_id_');
  let keysOnly = 0;
  for (let q = 0; q < 300; q++) {
    const f = randomFilter(r);
    const want = (await db.command({ count: 'c', query: f, hint: { $natural: 1 } })).n;
    const ids = (await c.find(f, { projection: { _id: 1 }, hint: { $natural: 1 } }).toArray()).map((d) => d._id).sort((x, y) => x - y);
    assert.equal(ids.length, want);
    for (const name of names) {
      const what = `${JSON.stringify(f)} via ${name}`;
      assert.equal((await db.command({ count: 'c', query: f, hint: name })).n, want, `count ${what}`);
      assert.equal(await c.countDocuments(f, { hint: name }), want, `countDocuments ${what}`);
      const got = (await c.find(f, { projection: { _id: 1 }, hint: name }).toArray()).map((d) => d._id).sort((x, y) => x - y);
      assert.deepEqual(got, ids, `find ${what}`);
    }
    const e = await db.command({ explain: { count: 'c', query: f }, verbosity: 'executionStats' });
    if (e.executionStats.totalDocsExamined === 0 && e.executionStats.totalKeysExamined > 0) keysOnly++;
  }
  // The filters the bounds answer whole were counted over keys (not a vacuous comparison).
  assert.ok(keysOnly >= 50, `${keysOnly} counts read keys only`);
});
