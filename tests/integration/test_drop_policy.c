/* SPDX-License-Identifier: MIT */
/*
 * The drop policies of DESIGN.md §1 through the real pipeline (synthetic
 * source, CPU backend, file sink), with a stage slower than the source: the
 * infer stage runs the C reference on a model input far larger than the
 * frame, so each frame costs it many frame periods of a 1000 fps source.
 *
 *   newest  a live source keeps going; frames are dropped (stale in the
 *           stages, ring_full at the source) and every capture is accounted
 *           for: published + dropped by reason == captured == frames asked;
 *           the published ones leave in capture order.
 *   block   the same slow stage never drops: every frame is published, in
 *           order (pace fast: a synthetic source at pace realtime is a
 *           camera and drops ring_full at the source whatever the policy).
 *
 * Assertions are counts that must add up, never timings.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/metrics.h"
#include "pipeline.h"

struct outcome {
        uint64_t captured, published, dropped[ZCP_DROP_REASON_COUNT], dropped_total;
        uint64_t lines;
        bool in_order;
};

static void run(const char *drop, const char *pace, uint64_t frames, uint32_t input, struct outcome *ret)
{
        char text[2048], out[256], weights[1024], err[512], line[8192];
        struct zcp_config *config = NULL;
        struct zcp_stream *s = NULL;
        struct zcp_stream_view v;
        uint64_t end, last_seq = 0;
        int efd = eventfd(0, EFD_CLOEXEC);
        FILE *fp;

        CHECK(efd >= 0);
        snprintf(out, sizeof(out), "/tmp/zcp-drop-%s-%d.jsonl", drop, (int)getpid());
        snprintf(weights, sizeof(weights), "%s", zcp_test_default_weights());
        snprintf(text, sizeof(text),
                 "streams:\n"
                 "  - name: slow\n"
                 "    source:\n"
                 "      type: synthetic\n"
                 "      width: 64\n"
                 "      height: 64\n"
                 "      fps: 1000\n"
                 "      pace: %s\n"
                 "      frames: %" PRIu64 "\n"
                 "    ring:\n"
                 "      slots: 4\n"
                 "      drop: %s\n"
                 "    gpu:\n"
                 "      backend: cpu\n"
                 "    model:\n"
                 "      weights: %s\n"
                 "      input_width: %u\n"
                 "      input_height: %u\n"
                 "    output:\n"
                 "      type: file\n"
                 "      path: %s\n"
                 "metrics:\n"
                 "  http:\n"
                 "    enabled: false\n",
                 pace, frames, drop, weights, input, input, out);
        CHECK_MSG(zcp_config_parse("drop.yaml", text, strlen(text), &config, err, sizeof(err)) == 0, "%s", err);
        CHECK(zcp_stream_new(&config->streams[0], 0, efd, &s) == 0);
        zcp_config_free(config);   /* the stream keeps its own copy */
        CHECK(zcp_stream_start(s) == 0);
        /* The source ends after `frames`; a bound only against a hang. */
        end = zcp_now_ns() + 300 * ZCP_NSEC_PER_SEC;
        while (!zcp_stream_finished(s) && zcp_now_ns() < end)
                usleep(5000);
        CHECK_MSG(zcp_stream_finished(s), "drop %s: the stream did not finish", drop);
        CHECK(zcp_stream_join(s) == 0);
        zcp_stream_view(s, &v);
        memset(ret, 0, sizeof(*ret));
        ret->captured = atomic_load(&v.stats->captured);
        ret->published = atomic_load(&v.stats->published);
        for (int i = 0; i < ZCP_DROP_REASON_COUNT; i++)
                ret->dropped[i] = atomic_load(&v.stats->dropped[i]);
        ret->dropped_total = zcp_stats_dropped_total(v.stats);
        zcp_stream_free(s);
        close(efd);

        fp = fopen(out, "re");
        CHECK(fp);
        ret->in_order = true;
        while (fgets(line, sizeof(line), fp)) {
                const char *p = strstr(line, "\"seq\":");
                uint64_t seq;

                CHECK(p);
                seq = strtoull(p + 6, NULL, 10);
                if (ret->lines > 0 && seq <= last_seq)
                        ret->in_order = false;
                last_seq = seq;
                ret->lines++;
        }
        fclose(fp);
        unlink(out);
        printf("drop %s: %" PRIu64 " frames, %" PRIu64 " published, dropped %" PRIu64 " (stale %" PRIu64
               ", ring_full %" PRIu64 ")\n",
               drop, ret->captured, ret->published, ret->dropped_total, ret->dropped[ZCP_DROP_STALE],
               ret->dropped[ZCP_DROP_RING_FULL]);
        fflush(stdout);
}

int main(void)
{
        /* 64x64 frames, a 384x384 model input: one inference costs far more than the 1 ms frame period. */
        enum { INPUT = 384, NEWEST_FRAMES = 200, BLOCK_FRAMES = 12 };
        struct outcome o;

        zcp_log_set_level(ZCP_LOG_WARN);

        run("newest", "realtime", NEWEST_FRAMES, INPUT, &o);
        CHECK(o.captured == NEWEST_FRAMES);
        CHECK_MSG(o.published + o.dropped_total == o.captured, "published %" PRIu64 " + dropped %" PRIu64
                  " != captured %" PRIu64, o.published, o.dropped_total, o.captured);
        CHECK(o.dropped[ZCP_DROP_STALE] + o.dropped[ZCP_DROP_RING_FULL] == o.dropped_total);
        CHECK_MSG(o.dropped_total > 0, "a stage slower than the source dropped nothing");
        CHECK(o.published > 0 && o.lines == o.published && o.in_order);

        run("block", "fast", BLOCK_FRAMES, INPUT, &o);
        CHECK(o.captured == BLOCK_FRAMES && o.published == BLOCK_FRAMES && o.dropped_total == 0);
        CHECK(o.lines == BLOCK_FRAMES && o.in_order);
        printf("drop_policy: ok\n");
        return 0;
}
