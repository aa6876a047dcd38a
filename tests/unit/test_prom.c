/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint's content (daemon/prom.h), without HTTP:
 *  - fixed `le` buckets from log-linear histograms: the count at each bound
 *    lies between the exact counts at le * (1 - 1/128) and le (brute force
 *    over random values), cumulative, +Inf == _count, _sum exact;
 *  - /metrics parsed back by a strict reader of the text format 0.0.4
 *    (names, label syntax and escapes, HELP/TYPE once per family before its
 *    samples, families contiguous, no duplicate series, histogram rules),
 *    and the numbers equal what was recorded;
 *  - quantiles (exported and /stats) agree with the recorded values
 *    themselves, sorted, within the histogram's resolution;
 *  - /healthz verdicts and the fps rate state with a fake clock;
 *  - with HAVE_HTTP, zcp_http_start() itself on 127.0.0.1: a non-loopback
 *    address refused, a taken port -EADDRINUSE, and an empty registry
 *    answering 503 "no streams running" on /healthz, 404 elsewhere.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture/source.h"
#include "common.h"
#include "core/clock.h"
#include "daemon/http.h"
#include "daemon/prom.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_u64(void)
{
        uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

/* Log-uniform over 300 ns .. 30 s: below, inside and above the histogram range. */
static uint64_t random_ns(void)
{
        double e = (double)(next_u64() >> 11) / 9007199254740992.0;
        return (uint64_t)(300.0 * pow(1e8, e));
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return (x > y) - (x < y);
}

static void test_le_buckets(void)
{
        static struct zcp_hist h;
        static struct zcp_hist_snapshot snap;
        static struct zcp_prom_hist ph;
        enum { N = 50000 };
        uint64_t *v = malloc(N * sizeof(*v)), sum = 0;

        CHECK(v);
        zcp_hist_init(&h);
        for (int i = 0; i < N; i++) {
                v[i] = random_ns();
                /* A few exactly on a bound and one below it. */
                if (i % 997 == 0)
                        v[i] = zcp_prom_le_ns[(size_t)i % ZCP_PROM_LE_COUNT] - (i % 2);
                zcp_hist_record(&h, v[i]);
                sum += v[i];
        }
        zcp_hist_snapshot(&h, &snap);
        zcp_prom_hist_from_snapshot(&snap, &ph);
        CHECK(ph.count == N);
        CHECK(ph.sum_ns == sum);
        for (int i = 0; i < ZCP_PROM_LE_COUNT; i++) {
                uint64_t le = zcp_prom_le_ns[i], exact = 0, lower = 0;
                double lo_bound = (double)le * (1.0 - 1.0 / 128.0);

                if (i > 0) {
                        CHECK(zcp_prom_le_ns[i] > zcp_prom_le_ns[i - 1]);
                        CHECK(ph.le[i] >= ph.le[i - 1]);
                }
                for (int k = 0; k < N; k++) {
                        exact += v[k] <= le;
                        lower += (double)v[k] <= lo_bound;
                }
                CHECK_MSG(lower <= ph.le[i] && ph.le[i] <= exact, "le=%llu: got %llu, exact %llu, at le*(1-1/128) %llu",
                          (unsigned long long)le, (unsigned long long)ph.le[i], (unsigned long long)exact,
                          (unsigned long long)lower);
        }
        CHECK(ph.le[ZCP_PROM_LE_COUNT - 1] <= ph.count);
        /*
         * Quantiles against the recorded values themselves (nearest rank on
         * the sorted values), not against zcp_hist_quantile(), which
         * computed them: within the buckets' relative error (1/256, checked
         * at 1/128), or 1 us below the histogram's range.
         */
        qsort(v, N, sizeof(*v), cmp_u64);
        for (int q = 0; q < ZCP_PROM_QUANTILE_COUNT; q++) {
                double want_rank = zcp_prom_quantiles[q] * N;
                size_t rank = (size_t)want_rank + ((double)(size_t)want_rank < want_rank);
                uint64_t exact = v[rank - 1], got = ph.q[q];
                uint64_t diff = got > exact ? got - exact : exact - got;

                /* Above the histogram's range (10 s) values share its last bucket. */
                if (exact >= ZCP_HIST_MAX_NS) {
                        CHECK(got >= zcp_hist_bucket_low(ZCP_HIST_BUCKETS - 1));
                        continue;
                }
                CHECK_MSG(diff <= exact / 128 + 1000, "%s: %llu, the %zu-th of %d recorded values is %llu",
                          zcp_prom_quantile_names[q], (unsigned long long)got, rank, N, (unsigned long long)exact);
        }
        free(v);
}

/* ---- a strict reader of the Prometheus text format 0.0.4 ---- */

#define MAX_FAMILIES 64
#define MAX_SERIES   4096

struct family {
        char name[128], type[16];
        bool help, done;
};

struct series {
        char key[512];   /* name + sorted-as-written labels */
        double value;
};

struct parsed {
        struct family fam[MAX_FAMILIES];
        int nfam, current;
        struct series *ser;
        int nser;
};

static bool name_ok(const char *s, size_t n, bool label)
{
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                bool ok = isalpha(c) || c == '_' || (!label && c == ':') || (i > 0 && isdigit(c));
                if (!ok)
                        return false;
        }
        return true;
}

static struct family *find_family(struct parsed *p, const char *name)
{
        for (int i = 0; i < p->nfam; i++)
                if (strcmp(p->fam[i].name, name) == 0)
                        return &p->fam[i];
        return NULL;
}

