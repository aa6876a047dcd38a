/* SPDX-License-Identifier: MIT */
/*
 * zcpipe: command line, config, signals, the service manager and the
 * control loop.
 *
 * The main thread owns control: it loads the config, builds and starts one
 * stream per `streams:` entry (each in a supervisor slot, daemon/supervisor.h),
 * then sleeps in poll() on a signalfd (SIGINT/SIGTERM stop, SIGHUP reload), an
 * eventfd the streams write when they end, a 1 s timerfd (STATUS=, summary
 * lines) and, when systemd asks for one, a watchdog timerfd at half the
 * WatchdogSec= interval, with a timeout for the next re-open that is due. A
 * stream that ends by itself goes to the supervisor (zcp_sup_poll): it is
 * restarted alone with back-off, continued on a new ring, or it tells the
 * loop that the process must stop (and with which code). Frames never touch
 * this thread.
 *
 * systemd (docs/service.md): READY=1 once every stream runs (a camera that is
 * absent counts as running: its source waits for it with back-off, and
 * STATUS= says so); STATUS= every second; WATCHDOG=1 only while frames keep
 * completing (see watchdog_check); RELOADING=1 ... READY=1 around a reload;
 * STOPPING=1 when the streams are asked to stop.
 *
 * Start-up: a stream that cannot open is the supervisor's like one that
 * failed at run time (back-off, or failed for a file that does not heal);
 * the others run. Reload (SIGHUP): the file is parsed and validated whole; a
 * bad file is refused and the running config stays; a good one goes to the
 * supervisor (zcp_sup_apply), which replaces only the streams whose effective
 * config changed and rolls back when one cannot start. Every stream keeps its
 * own copy of its config; the HTTP server and the frame log copy theirs when
 * they open, so one config struct is alive at a time (two during a reload).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/config.h"
#include "core/err.h"
#include "core/exitcode.h"
#include "core/log.h"
#include "capture/source.h"
#include "daemon/http.h"
#include "daemon/notify.h"
#include "daemon/preflight.h"
#include "daemon/registry.h"
#include "daemon/summary.h"
#include "daemon/supervisor.h"
#include "infer/backend.h"
#include "output/framelog.h"
#include "pipeline.h"

#define STATUS_MAX  4096
/* A camera that published within this is not "waiting", whatever its state says. */
#define WAIT_QUIET_NS (2 * ZCP_NSEC_PER_SEC)

struct app {
        struct zcp_config *config;                 /* current, owned: new streams, log settings, reload path */
        struct zcp_metrics_config metrics;         /* what the HTTP server and frame log were opened with */
        bool level_from_cli;                       /* --log-level wins over the file, also after reloads */

        struct zcp_registry *registry;             /* what exporters see */
        struct zcp_http *http;
        struct zcp_framelog *framelog;
        struct zcp_sup sup;                        /* one slot per stream: its state, restarts, counters */

        int sig_fd, done_fd, tick_fd, wd_fd;
        uint64_t ticks;
        uint64_t wd_usec;                          /* WatchdogSec= in us; 0 = no watchdog */
        bool stopping;
        int failure;                               /* exit code of a failure outside the running set */
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
                "  -n, --check            validate the configuration, load the models and read every\n"
                "                         file it names (as this user), then exit\n"
                "  -l, --log-level LEVEL  error, warn, info or debug (overrides the config)\n"
                "  -h, --help             this text\n"
                "  -V, --version          version and built-in features\n"
                "\n"
                "Signals: SIGTERM/SIGINT stop cleanly, SIGHUP reloads the configuration.\n"
                "\n"
                "Exit codes: 0 done, 1 a stream failed, 64 bad usage, 66 input missing or unreadable,\n"
                "69 no usable GPU for backend: cuda, 70 internal error, 78 bad configuration or\n"
                "weights, 86 fatal GPU error (restart the process).\n");
}

