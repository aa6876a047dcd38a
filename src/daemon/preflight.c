/* SPDX-License-Identifier: MIT */
/*
 * `zcpipe --check` beyond the parser (preflight.h). The model runs the CPU
 * backend's own path (the input tensor of a synthetic frame made as a
 * stream makes it, then the plan) once per distinct model and input; the
 * file checks ask the kernel with access(2), as the user --check runs as.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/workers.h"
#include "daemon/auth.h"
#include "daemon/preflight.h"
#include "infer/backend.h"
#include "infer/cpu_fast.h"
#include "model/model.h"
#include "output/publish.h"

#define PROBE_W       320   /* the synthetic frame: any even size; the input tensor is the model's */
#define PROBE_H       240
#define PROBE_THREADS 4

static void problem(const struct zcp_config *cfg, int *bad, const char *fmt, ...) ZCP_PRINTF(3, 4);

static void problem(const struct zcp_config *cfg, int *bad, const char *fmt, ...)
{
        char msg[1536];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        zcp_log_line(ZCP_LOG_ERROR, "%s: %s", cfg->source_path, msg);
        *bad = ZCP_ERR_CONFIG;
}

/* ---- the model's scores ---------------------------------------------------------- */

/* Every value of a head's view finite. */
static bool view_finite(const struct zcp_plan *m, const float *arena, struct zcp_plan_view v)
{
        const struct zcp_plan_tensor *t = &m->tensors[v.t];
        size_t pixels = (size_t)t->h * t->w;

        for (size_t px = 0; px < pixels; px++)
                for (uint32_t c = 0; c < v.c; c++)
                        if (!isfinite(arena[t->off + px * t->c + v.c0 + c]))
                                return false;
        return true;
}

/*
 * The stream's model on a synthetic frame (ramps of luma and chroma) through
 * the CPU backend's preprocess and plan: true when its head's outputs are
 * finite. Weights are finite (the loaders refuse others); what makes scores
 * infinite or NaN is sums that overflow float, and a network that overflows
 * on this frame overflows on camera frames too. -errno when it could not run.
 */
static int scores_finite(const struct zcp_stream_config *sc, const struct zcp_plan *m, struct zcp_workers *team,
                         char *err, size_t errlen)
{
        struct zcp_backend_params bp;
        struct zcp_fast_pre *pre = NULL;
        struct zcp_fast_plan *fp = NULL;
        uint8_t *nv12 = malloc((size_t)PROBE_W * PROBE_H * 3 / 2);
        float *arena;
        int r;

        if (!nv12)
                return -ENOMEM;
        for (uint32_t y = 0; y < PROBE_H; y++)
                for (uint32_t x = 0; x < PROBE_W; x++)
                        nv12[(size_t)y * PROBE_W + x] = (uint8_t)(16 + (x * 3 + y * 5) % 220);
        for (uint32_t y = 0; y < PROBE_H / 2; y++)
                for (uint32_t x = 0; x < PROBE_W; x++)
                        nv12[(size_t)PROBE_W * PROBE_H + (size_t)y * PROBE_W + x] = (uint8_t)(16 + (x * 7 + y) % 224);
        r = zcp_backend_params_init(&bp, sc, m, PROBE_W, PROBE_H, sc->name, err, errlen);
        if (r == 0)
                r = zcp_fast_pre_new(&bp.pre, &pre);
        if (r == 0)
                r = zcp_fast_plan_new(m, &fp);
        if (r < 0)
                goto out;
        arena = zcp_fast_plan_arena(fp);
        zcp_fast_preprocess(pre, team, nv12, arena + m->tensors[m->input.t].off);
        zcp_fast_plan_run(fp, team);
        r = view_finite(m, arena, m->head.scores) &&
            (m->head.kind != ZCP_HEAD_CENTERNET || view_finite(m, arena, m->head.sizes));
out:
        zcp_fast_plan_free(fp);
        zcp_fast_pre_free(pre);
        free(nv12);
        return r;
}

/* Streams [0, i) that ran the same model with the same input already. */
static bool probed_before(const struct zcp_config *cfg, const struct zcp_plan *const *plans, uint32_t i)
{
        const struct zcp_model_config *a = &cfg->streams[i].model;

        for (uint32_t j = 0; j < i; j++) {
                const struct zcp_model_config *b = &cfg->streams[j].model;

                if (plans[j] == plans[i] && a->pixels == b->pixels && a->resize == b->resize &&
                    a->mean_set == b->mean_set && a->std_set == b->std_set &&
                    memcmp(a->mean, b->mean, sizeof(a->mean)) == 0 && memcmp(a->std, b->std, sizeof(a->std)) == 0)
                        return true;
        }
        return false;
}

