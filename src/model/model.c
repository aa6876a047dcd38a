/* SPDX-License-Identifier: MIT */
/*
 * Labels files (model/model.h) and the model loader's entry point: a model.json is a TF.js graph
 * model, anything else zcnet's .safetensors. Main thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/err.h"
#include "model/files.h"
#include "model/model.h"

#define LABELS_MAX_BYTES (16u << 20)

int zcp_model_class_mask(const struct zcp_plan *plan, const char *list, uint32_t *mask, char *err, size_t errlen)
{
        const uint32_t classes = plan->head.classes < 32 * ZCP_CLASS_MASK_WORDS ? plan->head.classes
                                                                               : 32 * ZCP_CLASS_MASK_WORDS;
        const char *s = list;

        memset(mask, 0, sizeof(uint32_t) * ZCP_CLASS_MASK_WORDS);
        if (!list || !list[0]) {
                for (uint32_t c = 0; c < classes; c++)
                        mask[c / 32] |= 1u << (c % 32);
                return 0;
        }
        while (*s) {
                const char *e = strchr(s, ','), *a = s, *b;
                char *end;
                unsigned long v;
                uint32_t c = UINT32_MAX;

                if (!e)
                        e = s + strlen(s);
                b = e;
                while (a < b && (*a == ' ' || *a == '\t'))
                        a++;
                while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                        b--;
                for (uint32_t k = 0; plan->labels && k < classes && c == UINT32_MAX; k++)
                        if (strlen(plan->labels[k]) == (size_t)(b - a) && strncmp(plan->labels[k], a, (size_t)(b - a)) == 0)
                                c = k;
                if (c == UINT32_MAX && a < b && *a >= '0' && *a <= '9') {
                        v = strtoul(a, &end, 10);
                        if (end == b && v < classes)
                                c = (uint32_t)v;
                }
                if (c == UINT32_MAX) {
                        zcp_set_err(err, errlen, "model.classes: '%.*s' is not a class of the model (%u classes%s)",
                                    (int)(b - a), a, plan->head.classes,
                                    plan->labels ? "; give a label of its labels file or a class number"
                                                 : ", no labels: give class numbers");
                        return -EINVAL;
                }
                mask[c / 32] |= 1u << (c % 32);
                s = *e ? e + 1 : e;
        }
        return 0;
}

int zcp_model_load(const char *path, const struct zcp_model_opts *opts, struct zcp_plan **ret, char *err,
                   size_t errlen)
{
        size_t n = strlen(path);

        if (n >= 5 && strcmp(path + n - 5, ".json") == 0)
                return zcp_tfjs_load(path, opts, ret, err, errlen);
        return zcp_zcnet_load(path, opts, ret, err, errlen);
}

/*
 * Length of the well-formed UTF-8 sequence at p (at most n bytes), or 0 when
 * it is not one (overlong forms, surrogates, > U+10FFFF, truncated).
 */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
        uint32_t cp;
        size_t len;

        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                len = 2, cp = p[0] & 0x1f;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                len = 3, cp = p[0] & 0x0f;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                len = 4, cp = p[0] & 0x07;
        else
                return 0;
        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

