/* SPDX-License-Identifier: MIT */
/*
 * One TF.js graph node to plan ops (model/plan.h), for tfjs_plan.c's walk over the nodes the head
 * needs, in dependency order; each op, once made, takes in what follows it when nothing else reads the
 * values in between (its epilogue): activations (Relu, Relu6, Sigmoid, a constant scale, the
 * hard-swish Mul/Add/Relu6/Mul and hard-sigmoid Add/Relu6/Mul patterns) and a residual Add.
 * A per-channel Mul read only by convolutions becomes their input scale; a ConcatV2 along the
 * channels becomes its producers writing side by side into one tensor. The float operations
 * stay the graph's, in its order: only where they are stored changes. Main thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/kparams.h"
#include "model/graph.h"
#include "model/model.h"


static bool is(const struct zcp_gnode *n, const char *op)
{
        return strcmp(n->op, op) == 0;
}

/* ------------------------------------------------------------- plan growth */

static int new_tensor(struct zcp_lower *L, uint32_t h, uint32_t w, uint32_t c, uint32_t *ret)
{
        struct zcp_plan *p = L->p;

        if (p->tensor_count == L->tcap) {
                uint32_t cap = L->tcap ? L->tcap * 2 : 64;
                struct zcp_plan_tensor *t = realloc(p->tensors, sizeof(*t) * cap);
                if (!t)
                        return -ENOMEM;
                p->tensors = t;
                L->tcap = cap;
        }
        p->tensors[p->tensor_count] = (struct zcp_plan_tensor){ .h = h, .w = w, .c = c };
        *ret = p->tensor_count++;
        return 0;
}

static struct zcp_plan_op *new_op(struct zcp_lower *L, enum zcp_op_kind kind, const struct zcp_gnode *n)
{
        struct zcp_plan *p = L->p;
        struct zcp_plan_op *op;

        if (p->op_count == L->ocap) {
                uint32_t cap = L->ocap ? L->ocap * 2 : 64;
                struct zcp_plan_op *o = realloc(p->ops, sizeof(*o) * cap);
                if (!o)
                        return NULL;
                p->ops = o;
                L->ocap = cap;
        }
        op = &p->ops[p->op_count++];
        memset(op, 0, sizeof(*op));
        op->kind = kind;
        snprintf(op->name, sizeof(op->name), "%s", n->name);
        return op;
}

/* Appends count floats to the weights; their offset into *ret. */
static int add_weights(struct zcp_lower *L, const float *v, size_t count, size_t *ret)
{
        struct zcp_plan *p = L->p;
        size_t need = (p->weight_floats + count + 3) & ~(size_t)3;   /* 16-byte aligned starts */

        if (need > L->wcap) {
                size_t cap = L->wcap ? L->wcap : 4096;
                while (cap < need)
                        cap *= 2;
                float *w = realloc(p->weights, sizeof(float) * cap);
                if (!w)
                        return -ENOMEM;
                p->weights = w;
                L->wcap = cap;
        }
        *ret = p->weight_floats;
        memcpy(p->weights + p->weight_floats, v, sizeof(float) * count);
        for (size_t k = p->weight_floats + count; k < need; k++)
                p->weights[k] = 0.0f;
        p->weight_floats = need;
        return 0;
}

static int err(struct zcp_lower *L, const struct zcp_gnode *n, const char *fmt, const char *a)
{
        return zcp_gerr(L->g, n, L->err, L->errlen, fmt, a ? a : "");
}

/* --------------------------------------------------------------- values */

static struct zcp_gnode *input_node(struct zcp_lower *L, const struct zcp_gnode *n, uint32_t i)
{
        return &L->g->nodes[n->in[i].node];
}

/* A tensor input of n (its value after lowering), or NULL with an error. */
static const struct zcp_gval *tensor_in(struct zcp_lower *L, const struct zcp_gnode *n, uint32_t i)
{
        const struct zcp_gnode *in = i < n->n_in ? input_node(L, n, i) : NULL;

        if (!in || in->val.kind != ZCP_GVAL_TENSOR || n->in[i].port != 0) {
                err(L, n, "input %s is not a tensor zcpipe computes", in ? in->name : "(missing)");
                return NULL;
        }
        return &in->val;
}

static const struct zcp_plan_tensor *shape(struct zcp_lower *L, const struct zcp_gval *v)
{
        return &L->p->tensors[v->view.t];
}

static void set_tensor(struct zcp_gnode *n, struct zcp_plan_view view, int32_t op)
{
        n->val = (struct zcp_gval){ .kind = ZCP_GVAL_TENSOR, .view = view, .op = op };
}

