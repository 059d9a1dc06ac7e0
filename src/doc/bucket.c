/*
 * bucket.c: time-series bucket documents (see bucket.h for the format).
 *
 * Building. An mf_bucket_t keeps one column per field: the field name, a
 * growing BSON document of {"<index>": value} entries, and the field's min
 * and max summaries. Columns are found by an open-addressing hash of their
 * names, tried after a hint (the column after the one last used), because
 * measurements usually repeat one field order. mf_bucket_add runs in two
 * passes over the measurement: the first checks it and resolves every field
 * to a column (creating new ones), the second appends and summarises; only
 * the first can fail, and its failure drops the columns it created, so a
 * refused measurement leaves the bucket as it was.
 *
 * Min and max (MongoDB's timeseries/minmax.cpp). A summary node is unset, a
 * value, an object (named children, first-seen order) or an array (children
 * by position). A document or array met where the summary has the same
 * shape (or nothing) is folded in child by child, so {a: {x: 1, y: 2}} and
 * {a: {x: 2, y: 1}} give min {a: {x: 1, y: 1}}; anything else is compared by
 * canonical type order, and replaces the summary only if it orders below
 * (min) or above (max), values of one type by mf_value_cmp. The time column's
 * min is fed the bucket start instead of the time (or the time itself, when
 * a caller adds one before the start), so control.min.<time> is the start.
 *
 * Unpacking. The unpacker first walks the whole bucket once to check it, then
 * keeps one bson_iter_t per column, positioned on the column's next entry;
 * measurement i takes the entry of every column whose iterator is on index
 * i and advances it. Each column is read twice in all, so unpacking a bucket
 * costs O(size + measurements * columns), never O(n^2).
 *
 * Push-down. Filters are translated syntactically; the bucket-level filter
 * is weaker than the measurement filter (it drops what it cannot translate),
 * which is safe because the exact filter still runs on unpacked measurements.
 */
#include "doc/bucket.h"

#include <limits.h>
#include <string.h>

#include "common/alloc.h"
#include "doc/value.h"

#define MS_PER_S 1000

/* ---- Spans and rounding --------------------------------------------------- */

int
mf_ts_granularity_spans(const char *granularity, int64_t *max_span_s, int64_t *rounding_s)
{
    static const struct {
        const char *name;
        int64_t span_s, rounding_s;
    } table[] = {
        {"seconds", 3600, 60},
        {"minutes", 86400, 3600},
        {"hours", 2592000, 86400},
    };

    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(granularity, table[i].name) == 0) {
            *max_span_s = table[i].span_s;
            *rounding_s = table[i].rounding_s;
            return 0;
        }
    }
    return -1;
}

/* floor_div: a / d rounded towards minus infinity (d > 0). */
static int64_t
floor_div(int64_t a, int64_t d)
{
    int64_t q = a / d;

    return (a % d < 0) ? q - 1 : q;
}

int64_t
mf_bucket_round_down(const mf_ts_spec_t *spec, int64_t t_ms)
{
    int64_t r_ms, out;

    if (spec->rounding_s <= 0 || __builtin_mul_overflow(spec->rounding_s, MS_PER_S, &r_ms))
        return t_ms;
    if (__builtin_mul_overflow(floor_div(t_ms, r_ms), r_ms, &out))
        return INT64_MIN; /* only times within one rounding of INT64_MIN */
    return out;
}

/* ---- Min/max summaries ---------------------------------------------------- */

enum { MM_UNSET, MM_VALUE, MM_OBJECT, MM_ARRAY };

typedef struct mm_node mm_node_t;
typedef struct mm_child mm_child_t;

struct mm_node {
    int kind;
    bson_value_t value; /* MM_VALUE: an owned copy */
    mm_child_t *kids;   /* MM_OBJECT, MM_ARRAY: sub-fields, first-seen order / by position */
    size_t nkids, capkids;
};

struct mm_child {
    char *name; /* NULL for array elements */
    mm_node_t node;
};

static void
mm_clear(mm_node_t *n)
{
    for (size_t i = 0; i < n->nkids; i++) {
        bson_free(n->kids[i].name);
        mm_clear(&n->kids[i].node);
    }
    bson_free(n->kids);
    if (n->kind == MM_VALUE)
        bson_value_destroy(&n->value);
    memset(n, 0, sizeof *n);
}

/* mm_rank: the canonical type rank of what n summarises (n is set). */
static int
mm_rank(const mm_node_t *n)
{
    if (n->kind == MM_OBJECT)
        return mf_value_type_rank(BSON_TYPE_DOCUMENT);
    if (n->kind == MM_ARRAY)
        return mf_value_type_rank(BSON_TYPE_ARRAY);
    return mf_value_type_rank(n->value.value_type);
}

