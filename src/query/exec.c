/*
 * exec.c: plan choice and scans (see exec.h).
 */
#include "query/exec.h"

#include <string.h>

#include "catalog/coll_write.h"

bool
mf_exec_id_equality(const bson_t *filter, bson_value_t *v)
{
    bson_iter_t it;
    if (filter == NULL || bson_count_keys(filter) != 1 || !bson_iter_init_find(&it, filter, "_id"))
        return false;
    const bson_value_t *val = bson_iter_value(&it);
    if (val->value_type == BSON_TYPE_DOCUMENT) {
        bson_iter_t sub;
        if (!bson_iter_recurse(&it, &sub) || !bson_iter_next(&sub))
            goto plain; /* {} is a plain value */
        if (bson_iter_key(&sub)[0] != '$')
            goto plain;
        if (strcmp(bson_iter_key(&sub), "$eq") != 0)
            return false;
        const bson_value_t *inner = bson_iter_value(&sub);
        if (bson_iter_next(&sub))
            return false;
        if (inner->value_type == BSON_TYPE_ARRAY || inner->value_type == BSON_TYPE_REGEX ||
            inner->value_type == BSON_TYPE_DOCUMENT || inner->value_type == BSON_TYPE_NULL)
            return false;
        *v = *inner;
        return true;
    }
    if (val->value_type == BSON_TYPE_ARRAY || val->value_type == BSON_TYPE_REGEX || val->value_type == BSON_TYPE_NULL ||
        val->value_type == BSON_TYPE_UNDEFINED)
        return false;
plain:
    *v = *val;
    return true;
}

int
mf_exec_scan(mf_sess_t *s, mf_coll_t *c, const bson_t *filter, const mf_matcher_t *m, int64_t after_rid,
             mf_exec_visit_fn visit, void *arg, mf_exec_stats_t *stats, mf_error_t *err)
{
    mf_exec_stats_t local;
    bson_value_t idv;
    mf_cur_t *cur;
    int ret;

    if (stats == NULL)
        stats = &local;
    memset(stats, 0, sizeof(*stats));
    if (mf_exec_id_equality(filter, &idv)) {
        int64_t rid;
        bson_t doc;
        mf_match_details_t d = {.array_pos = -1};
        stats->plan = "IDHACK";
        ret = mf_coll_find_id(s, c, &idv, &rid, err);
        stats->keys_examined = 1;
        if (ret == MF_NOTFOUND)
            return 0;
        if (ret == MF_CONFLICT)
            return mf_err_set(err, MF_E_WriteConflict, "WriteConflict during _id lookup");
        if (ret != 0)
            return -1;
        if (rid <= after_rid)
            return 0;
        ret = mf_coll_fetch(s, c, rid, &doc, err);
        if (ret == MF_NOTFOUND)
            return 0;
        if (ret != 0)
            return ret == MF_CONFLICT ? mf_err_set(err, MF_E_WriteConflict, "WriteConflict") : -1;
        stats->docs_examined = 1;
        ret = 0;
        if (m == NULL || mf_matcher_match(m, &doc, &d))
            ret = visit(arg, rid, &doc, &d);
        bson_destroy(&doc);
        return ret < 0 ? -1 : 0;
    }

    stats->plan = "COLLSCAN";
    if (mf_cur_open(s, c->uri, &cur, err) != 0)
        return -1;
    ret = after_rid > 0 ? mf_cur_seek_rid_ge(cur, after_rid + 1) : mf_cur_next(cur);
    while (ret == 0) {
        const uint8_t *v;
        size_t len;
        bson_t doc;
        mf_match_details_t d = {.array_pos = -1};
        int64_t rid = mf_cur_rid(cur);
        mf_cur_value(cur, &v, &len);
        stats->docs_examined++;
        if (bson_init_static(&doc, v, len) && (m == NULL || mf_matcher_match(m, &doc, &d))) {
            int r = visit(arg, rid, &doc, &d);
            if (r < 0) {
                mf_cur_close(cur);
                return -1;
            }
            if (r > 0)
                break;
        }
        ret = mf_cur_next(cur);
    }
    mf_cur_close(cur);
    if (ret == MF_CONFLICT)
        return mf_err_set(err, MF_E_WriteConflict, "WriteConflict during scan");
    if (ret < 0)
        return mf_err_set(err, MF_E_InternalError, "scan failed on %s", c->ns);
    return 0;
}
