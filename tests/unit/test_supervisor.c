/* SPDX-License-Identifier: MIT */
/*
 * The supervisor (src/daemon/supervisor.c) with real synthetic streams, its
 * clock driven by the test (a re-open is due when the test says so): the
 * state machine (up -> ended; restart: always: up -> backoff -> up with the
 * counters carried on; restart: never ends the process; every stream ended
 * ends it with 0), the back-off sequence and its cap, the current rate that
 * STATUS= and the summary line show (a stalled stream says 0.0 fps now), and
 * the pinned budget's verdict and message; start-up and a reload's apply
 * (an unchanged stream keeps its very stream, a changed one keeps its slot
 * and counters, a stream that cannot open rolls everything back) and what
 * counts as a change.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "core/clock.h"
#include "core/config.h"
#include "daemon/registry.h"
#include "daemon/summary.h"
#include "daemon/supervisor.h"

static struct zcp_config *parse(const char *text)
{
        struct zcp_config *cfg = NULL;
        char err[512] = "";
        int r = zcp_config_parse("sup.yaml", text, strlen(text), &cfg, err, sizeof(err));

        CHECK_MSG(r == 0, "%s", err);
        return cfg;
}

#define STREAM(name, frames, restart)                                                           \
        "  - name: " name "\n    restart: " restart "\n    restart_backoff_max_ms: 4000\n"       \
        "    source:\n      type: synthetic\n      width: 64\n      height: 48\n"              \
        "      frames: " frames "\n      pace: fast\n"                                           \
        "    gpu:\n      backend: cpu\n    model:\n      enabled: false\n"                       \
        "    output:\n      type: none\n"

static void wait_finished(struct zcp_sup_slot *slot)
{
        for (int i = 0; i < 10000 && !zcp_stream_finished(slot->stream); i++) {
                struct timespec ts = { 0, 1000000 };
                nanosleep(&ts, NULL);
        }
        CHECK(zcp_stream_finished(slot->stream));
}

static void test_state_machine(void)
{
        struct zcp_config *cfg = parse("metrics:\n  http:\n    enabled: false\nstreams:\n" STREAM("a", "30", "always")
                                               STREAM("b", "20", "on-failure"));
        struct zcp_registry *reg = NULL;
        struct zcp_sup sup;
        struct zcp_sup_slot *a, *b;
        uint64_t now;
        int err = -1;

        CHECK(zcp_registry_new(&reg) == 0);
        zcp_sup_init(&sup, reg, -1, NULL, 0);
        CHECK(zcp_sup_slot_new(&cfg->streams[0], 0, &a) == 0);
        CHECK(zcp_sup_slot_new(&cfg->streams[1], 1, &b) == 0);
        sup.slots[0] = a;
        sup.slots[1] = b;
        zcp_sup_set_slots(&sup, sup.slots, 2);
        CHECK(zcp_sup_slot_open(&sup, a, "test") == 0);
        CHECK(zcp_sup_slot_open(&sup, b, "test") == 0);
        CHECK(zcp_sup_timeout_ms(&sup, zcp_now_ns()) == -1);

        /* b ends: ended, nothing else; a ends: restart: always = back-off of 1 s. */
        wait_finished(b);
        wait_finished(a);
        now = zcp_now_ns();
        CHECK(!zcp_sup_poll(&sup, now, &err));
        CHECK(b->state == ZCP_STREAM_ENDED && b->stream);   /* kept, joined: its last frame stays on the page */
        CHECK(atomic_load(&b->stats->stream_state) == ZCP_STREAM_ENDED);
        CHECK(a->state == ZCP_STREAM_BACKOFF && !a->stream);
        CHECK(atomic_load(&a->stats->published) == 30);
        CHECK(zcp_sup_timeout_ms(&sup, now) == 1000);
        /* Not due yet: nothing happens. */
        CHECK(!zcp_sup_poll(&sup, now + 500 * ZCP_NSEC_PER_MSEC, &err));
        CHECK(a->state == ZCP_STREAM_BACKOFF && atomic_load(&a->stats->restarts) == 0);

        /* Due: re-opened, counted; the counters carry on (monotonic across runs). */
        CHECK(!zcp_sup_poll(&sup, now + 1000 * ZCP_NSEC_PER_MSEC, &err));
        CHECK(a->state == ZCP_STREAM_UP && a->stream && atomic_load(&a->stats->restarts) == 1);
        wait_finished(a);
        now = zcp_now_ns();
        CHECK(!zcp_sup_poll(&sup, now, &err));
        CHECK(atomic_load(&a->stats->published) == 60 && atomic_load(&a->stats->captured) == 60);
        /* The back-off doubles (2 s), then is capped (4 s, the config's restart_backoff_max_ms). */
        CHECK(zcp_sup_timeout_ms(&sup, now) == 2000);
        CHECK(!zcp_sup_poll(&sup, now + 2 * ZCP_NSEC_PER_SEC, &err));
        wait_finished(a);
        now = zcp_now_ns();
        CHECK(!zcp_sup_poll(&sup, now, &err));
        CHECK(zcp_sup_timeout_ms(&sup, now) == 4000);
        CHECK(!zcp_sup_poll(&sup, now + 4 * ZCP_NSEC_PER_SEC, &err));
        wait_finished(a);
        now = zcp_now_ns();
        CHECK(!zcp_sup_poll(&sup, now, &err));
        CHECK(zcp_sup_timeout_ms(&sup, now) == 4000);
        CHECK(atomic_load(&a->stats->restarts) == 3 && atomic_load(&a->stats->published) == 120);

        CHECK(zcp_sup_slot_close(&sup, b, "test") == 0 && !b->stream);
        zcp_sup_set_slots(&sup, NULL, 0);
        zcp_sup_slot_free(a);
        zcp_sup_slot_free(b);
        zcp_registry_free(reg);
        zcp_config_free(cfg);
}

