'use strict';
// errInfo.details of a $jsonSchema validation failure (121 DocumentValidationFailure), in the
// shapes of mongod 8.0's doc_validation_error.cpp and doc_validation_error_json_schema_test.cpp:
// title / description annotations, additionalProperties, items / additionalItems, the array and
// object count keywords, the logical keywords, and the order mongod lists failing rules in.
const assert = require('node:assert/strict');
const h = require('./harness');

const srv = h.useServer();

let seq = 0;

/* Creates a collection validated by schema, inserts doc, and returns errInfo.details of the 121. */
async function detailsFor(schema, doc) {
  const db = srv.freshDb('jserr');
  const name = `c${seq++}`;
  await db.createCollection(name, { validator: { $jsonSchema: schema } });
  const e = await h.expectCode(db.collection(name).insertOne(doc), 121);
  assert.ok(e.errInfo && e.errInfo.details, 'the 121 carries errInfo.details');
  assert.deepEqual(e.errInfo.failingDocumentId, doc._id);
  return e.errInfo.details;
}

/* The single entry of schemaRulesNotSatisfied under a failing top-level property. */
function propertyDetails(details, name) {
  assert.equal(details.schemaRulesNotSatisfied.length, 1);
  const props = details.schemaRulesNotSatisfied[0];
  assert.equal(props.operatorName, 'properties');
  const p = props.propertiesNotSatisfied.find((x) => x.propertyName === name);
  assert.ok(p, `property ${name} is explained`);
  return p;
}

h.test('the root schema\'s title and description follow operatorName, before schemaRulesNotSatisfied', async () => {
  const d = await detailsFor(
    { title: 'example title', description: 'example description', properties: { a: { minimum: 1 } } },
    { _id: 1, a: 0 });
  assert.deepEqual(d, {
    operatorName: '$jsonSchema',
    title: 'example title',
    description: 'example description',
    schemaRulesNotSatisfied: [{
      operatorName: 'properties',
      propertiesNotSatisfied: [{
        propertyName: 'a',
        details: [{ operatorName: 'minimum', specifiedAs: { minimum: 1 }, reason: 'comparison failed', consideredValue: 0 }],
      }],
    }],
  });
  assert.deepEqual(Object.keys(d), ['operatorName', 'title', 'description', 'schemaRulesNotSatisfied']);
});

h.test('a failing property carries its sub-schema\'s title and description between propertyName and details', async () => {
  const d = await detailsFor(
    { properties: { a: { type: 'number', minimum: 1, title: 'property a', description: 'a >= 1' } } },
    { _id: 2, a: 'foo' });
  const p = propertyDetails(d, 'a');
  assert.deepEqual(p, {
    propertyName: 'a',
    title: 'property a',
    description: 'a >= 1',
    details: [{
      operatorName: 'type', specifiedAs: { type: 'number' }, reason: 'type did not match',
      consideredValue: 'foo', consideredType: 'string',
    }],
  });
  assert.deepEqual(Object.keys(p), ['propertyName', 'title', 'description', 'details']);
});

h.test('allOf / anyOf entries carry each sub-schema\'s index, description and details', async () => {
  const d = await detailsFor(
    { properties: { a: { description: 'property a',
      anyOf: [{ bsonType: 'number', description: 'number?' }, { bsonType: 'string' }] } } },
    { _id: 3, a: {} });
  assert.deepEqual(propertyDetails(d, 'a'), {
    propertyName: 'a',
    description: 'property a',
    details: [{
      operatorName: 'anyOf',
      schemasNotSatisfied: [
        { index: 0, description: 'number?', details: [{ operatorName: 'bsonType', specifiedAs: { bsonType: 'number' },
          reason: 'type did not match', consideredValue: {}, consideredType: 'object' }] },
        { index: 1, details: [{ operatorName: 'bsonType', specifiedAs: { bsonType: 'string' },
          reason: 'type did not match', consideredValue: {}, consideredType: 'object' }] },
      ],
    }],
  });
});

h.test('additionalProperties: false lists the additional field names in document order, not a reason', async () => {
  const d = await detailsFor({ properties: { b: { type: 'number' } }, additionalProperties: false },
    { _id: 0, a: 1, b: 2 });
  assert.deepEqual(d.schemaRulesNotSatisfied, [{
    operatorName: 'additionalProperties',
    specifiedAs: { additionalProperties: false },
    additionalProperties: ['_id', 'a'],
  }]);
});

