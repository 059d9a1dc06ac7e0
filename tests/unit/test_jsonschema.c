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

Test(jsonschema, explain_lists_failing_rules)
{
    mf_error_t err = {0};
    mf_jsonschema_t *s = S("{'required': ['a'], 'properties': {'b': {'bsonType': 'int'}}}", &err);
    cr_assert_not_null(s);
    bson_t *d = J("{'b': 'x'}");
    bson_t arr;
    int n = 0;
    bson_init(&arr);
    mf_jsonschema_explain(s, d, &arr, &n, 4000);
    cr_assert_eq(n, 2, "two failing rules, got %d", n);
    char *js = bson_as_relaxed_extended_json(&arr, NULL);
    cr_assert(strstr(js, "missingProperties") != NULL, "%s", js);
    cr_assert(strstr(js, "propertiesNotSatisfied") != NULL, "%s", js);
    cr_assert(strstr(js, "\"consideredType\" : \"string\"") != NULL, "%s", js);
    bson_free(js);
    bson_destroy(&arr);
    bson_destroy(d);
    mf_jsonschema_free(s);
}
