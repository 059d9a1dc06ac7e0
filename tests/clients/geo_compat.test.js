'use strict';
// Geospatial behaviour checked against mongod 8.0's source, beyond geo.test.js:
// boundary semantics of $geoWithin, and the other details named in each test.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

async function ids(c, filter) {
  return (await c.find(filter).sort({ _id: 1 }).toArray()).map((d) => d._id);
}

h.test('$geoWithin a GeoJSON polygon holds the points on its boundary (vertices, edges, a hole\'s edge), as mongod\'s containsPoint', async () => {
  for (const index of [false, true]) {
    const c = srv.freshDb(`edge${index}`).collection('c');
    if (index) await c.createIndex({ loc: '2dsphere' });
    await c.insertMany([
      { _id: 1, loc: { type: 'Point', coordinates: [0, 0] } },   // a vertex
      { _id: 2, loc: { type: 'Point', coordinates: [5, 0] } },   // on the equator edge
      { _id: 3, loc: { type: 'Point', coordinates: [10, 7] } },  // on a meridian edge
      { _id: 4, loc: [0, 3] },                                    // a legacy pair on a meridian edge
      { _id: 5, loc: { type: 'Point', coordinates: [4, 5] } },   // on the hole's edge
      { _id: 6, loc: { type: 'Point', coordinates: [5, 5] } },   // inside the hole
      { _id: 7, loc: { type: 'Point', coordinates: [10.001, 5] } }, // just outside
      { _id: 8, loc: { type: 'MultiPoint', coordinates: [[0, 0], [1, 0.5], [10, 10]] } },
      { _id: 9, loc: { type: 'MultiPoint', coordinates: [[0, 0], [11, 2]] } },
    ]);
    const sq = (x0, y0, x1, y1) => [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]];
    const holed = { type: 'Polygon', coordinates: [sq(0, 0, 10, 10), sq(4, 4, 6, 6)] };
    assert.deepEqual(await ids(c, { loc: { $geoWithin: { $geometry: holed } } }), [1, 2, 3, 4, 5, 8], `index ${index}`);
    const multi = { type: 'MultiPolygon', coordinates: [[sq(0, 0, 1, 1)], [sq(9, 9, 10, 10)]] };
    assert.deepEqual(await ids(c, { loc: { $geoWithin: { $geometry: multi } } }), [1, 8], `index ${index}`);
    // $geoIntersects agrees on the boundary.
    assert.deepEqual(await ids(c, { loc: { $geoIntersects: { $geometry: holed } } }), [1, 2, 3, 4, 5, 8, 9], `index ${index}`);
  }
});

h.test('$geoNear over a collection that does not exist is 26 NamespaceNotFound (PipelineD::buildInnerQueryExecutorGeoNear); a $near find is empty', async () => {
  const db = srv.freshDb('missing');
  await db.collection('o').insertOne({ _id: 1 });
  const stage = { $geoNear: { near: { type: 'Point', coordinates: [0, 0] }, distanceField: 'd' } };
  const e = await h.expectCode(db.collection('nope').aggregate([stage]).toArray(), 26);
  assert.equal(e.message, `$geoNear requires a geo index to run, but ${db.databaseName}.nope does not exist`);
  assert.equal(e.codeName, 'NamespaceNotFound');
  await h.expectCode(db.collection('nope').aggregate([stage, { $limit: 1 }]).toArray(), 26);
  await h.expectCode(db.collection('o').aggregate([{ $lookup: { from: 'nope', pipeline: [stage], as: 'x' } }]).toArray(), 26);
  // An existing collection without a geo index is still 27, and find on a missing collection answers nothing.
  await h.expectCode(db.collection('o').aggregate([stage]).toArray(), 27);
  assert.deepEqual(await db.collection('nope').find({ loc: { $near: [0, 0] } }).toArray(), []);
});

