/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The configuration schema (config_schema.c): every section is a table of
 * key descriptors (name, type, place in its struct, range, flags, the source
 * types a key applies to, default), with the cross-key rules each section
 * checks once it is read. The tables drive parsing (config.c walks them),
 * the defaults and the key list tests and documentation walk
 * (zcp_config_keys_foreach). Main thread only; no global state but the
 * const tables. Calls config_tree.h only.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/config_tree.h"

enum key_type {
        K_U32,
        K_U64,
        K_FLOAT,
        K_BOOL,
        K_ENUM,
        K_STR,          /* copied as written */
        K_PATH,         /* relative paths resolve against the config's directory */
        K_URIPATH,      /* same, but "scheme://..." is kept as it is */
        K_FLOAT3,       /* sequence of exactly 3 numbers */
        K_NAMES,        /* a sequence of names (or one name), stored joined with ',' */
        K_SECTION,      /* nested mapping with its own table */
        K_STREAMS,      /* the top-level list of streams */
};

enum key_flags {
        F_ZERO_OK  = 1u << 0,   /* 0 is accepted besides [min, max] (= "unset") */
        F_EVEN     = 1u << 1,
        F_MIN_EXCL = 1u << 2,   /* float: value must be > min */
        F_NONEMPTY = 1u << 3,
        F_NAME     = 1u << 4,   /* [A-Za-z0-9_.-]+ */
        F_REQUIRED = 1u << 5,   /* no default: the section's check insists on it */
        F_WEIGHTS  = 1u << 6,   /* default: the installed model (zcp_config_default_weights()) */
        F_SIZE     = 1u << 7,   /* uint: a byte count, with an optional K, M, G or T suffix (powers of 1024) */
        F_MODEL    = 1u << 12,  /* default: the model's own (the section's check notes whether it was given) */
        F_READ     = 1u << 13,  /* path: a file zcpipe reads (--check opens it: ZCP_CONFIG_READ_FILES) */
        F_SECRET   = 1u << 14,  /* path: a file zcpipe reads that must be closed to group and others */
        F_AUTO     = 1u << 15,  /* uint: the word auto is accepted too, stored as UINT32_MAX */
        /* Source keys: the source types a key applies to (none of these: every type). */
        S_V4L2     = 1u << 8,
        S_FILE     = 1u << 9,
        S_SYNTH    = 1u << 10,
        S_NET      = 1u << 11,
};
#define S_ALL (S_V4L2 | S_FILE | S_SYNTH | S_NET)

struct section;
struct seen;

/* A section's cross-key rules, after its mapping is read: 0 or an error (err_at). */
typedef int (*section_check_fn)(struct ctx *c, void *base, const struct seen *s);

/*
 * One key: its name, type, place in the struct, range, flags (checks, the
 * source types it applies to) and default. The tables (config_schema.c) are
 * the schema: they drive parsing, the checks, the defaults (apply_defaults) and the key
 * list tests walk (zcp_config_keys_foreach).
 */
struct key_desc {
        const char *name;
        enum key_type type;
        size_t offset;
        size_t size;
        uint64_t umin, umax;
        double fmin, fmax;
        unsigned flags;
        const char *const *names;
        int count;
        const struct section *sub;
        uint64_t udef;          /* default: U32, U64, BOOL, ENUM (index) */
        double fdef[3];         /* default: FLOAT (fdef[0]), FLOAT3 */
        const char *sdef;       /* default: strings ("" when NULL) */
};

struct section {
        const char *name;       /* for "unknown key 'x' in <name>" */
        const char *prefix;     /* for "<prefix>key: ..." */
        const struct key_desc *keys;
        size_t count;
        section_check_fn check; /* cross-key rules, after the mapping is read */
};

#define MAX_SECTION_KEYS 32

/* What a mapping held: key and value node per descriptor index. */
struct seen {
        uint32_t mask;
        const struct node *key[MAX_SECTION_KEYS];
        const struct node *val[MAX_SECTION_KEYS];
        yaml_mark_t at;         /* the section's key in its parent, else the mapping */
};

/* Named indices of keys the walker looks at (config.c). */
enum { STREAM_NAME, STREAM_SOURCE };
enum { TOP_STREAMS };

/* The top level and one stream: the tables the walker starts from. */
extern const struct section zcp_config_top_section;
extern const struct section zcp_config_stream_section;

/*
 * The default model: $ZCP_MODELDIR/centernet/model.json when that is
 * set; else, for the zcpipe of the build tree, the source tree's copy; else
 * the installed one (config_schema.c says more). A static buffer.
 */
const char *zcp_config_default_weights(void);
/* Every key of the top level (streams excluded) at its default. */
void zcp_config_defaults(struct zcp_config *cfg);
/* `s` zeroed, then every key of a stream at its default. */
void zcp_config_stream_defaults(struct zcp_stream_config *s);

/* dst (size bytes, zeroed first) = src, cut to fit. */
static inline void set_str(char *dst, size_t size, const char *src)
{
        memset(dst, 0, size);
        snprintf(dst, size, "%s", src);
}