/*
 * mm_child: n's child for the pos-th element (named key) of a document or
 * array being folded in, created unset if new. Valid until n's next child is
 * created.
 */
static mm_node_t *
mm_child(mm_node_t *n, size_t pos, const char *key)
{
    if (n->kind == MM_ARRAY) {
        if (pos < n->nkids)
            return &n->kids[pos].node;
    } else {
        if (pos < n->nkids && strcmp(n->kids[pos].name, key) == 0)
            return &n->kids[pos].node; /* same shape as an earlier document */
        for (size_t i = 0; i < n->nkids; i++)
            if (strcmp(n->kids[i].name, key) == 0)
                return &n->kids[i].node;
    }
    if (n->nkids == n->capkids) {
        n->capkids = n->capkids ? 2 * n->capkids : 4;
        n->kids = mf_realloc(n->kids, n->capkids * sizeof *n->kids);
    }
    memset(&n->kids[n->nkids], 0, sizeof n->kids[n->nkids]);
    n->kids[n->nkids].name = n->kind == MM_ARRAY ? NULL : mf_strdup(key);
    return &n->kids[n->nkids++].node;
}

/* mm_update: folds v into n, a min summary when dir < 0, a max when dir > 0. */
static void
mm_update(mm_node_t *n, const bson_value_t *v, int dir)
{
    bool compound = v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY;
    int kind = v->value_type == BSON_TYPE_ARRAY ? MM_ARRAY : MM_OBJECT;
    bson_iter_t it;
    size_t pos = 0;

    if (n->kind != MM_UNSET && !(compound && n->kind == kind)) {
        int c = (compound || n->kind != MM_VALUE) ? mf_value_type_rank(v->value_type) - mm_rank(n)
                                                  : mf_value_cmp(v, &n->value);
        if (c * dir <= 0)
            return;
        mm_clear(n);
    }
    if (!compound) {
        bson_value_copy(v, &n->value);
        n->kind = MM_VALUE;
        return;
    }
    n->kind = kind;
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return;
    while (bson_iter_next(&it))
        mm_update(mm_child(n, pos++, bson_iter_key(&it)), bson_iter_value(&it), dir);
}

/* mm_append: appends n (set) to out under key. */
static void
mm_append(bson_t *out, const char *key, int keylen, const mm_node_t *n)
{
    bson_t child;

    if (n->kind == MM_VALUE) {
        bson_append_value(out, key, keylen, &n->value);
        return;
    }
    if (n->kind == MM_ARRAY)
        bson_append_array_begin(out, key, keylen, &child);
    else
        bson_append_document_begin(out, key, keylen, &child);
    for (size_t i = 0; i < n->nkids; i++) {
        char buf[16];
        const char *k = n->kids[i].name;

        if (n->kind == MM_ARRAY)
            bson_uint32_to_string((uint32_t)i, &k, buf, sizeof buf);
        mm_append(&child, k, -1, &n->kids[i].node);
    }
    if (n->kind == MM_ARRAY)
        bson_append_array_end(out, &child);
    else
        bson_append_document_end(out, &child);
}

/* ---- Building ------------------------------------------------------------- */

typedef struct column {
    char *name;
    bson_t *values; /* {"<index>": value, ...}; a pointer because a bson_t may not move */
    uint64_t seen;  /* the mf_bucket_add call that last met this field */
    mm_node_t min, max;
} column_t;

struct mf_bucket {
    char *time_field;
    char *meta_field; /* NULL: none */
    int64_t max_span_s;
    bson_oid_t id;
    int64_t start_ms;
    bson_value_t meta; /* EOD: none */
    size_t count, bytes;
    column_t *cols;
    size_t ncols, capcols;
    uint32_t *slots; /* hash of column names: column index + 1, 0 empty */
    size_t nslots;   /* a power of two, at least twice ncols */
    size_t hint;     /* the column expected next */
    uint64_t adds;   /* mf_bucket_add calls so far */
    size_t *field_cols; /* mf_bucket_add's scratch: the column of each field */
    size_t capfields;
};

static size_t
name_hash(const char *s, size_t len)
{
    uint64_t h = 14695981039346656037ULL; /* FNV-1a */

    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
    return (size_t)h;
}

static void
slots_insert(mf_bucket_t *b, size_t col)
{
    const char *name = b->cols[col].name;
    size_t i = name_hash(name, strlen(name)) & (b->nslots - 1);

    while (b->slots[i] != 0)
        i = (i + 1) & (b->nslots - 1);
    b->slots[i] = (uint32_t)(col + 1);
}

