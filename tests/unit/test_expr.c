/*
 * test_expr.c: aggregation expressions (parse once, evaluate against a document).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "doc/expr.h"
#include "doc/tz.h"
#include "doc/value.h"

/* eval_json: evaluates the expression in {"e": <expr>} against doc; returns 0/-1. */
static int
eval_json(const char *expr_json, const char *doc_json, bson_value_t *out, mf_error_t *err)
{
    bson_error_t berr;
    bson_t *wrap = bson_new_from_json((const uint8_t *)expr_json, -1, &berr);
    bson_t *doc = bson_new_from_json((const uint8_t *)(doc_json ? doc_json : "{}"), -1, &berr);
    bson_iter_t it;
    int rc = -1;

    cr_assert(wrap != NULL && doc != NULL, "bad test JSON: %s / %s", expr_json, doc_json);
    cr_assert(bson_iter_init_find(&it, wrap, "e"));
    mf_err_clear(err);
    mf_expr_t *e = mf_expr_parse(bson_iter_value(&it), err);
    if (e != NULL) {
        rc = mf_expr_eval(e, doc, out, err);
        mf_expr_free(e);
    }
    bson_destroy(wrap);
    bson_destroy(doc);
    return rc;
}

/* check: the expression evaluates to the value in {"r": <expected>} with the same BSON type. */
static void
check(const char *expr_json, const char *doc_json, const char *expected_json)
{
    bson_value_t out;
    mf_error_t err;
    bson_error_t berr;

    int rc = eval_json(expr_json, doc_json, &out, &err);
    cr_assert_eq(rc, 0, "%s failed: %d %s", expr_json, err.code, err.msg);
    bson_t *exp = bson_new_from_json((const uint8_t *)expected_json, -1, &berr);
    cr_assert(exp != NULL, "bad expected JSON %s", expected_json);
    bson_t *got = bson_new();
    if (out.value_type != BSON_TYPE_EOD)
        bson_append_value(got, "r", 1, &out);
    char *gs = bson_as_canonical_extended_json(got, NULL);
    char *es = bson_as_canonical_extended_json(exp, NULL);
    cr_assert_str_eq(gs, es, "%s: got %s, expected %s", expr_json, gs, es);
    bson_free(gs);
    bson_free(es);
    bson_destroy(got);
    bson_destroy(exp);
    bson_value_destroy(&out);
}

static void
check_err(const char *expr_json, const char *doc_json, int code, const char *msg_part)
{
    bson_value_t out;
    mf_error_t err;

    int rc = eval_json(expr_json, doc_json, &out, &err);
    cr_assert_eq(rc, -1, "%s should fail", expr_json);
    cr_assert_eq(err.code, code, "%s: code %d, expected %d (%s)", expr_json, err.code, code, err.msg);
    if (msg_part)
        cr_assert(strstr(err.msg, msg_part) != NULL, "%s: message '%s' lacks '%s'", expr_json, err.msg, msg_part);
}

Test(expr, field_paths_and_system_variables)
{
    check("{\"e\": \"$a.b\"}", "{\"a\": {\"b\": 5}}", "{\"r\": 5}");
    check("{\"e\": \"$a.b\"}", "{\"a\": [{\"b\": 1}, {\"c\": 2}, {\"b\": 3}, 7]}", "{\"r\": [1, 3]}");
    check("{\"e\": \"$missing\"}", "{\"a\": 1}", "{}");
    check("{\"e\": \"$$ROOT\"}", "{\"a\": 1}", "{\"r\": {\"a\": 1}}");
    check("{\"e\": \"$$CURRENT.a\"}", "{\"a\": 1}", "{\"r\": 1}");
    check("{\"e\": \"$$REMOVE\"}", "{\"a\": 1}", "{}");
    check("{\"e\": {\"$type\": \"$$NOW\"}}", "{}", "{\"r\": \"date\"}");
    check("{\"e\": \"plain\"}", "{}", "{\"r\": \"plain\"}");
    check("{\"e\": {\"$literal\": \"$a\"}}", "{\"a\": 1}", "{\"r\": \"$a\"}");
    check("{\"e\": {\"x\": \"$a\", \"y\": \"$nope\"}}", "{\"a\": 1}", "{\"r\": {\"x\": 1}}");
    check("{\"e\": [\"$a\", \"$nope\"]}", "{\"a\": 1}", "{\"r\": [1, null]}");
}

