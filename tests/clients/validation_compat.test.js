'use strict';
/*
 * Document validation as users meet it, against mongod 8.0's own source:
 * the errInfo.details of a query-operator validator (doc_validation_error.cpp
 * over the tree expression_parser.cpp builds), $jsonSchema parse errors
 * (json_schema_parser.cpp), where validators are allowed
 * (collection_impl.cpp's checkValidatorCanBeUsedOnNs).
 */
const assert = require('node:assert/strict');
const h = require('./harness');
const { BSON } = require('mongodb');

const srv = h.useServer();
/* A second server, under --auth, for the bypassDocumentValidation action. */
const authSrv = h.useServer({ args: ['--auth'] });

let seq = 0;

/* Creates a collection with validator, inserts doc, and returns errInfo.details of the 121. */
async function detailsFor(validator, doc) {
  const db = srv.freshDb('valc');
  const name = `c${seq++}`;
  await db.createCollection(name, { validator });
  const e = await h.expectCode(db.collection(name).insertOne(doc), 121);
  assert.deepEqual(e.errInfo.failingDocumentId, doc._id);
  return e.errInfo.details;
}

h.test('a field with several operators is several clauses of mongod\'s top-level $and; {a: /re/} is $regex', async () => {
  // expression_parser.cpp adds each operator of {a: {$gt, $lt}} to the root $and (one child is returned alone).
  assert.deepEqual(await detailsFor({ a: { $gt: 1, $lt: 5 } }, { _id: 1, a: 10 }), {
    operatorName: '$and',
    clausesNotSatisfied: [
      { index: 1, details: { operatorName: '$lt', specifiedAs: { a: { $lt: 5 } }, reason: 'comparison failed', consideredValue: 10 } },
    ],
  });
  // The clause indexes count operators, not fields.
  assert.deepEqual(await detailsFor({ a: { $gte: 0, $lte: 9 }, b: { $exists: true } }, { _id: 2, a: -1 }), {
    operatorName: '$and',
    clausesNotSatisfied: [
      { index: 0, details: { operatorName: '$gte', specifiedAs: { a: { $gte: 0 } }, reason: 'comparison failed', consideredValue: -1 } },
      { index: 2, details: { operatorName: '$exists', specifiedAs: { b: { $exists: true } }, reason: 'path does not exist' } },
    ],
  });
  // A regex value is parseRegexElement's RegexMatchExpression, annotated "$regex".
  assert.deepEqual(await detailsFor({ code: /^[A-Z]{3}$/ }, { _id: 3, code: 'ab' }), {
    operatorName: '$regex',
    specifiedAs: { code: /^[A-Z]{3}$/ },
    reason: 'regular expression did not match',
    consideredValue: 'ab',
  });
  assert.deepEqual(await detailsFor({ code: { $not: /^x/ } }, { _id: 4, code: 'xy' }), {
    operatorName: '$not',
    details: { operatorName: '$regex', specifiedAs: { code: /^x/ }, reason: 'regular expression did match', consideredValue: 'xy' },
  });
  // $regex with $options stays one clause.
  assert.deepEqual(await detailsFor({ s: { $regex: '^a', $options: 'i' } }, { _id: 5, s: 'b' }), {
    operatorName: '$regex',
    specifiedAs: { s: { $regex: '^a', $options: 'i' } },
    reason: 'regular expression did not match',
    consideredValue: 'b',
  });
});

h.test('enum and uniqueItems compare objects whatever their field order (UnorderedFieldsBSONElementComparator), at the top level too', async () => {
  const db = srv.freshDb('valc_enum');
  const c = db.collection('c');
  await c.insertMany([
    { _id: 1, o: { a: 1, b: 2 } }, { _id: 2, o: { b: 2, a: 1 } }, { _id: 3, o: { a: { x: 1, y: [{ p: 1, q: 2 }] } } },
    { _id: 4, o: { a: { y: [{ q: 2, p: 1 }], x: 1 } } }, { _id: 5, arr: [{ a: 1, b: 2 }, { b: 2, a: 1 }] }, { _id: 6, arr: [{ a: 1 }, { a: 2 }] },
  ]);
  const ids = async (schema) => (await c.find({ $jsonSchema: schema }).sort({ _id: 1 }).toArray()).map((d) => d._id);
  // InternalSchemaEqMatchExpression: {b: 2, a: 1} is the enum's {a: 1, b: 2}, at any depth (not inside arrays' order).
  assert.deepEqual(await ids({ required: ['o'], properties: { o: { enum: [{ a: 1, b: 2 }] } } }), [1, 2]);
  assert.deepEqual(await ids({ required: ['o'], properties: { o: { enum: [{ a: { x: 1, y: [{ p: 1, q: 2 }] } }] } } }), [3, 4]);
  // InternalSchemaRootDocEqMatchExpression: a top-level enum matches the whole document, field order aside.
  assert.deepEqual(await ids({ enum: [{ o: { b: 2, a: 1 }, _id: 1 }] }), [1]);
  // InternalSchemaUniqueItemsMatchExpression: {a: 1, b: 2} and {b: 2, a: 1} are duplicates.
  assert.deepEqual(await ids({ required: ['arr'], properties: { arr: { uniqueItems: true } } }), [6]);

  // As a validator: the document with the fields in another order passes; the duplicate is named.
  await db.createCollection('v', { validator: { $jsonSchema: { properties: { unit: { enum: [{ kind: 'kg', scale: 1 }] }, tags: { uniqueItems: true } } } } });
  await db.collection('v').insertOne({ _id: 1, unit: { scale: 1, kind: 'kg' } });
  const e = await h.expectCode(db.collection('v').insertOne({ _id: 2, tags: [{ k: 1, v: 2 }, { v: 2, k: 1 }] }), 121);
  const rule = e.errInfo.details.schemaRulesNotSatisfied[0].propertiesNotSatisfied[0].details[0];
  assert.equal(rule.operatorName, 'uniqueItems');
  assert.deepEqual(rule.duplicatedValue, { v: 2, k: 1 });
});

