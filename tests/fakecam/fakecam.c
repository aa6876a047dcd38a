/* SPDX-License-Identifier: MIT */
/*
 * fakecam: a V4L2 camera at the libv4l2 boundary, for tests without V4L2 in
 * the kernel. Loaded with LD_PRELOAD, it interposes open/openat (and their
 * 64-bit and fortified forms), close, v4l2_fd_open, v4l2_close, v4l2_ioctl,
 * v4l2_mmap and v4l2_munmap. Opening a configured node path returns a real
 * timerfd that becomes readable when a frame is due, so poll() works
 * unchanged; every other fd goes to the real functions. The capture code runs
 * unchanged against it. A timerfd cannot report POLLPRI (V4L2 events), so
 * poll() (and the fortified __poll_chk) is interposed as well: when an event
 * is pending on a fake fd polled for POLLPRI, it polls without waiting and
 * adds POLLPRI, as a driver's poll does; otherwise it is the real poll.
 *
 * Configuration (environment, read at load):
 *   FAKECAM_DEVICE     node path(s), ':'-separated (files that exist, so realpath works)
 *   FAKECAM_FORMAT     fourcc of the frames: YUYV (default) UYVY YVYU NV12 NV21 YU12 YV12 RGB3 BGR3
 *                      XR24 XB24 BGR4 GREY MJPG JPEG
 *   FAKECAM_WIDTH/HEIGHT  default 64x48
 *   FAKECAM_BPL        bytes per line (uncompressed; default the minimum; padding bytes are 0xAB)
 *   FAKECAM_FRAMES     raw frames (tightly packed) or concatenated JPEGs; default a pattern:
 *                      byte i of frame s = (i * 7 + s * 31 + (i >> 8)) & 255
 *   FAKECAM_EXTRA      more formats listed, "FOURCC[@WxH],...", frames filled with 0x80
 *   FAKECAM_FPS        pacing, default 30; 0 = a frame whenever a buffer is queued
 *   FAKECAM_NO_USERPTR 1 = REQBUFS with USERPTR fails with EINVAL
 *   FAKECAM_NO_EVENTS  1 = VIDIOC_SUBSCRIBE_EVENT fails (EINVAL), as on a driver without events
 *   FAKECAM_MPLANE     1 = a multi-planar-only node: QUERYCAP says VIDEO_CAPTURE_MPLANE (not
 *                      VIDEO_CAPTURE); formats are struct v4l2_pix_format_mplane (one plane),
 *                      buffers carry a v4l2_plane array; single-planar types are refused (EINVAL)
 *                      and counted as violations. A translation layer over the single-planar core.
 *   FAKECAM_LOSSY      1 = frames due while nobody dequeued are lost (sequence numbers skipped,
 *                      counted as `lost`), as a camera overwrites them, and so are those due while
 *                      no buffer was queued: the next frame then comes at the next tick; default:
 *                      delivered late
 *   FAKECAM_TIMESTAMP  monotonic (default: due time, flag MONOTONIC) | unknown (realtime, flag UNKNOWN)
 *   FAKECAM_FAULTS     comma-separated "name[@frame][/period][:arg][#count]":
 *       error short oversize badindex dup    the frame at that number (dup: an index the app holds;
 *                                            deferred until one is held, so userptr only)
 *       seqgap:N    skip N sequence numbers     enodev:MS   ENODEV, node absent MS afterwards
 *       eio         EIO from DQBUF              stall:MS    no frame for MS (or until STREAMOFF/close)
 *       absent:MS   node absent MS after load   refuse_sfmt|refuse_reqbufs|refuse_streamon[:ERRNO]
 *       refuse_qbuf[:ERRNO]  QBUF of USERPTR buffers fails (memory the driver cannot pin: EFAULT)
 *       resize:WxH  from that frame on the camera delivers WxH (the generated pattern only): G_FMT,
 *                   S_FMT and TRY_FMT say so, fds subscribed to V4L2_EVENT_SOURCE_CHANGE get the
 *                   event (DQEVENT; poll reports POLLPRI). Frames of the new size in buffers made
 *                   for the old one: shorter ones with their true bytesused, larger ones flagged
 *                   ERROR (bytesused = the buffer's length); counted as `mismatched`.
 *     Frame numbers count every DQBUF event since load (0-based). "/P" repeats every P frames,
 *     "#N" limits the injections.
 *   FAKECAM_STATS      file written at exit: "name value" lines (injected_<fault>, delivered,
 *                      violations, events, mismatched, subscriptions, ...). In-process:
 *                      fakecam_stat("name").
 * Violations (the app broke the V4L2 protocol: QBUF without REQBUFS on this fd, a queued index
 * queued again, a wrong memory type, a blocking open, REQBUFS 0 with buffers mapped...) are
 * refused like a driver would and counted.
 * Threads: every entry point takes one mutex.
 */
/* Define open() and open64() as themselves: no fortify or 64-bit redirection of the names. */
#undef _FORTIFY_SOURCE
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libv4l2.h>
#include <linux/videodev2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS      16
#define MAX_BUFS     32
#define MAX_FORMATS  8
#define MAX_FAULTS   32
#define MAX_MAPS     256
#define MAX_NODES    4
#define PATH_LEN     1024

/* Exported for in-process tests (looked up with dlsym). */
long long fakecam_stat(const char *name);
const char *fakecam_last_node(void);

/* Fortified and 64-bit entry points glibc may route open() through. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

enum fault_kind {
        F_ERROR, F_SHORT, F_OVERSIZE, F_BADINDEX, F_DUP, F_SEQGAP, F_ENODEV, F_EIO, F_STALL, F_RESIZE,
        F_ABSENT, F_REFUSE_SFMT, F_REFUSE_REQBUFS, F_REFUSE_STREAMON, F_REFUSE_QBUF, F_KIND_COUNT
};
static const char *const fault_names[F_KIND_COUNT] = {
        "error", "short", "oversize", "badindex", "dup", "seqgap", "enodev", "eio", "stall", "resize",
        "absent", "refuse_sfmt", "refuse_reqbufs", "refuse_streamon", "refuse_qbuf",
};

struct fault {
        enum fault_kind kind;
        uint64_t at, period, arg, arg2, max, fired;
        bool has_at;
};

struct format {
        uint32_t fourcc, width, height, bpl, sizeimage;
        bool main;
};

struct buf {
        unsigned long userptr;
        uint32_t length;
        bool queued;
        bool held;           /* dequeued by the app, not queued again */
};

struct fcam {
        bool used;
        int fd;
        bool dead;
        uint32_t memory;     /* of the buffers, 0 = none */
        uint32_t nbufs;
        struct buf bufs[MAX_BUFS];
        int memfd;
        uint8_t *base;       /* the fake's own mapping of all mmap buffers */
        size_t buflen;
        uint32_t mapped;
        bool streaming;
        uint32_t fifo[MAX_BUFS], fifo_head, fifo_count;
        uint64_t next_due_ns, stall_until_ns;
        uint32_t sequence;
        uint32_t neg_sizeimage;   /* the frame size when the buffers were made (REQBUFS) */
        bool sub_src_change;      /* VIDIOC_SUBSCRIBE_EVENT V4L2_EVENT_SOURCE_CHANGE */
        uint32_t ev_pending, ev_sequence;
};