int zcp_model_load_labels(struct zcp_plan *model, const char *path, char *errbuf, size_t errlen)
{
        uint64_t size;
        char *text = NULL, **labels = NULL, *store;
        size_t lines = 0, start = 0;
        int fd, r;

        fd = zcp_open_regular(path, &size, errbuf, errlen);
        if (fd < 0)
                return fd;
        if (size > LABELS_MAX_BYTES) {
                zcp_set_err(errbuf, errlen, "%s: %llu bytes, labels files are limited to %u", path,
                        (unsigned long long)size, LABELS_MAX_BYTES);
                r = -EFBIG;
                goto out;
        }
        text = malloc((size_t)size + 1);
        if (!text) {
                r = -ENOMEM;
                zcp_set_err(errbuf, errlen, "%s: out of memory", path);
                goto out;
        }
        r = zcp_read_full(fd, text, (size_t)size);
        if (r < 0) {
                zcp_set_err(errbuf, errlen, "%s: read error: %s", path, zcp_strerror(r));
                goto out;
        }
        /*
         * Lines end with '\n' (the last may lack it); a trailing '\r' is dropped.
         * Each label is UTF-8 (it goes into every JSON line as is) and at most
         * ZCP_LABEL_MAX_BYTES long (so a result line always fits its buffer).
         */
        for (size_t i = 0, line_start = 0; i < size; i++) {
                unsigned char c = (unsigned char)text[i];
                size_t seq;

                if (c == '\n') {
                        lines++;
                        line_start = i + 1;
                        continue;
                }
                if (i - line_start >= ZCP_LABEL_MAX_BYTES && !(c == '\r' && (i + 1 == size || text[i + 1] == '\n'))) {
                        zcp_set_err(errbuf, errlen, "%s:%zu: label longer than %u bytes", path, lines + 1,
                                ZCP_LABEL_MAX_BYTES);
                        r = -EINVAL;
                        goto out;
                }
                if (c >= 0x80) {
                        seq = utf8_seq((const unsigned char *)text + i, (size_t)size - i);
                        if (seq == 0) {
                                zcp_set_err(errbuf, errlen, "%s:%zu: label is not valid UTF-8 (byte 0x%02x at column %zu)",
                                        path, lines + 1, c, i - line_start + 1);
                                r = -EINVAL;
                                goto out;
                        }
                        i += seq - 1;
                        continue;
                }
                if (c < 0x20 && c != '\t' && !(c == '\r' && i + 1 < size && text[i + 1] == '\n') &&
                    !(c == '\r' && i + 1 == size)) {
                        zcp_set_err(errbuf, errlen, "%s:%zu: control character in label", path, lines + 1);
                        r = -EINVAL;
                        goto out;
                }
        }
        if (size > 0 && text[size - 1] != '\n')
                lines++;
        if (lines != model->head.classes) {
                zcp_set_err(errbuf, errlen, "%s: %zu labels, the model has %u classes", path, lines, model->head.classes);
                r = -EINVAL;
                goto out;
        }
        labels = malloc(lines * sizeof(char *) + (size_t)size + 1);
        if (!labels) {
                r = -ENOMEM;
                zcp_set_err(errbuf, errlen, "%s: out of memory", path);
                goto out;
        }
        store = (char *)(labels + lines);
        memcpy(store, text, (size_t)size);
        store[size] = '\n';
        for (size_t i = 0, n = 0; n < lines; i++) {
                if (store[i] != '\n')
                        continue;
                store[i] = '\0';
                if (i > start && store[i - 1] == '\r')
                        store[i - 1] = '\0';
                if (store[start] == '\0') {
                        zcp_set_err(errbuf, errlen, "%s:%zu: empty label", path, n + 1);
                        r = -EINVAL;
                        goto out;
                }
                labels[n++] = store + start;
                start = i + 1;
        }
        free(model->labels);
        model->labels = labels;
        labels = NULL;
        r = 0;
out:
        free(labels);
        free(text);
        close(fd);
        return r;
}


uint32_t zcp_model_unused_keys(const struct zcp_model_config *mc, const struct zcp_plan *plan, char *msg, size_t size)
{
        static const struct {
                uint32_t bit;
                const char *key;
        } keys[] = {
                { ZCP_MKEY_TOP_K, "top_k" },           { ZCP_MKEY_MIN_SCORE, "min_score" },
                { ZCP_MKEY_NMS_IOU, "nms_iou" },       { ZCP_MKEY_MAX_DETECTIONS, "max_detections" },
                { ZCP_MKEY_CLASSES, "classes" },
        };
        const bool detector = plan->head.kind != ZCP_HEAD_CLASSIFY;
        const uint32_t unused = mc->head_keys & (detector ? ZCP_MKEY_TOP_K : ~ZCP_MKEY_TOP_K);
        uint32_t n = 0;
        size_t len = 0;

        msg[0] = '\0';
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                if (!(unused & keys[i].bit))
                        continue;
                len += (size_t)snprintf(msg + len, len < size ? size - len : 0, "%smodel.%s", n ? ", " : "",
                                        keys[i].key);
                n++;
                if (len >= size)
                        return n;
        }
        if (n)
                snprintf(msg + len, size - len, " %s ignored: %s is a %s, %s", n == 1 ? "is" : "are", mc->path,
                         detector ? "detector" : "classifier",
                         detector ? "it reports up to model.max_detections objects a frame"
                                  : "it reports its model.top_k most likely classes a frame");
        return n;
}

/* ----------------------------------------------------------- shared plans */

struct cached {
        char path[ZCP_PATH_MAX], labels[ZCP_PATH_MAX];
        uint32_t in_w, in_h, refs;
        struct zcp_plan *plan;
        struct cached *next;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cached *cache;

/* The entry for this path, labels and input size, or NULL. Under cache_lock. */
static struct cached *cache_find(const char *path, const char *labels, const struct zcp_model_opts *opts)
{
        struct cached *c;

