'use strict';
// Geospatial queries through the Node driver, to MongoDB 8.0 behaviour: the
// manual's `places` examples ($near with $minDistance/$maxDistance, $geoNear
// with distanceField / includeLocs / key, $geoWithin $centerSphere), 2dsphere
// and 2d indexes (creation, 2dsphereIndexVersion 3, validation of stored
// values: 16755, 13026, 13027), $geoWithin / $geoIntersects with and without
// an index over every GeoJSON type, legacy 2d shapes ($box, $polygon,
// $center), and the error codes of mongod's geoparser.cpp and
// document_source_geo_near.cpp.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

const R = 6378100; // mongod's kRadiusOfEarthInMeters

/* Great-circle distance in radians, written independently of the server (haversine). */
function hav(a, b) {
  const rad = Math.PI / 180;
  const dlat = (b[1] - a[1]) * rad, dlng = (b[0] - a[0]) * rad;
  const x = Math.sin(dlat / 2) ** 2 + Math.cos(a[1] * rad) * Math.cos(b[1] * rad) * Math.sin(dlng / 2) ** 2;
  return 2 * Math.asin(Math.sqrt(x));
}

function near(actual, expected, rel = 1e-9) {
  assert.ok(Math.abs(actual - expected) <= rel * Math.max(1, Math.abs(expected)), `${actual} != ${expected}`);
}

/* The manual's places collection (tutorial "Geospatial Queries"). */
async function places(tag, index = true) {
  const c = srv.freshDb(tag).collection('places');
  await c.insertMany([
    { _id: 1, name: 'Central Park', location: { type: 'Point', coordinates: [-73.97, 40.77] }, category: 'Parks' },
    { _id: 2, name: 'Sara D. Roosevelt Park', location: { type: 'Point', coordinates: [-73.9928, 40.7193] }, category: 'Parks' },
    { _id: 3, name: 'Polo Grounds', location: { type: 'Point', coordinates: [-73.9375, 40.8303] }, category: 'Stadiums' },
  ]);
  if (index) await c.createIndex({ location: '2dsphere' });
  return c;
}

async function names(cursor) {
  return (await cursor.toArray()).map((d) => d.name);
}

async function ids(c, filter) {
  return (await c.find(filter).sort({ _id: 1 }).toArray()).map((d) => d._id);
}

async function code(p) {
  try {
    await p;
  } catch (e) {
    return [e.code, e.message];
  }
  assert.fail('expected an error');
}

// ------------------------------------------------------------ the manual's examples

h.test('places: 2dsphere index shape, $near with $minDistance/$maxDistance, nearest first', async () => {
  const c = await places('near');
  const ix = (await c.listIndexes().toArray()).find((i) => i.name === 'location_2dsphere');
  assert.deepEqual(ix.key, { location: '2dsphere' });
  assert.equal(ix['2dsphereIndexVersion'], 3);
  const centre = { type: 'Point', coordinates: [-73.9667, 40.78] };
  assert.deepEqual(await names(c.find({ location: { $near: { $geometry: centre, $minDistance: 1000, $maxDistance: 5000 } } })),
    ['Central Park']);
  assert.deepEqual(await names(c.find({ location: { $near: { $geometry: centre } } })),
    ['Central Park', 'Polo Grounds', 'Sara D. Roosevelt Park']);
  assert.deepEqual(await names(c.find({ location: { $nearSphere: { $geometry: centre, $maxDistance: 7000 } } })),
    ['Central Park', 'Polo Grounds']);
  // Other clauses, limit and projection compose with the distance order.
  const r = await c.find({ location: { $near: { $geometry: centre } }, category: 'Parks' }, { projection: { name: 1, _id: 0 } })
    .limit(1).toArray();
  assert.deepEqual(r, [{ name: 'Central Park' }]);
  // A legacy pair on a 2dsphere index: $nearSphere distances in radians.
  const rad = hav([-73.9667, 40.78], [-73.97, 40.77]);
  assert.deepEqual(await names(c.find({ location: { $nearSphere: [-73.9667, 40.78], $maxDistance: rad * 1.001 } })),
    ['Central Park']);
});

h.test('$geoNear: the manual\'s distanceField/includeLocs/query and key examples', async () => {
  const c = await places('geonear');
  const r = await c.aggregate([{ $geoNear: {
    near: { type: 'Point', coordinates: [-73.99279, 40.719296] }, distanceField: 'dist.calculated', maxDistance: 2,
    query: { category: 'Parks' }, includeLocs: 'dist.location', spherical: true } }]).toArray();
  assert.equal(r.length, 1);
  assert.equal(r[0].name, 'Sara D. Roosevelt Park');
  near(r[0].dist.calculated, 0.9539931676365992, 1e-6);
  assert.deepEqual(r[0].dist.location, { type: 'Point', coordinates: [-73.9928, 40.7193] });

  const k = await c.aggregate([{ $geoNear: { near: { type: 'Point', coordinates: [-73.98142, 40.71782] }, key: 'location',
    distanceField: 'dist.calculated', query: { category: 'Parks' } } }, { $limit: 5 }]).toArray();
  assert.deepEqual(k.map((d) => d.name), ['Sara D. Roosevelt Park', 'Central Park']);
  near(k[0].dist.calculated, 974.175764916902, 1e-6);
  near(k[1].dist.calculated, hav([-73.98142, 40.71782], [-73.97, 40.77]) * R, 1e-6);

  // minDistance, distanceMultiplier (to kilometres), later stages.
  const m = await c.aggregate([{ $geoNear: { near: { type: 'Point', coordinates: [-73.99279, 40.719296] }, distanceField: 'km',
    minDistance: 2, distanceMultiplier: 0.001 } }, { $project: { _id: 0, name: 1, km: 1 } }]).toArray();
  assert.deepEqual(m.map((d) => d.name), ['Central Park', 'Polo Grounds']);
  near(m[0].km, hav([-73.99279, 40.719296], [-73.97, 40.77]) * R / 1000, 1e-6);
  // A legacy near point with spherical: true measures radians.
  const l = await c.aggregate([{ $geoNear: { near: [-73.97, 40.77], distanceField: 'd', spherical: true } }]).toArray();
  assert.equal(l[0].name, 'Central Park');
  assert.equal(l[0].d, 0);
  assert.equal(l[1].name, 'Sara D. Roosevelt Park');
  near(l[1].d, hav([-73.97, 40.77], [-73.9928, 40.7193]), 1e-6);
});