struct mapping {
        void *addr;
        size_t len;
        int fd;              /* the fake fd it came from, -1 once that is closed */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool enabled;
static char nodes[MAX_NODES][PATH_LEN], real_nodes[MAX_NODES][PATH_LEN];
static int node_count;
static char last_node[PATH_LEN];

static struct format fmts[MAX_FORMATS];
static int fmt_count;
static int cur_fmt;
static uint32_t fps, req_fps_num, req_fps_den = 30;
static bool no_userptr, ts_unknown, lossy, mplane, no_events;
static uint64_t load_ns, absent_until_ns;

static uint8_t *frames;      /* raw: nframes * frame_size; mjpeg: the whole file */
static size_t frame_size, nframes, frames_len;
static size_t *jpeg_off, *jpeg_len;
static bool generated;

static struct fault faults[MAX_FAULTS];
static int fault_count;

static struct fcam cams[MAX_FDS];
static struct mapping maps[MAX_MAPS];
static _Atomic int fake_fds[MAX_FDS];   /* lock-free "is this fd ours" check for close() */

/* Counters. */
static struct {
        long long injected[F_KIND_COUNT];
        long long delivered, delivered_total, opens, closes, open_fds, max_open_fds, streamons,
                streamoffs, reqbufs, qbufs, dqbufs, userptr_refused, violations, mmaps, munmaps,
                seqgap_frames, userptr_streams, mmap_streams, lost, events, mismatched, subscriptions;
} st;

static const struct {
        const char *name;
        long long *value;
} stat_names[] = {
        { "delivered", &st.delivered },         { "delivered_total", &st.delivered_total },
        { "opens", &st.opens },                 { "closes", &st.closes },
        { "open_fds", &st.open_fds },           { "max_open_fds", &st.max_open_fds },
        { "streamons", &st.streamons },         { "streamoffs", &st.streamoffs },
        { "reqbufs", &st.reqbufs },             { "qbufs", &st.qbufs },
        { "dqbufs", &st.dqbufs },               { "userptr_refused", &st.userptr_refused },
        { "violations", &st.violations },       { "mmaps", &st.mmaps },
        { "munmaps", &st.munmaps },             { "seqgap_frames", &st.seqgap_frames },
        { "userptr_streams", &st.userptr_streams }, { "mmap_streams", &st.mmap_streams },
        { "lost", &st.lost },                   { "events", &st.events },
        { "mismatched", &st.mismatched },       { "subscriptions", &st.subscriptions },
};

/* ---- real functions ---------------------------------------------------- */

/* POSIX: a dlsym() result is stored into a function pointer through a void **. */
#define REAL(var, name)                                                                            \
        do {                                                                                       \
                if (!(var))                                                                        \
                        *(void **)(&(var)) = dlsym(RTLD_NEXT, name);                               \
        } while (0)

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_open_2)(const char *, int);
static int (*real_open64_2)(const char *, int);
static int (*real_openat_2)(int, const char *, int);
static int (*real_openat64_2)(int, const char *, int);
static int (*real_close)(int);
static int (*real_v4l2_fd_open)(int, int);
static int (*real_v4l2_close)(int);
static int (*real_v4l2_ioctl)(int, unsigned long, ...);
static void *(*real_v4l2_mmap)(void *, size_t, int, int, int, int64_t);
static int (*real_v4l2_munmap)(void *, size_t);
static int (*real_poll)(struct pollfd *, nfds_t, int);

static void resolve(void)
{
        REAL(real_open, "open");
        REAL(real_open64, "open64");
        REAL(real_openat, "openat");
        REAL(real_openat64, "openat64");
        REAL(real_open_2, "__open_2");
        REAL(real_open64_2, "__open64_2");
        REAL(real_openat_2, "__openat_2");
        REAL(real_openat64_2, "__openat64_2");
        REAL(real_close, "close");
        REAL(real_v4l2_fd_open, "v4l2_fd_open");
        REAL(real_v4l2_close, "v4l2_close");
        REAL(real_v4l2_ioctl, "v4l2_ioctl");
        REAL(real_v4l2_mmap, "v4l2_mmap");
        REAL(real_v4l2_munmap, "v4l2_munmap");
        REAL(real_poll, "poll");
}

/* A missing real function (e.g. libv4l2 not loaded) fails like an unsupported call. */
#define CALL_REAL(var, fail, ...) ((var) ? (var)(__VA_ARGS__) : (errno = ENOSYS, (fail)))

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void violation(const char *fmt, ...)
{
        va_list ap;

        st.violations++;
        fprintf(stderr, "fakecam: protocol violation: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

static void die(const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "fakecam: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        abort();
}

/* ---- formats ----------------------------------------------------------- */

static uint32_t fourcc_from(const char *s)
{
        char f[4] = { ' ', ' ', ' ', ' ' };

        for (int i = 0; i < 4 && s[i] && s[i] != '@' && s[i] != ','; i++)
                f[i] = s[i];
        return v4l2_fourcc(f[0], f[1], f[2], f[3]);
}

static bool compressed(uint32_t f)
{
        return f == V4L2_PIX_FMT_MJPEG || f == V4L2_PIX_FMT_JPEG;
}

static uint32_t min_bpl(uint32_t f, uint32_t w)
{
        switch (f) {
        case V4L2_PIX_FMT_YUYV:
        case V4L2_PIX_FMT_UYVY:
        case V4L2_PIX_FMT_YVYU:
                return 2 * w;
        case V4L2_PIX_FMT_RGB24:
        case V4L2_PIX_FMT_BGR24:
                return 3 * w;
        case V4L2_PIX_FMT_XBGR32:
        case V4L2_PIX_FMT_RGBX32:
        case V4L2_PIX_FMT_BGR32:
                return 4 * w;
        case V4L2_PIX_FMT_NV12:
        case V4L2_PIX_FMT_NV21:
        case V4L2_PIX_FMT_YUV420:
        case V4L2_PIX_FMT_YVU420:
        case V4L2_PIX_FMT_GREY:
                return w;
        default:
                return 0;
        }
}

static bool is_nv(uint32_t f)
{
        return f == V4L2_PIX_FMT_NV12 || f == V4L2_PIX_FMT_NV21;
}

static bool is_yu(uint32_t f)
{
        return f == V4L2_PIX_FMT_YUV420 || f == V4L2_PIX_FMT_YVU420;
}

static size_t image_size(uint32_t f, uint32_t bpl, uint32_t h)
{
        if (is_nv(f) || is_yu(f))
                return (size_t)bpl * h + (size_t)bpl * h / 2;
        return (size_t)bpl * h;
}

/* Copies a tight frame into a buffer with `bpl` bytes per line (pixfmt.h layout). */
static void copy_padded(uint8_t *dst, const uint8_t *src, const struct format *fm)
{
        uint32_t w = fm->width, h = fm->height, mb = min_bpl(fm->fourcc, w), bpl = fm->bpl;

        if (bpl == mb) {
                memcpy(dst, src, image_size(fm->fourcc, mb, h));
                return;
        }
        memset(dst, 0xAB, fm->sizeimage);
        for (uint32_t y = 0; y < h; y++)
                memcpy(dst + (size_t)y * bpl, src + (size_t)y * mb, mb);
        if (is_nv(fm->fourcc)) {
                for (uint32_t y = 0; y < h / 2; y++)
                        memcpy(dst + (size_t)bpl * h + (size_t)y * bpl, src + (size_t)mb * h + (size_t)y * mb, mb);
        } else if (is_yu(fm->fourcc)) {
                for (int p = 0; p < 2; p++) {
                        uint8_t *d = dst + (size_t)bpl * h + (size_t)p * (bpl / 2) * (h / 2);
                        const uint8_t *s = src + (size_t)mb * h + (size_t)p * (mb / 2) * (h / 2);

                        for (uint32_t y = 0; y < h / 2; y++)
                                memcpy(d + (size_t)y * (bpl / 2), s + (size_t)y * (mb / 2), mb / 2);
                }
        }
}

/* ---- configuration ----------------------------------------------------- */

static uint64_t env_u64(const char *name, uint64_t def)
{
        const char *v = getenv(name);

        return v && *v ? strtoull(v, NULL, 0) : def;
}

static int errno_from(const char *s)
{
        static const struct {
                const char *n;
                int e;
        } t[] = { { "EINVAL", EINVAL }, { "EBUSY", EBUSY }, { "ENOSPC", ENOSPC }, { "EIO", EIO },
                  { "ENODEV", ENODEV }, { "ENOMEM", ENOMEM }, { "EPERM", EPERM }, { "ERANGE", ERANGE },
                  { "EFAULT", EFAULT } };

        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
                if (strcmp(s, t[i].n) == 0)
                        return t[i].e;
        }
        return (int)strtol(s, NULL, 0);
}

static void parse_faults(const char *spec)
{
        char *copy = strdup(spec), *save = NULL;

        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                struct fault *f;
                size_t n = strcspn(tok, "@/:#");
                char *p = tok + n;
                int k;

                if (fault_count == MAX_FAULTS)
                        die("too many faults");
                for (k = 0; k < F_KIND_COUNT; k++) {
                        if (strlen(fault_names[k]) == n && strncmp(tok, fault_names[k], n) == 0)
                                break;
                }
                if (k == F_KIND_COUNT)
                        die("unknown fault '%.*s' in FAKECAM_FAULTS", (int)n, tok);
                f = &faults[fault_count++];
                memset(f, 0, sizeof(*f));
                f->kind = (enum fault_kind)k;
                f->max = UINT64_MAX;
                switch (f->kind) {
                case F_SEQGAP:
                        f->arg = 1;
                        break;
                case F_STALL:
                        f->arg = 1000;
                        break;
                case F_REFUSE_SFMT:
                case F_REFUSE_REQBUFS:
                case F_REFUSE_STREAMON:
                case F_REFUSE_QBUF:
                        f->arg = EINVAL;
                        break;
                default:
                        break;
                }
                while (*p) {
                        char c = *p++;
                        char *end;

                        if (c == ':' && f->kind == F_RESIZE) {
                                unsigned w, h;
                                int used = 0;

                                if (sscanf(p, "%ux%u%n", &w, &h, &used) != 2 || w == 0 || h == 0)
                                        die("resize needs :WxH in FAKECAM_FAULTS at '%s'", p - 1);
                                f->arg = w;
                                f->arg2 = h;
                                p += used;
                                continue;
                        }
                        if (c == ':' && (f->kind >= F_REFUSE_SFMT) && (*p < '0' || *p > '9')) {
                                size_t m = strcspn(p, "@/#");
                                char name[32];

                                snprintf(name, sizeof(name), "%.*s", (int)m, p);
                                f->arg = (uint64_t)errno_from(name);
                                p += m;
                                continue;
                        }
                        uint64_t v = strtoull(p, &end, 10);

                        if (end == p)
                                die("bad number in FAKECAM_FAULTS at '%s'", p - 1);
                        p = end;
                        if (c == '@') {
                                f->at = v;
                                f->has_at = true;
                        } else if (c == '/') {
                                f->period = v;
                        } else if (c == ':') {
                                f->arg = v;
                        } else if (c == '#') {
                                f->max = v;
                        } else {
                                die("bad FAKECAM_FAULTS item '%s'", tok);
                        }
                }
                if (f->kind == F_ABSENT) {
                        absent_until_ns = load_ns + f->arg * 1000000ull;
                }
        }
        free(copy);
}