h.test('{$meta: "geoNearDistance" | "geoNearPoint"}: in a $near find\'s projection and after $geoNear (40218 without one)', async () => {
  const db = srv.freshDb('geometa');
  const c = db.collection('c');
  await c.createIndex({ loc: '2dsphere' });
  const docs = [];
  for (let i = 0; i < 130; i++) docs.push({ _id: i, loc: { type: 'Point', coordinates: [i * 0.01, 0] }, a: i % 2 });
  docs.push({ _id: 500, loc: [[50, 50], [0, 0.5]], a: 1 }); // several locations: the nearest is the point
  await c.insertMany(docs);
  const P = { type: 'Point', coordinates: [0, 0] };
  // A find projection (Mongoose's select({dist: {$meta: 'geoNearDistance'}})): across getMore batches, no hidden field left.
  const r = await c.find({ loc: { $near: { $geometry: P } } }, { projection: { d: { $meta: 'geoNearDistance' }, p: { $meta: 'geoNearPoint' } } })
    .batchSize(50).toArray();
  assert.equal(r.length, 131);
  const byId = new Map(r.map((d) => [d._id, d]));
  assert.deepEqual(Object.keys(byId.get(3)), ['_id', 'loc', 'a', 'd', 'p']);
  assert.deepEqual(byId.get(3).p, { type: 'Point', coordinates: [0.03, 0] });
  assert.ok(Math.abs(byId.get(3).d - 0.03 * Math.PI / 180 * 6378100) < 1e-6, String(byId.get(3).d));
  assert.deepEqual(byId.get(500).p, [0, 0.5]);
  for (let i = 1; i < r.length; i++) assert.ok(r[i - 1].d <= r[i].d);
  // In an inclusion projection and inside an expression.
  const inc = await c.find({ loc: { $near: { $geometry: P } }, a: 1 }, { projection: { a: 1, km: { $multiply: [{ $meta: 'geoNearDistance' }, 0.001] } } })
    .limit(2).toArray();
  assert.deepEqual(inc.map((d) => Object.keys(d)), [['_id', 'a', 'km'], ['_id', 'a', 'km']]);
  assert.equal(inc[0]._id, 1);
  assert.ok(Math.abs(inc[0].km - byId.get(1).d / 1000) < 1e-9);
  // Without a $near: 40218, even when nothing matches.
  await h.expectCode(c.find({ a: 7 }, { projection: { d: { $meta: 'geoNearDistance' } } }).toArray(), 40218,
    /^query requires \$geoNear distance metadata, but it is not available$/);
  // Aggregation: distanceField is optional; the metadata is the multiplied distance; it survives later stages.
  const g = await c.aggregate([{ $geoNear: { near: P, distanceMultiplier: 0.001, query: { a: 0 } } }, { $limit: 3 },
    { $project: { a: 1 } }, { $addFields: { km: { $meta: 'geoNearDistance' }, at: { $meta: 'geoNearPoint' } } }]).toArray();
  assert.deepEqual(g.map((d) => d._id), [0, 2, 4]);
  assert.deepEqual(Object.keys(g[1]), ['_id', 'a', 'km', 'at']);
  assert.ok(Math.abs(g[1].km - byId.get(2).d / 1000) < 1e-9);
  assert.deepEqual(g[1].at, { type: 'Point', coordinates: [0.02, 0] });
  // $$ROOT and $out see no hidden field.
  const grp = await c.aggregate([{ $geoNear: { near: P } }, { $limit: 2 }, { $addFields: { d: { $meta: 'geoNearDistance' } } },
    { $group: { _id: null, all: { $push: '$$ROOT' } } }]).toArray();
  assert.deepEqual(grp[0].all.map((d) => Object.keys(d)), [['_id', 'loc', 'a', 'd'], ['_id', 'loc', 'a', 'd']]);
  await c.aggregate([{ $geoNear: { near: P } }, { $limit: 2 }, { $set: { d: { $meta: 'geoNearDistance' } } }, { $out: 'o' }]).toArray();
  assert.deepEqual((await db.collection('o').find().sort({ _id: 1 }).toArray()).map((d) => Object.keys(d)),
    [['_id', 'loc', 'a', 'd'], ['_id', 'loc', 'a', 'd']]);
  await h.expectCode(c.aggregate([{ $match: {} }, { $project: { d: { $meta: 'geoNearPoint' } } }]).toArray(), 40218,
    /^query requires \$geoNear point metadata, but it is not available$/);
});

h.test('a hidden geo index answers no $near / $geoNear (291, the planner skips hidden indexes); unhidden it does', async () => {
  const db = srv.freshDb('hidden');
  const c = db.collection('c');
  await c.insertMany([{ _id: 1, loc: { type: 'Point', coordinates: [0, 0] } }, { _id: 2, loc: { type: 'Point', coordinates: [1, 1] } }]);
  await c.createIndex({ loc: '2dsphere' }, { hidden: true });
  const P = { type: 'Point', coordinates: [0, 0] };
  const re = /unable to find index for \$geoNear query/;
  await h.expectCode(c.find({ loc: { $near: { $geometry: P } } }).toArray(), 291, re);
  await h.expectCode(c.aggregate([{ $geoNear: { near: P, distanceField: 'd' } }]).toArray(), 291, re);
  await h.expectCode(c.aggregate([{ $geoNear: { near: P, distanceField: 'd', key: 'loc' } }]).toArray(), 291, re);
  await db.command({ collMod: 'c', index: { name: 'loc_2dsphere', hidden: false } });
  assert.deepEqual((await c.find({ loc: { $near: { $geometry: P } } }).toArray()).map((d) => d._id), [1, 2]);
  assert.deepEqual((await c.aggregate([{ $geoNear: { near: P, distanceField: 'd' } }]).toArray()).map((d) => d._id), [1, 2]);
});