/* Exit policy: restart: never ends the process with the stream; every stream ended ends it with 0. */
static void test_exit_policy(void)
{
        struct zcp_config *cfg = parse("metrics:\n  http:\n    enabled: false\nstreams:\n" STREAM("n", "10", "never")
                                               STREAM("long", "1000000", "on-failure"));
        struct zcp_registry *reg = NULL;
        struct zcp_sup sup;
        struct zcp_sup_slot *n, *l;
        int err = -1;

        CHECK(zcp_registry_new(&reg) == 0);
        zcp_sup_init(&sup, reg, -1, NULL, 0);
        CHECK(zcp_sup_slot_new(&cfg->streams[0], 0, &n) == 0);
        CHECK(zcp_sup_slot_new(&cfg->streams[1], 1, &l) == 0);
        sup.slots[0] = n;
        sup.slots[1] = l;
        zcp_sup_set_slots(&sup, sup.slots, 2);
        CHECK(zcp_sup_slot_open(&sup, n, "test") == 0);
        CHECK(zcp_sup_slot_open(&sup, l, "test") == 0);
        wait_finished(n);
        CHECK(zcp_sup_poll(&sup, zcp_now_ns(), &err) && err == 0);
        CHECK(n->state == ZCP_STREAM_ENDED && l->state == ZCP_STREAM_UP);
        CHECK(zcp_sup_slot_close(&sup, l, "test") == 0);
        CHECK(zcp_sup_slot_close(&sup, n, "test") == 0);
        zcp_sup_set_slots(&sup, NULL, 0);
        zcp_sup_slot_free(n);
        zcp_sup_slot_free(l);
        zcp_config_free(cfg);

        /* Two streams (on-failure): the first one ending leaves the other running; both ended: 0. */
        cfg = parse("metrics:\n  http:\n    enabled: false\nstreams:\n" STREAM("x", "5", "on-failure")
                            STREAM("y", "1000000", "on-failure"));
        zcp_sup_init(&sup, reg, -1, NULL, 0);
        CHECK(zcp_sup_slot_new(&cfg->streams[0], 0, &n) == 0);
        CHECK(zcp_sup_slot_new(&cfg->streams[1], 1, &l) == 0);
        sup.slots[0] = n;
        sup.slots[1] = l;
        zcp_sup_set_slots(&sup, sup.slots, 2);
        CHECK(zcp_sup_slot_open(&sup, n, "test") == 0);
        CHECK(zcp_sup_slot_open(&sup, l, "test") == 0);
        wait_finished(n);
        err = -1;
        CHECK(!zcp_sup_poll(&sup, zcp_now_ns(), &err) && err == -1);
        CHECK(n->state == ZCP_STREAM_ENDED && l->state == ZCP_STREAM_UP);
        zcp_stream_stop(l->stream);   /* its end, as far as the supervisor can tell: no error */
        wait_finished(l);
        CHECK(zcp_sup_poll(&sup, zcp_now_ns(), &err) && err == 0);
        CHECK(n->state == ZCP_STREAM_ENDED && l->state == ZCP_STREAM_ENDED);
        zcp_sup_slot_close(&sup, n, "test");
        zcp_sup_slot_close(&sup, l, "test");
        zcp_sup_set_slots(&sup, NULL, 0);
        zcp_sup_slot_free(n);
        zcp_sup_slot_free(l);
        zcp_registry_free(reg);
        zcp_config_free(cfg);
}

