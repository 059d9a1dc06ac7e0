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
