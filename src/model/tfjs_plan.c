/* SPDX-License-Identifier: MIT */
/*
 * A TF.js graph to a plan: the head found (tfjs_head.c), every node's op checked against the
 * supported set, the nodes the head needs lowered in dependency order (tfjs_lower.c), unused
 * tensors dropped, the arena laid out and the plan checked. Main thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/kparams.h"
#include "model/graph.h"
#include "model/model.h"

static const char *const lowerable[] = { "Placeholder", "Const", "Identity", "_FusedConv2D", "Conv2D",
                                         "DepthwiseConv2dNative", "FusedDepthwiseConv2dNative", "Add", "AddV2",
                                         "Sub", "Mul", "Relu", "Relu6", "Sigmoid", "Mean", "ResizeBilinear",
                                         "ConcatV2", "MaxPool", "Reshape", "Squeeze", NULL };
static const char *const tail_ops[] = { "MaxPool", "Equal", "Cast", "Mul", "Reshape", "TopKV2", "ExpandDims",
                                        "FloorDiv", "FloorMod", "Add", "AddV2", "Sub", "GatherV2", "StridedSlice",
                                        "ConcatV2", "Identity", "Softmax", NULL };

static bool in_list(const char *const *list, const char *op)
{
        for (; *list; list++)
                if (strcmp(*list, op) == 0)
                        return true;
        return false;
}

/* Marks the ancestors of node i as needed (iteratively: graphs can be deep). */
static int need(struct zcp_graph *g, uint32_t root)
{
        uint32_t *stack = malloc(sizeof(uint32_t) * (g->n + 1)), sp = 0;

        if (!stack)
                return -ENOMEM;
        if (!g->nodes[root].needed) {
                g->nodes[root].needed = true;
                stack[sp++] = root;
        }
        while (sp) {
                struct zcp_gnode *n = &g->nodes[stack[--sp]];
                for (uint32_t k = 0; k < n->n_in; k++) {
                        uint32_t s = n->in[k].node;
                        if (!g->nodes[s].needed) {
                                g->nodes[s].needed = true;
                                stack[sp++] = s;
                        }
                }
        }
        free(stack);
        return 0;
}

/* Lowers the needed nodes in dependency order (an explicit depth-first walk). */
static int lower_all(struct zcp_lower *L, const struct zcp_model_opts *opts)
{
        struct zcp_graph *g = L->g;
        uint32_t *stack = malloc(sizeof(uint32_t) * (g->n + 1)), *next = calloc(g->n + 1, sizeof(uint32_t));
        uint8_t *state = calloc(g->n + 1, 1);   /* 0 new, 1 on the stack, 2 lowered */
        int r = 0;

        if (!stack || !next || !state) {
                r = -ENOMEM;
                goto out;
        }
        for (uint32_t root = 0; root < g->n && r == 0; root++) {
                uint32_t sp = 0;
                if (!g->nodes[root].needed || state[root])
                        continue;
                stack[sp++] = root;
                state[root] = 1;
                while (sp && r == 0) {
                        uint32_t i = stack[sp - 1];
                        struct zcp_gnode *n = &g->nodes[i];
                        if (next[i] < n->n_in) {
                                uint32_t s = n->in[next[i]++].node;
                                if (state[s] == 1) {
                                        r = zcp_gerr(g, n, L->err, L->errlen, "the graph has a cycle");
                                } else if (state[s] == 0) {
                                        state[s] = 1;
                                        stack[sp++] = s;
                                }
                                continue;
                        }
                        sp--;
                        state[i] = 2;
                        r = zcp_graph_lower_node(L, n, opts);
                }
        }
out:
        free(stack);
        free(next);
        free(state);
        return r;
}

/* Drops tensors no op, head or input uses, and renumbers the rest. */
static void compact(struct zcp_plan *p)
{
        uint32_t *map = calloc(p->tensor_count + 1, sizeof(uint32_t)), n = 0;
        bool *used = calloc(p->tensor_count + 1, sizeof(bool));

        if (!map || !used)
                goto out;
        used[p->input.t] = used[p->head.scores.t] = true;
        if (p->head.kind == ZCP_HEAD_CENTERNET)
                used[p->head.sizes.t] = true;
        for (uint32_t i = 0; i < p->op_count; i++) {
                struct zcp_plan_view r[4];
                const uint32_t nr = zcp_plan_op_reads(&p->ops[i], r);
                used[p->ops[i].out.t] = true;
                for (uint32_t k = 0; k < nr; k++)
                        used[r[k].t] = true;
        }
        for (uint32_t t = 0; t < p->tensor_count; t++)
                if (used[t]) {
                        map[t] = n;
                        p->tensors[n++] = p->tensors[t];
                }
        p->tensor_count = n;
        p->input.t = map[p->input.t];
        p->head.scores.t = map[p->head.scores.t];
        p->head.sizes.t = map[p->head.sizes.t];
        for (uint32_t i = 0; i < p->op_count; i++) {
                struct zcp_plan_op *op = &p->ops[i];
                op->in.t = map[op->in.t];
                op->out.t = map[op->out.t];
                op->u.conv.scale.t = op->kind == ZCP_OP_CONV ? map[op->u.conv.scale.t] : op->u.conv.scale.t;
                if (op->kind == ZCP_OP_CONV)
                        op->u.conv.residual.t = map[op->u.conv.residual.t];
                if (op->kind == ZCP_OP_ELTWISE && op->u.elt.bcast != ZCP_BCAST_SCALAR)
                        op->u.elt.b.t = map[op->u.elt.b.t];
        }
out:
        free(map);
        free(used);
}

