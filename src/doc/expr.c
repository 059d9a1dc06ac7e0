/*
 * expr.c: aggregation expressions, parsed once into a tree, evaluated many times.
 *
 * Design. mf_expr_parse turns a BSON value into a tree of nodes of six kinds:
 * literals (an owned bson_value_t), field paths ("$a.b", split into
 * components), variables ("$$name.rest"), document expressions ({a: <expr>}),
 * array expressions ([<expr>, ...]) and operator nodes ({$op: args}). An
 * operator node holds its arguments as child expressions in fixed slots; the
 * operators that take named arguments ($cond, $switch, $map, $filter, $reduce,
 * $let, $convert, $trim, the date operators, $regex*, $replace*, $getField,
 * $setField, $sortArray, $zip, $median, $percentile) are parsed into
 * positional slots too, with NULL for an absent optional one, and with
 * MongoDB's code for each malformed argument. What MongoDB checks at parse
 * time for constant arguments is checked here at parse time too: a constant
 * timezone is opened, a constant unit checked, a constant regex compiled once
 * and kept in the node (a pcre2_code is only read while matching).
 * Parsing validates argument counts and variable names (a parse-time scope
 * stack resolves "$$x" references; an undefined one is refused), so
 * evaluation never re-reads the source BSON.
 *
 * Evaluation. ev() returns an owned bson_value_t; "missing" is represented by
 * BSON_TYPE_EOD and is distinct from null (arithmetic and most operators turn
 * both into null; document expressions drop missing fields; array expressions
 * turn them into null). User variables ($let, $map/$filter "as", $reduce's
 * $$value/$$this) live on a linked stack of borrowed values in the evaluation
 * context, innermost first. Comparisons use mf_value_cmp's canonical order,
 * with missing ordering below null as in MongoDB.
 *
 * Numbers. Integer arithmetic is exact in int64 with overflow detection:
 * int32 results that overflow become int64, int64 results that overflow
 * become double. Decimal128 sums, differences, products, quotients, $abs,
 * $round and $trunc are exact decimal arithmetic (doc/dec128.h: a double
 * operand is first rounded to 15 digits, as MongoDB's coerceToDecimal); the
 * transcendental functions ($sqrt, $exp, $ln, $pow ...) and $mod of a
 * decimal are still computed in double and converted back.
 *
 * Dates. Date operators break a date down in a time zone (doc/tz.h: an
 * Olson name read from the system tz database, or a fixed offset) into local
 * parts over an int64 proleptic Gregorian calendar, and build dates back
 * from local parts (out-of-range parts carry, as MongoDB's timelib does).
 * A constant timezone argument is opened once, at parse time, and kept in the
 * node (e->tz); one computed per document is opened for that evaluation.
 * Their argument order, null handling and error codes follow MongoDB 8.0.
 *
 * Ambient variables. $lookup's "let" variables are defined outside any
 * expression: the caller installs a thread-local chain of mf_expr_vars_t
 * frames (see expr.h). Parsing consults it after the parse-time scope stack,
 * so "$$name" of an ambient variable parses as an ordinary user variable;
 * evaluation consults it after the binding stack. Because the chain is
 * thread-local, the matcher's $expr and projections see the variables without
 * any change to their interfaces.
 *
 * Invariant: every value produced by ev() is owned by its caller and must be
 * released with mf_value_free() (bson_value_destroy, which is a no-op for EOD).
 */
#include "doc/expr.h"
#include "common/fmt.h"
#include "doc/dec128.h"
#include "doc/hash.h"
#include "doc/sum.h"
#include "doc/match.h"
#include "common/curop.h"
#include "common/limits.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <openssl/evp.h>
#include <pcre2.h>
#include "doc/rx.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doc/path.h"
#include "doc/sort.h"
#include "doc/tz.h"
#include "doc/value.h"

/* ------------------------------------------------------------------------ */
/* Node layout                                                              */
/* ------------------------------------------------------------------------ */

enum kind { K_LIT, K_FIELD, K_VAR, K_OBJ, K_ARR, K_OP };

enum var_id { VAR_ROOT = 1, VAR_CURRENT, VAR_NOW, VAR_REMOVE, VAR_USER };

enum op_id {
    OP_EQ = 1, OP_NE, OP_GT, OP_GTE, OP_LT, OP_LTE, OP_CMP,
    OP_AND, OP_OR, OP_NOT, OP_COND, OP_IFNULL, OP_SWITCH,
    OP_ADD, OP_SUBTRACT, OP_MULTIPLY, OP_DIVIDE, OP_MOD, OP_ABS, OP_CEIL, OP_FLOOR,
    OP_ROUND, OP_TRUNC, OP_SQRT, OP_POW, OP_EXP, OP_LN, OP_LOG10, OP_LOG,
    OP_CONCAT, OP_TOLOWER, OP_TOUPPER, OP_SUBSTR, OP_SUBSTRBYTES, OP_SUBSTRCP,
    OP_STRLENCP, OP_STRLENBYTES, OP_SPLIT, OP_TRIM, OP_LTRIM, OP_RTRIM, OP_INDEXOFCP,
    OP_INDEXOFBYTES, OP_INDEXOFARRAY, OP_STRCASECMP,
    OP_SIZE, OP_ARRAYELEMAT, OP_FIRST, OP_LAST, OP_IN, OP_CONCATARRAYS, OP_SLICE,
    OP_ISARRAY, OP_REVERSEARRAY, OP_RANGE, OP_FILTER, OP_MAP, OP_REDUCE,
    OP_SUM, OP_AVG, OP_MIN, OP_MAX, OP_STDDEVPOP, OP_STDDEVSAMP,
    OP_TYPE, OP_TOSTRING, OP_TOINT, OP_TOLONG, OP_TODOUBLE, OP_TODECIMAL, OP_TOBOOL,
    OP_TODATE, OP_TOOBJECTID, OP_CONVERT, OP_ISNUMBER,
    OP_YEAR, OP_MONTH, OP_DAYOFMONTH, OP_HOUR, OP_MINUTE, OP_SECOND, OP_MILLISECOND,
    OP_DAYOFWEEK, OP_DAYOFYEAR, OP_WEEK, OP_ISOWEEK, OP_ISOWEEKYEAR, OP_ISODAYOFWEEK,
    OP_DATEFROMPARTS, OP_DATETOPARTS, OP_DATEFROMSTRING, OP_DATETOSTRING, OP_DATETRUNC, OP_DATEADD, OP_DATESUBTRACT, OP_DATEDIFF,
    OP_MERGEOBJECTS, OP_OBJECTTOARRAY, OP_ARRAYTOOBJECT,
    OP_SETUNION, OP_SETINTERSECTION, OP_SETDIFFERENCE, OP_SETISSUBSET, OP_SETEQUALS,
    OP_ANYELEMENTTRUE, OP_ALLELEMENTSTRUE, OP_GETFIELD, OP_SETFIELD, OP_UNSETFIELD, OP_SORTARRAY, OP_ZIP, OP_BITAND, OP_BITOR, OP_BITXOR, OP_BITNOT,
    OP_TSSECOND, OP_TSINCREMENT, OP_TOUUID, OP_RAND, OP_MEDIAN, OP_PERCENTILE, OP_SIGMOID, OP_REGEXMATCH, OP_REGEXFIND, OP_REGEXFINDALL,
    OP_REPLACEONE, OP_REPLACEALL, OP_LET,
    OP_SIN, OP_COS, OP_TAN, OP_ASIN, OP_ACOS, OP_ATAN, OP_ASINH, OP_ACOSH, OP_ATANH, OP_SINH, OP_COSH, OP_TANH,
    OP_ATAN2, OP_DEGREESTORADIANS, OP_RADIANSTODEGREES, OP_BSONSIZE, OP_BINARYSIZE, OP_TOHASHEDINDEXKEY, OP_FINDALLVALUES,
    OP_FIRSTN, OP_LASTN, OP_MINN, OP_MAXN,
    OP_LITERAL,
    OP_META, /* {$meta: "textScore"}: the hidden score field of a $text pipeline's document (doc/text.h) */
};

/* How an operator's arguments are written. */
enum argform { A_POS, A_COND, A_SWITCH, A_MAP, A_FILTER, A_REDUCE, A_LET, A_CONVERT, A_TRIM,
               A_DATETOSTRING, A_REGEX, A_GETFIELD, A_DATEPART, A_LITERAL, A_DATEARITH,
               A_DATEFROMPARTS, A_DATETOPARTS, A_DATEFROMSTRING, A_REPLACE,
               A_SETFIELD, A_SORTARRAY, A_ZIP, A_RAND, A_QUANTILE, A_SIGMOID, A_META, A_NACC };

typedef struct op_def {
    const char *name;
    int id;
    int form;
    int min, max; /* positional argument counts; max -1 = unbounded */
} op_def_t;

static const op_def_t OPS[] = {
    {"$eq", OP_EQ, A_POS, 2, 2}, {"$ne", OP_NE, A_POS, 2, 2}, {"$gt", OP_GT, A_POS, 2, 2},
    {"$gte", OP_GTE, A_POS, 2, 2}, {"$lt", OP_LT, A_POS, 2, 2}, {"$lte", OP_LTE, A_POS, 2, 2},
    {"$cmp", OP_CMP, A_POS, 2, 2}, {"$and", OP_AND, A_POS, 0, -1}, {"$or", OP_OR, A_POS, 0, -1},
    {"$not", OP_NOT, A_POS, 1, 1}, {"$cond", OP_COND, A_COND, 3, 3},
    {"$ifNull", OP_IFNULL, A_POS, 2, -1}, {"$switch", OP_SWITCH, A_SWITCH, 0, 0},
    {"$add", OP_ADD, A_POS, 0, -1}, {"$subtract", OP_SUBTRACT, A_POS, 2, 2},
    {"$multiply", OP_MULTIPLY, A_POS, 0, -1}, {"$divide", OP_DIVIDE, A_POS, 2, 2},
    {"$mod", OP_MOD, A_POS, 2, 2}, {"$abs", OP_ABS, A_POS, 1, 1}, {"$ceil", OP_CEIL, A_POS, 1, 1},
    {"$floor", OP_FLOOR, A_POS, 1, 1}, {"$round", OP_ROUND, A_POS, 1, 2},
    {"$trunc", OP_TRUNC, A_POS, 1, 2}, {"$sqrt", OP_SQRT, A_POS, 1, 1}, {"$pow", OP_POW, A_POS, 2, 2},
    {"$exp", OP_EXP, A_POS, 1, 1}, {"$ln", OP_LN, A_POS, 1, 1}, {"$log10", OP_LOG10, A_POS, 1, 1},
    {"$log", OP_LOG, A_POS, 2, 2},
    {"$concat", OP_CONCAT, A_POS, 0, -1}, {"$toLower", OP_TOLOWER, A_POS, 1, 1},
    {"$toUpper", OP_TOUPPER, A_POS, 1, 1}, {"$substr", OP_SUBSTR, A_POS, 3, 3},
    {"$substrBytes", OP_SUBSTRBYTES, A_POS, 3, 3}, {"$substrCP", OP_SUBSTRCP, A_POS, 3, 3},
    {"$strLenCP", OP_STRLENCP, A_POS, 1, 1}, {"$strLenBytes", OP_STRLENBYTES, A_POS, 1, 1},
    {"$split", OP_SPLIT, A_POS, 2, 2}, {"$trim", OP_TRIM, A_TRIM, 0, 0},
    {"$ltrim", OP_LTRIM, A_TRIM, 0, 0}, {"$rtrim", OP_RTRIM, A_TRIM, 0, 0},
    {"$indexOfCP", OP_INDEXOFCP, A_POS, 2, 4}, {"$indexOfBytes", OP_INDEXOFBYTES, A_POS, 2, 4}, {"$indexOfArray", OP_INDEXOFARRAY, A_POS, 2, 4},
    {"$strcasecmp", OP_STRCASECMP, A_POS, 2, 2},
    {"$size", OP_SIZE, A_POS, 1, 1}, {"$arrayElemAt", OP_ARRAYELEMAT, A_POS, 2, 2},
    {"$first", OP_FIRST, A_POS, 1, 1}, {"$last", OP_LAST, A_POS, 1, 1}, {"$in", OP_IN, A_POS, 2, 2},
    {"$concatArrays", OP_CONCATARRAYS, A_POS, 0, -1}, {"$slice", OP_SLICE, A_POS, 2, 3},
    {"$isArray", OP_ISARRAY, A_POS, 1, 1}, {"$reverseArray", OP_REVERSEARRAY, A_POS, 1, 1},
    {"$range", OP_RANGE, A_POS, 2, 3}, {"$filter", OP_FILTER, A_FILTER, 0, 0},
    {"$map", OP_MAP, A_MAP, 0, 0}, {"$reduce", OP_REDUCE, A_REDUCE, 0, 0},
    {"$sum", OP_SUM, A_POS, 0, -1}, {"$avg", OP_AVG, A_POS, 0, -1}, {"$min", OP_MIN, A_POS, 0, -1},
    {"$max", OP_MAX, A_POS, 0, -1}, {"$stdDevPop", OP_STDDEVPOP, A_POS, 0, -1},
    {"$stdDevSamp", OP_STDDEVSAMP, A_POS, 0, -1}, {"$type", OP_TYPE, A_POS, 1, 1},
    {"$toString", OP_TOSTRING, A_POS, 1, 1}, {"$toInt", OP_TOINT, A_POS, 1, 1},
    {"$toLong", OP_TOLONG, A_POS, 1, 1}, {"$toDouble", OP_TODOUBLE, A_POS, 1, 1},
    {"$toDecimal", OP_TODECIMAL, A_POS, 1, 1}, {"$toBool", OP_TOBOOL, A_POS, 1, 1},
    {"$toDate", OP_TODATE, A_POS, 1, 1}, {"$toObjectId", OP_TOOBJECTID, A_POS, 1, 1},
    {"$convert", OP_CONVERT, A_CONVERT, 0, 0}, {"$isNumber", OP_ISNUMBER, A_POS, 1, 1},
    {"$year", OP_YEAR, A_DATEPART, 1, 1}, {"$month", OP_MONTH, A_DATEPART, 1, 1},
    {"$dayOfMonth", OP_DAYOFMONTH, A_DATEPART, 1, 1}, {"$hour", OP_HOUR, A_DATEPART, 1, 1},
    {"$minute", OP_MINUTE, A_DATEPART, 1, 1}, {"$second", OP_SECOND, A_DATEPART, 1, 1},
    {"$millisecond", OP_MILLISECOND, A_DATEPART, 1, 1},
    {"$dayOfWeek", OP_DAYOFWEEK, A_DATEPART, 1, 1}, {"$dayOfYear", OP_DAYOFYEAR, A_DATEPART, 1, 1},
    {"$week", OP_WEEK, A_DATEPART, 1, 1}, {"$isoWeek", OP_ISOWEEK, A_DATEPART, 1, 1},
    {"$isoWeekYear", OP_ISOWEEKYEAR, A_DATEPART, 1, 1}, {"$isoDayOfWeek", OP_ISODAYOFWEEK, A_DATEPART, 1, 1},
    {"$dateFromParts", OP_DATEFROMPARTS, A_DATEFROMPARTS, 0, 0},
    {"$dateToParts", OP_DATETOPARTS, A_DATETOPARTS, 0, 0},
    {"$dateFromString", OP_DATEFROMSTRING, A_DATEFROMSTRING, 0, 0},
    {"$dateToString", OP_DATETOSTRING, A_DATETOSTRING, 0, 0},
    {"$dateTrunc", OP_DATETRUNC, A_DATEARITH, 0, 0}, {"$dateAdd", OP_DATEADD, A_DATEARITH, 0, 0},
    {"$dateSubtract", OP_DATESUBTRACT, A_DATEARITH, 0, 0}, {"$dateDiff", OP_DATEDIFF, A_DATEARITH, 0, 0},
    {"$mergeObjects", OP_MERGEOBJECTS, A_POS, 0, -1},
    {"$objectToArray", OP_OBJECTTOARRAY, A_POS, 1, 1},
    {"$arrayToObject", OP_ARRAYTOOBJECT, A_POS, 1, 1},
    {"$setUnion", OP_SETUNION, A_POS, 0, -1}, {"$setIntersection", OP_SETINTERSECTION, A_POS, 0, -1},
    {"$setDifference", OP_SETDIFFERENCE, A_POS, 2, 2}, {"$setIsSubset", OP_SETISSUBSET, A_POS, 2, 2},
    {"$setEquals", OP_SETEQUALS, A_POS, 2, -1},
    {"$anyElementTrue", OP_ANYELEMENTTRUE, A_POS, 1, 1},
    {"$allElementsTrue", OP_ALLELEMENTSTRUE, A_POS, 1, 1},
    {"$getField", OP_GETFIELD, A_GETFIELD, 0, 0}, {"$setField", OP_SETFIELD, A_SETFIELD, 0, 0},
    {"$unsetField", OP_UNSETFIELD, A_SETFIELD, 0, 0}, {"$sortArray", OP_SORTARRAY, A_SORTARRAY, 0, 0},
    {"$zip", OP_ZIP, A_ZIP, 0, 0},
    {"$bitAnd", OP_BITAND, A_POS, 0, -1}, {"$bitOr", OP_BITOR, A_POS, 0, -1}, {"$bitXor", OP_BITXOR, A_POS, 0, -1},
    {"$bitNot", OP_BITNOT, A_POS, 1, 1}, {"$tsSecond", OP_TSSECOND, A_POS, 1, 1},
    {"$tsIncrement", OP_TSINCREMENT, A_POS, 1, 1}, {"$toUUID", OP_TOUUID, A_POS, 1, 1},
    {"$rand", OP_RAND, A_RAND, 0, 0}, {"$meta", OP_META, A_META, 0, 0}, {"$median", OP_MEDIAN, A_QUANTILE, 0, 0},
    {"$percentile", OP_PERCENTILE, A_QUANTILE, 0, 0}, {"$sigmoid", OP_SIGMOID, A_SIGMOID, 0, 0}, {"$regexMatch", OP_REGEXMATCH, A_REGEX, 0, 0},
    {"$regexFind", OP_REGEXFIND, A_REGEX, 0, 0}, {"$regexFindAll", OP_REGEXFINDALL, A_REGEX, 0, 0},
    {"$replaceOne", OP_REPLACEONE, A_REPLACE, 0, 0}, {"$replaceAll", OP_REPLACEALL, A_REPLACE, 0, 0},
    {"$sin", OP_SIN, A_POS, 1, 1}, {"$cos", OP_COS, A_POS, 1, 1}, {"$tan", OP_TAN, A_POS, 1, 1},
    {"$asin", OP_ASIN, A_POS, 1, 1}, {"$acos", OP_ACOS, A_POS, 1, 1}, {"$atan", OP_ATAN, A_POS, 1, 1},
    {"$asinh", OP_ASINH, A_POS, 1, 1}, {"$acosh", OP_ACOSH, A_POS, 1, 1}, {"$atanh", OP_ATANH, A_POS, 1, 1},
    {"$sinh", OP_SINH, A_POS, 1, 1}, {"$cosh", OP_COSH, A_POS, 1, 1}, {"$tanh", OP_TANH, A_POS, 1, 1},
    {"$atan2", OP_ATAN2, A_POS, 2, 2}, {"$degreesToRadians", OP_DEGREESTORADIANS, A_POS, 1, 1},
    {"$radiansToDegrees", OP_RADIANSTODEGREES, A_POS, 1, 1}, {"$bsonSize", OP_BSONSIZE, A_POS, 1, 1},
    {"$toHashedIndexKey", OP_TOHASHEDINDEXKEY, A_POS, 1, 1},
    {"$_internalFindAllValuesAtPath", OP_FINDALLVALUES, A_POS, 1, 1},
    {"$binarySize", OP_BINARYSIZE, A_POS, 1, 1},
    {"$firstN", OP_FIRSTN, A_NACC, 0, 0}, {"$lastN", OP_LASTN, A_NACC, 0, 0},
    {"$minN", OP_MINN, A_NACC, 0, 0}, {"$maxN", OP_MAXN, A_NACC, 0, 0},
    {"$let", OP_LET, A_LET, 0, 0}, {"$literal", OP_LITERAL, A_LITERAL, 0, 0}, {"$const", OP_LITERAL, A_LITERAL, 0, 0},
    {NULL, 0, 0, 0, 0},
};

struct mf_expr {
    int kind;
    bson_value_t lit;   /* K_LIT: owned */
    char **path;        /* K_FIELD, K_VAR: components after the root/variable (owned) */
    size_t npath;
    int var;            /* K_VAR: enum var_id */
    char *name;         /* K_VAR user variable name; $map/$filter "as" (owned) */
    const op_def_t *op; /* K_OP */
    mf_expr_t **args;   /* K_OP slots (may hold NULL), K_ARR elements, K_OBJ values */
    size_t nargs;
    char **keys;        /* K_OBJ field names; $let variable names (owned) */
    size_t nkeys;
    mf_tz_t *tz;        /* K_OP with a constant timezone argument: the zone, opened at parse (owned) */
    mf_sort_t *sort;    /* $sortArray by a document pattern (owned) */
    size_t ninputs;     /* $zip: args[0..ninputs) are the inputs, the rest the defaults */
    bool flag;          /* $zip useLongestLength; $sortArray descending whole values */
    int meta;           /* $meta: which metadata it reads (META_*) */
    double *ps;         /* $percentile: the p values (owned) */
    pcre2_code *re;     /* $regex*: the regex, compiled at parse when regex and options are constants (owned;
                           matching only reads it) */
    size_t nps;
    bool folds;         /* K_OP whose operands are all constants: mongod folds it to a constant when it optimizes */
};

/* A parse-time scope of user variable names. */
typedef struct scope {
    const char *name;
    const struct scope *up;
} scope_t;

/* Evaluation-time variable binding (value borrowed). */
typedef struct binding {
    const char *name;
    const bson_value_t *val;
    const struct binding *up;
} binding_t;

typedef struct ctx {
    const bson_t *root;
    bson_value_t rootv; /* borrowed view of root as a document value */
    int64_t now; /* $$NOW, read when first needed (0: not yet) */
    const binding_t *vars;
    mf_error_t *err;
} ctx_t;

/* What a {$meta: ...} reads (mf_expr_t.meta). */
enum { META_TEXT_SCORE, META_SORT_KEY, META_MISSING, META_GEO_DIST, META_GEO_POINT };

/*
 * The $sort whose key this thread's {$meta: "sortKey"} shows, or NULL (see
 * mf_expr_sort_key_source_set). Thread-local like the ambient variables: a
 * pipeline stage sets it around its own evaluation.
 */
static _Thread_local const mf_sort_t *sort_key_source;

const mf_sort_t *
mf_expr_sort_key_source_set(const mf_sort_t *s)
{
    const mf_sort_t *prev = sort_key_source;
    sort_key_source = s;
    return prev;
}

/* This thread's innermost ambient variable frame ($lookup let), or NULL. */
static _Thread_local const mf_expr_vars_t *ambient_vars;

/* mf_expr_parsing_validator's setting for the calling thread. */
static _Thread_local bool parsing_validator;

bool
mf_expr_parsing_validator(bool on)
{
    bool was = parsing_validator;
    parsing_validator = on;
    return was;
}

bool
mf_expr_in_validator(void)
{
    return parsing_validator;
}

const mf_expr_vars_t *
mf_expr_vars_current(void)
{
    return ambient_vars;
}

void
mf_expr_vars_set(const mf_expr_vars_t *frame)
{
    ambient_vars = frame;
}

/* ambient_find: the frame and index defining the ambient variable name[0..nl), or NULL. */
static const mf_expr_vars_t *
ambient_find(const char *name, size_t nl, size_t *idx)
{
    for (const mf_expr_vars_t *f = ambient_vars; f; f = f->up)
        for (size_t i = 0; i < f->n; i++)
            if (strlen(f->names[i]) == nl && memcmp(f->names[i], name, nl) == 0) {
                *idx = i;
                return f;
            }
    return NULL;
}

static int
check_var_name(const char *name, bool read, mf_error_t *err)
{
    const unsigned char *s = (const unsigned char *)name;

    if (s == NULL || s[0] == '\0')
        return mf_err_set(err, MF_E_Location16866, "empty variable names are not allowed");
    if (!(islower(s[0]) || s[0] >= 0x80 || (read && isupper(s[0]))))
        return mf_err_set(err, MF_E_Location16867, "'%s' starts with an invalid character for a user variable name",
                          name);
    for (size_t i = 1; s[i]; i++)
        if (!(isalnum(s[i]) || s[i] == '_' || s[i] >= 0x80))
            return mf_err_set(err, MF_E_Location16868, "'%s' contains an invalid character for a user variable name",
                              name);
    return 0;
}

int
mf_expr_check_var_name(const char *name, mf_error_t *err)
{
    return check_var_name(name, false, err);
}

int
mf_expr_check_var_name_read(const char *name, mf_error_t *err)
{
    return check_var_name(name, true, err);
}

/*
 * var_name_ok: mongod's variableValidation (FailedToParse): a name bound by $let/$map/$filter ("write") starts with
 * a lowercase ASCII letter or a non-ASCII byte; a name read through "$$" may also start with an uppercase one; the
 * rest are letters, digits, '_' or non-ASCII. len is the name's length (it need not be NUL-terminated).
 */
static int
var_name_ok(const char *name, size_t len, bool read, mf_error_t *err)
{
    const unsigned char *s = (const unsigned char *)name;

    if (len == 0)
        return mf_err_set(err, MF_E_FailedToParse, "empty variable names are not allowed");
    if (!read && len == 7 && memcmp(name, "CURRENT", 7) == 0)
        return 0; /* the one system variable a user may rebind */
    if (!(islower(s[0]) || s[0] >= 0x80 || (read && isupper(s[0]))))
        return mf_err_set(err, MF_E_FailedToParse, "'%.*s' starts with an invalid character for a user variable name",
                          (int)len, name);
    for (size_t i = 1; i < len; i++)
        if (!(isalnum(s[i]) || s[i] == '_' || s[i] >= 0x80))
            return mf_err_set(err, MF_E_FailedToParse, "'%.*s' contains an invalid character for a variable name: '%c'",
                              (int)len, name, s[i]);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Value helpers                                                            */
/* ------------------------------------------------------------------------ */

/* The setters (mf_value_set_*, mf_value_take_bson) are value.h's, shared with agg.c and agg_window.c. */

static const char *
tname(const bson_value_t *v)
{
    return mf_type_name(v->value_type); /* "missing" for EOD */
}

static double
as_dbl(const bson_value_t *v)
{
    return mf_value_as_double(v);
}

/* Borrowed view of an array's elements. */
typedef struct elems {
    bson_value_t *v;
    size_t n;
} elems_t;

static void
elems_of(const bson_value_t *arr, elems_t *e)
{
    bson_iter_t it;
    size_t cap = 8;

    e->n = 0;
    e->v = bson_malloc(cap * sizeof *e->v);
    if (!bson_iter_init_from_data(&it, arr->value.v_doc.data, arr->value.v_doc.data_len))
        return;
    while (bson_iter_next(&it)) {
        if (e->n == cap) {
            cap *= 2;
            e->v = bson_realloc(e->v, cap * sizeof *e->v);
        }
        e->v[e->n++] = *bson_iter_value(&it);
    }
}

static void
elems_free(elems_t *e)
{
    bson_free(e->v);
    e->v = NULL;
    e->n = 0;
}

/* cmpv: mf_value_cmp extended with "missing", which sorts below null (like undefined). */
static int
cmpv(const bson_value_t *a, const bson_value_t *b)
{
    bool ma = a->value_type == BSON_TYPE_EOD, mb = b->value_type == BSON_TYPE_EOD;

    if (ma || mb) {
        if (ma && mb)
            return 0;
        if (ma)
            return b->value_type == BSON_TYPE_MINKEY ? 1 : (b->value_type == BSON_TYPE_UNDEFINED ? 0 : -1);
        return a->value_type == BSON_TYPE_MINKEY ? -1 : (a->value_type == BSON_TYPE_UNDEFINED ? 0 : 1);
    }
    return mf_value_cmp(a, b);
}

static bool
truthy(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_EOD)
        return false;
    return mf_value_truthy(v);
}

/* ------------------------------------------------------------------------ */
/* Numbers                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * num_sign: -1, 0 or 1 for a number's sign, 2 for NaN; a decimal compared
 * as a decimal (1E-400 is not zero, as it is as a double), as mongod's
 * Decimal128 checks do.
 */
static int
num_sign(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_DECIMAL128) {
        bson_decimal128_t zero;
        if (mf_dec_is_nan(&v->value.v_decimal128))
            return 2;
        mf_dec_from_int64(0, &zero);
        return mf_dec_cmp(&v->value.v_decimal128, &zero);
    }
    double d = as_dbl(v);
    return isnan(d) ? 2 : d < 0 ? -1 : d > 0 ? 1 : 0;
}

/*
 * dec_binary: o = fn(a, b) in decimal, for the operators mongod computes in
 * Decimal128 when either operand is one ($mod, $pow, $log, $atan2): each
 * operand coerced as coerceToDecimal does (a double to 15 digits).
 */
static void
dec_binary(void (*fn)(const bson_decimal128_t *, const bson_decimal128_t *, bson_decimal128_t *),
           const bson_value_t *a, const bson_value_t *b, bson_value_t *o)
{
    bson_decimal128_t da, db;
    (void)mf_dec_from_value(a, 15, &da);
    (void)mf_dec_from_value(b, 15, &db);
    mf_value_set_type(o, BSON_TYPE_DECIMAL128);
    fn(&da, &db, &o->value.v_decimal128);
}

/* log_base_is_one: whether $log's base is 1, compared in decimal when either operand is one (as mongod). */
static bool
log_base_is_one(const bson_value_t *x, const bson_value_t *base)
{
    if (x->value_type != BSON_TYPE_DECIMAL128 && base->value_type != BSON_TYPE_DECIMAL128)
        return as_dbl(base) == 1;
    bson_decimal128_t b, one;
    (void)mf_dec_from_value(base, 15, &b);
    mf_dec_from_int64(1, &one);
    return mf_dec_cmp(&b, &one) == 0;
}

/* num_rank: 0 int32, 1 int64, 2 double, 3 decimal. */
static int
num_rank(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        return 0;
    case BSON_TYPE_INT64:
        return 1;
    case BSON_TYPE_DOUBLE:
        return 2;
    default:
        return 3;
    }
}

static int64_t
as_i64(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
}

/*
 * A running sum/product with MongoDB's type promotion. From the first
 * decimal operand on, the total is a decimal (dec, exact): the total so far
 * converts exactly when it is an integer, else as a double rounded to
 * dbl_digits (15 for $add and $multiply, Decimal128(double); 34 for the $sum
 * accumulator, DoubleDoubleSummation::getDecimal), and d follows it.
 */
typedef struct num {
    int rank; /* widest type seen: 0 int32, 1 int64, 2 double, 3 decimal */
    bool overflowed; /* integer result no longer exact: computing in double */
    int64_t l;
    double d;
    bson_decimal128_t dec; /* rank 3: the total */
    int dbl_digits;
} num_t;

static void
num_init(num_t *n, int64_t start)
{
    n->rank = 0;
    n->overflowed = false;
    n->l = start;
    n->d = (double)start;
    n->dbl_digits = 15;
}

/* num_dec_step: the decimal part of num_add / num_mul (v or the total is a decimal). */
static void
num_dec_step(num_t *n, mf_dec_op_t op, const bson_value_t *v)
{
    bson_decimal128_t x;
    if (n->rank < 3) {
        if (n->rank <= 1 && !n->overflowed)
            mf_dec_from_int64(n->l, &n->dec);
        else
            mf_dec_from_double(n->d, n->dbl_digits, &n->dec);
        n->rank = 3;
    }
    (void)mf_dec_from_value(v, 15, &x);
    mf_dec_arith(op, &n->dec, &x, &n->dec);
    n->d = mf_dec_to_double(&n->dec);
    n->overflowed = true;
}

static void
num_add(num_t *n, const bson_value_t *v)
{
    int r = num_rank(v);

    if (r == 3 || n->rank == 3) {
        num_dec_step(n, MF_DEC_ADD, v);
        return;
    }
    if (r > n->rank)
        n->rank = r;
    if (n->rank <= 1 && !n->overflowed) {
        int64_t x = as_i64(v), s;
        if (__builtin_add_overflow(n->l, x, &s)) {
            n->overflowed = true;
            n->d = (double)n->l + (double)x;
        } else {
            n->l = s;
            n->d = (double)s;
        }
        return;
    }
    if (!n->overflowed && n->rank >= 2 && r >= 2 && n->d == (double)n->l) {
        /* First non-integer operand: n->d already mirrors n->l. */
    }
    n->overflowed = true;
    n->d += as_dbl(v);
}

static void
num_mul(num_t *n, const bson_value_t *v)
{
    int r = num_rank(v);

    if (r == 3 || n->rank == 3) {
        num_dec_step(n, MF_DEC_MUL, v);
        return;
    }
    if (r > n->rank)
        n->rank = r;
    if (n->rank <= 1 && !n->overflowed) {
        int64_t x = as_i64(v), s;
        if (__builtin_mul_overflow(n->l, x, &s)) {
            n->overflowed = true;
            n->d = (double)n->l * (double)x;
        } else {
            n->l = s;
            n->d = (double)s;
        }
        return;
    }
    n->overflowed = true;
    n->d *= as_dbl(v);
}

static void
num_result(const num_t *n, bson_value_t *o)
{
    if (n->rank == 3) {
        mf_value_set_type(o, BSON_TYPE_DECIMAL128);
        o->value.v_decimal128 = n->dec;
    } else if (n->rank == 2 || n->overflowed) {
        mf_value_set_double(o, n->d);
    } else if (n->rank == 0 && n->l >= INT32_MIN && n->l <= INT32_MAX) {
        mf_value_set_int32(o, (int32_t)n->l);
    } else {
        mf_value_set_int64(o, n->l);
    }
}

void
mf_expr_num_add(bson_value_t *acc, const bson_value_t *v)
{
    num_t n;

    num_init(&n, 0);
    n.dbl_digits = 34; /* an accumulator's double total becomes a decimal at 34 digits */
    if (acc->value_type == BSON_TYPE_DECIMAL128) {
        n.rank = 3;
        n.dec = acc->value.v_decimal128;
    } else if (acc->value_type != BSON_TYPE_EOD && mf_value_is_number(acc)) {
        num_add(&n, acc);
    }
    if (mf_value_is_number(v))
        num_add(&n, v);
    mf_value_free(acc);
    num_result(&n, acc);
}

/* ------------------------------------------------------------------------ */
/* Strings                                                                  */
/* ------------------------------------------------------------------------ */

/* fmt_double: the shortest decimal form that reads back as x. */
static void
fmt_double(double x, char *buf, size_t n)
{
    if (isnan(x)) {
        snprintf(buf, n, "NaN");
        return;
    }
    if (isinf(x)) {
        snprintf(buf, n, x > 0 ? "Infinity" : "-Infinity");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

static int64_t
floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

/* date_tm: breaks ms since the epoch (shifted by tz minutes) into tm + milliseconds. */
static void
date_tm(int64_t ms, int tzmin, struct tm *tm, int *millis)
{
    __int128 shifted = (__int128)ms + (__int128)tzmin * 60000; /* near INT64_MIN neither sum nor product fits */
    __int128 secs = shifted >= 0 ? shifted / 1000 : -((-shifted + 999) / 1000);
    time_t t = (time_t)secs;

    *millis = (int)(shifted - secs * 1000);
    memset(tm, 0, sizeof *tm);
    gmtime_r(&t, tm);
}

static void
fmt_date(int64_t ms, char *buf, size_t n)
{
    struct tm tm;
    int millis;

    date_tm(ms, 0, &tm, &millis);
    snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
}

/*
 * to_string: MongoDB's coerceToString for $concat-like string operators and
 * $toString. Fills an owned string into o; returns false for types with no
 * string form.
 */
static bool
to_string(const bson_value_t *v, bson_value_t *o)
{
    char buf[64];

    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        mf_value_set_strn(o, v->value.v_utf8.str, v->value.v_utf8.len);
        return true;
    case BSON_TYPE_SYMBOL:
        mf_value_set_strn(o, v->value.v_symbol.symbol, v->value.v_symbol.len);
        return true;
    case BSON_TYPE_INT32:
        snprintf(buf, sizeof buf, "%" PRId32, v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        snprintf(buf, sizeof buf, "%" PRId64, v->value.v_int64);
        break;
    case BSON_TYPE_DOUBLE:
        fmt_double(v->value.v_double, buf, sizeof buf);
        break;
    case BSON_TYPE_DECIMAL128:
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
        break;
    case BSON_TYPE_BOOL:
        snprintf(buf, sizeof buf, "%s", v->value.v_bool ? "true" : "false");
        break;
    case BSON_TYPE_DATE_TIME:
        fmt_date(v->value.v_datetime, buf, sizeof buf);
        break;
    case BSON_TYPE_OID:
        bson_oid_to_string(&v->value.v_oid, buf);
        break;
    case BSON_TYPE_TIMESTAMP: {
        /* MongoDB renders a timestamp as its date. */
        fmt_date((int64_t)v->value.v_timestamp.timestamp * 1000, buf, sizeof buf);
        break;
    }
    default:
        return false;
    }
    mf_value_set_str(o, buf);
    return true;
}

/* value_str: a short rendering of v for error messages. */
static void
value_str(const bson_value_t *v, char *buf, size_t n)
{
    bson_value_t s;
    if (v->value_type == BSON_TYPE_UTF8) {
        snprintf(buf, n, "\"%s\"", v->value.v_utf8.str);
    } else if (v->value_type == BSON_TYPE_DOUBLE) {
        /* mongod streams a double with the stream defaults: 6 significant digits, "inf", "nan". */
        double d = v->value.v_double;
        snprintf(buf, n, isnan(d) ? "nan" : isinf(d) ? (d > 0 ? "inf" : "-inf") : "%g", d);
    } else if (to_string(v, &s)) {
        snprintf(buf, n, "%s", s.value.v_utf8.str);
        mf_value_free(&s);
    } else {
        snprintf(buf, n, "%s", tname(v));
    }
}

/* integral64: MongoDB's Value::integral64Bit: an integer, or a double/decimal with an integral value in int64 range. */
static bool
integral64(const bson_value_t *v, int64_t *out)
{
    double d;
    switch (v->value_type) {
    case BSON_TYPE_INT32: *out = v->value.v_int32; return true;
    case BSON_TYPE_INT64: *out = v->value.v_int64; return true;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        d = as_dbl(v);
        if (!isfinite(d) || d != floor(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0)
            return false;
        *out = (int64_t)d;
        return true;
    default:
        return false;
    }
}

/*
 * date_str_range: mongod renders a date as a string through insertPadded,
 * which refuses a year outside 0-9999 with 18537; context prefixes the
 * message (coerceToString adds "failed while coercing date to string").
 */
static int
date_str_range(ctx_t *c, const bson_value_t *v, const char *context)
{
    int64_t y, m, d;

    if (v->value_type != BSON_TYPE_DATE_TIME)
        return 0;
    mf_civil_from_days(floordiv(v->value.v_datetime, 86400000), &y, &m, &d);
    if (y >= 0 && y <= 9999)
        return 0;
    return mf_err_set(c->err, MF_E_Location18537,
                      "%sCould not convert date to string: date component was outside the supported range of "
                      "0-9999: %" PRId64,
                      context, y);
}

/* coerce_str: $toLower/$substr argument rule: nullish → "", else to_string or 16007. */
static int
coerce_str(ctx_t *c, const bson_value_t *v, bson_value_t *o)
{
    if (mf_value_is_nullish(v)) {
        mf_value_set_str(o, "");
        return 0;
    }
    if (date_str_range(c, v, "failed while coercing date to string :: caused by :: ") < 0)
        return -1;
    if (v->value_type == BSON_TYPE_DOUBLE) {
        /* Value::coerceToString streams a double: printf's %g, 6 significant digits ($toString does not). */
        char buf[40];
        double d = v->value.v_double;
        snprintf(buf, sizeof buf, isnan(d) ? "nan" : isinf(d) ? (d > 0 ? "inf" : "-inf") : "%g", d);
        mf_value_set_str(o, buf);
        return 0;
    }
    if (!to_string(v, o))
        return mf_err_set(c->err, MF_E_Location16007, "can't convert from BSON type %s to String",
                          tname(v));
    return 0;
}

/* utf8 code point length of the lead byte c. */
static int
u8len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        return 2;
    if ((c & 0xF0) == 0xE0)
        return 3;
    if ((c & 0xF8) == 0xF0)
        return 4;
    return 1;
}

static size_t
cp_count(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i += (size_t)u8len((unsigned char)s[i]))
        k++;
    return k;
}

/* cp_offset: byte offset of code point number cp in s (n bytes); n if past the end. */
static size_t
cp_offset(const char *s, size_t n, size_t cp)
{
    size_t i = 0;
    while (cp > 0 && i < n) {
        i += (size_t)u8len((unsigned char)s[i]);
        cp--;
    }
    return i > n ? n : i;
}

/* decode one code point at s (n bytes available). */
static uint32_t
u8decode(const char *s, size_t n, int *len)
{
    unsigned char c = (unsigned char)s[0];
    int l = u8len(c);
    uint32_t cp;

    if ((size_t)l > n)
        l = 1;
    *len = l;
    if (l == 1)
        return c;
    cp = c & (0xFF >> (l + 1));
    for (int i = 1; i < l; i++)
        cp = (cp << 6) | ((unsigned char)s[i] & 0x3F);
    return cp;
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */
/* ------------------------------------------------------------------------ */

static int rx_compile(const char *op, mf_error_t *err, const bson_value_t *rv, const bson_value_t *ov, pcre2_code **re);
static mf_expr_t *parse(const bson_value_t *v, const scope_t *sc, mf_error_t *err);
static bool node_is_const(const mf_expr_t *a);

/*
 * value_ostream: v appended to s as mongod's Value::toString prints it
 * (operator<< on a Value, which parseP's messages use): a string quoted,
 * a double with the stream's defaults (%g: 6 significant digits), arrays as
 * "[1, 2]", documents as "{a: 1}", a missing value as "MISSING"; types a
 * 'p' hardly holds fall back to the BSON element form.
 */
static void
value_ostream(bson_string_t *s, const bson_value_t *v)
{
    char buf[512];
    bson_iter_t it;
    bool first = true;

    switch (v->value_type) {
    case BSON_TYPE_EOD:
        bson_string_append(s, "MISSING");
        return;
    case BSON_TYPE_UTF8:
        bson_string_append_printf(s, "\"%s\"", v->value.v_utf8.str);
        return;
    case BSON_TYPE_DOUBLE:
        bson_string_append_printf(s, "%g", v->value.v_double);
        return;
    case BSON_TYPE_INT32:
        bson_string_append_printf(s, "%d", (int)v->value.v_int32);
        return;
    case BSON_TYPE_INT64:
        bson_string_append_printf(s, "%lld", (long long)v->value.v_int64);
        return;
    case BSON_TYPE_DECIMAL128:
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
        bson_string_append(s, buf);
        return;
    case BSON_TYPE_BOOL:
        bson_string_append(s, v->value.v_bool ? "true" : "false");
        return;
    case BSON_TYPE_NULL:
        bson_string_append(s, "null");
        return;
    case BSON_TYPE_UNDEFINED:
        bson_string_append(s, "undefined");
        return;
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_DOCUMENT:
        bson_string_append(s, v->value_type == BSON_TYPE_ARRAY ? "[" : "{");
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            if (!first)
                bson_string_append(s, ", ");
            first = false;
            if (v->value_type == BSON_TYPE_DOCUMENT)
                bson_string_append_printf(s, "%s: ", bson_iter_key(&it));
            value_ostream(s, bson_iter_value(&it));
        }
        bson_string_append(s, v->value_type == BSON_TYPE_ARRAY ? "]" : "}");
        return;
    default:
        mf_fmt_value(v, buf, sizeof buf);
        bson_string_append(s, buf);
        return;
    }
}

/* p_error: err set to code with "<prefix><v as Value::toString>"; returns -1. */
static int
p_error(mf_error_t *err, int code, const bson_value_t *v)
{
    bson_string_t *s = bson_string_new(NULL);
    int rc;

    value_ostream(s, v);
    rc = mf_err_set(err, code, "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: %s",
                    s->str);
    bson_string_free(s, true);
    return rc;
}

/*
 * percentile_p: $percentile's 'p' (v) read as mongod's parseP
 * (accumulator_percentile.cpp), under scope sc (NULL: a pipeline stage's),
 * for the expression, the window function and the $group accumulator
 * (mf_expr_percentile_p) alike: an expression that must fold
 * to a constant ({$literal: [0.5]} and [0.25, 0.75] do; a field path does
 * not: 7750300 naming v as a BSON element), holding a non-empty array
 * (7750301), of numbers (7750302) in [0, 1] (7750303, the number with %g, as
 * mongod's StringBuilder prints a double). An error of the expression's own
 * parse or evaluation passes through, as in mongod. A NaN is refused with
 * 7750303 where mongod lets it through to an undefined rank. On success *ps
 * (owned by the caller, bson_free) holds the *nps values. Returns 0 or -1.
 */
static int
percentile_p(const bson_value_t *v, const scope_t *sc, double **ps, size_t *nps, mf_error_t *err)
{
    mf_expr_t *e = parse(v, sc, err);
    bson_value_t c;
    bson_iter_t it;
    char buf[512];
    int rc = -1;

    *ps = NULL;
    *nps = 0;
    c.value_type = BSON_TYPE_EOD;
    if (e == NULL)
        return -1;
    if (!mf_expr_is_constant(e)) {
        mf_fmt_value(v, buf, sizeof buf);
        mf_err_set(err, MF_E_Location7750300,
                   "The $percentile 'p' field must be an array of constant values, but found value: %s.", buf);
        goto err_free_expr;
    }
    if (mf_expr_eval(e, NULL, &c, err) < 0)
        goto err_free_expr;
    if (c.value_type != BSON_TYPE_ARRAY || c.value.v_doc.data_len <= 5) {
        p_error(err, MF_E_Location7750301, &c);
        goto err_free_expr;
    }
    bson_iter_init_from_data(&it, c.value.v_doc.data, c.value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const bson_value_t *x = bson_iter_value(&it);
        if (!mf_value_is_number(x)) {
            p_error(err, MF_E_Location7750302, x);
            goto err_free_expr;
        }
        double d = mf_value_as_double(x);
        if (!(d >= 0 && d <= 1)) {
            mf_err_set(err, MF_E_Location7750303,
                       "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: %g", d);
            goto err_free_expr;
        }
        *ps = bson_realloc(*ps, (*nps + 1) * sizeof **ps);
        (*ps)[(*nps)++] = d;
    }
    rc = 0;
err_free_expr:
    if (rc < 0) {
        bson_free(*ps);
        *ps = NULL;
        *nps = 0;
    }
    mf_value_free(&c);
    mf_expr_free(e);
    return rc;
}

int
mf_expr_percentile_p(const bson_value_t *v, double **ps, size_t *nps, mf_error_t *err)
{
    return percentile_p(v, NULL, ps, nps, err);
}

static mf_expr_t *
node_new(int kind)
{
    mf_expr_t *e = bson_malloc0(sizeof *e);
    e->kind = kind;
    mf_value_set_missing(&e->lit);
    return e;
}

void
mf_expr_free(mf_expr_t *e)
{
    if (e == NULL)
        return;
    mf_value_free(&e->lit);
    for (size_t i = 0; i < e->npath; i++)
        bson_free(e->path[i]);
    bson_free(e->path);
    bson_free(e->name);
    for (size_t i = 0; i < e->nargs; i++)
        mf_expr_free(e->args[i]);
    bson_free(e->args);
    for (size_t i = 0; i < e->nkeys; i++)
        bson_free(e->keys[i]);
    bson_free(e->keys);
    mf_tz_free(e->tz);
    mf_sort_free(e->sort);
    bson_free(e->ps);
    pcre2_code_free(e->re);
    bson_free(e);
}

static mf_expr_t *
lit_new(const bson_value_t *v)
{
    mf_expr_t *e = node_new(K_LIT);
    mf_value_copy(&e->lit, v);
    return e;
}

/* split_path: splits "a.b.c" into components, validating each. */
static int
split_path(const char *s, size_t len, char ***out, size_t *n, mf_error_t *err)
{
    size_t cap = 4, k = 0, start = 0;
    char **v = bson_malloc(cap * sizeof *v);

    for (size_t i = 0; i <= len; i++) {
        if (i == len || s[i] == '.') {
            size_t l = i - start;
            if (l == 0) {
                for (size_t j = 0; j < k; j++)
                    bson_free(v[j]);
                bson_free(v);
                return mf_err_set(err, MF_E_Location15998, "FieldPath field names may not be empty strings.");
            }
            if (s[start] == '$') {
                for (size_t j = 0; j < k; j++)
                    bson_free(v[j]);
                bson_free(v);
                return mf_err_set(err, MF_E_Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.");
            }
            if (k == cap) {
                cap *= 2;
                v = bson_realloc(v, cap * sizeof *v);
            }
            v[k++] = bson_strndup(s + start, l);
            start = i + 1;
        }
    }
    *out = v;
    *n = k;
    return 0;
}

static bool
scope_has(const scope_t *sc, const char *name)
{
    for (; sc; sc = sc->up)
        if (strcmp(sc->name, name) == 0)
            return true;
    return false;
}

static mf_expr_t *
parse_string(const bson_value_t *v, const scope_t *sc, mf_error_t *err)
{
    const char *s = v->value.v_utf8.str;
    size_t len = v->value.v_utf8.len;
    mf_expr_t *e;

    if (len == 0 || s[0] != '$')
        return lit_new(v);
    if (len >= 2 && s[len - 1] == '.') {
        /* mongod's FieldPath refuses a trailing dot before it looks at the components. */
        mf_err_set(err, MF_E_Location40353, "FieldPath must not end with a '.'.");
        return NULL;
    }
    if (len >= 2 && s[1] == '$') {
        const char *name = s + 2;
        const char *dot = memchr(name, '.', len - 2);
        size_t nl = dot ? (size_t)(dot - name) : len - 2;
        int id = 0;

        if (var_name_ok(name, nl, true, err) < 0)
            return NULL;
        if (nl == 4 && memcmp(name, "ROOT", 4) == 0)
            id = VAR_ROOT;
        else if (nl == 7 && memcmp(name, "CURRENT", 7) == 0 && !scope_has(sc, "CURRENT"))
            id = VAR_CURRENT;
        else if (nl == 3 && memcmp(name, "NOW", 3) == 0)
            id = VAR_NOW;
        else if (nl == 6 && memcmp(name, "REMOVE", 6) == 0)
            id = VAR_REMOVE;
        else {
            const scope_t *p;
            for (p = sc; p; p = p->up)
                if (strlen(p->name) == nl && memcmp(p->name, name, nl) == 0)
                    break;
            size_t ai;
            /*
             * CLUSTER_TIME and USER_ROLES are builtins (mongod's variables.cpp
             * kBuiltinVarNameToId): known to the parser, bound by the command
             * layer (CLUSTER_TIME only on a replica-set member; 51144 at run
             * time where unbound).
             */
            if (p == NULL && ambient_find(name, nl, &ai) == NULL && !(nl == 12 && memcmp(name, "CLUSTER_TIME", 12) == 0) &&
                !(nl == 10 && memcmp(name, "USER_ROLES", 10) == 0)) {
                mf_err_set(err, MF_E_Location17276, "Use of undefined variable: %.*s", (int)nl, name);
                return NULL;
            }
            id = VAR_USER;
        }
        e = node_new(K_VAR);
        e->var = id;
        e->name = bson_strndup(name, nl);
        if (dot && split_path(dot + 1, len - 2 - nl - 1, &e->path, &e->npath, err) < 0) {
            mf_expr_free(e);
            return NULL;
        }
        return e;
    }
    if (len == 1) {
        mf_err_set(err, MF_E_Location16872, "'$' by itself is not a valid FieldPath");
        return NULL;
    }
    if (scope_has(sc, "CURRENT")) {
        /* $let (or $map/$filter "as") rebound CURRENT: "$a.b" reads $$CURRENT.a.b. */
        e = node_new(K_VAR);
        e->var = VAR_USER;
        e->name = bson_strdup("CURRENT");
    } else {
        e = node_new(K_FIELD);
    }
    if (split_path(s + 1, len - 1, &e->path, &e->npath, err) < 0) {
        mf_expr_free(e);
        return NULL;
    }
    return e;
}

static void
add_arg(mf_expr_t *e, mf_expr_t *a)
{
    e->args = bson_realloc(e->args, (e->nargs + 1) * sizeof *e->args);
    e->args[e->nargs++] = a;
}

static void
add_key(mf_expr_t *e, const char *k)
{
    e->keys = bson_realloc(e->keys, (e->nkeys + 1) * sizeof *e->keys);
    e->keys[e->nkeys++] = bson_strdup(k);
}

static const op_def_t *
find_op(const char *name)
{
    for (const op_def_t *o = OPS; o->name; o++)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

/* parse_slot: parses iter's value into slot i of e (slots beyond nargs are created as NULL). */
static int
parse_slot(mf_expr_t *e, size_t i, const bson_iter_t *it, const scope_t *sc, mf_error_t *err)
{
    mf_expr_t *a;

    while (e->nargs <= i)
        add_arg(e, NULL);
    if (e->args[i] != NULL) {
        mf_expr_free(e->args[i]);
        e->args[i] = NULL;
    }
    a = parse(bson_iter_value((bson_iter_t *)it), sc, err);
    if (a == NULL)
        return -1;
    e->args[i] = a;
    return 0;
}

/*
 * named_slots: parses the document v {k1: ..., k2: ...} into slots by the
 * names list (NULL-terminated). 0 when done, -1 with err when a slot fails to
 * parse, 1 with *unknown the first key not in names (it points into v's data).
 */
static int
named_slots(mf_expr_t *e, const bson_value_t *v, const char *const *names, const scope_t *sc, mf_error_t *err,
            const char **unknown)
{
    bson_iter_t it;
    size_t nn = 0;

    while (names[nn])
        nn++;
    while (e->nargs < nn)
        add_arg(e, NULL);
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        size_t i;
        for (i = 0; i < nn; i++)
            if (strcmp(names[i], k) == 0)
                break;
        if (i == nn) {
            *unknown = k;
            return 1;
        }
        if (parse_slot(e, i, &it, sc, err) < 0)
            return -1;
    }
    return 0;
}

/*
 * named_form: named_slots, where an unknown key fails with code_unknown and
 * unknown_fmt (formatted with the operator's name and the key).
 */
static int
named_form(mf_expr_t *e, const bson_value_t *v, const char *const *names, const scope_t *sc, mf_error_t *err,
           int code_unknown, const char *unknown_fmt)
{
    const char *k = NULL;
    int rc = named_slots(e, v, names, sc, err, &k);

    if (rc > 0)
        return mf_err_set(err, code_unknown, unknown_fmt, e->op->name, k);
    return rc;
}

/*
 * named_args: named_slots, with MongoDB's message for an unknown key:
 * "Unrecognized argument to <op>: <key><suffix>".
 */
static int
named_args(mf_expr_t *e, const bson_value_t *v, const char *const *names, const scope_t *sc, mf_error_t *err,
           int code_unknown, const char *suffix)
{
    const char *k = NULL;
    int rc = named_slots(e, v, names, sc, err, &k);

    if (rc > 0)
        return mf_err_set(err, code_unknown, "Unrecognized argument to %s: %s%s", e->op->name, k, suffix);
    return rc;
}

/* require: slot must have been given, else code and msg (msg's %s, if any, is the operator's name). */
static int
require(mf_expr_t *e, size_t slot, int code, const char *msg, mf_error_t *err)
{
    if (slot >= e->nargs || e->args[slot] == NULL)
        return mf_err_set(err, code, msg, e->op->name);
    return 0;
}

/* get_as: reads the optional "as" (or other variable-name) field of a named-argument operator. */
static int
get_var_name(const bson_value_t *v, const char *field, const char *dflt, char **out, mf_error_t *err)
{
    bson_iter_t it;

    *out = NULL;
    if (v->value_type == BSON_TYPE_DOCUMENT) {
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        if (bson_iter_find(&it, field)) {
            /* mongod reads a non-string name as "" (16866). */
            const char *s = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
            if (var_name_ok(s, strlen(s), false, err) < 0)
                return -1;
            *out = bson_strdup(s);
            return 0;
        }
    }
    *out = bson_strdup(dflt);
    return 0;
}

/* filtered_value: v's document without the named keys (for parse of $map/$filter bodies). */
static void
doc_without(const bson_value_t *v, const char *skip, bson_value_t *o)
{
    bson_iter_t it;
    bson_t b = BSON_INITIALIZER;

    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), skip) != 0)
            bson_append_value(&b, bson_iter_key(&it), -1, bson_iter_value(&it));
    mf_value_take_bson(o, &b, false);
}

static int
parse_op(mf_expr_t *e, const bson_value_t *arg, const scope_t *sc, mf_error_t *err)
{
    const op_def_t *op = e->op;
    bson_iter_t it;

    switch (op->form) {
    case A_LITERAL:
        add_arg(e, lit_new(arg));
        return 0;
    case A_POS:
    case A_DATEPART:
    case A_COND: {
        if (op->form == A_COND && arg->value_type == BSON_TYPE_DOCUMENT) {
            static const char *const names[] = {"if", "then", "else", NULL};
            if (named_form(e, arg, names, sc, err, MF_E_Location17083, "Unrecognized parameter to %s: %s") < 0)
                return -1;
            if (require(e, 0, MF_E_Location17080, "Missing 'if' parameter to $cond", err) < 0 ||
                require(e, 1, MF_E_Location17081, "Missing 'then' parameter to $cond", err) < 0 ||
                require(e, 2, MF_E_Location17082, "Missing 'else' parameter to $cond", err) < 0)
                return -1;
            return 0;
        }
        if (op->form == A_DATEPART && arg->value_type == BSON_TYPE_DOCUMENT) {
            bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
            if (!bson_iter_next(&it) || bson_iter_key(&it)[0] != '$') {
                static const char *const names[] = {"date", "timezone", NULL};
                if (named_form(e, arg, names, sc, err, MF_E_Location40535, "unrecognized option to %s: \"%s\"") < 0)
                    return -1;
                if (e->args[0] == NULL)
                    return mf_err_set(err, MF_E_Location40539, "missing 'date' argument to %s, provided: %s: {...}",
                                      op->name, op->name);
                return 0;
            }
        }
        if (op->form == A_DATEPART && arg->value_type == BSON_TYPE_ARRAY) {
            uint32_t n = 0;
            bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
            while (bson_iter_next(&it))
                n++;
            if (n != 1)
                return mf_err_set(err, MF_E_Location40536,
                                  "%s accepts exactly one argument if given an array, but was given %u", op->name, n);
        }
        if (arg->value_type == BSON_TYPE_ARRAY) {
            bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
            while (bson_iter_next(&it))
                if (parse_slot(e, e->nargs, &it, sc, err) < 0)
                    return -1;
        } else {
            mf_expr_t *a = parse(arg, sc, err);
            if (a == NULL)
                return -1;
            add_arg(e, a);
        }
        int n = (int)e->nargs;
        /* Operators with their own arity check in mongod. */
        switch (op->id) {
        case OP_TOSTRING:
        case OP_TOINT:
        case OP_TOLONG:
        case OP_TODOUBLE:
        case OP_TODECIMAL:
        case OP_TOBOOL:
        case OP_TODATE:
        case OP_TOOBJECTID:
            if (n != 1)
                return mf_err_set(err, MF_E_Location50723, "%s requires a single argument, got %d", op->name, n);
            break;
        case OP_IFNULL:
            if (n < 2)
                return mf_err_set(err, MF_E_Location1257300, "$ifNull needs at least two arguments, had: %d", n);
            break;
        case OP_SETEQUALS:
            if (n < 2)
                return mf_err_set(err, MF_E_Location17045, "$setEquals needs at least two arguments had: %d", n);
            break;
        default:
            break;
        }
        if (op->min == op->max && n != op->min)
            return mf_err_set(err, MF_E_Location16020, "Expression %s takes exactly %d arguments. %d were passed in.",
                              op->name, op->min, n);
        if (n < op->min)
            return mf_err_set(err, MF_E_Location16020,
                              "Expression %s takes at least %d arguments, and %d were passed in.", op->name,
                              op->min, n);
        if (op->max >= 0 && n > op->max)
            return mf_err_set(err, MF_E_Location16021,
                              "Expression %s takes at most %d arguments, and %d were passed in.", op->name,
                              op->max, n);
        if (op->form == A_DATEPART)
            add_arg(e, NULL); /* no timezone */
        return 0;
    }
    case A_SWITCH: {
        bson_iter_t bi;
        mf_expr_t *dflt = NULL;
        bool have_branches = false;
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location40060, "$switch requires an object as an argument, found: %s",
                              tname(arg));
        /* Slots: case0, then0, case1, then1, ..., default (last, may be NULL). */
        bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "branches") == 0) {
                if (!BSON_ITER_HOLDS_ARRAY(&it))
                    return mf_err_set(err, MF_E_Location40061, "$switch expected an array for 'branches', found: %s",
                                      mf_type_name(bson_iter_type(&it)));
                have_branches = true;
                bson_iter_recurse(&it, &bi);
                while (bson_iter_next(&bi)) {
                    bson_iter_t b;
                    size_t base = e->nargs;
                    if (!BSON_ITER_HOLDS_DOCUMENT(&bi))
                        return mf_err_set(err, MF_E_Location40062, "$switch expected each branch to be an object, found: %s",
                                          mf_type_name(bson_iter_type(&bi)));
                    add_arg(e, NULL);
                    add_arg(e, NULL);
                    bson_iter_recurse(&bi, &b);
                    while (bson_iter_next(&b)) {
                        const char *bk = bson_iter_key(&b);
                        if (strcmp(bk, "case") == 0) {
                            if (parse_slot(e, base, &b, sc, err) < 0)
                                return -1;
                        } else if (strcmp(bk, "then") == 0) {
                            if (parse_slot(e, base + 1, &b, sc, err) < 0)
                                return -1;
                        } else {
                            return mf_err_set(err, MF_E_Location40063, "$switch found an unknown argument to a branch: %s", bk);
                        }
                    }
                    if (e->args[base] == NULL)
                        return mf_err_set(err, MF_E_Location40064, "$switch requires each branch have a 'case' expression");
                    if (e->args[base + 1] == NULL)
                        return mf_err_set(err, MF_E_Location40065, "$switch requires each branch have a 'then' expression.");
                }
            } else if (strcmp(k, "default") == 0) {
                mf_expr_free(dflt);
                dflt = parse(bson_iter_value(&it), sc, err);
                if (dflt == NULL)
                    return -1;
            } else {
                mf_expr_free(dflt);
                return mf_err_set(err, MF_E_Location40067, "$switch found an unknown argument: %s", k);
            }
        }
        add_arg(e, dflt);
        if (!have_branches || e->nargs < 3)
            return mf_err_set(err, MF_E_Location40068, "$switch requires at least one branch.");
        return 0;
    }
    case A_MAP:
    case A_FILTER: {
        static const char *const mnames[] = {"input", "in", "as", NULL};
        static const char *const fnames[] = {"input", "cond", "as", "limit", NULL};
        scope_t inner;
        bson_value_t body;
        bool is_map = op->form == A_MAP;
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, is_map ? MF_E_Location16878 : MF_E_Location28646,
                              "%s only supports an object as its argument", op->name);
        /* mongod: unknown keys, then the missing ones, before it reads "as". */
        {
            bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
            bool have_input = false, have_body = false;
            while (bson_iter_next(&it)) {
                const char *k = bson_iter_key(&it);
                if (strcmp(k, "input") == 0)
                    have_input = true;
                else if (strcmp(k, is_map ? "in" : "cond") == 0)
                    have_body = true;
                else if (strcmp(k, "as") != 0 && (is_map || strcmp(k, "limit") != 0))
                    return mf_err_set(err, is_map ? MF_E_Location16879 : MF_E_Location28647,
                                      "Unrecognized parameter to %s: %s", op->name, k);
            }
            if (!have_input)
                return mf_err_set(err, is_map ? MF_E_Location16880 : MF_E_Location28648,
                                  "Missing 'input' parameter to %s", op->name);
            if (!have_body)
                return is_map ? mf_err_set(err, MF_E_Location16882, "Missing 'in' parameter to $map")
                              : mf_err_set(err, MF_E_Location28650, "Missing 'cond' parameter to $filter");
        }
        if (get_var_name(arg, "as", "this", &e->name, err) < 0)
            return -1;
        inner.name = e->name;
        inner.up = sc;
        doc_without(arg, "as", &body);
        /* "input" (and "limit") are parsed in the outer scope, the body in the inner one. */
        int rc = named_form(e, &body, is_map ? mnames : fnames, &inner, err, MF_E_FailedToParse,
                            "Unrecognized parameter to %s: %s");
        if (rc == 0) {
            bson_iter_init_from_data(&it, body.value.v_doc.data, body.value.v_doc.data_len);
            while (rc == 0 && bson_iter_next(&it)) {
                if (strcmp(bson_iter_key(&it), "input") == 0)
                    rc = parse_slot(e, 0, &it, sc, err);
                else if (strcmp(bson_iter_key(&it), "limit") == 0)
                    rc = parse_slot(e, 3, &it, sc, err);
            }
        }
        mf_value_free(&body);
        if (rc < 0)
            return -1;
        return 0;
    }
    case A_REDUCE: {
        static const char *const names[] = {"input", "initialValue", "in", NULL};
        scope_t s1 = {"value", sc}, s2 = {"this", &s1};
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location40075, "$reduce requires an object as an argument, found: %s", tname(arg));
        if (named_form(e, arg, names, &s2, err, MF_E_Location40076, "%s found an unknown argument: %s") < 0)
            return -1;
        /* Re-parse input and initialValue in the outer scope. */
        bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "input") == 0 && parse_slot(e, 0, &it, sc, err) < 0)
                return -1;
            if (strcmp(bson_iter_key(&it), "initialValue") == 0 && parse_slot(e, 1, &it, sc, err) < 0)
                return -1;
        }
        if (require(e, 0, MF_E_Location40077, "$reduce requires 'input' to be specified", err) < 0 ||
            require(e, 1, MF_E_Location40078, "$reduce requires 'initialValue' to be specified", err) < 0 ||
            require(e, 2, MF_E_Location40079, "$reduce requires 'in' to be specified", err) < 0)
            return -1;
        return 0;
    }
    case A_LET: {
        bson_iter_t vi;
        bson_value_t in;
        bool have_vars = false, have_in = false;
        scope_t *scopes = NULL;
        size_t nvars = 0;
        int rc = 0;
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location16874, "$let only supports an object as its argument");
        mf_value_set_missing(&in);
        /* Slots: one per variable, then 'in' last; keys hold the variable names. */
        bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "vars") == 0) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                    return mf_err_set(err, MF_E_Location10065, "invalid parameter: expected an object (vars)");
                have_vars = true;
                bson_iter_recurse(&it, &vi);
                while (bson_iter_next(&vi)) {
                    const char *vn = bson_iter_key(&vi);
                    if (var_name_ok(vn, strlen(vn), false, err) < 0)
                        return -1;
                    add_key(e, vn);
                    if (parse_slot(e, e->nargs, &vi, sc, err) < 0)
                        return -1;
                }
            } else if (strcmp(k, "in") == 0) {
                have_in = true;
                in = *bson_iter_value(&it);
            } else {
                return mf_err_set(err, MF_E_Location16875, "Unrecognized parameter to $let: %s", k);
            }
        }
        if (!have_vars)
            return mf_err_set(err, MF_E_Location16876, "Missing 'vars' parameter to $let");
        if (!have_in)
            return mf_err_set(err, MF_E_Location16877, "Missing 'in' parameter to $let");
        nvars = e->nkeys;
        scopes = bson_malloc0((nvars + 1) * sizeof *scopes);
        const scope_t *up = sc;
        for (size_t i = 0; i < nvars; i++) {
            scopes[i].name = e->keys[i];
            scopes[i].up = up;
            up = &scopes[i];
        }
        mf_expr_t *body = parse(&in, up, err);
        bson_free(scopes);
        if (body == NULL)
            rc = -1;
        else
            add_arg(e, body);
        return rc;
    }
    case A_CONVERT: {
        static const char *const names[] = {"input", "to", "onError", "onNull", "format", NULL};
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_FailedToParse, "$convert expects an object of named arguments but found: %s",
                              tname(arg));
        if (named_form(e, arg, names, sc, err, MF_E_FailedToParse, "%s found an unknown argument: %s") < 0)
            return -1;
        if (require(e, 0, MF_E_FailedToParse, "Missing 'input' parameter to $convert", err) < 0 ||
            require(e, 1, MF_E_FailedToParse, "Missing 'to' parameter to $convert", err) < 0)
            return -1;
        return 0;
    }
    case A_TRIM: {
        static const char *const names[] = {"input", "chars", NULL};
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location50696, "%s only supports an object as an argument, found %s", op->name,
                              tname(arg));
        if (named_form(e, arg, names, sc, err, MF_E_Location50694, "%s found an unknown argument: %s") < 0)
            return -1;
        return require(e, 0, MF_E_Location50695, "%s requires an 'input' field", err);
    }
    case A_DATETOSTRING: {
        static const char *const names[] = {"date", "format", "timezone", "onNull", NULL};
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location18629, "$dateToString only supports an object as its argument");
        if (named_args(e, arg, names, sc, err, MF_E_Location18534, "") < 0)
            return -1;
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location18628, "Missing 'date' parameter to $dateToString");
        return 0;
    }
    case A_DATETOPARTS: {
        static const char *const names[] = {"date", "timezone", "iso8601", NULL};
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location40524, "$dateToParts only supports an object as its argument");
        if (named_args(e, arg, names, sc, err, MF_E_Location40520, "") < 0)
            return -1;
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location40522, "Missing 'date' parameter to $dateToParts");
        return 0;
    }
    case A_DATEFROMSTRING: {
        static const char *const names[] = {"dateString", "timezone", "format", "onNull", "onError", NULL};
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location40540, "$dateFromString only supports an object as an argument, found: %s",
                              tname(arg));
        if (named_args(e, arg, names, sc, err, MF_E_Location40541, "") < 0)
            return -1;
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location40542, "Missing 'dateString' parameter to $dateFromString");
        return 0;
    }
    case A_DATEFROMPARTS: {
        static const char *const names[] = {"year", "month", "day", "hour", "minute", "second", "millisecond",
                                            "isoWeekYear", "isoWeek", "isoDayOfWeek", "timezone", NULL};
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location40519, "$dateFromParts only supports an object as its argument");
        if (named_args(e, arg, names, sc, err, MF_E_Location40518, "") < 0)
            return -1;
        bool natural = e->args[0] || e->args[1] || e->args[2], iso = e->args[7] || e->args[8] || e->args[9];
        if (!e->args[0] && !e->args[7])
            return mf_err_set(err, MF_E_Location40516, "$dateFromParts requires either 'year' or 'isoWeekYear' to be present");
        if (e->args[0] && iso)
            return mf_err_set(err, MF_E_Location40489, "$dateFromParts does not allow mixing natural dates with ISO dates");
        if (e->args[7] && natural)
            return mf_err_set(err, MF_E_Location40525, "$dateFromParts does not allow mixing ISO dates with natural dates");
        return 0;
    }
    case A_DATEARITH: {
        /* Slots: $dateTrunc {date, unit, binSize, timezone, startOfWeek}; $dateAdd / $dateSubtract
           {startDate, unit, amount, timezone}; $dateDiff {startDate, endDate, unit, timezone, startOfWeek}. */
        static const char *const trunc_names[] = {"date", "unit", "binSize", "timezone", "startOfWeek", NULL};
        static const char *const add_names[] = {"startDate", "unit", "amount", "timezone", NULL};
        static const char *const diff_names[] = {"startDate", "endDate", "unit", "timezone", "startOfWeek", NULL};
        if (op->id == OP_DATETRUNC) {
            if (arg->value_type != BSON_TYPE_DOCUMENT)
                return mf_err_set(err, MF_E_Location5439007, "$dateTrunc only supports an object as its argument");
            if (named_args(e, arg, trunc_names, sc, err, MF_E_Location5439008,
                           ". Expected arguments date, unit, and optionally, binSize, timezone, startOfWeek") < 0)
                return -1;
            if (e->args[0] == NULL)
                return mf_err_set(err, MF_E_Location5439009, "Missing 'date' parameter to $dateTrunc");
            if (e->args[1] == NULL)
                return mf_err_set(err, MF_E_Location5439010, "Missing 'unit' parameter to $dateTrunc");
        } else if (op->id == OP_DATEDIFF) {
            if (arg->value_type != BSON_TYPE_DOCUMENT)
                return mf_err_set(err, MF_E_Location5166301, "$dateDiff only supports an object as its argument");
            if (named_args(e, arg, diff_names, sc, err, MF_E_Location5166302, "") < 0)
                return -1;
            if (e->args[0] == NULL)
                return mf_err_set(err, MF_E_Location5166303, "Missing 'startDate' parameter to $dateDiff");
            if (e->args[1] == NULL)
                return mf_err_set(err, MF_E_Location5166304, "Missing 'endDate' parameter to $dateDiff");
            if (e->args[2] == NULL)
                return mf_err_set(err, MF_E_Location5166305, "Missing 'unit' parameter to $dateDiff");
        } else {
            if (arg->value_type != BSON_TYPE_DOCUMENT)
                return mf_err_set(err, MF_E_Location5166400, "%s expects an object as its argument", op->name);
            if (named_args(e, arg, add_names, sc, err, MF_E_Location5166401,
                           ". Expected arguments are startDate, unit, amount, and optionally timezone.") < 0)
                return -1;
            if (!e->args[0] || !e->args[1] || !e->args[2])
                return mf_err_set(err, MF_E_Location5166402, "%s requires startDate, unit, and amount to be present",
                                  op->name);
        }
        return 0;
    }
    case A_REGEX: {
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location51103, "%s expects an object of named arguments but found: %s",
                              op->name, tname(arg));
        static const char *const names[] = {"input", "regex", "options", NULL};
        if (named_form(e, arg, names, sc, err, MF_E_Location31024, "%s found an unknown argument: %s") < 0)
            return -1;
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location31022, "%s requires 'input' parameter", op->name);
        if (e->args[1] == NULL)
            return mf_err_set(err, MF_E_Location31023, "%s requires 'regex' parameter", op->name);
        if (e->args[1]->kind == K_LIT && (e->args[2] == NULL || e->args[2]->kind == K_LIT)) {
            /* constant regex and options: validated and compiled once, as MongoDB's precompileRegex */
            bson_value_t none;
            mf_value_set_null(&none);
            return rx_compile(op->name, err, &e->args[1]->lit, e->args[2] ? &e->args[2]->lit : &none, &e->re);
        }
        return 0;
    }
    case A_REPLACE: {
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location51751, "%s requires an object as an argument, found: %s", op->name,
                              tname(arg));
        static const char *const names[] = {"input", "find", "replacement", NULL};
        if (named_form(e, arg, names, sc, err, MF_E_Location51750, "%s found an unknown argument: %s") < 0)
            return -1;
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location51749, "%s requires 'input' to be specified", op->name);
        if (e->args[1] == NULL)
            return mf_err_set(err, MF_E_Location51748, "%s requires 'find' to be specified", op->name);
        if (e->args[2] == NULL)
            return mf_err_set(err, MF_E_Location51747, "%s requires 'replacement' to be specified", op->name);
        return 0;
    }
    case A_GETFIELD: {
        /* slots: field, input (NULL: $$CURRENT) */
        add_arg(e, NULL);
        add_arg(e, NULL);
        bool current = false;
        if (arg->value_type == BSON_TYPE_DOCUMENT) {
            bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
            while (bson_iter_next(&it)) {
                const char *k = bson_iter_key(&it);
                if (e->args[0] == NULL && e->args[1] == NULL && k[0] == '$') {
                    /* an expression: the field name, read from $$CURRENT */
                    if ((e->args[0] = parse(arg, sc, err)) == NULL)
                        return -1;
                    current = true;
                    break;
                } else if (strcmp(k, "field") == 0) {
                    if (parse_slot(e, 0, &it, sc, err) < 0)
                        return -1;
                } else if (strcmp(k, "input") == 0) {
                    if (parse_slot(e, 1, &it, sc, err) < 0)
                        return -1;
                } else {
                    return mf_err_set(err, MF_E_Location3041701, "$getField found an unknown argument: %s", k);
                }
            }
        } else {
            if ((e->args[0] = parse(arg, sc, err)) == NULL)
                return -1;
            current = true;
        }
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location3041702, "$getField requires 'field' to be specified");
        if (e->args[1] == NULL && !current)
            return mf_err_set(err, MF_E_Location3041703, "$getField requires 'input' to be specified");
        const mf_expr_t *f = e->args[0];
        if (f->kind == K_OP && f->op->id == OP_LITERAL)
            f = f->args[0];
        if (f->kind == K_LIT && f->lit.value_type != BSON_TYPE_UTF8)
            return mf_err_set(err, MF_E_Location3041704, "$getField requires 'field' to evaluate to type String, but got %s",
                              tname(&f->lit));
        return 0;
    }
    case A_SETFIELD: {
        /* slots: field, input, value ($unsetField: no value, the field is removed) */
        bool set = op->id == OP_SETFIELD;
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location4161100, "%s only supports an object as its argument", op->name);
        static const char *const set_names[] = {"field", "input", "value", NULL};
        static const char *const unset_names[] = {"field", "input", NULL};
        add_arg(e, NULL); /* $unsetField's empty value slot too */
        add_arg(e, NULL);
        add_arg(e, NULL);
        if (named_form(e, arg, set ? set_names : unset_names, sc, err, MF_E_Location4161101,
                       "%s found an unknown argument: %s") < 0)
            return -1;
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location4161102, "%s requires 'field' to be specified", op->name);
        if (set && e->args[2] == NULL)
            return mf_err_set(err, MF_E_Location4161103, "%s requires 'value' to be specified", op->name);
        if (e->args[1] == NULL)
            return mf_err_set(err, MF_E_Location4161109, "%s requires 'input' to be specified", op->name);
        mf_expr_t *f = e->args[0];
        if (f->kind == K_OP && f->op->id == OP_LITERAL) /* {$literal: ...} is a constant */
            f = f->args[0];
        if (f->kind == K_FIELD || f->kind == K_VAR) {
            bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
            bson_iter_find(&it, "field");
            const char *fp = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
            return mf_err_set(err, MF_E_Location4161108,
                              "'%s' is a field path reference which is not allowed in this context. Did you mean {$literal: '%s'}?",
                              fp, fp);
        }
        if (f->kind != K_LIT)
            return mf_err_set(err, MF_E_Location4161106,
                              "%s requires 'field' to evaluate to a constant, but got a non-constant argument", op->name);
        if (f->lit.value_type != BSON_TYPE_UTF8)
            return mf_err_set(err, MF_E_Location4161107, "%s requires 'field' to evaluate to type String, but got %s",
                              op->name, tname(&f->lit));
        e->name = bson_strndup(f->lit.value.v_utf8.str, f->lit.value.v_utf8.len);
        return 0;
    }
    case A_SORTARRAY: {
        bool have_sort = false;
        bson_iter_t sb;
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location2942500, "$sortArray requires an object as an argument, found: %s",
                              tname(arg));
        add_arg(e, NULL);
        bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "input") == 0) {
                if (parse_slot(e, 0, &it, sc, err) < 0)
                    return -1;
            } else if (strcmp(k, "sortBy") == 0) {
                have_sort = true;
                sb = it;
            } else {
                return mf_err_set(err, MF_E_Location2942501, "$sortArray found an unknown argument: %s", k);
            }
        }
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location2942502, "$sortArray requires 'input' to be specified");
        if (!have_sort)
            return mf_err_set(err, MF_E_Location2942503, "$sortArray requires 'sortBy' to be specified");
        const bson_value_t *sv = bson_iter_value(&sb);
        if (mf_value_is_number(sv)) {
            double d = as_dbl(sv);
            if (d != 1 && d != -1)
                return mf_err_set(err, MF_E_Location2942506, "The $sort element value must be either 1 or -1");
            e->flag = d == -1;
            return 0;
        }
        if (sv->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location2942507,
                              "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort "
                              "embedded fields");
        bson_t spec;
        bson_iter_t si;
        if (!bson_init_static(&spec, sv->value.v_doc.data, sv->value.v_doc.data_len) || bson_count_keys(&spec) == 0)
            return mf_err_set(err, MF_E_Location15976, "$sort stage must have at least one sort key");
        bson_iter_init(&si, &spec);
        while (bson_iter_next(&si)) {
            const bson_value_t *d = bson_iter_value(&si);
            if (!mf_value_is_number(d))
                return mf_err_set(err, MF_E_Location15974, "Illegal key in $sort specification: %s", bson_iter_key(&si));
            if (as_dbl(d) != 1 && as_dbl(d) != -1)
                return mf_err_set(err, MF_E_Location15975,
                                  "$sort key ordering must be 1 (for ascending) or -1 (for descending)");
        }
        e->sort = mf_sort_new(&spec, err);
        return e->sort ? 0 : -1;
    }
    case A_ZIP: {
        bool have_inputs = false, longest = false;
        bson_iter_t sub;
        mf_expr_t **defs = NULL;
        size_t nd = 0;
        int rc = 0;
        if (arg->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location34460, "$zip only supports an object as an argument, found %s", tname(arg));
        bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
        while (rc == 0 && bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "inputs") == 0) {
                if (!BSON_ITER_HOLDS_ARRAY(&it)) {
                    rc = mf_err_set(err, MF_E_Location34461, "inputs must be an array of expressions, found %s",
                                    mf_type_name(bson_iter_type(&it)));
                    break;
                }
                have_inputs = true;
                bson_iter_recurse(&it, &sub);
                while (bson_iter_next(&sub))
                    if (parse_slot(e, e->nargs, &sub, sc, err) < 0) {
                        rc = -1;
                        break;
                    }
            } else if (strcmp(k, "defaults") == 0) {
                if (!BSON_ITER_HOLDS_ARRAY(&it)) {
                    rc = mf_err_set(err, MF_E_Location34462, "defaults must be an array of expressions, found %s",
                                    mf_type_name(bson_iter_type(&it)));
                    break;
                }
                bson_iter_recurse(&it, &sub);
                while (bson_iter_next(&sub)) {
                    mf_expr_t *d = parse(bson_iter_value(&sub), sc, err);
                    if (d == NULL) {
                        rc = -1;
                        break;
                    }
                    defs = bson_realloc(defs, (nd + 1) * sizeof *defs);
                    defs[nd++] = d;
                }
            } else if (strcmp(k, "useLongestLength") == 0) {
                if (!BSON_ITER_HOLDS_BOOL(&it)) {
                    rc = mf_err_set(err, MF_E_Location34463, "useLongestLength must be a bool, found %s",
                                    mf_type_name(bson_iter_type(&it)));
                    break;
                }
                longest = bson_iter_bool(&it);
            } else {
                rc = mf_err_set(err, MF_E_Location34464, "$zip found an unknown argument: %s", k);
            }
        }
        (void)have_inputs;
        e->ninputs = e->nargs;
        e->flag = longest;
        for (size_t i = 0; i < nd; i++)
            add_arg(e, defs[i]);
        bson_free(defs);
        if (rc < 0)
            return -1;
        if (e->ninputs == 0)
            return mf_err_set(err, MF_E_Location34465, "$zip requires at least one input array");
        if (!longest && nd > 0)
            return mf_err_set(err, MF_E_Location34466, "cannot specify defaults unless useLongestLength is true");
        if (nd > 0 && nd != e->ninputs)
            return mf_err_set(err, MF_E_Location34467, "defaults and inputs must have the same length");
        return 0;
    }
    case A_META: {
        /*
         * mongod 8.0's ExpressionMeta::parse: the argument's type first
         * (17307), then its name. The text score is read from the pipeline's
         * document. In a pipeline, DepsTracker's kDefaultUnavailableMetadata
         * (depends.h) holds only the text score and the $geoNear data, so
         * sortKey, recordId and indexKey parse and evaluate to missing where
         * no stage set them (ExpressionMeta's evaluate: "hasX() ? Value(X) :
         * Value()"). sortKey is given where a $sort set it (META_SORT_KEY,
         * mf_expr_sort_key_source_set); mayfly's pipeline stages carry no
         * record id or index key, so those two are always missing, as are the
         * names whose metadata mayfly never sets (mf_meta_never_set). The
         * $geoNear data is read from the hidden fields a leading $geoNear
         * adds when the pipeline names it (query/agg_geo.h).
         */
        const char *name;
        if (arg->value_type != BSON_TYPE_UTF8)
            return mf_err_set(err, MF_E_Location17307, "$meta only supports string arguments");
        name = arg->value.v_utf8.str;
        if (strcmp(name, "textScore") == 0)
            e->meta = META_TEXT_SCORE;
        else if (strcmp(name, "sortKey") == 0)
            e->meta = META_SORT_KEY;
        else if (strcmp(name, "geoNearDistance") == 0)
            e->meta = META_GEO_DIST;
        else if (strcmp(name, "geoNearPoint") == 0)
            e->meta = META_GEO_POINT;
        else if (mf_meta_never_set(name) || strcmp(name, "recordId") == 0 || strcmp(name, "indexKey") == 0)
            e->meta = META_MISSING;
        else
            return mf_err_set(err, MF_E_Location17308, "Unsupported argument to $meta: %s", name);
        return 0;
    }
    case A_RAND: {
        if (arg->value_type != BSON_TYPE_DOCUMENT && arg->value_type != BSON_TYPE_ARRAY)
            return mf_err_set(err, MF_E_Location10065, "invalid parameter: expected an object ($rand)");
        if (arg->value.v_doc.data_len > 5)
            return mf_err_set(err, MF_E_Location3040501, "$rand does not currently accept arguments");
        return 0;
    }
    case A_NACC: {
        /* {$firstN: {n, input}} (also $lastN, $minN, $maxN), mongod's AccumulatorN::parseArgs. Slots: n, input. */
        bool minmax = op->id == OP_MINN || op->id == OP_MAXN;
        if (arg->value_type != BSON_TYPE_DOCUMENT) {
            char vb[128];
            value_str(arg, vb, sizeof vb);
            return mf_err_set(err, minmax ? MF_E_Location5787900 : MF_E_Location5787801,
                              "specification must be an object; found %s: %s", op->name, vb);
        }
        static const char *const names[] = {"n", "input", NULL};
        const char *unknown = NULL;
        int rc = named_slots(e, arg, names, sc, err, &unknown);
        if (rc > 0)
            return mf_err_set(err, MF_E_Location5787901, "Unknown argument for 'n' operator: %s", unknown);
        if (rc < 0)
            return -1;
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location5787906, "Missing value for 'n'");
        if (e->args[1] == NULL)
            return mf_err_set(err, MF_E_Location5787907, "Missing value for 'input'");
        return 0;
    }
    case A_QUANTILE: {
        bool med = op->id == OP_MEDIAN;
        bool have_p = false, have_m = false;
        bson_iter_t pi, mi;
        char buf[160];
        if (arg->value_type != BSON_TYPE_DOCUMENT) {
            value_str(arg, buf, sizeof buf);
            return mf_err_set(err, med ? MF_E_Location7436201 : MF_E_Location7436200,
                              "specification must be an object; found %s: %s", op->name, buf);
        }
        add_arg(e, NULL);
        bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "input") == 0) {
                if (parse_slot(e, 0, &it, sc, err) < 0)
                    return -1;
            } else if (!med && strcmp(k, "p") == 0) {
                have_p = true;
                pi = it;
            } else if (strcmp(k, "method") == 0) {
                have_m = true;
                mi = it;
            } else {
                return mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", op->name, k);
            }
        }
        if (e->args[0] == NULL)
            return mf_err_set(err, MF_E_Location40414, "BSON field '%s.input' is missing but a required field", op->name);
        if (!med && !have_p)
            return mf_err_set(err, MF_E_Location40414, "BSON field '%s.p' is missing but a required field", op->name);
        if (!have_m)
            return mf_err_set(err, MF_E_Location40414, "BSON field '%s.method' is missing but a required field", op->name);
        if (!med && percentile_p(bson_iter_value(&pi), sc, &e->ps, &e->nps, err) < 0)
            return -1;
        if (!BSON_ITER_HOLDS_UTF8(&mi))
            return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s.method' is the wrong type '%s', expected type 'string'",
                              op->name, mf_type_name(bson_iter_type(&mi)));
        if (strcmp(bson_iter_utf8(&mi, NULL), "approximate") != 0)
            return mf_err_set(err, MF_E_BadValue, "Currently only 'approximate' can be used as percentile 'method'.");
        return 0;
    }
    default:
        return mf_err_set(err, MF_E_InternalError, "unhandled operator form");
    }
}

/* tz_slot: the argument slot holding the timezone, or -1. */
static int
tz_slot(int op, int form)
{
    switch (form) {
    case A_DATEPART: return 1;
    case A_DATEFROMPARTS: return 10;
    case A_DATETOPARTS: return 1;
    case A_DATEFROMSTRING: return 1;
    case A_DATETOSTRING: return 2;
    case A_DATEARITH: return 3;
    default: (void)op; return -1;
    }
}

/*
 * parse_constant_args: what MongoDB checks at parse time for the constant
 * arguments of the date operators (its optimize() pre-parses them): a
 * constant timezone is opened once and kept in e->tz (40517 when it is not a
 * string, 40485 when no zone has that name), a constant unit of $dateTrunc,
 * $dateAdd, $dateSubtract, $dateDiff is checked (5439013, 9).
 */
static int parse_unit(ctx_t *c, const char *opname, const bson_value_t *v, int *unit);

static int
parse_constant_args(mf_expr_t *e, mf_error_t *err)
{
    const op_def_t *op = e->op;
    int ts = tz_slot(op->id, op->form);
    const mf_expr_t *a;
    bool ctxmsg = op->id == OP_DATETRUNC || op->id == OP_DATEDIFF;

    if (ts >= 0 && (size_t)ts < e->nargs && (a = e->args[ts]) != NULL && a->kind == K_LIT && !mf_value_is_nullish(&a->lit)) {
        if (a->lit.value_type != BSON_TYPE_UTF8)
            return mf_err_set(err, MF_E_Location40517, "%s%stimezone must evaluate to a string, found %s",
                              ctxmsg ? op->name : "", ctxmsg ? " parameter 'timezone' value parsing failed :: caused by :: " : "",
                              tname(&a->lit));
        e->tz = mf_tz_open(a->lit.value.v_utf8.str);
        if (e->tz == NULL)
            return mf_err_set(err, MF_E_Location40485, "%s%sunrecognized time zone identifier: \"%s\"",
                              ctxmsg ? op->name : "", ctxmsg ? " parameter 'timezone' value parsing failed :: caused by :: " : "",
                              a->lit.value.v_utf8.str);
    }
    if (op->form == A_DATEARITH) {
        size_t us = op->id == OP_DATEDIFF ? 2 : 1;
        int unit;
        ctx_t tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.err = err;
        if (us < e->nargs && (a = e->args[us]) != NULL && a->kind == K_LIT && !mf_value_is_nullish(&a->lit) &&
            parse_unit(&tmp, op->name, &a->lit, &unit) < 0)
            return -1;
    }
    return 0;
}

/*
 * fold_check: mongod optimizes a pipeline before it runs it, folding an operator whose operands are all constants
 * into its value (ExpressionNary::optimize, the date-part operators); an error there fails the command even when no
 * document reaches the expression (an empty collection, the branch of a $cond not taken). Such an operator is
 * evaluated once here for its error only (the node stays as parsed) and marked as a constant for its parents.
 */
static int
fold_check(mf_expr_t *e, mf_error_t *err)
{
    bson_value_t out;

    switch (e->op->form) {
    case A_POS:
    case A_DATEPART:
    /* The named-argument operators mongod folds when every argument given is a constant. */
    case A_TRIM:
    case A_CONVERT:
    case A_DATETOSTRING:
    case A_DATEFROMSTRING:
    case A_DATEFROMPARTS:
    case A_DATETOPARTS:
    case A_DATEARITH:
        break;
    default:
        return 0;
    }
    switch (e->op->id) {
    case OP_SETEQUALS: /* has its own optimization, without evaluation */
    case OP_TOUUID:
        return 0;
    default:
        break;
    }
    for (size_t i = 0; i < e->nargs; i++)
        if (e->args[i] != NULL && !node_is_const(e->args[i]))
            return 0;
    if (mf_expr_eval(e, NULL, &out, err) < 0)
        return -1;
    mf_value_free(&out);
    e->folds = true;
    return 0;
}

static mf_expr_t *
parse_doc(const bson_value_t *v, const scope_t *sc, mf_error_t *err)
{
    bson_iter_t it;
    mf_expr_t *e;
    const char *first;

    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    if (!bson_iter_next(&it)) {
        e = node_new(K_OBJ);
        return e;
    }
    first = bson_iter_key(&it);
    if (first[0] == '$') {
        const op_def_t *op = find_op(first);
        bson_iter_t it2 = it;
        if (bson_iter_next(&it2)) {
            mf_err_set(err, MF_E_Location15983,
                       "an expression specification must contain exactly one field, the name of the expression. Found 2 fields in %s",
                       "the object");
            return NULL;
        }
        /* expression_function.cpp / expression_js_emit.cpp: no JavaScript in a validator, before anything else. */
        if (parsing_validator && strcmp(first, "$function") == 0) {
            mf_err_set(err, MF_E_Location4660800, "$function cannot be used inside a validator.");
            return NULL;
        }
        if (parsing_validator && strcmp(first, "$_internalJsEmit") == 0) {
            mf_err_set(err, MF_E_Location4660801, "$_internalJsEmit cannot be used inside a validator.");
            return NULL;
        }
        if (op == NULL) {
            mf_err_set(err, MF_E_InvalidPipelineOperator, "Unrecognized expression '%s'", first);
            return NULL;
        }
        if (op->id == OP_SIGMOID) {
            /* MongoDB desugars {$sigmoid: x} into {$divide: [1, {$add: [1, {$exp: {$multiply: [-1, x]}}]}]}. */
            bson_t d = BSON_INITIALIZER, a1, a2, a3, a4, e1, e2, e3;
            bson_value_t dv;
            BSON_APPEND_ARRAY_BEGIN(&d, "$divide", &a1);
            BSON_APPEND_INT32(&a1, "0", 1);
            BSON_APPEND_DOCUMENT_BEGIN(&a1, "1", &e1);
            BSON_APPEND_ARRAY_BEGIN(&e1, "$add", &a2);
            BSON_APPEND_INT32(&a2, "0", 1);
            BSON_APPEND_DOCUMENT_BEGIN(&a2, "1", &e2);
            BSON_APPEND_ARRAY_BEGIN(&e2, "$exp", &a3);
            BSON_APPEND_DOCUMENT_BEGIN(&a3, "0", &e3);
            BSON_APPEND_ARRAY_BEGIN(&e3, "$multiply", &a4);
            BSON_APPEND_INT32(&a4, "0", -1);
            bson_append_value(&a4, "1", 1, bson_iter_value(&it));
            bson_append_array_end(&e3, &a4);
            bson_append_document_end(&a3, &e3);
            bson_append_array_end(&e2, &a3);
            bson_append_document_end(&a2, &e2);
            bson_append_array_end(&e1, &a2);
            bson_append_document_end(&a1, &e1);
            bson_append_array_end(&d, &a1);
            mf_value_take_bson(&dv, &d, false);
            e = parse(&dv, sc, err);
            mf_value_free(&dv);
            return e;
        }
        e = node_new(K_OP);
        e->op = op;
        if (parse_op(e, bson_iter_value(&it), sc, err) < 0) {
            mf_expr_free(e);
            return NULL;
        }
        /* mongod's optimize() does both: what fails there fails its pipeline's optimization (mf_err_optimizing). */
        if (parse_constant_args(e, err) < 0 || fold_check(e, err) < 0) {
            mf_err_optimizing(err);
            mf_expr_free(e);
            return NULL;
        }
        return e;
    }
    e = node_new(K_OBJ);
    do {
        const char *k = bson_iter_key(&it);
        mf_expr_t *a;
        if (k[0] == '$') {
            mf_err_set(err, MF_E_Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.");
            mf_expr_free(e);
            return NULL;
        }
        if (strchr(k, '.') != NULL) {
            mf_err_set(err, MF_E_Location16412, "FieldPath field names may not contain '.'. Consider using $getField or $setField.");
            mf_expr_free(e);
            return NULL;
        }
        if (k[0] == '\0') {
            mf_err_set(err, MF_E_Location15998, "FieldPath field names may not be empty strings.");
            mf_expr_free(e);
            return NULL;
        }
        for (size_t i = 0; i < e->nkeys; i++)
            if (strcmp(e->keys[i], k) == 0) {
                mf_err_set(err, MF_E_Location16406, "duplicate field name specified in object literal: %s", k);
                mf_expr_free(e);
                return NULL;
            }
        a = parse(bson_iter_value(&it), sc, err);
        if (a == NULL) {
            mf_expr_free(e);
            return NULL;
        }
        add_key(e, k);
        add_arg(e, a);
    } while (bson_iter_next(&it));
    return e;
}

static mf_expr_t *
parse(const bson_value_t *v, const scope_t *sc, mf_error_t *err)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        return parse_string(v, sc, err);
    case BSON_TYPE_DOCUMENT:
        return parse_doc(v, sc, err);
    case BSON_TYPE_ARRAY: {
        bson_iter_t it;
        mf_expr_t *e = node_new(K_ARR);
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            mf_expr_t *a = parse(bson_iter_value(&it), sc, err);
            if (a == NULL) {
                mf_expr_free(e);
                return NULL;
            }
            add_arg(e, a);
        }
        return e;
    }
    default:
        return lit_new(v);
    }
}

mf_expr_t *
mf_expr_parse(const bson_value_t *v, mf_error_t *err)
{
    if (v == NULL) {
        mf_err_set(err, MF_E_BadValue, "missing expression");
        return NULL;
    }
    return parse(v, NULL, err);
}

mf_expr_t *
mf_expr_parse_path(const char *field, mf_error_t *err)
{
    char *path = bson_strdup_printf("$%s", field);
    bson_value_t pv;
    mf_expr_t *x;

    mf_value_set_type(&pv, BSON_TYPE_UTF8);
    pv.value.v_utf8.str = path;
    pv.value.v_utf8.len = (uint32_t)strlen(path);
    x = mf_expr_parse(&pv, err);
    bson_free(path);
    return x;
}

bool
mf_expr_is_constant(const mf_expr_t *e)
{
    if (e == NULL)
        return true;
    switch (e->kind) {
    case K_LIT:
        return true;
    case K_FIELD:
    case K_VAR:
        return false;
    default:
        if (e->kind == K_OP &&
            (e->op->id == OP_RAND || e->op->id == OP_META || (e->op->id == OP_GETFIELD && e->args[1] == NULL)))
            return false; /* $rand; a document's metadata ($meta); $getField of $$CURRENT */
        for (size_t i = 0; i < e->nargs; i++)
            if (!mf_expr_is_constant(e->args[i]))
                return false;
        return true;
    }
}

bool
mf_expr_reads_document(const mf_expr_t *e)
{
    if (e == NULL)
        return false;
    switch (e->kind) {
    case K_LIT:
        return false;
    case K_FIELD:
        return true;
    case K_VAR:
        return e->var == VAR_ROOT || e->var == VAR_CURRENT;
    default:
        if (e->kind == K_OP && (e->op->id == OP_META || (e->op->id == OP_GETFIELD && e->args[1] == NULL)))
            return true;
        for (size_t i = 0; i < e->nargs; i++)
            if (mf_expr_reads_document(e->args[i]))
                return true;
        return false;
    }
}

bool
mf_expr_doc_paths(const mf_expr_t *e, bool (*fn)(void *arg, const char *path), void *arg)
{
    if (e == NULL)
        return true;
    switch (e->kind) {
    case K_LIT:
        return true;
    case K_FIELD: {
        char buf[1024];
        size_t n = 0;
        for (size_t i = 0; i < e->npath; i++) {
            int w = snprintf(buf + n, sizeof buf - n, "%s%s", i > 0 ? "." : "", e->path[i]);
            if (w < 0 || (size_t)w >= sizeof buf - n)
                return false; /* too long to name: as if it read the document */
            n += (size_t)w;
        }
        return fn(arg, buf);
    }
    case K_VAR:
        return !(e->var == VAR_ROOT || e->var == VAR_CURRENT);
    default:
        if (e->kind == K_OP && (e->op->id == OP_META || (e->op->id == OP_GETFIELD && e->args[1] == NULL)))
            return false;
        for (size_t i = 0; i < e->nargs; i++)
            if (!mf_expr_doc_paths(e->args[i], fn, arg))
                return false;
        return true;
    }
}

/* ------------------------------------------------------------------------ */
/* Evaluation                                                               */
/* ------------------------------------------------------------------------ */

static int ev(const mf_expr_t *e, ctx_t *c, bson_value_t *o);
struct mf_tz;
static int date_from_string(ctx_t *c, const char *str, size_t len, const char *fmt, const mf_tz_t *z, bool tz_given,
                            int64_t *ms);

/*
 * walk_path: the aggregation field-path rule. Documents are descended by
 * name; an array met on the way yields the array of the rest of the path
 * applied to each element (documents and nested arrays; other elements and
 * missing results are skipped).
 */
static void
walk_path(const bson_value_t *v, char *const *path, size_t n, bson_value_t *o)
{
    bson_iter_t it;

    if (n == 0) {
        mf_value_copy(o, v);
        return;
    }
    if (v->value_type == BSON_TYPE_DOCUMENT) {
        if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) &&
            bson_iter_find(&it, path[0])) {
            walk_path(bson_iter_value(&it), path + 1, n - 1, o);
            return;
        }
        mf_value_set_missing(o);
        return;
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
        mf_value_array_t ab;
        mf_value_array_init(&ab);
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            const bson_value_t *ev_ = bson_iter_value(&it);
            bson_value_t r;
            if (ev_->value_type != BSON_TYPE_DOCUMENT && ev_->value_type != BSON_TYPE_ARRAY)
                continue;
            walk_path(ev_, path, n, &r);
            if (r.value_type != BSON_TYPE_EOD)
                mf_value_array_push(&ab, &r);
            mf_value_free(&r);
        }
        mf_value_array_finish(&ab, o);
        return;
    }
    mf_value_set_missing(o);
}

static const bson_value_t *
lookup_var(const ctx_t *c, const char *name)
{
    const mf_expr_vars_t *f;
    size_t i;

    for (const binding_t *b = c->vars; b; b = b->up)
        if (strcmp(b->name, name) == 0)
            return b->val;
    f = ambient_find(name, strlen(name), &i);
    if (f != NULL && f->vals != NULL)
        return &f->vals[i];
    return NULL;
}

/* eval_args: evaluates every argument of e into a fresh array vals (caller frees with free_vals). */
static int
eval_args(const mf_expr_t *e, ctx_t *c, bson_value_t **vals)
{
    bson_value_t *v = bson_malloc0((e->nargs ? e->nargs : 1) * sizeof *v);

    for (size_t i = 0; i < e->nargs; i++)
        mf_value_set_missing(&v[i]);
    for (size_t i = 0; i < e->nargs; i++) {
        if (e->args[i] && ev(e->args[i], c, &v[i]) < 0) {
            for (size_t j = 0; j < i; j++)
                mf_value_free(&v[j]);
            bson_free(v);
            return -1;
        }
    }
    *vals = v;
    return 0;
}

static void
free_vals(bson_value_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mf_value_free(&v[i]);
    bson_free(v);
}

/* get_date: coerces v to ms since epoch (date, timestamp, ObjectId); false otherwise. */
static bool
get_date(const bson_value_t *v, int64_t *ms)
{
    switch (v->value_type) {
    case BSON_TYPE_DATE_TIME:
        *ms = v->value.v_datetime;
        return true;
    case BSON_TYPE_TIMESTAMP:
        *ms = (int64_t)v->value.v_timestamp.timestamp * 1000;
        return true;
    case BSON_TYPE_OID:
        *ms = (int64_t)bson_oid_get_time_t(&v->value.v_oid) * 1000;
        return true;
    default:
        return false;
    }
}

/* ---- arithmetic ---- */

/*
 * dec_round_i64: Decimal128::toLong (round half to even) of dv; false where
 * it raises the invalid flag: NaN, infinity, or outside the int64 range.
 */
static bool
dec_round_i64(const bson_decimal128_t *dv, int64_t *out)
{
    const unsigned __int128 limit = (unsigned __int128)1 << 63;
    const unsigned __int128 max_coef = (unsigned __int128)10000000000000000ULL * 1000000000000000000ULL; /* 10^34 */
    unsigned __int128 coef = 0, p = 1, q, r;
    bool neg = (dv->high >> 63) != 0;
    int exp = 0;

    if (((dv->high >> 59) & 0xF) == 0xF)
        return false; /* infinity or NaN */
    if (((dv->high >> 61) & 3) != 3) {
        exp = (int)((dv->high >> 49) & 0x3FFF) - 6176;
        coef = ((unsigned __int128)(dv->high & 0x1FFFFFFFFFFFFULL) << 64) | dv->low;
        if (coef >= max_coef)
            coef = 0; /* a non-canonical coefficient is zero */
    }
    if (exp < -34) {
        coef = 0; /* below 10^34 / 10^35: rounds to zero */
    } else if (exp < 0) {
        for (int i = 0; i < -exp; i++)
            p *= 10;
        q = coef / p;
        r = coef % p;
        if (2 * r > p || (2 * r == p && (q & 1)))
            q++;
        coef = q;
    } else {
        for (int i = 0; i < exp && coef != 0; i++) {
            if (coef > limit)
                return false;
            coef *= 10;
        }
    }
    if (coef > limit || (!neg && coef == limit))
        return false;
    *out = neg ? (int64_t)(0 - (uint64_t)coef) : (int64_t)coef;
    return true;
}

/*
 * date_ms_of: a number as the whole milliseconds mongod adds to or subtracts
 * from a date (AddState::addToDateValue, and the Date branch of $subtract in
 * exec/expression/evaluate_math.cpp): an integer as is, a double through
 * llround (half away from zero: 0.5 -> 1, 1.5 -> 2, -0.5 -> -1), a decimal
 * through Decimal128::toLong (half to even: 1.5 -> 2, 2.5 -> 2). A double
 * outside [-2^63, 2^63) or NaN, or a decimal that is NaN, infinite or beyond
 * int64, is 15 Overflow "date overflow". Returns 0 or -1.
 */
static int
date_ms_of(ctx_t *c, const bson_value_t *v, int64_t *x)
{
    double d;

    switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
        *x = as_i64(v);
        return 0;
    case BSON_TYPE_DOUBLE:
        d = v->value.v_double;
        /* The upper bound is exclusive: (double)INT64_MAX rounds up to 2^63. */
        if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
            return mf_err_set(c->err, MF_E_Overflow, "date overflow");
        *x = (int64_t)llround(d);
        return 0;
    default:
        if (!dec_round_i64(&v->value.v_decimal128, x))
            return mf_err_set(c->err, MF_E_Overflow, "date overflow");
        return 0;
    }
}

/* date_add_ms: mongod's AddState::addToDateValue: *ms += v (a number, see date_ms_of), or 15 "date overflow". */
static int
date_add_ms(ctx_t *c, int64_t *ms, const bson_value_t *v)
{
    int64_t x;

    if (date_ms_of(c, v, &x) < 0)
        return -1;
    if (__builtin_add_overflow(*ms, x, ms))
        return mf_err_set(c->err, MF_E_Overflow, "date overflow");
    return 0;
}

/*
 * ev_add: mongod's ExpressionAdd, one operand at a time: nullish gives null,
 * a non-number 16554. The operands before a date are summed in their own
 * type; at the date that sum, then the date, then each later operand joins
 * the milliseconds through date_add_ms (so [$dec, $dbl, $long, $date] rounds
 * once, [$date, $dec, $dbl, $long] rounds each).
 */
static int
ev_add(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t *v, pre;
    num_t n;
    bool have_date = false, null = false;
    int64_t date = 0;
    int rc = 0;

    if (eval_args(e, c, &v) < 0)
        return -1;
    num_init(&n, 0);
    for (size_t i = 0; i < e->nargs && !null && rc == 0; i++) {
        if (mf_value_is_nullish(&v[i])) {
            null = true;
        } else if (v[i].value_type == BSON_TYPE_DATE_TIME) {
            if (have_date) {
                rc = mf_err_set(c->err, MF_E_Location16612, "only one date allowed in an $add expression");
                break;
            }
            have_date = true;
            num_result(&n, &pre);
            rc = date_add_ms(c, &date, &pre);
            mf_value_free(&pre);
            if (rc == 0 && __builtin_add_overflow(date, v[i].value.v_datetime, &date))
                rc = mf_err_set(c->err, MF_E_Overflow, "date overflow");
        } else if (mf_value_is_number(&v[i])) {
            if (have_date)
                rc = date_add_ms(c, &date, &v[i]);
            else
                num_add(&n, &v[i]);
        } else {
            rc = mf_err_set(c->err, MF_E_TypeMismatch, "$add only supports numeric or date types, not %s",
                            tname(&v[i]));
        }
    }
    free_vals(v, e->nargs);
    if (rc < 0)
        return -1;
    if (null)
        mf_value_set_null(o);
    else if (have_date)
        mf_value_set_date(o, date);
    else
        num_result(&n, o);
    return 0;
}

static int
ev_multiply(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t *v;
    num_t n;
    bool null = false;

    if (eval_args(e, c, &v) < 0)
        return -1;
    num_init(&n, 1);
    for (size_t i = 0; i < e->nargs && !null; i++) {
        if (mf_value_is_nullish(&v[i])) {
            null = true;
        } else if (mf_value_is_number(&v[i])) {
            num_mul(&n, &v[i]);
        } else {
            int rc = mf_err_set(c->err, MF_E_TypeMismatch, "$multiply only supports numeric types, not %s",
                                tname(&v[i]));
            free_vals(v, e->nargs);
            return rc;
        }
    }
    free_vals(v, e->nargs);
    if (null)
        mf_value_set_null(o);
    else
        num_result(&n, o);
    return 0;
}

static int
ev_subtract(const bson_value_t *a, const bson_value_t *b, ctx_t *c, bson_value_t *o)
{
    if (mf_value_is_nullish(a) || mf_value_is_nullish(b)) {
        mf_value_set_null(o);
        return 0;
    }
    if (mf_value_is_number(a) && mf_value_is_number(b)) {
        num_t n;
        num_init(&n, 0);
        num_add(&n, a);
        /* Subtract b: exact in int64 when possible. */
        int r = num_rank(b);
        if (r == 3 || n.rank == 3) {
            bson_decimal128_t x, y;
            (void)mf_dec_from_value(a, 15, &x);
            (void)mf_dec_from_value(b, 15, &y);
            mf_value_set_type(o, BSON_TYPE_DECIMAL128);
            mf_dec_arith(MF_DEC_SUB, &x, &y, &o->value.v_decimal128);
            return 0;
        }
        if (r > n.rank)
            n.rank = r;
        if (n.rank <= 1 && !n.overflowed) {
            int64_t s;
            if (__builtin_sub_overflow(n.l, as_i64(b), &s)) {
                n.overflowed = true;
                n.d = (double)n.l - (double)as_i64(b);
            } else {
                n.l = s;
            }
        } else {
            n.overflowed = true;
            n.d = as_dbl(a) - as_dbl(b);
        }
        num_result(&n, o);
        return 0;
    }
    if (a->value_type == BSON_TYPE_DATE_TIME) {
        if (b->value_type == BSON_TYPE_DATE_TIME) {
            mf_value_set_int64(o, (int64_t)((uint64_t)a->value.v_datetime - (uint64_t)b->value.v_datetime));
            return 0;
        }
        if (mf_value_is_number(b)) {
            /*
             * mongod's evaluateSubtract (exec/expression/evaluate_math.cpp): the number becomes whole
             * milliseconds as $add's do (date_ms_of: a double half away from zero, a decimal half to
             * even), and a result beyond int64 is 15 "date overflow", not a wrapped date.
             */
            int64_t x, r;
            if (date_ms_of(c, b, &x) < 0)
                return -1;
            if (__builtin_sub_overflow(a->value.v_datetime, x, &r))
                return mf_err_set(c->err, MF_E_Overflow, "date overflow");
            mf_value_set_date(o, r);
            return 0;
        }
        return mf_err_set(c->err, MF_E_TypeMismatch, "can't $subtract %s from Date", tname(b));
    }
    return mf_err_set(c->err, MF_E_TypeMismatch, "can't $subtract %s from %s", tname(b), tname(a));
}

static int
ev_divide(const bson_value_t *a, const bson_value_t *b, ctx_t *c, bson_value_t *o)
{
    if (mf_value_is_nullish(a) || mf_value_is_nullish(b)) {
        mf_value_set_null(o);
        return 0;
    }
    if (!mf_value_is_number(a) || !mf_value_is_number(b))
        return mf_err_set(c->err, MF_E_TypeMismatch, "$divide only supports numeric types, not %s and %s", tname(a),
                          tname(b));
    if (num_sign(b) == 0)
        return mf_err_set(c->err, MF_E_BadValue, "can't $divide by zero");
    if (a->value_type == BSON_TYPE_DECIMAL128 || b->value_type == BSON_TYPE_DECIMAL128) {
        bson_decimal128_t x, y;
        (void)mf_dec_from_value(a, 15, &x);
        (void)mf_dec_from_value(b, 15, &y);
        mf_value_set_type(o, BSON_TYPE_DECIMAL128);
        mf_dec_arith(MF_DEC_DIV, &x, &y, &o->value.v_decimal128);
        return 0;
    }
    mf_value_set_double(o, as_dbl(a) / as_dbl(b));
    return 0;
}

static int
ev_mod(const bson_value_t *a, const bson_value_t *b, ctx_t *c, bson_value_t *o)
{
    int ra, rb;

    if (mf_value_is_nullish(a) || mf_value_is_nullish(b)) {
        mf_value_set_null(o);
        return 0;
    }
    if (!mf_value_is_number(a) || !mf_value_is_number(b))
        return mf_err_set(c->err, MF_E_Location16611, "$mod only supports numeric types, not %s and %s", tname(a),
                          tname(b));
    if (num_sign(b) == 0)
        return mf_err_set(c->err,
                          a->value_type == BSON_TYPE_DECIMAL128 || b->value_type == BSON_TYPE_DECIMAL128
                              ? MF_E_Location5733415
                              : MF_E_Location16610,
                          "can't $mod by zero");
    ra = num_rank(a);
    rb = num_rank(b);
    if (ra <= 1 && rb <= 1) {
        int64_t x = as_i64(a), y = as_i64(b);
        int64_t r = (y == -1) ? 0 : x % y;
        if (ra == 0 && rb == 0)
            mf_value_set_int32(o, (int32_t)r);
        else
            mf_value_set_int64(o, r);
        return 0;
    }
    if (ra == 3 || rb == 3) {
        dec_binary(mf_dec_fmod, a, b, o); /* exact, as mongod's Decimal128::modulo */
        return 0;
    }
    mf_value_set_double(o, fmod(as_dbl(a), as_dbl(b)));
    return 0;
}

/*
 * unary_num: the argument of a one-number math operator: 1 with o null when a
 * is nullish, -1 (28765) when it is not a number, else 0 with *x its value.
 */
static int
unary_num(const char *name, const bson_value_t *a, ctx_t *c, bson_value_t *o, double *x)
{
    if (mf_value_is_nullish(a)) {
        mf_value_set_null(o);
        return 1;
    }
    if (!mf_value_is_number(a))
        return mf_err_set(c->err, MF_E_Location28765, "%s only supports numeric types, not %s", name, tname(a));
    *x = as_dbl(a);
    return 0;
}

static int
ev_unary_math(int op, const char *name, const bson_value_t *a, ctx_t *c, bson_value_t *o)
{
    double x;
    int r;

    if ((r = unary_num(name, a, c, o, &x)) != 0)
        return r > 0 ? 0 : -1;
    switch (op) {
    case OP_ABS:
        if (a->value_type == BSON_TYPE_INT32) {
            if (a->value.v_int32 == INT32_MIN)
                mf_value_set_int64(o, -(int64_t)INT32_MIN);
            else
                mf_value_set_int32(o, abs(a->value.v_int32));
            return 0;
        }
        if (a->value_type == BSON_TYPE_INT64) {
            if (a->value.v_int64 == INT64_MIN)
                return mf_err_set(c->err, MF_E_Location28680, "can't take $abs of long long min");
            mf_value_set_int64(o, a->value.v_int64 < 0 ? -a->value.v_int64 : a->value.v_int64);
            return 0;
        }
        if (a->value_type == BSON_TYPE_DECIMAL128) {
            mf_value_copy(o, a);
            o->value.v_decimal128.high &= ~(1ULL << 63); /* the sign bit: exact */
            return 0;
        }
        x = fabs(x);
        break;
    case OP_CEIL:
    case OP_FLOOR:
        if (a->value_type == BSON_TYPE_INT32 || a->value_type == BSON_TYPE_INT64) {
            mf_value_copy(o, a);
            return 0;
        }
        if (a->value_type == BSON_TYPE_DECIMAL128) {
            mf_value_set_type(o, BSON_TYPE_DECIMAL128);
            mf_dec_quantize(&a->value.v_decimal128, 0, op == OP_CEIL ? MF_DEC_CEIL : MF_DEC_FLOOR,
                            &o->value.v_decimal128);
            return 0;
        }
        x = op == OP_CEIL ? ceil(x) : floor(x);
        break;
    case OP_SQRT:
        if (num_sign(a) == -1)
            return mf_err_set(c->err, MF_E_Location28714, "$sqrt's argument must be greater than or equal to 0");
        x = sqrt(x);
        break;
    case OP_EXP:
        x = exp(x);
        break;
    case OP_LN:
        if (num_sign(a) == -1 || num_sign(a) == 0)
            return mf_err_set(c->err, MF_E_Location28766, "$ln's argument must be a positive number, but is %g", x);
        x = log(x);
        break;
    case OP_LOG10:
        if (num_sign(a) == -1 || num_sign(a) == 0)
            return mf_err_set(c->err, MF_E_Location28761, "$log10's argument must be a positive number, but is %g", x);
        x = log10(x);
        break;
    default:
        break;
    }
    if (a->value_type == BSON_TYPE_DECIMAL128 && (op == OP_SQRT || op == OP_EXP || op == OP_LN || op == OP_LOG10)) {
        /* In decimal, to 34 digits, as mongod's Decimal128::squareRoot, exponential and logarithm. */
        mf_value_set_type(o, BSON_TYPE_DECIMAL128);
        mf_dec_math(op == OP_SQRT ? MF_DEC_SQRT : op == OP_EXP ? MF_DEC_EXP : op == OP_LN ? MF_DEC_LN : MF_DEC_LOG10,
                    &a->value.v_decimal128, &o->value.v_decimal128);
        return 0;
    }
    mf_value_set_double(o, x); /* a decimal argument was answered above */
    return 0;
}

/*
 * ev_trig: the trigonometric family (mongod's expression_trigonometric.cpp). Nullish answers null, a non-number
 * 28765; the bounded functions refuse an argument outside their domain with 50989 (NaN passes through); the result
 * is a double, or a decimal for a decimal argument.
 */
static int
ev_trig(int op, const char *name, const bson_value_t *a, ctx_t *c, bson_value_t *o)
{
    double x, lo = -INFINITY, hi = INFINITY, r;
    int rc;
    bool inclusive = false, bounded = true;
    char xb[64], lb[16], hb[16];

    if ((rc = unary_num(name, a, c, o, &x)) != 0)
        return rc > 0 ? 0 : -1;
    switch (op) {
    case OP_ASIN:
    case OP_ACOS:
    case OP_ATANH: lo = -1, hi = 1, inclusive = true; break;
    case OP_ACOSH: lo = 1, inclusive = true; break;
    case OP_SIN:
    case OP_COS:
    case OP_TAN: break;
    default: bounded = false; break;
    }
    if (bounded && !isnan(x) &&
        !(inclusive ? (x >= lo && x <= hi) : (x > lo && x < hi))) {
        if (isinf(x))
            snprintf(xb, sizeof xb, "%s", x > 0 ? "inf" : "-inf");
        else
            fmt_double(x, xb, sizeof xb);
        snprintf(lb, sizeof lb, isinf(lo) ? "-inf" : "%g", lo);
        snprintf(hb, sizeof hb, isinf(hi) ? "inf" : "%g", hi);
        return mf_err_set(c->err, MF_E_Location50989, "cannot apply %s to %s, value must in %s%s,%s%s", name, xb,
                          inclusive ? "[" : "(", lb, hb, inclusive ? "]" : ")");
    }
    if (bounded && isnan(x)) {
        mf_value_copy(o, a);
        return 0;
    }
    if (a->value_type == BSON_TYPE_DECIMAL128) {
        /* In decimal, to 34 digits, as mongod's Decimal128::sin ... and its kPiOver180 / k180OverPi factors. */
        static const mf_dec_fn_t fns[] = {[OP_SIN - OP_SIN] = MF_DEC_SIN,     [OP_COS - OP_SIN] = MF_DEC_COS,
                                          [OP_TAN - OP_SIN] = MF_DEC_TAN,     [OP_ASIN - OP_SIN] = MF_DEC_ASIN,
                                          [OP_ACOS - OP_SIN] = MF_DEC_ACOS,   [OP_ATAN - OP_SIN] = MF_DEC_ATAN,
                                          [OP_ASINH - OP_SIN] = MF_DEC_ASINH, [OP_ACOSH - OP_SIN] = MF_DEC_ACOSH,
                                          [OP_ATANH - OP_SIN] = MF_DEC_ATANH, [OP_SINH - OP_SIN] = MF_DEC_SINH,
                                          [OP_COSH - OP_SIN] = MF_DEC_COSH,   [OP_TANH - OP_SIN] = MF_DEC_TANH};
        mf_value_set_type(o, BSON_TYPE_DECIMAL128);
        if (op == OP_DEGREESTORADIANS || op == OP_RADIANSTODEGREES)
            mf_dec_angle(op == OP_DEGREESTORADIANS, &a->value.v_decimal128, &o->value.v_decimal128);
        else
            mf_dec_math(fns[op - OP_SIN], &a->value.v_decimal128, &o->value.v_decimal128);
        return 0;
    }
    switch (op) {
    case OP_SIN: r = sin(x); break;
    case OP_COS: r = cos(x); break;
    case OP_TAN: r = tan(x); break;
    case OP_ASIN: r = asin(x); break;
    case OP_ACOS: r = acos(x); break;
    case OP_ATAN: r = atan(x); break;
    case OP_ASINH: r = asinh(x); break;
    case OP_ACOSH: r = acosh(x); break;
    case OP_ATANH: r = atanh(x); break;
    case OP_SINH: r = sinh(x); break;
    case OP_COSH: r = cosh(x); break;
    case OP_TANH: r = tanh(x); break;
    case OP_DEGREESTORADIANS: r = x * (3.141592653589793 / 180.0); break;
    default: r = x * (180.0 / 3.141592653589793); break;
    }
    mf_value_set_double(o, r); /* a decimal argument was answered above */
    return 0;
}

static int
cmpv_asc(const void *a, const void *b)
{
    return cmpv((const bson_value_t *)a, (const bson_value_t *)b);
}

static int
cmpv_desc(const void *a, const void *b)
{
    return cmpv((const bson_value_t *)b, (const bson_value_t *)a);
}

/*
 * ev_nacc: $firstN/$lastN/$minN/$maxN over an array (mongod's ExpressionFromAccumulatorN): 'n' first (5787902
 * not a number, 5787903 not integral, 5787908 not positive), then the input must be an array (5788200). $minN and
 * $maxN skip nullish elements and answer ascending / descending.
 */
static int
ev_nacc(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    int op = e->op->id;
    bson_value_t nv, in;
    int64_t n = 0;
    double d;
    char vb[128];
    int rc = 0;

    if (ev(e->args[0], c, &nv) < 0)
        return -1;
    value_str(&nv, vb, sizeof vb);
    if (!mf_value_is_number(&nv)) {
        rc = mf_err_set(c->err, MF_E_Location5787902, "Value for 'n' must be of integral type, but found %s", vb);
    } else if (d = as_dbl(&nv), !(d == floor(d) && fabs(d) < 9.2e18)) {
        rc = mf_err_set(c->err, MF_E_Location5787903, "Value for 'n' must be of integral type, but found %s", vb);
    } else if ((n = nv.value_type == BSON_TYPE_INT64 ? nv.value.v_int64 : (int64_t)d) <= 0) {
        rc = mf_err_set(c->err, MF_E_Location5787908, "'n' must be greater than 0, found %" PRId64, n);
    }
    mf_value_free(&nv);
    if (rc < 0)
        return rc;
    if (ev(e->args[1], c, &in) < 0)
        return -1;
    if (in.value_type != BSON_TYPE_ARRAY) {
        mf_value_free(&in);
        return mf_err_set(c->err, MF_E_Location5788200, "Input must be an array");
    }
    elems_t el;
    mf_value_array_t ab;
    elems_of(&in, &el);
    mf_value_array_init(&ab);
    if (op == OP_FIRSTN || op == OP_LASTN) {
        size_t cnt = (uint64_t)n < el.n ? (size_t)n : el.n;
        size_t from = op == OP_FIRSTN ? 0 : el.n - cnt;
        for (size_t i = from; i < from + cnt; i++)
            mf_value_array_push(&ab, &el.v[i]);
    } else {
        bson_value_t *keep = bson_malloc((el.n ? el.n : 1) * sizeof *keep);
        size_t k = 0;
        for (size_t i = 0; i < el.n; i++)
            if (!mf_value_is_nullish(&el.v[i]))
                keep[k++] = el.v[i];
        qsort(keep, k, sizeof *keep, op == OP_MINN ? cmpv_asc : cmpv_desc);
        for (size_t i = 0; i < k && (int64_t)i < n; i++)
            mf_value_array_push(&ab, &keep[i]);
        bson_free(keep);
    }
    mf_value_array_finish(&ab, o);
    elems_free(&el);
    mf_value_free(&in);
    return 0;
}

/* ev_atan2: mongod's two-numeric-argument form: each operand in turn, nullish -> null, else 51044 / 51045. */
static int
ev_atan2(const bson_value_t *y, const bson_value_t *x, ctx_t *c, bson_value_t *o)
{
    const bson_value_t *v[2] = {y, x};

    for (int i = 0; i < 2; i++) {
        if (mf_value_is_nullish(v[i])) {
            mf_value_set_null(o);
            return 0;
        }
        if (!mf_value_is_number(v[i]))
            return mf_err_set(c->err, i == 0 ? MF_E_Location51044 : MF_E_Location51045,
                              "$atan2 only supports numeric types, not %s", tname(v[i]));
    }
    if (y->value_type == BSON_TYPE_DECIMAL128 || x->value_type == BSON_TYPE_DECIMAL128) {
        dec_binary(mf_dec_atan2, y, x, o);
        return 0;
    }
    mf_value_set_double(o, atan2(as_dbl(y), as_dbl(x)));
    return 0;
}

static int
ev_round(int op, const bson_value_t *a, const bson_value_t *p, ctx_t *c, bson_value_t *o)
{
    int64_t place = 0;
    const char *name = op == OP_ROUND ? "$round" : "$trunc";

    if (mf_value_is_nullish(a)) {
        mf_value_set_null(o);
        return 0;
    }
    if (!mf_value_is_number(a))
        return mf_err_set(c->err, MF_E_Location51081, "%s only supports numeric types, not %s", name, tname(a));
    if (p && mf_value_is_nullish(p)) {
        mf_value_set_null(o);
        return 0;
    }
    /* mongod coerces the precision to a long (16004 for a non-number) before it checks that it is integral. */
    if (p && !mf_value_is_number(p))
        return mf_err_set(c->err, MF_E_Location16004, "can't convert from BSON type %s to long", tname(p));
    if (p && !mf_value_as_int64(p, &place))
        return mf_err_set(c->err, MF_E_Location51082, "precision argument to  %s must be a integral value", name);
    if (p && (place < -20 || place > 100))
        return mf_err_set(c->err, MF_E_Location51083,
                          "cannot apply %s with precision value %" PRId64 " value must be in [-20, 100]", name, place);
    if (a->value_type == BSON_TYPE_DECIMAL128) {
        /* Quantized to 10^-place in decimal, as mongod: half to even for $round, toward zero for $trunc. */
        mf_value_set_type(o, BSON_TYPE_DECIMAL128);
        mf_dec_quantize(&a->value.v_decimal128, (int)place, op == OP_ROUND ? MF_DEC_HALF_EVEN : MF_DEC_TRUNC,
                        &o->value.v_decimal128);
        return 0;
    }
    /*
     * mongod (evaluateRoundOrTrunc): a double is rounded as its 34-digit
     * decimal is, then converted back; an integer with a negative place is
     * quantized as a decimal, and becomes a long when the result leaves the
     * int range (51080 when it leaves the long range).
     */
    mf_dec_round_t mode = op == OP_ROUND ? MF_DEC_HALF_EVEN : MF_DEC_TRUNC;
    bson_decimal128_t d, q;
    if (a->value_type == BSON_TYPE_DOUBLE) {
        if (isinf(a->value.v_double)) {
            mf_value_copy(o, a);
            return 0;
        }
        mf_dec_from_double(a->value.v_double, 34, &d);
        mf_dec_quantize(&d, (int)place, mode, &q);
        mf_value_set_double(o, mf_dec_to_double(&q));
        return 0;
    }
    if (place >= 0) {
        mf_value_copy(o, a);
        return 0;
    }
    int64_t in = as_i64(a), out;
    mf_dec_from_int64(in, &d);
    mf_dec_quantize(&d, (int)place, mode, &q);
    if (!mf_dec_to_int64(&q, &out))
        return mf_err_set(c->err, MF_E_Location51080,
                          "invalid conversion from Decimal128 result in %s resulting from arguments: [%" PRId64
                          ", %" PRId64 "]",
                          name, in, place);
    if (a->value_type == BSON_TYPE_INT32 && out >= INT32_MIN && out <= INT32_MAX)
        mf_value_set_int32(o, (int32_t)out);
    else
        mf_value_set_int64(o, out);
    return 0;
}

static int
ev_pow(const bson_value_t *a, const bson_value_t *b, ctx_t *c, bson_value_t *o)
{
    if (mf_value_is_nullish(a) || mf_value_is_nullish(b)) {
        mf_value_set_null(o);
        return 0;
    }
    if (!mf_value_is_number(a))
        return mf_err_set(c->err, MF_E_Location28762, "$pow's base must be numeric, not %s", tname(a));
    if (!mf_value_is_number(b))
        return mf_err_set(c->err, MF_E_Location28763, "$pow's exponent must be numeric, not %s", tname(b));
    if (num_sign(a) == 0 && num_sign(b) == -1)
        return mf_err_set(c->err, MF_E_Location28764, "$pow cannot take a base of 0 and a negative exponent");
    int ra = num_rank(a), rb = num_rank(b);
    if (ra <= 1 && rb <= 1) {
        int64_t base = as_i64(a), ex = as_i64(b), r = 1;
        bool ovf = false;
        if (ex < 0) {
            /* Integer base to a negative power: only 1 and -1 stay integral. */
            if (base == 1 || base == -1) {
                r = (base == -1 && (ex % 2)) ? -1 : 1;
            } else {
                mf_value_set_double(o, pow((double)base, (double)ex));
                return 0;
            }
        } else {
            for (int64_t i = 0; i < ex && !ovf; i++) {
                if (__builtin_mul_overflow(r, base, &r))
                    ovf = true;
                if (r == 0 || r == 1)
                    break;
            }
        }
        if (ovf) {
            mf_value_set_double(o, pow((double)base, (double)ex));
        } else if (ra == 0 && rb == 0 && r >= INT32_MIN && r <= INT32_MAX) {
            mf_value_set_int32(o, (int32_t)r);
        } else {
            mf_value_set_int64(o, r);
        }
        return 0;
    }
    if (ra == 3 || rb == 3) {
        dec_binary(mf_dec_pow, a, b, o); /* as mongod's Decimal128::power */
        return 0;
    }
    mf_value_set_double(o, pow(as_dbl(a), as_dbl(b)));
    return 0;
}

/* ---- arrays ---- */

/* array_arg: checks v is an array; nullish → *is_null. */
static int
ev_array_elem_at(const char *name, const bson_value_t *a, const bson_value_t *idx, ctx_t *c, bson_value_t *o)
{
    int64_t i;
    elems_t el;

    if (mf_value_is_nullish(a) || mf_value_is_nullish(idx)) {
        mf_value_set_null(o);
        return 0;
    }
    if (a->value_type != BSON_TYPE_ARRAY)
        return mf_err_set(c->err, MF_E_Location28689, "%s's first argument must be an array, but is %s", name,
                          tname(a));
    if (!mf_value_is_number(idx))
        return mf_err_set(c->err, MF_E_Location28690, "%s's second argument must be a numeric value, but is %s",
                          name, tname(idx));
    if (!mf_value_as_int64(idx, &i) || i < INT32_MIN || i > INT32_MAX)
        return mf_err_set(c->err, MF_E_Location28691,
                          "%s's second argument must be representable as a 32-bit integer: %g", name, as_dbl(idx));
    elems_of(a, &el);
    if (i < 0)
        i += (int64_t)el.n;
    if (i < 0 || i >= (int64_t)el.n)
        mf_value_set_missing(o);
    else
        mf_value_copy(o, &el.v[i]);
    elems_free(&el);
    return 0;
}

static int
ev_first_last(bool first, const bson_value_t *a, ctx_t *c, bson_value_t *o)
{
    elems_t el;

    if (mf_value_is_nullish(a)) {
        mf_value_set_null(o);
        return 0;
    }
    if (a->value_type != BSON_TYPE_ARRAY)
        return mf_err_set(c->err, MF_E_Location28689, "%s's argument must be an array, but is %s",
                          first ? "$first" : "$last", tname(a));
    elems_of(a, &el);
    if (el.n == 0)
        mf_value_set_missing(o);
    else
        mf_value_copy(o, &el.v[first ? 0 : el.n - 1]);
    elems_free(&el);
    return 0;
}

/* is_int32_integral: a number with an integral value that fits in 32 bits (mongod's Value::integral()). */
static bool
is_int32_integral(const bson_value_t *v)
{
    int64_t x;

    return mf_value_is_number(v) && mf_value_as_int64(v, &x) && x >= INT32_MIN && x <= INT32_MAX;
}

static int
ev_slice(const bson_value_t *v, size_t n, ctx_t *c, bson_value_t *o)
{
    int64_t pos = 0, cnt;
    elems_t el;
    mf_value_array_t ab;

    /* mongod: array and position nullish first, then their types, then the count's nullishness and type. */
    if (mf_value_is_nullish(&v[0]) || mf_value_is_nullish(&v[1])) {
        mf_value_set_null(o);
        return 0;
    }
    if (v[0].value_type != BSON_TYPE_ARRAY)
        return mf_err_set(c->err, MF_E_Location28724, "First argument to $slice must be an array, but is of type: %s",
                          tname(&v[0]));
    if (!mf_value_is_number(&v[1]))
        return mf_err_set(c->err, MF_E_Location28725,
                          "Second argument to $slice must be a numeric value, but is of type: %s", tname(&v[1]));
    if (!is_int32_integral(&v[1]))
        return mf_err_set(c->err, MF_E_Location28726, "Second argument to $slice can't be represented as a 32-bit integer: %g",
                          as_dbl(&v[1]));
    if (n > 2) {
        if (mf_value_is_nullish(&v[2])) {
            mf_value_set_null(o);
            return 0;
        }
        if (!mf_value_is_number(&v[2]))
            return mf_err_set(c->err, MF_E_Location28727, "Third argument to $slice must be numeric, but is of type: %s",
                              tname(&v[2]));
        if (!is_int32_integral(&v[2]))
            return mf_err_set(c->err, MF_E_Location28728,
                              "Third argument to $slice can't be represented as a 32-bit integer: %g", as_dbl(&v[2]));
    }
    elems_of(&v[0], &el);
    int64_t len = (int64_t)el.n;
    if (n == 2) {
        mf_value_as_int64(&v[1], &cnt);
        if (cnt >= 0) {
            pos = 0;
        } else {
            pos = len + cnt;
            if (pos < 0)
                pos = 0;
            cnt = -cnt;
        }
    } else {
        mf_value_as_int64(&v[1], &pos);
        mf_value_as_int64(&v[2], &cnt);
        if (cnt <= 0) {
            elems_free(&el);
            return mf_err_set(c->err, MF_E_Location28729, "Third argument to $slice must be positive: %" PRId64, cnt);
        }
        if (pos < 0) {
            pos = len + pos;
            if (pos < 0)
                pos = 0;
        }
    }
    mf_value_array_init(&ab);
    for (int64_t i = pos; i < len && i - pos < cnt; i++)
        mf_value_array_push(&ab, &el.v[i]);
    mf_value_array_finish(&ab, o);
    elems_free(&el);
    return 0;
}

/* arg_is_const: operand i of e is a constant mongod would fold at optimization (a literal, $literal, or an array
 * literal of constants). */
static bool
node_is_const(const mf_expr_t *a)
{
    if (a == NULL)
        return false;
    if (a->kind == K_LIT || (a->kind == K_OP && (a->op->id == OP_LITERAL || a->folds)))
        return true;
    if (a->kind == K_ARR) {
        for (size_t i = 0; i < a->nargs; i++)
            if (!node_is_const(a->args[i]))
                return false;
        return true;
    }
    return false;
}

static bool
arg_is_const(const mf_expr_t *e, size_t i)
{
    return i < e->nargs && node_is_const(e->args[i]);
}

/* set_add: appends v to ab unless an equal value is already in seen (borrowed list). */
static void
set_add(mf_value_array_t *ab, elems_t *seen, size_t *cap, const bson_value_t *v)
{
    for (size_t i = 0; i < seen->n; i++)
        if (cmpv(&seen->v[i], v) == 0)
            return;
    if (seen->n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        seen->v = bson_realloc(seen->v, *cap * sizeof *seen->v);
    }
    seen->v[seen->n++] = *v;
    mf_value_array_push(ab, v);
}

static bool
arr_contains(const elems_t *el, const bson_value_t *v)
{
    for (size_t i = 0; i < el->n; i++)
        if (cmpv(&el->v[i], v) == 0)
            return true;
    return false;
}

static int
ev_sets(const mf_expr_t *e, bson_value_t *v, size_t n, ctx_t *c, bson_value_t *o)
{
    int op = e->op->id;
    mf_value_array_t ab;
    elems_t seen = {NULL, 0};
    size_t cap = 0;

    if (op == OP_SETUNION || op == OP_SETINTERSECTION) {
        /* Left to right: the first nullish operand answers null, the first non-array one fails. */
        for (size_t i = 0; i < n; i++) {
            if (mf_value_is_nullish(&v[i])) {
                mf_value_set_null(o);
                return 0;
            }
            if (v[i].value_type != BSON_TYPE_ARRAY)
                return mf_err_set(c->err, op == OP_SETUNION ? MF_E_Location17043 : MF_E_Location17047,
                                  "All operands of %s must be arrays. One argument is of type: %s", e->op->name,
                                  tname(&v[i]));
        }
    } else if (op == OP_SETDIFFERENCE) {
        if (mf_value_is_nullish(&v[0]) || mf_value_is_nullish(&v[1])) {
            mf_value_set_null(o);
            return 0;
        }
        for (size_t i = 0; i < 2; i++)
            if (v[i].value_type != BSON_TYPE_ARRAY)
                return mf_err_set(c->err, i == 0 ? MF_E_Location17048 : MF_E_Location17049,
                                  "both operands of $setDifference must be arrays. %s argument is of type: %s",
                                  i == 0 ? "First" : "Second", tname(&v[i]));
    } else if (op == OP_SETISSUBSET) {
        /* No null passthrough. A constant right operand is checked when the pipeline is optimized, before the
         * left one, with its own codes (17311, then 17310 for the left operand). */
        bool rhs_const = arg_is_const(e, 1) && !arg_is_const(e, 0); /* all-constant folds via plain evaluate */
        if (rhs_const && v[1].value_type != BSON_TYPE_ARRAY)
            return mf_err_set(c->err, MF_E_Location17311,
                              "both operands of $setIsSubset must be arrays. Second argument is of type: %s",
                              tname(&v[1]));
        if (v[0].value_type != BSON_TYPE_ARRAY)
            return mf_err_set(c->err, rhs_const ? MF_E_Location17310 : MF_E_Location17046,
                              "both operands of $setIsSubset must be arrays. First argument is of type: %s",
                              tname(&v[0]));
        if (v[1].value_type != BSON_TYPE_ARRAY)
            return mf_err_set(c->err, MF_E_Location17042,
                              "both operands of $setIsSubset must be arrays. Second argument is of type: %s",
                              tname(&v[1]));
    } else {
        /* $setEquals: no null passthrough; constant operands are checked first, at optimization (5887502). */
        for (size_t i = 0; i < n; i++)
            if (arg_is_const(e, i) && v[i].value_type != BSON_TYPE_ARRAY)
                return mf_err_set(c->err, MF_E_Location5887502,
                                  "All operands of $setEquals must be arrays. %zu-th argument is of type: %s", i + 1,
                                  tname(&v[i]));
        for (size_t i = 0; i < n; i++)
            if (v[i].value_type != BSON_TYPE_ARRAY)
                return mf_err_set(c->err, MF_E_Location17044,
                                  "All operands of $setEquals must be arrays. %zu-th argument is of type: %s", i + 1,
                                  tname(&v[i]));
    }
    if (op == OP_SETUNION) {
        mf_value_array_init(&ab);
        for (size_t i = 0; i < n; i++) {
            elems_t el;
            elems_of(&v[i], &el);
            for (size_t j = 0; j < el.n; j++)
                set_add(&ab, &seen, &cap, &el.v[j]);
            elems_free(&el);
        }
        bson_free(seen.v);
        mf_value_array_finish(&ab, o);
        return 0;
    }
    if (op == OP_SETINTERSECTION || op == OP_SETDIFFERENCE) {
        elems_t first;
        mf_value_array_init(&ab);
        if (n == 0) {
            mf_value_array_finish(&ab, o);
            return 0;
        }
        elems_of(&v[0], &first);
        elems_t *others = bson_malloc0((n ? n : 1) * sizeof *others);
        for (size_t i = 1; i < n; i++)
            elems_of(&v[i], &others[i]);
        for (size_t j = 0; j < first.n; j++) {
            bool keep = true;
            for (size_t i = 1; i < n && keep; i++) {
                bool in = arr_contains(&others[i], &first.v[j]);
                keep = op == OP_SETINTERSECTION ? in : !in;
            }
            if (keep)
                set_add(&ab, &seen, &cap, &first.v[j]);
        }
        for (size_t i = 1; i < n; i++)
            elems_free(&others[i]);
        bson_free(others);
        elems_free(&first);
        bson_free(seen.v);
        mf_value_array_finish(&ab, o);
        return 0;
    }
    /* $setIsSubset, $setEquals */
    {
        elems_t a, b;
        bool res = true;
        elems_of(&v[0], &a);
        for (size_t i = 1; i < n && res; i++) {
            elems_of(&v[i], &b);
            for (size_t j = 0; j < a.n && res; j++)
                if (!arr_contains(&b, &a.v[j]))
                    res = false;
            if (op == OP_SETEQUALS)
                for (size_t j = 0; j < b.n && res; j++)
                    if (!arr_contains(&a, &b.v[j]))
                        res = false;
            elems_free(&b);
        }
        elems_free(&a);
        mf_value_set_bool(o, res);
        return 0;
    }
}

/* ---- $sum/$avg/$min/$max (expression forms) ---- */

static void
ev_accum(int op, const bson_value_t *v, size_t n, bson_value_t *o)
{
    const bson_value_t *items = v;
    size_t count = n;
    elems_t el = {NULL, 0};

    if (n == 1 && v[0].value_type == BSON_TYPE_ARRAY) {
        elems_of(&v[0], &el);
        items = el.v;
        count = el.n;
    }
    if (op == OP_STDDEVPOP || op == OP_STDDEVSAMP) {
        /* Welford's algorithm over the numeric items; the rest are ignored. */
        double mean = 0, m2 = 0;
        int64_t k = 0;
        for (size_t i = 0; i < count; i++) {
            if (!mf_value_is_number(&items[i]))
                continue;
            double x = as_dbl(&items[i]);
            k++;
            double d = x - mean;
            mean += d / (double)k;
            m2 += d * (x - mean);
        }
        if (k == 0 || (op == OP_STDDEVSAMP && k < 2))
            mf_value_set_null(o);
        else
            mf_value_set_double(o, sqrt(m2 / (double)(op == OP_STDDEVPOP ? k : k - 1)));
    } else if (op == OP_SUM || op == OP_AVG) {
        /* As the accumulators ($group's): compensated, exact for integers (doc/sum.h). */
        mf_sum_t s;
        int64_t k = 0;
        mf_sum_init(&s);
        for (size_t i = 0; i < count; i++)
            if (mf_value_is_number(&items[i])) {
                mf_sum_add(&s, &items[i]);
                k++;
            }
        if (op == OP_SUM)
            mf_sum_result(&s, o);
        else
            mf_sum_avg(&s, k, o);
    } else {
        const bson_value_t *best = NULL;
        for (size_t i = 0; i < count; i++) {
            if (mf_value_is_nullish(&items[i]))
                continue;
            if (best == NULL || (op == OP_MIN ? cmpv(&items[i], best) < 0 : cmpv(&items[i], best) > 0))
                best = &items[i];
        }
        if (best)
            mf_value_copy(o, best);
        else
            mf_value_set_null(o);
    }
    elems_free(&el);
}

/* ---- conversions ---- */

static bool
parse_int64_str(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    if (*s == '\0' || isspace((unsigned char)*s))
        return false;
    long long x = strtoll(s, &end, 10);
    if (errno || *end != '\0')
        return false;
    *out = x;
    return true;
}

static bool
parse_double_str(const char *s, double *out)
{
    char *end;
    if (*s == '\0' || isspace((unsigned char)*s))
        return false;
    /* Refuse hex forms, which strtod would accept. */
    for (const char *p = s; *p; p++)
        if (*p == 'x' || *p == 'X')
            return false;
    errno = 0;
    double x = strtod(s, &end);
    if (*end != '\0')
        return false;
    if (errno == ERANGE && isinf(x))
        return false;
    *out = x;
    return true;
}


static int
conv_fail(ctx_t *c, const char *fmt, const bson_value_t *v, const char *target)
{
    if (fmt == NULL)
        return mf_err_set(c->err, MF_E_ConversionFailure,
                          "Unsupported conversion from %s to %s in $convert with no onError value", tname(v), target);
    return mf_err_set(c->err, MF_E_ConversionFailure, "%s", fmt);
}

/*
 * conv_str_fail: the ConversionFailure for a string v that $convert cannot
 * read as a number: hexadecimal input (hex), or text that does not parse.
 */
static int
conv_str_fail(ctx_t *c, bool hex, const bson_value_t *v)
{
    return mf_err_set(c->err, MF_E_ConversionFailure,
                      hex ? "Illegal hexadecimal input in $convert with no onError value: %.200s"
                          : "Failed to parse number '%.200s' in $convert with no onError value",
                      v->value.v_utf8.str);
}

/*
 * convert: converts v to BSON type `to`; returns 0 with *o set, or -1 with a
 * ConversionFailure in c->err. v is not nullish.
 */
static int
convert(ctx_t *c, const bson_value_t *v, int to, bson_value_t *o)
{
    char msg[400];
    const char *tgt = mf_type_name((bson_type_t)to);
    int64_t l;
    double d;

    switch (to) {
    case BSON_TYPE_UTF8:
        if (date_str_range(c, v, "") < 0)
            return -1;
        if (v->value_type == BSON_TYPE_TIMESTAMP || !to_string(v, o))
            return conv_fail(c, NULL, v, tgt);
        return 0;
    case BSON_TYPE_BOOL:
        if (mf_value_is_number(v))
            mf_value_set_bool(o, as_dbl(v) != 0 || (v->value_type == BSON_TYPE_DOUBLE && isnan(v->value.v_double)));
        else if (v->value_type == BSON_TYPE_BOOL)
            mf_value_set_bool(o, v->value.v_bool);
        else
            mf_value_set_bool(o, true);
        return 0;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64: {
        int64_t lo = to == BSON_TYPE_INT32 ? INT32_MIN : INT64_MIN;
        int64_t hi = to == BSON_TYPE_INT32 ? INT32_MAX : INT64_MAX;
        switch (v->value_type) {
        case BSON_TYPE_BOOL:
            l = v->value.v_bool;
            break;
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
            l = as_i64(v);
            if (l < lo || l > hi) {
                snprintf(msg, sizeof msg, "Conversion would overflow target type in $convert with no onError value: %" PRId64, l);
                return conv_fail(c, msg, v, tgt);
            }
            break;
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_DECIMAL128:
            d = as_dbl(v);
            if (isnan(d) || isinf(d)) {
                snprintf(msg, sizeof msg, "Attempt to convert %s value to integer type in $convert with no onError value",
                         isnan(d) ? "NaN" : "infinity");
                return conv_fail(c, msg, v, tgt);
            }
            if (v->value_type == BSON_TYPE_DECIMAL128) {
                /* Truncated in decimal: exact for every integer in range, where a double is not past 2^53. */
                bson_decimal128_t t;
                mf_dec_quantize(&v->value.v_decimal128, 0, MF_DEC_TRUNC, &t);
                if (mf_dec_to_int64(&t, &l) && l >= lo && l <= hi)
                    break;
            }
            d = trunc(d);
            if (d < (double)lo || d >= -(double)lo) {
                char b[64];
                fmt_double(as_dbl(v), b, sizeof b);
                snprintf(msg, sizeof msg, "Conversion would overflow target type in $convert with no onError value: %s", b);
                return conv_fail(c, msg, v, tgt);
            }
            l = (int64_t)d;
            break;
        case BSON_TYPE_UTF8:
            if (strncmp(v->value.v_utf8.str, "0x", 2) == 0)
                return conv_str_fail(c, true, v);
            if (!parse_int64_str(v->value.v_utf8.str, &l) || l < lo || l > hi)
                return conv_str_fail(c, false, v);
            break;
        case BSON_TYPE_DATE_TIME:
            if (to == BSON_TYPE_INT64) {
                l = v->value.v_datetime;
                break;
            }
            return conv_fail(c, NULL, v, tgt);
        default:
            return conv_fail(c, NULL, v, tgt);
        }
        if (to == BSON_TYPE_INT32)
            mf_value_set_int32(o, (int32_t)l);
        else
            mf_value_set_int64(o, l);
        return 0;
    }
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        switch (v->value_type) {
        case BSON_TYPE_BOOL:
            d = v->value.v_bool;
            break;
        case BSON_TYPE_INT32:
        case BSON_TYPE_INT64:
        case BSON_TYPE_DOUBLE:
            d = as_dbl(v);
            break;
        case BSON_TYPE_DECIMAL128:
            if (to == BSON_TYPE_DECIMAL128) {
                mf_value_copy(o, v);
                return 0;
            }
            d = as_dbl(v);
            break;
        case BSON_TYPE_UTF8:
            if (strncmp(v->value.v_utf8.str, "0x", 2) == 0)
                return conv_str_fail(c, true, v);
            if (to == BSON_TYPE_DECIMAL128) {
                mf_value_set_type(o, BSON_TYPE_DECIMAL128);
                if (!bson_decimal128_from_string(v->value.v_utf8.str, &o->value.v_decimal128))
                    return conv_str_fail(c, false, v);
                return 0;
            }
            if (!parse_double_str(v->value.v_utf8.str, &d))
                return conv_str_fail(c, false, v);
            break;
        case BSON_TYPE_DATE_TIME:
            d = (double)v->value.v_datetime;
            break;
        default:
            return conv_fail(c, NULL, v, tgt);
        }
        if (to == BSON_TYPE_DOUBLE) {
            mf_value_set_double(o, d);
        } else if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64 ||
                   v->value_type == BSON_TYPE_DATE_TIME || v->value_type == BSON_TYPE_BOOL) {
            mf_value_set_type(o, BSON_TYPE_DECIMAL128);
            mf_dec_from_int64(v->value_type == BSON_TYPE_DATE_TIME ? v->value.v_datetime
                              : v->value_type == BSON_TYPE_BOOL    ? (int64_t)v->value.v_bool
                                                                   : as_i64(v),
                              &o->value.v_decimal128);
        } else {
            mf_value_set_decimal_from_double(o, d);
        }
        return 0;
    case BSON_TYPE_DATE_TIME:
        switch (v->value_type) {
        case BSON_TYPE_DATE_TIME:
            mf_value_copy(o, v);
            return 0;
        case BSON_TYPE_INT64:
            mf_value_set_date(o, v->value.v_int64);
            return 0;
        case BSON_TYPE_DOUBLE:
        case BSON_TYPE_DECIMAL128:
            d = as_dbl(v);
            if (isnan(d) || isinf(d) || d >= 9.2233720368547758e18 || d < -9.2233720368547758e18)
                return conv_fail(c, "Conversion would overflow target type in $convert with no onError value", v, tgt);
            mf_value_set_date(o, (int64_t)trunc(d));
            return 0;
        case BSON_TYPE_OID:
        case BSON_TYPE_TIMESTAMP:
            get_date(v, &l);
            mf_value_set_date(o, l);
            return 0;
        case BSON_TYPE_UTF8:
            if (date_from_string(c, v->value.v_utf8.str, v->value.v_utf8.len, NULL, NULL, false, &l) < 0) {
                /* the same parser as $dateFromString, as MongoDB's */
                mf_err_clear(c->err);
                snprintf(msg, sizeof msg, "Error parsing date string '%.200s'", v->value.v_utf8.str);
                return conv_fail(c, msg, v, tgt);
            }
            mf_value_set_date(o, l);
            return 0;
        default:
            return conv_fail(c, NULL, v, tgt);
        }
    case BSON_TYPE_OID:
        if (v->value_type == BSON_TYPE_OID) {
            mf_value_copy(o, v);
            return 0;
        }
        if (v->value_type == BSON_TYPE_UTF8) {
            if (v->value.v_utf8.len != 24 || !bson_oid_is_valid(v->value.v_utf8.str, 24)) {
                snprintf(msg, sizeof msg, "Failed to parse objectId '%.200s' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found %u",
                         v->value.v_utf8.str, v->value.v_utf8.len);
                return conv_fail(c, msg, v, tgt);
            }
            mf_value_set_type(o, BSON_TYPE_OID);
            bson_oid_init_from_string(&o->value.v_oid, v->value.v_utf8.str);
            return 0;
        }
        return conv_fail(c, NULL, v, tgt);
    default:
        if ((int)v->value_type == to) {
            mf_value_copy(o, v);
            return 0;
        }
        return conv_fail(c, NULL, v, tgt);
    }
}

/* ---- $convert between strings and binData (MongoDB 8.0) ---- */

static int
hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/*
 * uuid_from_str: reads the canonical 36-character UUID form (8-4-4-4-12 hex
 * digits, either case, as mongod's UUID::parse) into out; false when s is not one.
 */
static bool
uuid_from_str(const char *s, uint32_t len, uint8_t out[16])
{
    if (len != 36)
        return false;
    for (int i = 0, k = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
            continue;
        }
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[k++] = (uint8_t)(hi << 4 | lo);
        i++;
    }
    return true;
}

/* The format argument of $convert, in mongod's BinDataFormat order. */
enum binfmt { BF_NONE = -1, BF_AUTO, BF_BASE64, BF_BASE64URL, BF_HEX, BF_UTF8, BF_UUID };
static const char *const binfmt_names[] = {"auto", "base64", "base64url", "hex", "utf8", "uuid", NULL};

/* set_bin: o becomes a binData of the given subtype owning a copy of the n bytes at d. */
static void
set_bin(bson_value_t *o, int subtype, const uint8_t *d, size_t n)
{
    mf_value_set_type(o, BSON_TYPE_BINARY);
    o->value.v_binary.subtype = (bson_subtype_t)subtype;
    o->value.v_binary.data_len = (uint32_t)n;
    o->value.v_binary.data = bson_malloc(n ? n : 1);
    if (n)
        memcpy(o->value.v_binary.data, d, n);
}

/*
 * b64_decode: decodes s as mongod's base64::decode (url false: the standard
 * alphabet, length a multiple of 4) or base64url::decode (url true: '-' and
 * '_', padding optional, a final group of 2 to 4 characters). '=' is only
 * allowed as the last character of the final group, or its last two. The
 * bytes are decoded by OpenSSL's EVP_DecodeBlock once the text has been
 * checked and rewritten in the standard alphabet with its padding as 'A's.
 * Returns true with *out (bson_malloc'd, caller frees) and *n, or false with
 * *why mongod's reason.
 */
static bool
b64_decode(const char *s, size_t len, bool url, uint8_t **out, size_t *n, const char **why)
{
    size_t last = len % 4 ? len % 4 : 4, pad = 0;

    *out = NULL;
    *n = 0;
    if (len == 0) {
        *out = bson_malloc(1);
        return true;
    }
    if (last < (url ? 2u : 4u)) {
        *why = "invalid base64";
        return false;
    }
    if (last >= 3 && s[len - 1] == '=') {
        pad = 1;
        if (last == 4 && s[len - 2] == '=')
            pad = 2;
    }
    size_t nd = len - pad; /* data characters */
    size_t full = (nd + 3) / 4 * 4;
    char *std = bson_malloc(full + 1);
    for (size_t i = 0; i < nd; i++) {
        char ch = s[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (url && (ch == '-' || ch == '_')) {
            ch = ch == '-' ? '+' : '/';
            ok = true;
        } else if (!url && (ch == '+' || ch == '/')) {
            ok = true;
        }
        if (!ok) {
            bson_free(std);
            *why = "Invalid base64 character";
            return false;
        }
        std[i] = ch;
    }
    memset(std + nd, 'A', full - nd);
    std[full] = '\0';
    static const size_t tail[4] = {0, 0, 1, 2};
    *n = nd / 4 * 3 + tail[nd % 4];
    *out = bson_malloc(full / 4 * 3 + 1);
    int got = EVP_DecodeBlock(*out, (const unsigned char *)std, (int)full);
    bson_free(std);
    if (got < 0 || (size_t)got < *n) {
        bson_free(*out);
        *out = NULL;
        *why = "Invalid base64 character";
        return false;
    }
    return true;
}

/* b64_encode: o becomes the base64 (OpenSSL's EVP_EncodeBlock) or base64url (no padding, as mongod) text of d. */
static void
b64_encode(const uint8_t *d, size_t n, bool url, bson_value_t *o)
{
    char *buf = bson_malloc((n + 2) / 3 * 4 + 1);
    int len = EVP_EncodeBlock((unsigned char *)buf, d, (int)n);

    if (url) {
        while (len > 0 && buf[len - 1] == '=')
            len--;
        for (int i = 0; i < len; i++)
            buf[i] = buf[i] == '+' ? '-' : buf[i] == '/' ? '_' : buf[i];
    }
    mf_value_set_strn(o, buf, (size_t)len);
    bson_free(buf);
}

/* hex_encode: n bytes as upper-case hex digits (mongod's hexblob::encode) into buf (2n+1 bytes). */
static void
hex_encode(const uint8_t *d, size_t n, char *buf)
{
    static const char digits[] = "0123456789ABCDEF";

    for (size_t i = 0; i < n; i++) {
        buf[2 * i] = digits[d[i] >> 4];
        buf[2 * i + 1] = digits[d[i] & 15];
    }
    buf[2 * n] = '\0';
}

/*
 * conv_subtype: mongod's computeBinDataType for the 'subtype' of a document
 * 'to' (NULL or missing: 0, generic). Its errors are not ConversionFailures.
 */
static int
conv_subtype(ctx_t *c, const bson_value_t *st, int *out)
{
    int64_t t;

    *out = BSON_SUBTYPE_BINARY;
    if (st == NULL || st->value_type == BSON_TYPE_EOD)
        return 0;
    if (!mf_value_is_number(st))
        return mf_err_set(c->err, MF_E_Location4341108,
                          "For BinData, $convert's 'subtype' argument must be a number, but is %s", tname(st));
    if (!is_int32_integral(st))
        return mf_err_set(c->err, MF_E_Location4341106, "In $convert, numeric 'subtype' argument is not an integer");
    mf_value_as_int64(st, &t);
    /* 0-8 are the predefined subtypes in 8.0, 128-255 the user-defined ones. */
    if (!((t >= 0 && t <= 8) || (t >= 128 && t <= 255)))
        return mf_err_set(c->err, MF_E_Location4341107,
                          "In $convert, numeric value for 'subtype' does not correspond to a BinData type: %" PRId64, t);
    *out = (int)t;
    return 0;
}

/*
 * conv_str_to_bin: string -> binData (mongod's parseStringToBinData). Every
 * failure after the subtype is read is a ConversionFailure naming the input.
 */
static int
conv_str_to_bin(ctx_t *c, const bson_value_t *v, int fmt, const bson_value_t *st, bson_value_t *o)
{
    const char *s = v->value.v_utf8.str;
    uint32_t len = v->value.v_utf8.len;
    const char *why = NULL;
    char whybuf[300];
    int subtype;

    if (fmt == BF_NONE)
        return mf_err_set(c->err, MF_E_Location4341115,
                          "Format must be speficied when converting from 'string' to 'binData'");
    if (conv_subtype(c, st, &subtype) < 0)
        return -1;
    if ((fmt == BF_UUID) != (subtype == BSON_SUBTYPE_UUID)) {
        why = "Only the 'uuid' format is allowed with the UUID subtype";
    } else {
        switch (fmt) {
        case BF_BASE64:
        case BF_BASE64URL: {
            uint8_t *d;
            size_t n;
            if (!b64_decode(s, len, fmt == BF_BASE64URL, &d, &n, &why))
                break;
            set_bin(o, subtype, d, n);
            bson_free(d);
            return 0;
        }
        case BF_HEX: {
            if (len % 2) {
                why = "Hex blob with odd digit count is invalid";
                break;
            }
            uint8_t *d = bson_malloc(len / 2 + 1);
            uint32_t i;
            for (i = 0; i < len; i += 2) {
                int hi = hexval(s[i]), lo = hexval(s[i + 1]);
                if (hi < 0 || lo < 0)
                    break;
                d[i / 2] = (uint8_t)(hi << 4 | lo);
            }
            if (i < len) {
                bson_free(d);
                snprintf(whybuf, sizeof whybuf, "The character \"%c\" failed to parse from hex.",
                         hexval(s[i]) < 0 ? s[i] : s[i + 1]);
                why = whybuf;
                break;
            }
            set_bin(o, subtype, d, len / 2);
            bson_free(d);
            return 0;
        }
        case BF_UTF8:
            if (!bson_utf8_validate(s, len, true)) {
                snprintf(whybuf, sizeof whybuf, "Invalid UTF-8: %.200s", s);
                why = whybuf;
                break;
            }
            set_bin(o, subtype, (const uint8_t *)s, len);
            return 0;
        case BF_UUID: {
            uint8_t d[16];
            if (!uuid_from_str(s, len, d)) {
                snprintf(whybuf, sizeof whybuf, "Invalid UUID string: %.200s", s);
                why = whybuf;
                break;
            }
            set_bin(o, BSON_SUBTYPE_UUID, d, 16);
            return 0;
        }
        default:
            snprintf(whybuf, sizeof whybuf, "Invalid format '%s'", binfmt_names[fmt]);
            why = whybuf;
            break;
        }
    }
    return mf_err_set(c->err, MF_E_ConversionFailure, "Failed to parse BinData '%.200s' in $convert with no onError value: %s",
                      s, why);
}

/* uuid_str: the 16 bytes at d in the canonical lower-case 8-4-4-4-12 form, into buf (37 bytes). */
static void
uuid_str(const uint8_t *d, char *buf)
{
    static const char digits[] = "0123456789abcdef";
    char *p = buf;

    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = digits[d[i] >> 4];
        *p++ = digits[d[i] & 15];
    }
    *p = '\0';
}

/*
 * conv_bin_to_str: binData -> string (mongod's performConvertBinDataToString);
 * "auto" is the UUID form for a 16-byte subtype-4 value, else base64.
 */
static int
conv_bin_to_str(ctx_t *c, const bson_value_t *v, int fmt, bson_value_t *o)
{
    const uint8_t *d = v->value.v_binary.data;
    uint32_t n = v->value.v_binary.data_len;
    bool uuid = v->value.v_binary.subtype == BSON_SUBTYPE_UUID && n == 16;
    const char *why;

    if (fmt == BF_NONE)
        return mf_err_set(c->err, MF_E_Location4341115,
                          "Format must be speficied when converting from 'binData' to 'string'");
    switch (fmt) {
    case BF_AUTO:
    case BF_UUID:
        if (uuid) {
            char buf[37];
            uuid_str(d, buf);
            mf_value_set_str(o, buf);
            return 0;
        }
        if (fmt == BF_UUID) {
            why = "BinData does not represent a valid UUID";
            break;
        }
        /* fall through - auto is base64 for anything but a UUID */
    case BF_BASE64:
    case BF_BASE64URL:
        b64_encode(d, n, fmt == BF_BASE64URL, o);
        return 0;
    case BF_HEX: {
        char *buf = bson_malloc(2 * (size_t)n + 1);
        hex_encode(d, n, buf);
        mf_value_set_strn(o, buf, 2 * (size_t)n);
        bson_free(buf);
        return 0;
    }
    default: /* BF_UTF8 */
        if (bson_utf8_validate((const char *)d, n, true)) {
            mf_value_set_strn(o, (const char *)d, n);
            return 0;
        }
        why = "BinData does not represent a valid UTF-8 string";
        break;
    }
    /* mongod names the input as Value::toString does: BinData(<subtype>, <HEX>). */
    uint32_t shown = n > 100 ? 100 : n;
    char hex[201];
    hex_encode(d, shown, hex);
    return mf_err_set(c->err, MF_E_ConversionFailure,
                      "Failed to convert 'BinData(%d, %s%s)' to string in $convert with no onError value: %s",
                      (int)v->value.v_binary.subtype, hex, shown < n ? "..." : "", why);
}

/* conv_bin_to_bin: binData -> binData keeps the value when the subtype matches (mongod converts no subtype to another). */
static int
conv_bin_to_bin(ctx_t *c, const bson_value_t *v, const bson_value_t *st, bson_value_t *o)
{
    int subtype;

    if (conv_subtype(c, st, &subtype) < 0)
        return -1;
    if ((int)v->value.v_binary.subtype != subtype)
        return mf_err_set(c->err, MF_E_ConversionFailure, "Conversions between different BinData subtypes are not supported");
    mf_value_copy(o, v);
    return 0;
}

/*
 * conv_format: mongod's parseBinDataFormat of the evaluated 'format' (BF_NONE
 * when nullish). Read only once the input is known not to be nullish.
 */
static int
conv_format(ctx_t *c, const bson_value_t *f, int *out)
{
    char buf[160];

    *out = BF_NONE;
    if (f == NULL || mf_value_is_nullish(f))
        return 0;
    if (f->value_type != BSON_TYPE_UTF8) {
        value_str(f, buf, sizeof buf);
        return mf_err_set(c->err, MF_E_Location4341114, "$convert requires that 'format' be a string, found: %s with value %s",
                          tname(f), buf);
    }
    for (int i = 0; binfmt_names[i]; i++)
        if (strcmp(binfmt_names[i], f->value.v_utf8.str) == 0 && strlen(f->value.v_utf8.str) == f->value.v_utf8.len) {
            *out = i;
            return 0;
        }
    return mf_err_set(c->err, MF_E_Location4341125, "Invalid 'format' argument for $convert: %.200s", f->value.v_utf8.str);
}

/*
 * conv_target: mongod's ConvertTargetTypeInfo::parse: 'to' is a type name or
 * number, or a document {type: <name or number>, subtype: <number>}. Sets
 * *target (-1 for a nullish 'to') and *subtype (a shallow copy borrowing from
 * to's data, missing when absent).
 */
static int
conv_target(ctx_t *c, const bson_value_t *to, int *target, bson_value_t *subtype)
{
    bson_value_t type;
    const bson_value_t *t = to;

    *target = -1;
    mf_value_set_type(subtype, BSON_TYPE_EOD);
    if (mf_value_is_nullish(to))
        return 0;
    if (to->value_type == BSON_TYPE_DOCUMENT) {
        bson_iter_t it;
        /* A missing 'type' is named "missing" in the error below, as mongod's Value of a missing field. */
        mf_value_set_type(&type, BSON_TYPE_EOD);
        if (bson_iter_init_from_data(&it, to->value.v_doc.data, to->value.v_doc.data_len) && bson_iter_find(&it, "type"))
            type = *bson_iter_value(&it);
        if (bson_iter_init_from_data(&it, to->value.v_doc.data, to->value.v_doc.data_len) && bson_iter_find(&it, "subtype"))
            *subtype = *bson_iter_value(&it);
        t = &type;
    }
    if (t->value_type == BSON_TYPE_UTF8) {
        /* "missing" ($type's answer) names no conversion: every input fails with 241. */
        *target = strcmp(t->value.v_utf8.str, "missing") == 0 ? BSON_TYPE_EOD : mf_type_alias(t->value.v_utf8.str);
        if (*target < 0 || *target == -2) {
            *target = -1;
            return mf_err_set(c->err, MF_E_BadValue, "Unknown type name: %s", t->value.v_utf8.str);
        }
        return 0;
    }
    if (mf_value_is_number(t)) {
        int64_t n;
        if (!is_int32_integral(t))
            return mf_err_set(c->err, MF_E_FailedToParse, "In $convert, numeric 'to' argument is not an integer");
        mf_value_as_int64(t, &n);
        if (strcmp(mf_type_name((bson_type_t)n), "unknown") == 0)
            return mf_err_set(c->err, MF_E_FailedToParse,
                              "In $convert, numeric value for 'to' does not correspond to a BSON type: %" PRId64, n);
        *target = (int)n;
        return 0;
    }
    return mf_err_set(c->err, MF_E_FailedToParse, "$convert's 'to' argument must be a string or number, but is %s", tname(t));
}

/*
 * convert_fmt: convert() with $convert's 'format' and binData subtype: the
 * string <-> binData and binData -> binData conversions of MongoDB 8.0 (no
 * number <-> binData, which came in 8.1). Other conversions ignore both.
 */
static int
convert_fmt(ctx_t *c, const bson_value_t *v, int to, int fmt, const bson_value_t *st, bson_value_t *o)
{
    if (to == BSON_TYPE_BINARY && v->value_type == BSON_TYPE_UTF8)
        return conv_str_to_bin(c, v, fmt, st, o);
    if (to == BSON_TYPE_BINARY && v->value_type == BSON_TYPE_BINARY)
        return conv_bin_to_bin(c, v, st, o);
    if (to == BSON_TYPE_UTF8 && v->value_type == BSON_TYPE_BINARY)
        return conv_bin_to_str(c, v, fmt, o);
    return convert(c, v, to, o);
}

/*
 * ev_convert: {$convert: {input, to, format, onError, onNull}} in mongod's
 * order: a non-nullish 'to' is validated first, then a nullish input answers
 * onNull, then a nullish 'to' answers null, then 'format' is read, then the
 * conversion runs; onError answers a ConversionFailure only (mongod catches
 * ExceptionFor<ConversionFailure>), not 4341115 or a bad subtype.
 */
static int
ev_convert(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t in, to, fmtv, subtype;
    int target, fmt;
    int rc = 0;

    mf_value_set_type(&fmtv, BSON_TYPE_EOD);
    if (ev(e->args[0], c, &in) < 0)
        return -1;
    if (ev(e->args[1], c, &to) < 0) {
        mf_value_free(&in);
        return -1;
    }
    if (e->nargs > 4 && e->args[4] && ev(e->args[4], c, &fmtv) < 0) {
        rc = -1;
        goto done;
    }
    if (conv_target(c, &to, &target, &subtype) < 0) {
        rc = -1;
        goto done;
    }
    if (mf_value_is_nullish(&in)) {
        if (e->nargs > 3 && e->args[3])
            rc = ev(e->args[3], c, o);
        else
            mf_value_set_null(o);
        goto done;
    }
    if (target == -1) {
        mf_value_set_null(o);
        goto done;
    }
    if (conv_format(c, &fmtv, &fmt) < 0) {
        rc = -1;
        goto done;
    }
    if (convert_fmt(c, &in, target, fmt, &subtype, o) < 0) {
        if (e->nargs > 2 && e->args[2] && (c->err == NULL || c->err->code == MF_E_ConversionFailure)) {
            mf_err_clear(c->err);
            rc = ev(e->args[2], c, o);
        } else {
            rc = -1;
        }
    }
done:
    mf_value_free(&in);
    mf_value_free(&to);
    mf_value_free(&fmtv);
    return rc;
}

/* ---- strings ---- */

static bool
is_default_ws(uint32_t cp)
{
    /* mongod's default trim set: NUL, space, \t \n \v \f \r, U+00A0, U+1680, U+2000..U+200A. */
    switch (cp) {
    case 0x00: case 0x20: case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0xA0: case 0x1680:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

static bool
in_chars(uint32_t cp, const uint32_t *chars, size_t n)
{
    if (chars == NULL)
        return is_default_ws(cp);
    for (size_t i = 0; i < n; i++)
        if (chars[i] == cp)
            return true;
    return false;
}

static int
ev_trim(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t in, ch;
    uint32_t *chars = NULL;
    size_t nchars = 0;
    int op = e->op->id, rc = 0;

    mf_value_set_missing(&ch);
    if (ev(e->args[0], c, &in) < 0)
        return -1;
    if (e->nargs > 1 && e->args[1] && ev(e->args[1], c, &ch) < 0) {
        mf_value_free(&in);
        return -1;
    }
    /* mongod: input nullish -> null, input's type, then chars nullish -> null, chars' type. */
    if (mf_value_is_nullish(&in)) {
        mf_value_set_null(o);
        goto done;
    }
    if (in.value_type != BSON_TYPE_UTF8) {
        char vb[128];
        value_str(&in, vb, sizeof vb);
        rc = mf_err_set(c->err, MF_E_Location50699, "%s requires its input to be a string, got %s (of type %s) instead.",
                        e->op->name, vb, tname(&in));
        goto done;
    }
    if (e->nargs > 1 && e->args[1] && mf_value_is_nullish(&ch)) {
        mf_value_set_null(o);
        goto done;
    }
    if (ch.value_type != BSON_TYPE_EOD) {
        if (ch.value_type != BSON_TYPE_UTF8) {
            char vb[128];
            value_str(&ch, vb, sizeof vb);
            rc = mf_err_set(c->err, MF_E_Location50700, "%s requires 'chars' to be a string, got %s (of type %s) instead.",
                            e->op->name, vb, tname(&ch));
            goto done;
        }
        chars = bson_malloc((ch.value.v_utf8.len + 1) * sizeof *chars);
        for (size_t i = 0; i < ch.value.v_utf8.len;) {
            int l;
            chars[nchars++] = u8decode(ch.value.v_utf8.str + i, ch.value.v_utf8.len - i, &l);
            i += (size_t)l;
        }
    }
    {
        const char *s = in.value.v_utf8.str;
        size_t n = in.value.v_utf8.len, start = 0, end = n;
        if (op != OP_RTRIM) {
            while (start < n) {
                int l;
                uint32_t cp = u8decode(s + start, n - start, &l);
                if (!in_chars(cp, chars, nchars))
                    break;
                start += (size_t)l;
            }
        }
        if (op != OP_LTRIM) {
            while (end > start) {
                size_t p = end - 1;
                int l;
                while (p > start && ((unsigned char)s[p] & 0xC0) == 0x80)
                    p--;
                uint32_t cp = u8decode(s + p, end - p, &l);
                if (!in_chars(cp, chars, nchars))
                    break;
                end = p;
            }
        }
        mf_value_set_strn(o, s + start, end - start);
    }
done:
    bson_free(chars);
    mf_value_free(&in);
    mf_value_free(&ch);
    return rc;
}

static int
ev_substr(int op, bson_value_t *v, ctx_t *c, bson_value_t *o)
{
    bson_value_t s;
    int64_t start, len;
    const char *name = op == OP_SUBSTRCP ? "$substrCP" : "$substrBytes";

    if (coerce_str(c, &v[0], &s) < 0)
        return -1;
    if (op == OP_SUBSTRCP) {
        char vb[128];
        int rc = 0;
        static const char *const what[] = {"starting index", "length"};
        static const int tcode[] = {MF_E_Location34450, MF_E_Location34452};
        static const int icode[] = {MF_E_Location34451, MF_E_Location34453};
        for (int i = 0; i < 2 && rc == 0; i++) {
            const bson_value_t *a = &v[1 + i];
            if (!mf_value_is_number(a)) {
                rc = mf_err_set(c->err, tcode[i], "%s: %s must be a numeric type (is BSON type %s)", name, what[i],
                                tname(a));
            } else if (!is_int32_integral(a)) {
                value_str(a, vb, sizeof vb);
                rc = mf_err_set(c->err, icode[i], "%s: %s cannot be represented as a 32-bit integral value: %s", name,
                                what[i], vb);
            }
        }
        if (rc < 0) {
            mf_value_free(&s);
            return rc;
        }
    } else {
        if (!mf_value_is_number(&v[1])) {
            mf_value_free(&s);
            return mf_err_set(c->err, MF_E_Location16034, "%s:  starting index must be a numeric type (is BSON type %s)",
                              name, tname(&v[1]));
        }
        if (!mf_value_is_number(&v[2])) {
            mf_value_free(&s);
            return mf_err_set(c->err, MF_E_Location16035, "%s:  length must be a numeric type (is BSON type %s)", name,
                              tname(&v[2]));
        }
    }
    start = (int64_t)as_dbl(&v[1]);
    len = (int64_t)as_dbl(&v[2]);
    const char *str = s.value.v_utf8.str;
    size_t n = s.value.v_utf8.len;
    if (op == OP_SUBSTRCP) {
        if (len < 0 || start < 0) {
            mf_value_free(&s);
            if (len < 0)
                return mf_err_set(c->err, MF_E_Location34454, "$substrCP: length must be a nonnegative integer.");
            return mf_err_set(c->err, MF_E_Location34455, "$substrCP: the starting index must be nonnegative integer.");
        }
        size_t b = cp_offset(str, n, (size_t)start);
        size_t e = b + cp_offset(str + b, n - b, (size_t)len);
        mf_value_set_strn(o, str + b, e - b);
    } else {
        if (start < 0) {
            mf_value_free(&s);
            return mf_err_set(c->err, MF_E_Location50752, "$substrBytes:  starting index must be non-negative (got: %" PRId64 ")",
                              start);
        }
        size_t lo = (size_t)start, ln = len < 0 ? n : (size_t)len;
        if (lo < n && ((unsigned char)str[lo] & 0xC0) == 0x80) {
            mf_value_free(&s);
            return mf_err_set(c->err, MF_E_Location28656,
                              "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.");
        }
        if (lo + ln >= lo && lo + ln < n && ((unsigned char)str[lo + ln] & 0xC0) == 0x80) {
            mf_value_free(&s);
            return mf_err_set(c->err, MF_E_Location28657,
                              "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.");
        }
        if ((size_t)start >= n) {
            mf_value_set_str(o, "");
        } else {
            size_t rest = n - (size_t)start;
            size_t l = (len < 0 || (uint64_t)len > rest) ? rest : (size_t)len;
            mf_value_set_strn(o, str + start, l);
        }
    }
    mf_value_free(&s);
    return 0;
}

/* $indexOfArray: [array, value, start?, end?] → first index of an equal element, or -1. */
/* index_arg: a starting/ending index of $indexOfArray/$indexOfBytes/$indexOfCP (mongod: 40096, 40097). */
static int
index_arg(ctx_t *c, const char *op, const bson_value_t *v, size_t i, int64_t *out)
{
    const char *what = i == 2 ? "starting index" : "ending index";
    char vb[128];

    value_str(v, vb, sizeof vb);
    if (!is_int32_integral(v))
        return mf_err_set(c->err, MF_E_Location40096, "%srequires an integral %s, found a value of type: %s, with value: %s",
                          op, what, tname(v), vb);
    mf_value_as_int64(v, out);
    if (*out < 0)
        return mf_err_set(c->err, MF_E_Location40097, "%s requires a nonnegative %s, found: %s", op, what, vb);
    return 0;
}

static int
ev_index_of_array(const mf_expr_t *e, bson_value_t *v, size_t n, ctx_t *c, bson_value_t *o)
{
    int64_t start = 0, end = INT64_MAX;
    if (mf_value_is_nullish(&v[0])) {
        mf_value_set_null(o);
        return 0;
    }
    if (v[0].value_type != BSON_TYPE_ARRAY) {
        /* A constant array operand (with some other operand not constant) is checked at optimization. */
        bool all_const = true;
        for (size_t i = 0; i < e->nargs; i++)
            all_const = all_const && arg_is_const(e, i);
        if (arg_is_const(e, 0) && !all_const)
            return mf_err_set(c->err, MF_E_Location50809,
                              "First operand of $indexOfArray must be an array. First argument is of type: %s",
                              tname(&v[0]));
        return mf_err_set(c->err, MF_E_Location40090, "$indexOfArray requires an array as a first argument, found: %s",
                          tname(&v[0]));
    }
    for (size_t i = 2; i < n; i++) {
        int64_t x;
        if (index_arg(c, "$indexOfArray", &v[i], i, &x) < 0)
            return -1;
        if (i == 2)
            start = x;
        else
            end = x;
    }
    bson_t arr;
    bson_iter_t it;
    int64_t idx = 0;
    mf_value_set_int32(o, -1);
    if (!bson_init_static(&arr, v[0].value.v_doc.data, v[0].value.v_doc.data_len) || !bson_iter_init(&it, &arr))
        return 0;
    while (bson_iter_next(&it) && idx < end) {
        if (idx >= start && mf_value_equal(bson_iter_value(&it), &v[1])) {
            mf_value_set_int32(o, (int32_t)idx);
            return 0;
        }
        idx++;
    }
    return 0;
}

static int
ev_index_of(int op, bson_value_t *v, size_t n, ctx_t *c, bson_value_t *o)
{
    const char *name = op == OP_INDEXOFCP ? "$indexOfCP" : "$indexOfBytes";
    int64_t start = 0, end = -1;

    if (mf_value_is_nullish(&v[0])) {
        mf_value_set_null(o);
        return 0;
    }
    if (v[0].value_type != BSON_TYPE_UTF8)
        return mf_err_set(c->err, op == OP_INDEXOFCP ? MF_E_Location40093 : MF_E_Location40091,
                          "%s requires a string as the first argument, found: %s", name, tname(&v[0]));
    if (v[1].value_type != BSON_TYPE_UTF8)
        return mf_err_set(c->err, op == OP_INDEXOFCP ? MF_E_Location40094 : MF_E_Location40092,
                          "%s requires a string as the second argument, found: %s", name, tname(&v[1]));
    for (size_t i = 2; i < n; i++) {
        int64_t x;
        if (index_arg(c, name, &v[i], i, &x) < 0)
            return -1;
        if (i == 2)
            start = x;
        else
            end = x;
    }
    const char *s = v[0].value.v_utf8.str, *t = v[1].value.v_utf8.str;
    size_t sn = v[0].value.v_utf8.len, tn = v[1].value.v_utf8.len;
    if (op == OP_INDEXOFCP) {
        size_t total = cp_count(s, sn);
        size_t e = (end < 0 || (size_t)end > total) ? total : (size_t)end;
        if ((size_t)start > total || (size_t)start > e) {
            mf_value_set_int32(o, -1);
            return 0;
        }
        size_t b = cp_offset(s, sn, (size_t)start);
        size_t cp = (size_t)start;
        size_t eb = cp_offset(s, sn, e);
        for (size_t i = b; i <= eb; i += (size_t)u8len((unsigned char)s[i]), cp++) {
            if (i + tn <= eb && memcmp(s + i, t, tn) == 0) {
                mf_value_set_int32(o, (int32_t)cp);
                return 0;
            }
            if (i == eb)
                break;
        }
        mf_value_set_int32(o, -1);
        return 0;
    }
    size_t e = (end < 0 || (size_t)end > sn) ? sn : (size_t)end;
    for (size_t i = (size_t)start; i <= e && (size_t)start <= e; i++) {
        if (i + tn <= e && memcmp(s + i, t, tn) == 0) {
            mf_value_set_int32(o, (int32_t)i);
            return 0;
        }
    }
    mf_value_set_int32(o, -1);
    return 0;
}

static int
ev_split(bson_value_t *v, ctx_t *c, bson_value_t *o)
{
    mf_value_array_t ab;
    bson_value_t piece;

    if (mf_value_is_nullish(&v[0]) || mf_value_is_nullish(&v[1])) {
        mf_value_set_null(o);
        return 0;
    }
    if (v[0].value_type != BSON_TYPE_UTF8)
        return mf_err_set(c->err, MF_E_Location40085,
                          "$split requires an expression that evaluates to a string as a first argument, found: %s",
                          tname(&v[0]));
    if (v[1].value_type != BSON_TYPE_UTF8)
        return mf_err_set(c->err, MF_E_Location40086,
                          "$split requires an expression that evaluates to a string as a second argument, found: %s",
                          tname(&v[1]));
    if (v[1].value.v_utf8.len == 0)
        return mf_err_set(c->err, MF_E_Location40087, "$split requires a non-empty separator");
    const char *s = v[0].value.v_utf8.str, *d = v[1].value.v_utf8.str;
    size_t sn = v[0].value.v_utf8.len, dn = v[1].value.v_utf8.len, last = 0;
    mf_value_array_init(&ab);
    for (size_t i = 0; i + dn <= sn;) {
        if (memcmp(s + i, d, dn) == 0) {
            mf_value_set_strn(&piece, s + last, i - last);
            mf_value_array_push(&ab, &piece);
            mf_value_free(&piece);
            i += dn;
            last = i;
        } else {
            i++;
        }
    }
    mf_value_set_strn(&piece, s + last, sn - last);
    mf_value_array_push(&ab, &piece);
    mf_value_free(&piece);
    mf_value_array_finish(&ab, o);
    return 0;
}

/* ---- regular expressions: $regexMatch, $regexFind, $regexFindAll ---- */

/* A compiled $regex* operation over one input (MongoDB's RegexExecutionState). */
typedef struct rxrun {
    pcre2_code *re;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    const char *in;
    size_t len;
    size_t pos, cp; /* next start: byte offset and code point index */
    bool borrowed;  /* re belongs to the node */
} rxrun_t;

static void
rx_free(rxrun_t *r)
{
    pcre2_match_data_free(r->md);
    pcre2_match_context_free(r->mc);
    if (!r->borrowed)
        pcre2_code_free(r->re);
}

/*
 * rx_compile: validates the evaluated regex and options (51105 51106 51107
 * 51109 51110 51108 51111, in MongoDB's order) and compiles; *re is NULL
 * when the regex is nullish. 0 or -1.
 */
static int
rx_compile(const char *op, mf_error_t *err, const bson_value_t *rv, const bson_value_t *ov, pcre2_code **re)
{
    const char *pat = NULL, *opts = NULL;
    size_t patlen = 0;
    uint32_t flags = PCRE2_UTF;
    int errcode;
    PCRE2_SIZE erroff;

    *re = NULL;
    if (!mf_value_is_nullish(rv) && rv->value_type != BSON_TYPE_UTF8 && rv->value_type != BSON_TYPE_REGEX)
        return mf_err_set(err, MF_E_Location51105, "%s needs 'regex' to be of type string or regex", op);
    if (!mf_value_is_nullish(ov) && ov->value_type != BSON_TYPE_UTF8)
        return mf_err_set(err, MF_E_Location51106, "%s needs 'options' to be of type string", op);
    if (rv->value_type == BSON_TYPE_REGEX) {
        pat = rv->value.v_regex.regex;
        patlen = strlen(pat);
        if (!mf_value_is_nullish(ov) && rv->value.v_regex.options[0])
            return mf_err_set(err, MF_E_Location51107,
                              "%s: found regex option(s) specified in both 'regex' and 'option' fields", op);
        if (rv->value.v_regex.options[0])
            opts = rv->value.v_regex.options;
    } else if (rv->value_type == BSON_TYPE_UTF8) {
        pat = rv->value.v_utf8.str;
        patlen = rv->value.v_utf8.len;
    }
    if (!mf_value_is_nullish(ov)) {
        opts = ov->value.v_utf8.str;
        if (strlen(opts) != ov->value.v_utf8.len)
            return mf_err_set(err, MF_E_Location51110,
                              "%s: regular expression options cannot contain an embedded null byte", op);
    }
    if (pat != NULL && strlen(pat) != patlen)
        return mf_err_set(err, MF_E_Location51109, "%s: regular expression cannot contain an embedded null byte", op);
    if (pat == NULL)
        return 0;
    for (const char *p = opts ? opts : ""; *p; p++) {
        switch (*p) {
        case 'i': flags |= PCRE2_CASELESS; break;
        case 'm': flags |= PCRE2_MULTILINE; break;
        case 's': flags |= PCRE2_DOTALL; break;
        case 'x': flags |= PCRE2_EXTENDED; break;
        case 'u': break;
        default:
            return mf_err_set(err, MF_E_Location51108, "%s invalid flag in regex options: %c", op, *p);
        }
    }
    if (patlen > MF_MAX_REGEX_LENGTH)
        return mf_err_set(err, MF_E_Location51091, "Regular expression is invalid: pattern string is too long");
    *re = pcre2_compile((PCRE2_SPTR)pat, patlen, flags, &errcode, &erroff, NULL);
    if (*re == NULL) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        return mf_err_set(err, MF_E_Location51111, "Invalid Regex in %s: %s", op, (const char *)msg);
    }
    return 0;
}

/*
 * rx_start: MongoDB's buildInitialState over the evaluated input, regex and
 * options v[0..2]: the regex compiled (or e->re, compiled at parse when
 * regex and options are constants), then the input checked (51104).
 * Returns 1 when input or regex is nullish, 0 ready, -1.
 */
static int
rx_start(const mf_expr_t *e, ctx_t *c, const bson_value_t *v, rxrun_t *r)
{
    const char *op = e->op->name;

    memset(r, 0, sizeof *r);
    if (e->re != NULL) {
        r->re = e->re;
        r->borrowed = true;
    } else if (rx_compile(op, c->err, &v[1], &v[2], &r->re) < 0) {
        return -1;
    }
    if (!mf_value_is_nullish(&v[0]) && v[0].value_type != BSON_TYPE_UTF8) {
        rx_free(r);
        memset(r, 0, sizeof *r);
        return mf_err_set(c->err, MF_E_Location51104, "%s needs 'input' to be of type string", op);
    }
    if (mf_value_is_nullish(&v[0]) || r->re == NULL) {
        rx_free(r);
        memset(r, 0, sizeof *r);
        return 1;
    }
    r->in = v[0].value.v_utf8.str;
    r->len = v[0].value.v_utf8.len;
    r->md = pcre2_match_data_create_from_pattern(r->re, NULL);
    r->mc = mf_rx_context();
    if (r->md == NULL || r->mc == NULL) {
        rx_free(r);
        memset(r, 0, sizeof *r);
        return mf_err_set(c->err, MF_E_InternalError, "out of memory");
    }
    return 0;
}

/* rx_next: the next match from r->pos as {match, idx, captures} (null when none); -1 with 51156. */
static int
rx_next(const char *op, ctx_t *c, rxrun_t *r, bson_value_t *o)
{
    int rc = pcre2_match(r->re, (PCRE2_SPTR)r->in, r->len, r->pos, 0, r->md, r->mc);
    PCRE2_SIZE *ov;
    uint32_t ncap;

    if (rc == PCRE2_ERROR_NOMATCH) {
        mf_value_set_null(o);
        return 0;
    }
    if (rc < 0)
        return mf_err_set(c->err, MF_E_Location51156,
                          "Error occurred while executing the regular expression in %s. Result code: %d", op, rc);
    ov = pcre2_get_ovector_pointer(r->md);
    pcre2_pattern_info(r->re, PCRE2_INFO_CAPTURECOUNT, &ncap);
    r->cp += cp_count(r->in + r->pos, ov[0] - r->pos);
    r->pos = ov[0];
    {
        bson_t b = BSON_INITIALIZER, caps;
        bson_append_utf8(&b, "match", 5, r->in + ov[0], (int)(ov[1] - ov[0]));
        bson_append_int32(&b, "idx", 3, (int32_t)r->cp);
        bson_append_array_begin(&b, "captures", 8, &caps);
        for (uint32_t i = 1; i <= ncap; i++) {
            char kb[16];
            const char *key;
            bson_uint32_to_string(i - 1, &key, kb, sizeof kb);
            if ((int)i < rc && ov[2 * i] != PCRE2_UNSET)
                bson_append_utf8(&caps, key, -1, r->in + ov[2 * i], (int)(ov[2 * i + 1] - ov[2 * i]));
            else
                bson_append_null(&caps, key, -1);
        }
        bson_append_array_end(&b, &caps);
        mf_value_take_bson(o, &b, false);
    }
    return 0;
}

static int
ev_regex(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    const char *op = e->op->name;
    bson_value_t *v;
    rxrun_t r;
    int rc = 0, st;

    if (eval_args(e, c, &v) < 0)
        return -1;
    st = rx_start(e, c, v, &r);
    if (st < 0) {
        rc = -1;
        goto done;
    }
    if (st > 0) {
        if (e->op->id == OP_REGEXMATCH)
            mf_value_set_bool(o, false);
        else if (e->op->id == OP_REGEXFIND)
            mf_value_set_null(o);
        else
            mf_value_take_bson(o, bson_new(), true);
        goto done;
    }
    if (e->op->id == OP_REGEXMATCH) {
        int prc, m = mf_rx_match(r.re, r.mc, r.in, r.len, &prc);
        if (m < 0)
            rc = mf_err_set(c->err, MF_E_Location51156,
                            "Error occurred while executing the regular expression in %s. Result code: %d", op, prc);
        else
            mf_value_set_bool(o, m == 1);
    } else if (e->op->id == OP_REGEXFIND) {
        rc = rx_next(op, c, &r, o);
    } else {
        mf_value_array_t ab;
        size_t total = 0;
        mf_value_array_init(&ab);
        do {
            bson_value_t m;
            if (rx_next(op, c, &r, &m) < 0) {
                rc = -1;
                break;
            }
            if (m.value_type == BSON_TYPE_NULL)
                break;
            total += m.value.v_doc.data_len;
            if (total > MF_MAX_BSON_SIZE * 4) {
                mf_value_free(&m);
                rc = mf_err_set(c->err, MF_E_Location51151,
                                "%s: the size of buffer to store output exceeded the 64MB limit", op);
                break;
            }
            mf_value_array_push(&ab, &m);
            mf_value_free(&m);
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(r.md);
            size_t mlen = ov[1] - ov[0];
            if (mlen == 0) {
                /* An empty match: step over one code point so the next search moves on. */
                if (r.pos >= r.len)
                    continue;
                r.pos += (size_t)u8len((unsigned char)r.in[r.pos]);
                r.cp++;
                continue;
            }
            r.cp += cp_count(r.in + r.pos, mlen);
            r.pos += mlen;
        } while (r.pos < r.len);
        if (rc == 0)
            mf_value_array_finish(&ab, o);
        else
            bson_destroy(&ab.b);
    }
    rx_free(&r);
done:
    free_vals(v, e->nargs);
    return rc;
}

/* ---- $replaceOne, $replaceAll ---- */

static int
ev_replace(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    const char *op = e->op->name;
    bson_value_t *v;
    int rc = 0;
    char buf[160];
    static const char *const what[] = {"input", "find", "replacement"};
    static const int codes[] = {MF_E_Location51746, MF_E_Location51745, MF_E_Location51744};

    if (eval_args(e, c, &v) < 0)
        return -1;
    for (int i = 0; i < 3; i++)
        if (!mf_value_is_nullish(&v[i]) && v[i].value_type != BSON_TYPE_UTF8) {
            value_str(&v[i], buf, sizeof buf);
            rc = mf_err_set(c->err, codes[i], "%s requires that '%s' be a string, found: %s", op, what[i], buf);
            goto done;
        }
    if (mf_value_is_nullish(&v[0]) || mf_value_is_nullish(&v[1]) || mf_value_is_nullish(&v[2])) {
        mf_value_set_null(o);
        goto done;
    }
    {
        const char *in = v[0].value.v_utf8.str, *f = v[1].value.v_utf8.str, *rep = v[2].value.v_utf8.str;
        size_t il = v[0].value.v_utf8.len, fl = v[1].value.v_utf8.len, rl = v[2].value.v_utf8.len, i = 0;
        bool all = e->op->id == OP_REPLACEALL;
        char *out = NULL;
        size_t ol = 0, cap = 0;
#define PUT(p, n)                                                                                                      \
    do {                                                                                                               \
        size_t n_ = (n);                                                                                               \
        if (ol + n_ > MF_MAX_BSON_SIZE) {                                                                              \
            bson_free(out);                                                                                            \
            rc = mf_err_set(c->err, MF_E_Location16493, "Tried to create string longer than 16MB");                  \
            goto done;                                                                                                 \
        }                                                                                                              \
        if (ol + n_ + 1 > cap) {                                                                                       \
            cap = (ol + n_ + 1) * 2;                                                                                   \
            out = bson_realloc(out, cap);                                                                              \
        }                                                                                                              \
        if (n_)                                                                                                        \
            memcpy(out + ol, (p), n_);                                                                                 \
        ol += n_;                                                                                                      \
    } while (0)
        if (fl == 0) {
            /* An empty 'find' matches before the first code point (and, for $replaceAll, before
               every one and at the end). */
            PUT(rep, rl);
            while (all && i < il) {
                size_t l = (size_t)u8len((unsigned char)in[i]);
                if (i + l > il)
                    l = il - i;
                PUT(in + i, l);
                PUT(rep, rl);
                i += l;
            }
            PUT(in + i, il - i);
        } else {
            for (;;) {
                const char *hit = memmem(in + i, il - i, f, fl);
                if (hit == NULL) {
                    PUT(in + i, il - i);
                    break;
                }
                size_t k = (size_t)(hit - in);
                PUT(in + i, k - i);
                PUT(rep, rl);
                i = k + fl;
                if (!all) {
                    PUT(in + i, il - i);
                    break;
                }
            }
        }
#undef PUT
        mf_value_set_type(o, BSON_TYPE_UTF8);
        if (out == NULL)
            out = bson_malloc(1);
        out[ol] = '\0';
        o->value.v_utf8.str = out;
        o->value.v_utf8.len = (uint32_t)ol;
    }
done:
    free_vals(v, e->nargs);
    return rc;
}

/* ---- $getField, $setField, $unsetField ---- */

/* The values at a path, gathered for $_internalFindAllValuesAtPath (views into the root document). */
typedef struct all_values {
    bson_value_t *v;
    size_t n, cap;
} all_values_t;

static bool
all_values_add(void *arg, const bson_value_t *v)
{
    all_values_t *a = arg;
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 8;
        a->v = bson_realloc(a->v, a->cap * sizeof *a->v);
    }
    a->v[a->n++] = *v;
    return false;
}

static int
all_values_cmp(const void *x, const void *y)
{
    return mf_value_cmp((const bson_value_t *)x, (const bson_value_t *)y);
}

/*
 * ev_find_all_values: $_internalFindAllValuesAtPath, what a distinct over
 * a view runs (ParsedDistinct::asAggregationCommand): every value at the
 * dotted path of the root document, arrays along it and at its end
 * expanded, each once and in order (dotted_path_support's
 * extractAllElementsAlongPath into a BSONElementSet).
 */
static int
ev_find_all_values(const bson_value_t *path, ctx_t *c, bson_value_t *o)
{
    all_values_t a = {0};
    mf_value_array_t arr;

    if (path->value_type != BSON_TYPE_UTF8)
        return mf_err_set(c->err, MF_E_FailedToParse, "$_internalFindAllValuesAtPath requires a string path, found: %s",
                          tname(path));
    if (c->root != NULL)
        mf_path_walk_leaves(c->root, path->value.v_utf8.str, all_values_add, &a);
    if (a.n > 1)
        qsort(a.v, a.n, sizeof *a.v, all_values_cmp);
    mf_value_array_init(&arr);
    for (size_t i = 0; i < a.n; i++)
        if (i == 0 || mf_value_cmp(&a.v[i - 1], &a.v[i]) != 0)
            mf_value_array_push(&arr, &a.v[i]);
    bson_free(a.v);
    mf_value_array_finish(&arr, o);
    return 0;
}

static int
ev_get_field(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t f, in;
    bson_iter_t it;
    int rc = 0;

    mf_value_set_missing(&in);
    if (ev(e->args[0], c, &f) < 0)
        return -1;
    if (f.value_type != BSON_TYPE_UTF8) {
        rc = mf_err_set(c->err, MF_E_Location3041704,
                        "$getField requires 'field' to evaluate to type String, but got %s", tname(&f));
        goto done;
    }
    if (e->args[1] == NULL) {
        in = c->rootv;
        in.value_type = BSON_TYPE_DOCUMENT;
        if (bson_iter_init_from_data(&it, in.value.v_doc.data, in.value.v_doc.data_len) &&
            bson_iter_find_w_len(&it, f.value.v_utf8.str, (int)f.value.v_utf8.len))
            mf_value_copy(o, bson_iter_value(&it));
        else
            mf_value_set_missing(o);
        mf_value_set_missing(&in);
        goto done;
    }
    if (ev(e->args[1], c, &in) < 0) {
        rc = -1;
        goto done;
    }
    if (in.value_type == BSON_TYPE_EOD)
        mf_value_set_missing(o);
    else if (mf_value_is_nullish(&in))
        mf_value_set_null(o);
    else if (in.value_type == BSON_TYPE_DOCUMENT && bson_iter_init_from_data(&it, in.value.v_doc.data, in.value.v_doc.data_len) &&
             bson_iter_find_w_len(&it, f.value.v_utf8.str, (int)f.value.v_utf8.len))
        mf_value_copy(o, bson_iter_value(&it));
    else
        mf_value_set_missing(o);
done:
    mf_value_free(&f);
    mf_value_free(&in);
    return rc;
}

/* $setField (slots field, input, value) and $unsetField (field, input): e->name is the field. */
static int
ev_set_field(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t in, val;
    bson_iter_t it;
    bson_t b = BSON_INITIALIZER;
    bool placed = false;
    int rc = 0;

    mf_value_set_missing(&val);
    if (ev(e->args[1], c, &in) < 0)
        return -1;
    if (mf_value_is_nullish(&in)) {
        mf_value_set_null(o);
        goto done;
    }
    if (in.value_type != BSON_TYPE_DOCUMENT) {
        rc = mf_err_set(c->err, MF_E_Location4161105, "$setField requires 'input' to evaluate to type Object");
        goto done;
    }
    if (e->op->id == OP_SETFIELD && ev(e->args[2], c, &val) < 0) {
        rc = -1;
        goto done;
    }
    bson_iter_init_from_data(&it, in.value.v_doc.data, in.value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), e->name) == 0) {
            if (!placed && val.value_type != BSON_TYPE_EOD)
                bson_append_value(&b, e->name, -1, &val);
            placed = true;
            continue;
        }
        bson_append_value(&b, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
    if (!placed && val.value_type != BSON_TYPE_EOD)
        bson_append_value(&b, e->name, -1, &val);
    mf_value_take_bson(o, &b, false);
    goto out;
done:
    bson_destroy(&b);
out:
    mf_value_free(&in);
    mf_value_free(&val);
    return rc;
}

/* ---- $sortArray ---- */

typedef struct sa_ctx {
    const mf_sort_t *sort; /* NULL: whole values */
    int dir;
    const bson_value_t *v;
    bson_t *docs; /* views of document elements (sort by pattern) */
    bool *isdoc;
} sa_ctx_t;

static int
sa_cmp(const sa_ctx_t *s, size_t a, size_t b)
{
    if (s->sort == NULL)
        return s->dir * cmpv(&s->v[a], &s->v[b]);
    static const uint8_t empty[5] = {5, 0, 0, 0, 0};
    bson_t ea, eb;
    const bson_t *da = &s->docs[a], *db = &s->docs[b];
    if (!s->isdoc[a]) {
        bson_init_static(&ea, empty, 5);
        da = &ea;
    }
    if (!s->isdoc[b]) {
        bson_init_static(&eb, empty, 5);
        db = &eb;
    }
    return mf_sort_cmp(s->sort, da, db);
}

/* sa_merge: stable merge sort of idx[0..n) with tmp as scratch. */
static void
sa_merge(const sa_ctx_t *s, size_t *idx, size_t *tmp, size_t n)
{
    if (n < 2)
        return;
    size_t h = n / 2, i = 0, j = h, k = 0;
    sa_merge(s, idx, tmp, h);
    sa_merge(s, idx + h, tmp, n - h);
    while (i < h && j < n)
        tmp[k++] = sa_cmp(s, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
    while (i < h)
        tmp[k++] = idx[i++];
    while (j < n)
        tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

/*
 * eval_or_null: evaluates x into *v for an operator that answers null for a
 * nullish argument: 1 with o null (and nothing in *v) when it is nullish, -1
 * on failure, else 0 with *v the caller's to free.
 */
static int
eval_or_null(const mf_expr_t *x, ctx_t *c, bson_value_t *v, bson_value_t *o)
{
    if (ev(x, c, v) < 0)
        return -1;
    if (mf_value_is_nullish(v)) {
        mf_value_free(v);
        mf_value_set_null(o);
        return 1;
    }
    return 0;
}

static int
ev_sort_array(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t in;
    int r;
    elems_t el;
    sa_ctx_t s;
    mf_value_array_t ab;

    if ((r = eval_or_null(e->args[0], c, &in, o)) != 0)
        return r > 0 ? 0 : -1;
    if (in.value_type != BSON_TYPE_ARRAY) {
        int rc = mf_err_set(c->err, MF_E_Location2942504,
                            "The input argument to $sortArray must be an array, but was of type: %s", tname(&in));
        mf_value_free(&in);
        return rc;
    }
    elems_of(&in, &el);
    memset(&s, 0, sizeof s);
    s.sort = e->sort;
    s.dir = e->flag ? -1 : 1;
    s.v = el.v;
    size_t *idx = bson_malloc((el.n + 1) * sizeof *idx), *tmp = bson_malloc((el.n + 1) * sizeof *tmp);
    for (size_t i = 0; i < el.n; i++)
        idx[i] = i;
    if (s.sort != NULL) {
        /* bson_t needs 128-byte alignment: an array of them comes from aligned_alloc. */
        s.docs = aligned_alloc(128, (el.n + 1) * sizeof *s.docs);
        if (s.docs == NULL)
            abort();
        memset(s.docs, 0, (el.n + 1) * sizeof *s.docs);
        s.isdoc = bson_malloc0((el.n + 1) * sizeof *s.isdoc);
        for (size_t i = 0; i < el.n; i++)
            if (el.v[i].value_type == BSON_TYPE_DOCUMENT)
                s.isdoc[i] = bson_init_static(&s.docs[i], el.v[i].value.v_doc.data, el.v[i].value.v_doc.data_len);
    }
    sa_merge(&s, idx, tmp, el.n);
    mf_value_array_init(&ab);
    for (size_t i = 0; i < el.n; i++)
        mf_value_array_push(&ab, &el.v[idx[i]]);
    mf_value_array_finish(&ab, o);
    bson_free(idx);
    bson_free(tmp);
    free(s.docs);
    bson_free(s.isdoc);
    elems_free(&el);
    mf_value_free(&in);
    return 0;
}

/* ---- $zip: slots inputs[0..ninputs), then defaults ---- */

static int
ev_zip(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    size_t ni = e->ninputs, nd = e->nargs - ni, maxn = 0, minn = SIZE_MAX;
    bson_value_t *v;
    elems_t *el;
    int rc = 0;
    size_t got = 0;

    v = bson_malloc0((e->nargs + 1) * sizeof *v);
    el = bson_malloc0((ni + 1) * sizeof *el);
    for (size_t i = 0; i < e->nargs; i++)
        mf_value_set_missing(&v[i]);
    for (size_t i = 0; i < ni; i++) {
        if (ev(e->args[i], c, &v[i]) < 0) {
            rc = -1;
            goto done;
        }
        if (mf_value_is_nullish(&v[i])) {
            mf_value_set_null(o);
            goto done;
        }
        if (v[i].value_type != BSON_TYPE_ARRAY) {
            char buf[160];
            value_str(&v[i], buf, sizeof buf);
            rc = mf_err_set(c->err, MF_E_Location34468, "$zip found a non-array expression in input: %s", buf);
            goto done;
        }
        elems_of(&v[i], &el[i]);
        got = i + 1;
        if (el[i].n > maxn)
            maxn = el[i].n;
        if (el[i].n < minn)
            minn = el[i].n;
    }
    for (size_t i = ni; i < e->nargs; i++)
        if (ev(e->args[i], c, &v[i]) < 0) {
            rc = -1;
            goto done;
        }
    {
        size_t n = e->flag ? maxn : minn;
        mf_value_array_t out;
        bson_value_t nul;
        mf_value_set_null(&nul);
        mf_value_array_init(&out);
        for (size_t r = 0; r < n; r++) {
            mf_value_array_t row;
            bson_value_t rv;
            mf_value_array_init(&row);
            for (size_t i = 0; i < ni; i++)
                mf_value_array_push(&row, r < el[i].n ? &el[i].v[r] : nd ? &v[ni + i] : &nul);
            mf_value_array_finish(&row, &rv);
            mf_value_array_push(&out, &rv);
            mf_value_free(&rv);
        }
        mf_value_array_finish(&out, o);
    }
done:
    for (size_t i = 0; i < got; i++)
        elems_free(&el[i]);
    bson_free(el);
    free_vals(v, e->nargs);
    return rc;
}

/* ---- bitwise, timestamps, $toUUID, $rand, $median, $percentile ---- */

static int
ev_bitwise(int op, const bson_value_t *v, size_t n, ctx_t *c, bson_value_t *o)
{
    const char *name = op == OP_BITAND ? "$bitAnd" : op == OP_BITOR ? "$bitOr" : "$bitXor";
    int64_t acc = op == OP_BITAND ? -1 : 0;
    bool wide = false;

    for (size_t i = 0; i < n; i++) {
        if (mf_value_is_nullish(&v[i])) {
            mf_value_set_null(o);
            return 0;
        }
        if (v[i].value_type != BSON_TYPE_INT32 && v[i].value_type != BSON_TYPE_INT64)
            return mf_err_set(c->err, MF_E_TypeMismatch, "%s only supports int and long operands.", name);
        int64_t x = as_i64(&v[i]);
        wide |= v[i].value_type == BSON_TYPE_INT64;
        acc = op == OP_BITAND ? (acc & x) : op == OP_BITOR ? (acc | x) : (acc ^ x);
    }
    if (wide)
        mf_value_set_int64(o, acc);
    else
        mf_value_set_int32(o, (int32_t)acc);
    return 0;
}

static int
ev_bitnot(const bson_value_t *a, ctx_t *c, bson_value_t *o)
{
    if (mf_value_is_nullish(a))
        mf_value_set_null(o);
    else if (a->value_type == BSON_TYPE_INT32)
        mf_value_set_int32(o, ~a->value.v_int32);
    else if (a->value_type == BSON_TYPE_INT64)
        mf_value_set_int64(o, ~a->value.v_int64);
    else if (mf_value_is_number(a))
        return mf_err_set(c->err, MF_E_TypeMismatch, "$bitNot only supports int and long, not: %s.", tname(a));
    else
        return mf_err_set(c->err, MF_E_Location28765, "$bitNot only supports numeric types, not %s", tname(a));
    return 0;
}

static int
ev_ts_part(int op, const bson_value_t *a, ctx_t *c, bson_value_t *o)
{
    if (mf_value_is_nullish(a)) {
        mf_value_set_null(o);
        return 0;
    }
    if (a->value_type != BSON_TYPE_TIMESTAMP)
        return mf_err_set(c->err, op == OP_TSSECOND ? MF_E_Location5687301 : MF_E_Location5687302,
                          " Argument to %s must be a timestamp, but is %s", op == OP_TSSECOND ? "$tsSecond" : "$tsIncrement",
                          tname(a));
    mf_value_set_int64(o, op == OP_TSSECOND ? (int64_t)a->value.v_timestamp.timestamp : (int64_t)a->value.v_timestamp.increment);
    return 0;
}

/* ev_to_uuid: {$convert: {input, to: {type: "binData", subtype: 4}, format: "uuid"}}. */
static int
ev_to_uuid(const bson_value_t *a, ctx_t *c, bson_value_t *o)
{
    uint8_t bytes[16];
    char buf[160];

    if (mf_value_is_nullish(a)) {
        mf_value_set_null(o);
        return 0;
    }
    if (a->value_type != BSON_TYPE_UTF8)
        return mf_err_set(c->err, MF_E_ConversionFailure,
                          "Unsupported conversion from %s to binData in $convert with no onError value", tname(a));
    if (!uuid_from_str(a->value.v_utf8.str, a->value.v_utf8.len, bytes)) {
        value_str(a, buf, sizeof buf);
        return mf_err_set(c->err, MF_E_ConversionFailure,
                          "Failed to parse BinData %s in $convert with no onError value: Invalid UUID string: %s", buf, buf);
    }
    set_bin(o, BSON_SUBTYPE_UUID, bytes, 16);
    return 0;
}

/* ev_rand: a double in [0, 1) from the C library's arc4random (thread-safe, no state of ours). */
static void
ev_rand(bson_value_t *o)
{
    uint64_t r = ((uint64_t)arc4random() << 32 | arc4random()) >> 11;
    mf_value_set_double(o, (double)r / 9007199254740992.0);
}

/* ev_quantile: $median / $percentile over the numbers of the input (a number or an array). */
static int
ev_quantile(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t in;
    double *xs = NULL;
    size_t n = 0;

    if (ev(e->args[0], c, &in) < 0)
        return -1;
    if (in.value_type == BSON_TYPE_ARRAY) {
        elems_t el;
        elems_of(&in, &el);
        xs = bson_malloc((el.n + 1) * sizeof *xs);
        for (size_t i = 0; i < el.n; i++)
            if (mf_value_is_number(&el.v[i]) && !isnan(as_dbl(&el.v[i])))
                xs[n++] = as_dbl(&el.v[i]);
        elems_free(&el);
    } else if (mf_value_is_number(&in) && !isnan(as_dbl(&in))) {
        xs = bson_malloc(sizeof *xs);
        xs[n++] = as_dbl(&in);
    }
    mf_value_free(&in);
    if (n > 1)
        qsort(xs, n, sizeof *xs, mf_value_double_cmp);
    /* The value of rank ceil(p * n) (MongoDB's discrete percentile, which its t-digest yields for small inputs). */
#define PCT(p) (xs[mf_value_percentile_index((p), n)])
    if (e->op->id == OP_MEDIAN) {
        if (n == 0)
            mf_value_set_null(o);
        else
            mf_value_set_double(o, PCT(0.5));
    } else {
        mf_value_array_t ab;
        bson_value_t x;
        mf_value_array_init(&ab);
        for (size_t i = 0; i < e->nps; i++) {
            if (n == 0)
                mf_value_set_null(&x);
            else
                mf_value_set_double(&x, PCT(e->ps[i]));
            mf_value_array_push(&ab, &x);
        }
        mf_value_array_finish(&ab, o);
    }
#undef PCT
    bson_free(xs);
    return 0;
}

/* ---- dates ---- */

/*
 * Dates are broken down in a zone (NULL = UTC, see doc/tz.h) into an ltime_t.
 * The calendar is the proleptic Gregorian one over int64 day counts
 * (H. Hinnant's algorithms), so any int64 millisecond value has parts.
 */
typedef struct ltime {
    int64_t y, days; /* days: local days since 1970-01-01 */
    int mon, mday, hour, min, sec, ms;
    int wday; /* 0 = Sunday */
    int yday; /* 1..366 */
    int32_t off; /* seconds east of UTC in force */
} ltime_t;

enum { U_MS, U_SECOND, U_MINUTE, U_HOUR, U_DAY, U_WEEK, U_MONTH, U_QUARTER, U_YEAR };
static const int64_t unit_ms[] = {1, 1000, 60000, 3600000, 86400000, 604800000};

/* The calendar is tz.c's (mf_days_from_civil / mf_civil_from_days). */
static int64_t
days_from_civil(int64_t y, int m, int d)
{
    return mf_days_from_civil(y, m, d);
}

static void
civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    int64_t mm, dd;
    mf_civil_from_days(z, y, &mm, &dd);
    *m = (int)mm;
    *d = (int)dd;
}

static int
days_in_month(int64_t y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : d[m - 1];
}

/* lt_break: ms since the epoch → local parts in zone z. */
static void
lt_break(const mf_tz_t *z, int64_t ms, ltime_t *t)
{
    int64_t secs = floordiv(ms, 1000), ls, sod;
    int m, d;

    t->ms = (int)(ms % 1000 + (ms % 1000 < 0 ? 1000 : 0)); /* secs * 1000 overflows near INT64_MIN */
    t->off = mf_tz_offset(z, secs);
    ls = secs + t->off;
    t->days = floordiv(ls, 86400);
    sod = ls - t->days * 86400;
    civil_from_days(t->days, &t->y, &m, &d);
    t->mon = m;
    t->mday = d;
    t->hour = (int)(sod / 3600);
    t->min = (int)(sod / 60 % 60);
    t->sec = (int)(sod % 60);
    t->wday = (int)(((t->days + 4) % 7 + 7) % 7);
    t->yday = (int)(t->days - days_from_civil(t->y, 1, 1)) + 1;
}

/* iso_dow: 1 = Monday ... 7 = Sunday of a day count. */
static int
iso_dow(int64_t days)
{
    return (int)(((days + 3) % 7 + 7) % 7) + 1;
}

/* iso_parts: ISO 8601 week-numbering year and week of a local date. */
static void
iso_parts(const ltime_t *t, int64_t *iy, int *iw)
{
    /* The Thursday of the date's week decides the year. */
    int64_t thu = t->days - iso_dow(t->days) + 4, y;
    int m, d;
    civil_from_days(thu, &y, &m, &d);
    *iy = y;
    *iw = (int)((thu - days_from_civil(y, 1, 1)) / 7) + 1;
}

/* iso_to_days: the day count of ISO week date (year, week, day); week and day may overflow. */
static int64_t
iso_to_days(int64_t y, int64_t w, int64_t d)
{
    int64_t jan4 = days_from_civil(y, 1, 4);
    return jan4 - (iso_dow(jan4) - 1) + (w - 1) * 7 + (d - 1);
}

/* mongo_week: $week, weeks starting on Sunday, 0..53. */
static int
mongo_week(const ltime_t *t)
{
    int prev_sunday = t->yday - (t->wday + 1);
    return (prev_sunday + 7) / 7;
}

/*
 * tz_of: the zone for the evaluated timezone argument v of e (v NULL: no
 * argument, UTC). 1 when v is nullish (the operator answers null), -1 with
 * 40517 / 40485 (prefixed by ctxmsg when given), else 0 with *z set; *own
 * tells whether the caller frees it (a constant timezone is opened once, at
 * parse time, and kept by the node).
 */
static int
tz_of(const mf_expr_t *e, ctx_t *c, const bson_value_t *v, const char *ctxmsg, mf_tz_t **z, bool *own)
{
    *z = NULL;
    *own = false;
    if (v == NULL)
        return 0;
    if (mf_value_is_nullish(v))
        return 1;
    if (v->value_type != BSON_TYPE_UTF8)
        return mf_err_set(c->err, MF_E_Location40517, "%s%stimezone must evaluate to a string, found %s",
                          ctxmsg ? ctxmsg : "", ctxmsg ? " :: caused by :: " : "", tname(v));
    if (e->tz != NULL) {
        *z = e->tz;
        return 0;
    }
    *z = mf_tz_open(v->value.v_utf8.str);
    if (*z == NULL)
        return mf_err_set(c->err, MF_E_Location40485, "%s%sunrecognized time zone identifier: \"%s\"",
                          ctxmsg ? ctxmsg : "", ctxmsg ? " :: caused by :: " : "", v->value.v_utf8.str);
    *own = true;
    return 0;
}

/* ev_slot: evaluates slot i of e into o (missing when the slot is absent). */
static int
ev_slot(const mf_expr_t *e, size_t i, ctx_t *c, bson_value_t *o)
{
    if (i >= e->nargs || e->args[i] == NULL) {
        mf_value_set_missing(o);
        return 0;
    }
    return ev(e->args[i], c, o);
}

static bool
has_slot(const mf_expr_t *e, size_t i)
{
    return i < e->nargs && e->args[i] != NULL;
}

/* ---- date parts: $year ... $isoWeekYear ---- */

/* date_of: *ms, the date d stands for: 0, or -1 with 16006 when d is not a date (mongod's date operators' own message). */
static int
date_of(ctx_t *c, const bson_value_t *d, int64_t *ms)
{
    if (!get_date(d, ms))
        return mf_err_set(c->err, MF_E_Location16006, "can't convert from BSON type %s to Date", tname(d));
    return 0;
}

static int
ev_datepart(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t d, tzv;
    int64_t ms = 0;
    int rc = 0;
    mf_tz_t *z = NULL;
    bool own = false;
    ltime_t t;

    if (ev(e->args[0], c, &d) < 0)
        return -1;
    mf_value_set_missing(&tzv);
    if (mf_value_is_nullish(&d)) {
        mf_value_set_null(o);
        goto done;
    }
    if ((rc = date_of(c, &d, &ms)) < 0)
        goto done;
    if (has_slot(e, 1)) {
        if (ev(e->args[1], c, &tzv) < 0) {
            rc = -1;
            goto done;
        }
        int r = tz_of(e, c, &tzv, NULL, &z, &own);
        if (r != 0) {
            if (r > 0)
                mf_value_set_null(o);
            rc = r < 0 ? -1 : 0;
            goto done;
        }
    }
    lt_break(z, ms, &t);
    switch (e->op->id) {
    case OP_YEAR: mf_value_set_int32(o, (int32_t)t.y); break;
    case OP_MONTH: mf_value_set_int32(o, t.mon); break;
    case OP_DAYOFMONTH: mf_value_set_int32(o, t.mday); break;
    case OP_HOUR: mf_value_set_int32(o, t.hour); break;
    case OP_MINUTE: mf_value_set_int32(o, t.min); break;
    case OP_SECOND: mf_value_set_int32(o, t.sec); break;
    case OP_MILLISECOND: mf_value_set_int32(o, t.ms); break;
    case OP_DAYOFWEEK: mf_value_set_int32(o, t.wday + 1); break;
    case OP_DAYOFYEAR: mf_value_set_int32(o, t.yday); break;
    case OP_WEEK: mf_value_set_int32(o, mongo_week(&t)); break;
    case OP_ISODAYOFWEEK: mf_value_set_int32(o, iso_dow(t.days)); break;
    case OP_ISOWEEK:
    case OP_ISOWEEKYEAR: {
        int64_t iy;
        int iw;
        iso_parts(&t, &iy, &iw);
        if (e->op->id == OP_ISOWEEK)
            mf_value_set_int32(o, iw);
        else
            mf_value_set_int64(o, iy);
        break;
    }
    default: mf_value_set_null(o); break;
    }
done:
    if (own)
        mf_tz_free(z);
    mf_value_free(&d);
    mf_value_free(&tzv);
    return rc;
}

/* ---- $dateToParts ---- */

static int
ev_date_to_parts(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t d, tzv, iso;
    int64_t ms = 0;
    int rc = 0, r;
    mf_tz_t *z = NULL;
    bool own = false, is_iso = false;
    ltime_t t;

    mf_value_set_missing(&tzv);
    mf_value_set_missing(&iso);
    if (ev(e->args[0], c, &d) < 0)
        return -1;
    if (ev_slot(e, 1, c, &tzv) < 0 || ev_slot(e, 2, c, &iso) < 0) {
        rc = -1;
        goto done;
    }
    r = tz_of(e, c, has_slot(e, 1) ? &tzv : NULL, NULL, &z, &own);
    if (r != 0) {
        if (r > 0)
            mf_value_set_null(o);
        rc = r < 0 ? -1 : 0;
        goto done;
    }
    if (has_slot(e, 2)) {
        if (mf_value_is_nullish(&iso)) {
            mf_value_set_null(o);
            goto done;
        }
        if (iso.value_type != BSON_TYPE_BOOL) {
            rc = mf_err_set(c->err, MF_E_Location40521, "iso8601 must evaluate to a bool, found %s", tname(&iso));
            goto done;
        }
        is_iso = iso.value.v_bool;
    }
    if (mf_value_is_nullish(&d)) {
        mf_value_set_null(o);
        goto done;
    }
    if ((rc = date_of(c, &d, &ms)) < 0)
        goto done;
    lt_break(z, ms, &t);
    {
        bson_t b = BSON_INITIALIZER;
        if (is_iso) {
            int64_t iy;
            int iw;
            iso_parts(&t, &iy, &iw);
            BSON_APPEND_INT32(&b, "isoWeekYear", (int32_t)iy);
            BSON_APPEND_INT32(&b, "isoWeek", iw);
            BSON_APPEND_INT32(&b, "isoDayOfWeek", iso_dow(t.days));
        } else {
            BSON_APPEND_INT32(&b, "year", (int32_t)t.y);
            BSON_APPEND_INT32(&b, "month", t.mon);
            BSON_APPEND_INT32(&b, "day", t.mday);
        }
        BSON_APPEND_INT32(&b, "hour", t.hour);
        BSON_APPEND_INT32(&b, "minute", t.min);
        BSON_APPEND_INT32(&b, "second", t.sec);
        BSON_APPEND_INT32(&b, "millisecond", t.ms);
        mf_value_take_bson(o, &b, false);
    }
done:
    if (own)
        mf_tz_free(z);
    mf_value_free(&d);
    mf_value_free(&tzv);
    mf_value_free(&iso);
    return rc;
}

/* ---- $dateFromParts ---- */

/*
 * part_num: evaluates slot i (named name) as an integer, dflt when absent.
 * 1 when nullish, -1 on error (40515, or 31034 when bounded and outside
 * [-32768, 32767]), 0 with *out.
 */
static int
part_num(const mf_expr_t *e, size_t i, const char *name, int64_t dflt, bool bounded, ctx_t *c, int64_t *out)
{
    bson_value_t v;
    char buf[128];
    int rc = 0;

    if (!has_slot(e, i)) {
        *out = dflt;
        return 0;
    }
    if (ev(e->args[i], c, &v) < 0)
        return -1;
    if (mf_value_is_nullish(&v)) {
        rc = 1;
    } else if (!integral64(&v, out)) {
        value_str(&v, buf, sizeof buf);
        rc = mf_err_set(c->err, MF_E_Location40515, "'%s' must evaluate to an integer, found %s with value %s", name,
                        tname(&v), buf);
    } else if (bounded && (*out < -32768 || *out > 32767)) {
        rc = mf_err_set(c->err, MF_E_Location31034,
                        "'%s' must evaluate to a value in the range [-32768, 32767]; value %" PRId64 " is not in range",
                        name, *out);
    }
    mf_value_free(&v);
    return rc;
}

/* local_parts_to_ms: the UTC ms of local day count days + h:mi:s.ms in zone z (all may overflow their ranges). */
static int64_t
local_parts_to_ms(const mf_tz_t *z, int64_t days, int64_t h, int64_t mi, int64_t s, int64_t ms)
{
    __int128 total = (__int128)days * 86400000 + (__int128)h * 3600000 + (__int128)mi * 60000 + (__int128)s * 1000 + ms;
    __int128 secs = total >= 0 ? total / 1000 : -((-total + 999) / 1000);
    int64_t rem = (int64_t)(total - secs * 1000);
    if (secs > INT64_MAX / 2 || secs < INT64_MIN / 2)
        return (int64_t)(total); /* far outside any date: no zone applies */
    int64_t utc = mf_tz_local_to_utc(z, (int64_t)secs);
    return (int64_t)((__int128)utc * 1000 + rem);
}

static int
ev_date_from_parts(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    /* slots: year month day hour minute second millisecond isoWeekYear isoWeek isoDayOfWeek timezone */
    int64_t h, mi, s, ms, y, m, d;
    bson_value_t tzv;
    mf_tz_t *z = NULL;
    bool own = false;
    int r, rc = 0;

    mf_value_set_missing(&tzv);
    if ((r = part_num(e, 3, "hour", 0, true, c, &h)) != 0 || (r = part_num(e, 4, "minute", 0, true, c, &mi)) != 0 ||
        (r = part_num(e, 5, "second", 0, false, c, &s)) != 0 ||
        (r = part_num(e, 6, "millisecond", 0, false, c, &ms)) != 0)
        goto out;
    if (ev_slot(e, 10, c, &tzv) < 0) {
        r = -1;
        goto out;
    }
    if ((r = tz_of(e, c, has_slot(e, 10) ? &tzv : NULL, NULL, &z, &own)) != 0)
        goto out;
    if (has_slot(e, 0)) {
        if ((r = part_num(e, 0, "year", 1970, false, c, &y)) != 0 || (r = part_num(e, 1, "month", 1, true, c, &m)) != 0 ||
            (r = part_num(e, 2, "day", 1, true, c, &d)) != 0)
            goto out;
        if (y < 1 || y > 9999) {
            r = mf_err_set(c->err, MF_E_Location40523,
                           "'year' must evaluate to an integer in the range 1 to 9999, found %" PRId64, y);
            goto out;
        }
        int64_t mm = y * 12 + (m - 1);
        int64_t ny = floordiv(mm, 12);
        int nm = (int)(mm - ny * 12) + 1;
        int64_t days = days_from_civil(ny, nm, 1) + d - 1;
        mf_value_set_date(o, local_parts_to_ms(z, days, h, mi, s, ms));
    } else {
        int64_t iy, iw, idw;
        if ((r = part_num(e, 7, "isoWeekYear", 1970, false, c, &iy)) != 0 ||
            (r = part_num(e, 8, "isoWeek", 1, true, c, &iw)) != 0 ||
            (r = part_num(e, 9, "isoDayOfWeek", 1, true, c, &idw)) != 0)
            goto out;
        if (iy < 1 || iy > 9999) {
            r = mf_err_set(c->err, MF_E_Location31095,
                           "'isoWeekYear' must evaluate to an integer in the range 1 to 9999, found %" PRId64, iy);
            goto out;
        }
        mf_value_set_date(o, local_parts_to_ms(z, iso_to_days(iy, iw, idw), h, mi, s, ms));
    }
out:
    if (r > 0)
        mf_value_set_null(o);
    rc = r < 0 ? -1 : 0;
    if (own)
        mf_tz_free(z);
    mf_value_free(&tzv);
    return rc;
}

/* ---- $dateFromString ---- */

/*
 * Strings without a format go through a hand-written scanner for the
 * grammar of timelib's strtotime (parse_date.re), the parser mongod uses:
 * the string is a run of tokens in any order (a date, a time, a zone, a
 * day name, "noon" ...) separated by spaces, tabs, commas or dots, each
 * token one of timelib's patterns, the longest that matches. A second
 * date, time or zone is an error, as in timelib; what is missing is left
 * for date_from_string, which raises mongod's "incomplete" error.
 * Relative phrases ("next monday", "+1 week") are not covered.
 */
typedef struct dparse {
    int64_t y, m, d, h, mi, s, ms, iy, iw, idw, doy, wk, wd;
    bool has_y, has_m, has_d, has_h, has_mi, has_s, has_iy, has_iw, has_idw, has_doy, has_wk, has_wd;
    bool has_off;
    bool freeform;   /* parsed by parse_date_auto: y, m and d must all be there */
    bool have_date;  /* a date token was seen (timelib's have_date) */
    int have_time;   /* time tokens seen (timelib's have_time) */
    int rel_wday;    /* a day name: move forward to this weekday (0 Sunday), -1 none */
    int64_t rel_days; /* "tomorrow" / "yesterday" */
    int32_t off;     /* seconds east, from the string */
    const char *errmsg;
    size_t errpos;
} dparse_t;

static const char *const month_names[] = {"january", "february", "march", "april", "may", "june", "july",
                                           "august", "september", "october", "november", "december"};

/* read_num: up to max digits at *p (at least min); -1 when fewer. */
static int64_t
read_num(const char **p, int min, int max)
{
    int64_t v = 0;
    int n = 0;
    while (n < max && isdigit((unsigned char)(*p)[0])) {
        v = v * 10 + ((*p)[0] - '0');
        (*p)++;
        n++;
    }
    return n < min ? -1 : v;
}

/* count_digits: how many digits start at p. */
static int
count_digits(const char *p)
{
    int n = 0;
    while (isdigit((unsigned char)p[n]))
        n++;
    return n;
}

/* read_month_name: a month's full or 3-letter name (any case; "sept" too) at *p; 0 if none. */
static int
read_month_name(const char **p)
{
    for (int i = 0; i < 12; i++) {
        size_t fl = strlen(month_names[i]);
        if (strncasecmp(*p, month_names[i], fl) == 0) {
            *p += fl;
            return i + 1;
        }
    }
    if (strncasecmp(*p, "sept", 4) == 0 && !isalpha((unsigned char)(*p)[4])) {
        *p += 4;
        return 9;
    }
    for (int i = 0; i < 12; i++) {
        if (strncasecmp(*p, month_names[i], 3) == 0 && !isalpha((unsigned char)(*p)[3])) {
            *p += 3;
            return i + 1;
        }
    }
    return 0;
}

/*
 * Zone abbreviations and their UTC offsets in seconds: the first entry of
 * each name in timelib's timezonemap.h (which is the one timelib_lookup_abbr
 * answers), for the names people write, plus the military letters at the
 * end of that table ("a" +1 ... "m" +12, "n" -1 ... "y" -12, "z" 0). A
 * summer-time name carries its summer offset (BST +1, CEST +2), as timelib
 * adds the dst hour back. Names outside this subset are "not found".
 */
static const struct zone_abbr {
    const char *name;
    int32_t off;
} zone_abbrs[] = {
    {"utc", 0},          {"gmt", 0},          {"uct", 0},          {"wet", 0},          {"west", 3600},
    {"bst", 3600},       {"cet", 3600},       {"cest", 7200},      {"met", 3600},       {"mest", 7200},
    {"eet", 7200},       {"eest", 10800},     {"ist", 7200},       {"idt", 10800},      {"msk", 10800},
    {"msd", 14400},      {"wat", 3600},       {"sast", 7200},      {"eat", 10800},      {"est", -18000},
    {"edt", -14400},     {"cst", -21600},     {"cdt", -18000},     {"mst", -25200},     {"mdt", -21600},
    {"pst", -28800},     {"pdt", -25200},     {"akst", -32400},    {"akdt", -28800},    {"hst", -36000},
    {"hdt", -34200},     {"ast", 10800},      {"adt", -10800},     {"nst", -12600},     {"pkt", 18000},
    {"ict", 25200},      {"hkt", 28800},      {"sgt", 28800},      {"pht", 28800},      {"jst", 32400},
    {"awst", 28800},     {"aest", 36000},     {"aedt", 39600},     {"acdt", 37800},     {"nzst", 43200},
    {"nzdt", 46800},     {"a", 3600},         {"b", 7200},         {"c", 10800},        {"d", 14400},
    {"e", 18000},        {"f", 21600},        {"g", 25200},        {"h", 28800},        {"i", 32400},
    {"k", 36000},        {"l", 39600},        {"m", 43200},        {"n", -3600},        {"o", -7200},
    {"p", -10800},       {"q", -14400},       {"r", -18000},       {"s", -21600},       {"t", -25200},
    {"u", -28800},       {"v", -32400},       {"w", -36000},       {"x", -39600},       {"y", -43200},
    {"z", 0},
};

/* zone_abbr_find: the offset of the n-letter abbreviation at s (any case); false if unknown. */
static bool
zone_abbr_find(const char *s, size_t n, int32_t *off)
{
    for (size_t i = 0; i < sizeof zone_abbrs / sizeof zone_abbrs[0]; i++)
        if (strlen(zone_abbrs[i].name) == n && strncasecmp(s, zone_abbrs[i].name, n) == 0) {
            *off = zone_abbrs[i].off;
            return true;
        }
    return false;
}

/*
 * read_tz_correction: timelib's timelib_parse_tz_cor after the sign at *p:
 * the whole run of digits and colons, read by its length: "H", "HH",
 * "H:M", "H:MM" / "HH:M" / "HHMM" / "HMM", "HH:MM", "HHMMSS", "HH:MM:SS".
 * Seconds east, unsigned, in *off. 1 read (*p past the run); 0 no digit
 * follows; -1 a run of another shape (timelib's "The timezone could not be
 * found in the database"). The run is copied (at most 8 characters are
 * ever read), so no number can overflow.
 */
static int
read_tz_correction(const char **p, int32_t *off)
{
    const char *q = *p;
    char b[9];
    size_t n;
    while (isdigit((unsigned char)*q) || *q == ':')
        q++;
    n = (size_t)(q - *p);
    if (n == 0 || !isdigit((unsigned char)**p))
        return 0;
    if (n > 8)
        return -1;
    memcpy(b, *p, n);
    b[n] = '\0';
    switch (n) {
    case 1:
    case 2:
        *off = (int32_t)strtol(b, NULL, 10) * 3600;
        break;
    case 3:
    case 4:
        if (b[1] == ':')
            *off = (int32_t)(strtol(b, NULL, 10) * 3600 + strtol(b + 2, NULL, 10) * 60);
        else if (b[2] == ':')
            *off = (int32_t)(strtol(b, NULL, 10) * 3600 + strtol(b + 3, NULL, 10) * 60);
        else {
            long v = strtol(b, NULL, 10);
            *off = (int32_t)(v / 100 * 3600 + v % 100 * 60);
        }
        break;
    case 5:
        if (b[2] != ':')
            return -1;
        *off = (int32_t)(strtol(b, NULL, 10) * 3600 + strtol(b + 3, NULL, 10) * 60);
        break;
    case 6: {
        long v = strtol(b, NULL, 10);
        *off = (int32_t)(v / 10000 * 3600 + (v / 100) % 100 * 60 + v % 100);
        break;
    }
    case 8:
        if (b[2] != ':' || b[5] != ':')
            return -1;
        *off = (int32_t)(strtol(b, NULL, 10) * 3600 + strtol(b + 3, NULL, 10) * 60 + strtol(b + 6, NULL, 10));
        break;
    default:
        return -1;
    }
    *p = q;
    return 1;
}

/*
 * read_zone: timelib_parse_zone at *p, for a format's %z and for a zone
 * token of a free-form string: spaces and '(' skipped, "GMT" before a sign
 * dropped, "+hh[:mm]" / "-hhmm" read as an offset, otherwise a word (to a
 * space, ')' or the end; only letters in a free-form string) looked up as
 * an abbreviation. 1 found, 0 nothing zone-like here, -1 a word that is no
 * known abbreviation (*p at it), -2 a time zone identifier ("Europe/Paris").
 */
static int
read_zone(const char **p, int32_t *off, bool freeform)
{
    const char *s = *p, *w;
    int sign;
    while (*s == ' ' || *s == '\t' || *s == '(')
        s++;
    if (strncmp(s, "GMT", 3) == 0 && (s[3] == '+' || s[3] == '-'))
        s += 3;
    if (*s == '+' || *s == '-') {
        sign = *s == '-' ? -1 : 1;
        s++;
        int rc = read_tz_correction(&s, off);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            *p = s;
            return -1;
        }
        *off *= sign;
        goto found;
    }
    w = s;
    if (freeform) {
        while (isalpha((unsigned char)*s))
            s++;
        if (isupper((unsigned char)*w) && (*s == '/' || *s == '_' || *s == '-') && isalpha((unsigned char)s[1])) {
            *p = w;
            return -2; /* [A-Z][a-z]+([_/-][A-Za-z]+)+: an identifier */
        }
        if (s == w || s - w > 6)
            return 0;
    } else {
        while (*s && *s != ' ' && *s != ')')
            s++;
        if (s == w)
            return 0;
        if (memchr(w, '/', (size_t)(s - w)) != NULL) {
            *p = w;
            return -2;
        }
    }
    if (!zone_abbr_find(w, (size_t)(s - w), off)) {
        *p = w;
        return -1;
    }
found:
    while (*s == ')')
        s++;
    *p = s;
    return 1;
}

/* read_offset: a zone for the format parser's %z (see read_zone). */
static bool
read_offset(const char **p, int32_t *off)
{
    return read_zone(p, off, false) == 1;
}

/* read_meridian: timelib's meridian at *p ([AaPp] "."? [Mm] "."? then a space or the end); 0 none, else 'a' or 'p'. */
static int
read_meridian(const char **p)
{
    const char *q = *p;
    int ap = tolower((unsigned char)*q);
    if (ap != 'a' && ap != 'p')
        return 0;
    q++;
    if (*q == '.')
        q++;
    if (*q != 'm' && *q != 'M')
        return 0;
    q++;
    if (*q == '.')
        q++;
    if (*q != '\0' && *q != ' ' && *q != '\t')
        return 0;
    *p = q;
    return ap;
}

/* skip_day_suffix: "st", "nd", "rd" or "th" after a day number. */
static void
skip_day_suffix(const char **p)
{
    if (strncasecmp(*p, "st", 2) == 0 || strncasecmp(*p, "nd", 2) == 0 || strncasecmp(*p, "rd", 2) == 0 ||
        strncasecmp(*p, "th", 2) == 0)
        *p += 2;
}

/* two_digit_year: timelib's TIMELIB_PROCESS_YEAR: a year of fewer than 4 digits below 70 is 20xx, else 19xx. */
static int64_t
two_digit_year(int64_t y, ptrdiff_t len)
{
    if (len >= 4 || y >= 100)
        return y;
    return y < 70 ? y + 2000 : y + 1900;
}

/*
 * read_time: timelib's 24-hour times at *p (the caller has skipped a 't'):
 * hour24 [:.] minute ([:.] second ("." fraction)?)?, with an optional
 * meridian after an hour of 1-12 ("11:56 pm"). The fields are set only
 * when the whole form matches; false otherwise.
 */
static bool
read_time(const char **p, dparse_t *r)
{
    const char *q = *p, *t;
    int64_t h = read_num(&q, 1, 2), mi, s = 0, ms = 0;
    int mer;
    if (h < 0 || h > 24 || (*q != ':' && *q != '.'))
        return false;
    q++;
    if ((mi = read_num(&q, 1, 2)) < 0 || mi > 59)
        return false;
    if ((*q == ':' || *q == '.') && isdigit((unsigned char)q[1])) {
        t = q + 1;
        if ((s = read_num(&t, 1, 2)) < 0 || s > 60)
            return false;
        q = t;
        if ((*q == '.' || *q == ',') && isdigit((unsigned char)q[1])) {
            int n = 0;
            q++;
            while (isdigit((unsigned char)*q)) {
                if (n < 3)
                    ms = ms * 10 + (*q - '0');
                n++;
                q++;
            }
            while (n < 3) {
                ms *= 10;
                n++;
            }
        }
    }
    t = q;
    while (*t == ' ' || *t == '\t')
        t++;
    if (h >= 1 && h <= 12 && (mer = read_meridian(&t)) != 0) {
        h = h % 12 + (mer == 'p' ? 12 : 0);
        q = t;
    }
    r->h = h, r->mi = mi, r->s = s, r->ms = ms;
    r->has_h = r->has_mi = r->has_s = true;
    *p = q;
    return true;
}

/* Token outcomes of the free-form scanner's helpers. */
enum { TOK_NONE = 0, TOK_DATE, TOK_TIME };

/*
 * scan_numeric_date: a date token starting with digits at *p, the longest
 * of timelib's forms: YYYYMMDD, YYYY-Www[-D], YYYY-MM-DD, YYYY/MM/DD,
 * YYYY-MM (day 1), YYYY-Mon-DD, YYYY Month (day 1), DD-MM-YYYY and
 * DD.MM.YYYY / DD.MM.YY (pointed), YY-MM-DD, M/D[/Y] (American), and
 * D[suffix] Month [Year]. TOK_DATE with the fields set, or TOK_NONE.
 */
static int
scan_numeric_date(const char **p, dparse_t *r)
{
    const char *s = *p, *q = s, *t;
    int n = count_digits(s), mon;
    int64_t a, b, cc;

    if (n == 8) {
        a = read_num(&q, 8, 8);
        r->y = a / 10000, r->m = a / 100 % 100, r->d = a % 100;
        if (r->m > 12 || r->d > 31)
            return TOK_NONE;
        r->has_y = r->has_m = r->has_d = true;
        goto done;
    }
    if (n == 4) {
        a = read_num(&q, 4, 4);
        if (q[0] == '-' && q[1] == 'W' && isdigit((unsigned char)q[2])) {
            /* ISO week date: YYYY-Www[-D] */
            t = q + 2;
            if ((b = read_num(&t, 2, 2)) < 1 || b > 53)
                return TOK_NONE;
            cc = 1;
            if (t[0] == '-' && isdigit((unsigned char)t[1])) {
                t++;
                cc = read_num(&t, 1, 1);
            }
            r->iy = a, r->iw = b, r->idw = cc;
            r->has_iy = r->has_iw = r->has_idw = true;
            q = t;
            goto done;
        }
        if ((q[0] == '-' || q[0] == '/') && isalpha((unsigned char)q[1])) {
            /* pgtextreverse: YYYY-Mon-DD */
            char sep = *q;
            t = q + 1;
            if ((mon = read_month_name(&t)) == 0 || *t != sep)
                return TOK_NONE;
            t++;
            if ((cc = read_num(&t, 1, 2)) < 0 || cc > 31)
                return TOK_NONE;
            r->y = a, r->m = mon, r->d = cc;
            r->has_y = r->has_m = r->has_d = true;
            q = t;
            goto done;
        }
        if ((q[0] == '-' || q[0] == '/') && isdigit((unsigned char)q[1])) {
            char sep = *q;
            t = q + 1;
            if ((b = read_num(&t, 1, 2)) < 0 || b > 12)
                return TOK_NONE;
            cc = 1; /* gnudateshorter: YYYY-MM is the month's first day */
            if (*t == sep && isdigit((unsigned char)t[1])) {
                t++;
                if ((cc = read_num(&t, 1, 2)) < 0 || cc > 31)
                    return TOK_NONE;
                skip_day_suffix(&t);
            } else if (sep == '/') {
                return TOK_NONE;
            }
            r->y = a, r->m = b, r->d = cc;
            r->has_y = r->has_m = r->has_d = true;
            q = t;
            goto done;
        }
        /* datenodayrev: YYYY [ .\t-]* Month, the month's first day */
        t = q;
        while (*t == ' ' || *t == '.' || *t == '\t' || *t == '-')
            t++;
        if (isalpha((unsigned char)*t) && (mon = read_month_name(&t)) > 0 && !isalpha((unsigned char)*t)) {
            r->y = a, r->m = mon, r->d = 1;
            r->has_y = r->has_m = r->has_d = true;
            q = t;
            goto done;
        }
        return TOK_NONE;
    }
    if (n < 1 || n > 2)
        return TOK_NONE;
    a = read_num(&q, 1, 2);
    if (*q == '/' && isdigit((unsigned char)q[1])) {
        /* American: M/D[/Y], the year of 1-4 digits */
        t = q + 1;
        if (a > 12 || (b = read_num(&t, 1, 2)) < 0 || b > 31)
            return TOK_NONE;
        r->m = a, r->d = b;
        r->has_m = r->has_d = true;
        if (*t == '/' && isdigit((unsigned char)t[1])) {
            const char *y0 = ++t;
            cc = read_num(&t, 1, 4);
            r->y = two_digit_year(cc, t - y0);
            r->has_y = true;
        }
        q = t;
        goto done;
    }
    if ((*q == '-' || *q == '.' || *q == '\t') && isdigit((unsigned char)q[1])) {
        char sep1 = *q;
        t = q + 1;
        if ((b = read_num(&t, 1, 2)) < 0)
            return TOK_NONE;
        if ((*t == '-' || *t == '.') && isdigit((unsigned char)t[1])) {
            char sep2 = *t++;
            int yn = count_digits(t);
            if (yn >= 4 && a <= 31 && b <= 12) {
                /* pointeddate4: DD[.-]MM[.-]YYYY */
                r->y = read_num(&t, 4, 4), r->m = b, r->d = a;
            } else if (yn == 2 && sep1 == '.' && sep2 == '.' && a <= 31 && b <= 12) {
                /* pointeddate2: DD.MM.YY */
                r->y = two_digit_year(read_num(&t, 2, 2), 2), r->m = b, r->d = a;
            } else if (sep1 == '-' && sep2 == '-' && b <= 12 && yn <= 2) {
                /* gnudateshort / iso8601date2: YY-MM-DD */
                r->d = read_num(&t, 1, 2);
                if (r->d > 31)
                    return TOK_NONE;
                skip_day_suffix(&t);
                r->y = two_digit_year(a, q - s), r->m = b;
            } else {
                return TOK_NONE;
            }
            r->has_y = r->has_m = r->has_d = true;
            q = t;
            goto done;
        }
        if (sep1 == '.')
            return TOK_NONE; /* "11.56" is a time */
    }
    /* datefull / datenoyearrev: D[suffix] [ \t.-]* Month [ \t.-]* [Year] */
    if (a > 31)
        return TOK_NONE;
    t = q;
    skip_day_suffix(&t);
    while (*t == ' ' || *t == '\t' || *t == '.' || *t == '-')
        t++;
    if (!isalpha((unsigned char)*t) || (mon = read_month_name(&t)) == 0 || isalpha((unsigned char)*t))
        return TOK_NONE;
    r->m = mon, r->d = a;
    r->has_m = r->has_d = true;
    q = t;
    while (*t == ' ' || *t == '\t' || *t == '.' || *t == '-')
        t++;
    if (isdigit((unsigned char)*t) && t[1] != ':' && t[2] != ':' && !(count_digits(t) <= 2 && t[count_digits(t)] == '.')) {
        const char *y0 = t;
        cc = read_num(&t, 1, 4);
        if (!isdigit((unsigned char)*t)) {
            r->y = two_digit_year(cc, t - y0);
            r->has_y = true;
            q = t;
        }
    }
done:
    *p = q;
    return TOK_DATE;
}

/*
 * scan_month_date: a date token starting with a month name at *p:
 * Month D[suffix][,] Year (datetextual), Month D (datenoyear), Month YYYY
 * (datenoday, the first), Mon-DD-YYYY, or the month alone.
 */
static int
scan_month_date(const char **p, dparse_t *r)
{
    const char *q = *p, *t;
    int mon = read_month_name(&q);
    int64_t a;
    if (mon == 0 || isalpha((unsigned char)*q))
        return TOK_NONE;
    r->m = mon, r->has_m = true;
    t = q;
    bool dashed = *q == '-'; /* pgtextshort: Mon-DD-YYYY */
    while (*t == ' ' || *t == '.' || *t == '\t' || *t == '-')
        t++;
    if (count_digits(t) == 4 && t[4] != ':') {
        r->y = read_num(&t, 4, 4), r->d = 1; /* datenoday: "July 2017" */
        r->has_y = r->has_d = true;
        q = t;
    } else if (count_digits(t) >= 1 && count_digits(t) <= 2 && t[count_digits(t)] != ':' &&
               t[count_digits(t)] != '.') {
        a = read_num(&t, 1, 2);
        if (a > 31)
            return TOK_NONE;
        r->d = a, r->has_d = true;
        skip_day_suffix(&t);
        q = t;
        /* [,.stndrh\t ]+ year, or "-" year after Mon-DD */
        while (*t == ',' || *t == '.' || *t == ' ' || *t == '\t')
            t++;
        if (dashed && t == q && *t == '-' && isdigit((unsigned char)t[1]))
            t++;
        if (isdigit((unsigned char)*t)) {
            const char *y0 = t;
            int n = count_digits(t);
            if (n <= 4 && t[n] != ':' && t[n] != '.' && !(n <= 2 && (t[n] == ':' || t[n] == '.'))) {
                int64_t y = read_num(&t, 1, 4);
                r->y = two_digit_year(y, t - y0), r->has_y = true;
                q = t;
            }
        }
    }
    *p = q;
    return TOK_DATE;
}

/* The words timelib's scanner knows before it tries a zone. */
static const char *const day_names[] = {"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"};

/* read_day_name: a day's full or 3-letter name at *p; its number (0 Sunday) or -1. */
static int
read_day_name(const char **p)
{
    for (int i = 0; i < 7; i++) {
        size_t fl = strlen(day_names[i]);
        size_t l = strncasecmp(*p, day_names[i], fl) == 0 && !isalpha((unsigned char)(*p)[fl])    ? fl
                 : strncasecmp(*p, day_names[i], 3) == 0 && !isalpha((unsigned char)(*p)[3]) ? 3
                                                                                               : 0;
        if (l) {
            *p += l;
            return i;
        }
    }
    return -1;
}

/* word_is: the word w (any case) at p, not followed by a letter. */
static bool
word_is(const char *p, const char *w)
{
    size_t n = strlen(w);
    return strncasecmp(p, w, n) == 0 && !isalpha((unsigned char)p[n]);
}

/* parse_date_auto: a free-form date string of len bytes (NULs in it are separators, as in timelib). */
static bool
parse_date_auto(const char *str, size_t len, dparse_t *r)
{
    const char *p = str, *end = str + len, *q;
    int rc;

    r->freeform = true;
    r->rel_wday = -1;
    while (p < end) {
        unsigned char ch = (unsigned char)*p;
        if (ch == ' ' || ch == '\t' || ch == ',' || ch == '.' || ch == '\n' || ch == '\0') {
            p++;
            continue;
        }
        q = p;
        if (isdigit(ch) || ((ch == 't' || ch == 'T') && isdigit((unsigned char)p[1]))) {
            bool tprefix = !isdigit(ch);
            const char *t = tprefix ? p + 1 : p;
            int n = count_digits(t);
            dparse_t save = *r;
            if (!tprefix && (rc = scan_numeric_date(&q, r)) == TOK_DATE) {
                if (save.have_date) {
                    *r = save;
                    r->errmsg = "Double date specification";
                    goto bad;
                }
                r->have_date = true;
                p = q;
                continue;
            }
            *r = save;
            q = t;
            if (n <= 2 && (t[n] == ':' || t[n] == '.') && read_time(&q, r)) {
                /* timeshort24 / timelong24 / iso8601long, with a 12-hour meridian */
            } else if (!tprefix && n <= 2) {
                /* timetiny12: "11am", "11 pm" */
                int64_t h = read_num(&t, 1, 2);
                int mer;
                q = t;
                while (*q == ' ' || *q == '\t')
                    q++;
                if (h < 1 || h > 12 || (mer = read_meridian(&q)) == 0) {
                    q = p;
                    r->errmsg = "Unexpected character";
                    goto bad;
                }
                r->h = h % 12 + (mer == 'p' ? 12 : 0), r->mi = r->s = r->ms = 0;
                r->has_h = r->has_mi = r->has_s = true;
            } else if ((n == 4 || n == 6) && !isdigit((unsigned char)t[n])) {
                /* gnunocolon HHMM / iso8601nocolon HHMMSS; HHMM after a time is the year */
                int64_t v = read_num(&t, n, n), h, mi, s;
                if (n == 4 && !tprefix && r->have_time == 1) {
                    r->y = v, r->has_y = true;
                    r->have_time++;
                    p = t;
                    continue;
                }
                h = n == 4 ? v / 100 : v / 10000;
                mi = n == 4 ? v % 100 : v / 100 % 100;
                s = n == 4 ? 0 : v % 100;
                if (h > 24 || mi > 59 || s > 60) {
                    r->errmsg = "Unexpected character";
                    goto bad;
                }
                if (r->have_time) {
                    r->errmsg = "Double time specification";
                    goto bad;
                }
                r->h = h, r->mi = mi, r->s = s, r->ms = 0;
                r->has_h = r->has_mi = r->has_s = true;
                q = t;
            } else {
                r->errmsg = "Unexpected character";
                goto bad;
            }
            if (save.have_time) {
                *r = save;
                q = p;
                r->errmsg = "Double time specification";
                goto bad;
            }
            r->have_time = 1;
            p = q;
            continue;
        }
        if (isalpha(ch)) {
            int wd;
            int32_t off;
            if (word_is(p, "noon") || word_is(p, "midnight") || word_is(p, "today") || word_is(p, "now") ||
                word_is(p, "tomorrow") || word_is(p, "yesterday")) {
                /* timelib's keywords: all but "now" reset the time to 00:00:00, "noon" then sets 12 */
                if (!word_is(p, "now")) {
                    r->h = r->mi = r->s = r->ms = 0;
                    r->has_h = r->has_mi = r->has_s = true;
                    r->have_time = 0;
                    if (word_is(p, "noon"))
                        r->h = 12, r->have_time = 1;
                    if (word_is(p, "tomorrow"))
                        r->rel_days += 1;
                    if (word_is(p, "yesterday"))
                        r->rel_days -= 1;
                }
                while (isalpha((unsigned char)*p))
                    p++;
                continue;
            }
            if ((wd = read_day_name(&q)) >= 0) {
                /* a day name moves the date forward to that weekday, and resets the time */
                r->rel_wday = wd;
                r->h = r->mi = r->s = r->ms = 0;
                r->has_h = r->has_mi = r->has_s = true;
                r->have_time = 0;
                p = q;
                continue;
            }
            if (!(toupper(ch) == 'G' && strncasecmp(p, "GMT", 3) == 0 && (p[3] == '+' || p[3] == '-'))) {
                dparse_t save = *r;
                if (scan_month_date(&q, r) == TOK_DATE) {
                    if (save.have_date) {
                        *r = save;
                        q = p;
                        r->errmsg = "Double date specification";
                        goto bad;
                    }
                    r->have_date = true;
                    p = q;
                    continue;
                }
                *r = save;
            }
            q = p;
            switch (read_zone(&q, &off, true)) {
            case 1:
                goto zone;
            case -2:
                r->errmsg = "passing a time zone identifier as part of the string is not allowed";
                goto bad;
            case -1:
                r->errmsg = "The timezone could not be found in the database";
                goto bad;
            default:
                r->errmsg = "Unexpected character";
                goto bad;
            }
        zone:
            if (r->has_off) {
                q = p;
                r->errmsg = "Double timezone specification";
                goto bad;
            }
            r->off = off, r->has_off = true;
            p = q;
            continue;
        }
        if (ch == '+' || ch == '-' || ch == '(') {
            int32_t off;
            int zrc = read_zone(&q, &off, true);
            if (zrc == 1) {
                if (r->has_off) {
                    q = p;
                    r->errmsg = "Double timezone specification";
                    goto bad;
                }
                r->off = off, r->has_off = true;
                p = q;
                continue;
            }
            if (zrc == -1 && ch != '(') { /* a sign and digits of no offset's shape (timelib_parse_tz_cor) */
                q = p;
                r->errmsg = "The timezone could not be found in the database";
                goto bad;
            }
            q = p;
        }
        r->errmsg = "Unexpected character";
        goto bad;
    }
    return true;
bad:
    r->errpos = (size_t)(q - str);
    return false;
}

/*
 * The plain numeric directives of a $dateFromString format: the digits each
 * reads, mongod's message when they are not there, and the dparse_t field
 * (value and has_ flag, by offset) it sets. %j and %L check or scale theirs
 * and are parse_date_fmt's own cases.
 */
typedef struct date_num {
    char spec;
    int min, max;
    const char *missing;
    size_t val, has;
} date_num_t;

#define DATE_NUM(c, lo, hi, msg, f) {c, lo, hi, msg, offsetof(dparse_t, f), offsetof(dparse_t, has_##f)}
static const date_num_t date_nums[] = {
    DATE_NUM('Y', 4, 4, "A four digit year could not be found", y),
    DATE_NUM('G', 1, 4, "A four digit ISO year could not be found", iy), /* timelib_get_nr(4): 1-4 digits */
    DATE_NUM('m', 1, 2, "A two digit month could not be found", m),
    DATE_NUM('d', 1, 2, "A two digit day could not be found", d),
    DATE_NUM('H', 1, 2, "A two digit hour could not be found", h),
    DATE_NUM('M', 1, 2, "A two digit minute could not be found", mi),
    DATE_NUM('S', 1, 2, "A two digit second could not be found", s),
    DATE_NUM('V', 1, 2, "A two digit ISO week could not be found", iw),
    DATE_NUM('u', 1, 1, "A single digit day of week could not be found", idw),
    DATE_NUM('w', 1, 1, "A single digit day of week could not be found", wd),
    DATE_NUM('U', 1, 2, "A two digit week could not be found", wk),
};
#undef DATE_NUM

/* date_num_of: the numeric directive spec, or NULL when it is another. */
static const date_num_t *
date_num_of(char spec)
{
    for (size_t i = 0; i < sizeof date_nums / sizeof date_nums[0]; i++)
        if (date_nums[i].spec == spec)
            return &date_nums[i];
    return NULL;
}

/* parse_date_fmt: the string against a format of MongoDB's specifiers (validated already). */
static bool
parse_date_fmt(const char *str, const char *fmt, dparse_t *r)
{
    const char *p = str, *f;
    int64_t v;

    /*
     * timelib_parse_from_format_with_map: both strings are read as C
     * strings (an embedded NUL ends them) and the loop stops when either
     * ends; what is left of the string is "Trailing data", what is left of
     * the format "Data missing". A literal that does not match (an escaped
     * "%%" too) is TIMELIB_ERR_FORMAT_LITERAL_MISMATCH, which mongod words
     * "Format literal not found".
     */
    for (f = fmt; *f && *p; f++) {
        const date_num_t *dn;
        if (*f != '%' || f[1] == '%') {
            if (*f == '%')
                f++;
            if (*p != *f) {
                r->errmsg = "Format literal not found";
                goto bad;
            }
            p++;
            continue;
        }
        f++;
        if ((dn = date_num_of(*f)) != NULL) {
            const char *begin = p;
            if ((v = read_num(&p, dn->min, dn->max)) < 0) {
                r->errmsg = dn->missing;
                goto bad;
            }
            if ((*f == 'V' && (v < 1 || v > 53)) || (*f == 'u' && (v < 1 || v > 7))) {
                r->errmsg = *f == 'V' ? "ISO Week must be between 1 and 53" : "Day of week must be between 1 and 7";
                p = begin;
                goto bad;
            }
            *(int64_t *)((char *)r + dn->val) = v;
            *(bool *)((char *)r + dn->has) = true;
            continue;
        }
        switch (*f) {
        case 'j':
            if ((v = read_num(&p, 3, 3)) < 0) {
                r->errmsg = "A three digit day-of-year could not be found";
                goto bad;
            }
            if (!r->has_y && !r->has_iy) {
                r->errmsg = "A 'day of year' can only come after a year has been found";
                goto bad;
            }
            r->doy = v, r->has_doy = true;
            break;
        case 'L': {
            const char *s0 = p;
            if ((v = read_num(&p, 1, 3)) < 0) {
                r->errmsg = "A three digit millisecond could not be found";
                goto bad;
            }
            for (ptrdiff_t n = p - s0; n < 3; n++)
                v *= 10;
            r->ms = v;
            break;
        }
        case 'z':
            if (!read_offset(&p, &r->off)) {
                r->errmsg = isupper((unsigned char)*p) ? "passing a time zone identifier as part of the string is not allowed"
                                                      : "The timezone could not be found in the database";
                goto bad;
            }
            r->has_off = true;
            break;
        case 'Z': {
            int sign = 1;
            if (*p == '+' || *p == '-')
                sign = *p++ == '-' ? -1 : 1;
            else {
                r->errmsg = "Missing '+' or '-' for timezone offset";
                goto bad;
            }
            if ((v = read_num(&p, 1, 4)) < 0) {
                r->errmsg = "Missing timezone offset in minutes";
                goto bad;
            }
            r->off = sign * (int32_t)v * 60;
            r->has_off = true;
            break;
        }
        case 'b':
        case 'B': {
            int mon = read_month_name(&p);
            if (mon == 0) {
                r->errmsg = "A textual month could not be found";
                goto bad;
            }
            r->m = mon, r->has_m = true;
            break;
        }
        default:
            r->errmsg = "The format separator does not match";
            goto bad;
        }
    }
    if (*p != '\0') {
        r->errmsg = "Trailing data";
        goto bad;
    }
    if (*f != '\0') {
        r->errmsg = "Data missing";
        goto bad;
    }
    if ((r->has_y || r->has_m || r->has_d) && (r->has_iy || r->has_iw || r->has_idw)) {
        r->errmsg = "Mixing of ISO dates with natural dates is not allowed";
        goto bad;
    }
    return true;
bad:
    r->errpos = (size_t)(p - str);
    return false;
}

/*
 * shown_string: str (len bytes) as the error messages quote it. mongod
 * quotes the whole StringData, embedded NULs included; an mf_error_t
 * message is a C string, so a NUL is shown as the two characters "\0"
 * rather than cutting the rest of the string off. buf holds size bytes.
 */
static const char *
shown_string(const char *str, size_t len, char *buf, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 3 < size; i++) {
        if (str[i] == '\0') {
            buf[o++] = '\\';
            buf[o++] = '0';
        } else {
            buf[o++] = str[i];
        }
    }
    buf[o] = '\0';
    return buf;
}

/*
 * date_from_string: parses str (len bytes; fmt NULL: free form) in zone z
 * into *ms; -1 with 241 ConversionFailure, worded as mongod's
 * TimeZoneDatabase::fromString words timelib's errors and warnings.
 */
static int
date_from_string(ctx_t *c, const char *str, size_t len, const char *fmt, const mf_tz_t *z, bool tz_given, int64_t *ms)
{
    dparse_t r;
    bool ok;
    int64_t days;
    char shown[600];

    memset(&r, 0, sizeof r);
    r.m = r.d = 1;
    r.rel_wday = -1;
    ok = fmt ? parse_date_fmt(str, fmt, &r) : parse_date_auto(str, len, &r);
    if (!ok) {
        char ch = r.errpos < len ? str[r.errpos] : '\0';
        return mf_err_set(c->err, MF_E_ConversionFailure, "Error parsing date string '%s'; %zu: %s '%c'",
                          shown_string(str, len, shown, sizeof shown), r.errpos, r.errmsg, ch ? ch : ' ');
    }
    if (!r.has_h && !r.has_mi && !r.has_s)
        r.has_h = true;
    if (r.has_h) /* a time without seconds (or minutes) has them at 0 */
        r.has_mi = r.has_s = true;
    if (r.has_iy) {
        /* timelib: a missing ISO week or day of week is 1 ("2017" as %G is 2017-01-02) */
        days = iso_to_days(r.iy, r.has_iw ? r.iw : 1, r.has_idw ? r.idw : 1);
    } else if (r.has_iw || r.has_idw) {
        goto invalid; /* an ISO week or day without an ISO year: timelib's "parsed date was invalid" */
    } else if (r.has_y && !r.has_m && !r.has_d && (r.has_wk || r.has_wd)) {
        /* %U (weeks from the year's first Sunday, as $week) and %w (1 = Sunday) */
        int64_t jan1 = days_from_civil(r.y, 1, 1);
        int jan1_wday = (int)(((jan1 + 4) % 7 + 7) % 7);
        int64_t first_sunday = jan1 + (7 - jan1_wday) % 7; /* week 1 starts there, week 0 before it */
        days = first_sunday + ((r.has_wk ? r.wk : 0) - 1) * 7 + (r.has_wd ? r.wd - 1 : 0);
    } else if (r.has_doy) {
        days = days_from_civil(r.y, 1, 1) + r.doy - 1;
        if (r.doy < 1 || r.doy > 366)
            goto invalid;
    } else {
        if (!r.has_y || !(r.has_m || r.has_d) || !r.has_h || !r.has_mi || !r.has_s)
            goto incomplete;
        if (r.freeform && !(r.has_m && r.has_d)) /* timelib leaves them unset: mongod's incomplete */
            goto incomplete;
        if (r.m < 1 || r.m > 12 || r.d < 1 || r.d > days_in_month(r.y, (int)r.m))
            goto invalid;
        days = days_from_civil(r.y, (int)r.m, (int)r.d);
    }
    if (!r.has_h || !r.has_mi || !r.has_s)
        goto incomplete;
    if (r.h > 23 || r.mi > 59 || r.s > 59) /* timelib_valid_time: 24:00 is a warning, which mongod raises */
        return mf_err_set(c->err, MF_E_ConversionFailure, "Error parsing date string '%s'; %zu: The parsed time was invalid ' '",
                          shown_string(str, len, shown, sizeof shown), len);
    /* timelib's relative parts of a free-form string: "tomorrow", then a day name moving forward */
    days += r.rel_days;
    if (r.rel_wday >= 0)
        days += ((r.rel_wday - (((days + 4) % 7 + 7) % 7)) % 7 + 7) % 7;
    if (r.has_off) {
        if (tz_given && !mf_tz_is_utc(z))
            return mf_err_set(c->err, MF_E_ConversionFailure,
                              "you cannot pass in a date/time string with GMT offset together with a timezone argument");
        *ms = (days * 86400 + r.h * 3600 + r.mi * 60 + r.s - r.off) * 1000 + r.ms;
        return 0;
    }
    *ms = local_parts_to_ms(z, days, r.h, r.mi, r.s, r.ms);
    return 0;
invalid:
    return mf_err_set(c->err, MF_E_ConversionFailure, "Error parsing date string '%s'; %zu: The parsed date was invalid ' '",
                      shown_string(str, len, shown, sizeof shown), len);
incomplete:
    return mf_err_set(c->err, MF_E_ConversionFailure,
                      "an incomplete date/time string has been found, with elements missing: \"%s\"",
                      shown_string(str, len, shown, sizeof shown));
}

/* check_format: MongoDB's validateFormat for $dateToString (to) or $dateFromString. */
static int
check_format(ctx_t *c, const char *fmt, size_t len, bool to)
{
    const char *ok = "dGHjLmMSwuUVYzZbB"; /* the same set both ways since SERVER-73402 */
    (void)to;
    for (size_t i = 0; i < len; i++) { /* the whole string, NULs included, as mongod's StringData */
        if (fmt[i] != '%')
            continue;
        if (++i == len)
            return mf_err_set(c->err, MF_E_Location18535, "Unmatched '%%' at end of format string");
        if (fmt[i] != '%' && (fmt[i] == '\0' || strchr(ok, fmt[i]) == NULL))
            return mf_err_set(c->err, MF_E_Location18536, "Invalid format character '%%%c' in format string", fmt[i]);
    }
    return 0;
}

/* Appends byte ch to s, a NUL too (the string's length counts it). */
static void
str_append_byte(bson_string_t *s, char ch)
{
    bson_string_append_c(s, ch == '\0' ? 'x' : ch);
    if (ch == '\0')
        s->str[s->len - 1] = '\0';
}

/*
 * The format and timezone arguments of $dateFromString (to_string false) and
 * $dateToString, in mongod's order: the format evaluated and checked (not a
 * string: 40684 / 18533), then the timezone evaluated and resolved (*tzr as
 * tz_of: > 0 for a nullish one). fv and tzv are set (missing when absent)
 * and freed by the caller, as is *z when *own. 0, or -1 with c->err.
 */
static int
format_and_tz(const mf_expr_t *e, ctx_t *c, int fmt_slot, int tz_slot, bool to_string, bson_value_t *fv,
              bson_value_t *tzv, mf_tz_t **z, bool *own, int *tzr)
{
    char buf[160];
    if (has_slot(e, fmt_slot)) {
        if (ev(e->args[fmt_slot], c, fv) < 0)
            return -1;
        if (!mf_value_is_nullish(fv)) {
            if (fv->value_type != BSON_TYPE_UTF8) {
                value_str(fv, buf, sizeof buf);
                return mf_err_set(c->err, to_string ? MF_E_Location18533 : MF_E_Location40684,
                                  "%s requires that 'format' be a string, found: %s with value %s",
                                  to_string ? "$dateToString" : "$dateFromString", tname(fv), buf);
            }
            if (check_format(c, fv->value.v_utf8.str, fv->value.v_utf8.len, to_string) < 0)
                return -1;
        }
    }
    if (ev_slot(e, tz_slot, c, tzv) < 0)
        return -1;
    *tzr = tz_of(e, c, has_slot(e, tz_slot) ? tzv : NULL, NULL, z, own);
    return *tzr < 0 ? -1 : 0;
}

static int
ev_date_from_string(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    /* slots: dateString timezone format onNull onError */
    bson_value_t ds, fv, tzv;
    mf_tz_t *z = NULL;
    bool own = false;
    int rc = 0, r;
    int64_t ms;
    char buf[160];

    mf_value_set_missing(&fv);
    mf_value_set_missing(&tzv);
    if (ev(e->args[0], c, &ds) < 0)
        return -1;
    if (format_and_tz(e, c, 2, 1, false, &fv, &tzv, &z, &own, &r) < 0) {
        rc = -1;
        goto done;
    }
    if (mf_value_is_nullish(&ds)) {
        if (has_slot(e, 3))
            rc = ev(e->args[3], c, o);
        else
            mf_value_set_null(o);
        goto done;
    }
    if (ds.value_type != BSON_TYPE_UTF8) {
        value_str(&ds, buf, sizeof buf);
        rc = mf_err_set(c->err, MF_E_ConversionFailure,
                        "$dateFromString requires that 'dateString' be a string, found: %s with value %s", tname(&ds), buf);
    } else if (r > 0 || (has_slot(e, 2) && mf_value_is_nullish(&fv))) {
        mf_value_set_null(o);
        goto done;
    } else {
        rc = date_from_string(c, ds.value.v_utf8.str, ds.value.v_utf8.len, has_slot(e, 2) ? fv.value.v_utf8.str : NULL, z,
                              has_slot(e, 1), &ms);
        if (rc == 0)
            mf_value_set_date(o, ms);
    }
    if (rc < 0 && c->err->code == MF_E_ConversionFailure && has_slot(e, 4)) {
        mf_err_clear(c->err);
        rc = ev(e->args[4], c, o);
    }
done:
    if (own)
        mf_tz_free(z);
    mf_value_free(&ds);
    mf_value_free(&fv);
    mf_value_free(&tzv);
    return rc;
}

/* ---- $dateToString ---- */

/* date_pad: mongod's TimeZone::insertPadded: n zero-padded to width; 18537 when n is outside 0-9999. */
static int
date_pad(ctx_t *c, bson_string_t *s, int64_t n, int width)
{
    if (n < 0 || n > 9999)
        return mf_err_set(c->err, MF_E_Location18537,
                          "Could not convert date to string: date component was outside the supported range of "
                          "0-9999: %" PRId64,
                          n);
    bson_string_append_printf(s, "%0*d", width, (int)n);
    return 0;
}

static int
ev_date_to_string(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    /* slots: date format timezone onNull */
    bson_value_t d, fv, tzv;
    const char *fmt;
    mf_tz_t *z = NULL;
    bool own = false;
    int rc = 0, r;
    int64_t ms = 0;
    ltime_t t;
    bson_string_t *s;

    mf_value_set_missing(&fv);
    mf_value_set_missing(&tzv);
    if (ev(e->args[0], c, &d) < 0)
        return -1;
    if (format_and_tz(e, c, 1, 2, true, &fv, &tzv, &z, &own, &r) < 0) {
        rc = -1;
        goto done;
    }
    if (mf_value_is_nullish(&d)) {
        if (has_slot(e, 3))
            rc = ev(e->args[3], c, o);
        else
            mf_value_set_null(o);
        goto done;
    }
    if (r > 0 || (has_slot(e, 1) && mf_value_is_nullish(&fv))) {
        mf_value_set_null(o);
        goto done;
    }
    if ((rc = date_of(c, &d, &ms)) < 0)
        goto done;
    fmt = has_slot(e, 1) ? fv.value.v_utf8.str
                         : mf_tz_is_utc(z) ? "%Y-%m-%dT%H:%M:%S.%LZ" : "%Y-%m-%dT%H:%M:%S.%L";
    size_t flen = has_slot(e, 1) ? fv.value.v_utf8.len : strlen(fmt); /* a NUL in the format is copied (mongod) */
    lt_break(z, ms, &t);
    s = bson_string_new(NULL);
    for (size_t i = 0; i < flen && rc == 0; i++) {
        const char *p = fmt + i;
        if (*p != '%') {
            str_append_byte(s, *p);
            continue;
        }
        p++;
        i++;
        int64_t iy;
        int iw, offm = t.off / 60;
        /* Every numeric part goes through date_pad (mongod's insertPadded), which refuses one outside 0-9999. */
        switch (*p) {
        case 'Y': rc = date_pad(c, s, t.y, 4); break;
        case 'm': rc = date_pad(c, s, t.mon, 2); break;
        case 'd': rc = date_pad(c, s, t.mday, 2); break;
        case 'H': rc = date_pad(c, s, t.hour, 2); break;
        case 'M': rc = date_pad(c, s, t.min, 2); break;
        case 'S': rc = date_pad(c, s, t.sec, 2); break;
        case 'L': rc = date_pad(c, s, t.ms, 3); break;
        case 'j': rc = date_pad(c, s, t.yday, 3); break;
        case 'w': rc = date_pad(c, s, t.wday + 1, 1); break;
        case 'u': rc = date_pad(c, s, iso_dow(t.days), 1); break;
        case 'U': rc = date_pad(c, s, mongo_week(&t), 2); break;
        case 'V': iso_parts(&t, &iy, &iw); rc = date_pad(c, s, iw, 2); break;
        case 'G': iso_parts(&t, &iy, &iw); rc = date_pad(c, s, iy, 4); break;
        case 'z':
            bson_string_append(s, offm < 0 ? "-" : "+");
            if ((rc = date_pad(c, s, abs(offm) / 60, 2)) == 0)
                rc = date_pad(c, s, abs(offm) % 60, 2);
            break;
        case 'Z': bson_string_append_printf(s, "%d", offm); break; /* minutes, no '+': date_to_string.js's "(525 minutes)" */
        case '%': bson_string_append(s, "%"); break;
        case 'b': {
            char mb[4];
            snprintf(mb, sizeof mb, "%s", month_names[t.mon - 1]);
            mb[0] = (char)toupper((unsigned char)mb[0]);
            bson_string_append(s, mb);
            break;
        }
        case 'B': {
            char mb[16];
            snprintf(mb, sizeof mb, "%s", month_names[t.mon - 1]);
            mb[0] = (char)toupper((unsigned char)mb[0]);
            bson_string_append(s, mb);
            break;
        }
        default: break; /* validated above */
        }
    }
    if (rc == 0)
        mf_value_set_strn(o, s->str, s->len);
    bson_string_free(s, true);
done:
    if (own)
        mf_tz_free(z);
    mf_value_free(&d);
    mf_value_free(&fv);
    mf_value_free(&tzv);
    return rc;
}

/* ---- $dateTrunc, $dateAdd, $dateSubtract, $dateDiff ---- */

/* parse_unit: MongoDB's parseTimeUnit: 5439013 for a non-string, 5439014 for an unknown name. */
static int
parse_unit(ctx_t *c, const char *opname, const bson_value_t *v, int *unit)
{
    static const char *const names[] = {"millisecond", "second", "minute", "hour", "day", "week",
                                         "month", "quarter", "year", NULL};
    if (v->value_type != BSON_TYPE_UTF8)
        return mf_err_set(c->err, MF_E_Location5439013, "%s requires 'unit' to be a string, but got %s", opname,
                          tname(v));
    for (int i = 0; names[i]; i++)
        if (strcmp(v->value.v_utf8.str, names[i]) == 0) {
            *unit = i;
            return 0;
        }
    return mf_err_set(c->err, MF_E_Location5439014, "%s parameter 'unit' value cannot be recognized as a time unit: %s",
                      opname, v->value.v_utf8.str);
}

/* parse_week_start: 1 = Monday ... 7 = Sunday (MongoDB's DayOfWeek). */
static int
parse_week_start(ctx_t *c, const char *opname, const bson_value_t *v, int *dow)
{
    static const char *const days[] = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};
    if (v->value_type != BSON_TYPE_UTF8)
        return mf_err_set(c->err, MF_E_Location5439015, "%s requires 'startOfWeek' to be a string, but got %s",
                          opname, tname(v));
    for (int i = 0; i < 7; i++)
        if (strcasecmp(v->value.v_utf8.str, days[i]) == 0 ||
            (strlen(v->value.v_utf8.str) == 3 && strncasecmp(v->value.v_utf8.str, days[i], 3) == 0)) {
            *dow = i + 1;
            return 0;
        }
    return mf_err_set(c->err, MF_E_Location5439016,
                      "%s parameter 'startOfWeek' value cannot be recognized as a day of a week: %s", opname,
                      v->value.v_utf8.str);
}

/* date_add: MongoDB's dateAdd: units of an hour or less in UTC, larger ones on the local calendar. */
static int
date_add(ctx_t *c, int64_t ms, int unit, int64_t amount, const mf_tz_t *z, int64_t *out)
{
    static const int64_t max_abs[] = {0, 18446744073744000LL, 307445734562400LL, 5124095576040LL,
                                      213503982335LL, 30500568905LL, 7019309016LL, 2339769672LL, 584942418LL};
    __int128 r;

    if (unit == U_MS) {
        *out = (int64_t)((uint64_t)ms + (uint64_t)amount);
        return 0;
    }
    if (!(-max_abs[unit] < amount && amount < max_abs[unit])) {
        static const char *const names[] = {"millisecond", "second", "minute", "hour", "day", "week",
                                             "month", "quarter", "year"};
        return mf_err_set(c->err, MF_E_Location5976500, "invalid dateAdd 'amount' parameter value: %" PRId64 " %s",
                          amount, names[unit]);
    }
    if (unit <= U_HOUR) {
        r = (__int128)ms + (__int128)amount * unit_ms[unit];
    } else {
        ltime_t t;
        int64_t days;
        int64_t tod;
        lt_break(z, ms, &t);
        tod = (int64_t)t.hour * 3600 + t.min * 60 + t.sec;
        if (unit == U_DAY || unit == U_WEEK) {
            days = t.days + amount * (unit == U_WEEK ? 7 : 1);
        } else {
            int64_t mm = t.y * 12 + (t.mon - 1) + amount * (unit == U_MONTH ? 1 : unit == U_QUARTER ? 3 : 12);
            int64_t ny = floordiv(mm, 12);
            int nm = (int)(mm - ny * 12) + 1, last = days_in_month(ny, nm);
            days = days_from_civil(ny, nm, t.mday > last ? last : t.mday);
        }
        int64_t utc = mf_tz_local_to_utc(z, days * 86400 + tod);
        r = (__int128)utc * 1000 + t.ms;
    }
    if (r > INT64_MAX || r < INT64_MIN)
        return mf_err_set(c->err, MF_E_Location5166406, "dateAdd overflowed");
    *out = (int64_t)r;
    return 0;
}

/* dow_from: 0..6, the position of day count days in a week starting on sow (1 = Monday). */
static int
dow_from(int64_t days, int sow)
{
    return (iso_dow(days) - sow + 7) % 7;
}

static int64_t
diff_week(int64_t d1, int64_t d2, int sow)
{
    return (d2 - d1 + dow_from(d1, sow) - dow_from(d2, sow)) / 7;
}

static int
date_diff(ctx_t *c, int64_t a, int64_t b, int unit, const mf_tz_t *z, int sow, int64_t *out)
{
    ltime_t s, e;
    int64_t dd, h, mi;

    if (unit == U_MS) {
        if (__builtin_sub_overflow(b, a, out))
            return mf_err_set(c->err, MF_E_Location5166308, "dateDiff overflowed");
        return 0;
    }
    lt_break(z, a, &s);
    lt_break(z, b, &e);
    dd = e.days - s.days;
    switch (unit) {
    case U_YEAR: *out = e.y - s.y; break;
    case U_QUARTER: *out = (e.mon - 1) / 3 - (s.mon - 1) / 3 + (e.y - s.y) * 4; break;
    case U_MONTH: *out = e.mon - s.mon + (e.y - s.y) * 12; break;
    case U_WEEK: *out = diff_week(s.days, e.days, sow); break;
    case U_DAY: *out = dd; break;
    default:
        h = e.hour - s.hour + dd * 24;
        mi = e.min - s.min + h * 60;
        if (unit == U_HOUR)
            *out = h + (s.off - e.off) / 3600;
        else if (unit == U_MINUTE)
            *out = mi + (s.off - e.off) / 60;
        else
            *out = e.sec - s.sec + mi * 60 + (s.off - e.off);
        break;
    }
    return 0;
}

static int64_t
bin_floor(int64_t v, int64_t bin)
{
    int64_t r = v % bin;
    return r < 0 ? r + bin : r;
}

static int
date_trunc(ctx_t *c, int64_t ms, int unit, int64_t bin, const mf_tz_t *z, int sow, int64_t *out)
{
    const int64_t ref_utc = 946684800000LL; /* 2000-01-01T00:00:00Z */
    int64_t ref = ref_utc - (int64_t)mf_tz_offset(z, ref_utc / 1000) * 1000, ref_days = days_from_civil(2000, 1, 1);

    if (unit == U_WEEK) {
        int ref_dow = (6 - sow + 7) % 7; /* 2000-01-01 was a Saturday (6) */
        int adj = (7 - ref_dow) % 7;
        ref += (int64_t)adj * 86400000;
        ref_days += adj;
    }
    if (unit <= U_HOUR) {
        int64_t width, shifted, res;
        if (__builtin_mul_overflow(bin, unit_ms[unit], &width))
            return mf_err_set(c->err, MF_E_Location5439002, "dateTrunc overflowed");
        if (__builtin_sub_overflow(ms, ref, &shifted))
            return mf_err_set(c->err, MF_E_Location5439000, "dateTrunc overflowed");
        if (__builtin_sub_overflow(ms, bin_floor(shifted, width), &res))
            return mf_err_set(c->err, MF_E_Location5439001, "dateTrunc overflowed");
        *out = res;
        return 0;
    }
    if (bin > 100000000000LL)
        return mf_err_set(c->err, MF_E_Location5439006, "dateTrunc unsupported binSize value");
    ltime_t t;
    int64_t dist, lower;
    lt_break(z, ms, &t);
    switch (unit) {
    case U_DAY: dist = t.days - ref_days; break;
    case U_WEEK: dist = diff_week(ref_days, t.days, sow); break;
    case U_MONTH: dist = (t.y - 2000) * 12 + t.mon - 1; break;
    case U_QUARTER: dist = (t.y - 2000) * 4 + (t.mon - 1) / 3; break;
    default: dist = t.y - 2000; break;
    }
    if (__builtin_sub_overflow(dist, bin_floor(dist, bin), &lower))
        return mf_err_set(c->err, MF_E_Location5439004, "dateTrunc overflowed");
    return date_add(c, ref, unit, lower, z, out);
}

/* date_ctx: "$dateTrunc parameter 'timezone' value parsing failed", the context MongoDB adds. */
static int
ev_date_arith(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    const char *opname = e->op->name;
    int id = e->op->id, unit = 0, sow = 7, rc = 0, r;
    bson_value_t v[5];
    mf_tz_t *z = NULL;
    bool own = false;
    int64_t a, b, out;
    char ctxmsg[80];

    for (int i = 0; i < 5; i++)
        mf_value_set_missing(&v[i]);
#define EVAL_OR_NULL(i)                                                                                                \
    do {                                                                                                               \
        if (ev_slot(e, (i), c, &v[i]) < 0) {                                                                           \
            rc = -1;                                                                                                   \
            goto done;                                                                                                 \
        }                                                                                                              \
        if (has_slot(e, (i)) && mf_value_is_nullish(&v[i]))                                                                     \
            goto null;                                                                                                 \
    } while (0)
    snprintf(ctxmsg, sizeof ctxmsg, "%s parameter 'timezone' value parsing failed", opname);
    if (id == OP_DATETRUNC) {
        /*
         * slots: date unit binSize timezone startOfWeek. As mongod (date_trunc.js's "invalid other fields"
         * cases): every argument is evaluated and a nullish one gives null (startOfWeek only with unit "week"),
         * the timezone is resolved, and only then are date, unit, binSize and startOfWeek validated.
         */
        int64_t bin = 1;
        bool week;
        EVAL_OR_NULL(0);
        EVAL_OR_NULL(1);
        EVAL_OR_NULL(2);
        week = v[1].value_type == BSON_TYPE_UTF8 && strcmp(v[1].value.v_utf8.str, "week") == 0;
        if (week && has_slot(e, 4))
            EVAL_OR_NULL(4);
        EVAL_OR_NULL(3);
        if ((r = tz_of(e, c, has_slot(e, 3) ? &v[3] : NULL, ctxmsg, &z, &own)) < 0)
            goto fail;
        if (!get_date(&v[0], &a)) {
            rc = mf_err_set(c->err, MF_E_Location5439012, "$dateTrunc requires 'date' to be a date, but got %s",
                            tname(&v[0]));
            goto done;
        }
        if (parse_unit(c, opname, &v[1], &unit) < 0)
            goto fail;
        if (has_slot(e, 2)) {
            char buf[160];
            if (!integral64(&v[2], &bin)) {
                value_str(&v[2], buf, sizeof buf);
                rc = mf_err_set(c->err, MF_E_Location5439017,
                                "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '%s' of type %s", buf,
                                tname(&v[2]));
                goto done;
            }
            if (bin <= 0) {
                rc = mf_err_set(c->err, MF_E_Location5439018,
                                "$dateTrunc requires 'binSize' to be greater than 0, but got value %" PRId64, bin);
                goto done;
            }
        }
        if (week && has_slot(e, 4) && parse_week_start(c, opname, &v[4], &sow) < 0)
            goto fail;
        if (date_trunc(c, a, unit, bin, z, sow, &out) < 0)
            goto fail;
        mf_value_set_date(o, out);
    } else if (id == OP_DATEADD || id == OP_DATESUBTRACT) {
        /* slots: startDate unit amount timezone */
        int64_t amount;
        EVAL_OR_NULL(0);
        EVAL_OR_NULL(1);
        if (parse_unit(c, opname, &v[1], &unit) < 0)
            goto fail;
        EVAL_OR_NULL(2);
        EVAL_OR_NULL(3);
        if ((r = tz_of(e, c, has_slot(e, 3) ? &v[3] : NULL, NULL, &z, &own)) < 0)
            goto fail;
        if (!get_date(&v[0], &a)) {
            rc = mf_err_set(c->err, MF_E_Location5166403, "%s requires startDate to be convertible to a date", opname);
            goto done;
        }
        if (!integral64(&v[2], &amount)) {
            rc = mf_err_set(c->err, MF_E_Location5166405, "%s expects integer amount of time units", opname);
            goto done;
        }
        if (id == OP_DATESUBTRACT) {
            if (amount == INT64_MIN) {
                rc = mf_err_set(c->err, MF_E_Location6045000,
                                "invalid $dateSubtract 'amount' parameter value: %" PRId64, amount);
                goto done;
            }
            amount = -amount;
        }
        if (date_add(c, a, unit, amount, z, &out) < 0)
            goto fail;
        mf_value_set_date(o, out);
    } else {
        /*
         * slots: startDate endDate unit timezone startOfWeek. As mongod (date_diff.js's "invalid other fields"
         * cases): nullish arguments give null before anything is validated (startOfWeek only with unit "week"),
         * the timezone is resolved, then startDate, endDate, unit and startOfWeek are validated.
         */
        bool week;
        EVAL_OR_NULL(0);
        EVAL_OR_NULL(1);
        EVAL_OR_NULL(2);
        week = v[2].value_type == BSON_TYPE_UTF8 && strcmp(v[2].value.v_utf8.str, "week") == 0;
        if (week && has_slot(e, 4))
            EVAL_OR_NULL(4);
        EVAL_OR_NULL(3);
        if ((r = tz_of(e, c, has_slot(e, 3) ? &v[3] : NULL, ctxmsg, &z, &own)) < 0)
            goto fail;
        if (!get_date(&v[0], &a)) {
            rc = mf_err_set(c->err, MF_E_Location5166307, "$dateDiff requires 'startDate' to be a date, but got %s",
                            tname(&v[0]));
            goto done;
        }
        if (!get_date(&v[1], &b)) {
            rc = mf_err_set(c->err, MF_E_Location5166307, "$dateDiff requires 'endDate' to be a date, but got %s",
                            tname(&v[1]));
            goto done;
        }
        if (parse_unit(c, opname, &v[2], &unit) < 0)
            goto fail;
        if (week && has_slot(e, 4) && parse_week_start(c, opname, &v[4], &sow) < 0)
            goto fail;
        if (date_diff(c, a, b, unit, z, sow, &out) < 0)
            goto fail;
        mf_value_set_int64(o, out);
    }
#undef EVAL_OR_NULL
    goto done;
null:
    mf_value_set_null(o);
    goto done;
fail:
    rc = -1;
done:
    if (own)
        mf_tz_free(z);
    for (int i = 0; i < 5; i++)
        mf_value_free(&v[i]);
    return rc;
}

/* ---- objects ---- */

/* An ordered list of fields with replace-in-place (for $mergeObjects/$arrayToObject). */
typedef struct fields {
    char **k;
    bson_value_t *v;
    size_t n, cap;
} fields_t;

static void
fields_set(fields_t *f, const char *k, size_t kl, const bson_value_t *v)
{
    for (size_t i = 0; i < f->n; i++)
        if (strlen(f->k[i]) == kl && memcmp(f->k[i], k, kl) == 0) {
            mf_value_free(&f->v[i]);
            mf_value_copy(&f->v[i], v);
            return;
        }
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 8;
        f->k = bson_realloc(f->k, f->cap * sizeof *f->k);
        f->v = bson_realloc(f->v, f->cap * sizeof *f->v);
    }
    f->k[f->n] = bson_strndup(k, kl);
    mf_value_copy(&f->v[f->n], v);
    f->n++;
}

static void
fields_finish(fields_t *f, bson_value_t *o)
{
    bson_t b = BSON_INITIALIZER;

    for (size_t i = 0; i < f->n; i++) {
        if (f->v[i].value_type != BSON_TYPE_EOD)
            bson_append_value(&b, f->k[i], -1, &f->v[i]);
        bson_free(f->k[i]);
        mf_value_free(&f->v[i]);
    }
    bson_free(f->k);
    bson_free(f->v);
    mf_value_take_bson(o, &b, false);
}

static void
fields_abort(fields_t *f)
{
    for (size_t i = 0; i < f->n; i++) {
        bson_free(f->k[i]);
        mf_value_free(&f->v[i]);
    }
    bson_free(f->k);
    bson_free(f->v);
}

static int
ev_merge_objects(bson_value_t *v, size_t n, ctx_t *c, bson_value_t *o)
{
    fields_t f = {0};
    elems_t el = {NULL, 0};
    const bson_value_t *items = v;
    size_t count = n;

    if (n == 1 && v[0].value_type == BSON_TYPE_ARRAY) {
        elems_of(&v[0], &el);
        items = el.v;
        count = el.n;
    }
    for (size_t i = 0; i < count; i++) {
        bson_iter_t it;
        if (mf_value_is_nullish(&items[i]))
            continue;
        if (items[i].value_type != BSON_TYPE_DOCUMENT) {
            char vb[128];
            value_str(&items[i], vb, sizeof vb);
            int rc = mf_err_set(c->err, MF_E_Location40400, "$mergeObjects requires object inputs, but input %s is of type %s",
                                vb, tname(&items[i]));
            fields_abort(&f);
            elems_free(&el);
            return rc;
        }
        bson_iter_init_from_data(&it, items[i].value.v_doc.data, items[i].value.v_doc.data_len);
        while (bson_iter_next(&it))
            fields_set(&f, bson_iter_key(&it), bson_iter_key_len(&it), bson_iter_value(&it));
    }
    elems_free(&el);
    fields_finish(&f, o);
    return 0;
}

static int
ev_object_to_array(const bson_value_t *a, ctx_t *c, bson_value_t *o)
{
    bson_iter_t it;
    mf_value_array_t ab;

    if (mf_value_is_nullish(a)) {
        mf_value_set_null(o);
        return 0;
    }
    if (a->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(c->err, MF_E_Location40390, "$objectToArray requires a document input, found: %s", tname(a));
    mf_value_array_init(&ab);
    bson_iter_init_from_data(&it, a->value.v_doc.data, a->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        bson_t kv = BSON_INITIALIZER;
        bson_value_t d;
        bson_append_utf8(&kv, "k", 1, bson_iter_key(&it), (int)bson_iter_key_len(&it));
        bson_append_value(&kv, "v", 1, bson_iter_value(&it));
        mf_value_take_bson(&d, &kv, false);
        mf_value_array_push(&ab, &d);
        mf_value_free(&d);
    }
    mf_value_array_finish(&ab, o);
    return 0;
}

static int
ev_array_to_object(const bson_value_t *a, ctx_t *c, bson_value_t *o)
{
    elems_t el;
    fields_t f = {0};
    int kind = 0; /* 1 = [k, v] pairs, 2 = {k, v} documents */

    if (mf_value_is_nullish(a)) {
        mf_value_set_null(o);
        return 0;
    }
    if (a->value_type != BSON_TYPE_ARRAY)
        return mf_err_set(c->err, MF_E_Location40386, "$arrayToObject requires an array input, found: %s", tname(a));
    elems_of(a, &el);
    for (size_t i = 0; i < el.n; i++) {
        const bson_value_t *x = &el.v[i];
        bson_iter_t it;
        const bson_value_t *kv = NULL, *vv = NULL;
        int this_kind = x->value_type == BSON_TYPE_ARRAY ? 1 : x->value_type == BSON_TYPE_DOCUMENT ? 2 : 0;
        if (this_kind == 0 || (kind && this_kind != kind)) {
            int rc;
            if (kind == 0)
                rc = mf_err_set(c->err, MF_E_Location40398, "Unrecognised input type format for $arrayToObject: %s",
                                tname(x));
            else
                rc = mf_err_set(c->err, kind == 1 ? MF_E_Location40396 : MF_E_Location40391,
                                "$arrayToObject requires a consistent input format. Elements mustall be arrays or all "
                                "be objects. %s was detected, now found: %s",
                                kind == 1 ? "Array" : "Object", tname(x));
            fields_abort(&f);
            elems_free(&el);
            return rc;
        }
        kind = this_kind;
        bson_value_t tmp[2];
        size_t cnt = 0;
        bson_iter_init_from_data(&it, x->value.v_doc.data, x->value.v_doc.data_len);
        if (kind == 1) {
            while (bson_iter_next(&it)) {
                if (cnt < 2)
                    tmp[cnt] = *bson_iter_value(&it);
                cnt++;
            }
            if (cnt != 2) {
                fields_abort(&f);
                elems_free(&el);
                return mf_err_set(c->err, MF_E_Location40397,
                                  "$arrayToObject requires an array of size 2 arrays,found array of size: %zu", cnt);
            }
            kv = &tmp[0];
            vv = &tmp[1];
        } else {
            while (bson_iter_next(&it)) {
                if (strcmp(bson_iter_key(&it), "k") == 0 && !kv) {
                    tmp[0] = *bson_iter_value(&it);
                    kv = &tmp[0];
                } else if (strcmp(bson_iter_key(&it), "v") == 0 && !vv) {
                    tmp[1] = *bson_iter_value(&it);
                    vv = &tmp[1];
                }
                cnt++;
            }
            if (cnt != 2) {
                fields_abort(&f);
                elems_free(&el);
                return mf_err_set(c->err, MF_E_Location40392,
                                  "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:%zu",
                                  cnt);
            }
            if (!kv || !vv) {
                char db[200];
                value_str(x, db, sizeof db);
                fields_abort(&f);
                elems_free(&el);
                return mf_err_set(c->err, MF_E_Location40393,
                                  "$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both keys "
                                  "from: %s",
                                  db);
            }
        }
        if (kv->value_type != BSON_TYPE_UTF8) {
            fields_abort(&f);
            elems_free(&el);
            if (kind == 1)
                return mf_err_set(c->err, MF_E_Location40395,
                                  "$arrayToObject requires an array of key-value pairs, where the key must be of type "
                                  "string. Found key type: %s",
                                  tname(kv));
            return mf_err_set(c->err, MF_E_Location40394,
                              "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be "
                              "of type string. Found type: %s",
                              tname(kv));
        }
        if (memchr(kv->value.v_utf8.str, '\0', kv->value.v_utf8.len)) {
            fields_abort(&f);
            elems_free(&el);
            return mf_err_set(c->err, kind == 1 ? MF_E_Location4940400 : MF_E_Location4940401,
                              "Key field cannot contain an embedded null byte");
        }
        fields_set(&f, kv->value.v_utf8.str, kv->value.v_utf8.len, vv);
    }
    elems_free(&el);
    fields_finish(&f, o);
    return 0;
}

/* ---- higher-order: $map, $filter, $reduce, $let ---- */

static int
ev_map_filter(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t in, lim;
    elems_t el;
    mf_value_array_t ab;
    int64_t limit = -1, taken = 0;
    bool is_map = e->op->id == OP_MAP;
    const binding_t *saved = c->vars;
    binding_t b;
    int rc = 0;

    if ((rc = eval_or_null(e->args[0], c, &in, o)) != 0)
        return rc > 0 ? 0 : -1;
    if (in.value_type != BSON_TYPE_ARRAY) {
        rc = is_map ? mf_err_set(c->err, MF_E_Location16883, "input to $map must be an array not %s", tname(&in))
                    : mf_err_set(c->err, MF_E_Location28651, "input to $filter must be an array not %s", tname(&in));
        mf_value_free(&in);
        return rc;
    }
    /* mongod returns an empty input before it evaluates the limit. */
    if (!is_map && e->nargs > 3 && e->args[3] && in.value.v_doc.data_len > 5) {
        if (ev(e->args[3], c, &lim) < 0) {
            mf_value_free(&in);
            return -1;
        }
        if (!mf_value_is_nullish(&lim)) {
            char vb[128];
            int code = 0;
            value_str(&lim, vb, sizeof vb);
            if (!is_int32_integral(&lim))
                code = MF_E_Location327391;
            else if (mf_value_as_int64(&lim, &limit), limit < 1)
                code = MF_E_Location327392;
            if (code) {
                mf_value_free(&lim);
                mf_value_free(&in);
                return mf_err_set(c->err, code,
                                  code == MF_E_Location327391
                                      ? "$filter: limit must be represented as a 32-bit integral value: %s"
                                      : "$filter: limit must be greater than 0: %s",
                                  vb);
            }
        }
        mf_value_free(&lim);
    }
    elems_of(&in, &el);
    mf_value_array_init(&ab);
    b.name = e->name;
    b.up = saved;
    c->vars = &b;
    for (size_t i = 0; i < el.n; i++) {
        bson_value_t r;
        b.val = &el.v[i];
        if (ev(e->args[1], c, &r) < 0) {
            rc = -1;
            break;
        }
        if (is_map) {
            mf_value_array_push(&ab, &r);
        } else if (truthy(&r)) {
            if (limit < 0 || taken < limit) {
                mf_value_array_push(&ab, &el.v[i]);
                taken++;
            }
        }
        mf_value_free(&r);
        if (!is_map && limit >= 0 && taken >= limit)
            break;
    }
    c->vars = saved;
    if (rc == 0)
        mf_value_array_finish(&ab, o);
    else
        bson_destroy(&ab.b);
    elems_free(&el);
    mf_value_free(&in);
    return rc;
}

static int
ev_reduce(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    bson_value_t in, acc;
    int got;
    elems_t el;
    const binding_t *saved = c->vars;
    binding_t bv, bt;

    if ((got = eval_or_null(e->args[0], c, &in, o)) != 0)
        return got > 0 ? 0 : -1;
    if (in.value_type != BSON_TYPE_ARRAY) {
        char vb[128];
        value_str(&in, vb, sizeof vb);
        int rc = mf_err_set(c->err, MF_E_Location40080, "$reduce requires that 'input' be an array, found: %s", vb);
        mf_value_free(&in);
        return rc;
    }
    if (ev(e->args[1], c, &acc) < 0) {
        mf_value_free(&in);
        return -1;
    }
    elems_of(&in, &el);
    bv.name = "value";
    bv.up = saved;
    bt.name = "this";
    bt.up = &bv;
    for (size_t i = 0; i < el.n; i++) {
        bson_value_t r;
        bv.val = &acc;
        bt.val = &el.v[i];
        c->vars = &bt;
        int rc = ev(e->args[2], c, &r);
        c->vars = saved;
        if (rc < 0) {
            mf_value_free(&acc);
            elems_free(&el);
            mf_value_free(&in);
            return -1;
        }
        mf_value_free(&acc);
        acc = r;
    }
    *o = acc;
    elems_free(&el);
    mf_value_free(&in);
    return 0;
}

static int
ev_let(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    size_t nv = e->nkeys;
    bson_value_t *vals = bson_malloc0((nv ? nv : 1) * sizeof *vals);
    binding_t *bs = bson_malloc0((nv ? nv : 1) * sizeof *bs);
    const binding_t *saved = c->vars;
    int rc = 0;
    size_t done = 0;

    for (size_t i = 0; i < nv; i++) {
        if (ev(e->args[i], c, &vals[i]) < 0) {
            rc = -1;
            break;
        }
        done++;
    }
    if (rc == 0) {
        const binding_t *up = saved;
        for (size_t i = 0; i < nv; i++) {
            bs[i].name = e->keys[i];
            bs[i].val = &vals[i];
            bs[i].up = up;
            up = &bs[i];
        }
        c->vars = up;
        rc = ev(e->args[nv], c, o);
        c->vars = saved;
    }
    for (size_t i = 0; i < done; i++)
        mf_value_free(&vals[i]);
    bson_free(vals);
    bson_free(bs);
    return rc;
}

static int
ev_switch(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    size_t nb = (e->nargs - 1) / 2;

    for (size_t i = 0; i < nb; i++) {
        bson_value_t r;
        if (ev(e->args[2 * i], c, &r) < 0)
            return -1;
        bool t = truthy(&r);
        mf_value_free(&r);
        if (t)
            return ev(e->args[2 * i + 1], c, o);
    }
    if (e->args[e->nargs - 1])
        return ev(e->args[e->nargs - 1], c, o);
    /* Every case a constant (all false, as none matched): mongod drops them when it optimizes the pipeline and
     * refuses the empty $switch then. */
    bool all_const = true;
    for (size_t i = 0; i < nb && all_const; i++)
        all_const = node_is_const(e->args[2 * i]);
    if (all_const)
        return mf_err_set(c->err, MF_E_Location40069,
                          "One cannot execute a switch statement where all the cases evaluate to false without a "
                          "default.");
    return mf_err_set(c->err, MF_E_Location40066,
                      "$switch could not find a matching branch for an input, and no default was specified.");
}

/* ---- the dispatcher ---- */

static int
ev_op(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    int id = e->op->id;
    bson_value_t *v = NULL;
    int rc = 0;
    size_t n = e->nargs;

    /* Operators that control evaluation of their own arguments. */
    switch (id) {
    case OP_LITERAL:
        mf_value_copy(o, &e->args[0]->lit);
        return 0;
    case OP_AND:
    case OP_OR:
        for (size_t i = 0; i < n; i++) {
            bson_value_t r;
            if (ev(e->args[i], c, &r) < 0)
                return -1;
            bool t = truthy(&r);
            mf_value_free(&r);
            if (id == OP_AND && !t) {
                mf_value_set_bool(o, false);
                return 0;
            }
            if (id == OP_OR && t) {
                mf_value_set_bool(o, true);
                return 0;
            }
        }
        mf_value_set_bool(o, id == OP_AND);
        return 0;
    case OP_COND: {
        bson_value_t r;
        if (ev(e->args[0], c, &r) < 0)
            return -1;
        bool t = truthy(&r);
        mf_value_free(&r);
        return ev(e->args[t ? 1 : 2], c, o);
    }
    case OP_IFNULL:
        for (size_t i = 0; i < n; i++) {
            if (ev(e->args[i], c, o) < 0)
                return -1;
            if (i == n - 1 || !mf_value_is_nullish(o))
                return 0;
            mf_value_free(o);
        }
        mf_value_set_null(o);
        return 0;
    case OP_SWITCH:
        return ev_switch(e, c, o);
    case OP_MAP:
    case OP_FILTER:
        return ev_map_filter(e, c, o);
    case OP_REDUCE:
        return ev_reduce(e, c, o);
    case OP_LET:
        return ev_let(e, c, o);
    case OP_CONVERT:
        return ev_convert(e, c, o);
    case OP_TRIM:
    case OP_LTRIM:
    case OP_RTRIM:
        return ev_trim(e, c, o);
    case OP_DATETOSTRING:
        return ev_date_to_string(e, c, o);
    case OP_DATETRUNC:
    case OP_DATEADD:
    case OP_DATESUBTRACT:
    case OP_DATEDIFF:
        return ev_date_arith(e, c, o);
    case OP_REGEXMATCH:
    case OP_REGEXFIND:
    case OP_REGEXFINDALL:
        return ev_regex(e, c, o);
    case OP_REPLACEONE:
    case OP_REPLACEALL:
        return ev_replace(e, c, o);
    case OP_YEAR: case OP_MONTH: case OP_DAYOFMONTH: case OP_HOUR: case OP_MINUTE: case OP_SECOND:
    case OP_MILLISECOND: case OP_DAYOFWEEK: case OP_DAYOFYEAR:
    case OP_WEEK: case OP_ISOWEEK: case OP_ISOWEEKYEAR: case OP_ISODAYOFWEEK:
        return ev_datepart(e, c, o);
    case OP_DATEFROMPARTS:
        return ev_date_from_parts(e, c, o);
    case OP_DATETOPARTS:
        return ev_date_to_parts(e, c, o);
    case OP_DATEFROMSTRING:
        return ev_date_from_string(e, c, o);
    case OP_ADD:
        return ev_add(e, c, o);
    case OP_MULTIPLY:
        return ev_multiply(e, c, o);
    case OP_GETFIELD:
        return ev_get_field(e, c, o);
    case OP_SETFIELD:
    case OP_UNSETFIELD:
        return ev_set_field(e, c, o);
    case OP_SORTARRAY:
        return ev_sort_array(e, c, o);
    case OP_RAND:
        ev_rand(o);
        return 0;
    case OP_META: {
        bson_iter_t mi;
        if (e->meta == META_MISSING) {
            o->value_type = BSON_TYPE_EOD; /* metadata no mayfly stage sets: missing */
            return 0;
        }
        if (e->meta == META_SORT_KEY) {
            /*
             * ExpressionMeta's kSortKey: serializeSortKey's array (document_metadata_fields.cpp), one
             * element per sort field even for a one-field sort, missing values as null; missing
             * where no $sort set the metadata.
             */
            bson_t arr = BSON_INITIALIZER;
            if (sort_key_source == NULL || c->root == NULL) {
                o->value_type = BSON_TYPE_EOD;
                return 0;
            }
            mf_sort_key_append(sort_key_source, c->root, &arr);
            mf_value_take_bson(o, &arr, true);
            return 0;
        }
        if (e->meta == META_GEO_DIST || e->meta == META_GEO_POINT) {
            /* DocumentSourceGeoNear's metadata, as hidden fields of the document (query/agg_geo.h). */
            bool dist = e->meta == META_GEO_DIST;
            if (c->rootv.value_type == BSON_TYPE_DOCUMENT &&
                bson_iter_init_from_data(&mi, c->rootv.value.v_doc.data, c->rootv.value.v_doc.data_len) &&
                bson_iter_find(&mi, dist ? MF_GEO_DIST_FIELD : MF_GEO_POINT_FIELD)) {
                mf_value_copy(o, bson_iter_value(&mi));
                return 0;
            }
            /*
             * A document that lost it (after a $facet or $group): missing, as
             * mongod 8.0's ExpressionMeta (hasGeoNearDistance() ? ... : Value()).
             */
            o->value_type = BSON_TYPE_EOD;
            return 0;
        }
        if (c->rootv.value_type == BSON_TYPE_DOCUMENT &&
            bson_iter_init_from_data(&mi, c->rootv.value.v_doc.data, c->rootv.value.v_doc.data_len) &&
            bson_iter_find(&mi, MF_TEXT_SCORE_FIELD) && BSON_ITER_HOLDS_DOUBLE(&mi)) {
            o->value_type = BSON_TYPE_DOUBLE;
            o->value.v_double = bson_iter_double(&mi);
            return 0;
        }
        return mf_err_set(c->err, MF_E_Location40218, "query requires text score metadata, but it is not available");
    }
    case OP_MEDIAN:
    case OP_PERCENTILE:
        return ev_quantile(e, c, o);
    case OP_FIRSTN:
    case OP_LASTN:
    case OP_MINN:
    case OP_MAXN:
        return ev_nacc(e, c, o);
    case OP_ZIP:
        return ev_zip(e, c, o);
    default:
        break;
    }

    if (eval_args(e, c, &v) < 0)
        return -1;
    switch (id) {
    case OP_EQ: mf_value_set_bool(o, cmpv(&v[0], &v[1]) == 0); break;
    case OP_NE: mf_value_set_bool(o, cmpv(&v[0], &v[1]) != 0); break;
    case OP_GT: mf_value_set_bool(o, cmpv(&v[0], &v[1]) > 0); break;
    case OP_GTE: mf_value_set_bool(o, cmpv(&v[0], &v[1]) >= 0); break;
    case OP_LT: mf_value_set_bool(o, cmpv(&v[0], &v[1]) < 0); break;
    case OP_LTE: mf_value_set_bool(o, cmpv(&v[0], &v[1]) <= 0); break;
    case OP_CMP: {
        int r = cmpv(&v[0], &v[1]);
        mf_value_set_int32(o, r < 0 ? -1 : r > 0 ? 1 : 0);
        break;
    }
    case OP_NOT: mf_value_set_bool(o, !truthy(&v[0])); break;
    case OP_SUBTRACT: rc = ev_subtract(&v[0], &v[1], c, o); break;
    case OP_DIVIDE: rc = ev_divide(&v[0], &v[1], c, o); break;
    case OP_MOD: rc = ev_mod(&v[0], &v[1], c, o); break;
    case OP_ABS: rc = ev_unary_math(id, "$abs", &v[0], c, o); break;
    case OP_CEIL: rc = ev_unary_math(id, "$ceil", &v[0], c, o); break;
    case OP_FLOOR: rc = ev_unary_math(id, "$floor", &v[0], c, o); break;
    case OP_SQRT: rc = ev_unary_math(id, "$sqrt", &v[0], c, o); break;
    case OP_EXP: rc = ev_unary_math(id, "$exp", &v[0], c, o); break;
    case OP_LN: rc = ev_unary_math(id, "$ln", &v[0], c, o); break;
    case OP_LOG10: rc = ev_unary_math(id, "$log10", &v[0], c, o); break;
    case OP_SIN:
    case OP_COS:
    case OP_TAN:
    case OP_ASIN:
    case OP_ACOS:
    case OP_ATAN:
    case OP_ASINH:
    case OP_ACOSH:
    case OP_ATANH:
    case OP_SINH:
    case OP_COSH:
    case OP_TANH:
    case OP_DEGREESTORADIANS:
    case OP_RADIANSTODEGREES: rc = ev_trig(id, e->op->name, &v[0], c, o); break;
    case OP_ATAN2: rc = ev_atan2(&v[0], &v[1], c, o); break;
    case OP_FINDALLVALUES:
        rc = ev_find_all_values(&v[0], c, o);
        break;
    case OP_TOHASHEDINDEXKEY: {
        /* What a hashed index stores for the value (BSONElementHasher::hash64, seed 0); missing hashes as null. */
        bson_value_t in = v[0];
        int64_t h;
        if (in.value_type == BSON_TYPE_EOD)
            mf_value_set_null(&in);
        rc = mf_hash64(&in, 0, &h, c->err);
        if (rc == 0)
            mf_value_set_int64(o, h);
        break;
    }
    case OP_BSONSIZE:
        if (mf_value_is_nullish(&v[0]))
            mf_value_set_null(o);
        else if (v[0].value_type != BSON_TYPE_DOCUMENT)
            rc = mf_err_set(c->err, MF_E_Location31393, "$bsonSize requires a document input, found: %s", tname(&v[0]));
        else
            mf_value_set_int32(o, (int32_t)v[0].value.v_doc.data_len);
        break;
    case OP_BINARYSIZE:
        if (mf_value_is_nullish(&v[0]))
            mf_value_set_null(o);
        else if (v[0].value_type == BSON_TYPE_UTF8)
            mf_value_set_int32(o, (int32_t)v[0].value.v_utf8.len);
        else if (v[0].value_type == BSON_TYPE_BINARY)
            mf_value_set_int32(o, (int32_t)v[0].value.v_binary.data_len);
        else
            rc = mf_err_set(c->err, MF_E_Location51276, "$binarySize requires a string or BinData argument, found: %s",
                            tname(&v[0]));
        break;
    case OP_LOG:
        if (mf_value_is_nullish(&v[0]) || mf_value_is_nullish(&v[1])) {
            mf_value_set_null(o);
        } else if (!mf_value_is_number(&v[0])) {
            rc = mf_err_set(c->err, MF_E_Location28756, "$log's argument must be numeric, not %s", tname(&v[0]));
        } else if (!mf_value_is_number(&v[1])) {
            rc = mf_err_set(c->err, MF_E_Location28757, "$log's base must be numeric, not %s", tname(&v[1]));
        } else if (num_sign(&v[0]) == -1 || num_sign(&v[0]) == 0) {
            rc = mf_err_set(c->err, MF_E_Location28758, "$log's argument must be a positive number, but is %g",
                            as_dbl(&v[0]));
        } else if (num_sign(&v[1]) == -1 || num_sign(&v[1]) == 0 || log_base_is_one(&v[0], &v[1])) {
            rc = mf_err_set(c->err, MF_E_Location28759,
                            "$log's base must be a positive number not equal to 1, but is %g", as_dbl(&v[1]));
        } else if (v[0].value_type == BSON_TYPE_DECIMAL128 || v[1].value_type == BSON_TYPE_DECIMAL128) {
            dec_binary(mf_dec_log, &v[0], &v[1], o); /* as mongod's Decimal128::logarithm(base) */
        } else {
            mf_value_set_double(o, log(as_dbl(&v[0])) / log(as_dbl(&v[1])));
        }
        break;
    case OP_ROUND:
    case OP_TRUNC: rc = ev_round(id, &v[0], n > 1 ? &v[1] : NULL, c, o); break;
    case OP_POW: rc = ev_pow(&v[0], &v[1], c, o); break;
    case OP_CONCAT: {
        bool null = false;
        for (size_t i = 0; i < n && !null; i++) {
            if (mf_value_is_nullish(&v[i])) {
                null = true;
            } else if (v[i].value_type != BSON_TYPE_UTF8) {
                rc = mf_err_set(c->err, MF_E_Location16702, "$concat only supports strings, not %s", tname(&v[i]));
                break;
            }
        }
        if (rc < 0)
            break;
        if (null) {
            mf_value_set_null(o);
            break;
        }
        /* Lengths, not C strings: a string may hold NUL bytes. At most 16 MB, as MongoDB. */
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += v[i].value.v_utf8.len;
        if (total > MF_MAX_BSON_SIZE) {
            rc = mf_err_set(c->err, MF_E_Location16493, "Tried to create string longer than 16MB");
            break;
        }
        mf_value_set_type(o, BSON_TYPE_UTF8);
        o->value.v_utf8.str = bson_malloc(total + 1);
        o->value.v_utf8.len = (uint32_t)total;
        total = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(o->value.v_utf8.str + total, v[i].value.v_utf8.str, v[i].value.v_utf8.len);
            total += v[i].value.v_utf8.len;
        }
        o->value.v_utf8.str[total] = '\0';
        break;
    }
    case OP_TOLOWER:
    case OP_TOUPPER: {
        rc = coerce_str(c, &v[0], o);
        if (rc == 0)
            for (uint32_t i = 0; i < o->value.v_utf8.len; i++)
                o->value.v_utf8.str[i] = (char)(id == OP_TOLOWER ? tolower((unsigned char)o->value.v_utf8.str[i])
                                                                 : toupper((unsigned char)o->value.v_utf8.str[i]));
        break;
    }
    case OP_SUBSTR:
    case OP_SUBSTRBYTES:
    case OP_SUBSTRCP: rc = ev_substr(id, v, c, o); break;
    case OP_STRLENCP:
    case OP_STRLENBYTES:
        if (v[0].value_type != BSON_TYPE_UTF8) {
            rc = id == OP_STRLENCP
                     ? mf_err_set(c->err, MF_E_Location34471, "$strLenCP requires a string argument, found: %s", tname(&v[0]))
                     : mf_err_set(c->err, MF_E_Location34473, "$strLenBytes requires a string argument, found: %s", tname(&v[0]));
            break;
        }
        mf_value_set_int32(o, (int32_t)(id == OP_STRLENCP ? cp_count(v[0].value.v_utf8.str, v[0].value.v_utf8.len)
                                               : v[0].value.v_utf8.len));
        break;
    case OP_SPLIT: rc = ev_split(v, c, o); break;
    case OP_INDEXOFCP:
    case OP_INDEXOFBYTES: rc = ev_index_of(id, v, n, c, o); break;
    case OP_INDEXOFARRAY: rc = ev_index_of_array(e, v, n, c, o); break;
    case OP_STRCASECMP: {
        bson_value_t a, b;
        if (coerce_str(c, &v[0], &a) < 0) {
            rc = -1;
            break;
        }
        if (coerce_str(c, &v[1], &b) < 0) {
            mf_value_free(&a);
            rc = -1;
            break;
        }
        int r = strcasecmp(a.value.v_utf8.str, b.value.v_utf8.str);
        mf_value_set_int32(o, r < 0 ? -1 : r > 0 ? 1 : 0);
        mf_value_free(&a);
        mf_value_free(&b);
        break;
    }
    case OP_SIZE:
        if (v[0].value_type != BSON_TYPE_ARRAY) {
            rc = mf_err_set(c->err, MF_E_Location17124, "The argument to $size must be an array, but was of type: %s",
                            tname(&v[0]));
        } else {
            elems_t el;
            elems_of(&v[0], &el);
            mf_value_set_int32(o, (int32_t)el.n);
            elems_free(&el);
        }
        break;
    case OP_ARRAYELEMAT: rc = ev_array_elem_at("$arrayElemAt", &v[0], &v[1], c, o); break;
    case OP_FIRST:
    case OP_LAST: rc = ev_first_last(id == OP_FIRST, &v[0], c, o); break;
    case OP_IN:
        if (v[1].value_type != BSON_TYPE_ARRAY) {
            rc = mf_err_set(c->err, MF_E_Location40081, "$in requires an array as a second argument, found: %s",
                            tname(&v[1]));
        } else {
            elems_t el;
            elems_of(&v[1], &el);
            mf_value_set_bool(o, arr_contains(&el, &v[0]));
            elems_free(&el);
        }
        break;
    case OP_CONCATARRAYS: {
        mf_value_array_t ab;
        bool null = false;
        for (size_t i = 0; i < n && rc == 0 && !null; i++) {
            if (mf_value_is_nullish(&v[i]))
                null = true;
            else if (v[i].value_type != BSON_TYPE_ARRAY)
                rc = mf_err_set(c->err, MF_E_Location28664, "$concatArrays only supports arrays, not %s", tname(&v[i]));
        }
        if (rc < 0)
            break;
        if (null) {
            mf_value_set_null(o);
            break;
        }
        mf_value_array_init(&ab);
        for (size_t i = 0; i < n; i++) {
            elems_t el;
            elems_of(&v[i], &el);
            for (size_t j = 0; j < el.n; j++)
                mf_value_array_push(&ab, &el.v[j]);
            elems_free(&el);
        }
        mf_value_array_finish(&ab, o);
        break;
    }
    case OP_SLICE: rc = ev_slice(v, n, c, o); break;
    case OP_ISARRAY: mf_value_set_bool(o, v[0].value_type == BSON_TYPE_ARRAY); break;
    case OP_REVERSEARRAY:
        if (mf_value_is_nullish(&v[0])) {
            mf_value_set_null(o);
        } else if (v[0].value_type != BSON_TYPE_ARRAY) {
            rc = mf_err_set(c->err, MF_E_Location34435, "The argument to $reverseArray must be an array, but was of type: %s",
                            tname(&v[0]));
        } else {
            elems_t el;
            mf_value_array_t ab;
            elems_of(&v[0], &el);
            mf_value_array_init(&ab);
            for (size_t i = el.n; i > 0; i--)
                mf_value_array_push(&ab, &el.v[i - 1]);
            mf_value_array_finish(&ab, o);
            elems_free(&el);
        }
        break;
    case OP_RANGE: {
        int64_t a = 0, b = 0, step = 1;
        mf_value_array_t ab;
        char vb[128];
        /* mongod: start's type, start's range, end's type, end's range, then the step's (no null passthrough). */
        static const char *const what[] = {"starting", "ending", "step"};
        static const int tcode[] = {MF_E_Location34443, MF_E_Location34445, MF_E_Location34447};
        static const int icode[] = {MF_E_Location34444, MF_E_Location34446, MF_E_Location34448};
        int64_t *dst[] = {&a, &b, &step};
        for (size_t i = 0; i < n && i < 3; i++) {
            if (!mf_value_is_number(&v[i])) {
                rc = mf_err_set(c->err, tcode[i], "$range requires a numeric %s value, found value of type:%s%s", what[i],
                                i == 2 ? "" : " ", tname(&v[i]));
                break;
            }
            if (!is_int32_integral(&v[i])) {
                value_str(&v[i], vb, sizeof vb);
                rc = mf_err_set(c->err, icode[i],
                                "$range requires a%s %s value that can be represented as a 32-bit integer, found value: %s",
                                i == 1 ? "n" : "", what[i], vb);
                break;
            }
            mf_value_as_int64(&v[i], dst[i]);
        }
        if (rc < 0)
            break;
        if (step == 0) {
            rc = mf_err_set(c->err, MF_E_Location34449, "$range requires a non-zero step value");
            break;
        }
        mf_value_array_init(&ab);
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
            bson_value_t x;
            mf_value_set_int32(&x, (int32_t)i);
            mf_value_array_push(&ab, &x);
            if (ab.b.len > 16 * 1024 * 1024) {
                bson_destroy(&ab.b);
                rc = mf_err_set(c->err, MF_E_ExceededMemoryLimit, "$range would use too much memory");
                break;
            }
        }
        if (rc == 0)
            mf_value_array_finish(&ab, o);
        break;
    }
    case OP_SUM:
    case OP_AVG:
    case OP_MIN:
    case OP_MAX:
    case OP_STDDEVPOP:
    case OP_STDDEVSAMP: ev_accum(id, v, n, o); break;
    case OP_TYPE:
        mf_value_set_str(o, mf_type_name(v[0].value_type));
        break;
    case OP_BITAND:
    case OP_BITOR:
    case OP_BITXOR: rc = ev_bitwise(id, v, n, c, o); break;
    case OP_BITNOT: rc = ev_bitnot(&v[0], c, o); break;
    case OP_TSSECOND:
    case OP_TSINCREMENT: rc = ev_ts_part(id, &v[0], c, o); break;
    case OP_TOUUID: rc = ev_to_uuid(&v[0], c, o); break;
    case OP_TOSTRING:
    case OP_TOINT:
    case OP_TOLONG:
    case OP_TODOUBLE:
    case OP_TODECIMAL:
    case OP_TOBOOL:
    case OP_TODATE:
    case OP_TOOBJECTID: {
        int to = id == OP_TOSTRING ? BSON_TYPE_UTF8 : id == OP_TOINT ? BSON_TYPE_INT32 : id == OP_TOLONG ? BSON_TYPE_INT64
                 : id == OP_TODOUBLE ? BSON_TYPE_DOUBLE : id == OP_TODECIMAL ? BSON_TYPE_DECIMAL128
                 : id == OP_TOBOOL ? BSON_TYPE_BOOL : id == OP_TODATE ? BSON_TYPE_DATE_TIME : BSON_TYPE_OID;
        if (mf_value_is_nullish(&v[0]))
            mf_value_set_null(o);
        else
            rc = convert(c, &v[0], to, o);
        break;
    }
    case OP_ISNUMBER: mf_value_set_bool(o, mf_value_is_number(&v[0])); break;
    case OP_MERGEOBJECTS: rc = ev_merge_objects(v, n, c, o); break;
    case OP_OBJECTTOARRAY: rc = ev_object_to_array(&v[0], c, o); break;
    case OP_ARRAYTOOBJECT: rc = ev_array_to_object(&v[0], c, o); break;
    case OP_SETUNION:
    case OP_SETINTERSECTION:
    case OP_SETDIFFERENCE:
    case OP_SETISSUBSET:
    case OP_SETEQUALS: rc = ev_sets(e, v, n, c, o); break;
    case OP_ANYELEMENTTRUE:
    case OP_ALLELEMENTSTRUE:
        if (v[0].value_type != BSON_TYPE_ARRAY) {
            rc = mf_err_set(c->err, id == OP_ALLELEMENTSTRUE ? MF_E_Location17040 : MF_E_Location17041,
                            "%s's argument must be an array, but is %s", e->op->name, tname(&v[0]));
        } else {
            elems_t el;
            bool any = false, all = true;
            elems_of(&v[0], &el);
            for (size_t i = 0; i < el.n; i++) {
                if (truthy(&el.v[i]))
                    any = true;
                else
                    all = false;
            }
            elems_free(&el);
            mf_value_set_bool(o, id == OP_ANYELEMENTTRUE ? any : all);
        }
        break;
    default:
        rc = mf_err_set(c->err, MF_E_InternalError, "operator %s not implemented", e->op->name);
        break;
    }
    free_vals(v, n);
    return rc;
}

static int
ev(const mf_expr_t *e, ctx_t *c, bson_value_t *o)
{
    mf_value_set_missing(o);
    switch (e->kind) {
    case K_LIT:
        mf_value_copy(o, &e->lit);
        return 0;
    case K_FIELD:
        walk_path(&c->rootv, e->path, e->npath, o);
        return 0;
    case K_VAR: {
        const bson_value_t *base;
        bson_value_t now;
        switch (e->var) {
        case VAR_ROOT:
        case VAR_CURRENT:
            base = &c->rootv;
            if (e->npath == 0 && c->root != NULL &&
                (bson_has_field(c->root, MF_TEXT_SCORE_FIELD) || bson_has_field(c->root, MF_GEO_DIST_FIELD))) {
                /* The whole document: the text score and $geoNear's data are metadata, not its fields. */
                bson_t copy;
                bson_init(&copy);
                bson_copy_to_excluding_noinit(c->root, &copy, MF_TEXT_SCORE_FIELD, MF_GEO_DIST_FIELD,
                                              MF_GEO_POINT_FIELD, NULL);
                mf_value_take_bson(o, &copy, false);
                return 0;
            }
            break;
        case VAR_NOW:
            /*
             * The operation's start (mf_curop_now_ms), as mongod's $$NOW:
             * the same for every document, and no clock read for an
             * expression that does not name it (a clock_gettime per
             * evaluation was a fifth of a $group's CPU on these VMs).
             */
            if (c->now == 0)
                c->now = mf_curop_now_ms(mf_curop_current());
            mf_value_set_date(&now, c->now);
            base = &now;
            break;
        case VAR_REMOVE:
            mf_value_set_missing(o);
            return 0;
        default:
            base = lookup_var(c, e->name);
            if (base == NULL && (strcmp(e->name, "CLUSTER_TIME") == 0 || strcmp(e->name, "USER_ROLES") == 0))
                return mf_err_set(c->err, MF_E_Location51144, "Builtin variable '$$%s' is not available", e->name);
            if (base == NULL)
                return mf_err_set(c->err, MF_E_Location17276, "Use of undefined variable: %s", e->name);
            break;
        }
        walk_path(base, e->path, e->npath, o);
        return 0;
    }
    case K_OBJ: {
        bson_t b = BSON_INITIALIZER;
        for (size_t i = 0; i < e->nargs; i++) {
            bson_value_t r;
            if (ev(e->args[i], c, &r) < 0) {
                bson_destroy(&b);
                return -1;
            }
            if (r.value_type != BSON_TYPE_EOD)
                bson_append_value(&b, e->keys[i], -1, &r);
            mf_value_free(&r);
        }
        mf_value_take_bson(o, &b, false);
        return 0;
    }
    case K_ARR: {
        mf_value_array_t ab;
        mf_value_array_init(&ab);
        for (size_t i = 0; i < e->nargs; i++) {
            bson_value_t r;
            if (ev(e->args[i], c, &r) < 0) {
                bson_destroy(&ab.b);
                return -1;
            }
            mf_value_array_push(&ab, &r);
            mf_value_free(&r);
        }
        mf_value_array_finish(&ab, o);
        return 0;
    }
    case K_OP:
        return ev_op(e, c, o);
    default:
        return mf_err_set(c->err, MF_E_InternalError, "bad expression node");
    }
}

int
mf_expr_eval(const mf_expr_t *e, const bson_t *root, bson_value_t *out, mf_error_t *err)
{
    ctx_t c;
    bson_t empty = BSON_INITIALIZER;

    mf_value_set_missing(out);
    if (root == NULL)
        root = &empty;
    memset(&c, 0, sizeof c);
    c.root = root;
    c.rootv.value_type = BSON_TYPE_DOCUMENT;
    c.rootv.value.v_doc.data = (uint8_t *)bson_get_data(root);
    c.rootv.value.v_doc.data_len = root->len;
    c.err = err;
    int rc = ev(e, &c, out);
    if (rc < 0)
        mf_value_free(out);
    return rc;
}

bool
mf_meta_never_set(const char *name)
{
    static const char *const never[] = {"randVal",           "searchScore",         "searchHighlights",
                                        "searchScoreDetails", "vectorSearchScore",   "searchSequenceToken",
                                        "timeseriesBucketMinTime", "timeseriesBucketMaxTime"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strcmp(name, never[i]) == 0)
            return true;
    return false;
}