static void load_frames(const struct format *fm)
{
        const char *path = getenv("FAKECAM_FRAMES");
        FILE *fp;
        long len;

        frame_size = compressed(fm->fourcc) ? 0 : image_size(fm->fourcc, min_bpl(fm->fourcc, fm->width), fm->height);
        if (!path || !*path) {
                if (compressed(fm->fourcc))
                        die("FAKECAM_FRAMES (JPEG frames) is required for %.4s", (const char *)&fm->fourcc);
                generated = true;
                nframes = 1;
                return;
        }
        fp = fopen(path, "rb");
        if (!fp)
                die("cannot open FAKECAM_FRAMES %s: %s", path, strerror(errno));
        fseek(fp, 0, SEEK_END);
        len = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        if (len <= 0)
                die("FAKECAM_FRAMES %s is empty", path);
        frames_len = (size_t)len;
        frames = malloc(frames_len);
        if (!frames || fread(frames, 1, frames_len, fp) != frames_len)
                die("cannot read %s", path);
        fclose(fp);
        if (!compressed(fm->fourcc)) {
                if (frames_len % frame_size)
                        die("%s holds %zu bytes, not a whole number of %zu-byte frames", path, frames_len, frame_size);
                nframes = frames_len / frame_size;
                return;
        }
        /* Concatenated JPEGs: each from SOI (FFD8) to the first EOI (FFD9) after it. */
        jpeg_off = calloc(frames_len / 4 + 1, sizeof(*jpeg_off));
        jpeg_len = calloc(frames_len / 4 + 1, sizeof(*jpeg_len));
        for (size_t i = 0; i + 1 < frames_len;) {
                if (frames[i] == 0xff && frames[i + 1] == 0xd8) {
                        size_t j = i + 2;

                        while (j + 1 < frames_len && !(frames[j] == 0xff && frames[j + 1] == 0xd9))
                                j++;
                        if (j + 1 >= frames_len)
                                die("%s: a JPEG without an end marker", path);
                        jpeg_off[nframes] = i;
                        jpeg_len[nframes] = j + 2 - i;
                        nframes++;
                        i = j + 2;
                } else {
                        i++;
                }
        }
        if (nframes == 0)
                die("%s holds no JPEG", path);
}

__attribute__((constructor)) static void fakecam_init(void)
{
        const char *dev = getenv("FAKECAM_DEVICE"), *extra;
        struct format *m;
        char *copy, *save = NULL;

        resolve();
        load_ns = now_ns();
        if (!dev || !*dev)
                return;
        copy = strdup(dev);
        for (char *tok = strtok_r(copy, ":", &save); tok && node_count < MAX_NODES; tok = strtok_r(NULL, ":", &save)) {
                snprintf(nodes[node_count], PATH_LEN, "%s", tok);
                if (!realpath(tok, real_nodes[node_count]))
                        snprintf(real_nodes[node_count], PATH_LEN, "%s", tok);
                node_count++;
        }
        free(copy);

        m = &fmts[fmt_count++];
        m->main = true;
        m->fourcc = fourcc_from(getenv("FAKECAM_FORMAT") ? getenv("FAKECAM_FORMAT") : "YUYV");
        m->width = (uint32_t)env_u64("FAKECAM_WIDTH", 64);
        m->height = (uint32_t)env_u64("FAKECAM_HEIGHT", 48);
        if (!compressed(m->fourcc) && min_bpl(m->fourcc, m->width) == 0)
                die("FAKECAM_FORMAT %.4s is not supported", (const char *)&m->fourcc);
        m->bpl = compressed(m->fourcc) ? 0 : (uint32_t)env_u64("FAKECAM_BPL", min_bpl(m->fourcc, m->width));
        load_frames(m);
        if (compressed(m->fourcc)) {
                size_t biggest = 0;

                for (size_t i = 0; i < nframes; i++)
                        biggest = jpeg_len[i] > biggest ? jpeg_len[i] : biggest;
                m->sizeimage = (uint32_t)(2 * (size_t)m->width * m->height);
                if (biggest > m->sizeimage)
                        m->sizeimage = (uint32_t)biggest;
        } else {
                m->sizeimage = (uint32_t)image_size(m->fourcc, m->bpl, m->height);
        }

        extra = getenv("FAKECAM_EXTRA");
        if (extra && *extra) {
                copy = strdup(extra);
                save = NULL;
                for (char *tok = strtok_r(copy, ",", &save); tok && fmt_count < MAX_FORMATS;
                     tok = strtok_r(NULL, ",", &save)) {
                        struct format *x = &fmts[fmt_count++];
                        char *at = strchr(tok, '@');

                        x->fourcc = fourcc_from(tok);
                        x->width = m->width;
                        x->height = m->height;
                        if (at && sscanf(at + 1, "%ux%u", &x->width, &x->height) != 2)
                                die("bad FAKECAM_EXTRA item %s", tok);
                        x->bpl = min_bpl(x->fourcc, x->width);
                        x->sizeimage = compressed(x->fourcc) ? 2 * x->width * x->height
                                                             : (uint32_t)image_size(x->fourcc, x->bpl, x->height);
                }
                free(copy);
        }
        fps = (uint32_t)env_u64("FAKECAM_FPS", 30);
        no_userptr = env_u64("FAKECAM_NO_USERPTR", 0) != 0;
        mplane = env_u64("FAKECAM_MPLANE", 0) != 0;
        no_events = env_u64("FAKECAM_NO_EVENTS", 0) != 0;
        lossy = env_u64("FAKECAM_LOSSY", 0) != 0;
        ts_unknown = getenv("FAKECAM_TIMESTAMP") && strcmp(getenv("FAKECAM_TIMESTAMP"), "unknown") == 0;
        if (getenv("FAKECAM_FAULTS"))
                parse_faults(getenv("FAKECAM_FAULTS"));
        for (int i = 0; i < fault_count; i++) {
                if (faults[i].kind == F_RESIZE && !generated)
                        die("resize works on the generated pattern only (no FAKECAM_FRAMES)");
        }
        enabled = true;
}

