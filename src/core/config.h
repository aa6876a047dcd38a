/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * The configuration: one YAML file (libyaml), parsed by one table-driven
 * parser into plain structs. The parser's key tables (config.c) are the
 * schema: each key's type, range, default and the source types it applies to
 * (zcp_config_keys_foreach() lists them). Unknown, duplicate, mistyped and
 * out-of-range keys, and source keys of another source type, are errors,
 * each reported as one line "FILE:LINE:COL: message" (exit code
 * ZCP_EXIT_CONFIG = 78 in main); one load reports every error of the file,
 * up to ZCP_CONFIG_MAX_ERRORS.
 *
 * Relative paths in the file are resolved against the file's directory at
 * load time, so the struct always holds usable paths.
 *
 * Ownership: zcp_config_load() returns a heap struct the caller frees with
 * zcp_config_free(). It is immutable once loaded; SIGHUP builds a new one.
 * Main thread.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "core/pixfmt.h"

#define ZCP_CONFIG_MAX_STREAMS 16
#define ZCP_CONFIG_MAX_BYTES   (1u << 20)  /* files larger than 1 MiB are refused */
#define ZCP_PATH_MAX           1024
#define ZCP_NAME_MAX           64
#define ZCP_CONFIG_MAX_ERRORS  20          /* a load reports at most this many errors, then stops */
#define ZCP_CONFIG_ERRBUF      8192        /* an errbuf that holds them all */

enum zcp_source_type { ZCP_SOURCE_V4L2, ZCP_SOURCE_FILE, ZCP_SOURCE_SYNTHETIC, ZCP_SOURCE_NETWORK, ZCP_SOURCE_TYPE_COUNT };
extern const char *const zcp_source_type_names[ZCP_SOURCE_TYPE_COUNT];   /* "v4l2", "file", "synthetic", "network" */

enum zcp_pace { ZCP_PACE_REALTIME, ZCP_PACE_FAST, ZCP_PACE_COUNT };
extern const char *const zcp_pace_names[ZCP_PACE_COUNT];                 /* "realtime", "fast" */

enum zcp_v4l2_io { ZCP_IO_AUTO, ZCP_IO_USERPTR, ZCP_IO_MMAP, ZCP_IO_COUNT };
extern const char *const zcp_v4l2_io_names[ZCP_IO_COUNT];                /* "auto", "userptr", "mmap" */

enum zcp_net_protocol { ZCP_NET_AUTO, ZCP_NET_TCP, ZCP_NET_UDP, ZCP_NET_PROTOCOL_COUNT };
extern const char *const zcp_net_protocol_names[ZCP_NET_PROTOCOL_COUNT];  /* "auto", "tcp", "udp" */

enum zcp_drop_policy { ZCP_DROP_POLICY_AUTO, ZCP_DROP_POLICY_NEWEST, ZCP_DROP_POLICY_BLOCK, ZCP_DROP_POLICY_COUNT };
extern const char *const zcp_drop_policy_names[ZCP_DROP_POLICY_COUNT];   /* "auto", "newest", "block" */

enum zcp_backend_kind { ZCP_BACKEND_AUTO, ZCP_BACKEND_CUDA, ZCP_BACKEND_CPU, ZCP_BACKEND_KIND_COUNT };
extern const char *const zcp_backend_kind_names[ZCP_BACKEND_KIND_COUNT]; /* "auto", "cuda", "cpu" */

enum zcp_transfer { ZCP_TRANSFER_AUTO, ZCP_TRANSFER_ZERO_COPY, ZCP_TRANSFER_COPY, ZCP_TRANSFER_COUNT };
extern const char *const zcp_transfer_names[ZCP_TRANSFER_COUNT];         /* "auto", "zero-copy", "copy" */