h.test('additionalProperties: false comes after properties and before required; nested ones report their own fields',
  async () => {
    const d = await detailsFor({
      required: ['z'], additionalProperties: false,
      properties: { _id: {}, a: { type: 'object', additionalProperties: false } },
    }, { _id: 1, a: { b: 1 }, c: 1 });
    assert.deepEqual(d.schemaRulesNotSatisfied, [
      { operatorName: 'properties', propertiesNotSatisfied: [{ propertyName: 'a', details: [
        { operatorName: 'additionalProperties', specifiedAs: { additionalProperties: false }, additionalProperties: ['b'] },
      ] }] },
      { operatorName: 'additionalProperties', specifiedAs: { additionalProperties: false }, additionalProperties: ['c'] },
      { operatorName: 'required', specifiedAs: { required: ['z'] }, missingProperties: ['z'] },
    ]);
  });

h.test('additionalProperties with a schema explains the first failing additional property', async () => {
  const d = await detailsFor({
    properties: { _id: {}, a: { type: 'number' } },
    additionalProperties: { type: 'string', title: 'additional properties', description: 'extras are strings' },
  }, { _id: 1, a: 1, b: 'not this one', c: 'nor this one', d: 1, e: 2 });
  assert.deepEqual(d.schemaRulesNotSatisfied, [{
    operatorName: 'additionalProperties',
    title: 'additional properties',
    description: 'extras are strings',
    reason: 'at least one additional property did not match the subschema',
    failingProperty: 'd',
    details: [{ operatorName: 'type', specifiedAs: { type: 'string' }, reason: 'type did not match',
      consideredValue: 1, consideredType: 'int' }],
  }]);
});

h.test('patternProperties explains, per pattern, the first matching property that fails its schema', async () => {
  const d = await detailsFor({
    properties: { _id: {} },
    patternProperties: { '^S': { type: 'number', title: 'S fields' } },
    additionalProperties: false,
  }, { _id: 1, Super: 1, Slow: 'oh no a string', b: 1 });
  assert.deepEqual(d.schemaRulesNotSatisfied, [
    { operatorName: 'additionalProperties', specifiedAs: { additionalProperties: false }, additionalProperties: ['b'] },
    { operatorName: 'patternProperties', details: [{
      propertyName: 'Slow', title: 'S fields', regexMatched: '^S',
      details: [{ operatorName: 'type', specifiedAs: { type: 'number' }, reason: 'type did not match',
        consideredValue: 'oh no a string', consideredType: 'string' }],
    }] },
  ]);
});

h.test('items with one schema gives a reason, the first failing itemIndex and that item\'s details', async () => {
  const d = await detailsFor(
    { properties: { a: { items: { type: 'string', description: 'elements must be of string type' } } } },
    { _id: 1, a: ['A', 1, {}] });
  assert.deepEqual(propertyDetails(d, 'a').details, [{
    operatorName: 'items',
    description: 'elements must be of string type',
    reason: 'At least one item did not match the sub-schema',
    itemIndex: 1,
    details: [{ operatorName: 'type', specifiedAs: { type: 'string' }, reason: 'type did not match',
      consideredValue: 1, consideredType: 'int' }],
  }]);
});

h.test('nested items schemas each name the failing itemIndex', async () => {
  const d = await detailsFor({ properties: { a: { items: { items: { minimum: 0 } } } } },
    { _id: 1, a: [[1], [], [2, 4], [-1]] });
  assert.deepEqual(propertyDetails(d, 'a').details, [{
    operatorName: 'items', reason: 'At least one item did not match the sub-schema', itemIndex: 3, details: [{
      operatorName: 'items', reason: 'At least one item did not match the sub-schema', itemIndex: 0, details: [{
        operatorName: 'minimum', specifiedAs: { minimum: 0 }, reason: 'comparison failed', consideredValue: -1,
      }],
    }],
  }]);
});

h.test('items as an array explains each failing position, then additionalItems its first failing extra item',
  async () => {
    const d = await detailsFor({ properties: { a: {
      type: 'array', items: [{ type: 'number' }, { type: 'string' }],
      additionalItems: { type: 'object', description: 'only extra documents' },
    } } }, { _id: 1, a: ['1', 'x', {}, 'Fail'] });
    assert.deepEqual(propertyDetails(d, 'a').details, [
      { operatorName: 'items', details: [
        { itemIndex: 0, details: [{ operatorName: 'type', specifiedAs: { type: 'number' },
          reason: 'type did not match', consideredValue: '1', consideredType: 'string' }] },
      ] },
      { operatorName: 'additionalItems', description: 'only extra documents',
        reason: 'At least one additional item did not match the sub-schema', itemIndex: 3,
        details: [{ operatorName: 'type', specifiedAs: { type: 'object' }, reason: 'type did not match',
          consideredValue: 'Fail', consideredType: 'string' }] },
    ]);
  });

