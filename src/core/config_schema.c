/* SPDX-License-Identifier: MIT */
/*
 * The configuration schema (config_schema.h): the enum name tables, the key
 * tables of every section with their cross-key rules, the defaults they
 * give, and the walk over them for tests and documentation. A config key is
 * one row here.
 */
#include "core/config_schema.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include "core/frame.h"   /* ZCP_TOPK_MAX */

#ifndef ZCP_DATADIR
#define ZCP_DATADIR "/usr/local/share/zcpipe"
#endif
#define DEFAULT_MODEL_FILE "centernet/model.json"
#define DEFAULT_WEIGHTS ZCP_DATADIR "/" DEFAULT_MODEL_FILE

/*
 * The default model: $ZCP_MODELDIR/centernet/model.json when that is
 * set (meson test sets it to the source tree's models/); else, for the
 * zcpipe of the build tree it was built in (the executable is
 * ZCP_BUILD_ROOT/zcpipe), the source tree's copy, so that a checkout works
 * before `meson install`; else the installed one. An installed zcpipe (a
 * DESTDIR inside the build tree included) never looks at the build or
 * source tree.
 */
const char *zcp_config_default_weights(void)
{
        static char path[PATH_MAX];
        const char *dir = getenv("ZCP_MODELDIR");

        if (dir && dir[0]) {
                snprintf(path, sizeof(path), "%s/" DEFAULT_MODEL_FILE, dir);
                return path;
        }
#if defined(ZCP_SOURCE_MODELDIR) && defined(ZCP_BUILD_ROOT)
        {
                char exe[PATH_MAX], root[PATH_MAX];
                ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
                size_t len;

                if (n > 0 && realpath(ZCP_BUILD_ROOT, root)) {
                        exe[n] = '\0';
                        len = strlen(root);
                        if (strncmp(exe, root, len) == 0 && strcmp(exe + len, "/zcpipe") == 0)
                                return ZCP_SOURCE_MODELDIR "/" DEFAULT_MODEL_FILE;
                }
        }
#endif
        return DEFAULT_WEIGHTS;
}

#ifndef HAVE_HTTP
#define HAVE_HTTP 0
#endif

const char *const zcp_http_page_names[ZCP_HTTP_PAGE_COUNT] = {
        [ZCP_HTTP_PAGE_AUTO] = "auto",
        [ZCP_HTTP_PAGE_ON] = "on",
        [ZCP_HTTP_PAGE_OFF] = "off",
};

const char *const zcp_source_type_names[ZCP_SOURCE_TYPE_COUNT] = {
        [ZCP_SOURCE_V4L2] = "v4l2",
        [ZCP_SOURCE_FILE] = "file",
        [ZCP_SOURCE_SYNTHETIC] = "synthetic",
        [ZCP_SOURCE_NETWORK] = "network",
};

const char *const zcp_net_protocol_names[ZCP_NET_PROTOCOL_COUNT] = {
        [ZCP_NET_AUTO] = "auto",
        [ZCP_NET_TCP] = "tcp",
        [ZCP_NET_UDP] = "udp",
};

const char *const zcp_pace_names[ZCP_PACE_COUNT] = {
        [ZCP_PACE_REALTIME] = "realtime",
        [ZCP_PACE_FAST] = "fast",
};

const char *const zcp_v4l2_io_names[ZCP_IO_COUNT] = {
        [ZCP_IO_AUTO] = "auto",
        [ZCP_IO_USERPTR] = "userptr",
        [ZCP_IO_MMAP] = "mmap",
};

const char *const zcp_resize_names[ZCP_RESIZE_COUNT] = {
        [ZCP_RESIZE_STRETCH] = "stretch",
        [ZCP_RESIZE_LETTERBOX] = "letterbox",
};

const char *const zcp_model_pixels_names[ZCP_MPIX_COUNT] = {
        [ZCP_MPIX_AUTO] = "auto",
        [ZCP_MPIX_UNIT] = "unit",
        [ZCP_MPIX_BYTE] = "byte",
};

const char *const zcp_drop_policy_names[ZCP_DROP_POLICY_COUNT] = {
        [ZCP_DROP_POLICY_AUTO] = "auto",
        [ZCP_DROP_POLICY_NEWEST] = "newest",
        [ZCP_DROP_POLICY_BLOCK] = "block",
};

const char *const zcp_backend_kind_names[ZCP_BACKEND_KIND_COUNT] = {
        [ZCP_BACKEND_AUTO] = "auto",
        [ZCP_BACKEND_CUDA] = "cuda",
        [ZCP_BACKEND_CPU] = "cpu",
};

const char *const zcp_transfer_names[ZCP_TRANSFER_COUNT] = {
        [ZCP_TRANSFER_AUTO] = "auto",
        [ZCP_TRANSFER_ZERO_COPY] = "zero-copy",
        [ZCP_TRANSFER_COPY] = "copy",
};

const char *const zcp_sync_names[ZCP_SYNC_COUNT] = {
        [ZCP_SYNC_SPIN] = "spin",
        [ZCP_SYNC_YIELD] = "yield",
        [ZCP_SYNC_BLOCK] = "block",
        [ZCP_SYNC_HYBRID] = "hybrid",
};