/* Every optional feature of the build (meson_options.txt), "name yes|no": packagers check it. */
static void version(void)
{
        printf("zcpipe %s (cuda %s, gstreamer %s, v4l2 %s, systemd %s, http %s, mqtt %s, snapshots %s)\n",
               ZCP_VERSION, HAVE_CUDA ? "yes" : "no", HAVE_GSTREAMER ? "yes" : "no", HAVE_V4L2 ? "yes" : "no",
               HAVE_SYSTEMD ? "yes" : "no", HAVE_HTTP ? "yes" : "no", HAVE_MQTT ? "yes" : "no",
               HAVE_SNAPSHOT ? "yes" : "no");
}

/* The loader's errors, one log line each (zcp_config_load writes one line per error). */
static void log_config_errors(const char *err)
{
        while (*err) {
                size_t n = strcspn(err, "\n");

                zcp_log_line(ZCP_LOG_ERROR, "%.*s", (int)n, err);
                err += n + (err[n] == '\n');
        }
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
        default:
                return ZCP_EXIT_FAILURE;
        }
}

/*
 * The exit code of a config file that did not load: 78 (EX_CONFIG) for one
 * that was read and is wrong (syntax, keys, values, over 1 MiB), 66 for one
 * that cannot be read as a config file at all (missing, no permission, a
 * directory, a FIFO, a device or a socket), whatever its kind.
 */
static int config_exit_code(const char *path, int err)
{
        struct stat st;

        if (err == -EFBIG)
                return ZCP_EXIT_CONFIG;
        if (err == -EINVAL && stat(path, &st) == 0 && S_ISREG(st.st_mode))
                return ZCP_EXIT_CONFIG;
        return ZCP_EXIT_NOINPUT;
}

static void apply_log_level(const struct app *app)
{
        if (!app->level_from_cli)
                zcp_log_set_level(app->config->log.level);
}

/* ---- streams ------------------------------------------------------------------ */

static void stop_all(struct app *app, const char *why)
{
        if (app->stopping)
                return;
        app->stopping = true;
        zcp_info("stopping (%s)", why);
        zcp_notifyf("STOPPING=1\nSTATUS=stopping (%s)", why);
        for (uint32_t i = 0; i < app->sup.count; i++)
                zcp_sup_slot_stop(app->sup.slots[i]);
}

/* While stopping: every stream's threads are done. */
static bool all_finished(const struct app *app)
{
        for (uint32_t i = 0; i < app->sup.count; i++)
                if (app->sup.slots[i]->stream && !zcp_stream_finished(app->sup.slots[i]->stream))
                        return false;
        return true;
}

/*
 * A live source (camera) that says it is not up (absent, re-opening with
 * back-off) and has published nothing for a while: it waits for its device.
 */
static bool waiting_for_device(const struct zcp_sup_slot *slot)
{
        const struct zcp_stream_stats *st = slot->stats;
        uint32_t state = atomic_load(&st->source_state);
        uint64_t last = atomic_load(&st->last_publish_ns);

        if (!slot->stream || !slot->info.live ||
            (state != ZCP_SOURCE_DOWN && state != ZCP_SOURCE_OPENING && state != ZCP_SOURCE_BACKOFF))
                return false;
        return last == 0 || zcp_now_ns() - last > WAIT_QUIET_NS;
}

/* ---- STATUS= and the periodic summary ---------------------------------------- */

/*
 * STATUS=: what the service does now (with several GPUs, the streams on each),
 * then one summary line per stream
 * (supervisor state, frames, current fps, p50/p99, drops). `also` (may be "")
 * goes in the same datagram, e.g. "READY=1\n", so the manager never sees one
 * without the other.
 */