h.test('$jsonSchema parse errors carry json_schema_parser.cpp\'s codes and messages', async () => {
  const db = srv.freshDb('valc_parse');
  const cases = [
    [{ properties: { a: { bsonType: ['int', 'int'] } } }, 9, "$jsonSchema keyword 'bsonType' has duplicate value: int"],
    [{ properties: { a: { type: ['string', 'null', 'string'] } } }, 9, "$jsonSchema keyword 'type' has duplicate value: string"],
    // parseTypeSet refuses 'integer' whichever keyword names it (JSON Schema users write bsonType: 'integer').
    [{ properties: { a: { bsonType: 'integer' } } }, 9, "$jsonSchema type 'integer' is not currently supported."],
    [{ properties: { a: { bsonType: ['int', 'integer'] } } }, 9, "$jsonSchema type 'integer' is not currently supported."],
    [{ properties: { a: { enum: [1, 1.0] } } }, 9, "$jsonSchema keyword 'enum' array cannot contain duplicate values."],
    [{ properties: { a: { enum: [{ x: 1, y: 2 }, { y: 2, x: 1 }] } } }, 9, "$jsonSchema keyword 'enum' array cannot contain duplicate values."],
    [{ enum: 'x' }, 14, "$jsonSchema keyword 'enum' must be an array, but found an element of type string"],
    [{ dependencies: { a: [] } }, 9, "property 'a' in $jsonSchema keyword 'dependencies' cannot be an empty array"],
    [{ dependencies: { a: ['b', 'b'] } }, 9, "array 'a' in $jsonSchema keyword 'dependencies' contains duplicate element: b"],
    [{ dependencies: { a: [1] } }, 14, "array 'a' in $jsonSchema keyword 'dependencies' can only contain strings, but found element of type: int"],
    [{ required: 'a' }, 14, "$jsonSchema keyword 'required' must be an array, but found an element of type string"],
    [{ required: [1] }, 14, "$jsonSchema keyword 'required' must be an array of strings, but found an element of type: int"],
    [{ not: [] }, 14, "$jsonSchema keyword 'not' must be an object, but found an element of type array"],
    [{ anyOf: [1] }, 14, "$jsonSchema keyword 'anyOf' must be an array of objects, but found an element of type int"],
    [{ properties: { a: { items: 1 } } }, 14, "$jsonSchema keyword 'items' must be an array or an object, not int"],
    [{ properties: { a: { items: ['x'] } } }, 14, "$jsonSchema keyword 'items' requires that each element of the array is an object, but found a string"],
    [{ additionalProperties: 1 }, 14, "$jsonSchema keyword 'additionalProperties' must be an object or a boolean"],
    [{ additionalItems: 1 }, 14, "$jsonSchema keyword 'additionalItems' must be either an object or a boolean, but got a int"],
    [{ patternProperties: { '^a': 1 } }, 14, "$jsonSchema keyword 'patternProperties' has property '^a' which is not an object"],
    // The length and count keywords go through parseIntegerElementToNonNegativeLong.
    [{ properties: { a: { minLength: -1 } } }, 9, 'Expected a non-negative number in: minLength: -1'],
    [{ properties: { a: { maxItems: 1.5 } } }, 9, 'Expected an integer: maxItems: 1.5'],
    [{ minProperties: '3' }, 9, 'Expected a number in: minProperties: "3"'],
  ];
  for (const [schema, code, msg] of cases) {
    const e = await h.expectCode(db.collection('c').findOne({ $jsonSchema: schema }), code);
    assert.equal(e.message, msg, JSON.stringify(schema));
    // The same at create, as a validator.
    const e2 = await h.expectCode(db.createCollection(`v${seq++}`, { validator: { $jsonSchema: schema } }), code);
    assert.equal(e2.message, msg);
  }

  // A keyword twice (only raw BSON can say it): "Duplicate $jsonSchema keyword", 9.
  const conn = await h.rawConnect(srv.port);
  try {
    const body = Buffer.from(BSON.serialize({ find: 'c', filter: { $jsonSchema: { minProperties: 1, maxProperties: 2 } }, $db: db.databaseName }));
    const at = body.indexOf(Buffer.from('maxProperties'));
    body.write('minProperties', at);
    await conn.send(h.buildOpMsg(1, null, {}, { rawBody: body }));
    const r = await conn.readReply();
    assert.equal(r.code, 9, JSON.stringify(r));
    assert.equal(r.errmsg, 'Duplicate $jsonSchema keyword: minProperties');
  } finally {
    conn.close();
  }
});

