/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint's content (prom.h): collection from the registry,
 * Prometheus text format 0.0.4, /stats JSON, /healthz, and the fps rate
 * state. No HTTP here; the HTTP thread calls these per request and owns the
 * buffers they fill.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/source.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/json.h"
#include "core/pixfmt.h"
#include "daemon/prom.h"
#include "output/framelog.h"

const uint64_t zcp_prom_le_ns[ZCP_PROM_LE_COUNT] = {
        50000ULL,     100000ULL,    200000ULL,    500000ULL,                                /* 50 us .. 0.5 ms */
        1000000ULL,   2000000ULL,   3000000ULL,   5000000ULL,   7500000ULL,                 /* 1 .. 7.5 ms */
        10000000ULL,  15000000ULL,  20000000ULL,  30000000ULL,  50000000ULL,  75000000ULL,  /* 10 .. 75 ms */
        100000000ULL, 200000000ULL, 500000000ULL,                                           /* 0.1 .. 0.5 s */
        1000000000ULL, 2000000000ULL, 5000000000ULL, 10000000000ULL,                        /* 1 .. 10 s */
};

const double zcp_prom_quantiles[ZCP_PROM_QUANTILE_COUNT] = { 0.5, 0.9, 0.99, 0.999 };
const char *const zcp_prom_quantile_names[ZCP_PROM_QUANTILE_COUNT] = { "p50", "p90", "p99", "p99.9" };

#define RATE_WINDOW_NS   (5 * ZCP_NSEC_PER_SEC)
#define RATE_MIN_NS      ZCP_NSEC_PER_SEC

/* ---- collection ---- */

void zcp_prom_hist_from_snapshot(const struct zcp_hist_snapshot *snap, struct zcp_prom_hist *ret)
{
        uint32_t i = 0;

        memset(ret, 0, sizeof(*ret));
        for (uint32_t b = 0; b < ZCP_HIST_BUCKETS; b++) {
                uint64_t top;

                if (snap->bucket[b] == 0)
                        continue;
                /* The largest value bucket b can hold; it counts under the first bound >= it. */
                top = zcp_hist_bucket_high(b) - 1;
                while (i < ZCP_PROM_LE_COUNT && zcp_prom_le_ns[i] < top)
                        i++;
                if (i == ZCP_PROM_LE_COUNT)
                        break;   /* this and every later bucket: +Inf only */
                ret->le[i] += snap->bucket[b];
        }
        for (i = 1; i < ZCP_PROM_LE_COUNT; i++)
                ret->le[i] += ret->le[i - 1];
        ret->count = snap->count;
        ret->sum_ns = snap->sum_ns;
        ret->min_ns = snap->min_ns;
        ret->max_ns = snap->max_ns;
        for (i = 0; i < ZCP_PROM_QUANTILE_COUNT; i++)
                ret->q[i] = zcp_hist_quantile(snap, zcp_prom_quantiles[i]);
}

static void reduce(const struct zcp_hist *h, struct zcp_hist_snapshot *scratch, struct zcp_prom_hist *ret)
{
        zcp_hist_snapshot(h, scratch);
        zcp_prom_hist_from_snapshot(scratch, ret);
}

static void copy_str(char *dst, size_t size, const char *src)
{
        snprintf(dst, size, "%s", src ? src : "");
}

/* copy_str, cut (if it must be) before a UTF-8 character rather than inside one. */
static void copy_utf8(char *dst, size_t size, const char *src)
{
        size_t k;

        copy_str(dst, size, src);
        k = strlen(dst);
        /* the byte after the cut continues a character: the cut is inside it, so drop its start */
        if (((unsigned char)src[k] & 0xc0) == 0x80) {
                while (k > 0 && ((unsigned char)dst[k - 1] & 0xc0) == 0x80)
                        k--;
                if (k > 0)
                        k--;
                dst[k] = '\0';
        }
}

void zcp_prom_stream_from_view(const struct zcp_stream_view *v, struct zcp_hist_snapshot *scratch,
                               struct zcp_prom_stream *ret)
{
        const struct zcp_stream_stats *st = v->stats;
        const struct zcp_source_info *in = v->source;

