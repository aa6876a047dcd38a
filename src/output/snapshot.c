/* SPDX-License-Identifier: MIT */
/*
 * The latest frame of a stream (snapshot.h).
 *
 * In (publish thread): a published NV12 frame and its result, offered once
 * per frame. It is taken (memcpy of the NV12 bytes and the frame's JSON
 * line into buffers allocated by a reader) only when someone watches, the
 * rate allows and the lock is free: the publish thread try-locks, never
 * waits, and counts what it skips.
 * Out (reader, the HTTP thread): a JPEG made by libturbojpeg from the frame
 * taken, at most once per frame, and a JSON description of that JPEG's frame:
 * its result line and its moving mask (core/frame.h; copied with the frame,
 * kept with the JPEG, so the page draws a frame's cells on that frame).
 * The mask buffers are sized for the stream's grid with the frame buffers.
 *
 * Colour: the pipeline's NV12 is BT.601 limited range (DESIGN.md §4); JPEG
 * (JFIF) stores full-range YCbCr with the same BT.601 matrix, so the encoder
 * only stretches the ranges (a table per plane) while it splits UV into the
 * U and V planes libturbojpeg takes.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#include "core/clock.h"
#include "core/kparams.h"
#include "core/log.h"
#include "core/pixfmt.h"
#include "output/publish.h"
#include "output/snapshot.h"

#define LINE_BYTES ZCP_PUBLISH_LINE_MAX   /* as the results sink's line */

struct zcp_snapshot {
        _Atomic uint32_t refs;
        char stream[ZCP_NAME_MAX];
        uint32_t cell;                   /* motion cell in pixels; 0 when motion is off */
        float threshold;
        uint8_t lut_y[256], lut_c[256];  /* limited -> full range */

        /* Read by the publish thread without the lock. */
        _Atomic uint64_t watch_until_ns; /* take frames until then */
        _Atomic uint64_t interval_ns;    /* 1 / fps */
        uint64_t next_due_ns;            /* publish thread only */

        _Atomic uint64_t taken, skipped_busy, skipped_size, encoded, requests;

        pthread_mutex_t lock;            /* everything below */
        uint32_t width, height;          /* of the buffers; 0 before the first watch */
        uint8_t *nv12;                   /* the frame taken, NV12, tight rows */
        char *line;                      /* its results-sink line without the newline; "" if it did not fit */
        uint32_t grid_w, grid_h, mask_words; /* of the mask buffers (cell and geometry); 0 words: none */
        uint32_t *mask;                  /* the frame's moving mask */
        bool has_mask;                   /* the frame taken came with a mask of this grid */
        uint64_t seq, capture_ns, publish_ns;
        uint64_t gen;                    /* frames taken into these buffers; 0 = none yet */
        /* reader side */
        tjhandle tj;
        uint8_t *planes;                 /* full-range Y, U, V */
        uint8_t *jpeg;
        unsigned long jpeg_cap, jpeg_len;
        uint64_t jpeg_gen;               /* `gen` the JPEG was made from; 0 = none */
        char *jpeg_line;
        uint32_t *jpeg_mask;
        bool jpeg_has_mask;
        uint64_t jpeg_seq, jpeg_capture_ns, jpeg_publish_ns;
};

