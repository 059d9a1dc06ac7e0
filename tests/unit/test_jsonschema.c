/*
 * test_jsonschema.c: unit tests for the $jsonSchema evaluator
 * (src/query/jsonschema.c), called directly. Schemas and documents are
 * relaxed extended JSON with single quotes for readability.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "doc/jsonschema.h"

static bson_t *
J(const char *json)
{
    char *buf = strdup(json);
    bson_error_t e;
    for (char *p = buf; *p; p++)
        if (*p == '\'')
            *p = '"';
    bson_t *b = bson_new_from_json((const uint8_t *)buf, -1, &e);
    free(buf);
    cr_assert_not_null(b, "bad JSON %s: %s", json, e.message);
    return b;
}

static mf_jsonschema_t *
S(const char *schema, mf_error_t *err)
{
    bson_t *b = J(schema);
    bson_value_t v = {.value_type = BSON_TYPE_DOCUMENT};
    v.value.v_doc.data = (uint8_t *)bson_get_data(b);
    v.value.v_doc.data_len = b->len;
    mf_jsonschema_t *s = mf_jsonschema_new(&v, err);
    bson_destroy(b);
    return s;
}

/* OK: does doc satisfy schema? Fails the test if the schema does not parse. */
static bool
OK(const char *schema, const char *doc)
{
    mf_error_t err = {0};
    mf_jsonschema_t *s = S(schema, &err);
    cr_assert_not_null(s, "schema %s failed to parse: %d %s", schema, err.code, err.msg);
    bson_t *d = J(doc);
    bool r = mf_jsonschema_match(s, d);
    bson_destroy(d);
    mf_jsonschema_free(s);
    return r;
}

#define YES(s, d) cr_assert(OK(s, d), "expected %s to accept %s", s, d)
#define NO(s, d) cr_assert_not(OK(s, d), "expected %s to reject %s", s, d)

static int
BADCODE(const char *schema)
{
    mf_error_t err = {0};
    mf_jsonschema_t *s = S(schema, &err);
    mf_jsonschema_free(s);
    return s ? 0 : err.code;
}

Test(jsonschema, bson_type_and_json_type)
{
    YES("{'properties': {'a': {'bsonType': 'int'}}}", "{'a': 1}");
    NO("{'properties': {'a': {'bsonType': 'int'}}}", "{'a': 1.5}");
    YES("{'properties': {'a': {'bsonType': 'number'}}}", "{'a': 1.5}");
    YES("{'properties': {'a': {'bsonType': ['string', 'null']}}}", "{'a': null}");
    YES("{'properties': {'a': {'type': 'boolean'}}}", "{'a': true}");
    NO("{'properties': {'a': {'type': 'object'}}}", "{'a': [1]}");
    YES("{'properties': {'a': {'type': 'array'}}}", "{'a': [1]}");
    cr_assert_eq(BADCODE("{'type': 'integer'}"), MF_E_FailedToParse);
    cr_assert_eq(BADCODE("{'type': 'object', 'bsonType': 'object'}"), MF_E_FailedToParse);
    cr_assert_eq(BADCODE("{'bsonType': 'nope'}"), MF_E_BadValue);
}

Test(jsonschema, required_properties_and_additional_properties)
{
    YES("{'required': ['a']}", "{'a': null}");
    NO("{'required': ['a', 'b']}", "{'a': 1}");
    const char *closed = "{'properties': {'_id': {}, 'a': {}}, 'additionalProperties': false}";
    YES(closed, "{'_id': 1, 'a': 2}");
    NO(closed, "{'_id': 1, 'b': 2}");
    const char *pat = "{'patternProperties': {'^x_': {'bsonType': 'int'}}, 'additionalProperties': {'bsonType': 'string'}}";
    YES(pat, "{'x_a': 1, 'y': 's'}");
    NO(pat, "{'x_a': 's'}");
    NO(pat, "{'y': 1}");
    YES("{'minProperties': 1, 'maxProperties': 2}", "{'a': 1}");
    NO("{'minProperties': 2}", "{'a': 1}");
    NO("{'maxProperties': 1}", "{'a': 1, 'b': 2}");
    YES("{'dependencies': {'a': ['b']}}", "{'c': 1}");
    NO("{'dependencies': {'a': ['b']}}", "{'a': 1}");
}

