/*
 * main.c: mayflyd process start: flags, engine, network loop, clean shutdown.
 *
 * Flags (mongod's names where mongod has one):
 *   --port N              TCP port (default 27017)
 *   --bind_ip ADDR        address to listen on (default 127.0.0.1)
 *   --dbpath DIR          data directory (default ./data)
 *   --setParameter k=v    a server parameter at startup (repeatable)
 *   --workers N           command worker threads kept warm (default: 4, or cores if more)
 *   --maxWorkers N        most command worker threads at once (default 512; the
 *                         pool grows past --workers when every worker is busy)
 *   --inMemory            keep all data in memory (WiredTiger in_memory): a throwaway
 *                         server for test suites; gone at shutdown (--storageEngine inMemory,
 *                         storage.engine)
 *   --wiredTigerCacheSizeGB GB  WiredTiger's cache, 0.25 to 10000 (default, as mongod's:
 *                         half of the memory granted less 1 GB, at least 256 MB; the memory
 *                         granted is RAM or a cgroup's limit, common/sysres.h);
 *                         --wiredTigerCacheSizePct F the same as a fraction (at most 0.8) of it;
 *                         --inMemorySizeGB GB for --inMemory (storage.wiredTiger.engineConfig.
 *                         cacheSizeGB / cacheSizePct, storage.inMemory.engineConfig.inMemorySizeGB)
 *   --maxConns N          connections open at once; more are closed at once (default 1,000,000,
 *                         at most 80% of the open-files limit, as mongod;
 *                         net.maxIncomingConnections in the config file)
 *   --replSet NAME        run as a member of replica set NAME (src/repl/repl.h)
 *   --raftPort N          the port raft listens on (default: --port + 10000)
 *   --oplogSize MB        local.oplog.rs's size cap (default 1024)
 *   --auth                access control on (security.authorization: enabled): SCRAM users,
 *                         built-in roles (src/cmd/cmd_auth.c); --noauth turns it off again
 *   --keyFile FILE        members authenticate to each other with this key (SCRAM as
 *                         __system@local); implies --auth (security.keyFile)
 *   --tlsMode MODE        disabled (default), allowTLS, preferTLS or requireTLS (src/net/tls.h);
 *                         with --tlsCertificateKeyFile PEM, --tlsCAFile PEM (client certificates
 *                         required unless --tlsAllowConnectionsWithoutCertificates),
 *                         --tlsAllowInvalidCertificates; the ssl* spellings too
 *   --httpPort N          the HTTP port: TTL console, /api/ttl, /metrics (default: --port + 1000;
 *                         0: none; net.http.port; src/http/)
 *   --networkMessageCompressors LIST  wire compressors offered to clients, in preference
 *                         order: snappy, zstd, zlib (and noop), comma-separated, or
 *                         "disabled" (default "snappy,zstd,zlib", as mongod 8.0;
 *                         net.compression.compressors; src/net/wire_compress.c)
 *   --logpath FILE        the JSON log to FILE instead of stderr (--logappend: append);
 *                         SIGUSR1 reopens it for log rotation
 *   --config FILE         mongod.conf (YAML, libyaml: net.port, net.bindIp, storage.dbPath,
 *                         security.*, net.tls.*, replication.*, systemLog.*, setParameter);
 *                         unknown keys stop start-up; a flat "name = value" file still works
 *   --version, --help
 * Shutdown on SIGINT/SIGTERM: stop accepting, call eng->on_shutdown (which
 * interrupts running operations), finish in-flight commands,
 * close the engine (WiredTiger checkpoints on close), exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "auth/scram.h"
#include "cmd/cmd.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/params.h"
#include "common/scratch.h"
#include "common/sysres.h"
#include "engine/profiler.h"
#include "http/http.h"
#include "net/net.h"
#include "repl/repl.h"

#define MF_VERSION "8.0.0"

/*
 * LeakSanitizer (test build): WiredTiger keeps some allocations until the
 * process exits; those are its business, not leaks of ours.
 */
const char *__lsan_default_suppressions(void);
const char *
__lsan_default_suppressions(void)
{
    return "leak:libwiredtiger.so\n";
}

#ifdef MF_HAVE_JEMALLOC
/*
 * jemalloc's start-up options (it reads this symbol, a constant, once). By
 * default it serves requests of 8 MB or more from an arena that returns
 * their pages to the OS at once, so every large document a request reads or
 * builds faults its pages in afresh, and each copy of a 15 MB document
 * (fetched, batched, replied, framed) paid about 3,700 page faults: a 15 MB
 * find took 220-250 ms, 80-160 ms with this. Large blocks now go to the
 * ordinary arenas, whose free pages are kept for reuse and returned after
 * their dirty decay (10 s), as small ones are.
 */
__attribute__((visibility("default"))) const char *malloc_conf = "oversize_threshold:0";
#endif

/* The HTTP port as a front end of the network loop (mf_net_opts_t attach/detach). */
typedef struct http_front {
    mf_engine_t *eng;
    mf_http_opts_t opts;
    mf_http_t *http;
} http_front_t;

static int
http_attach(void *arg, void *loop, mf_error_t *err)
{
    http_front_t *f = arg;
    return mf_http_start(f->eng, loop, &f->opts, &f->http, err);
}

static void
http_detach(void *arg)
{
    http_front_t *f = arg;
    mf_http_stop(f->http);
    f->http = NULL;
}

typedef struct opts {
    int port;
    char bind_ip[128];
    char dbpath[1024];
    int workers;
    bool in_memory;
    bool engine_given;     /* --storageEngine / storage.engine given (getCmdLineOpts shows it then) */
    const char *set_params[64]; /* "name=value", point into argv or owned copies (config file) */
    size_t nset_params;
    mf_params_t *check;         /* validates --setParameter as it is read */
    int max_workers;
    int max_conns;
    char repl_set[128];
    int raft_port;
    int64_t oplog_size_mb;
    bool auth;             /* --auth, security.authorization: enabled */
    char key_file[1024];   /* --keyFile, security.keyFile: members authenticate to each other (implies auth) */
    mf_tls_opts_t tls;     /* --tlsMode and friends (net.tls.* in the config file) */
    char tls_cert[1024], tls_ca[1024];
    char log_path[1024];   /* --logpath, systemLog.path: the JSON log goes there instead of stderr */
    bool log_append;       /* --logappend, systemLog.logAppend */
    int http_port;         /* --httpPort, net.http.port: -1 for the default (port + 1000), 0 for none */
    int profile;           /* --profile, operationProfiling.mode: every database's level, -1 unset */
    int64_t slowms;        /* --slowms, operationProfiling.slowOpThresholdMs, -1 unset */
    double sample_rate;    /* --slowOpSampleRate, operationProfiling.slowOpSampleRate, -1 unset */
    double cache_gb;       /* --wiredTigerCacheSizeGB, storage.wiredTiger.engineConfig.cacheSizeGB; -1 unset */
    double cache_pct;      /* --wiredTigerCacheSizePct (a fraction of the memory granted); -1 unset */
    double inmem_gb;       /* --inMemorySizeGB, storage.inMemory.engineConfig.inMemorySizeGB; -1 unset */
    char compressors_spec[128];         /* --networkMessageCompressors as given ("" unset: the default) */
    mf_compressor_list_t compressors;   /* ... parsed */
} opts_t;