/* ------------------------------------------------------------- epilogues */

static bool one_user(const struct zcp_gnode *n)
{
        return n->n_users == 1;
}

static struct zcp_gnode *user(struct zcp_lower *L, const struct zcp_gnode *n, uint32_t k)
{
        return &L->g->nodes[n->users[k]];
}

/* The other input of a two-input node u, given one of them is x. */
static struct zcp_gnode *other(struct zcp_lower *L, const struct zcp_gnode *u, const struct zcp_gnode *x)
{
        if (u->n_in != 2)
                return NULL;
        if (input_node(L, u, 0) == x)
                return input_node(L, u, 1);
        if (input_node(L, u, 1) == x)
                return input_node(L, u, 0);
        return NULL;
}

static bool scalar_of(struct zcp_lower *L, const struct zcp_gnode *u, const struct zcp_gnode *x, float *ret)
{
        const struct zcp_gnode *o = other(L, u, x);

        return o && zcp_gconst_scalar(&L->g->nodes[zcp_gsource(L->g, (struct zcp_gref){ .node = (uint32_t)(o - L->g->nodes) })],
                                      ret);
}

static bool is_add(const struct zcp_gnode *n)
{
        return is(n, "Add") || is(n, "AddV2");
}

static bool is_conv(const struct zcp_gnode *n)
{
        return strstr(n->op, "Conv2D") || strstr(n->op, "Conv2dNative");
}

/* x * a and relu6(x + b), then their product: hard swish. Returns the product node. */
static struct zcp_gnode *hswish(struct zcp_lower *L, struct zcp_gnode *x, float *a, float *b)
{
        struct zcp_gnode *m = NULL, *ad = NULL, *r, *fin;

        if (x->n_users != 2)
                return NULL;
        for (uint32_t k = 0; k < 2; k++) {
                struct zcp_gnode *u = user(L, x, k);
                if (is(u, "Mul") && scalar_of(L, u, x, a))
                        m = u;
                else if (is_add(u) && scalar_of(L, u, x, b))
                        ad = u;
        }
        if (!m || !ad || !one_user(m) || !one_user(ad))
                return NULL;
        r = user(L, ad, 0);
        if (!is(r, "Relu6") || !one_user(r))
                return NULL;
        fin = user(L, r, 0);
        if (!is(fin, "Mul") || fin != user(L, m, 0) || other(L, fin, r) != m)
                return NULL;
        m->done = ad->done = r->done = true;
        return fin;
}

/* relu6(x + b) * a: hard sigmoid. Returns the Mul. */
static struct zcp_gnode *hsigmoid(struct zcp_lower *L, struct zcp_gnode *x, float *a, float *b)
{
        struct zcp_gnode *ad = user(L, x, 0), *r, *m;

        if (!one_user(x) || !is_add(ad) || !scalar_of(L, ad, x, b) || !one_user(ad))
                return NULL;
        r = user(L, ad, 0);
        if (!is(r, "Relu6") || !one_user(r))
                return NULL;
        m = user(L, r, 0);
        if (!is(m, "Mul") || !scalar_of(L, m, r, a))
                return NULL;
        ad->done = r->done = true;
        return m;
}

/*
 * The op just made for node x takes in what follows while nothing else reads the values in
 * between; the last node taken in gets the op's output as its value.
 */
static void absorb(struct zcp_lower *L, struct zcp_plan_op *op, int32_t opi, struct zcp_gnode *x)
{
        const bool conv = op->kind == ZCP_OP_CONV;

        for (;;) {
                struct zcp_gnode *u = x->n_users ? user(L, x, 0) : NULL, *y;
                float a = 0.0f, b = 0.0f;
                bool has_res = conv && op->u.conv.has_residual;

                if (!u || x->tail)
                        break;
                if (op->act.kind == ZCP_ACT_NONE && !has_res) {
                        if ((y = hswish(L, x, &a, &b))) {
                                op->act = (struct zcp_plan_act){ ZCP_ACT_HSWISH, a, b };
                        } else if (!one_user(x) || u->tail) {
                                break;
                        } else if (is(u, "Relu") || is(u, "Relu6") || is(u, "Sigmoid")) {
                                op->act.kind = is(u, "Relu") ? ZCP_ACT_RELU : is(u, "Relu6") ? ZCP_ACT_RELU6
                                                                                                 : ZCP_ACT_SIGMOID;
                                y = u;
                        } else if (is(u, "Mul") && scalar_of(L, u, x, &a)) {
                                op->act = (struct zcp_plan_act){ ZCP_ACT_SCALE, a, 0.0f };
                                y = u;
                        } else if ((y = hsigmoid(L, x, &a, &b))) {
                                op->act = (struct zcp_plan_act){ ZCP_ACT_HSIGMOID, a, b };
                        } else {
                                y = NULL;
                        }
                        if (y) {
                                y->done = true;
                                x = y;
                                continue;
                        }
                }
                /* a residual: Add(x, r) where r is a tensor computed before this op runs */
                if (conv && !has_res && one_user(x) && is_add(u) && !u->tail) {
                        struct zcp_gnode *r = other(L, u, x);
                        const struct zcp_plan_tensor *to = &L->p->tensors[op->out.t];
                        if (r && r != x && r->val.kind == ZCP_GVAL_TENSOR && !r->val.has_scale && !r->val.flat &&
                            r->val.view.c == op->out.c && L->p->tensors[r->val.view.t].h == to->h &&
                            L->p->tensors[r->val.view.t].w == to->w && r->val.view.t != op->out.t) {
                                op->u.conv.has_residual = true;
                                op->u.conv.residual = r->val.view;
                                u->done = true;
                                x = u;
                                continue;
                        }
                }
                break;
        }
        set_tensor(x, op->out, opi);
}