Test(expr, comparisons_use_canonical_order)
{
    check("{\"e\": {\"$eq\": [1, 1.0]}}", "{}", "{\"r\": true}");
    check("{\"e\": {\"$gt\": [\"a\", 5]}}", "{}", "{\"r\": true}");
    check("{\"e\": {\"$eq\": [\"$missing\", null]}}", "{}", "{\"r\": false}");
    check("{\"e\": {\"$lt\": [\"$missing\", null]}}", "{}", "{\"r\": true}");
    check("{\"e\": {\"$cmp\": [2, 1]}}", "{}", "{\"r\": 1}");
    check("{\"e\": {\"$ne\": [\"$a\", 2]}}", "{\"a\": 1}", "{\"r\": true}");
    check("{\"e\": {\"$and\": [1, \"$a\"]}}", "{\"a\": 0}", "{\"r\": false}");
    check("{\"e\": {\"$or\": [null, \"$a\"]}}", "{\"a\": \"x\"}", "{\"r\": true}");
    check("{\"e\": {\"$not\": [0]}}", "{}", "{\"r\": true}");
}

Test(expr, arithmetic_promotes_and_propagates_null)
{
    check("{\"e\": {\"$add\": [1, 2]}}", "{}", "{\"r\": 3}");
    check("{\"e\": {\"$add\": [2147483647, 1]}}", "{}", "{\"r\": {\"$numberLong\": \"2147483648\"}}");
    check("{\"e\": {\"$add\": [{\"$numberLong\": \"9223372036854775807\"}, 1]}}", "{}",
          "{\"r\": 9.2233720368547758e18}");
    check("{\"e\": {\"$add\": [1, 2.5]}}", "{}", "{\"r\": 3.5}");
    check("{\"e\": {\"$add\": [1, null]}}", "{}", "{\"r\": null}");
    check("{\"e\": {\"$add\": [1, \"$nope\"]}}", "{}", "{\"r\": null}");
    check("{\"e\": {\"$add\": [\"$d\", 1000]}}", "{\"d\": {\"$date\": 0}}", "{\"r\": {\"$date\": 1000}}");
    check("{\"e\": {\"$subtract\": [\"$d\", \"$c\"]}}", "{\"d\": {\"$date\": 5000}, \"c\": {\"$date\": 1000}}",
          "{\"r\": {\"$numberLong\": \"4000\"}}");
    check("{\"e\": {\"$subtract\": [10, 4]}}", "{}", "{\"r\": 6}");
    check("{\"e\": {\"$multiply\": [3, 4]}}", "{}", "{\"r\": 12}");
    check("{\"e\": {\"$divide\": [9, 2]}}", "{}", "{\"r\": 4.5}");
    check("{\"e\": {\"$mod\": [9, 4]}}", "{}", "{\"r\": 1}");
    check("{\"e\": {\"$abs\": -3}}", "{}", "{\"r\": 3}");
    check("{\"e\": {\"$floor\": 2.7}}", "{}", "{\"r\": 2.0}");
    check("{\"e\": {\"$ceil\": 2.2}}", "{}", "{\"r\": 3.0}");
    check("{\"e\": {\"$round\": [2.5]}}", "{}", "{\"r\": 2.0}");
    check("{\"e\": {\"$round\": [3.14159, 2]}}", "{}", "{\"r\": 3.14}");
    check("{\"e\": {\"$trunc\": [-2.7]}}", "{}", "{\"r\": -2.0}");
    check("{\"e\": {\"$pow\": [2, 10]}}", "{}", "{\"r\": 1024}");
    check("{\"e\": {\"$sqrt\": 16}}", "{}", "{\"r\": 4.0}");
}

Test(expr, arithmetic_errors)
{
    check_err("{\"e\": {\"$divide\": [1, 0]}}", "{}", MF_E_BadValue, "can't $divide by zero");
    check_err("{\"e\": {\"$mod\": [1, 0]}}", "{}", MF_E_Location16610, "can't $mod by zero");
    check_err("{\"e\": {\"$add\": [1, \"x\"]}}", "{}", MF_E_TypeMismatch, "$add only supports numeric or date types");
    check_err("{\"e\": {\"$multiply\": [1, \"x\"]}}", "{}", MF_E_TypeMismatch, NULL);
    check_err("{\"e\": {\"$sqrt\": -1}}", "{}", MF_E_Location28714, NULL);
}

Test(expr, parse_errors_match_mongodb)
{
    check_err("{\"e\": {\"$foo\": 1}}", "{}", MF_E_InvalidPipelineOperator, "Unrecognized expression '$foo'");
    check_err("{\"e\": {\"$eq\": [1]}}", "{}", MF_E_Location16020,
              "Expression $eq takes exactly 2 arguments. 1 were passed in.");
    check_err("{\"e\": \"$$undefinedVar\"}", "{}", MF_E_Location17276, "Use of undefined variable: undefinedVar");
    check_err("{\"e\": \"$\"}", "{}", MF_E_Location16872, NULL);
    check_err("{\"e\": {\"$add\": [1, 2], \"x\": 1}}", "{}", MF_E_Location15983, NULL);
}