static uint8_t stretch(double v)
{
        v = floor(v + 0.5);
        return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

int zcp_snapshot_new(const struct zcp_stream_config *cfg, struct zcp_snapshot **ret_snapshot)
{
        struct zcp_snapshot *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        s->line = malloc(LINE_BYTES);
        s->jpeg_line = malloc(LINE_BYTES);
        if (!s->line || !s->jpeg_line) {
                free(s->line);
                free(s->jpeg_line);
                free(s);
                return -ENOMEM;
        }
        s->line[0] = s->jpeg_line[0] = '\0';
        atomic_init(&s->refs, 1);
        snprintf(s->stream, sizeof(s->stream), "%s", cfg->name);
        s->cell = cfg->motion.enabled ? cfg->motion.cell : 0;
        s->threshold = cfg->motion.threshold;
        for (int v = 0; v < 256; v++) {
                s->lut_y[v] = stretch((v - 16) * 255.0 / 219.0);
                s->lut_c[v] = stretch((v - 128) * 255.0 / 224.0 + 128.0);
        }
        atomic_init(&s->interval_ns, ZCP_NSEC_PER_SEC / 2);
        pthread_mutex_init(&s->lock, NULL);
        *ret_snapshot = s;
        return 0;
}

struct zcp_snapshot *zcp_snapshot_ref(struct zcp_snapshot *s)
{
        if (s)
                atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
        return s;
}

static void free_buffers(struct zcp_snapshot *s)
{
        free(s->nv12);
        free(s->planes);
        free(s->jpeg);
        free(s->mask);
        free(s->jpeg_mask);
        s->nv12 = s->planes = s->jpeg = NULL;
        s->mask = s->jpeg_mask = NULL;
        s->grid_w = s->grid_h = s->mask_words = 0;
        s->has_mask = s->jpeg_has_mask = false;
        s->width = s->height = 0;
        s->jpeg_cap = s->jpeg_len = 0;
        s->gen = s->jpeg_gen = 0;
}

void zcp_snapshot_unref(struct zcp_snapshot *s)
{
        if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
                return;
        free_buffers(s);
        if (s->tj)
                tjDestroy(s->tj);
        pthread_mutex_destroy(&s->lock);
        free(s->line);
        free(s->jpeg_line);
        free(s);
}

void zcp_snapshot_offer(struct zcp_snapshot *s, const struct zcp_slot *slot, const struct zcp_plan *model, uint64_t now)
{
        const struct zcp_frame *f;
        uint64_t interval;
        int n;

        if (!s)
                return;
        f = &slot->frame;
        if (now > atomic_load_explicit(&s->watch_until_ns, memory_order_relaxed) || now < s->next_due_ns)
                return;
        if (pthread_mutex_trylock(&s->lock) != 0) {
                /* A reader is encoding (or allocating): this frame is not taken; the next one may be. */
                atomic_fetch_add_explicit(&s->skipped_busy, 1, memory_order_relaxed);
                return;
        }
        /* Due again one interval later, less an eighth so that a frame period that divides it is not missed. */
        interval = atomic_load_explicit(&s->interval_ns, memory_order_relaxed);
        s->next_due_ns = now + interval - interval / 8;
        if (!s->nv12 || f->fmt != ZCP_PIX_NV12 || f->width != s->width || f->height != s->height ||
            f->stride != f->width || f->bytes < zcp_nv12_size(f->width, f->height)) {
                atomic_fetch_add_explicit(&s->skipped_size, 1, memory_order_relaxed);
                goto out;
        }
        memcpy(s->nv12, slot->data, zcp_nv12_size(f->width, f->height));
        /* The mask of this frame when it has one of the grid the buffers are for. */
        s->has_mask = s->mask_words && slot->mask && slot->result->mask_words == s->mask_words &&
                      slot->mask_words >= s->mask_words && slot->result->grid_w == s->grid_w &&
                      slot->result->grid_h == s->grid_h;
        if (s->has_mask)
                memcpy(s->mask, slot->mask, (size_t)s->mask_words * sizeof(uint32_t));
        n = zcp_publish_format(s->line, LINE_BYTES, s->stream, f, slot->result, model);
        if (n > 0 && s->line[n - 1] == '\n')
                s->line[n - 1] = '\0';
        else if (n <= 0)
                s->line[0] = '\0';
        s->seq = f->seq;
        s->capture_ns = f->t[ZCP_TS_CAPTURE];
        s->publish_ns = now;
        s->gen++;
        atomic_fetch_add_explicit(&s->taken, 1, memory_order_relaxed);
out:
        pthread_mutex_unlock(&s->lock);
}

/* Under the lock. */
static int alloc_buffers(struct zcp_snapshot *s, uint32_t width, uint32_t height)
{
        size_t bytes = zcp_nv12_size(width, height);
        unsigned long cap = tjBufSize((int)width, (int)height, TJSAMP_420);

        free_buffers(s);
        if (cap == (unsigned long)-1)
                return -EINVAL;
        s->nv12 = malloc(bytes);
        s->planes = malloc(bytes);
        s->jpeg = malloc(cap);
        if (s->cell) {
                s->grid_w = zcp_grid_w(width, s->cell);
                s->grid_h = zcp_grid_h(height, s->cell);
                s->mask_words = zcp_mask_words((uint64_t)s->grid_w * s->grid_h);
                s->mask = calloc(s->mask_words, sizeof(uint32_t));
                s->jpeg_mask = calloc(s->mask_words, sizeof(uint32_t));
        }
        if (!s->nv12 || !s->planes || !s->jpeg || (s->cell && (!s->mask || !s->jpeg_mask))) {
                free_buffers(s);
                return -ENOMEM;
        }
        /* Touch the pages here, so the publish thread's first copy does not fault them in. */
        memset(s->nv12, 0, bytes);
        s->width = width;
        s->height = height;
        s->jpeg_cap = cap;
        return 0;
}

int zcp_snapshot_watch(struct zcp_snapshot *s, uint32_t width, uint32_t height, uint32_t fps)
{
        int r = 0;

        if (!s)
                return -ENOENT;
        if (width == 0 || height == 0 || width % 2 || height % 2)
                return -EINVAL;
        fps = fps < 1 ? 1 : fps > 30 ? 30 : fps;
        atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed);
        atomic_store_explicit(&s->interval_ns, ZCP_NSEC_PER_SEC / fps, memory_order_relaxed);
        pthread_mutex_lock(&s->lock);
        if (!s->nv12 || s->width != width || s->height != height)
                r = alloc_buffers(s, width, height);
        pthread_mutex_unlock(&s->lock);
        if (r < 0) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC, "%s: no snapshot of %ux%u: %s", s->stream,
                                    width, height, strerror(-r));
                return r;
        }
        atomic_store_explicit(&s->watch_until_ns, zcp_now_ns() + ZCP_SNAPSHOT_WATCH_NS, memory_order_relaxed);
        return 0;
}