h.test('a field with both a 2d and a 2dsphere index: a GeoJSON $near / $geoNear uses the 2dsphere one, a flat one the 2d', async () => {
  const c = srv.freshDb('both').collection('c');
  await c.insertMany([{ _id: 1, loc: [0, 0] }, { _id: 2, loc: [1, 1] }]);
  await c.createIndex({ loc: '2d' });
  await c.createIndex({ loc: '2dsphere' });
  const P = { type: 'Point', coordinates: [0.9, 0.9] };
  assert.deepEqual((await c.find({ loc: { $near: { $geometry: P } } }).toArray()).map((d) => d._id), [2, 1]);
  assert.deepEqual((await c.find({ loc: { $nearSphere: { $geometry: P, $maxDistance: 20000 } } }).toArray()).map((d) => d._id), [2]);
  // $geoNear's field is the 2d index's (extractGeoNearFieldFromIndexes); the 2dsphere index there answers in meters.
  for (const key of [undefined, 'loc']) {
    const r = await c.aggregate([{ $geoNear: { near: P, distanceField: 'd', ...(key ? { key } : {}) } }]).toArray();
    assert.deepEqual(r.map((d) => d._id), [2, 1]);
    assert.ok(r[0].d > 15000 && r[0].d < 16000, String(r[0].d)); // about 0.1414 degrees of arc, in meters
  }
  // A flat legacy search measures coordinate units on the 2d index.
  const f = await c.aggregate([{ $geoNear: { near: [0.9, 0.9], distanceField: 'd' } }]).toArray();
  assert.ok(Math.abs(f[0].d - Math.hypot(0.1, 0.1)) < 1e-12, String(f[0].d));
});

h.test('a stored strict-winding (big) polygon never matches $geoWithin / $geoIntersects (GeoMatchExpression)', async () => {
  const c = srv.freshDb('storedbig').collection('c');
  const crs = { type: 'name', properties: { name: 'urn:x-mongodb:crs:strictwinding:EPSG:4326' } };
  const ring = [[-10, -10], [10, -10], [10, 10], [-10, 10], [-10, -10]];
  await c.insertMany([{ _id: 1, g: { type: 'Polygon', coordinates: [ring], crs } }, { _id: 2, g: { type: 'Polygon', coordinates: [ring] } }]);
  assert.deepEqual(await ids(c, { g: { $geoIntersects: { $geometry: { type: 'Point', coordinates: [0, 0] } } } }), [2]);
  assert.deepEqual(await ids(c, { g: { $geoWithin: { $centerSphere: [[0, 0], 1] } } }), [2]);
  assert.deepEqual(await ids(c, { g: { $geoWithin: { $geometry: { type: 'Polygon', coordinates: [[[-20, -20], [20, -20], [20, 20], [-20, 20], [-20, -20]]] } } } }), [2]);
  assert.deepEqual(await ids(c, { g: { $not: { $geoIntersects: { $geometry: { type: 'Point', coordinates: [0, 0] } } } } }), [1]);
});

h.test('a legacy pair out of lng/lat range in a 2dsphere index: 16755 "can\'t project geometry into spherical CRS: <value>" (S2GetKeysForElement)', async () => {
  const db = srv.freshDb('project');
  const c = db.collection('c');
  await c.createIndex({ location: '2dsphere' });
  // The classic [lat, lng] swap, and a {latitude, longitude} object (read as x = latitude, y = longitude).
  let e = await h.expectCode(c.insertOne({ _id: 1, location: [22.52395, 113.943442] }), 16755);
  assert.equal(e.message, 'Can\'t extract geo keys: { _id: 1, location: [ 22.52395, 113.943442 ] }  can\'t project geometry into spherical CRS: [ 22.52395, 113.943442 ]');
  e = await h.expectCode(c.insertOne({ _id: 2, location: { latitude: -77.85059, longitude: 166.66534 } }), 16755);
  assert.ok(e.message.endsWith('  can\'t project geometry into spherical CRS: { latitude: -77.85059, longitude: 166.66534 }'), e.message);
  // Building the index over such a document fails the same way; a GeoJSON point keeps geoparser's message.
  const d = db.collection('d');
  await d.insertOne({ _id: 1, location: [10, 95] });
  e = await h.expectCode(d.createIndex({ location: '2dsphere' }), 16755);
  assert.ok(e.message.endsWith('can\'t project geometry into spherical CRS: [ 10, 95 ]'), e.message);
  e = await h.expectCode(c.insertOne({ _id: 3, location: { type: 'Point', coordinates: [10, 95] } }), 16755);
  assert.ok(e.message.endsWith('  Longitude/latitude is out of bounds, lng: 10 lat: 95'), e.message);
  assert.equal(await c.countDocuments(), 0);
});

h.test('$near / $nearSphere in a $pull condition or an array filter: 5626500 (PullNode\'s kBanAllSpecialFeatures); $geoWithin pulls', async () => {
  const c = srv.freshDb('pullnear').collection('c');
  await c.insertOne({ _id: 1, l: [{ p: [1, 1] }, { p: [60, 60] }], locs: [[1, 1], [2, 2]] });
  const re = /^\$geoNear, \$near, and \$nearSphere are not allowed in this context/;
  await h.expectCode(c.updateOne({ _id: 1 }, { $pull: { l: { p: { $near: [0, 0] } } } }), 5626500, re);
  await h.expectCode(c.updateOne({ _id: 1 }, { $pull: { locs: { $nearSphere: [0, 0] } } }), 5626500, re);
  await h.expectCode(c.updateOne({ _id: 2 }, { $pull: { l: { p: { $near: [0, 0] } } } }, { upsert: true }), 5626500, re);
  await h.expectCode(c.updateOne({ _id: 1 }, { $set: { 'l.$[e].x': 1 } }, { arrayFilters: [{ 'e.p': { $near: [0, 0] } }] }), 5626500,
    /^Error parsing array filter :: caused by :: \$geoNear, \$near, and \$nearSphere are not allowed in this context/);
  assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, l: [{ p: [1, 1] }, { p: [60, 60] }], locs: [[1, 1], [2, 2]] });
  assert.equal(await c.countDocuments(), 1);
  await c.updateOne({ _id: 1 }, { $pull: { l: { p: { $geoWithin: { $center: [[0, 0], 5] } } } } });
  assert.deepEqual((await c.findOne({ _id: 1 })).l, [{ p: [60, 60] }]);
});