/* The family a sample name belongs to (histogram suffixes stripped when the family is one). */
static struct family *family_of(struct parsed *p, const char *name, const char **ret_suffix)
{
        static const char *const sfx[] = { "_bucket", "_sum", "_count" };
        struct family *f = find_family(p, name);

        *ret_suffix = "";
        if (f)
                return f;
        for (size_t i = 0; i < 3; i++) {
                size_t n = strlen(name), m = strlen(sfx[i]);
                char base[128];

                if (n <= m || strcmp(name + n - m, sfx[i]) != 0 || n - m >= sizeof(base))
                        continue;
                memcpy(base, name, n - m);
                base[n - m] = '\0';
                f = find_family(p, base);
                if (f && strcmp(f->type, "histogram") == 0) {
                        *ret_suffix = sfx[i];
                        return f;
                }
        }
        return NULL;
}

static void parse_line(struct parsed *p, const char *line, size_t len)
{
        char buf[1024], name[128];
        const char *s, *e;

        CHECK_MSG(len > 0 && len < sizeof(buf), "line length %zu", len);
        memcpy(buf, line, len);
        buf[len] = '\0';
        if (buf[0] == '#') {
                char kind[8], fname[128], rest[512];
                struct family *f;

                CHECK_MSG(sscanf(buf, "# %7s %127s %511[^\n]", kind, fname, rest) == 3, "comment: %s", buf);
                CHECK_MSG(name_ok(fname, strlen(fname), false), "family name: %s", fname);
                f = find_family(p, fname);
                if (!f) {
                        CHECK(p->nfam < MAX_FAMILIES);
                        f = &p->fam[p->nfam++];
                        snprintf(f->name, sizeof(f->name), "%s", fname);
                }
                CHECK_MSG(!f->done, "family %s reopened after another one", fname);
                if (p->current >= 0 && &p->fam[p->current] != f)
                        p->fam[p->current].done = true;
                p->current = (int)(f - p->fam);
                if (strcmp(kind, "HELP") == 0) {
                        CHECK_MSG(!f->help, "second HELP for %s", fname);
                        CHECK_MSG(!f->type[0], "HELP after TYPE for %s", fname);
                        f->help = true;
                } else {
                        CHECK_MSG(strcmp(kind, "TYPE") == 0, "comment kind %s", kind);
                        CHECK_MSG(!f->type[0], "second TYPE for %s", fname);
                        CHECK_MSG(strcmp(rest, "counter") == 0 || strcmp(rest, "gauge") == 0 ||
                                          strcmp(rest, "histogram") == 0,
                                  "type %s", rest);
                        snprintf(f->type, sizeof(f->type), "%.15s", rest);
                }
                return;
        }
        /* name{l="v",...} value */
        s = buf;
        e = s;
        while (*e && *e != '{' && *e != ' ')
                e++;
        CHECK_MSG(name_ok(s, (size_t)(e - s), false) && (size_t)(e - s) < sizeof(name), "sample name in: %s", buf);
        memcpy(name, s, (size_t)(e - s));
        name[e - s] = '\0';
        {
                const char *suffix;
                struct family *f = family_of(p, name, &suffix);
                struct series *ser;
                char *end;
                size_t keylen;

                CHECK_MSG(f && f->type[0] && f->help, "sample %s before its HELP and TYPE", name);
                CHECK_MSG(p->current >= 0 && &p->fam[p->current] == f, "sample %s outside its family's block", name);
                CHECK_MSG(strcmp(f->type, "counter") != 0 || strstr(name, "_total"), "counter %s without _total", name);
                if (*e == '{') {
                        e++;
                        while (*e != '}') {
                                const char *ls = e;

                                while (*e && *e != '=')
                                        e++;
                                CHECK_MSG(name_ok(ls, (size_t)(e - ls), true), "label name in: %s", buf);
                                CHECK_MSG(e[0] == '=' && e[1] == '"', "label syntax in: %s", buf);
                                e += 2;
                                while (*e != '"') {
                                        CHECK_MSG(*e && *e != '\n', "unterminated label value in: %s", buf);
                                        if (*e == '\\') {
                                                CHECK_MSG(e[1] == '\\' || e[1] == '"' || e[1] == 'n', "bad escape in: %s",
                                                          buf);
                                                e++;
                                        }
                                        e++;
                                }
                                e++;
                                CHECK_MSG(*e == ',' || *e == '}', "after label value in: %s", buf);
                                if (*e == ',')
                                        e++;
                        }
                        e++;
                }
                CHECK_MSG(*e == ' ', "no space before the value in: %s", buf);
                keylen = (size_t)(e - buf);
                CHECK(keylen < sizeof(ser->key));
                CHECK(p->nser < MAX_SERIES);
                ser = &p->ser[p->nser];
                memcpy(ser->key, buf, keylen);
                ser->key[keylen] = '\0';
                for (int i = 0; i < p->nser; i++)
                        CHECK_MSG(strcmp(p->ser[i].key, ser->key) != 0, "duplicate series %s", ser->key);
                e++;
                if (strcmp(e, "+Inf") == 0)
                        ser->value = INFINITY;
                else {
                        ser->value = strtod(e, &end);
                        CHECK_MSG(end != e && *end == '\0', "value in: %s", buf);
                }
                p->nser++;
        }
}