        memset(ret, 0, sizeof(*ret));
        copy_str(ret->name, sizeof(ret->name), v->name);
        copy_str(ret->source, sizeof(ret->source), v->source_type);
        copy_str(ret->backend, sizeof(ret->backend), v->backend);
        ret->gpu_device = v->gpu_device;
        copy_str(ret->transfer, sizeof(ret->transfer), v->transfer);
        ret->transfer_switches = v->transfer_switches;
        copy_str(ret->backend_reason, sizeof(ret->backend_reason), v->backend_reason);
        copy_str(ret->sink, sizeof(ret->sink), v->sink);
        ret->ring_slots = v->ring_slots;
        copy_str(ret->last_error, sizeof(ret->last_error), v->last_error);
        ret->stream_state = atomic_load_explicit(&st->stream_state, memory_order_relaxed);
        ret->state_since_ns = atomic_load_explicit(&st->state_since_ns, memory_order_relaxed);
        ret->restarts = atomic_load_explicit(&st->restarts, memory_order_relaxed);
        ret->reconfigures = atomic_load_explicit(&st->reconfigures, memory_order_relaxed);
        if (in) {
                uint32_t path = atomic_load(&st->capture_path);

                copy_str(ret->capture_path, sizeof(ret->capture_path),
                         path < ZCP_CAPTURE_PATH_COUNT ? zcp_capture_path_names[path] : "unknown");
                copy_str(ret->format, sizeof(ret->format), zcp_pixfmt_name(in->fmt));
                ret->width = in->width;
                ret->height = in->height;
                ret->fps_num = in->fps_num;
                ret->fps_den = in->fps_den;
        }
        /* Counters before histograms: a histogram never shows fewer frames than published says. */
        ret->published = atomic_load_explicit(&st->published, memory_order_acquire);
        ret->captured = atomic_load_explicit(&st->captured, memory_order_relaxed);
        for (int i = 0; i < ZCP_DROP_REASON_COUNT; i++)
                ret->dropped[i] = atomic_load_explicit(&st->dropped[i], memory_order_relaxed);
        ret->decode_gaps = atomic_load_explicit(&st->decode_gaps, memory_order_relaxed);
        ret->copies = atomic_load_explicit(&st->copies, memory_order_relaxed);
        ret->slot_direct = atomic_load_explicit(&st->slot_direct, memory_order_relaxed);
        ret->reconnects = atomic_load_explicit(&st->reconnects, memory_order_relaxed);
        ret->ring_in_flight = atomic_load_explicit(&st->ring_in_flight, memory_order_relaxed);
        ret->conversions = atomic_load_explicit(&st->conversions, memory_order_relaxed);
        ret->pts_repeats = atomic_load_explicit(&st->pts_repeats, memory_order_relaxed);
        ret->file_expected = atomic_load_explicit(&st->file_frames_expected, memory_order_relaxed);
        ret->file_delivered = atomic_load_explicit(&st->file_frames_delivered, memory_order_relaxed);
        ret->outage_ns = atomic_load_explicit(&st->outage_ns, memory_order_relaxed);
        ret->outage_frames = atomic_load_explicit(&st->outage_frames, memory_order_relaxed);
        ret->sink_written = atomic_load_explicit(&st->sink.written, memory_order_relaxed);
        ret->sink_queued = atomic_load_explicit(&st->sink.queued, memory_order_relaxed);
        for (int i = 0; i < ZCP_SINK_LOSS_COUNT; i++)
                ret->sink_lost[i] = atomic_load_explicit(&st->sink.lost[i], memory_order_relaxed);
        ret->sink_reconnects = atomic_load_explicit(&st->sink.reconnects, memory_order_relaxed);
        ret->sink_error = atomic_load_explicit(&st->sink.error, memory_order_relaxed);
        ret->source_state = atomic_load_explicit(&st->source_state, memory_order_relaxed);
        ret->source_error = atomic_load_explicit(&st->source_error, memory_order_relaxed);
        ret->first_capture_ns = atomic_load_explicit(&st->first_capture_ns, memory_order_relaxed);
        ret->last_publish_ns = atomic_load_explicit(&st->last_publish_ns, memory_order_relaxed);
        for (int i = 0; i < ZCP_STAGE_COUNT; i++) {
                reduce(&st->wait[i], scratch, &ret->wait[i]);
                reduce(&st->busy[i], scratch, &ret->busy[i]);
        }
        reduce(&st->e2e, scratch, &ret->e2e);
        ret->other_total = atomic_load_explicit(&st->detections_other, memory_order_relaxed);
        ret->other_now = atomic_load_explicit(&st->objects_other, memory_order_relaxed);
        for (uint32_t c = 0; c < ZCP_STATS_CLASSES; c++) {
                uint64_t total = atomic_load_explicit(&st->detections[c], memory_order_relaxed);
                uint32_t now = atomic_load_explicit(&st->objects[c], memory_order_relaxed);
                struct zcp_prom_class *k;

                if (!total)
                        continue;
                if (ret->class_count == ZCP_PROM_CLASSES) {
                        ret->other_total += total;
                        ret->other_now += now;
                        continue;
                }
                k = &ret->classes[ret->class_count++];
                if (v->labels && c < v->classes)
                        copy_utf8(k->label, sizeof(k->label), v->labels[c]);
                else
                        snprintf(k->label, sizeof(k->label), "%u", c);
                k->total = total;
                k->now = now;
        }
}

static void collect_one(const struct zcp_stream_view *view, void *userdata)
{
        struct zcp_prom_scrape *scrape = userdata;

        if (scrape->count >= ZCP_CONFIG_MAX_STREAMS)
                return;
        zcp_prom_stream_from_view(view, &scrape->snap, &scrape->streams[scrape->count]);
        scrape->count++;
}

void zcp_prom_collect(struct zcp_registry *registry, struct zcp_prom_scrape *scrape)
{
        struct zcp_framelog *fl = zcp_registry_framelog(registry);

        scrape->count = 0;
        zcp_registry_foreach(registry, collect_one, scrape);
        scrape->frame_log = fl != NULL;
        scrape->frame_log_written = zcp_framelog_written(fl);
        scrape->frame_log_lost = zcp_framelog_lost(fl);
        scrape->frame_log_rotate_failed = zcp_framelog_rotate_failed(fl);
        scrape->gpu_count = zcp_gpu_info_list(scrape->gpus, ZCP_GPU_INFO_MAX);
        /* After the copies: a last_publish_ns read above is never later than now. */
        scrape->now_ns = zcp_now_ns();
}

/* ---- fps ---- */

static double lifetime_fps(const struct zcp_prom_stream *s)
{
        if (s->published < 2 || s->last_publish_ns <= s->first_capture_ns)
                return 0.0;
        return (double)(s->published - 1) * 1e9 / (double)(s->last_publish_ns - s->first_capture_ns);
}