Test(expr, conditionals)
{
    check("{\"e\": {\"$cond\": [{\"$gt\": [\"$a\", 1]}, \"big\", \"small\"]}}", "{\"a\": 2}", "{\"r\": \"big\"}");
    check("{\"e\": {\"$cond\": {\"if\": false, \"then\": 1, \"else\": 2}}}", "{}", "{\"r\": 2}");
    check("{\"e\": {\"$ifNull\": [\"$a\", \"dflt\"]}}", "{}", "{\"r\": \"dflt\"}");
    check("{\"e\": {\"$ifNull\": [\"$a\", \"dflt\"]}}", "{\"a\": 0}", "{\"r\": 0}");
    check("{\"e\": {\"$switch\": {\"branches\": [{\"case\": {\"$eq\": [\"$a\", 1]}, \"then\": \"one\"}], "
          "\"default\": \"other\"}}}",
          "{\"a\": 2}", "{\"r\": \"other\"}");
    /* Constant cases only: mongod drops them when it optimizes, then refuses the empty $switch (40069). */
    check_err("{\"e\": {\"$switch\": {\"branches\": [{\"case\": false, \"then\": 1}]}}}", "{}", MF_E_Location40069, NULL);
}

Test(expr, strings)
{
    check("{\"e\": {\"$concat\": [\"a\", \"$b\", \"c\"]}}", "{\"b\": \"-\"}", "{\"r\": \"a-c\"}");
    check("{\"e\": {\"$concat\": [\"a\", \"$nope\"]}}", "{}", "{\"r\": null}");
    check_err("{\"e\": {\"$concat\": [\"a\", 1]}}", "{}", MF_E_Location16702, "$concat only supports strings, not int");
    check("{\"e\": {\"$toUpper\": \"abc\"}}", "{}", "{\"r\": \"ABC\"}");
    check("{\"e\": {\"$toLower\": \"$nope\"}}", "{}", "{\"r\": \"\"}");
    check("{\"e\": {\"$substrBytes\": [\"hello\", 1, 3]}}", "{}", "{\"r\": \"ell\"}");
    check("{\"e\": {\"$substrCP\": [\"h\\u00e9llo\", 1, 2]}}", "{}", "{\"r\": \"\\u00e9l\"}");
    check("{\"e\": {\"$strLenCP\": \"h\\u00e9\"}}", "{}", "{\"r\": 2}");
    check("{\"e\": {\"$strLenBytes\": \"h\\u00e9\"}}", "{}", "{\"r\": 3}");
    check("{\"e\": {\"$split\": [\"a,b,,c\", \",\"]}}", "{}", "{\"r\": [\"a\", \"b\", \"\", \"c\"]}");
    check("{\"e\": {\"$trim\": {\"input\": \"  hi \"}}}", "{}", "{\"r\": \"hi\"}");
    check("{\"e\": {\"$ltrim\": {\"input\": \"xxhix\", \"chars\": \"x\"}}}", "{}", "{\"r\": \"hix\"}");
    check("{\"e\": {\"$indexOfCP\": [\"hello\", \"l\"]}}", "{}", "{\"r\": 2}");
    check("{\"e\": {\"$regexMatch\": {\"input\": \"Hello\", \"regex\": \"^h\", \"options\": \"i\"}}}", "{}",
          "{\"r\": true}");
}

