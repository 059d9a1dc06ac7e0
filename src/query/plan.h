/*
 * plan.h: the rule-based query planner and the plan (stage tree) it builds.
 *
 * A plan is a tree of stages named as MongoDB names them (COLLSCAN, IXSCAN,
 * IDHACK, FETCH, SORT, SKIP, LIMIT, PROJECTION_*, COUNT, DELETE,
 * BATCHED_DELETE, UPDATE, DISTINCT_SCAN). The same tree is executed (exec.c runs the access
 * path: the leaf and its FETCH; commands run the stages above it and record
 * their counters in them) and explained (mf_plan_explain), so explain shows
 * what actually runs.
 *
 * Plan choice (mf_plan_build), first rule that applies:
 *   1. hint: {$natural: ±1} forces COLLSCAN; an index name or key pattern
 *      forces that index (hidden indexes cannot be hinted; an unknown hint is
 *      2 BadValue "hint provided does not correspond to an existing index").
 *   2. IDHACK: the filter is an equality on _id.
 *   3. The best usable index by score: point equality on the leading field(s)
 *      beats a range on the leading field beats only providing the sort.
 *   3b. A wildcard index (index/index_wild.c), when no regular index bounds
 *      the filter or it is hinted: one predicate on a path it covers, with
 *      a scalar equality, $in, range or $exists: true, as [path, value]
 *      intervals; a FETCH re-checks the whole filter. A hinted one the
 *      filter cannot use is 291 ("refusing to build whole-index solution").
 *      A branch of rule 4 that no regular index bounds may use one too.
 *   4. Index union: when no index bounds the filter's own predicates and
 *      every branch of its $or can use an index (the branch's predicates
 *      plus the filter's others), an OR stage over one IXSCAN per branch
 *      under one FETCH, de-duplicating record ids (MongoDB's OR stage).
 *      A $or whose branches are all equalities / $in on one path is first
 *      read as one $in (MongoDB's rewrite), so it is a single IXSCAN.
 *   5. COLLSCAN.
 * find's min / max (either non-empty) replace rules 2-5, as mongod's
 * QueryPlanner::plan: a hint is required (51173), not $natural (291 "min and
 * max are incompatible with $natural"); each bound's field names must be the
 * hinted index's key pattern fields in order, and a string, object or array
 * bound needs the index's collation to be the query's (51174); the finished
 * min (an empty one is the lowest key in the index's order) must come before
 * the finished max (51175). The plan is then one IXSCAN over the keystring
 * range [min, max) (min inclusive, max exclusive, whole keys compared in the
 * index's order, descending fields included) + FETCH with the whole filter,
 * forward unless a requested sort is the index's order reversed. On a
 * clustered collection's _id index the checks are its own (6137400 for a
 * collation mismatch, 6137401 "max() must be greater than min()").
 * Planning errors other than a bad hint are worded as mongod's get_executor:
 * "error processing query: ns=... planner returned error :: caused by :: ...".
 * A filter with $text (top level or under top-level $and) always uses the
 * collection's text index (27 IndexNotFound without one): TEXT_MATCH over
 * FETCH over TEXT_OR, one IXSCAN per distinct query term; the executor
 * checks phrases and negations and computes each document's score. A
 * compound text index needs an equality on each prefix field (291), which
 * is part of every term's bounds.
 * A $text in a branch of the top-level $or (mongod's TEXT under OR) is a
 * FETCH over an OR of the text index's term scans and an index scan for
 * every other branch (291 when one has none, as mongod); the executor
 * matches a fetched document against the text query and then against the
 * filter with $text true or false accordingly (mf_plan_t.text_false).
 * Index filters (query/index_filter.h): without a hint, an index filter set
 * for the request's query shape leaves only the indexes it names as
 * candidates (rules 3 and 4), as mongod's query settings do.
 * Usable: not hidden; partial only if the filter contains the partial filter's
 * predicates literally; sparse only if the bounds on a field exclude null.
 *
 * Index bounds are intervals over keystring bytes (prefix semantics: a key is
 * inside when its leading bytes compare inside the bound), built from point
 * equalities and $in on leading fields, then at most one range field, with
 * MongoDB's type bracketing. A $in of any size gives sorted, de-duplicated
 * point intervals on the leading field (the product of several fields is
 * capped); a regex in $in, or a lone regex, gives its literal prefix as a
 * string range (["ab", "ac") for /^ab/) or all strings, plus the regex
 * value itself as a point, and is never exact. Bounds may be looser than the filter, never
 * tighter: the matcher is re-applied to every fetched document. On a
 * multikey index, a field whose path held an array (its multikey paths,
 * mf_index_t.mk_paths) takes one range predicate and is never exact, a
 * field that shares such a prefix with a field bounded before it is not
 * bounded, and a sort comes from fields none of whose paths held an array,
 * as mongod's planner does with its multikey paths; record ids are
 * de-duplicated during the scan.
 *
 * A find (or an aggregate's pushed-down $project) whose IXSCAN answers the
 * whole filter exactly and in the sort's order, projecting key fields only,
 * is covered (mf_plan_t.covered): PROJECTION_COVERED over the IXSCAN, no
 * FETCH, the documents decoded from the keys. A sort no index provides is
 * covered too when it sorts by such key fields only: a SORT (type
 * "default") over the IXSCAN. A projection with no expression that keeps
 * every sorted field as it is goes below a SORT without a limit (mongod's
 * tryPushdownProjectBeneathSort): SORT over PROJECTION_*.
 *
 * A distinct (mf_plan_request_t.distinct_key) first tries mongod's
 * DISTINCT_SCAN (get_executor.cpp tryGetExecutorDistinct): over the
 * candidate indexes (ready, not hidden, not text / geo / wildcard, keyFormat
 * 3, within the hint or index filter, with the distinct key among their key
 * pattern fields), an empty filter takes the one of fewest fields whose
 * leading field is the key, has the query's collation, is not partial and
 * whose key field is not hashed (getDistinctNodeIndex), bounds [MinKey,
 * MaxKey]; a filter takes the candidate rule 3 would choose among them, if
 * its bounds answer the filter exactly, the key's path held no array and the
 * index has the query's collation (turnIxscanIntoDistinctIxscan). The scan
 * returns the first entry of each distinct prefix up to the key field and
 * seeks past it, so it reads one key per distinct value (per combination of
 * the fields before it). With the key coverable (type bits, no collation,
 * not hashed) it is PROJECTION_COVERED (PROJECTION_DEFAULT for a dotted key)
 * over DISTINCT_SCAN, the documents decoded from the keys ({key: value}, a
 * missing field read as null, an empty array as undefined, as mongod's);
 * else FETCH over DISTINCT_SCAN (under a projection when the filter is
 * empty). Anything else plans by the rules above. An aggregate's $group
 * (distinct_group) asks for a strict DISTINCT_SCAN in its $sort's order
 * (see mf_plan_request_t.distinct_group).
 *
 * A plan also carries its execution position (last key / record id), so a
 * find cursor keeps its plan across getMore and resumes the scan.
 */
