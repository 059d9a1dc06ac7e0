/*
 * cmd_coll.c: database and collection DDL and statistics: create, drop,
 * listCollections, listDatabases, dropDatabase, renameCollection, collStats,
 * dbStats, validate, listIndexes, createIndexes, dropIndexes.
 *
 * DDL takes the catalog's write lock, so it never runs beside a command that
 * is using the collection. Statistics come from the collection's running
 * counts (approx_count / approx_size, exact after startup) and WiredTiger's
 * on-disk sizes.
 *
 * createIndexes validates every requested spec before touching the catalog
 * (MongoDB 8.0's allowed fields, key pattern rules, option types, partial
 * filter operators, TTL via mf_ttl_normalise_spec), checks conflicts against
 * existing indexes and earlier specs of the same request (SPEC A6), then
 * builds the new indexes one after another; a failure drops the ones this
 * command built (and a collection it created), so a request takes effect
 * whole or not at all. Builds report progress to the command's currentOp
 * entry and stop on killOp. Every catalog change is reported to the engine's
 * write observers by the catalog itself (the TTL monitor recomputes its
 * deadline on each).
 *
 * Views are catalog entries with viewOn (and an empty record table, no
 * indexes): create checks their pipeline; listCollections shows type
 * "view"; index commands, collStats and validate on a view answer 166.
 *
 * Arguments are checked as mongod's IDL parsers do, before anything runs:
 * the commands are strict (an unknown field is 40415: field lists in the
 * command table, create's in its type table), typed fields are 14
 * (mf_op_check_types), cursor documents SimpleCursorOptions; create and
 * createIndexes refuse system.* namespaces clients may not use (73).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/rand.h>
#include <sys/statvfs.h>

#include "archive/archive.h"
#include "common/alloc.h"
#include "catalog/coll_write.h"

#include "cmd/cmd.h"
#include "cmd/crud.h"
#include "doc/collation.h"
#include "catalog/timeseries.h"
#include "engine/profiler.h"
#include "index/index_spec.h"
#include "common/curop.h"
#include "engine/cursor.h"
#include "common/fmt.h"
#include "common/log.h"
#include "index/index.h"
#include "query/agg.h"
#include "doc/match.h"
#include "doc/value.h"
#include "ttl/ttl.h"

/* Fields of a command that are the protocol's, not the command's options. */
static bool
is_generic_field(const char *k)
{
    static const char *generic[] = {"writeConcern", "lsid", "$db", "$clusterTime", "comment", "$readPreference",
                                    "txnNumber", "autocommit", "maxTimeMS", "readConcern", "apiVersion",
                                    "apiStrict", "apiDeprecationErrors", "$audit", "startTransaction", NULL};
    for (int i = 0; generic[i]; i++) {
        if (strcmp(k, generic[i]) == 0)
            return true;
    }
    return false;
}

/*
 * cursor_options: a command's "cursor" argument, MongoDB's SimpleCursorOptions
 * (an object whose only field is batchSize, a number >= 0): 14, 40415, 51024.
 * listCollections and listIndexes answer in one batch whatever its size.
 */
static int
cursor_options(mf_op_t *op)
{
    static const mf_field_spec_t types[] = {{"batchSize", MF_FT_NONNEG}, {NULL, MF_FT_ANY}};
    bson_iter_t it;
    bson_t doc;
    const uint8_t *data;
    uint32_t len;
    char ctx[64];
    if (!mf_op_find(op, "cursor", &it) || BSON_ITER_HOLDS_NULL(&it))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.cursor' is the wrong type '%s', expected type 'object'",
                          op->name, mf_type_name(bson_iter_type(&it)));
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&doc, data, len))
        return 0;
    snprintf(ctx, sizeof(ctx), "%s.cursor", op->name);
    return mf_op_check_types(op, ctx, &doc, types, true, false);
}

/*
 * The reply's cursor over the documents of array batch: all of them in
 * firstBatch, or, with cursor.batchSize n below their count, the first n
 * and a cursor (ns_coll: the collection for listIndexes, as mongod 8.0) holding the
 * rest for getMore. 0, or -1 with op->err (too many cursors).
 */
static int
append_cursor(mf_op_t *op, const char *ns_coll, bool lists_indexes, bson_t *batch)
{
    bson_t cd, first;
    bson_iter_t it, c;
    char ns[512];
    int64_t id = 0, limit = -1;
    uint32_t n = 0;
    mf_cursor_t *cur = NULL;
    if (mf_op_find(op, "cursor", &it) && BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &c) &&
        bson_iter_find(&c, "batchSize") && BSON_ITER_HOLDS_NUMBER(&c) && mf_value_as_double(bson_iter_value(&c)) >= 0 &&
        mf_value_as_double(bson_iter_value(&c)) < 2147483648.0) /* larger (or NaN): no limit */
        limit = (int64_t)mf_value_as_double(bson_iter_value(&c));
    bson_init(&first);
    bson_iter_init(&it, batch);
    while (bson_iter_next(&it)) {
        const uint8_t *d;
        uint32_t len;
        bson_t doc;
        bson_iter_document(&it, &len, &d);
        if (!bson_init_static(&doc, d, len))
            continue;
        if (limit < 0 || n < limit) {
            char key[16];
            const char *kp;
            bson_uint32_to_string(n++, &kp, key, sizeof(key));
            BSON_APPEND_DOCUMENT(&first, kp, &doc);
        } else {
            if (cur == NULL)
                cur = mf_cursor_new(MF_CURSOR_DOCS, op->db, ns_coll);
            cur->lists_indexes = lists_indexes;
            mf_docvec_push(&cur->docs, &doc);
        }
    }
    if (cur != NULL) {
        if ((id = mf_cmd_cursor_register(op, cur)) < 0) {
            mf_cursor_free(cur);
            bson_destroy(&first);
            return -1;
        }
        mf_cursors_checkin(op->eng->cursors, cur);
    }
    snprintf(ns, sizeof(ns), "%s.%s", op->db, ns_coll);
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "cursor", &cd);
    BSON_APPEND_INT64(&cd, "id", id);
    BSON_APPEND_UTF8(&cd, "ns", ns);
    BSON_APPEND_ARRAY(&cd, "firstBatch", &first);
    bson_append_document_end(op->reply, &cd);
    bson_destroy(&first);
    return 0;
}

/* ---------- create / drop ---------- */

static int coll_stats_spec_check(mf_op_t *op, const bson_iter_t *spec);

/* 166 CommandNotSupportedOnView: c is a view and the command needs a collection. */
static int
refuse_view(mf_op_t *op, const mf_coll_t *c)
{
    return mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "Namespace %s is a view, not a collection", c->ns);
}

/*
 * The view graph of one database, as mongod's ViewGraph checks it when a
 * view is created or redefined: a node per namespace, a view's children
 * the namespaces it reads (its viewOn and every collection its pipeline's
 * stages read: mf_pipeline_foreign_colls). Built for the one check from
 * the catalog's views (the lock held), so the check costs what the
 * database's view definitions cost to parse.
 */
#define VIEW_MAX_DEPTH 20 /* mongod's ViewGraph::kMaxViewDepth */

typedef struct vnode {
    char *name;
    bool view;
    const bson_t *collation; /* a view's options, holding its "collation" (none: simple); borrowed */
    size_t *kids, nkids, capkids;
    size_t *parents, nparents, capparents;
    bool checked;
    int height;
} vnode_t;

typedef struct vgraph {
    vnode_t *n;
    size_t len, cap;
    const char *db;
    size_t trail[VIEW_MAX_DEPTH + 3]; /* the children walk's path, for the cycle message */
    int ntrail;
} vgraph_t;

static size_t
vg_node(vgraph_t *g, const char *name)
{
    for (size_t i = 0; i < g->len; i++)
        if (strcmp(g->n[i].name, name) == 0)
            return i;
    if (g->len == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 16;
        g->n = mf_realloc(g->n, g->cap * sizeof *g->n);
    }
    memset(&g->n[g->len], 0, sizeof g->n[0]);
    g->n[g->len].name = mf_strdup(name);
    return g->len++;
}

static void
vg_push(size_t **arr, size_t *n, size_t *cap, size_t v)
{
    for (size_t i = 0; i < *n; i++)
        if ((*arr)[i] == v)
            return; /* a set, as mongod's */
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        *arr = mf_realloc(*arr, *cap * sizeof **arr);
    }
    (*arr)[(*n)++] = v;
}

typedef struct vg_edge_arg {
    vgraph_t *g;
    size_t from;
} vg_edge_arg_t;

static int
vg_edge(void *arg, const char *coll)
{
    vg_edge_arg_t *a = arg;
    size_t to = vg_node(a->g, coll); /* may move the array: index, never pointer, across this */
    vnode_t *f = &a->g->n[a->from];
    vg_push(&f->kids, &f->nkids, &f->capkids, to);
    vg_push(&a->g->n[to].parents, &a->g->n[to].nparents, &a->g->n[to].capparents, a->from);
    return 0;
}

/* vg_add_view: the view name's node: its collation and the edges to what it reads (refs, then viewOn, as mongod). */
static void
vg_add_view(vgraph_t *g, const char *name, const char *view_on, const bson_value_t *pipeline, const bson_t *collation)
{
    size_t id = vg_node(g, name);
    vg_edge_arg_t a = {g, id};
    mf_error_t err;
    mf_pipeline_t *p = NULL;

    g->n[id].view = true;
    g->n[id].collation = collation;
    mf_err_clear(&err);
    if (pipeline != NULL && pipeline->value_type == BSON_TYPE_ARRAY && (p = mf_pipeline_new(pipeline, &err)) != NULL)
        (void)mf_pipeline_foreign_colls(p, vg_edge, &a);
    mf_pipeline_free(p);
    vg_edge(&a, view_on);
}

typedef struct vg_visit_arg {
    vgraph_t *g;
    const char *skip; /* the view being (re)defined: its new definition replaces the stored one */
} vg_visit_arg_t;

/* vg_visit: a stored view's node (time-series collections are not views of this graph). */
static void
vg_visit(void *arg, mf_coll_t *c)
{
    vg_visit_arg_t *a = arg;
    bson_iter_t on, pl;
    bson_value_t pv;
    if (!c->is_view || c->is_timeseries || strcmp(c->name, a->skip) == 0 || c->options == NULL ||
        !bson_iter_init_find(&on, c->options, "viewOn") || !BSON_ITER_HOLDS_UTF8(&on))
        return;
    bool has_pl = bson_iter_init_find(&pl, c->options, "pipeline");
    if (has_pl)
        pv = *bson_iter_value(&pl);
    vg_add_view(a->g, c->name, bson_iter_utf8(&on, NULL), has_pl ? &pv : NULL, c->options);
}

/* vg_collation_equal: mongod's collatorsMatch for two views' options/collation holders (NULL: simple). */
static bool
vg_collation_equal(const bson_t *a, const bson_t *b)
{
    bson_iter_t ia, ib;
    bool ha = a != NULL && bson_iter_init_find(&ia, a, "collation") && BSON_ITER_HOLDS_DOCUMENT(&ia);
    bool hb = b != NULL && bson_iter_init_find(&ib, b, "collation") && BSON_ITER_HOLDS_DOCUMENT(&ib);
    if (!ha || !hb)
        return ha == hb;
    const bson_value_t *va = bson_iter_value(&ia), *vb = bson_iter_value(&ib);
    return va->value.v_doc.data_len == vb->value.v_doc.data_len &&
           memcmp(va->value.v_doc.data, vb->value.v_doc.data, va->value.v_doc.data_len) == 0;
}

static int
vg_mismatch(vgraph_t *g, size_t cur, size_t other, mf_error_t *err)
{
    return mf_err_set(err, MF_E_OptionNotSupportedOnView,
                      "View %s.%s has a collation that does not match the collation of view %s.%s", g->db,
                      g->n[cur].name, g->db, g->n[other].name);
}

static int
vg_depth_error(mf_error_t *err)
{
    return mf_err_set(err, MF_E_ViewDepthLimitExceeded, "View depth limit exceeded; maximum depth is %d",
                      VIEW_MAX_DEPTH);
}

/* vg_children: mongod's ViewGraph::_validateChildren (cycles, depth, children's collations, heights). */
static int
vg_children(vgraph_t *g, size_t start, size_t cur, int depth, mf_error_t *err)
{
    g->trail[g->ntrail++] = cur;
    if (depth > 0 && cur == start) {
        /* mongod's message: the last node, then the path from it back to the start. */
        char msg[2048];
        int n = snprintf(msg, sizeof msg, "%s.%s", g->db, g->n[g->trail[g->ntrail - 1]].name);
        for (int i = g->ntrail - 1; i >= 0 && n > 0 && (size_t)n < sizeof msg; i--)
            n += snprintf(msg + n, sizeof msg - (size_t)n, " => %s.%s", g->db, g->n[g->trail[i]].name);
        return mf_err_set(err, MF_E_GraphContainsCycle, "View cycle detected: %s", msg);
    }
    if (depth > VIEW_MAX_DEPTH)
        return vg_depth_error(err);
    int maxh = 0;
    for (size_t i = 0; i < g->n[cur].nkids; i++) {
        size_t kid = g->n[cur].kids[i];
        if (g->n[kid].checked)
            continue;
        if (g->n[kid].view && !vg_collation_equal(g->n[cur].collation, g->n[kid].collation))
            return vg_mismatch(g, cur, kid, err);
        if (vg_children(g, start, kid, depth + 1, err) != 0)
            return -1;
        if (g->n[kid].height > maxh)
            maxh = g->n[kid].height;
    }
    g->ntrail--;
    g->n[cur].checked = true;
    g->n[cur].height = maxh + 1;
    return 0;
}

/* vg_parents: mongod's ViewGraph::_validateParents (depth, parents' collations, heights). */
static int
vg_parents(vgraph_t *g, size_t cur, int depth, mf_error_t *err)
{
    if (depth > VIEW_MAX_DEPTH)
        return vg_depth_error(err);
    int maxh = 0;
    for (size_t i = 0; i < g->n[cur].nparents; i++) {
        size_t par = g->n[cur].parents[i];
        if (g->n[par].view && !vg_collation_equal(g->n[cur].collation, g->n[par].collation))
            return vg_mismatch(g, cur, par, err);
        if (!g->n[par].checked && vg_parents(g, par, depth + 1, err) != 0)
            return -1;
        if (g->n[par].height > maxh)
            maxh = g->n[par].height;
    }
    g->n[cur].checked = true;
    g->n[cur].height = maxh + 1;
    return 0;
}

int
mf_cmd_view_graph_check(mf_op_t *op, const char *db, const char *name, const char *view_on,
                        const bson_value_t *pipeline, const bson_t *collation_holder)
{
    vgraph_t g;
    vg_visit_arg_t va;
    int rc = 0;

    memset(&g, 0, sizeof g);
    g.db = db;
    va.g = &g;
    va.skip = name;
    mf_catalog_coll_visit(op->eng->cat, db, vg_visit, &va);
    size_t me = vg_node(&g, name);
    vg_add_view(&g, name, view_on, pipeline, collation_holder);
    /* The views this one reads directly must share its collation (mongod's validateCollation, before the graph). */
    for (size_t i = 0; i < g.n[me].nkids && rc == 0; i++) {
        vnode_t *k = &g.n[g.n[me].kids[i]];
        if (k->view && g.n[me].kids[i] != me && !vg_collation_equal(collation_holder, k->collation))
            rc = mf_err_set(&op->err, MF_E_OptionNotSupportedOnView, "View %s.%s has conflicting collation with view %s.%s",
                            db, name, db, k->name);
    }
    if (rc == 0 && vg_children(&g, me, me, 0, &op->err) != 0)
        rc = -1;
    if (rc == 0) {
        int children_height = g.n[me].height - 1;
        for (size_t i = 0; i < g.len; i++)
            g.n[i].checked = false, g.n[i].height = 0;
        if (vg_parents(&g, me, 0, &op->err) != 0)
            rc = -1;
        else if (g.n[me].height + children_height - 1 > VIEW_MAX_DEPTH)
            rc = vg_depth_error(&op->err);
    }
    for (size_t i = 0; i < g.len; i++) {
        free(g.n[i].name);
        free(g.n[i].kids);
        free(g.n[i].parents);
    }
    free(g.n);
    return rc;
}