/* slots_rebuild: rehashes the columns into nslots slots. */
static void
slots_rebuild(mf_bucket_t *b, size_t nslots)
{
    bson_free(b->slots);
    b->nslots = nslots;
    b->slots = mf_calloc(nslots, sizeof *b->slots);
    for (size_t c = 0; c < b->ncols; c++)
        slots_insert(b, c);
}

/* column_find: the index of the column named key, SIZE_MAX if none. */
static size_t
column_find(mf_bucket_t *b, const char *key, size_t keylen)
{
    size_t i;

    if (b->hint < b->ncols && strcmp(b->cols[b->hint].name, key) == 0)
        return b->hint;
    for (i = name_hash(key, keylen) & (b->nslots - 1); b->slots[i] != 0; i = (i + 1) & (b->nslots - 1))
        if (strcmp(b->cols[b->slots[i] - 1].name, key) == 0)
            return b->slots[i] - 1;
    return SIZE_MAX;
}

static size_t
column_add(mf_bucket_t *b, const char *key)
{
    column_t *c;

    if (b->ncols == b->capcols) {
        b->capcols = b->capcols ? 2 * b->capcols : 8;
        b->cols = mf_realloc(b->cols, b->capcols * sizeof *b->cols);
    }
    c = &b->cols[b->ncols++];
    memset(c, 0, sizeof *c);
    c->name = mf_strdup(key);
    c->values = bson_new();
    if (2 * b->ncols > b->nslots)
        slots_rebuild(b, 2 * b->nslots);
    else
        slots_insert(b, b->ncols - 1);
    return b->ncols - 1;
}

static void
column_free(column_t *c)
{
    bson_free(c->name);
    bson_destroy(c->values);
    mm_clear(&c->min);
    mm_clear(&c->max);
}

/* bucket_create: an empty bucket starting exactly at start_ms, with a fresh _id. */
static mf_bucket_t *
bucket_create(const mf_ts_spec_t *spec, const bson_value_t *meta, int64_t start_ms)
{
    mf_bucket_t *b = mf_calloc(1, sizeof *b);
    int64_t secs = floor_div(start_ms, MS_PER_S);
    uint32_t ts = secs < 0 ? 0 : secs > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)secs;

    b->time_field = mf_strdup(spec->time_field);
    b->meta_field = spec->meta_field ? mf_strdup(spec->meta_field) : NULL;
    b->max_span_s = spec->max_span_s;
    b->start_ms = start_ms;
    mf_value_copy(&b->meta, meta);
    b->nslots = 16;
    b->slots = mf_calloc(b->nslots, sizeof *b->slots);
    /* The other 8 bytes stay bson_oid_init's (process-unique and a counter). */
    bson_oid_init(&b->id, NULL);
    b->id.bytes[0] = (uint8_t)(ts >> 24);
    b->id.bytes[1] = (uint8_t)(ts >> 16);
    b->id.bytes[2] = (uint8_t)(ts >> 8);
    b->id.bytes[3] = (uint8_t)ts;
    return b;
}

mf_bucket_t *
mf_bucket_new(const mf_ts_spec_t *spec, const bson_value_t *meta, int64_t first_time_ms)
{
    return bucket_create(spec, meta, mf_bucket_round_down(spec, first_time_ms));
}

bool
mf_bucket_fits(const mf_bucket_t *b, int64_t t_ms, size_t m_bytes, size_t max_count, size_t max_bytes)
{
    uint64_t span_ms;

    if (b->max_span_s <= 0 || t_ms < b->start_ms)
        return false;
    span_ms = b->max_span_s > INT64_MAX / MS_PER_S ? UINT64_MAX : (uint64_t)b->max_span_s * MS_PER_S;
    if ((uint64_t)t_ms - (uint64_t)b->start_ms >= span_ms)
        return false;
    if (b->count >= max_count)
        return false;
    return b->count == 0 || (b->bytes <= max_bytes && m_bytes <= max_bytes - b->bytes);
}

static bool
is_meta_key(const mf_bucket_t *b, const char *key)
{
    return b->meta_field != NULL && strcmp(key, b->meta_field) == 0;
}

/*
 * add_resolve: add's first pass: checks measurement and stores the column of
 * each field (the metaField excepted) in b->field_cols, creating columns for
 * new fields. Returns 0, or -1 with err set (the caller drops new columns).
 */