static void send_status(const struct app *app, const char *also)
{
        char lines[STATUS_MAX - 512], waiting[384] = "", down[384] = "", gpus[256] = "";
        size_t n = 0, w = 0, d = 0, s = 0;

        lines[0] = '\0';
        for (uint32_t i = 0; i < app->sup.count; i++) {
                const struct zcp_sup_slot *slot = app->sup.slots[i];
                char line[320];
                int k;

                zcp_summary_line(line, sizeof(line), slot->cfg.name, slot->stats, zcp_sup_slot_fps(slot));
                if (n < sizeof(lines)) {
                        k = snprintf(lines + n, sizeof(lines) - n, "; %s", line);
                        n += k > 0 ? (size_t)k : 0;
                }
                if (slot->state != ZCP_STREAM_UP && slot->last_error[0] && n < sizeof(lines)) {
                        k = snprintf(lines + n, sizeof(lines) - n, " [%s]", slot->last_error);
                        n += k > 0 ? (size_t)k : 0;
                }
                /* A GPU that backend: auto could not use: say so where operators look. */
                if (slot->stream) {
                        struct zcp_stream_view v;

                        zcp_stream_view(slot->stream, &v);
                        if (v.backend_degraded && n < sizeof(lines)) {
                                k = snprintf(lines + n, sizeof(lines) - n, " [backend %s: %s]", v.backend,
                                             v.backend_reason);
                                n += k > 0 ? (size_t)k : 0;
                        }
                }
                if (waiting_for_device(slot) && w < sizeof(waiting)) {
                        k = snprintf(waiting + w, sizeof(waiting) - w, "%s%s", w ? ", " : "", slot->cfg.name);
                        w += k > 0 ? (size_t)k : 0;
                }
                if ((slot->state == ZCP_STREAM_BACKOFF || slot->state == ZCP_STREAM_FAILED) && d < sizeof(down)) {
                        k = snprintf(down + d, sizeof(down) - d, "%s%s %s", d ? ", " : "", slot->cfg.name,
                                     zcp_stream_state_names[slot->state]);
                        d += k > 0 ? (size_t)k : 0;
                }
        }
        /* Several GPUs: each one's share of the streams ("running on GPU 0: 8 streams, GPU 1: 8"). */
        for (uint32_t g = 0; app->sup.gpus.count > 1 && g < app->sup.gpus.count && g < ZCP_GPU_MAX && s < sizeof(gpus);
             g++) {
                int k = snprintf(gpus + s, sizeof(gpus) - s, "%s GPU %u: %u%s", g ? "," : " on", g,
                                 app->sup.gpu_streams[g], g ? "" : " streams");
                s += k > 0 ? (size_t)k : 0;
        }
        if (app->stopping)
                zcp_notifyf("%sSTATUS=stopping%s", also, lines);
        else if (w || d)
                zcp_notifyf("%sSTATUS=running%s%s%s%s%s%s", also, gpus, d ? ", down: " : "", down,
                            w ? ", waiting for the camera of " : "", waiting, lines);
        else
                zcp_notifyf("%sSTATUS=running%s%s", also, gpus, lines);
}

static void on_tick(struct app *app)
{
        uint32_t every = app->config->log.summary_interval_s;
        char line[320];

        app->ticks++;
        zcp_sup_tick(&app->sup, zcp_now_ns());
        send_status(app, "");
        if (every == 0 || app->ticks % every != 0)
                return;
        for (uint32_t i = 0; i < app->sup.count; i++) {
                const struct zcp_sup_slot *slot = app->sup.slots[i];

                zcp_summary_line(line, sizeof(line), slot->cfg.name, slot->stats, zcp_sup_slot_fps(slot));
                zcp_info("%s", line);
        }
}

/* ---- watchdog ------------------------------------------------------------------ */

/* What the watchdog compares: frames published, and the runs (restarts, new rings) that give grace. */
static uint64_t wd_runs(const struct zcp_sup_slot *slot)
{
        return atomic_load(&slot->stats->restarts) + atomic_load(&slot->stats->reconfigures);
}

/*
 * Called every WatchdogSec/2. Pings only if every stream made progress since
 * the last ping: it published frames, or its stream is not up (in back-off,
 * failed or ended: the supervisor handles it, a restart of the process would
 * not), or it is a live source (camera) waiting for its device (absent,
 * re-opening with back-off: the source itself reports that state; a restart
 * would not bring the camera back, and a restart loop would hit the start
 * limit). A stream that is up and completes no frame (a thread hangs in a
 * stage) stops the pings, and systemd restarts the service after
 * WatchdogSec. A stream started or re-opened since the last check (start,
 * reload, restart, new ring) gets one interval of grace.
 */