/* The current rate: over the last samples, 0 once frames stop; the summary line says so. */
static void test_rate(void)
{
        struct zcp_config *cfg = parse("streams:\n" STREAM("r", "0", "on-failure"));
        struct zcp_sup sup = { 0 };
        struct zcp_sup_slot *s;
        char line[320];
        uint64_t t = 1000 * ZCP_NSEC_PER_SEC;

        CHECK(zcp_sup_slot_new(&cfg->streams[0], 0, &s) == 0);
        sup.slots[0] = s;
        sup.count = 1;
        CHECK(zcp_sup_slot_fps(s) == 0.0);
        atomic_store(&s->stats->source_state, ZCP_SOURCE_UP);
        for (int i = 0; i < 10; i++) {   /* 25 frames a second for 10 s */
                atomic_store(&s->stats->published, (uint64_t)i * 25);
                zcp_sup_tick(&sup, t + (uint64_t)i * ZCP_NSEC_PER_SEC);
        }
        CHECK_MSG(zcp_sup_slot_fps(s) > 24.99 && zcp_sup_slot_fps(s) < 25.01, "%f", zcp_sup_slot_fps(s));
        zcp_summary_line(line, sizeof(line), "r", s->stats, zcp_sup_slot_fps(s));
        CHECK_MSG(strstr(line, "r: up, 225 frames, 25.0 fps now"), "%s", line);
        /* Stalled: 2 s later the rate has halved, 5 s later it is 0, although the lifetime average is not. */
        for (int i = 10; i < 12; i++)
                zcp_sup_tick(&sup, t + (uint64_t)i * ZCP_NSEC_PER_SEC);
        CHECK_MSG(zcp_sup_slot_fps(s) > 14.99 && zcp_sup_slot_fps(s) < 15.01, "%f", zcp_sup_slot_fps(s));
        for (int i = 12; i < 15; i++)
                zcp_sup_tick(&sup, t + (uint64_t)i * ZCP_NSEC_PER_SEC);
        CHECK(zcp_sup_slot_fps(s) == 0.0);
        zcp_summary_line(line, sizeof(line), "r", s->stats, zcp_sup_slot_fps(s));
        CHECK_MSG(strstr(line, "r: up, 225 frames, 0.0 fps now"), "%s", line);
        /* Not up: the state, the restarts, the source's state while the stream is up but the source is not. */
        s->state = ZCP_STREAM_BACKOFF;
        atomic_store(&s->stats->stream_state, ZCP_STREAM_BACKOFF);
        atomic_store(&s->stats->restarts, 2);
        CHECK(zcp_sup_slot_fps(s) == 0.0);
        zcp_summary_line(line, sizeof(line), "r", s->stats, 0.0);
        CHECK_MSG(strstr(line, "r: backoff, 2 restarts, 225 frames, 0.0 fps now"), "%s", line);
        atomic_store(&s->stats->stream_state, ZCP_STREAM_UP);
        atomic_store(&s->stats->source_state, ZCP_SOURCE_BACKOFF);
        zcp_summary_line(line, sizeof(line), "r", s->stats, 0.0);
        CHECK_MSG(strstr(line, "r: up (source backoff), 2 restarts"), "%s", line);
        /* What a stopped stream's log line counts: no state of its own (it says "stopped"), no name. */
        zcp_summary_counts(line, sizeof(line), s->stats, 0.0);
        CHECK_MSG(strncmp(line, "225 frames, 0.0 fps now, e2e p50 ", 33) == 0 && strstr(line, " 0 dropped"), "%s",
                  line);
        zcp_sup_slot_free(s);
        zcp_config_free(cfg);
}

