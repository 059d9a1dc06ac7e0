'use strict';
/*
 * Command-level argument checking as mongod's IDL parsers do it (issue 12:
 * input mongod refuses must not succeed, and must fail with mongod's code):
 * unknown top-level fields 40415 (the generic arguments every command takes
 * stay accepted), wrong types 14, missing required fields 40414, negative
 * counts 51024, a wrong-typed hint 9. Table-driven over raw OP_MSG (the
 * driver would refuse or rewrite some of these), one row per case: the
 * command, the expected code, and a pattern of mongod's message where it
 * is fixed. A second table holds what drivers send and must keep working.
 */
const assert = require('node:assert/strict');
const { Long, UUID } = require('mongodb');
const h = require('./harness');

const srv = h.useServer();
const L = (n) => Long.fromNumber(n);

/* [command, code, message pattern or null] */
const REFUSED = {
  find: [
    [{ find: 'c', foo: 1 }, 40415, /^BSON field 'find.foo' is an unknown field.$/],
    [{ find: 'c', min: 1 }, 14, /^BSON field 'find.min' is the wrong type 'int', expected type 'object'$/],
    [{ find: 'c', max: 'a' }, 14, null],
    [{ find: 'c', returnKey: 'a' }, 14, /'find.returnKey' is the wrong type 'string'/],
    [{ find: 'c', showRecordId: {} }, 14, null],
    [{ find: 'c', noCursorTimeout: 'a' }, 14, null],
    [{ find: 'c', allowPartialResults: [] }, 14, null],
    [{ find: 'c', skip: -1 }, 51024, /^BSON field 'skip' value must be >= 0, actual value '-1'$/],
    [{ find: 'c', batchSize: -2 }, 51024, null],
    [{ find: 'c', hint: 1 }, 9, /^Hint must be a string or an object$/],
    [{ find: 'c', hint: null }, 9, null],
    [{ find: 'c', let: 1 }, 14, null],
  ],
  aggregate: [
    [{ aggregate: 'c', pipeline: [], cursor: { foo: 1 } }, 40415, /^BSON field 'aggregate.cursor.foo' is an unknown field.$/],
    [{ aggregate: 'c', pipeline: [], cursor: {}, bypassDocumentValidation: 'a' }, 14, null],
    [{ aggregate: 'c', pipeline: [], cursor: {}, collation: 1 }, 14, null],
    [{ aggregate: 'c', pipeline: [], cursor: {}, hint: 2 }, 9, /^Hint must be a string or an object$/],
    [{ aggregate: 'c', pipeline: [], cursor: {}, bar: 1 }, 40415, /^BSON field 'aggregate.bar' is an unknown field.$/],
  ],
  writes: [
    [{ insert: 'c', documents: [{}], bypassDocumentValidation: 'a' }, 14,
      /^BSON field 'insert.bypassDocumentValidation' is the wrong type 'string'/],
    [{ update: 'c', updates: [{ q: {}, u: {} }], bypassDocumentValidation: {} }, 14, null],
    [{ delete: 'c', deletes: [{ q: { _id: 1 }, limit: 2 }] }, 9,
      /^The limit field in delete objects must be 0 or 1. Got 2$/],
    [{ delete: 'c', deletes: [{ q: { _id: 1 }, limit: 0.5 }] }, 9, /Got 0.5$/],
    [{ delete: 'c', deletes: [{ q: {}, limit: 1 }, { q: {}, limit: -1 }] }, 9, null],
    [{ update: 'c', updates: [{ q: {}, u: {}, hint: 3 }] }, 9, /^Hint must be a string or an object$/],
  ],
  findAndModify: [
    [{ findAndModify: 'c', remove: true, bypassDocumentValidation: 'a' }, 14,
      /^BSON field 'findAndModify.bypassDocumentValidation' is the wrong type 'string'/],
    [{ findAndModify: 'c', update: {}, arrayFilters: 1 }, 14,
      /^BSON field 'findAndModify.arrayFilters' is the wrong type 'int', expected type 'array'$/],
    [{ findAndModify: 'c', update: {}, hint: 1 }, 9, /^Hint must be a string or an object$/],
    [{ findAndModify: 'c', update: {}, foo: 1 }, 40415, null],
  ],
  count: [
    [{ count: 'c', limit: 'a' }, 2, /^limit value is not a valid number$/],
    [{ count: 'c', skip: {} }, 2, /^skip value is not a valid number$/],
    [{ count: 'c', hint: 1 }, 9, /^Hint must be a string or an object$/],
    [{ count: 'c', foo: 1 }, 40415, /^BSON field 'count.foo' is an unknown field.$/],
  ],
  ddl: [
    [{ create: 'n1', foo: 1 }, 40415, /^BSON field 'create.foo' is an unknown field.$/],
    [{ create: 'n2', storageEngine: 1 }, 14, /^BSON field 'create.storageEngine' is the wrong type 'int', expected type 'object'$/],
    [{ create: 'n3', idIndex: 'x' }, 14, null],
    [{ create: 'n4', uuid: new UUID() }, 40415, /^BSON field 'create.uuid' is an unknown field.$/],
    [{ create: 'n8', capped: true, size: 4096, max: 2 ** 31 }, 51024,
      /^BSON field 'max' value must be < 2147483648, actual value '2147483648'$/],
    [{ create: 'n9', capped: true, size: 2 ** 51 }, 51024, /^BSON field 'size' value must be <= 1125899906842624/],
    [{ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1' }], foo: 1 }, 40415,
      /^BSON field 'createIndexes.foo' is an unknown field.$/],
    [{ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1' }], ignoreUnknownIndexOptions: 'x' }, 14, null],
    [{ drop: 'c', foo: 1 }, 40415, /^BSON field 'drop.foo' is an unknown field.$/],
    [{ dropIndexes: 'c', index: '*', foo: 1 }, 40415, /^BSON field 'dropIndexes.foo' is an unknown field.$/],
    [{ collMod: 'c', foo: 1 }, 40415, /^BSON field 'collMod.foo' is an unknown field.$/],
    [{ dropDatabase: 1, foo: 1 }, 40415, /^BSON field 'dropDatabase.foo' is an unknown field.$/],
  ],
  explain: [
    [{ explain: { find: 'c' }, foo: 1 }, 40415, /^BSON field 'explain.foo' is an unknown field.$/],
    [{ explain: { find: 'c', foo: 1 } }, 40415, /^BSON field 'find.foo' is an unknown field.$/],
    [{ explain: { count: 'c', bar: 1 }, verbosity: 'queryPlanner' }, 40415, /^BSON field 'count.bar' is an unknown field.$/],
  ],
  readConcern: [
    [{ find: 'c', readConcern: 'x' }, 9, /^readConcern field should be an object$/],
    [{ find: 'c', readConcern: { level: 'bogus' } }, 9,
      /^readConcern.level must be either 'local', 'majority', 'linearizable', 'available', or 'snapshot'$/],
    [{ find: 'c', readConcern: { level: 1 } }, 14, /^"level" had the wrong type. Expected string, found int$/],
    [{ aggregate: 'c', pipeline: [], cursor: {}, readConcern: { foo: 1 } }, 72, /^Unrecognized option in readConcern: foo$/],
    [{ find: 'c', readConcern: { afterClusterTime: 5 } }, 14, null],
  ],
  systemNamespaces: [
    [{ create: 'system.foo' }, 73, /^Invalid system namespace: idl.system.foo$/],
    [{ insert: 'system.foo', documents: [{}] }, 73, /^Invalid system namespace: idl.system.foo$/],
    [{ update: 'system.foo', updates: [{ q: {}, u: { $set: { a: 1 } }, upsert: true }] }, 73, null],
    [{ delete: 'system.foo', deletes: [{ q: {}, limit: 0 }] }, 73, null],
    [{ findAndModify: 'system.foo', update: { $set: { a: 1 } }, upsert: true }, 73, null],
    [{ createIndexes: 'system.foo', indexes: [{ key: { a: 1 }, name: 'a_1' }] }, 73, null],
    [{ insert: 'system.profile', documents: [{}] }, 73, /^cannot write to idl.system.profile$/],
  ],
  getMore: [
    [{ getMore: L(12345), collection: 'c', maxTimeMS: 'a' }, 14,
      /^BSON field 'getMore.maxTimeMS' is the wrong type 'string', expected types/],
    [{ getMore: L(12345), collection: 'c', batchSize: -1 }, 51024, null],
    [{ getMore: L(12345), collection: 'c', foo: 1 }, 40415, /^BSON field 'getMore.foo' is an unknown field.$/],
    [{ getMore: L(12345) }, 40414, /^BSON field 'getMore.collection' is missing but a required field$/],
    [{ getMore: 'x', collection: 'c' }, 14, null],
  ],
  listings: [
    [{ listCollections: 1, foo: 1 }, 40415, /^BSON field 'listCollections.foo' is an unknown field.$/],
    [{ listCollections: 1, cursor: 1 }, 14, /^BSON field 'listCollections.cursor' is the wrong type 'int', expected type 'object'$/],
    [{ listCollections: 1, cursor: { batchSize: -1 } }, 51024, /^BSON field 'batchSize' value must be >= 0, actual value '-1'$/],
    [{ listCollections: 1, cursor: { foo: 1 } }, 40415, /^BSON field 'listCollections.cursor.foo' is an unknown field.$/],
    [{ listCollections: 1, authorizedCollections: 'a' }, 14, null],
    [{ listIndexes: 'c', foo: 1 }, 40415, /^BSON field 'listIndexes.foo' is an unknown field.$/],
    [{ listIndexes: 'c', cursor: 1 }, 14, null],
    [{ listIndexes: 'c', cursor: { batchSize: -5 } }, 51024, null],
    [{ killCursors: 'c', cursors: 1 }, 14, /^BSON field 'killCursors.cursors' is the wrong type 'int', expected type 'array'$/],
    [{ killCursors: 'c', cursors: ['a'] }, 14, /^BSON field 'killCursors.cursors.0' is the wrong type 'string', expected type 'long'$/],
    [{ killCursors: 'c' }, 40414, null],
  ],
};

/* What drivers and tools send: must keep succeeding. */
const ACCEPTED = [
  { find: 'c', filter: {}, singleBatch: true, allowDiskUse: false, let: { x: 1 }, collation: { locale: 'simple' },
    hint: { _id: 1 }, readConcern: { level: 'local' }, batchSize: 0, limit: 0, skip: 0, comment: 'x', maxTimeMS: 1000,
    noCursorTimeout: false, returnKey: false, showRecordId: false, allowPartialResults: false },
  { find: 'c', filter: null, projection: null, sort: null },
  { find: 'c', singleBatch: 1, stmtId: 0, txnRetryCounter: 0 },
  { insert: 'c2', documents: [{ _id: 1 }], ordered: false, bypassDocumentValidation: true, writeConcern: { w: 1 } },
  { update: 'c2', updates: [{ q: {}, u: { $set: { a: 1 } }, multi: true, upsert: false }], ordered: true,
    bypassDocumentValidation: 1, let: { v: 1 } },
  { delete: 'c2', deletes: [{ q: { _id: 9 }, limit: 1.0 }], let: {} },
  { create: 'n5', capped: true, size: 4096, max: 10, validator: { a: { $exists: true } }, validationLevel: 'moderate',
    validationAction: 'warn', writeConcern: { w: 1 }, comment: 'x' },
  { create: 'n6', clusteredIndex: { key: { _id: 1 }, unique: true }, expireAfterSeconds: 60 },
  { create: 'n7', viewOn: 'c', pipeline: [{ $match: {} }], collation: { locale: 'en' } },
  { createIndexes: 'c', indexes: [{ key: { b: 1 }, name: 'b_1' }], writeConcern: {} }, /* commitQuorum: indexes.test.js */
  { listCollections: 1, filter: { name: 'c' }, nameOnly: true, authorizedCollections: false, cursor: {} },
  { listCollections: 1, cursor: { batchSize: 0 } },
  { listIndexes: 'c', cursor: { batchSize: 1 } },
  { collMod: 'c', validationLevel: 'off', comment: 'x' },
  { count: 'c', query: {}, limit: -1, skip: 0, fields: 1, hint: '_id_' },
  { findAndModify: 'c', query: { _id: 99 }, update: { $set: { a: 1 } }, new: 1, upsert: false, arrayFilters: [],
    bypassDocumentValidation: false, fields: { _id: 1 }, let: {} },
  { killCursors: 'c', cursors: [L(12345), 7] },
  { dropIndexes: 'c', index: 'b_1', writeConcern: { w: 1 } },
  { drop: 'n5', writeConcern: { w: 1 }, comment: 'y' },
  { insert: 'system.js', documents: [{ _id: 'f', value: 1 }] },
  { find: 'system.foo' },
  { explain: { find: 'c', filter: { _id: 1 }, limit: 1, singleBatch: true }, verbosity: 'executionStats', comment: 'e' },
  { explain: { aggregate: 'c', pipeline: [], cursor: {} }, verbosity: 'queryPlanner' },
  { aggregate: 'c', pipeline: [], cursor: { batchSize: 1 }, allowDiskUse: true, bypassDocumentValidation: false,
    let: { a: 1 }, hint: '_id_', comment: { x: 1 }, readConcern: {} },
];

h.test('the test collection', async () => {
  await srv.client.db('idl').collection('c').insertMany([{ _id: 1 }, { _id: 2 }]);
});

async function run(cases) {
  const conn = await h.rawConnect(srv.port);
  try {
    for (const [cmd, code, re] of cases) {
      const r = await conn.command('idl', cmd);
      assert.equal(r.ok, 0, `${JSON.stringify(cmd)} should fail with ${code}, got ${JSON.stringify(r)}`);
      assert.equal(r.code, code, `${JSON.stringify(cmd)}: ${r.code} ${r.errmsg}`);
      if (re) assert.match(r.errmsg, re, JSON.stringify(cmd));
    }
  } finally { conn.close(); }
}

for (const [name, cases] of Object.entries(REFUSED)) {
  h.test(`${name}: mongod's IDL errors`, () => run(cases));
}

h.test('listDatabases and renameCollection (admin): mongod\'s IDL errors', async () => {
  const conn = await h.rawConnect(srv.port);
  try {
    for (const [cmd, code, re] of [
      [{ listDatabases: 1, foo: 1 }, 40415, /^BSON field 'listDatabases.foo' is an unknown field.$/],
      [{ renameCollection: 'idl.c', to: 'idl.d', foo: 1 }, 40415, /^BSON field 'renameCollection.foo' is an unknown field.$/],
    ]) {
      const r = await conn.command('admin', cmd);
      assert.equal(r.code, code, `${JSON.stringify(cmd)}: ${JSON.stringify(r)}`);
      assert.match(r.errmsg, re);
    }
    const ok = await conn.command('admin', { listDatabases: 1, nameOnly: true, filter: {}, authorizedDatabases: false });
    assert.equal(ok.ok, 1, JSON.stringify(ok));
  } finally { conn.close(); }
});

h.test('a delete refused at parse time deletes nothing', async () => {
  const c = srv.client.db('idl').collection('c');
  assert.equal(await c.countDocuments({}), 2, 'the limit 2 / -1 statements above deleted nothing');
});

h.test('what drivers send is still accepted', async () => {
  const conn = await h.rawConnect(srv.port);
  try {
    for (const cmd of ACCEPTED) {
      const r = await conn.command('idl', cmd);
      assert.equal(r.ok, 1, `${JSON.stringify(cmd)}: ${JSON.stringify(r)}`);
    }
  } finally { conn.close(); }
});