__attribute__((destructor)) static void fakecam_fini(void)
{
        const char *path = getenv("FAKECAM_STATS");
        FILE *fp;

        if (!enabled || !path || !*path)
                return;
        fp = fopen(path, "w");
        if (!fp)
                return;
        pthread_mutex_lock(&lock);
        for (int k = 0; k < F_KIND_COUNT; k++)
                fprintf(fp, "injected_%s %lld\n", fault_names[k], st.injected[k]);
        for (size_t i = 0; i < sizeof(stat_names) / sizeof(stat_names[0]); i++)
                fprintf(fp, "%s %lld\n", stat_names[i].name, *stat_names[i].value);
        pthread_mutex_unlock(&lock);
        fclose(fp);
}

long long fakecam_stat(const char *name)
{
        long long v = -1;

        pthread_mutex_lock(&lock);
        if (strncmp(name, "injected_", 9) == 0) {
                for (int k = 0; k < F_KIND_COUNT; k++) {
                        if (strcmp(name + 9, fault_names[k]) == 0)
                                v = st.injected[k];
                }
        }
        for (size_t i = 0; i < sizeof(stat_names) / sizeof(stat_names[0]); i++) {
                if (strcmp(name, stat_names[i].name) == 0)
                        v = *stat_names[i].value;
        }
        pthread_mutex_unlock(&lock);
        return v;
}

const char *fakecam_last_node(void)
{
        return last_node;
}

/* ---- faults ------------------------------------------------------------ */

/* The first fault of `kind` due at frame k (not yet fired), or NULL. */
static struct fault *due(enum fault_kind kind, uint64_t k)
{
        for (int i = 0; i < fault_count; i++) {
                struct fault *f = &faults[i];
                uint64_t next;

                if (f->kind != kind || f->fired >= f->max)
                        continue;
                if (!f->has_at)
                        return f;
                if (f->period)
                        next = f->at + f->fired * f->period;
                else if (f->fired)
                        continue;
                else
                        next = f->at;
                if (k >= next)
                        return f;
        }
        return NULL;
}

static void fire(struct fault *f)
{
        f->fired++;
        st.injected[f->kind]++;
}

/* ---- fds --------------------------------------------------------------- */

static struct fcam *find(int fd)
{
        if (fd < 0)
                return NULL;
        for (int i = 0; i < MAX_FDS; i++) {
                if (cams[i].used && cams[i].fd == fd)
                        return &cams[i];
        }
        return NULL;
}

static bool is_fake_fd(int fd)
{
        for (int i = 0; i < MAX_FDS; i++) {
                if (atomic_load_explicit(&fake_fds[i], memory_order_relaxed) == fd + 1)
                        return true;
        }
        return false;
}

static int match_node(const char *path)
{
        if (!enabled || !path)
                return -1;
        for (int i = 0; i < node_count; i++) {
                if (strcmp(path, nodes[i]) == 0 || strcmp(path, real_nodes[i]) == 0)
                        return i;
        }
        return -1;
}