static void parse_exposition(struct parsed *p, const char *text, size_t len)
{
        const char *s = text, *end = text + len;

        memset(p, 0, sizeof(*p));
        p->current = -1;
        p->ser = calloc(MAX_SERIES, sizeof(*p->ser));
        CHECK(p->ser);
        CHECK(len > 0 && text[len - 1] == '\n');
        while (s < end) {
                const char *nl = memchr(s, '\n', (size_t)(end - s));
                CHECK(nl);
                parse_line(p, s, (size_t)(nl - s));
                s = nl + 1;
        }
}

static double value_of(const struct parsed *p, const char *key)
{
        for (int i = 0; i < p->nser; i++)
                if (strcmp(p->ser[i].key, key) == 0)
                        return p->ser[i].value;
        CHECK_MSG(0, "no series %s", key);
        return NAN;
}

/* Histogram rules for every series of every histogram family: buckets ascending in le, cumulative, +Inf == _count. */
static void check_histograms(const struct parsed *p)
{
        for (int i = 0; i < p->nser; i++) {
                const char *k = p->ser[i].key, *le = strstr(k, ",le=\"");
                char base[512], count_key[512];
                double prev = -1, prev_le = -1;
                int j;

                if (!strstr(k, "_bucket{") || !le || strstr(k, "le=\"0.00005\"") == NULL)
                        continue;
                /* k is the first bucket of a series: walk the following lines of the same series. */
                snprintf(base, sizeof(base), "%.*s", (int)(le - k), k);
                for (j = i; j < p->nser && strncmp(p->ser[j].key, base, strlen(base)) == 0 &&
                            strstr(p->ser[j].key, "_bucket{");
                     j++) {
                        double lev = strtod(p->ser[j].key + strlen(base) + 5, NULL);

                        if (strstr(p->ser[j].key + strlen(base), "+Inf"))
                                lev = INFINITY;
                        CHECK_MSG(lev > prev_le, "le not ascending at %s", p->ser[j].key);
                        CHECK_MSG(p->ser[j].value >= prev, "bucket not cumulative at %s", p->ser[j].key);
                        prev_le = lev;
                        prev = p->ser[j].value;
                }
                CHECK_MSG(isinf(prev_le), "no +Inf bucket after %s", base);
                CHECK(j - i == ZCP_PROM_LE_COUNT + 1);
                /* base = name_bucket{labels ; the _count key is name_count{labels} */
                {
                        const char *brace = strchr(base, '{');
                        int stem = (int)(brace - base) - (int)strlen("_bucket");

                        snprintf(count_key, sizeof(count_key), "%.*s_count%s}", stem, base, brace);
                }
                CHECK_MSG(value_of(p, count_key) == prev, "+Inf %f != %s", prev, count_key);
        }
}

/* ---- a fake stream, as the registry would show it ---- */

static struct zcp_stream_stats stats;
static struct zcp_source_info info = {
        .width = 640, .height = 480, .fmt = ZCP_PIX_YUYV, .fps_num = 30, .fps_den = 1, .path = ZCP_PATH_REGISTERED,
};

static const char weird_name[] = "we\"ird\\name\n";

static void fake_view(struct zcp_stream_view *v, const char *name)
{
        *v = (struct zcp_stream_view){
                .name = name,
                .stats = &stats,
                .source = &info,
                .source_type = "v4l2",
                .backend = "cuda",
                .transfer = "zero-copy",
                .ring_slots = 8,
                .sink = "file",
        };
}

