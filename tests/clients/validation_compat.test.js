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

const srv = h.useServer();

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
