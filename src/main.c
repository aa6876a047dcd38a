/* SPDX-License-Identifier: MIT */
/*
 * zcpipe: command line, config, signals and the control loop.
 *
 * The main thread owns control: it loads the config, builds and starts one
 * stream per `streams:` entry, then sleeps in poll() on a signalfd
 * (SIGINT/SIGTERM stop, SIGHUP reload), an eventfd the streams write when
 * they end, and a 1 s timerfd for periodic work (summary lines). Frames never
 * touch this thread.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/exitcode.h"
#include "core/log.h"
#include "core/registry.h"
#include "infer/backend.h"
#include "infer/model.h"
#include "output/publish.h"
#include "pipeline.h"

struct app {
        struct zcp_config *config;
        struct zcp_registry *registry;      /* what exporters see */
        struct zcp_stream *streams[ZCP_CONFIG_MAX_STREAMS];
        uint32_t stream_count;
        int sig_fd, done_fd, tick_fd;
        uint64_t ticks;
        bool stopping;
};

static void usage(FILE *out)
{
        fprintf(out,
                "Usage: zcpipe --config FILE [--check] [--log-level LEVEL]\n"
                "\n"
                "Real-time video pipeline: capture into CUDA-mapped buffers, convert in place,\n"
                "run the model on the GPU (or the CPU reference), publish per-frame results.\n"
                "\n"
                "  -c, --config FILE      configuration (YAML); see config/camera.yaml\n"
                "  -n, --check            validate the configuration and weights, then exit\n"
                "  -l, --log-level LEVEL  error, warn, info or debug (overrides the config)\n"
                "  -h, --help             this text\n"
                "  -V, --version          version and built-in features\n"
                "\n"
                "Exit codes: 0 done, 1 a stream failed, 64 bad usage, 66 input missing or unreadable,\n"
                "69 no usable GPU for backend: cuda, 70 internal error, 78 bad configuration or\n"
                "weights, 86 fatal GPU error (restart the process).\n");
}

static void version(void)
{
        printf("zcpipe %s (cuda %s, gstreamer %s, v4l2 %s, systemd %s, http %s)\n", ZCP_VERSION,
               HAVE_CUDA ? "yes" : "no", HAVE_GSTREAMER ? "yes" : "no", HAVE_V4L2 ? "yes" : "no",
               HAVE_SYSTEMD ? "yes" : "no", HAVE_HTTP ? "yes" : "no");
}

static int exit_code_for(int err)
{
        switch (err) {
        case 0:
                return ZCP_EXIT_OK;
        case ZCP_ERR_CONFIG:
                return ZCP_EXIT_CONFIG;
        case ZCP_ERR_INPUT:
                return ZCP_EXIT_NOINPUT;
        case ZCP_ERR_GPU_STICKY:
                return ZCP_EXIT_GPU_FATAL;
        case -ENODEV:
                return ZCP_EXIT_NO_DEVICE;
        case -ENOMEM:
                return ZCP_EXIT_FAILURE;
        default:
                return ZCP_EXIT_FAILURE;
        }
}

/* --check: the config parsed; also load every stream's weights. */
static int check_weights(const struct zcp_config *cfg)
{
        for (uint32_t i = 0; i < cfg->stream_count; i++) {
                const struct zcp_stream_config *sc = &cfg->streams[i];
                struct zcp_model *m = NULL;
                char err[512];

                if (!sc->model.enabled)
                        continue;
                if (zcp_model_load(sc->model.weights, &m, err, sizeof(err)) < 0 ||
                    (sc->model.labels[0] && zcp_model_load_labels(m, sc->model.labels, err, sizeof(err)) < 0)) {
                        fprintf(stderr, "%s\n", err);
                        zcp_model_free(m);
                        return ZCP_EXIT_CONFIG;
                }
                zcp_model_free(m);
        }
        return ZCP_EXIT_OK;
}

static int setup_fds(struct app *app)
{
        struct itimerspec tick = { .it_interval = { 1, 0 }, .it_value = { 1, 0 } };
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        /* Blocked before any thread starts, so every thread inherits the mask. */
        if (pthread_sigmask(SIG_BLOCK, &mask, NULL) != 0)
                return -errno;
        signal(SIGPIPE, SIG_IGN);
        app->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        app->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        app->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (app->sig_fd < 0 || app->done_fd < 0 || app->tick_fd < 0)
                return -errno;
        if (timerfd_settime(app->tick_fd, 0, &tick, NULL) < 0)
                return -errno;
        return 0;
}

static void stop_all(struct app *app, const char *why)
{
        if (app->stopping)
                return;
        app->stopping = true;
        zcp_info("stopping (%s)", why);
        for (uint32_t i = 0; i < app->stream_count; i++)
                zcp_stream_stop(app->streams[i]);
}

static bool all_finished(const struct app *app)
{
        for (uint32_t i = 0; i < app->stream_count; i++)
                if (!zcp_stream_finished(app->streams[i]))
                        return false;
        return true;
}

static void on_tick(struct app *app)
{
        uint32_t every = app->config->log.summary_interval_s;
        char line[256];

        app->ticks++;
        if (every == 0 || app->ticks % every != 0)
                return;
        for (uint32_t i = 0; i < app->stream_count; i++) {
                struct zcp_stream_view v;

                zcp_stream_view(app->streams[i], &v);
                zcp_summary_line(line, sizeof(line), v.name, v.stats);
                zcp_info("%s", line);
        }
}