/* Under the lock, with a frame taken: the JPEG of s->nv12. */
static int encode(struct zcp_snapshot *s)
{
        const uint32_t w = s->width, h = s->height, cw = w / 2, ch = h / 2;
        const uint8_t *y = s->nv12, *uv = s->nv12 + (size_t)w * h;
        uint8_t *py = s->planes, *pu = py + (size_t)w * h, *pv = pu + (size_t)cw * ch;
        const unsigned char *planes[3] = { py, pu, pv };
        const int strides[3] = { (int)w, (int)cw, (int)cw };
        unsigned char *out = s->jpeg;
        unsigned long len = s->jpeg_cap;

        for (size_t i = 0; i < (size_t)w * h; i++)
                py[i] = s->lut_y[y[i]];
        for (size_t i = 0; i < (size_t)cw * ch; i++) {
                pu[i] = s->lut_c[uv[2 * i]];
                pv[i] = s->lut_c[uv[2 * i + 1]];
        }
        if (!s->tj) {
                s->tj = tjInitCompress();
                if (!s->tj) {
                        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC, "%s: snapshot: libturbojpeg: %s",
                                            s->stream, tjGetErrorStr2(NULL));
                        return -EIO;
                }
        }
        if (tjCompressFromYUVPlanes(s->tj, planes, (int)w, strides, (int)h, TJSAMP_420, &out, &len,
                                    ZCP_SNAPSHOT_QUALITY, TJFLAG_NOREALLOC) != 0) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC, "%s: snapshot: libturbojpeg: %s", s->stream,
                                    tjGetErrorStr2(s->tj));
                return -EIO;
        }
        s->jpeg_len = len;
        s->jpeg_gen = s->gen;
        s->jpeg_seq = s->seq;
        s->jpeg_capture_ns = s->capture_ns;
        s->jpeg_publish_ns = s->publish_ns;
        memcpy(s->jpeg_line, s->line, LINE_BYTES);
        s->jpeg_has_mask = s->has_mask;
        if (s->has_mask)
                memcpy(s->jpeg_mask, s->mask, (size_t)s->mask_words * sizeof(uint32_t));
        atomic_fetch_add_explicit(&s->encoded, 1, memory_order_relaxed);
        return 0;
}

/* Under the lock: the JPEG is of the newest frame taken. -EAGAIN when none was taken. */
static int refresh(struct zcp_snapshot *s)
{
        if (s->gen == 0)
                return -EAGAIN;
        return s->jpeg_gen == s->gen ? 0 : encode(s);
}

int zcp_snapshot_jpeg(struct zcp_snapshot *s, void **ret_data, size_t *ret_len, uint64_t *ret_seq)
{
        void *copy = NULL;
        size_t len = 0;
        uint64_t seq = 0;
        int r = 0;

        if (!s)
                return -ENOENT;
        pthread_mutex_lock(&s->lock);
        r = refresh(s);
        if (r < 0)
                goto out;
        copy = malloc(s->jpeg_len);
        if (!copy) {
                r = -ENOMEM;
                goto out;
        }
        memcpy(copy, s->jpeg, s->jpeg_len);
        len = s->jpeg_len;
        seq = s->jpeg_seq;
out:
        pthread_mutex_unlock(&s->lock);
        if (r == 0) {
                *ret_data = copy;
                *ret_len = len;
                *ret_seq = seq;
        }
        return r;
}

void zcp_snapshot_counters(struct zcp_snapshot *s, struct zcp_snapshot_counters *ret)
{
        if (!s) {
                *ret = (struct zcp_snapshot_counters){ 0 };
                return;
        }
        *ret = (struct zcp_snapshot_counters){
                .taken = atomic_load_explicit(&s->taken, memory_order_relaxed),
                .skipped_busy = atomic_load_explicit(&s->skipped_busy, memory_order_relaxed),
                .skipped_size = atomic_load_explicit(&s->skipped_size, memory_order_relaxed),
                .encoded = atomic_load_explicit(&s->encoded, memory_order_relaxed),
                .requests = atomic_load_explicit(&s->requests, memory_order_relaxed),
        };
}

