/*
 * params.h: server parameters (getParameter / setParameter / --setParameter).
 *
 * A fixed table of named parameters, each an int64 or bool with bounds and
 * two flags: settable at startup, settable at run time. Every engine owns
 * its own copy of the table (mf_params_t, made by mf_params_new from the
 * defaults), so two engines in one process have independent settings.
 * Values are atomics, so any thread (the TTL monitor, workers) reads them
 * without locking. Listeners registered with mf_param_on_change run after a
 * successful set (the TTL monitor uses that to wake at once when its sleep
 * changes, SPEC D1).
 */
#ifndef MF_PARAMS_H
#define MF_PARAMS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef enum { MF_PARAM_INT, MF_PARAM_BOOL, MF_PARAM_STRING } mf_param_type_t;

typedef struct mf_params mf_params_t;

typedef struct mf_param {
    const char *name;
    mf_param_type_t type;
    int64_t min, max;       /* inclusive bounds for ints */
    bool min_exclusive;     /* "must be > min" rather than ">=" */
    bool startup, runtime;  /* where it may be set */
    _Atomic int64_t value;  /* ints and bools */
    const char *svalue;     /* strings: static, read-only */
    mf_params_t *owner;     /* the table this entry belongs to */
} mf_param_t;

/* mf_params_new: a table holding every parameter at its default. Never NULL. */
mf_params_t *mf_params_new(void);
/* mf_params_free: frees the table (NULL is ignored). */
void mf_params_free(mf_params_t *ps);

/* mf_param_find: the parameter called name, or NULL. */
mf_param_t *mf_param_find(mf_params_t *ps, const char *name);
/* mf_param_get: current int/bool value of name (0 if unknown). */
int64_t mf_param_get(mf_params_t *ps, const char *name);
/*
 * mf_param_value: current int/bool value through a pointer from
 * mf_param_find (0 if p is NULL, as mf_param_get for an unknown name); for
 * callers that read a parameter often, found once by name.
 */
static inline int64_t mf_param_value(mf_param_t *p) { return p != NULL ? p->value : 0; }

/* mf_param_set_value: validates and sets from a BSON value (setParameter command). */
int mf_param_set_value(mf_param_t *p, const bson_value_t *v, bool at_startup, mf_error_t *err) MF_WUR;
/* mf_param_set_string: validates and sets from "name=value" text (--setParameter). */
int mf_param_set_string(mf_params_t *ps, const char *assignment, mf_error_t *err) MF_WUR;
/* mf_param_append: appends name: value to doc. */
void mf_param_append(bson_t *doc, const mf_param_t *p);
/* mf_param_each: calls fn for every parameter. */
void mf_param_each(mf_params_t *ps, void (*fn)(void *arg, mf_param_t *p), void *arg);
/* mf_param_on_change: fn(arg, p) runs after any successful set. Up to 8 listeners. */
void mf_param_on_change(mf_params_t *ps, void (*fn)(void *arg, mf_param_t *p), void *arg);

#endif /* MF_PARAMS_H */