static void test_metrics_text(void)
{
        static struct zcp_prom_scrape sc;
        static struct zcp_hist_snapshot snap;
        struct zcp_prom_buf out = { 0 };
        struct zcp_stream_view v;
        struct parsed p;
        char key[512];
        uint64_t e2e_sum = 0;

        zcp_stream_stats_init(&stats);
        for (int i = 0; i < 1000; i++) {
                uint64_t ns = 2000000 + (uint64_t)i * 37000;   /* 2 .. 39 ms */

                zcp_hist_record(&stats.e2e, ns);
                e2e_sum += ns;
                for (int st = 0; st < ZCP_STAGE_COUNT; st++) {
                        zcp_hist_record(&stats.wait[st], 1000 + (uint64_t)st * 100000 + (uint64_t)i);
                        zcp_hist_record(&stats.busy[st], 500000 * (uint64_t)(st + 1));
                }
        }
        atomic_store(&stats.captured, 1010);
        atomic_store(&stats.published, 1000);
        atomic_store(&stats.dropped[ZCP_DROP_STALE], 7);
        atomic_store(&stats.dropped[ZCP_DROP_SHUTDOWN], 3);
        atomic_store(&stats.decode_gaps, 2);
        atomic_store(&stats.copies, 5);
        atomic_store(&stats.slot_direct, 6);
        atomic_store(&stats.reconnects, 1);
        atomic_store(&stats.ring_in_flight, 4);
        atomic_store(&stats.source_state, ZCP_SOURCE_UP);
        atomic_store(&stats.capture_path, ZCP_PATH_REGISTERED);   /* the exporters read the path in use from the stats */
        atomic_store(&stats.sink.written, 990);
        atomic_store(&stats.sink.queued, 6);
        atomic_store(&stats.sink.lost[ZCP_SINK_LOSS_WRITE_ERROR], 3);
        atomic_store(&stats.sink.lost[ZCP_SINK_LOSS_TOO_LONG], 1);
        atomic_store(&stats.sink.reconnects, 2);
        atomic_store(&stats.sink.lost[ZCP_SINK_LOSS_NO_READER], 4);
        atomic_store(&stats.restarts, 3);
        atomic_store(&stats.reconfigures, 1);
        atomic_store(&stats.stream_state, ZCP_STREAM_BACKOFF);
        {
                /* A detector's frames: two people and a car, then one person; and a class past the counted ones. */
                static const struct zcp_detection f1[] = { { 0, 0.9f, { 0 } }, { 2, 0.5f, { 0 } }, { 0, 0.4f, { 0 } },
                                                           { ZCP_STATS_CLASSES + 3, 0.4f, { 0 } } };
                zcp_stats_detections(&stats, f1, 4);
                zcp_stats_detections(&stats, f1, 1);
        }

        memset(&sc, 0, sizeof(sc));
        /* Two streams sharing the stats: the escaped one and a plain one. */
        fake_view(&v, weird_name);
        zcp_prom_stream_from_view(&v, &snap, &sc.streams[0]);
        fake_view(&v, "cam1");
        {
                static char *labels[] = { "person", "bicycle", "car \"red\"" };
                v.labels = labels;
                v.classes = 3;
        }
        v.last_error = "source failed: \"x\"";
        v.transfer_switches = 2;   /* transfer auto changed its mode twice */
        zcp_prom_stream_from_view(&v, &snap, &sc.streams[1]);
        sc.count = 2;
        sc.streams[0].fps = 29.97;
        sc.streams[1].sink_error = ENOENT;   /* cam1's results cannot leave: its file's directory is gone */
        sc.frame_log = true;
        sc.frame_log_written = 1000;
        sc.frame_log_lost = 7;
        /* A GPU whose code the driver compiled from the PTX. */
        sc.gpu_count = 1;
        sc.gpus[0] = (struct zcp_gpu_info){ .device = 0, .name = "NVIDIA \"H200\"", .cc_major = 9, .cc_minor = 0,
                                            .driver = "580.159.04", .driver_cuda = 13000, .runtime = 13000,
                                            .ptx_version = 75, .binary_version = 90, .ptx_jit = true };
        /* A second GPU, lost to a sticky error, running cam1; the first runs none (the escaped stream is on the cpu). */
        sc.gpu_count = 2;
        sc.gpus[1] = sc.gpus[0];
        sc.gpus[1].device = 1;
        sc.gpus[1].sticky = true;
        sc.streams[0].gpu_device = -1;
        sc.streams[1].gpu_device = 1;
        CHECK(zcp_prom_format_metrics(&sc, &out) == 0);
        CHECK(!out.failed && out.len == strlen(out.data));
        CHECK(out.len > 16384);   /* the buffer grew past its first allocation */

        parse_exposition(&p, out.data, out.len);
        check_histograms(&p);
        CHECK(p.nfam == 40);
        /* Whether results leave, and the frame log's lines, where Prometheus looks. */
        CHECK(value_of(&p, "zcpipe_sink_up{stream=\"cam1\",sink=\"file\"}") == 0);
        CHECK(value_of(&p, "zcpipe_sink_up{stream=\"we\\\"ird\\\\name\\n\",sink=\"file\"}") == 1);
        CHECK(value_of(&p, "zcpipe_sink_lost_total{stream=\"cam1\",sink=\"file\",reason=\"no_reader\"}") == 4);
        CHECK(value_of(&p, "zcpipe_sink_lost_total{stream=\"cam1\",sink=\"file\",reason=\"slow_reader\"}") == 0);
        CHECK(value_of(&p, "zcpipe_frame_log_written_total") == 1000);
        CHECK(value_of(&p, "zcpipe_frame_log_lost_total") == 7);
        /* Detections by class: labelled where the model has labels (escaped), numbered where not. */
        CHECK(value_of(&p, "zcpipe_detections_total{stream=\"cam1\",class=\"person\"}") == 3);
        CHECK(value_of(&p, "zcpipe_detections_total{stream=\"cam1\",class=\"car \\\"red\\\"\"}") == 1);
        CHECK(value_of(&p, "zcpipe_detections_total{stream=\"cam1\",class=\"other\"}") == 1);
        CHECK(value_of(&p, "zcpipe_objects{stream=\"cam1\",class=\"person\"}") == 1);
        CHECK(value_of(&p, "zcpipe_objects{stream=\"cam1\",class=\"car \\\"red\\\"\"}") == 0);
        CHECK(value_of(&p, "zcpipe_objects{stream=\"cam1\",class=\"other\"}") == 0);
        CHECK(strcmp(find_family(&p, "zcpipe_detections_total")->type, "counter") == 0);
        CHECK(strcmp(find_family(&p, "zcpipe_objects")->type, "gauge") == 0);
        /* The supervisor's: state one-hot, restarts and new rings counted, the last error as a label. */
        CHECK(value_of(&p, "zcpipe_stream_state{stream=\"cam1\",state=\"backoff\"}") == 1);
        CHECK(value_of(&p, "zcpipe_stream_state{stream=\"cam1\",state=\"up\"}") == 0);
        CHECK(value_of(&p, "zcpipe_stream_state{stream=\"cam1\",state=\"failed\"}") == 0);
        CHECK(value_of(&p, "zcpipe_stream_restarts_total{stream=\"cam1\"}") == 3);
        CHECK(value_of(&p, "zcpipe_stream_reconfigures_total{stream=\"cam1\"}") == 1);
        CHECK(value_of(&p, "zcpipe_transfer_switches_total{stream=\"cam1\"}") == 2);
        CHECK(strcmp(find_family(&p, "zcpipe_transfer_switches_total")->type, "counter") == 0);
        CHECK(value_of(&p, "zcpipe_stream_last_error_info{stream=\"cam1\",error=\"source failed: \\\"x\\\"\"}") == 1);
        CHECK(strcmp(find_family(&p, "zcpipe_stream_restarts_total")->type, "counter") == 0);
        CHECK(strcmp(find_family(&p, "zcpipe_e2e_latency_seconds")->type, "histogram") == 0);
        CHECK(strstr(out.data, "zcpipe_gpu_info{device=\"0\",name=\"NVIDIA \\\"H200\\\"\",compute_capability=\"9.0\","
                               "driver=\"580.159.04\",driver_cuda=\"13.0\",runtime=\"13.0\",code=\"ptx-jit\"} 1\n"));
        CHECK(strcmp(find_family(&p, "zcpipe_frames_dropped_total")->type, "counter") == 0);
        CHECK(strcmp(find_family(&p, "zcpipe_fps")->type, "gauge") == 0);
        /* Every per-GPU figure by device: each GPU's share of the streams, its sticky error, each stream's GPU. */
        CHECK(strstr(out.data, "zcpipe_gpu_info{device=\"1\",name=\"NVIDIA"));
        CHECK(value_of(&p, "zcpipe_gpu_streams{device=\"0\"}") == 0);
        CHECK(value_of(&p, "zcpipe_gpu_streams{device=\"1\"}") == 0);   /* cam1 is in backoff: not counted */
        CHECK(value_of(&p, "zcpipe_gpu_sticky_error{device=\"0\"}") == 0);
        CHECK(value_of(&p, "zcpipe_gpu_sticky_error{device=\"1\"}") == 1);
        CHECK(strcmp(find_family(&p, "zcpipe_gpu_streams")->type, "gauge") == 0);
        {
                struct zcp_prom_buf gpus = { 0 };

                sc.streams[1].stream_state = ZCP_STREAM_UP;
                zcp_prom_format_gpus(&sc, &gpus);
                CHECK(!gpus.failed && strstr(gpus.data, "zcpipe_gpu_streams{device=\"0\"} 0\n"));
                CHECK(strstr(gpus.data, "zcpipe_gpu_streams{device=\"1\"} 1\n"));
                zcp_prom_buf_done(&gpus);
                sc.streams[1].stream_state = ZCP_STREAM_BACKOFF;
        }
        CHECK(strstr(out.data, "zcpipe_stream_info{stream=\"cam1\",source=\"v4l2\",backend=\"cuda\",device=\"1\","));
        CHECK(strstr(out.data, ",backend=\"cuda\",device=\"\",transfer="));

        /* The escaped label value, exactly. */
        CHECK(strstr(out.data, "zcpipe_frames_published_total{stream=\"we\\\"ird\\\\name\\n\"} 1000\n"));
        CHECK(value_of(&p, "zcpipe_frames_published_total{stream=\"cam1\"}") == 1000);
        CHECK(value_of(&p, "zcpipe_frames_captured_total{stream=\"cam1\"}") == 1010);
        CHECK(value_of(&p, "zcpipe_frames_dropped_total{stream=\"cam1\",reason=\"stale\"}") == 7);
        CHECK(value_of(&p, "zcpipe_frames_dropped_total{stream=\"cam1\",reason=\"shutdown\"}") == 3);
        CHECK(value_of(&p, "zcpipe_frames_dropped_total{stream=\"cam1\",reason=\"corrupt\"}") == 0);
        CHECK(value_of(&p, "zcpipe_decode_gaps_total{stream=\"cam1\"}") == 2);
        CHECK(value_of(&p, "zcpipe_copies_total{stream=\"cam1\"}") == 5);
        CHECK(value_of(&p, "zcpipe_slot_direct_total{stream=\"cam1\"}") == 6);
        CHECK(value_of(&p, "zcpipe_reconnects_total{stream=\"cam1\"}") == 1);
        CHECK(value_of(&p, "zcpipe_ring_in_flight{stream=\"cam1\"}") == 4);
        CHECK(value_of(&p, "zcpipe_ring_slots{stream=\"cam1\"}") == 8);
        CHECK(value_of(&p, "zcpipe_sink_written_total{stream=\"cam1\",sink=\"file\"}") == 990);
        CHECK(value_of(&p, "zcpipe_sink_queued{stream=\"cam1\",sink=\"file\"}") == 6);
        CHECK(value_of(&p, "zcpipe_sink_lost_total{stream=\"cam1\",sink=\"file\",reason=\"write_error\"}") == 3);
        CHECK(value_of(&p, "zcpipe_sink_lost_total{stream=\"cam1\",sink=\"file\",reason=\"too_long\"}") == 1);
        CHECK(value_of(&p, "zcpipe_sink_lost_total{stream=\"cam1\",sink=\"file\",reason=\"queue_full\"}") == 0);
        CHECK(value_of(&p, "zcpipe_sink_reconnects_total{stream=\"cam1\",sink=\"file\"}") == 2);
        CHECK(value_of(&p, "zcpipe_source_up{stream=\"cam1\"}") == 1);
        CHECK(value_of(&p, "zcpipe_fps{stream=\"cam1\"}") == 0);
        CHECK(fabs(value_of(&p, "zcpipe_fps{stream=\"we\\\"ird\\\\name\\n\"}") - 29.97) < 1e-9);
        CHECK(value_of(&p, "zcpipe_stream_info{stream=\"cam1\",source=\"v4l2\",backend=\"cuda\",device=\"1\",transfer=\"zero-copy\","
                           "capture_path=\"registered\",format=\"yuyv\",width=\"640\",height=\"480\"}") == 1);
        snprintf(key, sizeof(key), "zcpipe_build_info{version=\"%s\",cuda=\"%s\",gstreamer=\"%s\",v4l2=\"%s\","
                                   "systemd=\"%s\",http=\"%s\"}",
                 ZCP_VERSION, HAVE_CUDA ? "yes" : "no", HAVE_GSTREAMER ? "yes" : "no", HAVE_V4L2 ? "yes" : "no",
                 HAVE_SYSTEMD ? "yes" : "no", HAVE_HTTP ? "yes" : "no");
        CHECK(value_of(&p, key) == 1);

        /* e2e: 1000 values 2 .. 39 ms. Exact _sum, exact _count, buckets bracket the truth. */
        CHECK(value_of(&p, "zcpipe_e2e_latency_seconds_count{stream=\"cam1\"}") == 1000);
        CHECK(fabs(value_of(&p, "zcpipe_e2e_latency_seconds_sum{stream=\"cam1\"}") - (double)e2e_sum / 1e9) < 1e-9);
        CHECK(value_of(&p, "zcpipe_e2e_latency_seconds_bucket{stream=\"cam1\",le=\"0.002\"}") <= 1);
        CHECK(value_of(&p, "zcpipe_e2e_latency_seconds_bucket{stream=\"cam1\",le=\"0.015\"}") <= 352);   /* exact 352 */
        CHECK(value_of(&p, "zcpipe_e2e_latency_seconds_bucket{stream=\"cam1\",le=\"0.015\"}") >= 349);   /* 1 - 1/128 */
        CHECK(value_of(&p, "zcpipe_e2e_latency_seconds_bucket{stream=\"cam1\",le=\"0.05\"}") == 1000);
        CHECK(value_of(&p, "zcpipe_e2e_latency_seconds_bucket{stream=\"cam1\",le=\"+Inf\"}") == 1000);
        /* busy of publish: every value exactly 1.5 ms: the bucket holding it ends above 1.5 ms, so it counts at 2 ms. */
        CHECK(value_of(&p, "zcpipe_stage_busy_seconds_bucket{stream=\"cam1\",stage=\"publish\",le=\"0.001\"}") == 0);
        CHECK(value_of(&p, "zcpipe_stage_busy_seconds_bucket{stream=\"cam1\",stage=\"publish\",le=\"0.002\"}") == 1000);
        CHECK(fabs(value_of(&p, "zcpipe_stage_busy_seconds_sum{stream=\"cam1\",stage=\"publish\"}") - 1.5) < 1e-12);
        free(p.ser);
        zcp_prom_buf_done(&out);

        /* No streams: still valid, families without samples. */
        sc.count = 0;
        sc.gpu_count = 0;
        sc.frame_log = false;   /* and no frame log: none of its families */
        CHECK(zcp_prom_format_metrics(&sc, &out) == 0);
        parse_exposition(&p, out.data, out.len);
        CHECK(p.nfam == 38 && p.nser == 1);
        free(p.ser);
        zcp_prom_buf_done(&out);
}