const char *const zcp_output_type_names[ZCP_OUTPUT_TYPE_COUNT] = {
        [ZCP_OUTPUT_STDOUT] = "stdout",
        [ZCP_OUTPUT_FILE] = "file",
        [ZCP_OUTPUT_UNIX] = "unix",
        [ZCP_OUTPUT_NONE] = "none",
        [ZCP_OUTPUT_MQTT] = "mqtt",
};

const char *const zcp_restart_names[ZCP_RESTART_COUNT] = {
        [ZCP_RESTART_ON_FAILURE] = "on-failure",
        [ZCP_RESTART_ALWAYS] = "always",
        [ZCP_RESTART_NEVER] = "never",
};

const char *const zcp_healthz_names[ZCP_HEALTHZ_COUNT] = {
        [ZCP_HEALTHZ_ANY_DOWN] = "any-down",
        [ZCP_HEALTHZ_ALL_DOWN] = "all-down",
};

int zcp_enum_from_name(const char *const *names, int count, const char *name)
{
        if (!names || !name)
                return -1;
        for (int i = 0; i < count; i++)
                if (names[i] && strcmp(names[i], name) == 0)
                        return i;
        return -1;
}

/* ---- key tables ------------------------------------------------------------- */

static int check_source(struct ctx *c, void *base, const struct seen *s);
static int check_output(struct ctx *c, void *base, const struct seen *s);
static int check_http(struct ctx *c, void *base, const struct seen *s);

/* offsetof() that fails to compile when the member is not `sz` bytes. */
#define OFF(T, m, sz) (offsetof(T, m) + 0 * sizeof(char[sizeof(((T *)0)->m) == (sz) ? 1 : -1]))
/* The last argument of each is the key's default. */
#define U32(T, k, m, lo, hi, fl, def) \
        { .name = k, .type = K_U32, .offset = OFF(T, m, 4), .size = 4, .umin = lo, .umax = hi, .flags = fl, \
          .udef = def }
#define U64(T, k, m, lo, hi, fl, def) \
        { .name = k, .type = K_U64, .offset = OFF(T, m, 8), .size = 8, .umin = lo, .umax = hi, .flags = fl, \
          .udef = def }
#define FLT(T, k, m, lo, hi, fl, def) \
        { .name = k, .type = K_FLOAT, .offset = OFF(T, m, sizeof(float)), .size = sizeof(float), \
          .fmin = lo, .fmax = hi, .flags = fl, .fdef = { def } }
#define FLT3(T, k, m, lo, hi, fl, d0, d1, d2) \
        { .name = k, .type = K_FLOAT3, .offset = OFF(T, m, 3 * sizeof(float)), .size = 3 * sizeof(float), \
          .fmin = lo, .fmax = hi, .flags = fl, .fdef = { d0, d1, d2 } }
#define BOOL(T, k, m, fl, def) \
        { .name = k, .type = K_BOOL, .offset = OFF(T, m, sizeof(bool)), .size = sizeof(bool), .flags = fl, \
          .udef = def }
#define ENUM(T, k, m, tbl, n, fl, def) \
        { .name = k, .type = K_ENUM, .offset = OFF(T, m, sizeof(int)), .size = sizeof(int), .names = tbl, .count = n, \
          .flags = fl, .udef = def }
#define STR(T, k, m, ty, fl, def) \
        { .name = k, .type = ty, .offset = offsetof(T, m), .size = sizeof(((T *)0)->m), .flags = fl, .sdef = def }
#define NAMES(T, k, m, fl) \
        { .name = k, .type = K_NAMES, .offset = offsetof(T, m), .size = sizeof(((T *)0)->m), .flags = fl, .sdef = "" }
#define SECT(T, k, m, sec) \
        { .name = k, .type = K_SECTION, .offset = offsetof(T, m), .size = sizeof(((T *)0)->m), .sub = &sec }
#define KEYS(a) a, sizeof(a) / sizeof(a[0])

/* Named indices (SRC_*, OUT_*, ...) are the keys the cross-key checks look at. */
enum { SRC_TYPE, SRC_DEVICE, SRC_WIDTH, SRC_HEIGHT, SRC_FORMAT, SRC_FPS, SRC_IO, SRC_TIMEOUT,
       SRC_BACKOFF, SRC_PATH, SRC_PACE, SRC_LOOP, SRC_LATENCY, SRC_PROTOCOL, SRC_CONNECT_TIMEOUT };