static void check_models(const struct zcp_config *cfg, int *bad)
{
        const struct zcp_plan *plans[ZCP_CONFIG_MAX_STREAMS] = { 0 };
        struct zcp_workers *team = NULL;
        uint32_t cpus = zcp_workers_cpus();

        if (zcp_workers_new(cpus < PROBE_THREADS ? (cpus ? cpus : 1) : PROBE_THREADS, "zcp-check", &team) < 0)
                team = NULL;   /* the caller's thread alone */
        for (uint32_t i = 0; i < cfg->stream_count; i++) {
                const struct zcp_stream_config *sc = &cfg->streams[i];
                char err[512];
                int r;

                if (sc->model.enabled && zcp_model_acquire(&sc->model, &plans[i], err, sizeof(err)) < 0) {
                        problem(cfg, bad, "stream %s: %s", sc->name, err);
                        continue;
                }
                if (plans[i] && zcp_model_unused_keys(&sc->model, plans[i], err, sizeof(err)))
                        zcp_log_line(ZCP_LOG_WARN, "%s: stream %s: %s", cfg->source_path, sc->name, err);
                r = zcp_publish_check_fits(sc, plans[i], err, sizeof(err));
                if (r < 0)
                        problem(cfg, bad, "%s", r == ZCP_ERR_CONFIG ? err : zcp_strerror(r));
                if (!plans[i] || probed_before(cfg, plans, i))
                        continue;
                err[0] = '\0';
                r = scores_finite(sc, plans[i], team, err, sizeof(err));
                if (r == 0)
                        problem(cfg, bad,
                                "stream %s: model.path %s gives scores that are not finite (infinite or NaN) on a "
                                "test frame: its sums overflow float, so every frame would be dropped; fix: weights "
                                "of a sane scale (a model exported in float32 from a trained network)",
                                sc->name, sc->model.path);
                else if (r < 0)
                        problem(cfg, bad, "stream %s: cannot run model.path %s on a test frame: %s", sc->name,
                                sc->model.path, err[0] ? err : zcp_strerror(r));
        }
        for (uint32_t i = 0; i < cfg->stream_count; i++)
                zcp_model_release(plans[i]);
        zcp_workers_free(team);
}

/* ---- files the outputs make ---------------------------------------------------------- */