h.test('no validator in admin, local or config, nor on a system.* collection: 72 InvalidOptions naming the UUID (checkValidatorCanBeUsedOnNs)', async () => {
  const client = srv.client;
  const uuidRe = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
  for (const dbName of ['admin', 'local', 'config']) {
    const db = client.db(dbName);
    const e = await h.expectCode(db.createCollection('valc_v', { validator: { x: { $exists: true } } }), 72);
    assert.match(e.message, new RegExp(`^Document validators are not allowed on collection ${dbName}\\.valc_v with UUID ${uuidRe} in the ${dbName} internal database$`));
    assert.equal((await db.listCollections({ name: 'valc_v' }).toArray()).length, 0, 'nothing is created');
  }
  // An empty validator is no validator; collMod may set the level but not a validator.
  const admin = client.db('admin');
  await admin.createCollection('valc_w', { validator: {} });
  await admin.command({ collMod: 'valc_w', validationLevel: 'moderate' });
  const e = await h.expectCode(admin.command({ collMod: 'valc_w', validator: { x: 1 } }), 72);
  assert.match(e.message, /^Document validators are not allowed on collection admin\.valc_w with UUID .* in the admin internal database$/);
  const [info] = await admin.listCollections({ name: 'valc_w' }).toArray();
  assert.deepEqual(info.options, { validationLevel: 'moderate' });
  await admin.collection('valc_w').drop();

  const db = srv.freshDb('valc_sys');
  const e2 = await h.expectCode(db.createCollection('system.js', { validator: { x: 1 } }), 72);
  assert.match(e2.message, new RegExp(`^Document validators not allowed on system collection ${db.databaseName}\\.system\\.js with UUID ${uuidRe}$`));
});

h.test('$jsonSchema encrypt (client-side field level encryption\'s server-side schema): BinData 6 of the stated type, mongod\'s errInfo and parse errors', async () => {
  const { Binary, UUID } = require('mongodb');
  /* An FLE blob: subtype (1 deterministic, 2 random, 0 intent-to-encrypt), key UUID, the original BSON type, ciphertext. */
  const fle = (subtype, bsonType) => { const b = Buffer.alloc(40); b[0] = subtype; b[17] = bsonType; return new Binary(b, 6); };
  const db = srv.freshDb('valc_enc');
  const schema = {
    bsonType: 'object',
    properties: {
      ssn: { encrypt: { bsonType: 'int', algorithm: 'AEAD_AES_256_CBC_HMAC_SHA_512-Deterministic', keyId: [new UUID()] } },
      notes: { encrypt: { keyId: '/keyName' } },
    },
  };
  await db.createCollection('patients', { validator: { $jsonSchema: schema } });
  // The schema is stored and listed as given (libmongocrypt reads it back through listCollections).
  const [info] = await db.listCollections({ name: 'patients' }).toArray();
  assert.deepEqual(info.options.validator.$jsonSchema.properties.notes, { encrypt: { keyId: '/keyName' } });
  const c = db.collection('patients');
  await c.insertOne({ _id: 1, ssn: fle(1, 0x10), notes: fle(2, 0x02) });
  const ruleOf = async (doc) => {
    const e = await h.expectCode(c.insertOne(doc), 121);
    return e.errInfo.details.schemaRulesNotSatisfied[0].propertiesNotSatisfied[0];
  };
  // InternalSchemaBinDataSubTypeExpression: not BinData 6.
  assert.deepEqual(await ruleOf({ _id: 2, ssn: 123456789 }),
    { propertyName: 'ssn', details: [{ operatorName: 'encrypt', reason: 'value was not encrypted' }] });
  // InternalSchemaBinDataEncryptedTypeExpression: encrypted, but a string where an int was declared; or an intent-to-encrypt placeholder.
  assert.deepEqual(await ruleOf({ _id: 3, ssn: fle(2, 0x02) }),
    { propertyName: 'ssn', details: [{ operatorName: 'encrypt', reason: 'encrypted value has wrong type' }] });
  await h.expectCode(c.insertOne({ _id: 4, ssn: fle(0, 0x10) }), 121);
  assert.deepEqual(await ruleOf({ _id: 5, notes: 'plain text' }),
    { propertyName: 'notes', details: [{ operatorName: 'encrypt', reason: 'value was not encrypted' }] });
  // In queries too (kDefaultSpecialFeatures has kEncryptKeywords); a top-level encrypt can match no document.
  assert.deepEqual((await c.find({ $jsonSchema: { required: ['ssn'], properties: { ssn: { encrypt: { bsonType: 'int' } } } } }).toArray()).map((d) => d._id), [1]);
  assert.equal(await c.countDocuments({ $jsonSchema: { encrypt: {} } }), 0);

  const cases = [
    [{ properties: { a: { encrypt: 1 } } }, 14, "$jsonSchema keyword 'encrypt' must be an object "],
    [{ properties: { a: { encrypt: {}, type: 'string' } } }, 9, "$jsonSchema keyword 'encrypt' cannot be used in conjunction with 'type', 'encrypt' implies type 'bsonType::BinData'"],
    [{ properties: { a: { bsonType: 'string', encrypt: {} } } }, 9, "$jsonSchema keyword 'encrypt' cannot be used in conjunction with 'bsonType', 'encrypt' implies type 'bsonType::BinData'"],
    [{ properties: { a: { encrypt: {}, encryptMetadata: { keyId: '/k' } } } }, 9, "Cannot specify both $jsonSchema keywords 'encrypt' and 'encryptMetadata'"],
    [{ encryptMetadata: {} }, 9, "$jsonSchema keyword 'encryptMetadata' cannot be an empty object "],
    [{ encryptMetadata: 'x' }, 14, "$jsonSchema keyword 'encryptMetadata' must be an object "],
    [{ properties: { a: { encrypt: { algorithm: 'AES' } } } }, 2, "Enumeration value 'AES' for field 'encrypt.algorithm' is not a valid value."],
    [{ properties: { a: { encrypt: { algorithm: 1 } } } }, 14, "BSON field 'encrypt.algorithm' is the wrong type 'int', expected type 'string'"],
    [{ properties: { a: { encrypt: { bsonTypes: 'int' } } } }, 40415, "BSON field 'encrypt.bsonTypes' is an unknown field."],
    [{ encryptMetadata: { bsonType: 'int' } }, 40415, "BSON field 'encryptMetadata.bsonType' is an unknown field."],
    [{ properties: { a: { encrypt: { keyId: 1 } } } }, 51085, 'Expected either string or array of UUID for EncryptSchemaKeyId, found int'],
  ];
  for (const [s, code, msg] of cases) {
    const e = await h.expectCode(c.findOne({ $jsonSchema: s }), code);
    assert.equal(e.message, msg, JSON.stringify(s));
  }
  // encryptMetadata alone is accepted and checks nothing by itself.
  await db.createCollection('meta', { validator: { $jsonSchema: { encryptMetadata: { algorithm: 'AEAD_AES_256_CBC_HMAC_SHA_512-Random', keyId: [new UUID()] } } } });
  await db.collection('meta').insertOne({ _id: 1, any: 'thing' });
});