h.test('additionalItems: false lists the items past the array form of items', async () => {
  const d = await detailsFor(
    { properties: { a: { items: [{ type: 'number' }, { type: 'string' }], additionalItems: false } } },
    { _id: 1, a: [1, 'First', 'Extra element', 4] });
  assert.deepEqual(propertyDetails(d, 'a').details, [{
    operatorName: 'additionalItems', specifiedAs: { additionalItems: false },
    reason: 'found additional items', additionalItems: ['Extra element', 4],
  }]);
});

h.test('minItems / maxItems give the array as consideredValue and numberOfItems', async () => {
  const d = await detailsFor({ properties: { a: { type: 'array', minItems: 2 }, b: { maxItems: 2 } } },
    { _id: 1, a: [1], b: [1, 2, 3] });
  assert.deepEqual(propertyDetails(d, 'a').details, [{ operatorName: 'minItems', specifiedAs: { minItems: 2 },
    reason: 'array did not match specified length', consideredValue: [1], numberOfItems: 1 }]);
  assert.deepEqual(propertyDetails(d, 'b').details, [{ operatorName: 'maxItems', specifiedAs: { maxItems: 2 },
    reason: 'array did not match specified length', consideredValue: [1, 2, 3], numberOfItems: 3 }]);
});

h.test('uniqueItems gives the array as consideredValue and the first duplicatedValue', async () => {
  const d = await detailsFor({ properties: { c: { type: 'array', uniqueItems: true } } },
    { _id: 1, c: [1, 2, 3, 3, 4, 4] });
  assert.deepEqual(propertyDetails(d, 'c').details, [{ operatorName: 'uniqueItems', specifiedAs: { uniqueItems: true },
    reason: 'found a duplicate item', consideredValue: [1, 2, 3, 3, 4, 4], duplicatedValue: 3 }]);
});

h.test('errInfo stays within its bound: a large failing value is left out but the rule is still named', async () => {
  const big = 'x'.repeat(3000);
  const d = await detailsFor({ properties: { a: { maxLength: 4 } } }, { _id: 1, a: big });
  assert.deepEqual(propertyDetails(d, 'a').details, [{ operatorName: 'maxLength', specifiedAs: { maxLength: 4 },
    reason: 'specified string length was not satisfied' }]);
});

h.test('minProperties / maxProperties give numberOfProperties; required lists missingProperties sorted', async () => {
  const d = await detailsFor({ minProperties: 10, required: ['c', 'b', '_id'], properties: { x: { maxProperties: 1 } } },
    { _id: 1, a: 1, x: { p: 1, q: 2 } });
  assert.deepEqual(d.schemaRulesNotSatisfied, [
    { operatorName: 'properties', propertiesNotSatisfied: [{ propertyName: 'x', details: [
      { operatorName: 'maxProperties', specifiedAs: { maxProperties: 1 },
        reason: 'specified number of properties was not satisfied', numberOfProperties: 2 },
    ] }] },
    { operatorName: 'required', specifiedAs: { required: ['c', 'b', '_id'] }, missingProperties: ['b', 'c'] },
    { operatorName: 'minProperties', specifiedAs: { minProperties: 10 },
      reason: 'specified number of properties was not satisfied', numberOfProperties: 3 },
  ]);
});

h.test('failing rules are listed in mongod\'s keyword order (maximum before minimum, type last), not the schema\'s',
  async () => {
    let d = await detailsFor({ properties: { a: { minimum: 10, maximum: -10, exclusiveMaximum: true } } },
      { _id: 1, a: 5 });
    assert.deepEqual(propertyDetails(d, 'a').details, [
      { operatorName: 'maximum', specifiedAs: { maximum: -10, exclusiveMaximum: true }, reason: 'comparison failed',
        consideredValue: 5 },
      { operatorName: 'minimum', specifiedAs: { minimum: 10 }, reason: 'comparison failed', consideredValue: 5 },
    ]);
    d = await detailsFor({ properties: { b: { bsonType: 'int', minimum: 5 } } }, { _id: 2, b: 2.5 });
    assert.deepEqual(propertyDetails(d, 'b').details, [
      { operatorName: 'minimum', specifiedAs: { minimum: 5 }, reason: 'comparison failed', consideredValue: 2.5 },
      { operatorName: 'bsonType', specifiedAs: { bsonType: 'int' }, reason: 'type did not match',
        consideredValue: 2.5, consideredType: 'double' },
    ]);
    d = await detailsFor({ properties: { c: { minLength: 4, pattern: '^S' } } }, { _id: 3, c: 'foo' });
    assert.deepEqual(propertyDetails(d, 'c').details, [
      { operatorName: 'pattern', specifiedAs: { pattern: '^S' }, reason: 'regular expression did not match',
        consideredValue: 'foo' },
      { operatorName: 'minLength', specifiedAs: { minLength: 4 }, reason: 'specified string length was not satisfied',
        consideredValue: 'foo' },
    ]);
  });