static void test_stats_json(void)
{
        static struct zcp_prom_scrape sc;
        static struct zcp_hist_snapshot snap;
        struct zcp_prom_buf out = { 0 };
        struct zcp_stream_view v;
        char want[128];
        uint64_t p99;
        int depth = 0;

        memset(&sc, 0, sizeof(sc));
        fake_view(&v, weird_name);
        v.transfer_switches = 5;
        v.gpu_device = 1;
        zcp_prom_stream_from_view(&v, &snap, &sc.streams[0]);
        sc.count = 1;
        CHECK(zcp_prom_format_stats(&sc, &out) == 0);
        CHECK(strstr(out.data, "\"gpu_device\":1,\"transfer\":\"zero-copy\",\"transfer_switches\":5,"));
        CHECK(strstr(out.data, "\"name\":\"we\\\"ird\\\\name\\u000a\""));
        CHECK(strstr(out.data, "\"captured\":1010,\"published\":1000,\"dropped\":10,"));
        CHECK(strstr(out.data, "\"stale\":7"));
        CHECK_MSG(strstr(out.data, "\"sink\":{\"type\":\"file\",\"error\":\"\",\"up\":true,\"written\":990,"
                                   "\"queued\":6,\"reconnects\":2,\"lost\":{\"queue_full\":0,\"write_error\":3,"
                                   "\"too_long\":1,\"no_reader\":4,\"slow_reader\":0}}"),
                  "%s", out.data);
        /*
         * e2e p99 from what was recorded: the 990th of 2 ms + i * 37 us
         * (i = 0..999) is i = 989, 38.593 ms; /stats must say that within
         * the histogram's resolution.
         */
        p99 = 2000000 + 989 * 37000ull;
        snprintf(want, sizeof(want), "\"p99\":");
        const char *at = strstr(strstr(out.data, "\"e2e\""), want);
        CHECK_MSG(at, "no e2e p99 in %s", out.data);
        double p99_ms = strtod(at + strlen(want), NULL);
        CHECK_MSG(fabs(p99_ms * 1e6 - (double)p99) <= (double)p99 / 128, "e2e p99 %.6f ms, recorded %.6f ms",
                  p99_ms, (double)p99 / 1e6);
        /* Balanced, outside strings. */
        for (const char *s = out.data; *s; s++) {
                if (*s == '"') {
                        for (s++; *s != '"'; s++)
                                if (*s == '\\')
                                        s++;
                        continue;
                }
                depth += (*s == '{' || *s == '[') - (*s == '}' || *s == ']');
                CHECK(depth >= 0);
        }
        CHECK(depth == 0);
        zcp_prom_buf_done(&out);
}