enum zcp_sync { ZCP_SYNC_SPIN, ZCP_SYNC_YIELD, ZCP_SYNC_BLOCK, ZCP_SYNC_HYBRID, ZCP_SYNC_COUNT };
extern const char *const zcp_sync_names[ZCP_SYNC_COUNT];                 /* "spin", "yield", "block", "hybrid" */

enum zcp_output_type { ZCP_OUTPUT_STDOUT, ZCP_OUTPUT_FILE, ZCP_OUTPUT_UNIX, ZCP_OUTPUT_NONE, ZCP_OUTPUT_MQTT,
                       ZCP_OUTPUT_TYPE_COUNT };
extern const char *const zcp_output_type_names[ZCP_OUTPUT_TYPE_COUNT];   /* "stdout", "file", "unix", "none", "mqtt" */

/* What the supervisor (daemon/supervisor.h) does when a stream ends: restart it after a failure, always, never. */
enum zcp_restart { ZCP_RESTART_ON_FAILURE, ZCP_RESTART_ALWAYS, ZCP_RESTART_NEVER, ZCP_RESTART_COUNT };
extern const char *const zcp_restart_names[ZCP_RESTART_COUNT];           /* "on-failure", "always", "never" */

/* The live page (/, its snapshots, /api/latency): on, off, or on only while listening on loopback. */
enum zcp_http_page { ZCP_HTTP_PAGE_AUTO, ZCP_HTTP_PAGE_ON, ZCP_HTTP_PAGE_OFF, ZCP_HTTP_PAGE_COUNT };
extern const char *const zcp_http_page_names[ZCP_HTTP_PAGE_COUNT];       /* "auto", "on", "off" */

/* /healthz status code: 503 when any stream is not up, or only when none is. */
enum zcp_healthz { ZCP_HEALTHZ_ANY_DOWN, ZCP_HEALTHZ_ALL_DOWN, ZCP_HEALTHZ_COUNT };
extern const char *const zcp_healthz_names[ZCP_HEALTHZ_COUNT];           /* "any-down", "all-down" */

struct zcp_source_config {
        enum zcp_source_type type;          /* required */
        /* v4l2 */
        char device[ZCP_PATH_MAX];          /* default "/dev/video0" */
        enum zcp_pixfmt format;             /* default ZCP_PIX_NONE = "auto" */
        uint32_t fps;                       /* default 30, 1..1000 */
        enum zcp_v4l2_io io;                /* default auto */
        uint32_t timeout_ms;                /* default 2000, 10..600000: no frame for this long = re-init (v4l2, network) */
        uint32_t backoff_max_ms;            /* default 5000, 10..600000 (v4l2, network) */
        /* v4l2 and synthetic: requested geometry; file: 0 = the file's own (must match if set) */
        uint32_t width, height;             /* default 0 (v4l2: 640x480, synthetic: 640x480), even, 16..8192 */
        /* file */
        char path[ZCP_PATH_MAX];            /* file: required; a path or a URI (scheme://); network: required URL */
        enum zcp_pace pace;                 /* default realtime */
        bool loop;                          /* default false */
        /* file and network: threads each GStreamer decoder of the stream may use */
        uint32_t decoder_threads;           /* default 0 = auto (gst.c: CPUs / gst_streams, at least 1), 1..64 */
        uint32_t gst_streams;               /* not a key: file and network streams in the whole config (>= 1) */
        /* network (an error for other types) */
        uint32_t latency_ms;                /* default 200, 0..60000: jitter buffer */
        enum zcp_net_protocol protocol;     /* default auto (rtsp: UDP, then TCP); tcp/udp for rtsp:// only */
        uint32_t connect_timeout_ms;        /* default 5000, 100..600000: connect + first frame */
        /* synthetic */
        uint64_t frames;                    /* default 0 = endless (synthetic); 1..2^40 */
        uint32_t box_size;                  /* default 64, 8..1024: side of the moving square */
        uint32_t speed;                     /* default 4, 0..256: pixels per frame */
};

