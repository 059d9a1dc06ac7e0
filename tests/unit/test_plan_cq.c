/*
 * test_plan_cq.c: mf_plan_cq_describe's tree for the operators no client
 * command can show in a planner error ($text and $near / $nearSphere are
 * refused with a hint or a tailable cursor before planning): mongod's
 * TextMatchExpressionBase and GeoNearMatchExpression debugString.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "query/plan.h"

static void
check(const char *filter_json, const char *want_tree)
{
    bson_error_t be;
    bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &be);
    char buf[2048], want[2048];
    cr_assert(filter != NULL, "bad filter %s", filter_json);
    mf_plan_request_t req = {.filter = filter};
    mf_plan_cq_describe("t.c", &req, buf, sizeof(buf));
    snprintf(want, sizeof(want), "ns=t.cTree: %sSort: {}\nProj: {}\n", want_tree);
    cr_assert_str_eq(buf, want, "filter %s", filter_json);
    bson_destroy(filter);
}

Test(plan_cq, text)
{
    check("{\"$text\": {\"$search\": \"hello world\"}}",
          "TEXT : query=hello world, language=english, caseSensitive=0, diacriticSensitive=0\n");
    check("{\"$text\": {\"$search\": \"x\", \"$language\": \"french\", \"$caseSensitive\": true}, \"a\": 1}",
          "$and\n    a $eq 1\n    TEXT : query=x, language=french, caseSensitive=1, diacriticSensitive=0\n");
}

Test(plan_cq, geo_near)
{
    check("{\"loc\": {\"$near\": {\"$geometry\": {\"type\": \"Point\", \"coordinates\": [0, 0]}, \"$maxDistance\": 100}}}",
          "GEONEAR  field=loc maxdist=100 isNearSphere=0\n");
    check("{\"p\": {\"$nearSphere\": [0, 0]}}", "GEONEAR  field=p maxdist=1.79769e+308 isNearSphere=1\n");
    check("{\"p\": {\"$near\": [1, 2], \"$maxDistance\": 0.5}, \"a\": {\"$gt\": 1}}",
          "$and\n    a $gt 1\n    GEONEAR  field=p maxdist=0.5 isNearSphere=0\n");
}

Test(plan_cq, truncated_and_empty)
{
    char buf[24];
    mf_plan_request_t req = {0};
    mf_plan_cq_describe("t.c", &req, buf, sizeof(buf));
    cr_assert_str_eq(buf, "ns=t.cTree: $and\nSort: "); /* cut to cap - 1 characters */
}