/* append_number: mongod's BSONObjBuilder::appendNumber of a long long: an int below 2^30, else a long. */
static void
append_number(bson_t *b, const char *k, int64_t n)
{
    if (n > -(1LL << 30) && n < (1LL << 30))
        BSON_APPEND_INT32(b, k, (int32_t)n);
    else
        BSON_APPEND_INT64(b, k, n);
}

/*
 * capped_options_normalise: a create's capped, size and max as mongod's
 * CollectionOptions keeps and shows them (fromCreateCommand, appendBSON):
 * for a capped collection {capped: true, size, max} first, size rounded up
 * to a multiple of 256 (adjustCappedSize), max <= 0 meaning 2^31 - 1
 * (adjustCappedMaxDocs); size and max are dropped when not capped. Sizes
 * the catalog refuses (not positive) are left for it to answer.
 */
static void
capped_options_normalise(bson_t *opts)
{
    bson_iter_t it;
    bool capped = bson_iter_init_find(&it, opts, "capped") && bson_iter_as_bool(&it);
    bool has_size = bson_iter_init_find(&it, opts, "size") && mf_value_is_number(bson_iter_value(&it));
    int64_t size = has_size ? bson_iter_as_int64(&it) : 0;
    bool has_max = bson_iter_init_find(&it, opts, "max") && mf_value_is_number(bson_iter_value(&it));
    int64_t max = has_max ? bson_iter_as_int64(&it) : 0;

    if (!bson_has_field(opts, "capped") && !bson_has_field(opts, "size") && !bson_has_field(opts, "max"))
        return;
    if (capped && (!has_size || size <= 0))
        return;
    bson_t out = BSON_INITIALIZER;
    if (capped) {
        BSON_APPEND_BOOL(&out, "capped", true);
        append_number(&out, "size", size <= INT64_MAX - 0xff ? (size + 0xff) & ~(int64_t)0xff : size);
        if (has_max)
            append_number(&out, "max", max <= 0 || max == INT64_MAX ? 0x7fffffff : max);
    }
    bson_iter_init(&it, opts);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "capped") != 0 && strcmp(k, "size") != 0 && strcmp(k, "max") != 0)
            bson_append_value(&out, k, -1, bson_iter_value(&it));
    }
    bson_destroy(opts);
    bson_init(opts);
    bson_concat(opts, &out);
    bson_destroy(&out);
}

/* view_pipeline: the "pipeline" of a view's options, copied (shallow) into *store; NULL when none. */
static const bson_value_t *
view_pipeline(const bson_t *opts, bson_value_t *store)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, opts, "pipeline"))
        return NULL;
    *store = *bson_iter_value(&it);
    return store;
}

/*
 * check_view_options: a view's pipeline must parse and may not write
 * ($out / $merge). Options without viewOn pass.
 */
int
mf_cmd_check_view_options(mf_op_t *op, const bson_t *opts)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, opts, "viewOn"))
        return 0;
    if (!bson_iter_init_find(&it, opts, "pipeline"))
        return 0;
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'create.pipeline' is the wrong type '%s', expected type 'array'",
                          mf_type_name(bson_iter_type(&it)));
    /*
     * A leading $collStats is the view's own (mongod's resolveView stops at it
     * and the aggregate command runs it: cmd_agg.c): its spec is checked here,
     * the stages after it as any pipeline (a $collStats further on is 40602).
     */
    mf_pipeline_t *pl;
    if (mf_crud_stages_start_with(bson_iter_value(&it), "$collStats")) {
        bson_iter_t st, first;
        bson_t rest = BSON_INITIALIZER;
        uint32_t k = 0;
        if (!bson_iter_recurse(&it, &st) || !bson_iter_next(&st) || !bson_iter_recurse(&st, &first) ||
            !bson_iter_next(&first) || coll_stats_spec_check(op, &first) != 0)
            return -1;
        while (bson_iter_next(&st)) {
            char key[16];
            const char *kp;
            bson_uint32_to_string(k++, &kp, key, sizeof key);
            bson_append_value(&rest, kp, -1, bson_iter_value(&st));
        }
        bson_value_t rv = {.value_type = BSON_TYPE_ARRAY};
        rv.value.v_doc.data = (uint8_t *)bson_get_data(&rest);
        rv.value.v_doc.data_len = rest.len;
        pl = mf_pipeline_new(&rv, &op->err);
        bson_destroy(&rest);
    } else {
        pl = mf_pipeline_new(bson_iter_value(&it), &op->err);
    }
    if (pl == NULL)
        return -1;
    bool writes = mf_pipeline_writes(pl), collectionless = mf_pipeline_is_collectionless(pl);
    mf_pipeline_free(pl);
    if (collectionless) {
        /*
         * A stage independent of any collection cannot source a view: $currentOp
         * and $listLocalSessions fail their own parse (as on a collection),
         * $documents view_catalog_helpers.cpp's validator (73 both ways).
         * $listSessions reads config.system.sessions and may.
         */
        bson_iter_t st, first;
        const char *stage = "";
        if (bson_iter_recurse(&it, &st) && bson_iter_next(&st) && BSON_ITER_HOLDS_DOCUMENT(&st) &&
            bson_iter_recurse(&st, &first) && bson_iter_next(&first))
            stage = bson_iter_key(&first);
        if (strcmp(stage, "$currentOp") == 0)
            return mf_err_set(&op->err, MF_E_InvalidNamespace,
                              "$currentOp must be run against the 'admin' database with {aggregate: 1}");
        if (strcmp(stage, "$listLocalSessions") == 0)
            return mf_err_set(&op->err, MF_E_InvalidNamespace,
                              "$listLocalSessions must be run against the database with {aggregate: 1}, not a collection");
        if (strcmp(stage, "$listSessions") != 0)
            return mf_err_set(&op->err, MF_E_InvalidNamespace, "'%s' cannot be used in a view definition", stage);
    }
    if (writes) {
        /*
         * view_catalog_helpers.cpp validatePipeline: the writing stage (the
         * pipeline's last, where $out / $merge must be), its position, and
         * the view ("create" and "collMod" both name it first).
         */
        bson_iter_t st, last, name;
        uint32_t n = 0;
        const char *stage = "$out", *view = "";
        bson_iter_recurse(&it, &st);
        while (bson_iter_next(&st)) {
            last = st;
            n++;
        }
        if (n > 0 && bson_iter_recurse(&last, &name) && bson_iter_next(&name))
            stage = bson_iter_key(&name);
        if (bson_iter_init(&name, op->cmd) && bson_iter_next(&name) && BSON_ITER_HOLDS_UTF8(&name))
            view = bson_iter_utf8(&name, NULL);
        return mf_err_set(&op->err, MF_E_OptionNotSupportedOnView,
                          "The aggregation stage %s in location %u of the pipeline cannot be used in the view "
                          "definition of %s.%s because it writes to disk",
                          stage, n > 0 ? n - 1 : 0, op->db, view);
    }
    return 0;
}

/*
 * create_timeseries: create with a timeseries option (SPEC F1): only the
 * options MongoDB allows beside it, normalized as MongoDB stores them; an
 * existing time-series collection with the same options is success.
 */
static int
create_timeseries(mf_op_t *op, const char *name, const bson_t *opts)
{
    static const char *allowed[] = {"timeseries", "expireAfterSeconds", "storageEngine", "indexOptionDefaults",
                                    "collation", NULL};
    char ns[512];
    bson_iter_t it;
    bson_t ts;
    int64_t expire = -1;
    int rc = 0;

    snprintf(ns, sizeof ns, "%s.%s", op->db, name);
    bson_iter_init(&it, opts);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bool ok = strcmp(k, "capped") == 0 && !bson_iter_as_bool(&it);
        for (int i = 0; !ok && allowed[i]; i++)
            ok = strcmp(k, allowed[i]) == 0;
        if (!ok)
            return mf_err_set(&op->err, MF_E_InvalidOptions, "%s: 'timeseries' is not allowed with '%s'", ns, k);
        if (strcmp(k, "expireAfterSeconds") == 0) {
            const bson_value_t *v = bson_iter_value(&it);
            if (!mf_value_is_number(v))
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field 'create.expireAfterSeconds' is the wrong type '%s', expected types '[long, int, decimal, double]'",
                                  mf_type_name(v->value_type));
            double d = mf_value_as_double(v);
            if (d < 0)
                return mf_err_set(&op->err, MF_E_Location51024,
                                  "BSON field 'create.expireAfterSeconds' value must be >= 0, actual value '%lld'",
                                  mf_double_clamp_ll(d));
            if (mf_op_coll_expire_range(op, d) != 0)
                return -1;
            expire = mf_double_clamp_ll(d); /* safeInt64: truncated, NaN as 0 */
        }
    }
    if (!bson_iter_init_find(&it, opts, "timeseries") ||
        mf_ts_options_normalize(ns, bson_iter_value(&it), &ts, &op->err) != 0)
        return -1;
    /*
     * The view and its buckets are made one after the other: another create
     * of the name may be between the two, so a creation that finds the
     * buckets but no view looks again (the catalog let go meanwhile) for up
     * to 100 ms before it reports the name taken.
     */
    for (int attempt = 0;; attempt++) {
        mf_catalog_wrlock(op->eng->cat);
        mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
        if (c != NULL) {
            bson_t cur;
            mf_coll_t *b = mf_ts_buckets_of(op->eng->cat, c);
            /* MongoDB 7+: the same time-series collection again is success. */
            if (b == NULL || !mf_ts_options_of(c, &cur) || !bson_equal(&cur, &ts) || b->ts_expire != expire)
                rc = mf_err_set(&op->err, MF_E_NamespaceExists, "Collection %s.%s already exists.", op->db, name);
        } else {
            rc = mf_ts_create(op->eng->cat, op->db, name, &ts, expire, &op->err);
        }
        mf_catalog_unlock(op->eng->cat);
        if (rc == 0 || c != NULL || op->err.code != MF_E_NamespaceExists || attempt >= 50)
            break;
        mf_err_clear(&op->err);
        rc = 0;
        struct timespec pause = {0, 2 * 1000000L};
        nanosleep(&pause, NULL);
        if ((rc = mf_curop_check_current(&op->err)) != 0)
            break;
    }
    bson_destroy(&ts);
    return rc;
}

/*
 * clustered_spec: checks create's clusteredIndex as mongod does and appends
 * its normalised form {v: 2, key: {_id: 1}, name, unique: true} to opts.
 * Only {_id: 1} can cluster a collection (197); unique must be true
 * (5979700); v must be 2 (5979704); the legacy boolean form is internal
 * (5979703).
 */
static int
clustered_spec(mf_op_t *op, const bson_iter_t *it, bson_t *opts)
{
    bson_iter_t ci;
    bool has_key = false, has_unique = false, unique = false;
    const char *name = "_id_";
    bson_t out, key;
    if (BSON_ITER_HOLDS_BOOL(it))
        return mf_err_set(&op->err, MF_E_Location5979703,
                          "The 'clusteredIndex' legacy format {clusteredIndex: <bool>} is only supported for specific "
                          "internal collections and vice versa");
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'create.clusteredIndex' is the wrong type '%s', expected types '[bool, object]'",
                          mf_type_name(bson_iter_type(it)));
    bson_iter_recurse(it, &ci);
    bool key_on_id = false;
    while (bson_iter_next(&ci)) {
        const char *k = bson_iter_key(&ci);
        if (strcmp(k, "key") == 0) {
            bson_iter_t ki;
            if (!BSON_ITER_HOLDS_DOCUMENT(&ci))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'clusteredIndex.key' is the wrong type '%s', expected type 'object'",
                                  mf_type_name(bson_iter_type(&ci)));
            has_key = true;
            bson_iter_recurse(&ci, &ki);
            key_on_id = bson_iter_next(&ki) && strcmp(bson_iter_key(&ki), "_id") == 0 &&
                        mf_value_is_number(bson_iter_value(&ki)) && mf_value_as_double(bson_iter_value(&ki)) == 1 &&
                        !bson_iter_next(&ki);
        } else if (strcmp(k, "unique") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&ci))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'clusteredIndex.unique' is the wrong type '%s', expected type 'bool'",
                                  mf_type_name(bson_iter_type(&ci)));
            has_unique = true;
            unique = bson_iter_bool(&ci);
        } else if (strcmp(k, "name") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&ci))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'clusteredIndex.name' is the wrong type '%s', expected type 'string'",
                                  mf_type_name(bson_iter_type(&ci)));
            name = bson_iter_utf8(&ci, NULL);
        } else if (strcmp(k, "v") == 0) {
            if (!mf_value_is_number(bson_iter_value(&ci)) || mf_value_as_double(bson_iter_value(&ci)) != 2)
                return mf_err_set(&op->err, MF_E_Location5979704,
                                  "Invalid clusteredIndex specification; cannot create a clusteredIndex with v=%g",
                                  mf_value_is_number(bson_iter_value(&ci)) ? mf_value_as_double(bson_iter_value(&ci)) : 0.0);
        } else {
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'clusteredIndex.%s' is an unknown field.", k);
        }
    }
    if (!has_key)
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'clusteredIndex.key' is missing but a required field");
    if (!has_unique)
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'clusteredIndex.unique' is missing but a required field");
    if (!unique)
        return mf_err_set(&op->err, MF_E_Location5979700, "The clusteredIndex option requires unique: true to be specified");
    if (!key_on_id)
        return mf_err_set(&op->err, MF_E_InvalidIndexSpecificationOption,
                          "The clusteredIndex option is only supported for key: {_id: 1}");
    BSON_APPEND_DOCUMENT_BEGIN(opts, "clusteredIndex", &out);
    BSON_APPEND_INT32(&out, "v", 2);
    BSON_APPEND_DOCUMENT_BEGIN(&out, "key", &key);
    BSON_APPEND_INT32(&key, "_id", 1);
    bson_append_document_end(&out, &key);
    BSON_APPEND_UTF8(&out, "name", name);
    BSON_APPEND_BOOL(&out, "unique", true);
    bson_append_document_end(opts, &out);
    return 0;
}

/*
 * create's fields (create.idl, strict: anything else is 40415, so no unknown
 * option is stored with the collection); uuid is replication's own (a
 * member's initial sync and oplog), refused from clients below.
 */
static const mf_field_spec_t create_types[] = {
    {"capped", MF_FT_BOOL},
    {"autoIndexId", MF_FT_BOOL},
    {"idIndex", MF_FT_OBJ},
    {"size", MF_FT_NUM},
    {"max", MF_FT_NUM},
    {"storageEngine", MF_FT_OBJ},
    {"validator", MF_FT_OBJ},
    {"validationLevel", MF_FT_STR},
    {"validationAction", MF_FT_STR},
    {"indexOptionDefaults", MF_FT_OBJ},
    {"viewOn", MF_FT_STR},
    {"pipeline", MF_FT_ARR},
    {"collation", MF_FT_OBJ},
    {"changeStreamPreAndPostImages", MF_FT_OBJ},
    {"timeseries", MF_FT_OBJ},
    {"clusteredIndex", MF_FT_ANY},
    {"recordIdsReplicated", MF_FT_BOOL},
    {"expireAfterSeconds", MF_FT_ANY},
    {"encryptedFields", MF_FT_OBJ},
    {"temp", MF_FT_BOOL},
    {"flags", MF_FT_NUM},
    {"uuid", MF_FT_ANY},
    {NULL, MF_FT_ANY}};

