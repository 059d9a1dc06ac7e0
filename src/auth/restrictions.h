/*
 * restrictions.h: authenticationRestrictions, the addresses a user or role
 * may authenticate from (MongoDB 3.6+, mongod's address_restriction and
 * restriction_set).
 *
 * A restriction list is an array of documents {clientSource: [range...],
 * serverAddress: [range...]}, each range an IPv4 or IPv6 address or CIDR
 * block ("10.0.0.0/8", "::1"). One document is met when every field it
 * gives is met (the client's IP within one of clientSource's ranges, the
 * server-side address of the connection within one of serverAddress's); a
 * list is met when any of its documents is (an empty list restricts
 * nothing). A user authenticates only if its own list and the list of every
 * role it holds, directly or inherited, are met (cmd/cmd_auth.c walks the
 * roles). A connection that is not over IP (no address known) meets no range.
 *
 * Pure functions over BSON: no state, no allocation kept, safe from any
 * thread. Addresses are parsed with inet_pton only.
 */
#ifndef MF_AUTH_RESTRICTIONS_H
#define MF_AUTH_RESTRICTIONS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/*
 * mf_restrictions_parse: validates the command argument `it` (an
 * authenticationRestrictions array of createUser, updateUser, createRole or
 * updateRole; cmd names the command for the type error) as mongod's
 * getRawAuthenticationRestrictions and appends its sanitized form to out (an
 * empty bson_t the caller owns, built as an array): each document as
 * {clientSource?, serverAddress?} in that order, its strings as given.
 * Errors, mongod's: not an array 14; an element not a document 12; an
 * unknown, duplicate or mistyped field 2 with the IDL's message; a string
 * that is not an address or CIDR range 2; a document with neither field
 * 162 CollectionIsEmpty. 0, or -1 with err.
 */
int mf_restrictions_parse(const bson_iter_t *it, const char *cmd, bson_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_restrictions_met: whether a stored list (an array of restriction
 * documents; a malformed one is never met) is met by a connection whose
 * client IP is client_ip and whose server-side IP is server_ip (textual, as
 * inet_ntop writes them; NULL or "" when not known: not an IP connection).
 * False with why (cap bytes, NUL-terminated) saying which range was missed,
 * in mongod's words ("10.1.2.3 does not fall within: {"clientSource":
 * ["127.0.0.1/32"]}").
 */
bool mf_restrictions_met(const bson_t *list, const char *client_ip, const char *server_ip, char *why, size_t cap);

/*
 * mf_restrictions_append_resolved: appends list under key to out as mongod
 * serializes a parsed list (usersInfo's and rolesInfo's
 * inheritedAuthenticationRestrictions): each range as "address/length"
 * ("127.0.0.1" becomes "127.0.0.1/32"). An unparsable range is kept as stored.
 */
void mf_restrictions_append_resolved(bson_t *out, const char *key, const bson_t *list);

/*
 * mf_restrictions_ip_of: the IP part of an "ip:port" address (mf_client_t's
 * remote and local) into buf; "" when addr is not an IP address and port.
 */
void mf_restrictions_ip_of(const char *addr, char *buf, size_t cap);

#endif