Test(jsonschema, numbers_strings_and_enum)
{
    const char *n = "{'properties': {'a': {'minimum': 0, 'maximum': 10, 'exclusiveMaximum': true}}}";
    YES(n, "{'a': 0}");
    NO(n, "{'a': 10}");
    NO(n, "{'a': -1}");
    YES(n, "{'a': 'not a number: ignored'}");
    YES("{'properties': {'a': {'multipleOf': 3}}}", "{'a': 9}");
    NO("{'properties': {'a': {'multipleOf': 3}}}", "{'a': 10}");
    const char *s = "{'properties': {'a': {'minLength': 2, 'maxLength': 3, 'pattern': '^h'}}}";
    YES(s, "{'a': 'hé'}");
    NO(s, "{'a': 'h'}");
    NO(s, "{'a': 'hello'}");
    NO(s, "{'a': 'xy'}");
    YES("{'properties': {'a': {'enum': [1, 'x', null]}}}", "{'a': 1.0}");
    NO("{'properties': {'a': {'enum': [1, 'x', null]}}}", "{'a': 2}");
    cr_assert_eq(BADCODE("{'exclusiveMinimum': true}"), MF_E_FailedToParse);
    cr_assert_eq(BADCODE("{'minLength': -1}"), MF_E_FailedToParse);
    cr_assert_eq(BADCODE("{'required': []}"), MF_E_FailedToParse);
}

Test(jsonschema, arrays)
{
    YES("{'properties': {'a': {'items': {'bsonType': 'int'}}}}", "{'a': [1, 2]}");
    NO("{'properties': {'a': {'items': {'bsonType': 'int'}}}}", "{'a': [1, 'x']}");
    const char *tuple = "{'properties': {'a': {'items': [{'bsonType': 'int'}, {'bsonType': 'string'}], 'additionalItems': false}}}";
    YES(tuple, "{'a': [1, 'x']}");
    NO(tuple, "{'a': [1, 'x', 3]}");
    NO(tuple, "{'a': ['x']}");
    YES("{'properties': {'a': {'minItems': 1, 'maxItems': 2, 'uniqueItems': true}}}", "{'a': [1, 2]}");
    NO("{'properties': {'a': {'minItems': 1}}}", "{'a': []}");
    NO("{'properties': {'a': {'maxItems': 1}}}", "{'a': [1, 2]}");
    NO("{'properties': {'a': {'uniqueItems': true}}}", "{'a': [1, 1.0]}");
}

Test(jsonschema, combinators)
{
    const char *any = "{'properties': {'a': {'anyOf': [{'bsonType': 'int'}, {'bsonType': 'string'}]}}}";
    YES(any, "{'a': 's'}");
    NO(any, "{'a': 1.5}");
    const char *one = "{'properties': {'a': {'oneOf': [{'minimum': 0}, {'maximum': 10}]}}}";
    YES(one, "{'a': -5}");
    NO(one, "{'a': 5}");
    YES("{'properties': {'a': {'allOf': [{'minimum': 0}, {'maximum': 10}]}}}", "{'a': 5}");
    NO("{'properties': {'a': {'not': {'bsonType': 'string'}}}}", "{'a': 's'}");
    YES("{'title': 't', 'description': 'd', 'properties': {'a': {'description': 'x'}}}", "{'a': 1}");
}

/* additionalItems and exclusiveMinimum hold even when other keywords follow them in the schema. */
Test(jsonschema, deferred_keywords_keep_their_values)
{
    NO("{'properties': {'a': {'items': [{}], 'additionalItems': false, 'uniqueItems': true}}}", "{'a': [1, 2, 3]}");
    YES("{'properties': {'a': {'minimum': 1, 'exclusiveMinimum': false, 'bsonType': 'int'}}}", "{'a': 1}");
    NO("{'properties': {'a': {'exclusiveMaximum': true, 'maximum': 1, 'bsonType': 'int'}}}", "{'a': 1}");
}