Test(expr, arrays)
{
    check("{\"e\": {\"$size\": \"$a\"}}", "{\"a\": [1, 2, 3]}", "{\"r\": 3}");
    check_err("{\"e\": {\"$size\": \"$a\"}}", "{}", MF_E_Location17124,
              "The argument to $size must be an array, but was of type: missing");
    check("{\"e\": {\"$arrayElemAt\": [\"$a\", -1]}}", "{\"a\": [1, 2, 3]}", "{\"r\": 3}");
    check("{\"e\": {\"$arrayElemAt\": [\"$a\", 5]}}", "{\"a\": [1, 2, 3]}", "{}");
    check("{\"e\": {\"$first\": \"$a\"}}", "{\"a\": [4, 5]}", "{\"r\": 4}");
    check("{\"e\": {\"$last\": \"$a\"}}", "{\"a\": [4, 5]}", "{\"r\": 5}");
    check("{\"e\": {\"$in\": [2, \"$a\"]}}", "{\"a\": [1, 2.0]}", "{\"r\": true}");
    check_err("{\"e\": {\"$in\": [2, \"$a\"]}}", "{}", MF_E_Location40081, NULL);
    check("{\"e\": {\"$concatArrays\": [[1], [2, 3]]}}", "{}", "{\"r\": [1, 2, 3]}");
    check("{\"e\": {\"$slice\": [[1, 2, 3, 4], -2]}}", "{}", "{\"r\": [3, 4]}");
    check("{\"e\": {\"$slice\": [[1, 2, 3, 4], 1, 2]}}", "{}", "{\"r\": [2, 3]}");
    check("{\"e\": {\"$reverseArray\": [[1, 2]]}}", "{}", "{\"r\": [2, 1]}");
    check("{\"e\": {\"$range\": [0, 10, 3]}}", "{}", "{\"r\": [0, 3, 6, 9]}");
    check("{\"e\": {\"$isArray\": [\"$a\"]}}", "{\"a\": []}", "{\"r\": true}");
    check("{\"e\": {\"$filter\": {\"input\": \"$a\", \"as\": \"x\", \"cond\": {\"$gt\": [\"$$x\", 1]}}}}",
          "{\"a\": [1, 2, 3]}", "{\"r\": [2, 3]}");
    check("{\"e\": {\"$map\": {\"input\": \"$a\", \"in\": {\"$multiply\": [\"$$this\", 10]}}}}", "{\"a\": [1, 2]}",
          "{\"r\": [10, 20]}");
    check("{\"e\": {\"$reduce\": {\"input\": [1, 2, 3], \"initialValue\": 0, \"in\": {\"$add\": [\"$$value\", \"$$this\"]}}}}",
          "{}", "{\"r\": 6}");
    check("{\"e\": {\"$sum\": \"$a\"}}", "{\"a\": [1, 2, \"x\"]}", "{\"r\": 3}");
    check("{\"e\": {\"$avg\": [1, 2]}}", "{}", "{\"r\": 1.5}");
    check("{\"e\": {\"$max\": [1, 5, null]}}", "{}", "{\"r\": 5}");
    check("{\"e\": {\"$setUnion\": [[1, 2], [2, 3]]}}", "{}", "{\"r\": [1, 2, 3]}");
    check("{\"e\": {\"$setIntersection\": [[1, 2], [2, 3]]}}", "{}", "{\"r\": [2]}");
    check("{\"e\": {\"$setDifference\": [[1, 2], [2, 3]]}}", "{}", "{\"r\": [1]}");
    check("{\"e\": {\"$setIsSubset\": [[1], [2, 1]]}}", "{}", "{\"r\": true}");
    check("{\"e\": {\"$anyElementTrue\": [[0, 1]]}}", "{}", "{\"r\": true}");
    check("{\"e\": {\"$allElementsTrue\": [[0, 1]]}}", "{}", "{\"r\": false}");
}

Test(expr, let_and_variables)
{
    check("{\"e\": {\"$let\": {\"vars\": {\"x\": 2, \"y\": \"$a\"}, \"in\": {\"$multiply\": [\"$$x\", \"$$y\"]}}}}",
          "{\"a\": 5}", "{\"r\": 10}");
    check("{\"e\": {\"$let\": {\"vars\": {\"d\": {\"k\": 1}}, \"in\": \"$$d.k\"}}}", "{}", "{\"r\": 1}");
}

Test(expr, conversions)
{
    check("{\"e\": {\"$toString\": 5}}", "{}", "{\"r\": \"5\"}");
    check("{\"e\": {\"$toString\": 1.5}}", "{}", "{\"r\": \"1.5\"}");
    check("{\"e\": {\"$toString\": {\"$date\": 0}}}", "{}", "{\"r\": \"1970-01-01T00:00:00.000Z\"}");
    check("{\"e\": {\"$toInt\": \"42\"}}", "{}", "{\"r\": 42}");
    check("{\"e\": {\"$toInt\": 4.9}}", "{}", "{\"r\": 4}");
    check("{\"e\": {\"$toLong\": 4}}", "{}", "{\"r\": {\"$numberLong\": \"4\"}}");
    check("{\"e\": {\"$toDouble\": \"2.5\"}}", "{}", "{\"r\": 2.5}");
    check("{\"e\": {\"$toBool\": 0}}", "{}", "{\"r\": false}");
    check("{\"e\": {\"$toDate\": \"2020-01-02T03:04:05Z\"}}", "{}", "{\"r\": {\"$date\": \"2020-01-02T03:04:05Z\"}}");
    check("{\"e\": {\"$toObjectId\": \"5f0000000000000000000001\"}}", "{}",
          "{\"r\": {\"$oid\": \"5f0000000000000000000001\"}}");
    check("{\"e\": {\"$toInt\": null}}", "{}", "{\"r\": null}");
    check_err("{\"e\": {\"$toInt\": \"abc\"}}", "{}", MF_E_ConversionFailure, NULL);
    check("{\"e\": {\"$convert\": {\"input\": \"abc\", \"to\": \"int\", \"onError\": -1}}}", "{}", "{\"r\": -1}");
    check("{\"e\": {\"$convert\": {\"input\": null, \"to\": \"int\", \"onNull\": 0}}}", "{}", "{\"r\": 0}");
    check("{\"e\": {\"$type\": \"$a\"}}", "{\"a\": 1}", "{\"r\": \"int\"}");
    check("{\"e\": {\"$type\": \"$nope\"}}", "{}", "{\"r\": \"missing\"}");
    check("{\"e\": {\"$isNumber\": \"1\"}}", "{}", "{\"r\": false}");
}