static int
add_resolve(mf_bucket_t *b, const bson_t *measurement, mf_error_t *err)
{
    bson_iter_t it;
    size_t nfields = 0;
    bool has_time = false;

    if (b->count >= UINT32_MAX)
        return mf_err_set(err, MF_E_BadValue, "time-series bucket is full");
    if (!bson_iter_init(&it, measurement))
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON in time-series measurement");
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        size_t c;

        if (is_meta_key(b, key))
            continue;
        if (strcmp(key, b->time_field) == 0) {
            if (!BSON_ITER_HOLDS_DATE_TIME(&it))
                return mf_err_set(err, MF_E_BadValue, "'%s' must be present and contain a valid BSON UTC datetime value",
                                  b->time_field);
            has_time = true;
        }
        c = column_find(b, key, bson_iter_key_len(&it));
        if (c == SIZE_MAX)
            c = column_add(b, key);
        if (b->cols[c].seen == b->adds)
            return mf_err_set(err, MF_E_BadValue, "time-series measurement has field '%s' twice", key);
        b->cols[c].seen = b->adds;
        b->hint = c + 1;
        if (nfields == b->capfields) {
            b->capfields = b->capfields ? 2 * b->capfields : 16;
            b->field_cols = mf_realloc(b->field_cols, b->capfields * sizeof *b->field_cols);
        }
        b->field_cols[nfields++] = c;
    }
    if (it.err_off != 0)
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON in time-series measurement");
    if (!has_time)
        return mf_err_set(err, MF_E_BadValue, "'%s' must be present and contain a valid BSON UTC datetime value",
                          b->time_field);
    return 0;
}

int
mf_bucket_add(mf_bucket_t *b, const bson_t *measurement, mf_error_t *err)
{
    size_t old_ncols = b->ncols, nfield = 0;
    char buf[16];
    const char *idx;
    size_t idxlen;
    bson_iter_t it;

    b->adds++;
    if (add_resolve(b, measurement, err) != 0)
        goto err_drop_new_columns;
    idxlen = bson_uint32_to_string((uint32_t)b->count, &idx, buf, sizeof buf);
    bson_iter_init(&it, measurement);
    while (bson_iter_next(&it)) {
        column_t *c;
        const bson_value_t *v;
        bson_value_t start;

        if (is_meta_key(b, bson_iter_key(&it)))
            continue;
        c = &b->cols[b->field_cols[nfield++]];
        v = bson_iter_value(&it);
        bson_append_iter(c->values, idx, (int)idxlen, &it);
        mm_update(&c->max, v, 1);
        if (strcmp(c->name, b->time_field) == 0 && v->value.v_datetime >= b->start_ms) {
            start = *v;
            start.value.v_datetime = b->start_ms;
            v = &start;
        }
        mm_update(&c->min, v, -1);
    }
    b->count++;
    b->bytes += measurement->len;
    return 0;

err_drop_new_columns:
    while (b->ncols > old_ncols)
        column_free(&b->cols[--b->ncols]);
    slots_rebuild(b, b->nslots);
    b->hint = 0;
    return -1;
}

size_t
mf_bucket_count(const mf_bucket_t *b)
{
    return b->count;
}

size_t
mf_bucket_bytes(const mf_bucket_t *b)
{
    return b->bytes;
}

int64_t
mf_bucket_start_ms(const mf_bucket_t *b)
{
    return b->start_ms;
}

const bson_oid_t *
mf_bucket_id(const mf_bucket_t *b)
{
    return &b->id;
}

const bson_value_t *
mf_bucket_meta(const mf_bucket_t *b)
{
    return b->meta.value_type == BSON_TYPE_EOD ? NULL : &b->meta;
}

void
mf_bucket_to_doc(const mf_bucket_t *b, bson_t *out)
{
    bson_t control, min, max, data;

    bson_init(out);
    BSON_APPEND_OID(out, "_id", &b->id);
    BSON_APPEND_DOCUMENT_BEGIN(out, "control", &control);
    BSON_APPEND_INT32(&control, "version", 1);
    BSON_APPEND_DOCUMENT_BEGIN(&control, "min", &min);
    for (size_t i = 0; i < b->ncols; i++)
        mm_append(&min, b->cols[i].name, -1, &b->cols[i].min);
    bson_append_document_end(&control, &min);
    BSON_APPEND_DOCUMENT_BEGIN(&control, "max", &max);
    for (size_t i = 0; i < b->ncols; i++)
        mm_append(&max, b->cols[i].name, -1, &b->cols[i].max);
    bson_append_document_end(&control, &max);
    bson_append_document_end(out, &control);
    if (b->meta.value_type != BSON_TYPE_EOD)
        BSON_APPEND_VALUE(out, "meta", &b->meta);
    BSON_APPEND_DOCUMENT_BEGIN(out, "data", &data);
    for (size_t i = 0; i < b->ncols; i++)
        bson_append_document(&data, b->cols[i].name, -1, b->cols[i].values);
    bson_append_document_end(out, &data);
}

void
mf_bucket_free(mf_bucket_t *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->ncols; i++)
        column_free(&b->cols[i]);
    bson_free(b->cols);
    bson_free(b->slots);
    bson_free(b->field_cols);
    mf_value_free(&b->meta);
    bson_free(b->time_field);
    bson_free(b->meta_field);
    bson_free(b);
}