#ifndef MF_PLAN_H
#define MF_PLAN_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/error.h"

typedef enum mf_stage_kind {
    MF_ST_EOF = 0,
    MF_ST_COLLSCAN,
    MF_ST_IXSCAN,
    MF_ST_IDHACK,
    MF_ST_FETCH,
    MF_ST_SORT,
    MF_ST_SKIP,
    MF_ST_LIMIT,
    MF_ST_PROJECTION_SIMPLE,
    MF_ST_PROJECTION_DEFAULT,
    MF_ST_COUNT,
    MF_ST_DELETE,
    MF_ST_BATCHED_DELETE,
    MF_ST_UPDATE,
    MF_ST_OR,
    MF_ST_TEXT_OR,    /* $text: an OR of one IXSCAN per term of the text index (run as OR) */
    MF_ST_TEXT_MATCH, /* $text: phrases, negations and the score, checked above FETCH (exec.c) */
    MF_ST_PROJECTION_COVERED, /* a covered projection: the index keys' values, no FETCH (mf_plan_t.covered) */
    MF_ST_DISTINCT_SCAN, /* distinct: an IXSCAN that seeks past each value of one key field (field_no) */
} mf_stage_kind_t;

/* One index interval over keystring bytes, lo <= hi byte-wise (scan order ascending). */
typedef struct mf_interval {
    uint8_t *lo, *hi; /* owned */
    size_t lolen, hilen;
    bool lo_incl, hi_incl;
} mf_interval_t;