static void watchdog_check(struct app *app)
{
        uint64_t now[ZCP_CONFIG_MAX_STREAMS];
        const char *stalled = NULL;

        for (uint32_t i = 0; i < app->sup.count; i++) {
                const struct zcp_sup_slot *slot = app->sup.slots[i];

                now[i] = atomic_load(&slot->stats->published);
                if (slot->wd_mark == ZCP_SUP_WD_FRESH || now[i] != slot->wd_mark || slot->wd_runs != wd_runs(slot) ||
                    slot->state != ZCP_STREAM_UP || !slot->stream || zcp_stream_finished(slot->stream) ||
                    waiting_for_device(slot))
                        continue;
                stalled = slot->cfg.name;
                break;
        }
        for (uint32_t i = 0; i < app->sup.count; i++)
                app->sup.slots[i]->wd_runs = wd_runs(app->sup.slots[i]);
        if (stalled) {
                ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * ZCP_NSEC_PER_SEC,
                                    "%s: no frame completed for at least %" PRIu64 " ms: not feeding the watchdog", stalled,
                                    app->wd_usec / 2000);
                return;
        }
        for (uint32_t i = 0; i < app->sup.count; i++)
                app->sup.slots[i]->wd_mark = now[i];
        zcp_notify("WATCHDOG=1");
}

/* ---- reload ------------------------------------------------------------------------ */

/*
 * Runs on the main thread, like the supervisor's restarts (zcp_sup_poll), so
 * a reload never races one: the supervisor applies the new streams with
 * rollback (zcp_sup_apply); what else the file says (log level) applies here.
 */
static void reload(struct app *app)
{
        struct zcp_sup_apply done;
        struct zcp_config *next = NULL;
        static char err[ZCP_CONFIG_ERRBUF];
        int r;

        if (app->stopping) {
                zcp_info("SIGHUP: stopping already, not reloading");
                return;
        }
        zcp_notify("RELOADING=1\nSTATUS=reloading the configuration");
        zcp_info("SIGHUP: reloading %s", app->config->source_path);
        r = zcp_config_load(app->config->source_path, &next, err, sizeof(err));
        if (r == 0 && (zcp_sup_check_budget(next, err, sizeof(err)) < 0 ||
                       zcp_place_check_host(next, err, sizeof(err)) < 0 ||
                       zcp_preflight_outputs_distinct(next, err, sizeof(err)) < 0))
                r = ZCP_ERR_CONFIG;
        if (r < 0) {
                zcp_config_free(next);
                log_config_errors(err);
                zcp_err("reload refused: still running the previous configuration");
                goto done;
        }
        if (memcmp(&next->metrics, &app->metrics, sizeof(next->metrics)) != 0)
                zcp_warn("reload: the metrics settings changed; they take effect when zcpipe restarts");
        if (next->pinned_budget != app->config->pinned_budget)
                zcp_warn("reload: pinned_budget changed; it takes effect when zcpipe restarts");

        if (zcp_sup_apply(&app->sup, next, &done) < 0) {
                zcp_config_free(next);
                if (done.fatal) {
                        if (!app->failure)
                                app->failure = exit_code_for(done.fatal);
                        stop_all(app, "a stream failed to start again after a failed reload");
                }
                goto done;
        }
        zcp_config_free(app->config);
        app->config = next;
        apply_log_level(app);
        zcp_info("reloaded %s: %u stream%s kept running, %u stopped, %u started", next->source_path, done.kept,
                 done.kept == 1 ? "" : "s", done.stopped, done.started);
done:
        send_status(app, "READY=1\n");
}

/* ---- the loop ------------------------------------------------------------------------ */

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
        /* A file over RLIMIT_FSIZE is a write error the sinks count (EFBIG), not a reason to die. */
        signal(SIGXFSZ, SIG_IGN);
        app->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        app->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        app->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (app->sig_fd < 0 || app->done_fd < 0 || app->tick_fd < 0)
                return -errno;
        if (timerfd_settime(app->tick_fd, 0, &tick, NULL) < 0)
                return -errno;

        if (zcp_notify_watchdog_usec(&app->wd_usec) > 0) {
                uint64_t half_ns = app->wd_usec * ZCP_NSEC_PER_USEC / 2;
                struct itimerspec wd = {
                        .it_interval = { (time_t)(half_ns / ZCP_NSEC_PER_SEC), (long)(half_ns % ZCP_NSEC_PER_SEC) },
                };

                wd.it_value = wd.it_interval;
                app->wd_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
                if (app->wd_fd < 0 || timerfd_settime(app->wd_fd, 0, &wd, NULL) < 0)
                        return -errno;
                zcp_info("watchdog: %" PRIu64 " ms, fed while frames complete (checked every %" PRIu64 " ms)",
                         app->wd_usec / 1000, app->wd_usec / 2000);
        }
        return 0;
}