static void test_budget(void)
{
        struct zcp_config *cfg;
        char msg[2048], why[96];

        /* 640x480 YUYV (format auto counts as YUYV): 614400 bytes = 150 pages; 8 slots = 4800 KiB. */
        cfg = parse("pinned_budget: 8M\nstreams:\n"
                    "  - name: cam0\n    source:\n      type: v4l2\n      width: 640\n      height: 480\n"
                    "  - name: cam1\n    source:\n      type: v4l2\n      width: 640\n      height: 480\n"
                    "  - name: f\n    source:\n      type: file\n      path: /x.mp4\n");
        CHECK(zcp_sup_pinned_budget(cfg, why, sizeof(why)) == 8u << 20 && strcmp(why, "pinned_budget") == 0);
        CHECK(zcp_sup_check_budget(cfg, msg, sizeof(msg)) == ZCP_ERR_CONFIG);
        CHECK_MSG(strstr(msg, "sup.yaml: rings need 9.4 MiB (cam0 4.7 MiB, cam1 4.7 MiB), over pinned_budget 8.0 MiB "
                              "(pinned_budget); fix: "),
                  "%s", msg);
        CHECK(strstr(msg, " f ") == NULL);   /* the file's size is known only at open */
        zcp_config_free(cfg);
        cfg = parse("pinned_budget: 10M\nstreams:\n"
                    "  - name: cam0\n    source:\n      type: v4l2\n      width: 640\n      height: 480\n"
                    "  - name: cam1\n    source:\n      type: v4l2\n      width: 640\n      height: 480\n");
        CHECK(zcp_sup_check_budget(cfg, msg, sizeof(msg)) == 0);
        zcp_config_free(cfg);
        /* The default: 10% of MemTotal. */
        cfg = parse("streams:\n  - source:\n      type: synthetic\n");
        CHECK(zcp_sup_pinned_budget(cfg, why, sizeof(why)) > 0 && strstr(why, "10% of ") && strstr(why, "GiB RAM"));
        CHECK(zcp_sup_check_budget(cfg, msg, sizeof(msg)) == 0);
        zcp_config_free(cfg);
}

#define SYNTH(name, extra)                                                                       \
        "  - name: " name "\n    source:\n      type: synthetic\n      width: 64\n      height: 48\n" \
        "      pace: fast\n" extra "    gpu:\n      backend: cpu\n    model:\n      enabled: false\n"     \
        "    output:\n      type: none\n"

static struct zcp_sup_slot *named(const struct zcp_sup *sup, const char *name)
{
        for (uint32_t i = 0; i < sup->count; i++)
                if (strcmp(sup->slots[i]->cfg.name, name) == 0)
                        return sup->slots[i];
        return NULL;
}

