'use strict';
/*
 * collMod cappedSize / cappedMax (MongoDB 6.0+, SERVER-1864; the cases of
 * jstests/core/capped/capped_resize.js): new limits show in collStats
 * (maxSize, max) and listCollections, a smaller limit removes the oldest
 * documents at the next insert, a size is kept as given (no rounding, 256
 * allowed, as 8.0), cappedMax <= 0 means no limit (max 2147483647).
 * Errors: cappedSize outside [1, 1 PB] or cappedMax >= 2^31 are 51024 (the
 * IDL's bounds), a non-number 14, a collection that is not capped 72
 * "Collection must be capped.", a view 72. The limits survive a clean
 * restart and kill -9.
 */
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();
const KB = 1024;
const J = { writeConcern: { w: 1, j: true } };

/* About 50 KB: five documents of 10 KB. */
async function insertDocs(coll) {
  for (let i = 0; i < 5; i++) await coll.insertOne({ key: 'a'.repeat(10 * KB) });
}

async function stats(db, name) {
  return db.command({ collStats: name });
}

async function dataSize(db, name) {
  return (await db.command({ dataSize: `${db.databaseName}.${name}` })).size;
}

async function reset(db, extra) {
  await db.collection('capped_coll').drop().catch(() => {});
  await db.createCollection('capped_coll', { capped: true, ...extra });
  await insertDocs(db.collection('capped_coll'));
  assert.equal(await db.collection('capped_coll').countDocuments(), 2);
}

async function update(db, mods) {
  const r = await db.command({ collMod: 'capped_coll', ...mods });
  assert.equal(r.ok, 1);
  const st = await stats(db, 'capped_coll');
  if (mods.cappedSize) assert.equal(st.maxSize, mods.cappedSize, 'maxSize');
  if (mods.cappedMax !== undefined) assert.equal(st.max, mods.cappedMax <= 0 ? 0x7fffffff : mods.cappedMax, 'max');
  await insertDocs(db.collection('capped_coll'));
}

h.test('capped_resize.js updateSizeLimit: a larger size keeps more, a smaller one trims at the next insert; no rounding', async () => {
  const db = srv.freshDb('size');
  const c = db.collection('capped_coll');
  await reset(db, { size: 25 * KB });
  assert.equal((await stats(db, 'capped_coll')).maxSize, 25 * KB);
  await update(db, { cappedSize: 50 * KB });
  assert.ok(await c.countDocuments() > 2);
  assert.ok(await dataSize(db, 'capped_coll') <= 50 * KB);
  await update(db, { cappedSize: 25 * KB });
  assert.equal(await c.countDocuments(), 2);
  assert.ok(await dataSize(db, 'capped_coll') <= 25 * KB);
  await update(db, { cappedSize: 256 }); // below 4096 since SERVER-67036
  assert.ok(await c.countDocuments() < 2);
  assert.ok(await dataSize(db, 'capped_coll') < 25 * KB);
  for (const size of [25 * KB, 50 * 1023, 50 * KB]) await update(db, { cappedSize: size });
  const coll = (await db.listCollections({ name: 'capped_coll' }).toArray())[0];
  assert.equal(Number(coll.options.size), 50 * KB, 'listCollections shows the new size');
});

h.test('capped_resize.js: cappedSize 0, negative, above 1 PB or not a number is refused and changes nothing', async () => {
  const db = srv.freshDb('sizebad');
  await reset(db, { size: 25 * KB });
  const cases = [
    [0, 51024, /value must be >= 1, actual value '0'/],
    [-25 * KB, 51024, /value must be >= 1/],
    [0x4000000000000 + 1, 51024, /value must be <= 1125899906842624/],
    ['big', 14, /wrong type 'string'/],
  ];
  for (const [v, code, re] of cases) await h.expectCode(db.command({ collMod: 'capped_coll', cappedSize: v }), code, re);
  await h.expectCode(db.command({ collMod: 'capped_coll', cappedMax: 2 ** 31 }), 51024, /value must be < 2147483648/);
  // A bad cappedMax next to a good cappedSize: nothing changes.
  await h.expectCode(db.command({ collMod: 'capped_coll', cappedSize: 50 * KB, cappedMax: 2 ** 31 }), 51024);
  const st = await stats(db, 'capped_coll');
  assert.equal(st.maxSize, 25 * KB);
  // 1 PB itself is accepted.
  await db.command({ collMod: 'capped_coll', cappedSize: 0x4000000000000 });
  assert.equal((await stats(db, 'capped_coll')).maxSize, 0x4000000000000);
});

h.test('capped_resize.js updateMaxLimit: cappedMax up, down, and <= 0 for no limit (max 2147483647)', async () => {
  const db = srv.freshDb('max');
  const c = db.collection('capped_coll');
  await reset(db, { size: 50 * KB, max: 2 });
  assert.equal((await stats(db, 'capped_coll')).max, 2);
  await update(db, { cappedMax: 4 });
  assert.equal(await c.countDocuments(), 4);
  await update(db, { cappedMax: 2 });
  assert.equal(await c.countDocuments(), 2);
  await update(db, { cappedMax: -2 });
  assert.ok(await c.countDocuments() > 2);
  assert.ok(await dataSize(db, 'capped_coll') <= 50 * KB);
  await update(db, { cappedMax: 0 });
  assert.ok(await c.countDocuments() > 2);
});