h.test('oneOf with several matching schemas gives matchingSchemaIndexes; not says the child matched', async () => {
  const d = await detailsFor({ properties: { a: { oneOf: [{ minimum: 1 }, { maximum: 3 }] }, b: { not: { type: 'number' } } } },
    { _id: 1, a: 2, b: 1 });
  assert.deepEqual(propertyDetails(d, 'a').details, [{ operatorName: 'oneOf',
    reason: 'more than one subschema matched', matchingSchemaIndexes: [0, 1] }]);
  assert.deepEqual(propertyDetails(d, 'b').details, [{ operatorName: 'not', reason: 'child expression matched' }]);
});

h.test('dependencies accept a title, which leads failingDependencies', async () => {
  const d = await detailsFor({ dependencies: { a: ['b', 'c'], title: 'a needs b and c' } }, { _id: 1, a: 1, b: 2 });
  assert.deepEqual(d.schemaRulesNotSatisfied, [{ operatorName: 'dependencies', title: 'a needs b and c',
    failingDependencies: [{ conditionalProperty: 'a', missingProperties: ['c'] }] }]);
});

h.test('a root type without object can match nothing: the whole $jsonSchema always evaluates to false', async () => {
  const schema = { type: 'number', properties: { a: { minimum: 1 } } };
  const d = await detailsFor(schema, { _id: 1, a: 2 });
  assert.deepEqual(d, { operatorName: '$jsonSchema', specifiedAs: { $jsonSchema: schema },
    reason: 'expression always evaluates to false' });
});

/* errInfo.details of a query-operator validator (not $jsonSchema). */
async function queryDetailsFor(validator, doc) {
  const db = srv.freshDb('jserr');
  const name = `q${seq++}`;
  await db.createCollection(name, { validator });
  const e = await h.expectCode(db.collection(name).insertOne(doc), 121);
  return e.errInfo.details;
}

h.test('query-operator validators explain $or (every clause not satisfied), $nor (the clauses satisfied) and $not (its child, inverted), as mongod\'s doc_validation_error', async () => {
  assert.deepEqual(await queryDetailsFor({ $or: [{ b: { $exists: true } }, { c: 'x' }] }, { _id: 1, c: 'y' }), {
    operatorName: '$or',
    clausesNotSatisfied: [
      { index: 0, details: { operatorName: '$exists', specifiedAs: { b: { $exists: true } }, reason: 'path does not exist' } },
      { index: 1, details: { operatorName: '$eq', specifiedAs: { c: 'x' }, reason: 'comparison failed', consideredValue: 'y' } },
    ],
  });
  assert.deepEqual(await queryDetailsFor({ $nor: [{ a: 1 }, { b: 2 }] }, { _id: 2, a: 1, b: 3 }), {
    operatorName: '$nor',
    clausesSatisfied: [
      { index: 0, details: { operatorName: '$eq', specifiedAs: { a: 1 }, reason: 'comparison succeeded', consideredValue: 1 } },
    ],
  });
  assert.deepEqual(await queryDetailsFor({ a: { $not: { $gt: 5 } } }, { _id: 3, a: 7 }), {
    operatorName: '$not',
    details: { operatorName: '$gt', specifiedAs: { a: { $gt: 5 } }, reason: 'comparison succeeded', consideredValue: 7 },
  });
  // Nested: an $and inside an $or lists only its own failing clause.
  const nested = await queryDetailsFor({ $or: [{ $and: [{ x: 1 }, { y: 2 }] }, { z: 3 }] }, { _id: 4, x: 1, y: 5, z: 4 });
  assert.deepEqual(nested.clausesNotSatisfied[0], {
    index: 0,
    details: { operatorName: '$and', clausesNotSatisfied: [{ index: 1, details: { operatorName: '$eq', specifiedAs: { y: 2 }, reason: 'comparison failed', consideredValue: 5 } }] },
  });
});