/*
 * safe_int64: a number as IDL's safeInt64 reads it (BSONElement::
 * safeNumberLong): truncated, a value past the int64 range clamped to it
 * (a double cast would be undefined there).
 */
static int64_t
safe_int64(const bson_value_t *v)
{
    int64_t n;
    if (mf_value_as_int64(v, &n))
        return n;
    double d = mf_value_as_double(v);
    return d != d ? 0 : d >= 9223372036854775807.0 ? INT64_MAX : d <= -9223372036854775808.0 ? INT64_MIN : (int64_t)d;
}

/* create.idl's validators: size <= 1 PB, max < 2^31 (51024, as IDL's comparison errors). */
static int
create_bounds(mf_op_t *op)
{
    bson_iter_t it;
    int64_t n;
    if (mf_op_find(op, "size", &it) && mf_value_is_number(bson_iter_value(&it)) &&
        mf_value_as_double(bson_iter_value(&it)) > 1125899906842624.0) {
        n = safe_int64(bson_iter_value(&it));
        return mf_err_set(&op->err, MF_E_Location51024,
                          "BSON field 'size' value must be <= 1125899906842624, actual value '%lld'", (long long)n);
    }
    if (mf_op_find(op, "max", &it) && mf_value_is_number(bson_iter_value(&it)) &&
        mf_value_as_double(bson_iter_value(&it)) >= 2147483648.0) {
        n = safe_int64(bson_iter_value(&it));
        return mf_err_set(&op->err, MF_E_Location51024, "BSON field 'max' value must be < 2147483648, actual value '%lld'",
                          (long long)n);
    }
    return 0;
}

/*
 * id_collation_ok: whether an index spec on {_id: +-1} has the collection's
 * default collation, as mongod's IndexCatalogImpl::_isSpecOk requires of an
 * _id index (both absent: simple).
 */
static bool
id_collation_ok(const mf_coll_t *c, const bson_t *spec)
{
    bson_iter_t it;
    mf_collation_t *a = NULL, *b = NULL;
    mf_error_t e;
    bool ok = true;
    mf_err_clear(&e);
    if (bson_iter_init_find(&it, spec, "collation") && mf_collation_from_value(bson_iter_value(&it), &a, &e) != 0)
        ok = false;
    if (ok && c->options != NULL && bson_iter_init_find(&it, c->options, "collation") &&
        mf_collation_from_value(bson_iter_value(&it), &b, &e) != 0)
        ok = false;
    if (ok)
        ok = mf_collation_equal(a, b);
    mf_collation_free(a);
    mf_collation_free(b);
    return ok;
}

/*
 * create of a collection that exists with other options: mongod's
 * checkCollectionOptions names the options it has, its UUID first, as
 * BSONObj::toString shows them. Returns -1 with op->err (48).
 */
static int
exists_with_other_options(mf_op_t *op, const mf_coll_t *c)
{
    char opts[700], uuid[37];
    const uint8_t *u = c->uuid;
    snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
             u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    opts[0] = '\0';
    if (c->options != NULL && !bson_empty(c->options))
        mf_fmt_doc(c->options, opts, sizeof opts);
    /* opts is "{ k: v, ... }" or empty: its fields follow the UUID's. */
    return mf_err_set(&op->err, MF_E_NamespaceExists,
                      "namespace %s.%s already exists, but with different options: { uuid: UUID(\"%s\")%s%s", op->db,
                      c->name, uuid, opts[0] ? ", " : " }", opts[0] ? opts + 2 : "");
}

/* sub_doc_or_empty: the document or array field key of doc into *out (read-only view), an empty one if absent. */
static void
sub_doc_or_empty(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    uint32_t len;
    const uint8_t *data;
    if (doc != NULL && bson_iter_init_find(&it, doc, key) &&
        (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it))) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            bson_iter_document(&it, &len, &data);
        else
            bson_iter_array(&it, &len, &data);
        if (bson_init_static(out, data, len))
            return;
    }
    bson_init(out);
}

/*
 * view_exists_with_other_options: create of a name that is a view, with
 * other options: create_command.cpp's checkCollectionOptions for a view
 * names what differs, in its order: viewOn, pipeline, collation (the
 * view's full spec, then the collation as the command gave it). opts: the
 * normalised options of the create. Returns -1 with op->err set.
 */
static int
view_exists_with_other_options(mf_op_t *op, const mf_coll_t *c, const bson_t *opts)
{
    bson_iter_t it;
    const char *old_on = "", *new_on = "";
    bson_t a, b;
    char sa[600], sb[600];
    bool same;

    if (c->options != NULL && bson_iter_init_find(&it, c->options, "viewOn") && BSON_ITER_HOLDS_UTF8(&it))
        old_on = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, opts, "viewOn") && BSON_ITER_HOLDS_UTF8(&it))
        new_on = bson_iter_utf8(&it, NULL);
    /* A create without viewOn names the database alone: a NamespaceString with an empty collection has no dot. */
    if (strcmp(old_on, new_on) != 0)
        return mf_err_set(&op->err, MF_E_NamespaceExists, "namespace %s.%s already exists, but is a view on %s.%s rather than %s%s%s",
                          op->db, c->name, op->db, old_on, op->db, new_on[0] ? "." : "", new_on);
    sub_doc_or_empty(c->options, "pipeline", &a);
    sub_doc_or_empty(opts, "pipeline", &b);
    same = bson_equal(&a, &b);
    mf_fmt_doc(&a, sa, sizeof sa);
    mf_fmt_doc(&b, sb, sizeof sb);
    if (!same)
        return mf_err_set(&op->err, MF_E_NamespaceExists, "namespace %s.%s already exists, but with pipeline %s rather than %s",
                          op->db, c->name, sa, sb);
    sub_doc_or_empty(c->options, "collation", &a);
    sub_doc_or_empty(opts, "collation", &b);
    if (!bson_equal(&a, &b)) {
        bson_t given;
        mf_fmt_doc(&a, sa, sizeof sa);
        sub_doc_or_empty(op->cmd, "collation", &given);
        mf_fmt_doc(&given, sb, sizeof sb);
        return mf_err_set(&op->err, MF_E_NamespaceExists, "namespace %s.%s already exists, but with collation: %s rather than %s",
                          op->db, c->name, sa, sb);
    }
    return mf_err_set(&op->err, MF_E_NamespaceExists, "Collection %s.%s already exists.", op->db, c->name);
}

static int
cmd_create(mf_op_t *op)
{
    const char *name;
    bson_t opts;
    bson_iter_t it;
    mf_coll_t *c;
    int rc = 0;

    if (mf_op_coll_name(op, &name) != 0 ||
        mf_op_check_types(op, op->name, op->cmd, create_types, !(op->client != NULL && op->client->internal), true) != 0 ||
        mf_crud_check_write_ns(op, name, true) != 0 || create_bounds(op) != 0)
        return -1;
    bson_init(&opts);
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (is_generic_field(k) || mf_cmd_is_generic_arg(k))
            continue;
        if (strcmp(k, "uuid") == 0 && !(op->client != NULL && op->client->internal)) {
            bson_destroy(&opts);
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'create.uuid' is an unknown field.");
        }
        if (strcmp(k, "capped") == 0 && !BSON_ITER_HOLDS_BOOL(&it) && !mf_value_is_number(bson_iter_value(&it))) {
            bson_destroy(&opts);
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'create.capped' is the wrong type '%s', expected type 'bool'",
                              mf_type_name(bson_iter_type(&it)));
        }
        if ((strcmp(k, "validator") == 0 || strcmp(k, "timeseries") == 0 || strcmp(k, "collation") == 0) &&
            !BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_destroy(&opts);
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'create.%s' is the wrong type '%s', expected type 'object'",
                              k, mf_type_name(bson_iter_type(&it)));
        }
        if (mf_cmd_validation_option(op, "create", &it) != 0) {
            bson_destroy(&opts);
            return -1;
        }
        /* An empty validator is none: CollectionOptions::toBSON leaves it out of listCollections. */
        if (strcmp(k, "validator") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_value(&it)->value.v_doc.data_len <= 5)
            continue;
        if (strcmp(k, "clusteredIndex") == 0) {
            if (clustered_spec(op, &it, &opts) != 0) {
                bson_destroy(&opts);
                return -1;
            }
            continue;
        }
        if (strcmp(k, "changeStreamPreAndPostImages") == 0) {
            /* Kept only when enabled, as mongod's CollectionOptions::toBSON (listCollections shows it then). */
            bool on;
            if (mf_cmd_pre_images_option(op, "create", &it, &on) != 0) {
                bson_destroy(&opts);
                return -1;
            }
            if (on && mf_op_has(op, "viewOn")) {
                bson_destroy(&opts);
                return mf_err_set(&op->err, MF_E_InvalidOptions,
                                  "option not supported on a view: changeStreamPreAndPostImages");
            }
            if (on) {
                bson_t pi;
                BSON_APPEND_DOCUMENT_BEGIN(&opts, "changeStreamPreAndPostImages", &pi);
                BSON_APPEND_BOOL(&pi, "enabled", true);
                bson_append_document_end(&opts, &pi);
            }
            continue;
        }
        if (strcmp(k, "collation") == 0) {
            /* The collection's default collation, kept in full as listCollections shows it (simple: none). */
            mf_collation_t *coll;
            bson_t cs;
            if (mf_collation_from_value(bson_iter_value(&it), &coll, &op->err) != 0) {
                bson_destroy(&opts);
                return -1;
            }
            if (coll != NULL) {
                bson_append_document_begin(&opts, "collation", -1, &cs);
                mf_collation_append_spec(coll, &cs);
                bson_append_document_end(&opts, &cs);
                mf_collation_free(coll);
            }
            continue;
        }
        bson_append_value(&opts, k, -1, bson_iter_value(&it));
    }
    capped_options_normalise(&opts);
    mf_cmd_options_canonical(&opts);
    bson_iter_t ti;
    if (bson_iter_init_find(&ti, &opts, "timeseries")) {
        rc = create_timeseries(op, name, &opts);
        bson_destroy(&opts);
        return rc;
    }
    bool clustered = bson_has_field(&opts, "clusteredIndex");
    if (bson_iter_init_find(&ti, &opts, "expireAfterSeconds") && !clustered) {
        bson_destroy(&opts);
        return mf_err_set(&op->err, MF_E_InvalidOptions,
                          "'expireAfterSeconds' is only supported on time-series collections or when the 'clusteredIndex' option is specified");
    }
    if (clustered && bson_iter_init_find(&ti, &opts, "expireAfterSeconds")) {
        /* TTL on a clustered collection: documents whose _id is a date expire (SPEC, clustered TTL). */
        /* The create command's IDL field (safeInt64), as for a time-series collection. */
        const bson_value_t *ev = bson_iter_value(&ti);
        if (!mf_value_is_number(ev)) {
            bson_destroy(&opts);
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field 'create.expireAfterSeconds' is the wrong type '%s', expected types '[long, int, decimal, double]'",
                              mf_type_name(ev->value_type));
        }
        double d = mf_value_as_double(ev);
        if (d < 0) {
            bson_destroy(&opts);
            return mf_err_set(&op->err, MF_E_InvalidOptions, "TTL index 'expireAfterSeconds' option cannot be less than 0. expireAfterSeconds: %lld",
                              mf_double_clamp_ll(d));
        }
        if (mf_op_coll_expire_range(op, d) != 0) {
            bson_destroy(&opts);
            return -1;
        }
        /* Kept as mongod's CollectionOptions keeps it: a long. */
        bson_t kept = BSON_INITIALIZER;
        bson_iter_t oi;
        bson_iter_init(&oi, &opts);
        while (bson_iter_next(&oi)) {
            if (strcmp(bson_iter_key(&oi), "expireAfterSeconds") == 0)
                BSON_APPEND_INT64(&kept, "expireAfterSeconds", mf_double_clamp_ll(d));
            else
                bson_append_iter(&kept, bson_iter_key(&oi), -1, &oi);
        }
        bson_destroy(&opts);
        bson_steal(&opts, &kept);
    }
    if (mf_op_has(op, "pipeline") && !mf_op_has(op, "viewOn")) {
        bson_destroy(&opts);
        return mf_err_set(&op->err, MF_E_InvalidOptions, "'pipeline' requires 'viewOn' to also be specified");
    }
    if (clustered && bson_has_field(&opts, "viewOn")) {
        bson_destroy(&opts);
        return mf_err_set(&op->err, MF_E_Location6026500, "The 'clusteredIndex' option is not supported with views");
    }
    /* create_collection.cpp's _createView: the view catalog's own namespace is never a view. */
    if (strcmp(name, "system.views") == 0 && bson_has_field(&opts, "viewOn")) {
        bson_destroy(&opts);
        return mf_err_set(&op->err, MF_E_InvalidNamespace,
                          "Cannot create a view called '%s': this is a reserved system namespace", name);
    }
    if (clustered && bson_iter_init_find(&ti, &opts, "capped") && bson_iter_as_bool(&ti)) {
        bson_destroy(&opts);
        return mf_err_set(&op->err, MF_E_InvalidOptions, "Clustered capped collections are not supported");
    }
    bson_iter_t vi;
    if (mf_op_find(op, "validator", &vi))
        mf_cmd_count_validator(op, false, bson_iter_value(&vi), mf_cmd_validator_parses(&opts));
    if (mf_cmd_check_view_options(op, &opts) != 0 || mf_coll_options_check(&opts, false, &op->err) != 0) {
        bson_destroy(&opts);
        return -1;
    }
    mf_catalog_wrlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    bson_iter_t vo;
    bson_value_t pl_store;
    if (c != NULL) {
        /* MongoDB 7+: creating an existing collection with the same options succeeds. */
        if (!bson_equal(c->options, &opts) && c->is_view)
            rc = view_exists_with_other_options(op, c, &opts);
        else if (!bson_equal(c->options, &opts))
            rc = exists_with_other_options(op, c);
    } else if (bson_iter_init_find(&vo, &opts, "viewOn") && BSON_ITER_HOLDS_UTF8(&vo) &&
               (bson_iter_utf8(&vo, NULL)[0] == '.' || strchr(bson_iter_utf8(&vo, NULL), '$') != NULL)) {
        /* collection_catalog.cpp createView: NamespaceString::validCollectionName(viewOn), after the existence check. */
        rc = mf_err_set(&op->err, MF_E_InvalidNamespace, "invalid name for 'viewOn': %s", bson_iter_utf8(&vo, NULL));
    } else if (bson_iter_init_find(&vo, &opts, "viewOn") && BSON_ITER_HOLDS_UTF8(&vo) &&
               mf_cmd_view_graph_check(op, op->db, name, bson_iter_utf8(&vo, NULL), view_pipeline(&opts, &pl_store), &opts) != 0) {
        rc = -1; /* after the existence check, as mongod's order */
    } else {
        rc = mf_catalog_coll_create(op->eng->cat, op->db, name, &opts, NULL, &op->err);
        if (rc != 0 && op->err.code == MF_E_NamespaceExists) {
            /* Another create of the name came in between the look-up and the creation: the same test. */
            c = mf_catalog_coll_find(op->eng->cat, op->db, name);
            if (c != NULL && bson_equal(c->options, &opts)) {
                mf_err_clear(&op->err);
                rc = 0;
            }
        }
    }
    mf_catalog_unlock(op->eng->cat);
    bson_destroy(&opts);
    return rc;
}