static void on_signal(struct app *app)
{
        struct signalfd_siginfo si;

        while (read(app->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                switch (si.ssi_signo) {
                case SIGINT:
                case SIGTERM:
                        stop_all(app, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
                        break;
                case SIGHUP:
                        zcp_warn("SIGHUP: configuration reload is not available in this build; still running %s",
                                 app->config->source_path);
                        break;
                default:
                        break;
                }
        }
}

static int run(struct app *app)
{
        struct pollfd pfd[3] = {
                { .fd = app->sig_fd, .events = POLLIN },
                { .fd = app->done_fd, .events = POLLIN },
                { .fd = app->tick_fd, .events = POLLIN },
        };

        while (!all_finished(app)) {
                uint64_t v;

                if (poll(pfd, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (pfd[0].revents & POLLIN)
                        on_signal(app);
                if ((pfd[1].revents & POLLIN) && read(app->done_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                        return -errno;
                if ((pfd[2].revents & POLLIN) && read(app->tick_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
                        on_tick(app);
                /* A stream that failed on its own stops the others: one exit code for the process. */
                for (uint32_t i = 0; i < app->stream_count; i++)
                        if (zcp_stream_finished(app->streams[i]) && zcp_stream_join(app->streams[i]) < 0)
                                stop_all(app, "a stream failed");
        }
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "check", no_argument, NULL, 'n' },
                { "log-level", required_argument, NULL, 'l' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { 0 },
        };
        struct app app = { .sig_fd = -1, .done_fd = -1, .tick_fd = -1 };
        const char *config_path = NULL, *level_arg = NULL;
        bool check = false;
        int opt, r, exit_code = ZCP_EXIT_OK;
        char err[1024];

        while ((opt = getopt_long(argc, argv, "c:nl:hV", opts, NULL)) != -1) {
                switch (opt) {
                case 'c':
                        config_path = optarg;
                        break;
                case 'n':
                        check = true;
                        break;
                case 'l':
                        level_arg = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return ZCP_EXIT_OK;
                case 'V':
                        version();
                        return ZCP_EXIT_OK;
                default:
                        usage(stderr);
                        return ZCP_EXIT_USAGE;
                }
        }
        if (!config_path || optind != argc) {
                usage(stderr);
                return ZCP_EXIT_USAGE;
        }
        if (level_arg && zcp_enum_from_name(zcp_log_level_names, ZCP_LOG_LEVEL_COUNT, level_arg) < 0) {
                fprintf(stderr, "zcpipe: unknown log level '%s' (error, warn, info, debug)\n", level_arg);
                return ZCP_EXIT_USAGE;
        }

        r = zcp_config_load(config_path, &app.config, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "%s\n", err);
                return r == -EINVAL || r == -EFBIG ? ZCP_EXIT_CONFIG : ZCP_EXIT_NOINPUT;
        }
        zcp_log_set_level(level_arg ? (enum zcp_log_level)zcp_enum_from_name(zcp_log_level_names, ZCP_LOG_LEVEL_COUNT,
                                                                             level_arg)
                                    : app.config->log.level);
        if (check) {
                exit_code = check_weights(app.config);
                if (exit_code == ZCP_EXIT_OK)
                        printf("%s: configuration OK (%u stream%s)\n", config_path, app.config->stream_count,
                               app.config->stream_count == 1 ? "" : "s");
                zcp_config_free(app.config);
                return exit_code;
        }

        r = zcp_registry_new(&app.registry);
        if (r == 0)
                r = setup_fds(&app);
        if (r < 0) {
                zcp_err("cannot set up signals and timers: %s", strerror(-r));
                exit_code = ZCP_EXIT_INTERNAL;
                goto out;
        }

        for (uint32_t i = 0; i < app.config->stream_count; i++) {
                r = zcp_stream_new(&app.config->streams[i], i, app.done_fd, &app.streams[i]);
                if (r < 0) {
                        exit_code = exit_code_for(r);
                        goto out;
                }
                app.stream_count++;
        }
        for (uint32_t i = 0; i < app.stream_count; i++) {
                r = zcp_stream_start(app.streams[i]);
                if (r < 0) {
                        exit_code = exit_code_for(r);
                        stop_all(&app, "a stream failed to start");
                        goto out;
                }
        }
        zcp_registry_set(app.registry, app.streams, app.stream_count);
        zcp_info("running %u stream%s from %s", app.stream_count, app.stream_count == 1 ? "" : "s",
                 app.config->source_path);

        r = run(&app);
        if (r < 0) {
                zcp_err("control loop failed: %s", strerror(-r));
                exit_code = ZCP_EXIT_INTERNAL;
        }
        stop_all(&app, "done");

out:
        for (uint32_t i = 0; i < app.stream_count; i++) {
                struct zcp_stream_view v;

                r = zcp_stream_join(app.streams[i]);
                if (r < 0 && exit_code == ZCP_EXIT_OK)
                        exit_code = exit_code_for(r);
                zcp_stream_view(app.streams[i], &v);
                zcp_summary_print(stderr, v.name, v.stats);
        }
        if (app.registry)
                zcp_registry_set(app.registry, NULL, 0);
        for (uint32_t i = 0; i < app.stream_count; i++)
                zcp_stream_free(app.streams[i]);
        zcp_registry_free(app.registry);
        if (app.sig_fd >= 0)
                close(app.sig_fd);
        if (app.done_fd >= 0)
                close(app.done_fd);
        if (app.tick_fd >= 0)
                close(app.tick_fd);
        zcp_config_free(app.config);
        return exit_code;
}