h.test('$geoWithin $centerSphere and $geometry, and counts, with and without an index', async () => {
  for (const index of [false, true]) {
    const c = await places(`within${index}`, index);
    // The manual: within 5 miles of a point (radius in radians: miles / 3963.2).
    assert.deepEqual(await ids(c, { location: { $geoWithin: { $centerSphere: [[-73.93414657, 40.82302903], 5 / 3963.2] } } }),
      [1, 3]);
    const box = { type: 'Polygon', coordinates: [[[-74, 40.7], [-73.9, 40.7], [-73.9, 40.8], [-74, 40.8], [-74, 40.7]]] };
    assert.deepEqual(await ids(c, { location: { $geoWithin: { $geometry: box } } }), [1, 2]);
    assert.equal(await c.countDocuments({ location: { $geoWithin: { $geometry: box } } }), 2);
    // $within is the old name.
    assert.deepEqual(await ids(c, { location: { $within: { $geometry: box } } }), [1, 2]);
    assert.deepEqual(await ids(c, { location: { $not: { $geoWithin: { $geometry: box } } } }), [3]);
  }
});

// ------------------------------------------------------------ GeoJSON types

h.test('$geoWithin and $geoIntersects over every GeoJSON type (polygons with holes, multi, collections)', async () => {
  const c = srv.freshDb('types').collection('shapes');
  await c.createIndex({ g: '2dsphere' });
  const sq = (x0, y0, x1, y1) => [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]];
  await c.insertMany([
    { _id: 1, g: { type: 'Point', coordinates: [5, 5] } },
    { _id: 2, g: { type: 'LineString', coordinates: [[1, 1], [2, 2]] } },
    { _id: 3, g: { type: 'LineString', coordinates: [[5, 5], [15, 5]] } },           // crosses the square's edge
    { _id: 4, g: { type: 'Polygon', coordinates: [sq(2, 2, 3, 3)] } },
    { _id: 5, g: { type: 'Polygon', coordinates: [sq(20, 20, 30, 30)] } },
    { _id: 6, g: { type: 'MultiPoint', coordinates: [[1, 1], [9, 9]] } },
    { _id: 7, g: { type: 'MultiPoint', coordinates: [[1, 1], [50, 50]] } },
    { _id: 8, g: { type: 'MultiLineString', coordinates: [[[40, 40], [41, 41]], [[42, 42], [43, 43]]] } },
    { _id: 9, g: { type: 'MultiPolygon', coordinates: [[sq(1, 1, 2, 2)], [sq(25, 25, 26, 26)]] } },
    { _id: 10, g: { type: 'GeometryCollection', geometries: [{ type: 'Point', coordinates: [3, 3] }, { type: 'LineString', coordinates: [[7, 7], [8, 8]] }] } },
    { _id: 11, g: [1, 9] },                                                             // a legacy pair
    { _id: 12, g: { type: 'Polygon', coordinates: [sq(0.5, 0.5, 9.5, 9.5), sq(3.9, 3.9, 6.1, 6.1)] } }, // a square with a hole
    { _id: 13, other: 1 },                                                                // no location
  ]);
  const square = { type: 'Polygon', coordinates: [sq(0, 0, 10, 10)] };
  assert.deepEqual(await ids(c, { g: { $geoWithin: { $geometry: square } } }), [1, 2, 4, 6, 10, 11, 12]);
  assert.deepEqual(await ids(c, { g: { $geoIntersects: { $geometry: square } } }), [1, 2, 3, 4, 6, 7, 9, 10, 11, 12]);
  // A hole: the point (5, 5) is in the square's hole, (1, 1) is not; 12's own hole holds the region's.
  const holed = { type: 'Polygon', coordinates: [sq(0, 0, 10, 10), sq(4, 4, 6, 6)] };
  assert.deepEqual(await ids(c, { g: { $geoWithin: { $geometry: holed } } }), [2, 4, 6, 10, 11, 12]);
  // MultiPolygon regions.
  const multi = { type: 'MultiPolygon', coordinates: [[sq(0, 0, 3.5, 3.5)], [sq(19, 19, 31, 31)]] };
  assert.deepEqual(await ids(c, { g: { $geoWithin: { $geometry: multi } } }), [2, 4, 5, 9]);
  // $geoIntersects with a point, a line and a collection.
  assert.deepEqual(await ids(c, { g: { $geoIntersects: { $geometry: { type: 'Point', coordinates: [25.5, 25.5] } } } }), [5, 9]);
  assert.deepEqual(await ids(c, { g: { $geoIntersects: { $geometry: { type: 'LineString', coordinates: [[40, 41], [41, 40]] } } } }), [8]);
  assert.deepEqual(await ids(c, { g: { $geoIntersects: { $geometry: { type: 'GeometryCollection', geometries: [
    { type: 'Point', coordinates: [5, 5] }, { type: 'Point', coordinates: [43, 43] }] } } } }), [1, 3, 8]);
  // $near over mixed shapes: the distance to a shape is to its nearest point (0 inside a polygon).
  const r = await c.aggregate([{ $geoNear: { near: { type: 'Point', coordinates: [2.5, 2.5] }, distanceField: 'd', maxDistance: 1 } }]).toArray();
  assert.deepEqual(r.map((d) => d._id).sort((a, b) => a - b), [4, 12]);
  assert.ok(r.every((d) => d.d === 0));
});

// ------------------------------------------------------------ validation

h.test('2dsphere: stored values are validated (16755 with mongod\'s reasons), also at index build', async () => {
  const db = srv.freshDb('valid');
  const c = db.collection('c');
  await c.createIndex({ loc: '2dsphere', n: 1 });
  const bad = [
    [{ type: 'Point', coordinates: [200, 10] }, 'Longitude/latitude is out of bounds, lng: 200 lat: 10'],
    [{ type: 'Point', coordinates: [NaN, 1] }, 'Point coordinates must be finite numbers'],
    [{ type: 'Polygon', coordinates: [[[0, 0], [1, 2], [2, 3]]] }, 'Loop is not closed, first vertex does not equal last vertex:'],
    [{ type: 'Polygon', coordinates: [[[0, 0], [1, 2], [0, 0]]] }, 'Loop must have at least 3 different vertices, 2 unique vertices were provided:'],
    [{ type: 'Polygon', coordinates: [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]] }, 'Edges 0 and 2 cross'],
    [{ type: 'Polygon', coordinates: 'hi' }, 'Polygon coordinates must be an array, instead got type string'],
    [{ type: 'LineString', coordinates: [5.5, 5] }, 'GeoJSON coordinates must be an array, instead got type double'],
    [{ type: 'LineString', coordinates: [[1, 1]] }, 'GeoJSON LineString must have at least 2 vertices'],
    [{ type: 'Polygon', coordinates: [[[0, 0], [10, 0], [10, 10], [0, 0]], [[20, 20], [21, 20], [21, 21], [20, 20]]] }, 'Secondary loops not contained by first exterior loop'],
    [{ type: 'GeometryCollection', geometries: [{ type: 'GeometryCollection', geometries: [] }] }, 'GeometryCollections cannot be nested'],
    [{ type: 'MultiPoint', coordinates: [] }, 'MultiPoint coordinates must have at least 1 element'],
    [{ type: 'Square', coordinates: [] }, 'unknown GeoJSON type'],
    ['here', 'geo element must be an array or object'],
  ];
  for (const [loc, why] of bad) {
    const [cd, msg] = await code(c.insertOne({ loc }));
    assert.equal(cd, 16755, msg);
    assert.ok(msg.startsWith('Can\'t extract geo keys'), msg);
    assert.ok(msg.includes(why), `${msg} should include ${why}`);
  }
  // Documents without the field, null, and an empty array (Mongoose's default for [Number]) are simply not indexed.
  await c.insertMany([{ n: 1 }, { loc: null }, { loc: { type: 'Point', coordinates: [1, 2, 3] } }, { n: 2, loc: [] }]);
  assert.equal(await c.countDocuments(), 4);
  assert.deepEqual((await c.find({ loc: { $nearSphere: [1, 2] } }).toArray()).map((x) => x.loc), [{ type: 'Point', coordinates: [1, 2, 3] }]);
  await c.deleteOne({ n: 2 });
  // An update that makes a location invalid is refused too.
  const [uc] = await code(c.updateOne({ n: 1 }, { $set: { loc: [500, 500] } }));
  assert.equal(uc, 16755);
  // Building the index over an existing bad document fails the same way.
  const d = db.collection('d');
  await d.insertOne({ loc: { type: 'Point', coordinates: [0, 95] } });
  const [bc, bm] = await code(d.createIndex({ loc: '2dsphere' }));
  assert.equal(bc, 16755, bm);
  // Without an index anything may be stored, and a geo query just does not match it.
  assert.deepEqual(await ids(d, { loc: { $geoWithin: { $centerSphere: [[0, 0], 3] } } }), []);
});