typedef struct ts_find {
    const char *db;
    bool found;
} ts_find_t;

static void
note_timeseries(void *arg, const char *db, const char *name, const uint8_t uuid[16])
{
    ts_find_t *f = arg;
    (void)uuid;
    if (strcmp(db, f->db) == 0 && strncmp(name, MF_TS_BUCKETS_PREFIX, strlen(MF_TS_BUCKETS_PREFIX)) == 0)
        f->found = true;
}

/* Whether db holds a time-series collection (its buckets), without locking any collection. */
static bool
has_timeseries(mf_catalog_t *cat, const char *db)
{
    ts_find_t f = {db, false};
    mf_catalog_names(cat, note_timeseries, &f);
    return f.found;
}

/*
 * Whether db.name, a system.* collection other than system.profile and
 * system.views (checked on their own), may be dropped by a client:
 * isDroppableCollection's list in mongod's catalog/drop_collection.cpp
 * (time-series buckets, system.js, statistics and resharding collections,
 * and the few internal collections of admin, config and local it names).
 * The others (admin.system.users, system.roles, system.version, ...) are 20.
 */
static bool
system_coll_droppable(const char *db, const char *name)
{
    static const char *const prefixes[] = {MF_TS_BUCKETS_PREFIX, "system.statistics.", "system.resharding.", NULL};
    static const char *const exact[][2] = {
        {NULL, "system.js"},          {"config", "system.sessions"}, {"admin", "system.keys"},
        {"local", "system.healthlog"}, {"config", "system.preimages"}, {"local", "system.collections_to_restore"},
    };
    for (int i = 0; prefixes[i] != NULL; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
        if (strcmp(name, exact[i][1]) == 0 && (exact[i][0] == NULL || strcmp(db, exact[i][0]) == 0))
            return true;
    return false;
}

static int
cmd_drop(mf_op_t *op)
{
    const char *name;
    mf_coll_t *c;
    int rc = 0;
    char ns[512];

    if (mf_op_coll_name(op, &name) != 0)
        return -1;
    mf_catalog_wrlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c != NULL && strcmp(name, "system.profile") == 0 && mf_profile_level(op->eng->profiler, op->db) > 0) {
        /* As mongod: only an existing system.profile is refused (dropping none is ok). */
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_IllegalOperation, "turn off profiling before dropping system.profile collection");
    }
    if (c != NULL && strcmp(name, "system.views") == 0 && has_timeseries(op->eng->cat, op->db)) {
        /* mongod's isDroppableCollection: the time-series views would go with it, their buckets stay. */
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_CommandFailed,
                          "cannot drop collection %s.system.views when time-series collections are present", op->db);
    }
    if (c != NULL && strncmp(name, "system.", 7) == 0 && strcmp(name, "system.profile") != 0 &&
        strcmp(name, "system.views") != 0 && !system_coll_droppable(op->db, name)) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_IllegalOperation, "cannot drop system collection %s.%s", op->db, name);
    }
    if (c != NULL) {
        int nidx = mf_coll_ready_indexes(c);
        bool c_is_view = c->is_view;
        mf_coll_t *b = mf_ts_buckets_of(op->eng->cat, c);
        snprintf(ns, sizeof(ns), "%s", c->ns);
        /* A time-series collection: its buckets, then the view (start-up drops a view a crash left alone). */
        if (b != NULL)
            nidx = mf_coll_ready_indexes(b);
        rc = b != NULL ? mf_catalog_coll_drop(op->eng->cat, b, &op->err) : 0;
        if (rc == 0)
            rc = mf_catalog_coll_drop(op->eng->cat, c, &op->err);
        if (rc == 0) {
            /*
             * DropReply's fields in drop.idl's order, nIndexesWas then ns;
             * a view has no indexes to count (drop_collection.cpp's _dropView
             * sets ns alone), a time-series collection its buckets'.
             */
            bool plain_view = c_is_view && b == NULL;
            if (!plain_view)
                BSON_APPEND_INT32(op->reply, "nIndexesWas", nidx);
            BSON_APPEND_UTF8(op->reply, "ns", ns);
            mf_curops_top_forget(op->eng->curops, op->db, name);
        }
    }
    mf_catalog_unlock(op->eng->cat);
    return rc;
}

typedef struct coll_list {
    mf_coll_t **v;
    int n, cap;
} coll_list_t;

static void
collect_coll(void *arg, mf_coll_t *c)
{
    coll_list_t *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = mf_realloc(l->v, (size_t)l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = c;
}

static int
cmd_drop_database(mf_op_t *op)
{
    int rc, ndropped;

    /* Every collection's entry goes in one catalog transaction: all or none. */
    mf_catalog_wrlock(op->eng->cat);
    rc = mf_catalog_db_drop(op->eng->cat, op->db, &ndropped, &op->err);
    mf_catalog_unlock(op->eng->cat);
    if (rc == 0) {
        BSON_APPEND_UTF8(op->reply, "dropped", op->db);
        mf_curops_top_forget(op->eng->curops, op->db, NULL);
        mf_profile_forget(op->eng->profiler, op->db); /* its own profile entry is not written into a new database */
    }
    return rc;
}

/* ---------- listCollections / listDatabases ---------- */

static void
coll_info(mf_catalog_t *cat, const mf_coll_t *c, bool name_only, bson_t *out)
{
    bson_t sub, ts;
    bson_init(out);
    BSON_APPEND_UTF8(out, "name", c->name);
    if (c->is_view && mf_ts_options_of(c, &ts)) {
        /* A time-series collection: its options as given (expiry from its buckets). */
        mf_coll_t *b = mf_ts_buckets_of(cat, c);
        BSON_APPEND_UTF8(out, "type", "timeseries");
        if (name_only)
            return;
        BSON_APPEND_DOCUMENT_BEGIN(out, "options", &sub);
        BSON_APPEND_DOCUMENT(&sub, "timeseries", &ts);
        if (b != NULL && b->ts_expire >= 0)
            BSON_APPEND_INT64(&sub, "expireAfterSeconds", b->ts_expire);
        bson_append_document_end(out, &sub);
        BSON_APPEND_DOCUMENT_BEGIN(out, "info", &sub);
        BSON_APPEND_BOOL(&sub, "readOnly", false);
        if (b != NULL)
            bson_append_binary(&sub, "uuid", -1, BSON_SUBTYPE_UUID, b->uuid, 16);
        bson_append_document_end(out, &sub);
        return;
    }
    BSON_APPEND_UTF8(out, "type", c->is_view ? "view" : "collection");
    if (name_only)
        return;
    BSON_APPEND_DOCUMENT(out, "options", c->options);
    if (c->is_view) {
        BSON_APPEND_DOCUMENT_BEGIN(out, "info", &sub);
        BSON_APPEND_BOOL(&sub, "readOnly", true);
        bson_append_document_end(out, &sub);
        return;
    }
    BSON_APPEND_DOCUMENT_BEGIN(out, "info", &sub);
    BSON_APPEND_BOOL(&sub, "readOnly", false);
    bson_append_binary(&sub, "uuid", -1, BSON_SUBTYPE_UUID, c->uuid, 16);
    bson_append_document_end(out, &sub);
    if (c->nindexes > 0 && c->indexes[0]->is_id)
        BSON_APPEND_DOCUMENT(out, "idIndex", c->indexes[0]->spec);
}

static int
cmd_list_collections(mf_op_t *op)
{
    bson_t filter, batch;
    bool has_filter, name_only = false, present;
    coll_list_t l = {0};
    mf_matcher_t *m;
    int k = 0;

    static const mf_field_spec_t types[] = {{"authorizedCollections", MF_FT_BOOL}, {"includePendingDrops", MF_FT_BOOL},
                                            {NULL, MF_FT_ANY}};
    if (mf_op_check_types(op, op->name, op->cmd, types, false, true) != 0 || cursor_options(op) != 0 ||
        mf_op_get_doc(op, "filter", &filter, &has_filter) != 0 || mf_op_get_bool(op, "nameOnly", &name_only, &present) != 0)
        return -1;
    if ((m = mf_matcher_new(has_filter ? &filter : NULL, &op->err)) == NULL)
        return -1;
    bson_init(&batch);
    bson_iter_t ai;
    bool authorized = mf_op_find(op, "authorizedCollections", &ai) && bson_iter_as_bool(&ai);
    mf_catalog_rdlock(op->eng->cat);
    mf_catalog_coll_list(op->eng->cat, op->db, collect_coll, &l);
    for (int i = 0; i < l.n; i++) {
        bson_t full, shown;
        char key[16];
        /* authorizedCollections: only those the caller holds a privilege on (all, with listCollections). */
        if (authorized && !mf_cmd_may_see_coll(op, op->db, l.v[i]->name))
            continue;
        coll_info(op->eng->cat, l.v[i], false, &full);
        if (mf_matcher_match(m, &full, NULL)) {
            snprintf(key, sizeof(key), "%d", k++);
            if (name_only) {
                coll_info(op->eng->cat, l.v[i], true, &shown);
                BSON_APPEND_DOCUMENT(&batch, key, &shown);
                bson_destroy(&shown);
            } else {
                BSON_APPEND_DOCUMENT(&batch, key, &full);
            }
        }
        bson_destroy(&full);
    }
    mf_catalog_unlock(op->eng->cat);
    free(l.v);
    mf_matcher_free(m);
    int rc = append_cursor(op, "$cmd.listCollections", false, &batch);
    bson_destroy(&batch);
    return rc;
}

static int64_t
coll_disk_size(mf_op_t *op, const mf_coll_t *c, int64_t *index_size)
{
    int64_t total = mf_storage_table_size(op->sess, c->uri);
    int64_t idx = 0;
    for (int i = 0; i < c->nindexes; i++) {
        if (!c->indexes[i]->building)
            idx += mf_storage_table_size(op->sess, c->indexes[i]->uri);
    }
    if (index_size)
        *index_size = idx;
    return total;
}

static int
cmd_list_databases(mf_op_t *op)
{
    bson_t filter, dbs;
    bool has_filter, name_only = false, present;
    coll_list_t l = {0};
    mf_matcher_t *m;
    int64_t total = 0;
    int k = 0;

    if (mf_op_get_doc(op, "filter", &filter, &has_filter) != 0 || mf_op_get_bool(op, "nameOnly", &name_only, &present) != 0)
        return -1;
    if ((m = mf_matcher_new(has_filter ? &filter : NULL, &op->err)) == NULL)
        return -1;
    bson_init(&dbs);
    mf_catalog_rdlock(op->eng->cat);
    mf_catalog_coll_list(op->eng->cat, NULL, collect_coll, &l);
    for (int i = 0; i < l.n;) {
        const char *db = l.v[i]->db;
        int64_t size = 0;
        int j = i;
        for (; j < l.n && strcmp(l.v[j]->db, db) == 0; j++) {
            int64_t isz = 0;
            size += coll_disk_size(op, l.v[j], &isz) + isz;
        }
        if (!mf_cmd_may_see_db(op, db)) {
            i = j;
            continue;
        }
        bson_t d;
        bson_init(&d);
        BSON_APPEND_UTF8(&d, "name", db);
        if (!name_only) {
            BSON_APPEND_INT64(&d, "sizeOnDisk", size);
            BSON_APPEND_BOOL(&d, "empty", false);
        }
        if (mf_matcher_match(m, &d, NULL)) {
            char key[16];
            snprintf(key, sizeof(key), "%d", k++);
            BSON_APPEND_DOCUMENT(&dbs, key, &d);
            total += size;
        }
        bson_destroy(&d);
        i = j;
    }
    mf_catalog_unlock(op->eng->cat);
    free(l.v);
    mf_matcher_free(m);
    BSON_APPEND_ARRAY(op->reply, "databases", &dbs);
    if (!name_only) {
        BSON_APPEND_INT64(op->reply, "totalSize", total);
        BSON_APPEND_INT64(op->reply, "totalSizeMb", total / (1024 * 1024));
    }
    bson_destroy(&dbs);
    return 0;
}

/* ---------- renameCollection ---------- */

static int
split_ns(const char *ns, char *db, size_t dbcap, const char **coll)
{
    const char *dot = strchr(ns, '.');
    if (dot == NULL || (size_t)(dot - ns) >= dbcap)
        return -1;
    memcpy(db, ns, (size_t)(dot - ns));
    db[dot - ns] = '\0';
    *coll = dot + 1;
    return 0;
}

/* Whether a replica set keeps db.coll on this member only (mongod's !NamespaceString::isReplicated): local and system.profile. */
static bool
ns_unreplicated(const char *db, const char *coll)
{
    return strcmp(db, "local") == 0 || strcmp(coll, "system.profile") == 0;
}

/* The system collections clients may write (a subset of mongod's NamespaceString::isLegalClientSystemNS). */
static bool
legal_client_system(const char *db, const char *coll)
{
    if (strcmp(db, "admin") == 0 && (strcmp(coll, "system.users") == 0 || strcmp(coll, "system.roles") == 0))
        return true;
    return strcmp(coll, "system.js") == 0;
}

static int
cmd_rename_collection(mf_op_t *op)
{
    const char *from, *to, *fcoll, *tcoll;
    char fdb[128], tdb[128];
    bool has_from, has_to, present, drop_target = false;
    mf_coll_t *c, *t;
    int rc;

    from = to = NULL;
    if (mf_op_get_string(op, "renameCollection", &from, &has_from) != 0 ||
        mf_op_get_string(op, "to", &to, &has_to) != 0 || mf_op_get_bool(op, "dropTarget", &drop_target, &present) != 0)
        return -1;
    if (!has_from)
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'renameCollection.renameCollection' is the wrong type, expected type 'string'");
    if (!has_to)
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'renameCollection.to' is missing but a required field");
    if (split_ns(from, fdb, sizeof(fdb), &fcoll) != 0)
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid source namespace: %s", from);
    if (split_ns(to, tdb, sizeof(tdb), &tcoll) != 0)
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid target namespace: %s", to);
    /* mongod's userAllowedWriteNS on both names: system.views is the view catalog's own (73's message, as 20). */
    if (strcmp(fcoll, "system.views") == 0 || strcmp(tcoll, "system.views") == 0) {
        bool src = strcmp(fcoll, "system.views") == 0;
        return mf_err_set(&op->err, MF_E_IllegalOperation, "error with %s namespace: cannot write to %s",
                          src ? "source" : "target", src ? from : to);
    }
    /*
     * Users do not create system collections by renaming (buckets get their own message below), but for
     * those mongod's isLegalClientSystemNS lets clients write: the auth collections (renamed away and back
     * by backup tools; the users and roles generation moves with the rename's DDL event) and system.js.
     */
    if (strncmp(tcoll, "system.", 7) == 0 && strncmp(tcoll, MF_TS_BUCKETS_PREFIX, strlen(MF_TS_BUCKETS_PREFIX)) != 0 &&
        !legal_client_system(tdb, tcoll))
        return mf_err_set(&op->err, MF_E_IllegalOperation, "error with target namespace: Invalid system namespace: %s",
                          to);
    /* A replica set's members would not agree on what moved (mongod's isReplicatedChanged; a standalone has no oplog). */
    if (op->eng->repl != NULL && ns_unreplicated(fdb, fcoll) != ns_unreplicated(tdb, tcoll))
        return mf_err_set(&op->err, MF_E_IllegalOperation,
                          "Cannot rename collections between a replicated and an unreplicated database");
    mf_catalog_wrlock(op->eng->cat);
    c = mf_catalog_coll_find_pair(op->eng->cat, fdb, fcoll, tdb, tcoll, &t);
    if (c == NULL && mf_catalog_lock_timed_out()) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_LockTimeout, "renameCollection: %s stayed in use", from);
    }
    if (c == NULL) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_NamespaceNotFound, "Source collection %s does not exist", from);
    }
    /* A view is a definition, not data: mongod renames neither it nor onto it. */
    bool src_view = c->is_view && !c->is_timeseries, dst_view = t != NULL && t->is_view && !t->is_timeseries;
    if (src_view || dst_view) {
        mf_catalog_unlock(op->eng->cat);
        return src_view ? mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "cannot rename view: %s", from)
                          : mf_err_set(&op->err, MF_E_NamespaceExists, "a view already exists with that name: %s", to);
    }
    /*
     * Replication's own rename of one buckets collection onto another's name
     * is the commit of an $out into a time-series collection (agg_write.c
     * ts_commit_once logs it so): a member applying it does what the primary
     * did. Clients may not (mongod's messages below).
     */
    size_t bpl = strlen(MF_TS_BUCKETS_PREFIX);
    bool bucket_move = op->client != NULL && op->client->internal && !c->is_view &&
                       strncmp(fcoll, MF_TS_BUCKETS_PREFIX, bpl) == 0 && strncmp(tcoll, MF_TS_BUCKETS_PREFIX, bpl) == 0 &&
                       (t == NULL || !t->is_view);
    if (!bucket_move && (c->is_timeseries || (t != NULL && t->is_timeseries) || strncmp(tcoll, MF_TS_BUCKETS_PREFIX, bpl) == 0)) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_IllegalOperation,
                          c->is_timeseries || t != NULL ? "Renaming a timeseries collection is not allowed"
                                           : "Renaming to a bucket namespace is not allowed");
    }
    if (t == c) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_IllegalOperation, "Can't rename a collection to itself");
    }
    if (t != NULL && !drop_target) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_NamespaceExists, "target namespace exists");
    }
    /* With dropTarget, the target's drop and the rename are one catalog transaction. */
    rc = mf_catalog_coll_rename_replace(op->eng->cat, c, t, tdb, tcoll, &op->err);
    mf_catalog_unlock(op->eng->cat);
    if (rc == 0) {
        /* Neither name keeps its past (mongod's Top::collectionDropped of the source, and of a dropped target). */
        mf_curops_top_forget(op->eng->curops, fdb, fcoll);
        mf_curops_top_forget(op->eng->curops, tdb, tcoll);
    }
    return rc;
}