/* Arms the timerfd for when DQBUF will have something (or disarms it). */
static void arm(struct fcam *c)
{
        struct itimerspec its;
        uint64_t at = 0;

        memset(&its, 0, sizeof(its));
        if (c->dead) {
                at = 1;
        } else if (c->streaming && c->fifo_count > 0) {
                at = c->next_due_ns > c->stall_until_ns ? c->next_due_ns : c->stall_until_ns;
                if (at == 0)
                        at = 1;
        }
        its.it_value.tv_sec = (time_t)(at / 1000000000ull);
        its.it_value.tv_nsec = (long)(at % 1000000000ull);
        timerfd_settime(c->fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void free_bufs(struct fcam *c)
{
        if (c->base)
                munmap(c->base, c->buflen * c->nbufs);
        if (c->memfd >= 0)
                CALL_REAL(real_close, -1, c->memfd);
        c->base = NULL;
        c->memfd = -1;
        c->nbufs = 0;
        c->memory = 0;
        c->fifo_count = 0;
        c->fifo_head = 0;
        memset(c->bufs, 0, sizeof(c->bufs));
}

static void release(struct fcam *c)
{
        free_bufs(c);
        for (int i = 0; i < MAX_MAPS; i++) {
                if (maps[i].addr && maps[i].fd == c->fd)
                        maps[i].fd = -1;
        }
        for (int i = 0; i < MAX_FDS; i++) {
                if (atomic_load(&fake_fds[i]) == c->fd + 1)
                        atomic_store(&fake_fds[i], 0);
        }
        c->used = false;
        st.closes++;
        st.open_fds--;
}

static int fake_open(const char *path, int flags, int node)
{
        struct fcam *c = NULL;
        int fd;

        pthread_mutex_lock(&lock);
        st.opens++;
        snprintf(last_node, sizeof(last_node), "%s", path);
        if (now_ns() < absent_until_ns) {
                /* Counted as injected_absent, whatever made the node absent. */
                st.injected[F_ABSENT]++;
                pthread_mutex_unlock(&lock);
                errno = ENOENT;
                return -1;
        }
        if (!(flags & O_NONBLOCK))
                violation("%s opened without O_NONBLOCK (DQBUF could block)", path);
        if (!(flags & O_CLOEXEC))
                violation("%s opened without O_CLOEXEC", path);
        if ((flags & O_ACCMODE) != O_RDWR)
                violation("%s not opened O_RDWR", path);
        for (int i = 0; i < MAX_FDS; i++) {
                if (!cams[i].used) {
                        c = &cams[i];
                        break;
                }
        }
        if (!c) {
                pthread_mutex_unlock(&lock);
                errno = EMFILE;
                return -1;
        }
        fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | ((flags & O_CLOEXEC) ? TFD_CLOEXEC : 0));
        if (fd < 0) {
                pthread_mutex_unlock(&lock);
                return -1;
        }
        memset(c, 0, sizeof(*c));
        c->used = true;
        c->fd = fd;
        c->memfd = -1;
        for (int i = 0; i < MAX_FDS; i++) {
                if (atomic_load(&fake_fds[i]) == 0) {
                        atomic_store(&fake_fds[i], fd + 1);
                        break;
                }
        }
        st.open_fds++;
        if (st.open_fds > st.max_open_fds)
                st.max_open_fds = st.open_fds;
        (void)node;
        pthread_mutex_unlock(&lock);
        return fd;
}

#define OPEN_BODY(call)                                                                            \
        do {                                                                                       \
                int node = match_node(path);                                                       \
                if (node >= 0)                                                                     \
                        return fake_open(path, flags, node);                                       \
                resolve();                                                                         \
                return call;                                                                       \
        } while (0)

static mode_t mode_arg(int flags, va_list ap)
{
        return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...)
{
        va_list ap;
        mode_t mode;

        va_start(ap, flags);
        mode = mode_arg(flags, ap);
        va_end(ap);
        OPEN_BODY(CALL_REAL(real_open, -1, path, flags, mode));
}

int open64(const char *path, int flags, ...)
{
        va_list ap;
        mode_t mode;

        va_start(ap, flags);
        mode = mode_arg(flags, ap);
        va_end(ap);
        OPEN_BODY(CALL_REAL(real_open64, -1, path, flags, mode));
}

int openat(int dirfd, const char *path, int flags, ...)
{
        va_list ap;
        mode_t mode;

        va_start(ap, flags);
        mode = mode_arg(flags, ap);
        va_end(ap);
        OPEN_BODY(CALL_REAL(real_openat, -1, dirfd, path, flags, mode));
}

int openat64(int dirfd, const char *path, int flags, ...)
{
        va_list ap;
        mode_t mode;

        va_start(ap, flags);
        mode = mode_arg(flags, ap);
        va_end(ap);
        OPEN_BODY(CALL_REAL(real_openat64, -1, dirfd, path, flags, mode));
}

int __open_2(const char *path, int flags)
{
        OPEN_BODY(CALL_REAL(real_open_2, -1, path, flags));
}

int __open64_2(const char *path, int flags)
{
        OPEN_BODY(CALL_REAL(real_open64_2, -1, path, flags));
}

int __openat_2(int dirfd, const char *path, int flags)
{
        OPEN_BODY(CALL_REAL(real_openat_2, -1, dirfd, path, flags));
}

int __openat64_2(int dirfd, const char *path, int flags)
{
        OPEN_BODY(CALL_REAL(real_openat64_2, -1, dirfd, path, flags));
}

static int fake_close(int fd)
{
        struct fcam *c;

        pthread_mutex_lock(&lock);
        c = find(fd);
        if (c)
                release(c);
        pthread_mutex_unlock(&lock);
        resolve();
        return CALL_REAL(real_close, -1, fd);
}

int close(int fd)
{
        if (is_fake_fd(fd))
                return fake_close(fd);
        resolve();
        return CALL_REAL(real_close, -1, fd);
}

int v4l2_fd_open(int fd, int v4l2_flags)
{
        if (is_fake_fd(fd)) {
                if (!(v4l2_flags & V4L2_DISABLE_CONVERSION)) {
                        pthread_mutex_lock(&lock);
                        violation("v4l2_fd_open without V4L2_DISABLE_CONVERSION (libv4l2 refuses USERPTR then)");
                        pthread_mutex_unlock(&lock);
                }
                return fd;
        }
        resolve();
        return CALL_REAL(real_v4l2_fd_open, -1, fd, v4l2_flags);
}

int v4l2_close(int fd)
{
        if (is_fake_fd(fd))
                return fake_close(fd);
        resolve();
        return CALL_REAL(real_v4l2_close, -1, fd);
}

/* ---- ioctls ------------------------------------------------------------ */

static const struct format *format_for(uint32_t fourcc)
{
        for (int i = 0; i < fmt_count; i++) {
                if (fmts[i].fourcc == fourcc)
                        return &fmts[i];
        }
        return &fmts[0];
}

static bool owns_buffers_elsewhere(const struct fcam *c)
{
        for (int i = 0; i < MAX_FDS; i++) {
                if (cams[i].used && &cams[i] != c && cams[i].nbufs > 0)
                        return true;
        }
        return false;
}

static void fill_pix(struct v4l2_pix_format *p, const struct format *fm)
{
        memset(p, 0, sizeof(*p));
        p->width = fm->width;
        p->height = fm->height;
        p->pixelformat = fm->fourcc;
        p->field = V4L2_FIELD_NONE;
        p->bytesperline = fm->bpl;
        p->sizeimage = fm->sizeimage;
        p->colorspace = compressed(fm->fourcc) ? V4L2_COLORSPACE_JPEG : V4L2_COLORSPACE_SRGB;
}

static int do_reqbufs(struct fcam *c, struct v4l2_requestbuffers *r)
{
        const struct format *fm = &fmts[cur_fmt];
        struct fault *f;
        uint32_t n;

        st.reqbufs++;
        if (r->type != V4L2_BUF_TYPE_VIDEO_CAPTURE)
                return -EINVAL;
        if (r->memory != V4L2_MEMORY_USERPTR && r->memory != V4L2_MEMORY_MMAP)
                return -EINVAL;
        if (r->memory == V4L2_MEMORY_USERPTR && no_userptr) {
                st.userptr_refused++;
                return -EINVAL;
        }
        r->capabilities = V4L2_BUF_CAP_SUPPORTS_MMAP | (no_userptr ? 0 : V4L2_BUF_CAP_SUPPORTS_USERPTR);
        if (c->streaming) {
                violation("REQBUFS while streaming");
                return -EBUSY;
        }
        if (r->count == 0) {
                if (c->mapped > 0) {
                        violation("REQBUFS 0 with %u buffers still mapped (munmap first)", c->mapped);
                        return -EBUSY;
                }
                free_bufs(c);
                return 0;
        }
        f = due(F_REFUSE_REQBUFS, 0);
        if (f) {
                fire(f);
                return -(int)f->arg;
        }
        if (owns_buffers_elsewhere(c)) {
                violation("REQBUFS on a second fd while another owns buffers");
                return -EBUSY;
        }
        if (c->mapped > 0) {
                violation("REQBUFS with buffers still mapped");
                return -EBUSY;
        }
        free_bufs(c);
        n = r->count > MAX_BUFS ? MAX_BUFS : r->count;
        if (r->memory == V4L2_MEMORY_MMAP) {
                if (n < 2)
                        n = 2;
                c->buflen = ((size_t)fm->sizeimage + 4095) / 4096 * 4096;
                c->memfd = memfd_create("fakecam", MFD_CLOEXEC);
                if (c->memfd < 0 || ftruncate(c->memfd, (off_t)(c->buflen * n)) < 0)
                        die("memfd: %s", strerror(errno));
                c->base = mmap(NULL, c->buflen * n, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd, 0);
                if (c->base == MAP_FAILED)
                        die("mmap: %s", strerror(errno));
        }
        c->nbufs = n;
        c->memory = r->memory;
        c->neg_sizeimage = fm->sizeimage;
        r->count = n;
        return 0;
}

static int check_buf(struct fcam *c, const struct v4l2_buffer *b, const char *what)
{
        if (b->type != V4L2_BUF_TYPE_VIDEO_CAPTURE)
                return -EINVAL;
        if (c->nbufs == 0) {
                violation("%s index %u on an fd without buffers (REQBUFS first; old buffers on a new fd?)", what,
                          b->index);
                return -EINVAL;
        }
        if (b->memory != c->memory) {
                violation("%s with memory %u, buffers are %u", what, b->memory, c->memory);
                return -EINVAL;
        }
        if (b->index >= c->nbufs) {
                violation("%s index %u of %u", what, b->index, c->nbufs);
                return -EINVAL;
        }
        return 0;
}

static int do_qbuf(struct fcam *c, struct v4l2_buffer *b)
{
        struct buf *x;
        int r = check_buf(c, b, "QBUF");

        if (r < 0)
                return r;
        x = &c->bufs[b->index];
        if (x->queued) {
                violation("QBUF of index %u, which is queued already", b->index);
                return -EINVAL;
        }
        if (c->memory == V4L2_MEMORY_USERPTR) {
                struct fault *f = due(F_REFUSE_QBUF, 0);

                if (f) {
                        fire(f);
                        return -(int)f->arg;
                }
                /* The size the buffers were made for: a source change since then is the camera's doing. */
                if (b->m.userptr == 0 || b->length < c->neg_sizeimage) {
                        violation("QBUF USERPTR %#lx of %u bytes, a frame needs %u", b->m.userptr, b->length,
                                  c->neg_sizeimage);
                        return -EINVAL;
                }
                x->userptr = b->m.userptr;
                x->length = b->length;
        }
        /*
         * Lossy: a camera that had no buffer dropped the frames due meanwhile,
         * the one in progress included; the next comes at the next tick.
         */
        if (lossy && fps && c->streaming && c->fifo_count == 0) {
                uint64_t now = now_ns();

                while (c->next_due_ns <= now) {
                        c->next_due_ns += 1000000000ull / fps;
                        c->sequence++;
                        st.lost++;
                }
        }
        x->queued = true;
        x->held = false;
        c->fifo[(c->fifo_head + c->fifo_count) % MAX_BUFS] = b->index;
        c->fifo_count++;
        st.qbufs++;
        arm(c);
        return 0;
}

static void set_timestamp(struct v4l2_buffer *b, uint64_t due_ns)
{
        if (ts_unknown) {
                struct timespec ts;

                clock_gettime(CLOCK_REALTIME, &ts);
                b->timestamp.tv_sec = ts.tv_sec;
                b->timestamp.tv_usec = ts.tv_nsec / 1000;
                b->flags |= V4L2_BUF_FLAG_TIMESTAMP_UNKNOWN;
                return;
        }
        b->timestamp.tv_sec = (time_t)(due_ns / 1000000000ull);
        b->timestamp.tv_usec = (suseconds_t)(due_ns % 1000000000ull / 1000);
        b->flags |= V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC | V4L2_BUF_FLAG_TSTAMP_SRC_EOF;
}

/* Writes frame `s` into dst; returns bytes used. */
static size_t write_frame(uint8_t *dst, uint32_t s)
{
        const struct format *fm = &fmts[cur_fmt];

        if (!fm->main) {
                memset(dst, 0x80, fm->sizeimage);
                return fm->sizeimage;
        }
        if (compressed(fm->fourcc)) {
                size_t i = s % nframes;

                memcpy(dst, frames + jpeg_off[i], jpeg_len[i]);
                return jpeg_len[i];
        }
        if (generated) {
                static uint8_t *tmp;
                static size_t tmp_size;

                if (tmp_size < frame_size) {
                        free(tmp);
                        tmp = malloc(frame_size);
                        tmp_size = frame_size;
                        if (!tmp)
                                die("out of memory");
                }
                for (size_t i = 0; i < frame_size; i++)
                        tmp[i] = (uint8_t)(i * 7 + (size_t)s * 31 + (i >> 8));
                copy_padded(dst, tmp, fm);
        } else {
                copy_padded(dst, frames + (s % nframes) * frame_size, fm);
        }
        return fm->sizeimage;
}

static void advance(struct fcam *c, uint64_t now)
{
        st.delivered_total++;
        if (fps) {
                c->next_due_ns += 1000000000ull / fps;
                /* Lossless: a late consumer gets the frames later, none is skipped. */
                if (c->next_due_ns + 1000000000ull < now)
                        c->next_due_ns = now;
        }
}

/*
 * resize:WxH: the camera's (main) format changes size from this frame on,
 * like an HDMI source switching modes; every fd subscribed to source changes
 * gets the event (poll() reports POLLPRI, DQEVENT returns it).
 */
static void resize(struct fault *f)
{
        struct format *fm = &fmts[cur_fmt];

        fire(f);
        fm->width = (uint32_t)f->arg;
        fm->height = (uint32_t)f->arg2;
        fm->bpl = min_bpl(fm->fourcc, fm->width);
        fm->sizeimage = (uint32_t)image_size(fm->fourcc, fm->bpl, fm->height);
        frame_size = image_size(fm->fourcc, fm->bpl, fm->height);
        for (int i = 0; i < MAX_FDS; i++) {
                if (cams[i].used && cams[i].sub_src_change) {
                        cams[i].ev_pending++;
                        st.events++;
                }
        }
}

static int do_dqbuf(struct fcam *c, struct v4l2_buffer *b)
{
        const struct format *fm = &fmts[cur_fmt];
        uint64_t now = now_ns(), k;
        struct fault *f;
        struct buf *x;
        uint32_t i;
        uint8_t *dst;

        st.dqbufs++;
        if (b->type != V4L2_BUF_TYPE_VIDEO_CAPTURE)
                return -EINVAL;
        if (!c->streaming) {
                violation("DQBUF while not streaming");
                return -EINVAL;
        }
        if (b->memory != c->memory) {
                violation("DQBUF with memory %u, buffers are %u", b->memory, c->memory);
                return -EINVAL;
        }
        if (c->fifo_count == 0 || now < c->next_due_ns || now < c->stall_until_ns) {
                arm(c);
                return -EAGAIN;
        }
        if (lossy && fps) {
                /* Only the newest due frame survives; the ones before it were overwritten. */
                while (c->next_due_ns + 1000000000ull / fps <= now) {
                        c->next_due_ns += 1000000000ull / fps;
                        c->sequence++;
                        st.lost++;
                }
        }
        k = (uint64_t)st.delivered_total;

        if ((f = due(F_ENODEV, k))) {
                fire(f);
                advance(c, now);
                c->dead = true;
                absent_until_ns = now + f->arg * 1000000ull;
                arm(c);
                return -ENODEV;
        }
        if ((f = due(F_EIO, k))) {
                fire(f);
                advance(c, now);
                arm(c);
                return -EIO;
        }
        if ((f = due(F_STALL, k))) {
                fire(f);
                c->stall_until_ns = now + f->arg * 1000000ull;
                arm(c);
                return -EAGAIN;
        }
        memset(b, 0, sizeof(*b));
        b->type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        b->memory = c->memory;
        b->field = V4L2_FIELD_NONE;
        if ((f = due(F_BADINDEX, k))) {
                fire(f);
                b->index = c->nbufs + 7;
                b->bytesused = fm->sizeimage;
                b->length = fm->sizeimage;
                b->sequence = c->sequence;
                set_timestamp(b, c->next_due_ns);
                advance(c, now);
                arm(c);
                return 0;
        }
        if ((f = due(F_DUP, k))) {
                for (uint32_t j = 0; j < c->nbufs; j++) {
                        if (c->bufs[j].held) {
                                fire(f);
                                b->index = j;
                                b->bytesused = fm->sizeimage;
                                b->length = c->memory == V4L2_MEMORY_USERPTR ? c->bufs[j].length : fm->sizeimage;
                                if (c->memory == V4L2_MEMORY_USERPTR)
                                        b->m.userptr = c->bufs[j].userptr;
                                else
                                        b->m.offset = (uint32_t)(j * c->buflen);
                                b->sequence = c->sequence;
                                set_timestamp(b, c->next_due_ns);
                                advance(c, now);
                                arm(c);
                                return 0;
                        }
                }
        }
        if ((f = due(F_SEQGAP, k))) {
                fire(f);
                st.seqgap_frames += (long long)f->arg;
                c->sequence += (uint32_t)f->arg;
        }

        i = c->fifo[c->fifo_head];
        c->fifo_head = (c->fifo_head + 1) % MAX_BUFS;
        c->fifo_count--;
        x = &c->bufs[i];
        x->queued = false;
        x->held = true;
        dst = c->memory == V4L2_MEMORY_USERPTR ? (uint8_t *)x->userptr : c->base + (size_t)i * c->buflen;
        b->index = i;
        b->length = c->memory == V4L2_MEMORY_USERPTR ? x->length : c->neg_sizeimage;
        if (c->memory == V4L2_MEMORY_USERPTR)
                b->m.userptr = x->userptr;
        else
                b->m.offset = (uint32_t)((size_t)i * c->buflen);
        if ((f = due(F_RESIZE, k)))
                resize(f);
        b->flags = V4L2_BUF_FLAG_DONE;
        if (fm->sizeimage > b->length) {
                /* A frame of the new size does not fit a buffer of the old one: the driver flags it. */
                memset(dst, 0xEE, b->length);
                b->bytesused = b->length;
                b->flags |= V4L2_BUF_FLAG_ERROR;
        } else {
                b->bytesused = (uint32_t)write_frame(dst, c->sequence);
        }
        b->sequence = c->sequence++;
        set_timestamp(b, fps ? c->next_due_ns : now);

        if (fm->sizeimage != c->neg_sizeimage) {
                /* Not the size the buffers were made for: the app must not take it as a frame. */
                st.mismatched++;
        } else if ((f = due(F_ERROR, k))) {
                fire(f);
                b->flags |= V4L2_BUF_FLAG_ERROR;
                memset(dst + b->bytesused / 2, 0xEE, b->bytesused - b->bytesused / 2);
        } else if ((f = due(F_SHORT, k))) {
                fire(f);
                b->bytesused = compressed(fm->fourcc) ? 0 : b->bytesused / 2;
        } else if ((f = due(F_OVERSIZE, k))) {
                fire(f);
                b->bytesused = b->length + 4096;
        } else {
                st.delivered++;
        }
        advance(c, now);
        arm(c);
        return 0;
}

static int sp_ioctl(struct fcam *c, unsigned long req, void *arg)
{
        if (c->dead)
                return -ENODEV;
        switch (req) {
        case VIDIOC_QUERYCAP: {
                struct v4l2_capability *cap = arg;

                memset(cap, 0, sizeof(*cap));
                snprintf((char *)cap->driver, sizeof(cap->driver), "fakecam");
                snprintf((char *)cap->card, sizeof(cap->card), "zcpipe fake camera");
                snprintf((char *)cap->bus_info, sizeof(cap->bus_info), "platform:fakecam");
                cap->version = 0x060000;
                cap->device_caps = V4L2_CAP_VIDEO_CAPTURE | V4L2_CAP_STREAMING;
                cap->capabilities = cap->device_caps | V4L2_CAP_DEVICE_CAPS;
                return 0;
        }
        case VIDIOC_ENUM_FMT: {
                struct v4l2_fmtdesc *d = arg;
                uint32_t index = d->index;

                if (d->type != V4L2_BUF_TYPE_VIDEO_CAPTURE || index >= (uint32_t)fmt_count)
                        return -EINVAL;
                memset(d, 0, sizeof(*d));
                d->index = index;
                d->type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
                d->pixelformat = fmts[index].fourcc;
                d->flags = compressed(fmts[index].fourcc) ? V4L2_FMT_FLAG_COMPRESSED : 0;
                snprintf((char *)d->description, sizeof(d->description), "%.4s", (const char *)&fmts[index].fourcc);
                return 0;
        }
        case VIDIOC_G_FMT: {
                struct v4l2_format *f = arg;

                if (f->type != V4L2_BUF_TYPE_VIDEO_CAPTURE)
                        return -EINVAL;
                fill_pix(&f->fmt.pix, &fmts[cur_fmt]);
                return 0;
        }
        case VIDIOC_TRY_FMT:
        case VIDIOC_S_FMT: {
                struct v4l2_format *f = arg;
                const struct format *fm;

                if (f->type != V4L2_BUF_TYPE_VIDEO_CAPTURE)
                        return -EINVAL;
                if (req == VIDIOC_S_FMT) {
                        struct fault *x = due(F_REFUSE_SFMT, 0);

                        if (x) {
                                fire(x);
                                return -(int)x->arg;
                        }
                        if (c->nbufs > 0 || owns_buffers_elsewhere(c)) {
                                violation("S_FMT with buffers allocated");
                                return -EBUSY;
                        }
                }
                /* Like a fixed-mode camera: the format's own size, whatever was asked. */
                fm = format_for(f->fmt.pix.pixelformat);
                fill_pix(&f->fmt.pix, fm);
                if (req == VIDIOC_S_FMT)
                        cur_fmt = (int)(fm - fmts);
                return 0;
        }
        case VIDIOC_ENUM_FRAMESIZES: {
                struct v4l2_frmsizeenum *s = arg;
                const struct format *fm = format_for(s->pixel_format);

                if (s->index != 0 || fm->fourcc != s->pixel_format)
                        return -EINVAL;
                s->type = V4L2_FRMSIZE_TYPE_DISCRETE;
                s->discrete.width = fm->width;
                s->discrete.height = fm->height;
                return 0;
        }
        case VIDIOC_ENUM_FRAMEINTERVALS: {
                struct v4l2_frmivalenum *fi = arg;
                const struct format *fm = format_for(fi->pixel_format);

                if (fps == 0 || fi->index != 0 || fm->fourcc != fi->pixel_format || fi->width != fm->width ||
                    fi->height != fm->height)
                        return -EINVAL;
                fi->type = V4L2_FRMIVAL_TYPE_DISCRETE;
                fi->discrete.numerator = 1;
                fi->discrete.denominator = fps;
                return 0;
        }
        case VIDIOC_G_PARM:
        case VIDIOC_S_PARM: {
                struct v4l2_streamparm *p = arg;

                if (p->type != V4L2_BUF_TYPE_VIDEO_CAPTURE)
                        return -EINVAL;
                if (req == VIDIOC_S_PARM && p->parm.capture.timeperframe.denominator) {
                        req_fps_num = p->parm.capture.timeperframe.numerator;
                        req_fps_den = p->parm.capture.timeperframe.denominator;
                }
                memset(&p->parm, 0, sizeof(p->parm));
                p->parm.capture.capability = V4L2_CAP_TIMEPERFRAME;
                p->parm.capture.timeperframe.numerator = fps ? 1 : (req_fps_num ? req_fps_num : 1);
                p->parm.capture.timeperframe.denominator = fps ? fps : req_fps_den;
                p->parm.capture.readbuffers = 2;
                return 0;
        }
        case VIDIOC_REQBUFS:
                return do_reqbufs(c, arg);
        case VIDIOC_QUERYBUF: {
                struct v4l2_buffer *b = arg;
                int r = check_buf(c, b, "QUERYBUF");

                if (r < 0)
                        return r;
                b->length = c->neg_sizeimage;
                b->flags = c->bufs[b->index].queued ? V4L2_BUF_FLAG_QUEUED : 0;
                if (c->memory == V4L2_MEMORY_MMAP) {
                        b->m.offset = (uint32_t)((size_t)b->index * c->buflen);
                        b->flags |= V4L2_BUF_FLAG_MAPPED;
                }
                return 0;
        }
        case VIDIOC_QBUF:
                return do_qbuf(c, arg);
        case VIDIOC_DQBUF:
                return do_dqbuf(c, arg);
        case VIDIOC_STREAMON: {
                struct fault *f = due(F_REFUSE_STREAMON, 0);

                if (*(int *)arg != V4L2_BUF_TYPE_VIDEO_CAPTURE)
                        return -EINVAL;
                if (c->nbufs == 0) {
                        violation("STREAMON without buffers");
                        return -EINVAL;
                }
                if (f) {
                        fire(f);
                        return -(int)f->arg;
                }
                if (!c->streaming) {
                        st.streamons++;
                        if (c->memory == V4L2_MEMORY_USERPTR)
                                st.userptr_streams++;
                        else
                                st.mmap_streams++;
                }
                c->streaming = true;
                c->next_due_ns = now_ns();
                c->stall_until_ns = 0;
                c->sequence = 0;
                arm(c);
                return 0;
        }
        case VIDIOC_SUBSCRIBE_EVENT:
        case VIDIOC_UNSUBSCRIBE_EVENT: {
                struct v4l2_event_subscription *sub = arg;

                if (sub->type != V4L2_EVENT_SOURCE_CHANGE || no_events)
                        return -EINVAL;
                if (req == VIDIOC_SUBSCRIBE_EVENT && !c->sub_src_change)
                        st.subscriptions++;
                c->sub_src_change = req == VIDIOC_SUBSCRIBE_EVENT;
                if (!c->sub_src_change)
                        c->ev_pending = 0;
                return 0;
        }
        case VIDIOC_DQEVENT: {
                struct v4l2_event *ev = arg;

                if (c->ev_pending == 0)
                        return -ENOENT;
                c->ev_pending--;
                memset(ev, 0, sizeof(*ev));
                ev->type = V4L2_EVENT_SOURCE_CHANGE;
                ev->u.src_change.changes = V4L2_EVENT_SRC_CH_RESOLUTION;
                ev->pending = c->ev_pending;
                ev->sequence = c->ev_sequence++;
                clock_gettime(CLOCK_MONOTONIC, &ev->timestamp);
                return 0;
        }
        case VIDIOC_STREAMOFF:
                if (*(int *)arg != V4L2_BUF_TYPE_VIDEO_CAPTURE)
                        return -EINVAL;
                if (c->streaming)
                        st.streamoffs++;
                c->streaming = false;
                c->stall_until_ns = 0;
                c->fifo_count = 0;
                c->fifo_head = 0;
                for (uint32_t i = 0; i < c->nbufs; i++) {
                        c->bufs[i].queued = false;
                        c->bufs[i].held = false;
                }
                arm(c);
                return 0;
        default:
                return -ENOTTY;
        }
}

/* ---- multi-planar (FAKECAM_MPLANE=1) ------------------------------------- */

/* The single-planar core behind a multi-planar face: types, formats and plane arrays translated. */
static bool mp_type_ok(uint32_t type, const char *what)
{
        if (type == V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE)
                return true;
        violation("%s with buffer type %u on a multi-planar-only node (VIDEO_CAPTURE_MPLANE is %u)", what, type,
                  V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE);
        return false;
}

static int mp_format(struct fcam *c, unsigned long req, struct v4l2_format *f, const char *what)
{
        struct v4l2_pix_format_mplane *mp = &f->fmt.pix_mp;
        struct v4l2_format sp = { .type = V4L2_BUF_TYPE_VIDEO_CAPTURE };
        int r;

        if (!mp_type_ok(f->type, what))
                return -EINVAL;
        sp.fmt.pix.pixelformat = mp->pixelformat;
        sp.fmt.pix.width = mp->width;
        sp.fmt.pix.height = mp->height;
        sp.fmt.pix.field = mp->field;
        sp.fmt.pix.bytesperline = mp->plane_fmt[0].bytesperline;
        r = sp_ioctl(c, req, &sp);
        if (r < 0)
                return r;
        memset(mp, 0, sizeof(*mp));
        mp->pixelformat = sp.fmt.pix.pixelformat;
        mp->width = sp.fmt.pix.width;
        mp->height = sp.fmt.pix.height;
        mp->field = sp.fmt.pix.field;
        mp->colorspace = sp.fmt.pix.colorspace;
        mp->num_planes = 1;
        mp->plane_fmt[0].bytesperline = sp.fmt.pix.bytesperline;
        mp->plane_fmt[0].sizeimage = sp.fmt.pix.sizeimage;
        return 0;
}

static int mp_buffer(struct fcam *c, unsigned long req, struct v4l2_buffer *b, const char *what)
{
        struct v4l2_plane *planes = b->m.planes;
        uint32_t nplanes = b->length;
        struct v4l2_buffer sp;
        int r;

        if (!mp_type_ok(b->type, what))
                return -EINVAL;
        if (!planes || nplanes < 1) {
                violation("%s of an MPLANE buffer without a plane array (m.planes %p, length %u)", what,
                          (void *)planes, nplanes);
                return -EINVAL;
        }
        sp = *b;
        sp.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        sp.length = planes[0].length;
        sp.bytesused = planes[0].bytesused;
        if (b->memory == V4L2_MEMORY_USERPTR)
                sp.m.userptr = planes[0].m.userptr;
        else
                sp.m.offset = planes[0].m.mem_offset;
        r = sp_ioctl(c, req, &sp);
        if (r < 0)
                return r;
        *b = sp;
        b->type = V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE;
        b->length = 1;
        b->m.planes = planes;
        memset(&planes[0], 0, sizeof(planes[0]));
        planes[0].length = sp.length;
        planes[0].bytesused = sp.bytesused;
        if (sp.memory == V4L2_MEMORY_USERPTR)
                planes[0].m.userptr = sp.m.userptr;
        else
                planes[0].m.mem_offset = sp.m.offset;
        return 0;
}

static int do_ioctl(struct fcam *c, unsigned long req, void *arg)
{
        int r;

        if (!mplane || c->dead)
                return sp_ioctl(c, req, arg);
        switch (req) {
        case VIDIOC_QUERYCAP: {
                struct v4l2_capability *cap = arg;

                r = sp_ioctl(c, req, arg);
                cap->device_caps = V4L2_CAP_VIDEO_CAPTURE_MPLANE | V4L2_CAP_STREAMING;
                cap->capabilities = cap->device_caps | V4L2_CAP_DEVICE_CAPS;
                return r;
        }
        case VIDIOC_ENUM_FMT: {
                struct v4l2_fmtdesc *d = arg;

                if (!mp_type_ok(d->type, "ENUM_FMT"))
                        return -EINVAL;
                d->type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
                r = sp_ioctl(c, req, arg);
                d->type = V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE;
                return r;
        }
        case VIDIOC_G_FMT:
                return mp_format(c, req, arg, "G_FMT");
        case VIDIOC_S_FMT:
                return mp_format(c, req, arg, "S_FMT");
        case VIDIOC_TRY_FMT:
                return mp_format(c, req, arg, "TRY_FMT");
        case VIDIOC_G_PARM:
        case VIDIOC_S_PARM: {
                struct v4l2_streamparm *p = arg;

                if (!mp_type_ok(p->type, "G/S_PARM"))
                        return -EINVAL;
                p->type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
                r = sp_ioctl(c, req, arg);
                p->type = V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE;
                return r;
        }
        case VIDIOC_REQBUFS: {
                struct v4l2_requestbuffers *rb = arg;

                if (!mp_type_ok(rb->type, "REQBUFS"))
                        return -EINVAL;
                rb->type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
                r = sp_ioctl(c, req, arg);
                rb->type = V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE;
                return r;
        }
        case VIDIOC_QUERYBUF:
                return mp_buffer(c, req, arg, "QUERYBUF");
        case VIDIOC_QBUF:
                return mp_buffer(c, req, arg, "QBUF");
        case VIDIOC_DQBUF:
                return mp_buffer(c, req, arg, "DQBUF");
        case VIDIOC_STREAMON:
        case VIDIOC_STREAMOFF: {
                int type = V4L2_BUF_TYPE_VIDEO_CAPTURE;

                if (!mp_type_ok((uint32_t)*(int *)arg, req == VIDIOC_STREAMON ? "STREAMON" : "STREAMOFF"))
                        return -EINVAL;
                return sp_ioctl(c, req, &type);
        }
        default:
                return sp_ioctl(c, req, arg);
        }
}

/* ---- poll: events ------------------------------------------------------- */

/*
 * A timerfd cannot report POLLPRI, so poll() is interposed too: it runs the
 * real poll (not waiting when an event is pending on a fake fd asked for
 * POLLPRI) and adds POLLPRI where one is, as a V4L2 driver's poll does.
 */
int poll(struct pollfd *fds, nfds_t n, int timeout)
{
        bool pending = false;
        int r;

        resolve();
        for (nfds_t i = 0; i < n; i++) {
                if ((fds[i].events & POLLPRI) && is_fake_fd(fds[i].fd)) {
                        struct fcam *c;

                        pthread_mutex_lock(&lock);
                        c = find(fds[i].fd);
                        pending |= c && c->ev_pending > 0;
                        pthread_mutex_unlock(&lock);
                }
        }
        r = CALL_REAL(real_poll, -1, fds, n, pending ? 0 : timeout);
        if (r < 0 || !pending)
                return r;
        pthread_mutex_lock(&lock);
        for (nfds_t i = 0; i < n; i++) {
                struct fcam *c = (fds[i].events & POLLPRI) && is_fake_fd(fds[i].fd) ? find(fds[i].fd) : NULL;

                if (c && c->ev_pending > 0) {
                        if (fds[i].revents == 0)
                                r++;
                        fds[i].revents |= POLLPRI;
                }
        }
        pthread_mutex_unlock(&lock);
        return r;
}

/* What a fortified build calls for poll(). */
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
        (void)fdslen;
        return poll(fds, n, timeout);
}