/* find_doc_field: positions it on the field key of the document it is on; false if absent or it is no document. */
static bool
find_doc_field(bson_iter_t *it, const char *key, bson_iter_t *out)
{
    return BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, out) && bson_iter_find(out, key);
}

mf_bucket_t *
mf_bucket_from_doc(const mf_ts_spec_t *spec, const bson_t *doc, mf_error_t *err)
{
    mf_bucket_unpacker_t *u;
    mf_bucket_t *b = NULL;
    bson_iter_t it, control, min, t;
    bson_oid_t id;
    bson_t m;

    u = mf_bucket_unpacker_new(spec, doc, err);
    if (u == NULL)
        return NULL;
    if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_OID(&it)) {
        mf_err_set(err, MF_E_BadValue, "time-series bucket _id must be an ObjectId");
        goto err_free_unpacker;
    }
    bson_oid_copy(bson_iter_oid(&it), &id);
    if (!bson_iter_init_find(&control, doc, "control") || !find_doc_field(&control, "min", &min) ||
        !find_doc_field(&min, spec->time_field, &t) || !BSON_ITER_HOLDS_DATE_TIME(&t)) {
        mf_err_set(err, MF_E_BadValue, "time-series bucket has no Date control.min.%s", spec->time_field);
        goto err_free_unpacker;
    }
    b = bucket_create(spec, bson_iter_init_find(&it, doc, "meta") ? bson_iter_value(&it) : NULL,
                      bson_iter_date_time(&t));
    bson_oid_copy(&id, &b->id);
    while (mf_bucket_unpacker_next(u, &m) == 1) {
        int rc = mf_bucket_add(b, &m, err);

        bson_destroy(&m);
        if (rc != 0) {
            mf_bucket_free(b);
            b = NULL;
            break;
        }
    }

err_free_unpacker:
    mf_bucket_unpacker_free(u);
    return b;
}

/* ---- Unpacking ------------------------------------------------------------ */

/*
 * A column being read. bson_iter_t asks for 128-byte alignment, which
 * mf_malloc does not give, so arrays of columns come from bson_aligned_alloc0
 * (which, like bson_malloc, aborts on failure).
 */
typedef struct unpack_col {
    const char *name; /* points into the bucket document */
    bson_iter_t it;   /* on the entry for measurement idx */
    uint32_t idx;     /* UINT32_MAX once the column is done */
} unpack_col_t;

struct mf_bucket_unpacker {
    char *time_field;
    char *meta_field;
    bool has_meta;
    bson_value_t meta; /* the bucket's meta, borrowed from it, when has_meta */
    unpack_col_t *cols;
    size_t ncols;
    size_t time_col;
    uint32_t n, next;
};