typedef struct mf_stage {
    mf_stage_kind_t kind;
    struct mf_stage *child;
    /* counters (executionStats) */
    int64_t n_returned, keys_examined, docs_examined, works;
    /* COLLSCAN / IXSCAN */
    int direction; /* 1 forward, -1 backward */
    /* IXSCAN */
    char *index_name;     /* owned */
    char *index_ident;    /* owned: which index of that name (a dropped and rebuilt one differs) */
    bson_t *key_pattern;  /* owned */
    bool multikey, unique, sparse, partial;
    uint32_t mk_paths[MF_KP_MAX_FIELDS]; /* per key pattern field, as the index had them when planned */
    bson_t *bounds;       /* owned: explain indexBounds {field: ["[5, 5]"]} */
    bool loose;           /* an unencodable bound widened the scan to the whole index: never exact */
    mf_interval_t *iv;    /* owned, niv intervals in ascending byte order */
    size_t niv;
    /* COLLSCAN / FETCH residual filter, SORT pattern, PROJECTION spec (owned, may be NULL) */
    bson_t *filter;
    bson_t *spec;
    int64_t amount; /* SKIP / LIMIT amount; SORT limitAmount (0 = none) */
    int field_no;   /* DISTINCT_SCAN: the key pattern field whose distinct values it reads */
    /* OR: one IXSCAN per $or branch (owned); record ids are de-duplicated across them */
    struct mf_stage **inputs;
    size_t ninputs;
    int64_t dups_tested, dups_dropped;
    /* UPDATE (nMatched, nWouldModify, nWouldUpsert) and DELETE (nWouldDelete: n_matched), set by explain */
    int64_t n_matched, n_would_modify, n_would_upsert;
    /*
     * SORT: type "default" rather than "simple" (mongod's canUseSimpleSort:
     * unfetched input, metadata other than sortKey, or record ids kept);
     * memLimit (0: the default 100 MB); and, once explain ran the sort
     * (sort_ran), what its sorter took: totalDataSizeSorted, spills and
     * spilledDataStorageSize.
     */
    bool sort_default, sort_ran;
    int64_t mem_limit, sort_bytes, sort_spills, sort_spilled_bytes;
} mf_stage_t;

/* What the plan's root is (the command around the scan). */
enum { MF_PLAN_ROOT_NONE = 0, MF_PLAN_ROOT_COUNT, MF_PLAN_ROOT_DELETE, MF_PLAN_ROOT_BATCHED_DELETE, MF_PLAN_ROOT_UPDATE };

/*
 * What a planner error shows of the command beyond filter and sort
 * (mf_plan_cq_describe): mongod's FindCommandRequest as the command built
 * it. limit and skip 0: not shown; projection and collation NULL: {} and
 * none.
 */
typedef struct mf_plan_shown {
    int64_t limit, skip, batch_size;
    bool has_batch_size;
    const bson_t *projection;
    const bson_t *collation;
} mf_plan_shown_t;

typedef struct mf_plan_request {
    const bson_t *filter;     /* may be NULL */
    /*
     * filter as the caller's matcher parsed it (doc/match.h), or NULL: what
     * a planner error walks to show the query (plan_cq.c); without it the
     * error path parses filter with mf_matcher_new, the same parser.
     */
    const struct mf_matcher *matcher;
    const bson_t *sort;       /* may be NULL or empty */
    const bson_value_t *hint; /* may be NULL */
    const bson_t *projection; /* for the PROJECTION stage only; may be NULL */
    int64_t skip, limit;      /* 0 = none */
    int root;                 /* MF_PLAN_ROOT_* */
    bool force_collscan;      /* e.g. resuming a record-id ordered scan */
    /* the command's projection when it is not in projection (find): part of the query shape index filters match */
    const bson_t *shape_projection;
    /* find's min / max (NULL or empty: none): the hinted index's key range [min, max) (see mf_plan_build) */
    const bson_t *min, *max;
    /* the caller only counts the matches (an aggregate's countDocuments): as root COUNT for keys_only */
    bool count_only;
    /* a tailable find (with force_collscan): refused under notablescan (plan.c no_table_scan) */
    bool tailable;
    /* a find's showRecordId: the plan keeps record ids (mongod's PRESERVE_RECORD_ID), so a SORT is "default" */
    bool preserve_record_id;
    /* the command as a planner error shows it (see mf_plan_shown_t) */
    mf_plan_shown_t shown;
    /*
     * A find's projection that an index scan may cover (mf_plan_t.covered),
     * or NULL: the caller needs whole documents (returnKey, showRecordId,
     * min / max, metadata). With projection set too, explain's projection
     * stage is PROJECTION_COVERED (or PROJECTION_DEFAULT for dotted paths).
     */
    const bson_t *cover_projection;
    /*
     * cover_projection parsed (find or $project semantics), or NULL: with
     * it, a projection with expressions is covered too when every field
     * path it reads is a key field (mongod's PROJECTION_DEFAULT over an
     * IXSCAN with no FETCH); it then runs on the decoded keys.
     */
    const struct mf_projection *cover_parsed;
    /*
     * A blocking sort the caller runs itself over what the scan yields (an
     * aggregate's $sort left after its pushed-down prefix), or NULL: a
     * covered plan must then give every field it sorts by too, as it must
     * for a sort in sort that its index does not provide. Not a SORT stage.
     */
    const bson_t *cover_sort;
    /*
     * A distinct command's key, or NULL: the planner first tries a
     * DISTINCT_SCAN over an index holding that field (see mf_plan_build),
     * whose projection stage shows shown.projection.
     */
    const char *distinct_key;
    /*
     * An aggregate's $group rewritten as mongod 8.0's $groupByDistinctScan
     * (pipeline_d.cpp tryDistinctGroupRewrite; distinct_key is the group's
     * field path): a strict DISTINCT_SCAN (STRICT_DISTINCT_ONLY: one entry
     * per value, no index multikey on the key's path), in sort's order,
     * whose entries are handed out whole (covered: every key field decoded,
     * mf_plan_t.distinct_whole) when shown.projection (the group's
     * dependencies; NULL: the whole document) names key fields only.
     * distinct_last ($last accumulators) flips the scan where a filter or
     * a sort planned it, and rules out multikey indexes. Anything else
     * plans by the rules above; the caller keeps the plan only when its
     * leaf is a DISTINCT_SCAN.
     */
    bool distinct_group, distinct_last;
} mf_plan_request_t;

