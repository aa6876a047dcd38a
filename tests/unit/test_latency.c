/* SPDX-License-Identifier: MIT */
/*
 * The live page's latency points (daemon/latency.h), with a fake clock and
 * values recorded by the test into real stream stats:
 *  - each point holds only what was recorded since the previous one (its
 *    frame count, p50 and p99 within the histogram's 1 %), null for a
 *    second without frames; every series (stages' wait and busy) separate;
 *  - a stream re-created under the same name starts from zero, not from a
 *    negative difference;
 *  - the ring keeps the last ZCP_LATENCY_POINTS seconds, oldest first, with
 *    times relative to now;
 *  - a seventeenth name takes the place of the stream gone longest, and a
 *    stream not seen for longer than the ring drops out of the JSON.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/clock.h"
#include "daemon/latency.h"

#define SEC ZCP_NSEC_PER_SEC
#define MS  ZCP_NSEC_PER_MSEC

/* The numbers of "key":[...] inside the object of stream `name` (within `section`, e.g. "\"p50\":{"). */
static int array_of(const char *json, const char *name, const char *section, const char *key, double *out, int max,
                    int *nulls)
{
        char pat[128];
        const char *p;
        int n = 0;

        snprintf(pat, sizeof(pat), "{\"name\":\"%s\"", name);
        p = strstr(json, pat);
        CHECK_MSG(p, "no stream %s in %s", name, json);
        if (section) {
                p = strstr(p, section);
                CHECK(p);
        }
        snprintf(pat, sizeof(pat), "\"%s\":[", key);
        p = strstr(p, pat);
        CHECK_MSG(p, "no %s for %s", key, name);
        p += strlen(pat);
        *nulls = 0;
        while (*p != ']') {
                if (strncmp(p, "null", 4) == 0) {
                        out[n++] = NAN;
                        (*nulls)++;
                        p += 4;
                } else {
                        char *end;
                        out[n++] = strtod(p, &end);
                        CHECK(end != p);
                        p = end;
                }
                CHECK(n <= max);
                if (*p == ',')
                        p++;
        }
        return n;
}

static void near(double got, double want_ms, const char *what)
{
        CHECK_MSG(fabs(got - want_ms) <= want_ms * 0.01 + 0.001, "%s: %.4f ms, want %.4f ms", what, got, want_ms);
}

static char *json_at(struct zcp_latency *l, uint64_t now)
{
        char *json;
        size_t len;

        CHECK(zcp_latency_json(l, now, &json, &len) == 0);
        CHECK(len == strlen(json) && json[len - 1] == '\n');
        return json;
}

static void record(struct zcp_stream_stats *st, int n, uint64_t e2e, uint64_t infer_busy)
{
        for (int i = 0; i < n; i++) {
                zcp_hist_record(&st->e2e, e2e);
                zcp_hist_record(&st->busy[ZCP_STAGE_INFER], infer_busy);
                zcp_hist_record(&st->wait[ZCP_STAGE_CONVERT], 50 * ZCP_NSEC_PER_USEC);
        }
}