int v4l2_ioctl(int fd, unsigned long int request, ...)
{
        va_list ap;
        void *arg;
        struct fcam *c;
        int r;

        va_start(ap, request);
        arg = va_arg(ap, void *);
        va_end(ap);
        if (!is_fake_fd(fd)) {
                resolve();
                return CALL_REAL(real_v4l2_ioctl, -1, fd, request, arg);
        }
        pthread_mutex_lock(&lock);
        c = find(fd);
        r = c ? do_ioctl(c, request, arg) : -EBADF;
        pthread_mutex_unlock(&lock);
        if (r < 0) {
                errno = -r;
                return -1;
        }
        return r;
}

void *v4l2_mmap(void *start, size_t length, int prot, int flags, int fd, int64_t offset)
{
        struct fcam *c;
        void *p = MAP_FAILED;
        int err = EINVAL;

        if (!is_fake_fd(fd)) {
                resolve();
                return CALL_REAL(real_v4l2_mmap, MAP_FAILED, start, length, prot, flags, fd, offset);
        }
        pthread_mutex_lock(&lock);
        c = find(fd);
        if (c && c->dead) {
                err = ENODEV;
        } else if (c && c->memory == V4L2_MEMORY_MMAP && offset >= 0 && c->buflen &&
                   (size_t)offset % c->buflen == 0 && (size_t)offset / c->buflen < c->nbufs && length <= c->buflen) {
                p = mmap(start, length, prot, flags, c->memfd, (off_t)offset);
                if (p != MAP_FAILED) {
                        for (int i = 0; i < MAX_MAPS; i++) {
                                if (!maps[i].addr) {
                                        maps[i] = (struct mapping){ p, length, fd };
                                        break;
                                }
                        }
                        c->mapped++;
                        st.mmaps++;
                } else {
                        err = errno;
                }
        }
        pthread_mutex_unlock(&lock);
        if (p == MAP_FAILED)
                errno = err;
        return p;
}

int v4l2_munmap(void *start, size_t length)
{
        int r;

        pthread_mutex_lock(&lock);
        for (int i = 0; i < MAX_MAPS; i++) {
                if (maps[i].addr == start) {
                        struct fcam *c = maps[i].fd >= 0 ? find(maps[i].fd) : NULL;

                        if (maps[i].len != length)
                                violation("munmap of %zu bytes, mapped %zu", length, maps[i].len);
                        if (c && c->mapped)
                                c->mapped--;
                        maps[i].addr = NULL;
                        st.munmaps++;
                        r = munmap(start, length);
                        pthread_mutex_unlock(&lock);
                        return r;
                }
        }
        pthread_mutex_unlock(&lock);
        resolve();
        return CALL_REAL(real_v4l2_munmap, -1, start, length);
}