/* parse_index: a column key as an index: decimal, no sign, no leading zero, below UINT32_MAX. */
static bool
parse_index(const char *key, uint32_t len, uint32_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 10 || (len > 1 && key[0] == '0'))
        return false;
    for (uint32_t i = 0; i < len; i++) {
        if (key[i] < '0' || key[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(key[i] - '0');
    }
    if (v >= UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* col_advance: moves col to its next entry (entries were checked by check_column). */
static void
col_advance(unpack_col_t *col)
{
    if (!bson_iter_next(&col->it) || !parse_index(bson_iter_key(&col->it), bson_iter_key_len(&col->it), &col->idx))
        col->idx = UINT32_MAX;
}

/*
 * check_column: checks that the column it is on is a document of ascending
 * indexes; a dense one ("0", "1", ...) when dense. Sets *entries and *end
 * (one past the last index). Returns 0 or -1 with err set.
 */
static int
check_column(bson_iter_t *it, bool dense, uint32_t *entries, uint32_t *end, mf_error_t *err)
{
    const char *name = bson_iter_key(it);
    bson_iter_t e;
    uint32_t n = 0, next = 0, idx;

    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &e))
        return mf_err_set(err, MF_E_BadValue, "time-series bucket column '%s' is not a document", name);
    while (bson_iter_next(&e)) {
        if (!parse_index(bson_iter_key(&e), bson_iter_key_len(&e), &idx) || idx < next || (dense && idx != next))
            return mf_err_set(err, MF_E_BadValue, "time-series bucket column '%s' has a bad index '%s'", name,
                              bson_iter_key(&e));
        next = idx + 1;
        n++;
    }
    if (e.err_off != 0)
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON in time-series bucket column '%s'", name);
    *entries = n;
    *end = next;
    return 0;
}

/* unpack_check_control: checks the bucket's control field (it is on it). */
static int
unpack_check_control(bson_iter_t *it, mf_error_t *err)
{
    bson_iter_t version;
    int64_t v;

    if (!find_doc_field(it, "version", &version))
        return mf_err_set(err, MF_E_BadValue, "time-series bucket has no control.version");
    if (!mf_value_as_int64(bson_iter_value(&version), &v) || v != 1)
        return mf_err_set(err, MF_E_BadValue, "unsupported time-series bucket version (only 1 is)");
    return 0;
}

/*
 * unpack_check_data: checks the data field (it is on it), then sets up u's
 * columns, each on its first entry.
 */
static int
unpack_check_data(mf_bucket_unpacker_t *u, bson_iter_t *it, mf_error_t *err)
{
    bson_iter_t col;
    uint32_t max_end = 0, entries = 0, end = 0;

    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &col))
        return mf_err_set(err, MF_E_BadValue, "time-series bucket data is not a document");
    while (bson_iter_next(&col)) {
        const char *name = bson_iter_key(&col);
        bool is_time = strcmp(name, u->time_field) == 0;

        if (is_time && u->time_col != SIZE_MAX)
            return mf_err_set(err, MF_E_BadValue, "time-series bucket has two '%s' columns", name);
        if (u->meta_field != NULL && strcmp(name, u->meta_field) == 0)
            return mf_err_set(err, MF_E_BadValue, "time-series bucket has a data column for metaField '%s'", name);
        if (check_column(&col, is_time, &entries, &end, err) != 0)
            return -1;
        if (is_time) {
            u->time_col = u->ncols;
            u->n = entries;
        } else if (end > max_end) {
            max_end = end;
        }
        u->ncols++;
    }
    if (col.err_off != 0)
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON in time-series bucket data");
    if (u->time_col == SIZE_MAX)
        return mf_err_set(err, MF_E_BadValue, "time-series bucket has no '%s' column", u->time_field);
    if (max_end > u->n)
        return mf_err_set(err, MF_E_BadValue, "time-series bucket column has an index past its %u measurements",
                          (unsigned)u->n);

    u->cols = bson_aligned_alloc0(_Alignof(unpack_col_t), u->ncols * sizeof *u->cols);
    bson_iter_recurse(it, &col);
    for (size_t i = 0; i < u->ncols && bson_iter_next(&col); i++) {
        u->cols[i].name = bson_iter_key(&col);
        bson_iter_recurse(&col, &u->cols[i].it);
        col_advance(&u->cols[i]);
    }
    return 0;
}

mf_bucket_unpacker_t *
mf_bucket_unpacker_new(const mf_ts_spec_t *spec, const bson_t *bucket_doc, mf_error_t *err)
{
    mf_bucket_unpacker_t *u = mf_calloc(1, sizeof *u);
    bool has_control = false, has_data = false;
    bson_iter_t it;

    u->time_field = mf_strdup(spec->time_field);
    u->meta_field = spec->meta_field ? mf_strdup(spec->meta_field) : NULL;
    u->time_col = SIZE_MAX;
    if (!bson_iter_init(&it, bucket_doc)) {
        mf_err_set(err, MF_E_InvalidBSON, "invalid BSON in time-series bucket");
        goto err_free_unpacker;
    }
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);

        if (strcmp(key, "control") == 0 && !has_control) {
            has_control = true;
            if (unpack_check_control(&it, err) != 0)
                goto err_free_unpacker;
        } else if (strcmp(key, "data") == 0 && !has_data) {
            has_data = true;
            if (unpack_check_data(u, &it, err) != 0)
                goto err_free_unpacker;
        } else if (strcmp(key, "meta") == 0 && !u->has_meta) {
            if (u->meta_field == NULL) {
                mf_err_set(err, MF_E_BadValue, "time-series bucket has meta but the collection has no metaField");
                goto err_free_unpacker;
            }
            u->has_meta = true;
            u->meta = *bson_iter_value(&it);
        }
    }
    if (it.err_off != 0) {
        mf_err_set(err, MF_E_InvalidBSON, "invalid BSON in time-series bucket");
        goto err_free_unpacker;
    }
    if (!has_control || !has_data) {
        mf_err_set(err, MF_E_BadValue, "time-series bucket has no %s", has_control ? "data" : "control");
        goto err_free_unpacker;
    }
    return u;

err_free_unpacker:
    mf_bucket_unpacker_free(u);
    return NULL;
}

size_t
mf_bucket_unpacker_count(const mf_bucket_unpacker_t *u)
{
    return u->n;
}