h.test('$geoWithin a polygon holds a polygon sharing its boundary (itself, a tile along its edge), not one reaching across a notch', async () => {
  for (const index of [false, true]) {
    const c = srv.freshDb(`shared${index}`).collection('c');
    if (index) await c.createIndex({ g: '2dsphere' });
    const sq = (x0, y0, x1, y1) => [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]];
    await c.insertMany([
      { _id: 1, g: { type: 'Polygon', coordinates: [sq(0, 0, 10, 10)] } },   // the region itself
      { _id: 2, g: { type: 'Polygon', coordinates: [sq(0, 0, 5, 5)] } },     // a corner tile
      { _id: 3, g: { type: 'Polygon', coordinates: [sq(3, 0, 6, 2)] } },     // a tile along the south edge
      { _id: 4, g: { type: 'Polygon', coordinates: [sq(8, 8, 11, 9)] } },    // sticks out
      { _id: 5, g: { type: 'Polygon', coordinates: [sq(10, 0, 12, 2)] } },   // outside, touching
    ]);
    assert.deepEqual(await ids(c, { g: { $geoWithin: { $geometry: { type: 'Polygon', coordinates: [sq(0, 0, 10, 10)] } } } }), [1, 2, 3], `index ${index}`);
    // A U-shaped region (its notch's floor on the equator, its walls on meridians: great circles, so edges
    // shared exactly): its base is within; a band across the notch and a triangle over its floor are not.
    const u = { type: 'Polygon', coordinates: [[[0, -4], [6, -4], [6, 4], [4, 4], [4, 0], [2, 0], [2, 4], [0, 4], [0, -4]]] };
    await c.insertMany([
      { _id: 6, g: { type: 'Polygon', coordinates: [[[0, -4], [6, -4], [6, 0], [0, 0], [0, -4]]] } },
      { _id: 7, g: { type: 'Polygon', coordinates: [[[0, -1], [6, -1], [6, 1], [0, 1], [0, -1]]] } },
      { _id: 8, g: { type: 'Polygon', coordinates: [[[2, 0], [4, 0], [3, 1], [2, 0]]] } },
    ]);
    assert.deepEqual(await ids(c, { _id: { $gte: 6 }, g: { $geoWithin: { $geometry: u } } }), [6], `index ${index}`);
  }
});

h.test('2d / 2dsphere key field names are checked as any index\'s (validateKeyPattern): "$" prefixes, empty parts, _fts', async () => {
  const c = srv.freshDb('geofields').collection('c');
  const cases = [
    [{ '$**': '2dsphere' }, 'Index key contains an illegal field name: field name starts with \'$\'.'],
    [{ 'a.$**': '2d' }, 'Index key contains an illegal field name: field name starts with \'$\'.'],
    [{ $loc: '2dsphere' }, 'Index key contains an illegal field name: field name starts with \'$\'.'],
    [{ 'a..b': '2dsphere' }, 'Index keys cannot contain an empty field.'],
    [{ _fts: '2dsphere' }, 'Index key contains an illegal field name: \'_fts\''],
  ];
  for (const [key, why] of cases) {
    const e = await h.expectCode(c.createIndex(key), 67);
    assert.ok(e.message.endsWith(` :: caused by :: ${why}`), e.message);
  }
  // A DBRef part and a dotted path are fine.
  assert.equal(await c.createIndex({ 'ref.$id': '2dsphere' }), 'ref.$id_2dsphere');
  assert.equal(await c.createIndex({ 'a.b': '2d' }), 'a.b_2d');
  assert.equal((await c.listIndexes().toArray()).length, 3);
});