/* ---------- statistics ---------- */

static int64_t
scale_div(int64_t v, int64_t scale)
{
    return scale > 1 ? v / scale : v;
}

/* dbStats's sizes: divided by a double scale, as mongod's DatabaseImpl::getStats (13700 bytes at 1024 is 13.37890625). */
static double
fscale(int64_t v, int64_t scale)
{
    return scale > 1 ? (double)v / (double)scale : (double)v;
}

/*
 * append_table_stats: key: {metadata, creationString, type, uri, statistics
 * groups} for table uri, from the storage layer (storage.h
 * mf_storage_table_stats_bson), unscaled as mongod's. mayfly's tables carry
 * no app_metadata, so metadata is what mongod writes into its own for that
 * kind of table: a record store's formatVersion 1 (and the oplog's
 * oplogKeyExtractionVersion); an index's data format version (8, or 12 for
 * a unique index other than _id: mongod's KeyString V1 formats, whose
 * layouts mayfly's index tables follow) and infoObj, its spec as JSON. A
 * table whose statistics cannot be read shows mongod's error, code and
 * reason fields instead of them; collStats answers all the same. Catalog
 * lock held.
 */
static void
append_table_stats(mf_op_t *op, const char *key, const char *uri, const mf_coll_t *c, const mf_index_t *ix,
                   bson_t *out)
{
    bson_t md, wt;
    mf_error_t serr;

    bson_init(&md);
    if (ix == NULL) {
        BSON_APPEND_INT32(&md, "formatVersion", 1);
        if (strcmp(c->ns, "local.oplog.rs") == 0)
            BSON_APPEND_INT32(&md, "oplogKeyExtractionVersion", 1);
    } else {
        BSON_APPEND_INT32(&md, "formatVersion", ix->unique && !ix->is_id ? 12 : 8);
        char *json = ix->spec != NULL ? bson_as_json(ix->spec, NULL) : NULL;
        if (json != NULL)
            BSON_APPEND_UTF8(&md, "infoObj", json);
        bson_free(json);
    }
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &wt);
    /* Its failure is in the document already (error, code, reason), as mongod shows it. */
    (void)mf_storage_table_stats_bson(op->sess, uri, &md, &wt, &serr);
    bson_append_document_end(out, &wt);
    bson_destroy(&md);
}

/* The bytes free for reuse in table uri's file (0 when its statistics cannot be read). */
static int64_t
table_free_bytes(mf_op_t *op, const char *uri)
{
    int64_t file_bytes, free_bytes;
    mf_error_t serr;
    return mf_storage_table_space(op->sess, uri, &file_bytes, &free_bytes, &serr) == 0 ? free_bytes : 0;
}

/* Appends collStats-shaped fields for c to out, numbers as mongod appends them (mf_append_number). Catalog lock held. */
static void
append_coll_stats(mf_op_t *op, mf_coll_t *c, int64_t scale, bson_t *out)
{
    int64_t count = atomic_load(&c->approx_count), size = atomic_load(&c->approx_size), isz = 0;
    int64_t storage = coll_disk_size(op, c, &isz);
    bson_t sizes;
    bool capped = c->capped;

    BSON_APPEND_UTF8(out, "ns", c->ns);
    mf_append_number(out, "size", scale_div(size, scale));
    mf_append_number(out, "count", count);
    if (count > 0)
        mf_append_number(out, "avgObjSize", size / count);
    BSON_APPEND_INT32(out, "numOrphanDocs", 0); /* mongod 8.0's (a shard's documents it does not own): never any here */
    mf_append_number(out, "storageSize", scale_div(storage, scale));
    mf_append_number(out, "freeStorageSize", scale_div(table_free_bytes(op, c->uri), scale));
    BSON_APPEND_BOOL(out, "capped", capped);
    if (capped) {
        mf_append_number(out, "max", c->capped_max);
        mf_append_number(out, "maxSize", scale_div(c->capped_size, scale));
    }
    /* mongod's record store and index custom stats: the WiredTiger table of each, indexes being built included. */
    append_table_stats(op, "wiredTiger", c->uri, c, NULL, out);
    BSON_APPEND_INT32(out, "nindexes", mf_coll_ready_indexes(c));
    bson_t details;
    BSON_APPEND_DOCUMENT_BEGIN(out, "indexDetails", &details);
    for (int i = 0; i < c->nindexes; i++)
        append_table_stats(op, c->indexes[i]->name, c->indexes[i]->uri, c, c->indexes[i], &details);
    bson_append_document_end(out, &details);
    /* mongod's indexBuilds: the names of the indexes being built now. */
    bson_t builds;
    BSON_APPEND_ARRAY_BEGIN(out, "indexBuilds", &builds);
    for (int i = 0, k = 0; i < c->nindexes; i++) {
        if (c->indexes[i]->building) {
            char key[16];
            const char *kp;
            bson_uint32_to_string((uint32_t)k++, &kp, key, sizeof key);
            BSON_APPEND_UTF8(&builds, kp, c->indexes[i]->name);
        }
    }
    bson_append_array_end(out, &builds);
    BSON_APPEND_DOCUMENT_BEGIN(out, "indexSizes", &sizes);
    for (int i = 0; i < c->nindexes; i++) {
        if (!c->indexes[i]->building)
            mf_append_number(&sizes, c->indexes[i]->name,
                              scale_div(mf_storage_table_size(op->sess, c->indexes[i]->uri), scale));
    }
    bson_append_document_end(out, &sizes);
    mf_append_number(out, "totalIndexSize", scale_div(isz, scale));
    mf_append_number(out, "totalSize", scale_div(storage + isz, scale));
    BSON_APPEND_INT32(out, "scaleFactor", (int32_t)scale);
    /* SPEC I2 (mayfly): the collection's expiry archive, compressed. */
    mf_archive_stats_t as;
    mf_archive_stats(op->eng->archive, c->uuid, &as);
    mf_append_number(out, "archiveSize", scale_div(as.bytes, scale));
    mf_append_number(out, "archiveCount", as.docs);
    mf_append_number(out, "archiveSegments", as.segments);
}

/* ---------- time-series redirection ---------- */

/*
 * ts_command: when `name` is a time-series collection, op->cmd rewritten
 * for its buckets collection into *out (initialised here) and 1:
 * the collection name, each createIndexes spec translated
 * (mf_ts_index_to_buckets), a dropIndexes key translated and "*" turned
 * into the user-visible index names (the time index stays). 0 when it is
 * not time-series; -1 with op->err.
 */
static int
ts_command(mf_op_t *op, const char *name, bson_t *out)
{
    mf_coll_t *v, *b;
    mf_ts_spec_t spec;
    bson_iter_t it;
    char bname[256];
    int rc = 1;

    mf_catalog_rdlock(op->eng->cat);
    v = mf_catalog_coll_find(op->eng->cat, op->db, name);
    b = mf_ts_buckets_of(op->eng->cat, v);
    if (b == NULL || !mf_ts_spec_of(b, &spec)) {
        mf_catalog_unlock(op->eng->cat);
        return 0;
    }
    mf_ts_buckets_name(name, bname, sizeof bname);
    bson_init(out);
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    BSON_APPEND_UTF8(out, bson_iter_key(&it), bname);
    while (rc == 1 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "indexes") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t ai;
            bson_t arr;
            bson_append_array_begin(out, k, -1, &arr);
            bson_iter_recurse(&it, &ai);
            while (rc == 1 && bson_iter_next(&ai)) {
                const uint8_t *data;
                uint32_t len;
                bson_t u, t;
                if (!BSON_ITER_HOLDS_DOCUMENT(&ai)) {
                    bson_append_value(&arr, bson_iter_key(&ai), -1, bson_iter_value(&ai));
                    continue;
                }
                bson_iter_document(&ai, &len, &data);
                bson_init_static(&u, data, len);
                if (mf_ts_index_to_buckets(&spec, &u, &t, &op->err) != 0)
                    rc = -1;
                else
                    bson_append_document(&arr, bson_iter_key(&ai), -1, &t);
                bson_destroy(&t);
            }
            bson_append_array_end(out, &arr);
        } else if (strcmp(k, "index") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_t key, bk;
            bson_iter_document(&it, &len, &data);
            bson_init_static(&key, data, len);
            mf_ts_key_to_buckets(&spec, &key, false, &bk);
            BSON_APPEND_DOCUMENT(out, k, &bk);
            bson_destroy(&bk);
        } else if (strcmp(k, "index") == 0 && BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "*") == 0) {
            bson_t arr, shown;
            int n = 0;
            bson_append_array_begin(out, k, -1, &arr);
            for (int i = 0; i < b->nindexes; i++) {
                char key[16];
                if (b->indexes[i]->building || !mf_ts_index_from_buckets(&spec, b->indexes[i]->spec, &shown))
                    continue;
                bson_destroy(&shown);
                snprintf(key, sizeof key, "%d", n++);
                BSON_APPEND_UTF8(&arr, key, b->indexes[i]->name);
            }
            bson_append_array_end(out, &arr);
        } else {
            bson_append_value(out, k, -1, bson_iter_value(&it));
        }
    }
    mf_catalog_unlock(op->eng->cat);
    if (rc < 0)
        bson_destroy(out);
    return rc;
}

/* ts_redirect: runs fn on the buckets collection when `name` is time-series (*done); 0 or -1. */
static int
ts_redirect(mf_op_t *op, const char *name, mf_cmd_fn fn, bool *done)
{
    bson_t tcmd;
    *done = false;
    int t = ts_command(op, name, &tcmd);
    if (t <= 0)
        return t;
    const bson_t *saved = op->cmd;
    const mf_docseq_t *seqs = op->seqs;
    size_t nseqs = op->nseqs;
    op->cmd = &tcmd;
    op->seqs = NULL;
    op->nseqs = 0;
    int rc = fn(op);
    op->cmd = saved;
    op->seqs = seqs;
    op->nseqs = nseqs;
    bson_destroy(&tcmd);
    *done = true;
    return rc;
}

/* ts_stats: the timeseries section of a time-series collection's stats (buckets b of view name). */
static void
ts_stats(mf_op_t *op, const mf_coll_t *b, bson_t *out)
{
    bson_t ts;
    int64_t n = atomic_load(&b->approx_count), size = atomic_load(&b->approx_size);
    BSON_APPEND_DOCUMENT_BEGIN(out, "timeseries", &ts);
    BSON_APPEND_UTF8(&ts, "bucketsNs", b->ns);
    BSON_APPEND_INT64(&ts, "bucketCount", n);
    BSON_APPEND_INT64(&ts, "avgBucketSize", n > 0 ? size / n : 0);
    bson_append_document_end(out, &ts);
    (void)op;
}

static int
get_scale(mf_op_t *op, int64_t *scale)
{
    bool present;
    *scale = 1;
    if (mf_op_get_int64(op, "scale", scale, &present) != 0)
        return -1;
    if (present && *scale < 1)
        return mf_err_set(&op->err, MF_E_BadValue, "Scale factor must be greater than zero");
    if (*scale > INT32_MAX)
        *scale = INT32_MAX; /* as mongod's safeNumberInt */
    return 0;
}

/*
 * collStats of a collection that does not exist: mongod's CmdCollStats
 * answers ok with the zeros appendCollectionStorageStats fills in before its
 * NamespaceNotFound, which the command ignores (the $collStats stage fails
 * with 26 instead).
 */
static int
coll_stats_missing(mf_op_t *op, const char *name, int64_t scale)
{
    bson_t empty = BSON_INITIALIZER;
    char *ns = bson_strdup_printf("%s.%s", op->db, name);
    BSON_APPEND_UTF8(op->reply, "ns", ns);
    static const char *const zeros[] = {"size", "count", "numOrphanDocs", "storageSize", "totalSize", "nindexes",
                                        "totalIndexSize"};
    for (size_t i = 0; i < sizeof zeros / sizeof zeros[0]; i++)
        BSON_APPEND_INT32(op->reply, zeros[i], 0);
    BSON_APPEND_DOCUMENT(op->reply, "indexDetails", &empty);
    BSON_APPEND_DOCUMENT(op->reply, "indexSizes", &empty);
    BSON_APPEND_INT32(op->reply, "scaleFactor", (int32_t)scale);
    bson_free(ns);
    return 0;
}

static int
cmd_coll_stats(mf_op_t *op)
{
    const char *name;
    int64_t scale;
    mf_coll_t *c;

    if (mf_op_coll_name(op, &name) != 0 || get_scale(op, &scale) != 0)
        return -1;
    mf_catalog_rdlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c == NULL) {
        mf_catalog_unlock(op->eng->cat);
        return coll_stats_missing(op, name, scale);
    }
    mf_coll_t *b = mf_ts_buckets_of(op->eng->cat, c);
    if (c->is_view && b == NULL) {
        mf_catalog_unlock(op->eng->cat);
        return refuse_view(op, c);
    }
    append_coll_stats(op, b ? b : c, scale, op->reply);
    if (b != NULL)
        ts_stats(op, b, op->reply);
    mf_catalog_unlock(op->eng->cat);
    return 0;
}