static void
usage(FILE *f)
{
    fprintf(f, "usage: mayflyd [--port N] [--bind_ip ADDR] [--dbpath DIR] [--setParameter name=value]...\n"
               "               [--workers N] [--maxWorkers N] [--maxConns N] [--inMemory] [--replSet NAME] [--raftPort N]\n"
               "               [--oplogSize MB] [--auth] [--keyFile FILE] [--config FILE] [--version]\n"
               "               [--tlsMode disabled|allowTLS|preferTLS|requireTLS] [--tlsCertificateKeyFile PEM]\n"
               "               [--tlsCAFile PEM] [--tlsAllowConnectionsWithoutCertificates] [--tlsAllowInvalidCertificates]\n"
               "               [--logpath FILE] [--logappend] [--httpPort N] [--profile 0|1|2] [--slowms MS]\n"
               "               [--slowOpSampleRate F] [--networkMessageCompressors snappy,zstd,zlib|disabled]\n"
               "               [--storageEngine wiredTiger|inMemory] [--wiredTigerCacheSizeGB GB]\n"
               "               [--wiredTigerCacheSizePct FRACTION] [--inMemorySizeGB GB]\n");
}

static int apply_flag(opts_t *o, const char *name, const char *val, bson_t *parsed);
static int load_config(opts_t *o, const char *path, bson_t *parsed);

static int
load_flat_config(opts_t *o, const char *path, bson_t *parsed)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    if (f == NULL) {
        fprintf(stderr, "mayflyd: cannot open config file %s\n", path);
        return -1;
    }
    while (fgets(line, sizeof(line), f)) {
        char *p = line, *sep, *end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\0')
            continue;
        sep = strpbrk(p, "=:");
        if (sep == NULL)
            continue;
        *sep = '\0';
        char *val = sep + 1;
        for (end = sep - 1; end > p && (*end == ' ' || *end == '\t'); end--)
            *end = '\0';
        while (*val == ' ' || *val == '\t')
            val++;
        for (end = val + strlen(val) - 1; end >= val && (*end == '\n' || *end == ' ' || *end == '\r'); end--)
            *end = '\0';
        /* Accept mongod YAML leaf names too. */
        const char *name = p;
        if (strcmp(name, "bindIp") == 0)
            name = "bind_ip";
        else if (strcmp(name, "dbPath") == 0)
            name = "dbpath";
        else if (strcmp(name, "replSetName") == 0)
            name = "replSet";
        else if (strcmp(name, "maxIncomingConnections") == 0)
            name = "maxConns";
        else if (strcmp(name, "oplogSizeMB") == 0)
            name = "oplogSize";
        else if (strcmp(name, "mode") == 0) /* net.tls.mode */
            name = "tlsMode";
        else if (strcmp(name, "certificateKeyFile") == 0)
            name = "tlsCertificateKeyFile";
        else if (strcmp(name, "CAFile") == 0)
            name = "tlsCAFile";
        else if (strcmp(name, "allowConnectionsWithoutCertificates") == 0)
            name = "tlsAllowConnectionsWithoutCertificates";
        else if (strcmp(name, "allowInvalidCertificates") == 0)
            name = "tlsAllowInvalidCertificates";
        if (*val == '\0')
            continue;
        if (apply_flag(o, name, val, parsed) != 0) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

/*
 * mongod.conf (YAML, read with libyaml): each scalar leaf is one flag, named
 * by its path (yaml_names). A top-level leaf may also be a flag's own name
 * (the flat "name: value" format this server read before); setParameter's
 * children are server parameters. Anything else is an unknown option and
 * stops start-up, as mongod does.
 */
static const struct {
    const char *path, *flag;
} yaml_names[] = {
    {"net.port", "port"},
    {"net.bindIp", "bind_ip"},
    {"net.maxIncomingConnections", "maxConns"},
    {"net.http.port", "httpPort"},
    {"net.compression.compressors", "networkMessageCompressors"},
    {"net.tls.mode", "tlsMode"},
    {"net.tls.certificateKeyFile", "tlsCertificateKeyFile"},
    {"net.tls.CAFile", "tlsCAFile"},
    {"net.tls.allowConnectionsWithoutCertificates", "tlsAllowConnectionsWithoutCertificates"},
    {"net.tls.allowInvalidCertificates", "tlsAllowInvalidCertificates"},
    {"net.ssl.mode", "sslMode"},
    {"net.ssl.PEMKeyFile", "sslPEMKeyFile"},
    {"net.ssl.CAFile", "sslCAFile"},
    {"storage.dbPath", "dbpath"},
    {"storage.inMemory", "inMemory"},
    {"storage.engine", "storageEngine"},
    {"storage.wiredTiger.engineConfig.cacheSizeGB", "wiredTigerCacheSizeGB"},
    {"storage.wiredTiger.engineConfig.cacheSizePct", "wiredTigerCacheSizePct"},
    {"storage.inMemory.engineConfig.inMemorySizeGB", "inMemorySizeGB"},
    {"security.authorization", "authorization"},
    {"security.keyFile", "keyFile"},
    {"replication.replSetName", "replSet"},
    {"replication.oplogSizeMB", "oplogSize"},
    {"replication.raftPort", "raftPort"},
    {"systemLog.path", "logpath"},
    {"systemLog.destination", "logDestination"},
    {"systemLog.logAppend", "logAppend"},
    {"operationProfiling.mode", "profileMode"},
    {"operationProfiling.slowOpThresholdMs", "slowms"},
    {"operationProfiling.slowOpSampleRate", "slowOpSampleRate"},
};

/* Applies the scalar leaves under node (a mapping at path prefix). 0, or -1 with a message on stderr. */
static int
yaml_walk(opts_t *o, yaml_document_t *doc, yaml_node_t *node, const char *prefix, bson_t *parsed, int depth)
{
    if (node == NULL || node->type != YAML_MAPPING_NODE || depth > 8) {
        fprintf(stderr, "mayflyd: config file: %s must be a mapping\n", prefix[0] ? prefix : "the document");
        return -1;
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key), *v = yaml_document_get_node(doc, p->value);
        char path[512];
        if (k == NULL || v == NULL || k->type != YAML_SCALAR_NODE) {
            fprintf(stderr, "mayflyd: config file: keys must be plain names\n");
            return -1;
        }
        snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", (const char *)k->data.scalar.value);
        if (v->type == YAML_MAPPING_NODE) {
            if (yaml_walk(o, doc, v, path, parsed, depth + 1) != 0)
                return -1;
            continue;
        }
        if (v->type != YAML_SCALAR_NODE) {
            fprintf(stderr, "mayflyd: config file: %s: lists are not supported\n", path);
            return -1;
        }
        const char *val = (const char *)v->data.scalar.value, *flag = NULL;
        if (strncmp(path, "setParameter.", 13) == 0) {
            char assign[1024];
            snprintf(assign, sizeof(assign), "%s=%s", path + 13, val);
            if (apply_flag(o, "setParameter", assign, parsed) != 0)
                return -1;
            continue;
        }
        for (size_t i = 0; i < sizeof(yaml_names) / sizeof(yaml_names[0]) && flag == NULL; i++) {
            if (strcmp(yaml_names[i].path, path) == 0)
                flag = yaml_names[i].flag;
        }
        if (flag == NULL && depth == 0) {
            /* The flat format's own names, with its aliases. */
            static const char *const alias[][2] = {{"bindIp", "bind_ip"}, {"dbPath", "dbpath"},
                                                   {"replSetName", "replSet"}, {"maxIncomingConnections", "maxConns"},
                                                   {"oplogSizeMB", "oplogSize"}};
            flag = path;
            for (size_t i = 0; i < sizeof(alias) / sizeof(alias[0]); i++) {
                if (strcmp(alias[i][0], path) == 0)
                    flag = alias[i][1];
            }
        }
        if (flag == NULL) {
            fprintf(stderr, "mayflyd: config file: unrecognised option '%s'\n", path);
            return -1;
        }
        if (val[0] != '\0' && apply_flag(o, flag, val, parsed) != 0)
            return -1;
    }
    return 0;
}