static uint64_t count_macs(const struct zcp_plan *p)
{
        uint64_t macs = 0;

        for (uint32_t i = 0; i < p->op_count; i++) {
                const struct zcp_plan_op *op = &p->ops[i];
                if (op->kind == ZCP_OP_CONV)
                        macs += (uint64_t)p->tensors[op->out.t].h * p->tensors[op->out.t].w * op->out.c *
                                op->u.conv.kh * op->u.conv.kw * (op->u.conv.groups == 1 ? op->in.c : 1);
        }
        return macs;
}

int zcp_graph_lower(struct zcp_graph *g, const struct zcp_model_opts *opts, struct zcp_plan **ret, char *errbuf,
                    size_t errlen)
{
        struct zcp_lower L = { .g = g, .err = errbuf, .errlen = errlen };
        struct zcp_ghead head;
        const struct zcp_gval *sv;
        int r;

        /* an op zcpipe knows nowhere is named first, before the head is even looked for */
        for (uint32_t i = 0; i < g->n; i++)
                if (!in_list(lowerable, g->nodes[i].op) && !in_list(tail_ops, g->nodes[i].op))
                        return zcp_gerr(g, &g->nodes[i], errbuf, errlen, "op %s is not supported", g->nodes[i].op);
        if ((r = zcp_graph_head(g, &head, errbuf, errlen)) < 0)
                return r;
        /* every op must be one zcpipe knows, in the network or in the decode */
        for (uint32_t i = 0; i < g->n; i++) {
                const struct zcp_gnode *n = &g->nodes[i];
                if (n->tail ? !in_list(tail_ops, n->op) : !in_list(lowerable, n->op))
                        return zcp_gerr(g, n, errbuf, errlen, "op %s is not supported%s", n->op,
                                        n->tail ? " in a CenterNet decode" : "");
        }
        if ((r = need(g, head.scores)) < 0 || (head.sizes != UINT32_MAX && (r = need(g, head.sizes)) < 0))
                return r;
        if (!(L.p = calloc(1, sizeof(*L.p))))
                return -ENOMEM;
        L.p->input.t = UINT32_MAX;
        r = lower_all(&L, opts);
        if (r == 0 && L.p->input.t == UINT32_MAX)
                r = zcp_gerr(g, NULL, errbuf, errlen, "the head does not depend on an image input (Placeholder)");
        if (r < 0)
                goto fail;
        sv = &g->nodes[head.scores].val;
        if (sv->kind != ZCP_GVAL_TENSOR || sv->has_scale) {
                r = zcp_gerr(g, head.at, errbuf, errlen, "its scores are not a tensor zcpipe computes");
                goto fail;
        }
        L.p->head = head.head;
        L.p->head.scores = sv->view;
        L.p->head.classes = sv->view.c;
        if (head.head.kind == ZCP_HEAD_CENTERNET) {
                const struct zcp_gval *zv = &g->nodes[head.sizes].val;
                const struct zcp_plan_tensor *ts = &L.p->tensors[sv->view.t];
                if (zv->kind != ZCP_GVAL_TENSOR || zv->has_scale || zv->flat || zv->view.c != 4 || sv->flat) {
                        r = zcp_gerr(g, head.at, errbuf, errlen, "its size map is not an HxWx4 tensor");
                        goto fail;
                }
                if (head.classes != sv->view.c || head.width != ts->w || head.pixels != (int64_t)ts->h * ts->w ||
                    L.p->tensors[zv->view.t].h != ts->h || L.p->tensors[zv->view.t].w != ts->w) {
                        r = zcp_gerr(g, head.at, errbuf, errlen,
                                     "the decode's constants (classes %lld, width %lld, pixels %lld) do not match "
                                     "the maps (%ux%ux%u)",
                                     (long long)head.classes, (long long)head.width, (long long)head.pixels, ts->h,
                                     ts->w, sv->view.c);
                        goto fail;
                }
                if (sv->view.c > ZCP_DET_CLASSES_MAX) {
                        r = zcp_gerr(g, head.at, errbuf, errlen, "more than %d classes", ZCP_DET_CLASSES_MAX);
                        goto fail;
                }
                L.p->head.sizes = zv->view;
        }
        L.p->input.pixels = ZCP_PIXELS_BYTE;
        for (int k = 0; k < 3; k++) {
                L.p->input.mean[k] = 0.0f;
                L.p->input.std[k] = 1.0f;
        }
        compact(L.p);
        L.p->macs = count_macs(L.p);
        if ((r = zcp_plan_layout(L.p)) < 0)
                goto fail;
        if ((r = zcp_plan_check(L.p, errbuf, errlen)) < 0) {
                char inner[512];
                snprintf(inner, sizeof(inner), "%s", errbuf);
                r = zcp_gerr(g, NULL, errbuf, errlen, "internal: the plan made from it is inconsistent: %s", inner);
                goto fail;
        }
        *ret = L.p;
        return 0;
fail:
        zcp_plan_free(L.p);
        return r;
}

int zcp_tfjs_load(const char *path, const struct zcp_model_opts *opts, struct zcp_plan **ret, char *err,
                  size_t errlen)
{
        struct zcp_graph *g;
        struct zcp_plan *plan = NULL;
        int r;

        if ((r = zcp_graph_read(path, &g, err, errlen)) < 0)
                return r;
        r = zcp_graph_lower(g, opts, &plan, err, errlen);
        if (r == 0) {
                snprintf(plan->format, sizeof(plan->format), "tfjs");
                snprintf(plan->source, sizeof(plan->source), "%s", g->provenance);
                *ret = plan;
        }
        zcp_graph_free(g);
        return r;
}