Test(expr, dates)
{
    const char *doc = "{\"d\": {\"$date\": \"2021-03-04T05:06:07.089Z\"}}";
    check("{\"e\": {\"$year\": \"$d\"}}", doc, "{\"r\": 2021}");
    check("{\"e\": {\"$month\": \"$d\"}}", doc, "{\"r\": 3}");
    check("{\"e\": {\"$dayOfMonth\": \"$d\"}}", doc, "{\"r\": 4}");
    check("{\"e\": {\"$hour\": \"$d\"}}", doc, "{\"r\": 5}");
    check("{\"e\": {\"$minute\": \"$d\"}}", doc, "{\"r\": 6}");
    check("{\"e\": {\"$second\": \"$d\"}}", doc, "{\"r\": 7}");
    check("{\"e\": {\"$millisecond\": \"$d\"}}", doc, "{\"r\": 89}");
    check("{\"e\": {\"$dayOfWeek\": \"$d\"}}", doc, "{\"r\": 5}");
    check("{\"e\": {\"$dayOfYear\": \"$d\"}}", doc, "{\"r\": 63}");
    check("{\"e\": {\"$hour\": {\"date\": \"$d\", \"timezone\": \"+02:00\"}}}", doc, "{\"r\": 7}");
    check("{\"e\": {\"$dateToString\": {\"date\": \"$d\", \"format\": \"%Y/%m/%d %H:%M\"}}}", doc,
          "{\"r\": \"2021/03/04 05:06\"}");
    check("{\"e\": {\"$dateToString\": {\"date\": \"$d\"}}}", doc, "{\"r\": \"2021-03-04T05:06:07.089Z\"}");
    check_err("{\"e\": {\"$year\": \"x\"}}", "{}", MF_E_Location16006, NULL);
}

Test(expr, objects)
{
    check("{\"e\": {\"$mergeObjects\": [{\"a\": 1, \"b\": 1}, null, {\"b\": 2}]}}", "{}", "{\"r\": {\"a\": 1, \"b\": 2}}");
    check("{\"e\": {\"$objectToArray\": {\"a\": 1}}}", "{}", "{\"r\": [{\"k\": \"a\", \"v\": 1}]}");
    check("{\"e\": {\"$arrayToObject\": [[[\"a\", 1], [\"b\", 2]]]}}", "{}", "{\"r\": {\"a\": 1, \"b\": 2}}");
    check("{\"e\": {\"$arrayToObject\": [[{\"k\": \"a\", \"v\": 1}]]}}", "{}", "{\"r\": {\"a\": 1}}");
    check("{\"e\": {\"$getField\": \"a.b\"}}", "{\"a.b\": 3}", "{\"r\": 3}");
    check("{\"e\": {\"$getField\": {\"field\": \"x\", \"input\": {\"x\": 9}}}}", "{}", "{\"r\": 9}");
}

Test(expr, is_constant)
{
    mf_error_t err;
    bson_t *w = bson_new_from_json((const uint8_t *)"{\"a\": {\"$add\": [1, 2]}, \"b\": {\"$add\": [1, \"$x\"]}}", -1, NULL);
    bson_iter_t it;
    bson_iter_init_find(&it, w, "a");
    mf_expr_t *a = mf_expr_parse(bson_iter_value(&it), &err);
    bson_iter_init_find(&it, w, "b");
    mf_expr_t *b = mf_expr_parse(bson_iter_value(&it), &err);
    cr_assert(mf_expr_is_constant(a));
    cr_assert(!mf_expr_is_constant(b));
    mf_expr_free(a);
    mf_expr_free(b);
    bson_destroy(w);
}