/* Whether every line of f that says something is a flat "name = value" (not YAML's "name: value"). */
static bool
flat_file(FILE *f)
{
    char line[1024];
    bool any = false;
    rewind(f);
    while (fgets(line, sizeof(line), f)) {
        const char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0')
            continue;
        const char *eq = strchr(p, '='), *colon = strchr(p, ':');
        if (eq == NULL || (colon != NULL && colon < eq))
            return false;
        any = true;
    }
    return any;
}

/*
 * load_config: a YAML file (mongod.conf) when it parses as a YAML mapping;
 * the flat "name = value" lines of earlier versions otherwise; anything
 * else is a YAML error with its line.
 */
static int
load_config(opts_t *o, const char *path, bson_t *parsed)
{
    FILE *f = fopen(path, "rb");
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc = -1;
    if (f == NULL) {
        fprintf(stderr, "mayflyd: cannot open config file %s\n", path);
        return -1;
    }
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        fprintf(stderr, "mayflyd: cannot start the YAML parser\n");
        return -1;
    }
    yaml_parser_set_input_file(&parser, f);
    bool loaded = yaml_parser_load(&parser, &doc) != 0;
    yaml_node_t *root = loaded ? yaml_document_get_root_node(&doc) : NULL;
    if (root != NULL && root->type == YAML_MAPPING_NODE) {
        rc = yaml_walk(o, &doc, root, "", parsed, 0);
    } else if (root == NULL && loaded) {
        rc = 0; /* an empty file */
    } else if (flat_file(f)) {
        rc = load_flat_config(o, path, parsed);
    } else if (!loaded) {
        fprintf(stderr, "mayflyd: config file %s: YAML error at line %zu: %s\n", path, parser.problem_mark.line + 1,
                parser.problem ? parser.problem : "unreadable");
    } else {
        fprintf(stderr, "mayflyd: config file %s: the document must be a mapping\n", path);
    }
    if (loaded)
        yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