h.test('an empty validator is no validator: listCollections leaves it out after create and after collMod (CollectionOptions::toBSON)', async () => {
  const db = srv.freshDb('valc_empty');
  await db.createCollection('a', { validator: {} });
  await db.createCollection('b', { validator: { x: { $exists: true } }, validationAction: 'error' });
  await h.expectCode(db.collection('b').insertOne({ _id: 1 }), 121);
  await db.command({ collMod: 'b', validator: {} });
  await db.collection('b').insertOne({ _id: 1 });
  const infos = await db.listCollections({}, { nameOnly: false }).toArray();
  const opts = Object.fromEntries(infos.map((i) => [i.name, i.options]));
  assert.deepEqual(opts, { a: {}, b: { validationAction: 'error' } });
  // Creating it again with the same (empty) validator is no conflict.
  await db.createCollection('a', { validator: {} });
});

h.test('bypassDocumentValidation: true needs the bypassDocumentValidation action (dbAdmin, restore, root), not readWrite: 13 otherwise', async () => {
  const { MongoClient } = require('mongodb');
  const local = new MongoClient(`mongodb://127.0.0.1:${authSrv.port}/?directConnection=true`);
  authSrv.clients.push(local);
  await local.db('admin').command({ createUser: 'root', pwd: 'r00t-Valc!', roles: ['root'] });
  const root = await authSrv.login('root', 'r00t-Valc!');
  const bp = root.db('bp');
  await bp.createCollection('c', { validator: { n: { $type: 'int' } } });
  await bp.createCollection('out', { validator: { n: { $type: 'int' } } });
  await bp.collection('c').insertOne({ _id: 0, n: 1 });
  await bp.command({ createUser: 'rw', pwd: 'rw-Valc!1', roles: ['readWrite'] });
  await bp.command({ createUser: 'dba', pwd: 'dba-Valc!1', roles: ['readWrite', 'dbAdmin'] });

  const rw = (await authSrv.login('rw', 'rw-Valc!1', 'bp')).db('bp');
  // Without bypass the validator decides (121); with it, readWrite lacks the action (checkAuthForInsert / checkAuthForUpdate ...).
  await h.expectCode(rw.collection('c').insertOne({ _id: 1, n: 'x' }), 121);
  await h.expectCode(rw.command({ insert: 'c', documents: [{ _id: 1, n: 'x' }], bypassDocumentValidation: true }), 13);
  await h.expectCode(rw.command({ update: 'c', updates: [{ q: { _id: 0 }, u: { $set: { n: 'x' } } }], bypassDocumentValidation: true }), 13);
  await h.expectCode(rw.collection('c').findOneAndUpdate({ _id: 0 }, { $set: { n: 'x' } }, { bypassDocumentValidation: true }), 13);
  await h.expectCode(rw.collection('c').aggregate([{ $out: 'out' }], { bypassDocumentValidation: true }).toArray(), 13);
  await h.expectCode(rw.client.db('admin').command({
    bulkWrite: 1, ops: [{ insert: 0, document: { _id: 2, n: 'x' } }], nsInfo: [{ ns: 'bp.c' }], bypassDocumentValidation: true,
  }), 13);
  // bypassDocumentValidation: false asks nothing more; delete never asks.
  await rw.command({ insert: 'c', documents: [{ _id: 3, n: 3 }], bypassDocumentValidation: false });
  await rw.command({ delete: 'c', deletes: [{ q: { _id: 3 }, limit: 1 }], bypassDocumentValidation: true });
  assert.deepEqual(await root.db('bp').collection('c').find().toArray(), [{ _id: 0, n: 1 }], 'nothing bypassed the validator');

  // dbAdmin holds the action.
  const dba = (await authSrv.login('dba', 'dba-Valc!1', 'bp')).db('bp');
  await dba.command({ insert: 'c', documents: [{ _id: 1, n: 'x' }], bypassDocumentValidation: true });
  await dba.collection('c').aggregate([{ $match: { _id: 1 } }, { $out: 'out' }], { bypassDocumentValidation: true }).toArray();
  assert.deepEqual(await dba.collection('out').find().toArray(), [{ _id: 1, n: 'x' }]);
});