/*
 * The $collStats specification as its IDL struct parses it (strict):
 * latencyStats {histograms: bool}, storageStats an object, count and
 * queryExecStats empty objects (31170), $_requestOnTimeseriesView a bool;
 * another field is 40415, a wrong type 14. An argument that is not an
 * object is 5447000, as the stage's lite parse. 0, or -1 with op->err.
 */
static int
coll_stats_spec_check(mf_op_t *op, const bson_iter_t *spec)
{
    static const mf_field_spec_t fields[] = {
        {"latencyStats", MF_FT_OBJ},   {"storageStats", MF_FT_OBJ}, {"count", MF_FT_OBJ},
        {"queryExecStats", MF_FT_OBJ}, {"$_requestOnTimeseriesView", MF_FT_BOOL}, {NULL, MF_FT_ANY}};
    static const mf_field_spec_t latency[] = {{"histograms", MF_FT_BOOL}, {NULL, MF_FT_ANY}};
    const uint8_t *data;
    uint32_t len;
    bson_t doc, sub;
    bson_iter_t it;

    if (!BSON_ITER_HOLDS_DOCUMENT(spec)) {
        char shown[256];
        mf_fmt_value(bson_iter_value((bson_iter_t *)spec), shown, sizeof(shown));
        return mf_err_set(&op->err, MF_E_Location5447000, "$collStats must take a nested object but found: $collStats: %s",
                          shown);
    }
    bson_iter_document(spec, &len, &data);
    if (!bson_init_static(&doc, data, len) || mf_op_check_types(op, "$collStats", &doc, fields, true, false) != 0)
        return -1;
    bson_iter_init(&it, &doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            continue;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&sub, data, len))
            continue;
        if (strcmp(k, "latencyStats") == 0 &&
            mf_op_check_types(op, "$collStats.latencyStats", &sub, latency, true, false) != 0)
            return -1;
        if ((strcmp(k, "count") == 0 || strcmp(k, "queryExecStats") == 0) && !bson_empty(&sub)) {
            char shown[256];
            mf_fmt_doc(&sub, shown, sizeof(shown));
            return mf_err_set(&op->err, MF_E_Location31170, "expected an empty object, but got %s", shown);
        }
    }
    return 0;
}

/* mf_cmd_coll_stats_doc (crud.h): the document $collStats yields (used by aggregate). */
int
mf_cmd_coll_stats_doc(mf_op_t *op, const char *name, const bson_iter_t *spec, bson_t *out)
{
    mf_coll_t *c;
    bson_t ss;
    char ns[512];
    bson_iter_t sit, hit;

    if (spec != NULL && coll_stats_spec_check(op, spec) != 0)
        return -1;
    bson_init(out);
    snprintf(ns, sizeof(ns), "%s.%s", op->db, name);
    BSON_APPEND_UTF8(out, "ns", ns);
    BSON_APPEND_UTF8(out, "host", op->eng->host);
    BSON_APPEND_DATE_TIME(out, "localTime", mf_now_ms());
    if (spec != NULL && BSON_ITER_HOLDS_DOCUMENT(spec) && bson_iter_recurse(spec, &sit) &&
        bson_iter_find(&sit, "latencyStats")) {
        /* Counted as commands end (common/curop.h): this aggregate itself is not in them yet. */
        bool hist = BSON_ITER_HOLDS_DOCUMENT(&sit) && bson_iter_recurse(&sit, &hit) &&
                    bson_iter_find(&hit, "histograms") && bson_iter_as_bool(&hit);
        mf_latency_t lat[MF_LAT_N];
        mf_curops_latency_get(op->eng->curops, ns, lat);
        mf_latency_append(out, "latencyStats", lat, hist);
    }
    /* As mongod: only the sections asked for; storageStats and count need the collection (26 without it). */
    bool want_storage = false, want_count = false, want_exec = false;
    int64_t scale = 1;
    if (spec != NULL && BSON_ITER_HOLDS_DOCUMENT(spec) && bson_iter_recurse(spec, &sit)) {
        while (bson_iter_next(&sit)) {
            bson_iter_t sc;
            if (strcmp(bson_iter_key(&sit), "storageStats") == 0) {
                want_storage = true;
                /* storageStats: {scale}, as collStats' (StorageStatsSpec: a positive number). */
                if (BSON_ITER_HOLDS_DOCUMENT(&sit) && bson_iter_recurse(&sit, &sc) && bson_iter_find(&sc, "scale")) {
                    if (!mf_value_is_number(bson_iter_value(&sc))) {
                        bson_destroy(out);
                        return mf_err_set(&op->err, MF_E_TypeMismatch,
                                          "BSON field 'scale' is the wrong type '%s', expected types '[long, int, "
                                          "decimal, double]'", mf_type_name(bson_iter_type(&sc)));
                    }
                    double d = mf_value_as_double(bson_iter_value(&sc));
                    scale = isnan(d) ? 0 : d >= (double)INT32_MAX ? INT32_MAX : d <= (double)INT32_MIN ? INT32_MIN
                                                                                            : (int64_t)d;
                    if (scale < 1) {
                        bson_destroy(out);
                        return mf_err_set(&op->err, MF_E_Location51024,
                                          "BSON field 'scale' value must be >= 1, actual value '%lld'",
                                          (long long)scale);
                    }
                }
            }
            want_count |= strcmp(bson_iter_key(&sit), "count") == 0;
            want_exec |= strcmp(bson_iter_key(&sit), "queryExecStats") == 0;
        }
    }
    if (!want_storage && !want_count && !want_exec)
        return 0;
    /* mongod's message: the stage's error as the aggregation's executor reports it (the first section that fails). */
    const char *what = want_storage ? "storageStats" : want_count ? "count" : "queryExecStats";
    mf_catalog_rdlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c == NULL) {
        mf_catalog_unlock(op->eng->cat);
        bson_destroy(out);
        return mf_err_set(&op->err, MF_E_NamespaceNotFound,
                          "PlanExecutor error during aggregation :: caused by :: Unable to retrieve %s in $collStats "
                          "stage :: caused by :: Collection [%s] not found.", what, ns);
    }
    mf_coll_t *b = mf_ts_buckets_of(op->eng->cat, c);
    if (c->is_view && b == NULL) {
        mf_catalog_unlock(op->eng->cat);
        bson_destroy(out);
        return mf_err_set(&op->err, MF_E_CommandNotSupportedOnView,
                          "PlanExecutor error during aggregation :: caused by :: Unable to retrieve %s in $collStats "
                          "stage :: caused by :: Namespace %s is a view, not a collection", what, ns);
    }
    if (want_storage) {
        BSON_APPEND_DOCUMENT_BEGIN(out, "storageStats", &ss);
        append_coll_stats(op, b ? b : c, scale, &ss);
        if (b != NULL)
            ts_stats(op, b, &ss);
        bson_append_document_end(out, &ss);
    }
    if (want_count && b == NULL) /* a time-series collection's count is its storageStats' (measurements unknown here) */
        mf_append_number(out, "count", atomic_load(&c->approx_count));
    if (want_exec) {
        /*
         * mongod's appendQueryExecStats: the collection scans of client
         * queries since the collection was loaded or created, counted by the
         * executor on a plan's first run (query/exec.c count_accesses); a
         * time-series collection's are its buckets' (queries on it scan them).
         */
        const mf_coll_t *sc = b ? b : c;
        bson_t qs, cs;
        BSON_APPEND_DOCUMENT_BEGIN(out, "queryExecStats", &qs);
        BSON_APPEND_DOCUMENT_BEGIN(&qs, "collectionScans", &cs);
        BSON_APPEND_INT64(&cs, "total", atomic_load_explicit(&sc->collscans, memory_order_relaxed));
        BSON_APPEND_INT64(&cs, "nonTailable", atomic_load_explicit(&sc->collscans_nontailable, memory_order_relaxed));
        bson_append_document_end(&qs, &cs);
        bson_append_document_end(out, &qs);
    }
    mf_catalog_unlock(op->eng->cat);
    return 0;
}

/*
 * dbStats. With freeStorage: 1, as mongod's, also the bytes free for reuse
 * inside the collections' and the indexes' files (freeStorageSize,
 * indexFreeStorageSize, totalFreeStorageSize), which costs a statistics
 * read per table. fsUsedSize / fsTotalSize are the dbpath's filesystem's.
 */
static int
cmd_db_stats(mf_op_t *op)
{
    coll_list_t l = {0};
    int64_t scale, objects = 0, data = 0, storage = 0, isz_total = 0, nidx = 0, views = 0, cfree = 0, ifree = 0;
    struct statvfs vfs;
    bson_iter_t it;
    bool want_free = bson_iter_init_find(&it, op->cmd, "freeStorage") && bson_iter_as_bool(&it);

    if (get_scale(op, &scale) != 0)
        return -1;
    mf_catalog_rdlock(op->eng->cat);
    mf_catalog_coll_list(op->eng->cat, op->db, collect_coll, &l);
    for (int i = 0; i < l.n; i++) {
        int64_t isz = 0;
        if (l.v[i]->is_view) {
            views++; /* a time-series collection too: a view on its buckets, as in mongod 8.0 */
            continue;
        }
        objects += atomic_load(&l.v[i]->approx_count);
        data += atomic_load(&l.v[i]->approx_size);
        storage += coll_disk_size(op, l.v[i], &isz);
        isz_total += isz;
        nidx += mf_coll_ready_indexes(l.v[i]);
        if (want_free) {
            cfree += table_free_bytes(op, l.v[i]->uri);
            for (int j = 0; j < l.v[i]->nindexes; j++)
                if (!l.v[i]->indexes[j]->building)
                    ifree += table_free_bytes(op, l.v[i]->indexes[j]->uri);
        }
    }
    mf_catalog_unlock(op->eng->cat);
    BSON_APPEND_UTF8(op->reply, "db", op->db);
    BSON_APPEND_INT64(op->reply, "collections", l.n - views);
    BSON_APPEND_INT64(op->reply, "views", views);
    BSON_APPEND_INT64(op->reply, "objects", objects);
    BSON_APPEND_DOUBLE(op->reply, "avgObjSize", objects ? (double)data / (double)objects : 0.0);
    BSON_APPEND_DOUBLE(op->reply, "dataSize", fscale(data, scale));
    BSON_APPEND_DOUBLE(op->reply, "storageSize", fscale(storage, scale));
    if (want_free)
        BSON_APPEND_DOUBLE(op->reply, "freeStorageSize", fscale(cfree, scale));
    BSON_APPEND_INT64(op->reply, "indexes", nidx);
    BSON_APPEND_DOUBLE(op->reply, "indexSize", fscale(isz_total, scale));
    if (want_free)
        BSON_APPEND_DOUBLE(op->reply, "indexFreeStorageSize", fscale(ifree, scale));
    BSON_APPEND_DOUBLE(op->reply, "totalSize", fscale(storage + isz_total, scale));
    if (want_free)
        BSON_APPEND_DOUBLE(op->reply, "totalFreeStorageSize", fscale(cfree + ifree, scale));
    BSON_APPEND_INT64(op->reply, "scaleFactor", scale);
    if (l.n == 0) {
        /* A database that does not exist: mongod's CmdDbStats answers zeros, the filesystem's sizes too. */
        BSON_APPEND_DOUBLE(op->reply, "fsUsedSize", 0.0);
        BSON_APPEND_DOUBLE(op->reply, "fsTotalSize", 0.0);
    } else if (statvfs(mf_storage_home(op->eng->st), &vfs) == 0) {
        BSON_APPEND_DOUBLE(op->reply, "fsUsedSize",
                           fscale((int64_t)((vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize), scale));
        BSON_APPEND_DOUBLE(op->reply, "fsTotalSize", fscale((int64_t)(vfs.f_blocks * vfs.f_frsize), scale));
    }
    free(l.v);
    return 0;
}

/* ---------- validate ---------- */

/* The truth of validate's option f (absent: false). */
static bool
validate_flag(mf_op_t *op, const char *f)
{
    bson_iter_t it;
    return mf_op_find(op, f, &it) && bson_iter_as_bool(&it);
}

/* validate's option combinations mongod's CmdValidate refuses (72 InvalidOptions). 0, or -1 with op->err. */
static int
validate_options(mf_op_t *op)
{
    static const char pre[] = "Running the validate command with ";
    bool background = validate_flag(op, "background"), full = validate_flag(op, "full");
    bool fast_count = validate_flag(op, "enforceFastCount"), repair = validate_flag(op, "repair");
    bool metadata = validate_flag(op, "metadata");
    if (background && full)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "%sboth { background: true } and { full: true } is not "
                          "supported.", pre);
    if (background && fast_count)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "%sboth { background: true } and { enforceFastCount: true } "
                          "is not supported.", pre);
    if (repair && op->eng->repl != NULL)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "%s{ repair: true } can only be performed in standalone "
                          "mode.", pre);
    if (repair && background)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "%sboth { background: true } and { repair: true } is not "
                          "supported.", pre);
    if (metadata && (background || full || fast_count || repair))
        return mf_err_set(&op->err, MF_E_InvalidOptions, "%s{ metadata: true } is not supported with any other "
                          "options", pre);
    return 0;
}

/* validate: the check itself is the catalog's (mf_catalog_validate, catalog/validate.c). */
static int
cmd_validate(mf_op_t *op)
{
    const char *name;
    mf_coll_t *c;
    int rc;

    if (mf_op_coll_name(op, &name) != 0 || validate_options(op) != 0)
        return -1;
    {
        bool done;
        int trc = ts_redirect(op, name, cmd_validate, &done);
        if (done || trc != 0)
            return trc;
    }
    /*
     * Exclusive, as mongod's foreground validate: no write is in flight, so
     * the recount can replace the stored count and size (which may be off
     * after an unclean shutdown).
     */
    mf_catalog_wrlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c == NULL)
        rc = mf_err_set(&op->err, MF_E_NamespaceNotFound, "Collection '%s.%s' does not exist to validate.", op->db,
                        name);
    else if (c->is_view)
        rc = refuse_view(op, c);
    else
        rc = mf_catalog_validate(op->eng->cat, op->sess, c, op->reply, &op->err);
    mf_catalog_unlock(op->eng->cat);
    return rc;
}

/* ---------- indexes ---------- */