static int
apply_flag(opts_t *o, const char *name, const char *val, bson_t *parsed)
{
    mf_error_t err;
    if (strcmp(name, "port") == 0) {
        o->port = atoi(val);
        if (o->port <= 0 || o->port > 65535) {
            fprintf(stderr, "mayflyd: bad --port %s\n", val);
            return -1;
        }
    } else if (strcmp(name, "httpPort") == 0) {
        char *end;
        long v = strtol(val, &end, 10);
        if (*val == '\0' || *end != '\0' || v < 0 || v > 65535) {
            fprintf(stderr, "mayflyd: bad --httpPort %s (0 turns the HTTP port off)\n", val);
            return -1;
        }
        o->http_port = (int)v;
    } else if (strcmp(name, "bind_ip") == 0) {
        snprintf(o->bind_ip, sizeof(o->bind_ip), "%s", val);
    } else if (strcmp(name, "dbpath") == 0) {
        snprintf(o->dbpath, sizeof(o->dbpath), "%s", val);
    } else if (strcmp(name, "workers") == 0) {
        o->workers = atoi(val);
        if (o->workers <= 0 || o->workers > 128) {
            fprintf(stderr, "mayflyd: bad --workers %s\n", val);
            return -1;
        }
    } else if (strcmp(name, "inMemory") == 0) {
        if (strcmp(val, "true") == 0 || strcmp(val, "1") == 0) {
            o->in_memory = true;
        } else if (strcmp(val, "false") == 0 || strcmp(val, "0") == 0) {
            o->in_memory = false;
        } else {
            fprintf(stderr, "mayflyd: bad --inMemory %s (true or false)\n", val);
            return -1;
        }
    } else if (strcmp(name, "maxWorkers") == 0) {
        o->max_workers = atoi(val);
        /* WiredTiger's session_max (2000, storage_wt.c) bounds threads that touch data. */
        if (o->max_workers <= 0 || o->max_workers > 1024) {
            fprintf(stderr, "mayflyd: bad --maxWorkers %s\n", val);
            return -1;
        }
    } else if (strcmp(name, "maxConns") == 0) {
        o->max_conns = atoi(val);
        if (o->max_conns <= 0) {
            fprintf(stderr, "mayflyd: bad --maxConns %s\n", val);
            return -1;
        }
    } else if (strcmp(name, "replSet") == 0) {
        if (val[0] == '\0' || strlen(val) >= sizeof(o->repl_set) || strchr(val, '/') != NULL) {
            fprintf(stderr, "mayflyd: bad --replSet %s\n", val);
            return -1;
        }
        snprintf(o->repl_set, sizeof(o->repl_set), "%s", val);
    } else if (strcmp(name, "raftPort") == 0) {
        o->raft_port = atoi(val);
        if (o->raft_port <= 0 || o->raft_port > 65535) {
            fprintf(stderr, "mayflyd: bad --raftPort %s\n", val);
            return -1;
        }
    } else if (strcmp(name, "oplogSize") == 0) {
        o->oplog_size_mb = atoll(val);
        if (o->oplog_size_mb <= 0 || o->oplog_size_mb > 1024 * 1024) {
            fprintf(stderr, "mayflyd: bad --oplogSize %s\n", val);
            return -1;
        }
    } else if (strcmp(name, "auth") == 0 || strcmp(name, "authorization") == 0) {
        if (strcmp(val, "true") == 0 || strcmp(val, "enabled") == 0) {
            o->auth = true;
        } else if (strcmp(val, "false") == 0 || strcmp(val, "disabled") == 0) {
            o->auth = false;
        } else {
            fprintf(stderr, "mayflyd: bad security.authorization %s (enabled or disabled)\n", val);
            return -1;
        }
    } else if (strcmp(name, "tlsMode") == 0 || strcmp(name, "sslMode") == 0) {
        static const char *const ssl_names[] = {"disabled", "allowSSL", "preferSSL", "requireSSL"};
        static const char *const tls_names[] = {"disabled", "allowTLS", "preferTLS", "requireTLS"};
        for (int i = 0; i < 4; i++) {
            if (strcmp(val, ssl_names[i]) == 0)
                val = tls_names[i];
        }
        if (mf_tls_mode_parse(val, &o->tls.mode) != 0) {
            fprintf(stderr, "mayflyd: bad --tlsMode %s (disabled, allowTLS, preferTLS or requireTLS)\n", val);
            return -1;
        }
    } else if (strcmp(name, "tlsCertificateKeyFile") == 0 || strcmp(name, "sslPEMKeyFile") == 0) {
        snprintf(o->tls_cert, sizeof(o->tls_cert), "%s", val);
        o->tls.cert_key_file = o->tls_cert;
    } else if (strcmp(name, "tlsCAFile") == 0 || strcmp(name, "sslCAFile") == 0) {
        snprintf(o->tls_ca, sizeof(o->tls_ca), "%s", val);
        o->tls.ca_file = o->tls_ca;
    } else if (strcmp(name, "tlsAllowConnectionsWithoutCertificates") == 0 ||
               strcmp(name, "sslAllowConnectionsWithoutCertificates") == 0) {
        o->tls.allow_no_client_cert = strcmp(val, "false") != 0;
    } else if (strcmp(name, "tlsAllowInvalidCertificates") == 0 || strcmp(name, "sslAllowInvalidCertificates") == 0) {
        o->tls.allow_invalid_certs = strcmp(val, "false") != 0;
    } else if (strcmp(name, "logpath") == 0) {
        if (val[0] == '\0' || strlen(val) >= sizeof(o->log_path)) {
            fprintf(stderr, "mayflyd: bad --logpath %s\n", val);
            return -1;
        }
        snprintf(o->log_path, sizeof(o->log_path), "%s", val);
    } else if (strcmp(name, "logappend") == 0 || strcmp(name, "logAppend") == 0) {
        o->log_append = strcmp(val, "false") != 0;
    } else if (strcmp(name, "logDestination") == 0) {
        if (strcmp(val, "file") != 0 && strcmp(val, "syslog") != 0) {
            fprintf(stderr, "mayflyd: bad systemLog.destination %s (file)\n", val);
            return -1;
        }
        /* file: systemLog.path says where; syslog is not supported: the log stays on stderr. */
    } else if (strcmp(name, "noauth") == 0) {
        o->auth = false;
    } else if (strcmp(name, "keyFile") == 0) {
        if (val[0] == '\0' || strlen(val) >= sizeof(o->key_file)) {
            fprintf(stderr, "mayflyd: bad --keyFile %s\n", val);
            return -1;
        }
        snprintf(o->key_file, sizeof(o->key_file), "%s", val);
    } else if (strcmp(name, "setParameter") == 0) {
        if (mf_param_set_string(o->check, val, &err) != 0) {
            fprintf(stderr, "mayflyd: %s\n", err.msg);
            return -1;
        }
        if (o->nset_params == sizeof(o->set_params) / sizeof(o->set_params[0])) {
            fprintf(stderr, "mayflyd: too many --setParameter\n");
            return -1;
        }
        o->set_params[o->nset_params++] = mf_strdup(val);
    } else if (strcmp(name, "profile") == 0) {
        /* mongod's --profile takes 0-2. */
        char *end;
        long n = strtol(val, &end, 10);
        if (*end != '\0' || end == val || n < 0 || n > 2) {
            fprintf(stderr, "mayflyd: bad --profile %s (0, 1 or 2)\n", val);
            return -1;
        }
        o->profile = (int)n;
    } else if (strcmp(name, "profileMode") == 0) {
        /* mongod.conf's operationProfiling.mode: off, slowOp or all. */
        static const char *const modes[] = {"off", "slowOp", "all"};
        o->profile = -1;
        for (int k = 0; k < 3; k++)
            if (strcmp(val, modes[k]) == 0)
                o->profile = k;
        if (o->profile < 0) {
            fprintf(stderr, "mayflyd: bad operationProfiling.mode %s (off, slowOp or all)\n", val);
            return -1;
        }
    } else if (strcmp(name, "slowms") == 0) {
        char *end;
        long long n = strtoll(val, &end, 10);
        if (*end != '\0' || end == val || n < 0 || n > 2147483647) {
            fprintf(stderr, "mayflyd: bad --slowms %s\n", val);
            return -1;
        }
        o->slowms = n;
    } else if (strcmp(name, "storageEngine") == 0) {
        o->engine_given = true;
        if (strcmp(val, "wiredTiger") == 0) {
            o->in_memory = false;
        } else if (strcmp(val, "inMemory") == 0) {
            o->in_memory = true;
        } else {
            fprintf(stderr, "mayflyd: bad --storageEngine %s (wiredTiger or inMemory)\n", val);
            return -1;
        }
    } else if (strcmp(name, "wiredTigerCacheSizeGB") == 0 || strcmp(name, "inMemorySizeGB") == 0) {
        /* mongod's range for both: 0.25 GB to 10,000 GB. */
        char *end;
        double gb = strtod(val, &end);
        if (*end != '\0' || end == val || !(gb >= 0.25 && gb <= 10000)) {
            fprintf(stderr, "mayflyd: bad --%s %s (0.25 to 10000)\n", name, val);
            return -1;
        }
        *(name[0] == 'w' ? &o->cache_gb : &o->inmem_gb) = gb;
    } else if (strcmp(name, "wiredTigerCacheSizePct") == 0) {
        /* A fraction of the memory granted, as mongod reads it (0.5 is half), at most 0.8. */
        char *end;
        double f = strtod(val, &end);
        if (*end != '\0' || end == val || !(f > 0 && f <= 0.8)) {
            fprintf(stderr, "mayflyd: bad --wiredTigerCacheSizePct %s (a fraction above 0, at most 0.8)\n", val);
            return -1;
        }
        o->cache_pct = f;
    } else if (strcmp(name, "slowOpSampleRate") == 0) {
        char *end;
        double r = strtod(val, &end);
        if (*end != '\0' || end == val || !(r >= 0.0 && r <= 1.0)) {
            fprintf(stderr, "mayflyd: bad --slowOpSampleRate %s (0.0 to 1.0)\n", val);
            return -1;
        }
        o->sample_rate = r;
    } else if (strcmp(name, "networkMessageCompressors") == 0) {
        if (strlen(val) >= sizeof(o->compressors_spec) || mf_compressor_list_parse(val, &o->compressors, &err) != 0) {
            fprintf(stderr, "mayflyd: bad --networkMessageCompressors %s: %s\n", val,
                    strlen(val) >= sizeof(o->compressors_spec) ? "too long" : err.msg);
            return -1;
        }
        snprintf(o->compressors_spec, sizeof(o->compressors_spec), "%s", val);
    } else if (strcmp(name, "config") == 0) {
        return load_config(o, val, parsed);
    } else {
        fprintf(stderr, "mayflyd: unrecognised option '--%s'\n", name);
        usage(stderr);
        return -1;
    }
    return 0;
}