static struct zcp_prom_rate *rate_entry(struct zcp_prom_rates *rates, const char *name, uint64_t now)
{
        const size_t n = sizeof(rates->entry) / sizeof(rates->entry[0]);
        struct zcp_prom_rate *victim = NULL;

        for (size_t i = 0; i < n; i++)
                if (rates->entry[i].name[0] && strcmp(rates->entry[i].name, name) == 0)
                        return &rates->entry[i];
        /* A free entry, else the one unseen the longest (never one listed in this scrape). */
        for (size_t i = 0; i < n; i++) {
                struct zcp_prom_rate *e = &rates->entry[i];

                if (!e->name[0]) {
                        victim = e;
                        break;
                }
                if (e->seen_ns != now && (!victim || e->seen_ns < victim->seen_ns))
                        victim = e;
        }
        if (!victim)
                return NULL;
        memset(victim, 0, sizeof(*victim));
        copy_str(victim->name, sizeof(victim->name), name);
        return victim;
}

void zcp_prom_rates_update(struct zcp_prom_rates *rates, struct zcp_prom_scrape *scrape)
{
        const uint64_t now = scrape->now_ns;

        for (uint32_t i = 0; i < scrape->count; i++) {
                struct zcp_prom_stream *s = &scrape->streams[i];
                struct zcp_prom_rate *e = rate_entry(rates, s->name, now);
                int base = -1;

                if (!e) {
                        s->fps = lifetime_fps(s);
                        continue;
                }
                e->seen_ns = now;
                /* A counter that went back: the stream was restarted under the same name. */
                if (e->len && (s->published < e->published[e->head] || now < e->t_ns[e->head]))
                        e->len = 0;
                /* The newest sample at least RATE_WINDOW old, else the oldest at least RATE_MIN old. */
                for (uint32_t k = 0; k < e->len; k++) {
                        uint32_t idx = (e->head + ZCP_PROM_RATE_SAMPLES - k) % ZCP_PROM_RATE_SAMPLES;
                        uint64_t age = now - e->t_ns[idx];

                        if (age >= RATE_WINDOW_NS) {
                                base = (int)idx;
                                break;
                        }
                        if (age >= RATE_MIN_NS)
                                base = (int)idx;
                }
                if (base >= 0)
                        s->fps = (double)(s->published - e->published[base]) * 1e9 / (double)(now - e->t_ns[base]);
                else if (s->last_publish_ns && now - s->last_publish_ns <= zcp_prom_health_window_ns(s))
                        s->fps = lifetime_fps(s);
                else
                        s->fps = 0.0;
                if (e->len == 0 || now - e->t_ns[e->head] >= RATE_MIN_NS) {
                        e->head = e->len == 0 ? 0 : (e->head + 1) % ZCP_PROM_RATE_SAMPLES;
                        e->t_ns[e->head] = now;
                        e->published[e->head] = s->published;
                        if (e->len < ZCP_PROM_RATE_SAMPLES)
                                e->len++;
                }
        }
}

/* ---- /metrics ---- */

/* Seconds, exactly, as a decimal number without trailing zeros: 7500000 -> "0.0075". */
static void put_seconds(struct zcp_prom_buf *b, uint64_t ns)
{
        char frac[16];
        int n;

        n = snprintf(frac, sizeof(frac), "%09" PRIu64, (uint64_t)(ns % ZCP_NSEC_PER_SEC));
        while (n > 0 && frac[n - 1] == '0')
                frac[--n] = '\0';
        if (n)
                zcp_prom_buf_printf(b, "%" PRIu64 ".%s", (uint64_t)(ns / ZCP_NSEC_PER_SEC), frac);
        else
                zcp_prom_buf_printf(b, "%" PRIu64, (uint64_t)(ns / ZCP_NSEC_PER_SEC));
}