h.test('large rings (thousands of vertices) are validated by a sweep: crossings and repeated vertices found, valid ones quick', async () => {
  const c = srv.freshDb('bigring').collection('c');
  await c.createIndex({ g: '2dsphere' });
  await c.insertMany([{ _id: 1, g: { type: 'Point', coordinates: [0, 0] } }, { _id: 2, g: { type: 'Point', coordinates: [179.5, 0.5] } },
    { _id: 3, g: { type: 'Point', coordinates: [30, 89] } }]);
  const circle = (cx, cy, r, n) => {
    const ring = [];
    for (let i = 0; i < n; i++) {
      const a = (2 * Math.PI * i) / n;
      let x = cx + r * Math.cos(a);
      if (x > 180) x -= 360;
      ring.push([x, cy + r * Math.sin(a)]);
    }
    return ring;
  };
  const poly = (ring) => ({ type: 'Polygon', coordinates: [[...ring, ring[0]]] });
  const within = (ring) => ids(c, { g: { $geoWithin: { $geometry: poly(ring) } } });
  // Valid: a 20,000-vertex circle (checked well within a 10 s maxTimeMS: comparing every pair of edges,
  // 2e8 arc tests, took over 30 s), one across the antimeridian, a ring around the pole.
  assert.deepEqual((await c.find({ g: { $geoWithin: { $geometry: poly(circle(0, 0, 5, 20000)) } } }).maxTimeMS(10000).toArray())
    .map((d) => d._id), [1]);
  assert.deepEqual(await within(circle(180, 0, 3, 5000)), [2]);
  const polar = [];
  for (let i = 0; i < 3000; i++) polar.push([-180 + (360 * i) / 3000, 85]);
  assert.deepEqual(await within(polar), [3]);
  // Two far vertices swapped: the ring crosses itself.
  const crossed = circle(0, 0, 5, 4000);
  [crossed[10], crossed[2000]] = [crossed[2000], crossed[10]];
  let e = await h.expectCode(within(crossed), 2);
  assert.match(e.message, /^Loop is not valid: .* Edges \d+ and \d+ cross\. Edge locations in degrees: /);
  // A vertex repeated (not next to itself): S2Loop::IsValid names where it was first seen and where again.
  const dup = circle(0, 0, 5, 4000);
  dup[3000] = dup[20];
  e = await h.expectCode(within(dup), 2);
  assert.match(e.message, /Duplicate vertices: 20 and 3000$/);
  // Stored values go through the same checks.
  e = await h.expectCode(c.insertOne({ _id: 9, g: poly(crossed) }), 16755);
  assert.match(e.message, /Edges \d+ and \d+ cross/);
  assert.equal(await c.countDocuments(), 3);
});

h.test('a large polygon with a large hole: the hole is checked by the sweep (crossing edges, one vertex inside), not vertex by vertex', async () => {
  const c = srv.freshDb('bighole').collection('c');
  await c.insertMany([{ _id: 1, loc: [0, 0] }, { _id: 2, loc: [0, 7] }, { _id: 3, loc: [0, 20] }]);
  // Enough documents that the scan looks at its deadline (every 128) after the region is parsed.
  await c.insertMany(Array.from({ length: 300 }, (_, i) => ({ _id: 10 + i, loc: [50, 50] })));
  const circle = (cx, cy, r, n) => {
    const ring = [];
    for (let i = 0; i < n; i++) ring.push([cx + r * Math.cos((2 * Math.PI * i) / n), cy + r * Math.sin((2 * Math.PI * i) / n)]);
    ring.push(ring[0]);
    return ring;
  };
  // 20,000 shell vertices, 10,000 hole vertices: well within 10 s (testing each hole vertex against the shell took 24 s).
  const ring = { type: 'Polygon', coordinates: [circle(0, 0, 10, 20000), circle(0, 0, 5, 10000)] };
  assert.deepEqual((await c.find({ loc: { $geoWithin: { $geometry: ring } } }).sort({ _id: 1 }).maxTimeMS(10000).toArray()).map((d) => d._id), [2]);
  // A large hole reaching out of the shell, or lying outside it, is refused as before.
  const re = /^Secondary loops not contained by first exterior loop - secondary loops must be holes: /;
  for (const hole of [circle(8, 0, 5, 1000), circle(30, 0, 5, 1000)]) {
    await h.expectCode(c.find({ loc: { $geoWithin: { $geometry: { type: 'Polygon', coordinates: [circle(0, 0, 10, 2000), hole] } } } }).toArray(), 2, re);
  }
});

h.test('$geoNear\'s metadata survives $replaceRoot / $replaceWith (copyMetaDataFrom), as the text score does', async () => {
  const c = srv.freshDb('metaroot').collection('c');
  await c.insertMany([{ _id: 1, loc: [0, 0] }, { _id: 2, loc: [1, 1] }]);
  await c.createIndex({ loc: '2dsphere' });
  const P = { type: 'Point', coordinates: [0, 0] };
  const r = await c.aggregate([{ $geoNear: { near: P } }, { $replaceWith: { id: '$_id' } },
    { $project: { id: 1, d: { $meta: 'geoNearDistance' }, p: { $meta: 'geoNearPoint' } } }]).toArray();
  assert.deepEqual(r.map((d) => [d.id, d.p]), [[1, [0, 0]], [2, [1, 1]]]);
  assert.equal(r[0].d, 0);
  assert.ok(r[1].d > 157000 && r[1].d < 158000, String(r[1].d));
  assert.deepEqual(Object.keys(r[1]), ['_id', 'id', 'd', 'p'].filter((k) => k in r[1]));
});