h.test('create / collMod name validator, validationLevel and validationAction by their IDL path in type and enumeration errors', async () => {
  const db = srv.freshDb('valc_idl');
  await db.createCollection('c');
  const cases = [
    [{ create: 'd', validationLevel: 'lenient' }, 2, "Enumeration value 'lenient' for field 'create.validationLevel' is not a valid value."],
    [{ create: 'd', validationAction: 'reject' }, 2, "Enumeration value 'reject' for field 'create.validationAction' is not a valid value."],
    [{ collMod: 'c', validationLevel: 'lenient' }, 2, "Enumeration value 'lenient' for field 'collMod.validationLevel' is not a valid value."],
    [{ collMod: 'c', validationAction: 'reject' }, 2, "Enumeration value 'reject' for field 'collMod.validationAction' is not a valid value."],
    [{ collMod: 'c', validationLevel: 1 }, 14, "BSON field 'collMod.validationLevel' is the wrong type 'int', expected type 'string'"],
    [{ collMod: 'c', validationAction: true }, 14, "BSON field 'collMod.validationAction' is the wrong type 'bool', expected type 'string'"],
    [{ collMod: 'c', validator: 'x' }, 14, "BSON field 'collMod.validator' is the wrong type 'string', expected type 'object'"],
  ];
  for (const [cmd, code, msg] of cases) {
    const e = await h.expectCode(db.command(cmd), code);
    assert.equal(e.message, msg, JSON.stringify(cmd));
  }
  assert.deepEqual((await db.listCollections().toArray()).map((c) => [c.name, c.options]), [['c', {}]]);
});

h.test('$expr validators explain "expression did not match" with the expression\'s value, or its evaluation error (still 121)', async () => {
  assert.deepEqual(await detailsFor({ $expr: { $eq: ['$total', { $add: ['$net', '$tax'] }] } }, { _id: 1, total: 10, net: 8, tax: 1 }), {
    operatorName: '$expr',
    specifiedAs: { $expr: { $eq: ['$total', { $add: ['$net', '$tax'] }] } },
    reason: 'expression did not match',
    expressionResult: false,
  });
  // expressionResult is the expression's value as evaluated, whatever its type; a missing value leaves it out.
  assert.deepEqual(await detailsFor({ $expr: '$qty' }, { _id: 2, qty: 0 }),
    { operatorName: '$expr', specifiedAs: { $expr: '$qty' }, reason: 'expression did not match', expressionResult: 0 });
  assert.deepEqual(await detailsFor({ $expr: '$qty' }, { _id: 3 }),
    { operatorName: '$expr', specifiedAs: { $expr: '$qty' }, reason: 'expression did not match' });
  // Under $nor the reason is inverted.
  assert.deepEqual((await detailsFor({ $nor: [{ $expr: { $eq: ['$a', 1] } }] }, { _id: 4, a: 1 })).clausesSatisfied[0].details,
    { operatorName: '$expr', specifiedAs: { $expr: { $eq: ['$a', 1] } }, reason: 'expression did match', expressionResult: true });
  // A throwing expression fails validation (121, not its own code) and says why (SERVER-51839).
  const d = await detailsFor({ $expr: { $gt: [{ $divide: ['$a', 0] }, 1] } }, { _id: 5, a: 1 });
  assert.equal(d.reason, 'failed to evaluate aggregation expression');
  assert.equal(d.expressionResult, undefined);
  assert.equal(d.details.errmsg, "can't $divide by zero");
  assert.equal(typeof d.details.code, 'number');
  assert.equal(typeof d.details.codeName, 'string');
});