static void family(struct zcp_prom_buf *b, const char *name, const char *type, const char *help)
{
        zcp_prom_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{stream="..."[,extra="..."]} value: the label part, open for more labels. */
static void open_sample(struct zcp_prom_buf *b, const char *name, const char *suffix, const char *stream)
{
        zcp_prom_buf_printf(b, "%s%s{stream=\"", name, suffix);
        zcp_prom_buf_label_value(b, stream);
        zcp_prom_buf_putc(b, '"');
}

static void label(struct zcp_prom_buf *b, const char *key, const char *value)
{
        zcp_prom_buf_printf(b, ",%s=\"", key);
        zcp_prom_buf_label_value(b, value);
        zcp_prom_buf_putc(b, '"');
}

static void stream_u64(struct zcp_prom_buf *b, const char *name, const struct zcp_prom_stream *s, uint64_t v)
{
        open_sample(b, name, "", s->name);
        zcp_prom_buf_printf(b, "} %" PRIu64 "\n", v);
}

/* name{stream="...",sink="..."[,reason="..."]} value */
static void sink_u64(struct zcp_prom_buf *b, const char *name, const struct zcp_prom_stream *s, const char *reason,
                     uint64_t v)
{
        open_sample(b, name, "", s->name);
        label(b, "sink", s->sink);
        if (reason)
                label(b, "reason", reason);
        zcp_prom_buf_printf(b, "} %" PRIu64 "\n", v);
}

/* name{stream="...",class="..."} per class seen, and class="other" for the classes past them. */
static void put_classes(struct zcp_prom_buf *b, const char *name, const struct zcp_prom_stream *s, bool total)
{
        for (uint32_t c = 0; c < s->class_count; c++) {
                open_sample(b, name, "", s->name);
                label(b, "class", s->classes[c].label);
                zcp_prom_buf_printf(b, "} %" PRIu64 "\n", total ? s->classes[c].total : s->classes[c].now);
        }
        if (s->other_total) {
                open_sample(b, name, "", s->name);
                label(b, "class", "other");
                zcp_prom_buf_printf(b, "} %" PRIu64 "\n", total ? s->other_total : (uint64_t)s->other_now);
        }
}

static void put_hist(struct zcp_prom_buf *b, const char *name, const struct zcp_prom_stream *s, const char *stage,
                     const struct zcp_prom_hist *h)
{
        for (int i = 0; i <= ZCP_PROM_LE_COUNT; i++) {
                open_sample(b, name, "_bucket", s->name);
                if (stage)
                        label(b, "stage", stage);
                zcp_prom_buf_printf(b, ",le=\"");
                if (i < ZCP_PROM_LE_COUNT)
                        put_seconds(b, zcp_prom_le_ns[i]);
                else
                        zcp_prom_buf_printf(b, "+Inf");
                zcp_prom_buf_printf(b, "\"} %" PRIu64 "\n", i < ZCP_PROM_LE_COUNT ? h->le[i] : h->count);
        }
        open_sample(b, name, "_sum", s->name);
        if (stage)
                label(b, "stage", stage);
        zcp_prom_buf_printf(b, "} ");
        put_seconds(b, h->sum_ns);
        zcp_prom_buf_putc(b, '\n');
        open_sample(b, name, "_count", s->name);
        if (stage)
                label(b, "stage", stage);
        zcp_prom_buf_printf(b, "} %" PRIu64 "\n", h->count);
}

enum counter { C_CAPTURED, C_PUBLISHED, C_DECODE_GAPS, C_COPIES, C_SLOT_DIRECT, C_RECONNECTS, C_CONVERSIONS, C_PTS_REPEATS,
               C_FILE_EXPECTED, C_FILE_DELIVERED, C_OUTAGE_FRAMES, C_RESTARTS, C_RECONFIGURES, C_TRANSFER_SWITCHES,
               C_COUNT };

static const struct {
        const char *name, *help;
} counters[C_COUNT] = {
        [C_CAPTURED] = { "zcpipe_frames_captured_total", "Frames the source produced, including those dropped later." },
        [C_PUBLISHED] = { "zcpipe_frames_published_total", "Frames whose results were handed to the output." },
        [C_DECODE_GAPS] = { "zcpipe_decode_gaps_total", "Frames missing from a file's timeline (decoder gaps)." },
        [C_COPIES] = { "zcpipe_copies_total", "Frames copied into a ring slot instead of captured in place." },
        [C_SLOT_DIRECT] = { "zcpipe_slot_direct_total",
                            "File frames the decoder wrote straight into their ring slot (no copy)." },
        [C_RECONNECTS] = { "zcpipe_reconnects_total", "Times the source was re-initialised after a fault." },
        [C_CONVERSIONS] = { "zcpipe_source_conversions_total",
                            "Frames the source converted (videoconvert) to a format convert takes." },
        [C_PTS_REPEATS] = { "zcpipe_pts_repeats_total", "Frames whose timestamp did not advance (flagged pts_repeat)." },
        [C_FILE_EXPECTED] = { "zcpipe_file_frames_expected_total",
                              "Frames the file holds (demuxed + missing at the end), counted at each end of file." },
        [C_FILE_DELIVERED] = { "zcpipe_file_frames_delivered_total",
                               "Frames of the file that reached the ring, counted at each end of file." },
        [C_OUTAGE_FRAMES] = { "zcpipe_source_outage_frames_total",
                              "Frames lost while a network source was down (outage time x the stream's rate)." },
        [C_RESTARTS] = { "zcpipe_stream_restarts_total",
                         "Times the supervisor re-opened the stream after it failed (or ended, with restart: always)." },
        [C_RECONFIGURES] = { "zcpipe_stream_reconfigures_total",
                             "Times the stream got a new ring because its source's frame geometry changed." },
        [C_TRANSFER_SWITCHES] = { "zcpipe_transfer_switches_total",
                                  "Times transfer auto changed the stream's transfer mode while running, since the "
                                  "stream (re)opened." },
};

static uint64_t counter_value(const struct zcp_prom_stream *s, enum counter c)
{
        switch (c) {
        case C_CAPTURED:
                return s->captured;
        case C_PUBLISHED:
                return s->published;
        case C_DECODE_GAPS:
                return s->decode_gaps;
        case C_COPIES:
                return s->copies;
        case C_SLOT_DIRECT:
                return s->slot_direct;
        case C_RECONNECTS:
                return s->reconnects;
        case C_CONVERSIONS:
                return s->conversions;
        case C_PTS_REPEATS:
                return s->pts_repeats;
        case C_FILE_EXPECTED:
                return s->file_expected;
        case C_FILE_DELIVERED:
                return s->file_delivered;
        case C_OUTAGE_FRAMES:
                return s->outage_frames;
        case C_RESTARTS:
                return s->restarts;
        case C_RECONFIGURES:
                return s->reconfigures;
        case C_TRANSFER_SWITCHES:
                return s->transfer_switches;
        default:
                return 0;
        }
}

int zcp_prom_format_metrics(const struct zcp_prom_scrape *sc, struct zcp_prom_buf *b)
{
        static const char *const yesno[2] = { "no", "yes" };
        char num[16];

        family(b, "zcpipe_build_info", "gauge", "Version and optional features of this zcpipe build (always 1).");
        zcp_prom_buf_printf(b, "zcpipe_build_info{version=\"");
        zcp_prom_buf_label_value(b, ZCP_VERSION);
        zcp_prom_buf_printf(b, "\",cuda=\"%s\",gstreamer=\"%s\",v4l2=\"%s\",systemd=\"%s\",http=\"%s\"} 1\n",
                            yesno[HAVE_CUDA != 0], yesno[HAVE_GSTREAMER != 0], yesno[HAVE_V4L2 != 0],
                            yesno[HAVE_SYSTEMD != 0], yesno[HAVE_HTTP != 0]);

        zcp_prom_format_gpus(sc, b);

        family(b, "zcpipe_stream_info", "gauge",
               "A running stream: its source, backend, GPU (device, \"\" on the cpu backend), transfer mode, capture "
               "path and geometry (always 1).");
        for (uint32_t i = 0; i < sc->count; i++) {
                const struct zcp_prom_stream *s = &sc->streams[i];

                open_sample(b, "zcpipe_stream_info", "", s->name);
                label(b, "source", s->source);
                label(b, "backend", s->backend);
                if (s->gpu_device >= 0)
                        snprintf(num, sizeof(num), "%d", s->gpu_device);
                label(b, "device", s->gpu_device >= 0 ? num : "");
                label(b, "transfer", s->transfer);
                label(b, "capture_path", s->capture_path);
                label(b, "format", s->format);
                snprintf(num, sizeof(num), "%u", s->width);
                label(b, "width", num);
                snprintf(num, sizeof(num), "%u", s->height);
                label(b, "height", num);
                zcp_prom_buf_printf(b, "} 1\n");
        }

        family(b, "zcpipe_source_up", "gauge", "1 while the stream's source delivers frames, else 0.");
        for (uint32_t i = 0; i < sc->count; i++)
                stream_u64(b, "zcpipe_source_up", &sc->streams[i], sc->streams[i].source_state == ZCP_SOURCE_UP);

        family(b, "zcpipe_stream_state", "gauge",
               "The supervisor's state of the stream: 1 for the state it is in (up, backoff, failed, ended), else 0.");
        for (uint32_t i = 0; i < sc->count; i++)
                for (int st = 0; st < ZCP_STREAM_STATE_COUNT; st++) {
                        open_sample(b, "zcpipe_stream_state", "", sc->streams[i].name);
                        label(b, "state", zcp_stream_state_names[st]);
                        zcp_prom_buf_printf(b, "} %d\n", sc->streams[i].stream_state == (uint32_t)st);
                }
        family(b, "zcpipe_stream_state_seconds", "gauge", "Time the stream has been in its current state.");
        for (uint32_t i = 0; i < sc->count; i++) {
                const struct zcp_prom_stream *s = &sc->streams[i];

                open_sample(b, "zcpipe_stream_state_seconds", "", s->name);
                zcp_prom_buf_printf(b, "} %.3f\n", s->state_since_ns && sc->now_ns > s->state_since_ns
                                                          ? (double)(sc->now_ns - s->state_since_ns) / 1e9
                                                          : (double)sc->now_ns / 1e9);
        }
        family(b, "zcpipe_stream_last_error_info", "gauge",
               "Why the stream last failed (the error label; always 1, absent while it never failed).");
        for (uint32_t i = 0; i < sc->count; i++) {
                if (!sc->streams[i].last_error[0])
                        continue;
                open_sample(b, "zcpipe_stream_last_error_info", "", sc->streams[i].name);
                label(b, "error", sc->streams[i].last_error);
                zcp_prom_buf_printf(b, "} 1\n");
        }

        family(b, "zcpipe_fps", "gauge", "Published frames per second over the last few seconds.");
        for (uint32_t i = 0; i < sc->count; i++) {
                open_sample(b, "zcpipe_fps", "", sc->streams[i].name);
                zcp_prom_buf_printf(b, "} %.3f\n", sc->streams[i].fps);
        }

        family(b, "zcpipe_ring_slots", "gauge", "Frame buffers in the stream's ring.");
        for (uint32_t i = 0; i < sc->count; i++)
                stream_u64(b, "zcpipe_ring_slots", &sc->streams[i], sc->streams[i].ring_slots);

        family(b, "zcpipe_ring_in_flight", "gauge", "Ring slots holding a frame (not free).");
        for (uint32_t i = 0; i < sc->count; i++)
                stream_u64(b, "zcpipe_ring_in_flight", &sc->streams[i], sc->streams[i].ring_in_flight);

        for (int c = 0; c < C_COUNT; c++) {
                family(b, counters[c].name, "counter", counters[c].help);
                for (uint32_t i = 0; i < sc->count; i++)
                        stream_u64(b, counters[c].name, &sc->streams[i], counter_value(&sc->streams[i], c));
        }

        family(b, "zcpipe_source_outage_seconds_total", "counter",
               "Time a network source spent without a connection (outages that ended).");
        for (uint32_t i = 0; i < sc->count; i++) {
                open_sample(b, "zcpipe_source_outage_seconds_total", "", sc->streams[i].name);
                zcp_prom_buf_printf(b, "} %.3f\n", (double)sc->streams[i].outage_ns / 1e9);
        }

        family(b, "zcpipe_frames_dropped_total", "counter", "Frames dropped, by reason.");
        for (uint32_t i = 0; i < sc->count; i++)
                for (int r = 0; r < ZCP_DROP_REASON_COUNT; r++) {
                        open_sample(b, "zcpipe_frames_dropped_total", "", sc->streams[i].name);
                        label(b, "reason", zcp_drop_reason_names[r]);
                        zcp_prom_buf_printf(b, "} %" PRIu64 "\n", sc->streams[i].dropped[r]);
                }

        family(b, "zcpipe_sink_written_total", "counter", "Result lines the output wrote whole.");
        for (uint32_t i = 0; i < sc->count; i++)
                sink_u64(b, "zcpipe_sink_written_total", &sc->streams[i], NULL, sc->streams[i].sink_written);
        family(b, "zcpipe_sink_queued", "gauge", "Result lines waiting in the output's queue.");
        for (uint32_t i = 0; i < sc->count; i++)
                sink_u64(b, "zcpipe_sink_queued", &sc->streams[i], NULL, sc->streams[i].sink_queued);
        family(b, "zcpipe_sink_lost_total", "counter", "Result lines the output could not write, by reason.");
        for (uint32_t i = 0; i < sc->count; i++)
                for (int r = 0; r < ZCP_SINK_LOSS_COUNT; r++)
                        sink_u64(b, "zcpipe_sink_lost_total", &sc->streams[i], zcp_sink_loss_names[r],
                                 sc->streams[i].sink_lost[r]);
        family(b, "zcpipe_sink_reconnects_total", "counter",
               "Times the output re-established its connection or made its deleted file again.");
        for (uint32_t i = 0; i < sc->count; i++)
                sink_u64(b, "zcpipe_sink_reconnects_total", &sc->streams[i], NULL, sc->streams[i].sink_reconnects);
        family(b, "zcpipe_sink_up", "gauge",
               "1 while results leave the output; 0 while they cannot (file gone, broker unreachable).");
        for (uint32_t i = 0; i < sc->count; i++)
                sink_u64(b, "zcpipe_sink_up", &sc->streams[i], NULL, sc->streams[i].sink_error == 0);
        if (sc->frame_log) {
                family(b, "zcpipe_frame_log_written_total", "counter", "Lines the per-frame log wrote whole.");
                zcp_prom_buf_printf(b, "zcpipe_frame_log_written_total %" PRIu64 "\n", sc->frame_log_written);
                family(b, "zcpipe_frame_log_lost_total", "counter",
                       "Lines of the per-frame log lost: its writer fell behind, or its file could not be written.");
                zcp_prom_buf_printf(b, "zcpipe_frame_log_lost_total %" PRIu64 "\n", sc->frame_log_lost);
        }

        family(b, "zcpipe_detections_total", "counter", "Objects a detector reported, by class.");
        for (uint32_t i = 0; i < sc->count; i++)
                put_classes(b, "zcpipe_detections_total", &sc->streams[i], true);
        family(b, "zcpipe_objects", "gauge", "Objects in the latest published frame, by class.");
        for (uint32_t i = 0; i < sc->count; i++)
                put_classes(b, "zcpipe_objects", &sc->streams[i], false);

        family(b, "zcpipe_stage_wait_seconds", "histogram",
               "Time a frame waited in a stage's queue (enter to start), per stage.");
        for (uint32_t i = 0; i < sc->count; i++)
                for (int st = 0; st < ZCP_STAGE_COUNT; st++)
                        put_hist(b, "zcpipe_stage_wait_seconds", &sc->streams[i], zcp_stage_names[st],
                                 &sc->streams[i].wait[st]);

        family(b, "zcpipe_stage_busy_seconds", "histogram", "Time a stage spent on a frame (start to end), per stage.");
        for (uint32_t i = 0; i < sc->count; i++)
                for (int st = 0; st < ZCP_STAGE_COUNT; st++)
                        put_hist(b, "zcpipe_stage_busy_seconds", &sc->streams[i], zcp_stage_names[st],
                                 &sc->streams[i].busy[st]);

        family(b, "zcpipe_e2e_latency_seconds", "histogram",
               "End-to-end latency of a published frame: capture to result handed to the output.");
        for (uint32_t i = 0; i < sc->count; i++)
                put_hist(b, "zcpipe_e2e_latency_seconds", &sc->streams[i], NULL, &sc->streams[i].e2e);

        return b->failed ? -ENOMEM : 0;
}

/* ---- /stats ---- */

static void json_ms(struct zcp_prom_buf *b, uint64_t ns)
{
        zcp_prom_buf_printf(b, "%" PRIu64 ".%06" PRIu64, (uint64_t)(ns / ZCP_NSEC_PER_MSEC),
                            (uint64_t)(ns % ZCP_NSEC_PER_MSEC));
}

static void json_hist(struct zcp_prom_buf *b, const struct zcp_prom_hist *h)
{
        zcp_prom_buf_printf(b, "{\"count\":%" PRIu64, h->count);
        for (int i = 0; i < ZCP_PROM_QUANTILE_COUNT; i++) {
                zcp_prom_buf_printf(b, ",\"%s\":", zcp_prom_quantile_names[i]);
                json_ms(b, h->q[i]);
        }
        zcp_prom_buf_printf(b, ",\"max\":");
        json_ms(b, h->max_ns);
        zcp_prom_buf_printf(b, ",\"min\":");
        json_ms(b, h->min_ns);
        zcp_prom_buf_printf(b, ",\"mean\":");
        json_ms(b, h->count ? h->sum_ns / h->count : 0);
        zcp_prom_buf_putc(b, '}');
}

static void json_str_field(struct zcp_prom_buf *b, const char *key, const char *value)
{
        zcp_prom_buf_printf(b, "\"%s\":", key);
        zcp_prom_buf_json_string(b, value);
        zcp_prom_buf_putc(b, ',');
}

/* ["," ]"key": */
static void json_str_key(struct zcp_prom_buf *b, const char *key, bool comma)
{
        if (comma)
                zcp_prom_buf_putc(b, ',');
        zcp_prom_buf_json_string(b, key);
        zcp_prom_buf_putc(b, ':');
}

int zcp_prom_format_stats(const struct zcp_prom_scrape *sc, struct zcp_prom_buf *b)
{
        zcp_prom_buf_printf(b, "{\"version\":");
        zcp_prom_buf_json_string(b, ZCP_VERSION);
        if (sc->frame_log)
                zcp_prom_buf_printf(b, ",\"frame_log\":{\"written\":%" PRIu64 ",\"lost\":%" PRIu64
                                       ",\"rotate_failed\":%" PRIu64 "}",
                                    sc->frame_log_written, sc->frame_log_lost, sc->frame_log_rotate_failed);
        zcp_prom_buf_printf(b, ",\"streams\":[");
        for (uint32_t i = 0; i < sc->count; i++) {
                const struct zcp_prom_stream *s = &sc->streams[i];
                uint64_t dropped = 0;

                for (int r = 0; r < ZCP_DROP_REASON_COUNT; r++)
                        dropped += s->dropped[r];
                zcp_prom_buf_printf(b, "%s{", i ? "," : "");
                json_str_field(b, "name", s->name);
                json_str_field(b, "source", s->source);
                json_str_field(b, "backend", s->backend);
                json_str_field(b, "backend_reason", s->backend_reason);
                if (s->gpu_device >= 0)
                        zcp_prom_buf_printf(b, "\"gpu_device\":%d,", s->gpu_device);
                else
                        zcp_prom_buf_printf(b, "\"gpu_device\":null,");
                json_str_field(b, "transfer", s->transfer);
                zcp_prom_buf_printf(b, "\"transfer_switches\":%" PRIu64 ",", s->transfer_switches);
                json_str_field(b, "capture_path", s->capture_path);
                json_str_field(b, "format", s->format);
                json_str_field(b, "state",
                               s->source_state < ZCP_SOURCE_STATE_COUNT ? zcp_source_state_names[s->source_state]
                                                                        : "unknown");
                json_str_field(b, "stream_state", s->stream_state < ZCP_STREAM_STATE_COUNT
                                                          ? zcp_stream_state_names[s->stream_state]
                                                          : "unknown");
                json_str_field(b, "last_error", s->last_error);
                /* why the source waits for its device or server (a camera away, a server down) */
                json_str_field(b, "source_error", s->source_state != ZCP_SOURCE_UP && s->source_error < 0
                                                          ? zcp_strerror(s->source_error)
                                                          : "");
                zcp_prom_buf_printf(b, "\"state_seconds\":%.3f,\"restarts\":%" PRIu64 ",\"reconfigures\":%" PRIu64 ",",
                                    s->state_since_ns && sc->now_ns > s->state_since_ns
                                            ? (double)(sc->now_ns - s->state_since_ns) / 1e9
                                            : (double)sc->now_ns / 1e9,
                                    s->restarts, s->reconfigures);
                zcp_prom_buf_printf(b, "\"width\":%u,\"height\":%u,\"fps\":%.3f,", s->width, s->height, s->fps);
                zcp_prom_buf_printf(b, "\"ring\":{\"slots\":%u,\"in_flight\":%" PRIu64 "},", s->ring_slots,
                                    s->ring_in_flight);
                zcp_prom_buf_printf(b,
                                    "\"frames\":{\"captured\":%" PRIu64 ",\"published\":%" PRIu64
                                    ",\"dropped\":%" PRIu64 ",\"decode_gaps\":%" PRIu64 ",\"copies\":%" PRIu64
                                    ",\"slot_direct\":%" PRIu64 ",\"reconnects\":%" PRIu64 ",\"conversions\":%" PRIu64 ",\"pts_repeats\":%" PRIu64
                                    ",\"file_expected\":%" PRIu64 ",\"file_delivered\":%" PRIu64
                                    ",\"outage_frames\":%" PRIu64 ",\"outage_s\":%.3f,\"dropped_by_reason\":{",
                                    s->captured, s->published, dropped, s->decode_gaps, s->copies, s->slot_direct, s->reconnects,
                                    s->conversions, s->pts_repeats, s->file_expected, s->file_delivered,
                                    s->outage_frames, (double)s->outage_ns / 1e9);
                for (int r = 0; r < ZCP_DROP_REASON_COUNT; r++)
                        zcp_prom_buf_printf(b, "%s\"%s\":%" PRIu64, r ? "," : "", zcp_drop_reason_names[r],
                                            s->dropped[r]);
                zcp_prom_buf_printf(b, "}},\"sink\":{");
                json_str_field(b, "type", s->sink);
                json_str_field(b, "error", s->sink_error ? strerror(s->sink_error) : "");
                zcp_prom_buf_printf(b, "\"up\":%s,\"written\":%" PRIu64 ",\"queued\":%" PRIu64
                                       ",\"reconnects\":%" PRIu64 ",\"lost\":{",
                                    s->sink_error ? "false" : "true", s->sink_written, s->sink_queued,
                                    s->sink_reconnects);
                for (int r = 0; r < ZCP_SINK_LOSS_COUNT; r++)
                        zcp_prom_buf_printf(b, "%s\"%s\":%" PRIu64, r ? "," : "", zcp_sink_loss_names[r],
                                            s->sink_lost[r]);
                zcp_prom_buf_printf(b, "}},\"detections\":{");
                for (uint32_t c = 0; c < s->class_count; c++) {
                        json_str_key(b, s->classes[c].label, c > 0);
                        zcp_prom_buf_printf(b, "{\"total\":%" PRIu64 ",\"now\":%u}", s->classes[c].total,
                                            s->classes[c].now);
                }
                if (s->other_total) {
                        json_str_key(b, "other", s->class_count > 0);
                        zcp_prom_buf_printf(b, "{\"total\":%" PRIu64 ",\"now\":%u}", s->other_total, s->other_now);
                }
                zcp_prom_buf_printf(b, "},\"latency_ms\":{");
                for (int st = 0; st < ZCP_STAGE_COUNT; st++) {
                        zcp_prom_buf_printf(b, "\"%s\":{\"wait\":", zcp_stage_names[st]);
                        json_hist(b, &s->wait[st]);
                        zcp_prom_buf_printf(b, ",\"busy\":");
                        json_hist(b, &s->busy[st]);
                        zcp_prom_buf_printf(b, "},");
                }
                zcp_prom_buf_printf(b, "\"e2e\":");
                json_hist(b, &s->e2e);
                zcp_prom_buf_printf(b, "}}");
        }
        zcp_prom_buf_printf(b, "]}\n");
        return b->failed ? -ENOMEM : 0;
}

/* ---- /healthz ---- */

uint64_t zcp_prom_health_window_ns(const struct zcp_prom_stream *s)
{
        uint64_t w = ZCP_PROM_HEALTH_MIN_NS;

        if (s->fps_num > 0 && s->fps_den > 0) {
                uint64_t three = 3 * ZCP_NSEC_PER_SEC * (uint64_t)s->fps_den / s->fps_num;
                if (three > w)
                        w = three;
        }
        return w;
}

/* Appends "; " and a formatted piece to reason (cut at size). */
static void reason_add(char *reason, size_t size, size_t *n, const char *fmt, ...) ZCP_PRINTF(4, 5);

static void reason_add(char *reason, size_t size, size_t *n, const char *fmt, ...)
{
        va_list ap;
        int k;

        if (*n >= size)
                return;
        if (*n) {
                k = snprintf(reason + *n, size - *n, "; ");
                *n += k > 0 ? (size_t)k : 0;
                if (*n >= size)
                        return;
        }
        va_start(ap, fmt);
        k = vsnprintf(reason + *n, size - *n, fmt, ap);
        va_end(ap);
        *n += k > 0 ? (size_t)k : 0;
}

bool zcp_prom_health_policy(const struct zcp_prom_scrape *sc, enum zcp_healthz policy, char *reason, size_t size)
{
        uint32_t up = 0;
        size_t n = 0;

        reason[0] = '\0';
        if (sc->count == 0) {
                snprintf(reason, size, "no streams running");
                return false;
        }
        for (uint32_t i = 0; i < sc->count; i++) {
                const struct zcp_prom_stream *s = &sc->streams[i];
                const char *state = s->source_state < ZCP_SOURCE_STATE_COUNT ? zcp_source_state_names[s->source_state]
                                                                            : "unknown";
                uint64_t age;

                if (s->stream_state != ZCP_STREAM_UP) {
                        reason_add(reason, size, &n, "stream %s: %s for %.1f s%s%s%s", s->name,
                                   s->stream_state < ZCP_STREAM_STATE_COUNT ? zcp_stream_state_names[s->stream_state]
                                                                            : "unknown",
                                   sc->now_ns > s->state_since_ns ? (double)(sc->now_ns - s->state_since_ns) / 1e9 : 0.0,
                                   s->last_error[0] ? " (" : "", s->last_error, s->last_error[0] ? ")" : "");
                        continue;
                }
                if (s->sink_error) {
                        reason_add(reason, size, &n, "stream %s: results are not leaving (output %s: %s)", s->name,
                                   s->sink, strerror(s->sink_error));
                        continue;
                }
                if (s->last_publish_ns == 0) {
                        reason_add(reason, size, &n, "stream %s: no frame published yet (source %s)", s->name, state);
                        continue;
                }
                age = sc->now_ns > s->last_publish_ns ? sc->now_ns - s->last_publish_ns : 0;
                if (age > zcp_prom_health_window_ns(s)) {
                        reason_add(reason, size, &n, "stream %s: no frame for %.1f s (source %s)", s->name,
                                   (double)age / 1e9, state);
                        continue;
                }
                up++;
        }
        if (up == sc->count) {
                snprintf(reason, size, "ok");
                return true;
        }
        return policy == ZCP_HEALTHZ_ALL_DOWN && up > 0;
}

bool zcp_prom_health(const struct zcp_prom_scrape *sc, char *reason, size_t size)
{
        return zcp_prom_health_policy(sc, ZCP_HEALTHZ_ANY_DOWN, reason, size);
}