static const struct key_desc source_keys[] = {
        [SRC_TYPE] = ENUM(struct zcp_source_config, "type", type, zcp_source_type_names, ZCP_SOURCE_TYPE_COUNT,
                          F_REQUIRED, ZCP_SOURCE_TYPE_COUNT),
        [SRC_DEVICE] = STR(struct zcp_source_config, "device", device, K_PATH, F_NONEMPTY | S_V4L2, "/dev/video0"),
        [SRC_WIDTH] = U32(struct zcp_source_config, "width", width, 16, 8192, F_ZERO_OK | F_EVEN | S_ALL, 0),
        [SRC_HEIGHT] = U32(struct zcp_source_config, "height", height, 16, 8192, F_ZERO_OK | F_EVEN | S_ALL, 0),
        [SRC_FORMAT] = ENUM(struct zcp_source_config, "format", format, zcp_pixfmt_names, ZCP_PIX_COUNT, S_V4L2,
                            ZCP_PIX_NONE),
        [SRC_FPS] = U32(struct zcp_source_config, "fps", fps, 1, 1000, S_V4L2 | S_SYNTH, 30),
        [SRC_IO] = ENUM(struct zcp_source_config, "io", io, zcp_v4l2_io_names, ZCP_IO_COUNT, S_V4L2, ZCP_IO_AUTO),
        [SRC_TIMEOUT] = U32(struct zcp_source_config, "timeout_ms", timeout_ms, 10, 600000, S_V4L2 | S_NET, 2000),
        [SRC_BACKOFF] = U32(struct zcp_source_config, "backoff_max_ms", backoff_max_ms, 10, 600000, S_V4L2 | S_NET, 5000),
        [SRC_PATH] = STR(struct zcp_source_config, "path", path, K_URIPATH, F_READ | S_FILE | S_NET, ""),
        [SRC_PACE] = ENUM(struct zcp_source_config, "pace", pace, zcp_pace_names, ZCP_PACE_COUNT, S_FILE | S_SYNTH,
             ZCP_PACE_REALTIME),
        [SRC_LOOP] = BOOL(struct zcp_source_config, "loop", loop, S_FILE, false),
        [SRC_LATENCY] = U32(struct zcp_source_config, "latency_ms", latency_ms, 0, 60000, S_NET, 200),
        [SRC_PROTOCOL] = ENUM(struct zcp_source_config, "protocol", protocol, zcp_net_protocol_names,
                              ZCP_NET_PROTOCOL_COUNT, S_NET, ZCP_NET_AUTO),
        [SRC_CONNECT_TIMEOUT] = U32(struct zcp_source_config, "connect_timeout_ms", connect_timeout_ms, 100, 600000,
                                    S_NET, 5000),
        U64(struct zcp_source_config, "frames", frames, 1, 1ull << 40, F_ZERO_OK | S_SYNTH, 0),
        U32(struct zcp_source_config, "box_size", box_size, 8, 1024, S_SYNTH, 64),
        U32(struct zcp_source_config, "speed", speed, 0, 256, S_SYNTH, 4),
        U32(struct zcp_source_config, "decoder_threads", decoder_threads, 1, 64, F_ZERO_OK | S_FILE | S_NET, 0),
};
static const struct section source_section = { "source", "source.", KEYS(source_keys), check_source };
_Static_assert(sizeof(source_keys) / sizeof(source_keys[0]) <= MAX_SECTION_KEYS, "largest table fits struct seen");

static const struct key_desc ring_keys[] = {
        U32(struct zcp_ring_config, "slots", slots, 2, 256, 0, 8),
        ENUM(struct zcp_ring_config, "drop", drop, zcp_drop_policy_names, ZCP_DROP_POLICY_COUNT, 0,
             ZCP_DROP_POLICY_AUTO),
};
static const struct section ring_section = { "ring", "ring.", KEYS(ring_keys), NULL };

static const struct key_desc gpu_keys[] = {
        ENUM(struct zcp_gpu_config, "backend", backend, zcp_backend_kind_names, ZCP_BACKEND_KIND_COUNT, 0,
             ZCP_BACKEND_AUTO),
        U32(struct zcp_gpu_config, "device", device, 0, 63, F_AUTO, ZCP_GPU_DEVICE_AUTO),
        ENUM(struct zcp_gpu_config, "transfer", transfer, zcp_transfer_names, ZCP_TRANSFER_COUNT, 0,
             ZCP_TRANSFER_AUTO),
        ENUM(struct zcp_gpu_config, "sync", sync, zcp_sync_names, ZCP_SYNC_COUNT, 0, ZCP_SYNC_HYBRID),
};
static const struct section gpu_section = { "gpu", "gpu.", KEYS(gpu_keys), NULL };

enum { MODEL_PATH, MODEL_WEIGHTS, MODEL_LABELS, MODEL_IN_W, MODEL_IN_H, MODEL_PIXELS, MODEL_MEAN, MODEL_STD,
       MODEL_RESIZE, MODEL_TOP_K, MODEL_MIN_SCORE, MODEL_NMS_IOU, MODEL_MAX_DET, MODEL_CLASSES };