static void test_health(void)
{
        static struct zcp_prom_scrape sc;
        const uint64_t s = 1000000000ULL;
        char why[256];

        memset(&sc, 0, sizeof(sc));
        sc.now_ns = 100 * s;
        CHECK(!zcp_prom_health(&sc, why, sizeof(why)) && strcmp(why, "no streams running") == 0);

        sc.count = 2;
        snprintf(sc.streams[0].name, sizeof(sc.streams[0].name), "a");
        snprintf(sc.streams[1].name, sizeof(sc.streams[1].name), "b");
        sc.streams[0].fps_num = 30;
        sc.streams[0].fps_den = 1;
        sc.streams[1].fps_num = 1;   /* one frame a second: 3 s window */
        sc.streams[1].fps_den = 1;
        sc.streams[0].last_publish_ns = 99 * s;
        CHECK(!zcp_prom_health(&sc, why, sizeof(why)) && strstr(why, "stream b: no frame published yet"));
        sc.streams[1].last_publish_ns = 100 * s - 2900000000ULL;
        CHECK(zcp_prom_health(&sc, why, sizeof(why)) && strcmp(why, "ok") == 0);
        sc.streams[0].last_publish_ns = 100 * s - 2100000000ULL;   /* 30 fps: 2 s window */
        sc.streams[0].source_state = ZCP_SOURCE_BACKOFF;
        CHECK(!zcp_prom_health(&sc, why, sizeof(why)));
        CHECK_MSG(strcmp(why, "stream a: no frame for 2.1 s (source backoff)") == 0, "%s", why);
        sc.streams[0].last_publish_ns = 100 * s;
        sc.streams[1].last_publish_ns = 100 * s - 3100000000ULL;
        CHECK(!zcp_prom_health(&sc, why, sizeof(why)) && strstr(why, "stream b: no frame for 3.1 s"));
        CHECK(zcp_prom_health_window_ns(&sc.streams[0]) == 2 * s);

        /* A stream the supervisor has in back-off is not up, whatever its last frame; the policy decides the code. */
        sc.streams[1].last_publish_ns = 100 * s;
        CHECK(zcp_prom_health(&sc, why, sizeof(why)));
        sc.streams[1].stream_state = ZCP_STREAM_BACKOFF;
        sc.streams[1].state_since_ns = 98 * s;
        snprintf(sc.streams[1].last_error, sizeof(sc.streams[1].last_error), "source failed: boom");
        CHECK(!zcp_prom_health_policy(&sc, ZCP_HEALTHZ_ANY_DOWN, why, sizeof(why)));
        CHECK_MSG(strcmp(why, "stream b: backoff for 2.0 s (source failed: boom)") == 0, "%s", why);
        CHECK(zcp_prom_health_policy(&sc, ZCP_HEALTHZ_ALL_DOWN, why, sizeof(why)));
        CHECK(strstr(why, "stream b: backoff"));
        /* Both down: both listed, and all-down says 503 too. */
        sc.streams[0].stream_state = ZCP_STREAM_FAILED;
        sc.streams[0].state_since_ns = 90 * s;
        CHECK(!zcp_prom_health_policy(&sc, ZCP_HEALTHZ_ALL_DOWN, why, sizeof(why)));
        CHECK_MSG(strcmp(why, "stream a: failed for 10.0 s; stream b: backoff for 2.0 s (source failed: boom)") == 0,
                  "%s", why);
        CHECK(zcp_prom_health_window_ns(&sc.streams[1]) == 3 * s);

        /* Frames flow but their results do not leave (a broker down, a file that cannot be made): not up. */
        sc.streams[0].stream_state = sc.streams[1].stream_state = ZCP_STREAM_UP;
        sc.streams[0].last_publish_ns = sc.streams[1].last_publish_ns = 100 * s;
        CHECK(zcp_prom_health(&sc, why, sizeof(why)));
        snprintf(sc.streams[1].sink, sizeof(sc.streams[1].sink), "mqtt");
        sc.streams[1].sink_error = ENOTCONN;
        CHECK(!zcp_prom_health(&sc, why, sizeof(why)));
        CHECK_MSG(strcmp(why, "stream b: results are not leaving (output mqtt: Transport endpoint is not connected)") == 0,
                  "%s", why);
        CHECK(zcp_prom_health_policy(&sc, ZCP_HEALTHZ_ALL_DOWN, why, sizeof(why)));
}