h.test('query operand errors: codes and messages', async () => {
  const c = await places('qerr');
  const cases = [
    [{ location: { $geoWithin: { $geometry: { type: 'Point', coordinates: [1, 2] } } } }, 2, '$within not supported with provided geometry'],
    [{ location: { $geoWithin: { box: [[5, 51], [7, 52]] } } }, 2, 'unknown geo specifier: box'],
    [{ location: { $geoWithin: { $box: [[5, 51]] } } }, 2, 'Point must be an array or object'],
    [{ location: { $geoWithin: { $polygon: [[0, 0], [1, 1]] } } }, 2, 'Polygon must have at least 3 points, instead got 2 vertices'],
    [{ location: { $geoWithin: { $centerSphere: [[0, 0], -1] } } }, 2, 'Radius must be a non-negative number'],
    [{ location: { $geoWithin: { $center: [[0, 0], 1, 2] } } }, 2, 'Only 2 fields allowed for circular region'],
    [{ location: { $geoIntersects: { $geometry: { type: 'Polygon', coordinates: [[[0, 0], [1, 1], [1, 0]]] } } } }, 2, 'Loop is not closed'],
    [{ location: { $geoIntersects: { $geometry: { type: 'Point', coordinates: [0, 91] } } } }, 2, 'Longitude/latitude is out of bounds, lng: 0 lat: 91'],
    [{ location: { $geoIntersects: { $geometry: {} } } }, 2, 'unknown GeoJSON type: {}'],
    [{ location: { $near: { $geometry: { type: 'Point', coordinates: [0, 0] }, $maxDistance: -1 } } }, 2, '$maxDistance must be non-negative'],
    [{ location: { $near: { $geometry: { type: 'LineString', coordinates: [[0, 0], [1, 1]] } } } }, 2, 'invalid point in geo near query $geometry argument: { type: "LineString"'],
    [{ location: { $near: { $geometry: [1, 2] } } }, 2, '$near requires geojson point, given [ 1, 2 ]'],
    [{ location: { $near: { $maxDistance: 1 } } }, 2, 'invalid point provided to geo near query: { $maxDistance: 1 }'],
    [{ location: { $near: { $geometry: 5, $maxDistance: 1 } } }, 2, '$geometry is required for geo near query'],
    [{ location: { $near: { $geometry: { type: 'Point', coordinates: [0, 0] } }, $maxDistance: 1 } }, 2, 'geo near accepts just one argument when querying for a GeoJSON point'],
    [{ location: { $near: [0, 0], $maxDistance: 'far' } }, 16895, '$maxDistance must be a number'],
    [{ location: { $near: [0, 0], $maxDistance: -2 } }, 16896, '$maxDistance must be non-negative'],
    [{ location: { $near: [0, 0], $minDistance: 'near' } }, 16893, '$minDistance must be a number'],
    [{ location: { $near: [0, 0], $minDistance: -2 } }, 16894, '$minDistance must be non-negative'],
    [{ location: { $near: [0, 0], $exists: true } }, 34413, 'invalid argument in geo near query: $exists'],
    [{ location: { $near: [0, 0, -1] } }, 18522, 'max distance must be non-negative'],
    [{ location: { $nearSphere: [200, 0] } }, 2, 'Legacy point is out of bounds for spherical query'],
    [{ $or: [{ location: { $near: [0, 0] } }, { name: 'x' }] }, 2, 'geoNear must be top-level expr'],
    [{ location: { $near: [0, 0] }, $and: [{ location: { $nearSphere: [0, 0] } }] }, 2, 'Too many geoNear expressions'],
  ];
  const [sn, sm] = await code(c.find({ location: { $near: [0, 0] } }).sort({ $natural: 1 }).toArray());
  assert.deepEqual([sn, sm], [2, 'geoNear expression not allowed with $natural sort order']);
  const [hn, hm] = await code(c.find({ location: { $near: [0, 0] } }).hint({ $natural: 1 }).toArray());
  assert.deepEqual([hn, hm], [2, 'geoNear expression not allowed with $natural hint']);
  // In a top-level $and the clause counts as top level.
  assert.deepEqual(await names(c.find({ $and: [{ category: 'Parks' }, { location: { $near: { $geometry: { type: 'Point', coordinates: [-73.9667, 40.78] } } } }] })),
    ['Central Park', 'Sara D. Roosevelt Park']);
  for (const [filter, cd, msg] of cases) {
    const [got, m] = await code(c.find(filter).toArray());
    assert.equal(got, cd, `${JSON.stringify(filter)}: ${m}`);
    assert.ok(m.includes(msg), `${m} should include ${msg}`);
  }
});