/* Under the lock: "mask":{...} of the JPEG's frame, or "mask":null, at buf (cap bytes). Returns the length or -1. */
static int mask_json(const struct zcp_snapshot *s, char *buf, size_t cap)
{
        static const char hex[] = "0123456789abcdef";
        const uint64_t cells = (uint64_t)s->grid_w * s->grid_h, bytes = (cells + 7) / 8;
        uint32_t moving = 0;
        size_t len;
        int n;

        if (!s->jpeg_has_mask)
                return snprintf(buf, cap, "\"mask\":null,");
        for (uint32_t w = 0; w < s->mask_words; w++)
                for (uint32_t v = s->jpeg_mask[w]; v; v &= v - 1)
                        moving++;
        n = snprintf(buf, cap, "\"mask\":{\"grid_w\":%u,\"grid_h\":%u,\"moving\":%u,\"hex\":\"", s->grid_w,
                     s->grid_h, moving);
        if (n < 0 || (size_t)n + 2 * bytes + 3 > cap)
                return -1;
        len = (size_t)n;
        for (uint64_t k = 0; k < bytes; k++) {
                const uint32_t b = (s->jpeg_mask[k / 4] >> (8 * (k % 4))) & 0xffu;
                buf[len++] = hex[b >> 4];
                buf[len++] = hex[b & 15];
        }
        buf[len++] = '"';
        buf[len++] = '}';
        buf[len++] = ',';
        buf[len] = '\0';
        return (int)len;
}

int zcp_snapshot_json(struct zcp_snapshot *s, uint64_t now_ns, char **ret_json, size_t *ret_len)
{
        struct zcp_snapshot_counters c;
        size_t cap, len = 0;
        char *buf;
        int n, m;

        if (!s)
                return -ENOENT;
        zcp_snapshot_counters(s, &c);
        pthread_mutex_lock(&s->lock);
        /* The line, the mask's hex (two digits a byte of ceil(cells / 8)) and the rest. */
        cap = LINE_BYTES + 1024 + (size_t)s->mask_words * 8;
        buf = malloc(cap);
        if (!buf) {
                pthread_mutex_unlock(&s->lock);
                return -ENOMEM;
        }
        /* The stream name is [A-Za-z0-9_.-]+ (config.c): no escaping needed. */
        n = snprintf(buf, cap,
                     "{\"stream\":\"%s\",\"fps\":%.3g,\"cell\":%u,\"threshold\":%.6g,\"counters\":{\"taken\":%" PRIu64
                     ",\"skipped_busy\":%" PRIu64 ",\"skipped_size\":%" PRIu64 ",\"encoded\":%" PRIu64
                     ",\"requests\":%" PRIu64 "},",
                     s->stream, 1e9 / (double)atomic_load_explicit(&s->interval_ns, memory_order_relaxed), s->cell,
                     (double)s->threshold, c.taken, c.skipped_busy, c.skipped_size, c.encoded, c.requests);
        if (n > 0)
                len = (size_t)n;
        refresh(s);   /* without a frame (or when encoding failed) the JSON says so */
        if (s->jpeg_gen == 0) {
                n = snprintf(buf + len, cap - len,
                             "\"width\":%u,\"height\":%u,\"seq\":null,\"mask\":null,\"result\":null}\n", s->width,
                             s->height);
        } else {
                n = snprintf(buf + len, cap - len,
                             "\"width\":%u,\"height\":%u,\"seq\":%" PRIu64 ",\"age_ms\":%.1f,\"e2e_ms\":%.3f,",
                             s->width, s->height, s->jpeg_seq,
                             now_ns > s->jpeg_publish_ns ? (double)(now_ns - s->jpeg_publish_ns) / 1e6 : 0.0,
                             (double)(s->jpeg_publish_ns - s->jpeg_capture_ns) / 1e6);
                if (n >= 0 && (size_t)n < cap - len) {
                        len += (size_t)n;
                        m = mask_json(s, buf + len, cap - len);
                        if (m >= 0 && (size_t)m < cap - len) {
                                len += (size_t)m;
                                n = snprintf(buf + len, cap - len, "\"result\":%s}\n",
                                             s->jpeg_line[0] ? s->jpeg_line : "null");
                        } else {
                                n = -1;
                        }
                }
        }
        pthread_mutex_unlock(&s->lock);
        if (n < 0 || (size_t)n >= cap - len) {
                free(buf);
                return -ENOMEM;
        }
        *ret_json = buf;
        *ret_len = len + (size_t)n;
        return 0;
}