static int
cmd_list_indexes(mf_op_t *op)
{
    const char *name;
    mf_coll_t *c;
    bson_t batch;
    char key[16], cname[300];
    static const mf_field_spec_t types[] = {{"includeBuildUUIDs", MF_FT_BOOL}, {"includeIndexBuildInfo", MF_FT_BOOL},
                                            {NULL, MF_FT_ANY}};

    if (mf_op_coll_name(op, &name) != 0 || mf_op_check_types(op, op->name, op->cmd, types, false, true) != 0 ||
        cursor_options(op) != 0)
        return -1;
    /*
     * list_indexes.cpp: the two flags exclude each other (72, mongod's wording);
     * with includeIndexBuildInfo every index comes as {spec: <spec>}.
     */
    bson_iter_t fi;
    bool build_uuids = bson_iter_init_find(&fi, op->cmd, "includeBuildUUIDs") && bson_iter_as_bool(&fi);
    bool build_info = bson_iter_init_find(&fi, op->cmd, "includeIndexBuildInfo") && bson_iter_as_bool(&fi);
    if (build_uuids && build_info)
        return mf_err_set(&op->err, MF_E_InvalidOptions,
                          "The includeBuildUUIDs flag and includeBuildIndexInfo flag cannot both be set to true");
    mf_catalog_rdlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c == NULL) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_NamespaceNotFound, "ns does not exist: %s.%s", op->db, name);
    }
    mf_coll_t *b = mf_ts_buckets_of(op->eng->cat, c);
    mf_ts_spec_t spec;
    if (c->is_view && (b == NULL || !mf_ts_spec_of(b, &spec))) {
        mf_catalog_unlock(op->eng->cat);
        return refuse_view(op, c);
    }
    bson_init(&batch);
    for (int i = 0, n = 0; i < (b ? b : c)->nindexes; i++) {
        mf_index_t *ix = (b ? b : c)->indexes[i];
        bson_t shown;
        /*
         * An index being built is listed too, with its spec alone: mongod's
         * listIndexesInLock lists every index of the catalog, and adds a
         * build UUID (includeBuildUUIDs, includeIndexBuildInfo) only for a
         * two-phase build, which a standalone never runs.
         */
        if (b != NULL) {
            /* A time-series collection lists its buckets' indexes as users defined them. */
            bson_t from;
            if (!mf_ts_index_from_buckets(&spec, ix->spec, &from))
                continue;
            mf_index_spec_listed(&from, &shown);
            bson_destroy(&from);
        } else {
            mf_index_spec_listed(ix->spec, &shown); /* mongod's field order and types */
        }
        snprintf(key, sizeof(key), "%d", n++);
        if (build_info) {
            bson_t item;
            BSON_APPEND_DOCUMENT_BEGIN(&batch, key, &item);
            BSON_APPEND_DOCUMENT(&item, "spec", &shown);
            bson_append_document_end(&batch, &item);
        } else {
            BSON_APPEND_DOCUMENT(&batch, key, &shown);
        }
        bson_destroy(&shown);
    }
    mf_catalog_unlock(op->eng->cat);
    /*
     * mongod 8.0's list_indexes.cpp replies, and registers the cursor, with
     * the collection's own namespace (a time-series collection's view name),
     * not the "$cmd.listIndexes.<coll>" of older servers; drivers send
     * getMore on what the reply names.
     */
    snprintf(cname, sizeof(cname), "%s", name);
    int rc = append_cursor(op, cname, true, &batch);
    bson_destroy(&batch);
    return rc;
}

/* Progress of an index build: updates currentOp, logs every 10 %, and stops on killOp. */
typedef struct build_progress {
    mf_curop_t *cop;
    const char *ns;
    const char *index;
    int last_decile;
} build_progress_t;

static bool
on_build_progress(void *arg, int64_t done, int64_t total)
{
    build_progress_t *bp = arg;
    if (total < done)
        total = done;
    if (bp->cop)
        mf_curop_set_progress(bp->cop, "Index Build: scanning collection", done, total);
    int decile = total > 0 ? (int)(done * 10 / total) : 10;
    if (decile > bp->last_decile && total >= 10000) {
        bp->last_decile = decile;
        mf_log(MF_LOG_INFO, "INDEX", "Index Build: scanning collection: %s on %s: %lld/%lld %d%%", bp->index, bp->ns,
               (long long)done, (long long)total, (int)(done * 100 / (total ? total : 1)));
    }
    return bp->cop == NULL || !mf_curop_killed(bp->cop);
}

/*
 * What a build's scan failed with (a duplicate key of a unique index, a key
 * it cannot index), as mongod's createIndexes reports it:
 * "Index build failed: <build UUID>: Collection <ns> ( <collection UUID> )
 * :: caused by :: <error>", code and extra fields (keyPattern, keyValue)
 * kept. The build's UUID names this attempt only (mayfly keeps no build
 * record), so a fresh one is drawn.
 */
static void
build_failed_context(mf_error_t *err, const char *ns, const uint8_t coll_uuid[16])
{
    uint8_t build[16];
    char bs[37], cs[37], context[sizeof(err->msg)];
    if (RAND_bytes(build, sizeof(build)) != 1)
        memset(build, 0, sizeof(build));
    build[6] = (uint8_t)((build[6] & 0x0f) | 0x40); /* version 4, as mongod's UUID::gen */
    build[8] = (uint8_t)((build[8] & 0x3f) | 0x80);
    mf_fmt_uuid(build, bs);
    mf_fmt_uuid(coll_uuid, cs);
    snprintf(context, sizeof(context), "Index build failed: %s: Collection %.400s ( %s )", bs, ns, cs);
    mf_err_context(err, context);
}

/*
 * The indexes createIndexes counts in numIndexesBefore / After: the built
 * ones; of a time-series buckets collection only those users see on the
 * time-series collection (listIndexes), not its _id and time indexes, so
 * the counts agree with getIndexes(). Catalog lock held.
 */
static int
counted_indexes(const mf_coll_t *c)
{
    mf_ts_spec_t spec;
    if (c->is_view || !c->is_timeseries || !mf_ts_spec_of(c, &spec))
        return mf_coll_ready_indexes(c);
    int n = 0;
    for (int i = 0; i < c->nindexes; i++) {
        bson_t shown;
        if (c->indexes[i]->building || !mf_ts_index_from_buckets(&spec, c->indexes[i]->spec, &shown))
            continue;
        bson_destroy(&shown);
        n++;
    }
    return n;
}

/*
 * createIndexes' commitQuorum, as mongod parses it (CommitQuorumOptions,
 * then the standalone check): a number from 0 to 50 once cut toward zero
 * (NaN counts as 0) or a non-empty string ("majority", "votingMembers", a
 * tag), else 9 FailedToParse; a standalone then refuses any with 2
 * BadValue. A replica set's index builds commit through its log
 * (src/repl), so there any such value is accepted and changes nothing
 * (mongod would check it against the set's members and tags). mongosh's createIndex(keys, options, commitQuorum) sends its third
 * argument here, so a TTL option put there by mistake is refused, not
 * silently ignored.
 */
static int
check_commit_quorum(mf_op_t *op)
{
    bson_iter_t it;
    if (!mf_op_find(op, "commitQuorum", &it))
        return 0;
    const bson_value_t *v = bson_iter_value(&it);
    if (mf_value_is_number(v)) {
        double n = mf_value_as_double(v);
        n = n != n ? 0 : n; /* as mongod's safeNumberLong: NaN is 0, fractions are cut toward zero */
        if (n <= -1 || n >= 51)
            return mf_err_set(&op->err, MF_E_FailedToParse,
                              "commitQuorum has to be a non-negative number and not greater than 50");
    } else if (v->value_type == BSON_TYPE_UTF8) {
        if (v->value.v_utf8.len == 0)
            return mf_err_set(&op->err, MF_E_FailedToParse, "commitQuorum can't be an empty string");
    } else {
        return mf_err_set(&op->err, MF_E_FailedToParse, "commitQuorum has to be a number or a string");
    }
    if (op->eng->repl == NULL)
        return mf_err_set(&op->err, MF_E_BadValue, "Standalones can't specify commitQuorum");
    return 0;
}

static int
cmd_create_indexes(mf_op_t *op)
{
    const char *name;
    bson_t *specs, **norm = NULL; /* bson_t needs 128-byte alignment: keep heap copies, not an array of them */
    size_t nspecs, nnew = 0;
    mf_coll_t *c;
    bool created_coll = false;
    int before, rc = 0;
    char *names[MF_MAX_INDEXES];  /* the indexes this request builds */
    char *idents[MF_MAX_INDEXES]; /* and their tables (their identity) */
    int nadded = 0;
    bool *keep = NULL;
    uint8_t uuid[16];
    char ns[512];

    static const mf_field_spec_t types[] = {{"v", MF_FT_NUM}, {"ignoreUnknownIndexOptions", MF_FT_BOOL},
                                            {"returnOnStart", MF_FT_BOOL}, {"isTimeseriesNamespace", MF_FT_BOOL},
                                            {NULL, MF_FT_ANY}};
    if (mf_op_coll_name(op, &name) != 0 || mf_op_check_types(op, op->name, op->cmd, types, false, true) != 0 ||
        check_commit_quorum(op) != 0 || mf_crud_check_write_ns(op, name, true) != 0)
        return -1;
    {
        bool done;
        int trc = ts_redirect(op, name, cmd_create_indexes, &done);
        if (done || trc != 0)
            return trc;
    }
    if (mf_op_docs(op, "indexes", false, &specs, &nspecs) != 0)
        return -1;
    if (nspecs == 0) {
        free(specs);
        return mf_err_set(&op->err, MF_E_BadValue, "Must specify at least one index to create");
    }
    /*
     * create_indexes_cmd.cpp's parseAndValidateIndexSpecs: with ignoreUnknownIndexOptions
     * (mongorestore sends it) each spec loses the fields no index spec has
     * (removeUnknownFields) before it is validated, and is shown so in errors.
     */
    bson_iter_t ii;
    bool ignore_unknown = bson_iter_init_find(&ii, op->cmd, "ignoreUnknownIndexOptions") && bson_iter_as_bool(&ii);
    /* Validate every spec before touching the catalog. */
    norm = mf_calloc(nspecs, sizeof(*norm));
    size_t nnorm = 0;
    for (; nnorm < nspecs; nnorm++) {
        bson_t one, stripped;
        const bson_t *req = &specs[nnorm];
        if (ignore_unknown) {
            if (mf_index_spec_remove_unknown(req, &stripped) > 0)
                mf_log(MF_LOG_WARN, "INDEX", "Removing unknown fields from an index spec of %s.%s", op->db, name);
            req = &stripped;
        }
        if (mf_index_spec_normalise(req, &one, &op->err) != 0) {
            rc = -1;
        } else if (!bson_has_field(req, "name")) {
            /*
             * index_key_validate.cpp's validateIndexSpec requires a name (9 FailedToParse,
             * createIndexes' "Error in specification"); mf_index_spec_normalise would make one
             * up (its default name, for its other callers).
             */
            char shown[600];
            mf_fmt_doc(req, shown, sizeof(shown));
            bson_destroy(&one);
            rc = mf_err_set(&op->err, MF_E_FailedToParse,
                            "Error in specification %s :: caused by :: The 'name' field is a required property of an "
                            "index specification", shown);
        } else {
            norm[nnorm] = bson_copy(&one);
            bson_destroy(&one);
        }
        if (ignore_unknown)
            bson_destroy(&stripped);
        if (rc != 0)
            break;
    }
    free(specs);
    if (rc != 0)
        goto out_free;

again:
    mf_catalog_wrlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c == NULL) {
        if (mf_catalog_coll_create(op->eng->cat, op->db, name, NULL, &c, &op->err) != 0) {
            if (op->err.code == MF_E_NamespaceExists) {
                /* Created by another request meanwhile: start over with it. */
                mf_catalog_unlock(op->eng->cat);
                mf_err_clear(&op->err);
                goto again;
            }
            rc = -1;
            goto out_unlock;
        }
        created_coll = true;
    }
    if (c->is_view) {
        rc = refuse_view(op, c);
        goto out_unlock;
    }
    before = counted_indexes(c);
    /* An index without a collation of its own takes the collection's default (as mongod). */
    bson_iter_t dci;
    if (c->options != NULL && bson_iter_init_find(&dci, c->options, "collation") && BSON_ITER_HOLDS_DOCUMENT(&dci)) {
        for (size_t i = 0; i < nspecs; i++) {
            bson_iter_t vi;
            if (bson_has_field(norm[i], "collation"))
                continue;
            /* validateIndexSpecCollation: a v1 index is implicitly simple. */
            if (bson_iter_init_find(&vi, norm[i], "v") && mf_value_as_double(bson_iter_value(&vi)) < 2)
                continue;
            bson_append_value(norm[i], "collation", -1, bson_iter_value(&dci));
        }
    }
    for (size_t i = 0; i < nspecs && rc == 0; i++) {
        mf_index_spec_drop_simple_collation(norm[i]);
        if (mf_index_spec_is_id_pattern(norm[i]) && !id_collation_ok(c, norm[i]))
            rc = mf_err_set(&op->err, MF_E_CannotCreateIndex, "_id index must have the collection default collation");
    }
    if (rc != 0)
        goto out_unlock;
    /* Conflicts against existing indexes and earlier specs of this request; keep[i] marks specs to build. */
    keep = mf_calloc(nspecs, sizeof(*keep));
    bool wait_for_build = false;
    for (size_t i = 0; i < nspecs && rc == 0; i++) {
        int r = 0;
        /* As mongod: the index of the same name first (85/86/no-op), then one of the same signature (85). */
        bson_iter_t ni;
        const char *want_name = bson_iter_init_find(&ni, norm[i], "name") && BSON_ITER_HOLDS_UTF8(&ni)
                                    ? bson_iter_utf8(&ni, NULL) : "";
        for (int pass = 0; pass < 2 && r == 0; pass++) {
            for (int k = 0; k < c->nindexes && r == 0; k++) {
                if ((strcmp(c->indexes[k]->name, want_name) == 0) != (pass == 0))
                    continue;
                r = mf_index_spec_compare(norm[i], c->indexes[k]->spec, &op->err);
                if (r > 0 && c->indexes[k]->building)
                    wait_for_build = true; /* the same index, being built by another request */
            }
        }
        for (size_t j = 0; j < i && r == 0; j++) {
            if (!keep[j])
                continue;
            r = mf_index_spec_compare(norm[i], norm[j], &op->err);
            /*
             * On a collection that exists, mongod's index build meets a spec of its own
             * request in MultiIndexBlock::init (prepareSpecForCreate against the in-progress
             * index): an identical one is 96, any conflict fails the build, named as
             * createIndexes names a failed build (create_indexes_cmd.cpp). A collection this
             * request creates takes each spec in turn (createIndexesOnEmptyCollection).
             */
            if (!created_coll && r > 0)
                r = mf_err_set(&op->err, MF_E_OperationFailed,
                               "Cannot build two identical indexes. Try again without duplicate indexes.");
            if (!created_coll && r < 0)
                build_failed_context(&op->err, c->ns, c->uuid);
        }
        if (r < 0)
            rc = -1;
        keep[i] = r == 0;
        if (keep[i])
            nnew++;
    }
    if (rc == 0 && wait_for_build) {
        /* As mongod: a request for an index already being built waits for that build. */
        mf_catalog_unlock(op->eng->cat);
        free(keep);
        keep = NULL;
        nnew = 0;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
        if ((rc = mf_curop_check_current(&op->err)) != 0)
            goto out_free;
        goto again;
    }
    if (rc == 0 && c->nindexes + (int)nnew > MF_MAX_INDEXES) {
        for (size_t i = 0; i < nspecs; i++) {
            if (keep[i]) {
                bson_t key;
                char kshown[300];
                mf_index_spec_key(norm[i], &key);
                mf_fmt_doc(&key, kshown, sizeof(kshown));
                rc = mf_err_set(&op->err, MF_E_CannotCreateIndex, "add index fails, too many indexes for %s key:%s",
                                c->ns, kshown);
                break;
            }
        }
    }
    /* Phase 1: every new index is added as building; writers maintain it from now on. */
    for (size_t i = 0; i < nspecs && rc == 0; i++) {
        bson_iter_t it;
        mf_index_t *ix;
        if (!keep[i])
            continue;
        bson_iter_init_find(&it, norm[i], "name");
        if (mf_catalog_index_begin(op->eng->cat, c, norm[i], &ix, &op->err) != 0) {
            rc = -1;
            break;
        }
        names[nadded] = mf_strdup(bson_iter_utf8(&it, NULL));
        idents[nadded++] = mf_strdup(ix->ident);
    }
    memcpy(uuid, c->uuid, 16);
    snprintf(ns, sizeof(ns), "%s", c->ns);
    if (rc == 0 && nadded > 0) {
        /* Phase 2, without the exclusive lock: reads, writes and other DDL go on. */
        int64_t ndocs = atomic_load(&c->approx_count);
        mf_catalog_unlock(op->eng->cat);
        build_progress_t bp = {.cop = mf_curop_current(), .ns = ns, .index = names[0], .last_decile = 0};
        if (ndocs > 0)
            mf_log(MF_LOG_INFO, "INDEX", "Index build: starting: %s%s on %s (%lld documents)", names[0],
                   nadded > 1 ? " and others" : "", ns, (long long)ndocs);
        rc = mf_index_build_run(op->eng->cat, uuid, names, idents, nadded, on_build_progress, &bp, &op->err);
        if (rc != 0 && op->err.code != MF_E_IndexBuildAborted && !mf_err_is_interruption(op->err.code))
            build_failed_context(&op->err, ns, uuid);
        /* Phase 3: commit or abort, under the exclusive lock again. */
        mf_catalog_wrlock(op->eng->cat);
        c = mf_catalog_coll_find_uuid(op->eng->cat, uuid);
        if (c == NULL && rc == 0)
            rc = mf_err_set(&op->err, MF_E_IndexBuildAborted, "Index build aborted: %s: the collection was dropped",
                            names[0]);
        mf_index_t *ixs[MF_MAX_INDEXES];
        int found = c != NULL ? mf_coll_building_indexes(c, names, idents, nadded, ixs) : 0;
        if (rc == 0 && found != nadded)
            rc = mf_err_set(&op->err, MF_E_IndexBuildAborted, "Index build aborted: %s: the index was dropped",
                            names[0]);
        if (rc == 0 && mf_catalog_index_commit(op->eng->cat, c, ixs, found, &op->err) != 0)
            rc = -1;
        if (rc != 0) {
            /* All or nothing: remove what this command added. */
            for (int i = 0; i < found; i++)
                mf_catalog_index_abort(op->eng->cat, c, ixs[i]);
        }
    } else if (rc != 0) {
        mf_index_t *ixs[MF_MAX_INDEXES];
        int found = mf_coll_building_indexes(c, names, idents, nadded, ixs);
        for (int i = 0; i < found; i++)
            mf_catalog_index_abort(op->eng->cat, c, ixs[i]);
    }
    if (rc != 0) {
        /*
         * The collection this request created goes too, unless others have
         * written to it since (the lock was released during the build): their
         * acknowledged documents stay, as with mongod.
         */
        if (created_coll && (c = mf_catalog_coll_find_uuid(op->eng->cat, uuid)) != NULL &&
            atomic_load(&c->approx_count) == 0) {
            mf_error_t e2 = {0};
            if (mf_catalog_coll_drop(op->eng->cat, c, &e2) != 0)
                mf_log(MF_LOG_WARN, "INDEX", "could not roll back collection %s.%s: %s", op->db, name, e2.msg);
        }
    } else {
        /*
         * create_indexes_cmd.cpp: when every index exists already (indexesAlreadyExist) the
         * reply has no createdCollectionAutomatically; otherwise appendFinalIndexFieldsToResult
         * notes "index already exists" when fewer were added than requested.
         */
        int after = counted_indexes(c);
        BSON_APPEND_INT32(op->reply, "numIndexesBefore", before);
        BSON_APPEND_INT32(op->reply, "numIndexesAfter", after);
        if (nadded > 0 || created_coll)
            BSON_APPEND_BOOL(op->reply, "createdCollectionAutomatically", created_coll);
        if (after == before)
            BSON_APPEND_UTF8(op->reply, "note", "all indexes already exist");
        else if (after < before + (int)nspecs)
            BSON_APPEND_UTF8(op->reply, "note", "index already exists");
    }