static int check_model(struct ctx *c, void *base, const struct seen *s);
static const struct key_desc model_keys[] = {
        [MODEL_PATH] = STR(struct zcp_model_config, "path", path, K_PATH, F_WEIGHTS | F_READ, ""),   /* "" = the default */
        /* the name of model.path before models were TF.js graphs too: configs that say it still work */
        [MODEL_WEIGHTS] = STR(struct zcp_model_config, "weights", path, K_PATH, F_WEIGHTS | F_READ, ""),
        [MODEL_LABELS] = STR(struct zcp_model_config, "labels", labels, K_PATH, F_READ, ""),
        [MODEL_IN_W] = U32(struct zcp_model_config, "input_width", input_width, 8, 4096, F_ZERO_OK, 0),
        [MODEL_IN_H] = U32(struct zcp_model_config, "input_height", input_height, 8, 4096, F_ZERO_OK, 0),
        [MODEL_PIXELS] = ENUM(struct zcp_model_config, "pixels", pixels, zcp_model_pixels_names, ZCP_MPIX_COUNT, 0,
                              ZCP_MPIX_AUTO),
        [MODEL_MEAN] = FLT3(struct zcp_model_config, "mean", mean, -1e6, 1e6, F_MODEL, 0, 0, 0),
        [MODEL_STD] = FLT3(struct zcp_model_config, "std", std, 0, 1e6, F_MIN_EXCL | F_MODEL, 1, 1, 1),
        [MODEL_RESIZE] = ENUM(struct zcp_model_config, "resize", resize, zcp_resize_names, ZCP_RESIZE_COUNT, 0,
                              ZCP_RESIZE_STRETCH),
        [MODEL_TOP_K] = U32(struct zcp_model_config, "top_k", top_k, 1, ZCP_TOPK_MAX, 0, 5),
        [MODEL_MIN_SCORE] = FLT(struct zcp_model_config, "min_score", min_score, 0, 1, 0, 0.3),
        [MODEL_NMS_IOU] = FLT(struct zcp_model_config, "nms_iou", nms_iou, 0, 1, 0, 0.5),
        [MODEL_MAX_DET] = U32(struct zcp_model_config, "max_detections", max_detections, 1, ZCP_DET_MAX, 0, 20),
        [MODEL_CLASSES] = NAMES(struct zcp_model_config, "classes", classes, 0),
        BOOL(struct zcp_model_config, "enabled", enabled, 0, true),
        U32(struct zcp_model_config, "threads", threads, 1, 64, F_ZERO_OK, 0),
};
static const struct section model_section = { "model", "model.", KEYS(model_keys), check_model };

/* The model section: one of path and its old name; whether mean and std were given (else the model's own);
 * which of the head's keys were given (the other kind of head ignores them: a warning once the model is known). */
static int check_model(struct ctx *c, void *base, const struct seen *s)
{
        struct zcp_model_config *m = base;

        if ((s->mask & (1u << MODEL_PATH)) && (s->mask & (1u << MODEL_WEIGHTS)))
                return err_at(c, &s->key[MODEL_WEIGHTS]->mark,
                              "model.weights is the old name of model.path: give one of them");
        m->mean_set = (s->mask & (1u << MODEL_MEAN)) != 0;
        m->std_set = (s->mask & (1u << MODEL_STD)) != 0;
        m->head_keys = ((s->mask >> MODEL_TOP_K) & 1u ? ZCP_MKEY_TOP_K : 0) |
                       ((s->mask >> MODEL_MIN_SCORE) & 1u ? ZCP_MKEY_MIN_SCORE : 0) |
                       ((s->mask >> MODEL_NMS_IOU) & 1u ? ZCP_MKEY_NMS_IOU : 0) |
                       ((s->mask >> MODEL_MAX_DET) & 1u ? ZCP_MKEY_MAX_DETECTIONS : 0) |
                       ((s->mask >> MODEL_CLASSES) & 1u ? ZCP_MKEY_CLASSES : 0);
        return 0;
}

static const struct key_desc motion_keys[] = {
        BOOL(struct zcp_motion_config, "enabled", enabled, 0, true),
        U32(struct zcp_motion_config, "cell", cell, 2, 256, 0, 16),
        FLT(struct zcp_motion_config, "threshold", threshold, 0, 255, 0, 12.0),
        FLT(struct zcp_motion_config, "alpha", alpha, 0, 1, F_MIN_EXCL, 0.05),
};
static const struct section motion_section = { "motion", "motion.", KEYS(motion_keys), NULL };

static const struct key_desc convert_keys[] = {
        U32(struct zcp_convert_config, "threads", threads, 1, 64, F_ZERO_OK, 0),
};
static const struct section convert_section = { "convert", "convert.", KEYS(convert_keys), NULL };