/* The directory part of `path` (an absolute path: the parser resolves relative ones). */
static void dir_of(const char *path, char *dir, size_t size)
{
        const char *slash = strrchr(path, '/');

        if (!slash)
                snprintf(dir, size, ".");
        else if (slash == path)
                snprintf(dir, size, "/");
        else
                snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

/*
 * The service's own directories: the unit's StateDirectory=, RuntimeDirectory= and
 * CacheDirectory= (systemd/zcpipe.service.in), which systemd makes when the service starts, so
 * that one missing before the first start (an operator's --check right after the install) is
 * not an error.
 */
static bool service_dir(const char *dir)
{
        static const char *const dirs[] = { "/var/lib/zcpipe", "/run/zcpipe", "/var/cache/zcpipe" };

        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
                if (strcmp(dir, dirs[i]) == 0)
                        return true;
        return false;
}

/* `key` (output.path, metrics.frame_log.path) names something this user can create or write: "" or why not. */
static void writable(const char *path, bool socket, char *why, size_t size)
{
        char dir[ZCP_PATH_MAX];
        struct stat st;

        why[0] = '\0';
        /* The sink replaces a stale socket (its directory must then be writable, below), nothing else. */
        if (socket && lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
                snprintf(why, size, "it exists and is not a socket (%s); the service replaces only a stale socket",
                         S_ISDIR(st.st_mode) ? "a directory" : S_ISLNK(st.st_mode) ? "a symbolic link" : "a file");
                return;
        }
        if (!socket && stat(path, &st) == 0) {
                if (S_ISDIR(st.st_mode))
                        snprintf(why, size, "it is a directory");
                else if (access(path, W_OK) != 0)
                        snprintf(why, size, "it cannot be written (%s)", strerror(errno));
                return;
        }
        dir_of(path, dir, sizeof(dir));
        if (stat(dir, &st) != 0) {
                if (errno != ENOENT || !service_dir(dir))
                        snprintf(why, size, "its directory %s %s", dir,
                                 errno == ENOENT ? "does not exist" : strerror(errno));
        }
        else if (!S_ISDIR(st.st_mode))
                snprintf(why, size, "%s is not a directory", dir);
        else if (access(dir, W_OK | X_OK) != 0)
                snprintf(why, size, "its directory %s cannot be written (%s)", dir, strerror(errno));
}

static const char fix[] = "fix: create the directory, or name a path the service may write "
                          "(/var/lib/zcpipe, /run/zcpipe for sockets: the service makes them at start)";

int zcp_preflight_output(const struct zcp_stream_config *sc, char *msg, size_t size)
{
        const struct zcp_output_config *out = &sc->output;
        char why[ZCP_PATH_MAX + 128];

        if (out->type != ZCP_OUTPUT_FILE && out->type != ZCP_OUTPUT_UNIX)
                return 0;
        writable(out->path, out->type == ZCP_OUTPUT_UNIX, why, sizeof(why));
        if (!why[0])
                return 0;
        snprintf(msg, size, "stream %s: output.path %s: %s; %s", sc->name, out->path, why, fix);
        return ZCP_ERR_CONFIG;
}

static void check_outputs(const struct zcp_config *cfg, int *bad)
{
        char why[ZCP_PATH_MAX + 256];

        for (uint32_t i = 0; i < cfg->stream_count; i++)
                if (zcp_preflight_output(&cfg->streams[i], why, sizeof(why)) < 0)
                        problem(cfg, bad, "%s", why);
        if (cfg->metrics.frame_log.path[0]) {
                writable(cfg->metrics.frame_log.path, false, why, sizeof(why));
                if (why[0])
                        problem(cfg, bad, "metrics.frame_log.path %s: %s; %s", cfg->metrics.frame_log.path, why, fix);
        }
}

/* ---- outputs that would share a file ------------------------------------------------- */

/* `path` with its directory's symbolic links and dot components resolved (when the directory exists). */
static void canonical(const char *path, char *out, size_t size)
{
        char dir[ZCP_PATH_MAX], real[PATH_MAX];
        const char *base = strrchr(path, '/');

        dir_of(path, dir, sizeof(dir));
        if (base && realpath(dir, real))
                snprintf(out, size, "%s/%s", strcmp(real, "/") == 0 ? "" : real, base + 1);
        else
                snprintf(out, size, "%s", path);
}

int zcp_preflight_outputs_distinct(const struct zcp_config *cfg, char *msg, size_t size)
{
        struct {
                char path[PATH_MAX + ZCP_PATH_MAX];
                char what[ZCP_NAME_MAX + 64];
        } *seen = calloc(ZCP_CONFIG_MAX_STREAMS + 1, sizeof(*seen));
        uint32_t n = 0;
        int r = 0;

        if (!seen)
                return -ENOMEM;
        if (cfg->metrics.frame_log.path[0]) {
                canonical(cfg->metrics.frame_log.path, seen[n].path, sizeof(seen[n].path));
                snprintf(seen[n++].what, sizeof(seen[0].what), "metrics.frame_log.path");
        }
        for (uint32_t i = 0; i < cfg->stream_count && r == 0; i++) {
                const struct zcp_stream_config *sc = &cfg->streams[i];

                if (sc->output.type != ZCP_OUTPUT_FILE && sc->output.type != ZCP_OUTPUT_UNIX)
                        continue;
                canonical(sc->output.path, seen[n].path, sizeof(seen[n].path));
                snprintf(seen[n].what, sizeof(seen[0].what), "the output of stream %s", sc->name);
                for (uint32_t j = 0; j < n; j++) {
                        if (strcmp(seen[j].path, seen[n].path) != 0)
                                continue;
                        snprintf(msg, size,
                                 "%s: stream %s: output.path %s is also %s: %s; fix: one path for each",
                                 cfg->source_path, sc->name, sc->output.path, seen[j].what,
                                 sc->output.type == ZCP_OUTPUT_UNIX
                                         ? "one unix socket serves one stream (its clients would get only one)"
                                         : "the lines of both would interleave in one file");
                        r = ZCP_ERR_CONFIG;
                        break;
                }
                n++;
        }
        free(seen);
        return r;
}

/* ---- all of it -------------------------------------------------------------------- */

int zcp_preflight_check(const struct zcp_config *cfg)
{
        char msg[ZCP_PATH_MAX * 2 + 512];
        int bad = 0, r;

        check_models(cfg, &bad);
        check_outputs(cfg, &bad);
        r = zcp_preflight_outputs_distinct(cfg, msg, sizeof(msg));
        if (r < 0) {
                zcp_log_line(ZCP_LOG_ERROR, "%s", r == ZCP_ERR_CONFIG ? msg : zcp_strerror(r));
                bad = ZCP_ERR_CONFIG;
        }
        if (cfg->metrics.http.enabled && cfg->metrics.http.auth_file[0]) {
                struct zcp_auth auth;

                /* read as the service will, with its permissions */
                if (zcp_auth_load(cfg->metrics.http.auth_file, &auth, msg, sizeof(msg)) < 0)
                        problem(cfg, &bad, "%s", msg);
                explicit_bzero(&auth, sizeof(auth));
        }
        return bad;
}
