/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * A TensorFlow.js graph model as read from model.json and its weight shards (tfjs.c), before it
 * becomes a plan (tfjs_lower.c, tfjs_head.c). Private to src/model/. Main thread.
 *
 * Ownership: struct zcp_graph owns its nodes, their constants and the parsed JSON document;
 * zcp_graph_free() releases all of it.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "model/plan.h"

#define ZCP_GRAPH_RANK_MAX 8

/* An input of a node: output `port` of node `node`. */
struct zcp_gref {
        uint32_t node, port;
};

/* What a node's output became while lowering (tfjs_lower.c). */
enum zcp_gval_kind { ZCP_GVAL_NONE, ZCP_GVAL_CONST, ZCP_GVAL_TENSOR };
struct zcp_gval {
        enum zcp_gval_kind kind;
        struct zcp_plan_view view;          /* TENSOR */
        int32_t op;                         /* TENSOR: the op that writes it last, -1: none (the input) */
        bool has_scale;                     /* TENSOR: still to be multiplied by `scale` per channel */
        struct zcp_plan_view scale;
        bool flat;                          /* TENSOR of 1x1xc reshaped to [1, c] or [c] */
};

struct zcp_gnode {
        const char *name, *op;              /* point into the JSON document */
        json_t *attr;                       /* borrowed; NULL: none */
        uint32_t n_in;
        struct zcp_gref *in;                /* data inputs; control inputs ("^name") dropped */
        uint32_t n_users;
        uint32_t *users;                    /* nodes reading any output of this one (repeats kept) */
        /* Const nodes: the weight of the same name, as float or int32. */
        bool is_const;
        bool is_int;
        uint32_t rank;
        int64_t dims[ZCP_GRAPH_RANK_MAX];
        size_t count;
        float *f;                           /* is_const && !is_int */
        int32_t *i;                         /* is_const && is_int */
        /* lowering */
        bool needed, tail, done;
        struct zcp_gval val;
};

struct zcp_graph {
        const char *path;                   /* model.json, for messages */
        json_t *doc;
        uint32_t n;
        struct zcp_gnode *nodes;
        char provenance[256];               /* convertedBy / generatedBy */
};

/* Reads model.json and every weight shard it names. 0, or negative errno with the reason in err. */
int zcp_graph_read(const char *path, struct zcp_graph **ret, char *err, size_t errlen);
void zcp_graph_free(struct zcp_graph *g);

/* Node by name ("name" or "name:port" gives the node), or UINT32_MAX. */
uint32_t zcp_graph_find(const struct zcp_graph *g, const char *name);

/* Attribute accessors; false when absent or of another type. */
bool zcp_gattr_int(const struct zcp_gnode *n, const char *key, int64_t *ret);
bool zcp_gattr_bool(const struct zcp_gnode *n, const char *key, bool *ret);
bool zcp_gattr_str(const struct zcp_gnode *n, const char *key, char *buf, size_t len);   /* base64 decoded */
/* A list of ints: up to max values into ret, the count into *ret_n; false when absent. */
bool zcp_gattr_ints(const struct zcp_gnode *n, const char *key, int64_t *ret, uint32_t max, uint32_t *ret_n);
/* A list of strings (fused_ops): joined with ',' into buf; "" when absent. */
void zcp_gattr_strs(const struct zcp_gnode *n, const char *key, char *buf, size_t len);

/* A node's input that is a Const node, or NULL. */
const struct zcp_gnode *zcp_gconst(const struct zcp_graph *g, const struct zcp_gnode *n, uint32_t input);
/* The node an input refers to, through Identity nodes. */
uint32_t zcp_gsource(const struct zcp_graph *g, struct zcp_gref r);
/* A Const holding one value (any rank, one element) as float: true and *ret. */
bool zcp_gconst_scalar(const struct zcp_gnode *c, float *ret);

/* "FILE: node 'NAME' (OP): message" into err; returns -EINVAL. */
int zcp_gerr(const struct zcp_graph *g, const struct zcp_gnode *n, char *err, size_t errlen, const char *fmt, ...)
        ZCP_PRINTF(5, 6);

/* Lowering: the graph's nodes that the head needs, as plan ops (tfjs_plan.c, tfjs_lower.c). */
struct zcp_model_opts;

/* The plan being made, and where its errors go. */
struct zcp_lower {
        struct zcp_graph *g;
        struct zcp_plan *p;
        uint32_t tcap, ocap;
        size_t wcap;
        char *err;
        size_t errlen;
};
/* Lowers node n (once; its inputs first): its ops into L->p, its value into n->val. 0 or -errno. */
int zcp_graph_lower_node(struct zcp_lower *L, struct zcp_gnode *n, const struct zcp_model_opts *opts);
int zcp_graph_lower(struct zcp_graph *g, const struct zcp_model_opts *opts, struct zcp_plan **ret, char *err,
                    size_t errlen);
/* The head as tfjs_head.c finds it: which nodes feed it and what its constants say. */
struct zcp_ghead {
        struct zcp_plan_head head;          /* kind, stride, candidates; classes and views from lowering */
        uint32_t scores, sizes;             /* nodes (sizes: CENTERNET only) */
        const struct zcp_gnode *at;         /* the node that names the head in messages */
        int64_t classes, width, pixels;     /* CENTERNET: the decode's divisors and its size map's pixels */
};
/* Finds the head and marks the decode tail's nodes (tail = true). 0, or -EINVAL naming the node. */
int zcp_graph_head(struct zcp_graph *g, struct zcp_ghead *ret, char *err, size_t errlen);