h.test('capped_resize.js updateSizeAndMaxLimits: both limits at once; the tighter one wins', async () => {
  const db = srv.freshDb('both');
  const c = db.collection('capped_coll');
  await reset(db, { size: 25 * KB, max: 2 });
  await update(db, { cappedSize: 50 * KB, cappedMax: 4 });
  assert.equal(await c.countDocuments(), 4);
  assert.ok(await dataSize(db, 'capped_coll') > 25 * KB);
  await update(db, { cappedSize: 25 * KB, cappedMax: 2 });
  assert.equal(await c.countDocuments(), 2);
  await update(db, { cappedSize: 50 * KB, cappedMax: 2 });
  assert.equal(await c.countDocuments(), 2);
  await update(db, { cappedSize: 25 * KB, cappedMax: 4 });
  assert.equal(await c.countDocuments(), 2);
  assert.ok(await dataSize(db, 'capped_coll') <= 25 * KB);
});

h.test('cappedSize / cappedMax on a collection that is not capped, a view, a time-series collection, or none: refused', async () => {
  const db = srv.freshDb('notcapped');
  await db.collection('plain').insertOne({ a: 1 });
  for (const mod of [{ cappedSize: 4096 }, { cappedMax: 10 }]) {
    await h.expectCode(db.command({ collMod: 'plain', ...mod }), 72, /^Collection must be capped\.$/);
  }
  await db.createCollection('ts', { timeseries: { timeField: 't' } });
  await h.expectCode(db.command({ collMod: 'ts', cappedSize: 4096 }), 72, /Collection must be capped/);
  await db.createCollection('v', { viewOn: 'plain', pipeline: [] });
  await h.expectCode(db.command({ collMod: 'v', cappedSize: 4096 }), 72, /option not supported on a view: cappedSize/);
  await h.expectCode(db.command({ collMod: 'missing', cappedSize: 4096 }), 26);
  assert.equal((await stats(db, 'plain')).capped, false);
});

for (const kill9 of [false, true]) {
  h.test(`collMod cappedSize / cappedMax persist across ${kill9 ? 'kill -9' : 'a clean restart'}`, async () => {
    const db = srv.freshDb(kill9 ? 'persk' : 'persc');
    const dbName = db.databaseName;
    await db.createCollection('log', { capped: true, size: 25 * KB, max: 2 });
    await db.createCollection('log2', { capped: true, size: 1 << 20 });
    await db.command({ collMod: 'log', cappedSize: 1000, cappedMax: 3 }); // 1000: kept as given, not rounded to 4096
    await db.command({ collMod: 'log2', cappedMax: -1 });
    for (let i = 0; i < 6; i++) await db.collection('log2').insertOne({ i }, J);
    await db.collection('log').insertOne({ i: 0 }, J);

    await srv.server.restart({ kill9 });
    await srv.reconnect();
    const db2 = srv.client.db(dbName);
    let st = await stats(db2, 'log');
    assert.equal(st.maxSize, 1000);
    assert.equal(st.max, 3);
    st = await stats(db2, 'log2');
    assert.equal(st.maxSize, 1 << 20);
    assert.equal(st.max, 0x7fffffff);
    assert.equal(await db2.collection('log2').countDocuments(), 6);
    // The limits hold after the restart: at most 3 documents, at most 1000 bytes.
    for (let i = 1; i <= 5; i++) await db2.collection('log').insertOne({ i });
    assert.deepEqual((await db2.collection('log').find().sort({ $natural: 1 }).toArray()).map((d) => d.i), [3, 4, 5]);
    for (let i = 0; i < 3; i++) await db2.collection('log').insertOne({ pad: 'x'.repeat(400) });
    assert.ok((await dataSize(db2, 'log')) <= 1000);
    const opts = (await db2.listCollections({ name: 'log' }).toArray())[0].options;
    assert.equal(Number(opts.size), 1000);
    assert.equal(Number(opts.max), 3);
  });
}

h.test('create keeps capped options as mongod shows them: {capped, size, max} first, size rounded up to 256, max <= 0 is 2^31 - 1, none when not capped', async () => {
  const db = srv.freshDb('cappedopts');
  await db.createCollection('a', { capped: true, size: 1000 });
  await db.createCollection('b', { validator: { x: { $exists: true } }, capped: true, size: 5000, max: -1 });
  await db.createCollection('c', { size: 5000, max: 10 });
  await db.createCollection('d', { capped: false, size: 4096 });
  const opts = Object.fromEntries((await db.listCollections().toArray()).map((i) => [i.name, i.options]));
  assert.deepEqual(opts.a, { capped: true, size: 1024 });
  assert.deepEqual(Object.keys(opts.b), ['capped', 'size', 'max', 'validator']);
  assert.equal(opts.b.size, 5120);
  assert.equal(Number(opts.b.max), 2147483647);
  assert.deepEqual(opts.c, {});
  assert.deepEqual(opts.d, {});
  // The same create again is accepted (the options compare as stored); another size is 48.
  await db.createCollection('a', { capped: true, size: 1000 });
  await assert.rejects(db.createCollection('a', { capped: true, size: 2000 }), (e) => e.code === 48);
  // Capped behaviour is unchanged: the collection still holds at least 4096 bytes.
  assert.equal((await db.command({ collStats: 'a' })).maxSize, 4096);
});