/* A set of record ids (multikey de-duplication). */
typedef struct mf_ridset {
    int64_t *slots;
    size_t cap, n;
} mf_ridset_t;

typedef struct mf_plan {
    mf_stage_t *root;
    mf_stage_t *leaf;   /* COLLSCAN, IXSCAN, IDHACK, OR or EOF */
    mf_stage_t *fetch;  /* FETCH above an IXSCAN or OR, else NULL */
    mf_stage_t *sort;   /* SORT stage (in-memory sort needed), else NULL */
    bool sort_provided; /* no sort requested, or the access path yields the sort order */
    bool id_is_eq;      /* IDHACK: idv holds the _id value */
    bson_value_t idv;   /* owned copy */
    /* execution position (exec.c) */
    bool started, done;
    bool counted; /* its indexes' $indexStats accesses were counted (its first run) */
    size_t cur_input;   /* OR: input being scanned */
    size_t cur_iv;      /* interval being scanned (of the current input for OR) */
    int64_t last_rid;   /* COLLSCAN position */
    uint8_t *last_key;  /* IXSCAN position: last key returned (owned) */
    size_t last_key_len, last_key_cap;
    mf_ridset_t seen;   /* multikey and OR de-duplication */
    int64_t exec_ms;
    bool tailable;      /* a tailable cursor's COLLSCAN: may be resumed after reaching the end */
    bool index_filter_set; /* an index filter (planCacheSetFilter) restricted the indexes considered */
    /*
     * A count whose index bounds answer its whole filter exactly (the FETCH
     * has no residual filter): the scan counts keys and reads no document
     * (mongod's count over a covered IXSCAN); visitors get doc NULL.
     * Explain leaves the FETCH out.
     */
    bool keys_only;
    /*
     * A covered find (mongod's PROJECTION_COVERED over IXSCAN, planner_analysis.cpp
     * analyzeProjection): the bounds answer the whole filter exactly, the sort (if
     * any) is the index's order, and the projection includes only key
     * pattern fields (cover_fields: their positions) none of whose paths
     * held an array, of an index whose entries hold type bits
     * (mf_index_t.key_types), with neither collation nor hashed, geo or text
     * fields among them. The scan reads no document: each key is decoded
     * with its type bits into {field: value} by the key pattern, dotted
     * fields nested (mongod's rehydrateIndexKey), and handed to the visitor
     * as the document, whose projection then keeps the projected fields in
     * key pattern order; a missing field reads as null, as mongod's covered
     * plans give it. Should a covered field's path hold an array since
     * planning, the scan fetches documents again. Explain leaves the FETCH out.
     * A sort the index does not provide (a blocking SORT, or the request's
     * cover_sort) keeps the plan covered when every field it sorts by is
     * such a key field too (cover_fields has them as well): the caller sorts
     * the decoded keys, as mongod's SORT over an IXSCAN with no FETCH
     * (planner_analysis.cpp analyzeSort), whose explain type is "default".
     * A projection with expressions is covered when every path it reads is
     * such a key field (cover_parsed): PROJECTION_DEFAULT on the decoded
     * keys. One bound on a field whose path held an array counts as exact
     * here (mongod's planner), so other key fields are covered with record
     * ids de-duplicated.
     */
    bool covered;
    uint32_t cover_fields;
    /* A covered DISTINCT_SCAN hands out all the key fields ($groupByDistinctScan), not {key: value} (distinct). */
    bool distinct_whole;
    /* A strict DISTINCT_SCAN ($groupByDistinctScan): planned while the key's path held no array. */
    bool distinct_strict;
    struct mf_text_query *text; /* owned: a $text query's terms and checks (doc/text.h), or NULL */
    /*
     * owned: a $text under $or (text_or_plan): the filter with $text false,
     * which a fetched document the text query does not match must pass
     * instead of the caller's matcher; NULL otherwise.
     */
    struct mf_matcher *text_false;
} mf_plan_t;