h.test('$near / $geoNear need a geo index (291, 27) and $geoNear\'s own checks', async () => {
  const db = srv.freshDb('need');
  const c = db.collection('c');
  await c.insertOne({ loc: [1, 1], other: [2, 2] });
  const [n1, m1] = await code(c.find({ loc: { $near: [0, 0] } }).toArray());
  assert.equal(n1, 291);
  assert.ok(m1.includes('unable to find index for $geoNear query'), m1);
  const [n2, m2] = await code(c.aggregate([{ $geoNear: { near: [0, 0], distanceField: 'd' } }]).toArray());
  assert.deepEqual([n2, m2], [27, '$geoNear requires a 2d or 2dsphere index, but none were found']);
  await c.createIndex({ loc: '2dsphere' });
  await c.createIndex({ other: '2dsphere' });
  const [n3, m3] = await code(c.aggregate([{ $geoNear: { near: [0, 0], distanceField: 'd' } }]).toArray());
  assert.equal(n3, 27);
  assert.ok(m3.startsWith('There is more than one 2dsphere index on ') && m3.endsWith('.c; unsure which to use for $geoNear'), m3);
  // key picks one; a key without a geo index is 291.
  const ok = await c.aggregate([{ $geoNear: { near: [0, 0], distanceField: 'd', key: 'other', spherical: true } }]).toArray();
  near(ok[0].d, hav([0, 0], [2, 2]), 1e-9);
  // A legacy pair searched flat ($near, or $geoNear without spherical) cannot use a 2dsphere index
  // (geonear_cmd_input_validation.js): 291, where it was measured on the sphere anyway.
  const flat = 'unable to find index for $geoNear query';
  for (const run of [() => c.aggregate([{ $geoNear: { near: [0, 0], distanceField: 'd', key: 'other' } }]).toArray(),
    () => c.aggregate([{ $geoNear: { near: [0, 0], distanceField: 'd', key: 'other', spherical: false } }]).toArray(),
    () => c.find({ loc: { $near: [0, 0] } }).toArray()]) {
    const [n, m] = await code(run());
    assert.equal(n, 291, m);
    assert.ok(m.includes(flat), m);
  }
  // $nearSphere with a legacy pair and a GeoJSON $near are spherical: the 2dsphere index answers them.
  assert.equal((await c.find({ loc: { $nearSphere: [0, 0] } }).toArray()).length, 1);
  assert.equal((await c.find({ loc: { $near: { $geometry: { type: 'Point', coordinates: [0, 0] } } } }).toArray()).length, 1);
  const [n4] = await code(c.aggregate([{ $geoNear: { near: [0, 0], distanceField: 'd', key: 'nothing' } }]).toArray());
  assert.equal(n4, 291);
  const spec = [
    [{ $geoNear: { distanceField: 'd' } }, 5860400],
    [{ $geoNear: { near: 5, distanceField: 'd' } }, 5860401],
    [{ $geoNear: { near: [0, 0], distanceField: 1 } }, 16606],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', includeLocs: 1 } }, 16607],
    [{ $geoNear: { near: [0, 0], distanceField: '' } }, 40352],
    [{ $geoNear: { near: [0, 0], distanceField: '$d' } }, 16410],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', includeLocs: 'a..b' } }, 15998],
    [{ $geoNear: { near: [0, 0], distanceField: 'd.' } }, 40353],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', limit: 1 } }, 50858],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', num: 1 } }, 50857],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', collation: { locale: 'en' } } }, 40227],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', bogus: 1 } }, 2],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', key: 1 } }, 14],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', key: '' } }, 2],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', query: 1 } }, 14],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', maxDistance: 'x' } }, 14],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', minDistance: -1 } }, 2],
    [{ $geoNear: { near: [0, 0], distanceField: 'd', distanceMultiplier: -1 } }, 2],
  ];
  for (const [stage, cd] of spec) {
    const [got, m] = await code(c.aggregate([stage]).toArray());
    assert.equal(got, cd, `${JSON.stringify(stage)}: ${m}`);
  }
  // $near needs a sort: refused in $match (so in countDocuments) and in $geoNear's query.
  const [c1, cm] = await code(c.countDocuments({ loc: { $near: [0, 0] } }));
  assert.equal(c1, 5626500);
  assert.ok(cm.startsWith('$geoNear, $near, and $nearSphere are not allowed in this context'), cm);
  assert.equal((await code(c.aggregate([{ $match: { $or: [{ loc: { $nearSphere: [0, 0] } }] } }]).toArray()))[0], 5626500);
  assert.equal((await code(c.aggregate([{ $geoNear: { near: [0, 0], key: 'loc', query: { other: { $near: [1, 1] } } } }]).toArray()))[0], 5626500);
  const [f1, fm] = await code(c.aggregate([{ $match: {} }, { $geoNear: { near: [0, 0], distanceField: 'd', key: 'loc' } }]).toArray());
  assert.deepEqual([f1, fm], [40602, '$geoNear is only valid as the first stage in a pipeline']);
});

// ------------------------------------------------------------ legacy 2d

h.test('2d index: legacy pairs, $near flat distances, $box / $polygon / $center, min/max and bits options', async () => {
  const db = srv.freshDb('flat');
  const c = db.collection('c');
  assert.equal(await c.createIndex({ loc: '2d' }), 'loc_2d');
  await c.insertMany([
    { _id: 1, loc: [0, 0] }, { _id: 2, loc: [3, 4] }, { _id: 3, loc: { x: 1, y: 1 } }, { _id: 4, loc: [-10, 10] },
    { _id: 5, loc: [[50, 50], [2, 0]] }, // several locations: the nearest counts
    { _id: 6, name: 'no location' },
  ]);
  assert.deepEqual((await c.find({ loc: { $near: [0, 0] } }).toArray()).map((d) => d._id), [1, 3, 5, 2, 4]);
  assert.deepEqual((await c.find({ loc: { $near: [0, 0], $maxDistance: 2 } }).toArray()).map((d) => d._id), [1, 3, 5]);
  const g = await c.aggregate([{ $geoNear: { near: [0, 0], distanceField: 'd', includeLocs: 'at' } }]).toArray();
  assert.deepEqual(g.map((d) => d._id), [1, 3, 5, 2, 4]);
  [0, Math.SQRT2, 2, 5, Math.hypot(10, 10)].forEach((want, i) => near(g[i].d, want, 1e-12));
  assert.deepEqual(g[2].at, [2, 0]);
  assert.deepEqual(await ids(c, { loc: { $geoWithin: { $box: [[0, 0], [3, 4]] } } }), [1, 2, 3, 5]);
  assert.deepEqual(await ids(c, { loc: { $geoWithin: { $polygon: [[-1, -1], [4, -1], [4, 5]] } } }), [1, 3, 5]);
  assert.deepEqual(await ids(c, { loc: { $geoWithin: { $center: [[0, 0], 1.5] } } }), [1, 3]);
  // Stored values are checked against the 2d index.
  assert.equal((await code(c.insertOne({ loc: [1, 'a'] })))[0], 13026);
  assert.equal((await code(c.insertOne({ loc: [200, 0] })))[0], 13027);
  assert.equal((await code(c.insertOne({ loc: [] })))[0], 13067);
  assert.equal((await code(c.insertOne({ loc: [1] })))[0], 13068);
  // A 2d index cannot answer a GeoJSON centre (291); explain shows the $geoNear a $near find runs.
  const [gc] = await code(c.find({ loc: { $near: { $geometry: { type: 'Point', coordinates: [0, 0] } } } }).toArray());
  assert.equal(gc, 291);
  const ex = await c.find({ loc: { $near: [0, 0] }, _id: { $gt: 1 } }).explain();
  assert.deepEqual(ex.stages.map((st) => Object.keys(st)[0]), ['$cursor', '$geoNear']);
  // mongod's plan shape (GEO_NEAR_2D over the index), the find's filter as parsedQuery; the rest of the filter narrows the scan.
  assert.deepEqual(ex.queryPlanner.parsedQuery, { loc: { $near: [0, 0] }, _id: { $gt: 1 } });
  const wp = ex.queryPlanner.winningPlan;
  assert.deepEqual([wp.stage, wp.keyPattern, wp.indexName], ['GEO_NEAR_2D', { loc: '2d' }, 'loc_2d']);
  assert.deepEqual(wp.inputStages[0].inputStage.indexBounds, { _id: ['(1, inf.0]'] });
  // mongod's 2d index rules: one 2d field, first, 1..32 bits (GeoHashConverter::createFromDoc: 72).
  assert.equal((await code(db.collection('r').createIndex({ a: '2d', b: '2d' })))[0], 16800);
  assert.equal((await code(db.collection('r').createIndex({ a: 1, b: '2d' })))[0], 16801);
  assert.equal((await code(db.collection('r').createIndex({ a: '2d' }, { bits: 33 })))[0], 72);
  assert.equal(await db.collection('r').createIndex({ a: '2d', b: 1 }, { bits: 32 }), 'a_2d_b_1');
  // min / max / bits are kept and applied.
  const w = db.collection('w');
  await w.createIndex({ p: '2d' }, { min: 0, max: 1000, bits: 32 });
  const spec = (await w.listIndexes().toArray()).find((i) => i.name === 'p_2d');
  assert.deepEqual([spec.min, spec.max, spec.bits], [0, 1000, 32]);
  await w.insertOne({ p: [999, 500] });
  assert.equal((await code(w.insertOne({ p: [-1, 5] })))[0], 13027);
});