h.test('query-operator errInfo: arrays give consideredValues, a type the operator cannot read gives "type did not match" with expectedType(s) (generatePathError)', async () => {
  // kTraverseOmitArray: a leaf array's elements, along dotted paths through arrays too.
  assert.deepEqual(await detailsFor({ scores: { $gte: 50 } }, { _id: 1, scores: [10, 20] }),
    { operatorName: '$gte', specifiedAs: { scores: { $gte: 50 } }, reason: 'comparison failed', consideredValues: [10, 20] });
  assert.deepEqual(await detailsFor({ 'items.qty': { $gt: 5 } }, { _id: 2, items: [{ qty: 1 }, { qty: [2, 3] }] }),
    { operatorName: '$gt', specifiedAs: { 'items.qty': { $gt: 5 } }, reason: 'comparison failed', consideredValues: [1, 2, 3] });
  assert.deepEqual(await detailsFor({ tags: { $in: ['a'] } }, { _id: 3, tags: [] }),
    { operatorName: '$in', specifiedAs: { tags: { $in: ['a'] } }, reason: 'no matching value found in array', consideredValues: [] });
  // At most 10 (internalQueryMaxDocValidationErrorConsideredValues).
  const many = await detailsFor({ n: { $gt: 100 } }, { _id: 4, n: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] });
  assert.deepEqual(many.consideredValues, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  assert.equal(many.consideredValuesTruncated, true);
  // $type lists the considered types.
  assert.deepEqual(await detailsFor({ v: { $type: 'bool' } }, { _id: 5, v: [1, 'x'] }),
    { operatorName: '$type', specifiedAs: { v: { $type: 'bool' } }, reason: 'type did not match', consideredValues: [1, 'x'], consideredTypes: ['int', 'string'] });
  // Operators reading certain types only.
  assert.deepEqual(await detailsFor({ code: /^[A-Z]+$/ }, { _id: 6, code: 42 }), {
    operatorName: '$regex', specifiedAs: { code: /^[A-Z]+$/ }, reason: 'type did not match', consideredType: 'int',
    expectedTypes: ['regex', 'string', 'symbol'], consideredValue: 42,
  });
  assert.deepEqual(await detailsFor({ n: { $mod: [2, 0] } }, { _id: 7, n: 'two' }), {
    operatorName: '$mod', specifiedAs: { n: { $mod: [2, 0] } }, reason: 'type did not match', consideredType: 'string',
    expectedTypes: ['decimal', 'double', 'int', 'long'], consideredValue: 'two',
  });
  assert.deepEqual(await detailsFor({ tags: { $size: 2 } }, { _id: 8, tags: 'a,b' }), {
    operatorName: '$size', specifiedAs: { tags: { $size: 2 } }, reason: 'type did not match', consideredType: 'string',
    expectedType: 'array', consideredValue: 'a,b',
  });
  // $exists follows dotted paths through arrays.
  assert.deepEqual(await detailsFor({ 'a.b': { $exists: false } }, { _id: 9, a: [{ b: 1 }] }),
    { operatorName: '$exists', specifiedAs: { 'a.b': { $exists: false } }, reason: 'path does exist' });
  // Geo: mongod's reasons (with its typographic apostrophe), or no geometry at all.
  assert.deepEqual(await detailsFor({ loc: { $geoWithin: { $box: [[0, 0], [1, 1]] } } }, { _id: 10, loc: [5, 5] }), {
    operatorName: '$geoWithin', specifiedAs: { loc: { $geoWithin: { $box: [[0, 0], [1, 1]] } } },
    reason: 'none of the considered geometries were contained within the expression\u2019s geometry', consideredValues: [5, 5],
  });
  assert.equal((await detailsFor({ loc: { $geoWithin: { $box: [[0, 0], [1, 1]] } } }, { _id: 11, loc: 'here' })).reason,
    'could not find a valid geometry at the given path');
});

h.test('validationAction "warn" writes the document and logs 20294 "Document would fail validation" with namespace, document and errInfo', async () => {
  const db = srv.freshDb('valc_warn');
  await db.createCollection('w', { validator: { qty: { $type: 'int' } }, validationAction: 'warn' });
  await db.collection('w').insertOne({ _id: 'w1', qty: 'ten' });
  assert.deepEqual(await db.collection('w').findOne({ _id: 'w1' }), { _id: 'w1', qty: 'ten' });
  const { log } = await srv.client.db('admin').command({ getLog: 'global' });
  const line = log.map((l) => JSON.parse(l)).filter((l) => l.id === 20294 && l.attr.namespace === `${db.databaseName}.w`).pop();
  assert.ok(line, 'the warning is logged');
  assert.equal(line.s, 'W');
  assert.equal(line.c, 'STORAGE');
  assert.equal(line.msg, 'Document would fail validation');
  assert.deepEqual(line.attr.document, { _id: 'w1', qty: 'ten' });
  assert.deepEqual(line.attr.errInfo, {
    failingDocumentId: 'w1',
    details: { operatorName: '$type', specifiedAs: { qty: { $type: 'int' } }, reason: 'type did not match', consideredValue: 'ten', consideredType: 'string' },
  });
});