/*
 * Start-up and re-opens: opening a stream can take seconds (a network
 * camera's connect timeout, a file's preroll). Meanwhile a thread answers
 * SIGINT and SIGTERM: it cancels every source that is opening
 * (zcp_source_cancel_all, they give up within ~50 ms) and main stops instead
 * of running. Its own signalfd takes only these two, so a SIGHUP stays
 * pending for the loop.
 */
struct startup_watch {
        pthread_t thread;
        int sig_fd, stop_fd;
        _Atomic int signo;
        bool running;
        const char *phase;   /* for the log: "during start-up", "while a stream re-opens" */
};

static void *startup_watch_run(void *arg)
{
        struct startup_watch *w = arg;
        struct pollfd pfd[2] = { { .fd = w->sig_fd, .events = POLLIN }, { .fd = w->stop_fd, .events = POLLIN } };
        struct signalfd_siginfo si;

        for (;;) {
                if (poll(pfd, 2, -1) < 0 && errno != EINTR)
                        return NULL;
                if (pfd[1].revents & POLLIN)
                        return NULL;
                if ((pfd[0].revents & POLLIN) && read(w->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                        atomic_store(&w->signo, (int)si.ssi_signo);
                        zcp_source_cancel_all();
                        zcp_info("%s %s: stopping", si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM", w->phase);
                        return NULL;
                }
        }
}

/* After setup_fds (the signals are blocked). Without the thread, start-up is just not interruptible. */
static void startup_watch_begin(struct startup_watch *w)
{
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        w->sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        atomic_init(&w->signo, 0);
        w->running = w->sig_fd >= 0 && w->stop_fd >= 0 &&
                     pthread_create(&w->thread, NULL, startup_watch_run, w) == 0;
        if (!w->running)
                zcp_warn("cannot watch for signals during start-up: %s", strerror(errno));
}

/* Ends the watch; returns the signal that came during start-up, or 0. */
static int startup_watch_end(struct startup_watch *w)
{
        uint64_t one = 1;

        if (w->running) {
                if (write(w->stop_fd, &one, sizeof(one)) < 0)
                        zcp_warn("start-up signal watch: %s", strerror(errno));
                pthread_join(w->thread, NULL);
                w->running = false;
        }
        if (w->sig_fd >= 0)
                close(w->sig_fd);
        if (w->stop_fd >= 0)
                close(w->stop_fd);
        w->sig_fd = w->stop_fd = -1;
        return atomic_load(&w->signo);
}

static void on_signal(struct app *app)
{
        struct signalfd_siginfo si;

        while (read(app->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                switch (si.ssi_signo) {
                case SIGINT:
                case SIGTERM:
                        zcp_source_cancel_all();   /* a source re-connecting gives up at once */
                        stop_all(app, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
                        break;
                case SIGHUP:
                        reload(app);
                        break;
                default:
                        break;
                }
        }
}

/*
 * The supervisor's turn (zcp_sup_poll). A re-open can block for a network
 * source's connect_timeout_ms: while one is due, SIGINT and SIGTERM are
 * watched as during start-up, and cancel it. Returns true when the process
 * must stop, with *ret_err.
 */
static bool supervise(struct app *app, int *ret_err)
{
        struct startup_watch w = { .sig_fd = -1, .stop_fd = -1, .phase = "while a stream re-opens" };
        bool reopen = zcp_sup_timeout_ms(&app->sup, zcp_now_ns()) == 0, stop;
        int signo;

        if (reopen)
                startup_watch_begin(&w);
        stop = zcp_sup_poll(&app->sup, zcp_now_ns(), ret_err);
        if (!reopen)
                return stop;
        signo = startup_watch_end(&w);
        if (signo) {
                stop_all(app, signo == SIGINT ? "SIGINT" : "SIGTERM");
                return false;
        }
        return stop;
}

static int run(struct app *app)
{
        struct pollfd pfd[4] = {
                { .fd = app->sig_fd, .events = POLLIN },
                { .fd = app->done_fd, .events = POLLIN },
                { .fd = app->tick_fd, .events = POLLIN },
                { .fd = app->wd_fd, .events = POLLIN },   /* -1 without a watchdog: ignored by poll */
        };

        while (!app->stopping || !all_finished(app)) {
                uint64_t v;
                int err = 0;

                /* Wakes for signals, streams that end, ticks, and the next re-open that is due. */
                if (poll(pfd, 4, app->stopping ? -1 : zcp_sup_timeout_ms(&app->sup, zcp_now_ns())) < 0) {
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
                if ((pfd[3].revents & POLLIN) && read(app->wd_fd, &v, sizeof(v)) == (ssize_t)sizeof(v) &&
                    !app->stopping)
                        watchdog_check(app);
                /* A stream that ended by itself: the supervisor restarts it, or says the process must stop. */
                if (!app->stopping && supervise(app, &err)) {
                        if (!app->failure)
                                app->failure = exit_code_for(err);
                        stop_all(app, err ? "a stream failed and is not restarted" : "every stream ended");
                }
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
        struct app app = { .sig_fd = -1, .done_fd = -1, .tick_fd = -1, .wd_fd = -1 };
        struct startup_watch watch = { .sig_fd = -1, .stop_fd = -1, .phase = "during start-up" };
        int stop_signo;
        const char *config_path = NULL, *level_arg = NULL;
        struct zcp_config *config = NULL;
        bool check = false;
        int opt, r, exit_code = ZCP_EXIT_OK;
        static char err[ZCP_CONFIG_ERRBUF];

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

        /* --check also reads every file the config names, as the user it runs as can (the service's) */
        r = zcp_config_load_flags(config_path, check ? ZCP_CONFIG_READ_FILES : 0, &config, err, sizeof(err));
        if (r < 0) {
                log_config_errors(err);
                return config_exit_code(config_path, r);
        }
        app.config = config;
        app.metrics = config->metrics;
        app.level_from_cli = level_arg != NULL;
        zcp_log_set_level(level_arg ? (enum zcp_log_level)zcp_enum_from_name(zcp_log_level_names, ZCP_LOG_LEVEL_COUNT,
                                                                             level_arg)
                                    : config->log.level);
        if (check) {
                /* what the parser cannot see: models, outputs, files (daemon/preflight.h), the pinned budget,
                 * GPUs the host lacks */
                exit_code = zcp_preflight_check(config) < 0 ? ZCP_EXIT_CONFIG : ZCP_EXIT_OK;
                if (zcp_sup_check_budget(config, err, sizeof(err)) < 0) {
                        zcp_log_line(ZCP_LOG_ERROR, "%s", err);
                        exit_code = ZCP_EXIT_CONFIG;
                }
                if (zcp_place_check_host(config, err, sizeof(err)) < 0) {
                        zcp_log_line(ZCP_LOG_ERROR, "%s", err);
                        exit_code = ZCP_EXIT_CONFIG;
                }
                if (exit_code == ZCP_EXIT_OK)
                        printf("%s: configuration OK (%u stream%s)\n", config_path, config->stream_count,
                               config->stream_count == 1 ? "" : "s");
                zcp_config_free(config);
                app.config = NULL;
                return exit_code;
        }

        if (zcp_sup_check_budget(config, err, sizeof(err)) < 0 || zcp_place_check_host(config, err, sizeof(err)) < 0 ||
            zcp_preflight_outputs_distinct(config, err, sizeof(err)) < 0) {
                zcp_log_line(ZCP_LOG_ERROR, "%s", err);
                zcp_config_free(config);
                return ZCP_EXIT_CONFIG;
        }
        r = zcp_registry_new(&app.registry);
        if (r == 0)
                r = setup_fds(&app);
        if (r < 0) {
                zcp_err("cannot set up signals and timers: %s", zcp_strerror(r));
                exit_code = ZCP_EXIT_INTERNAL;
                goto out;
        }
        startup_watch_begin(&watch);
        r = zcp_framelog_open(&config->metrics.frame_log, &app.framelog);
        if (r < 0) {
                exit_code = ZCP_EXIT_FAILURE;
                goto out;
        }
        zcp_registry_set_framelog(app.registry, app.framelog);   /* its counters on /metrics and /stats */

        /*
         * The metrics port first: a second zcpipe with the same config fails here (one error line,
         * exit 1) before it opens anything of the first one's (sockets, devices, files).
         */
        r = zcp_http_start(&config->metrics.http, app.registry, &app.http);
        if (r < 0) {
                exit_code = r == ZCP_ERR_CONFIG ? ZCP_EXIT_CONFIG : ZCP_EXIT_FAILURE;
                goto out;
        }
        /* Then every stream (config, inputs, devices, rings, sinks), then start them. */
        {
                char why[96];
                uint64_t budget = zcp_sup_pinned_budget(config, why, sizeof(why));

                zcp_sup_init(&app.sup, app.registry, app.done_fd, app.framelog, budget);
                zcp_info("pinned_budget: %.2f GiB (%s)", (double)budget / (double)(1ull << 30), why);
        }
        /*
         * A stream that cannot open now is the supervisor's (back-off, or failed for a file that
         * does not heal), as at run time; only what a re-open would end the process with ends it.
         */
        r = zcp_sup_start(&app.sup, config);
        if (r < 0) {
                exit_code = exit_code_for(r);
                stop_all(&app, "a stream cannot start and the process cannot run without it");
                goto out;
        }
        stop_signo = startup_watch_end(&watch);
        if (stop_signo) {
                stop_all(&app, stop_signo == SIGINT ? "SIGINT" : "SIGTERM");
                goto out;
        }
        /* Nothing could open for good (every stream failed): no READY=1, the first failure's code. */
        if (zcp_sup_poll(&app.sup, zcp_now_ns(), &r)) {
                app.failure = exit_code_for(r);
                stop_all(&app, r ? "no stream can run" : "every stream ended");
                goto out;
        }
        zcp_info("running %u stream%s from %s", app.sup.count, app.sup.count == 1 ? "" : "s",
                 config->source_path);
        send_status(&app, "READY=1\n");

        r = run(&app);
        if (r < 0) {
                zcp_err("control loop failed: %s", zcp_strerror(r));
                exit_code = ZCP_EXIT_INTERNAL;
        }
        stop_all(&app, "done");

out:
        /* stopped by a signal while opening: a source that gave up says so, the process ends cleanly */
        if (startup_watch_end(&watch))
                exit_code = ZCP_EXIT_OK;
        for (uint32_t i = 0; i < app.sup.count; i++) {
                struct zcp_sup_slot *slot = app.sup.slots[i];

                if (slot->stream) {
                        r = zcp_stream_join(slot->stream);
                        if (r < 0 && exit_code == ZCP_EXIT_OK)
                                exit_code = exit_code_for(r);
                }
                zcp_summary_print(stderr, slot->cfg.name, slot->stats);
        }
        if (exit_code == ZCP_EXIT_OK)
                exit_code = app.failure;
        if (app.registry)
                zcp_registry_set(app.registry, NULL, 0);
        zcp_http_stop(app.http);
        for (uint32_t i = 0; i < app.sup.count; i++) {
                zcp_stream_free(app.sup.slots[i]->stream);
                zcp_sup_slot_free(app.sup.slots[i]);
        }
        zcp_framelog_close(app.framelog);
        zcp_registry_free(app.registry);
        if (app.sig_fd >= 0)
                close(app.sig_fd);
        if (app.done_fd >= 0)
                close(app.done_fd);
        if (app.tick_fd >= 0)
                close(app.tick_fd);
        if (app.wd_fd >= 0)
                close(app.wd_fd);
        app.sup.count = 0;
        zcp_config_free(app.config);
        return exit_code;
}