/* --------------------------------------------------------------- the ops */

static uint32_t same_out(uint32_t in, uint32_t s)
{
        return (in + s - 1) / s;
}

/* SAME, VALID or EXPLICIT padding of one axis: the output size and the padding before. */
static int pad_axis(const char *mode, const int64_t *expl, uint32_t in, uint32_t k, uint32_t s, uint32_t *ret_out,
                    uint32_t *ret_lo, uint32_t *ret_hi)
{
        if (strcmp(mode, "SAME") == 0) {
                uint32_t out = same_out(in, s);
                int64_t total = (int64_t)(out - 1) * s + k - in;
                if (total < 0)
                        total = 0;
                *ret_out = out;
                *ret_lo = (uint32_t)(total / 2);
                *ret_hi = (uint32_t)(total - total / 2);
                return 0;
        }
        if (strcmp(mode, "VALID") == 0) {
                if (in < k)
                        return -1;
                *ret_out = (in - k) / s + 1;
                *ret_lo = *ret_hi = 0;
                return 0;
        }
        if (strcmp(mode, "EXPLICIT") == 0 && expl) {
                if (expl[0] < 0 || expl[1] < 0 || expl[0] >= k || expl[1] >= k || in + expl[0] + expl[1] < k)
                        return -1;
                *ret_lo = (uint32_t)expl[0];
                *ret_hi = (uint32_t)expl[1];
                *ret_out = (uint32_t)((in + expl[0] + expl[1] - k) / s + 1);
                return 0;
        }
        return -1;
}

/* Strides, dilations, data_format and padding of a conv or pool node. */
static int window_attrs(struct zcp_lower *L, const struct zcp_gnode *n, uint32_t *sh, uint32_t *sw, char *pad,
                        size_t padlen, int64_t *expl /* [8] */)
{
        int64_t v[8];
        uint32_t cnt;
        char fmt[16];

        if (!zcp_gattr_ints(n, "strides", v, 4, &cnt) || cnt != 4 || v[0] != 1 || v[3] != 1 || v[1] < 1 ||
            v[2] < 1 || v[1] > 64 || v[2] > 64)
                return err(L, n, "strides must be [1, s, s, 1] with s in 1..64%s", "");
        *sh = (uint32_t)v[1];
        *sw = (uint32_t)v[2];
        if (zcp_gattr_ints(n, "dilations", v, 4, &cnt) && cnt)
                for (uint32_t k = 0; k < cnt; k++)
                        if (v[k] != 1)
                                return err(L, n, "dilations other than 1 are not supported%s", "");
        if (zcp_gattr_str(n, "data_format", fmt, sizeof(fmt)) && strcmp(fmt, "NHWC") != 0)
                return err(L, n, "data_format %s is not supported (NHWC)", fmt);
        if (!zcp_gattr_str(n, "padding", pad, padlen))
                return err(L, n, "no padding attribute%s", "");
        memset(expl, 0, sizeof(int64_t) * 8);
        if (strcmp(pad, "EXPLICIT") == 0 &&
            (!zcp_gattr_ints(n, "explicit_paddings", expl, 8, &cnt) || cnt != 8 || expl[0] || expl[1] || expl[6] ||
             expl[7]))
                return err(L, n, "explicit_paddings must pad height and width only%s", "");
        return 0;
}