/*
 * EXPLAINS: the fields mf_jsonschema_explain writes for doc failing schema equal expected
 * (byte for byte, so number types count), within a 4000-byte budget.
 */
static void
EXPLAINS(const char *schema, const char *doc, const char *expected)
{
    mf_error_t err = {0};
    mf_jsonschema_t *s = S(schema, &err);
    cr_assert_not_null(s, "schema %s failed to parse: %d %s", schema, err.code, err.msg);
    bson_t *d = J(doc), *want = J(expected), got;
    bson_init(&got);
    mf_jsonschema_explain(s, d, &got, 4000);
    char *g = bson_as_canonical_extended_json(&got, NULL), *w = bson_as_canonical_extended_json(want, NULL);
    cr_assert(bson_equal(&got, want), "schema %s on %s:\n got  %s\n want %s", schema, doc, g, w);
    bson_free(g);
    bson_free(w);
    bson_destroy(&got);
    bson_destroy(want);
    bson_destroy(d);
    mf_jsonschema_free(s);
}

Test(jsonschema, explain_lists_failing_rules)
{
    EXPLAINS("{'required': ['b', 'a'], 'properties': {'b': {'bsonType': 'int'}}}", "{'b': 'x'}",
             "{'schemaRulesNotSatisfied': [{'operatorName': 'properties', 'propertiesNotSatisfied': ["
             "  {'propertyName': 'b', 'details': [{'operatorName': 'bsonType', 'specifiedAs': {'bsonType': 'int'},"
             "   'reason': 'type did not match', 'consideredValue': 'x', 'consideredType': 'string'}]}]},"
             " {'operatorName': 'required', 'specifiedAs': {'required': ['b', 'a']}, 'missingProperties': ['a']}]}");
    /* Scalar keywords come before the type, maximum before minimum, as mongod translates them. */
    EXPLAINS("{'properties': {'a': {'minimum': 10, 'maximum': -10, 'exclusiveMinimum': true}}}", "{'a': 5}",
             "{'schemaRulesNotSatisfied': [{'operatorName': 'properties', 'propertiesNotSatisfied': ["
             "  {'propertyName': 'a', 'details': ["
             "   {'operatorName': 'maximum', 'specifiedAs': {'maximum': -10}, 'reason': 'comparison failed',"
             "    'consideredValue': 5},"
             "   {'operatorName': 'minimum', 'specifiedAs': {'minimum': 10, 'exclusiveMinimum': true},"
             "    'reason': 'comparison failed', 'consideredValue': 5}]}]}]}");
    /* mongod drops minimum under a single non-numeric type: only the type explains 3. */
    EXPLAINS("{'properties': {'a': {'bsonType': 'string', 'minimum': 5}}}", "{'a': 3}",
             "{'schemaRulesNotSatisfied': [{'operatorName': 'properties', 'propertiesNotSatisfied': ["
             "  {'propertyName': 'a', 'details': [{'operatorName': 'bsonType', 'specifiedAs': {'bsonType': 'string'},"
             "   'reason': 'type did not match', 'consideredValue': 3, 'consideredType': 'int'}]}]}]}");
}