/*
 * mf_plan_build: chooses a plan for req over c (c may be NULL: EOF plan).
 * Caller holds the catalog lock. *out is owned by the caller (mf_plan_free).
 * Returns 0, or -1 with err (2 BadValue for an unknown or hidden hint).
 */
int mf_plan_build(const mf_coll_t *c, const mf_plan_request_t *req, mf_plan_t **out, mf_error_t *err) MF_WUR;

/*
 * mf_plan_cq_describe (plan_cq.c): req over ns as mongod's
 * CanonicalQuery::toString(forErrMsg) renders it ("ns=db.cTree: $and\n
 * Sort: {}\nProj: {}\n"); truncated to cap, always NUL-terminated.
 */
void mf_plan_cq_describe(const char *ns, const mf_plan_request_t *req, char *buf, size_t cap);

/*
 * mf_plan_error (plan_cq.c): sets a planner error as mongod's
 * finishPrepare reports one: "error processing query: <req described>
 * planner returned error :: caused by :: <reason>" (the reason printf-style
 * from fmt, always whole). ns NULL: the bare reason. Returns -1.
 */
int mf_plan_error(mf_error_t *err, int code, const char *ns, const mf_plan_request_t *req, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void mf_plan_free(mf_plan_t *p);

/*
 * mf_plan_minmax_check: find's parse-time check of min and max (either may
 * be NULL or empty): when both are given they name the same fields in the
 * same order, else 51176 "min and max must have the same field names"
 * (mongod's validateFindCommandRequest). Returns 0 or -1 with err.
 */
int mf_plan_minmax_check(const bson_t *min, const bson_t *max, mf_error_t *err) MF_WUR;

/* mf_plan_find_stage: the first stage of kind in p's tree, or NULL. */
mf_stage_t *mf_plan_find_stage(const mf_plan_t *p, mf_stage_kind_t kind);

/* mf_plan_stage_name: MongoDB's name for a stage kind. */
const char *mf_plan_stage_name(mf_stage_kind_t kind);

/*
 * mf_plan_explain: appends p's stage tree (winningPlan form, or with
 * counters when with_stats: executionStages form) to out (initialised).
 */
void mf_plan_explain(const mf_plan_t *p, bool with_stats, bson_t *out);

/* mf_plan_id_equality: if filter is exactly an equality on _id, points *v at the value (a view) and returns true. */
bool mf_plan_id_equality(const bson_t *filter, bson_value_t *v);

/* mf_plan_projection_simple: whether a find projection runs as PROJECTION_SIMPLE (top-level fields, 0/1 values only). */
bool mf_plan_projection_simple(const bson_t *proj);

/* mf_plan_projection_inclusions: whether proj holds only inclusions and exclusions (numbers or booleans), no expression. */
bool mf_plan_projection_inclusions(const bson_t *proj);

/* mf_plan_hint_index: the index hint designates in c (by name or key pattern), or NULL. */
mf_index_t *mf_plan_hint_index(const mf_coll_t *c, const bson_value_t *hint);

/* mf_plan_index_hidden: true if ix's spec says hidden: true. */
bool mf_plan_index_hidden(const mf_index_t *ix);

/* Record-id set (used by exec.c). */
bool mf_ridset_add(mf_ridset_t *s, int64_t rid); /* true if newly added */
void mf_ridset_destroy(mf_ridset_t *s);

/* mf_interval_key_cmp: compares key with bound under prefix semantics (bound a prefix of key = 0). */
int mf_interval_key_cmp(const uint8_t *key, size_t klen, const uint8_t *bound, size_t blen);

#endif /* MF_PLAN_H */