static int lower_conv(struct zcp_lower *L, struct zcp_gnode *n)
{
        const bool dw = strstr(n->op, "Depthwise") != NULL, fused = n->op[0] == '_' || strncmp(n->op, "Fused", 5) == 0;
        const struct zcp_gval *x = tensor_in(L, n, 0);
        const struct zcp_gnode *w = zcp_gconst(L->g, n, 1), *bias = NULL;
        const struct zcp_plan_tensor *ti;
        struct zcp_plan_op *op;
        struct zcp_plan_conv c = { 0 };
        uint32_t sh, sw, oh, ow, cout, t, cin;
        int64_t expl[8];
        char pad[16], fops[128];
        int r;

        if (!x)
                return -EINVAL;
        if (x->flat)
                return err(L, n, "its input is a flattened tensor%s", "");
        ti = shape(L, x);
        cin = x->view.c;
        if (!w || w->is_int || w->rank != 4)
                return err(L, n, "the filter is not a constant of rank 4%s", "");
        if ((r = window_attrs(L, n, &sh, &sw, pad, sizeof(pad), expl)) < 0)
                return r;
        if (w->dims[2] != cin)
                return err(L, n, "the filter's input channels do not match the input%s", "");
        if (dw && w->dims[3] != 1)
                return err(L, n, "depthwise channel multiplier other than 1 is not supported%s", "");
        cout = dw ? cin : (uint32_t)w->dims[3];
        c.kh = (uint32_t)w->dims[0];
        c.kw = (uint32_t)w->dims[1];
        c.sh = sh;
        c.sw = sw;
        c.groups = dw ? cin : 1;
        if (c.kh < 1 || c.kw < 1 || c.kh > 64 || c.kw > 64 ||
            pad_axis(pad, expl + 2, ti->h, c.kh, sh, &oh, &c.pad_t, &c.pad_b) < 0 ||
            pad_axis(pad, expl + 4, ti->w, c.kw, sw, &ow, &c.pad_l, &c.pad_r) < 0 || c.pad_t >= c.kh ||
            c.pad_b >= c.kh || c.pad_l >= c.kw || c.pad_r >= c.kw)
                return err(L, n, "padding %s with this filter and input is not supported", pad);
        fops[0] = '\0';
        if (fused) {
                int64_t nargs = 0;
                zcp_gattr_strs(n, "fused_ops", fops, sizeof(fops));
                if (strncmp(fops, "BiasAdd", 7) != 0 || !zcp_gattr_int(n, "num_args", &nargs) || nargs != 1)
                        return err(L, n, "fused ops '%s' are not supported (BiasAdd, then Relu, Relu6 or Sigmoid)",
                                   fops);
                bias = zcp_gconst(L->g, n, 2);
                if (!bias || bias->is_int || bias->count != cout)
                        return err(L, n, "the bias is not a constant of the output's channels%s", "");
        }
        if ((r = add_weights(L, w->f, w->count, &c.weight)) < 0)
                return r;
        c.bias = SIZE_MAX;
        if (bias && (r = add_weights(L, bias->f, bias->count, &c.bias)) < 0)
                return r;
        if (x->has_scale) {
                c.has_scale = true;
                c.scale = x->scale;
        }
        if ((r = new_tensor(L, oh, ow, cout, &t)) < 0)
                return r;
        x = tensor_in(L, n, 0);   /* the tensors may have moved */
        if (!(op = new_op(L, ZCP_OP_CONV, n)))
                return -ENOMEM;
        op->in = x->view;
        op->out = (struct zcp_plan_view){ .t = t, .c0 = 0, .c = cout };
        op->u.conv = c;
        if (fused && fops[7]) {
                const char *a = fops + 8;
                op->act.kind = strcmp(a, "Relu") == 0 ? ZCP_ACT_RELU : strcmp(a, "Relu6") == 0 ? ZCP_ACT_RELU6
                               : strcmp(a, "Sigmoid") == 0                                   ? ZCP_ACT_SIGMOID
                                                                                             : ZCP_ACT_COUNT;
                if (op->act.kind == ZCP_ACT_COUNT)
                        return err(L, n, "fused ops '%s' are not supported (BiasAdd, then Relu, Relu6 or Sigmoid)",
                                   fops);
        }
        absorb(L, op, (int32_t)(op - L->p->ops), n);
        return 0;
}