int
mf_bucket_unpacker_next(mf_bucket_unpacker_t *u, bson_t *out)
{
    unpack_col_t *t;

    if (u->next >= u->n)
        return 0;
    bson_init(out);
    /* SPEC F1: the time first, then the meta, then the other fields, as MongoDB returns them. */
    t = &u->cols[u->time_col];
    bson_append_iter(out, t->name, -1, &t->it);
    col_advance(t);
    if (u->has_meta)
        bson_append_value(out, u->meta_field, -1, &u->meta);
    for (size_t i = 0; i < u->ncols; i++) {
        unpack_col_t *c = &u->cols[i];

        if (i == u->time_col || c->idx != u->next)
            continue;
        bson_append_iter(out, c->name, -1, &c->it);
        col_advance(c);
    }
    u->next++;
    return 1;
}

void
mf_bucket_unpacker_free(mf_bucket_unpacker_t *u)
{
    if (u == NULL)
        return;
    bson_free(u->cols);
    bson_free(u->time_field);
    bson_free(u->meta_field);
    bson_free(u);
}

/* ---- Predicate push-down -------------------------------------------------- */

/* sub_filter: the document the array element it is on holds, into *doc; false if it is no document. */
static bool
sub_filter(bson_iter_t *it, bson_t *doc)
{
    const uint8_t *data;
    uint32_t len;

    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return false;
    bson_iter_document(it, &len, &data);
    return bson_init_static(doc, data, len);
}

/*
 * A list of bucket-level clauses being collected: an array of documents,
 * turned into one filter (nothing: {}, one: itself, more: {$and: [...]}).
 */
typedef struct clauses {
    bson_t arr;
    uint32_t n;
} clauses_t;

static void
clause_begin(clauses_t *l, bson_t *clause)
{
    char buf[16];
    const char *key;
    size_t len = bson_uint32_to_string(l->n++, &key, buf, sizeof buf);

    bson_append_document_begin(&l->arr, key, (int)len, clause);
}

/*
 * clauses_finish: appends the filter l makes to dst, a document being built
 * (nothing, the one clause's fields, or $and of them all); destroys l.
 */
static void
clauses_finish(clauses_t *l, bson_t *dst)
{
    bson_iter_t it;
    bson_t one;

    if (l->n == 1 && bson_iter_init(&it, &l->arr) && bson_iter_next(&it) && sub_filter(&it, &one))
        bson_concat(dst, &one);
    else if (l->n > 1)
        bson_append_array(dst, "$and", -1, &l->arr);
    bson_destroy(&l->arr);
}

typedef struct pushdown {
    const mf_ts_spec_t *spec;
    char *min_path; /* control.min.<time> */
    char *max_path; /* control.max.<time> */
} pushdown_t;

/* meta_rest: for a key naming the metaField or a path under it, the rest after the metaField ("" or ".x"); else NULL. */
static const char *
meta_rest(const mf_ts_spec_t *spec, const char *key)
{
    size_t len;

    if (spec->meta_field == NULL)
        return NULL;
    len = strlen(spec->meta_field);
    if (strncmp(key, spec->meta_field, len) != 0 || (key[len] != '\0' && key[len] != '.'))
        return NULL;
    return key + len;
}

/* append_as_meta: appends the element it is on to dst, its key's metaField renamed to meta (rest as meta_rest gave). */
static void
append_as_meta(bson_t *dst, const char *rest, bson_iter_t *it)
{
    char *key = bson_strdup_printf("meta%s", rest);

    bson_append_iter(dst, key, -1, it);
    bson_free(key);
}

/* time_clause: appends the clause {path: {op: v}} to l. */
static void
time_clause(clauses_t *l, const char *path, const char *op, const bson_value_t *v)
{
    bson_t clause, cond;

    clause_begin(l, &clause);
    bson_append_document_begin(&clause, path, -1, &cond);
    bson_append_value(&cond, op, -1, v);
    bson_append_document_end(&clause, &cond);
    bson_append_document_end(&l->arr, &clause);
}

/* push_time: the clauses for a condition on the timeField (it is on its value). */
static void
push_time(const pushdown_t *p, clauses_t *l, bson_iter_t *it)
{
    bson_iter_t op;

    if (BSON_ITER_HOLDS_DATE_TIME(it)) {
        time_clause(l, p->min_path, "$lte", bson_iter_value(it));
        time_clause(l, p->max_path, "$gte", bson_iter_value(it));
        return;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &op))
        return;
    while (bson_iter_next(&op)) {
        const char *name = bson_iter_key(&op);
        const bson_value_t *v = bson_iter_value(&op);

        if (name[0] != '$')
            return; /* equality with a document: no Date, nothing to push */
        if (!BSON_ITER_HOLDS_DATE_TIME(&op))
            continue;
        if (strcmp(name, "$gt") == 0 || strcmp(name, "$gte") == 0)
            time_clause(l, p->max_path, name, v);
        else if (strcmp(name, "$lt") == 0 || strcmp(name, "$lte") == 0)
            time_clause(l, p->min_path, name, v);
        else if (strcmp(name, "$eq") == 0) {
            time_clause(l, p->min_path, "$lte", v);
            time_clause(l, p->max_path, "$gte", v);
        }
    }
}