struct zcp_ring_config {
        uint32_t slots;                     /* default 8, 2..256 */
        enum zcp_drop_policy drop;          /* default auto: v4l2 -> newest, file/synthetic -> block */
};

/* gpu.device: auto, the supervisor's placement (daemon/placement.h) picks the GPU when the stream opens. */
#define ZCP_GPU_DEVICE_AUTO UINT32_MAX

struct zcp_gpu_config {
        enum zcp_backend_kind backend;      /* default auto */
        uint32_t device;                    /* default auto (ZCP_GPU_DEVICE_AUTO), or 0..63: pinned to that GPU */
        enum zcp_transfer transfer;         /* default auto */
        enum zcp_sync sync;                 /* default hybrid */
};

/* How a frame is fitted to the model input: stretched, or scaled to fit with its aspect kept (black bars). */
enum zcp_resize { ZCP_RESIZE_STRETCH, ZCP_RESIZE_LETTERBOX, ZCP_RESIZE_COUNT };
extern const char *const zcp_resize_names[ZCP_RESIZE_COUNT];             /* "stretch", "letterbox" */

/* The input's pixel values: the model's own choice, 0..1 or 0..255. */
enum zcp_model_pixels { ZCP_MPIX_AUTO, ZCP_MPIX_UNIT, ZCP_MPIX_BYTE, ZCP_MPIX_COUNT };
extern const char *const zcp_model_pixels_names[ZCP_MPIX_COUNT];         /* "auto", "unit", "byte" */

#define ZCP_CLASSES_MAX 1024                /* bytes of model.classes, comma-joined */

/* The model keys one kind of head uses (zcp_model_config.head_keys): what the other kind ignores. */
enum {
        ZCP_MKEY_TOP_K = 1u << 0,            /* classifiers */
        ZCP_MKEY_MIN_SCORE = 1u << 1,        /* detectors, as are the three below */
        ZCP_MKEY_NMS_IOU = 1u << 2,
        ZCP_MKEY_MAX_DETECTIONS = 1u << 3,
        ZCP_MKEY_CLASSES = 1u << 4,
};

struct zcp_model_config {
        char path[ZCP_PATH_MAX];            /* default: the installed CenterNet (centernet/model.json); .json:
                                             * a TF.js graph model, else zcnet .safetensors */
        char labels[ZCP_PATH_MAX];          /* default "": labels.txt beside a model.json, if there is one */
        uint32_t input_width, input_height; /* default 0 = the model's own (zcnet: 224 x 224), 8..4096 */
        enum zcp_model_pixels pixels;       /* default auto: the model's (TF.js: byte, zcnet: unit) */
        bool mean_set, std_set;             /* not keys: whether mean / std were given */
        uint32_t head_keys;                 /* not a key: which head keys were given, ZCP_MKEY_* bits */
        float mean[3];                      /* default: the model's (TF.js 0 0 0, zcnet 0.485 0.456 0.406) */
        float std[3];                       /* default: the model's (TF.js 1 1 1, zcnet 0.229 0.224 0.225), > 0 */
        enum zcp_resize resize;             /* default stretch */
        uint32_t top_k;                     /* classifiers: default 5, 1..ZCP_TOPK_MAX */
        float min_score;                    /* detectors: default 0.3, 0..1 */
        float nms_iou;                      /* detectors: default 0.5, 0..1 */
        uint32_t max_detections;            /* detectors: default 20, 1..ZCP_DET_MAX (100) */
        char classes[ZCP_CLASSES_MAX];      /* detectors: default "" = all; labels or class numbers, ',' between */
        bool enabled;                       /* default true; false runs motion only */
        uint32_t threads;                   /* default 0 = auto (CPU backend: half the CPUs, 1..4), 1..64 */
};

struct zcp_motion_config {
        bool enabled;                       /* default true */
        uint32_t cell;                      /* default 16, 2..256 */
        float threshold;                    /* default 12.0, 0..255 */
        float alpha;                        /* default 0.05, (0,1] */
};