h.test('validate counts documents the validator refuses (nNonCompliantDocuments) and says so once: a warning under "warn", an error (not valid) under "error"', async () => {
  const db = srv.freshDb('valc_validate');
  const msg = "Detected one or more documents not compliant with the collection's schema. Check logs for log id 5363500.";
  for (const action of ['warn', 'error']) {
    await db.createCollection(action, { validator: { a: { $exists: true } }, validationAction: action });
    await db.command({ insert: action, documents: [{ _id: 1, a: 1 }, { _id: 2, b: 1 }, { _id: 3, c: 1 }], bypassDocumentValidation: true });
    let r = await db.command({ validate: action });
    assert.equal(r.nNonCompliantDocuments, 2, action);
    if (action === 'warn') {
      assert.equal(r.valid, true);
      assert.deepEqual(r.warnings, [msg]);
      assert.deepEqual(r.errors, []);
    } else {
      assert.equal(r.valid, false);
      assert.deepEqual(r.warnings, []);
      assert.deepEqual(r.errors, [msg]);
    }
    // validationLevel "off" checks nothing.
    await db.command({ collMod: action, validationLevel: 'off' });
    r = await db.command({ validate: action });
    assert.equal(r.nNonCompliantDocuments, 0);
    assert.equal(r.valid, true);
    await db.command({ collMod: action, validationLevel: 'strict' });
    await db.collection(action).deleteMany({ a: { $exists: false } });
    r = await db.command({ validate: action });
    assert.deepEqual([r.valid, r.nNonCompliantDocuments, r.warnings, r.errors], [true, 0, [], []]);
  }
  const { log } = await srv.client.db('admin').command({ getLog: 'global' });
  const lines = log.map((l) => JSON.parse(l)).filter((l) => l.id === 5363500 && l.attr.namespace === `${db.databaseName}.error`);
  assert.deepEqual(lines.map((l) => l.attr.recordId), ['2', '3']);
});

h.test('listCollections lists options in CollectionOptions::appendBSON\'s order (validator, validationLevel, validationAction, collation ...), whatever order create and collMod gave them', async () => {
  const db = srv.freshDb('valc_order');
  await db.command({ create: 'a', validationAction: 'warn', collation: { locale: 'fr' }, validator: { x: 1 }, validationLevel: 'moderate' });
  const keys = async (name) => Object.keys((await db.listCollections({ name }).toArray())[0].options);
  assert.deepEqual(await keys('a'), ['validator', 'validationLevel', 'validationAction', 'collation']);
  // The same options in another order are the same options: no 48.
  await db.command({ create: 'a', validator: { x: 1 }, validationLevel: 'moderate', validationAction: 'warn', collation: { locale: 'fr' } });
  await db.command({ create: 'b', validationLevel: 'moderate' });
  await db.command({ collMod: 'b', validator: { y: 1 } });
  assert.deepEqual(await keys('b'), ['validator', 'validationLevel']);
  await db.command({ create: 'c', validator: { z: 1 }, size: 5000, capped: true });
  assert.deepEqual(await keys('c'), ['capped', 'size', 'validator']);
});

h.test('encrypt keywords are refused (224) in a validator under validationAction "warn" or validationLevel "moderate", at create and when collMod turns them on', async () => {
  const db = srv.freshDb('valc_encwarn');
  const validator = { $jsonSchema: { properties: { ssn: { encrypt: { bsonType: 'int' } } } } };
  const msg = 'Encryption-related validator keywords are not allowed in this context';
  // database_impl.cpp userCreateNS: kEncryptKeywords is dropped from the allowed features.
  let e = await h.expectCode(db.createCollection('w', { validator, validationAction: 'warn' }), 224);
  assert.equal(e.message, msg);
  e = await h.expectCode(db.createCollection('m', { validator, validationLevel: 'moderate' }), 224);
  assert.equal(e.message, msg);
  // collection_impl.cpp setValidationLevel / setValidationAction reparse the validator without them.
  await db.createCollection('s', { validator });
  e = await h.expectCode(db.command({ collMod: 's', validationLevel: 'moderate' }), 224);
  assert.match(e.message, /Encryption-related validator keywords are not allowed in this context$/);
  await h.expectCode(db.command({ collMod: 's', validationAction: 'warn' }), 224);
  const [info] = await db.listCollections({ name: 's' }).toArray();
  assert.deepEqual(info.options, { validator }, 'nothing changed');
  // Without encrypt keywords, warn and moderate are fine; the names of ordinary fields do not matter.
  await db.createCollection('ok', { validator: { $jsonSchema: { properties: { encrypt: { bsonType: 'bool' } } } }, validationAction: 'warn' });
});

