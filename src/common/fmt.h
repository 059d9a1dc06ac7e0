/*
 * fmt.h: values and documents printed the way mongod prints them in messages
 * ("{ _id: 1, name: \"x\" }", "ObjectId('...')"), for error text such as
 * duplicate key errors. Output is truncated to the buffer; always NUL-terminated.
 * Also mf_append_number, a number appended as mongod's appendNumber does.
 */
#ifndef MF_FMT_H
#define MF_FMT_H

#include <bson/bson.h>
#include <stddef.h>

void mf_fmt_value(const bson_value_t *v, char *buf, size_t cap);
void mf_fmt_doc(const bson_t *doc, char *buf, size_t cap);
/*
 * mf_fmt_double: a double as mongod's StringBuilder::appendDoubleNice
 * prints it, which every value in its messages goes through: %.16g, then
 * ".0" unless there is a '.', 'E' or 'N' ("1.0", "0.1", "1e+20.0", "nan.0").
 * buf holds at least 40 bytes.
 */
void mf_fmt_double(double d, char *buf, size_t cap);

struct sockaddr_storage;
/*
 * mf_fmt_sockaddr: a peer's address as logs and currentOp show it: the IP
 * ("127.0.0.1", "::1") into ip (cap bytes), its port into *port; "?" and 0
 * when ss is NULL or of another family.
 */
void mf_fmt_sockaddr(const struct sockaddr_storage *ss, char *ip, size_t cap, int *port);

/*
 * mf_append_number: MongoDB's BSONObjBuilder::appendNumber(long long), which
 * its statistics and connection ids use: an int when |v| < 2^30, else a long
 * (so mongosh shows small values as plain numbers, not Long).
 */
void mf_append_number(bson_t *out, const char *key, int64_t v);

/* mf_fmt_uuid: a 16-byte UUID as mongod prints it in messages: "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (36 characters and the NUL). */
void mf_fmt_uuid(const uint8_t uuid[16], char out[37]);

#endif /* MF_FMT_H */