static void test_apply(void)
{
        struct zcp_config *v1 = parse("streams:\n" SYNTH("a", "") SYNTH("b", "") SYNTH("e", ""));
        struct zcp_config *v2 = parse("streams:\n" SYNTH("c", "") SYNTH("a", "") SYNTH("b", "      box_size: 16\n"));
        /* v2, but c's output cannot open (its directory does not exist): the apply rolls back */
        struct zcp_config *bad = parse("streams:\n" SYNTH("a", "") SYNTH("b", "      box_size: 24\n")
                                               "  - name: d\n    source:\n      type: synthetic\n"
                                               "    gpu:\n      backend: cpu\n    model:\n      enabled: false\n"
                                               "    output:\n      type: unix\n      path: /nonexistent/d.sock\n");
        struct zcp_stream_config copy;
        struct zcp_registry *reg = NULL;
        struct zcp_sup_apply done;
        struct zcp_sup sup;
        struct zcp_stream *a_stream, *b_stream;
        struct zcp_sup_slot *b_slot;
        uint64_t a_published;

        /* What counts as a change: anything but the file's count of GStreamer streams. */
        memcpy(&copy, &v1->streams[0], sizeof(copy));
        copy.source.gst_streams += 3;
        CHECK(zcp_sup_same_config(&v1->streams[0], &copy));
        copy.source.fps++;
        CHECK(!zcp_sup_same_config(&v1->streams[0], &copy));

        CHECK(zcp_registry_new(&reg) == 0);
        zcp_sup_init(&sup, reg, -1, NULL, 0);
        CHECK(zcp_sup_start(&sup, v1) == 0 && sup.count == 3);
        for (uint32_t i = 0; i < 3; i++)
                CHECK(sup.slots[i]->state == ZCP_STREAM_UP && sup.slots[i]->stream && sup.slots[i]->opened);
        a_stream = named(&sup, "a")->stream;
        b_slot = named(&sup, "b");
        b_stream = b_slot->stream;
        while (atomic_load(&b_slot->stats->published) < 10) {
                struct timespec ts = { 0, 1000000 };
                nanosleep(&ts, NULL);
        }

        /* a unchanged, b changed, e removed, c new: 1 kept, 2 stopped, 2 started. */
        CHECK(zcp_sup_apply(&sup, v2, &done) == 0);
        CHECK_MSG(done.kept == 1 && done.stopped == 2 && done.started == 2 && !done.fatal, "%u %u %u", done.kept,
                  done.stopped, done.started);
        CHECK(sup.count == 3 && strcmp(sup.slots[0]->cfg.name, "c") == 0 && named(&sup, "e") == NULL);
        CHECK(named(&sup, "a")->stream == a_stream);                 /* the very same stream runs on */
        CHECK(named(&sup, "b") == b_slot && b_slot->stream != b_stream && b_slot->cfg.source.box_size == 16);
        CHECK(atomic_load(&b_slot->stats->published) >= 10);        /* its counters carry on */
        a_published = atomic_load(&named(&sup, "a")->stats->published);

        /* d cannot open: everything goes back as it was (b with box_size 16, c again, no d). */
        CHECK(zcp_sup_apply(&sup, bad, &done) == ZCP_ERR_CONFIG);
        CHECK(strcmp(done.failed, "d") == 0 && !done.fatal);
        CHECK(sup.count == 3 && named(&sup, "c") && named(&sup, "c")->stream && !named(&sup, "d"));
        CHECK(named(&sup, "a")->stream == a_stream && atomic_load(&named(&sup, "a")->stats->published) >= a_published);
        CHECK(b_slot->cfg.source.box_size == 16 && b_slot->stream && b_slot->state == ZCP_STREAM_UP);

        for (uint32_t i = 0; i < sup.count; i++)
                zcp_sup_slot_close(&sup, sup.slots[i], "test");
        {
                struct zcp_sup_slot *left[ZCP_CONFIG_MAX_STREAMS];
                uint32_t n = sup.count;

                memcpy(left, sup.slots, sizeof(left));
                zcp_sup_set_slots(&sup, NULL, 0);
                for (uint32_t i = 0; i < n; i++)
                        zcp_sup_slot_free(left[i]);
        }
        zcp_registry_free(reg);
        zcp_config_free(v1);
        zcp_config_free(v2);
        zcp_config_free(bad);
}

int main(void)
{
        test_apply();
        test_rate();
        test_budget();
        test_state_machine();
        test_exit_policy();
        printf("supervisor: all checks passed\n");
        return 0;
}