/* The shutdown hook (net.c calls it on SIGINT/SIGTERM): running operations stop with 11600. */
static void
interrupt_engine(void *arg)
{
    mf_engine_interrupt(arg);
}

static void
on_ready(void *arg)
{
    (void)arg;
}

/* Whether addr (a --bind_ip list) names only loopback addresses. */
static bool
loopback_only(const char *addr)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", addr);
    for (char *save = NULL, *a = strtok_r(buf, ",", &save); a != NULL; a = strtok_r(NULL, ",", &save)) {
        while (*a == ' ')
            a++;
        if (strncmp(a, "127.", 4) != 0 && strcmp(a, "::1") != 0 && strcmp(a, "localhost") != 0)
            return false;
    }
    return true;
}

#define MIN_NOFILE 64000 /* mongod's recommended minimum for the open-files limit */

/*
 * raise_nofile: lifts the soft limit on open files (RLIMIT_NOFILE) to the
 * hard limit, as Redis, nginx and Go programs do: each collection and index
 * is a file WiredTiger keeps open, and a shell's or a service's default soft
 * limit (often 1,024) is reached by a few hundred collections, where the hard
 * limit is usually far higher. A process may always raise its soft limit up
 * to its hard one. Returns the soft limit now in force (-1 if unknown or
 * unlimited); logs the change.
 */
static long long
raise_nofile(void)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
        return -1;
    rlim_t was = lim.rlim_cur, want = lim.rlim_max;
    if (want == RLIM_INFINITY) {
        /* The kernel's own ceiling (fs.nr_open) is the most a soft limit may be. */
        FILE *f = fopen("/proc/sys/fs/nr_open", "r");
        unsigned long long nr = 0;
        want = f != NULL && fscanf(f, "%llu", &nr) == 1 && nr > 0 ? (rlim_t)nr : was;
        if (f != NULL)
            fclose(f);
    }
    if (want > was) {
        lim.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &lim) == 0)
            mf_log(MF_LOG_INFO, "CONTROL", "raised the soft limit on open files from %llu to %llu (the hard limit)",
                   (unsigned long long)was, (unsigned long long)want);
        else
            lim.rlim_cur = was;
    }
    return (long long)lim.rlim_cur;
}

/*
 * mongod's startup warnings: logged, and kept for getLog "startupWarnings"
 * (the drivers' and mongosh's banner). Without access control (--auth)
 * every client can read and write everything, which matters most when the
 * server listens beyond loopback. A soft open-files limit (nofile, after
 * raise_nofile) under mongod's recommended 64,000 is warned as mongod does.
 */
static void
startup_warnings(mf_engine_t *eng, const char *bind_ip, bool auth, long long nofile)
{
    const char *msgs[3];
    int ids[3]; /* mongod's log ids for the same warnings */
    char bound[300], files[300];
    int n = 0;
    if (!auth) {
        ids[n] = 22120;
        msgs[n++] = "Access control is not enabled for the database. Read and write access to data and configuration "
                    "is unrestricted";
    }
    if (nofile >= 0 && nofile < MIN_NOFILE) {
        ids[n] = 22184;
        snprintf(files, sizeof(files), "Soft rlimits for open file descriptors too low (currentValue: %lld, "
                 "recommendedMinimum: %d): every collection and index is a file, and past the limit new ones are "
                 "refused (TooManyFilesOpen)", nofile, MIN_NOFILE);
        msgs[n++] = files;
    }
    if (!auth && !loopback_only(bind_ip)) {
        ids[n] = 22140;
        snprintf(bound, sizeof(bound), "This server is bound to %s and can be reached from other hosts: anyone who "
                 "can connect can read and write everything. Bind it to 127.0.0.1 or keep it behind a firewall",
                 bind_ip);
        msgs[n++] = bound;
    }
    if (n == 0)
        return;
    eng->startup_warnings = bson_new();
    for (int i = 0; i < n; i++) {
        char key[16], line[600];
        mf_log(MF_LOG_WARN, "CONTROL", "%s", msgs[i]);
        snprintf(key, sizeof(key), "%d", i);
        /* A whole log line, as mongod keeps them: mongosh's banner prints each one's t and msg. */
        bson_t doc, tags;
        bson_init(&doc);
        BSON_APPEND_DATE_TIME(&doc, "t", mf_now_ms()); /* relaxed extended JSON: {"$date": "<ISO-8601>"} */
        BSON_APPEND_UTF8(&doc, "s", "W");
        BSON_APPEND_UTF8(&doc, "c", "CONTROL");
        BSON_APPEND_INT32(&doc, "id", ids[i]);
        BSON_APPEND_UTF8(&doc, "ctx", "initandlisten");
        BSON_APPEND_UTF8(&doc, "msg", msgs[i]);
        BSON_APPEND_ARRAY_BEGIN(&doc, "tags", &tags);
        BSON_APPEND_UTF8(&tags, "0", "startupWarnings");
        bson_append_array_end(&doc, &tags);
        char *json = bson_as_relaxed_extended_json(&doc, NULL);
        snprintf(line, sizeof(line), "%s", json ? json : msgs[i]);
        bson_free(json);
        bson_destroy(&doc);
        bson_append_utf8(eng->startup_warnings, key, -1, line, -1);
    }
}