/* Add, AddV2, Sub, Mul that no producer took in. */
static int lower_binary(struct zcp_lower *L, struct zcp_gnode *n)
{
        struct zcp_gnode *a = n->n_in == 2 ? input_node(L, n, 0) : NULL, *b = n->n_in == 2 ? input_node(L, n, 1) : NULL;
        const bool mul = is(n, "Mul"), sub = is(n, "Sub");
        struct zcp_gnode *x, *y;
        struct zcp_plan_op *op;
        float s;
        uint32_t t;
        int r;

        if (!a || !b)
                return err(L, n, "expected two inputs%s", "");
        x = a->val.kind == ZCP_GVAL_TENSOR ? a : b;
        y = x == a ? b : a;
        if (x->val.kind != ZCP_GVAL_TENSOR || x->val.flat || n->in[x == a ? 0 : 1].port != 0)
                return err(L, n, "neither input is a tensor zcpipe computes%s", "");
        if (x->val.has_scale)
                return err(L, n, "a scaled tensor read by other than a convolution%s", "");
        if (sub && x != a)
                return err(L, n, "constant minus tensor is not supported%s", "");
        if (y->val.kind != ZCP_GVAL_TENSOR) {
                const struct zcp_gnode *c = zcp_gconst(L->g, n, y == a ? 0 : 1);
                if (!zcp_gconst_scalar(c, &s))
                        return err(L, n, "a constant operand of more than one value is not supported%s", "");
                if ((r = new_tensor(L, shape(L, &x->val)->h, shape(L, &x->val)->w, x->val.view.c, &t)) < 0)
                        return r;
                if (!(op = new_op(L, ZCP_OP_ELTWISE, n)))
                        return -ENOMEM;
                op->in = x->val.view;
                op->out = (struct zcp_plan_view){ .t = t, .c = x->val.view.c };
                op->u.elt = (struct zcp_plan_eltwise){ .mul = mul, .bcast = ZCP_BCAST_SCALAR,
                                                       .scalar = sub ? -s : s };
                absorb(L, op, (int32_t)(op - L->p->ops), n);
                return 0;
        }
        if (sub)
                return err(L, n, "tensor minus tensor is not supported%s", "");
        {
                const struct zcp_plan_tensor *tx = shape(L, &x->val), *ty = shape(L, &y->val);
                bool chan;

                /* the larger operand is the one the output takes its shape from */
                if (tx->h * tx->w < ty->h * ty->w) {
                        struct zcp_gnode *k = x;
                        x = y;
                        y = k;
                        tx = shape(L, &x->val);
                        ty = shape(L, &y->val);
                }
                if (y->val.flat || y->val.has_scale || x->val.view.c != y->val.view.c)
                        return err(L, n, "operands of different channels%s", "");
                chan = ty->h == 1 && ty->w == 1 && (tx->h != 1 || tx->w != 1);
                if (!chan && (tx->h != ty->h || tx->w != ty->w))
                        return err(L, n, "operands of shapes that do not broadcast%s", "");
                if (mul && chan) {
                        /* a per-channel scale read only by convolutions is folded into them */
                        bool convs = n->n_users > 0;
                        for (uint32_t k = 0; k < n->n_users; k++) {
                                const struct zcp_gnode *u = user(L, n, k);
                                convs = convs && is_conv(u) && !u->tail && u->in[0].node == (uint32_t)(n - L->g->nodes);
                                if (u->n_in > 1 && u->in[1].node == (uint32_t)(n - L->g->nodes))
                                        convs = false;
                        }
                        if (convs) {
                                n->val = x->val;
                                n->val.has_scale = true;
                                n->val.scale = y->val.view;
                                return 0;
                        }
                }
                if ((r = new_tensor(L, tx->h, tx->w, x->val.view.c, &t)) < 0)
                        return r;
                if (!(op = new_op(L, ZCP_OP_ELTWISE, n)))
                        return -ENOMEM;
                op->in = x->val.view;
                op->out = (struct zcp_plan_view){ .t = t, .c = x->val.view.c };
                op->u.elt = (struct zcp_plan_eltwise){ .mul = mul, .bcast = chan ? ZCP_BCAST_CHANNEL : ZCP_BCAST_NONE,
                                                       .b = y->val.view };
                absorb(L, op, (int32_t)(op - L->p->ops), n);
        }
        return 0;
}