h.test('explain of a $near find: parsedQuery is the filter, the winning plan is GEO_NEAR_2DSPHERE / GEO_NEAR_2D over its index', async () => {
  const db = srv.freshDb('nearexplain');
  const s = db.collection('s');
  await s.insertMany([{ _id: 1, loc: { type: 'Point', coordinates: [0, 0] }, cat: 'a' }, { _id: 2, loc: { type: 'Point', coordinates: [1, 1] } }]);
  await s.createIndex({ loc: '2dsphere', cat: 1 });
  const filter = { loc: { $nearSphere: { $geometry: { type: 'Point', coordinates: [0, 0] } } }, cat: 'a' };
  for (const verbosity of ['queryPlanner', 'executionStats']) {
    const ex = await s.find(filter).explain(verbosity);
    assert.deepEqual(ex.queryPlanner.parsedQuery, filter);
    const wp = ex.queryPlanner.winningPlan;
    assert.deepEqual([wp.stage, wp.keyPattern, wp.indexName, wp.indexVersion], ['GEO_NEAR_2DSPHERE', { loc: '2dsphere', cat: 1 }, 'loc_2dsphere_cat_1', 2]);
    assert.ok(Array.isArray(wp.inputStages) && wp.inputStages.length === 1, JSON.stringify(wp));
  }
  const f = db.collection('f');
  await f.insertOne({ p: [1, 1] });
  await f.createIndex({ p: '2d' });
  const wp = (await f.find({ p: { $near: [0, 0] } }).limit(1).explain()).queryPlanner.winningPlan;
  assert.deepEqual([wp.stage, wp.limitAmount, wp.inputStage.stage, wp.inputStage.indexName], ['LIMIT', 1, 'GEO_NEAR_2D', 'p_2d']);
  // What a legacy $nearSphere uses when a field has both kinds: the 2d index, as the run does.
  await f.createIndex({ p: '2dsphere' });
  assert.equal((await f.find({ p: { $nearSphere: [0, 0] } }).explain()).queryPlanner.winningPlan.indexName, 'p_2d');
  assert.equal((await f.find({ p: { $near: { $geometry: { type: 'Point', coordinates: [0, 0] } } } }).explain()).queryPlanner.winningPlan.indexName, 'p_2dsphere');
});

h.test('$sort by {$meta: "geoNearDistance"} after $geoNear and in a $near find: farthest first (sort_pattern.cpp sorts $meta keys descending); 40218 without one', async () => {
  const db = srv.freshDb('metasort');
  const c = db.collection('c');
  await c.createIndex({ loc: '2dsphere' });
  await c.insertMany([3, 0, 4, 1, 2].map((i) => ({ _id: i, loc: { type: 'Point', coordinates: [i, 0] }, odd: i % 2 })));
  const P = { type: 'Point', coordinates: [0, 0] };
  const agg = await c.aggregate([{ $geoNear: { near: P, distanceField: 'd' } }, { $sort: { x: { $meta: 'geoNearDistance' } } }]).toArray();
  assert.deepEqual(agg.map((d) => d._id), [4, 3, 2, 1, 0]);
  assert.deepEqual(Object.keys(agg[0]), ['_id', 'loc', 'odd', 'd']);
  // As a secondary key, and without a distanceField.
  const two = await c.aggregate([{ $geoNear: { near: P } }, { $sort: { odd: 1, x: { $meta: 'geoNearDistance' } } }]).toArray();
  assert.deepEqual(two.map((d) => d._id), [4, 2, 0, 3, 1]);
  assert.deepEqual(Object.keys(two[0]), ['_id', 'loc', 'odd']);
  const f = await c.find({ loc: { $near: { $geometry: P } } }).sort({ x: { $meta: 'geoNearDistance' } }).limit(3).toArray();
  assert.deepEqual(f.map((d) => d._id), [4, 3, 2]);
  assert.deepEqual(Object.keys(f[0]), ['_id', 'loc', 'odd']);
  await h.expectCode(c.aggregate([{ $sort: { x: { $meta: 'geoNearDistance' } } }]).toArray(), 40218,
    /^query requires \$geoNear distance metadata, but it is not available$/);
  await h.expectCode(c.find({}).sort({ x: { $meta: 'geoNearDistance' } }).toArray(), 40218);
  // geoNearPoint is no sort key.
  await h.expectCode(c.aggregate([{ $geoNear: { near: P } }, { $sort: { x: { $meta: 'geoNearPoint' } } }]).toArray(), 31138,
    /^Illegal \$meta sort: \$meta: "geoNearPoint"$/);
});