static void test_rates(void)
{
        static struct zcp_prom_scrape sc;
        static struct zcp_prom_rates rates;
        const uint64_t s = 1000000000ULL;
        struct zcp_prom_stream *st = &sc.streams[0];

        memset(&sc, 0, sizeof(sc));
        memset(&rates, 0, sizeof(rates));
        sc.count = 1;
        snprintf(st->name, sizeof(st->name), "cam");
        st->fps_num = 50;
        st->fps_den = 1;
        /* First scrape: the average since the first frame (10 s at 50 fps). */
        st->first_capture_ns = 90 * s;
        st->last_publish_ns = 100 * s;
        st->published = 501;
        sc.now_ns = 100 * s;
        zcp_prom_rates_update(&rates, &sc);
        CHECK(fabs(st->fps - 50.0) < 1e-9);
        /* Then 80 fps, scraped every 0.5 s: after 1 s the rate comes from samples. */
        for (int i = 1; i <= 40; i++) {
                sc.now_ns = 100 * s + (uint64_t)i * s / 2;
                st->published = 501 + (uint64_t)i * 40;
                st->last_publish_ns = sc.now_ns;
                zcp_prom_rates_update(&rates, &sc);
                if (i >= 2)
                        CHECK_MSG(fabs(st->fps - 80.0) < 1e-6, "i=%d fps=%f", i, st->fps);
        }
        /* It stops: within the window the rate decays, past it it is 0. */
        sc.now_ns += 2 * s;
        zcp_prom_rates_update(&rates, &sc);
        CHECK(st->fps > 0 && st->fps < 80.0);
        sc.now_ns += 10 * s;
        zcp_prom_rates_update(&rates, &sc);
        CHECK(st->fps == 0.0);
        /* Restarted under the same name: the counter went back; no negative or huge rate. */
        st->published = 10;
        st->first_capture_ns = sc.now_ns - s;
        st->last_publish_ns = sc.now_ns;
        zcp_prom_rates_update(&rates, &sc);
        CHECK(fabs(st->fps - 9.0) < 1e-9);
        /* Many names come and go: entries are reused, lookups keep working. */
        for (int i = 0; i < 100; i++) {
                snprintf(st->name, sizeof(st->name), "s%d", i);
                sc.now_ns += s;
                zcp_prom_rates_update(&rates, &sc);
                CHECK(st->fps >= 0.0);
        }
}