h.test('hostile input: a 3,000-vertex polygon, NaN, deep nesting: answered, never a crash', async () => {
  const c = await places('hostile');
  const ring = [];
  for (let i = 0; i < 3000; i++) {
    const a = (2 * Math.PI * i) / 3000;
    ring.push([-73.97 + 0.5 * Math.cos(a), 40.77 + 0.5 * Math.sin(a)]);
  }
  ring.push(ring[0]);
  const circle = { type: 'Polygon', coordinates: [ring] };
  assert.deepEqual(await ids(c, { location: { $geoWithin: { $geometry: circle } } }), [1, 2, 3]);
  await c.insertOne({ _id: 4, location: circle });
  assert.deepEqual(await ids(c, { location: { $geoIntersects: { $geometry: { type: 'Point', coordinates: [-73.9, 40.8] } } } }), [4]);
  const [nc] = await code(c.find({ location: { $geoWithin: { $centerSphere: [[NaN, 0], 1] } } }).toArray());
  assert.equal(nc, 2);
  const [hc, hm] = await code(c.find({ location: { $near: [NaN, 0] } }).toArray());
  assert.equal(hc, 2);
  assert.ok(hm.startsWith('invalid point provided to geo near query'), hm);
  let deep = { type: 'Point', coordinates: [0, 0] };
  for (let i = 0; i < 50; i++) deep = { type: 'GeometryCollection', geometries: [deep] };
  assert.equal((await code(c.insertOne({ location: deep })))[0], 16755);
  assert.equal(await c.countDocuments(), 4);
});