Test(expr, error_paths_release_everything)
{
    check_err("{\"e\": {\"$map\": {\"input\": \"$a\", \"in\": {\"$divide\": [1, \"$$this\"]}}}}", "{\"a\": [1, 0]}",
              MF_E_BadValue, NULL);
    check_err("{\"e\": {\"$map\": {\"input\": 5, \"in\": 1}}}", "{}", MF_E_Location16883, NULL);
    check_err("{\"e\": {\"$filter\": {\"input\": \"x\", \"cond\": true}}}", "{}", MF_E_Location28651, NULL);
    check_err("{\"e\": {\"$let\": {\"vars\": {\"x\": 1}, \"in\": \"$$y\"}}}", "{}", MF_E_Location17276, NULL);
    check_err("{\"e\": {\"$let\": {\"vars\": {\"x\": {\"$bad\": 1}}, \"in\": 1}}}", "{}", MF_E_InvalidPipelineOperator, NULL);
    check_err("{\"e\": [1, {\"$add\": [\"a\"]}, 3]}", "{}", MF_E_TypeMismatch, NULL);
    check_err("{\"e\": {\"x\": {\"$concat\": [1]}}}", "{}", MF_E_Location16702, NULL);
    check_err("{\"e\": {\"$cond\": {\"if\": true, \"then\": 1}}}", "{}", MF_E_Location17082, "Missing 'else'");
    check_err("{\"e\": {\"$reduce\": {\"input\": [1], \"initialValue\": 0, \"in\": {\"$concat\": [\"$$value\"]}}}}", "{}",
              MF_E_Location16702, NULL);
    /* Field paths never index arrays by position: "$$o.0" over [1, 2] is [], which $add refuses. */
    check_err("{\"e\": {\"$map\": {\"input\": [[1, 2], [3]], \"as\": \"o\", \"in\": {\"$map\": {\"input\": \"$$o\", \"in\": {\"$add\": [\"$$this\", \"$$o.0\"]}}}}}}",
              "{}", MF_E_TypeMismatch, "not array");
    check("{\"e\": {\"$map\": {\"input\": [[1, 2], [3]], \"as\": \"o\", \"in\": {\"$map\": {\"input\": \"$$o\", \"in\": {\"$add\": [\"$$this\", {\"$size\": \"$$o\"}]}}}}}}",
          "{}", "{\"r\": [[3, 4], [4]]}");
}

Test(expr, std_dev_pop_and_samp)
{
    check("{\"e\": {\"$stdDevPop\": [[2, 4, 4, 4, 5, 5, 7, 9]]}}", "{}", "{\"r\": 2.0}");
    check("{\"e\": {\"$stdDevPop\": [2, 4, 4, 4, 5, 5, 7, 9]}}", "{}", "{\"r\": 2.0}");
    check("{\"e\": {\"$stdDevSamp\": [1, 2, 3, 4, 5]}}", "{}", "{\"r\": 1.5811388300841898}");
    check("{\"e\": {\"$stdDevPop\": \"$a\"}}", "{\"a\": [1, \"x\", null, 3]}", "{\"r\": 1.0}");
    check("{\"e\": {\"$stdDevSamp\": \"$a\"}}", "{\"a\": [1, \"x\"]}", "{\"r\": null}");
    check("{\"e\": {\"$stdDevPop\": \"$a\"}}", "{\"a\": 5}", "{\"r\": 0.0}");
    check("{\"e\": {\"$stdDevPop\": \"$nope\"}}", "{}", "{\"r\": null}");
    check("{\"e\": {\"$stdDevPop\": []}}", "{}", "{\"r\": null}");
}

Test(expr, ambient_variables)
{
    const char *names[] = {"v", "w"};
    bson_value_t vals[2];
    mf_error_t err;
    bson_t *w = BCON_NEW("e", "{", "$add", "[", BCON_UTF8("$$v"), BCON_UTF8("$$w.k"), BCON_UTF8("$a"), "]", "}");
    bson_t *sub = BCON_NEW("k", BCON_INT32(10));
    bson_t *doc = BCON_NEW("a", BCON_INT32(100));
    bson_iter_t it;
    bson_value_t out;

    bson_iter_init_find(&it, w, "e");
    /* Undefined without a frame. */
    cr_assert_null(mf_expr_parse(bson_iter_value(&it), &err));
    cr_assert_eq(err.code, MF_E_Location17276, "code %d", err.code);
    /* Parse with names only, evaluate with values. */
    mf_expr_vars_t f = {names, NULL, 2, mf_expr_vars_current()};
    mf_expr_vars_set(&f);
    mf_expr_t *e = mf_expr_parse(bson_iter_value(&it), &err);
    cr_assert_not_null(e, "%s", err.msg);
    /* A frame without values cannot be evaluated. */
    cr_assert_eq(mf_expr_eval(e, doc, &out, &err), -1);
    mf_expr_vars_set(f.up);
    cr_assert_null(mf_expr_vars_current());
    vals[0].value_type = BSON_TYPE_INT32;
    vals[0].value.v_int32 = 1;
    vals[1].value_type = BSON_TYPE_DOCUMENT;
    vals[1].value.v_doc.data = (uint8_t *)bson_get_data(sub);
    vals[1].value.v_doc.data_len = sub->len;
    mf_expr_vars_t g = {names, vals, 2, NULL};
    mf_expr_vars_set(&g);
    cr_assert_eq(mf_expr_eval(e, doc, &out, &err), 0, "%s", err.msg);
    cr_assert_eq(out.value_type, BSON_TYPE_INT32);
    cr_assert_eq(out.value.v_int32, 111, "got %d", out.value.v_int32);
    mf_expr_vars_set(NULL);
    mf_expr_free(e);
    bson_destroy(w);
    bson_destroy(sub);
    bson_destroy(doc);
}