enum { OUT_TYPE, OUT_PATH, OUT_MQTT_FIRST, OUT_CERT = OUT_MQTT_FIRST + 11, OUT_KEY, OUT_USER, OUT_PASSWORD };
static const struct key_desc output_keys[] = {
        [OUT_TYPE] = ENUM(struct zcp_output_config, "type", type, zcp_output_type_names, ZCP_OUTPUT_TYPE_COUNT, 0,
                          ZCP_OUTPUT_STDOUT),
        [OUT_PATH] = STR(struct zcp_output_config, "path", path, K_PATH, 0, ""),
        /* From OUT_MQTT_FIRST on: type mqtt only (check_output). */
        STR(struct zcp_output_config, "broker", mqtt.broker, K_STR, F_NONEMPTY, "127.0.0.1"),
        U32(struct zcp_output_config, "port", mqtt.port, 1, 65535, 0, 1883),
        STR(struct zcp_output_config, "client_id", mqtt.client_id, K_STR, F_NONEMPTY, ""),
        STR(struct zcp_output_config, "host_name", mqtt.host_name, K_STR, F_NONEMPTY | F_NAME, ""),
        STR(struct zcp_output_config, "topic", mqtt.topic, K_STR, F_NONEMPTY, "zcpipe/<host>/<stream>/results"),
        STR(struct zcp_output_config, "availability_topic", mqtt.availability_topic, K_STR, F_NONEMPTY,
            "zcpipe/<host>/<stream>/status"),
        U32(struct zcp_output_config, "qos", mqtt.qos, 0, 1, 0, 1),
        U32(struct zcp_output_config, "keepalive_s", mqtt.keepalive_s, 5, 3600, 0, 30),
        U32(struct zcp_output_config, "queue", mqtt.queue, 1, 1000000, 0, 1000),
        U32(struct zcp_output_config, "backoff_max_ms", mqtt.backoff_max_ms, 100, 600000, 0, 10000),
        STR(struct zcp_output_config, "ca_file", mqtt.ca_file, K_PATH, F_NONEMPTY | F_READ, ""),
        [OUT_CERT] = STR(struct zcp_output_config, "cert_file", mqtt.cert_file, K_PATH, F_NONEMPTY | F_READ, ""),
        [OUT_KEY] = STR(struct zcp_output_config, "key_file", mqtt.key_file, K_PATH, F_NONEMPTY | F_READ, ""),
        [OUT_USER] = STR(struct zcp_output_config, "username", mqtt.username, K_STR, F_NONEMPTY, ""),
        [OUT_PASSWORD] = STR(struct zcp_output_config, "password_file", mqtt.password_file, K_PATH, F_NONEMPTY | F_SECRET,
                             ""),
};
static const struct section output_section = { "output", "output.", KEYS(output_keys), check_output };

static const struct key_desc stream_keys[] = {
        [STREAM_NAME] = STR(struct zcp_stream_config, "name", name, K_STR, F_NONEMPTY | F_NAME, ""),
        [STREAM_SOURCE] = SECT(struct zcp_stream_config, "source", source, source_section),
        SECT(struct zcp_stream_config, "ring", ring, ring_section),
        SECT(struct zcp_stream_config, "gpu", gpu, gpu_section),
        SECT(struct zcp_stream_config, "model", model, model_section),
        SECT(struct zcp_stream_config, "motion", motion, motion_section),
        SECT(struct zcp_stream_config, "output", output, output_section),
        SECT(struct zcp_stream_config, "convert", convert, convert_section),
        ENUM(struct zcp_stream_config, "restart", restart, zcp_restart_names, ZCP_RESTART_COUNT, 0,
             ZCP_RESTART_ON_FAILURE),
        U32(struct zcp_stream_config, "restart_backoff_max_ms", restart_backoff_max_ms, 1000, 3600000, 0, 30000),
};
const struct section zcp_config_stream_section = { "stream", "", KEYS(stream_keys), NULL };

enum { HTTP_ENABLED, HTTP_LISTEN, HTTP_PORT, HTTP_ALLOW };
static const struct key_desc http_keys[] = {
        [HTTP_ENABLED] = BOOL(struct zcp_http_config, "enabled", enabled, 0, HAVE_HTTP),
        [HTTP_LISTEN] = STR(struct zcp_http_config, "listen", listen, K_STR, F_NONEMPTY, "127.0.0.1"),
        [HTTP_PORT] = U32(struct zcp_http_config, "port", port, 1, 65535, 0, 9464),
        [HTTP_ALLOW] = BOOL(struct zcp_http_config, "allow_non_loopback", allow_non_loopback, 0, false),
        U32(struct zcp_http_config, "max_connections", max_connections, 1, 1024, 0, 16),
        U32(struct zcp_http_config, "timeout_s", timeout_s, 1, 3600, 0, 5),
        U32(struct zcp_http_config, "snapshot_fps", snapshot_fps, 0, 30, 0, 2),
        ENUM(struct zcp_http_config, "healthz", healthz, zcp_healthz_names, ZCP_HEALTHZ_COUNT, 0,
             ZCP_HEALTHZ_ANY_DOWN),
        ENUM(struct zcp_http_config, "page", page, zcp_http_page_names, ZCP_HTTP_PAGE_COUNT, 0, ZCP_HTTP_PAGE_AUTO),
        STR(struct zcp_http_config, "auth_file", auth_file, K_PATH, 0, ""),
        U32(struct zcp_http_config, "max_requests_per_s", max_requests_per_s, 1, 100000, 0, 100),
};
static const struct section http_section = { "metrics.http", "metrics.http.", KEYS(http_keys), check_http };

static const struct key_desc frame_log_keys[] = {
        STR(struct zcp_frame_log_config, "path", path, K_PATH, 0, ""),
        U64(struct zcp_frame_log_config, "max_bytes", max_bytes, 4096, 1ull << 40, 0, 64ull << 20),
        U32(struct zcp_frame_log_config, "keep", keep, 1, 100, 0, 3),
};
static const struct section frame_log_section = { "metrics.frame_log", "metrics.frame_log.",
                                                  KEYS(frame_log_keys), NULL };