#if HAVE_HTTP
/* One GET on a fresh connection; the whole answer into buf. */
static void http_get(unsigned port, const char *path, char *buf, size_t size)
{
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        size_t got = 0;
        char req[256];
        ssize_t n;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        CHECK(fd >= 0);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
        n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
        CHECK(write(fd, req, (size_t)n) == n);
        while (got + 1 < size && (n = read(fd, buf + got, size - 1 - got)) > 0)
                got += (size_t)n;
        buf[got] = '\0';
        close(fd);
}

static void test_http_start(void)
{
        struct zcp_http_config cfg = { .enabled = true, .port = 0, .max_connections = 4, .timeout_s = 2 };
        struct sockaddr_in a = { .sin_family = AF_INET };
        socklen_t alen = sizeof(a);
        struct zcp_registry *reg;
        struct zcp_http *http = NULL;
        char buf[4096];
        int blocker;

        CHECK(zcp_registry_new(&reg) == 0);
        snprintf(cfg.listen, sizeof(cfg.listen), "192.0.2.1");
        CHECK(zcp_http_start(&cfg, reg, &http) == -EINVAL && http == NULL);
        cfg.enabled = false;
        CHECK(zcp_http_start(&cfg, reg, &http) == 0 && http == NULL);
        cfg.enabled = true;

        blocker = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(blocker >= 0 && bind(blocker, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(blocker, 1) == 0);
        CHECK(getsockname(blocker, (struct sockaddr *)&a, &alen) == 0);
        snprintf(cfg.listen, sizeof(cfg.listen), "127.0.0.1");
        cfg.port = ntohs(a.sin_port);
        CHECK(zcp_http_start(&cfg, reg, &http) == -EADDRINUSE && http == NULL);
        close(blocker);

        cfg.port = 0;
        CHECK(zcp_http_start(&cfg, reg, &http) == 0 && http);
        CHECK(zcp_http_port(http) > 0);
        http_get(zcp_http_port(http), "/healthz", buf, sizeof(buf));
        CHECK_MSG(strncmp(buf, "HTTP/1.1 503", 12) == 0 && strstr(buf, "\r\n\r\nno streams running\n"), "%s", buf);
        http_get(zcp_http_port(http), "/metrics", buf, sizeof(buf));
        CHECK_MSG(strncmp(buf, "HTTP/1.1 200", 12) == 0 && strstr(buf, "zcpipe_build_info{"), "%s", buf);
        http_get(zcp_http_port(http), "/nope", buf, sizeof(buf));
        CHECK(strncmp(buf, "HTTP/1.1 404", 12) == 0);

        /*
         * Scraped as fast as possible, a page is rendered (registry collected, text formatted) at
         * most once per 250 ms: at most elapsed / 0.25 s + 1 renders, however many requests.
         */
        {
                uint64_t r0 = zcp_http_renders(http), t0 = zcp_now_ns(), elapsed, renders;
                unsigned requests = 0;

                do {
                        http_get(zcp_http_port(http), "/metrics", buf, sizeof(buf));
                        CHECK(strncmp(buf, "HTTP/1.1 200", 12) == 0);
                        requests++;
                } while (zcp_now_ns() - t0 < ZCP_NSEC_PER_SEC && requests < 100000);
                elapsed = zcp_now_ns() - t0;
                renders = zcp_http_renders(http) - r0;
                CHECK_MSG(renders <= elapsed / (250 * ZCP_NSEC_PER_MSEC) + 1,
                          "%llu renders for %u requests in %.3f s", (unsigned long long)renders, requests,
                          (double)elapsed / 1e9);
                printf("prom: %u scrapes in %.2f s, %llu renders\n", requests, (double)elapsed / 1e9,
                       (unsigned long long)renders);
        }
        zcp_http_stop(http);
        zcp_http_stop(NULL);
        zcp_registry_free(reg);
}
#endif

int main(void)
{
        test_le_buckets();
        test_metrics_text();
        test_stats_json();
        test_health();
        test_rates();
#if HAVE_HTTP
        test_http_start();
#endif
        printf("prom: ok\n");
        return 0;
}