Test(expr, check_var_name)
{
    mf_error_t err;
    cr_assert_eq(mf_expr_check_var_name("abc_1", &err), 0);
    cr_assert_eq(mf_expr_check_var_name("", &err), -1);
    cr_assert_eq(err.code, MF_E_Location16866, "code %d", err.code);
    cr_assert_eq(mf_expr_check_var_name("Abc", &err), -1);
    cr_assert_eq(err.code, MF_E_Location16867, "code %d", err.code);
    cr_assert_eq(mf_expr_check_var_name("a-b", &err), -1);
    cr_assert_eq(err.code, MF_E_Location16868, "code %d", err.code);
}

/* ---- time zones (doc/tz.h) and the date family ---- */

Test(tz, fixed_offsets_and_olson_zones)
{
    mf_tz_t *z = mf_tz_open("+05:30");
    cr_assert(z != NULL);
    cr_assert_eq(mf_tz_offset(z, 0), 19800);
    mf_tz_free(z);
    z = mf_tz_open("-0800");
    cr_assert_eq(mf_tz_offset(z, 0), -28800);
    mf_tz_free(z);
    cr_assert(mf_tz_open("+5") == NULL);
    cr_assert(mf_tz_open("../../etc/passwd") == NULL);
    cr_assert(mf_tz_open("No/Such_Zone") == NULL);
    cr_assert(mf_tz_open("") == NULL);

    z = mf_tz_open("America/New_York");
    cr_assert(z != NULL, "tzdata missing: /usr/share/zoneinfo/America/New_York");
    cr_assert_eq(mf_tz_offset(z, 1451649600), -5 * 3600); /* 2016-01-01T12:00Z: EST */
    cr_assert_eq(mf_tz_offset(z, 1467374400), -4 * 3600); /* 2016-07-01T12:00Z: EDT */
    cr_assert_eq(mf_tz_offset(z, 2855995200), -4 * 3600); /* 2060-07-01: past the table, by the footer rule */
    cr_assert_eq(mf_tz_offset(z, 2840140800), -5 * 3600); /* 2060-01-01 */
    /* 2021-03-14 02:30 does not exist (clocks go 02:00 -> 03:00): moved forward to 03:30 EDT = 07:30Z */
    cr_assert_eq(mf_tz_local_to_utc(z, 1615689000), 1615707000);
    /* 2021-11-07 01:30 happens twice: the earlier one, EDT = 05:30Z */
    cr_assert_eq(mf_tz_local_to_utc(z, 1636248600), 1636263000);
    cr_assert(!mf_tz_is_utc(z));
    mf_tz_free(z);

    z = mf_tz_open("Australia/Sydney"); /* southern hemisphere: DST across the new year */
    cr_assert(z != NULL);
    cr_assert_eq(mf_tz_offset(z, 2840140800), 11 * 3600);
    cr_assert_eq(mf_tz_offset(z, 2855995200), 10 * 3600);
    mf_tz_free(z);
    cr_assert(mf_tz_is_utc(NULL));
}

Test(expr, date_family)
{
    check("{\"e\": {\"$dateFromParts\": {\"year\": 2017, \"month\": 14, \"day\": 0, \"hour\": 25}}}", "{}",
          "{\"r\": {\"$date\": \"2018-02-01T01:00:00Z\"}}");
    check("{\"e\": {\"$dateFromParts\": {\"isoWeekYear\": 2017, \"isoWeek\": 6, \"isoDayOfWeek\": 3}}}", "{}",
          "{\"r\": {\"$date\": \"2017-02-08T00:00:00Z\"}}");
    check("{\"e\": {\"$isoWeekYear\": \"$d\"}}", "{\"d\": {\"$date\": \"2016-01-01T00:00:00Z\"}}",
          "{\"r\": {\"$numberLong\": \"2015\"}}");
    check("{\"e\": {\"$week\": {\"date\": \"$d\", \"timezone\": \"Asia/Tokyo\"}}}",
          "{\"d\": {\"$date\": \"2016-01-02T16:00:00Z\"}}", "{\"r\": 1}");
    check("{\"e\": {\"$dateFromString\": {\"dateString\": \"2017-02-08T12:10:40.787\", \"timezone\": \"America/New_York\"}}}",
          "{}", "{\"r\": {\"$date\": \"2017-02-08T17:10:40.787Z\"}}");
    check("{\"e\": {\"$dateDiff\": {\"startDate\": {\"$date\": \"2021-03-13T12:00:00Z\"}, \"endDate\": {\"$date\": \"2021-03-14T12:00:00Z\"}, \"unit\": \"hour\", \"timezone\": \"America/New_York\"}}}",
          "{}", "{\"r\": {\"$numberLong\": \"24\"}}");
    check_err("{\"e\": {\"$dateFromParts\": {\"year\": 2017, \"timezone\": \"Nowhere/Land\"}}}", "{}", 40485,
              "unrecognized time zone identifier");
    check_err("{\"e\": {\"$hour\": [1, 2]}}", "{}", 40536, NULL);
    check_err("{\"e\": {\"$dateFromString\": {\"dateString\": \"garbage\"}}}", "{}", 241, "Error parsing date string");
}