static const struct key_desc metrics_keys[] = {
        SECT(struct zcp_metrics_config, "http", http, http_section),
        SECT(struct zcp_metrics_config, "frame_log", frame_log, frame_log_section),
};
static const struct section metrics_section = { "metrics", "metrics.", KEYS(metrics_keys), NULL };

static const struct key_desc log_keys[] = {
        ENUM(struct zcp_log_config, "level", level, zcp_log_level_names, ZCP_LOG_LEVEL_COUNT, 0, ZCP_LOG_INFO),
        U32(struct zcp_log_config, "summary_interval_s", summary_interval_s, 0, 86400, 0, 10),
};
static const struct section log_section = { "log", "log.", KEYS(log_keys), NULL };

static const struct key_desc top_keys[] = {
        [TOP_STREAMS] = { .name = "streams", .type = K_STREAMS, .sub = &zcp_config_stream_section },
        SECT(struct zcp_config, "metrics", metrics, metrics_section),
        SECT(struct zcp_config, "log", log, log_section),
        U64(struct zcp_config, "pinned_budget", pinned_budget, 1ull << 20, 1ull << 50, F_ZERO_OK | F_SIZE, 0),
};
const struct section zcp_config_top_section = { "the top level", "", KEYS(top_keys), NULL };

/* ---- defaults --------------------------------------------------------------- */

/* Every key of `sec` (and of its sections) gets its default from the table. */
static void apply_defaults(const struct section *sec, void *base)
{
        for (size_t i = 0; i < sec->count; i++) {
                const struct key_desc *d = &sec->keys[i];
                char *field = (char *)base + d->offset;
                float f3[3] = { (float)d->fdef[0], (float)d->fdef[1], (float)d->fdef[2] };
                uint32_t u32 = (uint32_t)d->udef;
                int idx = (int)d->udef;
                bool b = d->udef != 0;

                switch (d->type) {
                case K_U32:
                        memcpy(field, &u32, sizeof(u32));
                        break;
                case K_U64:
                        memcpy(field, &d->udef, sizeof(d->udef));
                        break;
                case K_FLOAT:
                        memcpy(field, f3, sizeof(float));
                        break;
                case K_FLOAT3:
                        memcpy(field, f3, sizeof(f3));
                        break;
                case K_BOOL:
                        memcpy(field, &b, sizeof(b));
                        break;
                case K_ENUM:
                        memcpy(field, &idx, sizeof(idx));
                        break;
                case K_STR:
                case K_PATH:
                case K_URIPATH:
                case K_NAMES:
                        set_str(field, d->size, d->flags & F_WEIGHTS ? zcp_config_default_weights() : d->sdef ? d->sdef : "");
                        break;
                case K_SECTION:
                        apply_defaults(d->sub, field);
                        break;
                case K_STREAMS:
                        break;   /* each stream gets its defaults as it is parsed */
                }
        }
}

void zcp_config_stream_defaults(struct zcp_stream_config *s)
{
        memset(s, 0, sizeof(*s));
        apply_defaults(&zcp_config_stream_section, s);
}

void zcp_config_defaults(struct zcp_config *cfg)
{
        apply_defaults(&zcp_config_top_section, cfg);
}

/* ---- cross-key rules -------------------------------------------------------- */

static unsigned source_bit(enum zcp_source_type t)
{
        static const unsigned bit[ZCP_SOURCE_TYPE_COUNT] = {
                [ZCP_SOURCE_V4L2] = S_V4L2,
                [ZCP_SOURCE_FILE] = S_FILE,
                [ZCP_SOURCE_SYNTHETIC] = S_SYNTH,
                [ZCP_SOURCE_NETWORK] = S_NET,
        };

        return (unsigned)t < ZCP_SOURCE_TYPE_COUNT ? bit[t] : 0;
}

/*
 * The source section: its type, the keys of other types (each one an error,
 * so that a changed type shows them all at once), and the path each type
 * takes. A file source reads local files only: a URL there (http://,
 * rtsp://...) is refused with the fix, type network, which reconnects after
 * an outage and counts it; a file source would take a server's restart for a
 * missing file and fail for good.
 */