static void test_points(void)
{
        static struct zcp_stream_stats a, a2;
        static double v[ZCP_LATENCY_POINTS + 8];
        struct zcp_latency *l;
        uint64_t t0 = 1000 * SEC;
        char *json;
        int n, nulls;

        CHECK(zcp_latency_new(&l) == 0);
        zcp_stream_stats_init(&a);
        record(&a, 98, 1 * MS, 800 * ZCP_NSEC_PER_USEC);
        record(&a, 2, 50 * MS, 40 * MS);
        zcp_latency_add(l, "a", &a, t0 + 1 * SEC);           /* 100 frames: p50 1 ms, p99 50 ms */
        zcp_latency_add(l, "a", &a, t0 + 2 * SEC);           /* nothing new */
        record(&a, 10, 5 * MS, 4 * MS);
        zcp_latency_add(l, "a", &a, t0 + 3 * SEC);           /* 10 frames of 5 ms, not mixed with the first */

        json = json_at(l, t0 + 3 * SEC);
        CHECK_MSG(strncmp(json, "{\"period_s\":1,\"points\":300,\"streams\":[", 38) == 0, "%s", json);
        n = array_of(json, "a", NULL, "t", v, 8, &nulls);
        CHECK(n == 3 && v[0] == -2.0 && v[1] == -1.0 && v[2] == 0.0);
        n = array_of(json, "a", NULL, "frames", v, 8, &nulls);
        CHECK(n == 3 && v[0] == 100 && v[1] == 0 && v[2] == 10);
        n = array_of(json, "a", "\"p50\":{", "e2e", v, 8, &nulls);
        CHECK(n == 3 && nulls == 1 && isnan(v[1]));
        near(v[0], 1.0, "p50 e2e, second 1");
        near(v[2], 5.0, "p50 e2e, second 3");
        n = array_of(json, "a", "\"p99\":{", "e2e", v, 8, &nulls);
        near(v[0], 50.0, "p99 e2e, second 1");
        near(v[2], 5.0, "p99 e2e, second 3");
        n = array_of(json, "a", "\"p99\":{", "infer_busy", v, 8, &nulls);
        near(v[0], 40.0, "p99 infer busy, second 1");
        near(v[2], 4.0, "p99 infer busy, second 3");
        n = array_of(json, "a", "\"p50\":{", "convert_wait", v, 8, &nulls);
        near(v[0], 0.05, "p50 convert wait");
        n = array_of(json, "a", "\"p50\":{", "publish_busy", v, 8, &nulls);
        CHECK(n == 3 && nulls == 3);   /* nothing recorded there */
        free(json);

        /* The stream re-created under its name: its new histograms count from zero. */
        zcp_stream_stats_init(&a2);
        record(&a2, 3, 2 * MS, 1 * MS);
        zcp_latency_add(l, "a", &a2, t0 + 4 * SEC);
        json = json_at(l, t0 + 4 * SEC);
        n = array_of(json, "a", NULL, "frames", v, 8, &nulls);
        CHECK(n == 4 && v[3] == 3);
        n = array_of(json, "a", "\"p50\":{", "e2e", v, 8, &nulls);
        near(v[3], 2.0, "p50 e2e after re-creation");
        free(json);

        /* The ring: the last 300 seconds, oldest first, the newest at 0. */
        for (int s = 5; s < 5 + ZCP_LATENCY_POINTS + 20; s++) {
                record(&a2, s % 7, (uint64_t)(s % 7 + 1) * MS, MS);
                zcp_latency_add(l, "a", &a2, t0 + (uint64_t)s * SEC);
        }
        {
                uint64_t last = t0 + (uint64_t)(5 + ZCP_LATENCY_POINTS + 19) * SEC;

                json = json_at(l, last + SEC / 2);
                n = array_of(json, "a", NULL, "t", v, ZCP_LATENCY_POINTS + 8, &nulls);
                CHECK(n == ZCP_LATENCY_POINTS);
                CHECK_MSG(v[n - 1] == -0.5 && v[0] == -0.5 - (ZCP_LATENCY_POINTS - 1), "%g .. %g", v[0], v[n - 1]);
                n = array_of(json, "a", NULL, "frames", v, ZCP_LATENCY_POINTS + 8, &nulls);
                for (int k = 0; k < n; k++) {
                        int s = 5 + 20 + k;
                        CHECK_MSG(v[k] == s % 7, "point %d: %g frames, want %d", k, v[k], s % 7);
                }
                free(json);
                /* Not seen for longer than the ring: gone from the JSON. */
                json = json_at(l, last + (ZCP_LATENCY_POINTS + 1) * SEC);
                CHECK_MSG(strcmp(json, "{\"period_s\":1,\"points\":300,\"streams\":[]}\n") == 0, "%s", json);
                free(json);
        }
        zcp_latency_free(l);
        printf("points: ok\n");
}

static void test_many_streams(void)
{
        static struct zcp_stream_stats st[ZCP_CONFIG_MAX_STREAMS + 1];
        struct zcp_latency *l;
        char name[32], *json;
        uint64_t t = 5 * SEC;

        CHECK(zcp_latency_new(&l) == 0);
        for (int i = 0; i <= ZCP_CONFIG_MAX_STREAMS; i++)
                zcp_stream_stats_init(&st[i]);
        /* 16 streams at t; at t+1 all but s3 again, and a new one: it takes s3's place. */
        for (int i = 0; i < ZCP_CONFIG_MAX_STREAMS; i++) {
                snprintf(name, sizeof(name), "s%d", i);
                zcp_latency_add(l, name, &st[i], t);
        }
        for (int i = 0; i <= ZCP_CONFIG_MAX_STREAMS; i++) {
                if (i == 3)
                        continue;
                snprintf(name, sizeof(name), "s%d", i);
                zcp_latency_add(l, name, &st[i], t + SEC);
        }
        json = json_at(l, t + SEC);
        CHECK(!strstr(json, "\"name\":\"s3\""));
        CHECK(strstr(json, "\"name\":\"s16\"") && strstr(json, "\"name\":\"s15\"") && strstr(json, "\"name\":\"s0\""));
        free(json);
        /* Every place taken by a stream listed now: a further name is not kept. */
        zcp_latency_add(l, "late", &st[3], t + SEC);
        json = json_at(l, t + SEC);
        CHECK(!strstr(json, "\"name\":\"late\""));
        free(json);
        zcp_latency_free(l);
        zcp_latency_free(NULL);
        printf("many streams: ok\n");
}

int main(void)
{
        test_points();
        test_many_streams();
        return 0;
}