/*
 * read_key_file: the keyFile's key into key (cap bytes), as mongod reads
 * it: whitespace is dropped, what remains must be 6 to 1024 base64
 * characters, and the file must not be readable by group or others.
 * Returns 0, or -1 with a message on stderr.
 */
static int
read_key_file(const char *path, char *key, size_t cap)
{
    struct stat st;
    size_t n = 0;
    int ch;
    FILE *f;
    if (stat(path, &st) != 0 || (f = fopen(path, "r")) == NULL) {
        fprintf(stderr, "mayflyd: cannot read the keyFile %s: %s\n", path, strerror(errno));
        return -1;
    }
    if ((st.st_mode & 077) != 0) {
        fprintf(stderr, "mayflyd: permissions on %s are too open (chmod 400 or 600 it)\n", path);
        fclose(f);
        return -1;
    }
    while ((ch = fgetc(f)) != EOF) {
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
            continue;
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' ||
              ch == '/' || ch == '=') || n + 1 >= cap) {
            fprintf(stderr, "mayflyd: the keyFile %s must hold 6 to 1024 base64 characters\n", path);
            fclose(f);
            return -1;
        }
        key[n++] = (char)ch;
    }
    fclose(f);
    key[n] = '\0';
    if (n < 6) {
        fprintf(stderr, "mayflyd: the keyFile %s must hold 6 to 1024 base64 characters\n", path);
        return -1;
    }
    return 0;
}

/*
 * --logpath: the log (JSON lines on stderr) goes to a file instead, and
 * SIGUSR1 reopens it (after logrotate has moved it away: mongod's
 * systemLog.logRotate: reopen). The path is kept where the handler can
 * read it; open and dup2 are async-signal-safe.
 */
static char log_reopen_path[1024];

static int
log_open(const char *path, bool append)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
    if (fd < 0)
        return -1;
    int r = dup2(fd, STDERR_FILENO);
    close(fd);
    return r < 0 ? -1 : 0;
}

static void
on_sigusr1(int sig)
{
    int saved = errno;
    (void)sig;
    if (log_reopen_path[0] != '\0')
        (void)log_open(log_reopen_path, true);
    errno = saved;
}

/* The logRotate command's hook (mf_engine_set_log_rotate_hook): reopens the log file as SIGUSR1 does. */
static int
rotate_log(void *arg)
{
    (void)arg;
    if (log_reopen_path[0] == '\0')
        return 0; /* logging to stderr: nothing to reopen */
    if (log_open(log_reopen_path, true) != 0)
        return -1;
    mf_log(MF_LOG_INFO, "CONTROL", "Log rotation initiated: reopened %s", log_reopen_path);
    return 0;
}

/* Frees what apply_flag collected. */
static void
opts_free(opts_t *o)
{
    for (size_t i = 0; i < o->nset_params; i++)
        free((char *)o->set_params[i]);
    o->nset_params = 0;
    mf_params_free(o->check);
    o->check = NULL;
}