static int check_source(struct ctx *c, void *base, const struct seen *s)
{
        const struct zcp_source_config *src = base;
        const char *scheme_end;
        int r = 0;

        if (!(s->mask & (1u << SRC_TYPE)))
                return err_at(c, &s->at, "source.type is required (v4l2, file, synthetic or network)");
        if ((src->type == ZCP_SOURCE_FILE || src->type == ZCP_SOURCE_NETWORK) && src->path[0] == '\0')
                r = err_at(c, &s->key[SRC_TYPE]->mark, "source.type %s requires source.path",
                           zcp_source_type_names[src->type]);
        for (size_t i = 0; i < sizeof(source_keys) / sizeof(source_keys[0]); i++) {
                unsigned applies = source_keys[i].flags & S_ALL;
                char types[64] = "";

                if (!(s->mask & (1u << i)) || !applies || (applies & source_bit(src->type)))
                        continue;
                for (int t = 0; t < ZCP_SOURCE_TYPE_COUNT; t++)
                        if (applies & source_bit((enum zcp_source_type)t))
                                snprintf(types + strlen(types), sizeof(types) - strlen(types), "%s%s",
                                         types[0] ? ", " : "", zcp_source_type_names[t]);
                r = err_at(c, &s->key[i]->mark, "source.%s does not apply to source.type %s (only to: %s)",
                           source_keys[i].name, zcp_source_type_names[src->type], types);
        }
        if (r < 0 || !(s->mask & (1u << SRC_PATH)))
                return r;
        scheme_end = strstr(src->path, "://");
        if (src->type == ZCP_SOURCE_FILE && scheme_end && strncasecmp(src->path, "file://", 7) != 0)
                return err_at(c, &s->val[SRC_PATH]->mark,
                              "source.path '%s' is a URL, and type file reads local files (and file:// URIs): "
                              "use type: network, which reconnects after an outage and counts it",
                              show(src->path, strlen(src->path)).s);
        if (src->type != ZCP_SOURCE_NETWORK)
                return 0;
        if (!scheme_end)
                return err_at(c, &s->val[SRC_PATH]->mark,
                              "source.path of type network is a URL (rtsp://, udp://, http://...)");
        if (src->protocol != ZCP_NET_AUTO && strncmp(src->path, "rtsp", 4) != 0)
                return err_at(c, &s->val[SRC_PROTOCOL]->mark, "source.protocol applies to rtsp:// URLs only");
        return 0;
}

/* A topic template: no MQTT wildcards, and only the <host> and <stream> placeholders. */
static const char *topic_problem(const char *t)
{
        if (strpbrk(t, "+#"))
                return "must not contain the MQTT wildcards + or #";
        for (const char *p = strchr(t, '<'); p; p = strchr(p + 1, '<'))
                if (strncmp(p, "<host>", 6) != 0 && strncmp(p, "<stream>", 8) != 0)
                        return "may hold only the placeholders <host> and <stream>";
        return NULL;
}

static int check_output(struct ctx *c, void *base, const struct seen *s)
{
        const struct zcp_output_config *out = base;
        const struct zcp_mqtt_config *m = &out->mqtt;
        const char *why;
        int r = 0;

        if ((out->type == ZCP_OUTPUT_FILE || out->type == ZCP_OUTPUT_UNIX) && out->path[0] == '\0')
                r = err_at(c, &s->key[OUT_TYPE]->mark, "output.type %s requires output.path",
                           zcp_output_type_names[out->type]);
        if (out->type == ZCP_OUTPUT_MQTT && (s->mask & (1u << OUT_PATH)))
                return err_at(c, &s->key[OUT_PATH]->mark, "output.path does not apply to output.type mqtt");
        for (size_t j = OUT_MQTT_FIRST; j < sizeof(output_keys) / sizeof(output_keys[0]); j++)
                if (out->type != ZCP_OUTPUT_MQTT && (s->mask & (1u << j)))
                        r = err_at(c, &s->key[j]->mark, "output.%s applies only to output.type mqtt, not %s",
                                   output_keys[j].name, zcp_output_type_names[out->type]);
        if (out->type != ZCP_OUTPUT_MQTT)
                return r;
        if ((why = topic_problem(m->topic)) != NULL)
                return err_at(c, &s->at, "output.topic '%s' %s", show(m->topic, strlen(m->topic)).s, why);
        if ((why = topic_problem(m->availability_topic)) != NULL)
                return err_at(c, &s->at, "output.availability_topic '%s' %s",
                              show(m->availability_topic, strlen(m->availability_topic)).s, why);
        if (!m->cert_file[0] != !m->key_file[0])
                return err_at(c, &s->key[m->cert_file[0] ? OUT_CERT : OUT_KEY]->mark,
                              "output.cert_file and output.key_file go together");
        if (m->cert_file[0] && !m->ca_file[0])
                return err_at(c, &s->key[OUT_CERT]->mark, "output.cert_file needs output.ca_file (TLS)");
        if (m->password_file[0] && !m->username[0])
                return err_at(c, &s->key[OUT_PASSWORD]->mark, "output.password_file needs output.username");
        return 0;
}

static bool is_loopback(const char *addr)
{
        struct in_addr a4;
        struct in6_addr a6;

        if (strcmp(addr, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, addr, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, addr, &a6) == 1) {
                if (IN6_IS_ADDR_LOOPBACK(&a6))
                        return true;
                return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
        }
        return false;
}

static int check_http(struct ctx *c, void *base, const struct seen *s)
{
        const struct zcp_http_config *http = base;

        if (!http->allow_non_loopback && !is_loopback(http->listen))
                return err_at(c, &s->key[HTTP_LISTEN]->mark,
                              "metrics.http.listen '%s' is not a loopback address (127.0.0.0/8, ::1, localhost); "
                              "set allow_non_loopback: true to expose metrics",
                              show(http->listen, strlen(http->listen)).s);
        return 0;
}

/* ---- the schema, for tests and documentation -------------------------------- */