/* output type mqtt (src/output/mqtt.c). Topic templates expand <host> and <stream>. */
struct zcp_mqtt_config {
        char broker[256];                   /* default "127.0.0.1": host name or address */
        uint32_t port;                      /* default 1883, 1..65535 */
        char client_id[ZCP_NAME_MAX * 2];   /* default "" = "zcpipe-<host>-<stream>" */
        char host_name[ZCP_NAME_MAX];       /* default "" = gethostname(); [A-Za-z0-9_.-]+ */
        char topic[256];                    /* default "zcpipe/<host>/<stream>/results" */
        char availability_topic[256];       /* default "zcpipe/<host>/<stream>/status": retained online/offline */
        uint32_t qos;                       /* default 1, 0..1 */
        uint32_t keepalive_s;               /* default 30, 5..3600 */
        uint32_t queue;                     /* default 1000, 1..1000000 results held while unreachable */
        uint32_t backoff_max_ms;            /* default 10000, 100..600000: reconnect back-off cap */
        char ca_file[ZCP_PATH_MAX];         /* default "" = plain TCP; set = TLS verified against it */
        char cert_file[ZCP_PATH_MAX];       /* client certificate (with key_file), TLS only */
        char key_file[ZCP_PATH_MAX];
        char username[ZCP_NAME_MAX * 2];    /* default "" = anonymous */
        char password_file[ZCP_PATH_MAX];   /* first line is the password; mode must deny group/other */
};

struct zcp_output_config {
        enum zcp_output_type type;          /* default stdout */
        char path[ZCP_PATH_MAX];            /* file path or unix socket path; required for file/unix */
        struct zcp_mqtt_config mqtt;        /* type mqtt only: its keys are errors with other types */
        char stream[ZCP_NAME_MAX];          /* not a key: the stream's name, set by the parser for the sink */
};

struct zcp_convert_config {
        uint32_t threads;                   /* default 0 = auto (by frame size, zcp_convert_auto_threads), 1..64 */
};

struct zcp_stream_config {
        char name[ZCP_NAME_MAX];            /* default "stream<i>", [A-Za-z0-9_.-]+, unique */
        struct zcp_source_config source;
        struct zcp_ring_config ring;
        struct zcp_gpu_config gpu;
        struct zcp_model_config model;
        struct zcp_motion_config motion;
        struct zcp_output_config output;
        struct zcp_convert_config convert;
        enum zcp_restart restart;           /* default on-failure */
        uint32_t restart_backoff_max_ms;    /* default 30000, 1000..3600000: cap of the restart back-off */
};

struct zcp_http_config {
        bool enabled;                       /* default true (when built with http) */
        char listen[64];                    /* default "127.0.0.1" */
        uint32_t port;                      /* default 9464, 1..65535 */
        bool allow_non_loopback;            /* default false */
        uint32_t max_connections;           /* default 16, 1..1024 */
        uint32_t timeout_s;                 /* default 5, 1..3600 */
        uint32_t snapshot_fps;              /* default 2, 0..30: live page snapshots a second, 0 = none */
        enum zcp_healthz healthz;           /* default any-down */
        enum zcp_http_page page;            /* default auto: on while listen is a loopback address, else off */
        char auth_file[ZCP_PATH_MAX];       /* default "": the page asks for no credential; else its first line */
        uint32_t max_requests_per_s;        /* default 100, 1..100000: answered a second; the others wait */
};

struct zcp_frame_log_config {
        char path[ZCP_PATH_MAX];            /* default "" = off */
        uint64_t max_bytes;                 /* default 64 MiB, 4096..2^40 */
        uint32_t keep;                      /* default 3, 1..100 rotated files */
};

struct zcp_metrics_config {
        struct zcp_http_config http;
        struct zcp_frame_log_config frame_log;
};

