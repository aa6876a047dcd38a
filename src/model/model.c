/* SPDX-License-Identifier: MIT */
/*
 * Labels files (model/model.h) and the model loader's entry point: a model.json is a TF.js graph
 * model, anything else zcnet's .safetensors. Main thread.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "model/files.h"
#include "model/model.h"

#define LABELS_MAX_BYTES (16u << 20)

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