out_unlock:
    mf_catalog_unlock(op->eng->cat);
out_free:
    free(keep);
    for (int i = 0; i < nadded; i++) {
        free(names[i]);
        free(idents[i]);
    }
    for (size_t i = 0; i < nnorm; i++)
        bson_destroy(norm[i]);
    free(norm);
    return rc;
}

static int
drop_one_index(mf_op_t *op, mf_coll_t *c, const bson_value_t *which)
{
    mf_index_t *ix = NULL;
    if (which->value_type == BSON_TYPE_UTF8) {
        ix = mf_coll_index_by_name(c, which->value.v_utf8.str);
        if (ix == NULL)
            return mf_err_set(&op->err, MF_E_IndexNotFound, "index not found with name [%s]", which->value.v_utf8.str);
    } else if (which->value_type == BSON_TYPE_DOCUMENT) {
        bson_t want;
        mf_index_t *other;
        bson_init_static(&want, which->value.v_doc.data, which->value.v_doc.data_len);
        int n = mf_coll_indexes_by_key(c, &want, false, &ix, &other);
        if (n > 1) {
            /* Indexes share a key pattern when their collation, filter, sparse or unique differ. */
            char kp[200], a[400], b[400];
            mf_fmt_doc(&want, kp, sizeof(kp));
            mf_fmt_doc(ix->spec, a, sizeof(a));
            mf_fmt_doc(other->spec, b, sizeof(b));
            return mf_err_set(&op->err, MF_E_AmbiguousIndexKeyPattern,
                              "%d indexes found for key: %s, identify by name instead. Conflicting indexes: %s, %s",
                              n, kp, a, b);
        }
        if (ix == NULL) {
            char shown[300];
            mf_fmt_doc(&want, shown, sizeof(shown));
            return mf_err_set(&op->err, MF_E_IndexNotFound, "can't find index with key: %s", shown);
        }
    } else {
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'dropIndexes.index' is the wrong type '%s', expected types '[string, object']",
                          mf_type_name(which->value_type));
    }
    if (ix->is_id)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "cannot drop _id index");
    return mf_catalog_index_drop(op->eng->cat, c, ix, &op->err);
}

/*
 * reIndex: {reIndex: <coll>}, as mongod 8.0's (deprecated there, kept for
 * scripts that run it): standalone only (20), a collection (166 for a view
 * or time-series collection, 26 for none), no index build running on it
 * (12587). Every index, _id's included, is rebuilt from its spec in the
 * current key format under the collection's exclusive lock
 * (mf_catalog_reindex); the reply names them: {nIndexesWas, nIndexes,
 * indexes}. An index created before decimals were keyed exactly moves to
 * the exact format (index/keystring.c KEY FORMAT 1).
 */
static int
cmd_reindex(mf_op_t *op)
{
    const char *name;
    bson_t specs;
    char key[16];
    int rc = 0;

    if (mf_op_coll_name(op, &name) != 0)
        return -1;
    mf_log(MF_LOG_WARN, "COMMAND", "The reIndex command is deprecated. For more information, see "
           "https://mongodb.com/docs/manual/reference/command/reIndex/");
    if (op->eng->repl != NULL)
        return mf_err_set(&op->err, MF_E_IllegalOperation, "reIndex is only allowed on a standalone mongod instance. "
                          "Cannot reIndex '%s.%s' while replication is active", op->db, name);
    mf_catalog_wrlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c == NULL) {
        rc = mf_err_set(&op->err, MF_E_NamespaceNotFound, "collection does not exist");
    } else if (c->is_view || c->is_timeseries) {
        rc = mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "can't re-index a view");
    } else if (mf_coll_ready_indexes(c) != c->nindexes) {
        char uuid[37];
        mf_fmt_uuid(c->uuid, uuid);
        rc = mf_err_set(&op->err, MF_E_BackgroundOperationInProgressForNamespace,
                        "cannot perform operation: an index build is currently running for collection with UUID: %s",
                        uuid);
    }
    if (rc != 0) {
        mf_catalog_unlock(op->eng->cat);
        return rc;
    }
    mf_log(MF_LOG_INFO, "COMMAND", "CMD reIndex %s", c->ns);
    int was = c->nindexes;
    if (mf_catalog_reindex(op->eng->cat, c, &op->err) != 0) {
        mf_catalog_unlock(op->eng->cat);
        return -1;
    }
    BSON_APPEND_INT32(op->reply, "nIndexesWas", was);
    BSON_APPEND_INT32(op->reply, "nIndexes", c->nindexes);
    BSON_APPEND_ARRAY_BEGIN(op->reply, "indexes", &specs);
    for (int i = 0; i < c->nindexes; i++) {
        snprintf(key, sizeof(key), "%d", i);
        BSON_APPEND_DOCUMENT(&specs, key, c->indexes[i]->spec);
    }
    bson_append_array_end(op->reply, &specs);
    mf_catalog_unlock(op->eng->cat);
    return 0;
}

static int
cmd_drop_indexes(mf_op_t *op)
{
    const char *name;
    bson_iter_t it;
    mf_coll_t *c;
    int rc = 0;

    if (mf_op_coll_name(op, &name) != 0)
        return -1;
    {
        bool done;
        int trc = ts_redirect(op, name, cmd_drop_indexes, &done);
        if (done || trc != 0)
            return trc;
    }
    if (!mf_op_find(op, "index", &it))
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'dropIndexes.index' is missing but a required field");
    const bson_value_t *v = bson_iter_value(&it);
    /*
     * drop_indexes.idl's index is a variant of string, array<string> and object, parsed
     * before the collection is looked up: IDLParserContext::throwBadType lists the scalar
     * alternatives (mongod's "'[...']" closing); an array is taken for array<string> by its
     * first element, then each element must be a string.
     */
    if (v->value_type != BSON_TYPE_UTF8 && v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'dropIndexes.index' is the wrong type '%s', expected types '[string, object']",
                          mf_type_name(v->value_type));
    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t ai;
        bool first = true;
        bson_iter_recurse(&it, &ai);
        while (bson_iter_next(&ai)) {
            if (!BSON_ITER_HOLDS_UTF8(&ai))
                return first ? mf_err_set(&op->err, MF_E_TypeMismatch,
                                          "BSON field 'dropIndexes.index' is the wrong type 'array', expected types '[string']")
                             : mf_err_set(&op->err, MF_E_TypeMismatch,
                                          "BSON field 'dropIndexes.index.%s' is the wrong type '%s', expected type 'string'",
                                          bson_iter_key(&ai), mf_type_name(bson_iter_type(&ai)));
            first = false;
        }
    }
    mf_catalog_wrlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c == NULL) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_NamespaceNotFound, "ns not found %s.%s", op->db, name);
    }
    if (c->is_view) {
        mf_catalog_unlock(op->eng->cat);
        return refuse_view(op, c);
    }
    int was = mf_coll_ready_indexes(c);
    bool star = v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "*") == 0;
    if (star) {
        /* Every index but _id, in one catalog transaction. */
        mf_index_t *ixs[MF_MAX_INDEXES];
        int n = 0;
        for (int i = 0; i < c->nindexes; i++) {
            if (!c->indexes[i]->is_id)
                ixs[n++] = c->indexes[i];
        }
        if (n > 0)
            rc = mf_catalog_index_drop_many(op->eng->cat, c, ixs, n, &op->err);
    } else if (v->value_type == BSON_TYPE_ARRAY) {
        /*
         * mongod's dropReadyIndexes drops the names in order in one write unit, each looked up
         * when its turn comes: a name that is missing, or named again after its index was
         * dropped, is 27 "index not found with name [...]" (and _id_ 72), and the unit rolls
         * back. So every name is checked, in order, before anything is dropped.
         */
        bson_iter_t ai;
        mf_index_t *ixs[MF_MAX_INDEXES];
        int n = 0;
        bson_iter_recurse(&it, &ai);
        while (rc == 0 && bson_iter_next(&ai)) {
            mf_index_t *ix = BSON_ITER_HOLDS_UTF8(&ai) ? mf_coll_index_by_name(c, bson_iter_utf8(&ai, NULL)) : NULL;
            bool dup = false;
            for (int k = 0; ix != NULL && k < n; k++)
                dup = dup || ixs[k] == ix;
            if (!BSON_ITER_HOLDS_UTF8(&ai))
                rc = mf_err_set(&op->err, MF_E_TypeMismatch, "dropIndexes %s.%s: index names must be strings", op->db, name);
            else if (strcmp(bson_iter_utf8(&ai, NULL), "*") == 0)
                rc = mf_err_set(&op->err, MF_E_BadValue, "The index name '*' can not be used with multiple index names");
            else if (ix == NULL || dup)
                rc = mf_err_set(&op->err, MF_E_IndexNotFound, "index not found with name [%s]", bson_iter_utf8(&ai, NULL));
            else if (ix->is_id)
                rc = mf_err_set(&op->err, MF_E_InvalidOptions, "cannot drop _id index");
            else if (n < MF_MAX_INDEXES)
                ixs[n++] = ix;
        }
        /* The named indexes, in one catalog transaction. */
        if (rc == 0 && n > 0)
            rc = mf_catalog_index_drop_many(op->eng->cat, c, ixs, n, &op->err);
    } else {
        rc = drop_one_index(op, c, v);
    }
    mf_catalog_unlock(op->eng->cat);
    if (rc == 0) {
        BSON_APPEND_INT32(op->reply, "nIndexesWas", was);
        if (star) /* mongod's DropIndexesReply */
            BSON_APPEND_UTF8(op->reply, "msg", "non-_id indexes dropped for collection");
    }
    return rc;
}

/* The commands' own fields (their IDL, strict: dispatch answers 40415 for anything else). */
static const char *const drop_fields[] = {"collectionUUID", NULL};
static const char *const list_collections_fields[] = {"cursor", "filter", "nameOnly", "authorizedCollections",
                                                      "includePendingDrops", NULL};
static const char *const list_indexes_fields[] = {"cursor", "includeBuildUUIDs", "includeIndexBuildInfo",
                                                  "collectionUUID", NULL};
static const char *const create_indexes_fields[] = {"indexes", "v", "ignoreUnknownIndexOptions", "commitQuorum",
                                                    "returnOnStart", "isTimeseriesNamespace", "collectionUUID", NULL};
static const char *const drop_indexes_fields[] = {"index", "collectionUUID", NULL};
static const char *const drop_database_fields[] = {NULL};
static const char *const list_databases_fields[] = {"filter", "nameOnly", "authorizedDatabases", NULL};
static const char *const rename_fields[] = {"to", "dropTarget", "stayTemp", "collectionUUID", NULL};

const mf_cmd_def_t mf_cmds_coll[] = {
    {"create", cmd_create, 0, NULL},
    {"drop", cmd_drop, 0, drop_fields},
    {"dropDatabase", cmd_drop_database, 0, drop_database_fields},
    {"listCollections", cmd_list_collections, 0, list_collections_fields},
    {"listDatabases", cmd_list_databases, MF_CMD_ADMIN_ONLY, list_databases_fields},
    {"renameCollection", cmd_rename_collection, MF_CMD_ADMIN_ONLY, rename_fields},
    {"collStats", cmd_coll_stats, 0, NULL},
    {"collstats", cmd_coll_stats, 0, NULL},
    {"dbStats", cmd_db_stats, 0, NULL},
    {"dbstats", cmd_db_stats, 0, NULL},
    {"validate", cmd_validate, 0, NULL},
    {"listIndexes", cmd_list_indexes, 0, list_indexes_fields},
    {"createIndexes", cmd_create_indexes, 0, create_indexes_fields},
    {"dropIndexes", cmd_drop_indexes, 0, drop_indexes_fields},
    {"reIndex", cmd_reindex, 0, NULL},
    {"deleteIndexes", cmd_drop_indexes, 0, drop_indexes_fields},
    {NULL, NULL, 0, NULL},
};