Test(expr, strings_arrays_and_fields)
{
    check("{\"e\": {\"$replaceAll\": {\"input\": \"a.b.c\", \"find\": \".\", \"replacement\": \"\"}}}", "{}",
          "{\"r\": \"abc\"}");
    check("{\"e\": {\"$regexFind\": {\"input\": \"xaby\", \"regex\": \"a(b)\"}}}", "{}",
          "{\"r\": {\"match\": \"ab\", \"idx\": 1, \"captures\": [\"b\"]}}");
    check("{\"e\": {\"$sortArray\": {\"input\": [3, 1, 2], \"sortBy\": -1}}}", "{}", "{\"r\": [3, 2, 1]}");
    check("{\"e\": {\"$zip\": {\"inputs\": [[1, 2], [3]], \"useLongestLength\": true, \"defaults\": [0, 9]}}}", "{}",
          "{\"r\": [[1, 3], [2, 9]]}");
    check("{\"e\": {\"$unsetField\": {\"field\": \"a.b\", \"input\": \"$$ROOT\"}}}", "{\"a.b\": 1, \"c\": 2}",
          "{\"r\": {\"c\": 2}}");
    check("{\"e\": {\"$bitXor\": [5, 3]}}", "{}", "{\"r\": 6}");
    check_err("{\"e\": {\"$regexFindAll\": {\"input\": \"a\", \"regex\": \"a\", \"options\": \"z\"}}}", "{}", 51108,
              NULL);
}

/* mongod's codes and check order (src/mongo/db/pipeline/expression.cpp), a sample per family. */
Test(expr, mongod_codes_and_order)
{
    check("{\"e\": {\"$add\": [null, \"x\"]}}", "{}", "{\"r\": null}");
    check_err("{\"e\": {\"$mod\": [\"x\", 1]}}", "{}", MF_E_Location16611, "not string and int");
    check_err("{\"e\": {\"$pow\": [2, \"x\"]}}", "{}", MF_E_Location28763, "$pow's exponent must be numeric");
    check_err("{\"e\": {\"$log\": [8, 1]}}", "{}", MF_E_Location28759, "not equal to 1, but is 1");
    check_err("{\"e\": {\"$round\": [1, 1.5]}}", "{}", MF_E_Location51082, NULL);
    check_err("{\"e\": {\"$slice\": [[1], 0, 0]}}", "{}", MF_E_Location28729, NULL);
    check_err("{\"e\": {\"$range\": [0, 5, 0]}}", "{}", MF_E_Location34449, NULL);
    check_err("{\"e\": {\"$setDifference\": [[1], \"x\"]}}", "{}", MF_E_Location17049, "Second argument");
    check_err("{\"e\": {\"$setIsSubset\": [\"$a\", [1]]}}", "{}", MF_E_Location17310, NULL);
    check_err("{\"e\": {\"$arrayToObject\": [[[\"a\"]]]}}", "{}", MF_E_Location40397, NULL);
    check_err("{\"e\": {\"$indexOfCP\": [\"a\", \"a\", -1]}}", "{}", MF_E_Location40097, "nonnegative starting index");
    check_err("{\"e\": {\"$substrCP\": [\"a\", -1, -1]}}", "{}", MF_E_Location34454, NULL);
    check_err("{\"e\": {\"$ltrim\": {\"input\": \"a\", \"chars\": 1}}}", "{}", MF_E_Location50700, NULL);
    check_err("{\"e\": {\"$reduce\": {\"input\": [], \"in\": 1}}}", "{}", MF_E_Location40078, NULL);
    check_err("{\"e\": {\"$switch\": {\"branches\": []}}}", "{}", MF_E_Location40068, NULL);
    check_err("{\"e\": {\"$let\": {\"vars\": {}, \"in\": 1, \"x\": 1}}}", "{}", MF_E_Location16875, NULL);
    /* Object literals: duplicate and empty field names (mongod's ExpressionObject::parse). */
    check_err("{\"e\": {\"a\": 1, \"a\": 2}}", "{}", MF_E_Location16406, "duplicate field name");
    check_err("{\"e\": {\"\": 1}}", "{}", MF_E_Location15998, NULL);
    /* Operators over constants fail at parse, as mongod's folding at optimization. */
    check_err("{\"e\": {\"$cond\": [true, 1, {\"$divide\": [1, 0]}]}}", "{}", MF_E_BadValue, "can't $divide by zero");
}