        for (c = cache; c; c = c->next)
                if (strcmp(c->path, path) == 0 && strcmp(c->labels, labels) == 0 && c->in_w == opts->in_w &&
                    c->in_h == opts->in_h)
                        break;
        return c;
}

/* The labels file a model section means: its own, else labels.txt beside a model.json ("" none). */
static void labels_path(const struct zcp_model_config *mc, char *buf, size_t len)
{
        size_t n = strlen(mc->path);
        const char *slash;

        buf[0] = '\0';
        if (mc->labels[0]) {
                snprintf(buf, len, "%s", mc->labels);
                return;
        }
        if (n < 5 || strcmp(mc->path + n - 5, ".json") != 0)
                return;
        slash = strrchr(mc->path, '/');
        snprintf(buf, len, "%.*slabels.txt", slash ? (int)(slash - mc->path) + 1 : 0, mc->path);
        if (access(buf, F_OK) != 0)
                buf[0] = '\0';
}

int zcp_model_load_config(const struct zcp_model_config *mc, struct zcp_plan **ret, char *err, size_t errlen)
{
        struct zcp_model_opts opts = { .in_w = mc->input_width, .in_h = mc->input_height };
        uint32_t mask[ZCP_CLASS_MASK_WORDS];
        char labels[ZCP_PATH_MAX];
        struct zcp_plan *plan = NULL;
        int r;

        labels_path(mc, labels, sizeof(labels));
        r = zcp_model_load(mc->path, &opts, &plan, err, errlen);
        if (r == 0 && labels[0])
                r = zcp_model_load_labels(plan, labels, err, errlen);
        if (r == 0)
                r = zcp_model_class_mask(plan, mc->classes, mask, err, errlen);
        if (r < 0) {
                zcp_plan_free(plan);
                return r;
        }
        *ret = plan;
        return 0;
}

int zcp_model_acquire(const struct zcp_model_config *mc, const struct zcp_plan **ret, char *err, size_t errlen)
{
        struct zcp_model_opts opts = { .in_w = mc->input_width, .in_h = mc->input_height };
        uint32_t mask[ZCP_CLASS_MASK_WORDS];
        char labels[ZCP_PATH_MAX];
        struct cached *c;
        struct zcp_plan *plan = NULL;
        int r;

        labels_path(mc, labels, sizeof(labels));
        pthread_mutex_lock(&cache_lock);
        c = cache_find(mc->path, labels, &opts);
        if (c) {
                r = zcp_model_class_mask(c->plan, mc->classes, mask, err, errlen);
                if (r == 0) {
                        c->refs++;
                        *ret = c->plan;
                }
                pthread_mutex_unlock(&cache_lock);
                return r;
        }
        pthread_mutex_unlock(&cache_lock);
        /* Loading takes a while: not under the lock. Two first callers may both load: the one that comes
         * second to the cache takes the first one's plan and frees its own, so every stream shares one. */
        r = zcp_model_load_config(mc, &plan, err, errlen);
        c = r == 0 ? calloc(1, sizeof(*c)) : NULL;
        if (r == 0 && !c) {
                zcp_set_err(err, errlen, "%s: out of memory", mc->path);
                r = -ENOMEM;
        }
        if (r < 0 || !c) {
                zcp_plan_free(plan);
                return r;
        }
        snprintf(c->path, sizeof(c->path), "%s", mc->path);
        snprintf(c->labels, sizeof(c->labels), "%s", labels);
        c->in_w = opts.in_w;
        c->in_h = opts.in_h;
        c->refs = 1;
        c->plan = plan;
        pthread_mutex_lock(&cache_lock);
        {
                struct cached *first = cache_find(mc->path, labels, &opts);

                if (first) {
                        first->refs++;
                        *ret = first->plan;
                } else {
                        c->next = cache;
                        cache = c;
                        *ret = plan;
                }
                pthread_mutex_unlock(&cache_lock);
                if (first) {
                        zcp_plan_free(plan);
                        free(c);
                }
        }
        return 0;
}

void zcp_model_release(const struct zcp_plan *plan)
{
        struct cached **pc, *c = NULL;

        if (!plan)
                return;
        pthread_mutex_lock(&cache_lock);
        for (pc = &cache; *pc; pc = &(*pc)->next)
                if ((*pc)->plan == plan) {
                        c = *pc;
                        if (--c->refs == 0)
                                *pc = c->next;
                        else
                                c = NULL;
                        break;
                }
        pthread_mutex_unlock(&cache_lock);
        if (c) {
                zcp_plan_free(c->plan);
                free(c);
        }
}