static void key_default_text(const struct key_desc *d, char *buf, size_t size)
{
        buf[0] = '\0';
        switch (d->type) {
        case K_U32:
        case K_U64:
                if ((d->flags & F_AUTO) && d->udef == UINT32_MAX)
                        snprintf(buf, size, "auto");
                else
                        snprintf(buf, size, "%llu", (unsigned long long)d->udef);
                break;
        case K_FLOAT:
                snprintf(buf, size, "%g", d->fdef[0]);
                break;
        case K_FLOAT3:
                if (d->flags & F_MODEL)
                        snprintf(buf, size, "model");
                else
                        snprintf(buf, size, "[%g, %g, %g]", d->fdef[0], d->fdef[1], d->fdef[2]);
                break;
        case K_NAMES:
                snprintf(buf, size, "[]");
                break;
        case K_BOOL:
                snprintf(buf, size, "%s", d->udef ? "true" : "false");
                break;
        case K_ENUM:
                if (d->udef < (uint64_t)d->count)
                        snprintf(buf, size, "%s", d->names[d->udef]);
                break;
        case K_STR:
        case K_PATH:
        case K_URIPATH:
                snprintf(buf, size, "%s", d->sdef ? d->sdef : "");
                break;
        case K_SECTION:
        case K_STREAMS:
                break;
        }
}

/* 2^k for the powers of two from 2^20 up (limits like 2^40 bytes), else the number. */
static int number_text(char *buf, size_t size, uint64_t v)
{
        if (v >= (1ull << 20) && (v & (v - 1)) == 0)
                return snprintf(buf, size, "2^%d", __builtin_ctzll(v));
        return snprintf(buf, size, "%llu", (unsigned long long)v);
}

static void key_range_text(const struct key_desc *d, char *buf, size_t size)
{
        char lo[32], hi[32];
        size_t n = 0;

        buf[0] = '\0';
        switch (d->type) {
        case K_U32:
        case K_U64:
                number_text(lo, sizeof(lo), d->umin);
                number_text(hi, sizeof(hi), d->umax);
                snprintf(buf, size, "%s%s..%s%s%s%s", d->flags & F_AUTO ? "auto | " : "", lo, hi,
                         d->flags & F_EVEN ? ", even" : "",
                         d->flags & F_ZERO_OK ? ", or 0" : "",
                         d->flags & F_SIZE ? "; bytes, or with a suffix K, M, G, T (powers of 1024)" : "");
                break;
        case K_FLOAT:
        case K_FLOAT3:
                snprintf(buf, size, "%s%c%g, %g]", d->type == K_FLOAT3 ? "3 numbers, each in " : "",
                         d->flags & F_MIN_EXCL ? '(' : '[', d->fmin, d->fmax);
                break;
        case K_BOOL:
                snprintf(buf, size, "true | false");
                break;
        case K_ENUM:
                for (int i = 0; i < d->count && n < size; i++)
                        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? " | " : "", d->names[i]);
                break;
        case K_NAMES:
                snprintf(buf, size, "a list of names");
                break;
        case K_STR:
                if (d->flags & F_NAME)
                        snprintf(buf, size, "[A-Za-z0-9_.-]+");
                else if (d->flags & F_NONEMPTY)
                        snprintf(buf, size, "not empty");
                break;
        case K_PATH:
        case K_URIPATH:
        case K_SECTION:
        case K_STREAMS:
                break;
        }
}

static void keys_walk(const struct section *sec, const char *prefix,
                      void (*fn)(const struct zcp_config_key *key, void *userdata), void *userdata)
{
        static const char *const type_names[] = {
                [K_U32] = "uint",  [K_U64] = "uint",     [K_FLOAT] = "float",   [K_BOOL] = "bool",
                [K_ENUM] = "enum", [K_STR] = "string",   [K_PATH] = "path",     [K_URIPATH] = "path",
                [K_FLOAT3] = "float3", [K_NAMES] = "names", [K_SECTION] = "section", [K_STREAMS] = "streams",
        };

        for (size_t i = 0; i < sec->count; i++) {
                const struct key_desc *d = &sec->keys[i];
                struct zcp_config_key k = {
                        .name = d->name,
                        .type = type_names[d->type],
                        .required = (d->flags & F_REQUIRED) != 0,
                        .sources = 0,
                };

                snprintf(k.path, sizeof(k.path), "%s%s", prefix, d->name);
                key_default_text(d, k.def, sizeof(k.def));
                key_range_text(d, k.range, sizeof(k.range));
                k.reads_file = (d->flags & (F_READ | F_SECRET)) != 0;
                for (int t = 0; t < ZCP_SOURCE_TYPE_COUNT; t++)
                        if (!(d->flags & S_ALL) || (d->flags & source_bit((enum zcp_source_type)t)))
                                k.sources |= 1u << t;
                fn(&k, userdata);
                if (d->sub) {
                        char sub[sizeof(k.path) + 1];

                        snprintf(sub, sizeof(sub), "%s.", k.path);
                        keys_walk(d->sub, sub, fn, userdata);
                }
        }
}

void zcp_config_keys_foreach(void (*fn)(const struct zcp_config_key *key, void *userdata), void *userdata)
{
        keys_walk(&zcp_config_top_section, "", fn, userdata);
}