Test(jsonschema, explain_title_and_description)
{
    EXPLAINS("{'title': 'T', 'description': 'D', 'properties': {'a': {'minimum': 1, 'description': 'a >= 1',"
             " 'title': 'A'}}}",
             "{'a': 0}",
             "{'title': 'T', 'description': 'D', 'schemaRulesNotSatisfied': [{'operatorName': 'properties',"
             " 'propertiesNotSatisfied': [{'propertyName': 'a', 'title': 'A', 'description': 'a >= 1', 'details': ["
             "  {'operatorName': 'minimum', 'specifiedAs': {'minimum': 1}, 'reason': 'comparison failed',"
             "   'consideredValue': 0}]}]}]}");
    EXPLAINS("{'properties': {'a': {'anyOf': [{'bsonType': 'int', 'description': 'int?'}, {'bsonType': 'string'}]}}}",
             "{'a': {}}",
             "{'schemaRulesNotSatisfied': [{'operatorName': 'properties', 'propertiesNotSatisfied': ["
             " {'propertyName': 'a', 'details': [{'operatorName': 'anyOf', 'schemasNotSatisfied': ["
             "  {'index': 0, 'description': 'int?', 'details': [{'operatorName': 'bsonType',"
             "   'specifiedAs': {'bsonType': 'int'}, 'reason': 'type did not match', 'consideredValue': {},"
             "   'consideredType': 'object'}]},"
             "  {'index': 1, 'details': [{'operatorName': 'bsonType', 'specifiedAs': {'bsonType': 'string'},"
             "   'reason': 'type did not match', 'consideredValue': {}, 'consideredType': 'object'}]}]}]}]}]}");
    EXPLAINS("{'dependencies': {'a': ['c', 'b'], 'title': 'a needs b and c'}}", "{'a': 1}",
             "{'schemaRulesNotSatisfied': [{'operatorName': 'dependencies', 'title': 'a needs b and c',"
             " 'failingDependencies': [{'conditionalProperty': 'a', 'missingProperties': ['c', 'b']}]}]}");
}

Test(jsonschema, explain_additional_and_pattern_properties)
{
    EXPLAINS("{'properties': {'b': {}}, 'patternProperties': {'^S': {'bsonType': 'int'}},"
             " 'additionalProperties': false}",
             "{'x': 1, 'b': 2, 'Slow': 's', 'y': 3}",
             "{'schemaRulesNotSatisfied': ["
             " {'operatorName': 'additionalProperties', 'specifiedAs': {'additionalProperties': false},"
             "  'additionalProperties': ['x', 'y']},"
             " {'operatorName': 'patternProperties', 'details': [{'propertyName': 'Slow', 'regexMatched': '^S',"
             "  'details': [{'operatorName': 'bsonType', 'specifiedAs': {'bsonType': 'int'},"
             "   'reason': 'type did not match', 'consideredValue': 's', 'consideredType': 'string'}]}]}]}");
    EXPLAINS("{'additionalProperties': {'bsonType': 'string', 'title': 'extras'}}", "{'b': 'ok', 'c': 1, 'd': 2}",
             "{'schemaRulesNotSatisfied': [{'operatorName': 'additionalProperties', 'title': 'extras',"
             " 'reason': 'at least one additional property did not match the subschema', 'failingProperty': 'c',"
             " 'details': [{'operatorName': 'bsonType', 'specifiedAs': {'bsonType': 'string'},"
             "  'reason': 'type did not match', 'consideredValue': 1, 'consideredType': 'int'}]}]}");
}