int
main(int argc, char **argv)
{
    opts_t o = {.port = 27017, .bind_ip = "127.0.0.1", .dbpath = "./data", .workers = 0, .http_port = -1,
                .profile = -1, .slowms = -1, .sample_rate = -1,
                .cache_gb = -1, .cache_pct = -1, .inmem_gb = -1};
    bson_t *argv_doc = bson_new(), *parsed = bson_new(), net, storage, sp;
    mf_engine_t *eng;
    mf_error_t err;
    char key[16], memdir[64] = "", cluster_key[1025] = "";
    bool dbpath_given = false;
    int rc = 0;

    o.check = mf_params_new();
    if (mf_compressor_list_parse(MF_COMPRESSORS_DEFAULT, &o.compressors, &err) != 0)
        abort(); /* the default names only compressors that exist */
    for (int i = 0; i < argc; i++) {
        snprintf(key, sizeof(key), "%d", i);
        bson_append_utf8(argv_doc, key, -1, argv[i], -1);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            goto done;
        } else if (strcmp(a, "--version") == 0) {
            printf("mayflyd version v%s (MongoDB wire compatible)\n", MF_VERSION);
            goto done;
        } else if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "mayflyd: unexpected argument '%s'\n", a);
            usage(stderr);
            rc = 2;
            goto done;
        }
        char name[64];
        const char *val;
        const char *eq = strchr(a + 2, '=');
        if (eq && strncmp(a + 2, "setParameter", 12) != 0) {
            snprintf(name, sizeof(name), "%.*s", (int)(eq - a - 2), a + 2);
            val = eq + 1;
        } else if ((strcmp(a, "--inMemory") == 0 || strcmp(a, "--auth") == 0 || strcmp(a, "--noauth") == 0 ||
                    strcmp(a, "--logappend") == 0 ||
                    strcmp(a, "--tlsAllowConnectionsWithoutCertificates") == 0 ||
                    strcmp(a, "--tlsAllowInvalidCertificates") == 0 ||
                    strcmp(a, "--sslAllowConnectionsWithoutCertificates") == 0 ||
                    strcmp(a, "--sslAllowInvalidCertificates") == 0) &&
                   (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0)) {
            snprintf(name, sizeof(name), "%s", a + 2);
            val = "true"; /* a bare switch */
        } else {
            snprintf(name, sizeof(name), "%s", a + 2);
            if (i + 1 >= argc) {
                fprintf(stderr, "mayflyd: option '%s' needs a value\n", a);
                rc = 2;
                goto done;
            }
            val = argv[++i];
        }
        if (strcmp(name, "dbpath") == 0)
            dbpath_given = true;
        if (apply_flag(&o, name, val, parsed) != 0) {
            rc = 2;
            goto done;
        }
    }

    if (o.log_path[0] != '\0') {
        if (log_open(o.log_path, o.log_append) != 0) {
            fprintf(stderr, "mayflyd: cannot open the log file %s: %s\n", o.log_path, strerror(errno));
            rc = 2;
            goto done;
        }
        snprintf(log_reopen_path, sizeof(log_reopen_path), "%s", o.log_path);
        signal(SIGUSR1, on_sigusr1);
    }
    if (o.key_file[0] != '\0' && read_key_file(o.key_file, cluster_key, sizeof(cluster_key)) != 0) {
        rc = 2;
        goto done;
    }

    if (o.cache_gb >= 0 && o.cache_pct >= 0) {
        fprintf(stderr, "mayflyd: --wiredTigerCacheSizeGB and --wiredTigerCacheSizePct cannot both be set\n");
        rc = 2;
        goto done;
    }
    /*
     * Sized from what this process is granted (common/sysres.h): the cache
     * from the memory limit, as mongod's; the worker counts from the CPUs.
     */
    mf_sysres_t res;
    mf_sysres_read("", &res);
    int64_t cache_mb = 0; /* 0: mf_storage_cache_mb_default of res.mem_limit */
    if (o.in_memory && (o.cache_gb >= 0 || o.cache_pct >= 0))
        fprintf(stderr, "mayflyd: --wiredTigerCacheSizeGB/Pct do not size the in-memory engine (--inMemorySizeGB "
                        "does): ignored\n");
    if (!o.in_memory && o.inmem_gb >= 0)
        fprintf(stderr, "mayflyd: --inMemorySizeGB sizes the in-memory engine only: ignored\n");
    if (o.in_memory && o.inmem_gb > 0)
        cache_mb = (int64_t)(o.inmem_gb * 1024);
    else if (!o.in_memory && o.cache_gb > 0)
        cache_mb = (int64_t)(o.cache_gb * 1024);
    else if (!o.in_memory && o.cache_pct > 0)
        cache_mb = (int64_t)(o.cache_pct * (double)(res.mem_limit / (1024 * 1024)));
    else
        cache_mb = mf_storage_cache_mb_default(res.mem_limit);
    if (cache_mb < MF_STORAGE_CACHE_MIN_MB)
        cache_mb = MF_STORAGE_CACHE_MIN_MB;
    if (cache_mb > MF_STORAGE_CACHE_MAX_MB)
        cache_mb = MF_STORAGE_CACHE_MAX_MB;
    long cores = res.cpus_usable;
    int workers = o.workers ? o.workers : (cores > 4 ? (int)cores : 4);
    int max_workers = o.max_workers ? o.max_workers : MF_NET_DEFAULT_MAX_WORKERS;
    if (max_workers < workers)
        max_workers = workers;
    signal(SIGPIPE, SIG_IGN);

    /* In memory without --dbpath: WiredTiger still wants a home directory, a scratch one. */
    if (o.in_memory && !dbpath_given) {
        if (mf_scratch_make(memdir, sizeof(memdir)) != 0) {
            fprintf(stderr, "mayflyd: cannot create a scratch directory for --inMemory\n");
            rc = 1;
            goto done;
        }
        snprintf(o.dbpath, sizeof(o.dbpath), "%s", memdir);
    }

    BSON_APPEND_DOCUMENT_BEGIN(parsed, "net", &net);
    BSON_APPEND_UTF8(&net, "bindIp", o.bind_ip);
    BSON_APPEND_INT32(&net, "port", o.port);
    if (o.compressors_spec[0] != '\0') {
        bson_t comp;
        BSON_APPEND_DOCUMENT_BEGIN(&net, "compression", &comp);
        BSON_APPEND_UTF8(&comp, "compressors", o.compressors_spec);
        bson_append_document_end(&net, &comp);
    }
    bson_append_document_end(parsed, &net);
    BSON_APPEND_DOCUMENT_BEGIN(parsed, "storage", &storage);
    BSON_APPEND_UTF8(&storage, "dbPath", o.dbpath);
    if (o.in_memory || o.engine_given)
        BSON_APPEND_UTF8(&storage, "engine", o.in_memory ? "inMemory" : "wiredTiger");
    if (o.cache_gb >= 0 || o.cache_pct >= 0 || o.inmem_gb >= 0) {
        /* As given, under mongod's names (storage.<engine>.engineConfig.*). */
        bson_t eng_doc, cfg;
        if (o.cache_gb >= 0 || o.cache_pct >= 0) {
            BSON_APPEND_DOCUMENT_BEGIN(&storage, "wiredTiger", &eng_doc);
            BSON_APPEND_DOCUMENT_BEGIN(&eng_doc, "engineConfig", &cfg);
            if (o.cache_gb >= 0)
                BSON_APPEND_DOUBLE(&cfg, "cacheSizeGB", o.cache_gb);
            if (o.cache_pct >= 0)
                BSON_APPEND_DOUBLE(&cfg, "cacheSizePct", o.cache_pct);
            bson_append_document_end(&eng_doc, &cfg);
            bson_append_document_end(&storage, &eng_doc);
        }
        if (o.inmem_gb >= 0) {
            BSON_APPEND_DOCUMENT_BEGIN(&storage, "inMemory", &eng_doc);
            BSON_APPEND_DOCUMENT_BEGIN(&eng_doc, "engineConfig", &cfg);
            BSON_APPEND_DOUBLE(&cfg, "inMemorySizeGB", o.inmem_gb);
            bson_append_document_end(&eng_doc, &cfg);
            bson_append_document_end(&storage, &eng_doc);
        }
    }
    bson_append_document_end(parsed, &storage);
    if (o.repl_set[0] != '\0') {
        bson_t rs;
        BSON_APPEND_DOCUMENT_BEGIN(parsed, "replication", &rs);
        BSON_APPEND_UTF8(&rs, "replSet", o.repl_set);
        bson_append_document_end(parsed, &rs);
    }
    if (o.auth || o.key_file[0] != '\0') {
        bson_t sec;
        BSON_APPEND_DOCUMENT_BEGIN(parsed, "security", &sec);
        BSON_APPEND_UTF8(&sec, "authorization", "enabled");
        if (o.key_file[0] != '\0')
            BSON_APPEND_UTF8(&sec, "keyFile", o.key_file);
        bson_append_document_end(parsed, &sec);
    }
    if (o.profile >= 0 || o.slowms >= 0 || o.sample_rate >= 0) {
        /* mongod's names: operationProfiling.mode off|slowOp|all, slowOpThresholdMs, slowOpSampleRate. */
        static const char *const modes[] = {"off", "slowOp", "all"};
        bson_t op;
        BSON_APPEND_DOCUMENT_BEGIN(parsed, "operationProfiling", &op);
        if (o.profile >= 0)
            BSON_APPEND_UTF8(&op, "mode", modes[o.profile]);
        if (o.slowms >= 0)
            BSON_APPEND_INT32(&op, "slowOpThresholdMs", (int32_t)o.slowms);
        if (o.sample_rate >= 0)
            BSON_APPEND_DOUBLE(&op, "slowOpSampleRate", o.sample_rate);
        bson_append_document_end(parsed, &op);
    }
    BSON_APPEND_DOCUMENT_BEGIN(parsed, "setParameter", &sp);
    bson_append_document_end(parsed, &sp);

    mf_log(MF_LOG_INFO, "CONTROL", "mayflyd %s starting: pid=%d port=%d dbpath=%s%s workers=%d maxWorkers=%d",
           MF_VERSION, (int)getpid(), o.port, o.dbpath, o.in_memory ? " (in memory)" : "", workers, max_workers);
    mf_log(MF_LOG_INFO, "CONTROL", "granted %d CPU(s) (online %d, affinity %d, cgroup quota %.2f) and %lld MB "
           "(RAM %lld MB, cgroup limit %lld MB); WiredTiger cache %lld MB", res.cpus_usable, res.cpus_online,
           res.cpus_affinity, res.cpu_quota, (long long)(res.mem_limit >> 20), (long long)(res.mem_total >> 20),
           (long long)(res.mem_cgroup >> 20), (long long)cache_mb);
    long long nofile = raise_nofile();
    mf_engine_opts_t eo = {.dbpath = o.dbpath, .in_memory = o.in_memory, .cache_mb = cache_mb,
                           .set_params = o.set_params, .nset_params = o.nset_params,
                           .repl_member = o.repl_set[0] != '\0', .auth = o.auth || o.key_file[0] != '\0',
                           .sysres = &res};
    mf_repl_t *repl = NULL;
    if (mf_engine_open(&eo, &eng, &err) != 0) {
        mf_log(MF_LOG_ERROR, "STORAGE", "cannot open the database: %s", err.msg);
        rc = 1;
        goto done;
    }
    mf_engine_set_log_rotate_hook(eng, rotate_log, NULL);
    if (o.profile >= 0)
        mf_profile_set_default_level(eng->profiler, o.profile);
    if (o.slowms >= 0)
        (void)mf_profile_set_slowms(eng->profiler, o.slowms);
    if (o.sample_rate >= 0)
        (void)mf_profile_set_sample_rate(eng->profiler, o.sample_rate);
    eng->cmdline_argv = argv_doc;
    eng->cmdline_parsed = parsed;
    argv_doc = parsed = NULL; /* owned by the engine now */
    eng->port = o.port;
    char hn[200] = "localhost";
    gethostname(hn, sizeof(hn) - 1);
    snprintf(eng->host, sizeof(eng->host), "%s:%d", hn, o.port);

    eng->on_shutdown = interrupt_engine;
    eng->on_shutdown_arg = eng;
    startup_warnings(eng, o.bind_ip, eng->auth_enabled, nofile);
    if (cluster_key[0] != '\0') {
        /*
         * mongod SASLpreps the key for this SCRAM-SHA-256 credential
         * (security_key.cpp); read_key_file admits only base64 characters,
         * printable ASCII that SASLprep leaves as it is, so the key is the
         * prepared password already (and repl/peer.c's proof matches it).
         */
        eng->cluster_cred = mf_malloc(sizeof(*eng->cluster_cred));
        if (mf_scram_make_cred(MF_SCRAM_SHA256, cluster_key, NULL, 0, 15000, eng->cluster_cred, &err) != 0) {
            mf_log(MF_LOG_ERROR, "ACCESS", "cannot derive the keyFile's credential: %s", err.msg);
            mf_engine_close(eng);
            rc = 1;
            goto done;
        }
    }
    if (o.repl_set[0] != '\0') {
        int raft_port = o.raft_port ? o.raft_port : o.port + 10000;
        mf_repl_opts_t ro = {.set_name = o.repl_set, .bind_ip = o.bind_ip, .port = o.port, .raft_port = raft_port,
                             .dbpath = o.dbpath, .oplog_size_mb = o.oplog_size_mb,
                             .key = cluster_key[0] != '\0' ? cluster_key : NULL,
                             .tls = o.tls.mode == MF_TLS_PREFER || o.tls.mode == MF_TLS_REQUIRE,
                             .tls_cert_key_file = o.tls.cert_key_file, .tls_ca_file = o.tls.ca_file};
        if (raft_port > 65535 || mf_repl_open(eng, &ro, &repl, &err) != 0) {
            mf_log(MF_LOG_ERROR, "REPL", "cannot start replication: %s",
                   raft_port > 65535 ? "--raftPort is needed: --port + 10000 is beyond 65535" : err.msg);
            mf_engine_close(eng);
            rc = 1;
            goto done;
        }
        mf_log(MF_LOG_INFO, "REPL", "member of replica set %s, raft port %d", o.repl_set, raft_port);
    }
    /* The HTTP port (console, /api/ttl, /metrics) shares the network loop. */
    http_front_t hf = {.eng = eng,
                       .opts = {.bind_ip = o.bind_ip,
                                .port = o.http_port >= 0 ? o.http_port : (o.port + 1000 <= 65535 ? o.port + 1000 : 0),
                                .port_given = o.http_port >= 0}};
    mf_net_opts_t no = {.bind_ip = o.bind_ip, .port = o.port, .workers = workers, .max_workers = max_workers,
                        .max_conns = o.max_conns, .tls = &o.tls, .ready = on_ready, .ready_arg = NULL,
                        .attach = http_attach, .detach = http_detach, .attach_arg = &hf,
                        .compressors = o.compressors};
    if (mf_net_serve(eng, &no, &err) != 0) {
        mf_log(MF_LOG_ERROR, "NETWORK", "%s", err.msg);
        rc = 1;
    }
    mf_repl_close(repl);
    mf_log(MF_LOG_INFO, "STORAGE", "closing the database%s", o.in_memory ? "" : " (checkpoint)");
    mf_engine_close(eng);
    mf_repl_free(repl);
    mf_log(MF_LOG_INFO, "CONTROL", "shutdown complete");

done:
    mf_scratch_remove(memdir); /* with what the engine kept beside its tables (the archive's directory) */
    if (argv_doc)
        bson_destroy(argv_doc);
    if (parsed)
        bson_destroy(parsed);
    opts_free(&o);
    return rc;
}
