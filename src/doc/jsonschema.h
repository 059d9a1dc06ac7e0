/*
 * jsonschema.h: MongoDB's $jsonSchema query operator (draft 4 subset).
 *
 * A schema is parsed once into a tree of rules and then applied to values.
 * Keywords: bsonType, type (single or array; JSON type "integer" is
 * refused as MongoDB refuses it), required, properties,
 * additionalProperties (bool or schema), patternProperties, dependencies,
 * minimum, maximum, exclusiveMinimum, exclusiveMaximum (draft 4 booleans),
 * multipleOf, minLength, maxLength, pattern, enum, items (schema or array),
 * additionalItems, minItems, maxItems, uniqueItems, minProperties,
 * maxProperties, allOf, anyOf, oneOf, not; title and description only
 * annotate errInfo (as do string title / description entries of
 * dependencies, which mongod allows). Keywords MongoDB knows but does not
 * implement ($ref, format, default, definitions, id, $schema) are
 * 9 FailedToParse "$jsonSchema keyword 'x' is not currently supported";
 * other unknown keywords are 9 FailedToParse "Unknown $jsonSchema keyword:
 * x", as MongoDB 8.0 answers.
 *
 * As in MongoDB, type-specific keywords only constrain values of their type
 * (minimum ignores strings, properties ignores arrays, ...).
 */
#ifndef MF_JSONSCHEMA_H
#define MF_JSONSCHEMA_H

#include <bson/bson.h>
#include <stdbool.h>

#include "common/error.h"

typedef struct mf_jsonschema mf_jsonschema_t;

/*
 * mf_jsonschema_new: parses schema (must be a document). Returns NULL with
 * err on a bad schema. The result does not reference schema's memory.
 */
mf_jsonschema_t *mf_jsonschema_new(const bson_value_t *schema, mf_error_t *err);

/*
 * mf_jsonschema_allow_encrypt: whether the calling thread's following
 * parses accept the encrypt / encryptMetadata keywords (initially true).
 * mongod drops them from a validator's allowed features under
 * validationAction "warn" or validationLevel "moderate"
 * (database_impl.cpp, collection_impl.cpp parseValidator): they are then
 * 224 QueryFeatureNotAllowed. Returns the previous setting.
 */
bool mf_jsonschema_allow_encrypt(bool allow);
void mf_jsonschema_free(mf_jsonschema_t *s);

/* mf_jsonschema_match_value: true if v (NULL = missing, which never matches) satisfies s. */
bool mf_jsonschema_match_value(const mf_jsonschema_t *s, const bson_value_t *v);

/* mf_jsonschema_match: true if document doc satisfies s. */
bool mf_jsonschema_match(const mf_jsonschema_t *s, const bson_t *doc);

/*
 * mf_jsonschema_explain: appends to out (a document being built, after its
 * operatorName '$jsonSchema') what mongod 8.0's errInfo.details says of doc
 * failing s: the root schema's title and description, then
 * schemaRulesNotSatisfied, one entry per failing rule in mongod's shapes and
 * order; or, when the root's type leaves out objects, specifiedAs and reason
 * 'expression always evaluates to false'. Adds no more detail (nested
 * entries, large values) once about max_bytes have been written; out stays
 * the caller's.
 */
void mf_jsonschema_explain(const mf_jsonschema_t *s, const bson_t *doc, bson_t *out, uint32_t max_bytes);

#endif /* MF_JSONSCHEMA_H */