h.test('serverStatus metrics.commands.create / collMod.validator count validators given, refused and with $jsonSchema (ValidatorCounters)', async () => {
  const db = srv.freshDb('valc_metrics');
  const admin = srv.client.db('admin');
  const counts = async () => {
    const c = (await admin.command({ serverStatus: 1 })).metrics.commands;
    const n = (v) => ({ failed: Number(v.failed), jsonSchema: Number(v.jsonSchema), total: Number(v.total) });
    return { create: n(c.create.validator), collMod: n(c.collMod.validator) };
  };
  const diff = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, Object.fromEntries(Object.keys(a[k]).map((f) => [f, b[k][f] - a[k][f]]))]));
  const before = await counts();
  const bad = { $jsonSchema: { bsonType: 'object', properties: { a: '' } } };
  const good = { $jsonSchema: { bsonType: 'object', properties: { a: { bsonType: 'number' } } } };
  await db.createCollection('plain');
  await h.expectCode(db.command({ create: 'bad', validator: bad }), 14);
  await db.createCollection('good', { validator: good });
  await db.createCollection('expr', { validator: { $expr: { $eq: ['$a', 1] } } });
  await db.createCollection('empty', { validator: {} });
  await h.expectCode(db.command({ collMod: 'plain', validator: bad }), 14);
  await db.command({ collMod: 'plain', validator: good });
  await db.command({ collMod: 'plain', validator: {} });
  assert.deepEqual(diff(before, await counts()), {
    create: { failed: 1, jsonSchema: 2, total: 3 },
    collMod: { failed: 1, jsonSchema: 2, total: 2 },
  });
});

h.test('a validator may not run JavaScript: $function is 4660800 and $_internalJsEmit 4660801 "cannot be used inside a validator", at create and collMod', async () => {
  const db = srv.freshDb('valc_js');
  const fn = { $expr: { $function: { body: 'function(age) { return age >= 21; }', args: ['$age'], lang: 'js' } } };
  let e = await h.expectCode(db.createCollection('c', { validator: fn }), 4660800);
  assert.equal(e.message, '$function cannot be used inside a validator.');
  await db.createCollection('c');
  // Nested anywhere in the expression (doc_validation_invalid_validators.js).
  e = await h.expectCode(db.command({ collMod: 'c', validator: { $expr: { $and: [{ $eq: ['$a', 1] }, fn.$expr] } } }), 4660800);
  assert.match(e.message, /\$function cannot be used inside a validator\.$/);
  e = await h.expectCode(db.command({ collMod: 'c', validator: { $expr: { $_internalJsEmit: { eval: 'function() {}', this: {} } } } }), 4660801);
  assert.match(e.message, /\$_internalJsEmit cannot be used inside a validator\.$/);
  assert.deepEqual((await db.listCollections({ name: 'c' }).toArray())[0].options, {});
});

/*
 * uniqueItems as a set (InternalSchemaUniqueItemsMatchExpression's
 * BSONEltSet): an array of n elements costs n log n comparisons. It scanned
 * the earlier elements for each one, so 40,000 small objects took 56 s of a
 * worker, deaf to killOp, and 300,000 would have taken hours.
 */
h.test('uniqueItems finds the first repeated element of a 300,000-element array, and the same one as a reference on mixed arrays', { timeout: 120000 }, async () => {
  const db = srv.freshDb('uniqbig');
  await db.createCollection('c', { validator: { $jsonSchema: { properties: { a: { uniqueItems: true } } } } });
  const c = db.collection('c');
  const distinct = Array.from({ length: 300000 }, (_, i) => ({ x: i, y: i % 7 }));
  await c.insertOne({ _id: 1, a: distinct });
  const dup = distinct.slice();
  dup.push({ y: 12345 % 7, x: 12345 }); // the same object, its fields in the other order
  const e = await c.insertOne({ _id: 2, a: dup }).catch((x) => x);
  assert.equal(e.code, 121);
  const d = e.errInfo.details.schemaRulesNotSatisfied[0].propertiesNotSatisfied[0].details[0];
  assert.equal(d.reason, 'found a duplicate item');
  assert.deepEqual(d.duplicatedValue, { y: 12345 % 7, x: 12345 });

  // Mixed arrays against a reference: numbers equal across types, objects whatever their field order, arrays by position.
  const canon = (v) => (Array.isArray(v) ? `[${v.map(canon).join(',')}]`
    : v !== null && typeof v === 'object' && !(v instanceof BSON.Long) && !(v instanceof BSON.Double)
      ? `{${Object.keys(v).sort().map((k) => `${k}:${canon(v[k])}`).join(',')}}`
      : `n${Number(v instanceof BSON.Long ? v.toNumber() : v instanceof BSON.Double ? v.value : v)}`);
  let seed = 7;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const pick = () => {
    const k = rnd(6), x = rnd(4);
    return [x, new BSON.Double(x), BSON.Long.fromNumber(x), { p: x, q: rnd(2) }, { q: rnd(2), p: x }, [x, rnd(2)]][k];
  };
  for (let t = 0; t < 60; t++) {
    const arr = Array.from({ length: 1 + rnd(8) }, pick);
    const seen = new Set();
    let want = null;
    for (const v of arr) { const k = canon(v); if (seen.has(k)) { want = v; break; } seen.add(k); }
    const r = await c.insertOne({ _id: 100 + t, a: arr }).then(() => null, (x) => x);
    if (want === null) {
      assert.equal(r, null, `no duplicate in ${canon(arr)}`);
    } else {
      assert.equal(r && r.code, 121, `a duplicate in ${canon(arr)}`);
      const got = r.errInfo.details.schemaRulesNotSatisfied[0].propertiesNotSatisfied[0].details[0].duplicatedValue;
      assert.equal(canon(got), canon(want), `the first repeated element of ${canon(arr)}`);
    }
  }
});