static void push_conjunction(const pushdown_t *p, clauses_t *l, const bson_t *filter);

/* push_or: an $or (it is on its array) as one clause, if every branch yields one. */
static void
push_or(const pushdown_t *p, clauses_t *l, bson_iter_t *it)
{
    clauses_t branches = {.n = 0};
    bson_iter_t br;
    bson_t sub, clause;
    bool all = BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &br);

    bson_init(&branches.arr);
    while (all && bson_iter_next(&br)) {
        clauses_t one = {.n = 0};

        bson_init(&one.arr);
        all = sub_filter(&br, &sub);
        if (all)
            push_conjunction(p, &one, &sub);
        all = all && one.n > 0;
        if (all) {
            clause_begin(&branches, &clause);
            clauses_finish(&one, &clause);
            bson_append_document_end(&branches.arr, &clause);
        } else {
            bson_destroy(&one.arr);
        }
    }
    if (all && branches.n > 0) {
        clause_begin(l, &clause);
        bson_append_array(&clause, "$or", -1, &branches.arr);
        bson_append_document_end(&l->arr, &clause);
    }
    bson_destroy(&branches.arr);
}

/* push_conjunction: the clauses for the conjunction of filter's conditions. */
static void
push_conjunction(const pushdown_t *p, clauses_t *l, const bson_t *filter)
{
    bson_iter_t it, sub_it;
    bson_t sub, clause;

    if (!bson_iter_init(&it, filter))
        return;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        const char *rest;

        if (strcmp(key, "$and") == 0) {
            if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &sub_it))
                while (bson_iter_next(&sub_it))
                    if (sub_filter(&sub_it, &sub))
                        push_conjunction(p, l, &sub);
        } else if (strcmp(key, "$or") == 0) {
            push_or(p, l, &it);
        } else if ((rest = meta_rest(p->spec, key)) != NULL) {
            clause_begin(l, &clause);
            append_as_meta(&clause, rest, &it);
            bson_append_document_end(&l->arr, &clause);
        } else if (strcmp(key, p->spec->time_field) == 0) {
            push_time(p, l, &it);
        }
    }
}

void
mf_bucket_filter_from_match(const mf_ts_spec_t *spec, const bson_t *match, bson_t *out)
{
    pushdown_t p = {.spec = spec};
    clauses_t l = {.n = 0};

    p.min_path = bson_strdup_printf("control.min.%s", spec->time_field);
    p.max_path = bson_strdup_printf("control.max.%s", spec->time_field);
    bson_init(&l.arr);
    push_conjunction(&p, &l, match);
    bson_init(out);
    clauses_finish(&l, out);
    bson_free(p.min_path);
    bson_free(p.max_path);
}

/*
 * copy_meta_only: appends filter's conditions to dst with the metaField
 * renamed; false as soon as one is not on the metaField (dst is then partial).
 */
static bool
copy_meta_only(const mf_ts_spec_t *spec, const bson_t *filter, bson_t *dst)
{
    bson_iter_t it, sub_it;
    bson_t sub, arr, child;
    bool ok = bson_iter_init(&it, filter);

    while (ok && bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        const char *rest;

        if (strcmp(key, "$and") == 0 || strcmp(key, "$or") == 0 || strcmp(key, "$nor") == 0) {
            ok = BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &sub_it);
            if (!ok)
                break;
            bson_append_array_begin(dst, key, -1, &arr);
            for (uint32_t i = 0; ok && bson_iter_next(&sub_it); i++) {
                char buf[16];
                const char *k;
                size_t klen = bson_uint32_to_string(i, &k, buf, sizeof buf);

                ok = sub_filter(&sub_it, &sub);
                if (!ok)
                    break;
                bson_append_document_begin(&arr, k, (int)klen, &child);
                ok = copy_meta_only(spec, &sub, &child);
                bson_append_document_end(&arr, &child);
            }
            bson_append_array_end(dst, &arr);
        } else if (strcmp(key, "$comment") == 0) {
            bson_append_iter(dst, key, -1, &it);
        } else if ((rest = meta_rest(spec, key)) != NULL) {
            append_as_meta(dst, rest, &it);
        } else {
            ok = false;
        }
    }
    return ok;
}

bool
mf_bucket_filter_meta_only(const mf_ts_spec_t *spec, const bson_t *filter, bson_t *out)
{
    bson_init(out);
    if (copy_meta_only(spec, filter, out))
        return true;
    bson_reinit(out);
    return false;
}
