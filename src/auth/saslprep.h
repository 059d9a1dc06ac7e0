/*
 * saslprep.h: SASLprep (RFC 4013) for SCRAM-SHA-256 passwords, through
 * ICU's StringPrep (unicode/usprep.h, profile USPREP_RFC4013_SASLPREP).
 *
 * MongoDB derives a SCRAM-SHA-256 credential from the SASLprep'd password
 * (RFC 7677 via RFC 5802: "Normalize(password)"), and drivers SASLprep the
 * password they log in with, so the server must prepare it the same way when
 * it builds the credential (createUser, updateUser): "I\u00ADX" and "IX"
 * give one credential, ROMAN NUMERAL FOUR (U+2163) and "IV" another.
 * SCRAM-SHA-1 hashes the raw password (mf_scram_sha1_password) and user
 * names are never prepared, as mongod's.
 *
 * Nothing here is hand-written Unicode: the mapping, NFKC, the prohibited
 * tables and the bidi rule are ICU's. The profile is opened once per engine
 * (eng->saslprep, at mf_engine_open, on one thread: mongod also loads ICU's
 * StringPrep cache at start-up because filling it is racy) and is
 * immutable afterwards: any number of threads may call mf_saslprep_prepare
 * on it at once.
 */
#ifndef MF_SASLPREP_H
#define MF_SASLPREP_H

#include <stddef.h>

#include "common/error.h"

typedef struct mf_saslprep mf_saslprep_t;

/* mf_saslprep_open: the RFC 4013 profile into *out (mf_saslprep_close frees it). 0, or -1 with err. */
int mf_saslprep_open(mf_saslprep_t **out, mf_error_t *err) MF_WUR;
void mf_saslprep_close(mf_saslprep_t *sp);

/*
 * mf_saslprep_prepare: in (len bytes of UTF-8, NULs included) SASLprep'd
 * into *out, malloc'd and NUL-terminated (SASLprep prohibits U+0000, so it
 * holds none); the caller wipes and frees it. Unassigned code points are
 * refused (USPREP_DEFAULT: "stored strings", RFC 3454 section 7). Fails as
 * mongod's icuSaslPrep: 2 BadValue "Non UTF-8 data encountered" for bad
 * UTF-8; 50692 "Error preflighting normalization: <ICU error>" for a
 * prohibited character (U_STRINGPREP_PROHIBITED_ERROR), an unassigned one,
 * a bidi violation (U_STRINGPREP_CHECK_BIDI_ERROR) or a result that is
 * empty. Returns 0, or -1 with err (*out untouched).
 */
int mf_saslprep_prepare(const mf_saslprep_t *sp, const char *in, size_t len, char **out, mf_error_t *err) MF_WUR;

#endif /* MF_SASLPREP_H */