/* A standalone activation: a copy with it. */
static int lower_act(struct zcp_lower *L, struct zcp_gnode *n)
{
        const struct zcp_gval *x = tensor_in(L, n, 0);
        struct zcp_plan_op *op;
        uint32_t t;
        int r;

        if (!x)
                return -EINVAL;
        if (x->has_scale || x->flat)
                return err(L, n, "its input is a scaled or flattened tensor%s", "");
        if ((r = new_tensor(L, shape(L, x)->h, shape(L, x)->w, x->view.c, &t)) < 0)
                return r;
        x = tensor_in(L, n, 0);
        if (!(op = new_op(L, ZCP_OP_COPY, n)))
                return -ENOMEM;
        op->in = x->view;
        op->out = (struct zcp_plan_view){ .t = t, .c = x->view.c };
        op->act.kind = is(n, "Relu") ? ZCP_ACT_RELU : is(n, "Relu6") ? ZCP_ACT_RELU6 : ZCP_ACT_SIGMOID;
        absorb(L, op, (int32_t)(op - L->p->ops), n);
        return 0;
}

static int lower_mean(struct zcp_lower *L, struct zcp_gnode *n)
{
        const struct zcp_gval *x = tensor_in(L, n, 0);
        const struct zcp_gnode *ax = zcp_gconst(L->g, n, 1);
        struct zcp_plan_op *op;
        bool keep = false;
        uint32_t t;
        int r;

        if (!x)
                return -EINVAL;
        if (x->has_scale || x->flat)
                return err(L, n, "its input is a scaled or flattened tensor%s", "");
        if (!ax || !ax->is_int || ax->count != 2 || !((ax->i[0] == 1 && ax->i[1] == 2) || (ax->i[0] == 2 && ax->i[1] == 1)))
                return err(L, n, "only the mean over height and width (axes [1, 2]) is supported%s", "");
        if (!zcp_gattr_bool(n, "keep_dims", &keep) || !keep)
                return err(L, n, "only keep_dims true is supported%s", "");
        if ((r = new_tensor(L, 1, 1, x->view.c, &t)) < 0)
                return r;
        x = tensor_in(L, n, 0);
        if (!(op = new_op(L, ZCP_OP_MEAN, n)))
                return -ENOMEM;
        op->in = x->view;
        op->out = (struct zcp_plan_view){ .t = t, .c = x->view.c };
        absorb(L, op, (int32_t)(op - L->p->ops), n);
        return 0;
}

static int lower_resize(struct zcp_lower *L, struct zcp_gnode *n)
{
        const struct zcp_gval *x = tensor_in(L, n, 0);
        const struct zcp_gnode *sz = zcp_gconst(L->g, n, 1);
        struct zcp_plan_op *op;
        bool ac = false, hp = false;
        uint32_t t;
        int r;

        if (!x)
                return -EINVAL;
        if (x->has_scale || x->flat)
                return err(L, n, "its input is a scaled or flattened tensor%s", "");
        if (!sz || !sz->is_int || sz->count != 2 || sz->i[0] < 1 || sz->i[1] < 1 || sz->i[0] > 16384 ||
            sz->i[1] > 16384)
                return err(L, n, "the size is not a constant [height, width]%s", "");
        zcp_gattr_bool(n, "align_corners", &ac);
        zcp_gattr_bool(n, "half_pixel_centers", &hp);
        if (ac && hp)
                return err(L, n, "align_corners with half_pixel_centers is not supported%s", "");
        if ((r = new_tensor(L, (uint32_t)sz->i[0], (uint32_t)sz->i[1], x->view.c, &t)) < 0)
                return r;
        x = tensor_in(L, n, 0);
        if (!(op = new_op(L, ZCP_OP_RESIZE, n)))
                return -ENOMEM;
        op->in = x->view;
        op->out = (struct zcp_plan_view){ .t = t, .c = x->view.c };
        op->u.resize = (struct zcp_plan_resize){ .align_corners = ac, .half_pixel = hp };
        absorb(L, op, (int32_t)(op - L->p->ops), n);
        return 0;
}

static int lower_maxpool(struct zcp_lower *L, struct zcp_gnode *n)
{
        const struct zcp_gval *x = tensor_in(L, n, 0);
        struct zcp_plan_op *op;
        struct zcp_plan_pool q = { 0 };
        int64_t ks[4], expl[8];
        uint32_t cnt, oh, ow, hi, t;
        char pad[16];
        int r;

        if (!x)
                return -EINVAL;
        if (x->has_scale || x->flat)
                return err(L, n, "its input is a scaled or flattened tensor%s", "");
        if ((r = window_attrs(L, n, &q.sh, &q.sw, pad, sizeof(pad), expl)) < 0)
                return r;
        if (!zcp_gattr_ints(n, "ksize", ks, 4, &cnt) || cnt != 4 || ks[0] != 1 || ks[3] != 1 || ks[1] < 1 ||
            ks[2] < 1 || ks[1] > 64 || ks[2] > 64)
                return err(L, n, "ksize must be [1, k, k, 1] with k in 1..64%s", "");
        q.kh = (uint32_t)ks[1];
        q.kw = (uint32_t)ks[2];
        if (strcmp(pad, "EXPLICIT") == 0 || pad_axis(pad, NULL, shape(L, x)->h, q.kh, q.sh, &oh, &q.pad_t, &hi) < 0 ||
            pad_axis(pad, NULL, shape(L, x)->w, q.kw, q.sw, &ow, &q.pad_l, &hi) < 0)
                return err(L, n, "padding %s with this window and input is not supported", pad);
        if ((r = new_tensor(L, oh, ow, x->view.c, &t)) < 0)
                return r;
        x = tensor_in(L, n, 0);
        if (!(op = new_op(L, ZCP_OP_MAXPOOL, n)))
                return -ENOMEM;
        op->in = x->view;
        op->out = (struct zcp_plan_view){ .t = t, .c = x->view.c };
        op->u.pool = q;
        absorb(L, op, (int32_t)(op - L->p->ops), n);
        return 0;
}