struct zcp_log_config {
        enum zcp_log_level level;           /* default info */
        uint32_t summary_interval_s;        /* default 10, 0 = off, ..86400 */
};

struct zcp_config {
        char source_path[ZCP_PATH_MAX];     /* the file it was loaded from */
        struct zcp_log_config log;
        struct zcp_metrics_config metrics;
        uint64_t pinned_budget;             /* bytes all rings may pin; default 0 = 10% of MemTotal */
        uint32_t stream_count;              /* 1..ZCP_CONFIG_MAX_STREAMS */
        struct zcp_stream_config streams[ZCP_CONFIG_MAX_STREAMS];
};

/*
 * Parses and validates `path`. On success returns 0 and *ret_config (heap).
 * On failure returns a negative errno (-EINVAL for content errors, -ENOENT,
 * -EISDIR, -EFBIG, -EACCES...) and writes into errbuf one line
 * "FILE:LINE:COL: message" (or "FILE: message" without a position) per
 * error, '\n' between lines, no '\n' at the end: every error the loader
 * finds, up to ZCP_CONFIG_MAX_ERRORS (then a last line says it stopped),
 * as many whole lines as fit (ZCP_CONFIG_ERRBUF bytes hold them all; the
 * first always goes in); *ret_config untouched.
 */
int zcp_config_load(const char *path, struct zcp_config **ret_config, char *errbuf, size_t errlen);

/*
 * ZCP_CONFIG_READ_FILES (zcpipe --check): besides parsing, open and read
 * every file a key names that zcpipe reads (model, labels, a file source,
 * the MQTT CA, certificate, key and password), with the permissions of the
 * calling process, and refuse a password file that group or others may
 * read; each failure is one more error line at its key. The return value is
 * then -EINVAL when the file itself has an error, else the first file's
 * error (-EACCES, -ENOENT...).
 */
enum zcp_config_flags { ZCP_CONFIG_READ_FILES = 1u << 0 };
int zcp_config_load_flags(const char *path, unsigned flags, struct zcp_config **ret_config, char *errbuf,
                          size_t errlen);

/* Same as zcp_config_load, from a string in memory (tests); `name` stands for the file name in messages. */
int zcp_config_parse(const char *name, const char *text, size_t len, struct zcp_config **ret_config,
                     char *errbuf, size_t errlen);

void zcp_config_free(struct zcp_config *config);

/* True when the two stream configs differ in any setting (a default written out is the same setting). */
bool zcp_stream_config_changed(const struct zcp_stream_config *a, const struct zcp_stream_config *b);

/*
 * One key of the schema, as the parser's table defines it: for tests and
 * documentation (every key, its type, default and the source types it
 * applies to, from the one place they are defined).
 */
struct zcp_config_key {
        char path[128];          /* from the top: "log.level", "streams.source.fps" (stream keys under "streams.") */
        const char *name;        /* the last component */
        const char *type;        /* uint float float3 bool enum string path section streams */
        char def[128];           /* the default as YAML would write it: 30, 0.05, auto, true, [0.485, 0.456, 0.406];
                                  * "" for sections, strings that default to empty, and required keys;
                                  * streams.model.weights: "" stands for the installed model */
        bool required;           /* no default: must be given (source.type) */
        unsigned sources;        /* bit (1u << enum zcp_source_type) per source type the key applies to */
        char range[256];         /* the values it takes, as the docs say them: "16..8192, even, or 0",
                                  * "(0, 1]", "auto | userptr | mmap", "[A-Za-z0-9_.-]+"; "" when any */
        bool reads_file;         /* a path of a file zcpipe reads (--check opens it) */
};
/* Calls fn for every key and section, depth first in table order. Any thread. */
void zcp_config_keys_foreach(void (*fn)(const struct zcp_config_key *key, void *userdata), void *userdata);

/* Looks `name` up in a NULL-free table of `count` names; returns index or -1. Shared by parsers. */
int zcp_enum_from_name(const char *const *names, int count, const char *name);