h.test('the deprecated $uniqueDocs is ignored, but $geoWithin takes nothing after its shape (GeoExpression::parseQuery); $within and $geoIntersects take the last shape', async () => {
  const c = srv.freshDb('uniquedocs').collection('c');
  await c.createIndex({ loc: '2d' });
  await c.insertMany([0, 1, 2, 3, 4].map((i) => ({ _id: i, loc: [i, 0] })));
  const box = [[0, 0], [2, 2]];
  const sq = { type: 'Polygon', coordinates: [[[0, -1], [3, -1], [3, 1], [0, 1], [0, -1]]] };
  for (const hint of [{ $natural: 1 }, { loc: '2d' }]) {
    const ids = async (filter) => (await c.find(filter).hint(hint).sort({ _id: 1 }).toArray()).map((d) => d._id);
    assert.deepEqual(await ids({ loc: { $geoWithin: { $uniqueDocs: true, $box: box } } }), [0, 1, 2]);
    assert.deepEqual(await ids({ loc: { $within: { $box: box, $uniqueDocs: false } } }), [0, 1, 2]);
    assert.deepEqual(await ids({ loc: { $within: { $box: box, $center: [[4, 0], 0.5] } } }), [4]);
    assert.deepEqual(await ids({ loc: { $geoIntersects: { $uniqueDocs: 1, $geometry: sq } } }), [0, 1, 2, 3]);
    await h.expectCode(c.find({ loc: { $geoWithin: { $box: box, $uniqueDocs: true } } }).hint(hint).toArray(), 2,
      /^\$geoWithin doesn't accept multiple shapes \$geoWithin: \{ \$box: \[ \[ 0, 0 \], \[ 2, 2 \] \], \$uniqueDocs: true \}$/);
    await h.expectCode(c.find({ loc: { $geoWithin: { $box: box, $center: [[4, 0], 0.5] } } }).hint(hint).toArray(), 2,
      /^\$geoWithin doesn't accept multiple shapes/);
    await h.expectCode(c.find({ loc: { $geoWithin: { $uniqueDocs: true } } }).hint(hint).toArray(), 2,
      /^geo query doesn't have any geometry$/);
  }
});

h.test('$geoNear metadata read after a $facet or $group is missing, not an error (ExpressionMeta: hasGeoNearDistance() ? ... : Value(); the pipeline starts with $geoNear so its parse check passes)', async () => {
  const c = srv.freshDb('metalost').collection('c');
  await c.createIndex({ loc: '2dsphere' });
  await c.insertMany([{ _id: 1, loc: { type: 'Point', coordinates: [0, 0] } }, { _id: 2, loc: { type: 'Point', coordinates: [1, 0] } }]);
  const gn = { $geoNear: { near: { type: 'Point', coordinates: [0, 0] }, distanceField: 'd' } };
  assert.deepEqual(await c.aggregate([gn, { $facet: { a: [{ $count: 'n' }] } },
    { $project: { a: 1, x: { $meta: 'geoNearDistance' }, p: { $meta: 'geoNearPoint' } } }]).toArray(), [{ a: [{ n: 2 }] }]);
  assert.deepEqual(await c.aggregate([gn, { $group: { _id: null, n: { $sum: 1 } } },
    { $addFields: { x: { $meta: 'geoNearDistance' }, y: { $ifNull: [{ $meta: 'geoNearPoint' }, 'none'] } } }]).toArray(),
  [{ _id: null, n: 2, y: 'none' }]);
  // Inside the $facet the metadata is still there.
  const f = await c.aggregate([gn, { $facet: { a: [{ $project: { _id: 1, x: { $meta: 'geoNearDistance' } } }] } }]).toArray();
  assert.deepEqual(f[0].a.map((d) => d._id), [1, 2]);
  assert.equal(f[0].a[0].x, 0);
  assert.ok(f[0].a[1].x > 100000);
});

h.test('explain of a $near find with sort, skip, limit and projection: SORT (limitAmount skip + limit), SKIP, LIMIT and PROJECTION over GEO_NEAR, as the planner\'s analyzeDataAccess', async () => {
  const db = srv.freshDb('nearexplain2');
  const c = db.collection('c');
  await c.createIndex({ loc: '2d' });
  await c.insertMany([0, 1, 2, 3].map((i) => ({ _id: i, loc: [i, 0], a: i })));
  const q = { loc: { $near: [0, 0] } };
  // geo6.js: the sort applies to the near results.
  assert.deepEqual((await c.find(q).sort({ _id: -1 }).skip(1).limit(2).toArray()).map((d) => d._id), [2, 1]);
  let wp = (await c.find(q).sort({ _id: 1 }).limit(1).explain()).queryPlanner.winningPlan;
  assert.equal(wp.isCached, false);
  assert.deepEqual([wp.stage, wp.sortPattern, wp.limitAmount, wp.type, wp.inputStage.stage, wp.inputStage.indexName],
    ['SORT', { _id: 1 }, 1, 'simple', 'GEO_NEAR_2D', 'loc_2d'], JSON.stringify(wp));
  wp = (await c.find(q).sort({ a: -1 }).skip(1).limit(2).project({ a: 1 }).explain('executionStats')).queryPlanner.winningPlan;
  assert.deepEqual([wp.stage, wp.transformBy], ['PROJECTION_SIMPLE', { a: 1 }]);
  const skip = wp.inputStage;
  assert.deepEqual([skip.stage, skip.skipAmount, skip.inputStage.stage, skip.inputStage.limitAmount, skip.inputStage.inputStage.stage],
    ['SKIP', 1, 'SORT', 3, 'GEO_NEAR_2D']);
  wp = (await c.find(q).skip(2).limit(1).project({ d: { $add: ['$a', 1] } }).explain()).queryPlanner.winningPlan;
  assert.deepEqual([wp.stage, wp.inputStage.stage, wp.inputStage.limitAmount, wp.inputStage.inputStage.stage, wp.inputStage.inputStage.inputStage.stage],
    ['PROJECTION_DEFAULT', 'LIMIT', 1, 'SKIP', 'GEO_NEAR_2D']);
});

h.test('returnKey on a $near find answers the geo index keys (ReturnKeyStage reads the near scan\'s key data), not the documents', async () => {
  const db = srv.freshDb('nearreturnkey');
  const s = db.collection('s');
  await s.createIndex({ loc: '2dsphere', cat: 1 });
  await s.insertMany([2, 0, 1].map((i) => ({ _id: i, loc: { type: 'Point', coordinates: [i, 0] }, cat: `c${i}` })));
  const P = { type: 'Point', coordinates: [0, 0] };
  const near = await s.find({ loc: { $near: { $geometry: P } } }).returnKey(true).toArray();
  // The same keys an index scan of the same index finds the documents by.
  const keys = await s.find({ loc: { $geoWithin: { $centerSphere: [[0, 0], 1] } } }).hint('loc_2dsphere_cat_1').returnKey(true).toArray();
  assert.equal(near.length, 3);
  for (const k of near) assert.deepEqual(Object.keys(k), ['loc', 'cat']);
  assert.deepEqual(near.map((k) => k.cat), ['c0', 'c1', 'c2']);
  const byCat = new Map(keys.map((k) => [k.cat, k]));
  for (const k of near) assert.deepEqual(k, byCat.get(k.cat));
  const f = db.collection('f');
  await f.createIndex({ p: '2d' });
  await f.insertMany([{ _id: 1, p: [1, 1] }, { _id: 2, p: [5, 5] }]);
  const n2 = await f.find({ p: { $near: [4, 4] } }).sort({ _id: 1 }).limit(1).returnKey(true).toArray();
  const k2 = await f.find({ p: { $geoWithin: { $box: [[0, 0], [2, 2]] } } }).hint({ p: '2d' }).returnKey(true).toArray();
  assert.deepEqual(n2, k2);
  assert.deepEqual(Object.keys(n2[0]), ['p']);
});

h.test('explain and returnKey of a $near find name the index the run searches: a field with both a 2d and a 2dsphere index, one hidden', async () => {
  const db = srv.freshDb('nearbothkinds');
  const c = db.collection('c');
  await c.createIndex({ loc: '2d' });
  await c.createIndex({ loc: '2dsphere' });
  await c.insertMany([{ _id: 1, loc: [1, 1] }, { _id: 2, loc: [3, 3] }]);
  const stageOf = async (q) => {
    let wp = (await c.find(q).explain()).queryPlanner.winningPlan;
    while (wp && !/^GEO_NEAR/.test(wp.stage)) wp = wp.inputStage;
    return wp ? [wp.stage, wp.indexName] : null;
  };
  // A flat legacy search: the 2d index; a GeoJSON centre: the 2dsphere one.
  assert.deepEqual(await stageOf({ loc: { $near: [0, 0] } }), ['GEO_NEAR_2D', 'loc_2d']);
  assert.deepEqual(await stageOf({ loc: { $near: { $geometry: { type: 'Point', coordinates: [0, 0] } } } }),
    ['GEO_NEAR_2DSPHERE', 'loc_2dsphere']);
  // returnKey answers the keys of the index searched: those a hinted scan of that index finds the documents by.
  const keysOf = (hint, q) => c.find(q).hint(hint).sort({ _id: 1 }).returnKey(true).toArray();
  assert.deepEqual(await c.find({ loc: { $near: [0, 0] } }).returnKey(true).toArray(),
    await keysOf('loc_2d', { loc: { $geoWithin: { $box: [[0, 0], [5, 5]] } } }));
  const sk = await c.find({ loc: { $near: { $geometry: { type: 'Point', coordinates: [0, 0] } } } }).returnKey(true).toArray();
  assert.deepEqual(sk, await keysOf('loc_2dsphere', { loc: { $geoWithin: { $centerSphere: [[0, 0], 1] } } }));
  assert.notDeepEqual(sk, await keysOf('loc_2d', { loc: { $geoWithin: { $box: [[0, 0], [5, 5]] } } }));
  // Hide the 2dsphere index: a GeoJSON centre has no index to run on (291), and explain says so too.
  await db.command({ collMod: 'c', index: { name: 'loc_2dsphere', hidden: true } });
  await assert.rejects(c.find({ loc: { $near: { $geometry: { type: 'Point', coordinates: [0, 0] } } } }).toArray(), { code: 291 });
  assert.deepEqual(await stageOf({ loc: { $near: [0, 0] } }), ['GEO_NEAR_2D', 'loc_2d']);
});

h.test('a legacy $near / $nearSphere ignores a $uniqueDocs beside it (GeoNearExpression::parseLegacyQuery)', async () => {
  const c = srv.freshDb('nearuniquedocs').collection('c');
  await c.createIndex({ loc: '2d' });
  await c.insertMany([{ _id: 1, loc: [0, 0] }, { _id: 2, loc: [1, 0] }, { _id: 3, loc: [3, 0] }]);
  const ids = async (f) => (await c.find(f).toArray()).map((d) => d._id);
  assert.deepEqual(await ids({ loc: { $near: [0, 0], $uniqueDocs: true, $maxDistance: 1.5 } }), [1, 2]);
  assert.deepEqual(await ids({ loc: { $uniqueDocs: false, $nearSphere: [3, 0] } }), [3, 2, 1]);
  // Not beside a $near it is an unknown operator still.
  await h.expectCode(c.find({ loc: { $uniqueDocs: true } }).toArray(), 2, /^unknown operator: \$uniqueDocs$/);
});