/*
 * ConcatV2 along the channels: one tensor; an input whose op wrote a whole tensor read by nothing
 * else is written into its slice directly, any other input is copied there.
 */
static int lower_concat(struct zcp_lower *L, struct zcp_gnode *n)
{
        const struct zcp_gnode *ax = n->n_in >= 2 ? zcp_gconst(L->g, n, n->n_in - 1) : NULL;
        uint32_t h = 0, w = 0, c = 0, t, writers = 0;
        int32_t wops[64];
        int r;

        if (!ax || !ax->is_int || ax->count != 1 || (ax->i[0] != 3 && ax->i[0] != -1))
                return err(L, n, "only a concat along the channels (axis 3 or -1) is supported%s", "");
        if (n->n_in - 1 > 64)
                return err(L, n, "more than 64 inputs%s", "");
        for (uint32_t k = 0; k + 1 < n->n_in; k++) {
                const struct zcp_gval *x = tensor_in(L, n, k);
                if (!x)
                        return -EINVAL;
                if (x->has_scale || x->flat)
                        return err(L, n, "an input is a scaled or flattened tensor%s", "");
                if (k == 0) {
                        h = shape(L, x)->h;
                        w = shape(L, x)->w;
                } else if (shape(L, x)->h != h || shape(L, x)->w != w) {
                        return err(L, n, "inputs of different heights or widths%s", "");
                }
                c += x->view.c;
        }
        if ((r = new_tensor(L, h, w, c, &t)) < 0)
                return r;
        c = 0;
        for (uint32_t k = 0; k + 1 < n->n_in; k++) {
                struct zcp_gnode *in = input_node(L, n, k);
                const struct zcp_gval *x = &in->val;
                const struct zcp_plan_tensor *tx = shape(L, x);
                struct zcp_plan_op *op;
                bool again = false;

                for (uint32_t j = 0; j < k; j++)
                        again = again || input_node(L, n, j) == in;
                if (x->op >= 0 && !is(in, "Identity") && one_user(in) && !again &&
                    x->view.c0 == 0 && x->view.c == tx->c && x->view.t != L->p->input.t) {
                        struct zcp_plan_op *prod = &L->p->ops[x->op];
                        if (prod->out.t == x->view.t) {
                                prod->out = (struct zcp_plan_view){ .t = t, .c0 = c, .c = x->view.c };
                                wops[writers++] = x->op;
                                c += x->view.c;
                                continue;
                        }
                }
                if (!(op = new_op(L, ZCP_OP_COPY, n)))
                        return -ENOMEM;
                op->in = x->view;
                op->out = (struct zcp_plan_view){ .t = t, .c0 = c, .c = x->view.c };
                wops[writers++] = (int32_t)(op - L->p->ops);
                c += x->view.c;
        }
        set_tensor(n, (struct zcp_plan_view){ .t = t, .c = c }, wops[writers - 1]);
        /* an activation right after the concat goes to every writer */
        while (one_user(n) && !user(L, n, 0)->tail) {
                struct zcp_gnode *u = user(L, n, 0);
                enum zcp_act k = is(u, "Relu") ? ZCP_ACT_RELU : is(u, "Relu6") ? ZCP_ACT_RELU6
                                 : is(u, "Sigmoid")                                ? ZCP_ACT_SIGMOID
                                                                                    : ZCP_ACT_COUNT;
                bool free_slots = k != ZCP_ACT_COUNT;
                for (uint32_t j = 0; j < writers && free_slots; j++) {
                        const struct zcp_plan_op *o = &L->p->ops[wops[j]];
                        free_slots = o->act.kind == ZCP_ACT_NONE && !(o->kind == ZCP_OP_CONV && o->u.conv.has_residual);
                }
                if (!free_slots)
                        break;
                for (uint32_t j = 0; j < writers; j++)
                        L->p->ops[wops[j]].act.kind = k;
                u->done = true;
                u->val = n->val;
                n = u;
        }
        return 0;
}