Test(jsonschema, explain_array_keywords)
{
    EXPLAINS("{'properties': {'a': {'items': {'bsonType': 'string', 'description': 'strings'}}}}",
             "{'a': ['x', 1, 2]}",
             "{'schemaRulesNotSatisfied': [{'operatorName': 'properties', 'propertiesNotSatisfied': ["
             " {'propertyName': 'a', 'details': [{'operatorName': 'items', 'description': 'strings',"
             "  'reason': 'At least one item did not match the sub-schema', 'itemIndex': 1, 'details': ["
             "   {'operatorName': 'bsonType', 'specifiedAs': {'bsonType': 'string'}, 'reason': 'type did not match',"
             "    'consideredValue': 1, 'consideredType': 'int'}]}]}]}]}");
    EXPLAINS("{'properties': {'a': {'items': [{'bsonType': 'int'}, {'bsonType': 'string'}],"
             " 'additionalItems': {'bsonType': 'object'}}}}",
             "{'a': ['1', 2, {}, 'x']}",
             "{'schemaRulesNotSatisfied': [{'operatorName': 'properties', 'propertiesNotSatisfied': ["
             " {'propertyName': 'a', 'details': ["
             "  {'operatorName': 'items', 'details': ["
             "   {'itemIndex': {'$numberLong': '0'}, 'details': [{'operatorName': 'bsonType',"
             "    'specifiedAs': {'bsonType': 'int'}, 'reason': 'type did not match', 'consideredValue': '1',"
             "    'consideredType': 'string'}]},"
             "   {'itemIndex': {'$numberLong': '1'}, 'details': [{'operatorName': 'bsonType',"
             "    'specifiedAs': {'bsonType': 'string'}, 'reason': 'type did not match', 'consideredValue': 2,"
             "    'consideredType': 'int'}]}]},"
             "  {'operatorName': 'additionalItems', 'reason': 'At least one additional item did not match the"
             " sub-schema', 'itemIndex': 3, 'details': [{'operatorName': 'bsonType',"
             "   'specifiedAs': {'bsonType': 'object'}, 'reason': 'type did not match', 'consideredValue': 'x',"
             "   'consideredType': 'string'}]}]}]}]}");
    EXPLAINS("{'properties': {'a': {'items': [{}], 'additionalItems': false, 'maxItems': 2, 'uniqueItems': true}}}",
             "{'a': [1, 2, 2]}",
             "{'schemaRulesNotSatisfied': [{'operatorName': 'properties', 'propertiesNotSatisfied': ["
             " {'propertyName': 'a', 'details': ["
             "  {'operatorName': 'maxItems', 'specifiedAs': {'maxItems': 2},"
             "   'reason': 'array did not match specified length', 'consideredValue': [1, 2, 2], 'numberOfItems': 3},"
             "  {'operatorName': 'uniqueItems', 'specifiedAs': {'uniqueItems': true},"
             "   'reason': 'found a duplicate item', 'consideredValue': [1, 2, 2], 'duplicatedValue': 2},"
             "  {'operatorName': 'additionalItems', 'specifiedAs': {'additionalItems': false},"
             "   'reason': 'found additional items', 'additionalItems': [2, 2]}]}]}]}");
}

Test(jsonschema, explain_object_and_logical_keywords)
{
    EXPLAINS("{'minProperties': 5, 'not': {'required': ['a']}, 'oneOf': [{'required': ['a']}, {'required': ['b']}]}",
             "{'a': 1, 'b': 2}",
             "{'schemaRulesNotSatisfied': ["
             " {'operatorName': 'minProperties', 'specifiedAs': {'minProperties': 5},"
             "  'reason': 'specified number of properties was not satisfied', 'numberOfProperties': 2},"
             " {'operatorName': 'oneOf', 'reason': 'more than one subschema matched', 'matchingSchemaIndexes': [0, 1]},"
             " {'operatorName': 'not', 'reason': 'child expression matched'}]}");
    /* A root type without object can match no document. */
    EXPLAINS("{'bsonType': 'string'}", "{'a': 1}",
             "{'specifiedAs': {'$jsonSchema': {'bsonType': 'string'}},"
             " 'reason': 'expression always evaluates to false'}");
}

/* A small budget drops nested detail and large values but still names the failing rules. */
Test(jsonschema, explain_stays_within_budget)
{
    mf_error_t err = {0};
    mf_jsonschema_t *s = S("{'properties': {'a': {'enum': ['aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',"
                           " 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb']},"
                           " 'b': {'items': {'items': {'items': {'minimum': 5}}}}}}",
                           &err);
    cr_assert_not_null(s);
    bson_t *d = J("{'a': 'cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc',"
                  " 'b': [[[1, 2, 3]], [[4]]]}");
    for (uint32_t budget = 800; budget >= 50; budget /= 2) {
        bson_t out;
        bson_init(&out);
        mf_jsonschema_explain(s, d, &out, budget);
        cr_assert(out.len <= budget + 300, "budget %u gave %u bytes", budget, out.len);
        bson_destroy(&out);
    }
    bson_destroy(d);
    mf_jsonschema_free(s);
}