h.test('$near over many documents: nearest first across getMore batches, with skip and sort by distance only', async () => {
  const c = srv.freshDb('many').collection('pts');
  await c.createIndex({ p: '2dsphere' });
  const docs = [];
  for (let i = 0; i < 2000; i++) docs.push({ _id: i, p: { type: 'Point', coordinates: [(i * 37) % 360 - 180, ((i * 17) % 170) - 85] } });
  await c.insertMany(docs);
  const centre = [10, 20];
  const want = docs.map((d) => [hav(centre, d.p.coordinates), d._id]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map((x) => x[1]);
  const got = (await c.find({ p: { $nearSphere: { $geometry: { type: 'Point', coordinates: centre } } } }).batchSize(150).toArray()).map((d) => d._id);
  assert.equal(got.length, 2000);
  // Equal distances may tie; compare distances rather than ids at ties.
  const dist = new Map(docs.map((d) => [d._id, hav(centre, d.p.coordinates)]));
  got.forEach((id, i) => near(dist.get(id), dist.get(want[i]), 1e-9));
  // A following $limit keeps only the nearest (top-k while streaming): the same prefix, ties in the same order.
  const full = (await c.aggregate([{ $geoNear: { near: { type: 'Point', coordinates: centre }, distanceField: 'd' } }]).toArray()).map((d) => d._id);
  for (const lim of [1, 7, 150]) {
    const top = (await c.aggregate([{ $geoNear: { near: { type: 'Point', coordinates: centre }, distanceField: 'd' } }, { $skip: 3 }, { $limit: lim }]).toArray()).map((d) => d._id);
    assert.deepEqual(top, full.slice(3, 3 + lim));
  }
  // With $maxDistance the scan is narrowed through the index (a polygon around the cap), same answer.
  for (const maxm of [0, 50000, 900000, 3000000]) {
    const r = await c.find({ p: { $near: { $geometry: { type: 'Point', coordinates: centre }, $maxDistance: maxm } } }).toArray();
    const expect = want.filter((id) => dist.get(id) * R <= maxm);
    assert.equal(r.length, expect.length, `maxDistance ${maxm}`);
    r.forEach((d, i) => near(dist.get(d._id), dist.get(expect[i]), 1e-9));
  }
  const ex = await c.find({ p: { $near: { $geometry: { type: 'Point', coordinates: centre }, $maxDistance: 900000 } } }).explain();
  const wp = ex.queryPlanner.winningPlan;
  assert.deepEqual([wp.stage, wp.indexName], ['GEO_NEAR_2DSPHERE', 'p_2dsphere'], JSON.stringify(wp));
  assert.equal(wp.inputStages[0].inputStage.indexName, 'p_2dsphere', JSON.stringify(wp)); // the scan is narrowed through the index
  const page = (await c.find({ p: { $near: { $geometry: { type: 'Point', coordinates: centre } } } }).skip(10).limit(5).toArray()).map((d) => d._id);
  assert.deepEqual(page.map((id) => dist.get(id)), got.slice(10, 15).map((id) => dist.get(id)));
});

h.test('$geoNear in a $lookup sub-pipeline reads the foreign collection\'s index; in $facet it is 40600', async () => {
  const db = srv.freshDb('lookup');
  const shops = db.collection('shops');
  await shops.createIndex({ at: '2dsphere' });
  await shops.insertMany([
    { _id: 's1', at: { type: 'Point', coordinates: [-73.97, 40.771] } },
    { _id: 's2', at: { type: 'Point', coordinates: [-73.9928, 40.72] } },
  ]);
  const towns = db.collection('towns');
  await towns.insertMany([{ _id: 't1', centre: [-73.97, 40.77] }, { _id: 't2', centre: [-73.99, 40.72] }]);
  const r = await towns.aggregate([
    { $lookup: { from: 'shops', let: { c: '$centre' }, as: 'nearest', pipeline: [
      { $geoNear: { near: { type: 'Point', coordinates: [-73.97, 40.77] }, distanceField: 'd' } }, { $limit: 1 }, { $project: { _id: 1 } }] } },
    { $sort: { _id: 1 } },
  ]).toArray();
  assert.deepEqual(r.map((t) => t.nearest), [[{ _id: 's1' }], [{ _id: 's1' }]]);
  const [fc, fm] = await code(shops.aggregate([{ $facet: { a: [{ $geoNear: { near: [0, 0], distanceField: 'd' } }] } }]).toArray());
  assert.deepEqual([fc, fm], [40600, '$geoNear is not allowed to be used within a $facet stage']);
});

h.test('2dsphere bounds: $geoWithin / $geoIntersects use the index (IXSCAN) and answer as a collection scan does', async () => {
  const db = srv.freshDb('diff');
  const ix = db.collection('ix'), scan = db.collection('scan');
  await ix.createIndex({ g: '2dsphere' });
  let seed = 7;
  const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const docs = [];
  for (let i = 0; i < 600; i++) {
    const x = rnd() * 360 - 180, y = rnd() * 170 - 85, k = rnd();
    let g;
    if (k < 0.5) g = { type: 'Point', coordinates: [x, y] };
    else if (k < 0.6) g = [x, y];
    else if (k < 0.8) {
      const d = rnd() * 20 + 0.1;
      g = { type: 'LineString', coordinates: [[x, y], [Math.max(-180, Math.min(180, x + d)), Math.max(-89, Math.min(89, y + d / 2))]] };
    } else {
      const d = rnd() * 40 + 0.5, x2 = Math.min(180, x + d), y2 = Math.min(89, y + d / 2);
      g = { type: 'Polygon', coordinates: [[[x, y], [x2, y], [x2, y2], [x, y2], [x, y]]] };
    }
    docs.push({ _id: i, g });
  }
  // A pole-holding polygon and antimeridian-touching points.
  docs.push({ _id: 1000, g: { type: 'Polygon', coordinates: [[[0, 80], [120, 80], [-120, 80], [0, 80]]] } });
  docs.push({ _id: 1001, g: { type: 'Point', coordinates: [180, 10] } });
  docs.push({ _id: 1002, g: { type: 'Point', coordinates: [-180, -10] } });
  await ix.insertMany(docs);
  await scan.insertMany(docs);
  const queries = [
    { $geoWithin: { $centerSphere: [[0, 0], 0.3] } },
    { $geoWithin: { $centerSphere: [[179.5, 0], 0.2] } },
    { $geoWithin: { $centerSphere: [[0, 88], 0.1] } },
    { $geoWithin: { $geometry: { type: 'Polygon', coordinates: [[[-10, -10], [30, -10], [30, 40], [-10, 40], [-10, -10]]] } } },
    { $geoWithin: { $geometry: { type: 'Polygon', coordinates: [[[170, -20], [-170, -20], [-170, 20], [170, 20], [170, -20]]] } } },
    { $geoIntersects: { $geometry: { type: 'Polygon', coordinates: [[[100, 0], [140, 0], [140, 60], [100, 60], [100, 0]]] } } },
    { $geoIntersects: { $geometry: { type: 'LineString', coordinates: [[-100, -50], [60, 50]] } } },
    { $geoIntersects: { $geometry: { type: 'Point', coordinates: [60, 85] } } },
    { $geoIntersects: { $geometry: { type: 'MultiPolygon', coordinates: [[[[0, 0], [5, 0], [5, 5], [0, 0]]], [[[-60, -60], [-20, -60], [-20, -20], [-60, -60]]]] } } },
    { $geoIntersects: { $geometry: { type: 'Point', coordinates: [-180, 10] } } },
  ];
  let nonEmpty = 0;
  for (const q of queries) {
    const a = await ids(ix, { g: q });
    const b = await ids(scan, { g: q });
    assert.deepEqual(a, b, JSON.stringify(q));
    if (a.length) nonEmpty++;
    const plan = (await ix.find({ g: q }).explain()).queryPlanner.winningPlan;
    assert.equal(plan.stage, 'FETCH', JSON.stringify(plan));
    assert.equal(plan.inputStage.indexName, 'g_2dsphere');
  }
  assert.ok(nonEmpty >= 7, `only ${nonEmpty} queries matched something`);
  // The index is not used for other predicates on the field, nor to sort.
  assert.equal((await ix.find({ g: { $exists: true } }).explain()).queryPlanner.winningPlan.stage, 'COLLSCAN');
  assert.equal((await ix.find({}).sort({ g: 1 }).explain()).queryPlanner.winningPlan.stage !== 'IXSCAN', true);
  // validate agrees with the keys the writes made.
  const v = await db.command({ validate: 'ix' });
  assert.equal(v.valid, true, JSON.stringify(v.errors));
});

h.test('2d bounds: flat shapes and flat $near use the 2d index (IXSCAN) and answer as a collection scan does', async () => {
  const db = srv.freshDb('diff2d');
  const ix = db.collection('ix'), scan = db.collection('scan');
  await ix.createIndex({ p: '2d' });
  let seed = 11;
  const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const docs = [];
  for (let i = 0; i < 500; i++) {
    const pt = [rnd() * 360 - 180, rnd() * 180 - 90];
    docs.push({ _id: i, p: i % 7 === 0 ? [pt, [pt[0] / 2, pt[1] / 2]] : i % 5 === 0 ? { x: pt[0], y: pt[1] } : pt });
  }
  docs.push({ _id: 900, p: [180, 180] }, { _id: 901, p: [-180, -180] });
  await ix.insertMany(docs);
  await scan.insertMany(docs);
  const queries = [
    { $geoWithin: { $box: [[-20, -20], [40, 30]] } },
    { $geoWithin: { $box: [[170, 170], [180, 180]] } },
    { $geoWithin: { $polygon: [[0, 0], [100, 10], [50, 80]] } },
    { $geoWithin: { $center: [[-100, 40], 25] } },
    { $geoWithin: { $centerSphere: [[10, 10], 0.5] } },
    { $geoWithin: { $geometry: { type: 'Polygon', coordinates: [[[-60, -60], [-10, -60], [-10, -10], [-60, -10], [-60, -60]]] } } },
  ];
  for (const q of queries) {
    assert.deepEqual(await ids(ix, { p: q }), await ids(scan, { p: q }), JSON.stringify(q));
    const plan = (await ix.find({ p: q }).explain()).queryPlanner.winningPlan;
    assert.equal(plan.inputStage && plan.inputStage.indexName, 'p_2d', JSON.stringify(q));
  }
  // Flat $near with $maxDistance: nearest first, through the index.
  const flat = (d) => Math.min(...(Array.isArray(d.p[0]) ? d.p : [Array.isArray(d.p) ? d.p : [d.p.x, d.p.y]]).map((q) => Math.hypot(q[0] - 5, q[1] - 5)));
  const want = docs.map((d) => [flat(d), d._id]).filter((x) => x[0] <= 30).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const got = await ix.find({ p: { $near: [5, 5], $maxDistance: 30 } }).toArray();
  assert.deepEqual(got.map((d) => d._id), want.map((x) => x[1]));
  const ex = await ix.find({ p: { $near: [5, 5], $maxDistance: 30 } }).explain();
  assert.equal(ex.queryPlanner.winningPlan.stage, 'GEO_NEAR_2D');
  assert.equal(ex.queryPlanner.winningPlan.inputStages[0].inputStage.indexName, 'p_2d');
  assert.equal((await db.command({ validate: 'ix' })).valid, true);
});

h.test('strict-winding (big) polygons: the winding decides the inside; one loop only', async () => {
  for (const index of [false, true]) {
    const c = srv.freshDb(`big${index}`).collection('c');
    if (index) await c.createIndex({ g: '2dsphere' });
    await c.insertMany([
      { _id: 1, g: { type: 'Point', coordinates: [0, 0] } },
      { _id: 2, g: { type: 'Point', coordinates: [50, 50] } },
      { _id: 3, g: { type: 'Point', coordinates: [-170, -60] } },
      { _id: 4, g: { type: 'LineString', coordinates: [[-5, 0], [5, 0]] } },
    ]);
    const crs = { type: 'name', properties: { name: 'urn:x-mongodb:crs:strictwinding:EPSG:4326' } };
    const cw = [[-10, -10], [-10, 10], [10, 10], [10, -10], [-10, -10]];   // clockwise: everything but the square
    const ccw = [[-10, -10], [10, -10], [10, 10], [-10, 10], [-10, -10]];  // counter-clockwise: the square
    assert.deepEqual(await ids(c, { g: { $geoWithin: { $geometry: { type: 'Polygon', coordinates: [cw], crs } } } }), [2, 3]);
    assert.deepEqual(await ids(c, { g: { $geoWithin: { $geometry: { type: 'Polygon', coordinates: [ccw], crs } } } }), [1, 4]);
    assert.deepEqual(await ids(c, { g: { $geoIntersects: { $geometry: { type: 'Polygon', coordinates: [cw], crs } } } }), [2, 3]);
    const [bc, bm] = await code(c.find({ g: { $geoWithin: { $geometry: { type: 'Polygon', coordinates: [ccw, ccw], crs } } } }).toArray());
    assert.equal(bc, 2);
    assert.ok(bm.startsWith('Only one simple loop is allowed in a big polygon'), bm);
    const [pc, pm] = await code(c.find({ g: { $geoIntersects: { $geometry: { type: 'Point', coordinates: [0, 0], crs } } } }).toArray());
    assert.deepEqual([pc, pm], [2, 'Strict winding order CRS is only supported by polygon']);
  }
});

h.test('$geoNear heading a $unionWith sub-pipeline reads the other collection\'s index: streamed, in $facet, in $lookup', async () => {
  const db = srv.freshDb('unionnear');
  const p = db.collection('p');
  await p.insertMany([{ _id: 1, loc: { type: 'Point', coordinates: [0, 0] } }, { _id: 2, loc: { type: 'Point', coordinates: [1, 1] } }]);
  await p.createIndex({ loc: '2dsphere' });
  await db.collection('o').insertOne({ _id: 'o' });
  const g = { $geoNear: { near: { type: 'Point', coordinates: [0, 0] }, distanceField: 'd' } };
  const union = { $unionWith: { coll: 'p', pipeline: [g, { $project: { d: 1 } }] } };
  const want = [{ _id: 'o' }, { _id: 1, d: 0 }, { _id: 2, d: hav([0, 0], [1, 1]) * R }];
  const check = (got, what) => {
    assert.deepEqual(got.map((x) => x._id), want.map((x) => x._id), what);
    near(got[2].d, want[2].d, 1e-9);
  };
  check(await db.collection('o').aggregate([union]).toArray(), 'streamed');
  check((await db.collection('o').aggregate([{ $facet: { f: [union] } }]).toArray())[0].f, 'in $facet');
  check((await db.collection('o').aggregate([{ $lookup: { from: 'o', pipeline: [union], as: 'm' } }]).toArray())[0].m, 'in $lookup');
});

h.test('2dsphereIndexVersion is a number (14) and 1, 2 or 3 (67 with mongod\'s fixSpec messages); a given one is kept', async () => {
  const db = srv.freshDb('s2version');
  const c = db.collection('c');
  const msg = (what, shown) => new RegExp(`^${what} \\{ 2dsphereIndexVersion : 2dsphereIndexVersion: ${shown} \\}, only versions: \\[1,2,3\\] are supported$`);
  await h.expectCode(c.createIndex({ loc: '2dsphere' }, { '2dsphereIndexVersion': 4 }), 67, msg('unsupported geo index version', '4'));
  await h.expectCode(c.createIndex({ loc: '2dsphere' }, { '2dsphereIndexVersion': 0 }), 67, msg('unsupported geo index version', '0'));
  // Its type is checked first, with every numeric index option (validateIndexSpec): 14.
  await h.expectCode(c.createIndex({ loc: '2dsphere' }, { '2dsphereIndexVersion': 'x' }), 14,
    /The field '2dsphereIndexVersion' must be a number, but got string$/);
  await h.expectCode(c.createIndex({ p: '2d' }, { bits: 'x' }), 14, /The field 'bits' must be a number, but got string$/);
  await h.expectCode(c.createIndex({ p: '2d' }, { min: null }), 14, /The field 'min' must be a number, but got null$/);
  await h.expectCode(db.command({ createIndexes: 'c', indexes: [{ key: { loc: '2dsphere' }, name: 'f', finestIndexedLevel: true }] }), 14,
    /The field 'finestIndexedLevel' must be a number, but got bool$/);
  await h.expectCode(c.createIndex({ loc: '2dsphere' }, { '2dsphereIndexVersion': NaN }), 67, /^Invalid value for geo index version/);
  assert.equal(await c.createIndex({ loc: '2dsphere' }, { '2dsphereIndexVersion': 2 }), 'loc_2dsphere');
  const ix = (await c.listIndexes().toArray()).find((i) => i.name === 'loc_2dsphere');
  assert.equal(ix['2dsphereIndexVersion'], 2);
  // The S2 cell levels (16747, 16748, 16749), given or by default (16 and 2 for the default version 3).
  const lv = (opts) => db.command({ createIndexes: 'c', indexes: [{ key: { l2: '2dsphere' }, name: 'l2', ...opts }] });
  await h.expectCode(lv({ coarsestIndexedLevel: -1 }), 16747, /^coarsestIndexedLevel must be >= 0$/);
  await h.expectCode(lv({ finestIndexedLevel: 31 }), 16748, /^finestIndexedLevel must be <= 30$/);
  await h.expectCode(lv({ coarsestIndexedLevel: 20, finestIndexedLevel: 10 }), 16749, /^finestIndexedLevel must be >= coarsestIndexedLevel$/);
  await h.expectCode(lv({ coarsestIndexedLevel: 20 }), 16749);
  assert.equal((await lv({ coarsestIndexedLevel: 5, finestIndexedLevel: 25 })).ok, 1);
  // Two plugins in one key pattern: 67, whichever they are (index_key_validate's pluginName check).
  for (const key of [{ a: '2dsphere', b: 'text' }, { a: '2dsphere', b: '2d' }, { a: 'text', b: '2dsphere' }, { a: '2dsphere', b: 'bogus' }]) {
    await h.expectCode(c.createIndex(key), 67, /^Can't use more than one index plugin for a single index\.$/);
  }
});

h.test('a validator may not use $near or $nearSphere (5626500), at create and at collMod; $geoWithin is fine', async () => {
  const db = srv.freshDb('nearvalidator');
  const re = /^\$geoNear, \$near, and \$nearSphere are not allowed in this context/;
  await h.expectCode(db.createCollection('c', { validator: { loc: { $near: [0, 0] } } }), 5626500, re);
  await h.expectCode(db.createCollection('c', { validator: { $and: [{ loc: { $nearSphere: { $geometry: { type: 'Point', coordinates: [0, 0] } } } }] } }), 5626500, re);
  await db.createCollection('c', { validator: { loc: { $geoWithin: { $center: [[0, 0], 10] } } } });
  // collMod's parseValidator gives the parse error its context (collection_impl.cpp); create answers it bare.
  await h.expectCode(db.command({ collMod: 'c', validator: { loc: { $near: [0, 0] } } }), 5626500,
    /^Parsing of collection validator failed :: caused by :: \$geoNear, \$near, and \$nearSphere are not allowed in this context/);
  await db.collection('c').insertOne({ loc: [1, 1] });
  await h.expectCode(db.collection('c').insertOne({ loc: [50, 50] }), 121);
});

h.test('a GeoJSON $near / $nearSphere takes $maxDistance: Infinity (no bound) and $minDistance: Infinity (nothing), as mongod', async () => {
  const c = await places('inf');
  const pt = { type: 'Point', coordinates: [-73.9667, 40.78] };
  const all = (await c.find({ location: { $near: { $geometry: pt } } }).toArray()).length;
  assert.ok(all > 0);
  assert.equal((await c.find({ location: { $near: { $geometry: pt, $maxDistance: Infinity } } }).toArray()).length, all);
  assert.equal((await c.find({ location: { $nearSphere: { $geometry: pt, $maxDistance: Infinity } } }).toArray()).length, all);
  assert.equal((await c.find({ location: { $near: { $geometry: pt, $minDistance: Infinity } } }).toArray()).length, 0);
  await h.expectCode(c.find({ location: { $near: { $geometry: pt, $maxDistance: NaN } } }).toArray(), 2, /\$maxDistance must be non-negative/);
});

// ------------------------------------------------------------ geo index options, to mongod 8.0's source

h.test('2d index hash parameters (GeoHashConverter::createFromDoc): bits as numberInt in 1..32, min < max finite, 72 InvalidOptions', async () => {
  const db = srv.freshDb('twodparams');
  const c = db.collection('c');
  const bad = [
    [{ bits: 0.5 }, 'bits for hash must be > 0 and <= 32, but 0 bits were specified'],
    [{ bits: 33 }, 'bits for hash must be > 0 and <= 32, but 33 bits were specified'],
    [{ bits: -1 }, 'bits for hash must be > 0 and <= 32, but -1 bits were specified'],
    [{ min: 10, max: 5 }, 'region for hash must be valid and have positive area, but [10, 5] was specified'],
    [{ min: 5, max: 5 }, 'region for hash must be valid and have positive area, but [5, 5] was specified'],
    [{ max: Infinity }, 'region for hash must be valid and have positive area, but [-180, inf] was specified'],
    [{ min: -1e308, max: 1e308 }, 'range [-1e+308, 1e+308] is too small.'],
  ];
  for (const [opts, msg] of bad) {
    const e = await h.expectCode(c.createIndex({ p: '2d' }, opts), 72);
    assert.equal(e.message, msg, JSON.stringify(opts));
    assert.equal(e.codeName, 'InvalidOptions');
  }
  assert.equal(await c.createIndex({ p: '2d' }, { bits: 1.5, min: -1, max: 1 }), 'p_2d');
});

h.test('2dsphere options (initialize2dsphereParams): version and levels are exact integers (2), level defaults follow the version', async () => {
  const db = srv.freshDb('s2params');
  const mk = (opts) => db.command({ createIndexes: 'c', indexes: [{ key: { loc: '2dsphere' }, name: 'l', ...opts }] });
  for (const [opts, field, shown] of [[{ '2dsphereIndexVersion': 2.5 }, '2dsphereIndexVersion', '2.5'],
    [{ finestIndexedLevel: 20.5 }, 'finestIndexedLevel', '20.5'], [{ coarsestIndexedLevel: 1.25 }, 'coarsestIndexedLevel', '1.25']]) {
    const e = await h.expectCode(mk(opts), 2);
    assert.equal(e.message, `Expected field "${field}" to have a value exactly representable as a 64-bit integer, but found ${field}: ${shown}`);
  }
  // Version 3 (the default): finest 16, coarsest 2; versions 1 and 2: 14 and 7.
  assert.equal((await mk({ coarsestIndexedLevel: 15 })).ok, 1);
  await db.collection('c').dropIndex('l');
  assert.equal((await mk({ finestIndexedLevel: 5 })).ok, 1);
  await db.collection('c').dropIndex('l');
  await h.expectCode(mk({ coarsestIndexedLevel: 15, '2dsphereIndexVersion': 2 }), 16749, /^finestIndexedLevel must be >= coarsestIndexedLevel$/);
  await h.expectCode(mk({ finestIndexedLevel: 5, '2dsphereIndexVersion': 1 }), 16749);
  await h.expectCode(mk({ finestIndexedLevel: 1 }), 16749);
});