/* Reshape or Squeeze of a 1x1xc tensor to [1, c] or [c]: the same floats. */
static int lower_flatten(struct zcp_lower *L, struct zcp_gnode *n)
{
        const struct zcp_gval *x = tensor_in(L, n, 0);

        if (!x)
                return -EINVAL;
        if (x->has_scale || shape(L, x)->h != 1 || shape(L, x)->w != 1)
                return err(L, n, "only a 1x1xC map can be reshaped (to [1, C])%s", "");
        n->val = *x;
        n->val.flat = true;
        return 0;
}

static int lower_input(struct zcp_lower *L, struct zcp_gnode *n, const struct zcp_model_opts *opts)
{
        int64_t dims[4];
        json_t *shp = n->attr ? json_object_get(n->attr, "shape") : NULL;
        json_t *sh = shp ? json_object_get(shp, "shape") : NULL, *dl = sh ? json_object_get(sh, "dim") : NULL, *d;
        size_t k;
        uint32_t t;
        int r;

        if (L->p->tensor_count)
                return err(L, n, "a second input: one image input only%s", "");
        if (!json_is_array(dl) || json_array_size(dl) != 4)
                return err(L, n, "the input is not of rank 4 (NHWC)%s", "");
        json_array_foreach(dl, k, d) {
                json_t *s = json_object_get(d, "size");
                const char *str = json_string_value(s);
                dims[k] = str ? strtoll(str, NULL, 10) : json_is_integer(s) ? json_integer_value(s) : -1;
        }
        if ((dims[0] != 1 && dims[0] != -1) || dims[3] != 3)
                return err(L, n, "the input must be [1, height, width, 3] (NHWC, RGB)%s", "");
        if (opts && opts->in_h && dims[1] > 0 && opts->in_h != dims[1])
                return zcp_gerr(L->g, n, L->err, L->errlen,
                                "the model's input height is fixed at %lld; model.input_height must be 0 or %lld",
                                (long long)dims[1], (long long)dims[1]);
        if (opts && opts->in_w && dims[2] > 0 && opts->in_w != dims[2])
                return zcp_gerr(L->g, n, L->err, L->errlen,
                                "the model's input width is fixed at %lld; model.input_width must be 0 or %lld",
                                (long long)dims[2], (long long)dims[2]);
        if (dims[1] <= 0)
                dims[1] = opts ? opts->in_h : 0;
        if (dims[2] <= 0)
                dims[2] = opts ? opts->in_w : 0;
        if (dims[1] < 1 || dims[2] < 1 || dims[1] > 4096 || dims[2] > 4096)
                return err(L, n, "the input size is not set by the model: give model.input_width and input_height%s",
                           "");
        if ((r = new_tensor(L, (uint32_t)dims[1], (uint32_t)dims[2], 3, &t)) < 0)
                return r;
        L->p->input.t = t;
        set_tensor(n, (struct zcp_plan_view){ .t = t, .c = 3 }, -1);
        return 0;
}

int zcp_graph_lower_node(struct zcp_lower *L, struct zcp_gnode *n, const struct zcp_model_opts *opts)
{
        if (n->done)
                return 0;
        n->done = true;
        if (is(n, "Placeholder"))
                return lower_input(L, n, opts);
        if (is(n, "Const")) {
                n->val.kind = ZCP_GVAL_CONST;
                return 0;
        }
        if (is(n, "Identity")) {
                n->val = input_node(L, n, 0)->val;
                return 0;
        }
        if (is_conv(n))
                return lower_conv(L, n);
        if (is_add(n) || is(n, "Sub") || is(n, "Mul"))
                return lower_binary(L, n);
        if (is(n, "Relu") || is(n, "Relu6") || is(n, "Sigmoid"))
                return lower_act(L, n);
        if (is(n, "Mean"))
                return lower_mean(L, n);
        if (is(n, "ResizeBilinear"))
                return lower_resize(L, n);
        if (is(n, "ConcatV2"))
                return lower_concat(L, n);
        if (is(n, "MaxPool"))
                return lower_maxpool(L, n);
        if (is(n, "Reshape") || is(n, "Squeeze"))
                return lower_flatten(L, n);
        return err(L, n, "op %s is not supported", n->op);
}
