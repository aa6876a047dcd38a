/* SPDX-License-Identifier: MIT */
/*
 * The results sinks (output/sink.h) through their ops table:
 *  - file: every line written whole, in order; a line over the limit or
 *    without its newline is refused and counted too_long; written + lost
 *    = lines offered, queued back to 0 after close;
 *  - a FIFO nobody reads: write() never blocks, the lines that do not fit
 *    are counted (queue_full, then write_error for what is still queued
 *    at close), and what the FIFO holds is whole lines, exactly `written`.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "core/clock.h"
#include "json_strict.h"
#include "output/sink.h"

static char dir[] = "/tmp/zcp-test-sink-XXXXXX";

static int make_line(char *buf, size_t size, unsigned seq)
{
        return snprintf(buf, size, "{\"stream\":\"t\",\"seq\":%u,\"pad\":\"%0200u\"}\n", seq, seq);
}

static uint64_t lost_total(const struct zcp_sink_stats *st)
{
        return zcp_sink_stats_lost_total(st);
}

/* Checks every line of `text` strictly and that seqs increase (dropped lines leave gaps); returns the count. */
static unsigned check_lines(const char *text, size_t len)
{
        unsigned n = 0;
        long long last = -1;

        for (size_t at = 0; at < len;) {
                const char *nl = memchr(text + at, '\n', len - at);
                const char *bad;
                unsigned seq;

                CHECK_MSG(nl, "torn last line at byte %zu", at);
                bad = zcp_json_line_ok(text + at, (size_t)(nl - text - at) + 1);
                CHECK_MSG(!bad, "line %u: %s", n, bad);
                CHECK(sscanf(text + at, "{\"stream\":\"t\",\"seq\":%u,", &seq) == 1);
                CHECK_MSG((long long)seq > last, "line %u has seq %u after %lld", n, seq, last);
                last = seq;
                n++;
                at = (size_t)(nl - text) + 1;
        }
        return n;
}

static char *slurp_fd(int fd, size_t *ret_len)
{
        size_t cap = 1 << 16, len = 0;
        char *buf = malloc(cap);
        ssize_t n;

        CHECK(buf);
        while ((n = read(fd, buf + len, cap - len)) > 0) {
                len += (size_t)n;
                if (len == cap) {
                        cap *= 2;
                        buf = realloc(buf, cap);
                        CHECK(buf);
                }
        }
        *ret_len = len;
        return buf;
}

static void test_file(void)
{
        const struct zcp_sink_ops *ops = zcp_sink_find(ZCP_OUTPUT_FILE);
        struct zcp_output_config cfg = { .type = ZCP_OUTPUT_FILE };
        struct zcp_sink_stats st = { 0 };
        struct zcp_sink_ctx *ctx;
        static char big[70000];
        char line[512];
        size_t len;
        char *text;
        int fd, n;

        snprintf(cfg.path, sizeof(cfg.path), "%s/out.jsonl", dir);
        CHECK(ops && strcmp(ops->name, "file") == 0);
        CHECK(ops->open(&cfg, &st, &ctx) == 0);
        for (unsigned i = 0; i < 1000; i++) {
                n = make_line(line, sizeof(line), i);
                CHECK(ops->write(ctx, line, (size_t)n) == 0);
                if (i == 500) {
                        memset(big, 'x', sizeof(big));
                        big[sizeof(big) - 1] = '\n';
                        CHECK(ops->write(ctx, big, sizeof(big)) == -EMSGSIZE);    /* over the limit */
                        CHECK(ops->write(ctx, line, (size_t)n - 1) == -EMSGSIZE); /* no newline */
                }
        }
        ops->close(ctx);
        CHECK(atomic_load(&st.lost[ZCP_SINK_LOSS_TOO_LONG]) == 2);
        CHECK(atomic_load(&st.queued) == 0);
        fd = open(cfg.path, O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0);
        text = slurp_fd(fd, &len);
        close(fd);
        /* Nothing lost on a file that takes everything: 1000 written, in order (so 0..999), whole. */
        CHECK_MSG(check_lines(text, len) == 1000 && atomic_load(&st.written) == 1000,
                  "%llu written, %llu lost", (unsigned long long)atomic_load(&st.written),
                  (unsigned long long)lost_total(&st));
        free(text);
}

static void test_stopped_fifo(void)
{
        const struct zcp_sink_ops *ops = zcp_sink_find(ZCP_OUTPUT_FILE);
        struct zcp_output_config cfg = { .type = ZCP_OUTPUT_FILE };
        struct zcp_sink_stats st = { 0 };
        const unsigned lines = 5000;   /* ~1.1 MB: far more than a pipe and the queue hold */
        struct zcp_sink_ctx *ctx;
        char line[512];
        uint64_t t0, written, lost;
        size_t len;
        char *text;
        int rfd;

        snprintf(cfg.path, sizeof(cfg.path), "%s/fifo", dir);
        CHECK(mkfifo(cfg.path, 0600) == 0);
        rfd = open(cfg.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a reader that never reads */
        CHECK(rfd >= 0);
        CHECK(ops->open(&cfg, &st, &ctx) == 0);
        t0 = zcp_now_ns();
        for (unsigned i = 0; i < lines; i++) {
                int n = make_line(line, sizeof(line), i);

                CHECK(ops->write(ctx, line, (size_t)n) == 0);   /* accepted: never blocks */
        }
        printf("sink: %u lines offered to a stopped reader in %.1f ms\n", lines, (double)(zcp_now_ns() - t0) / 1e6);
        ops->close(ctx);   /* gives up on the stopped reader after its grace */
        written = atomic_load(&st.written);
        lost = lost_total(&st);
        CHECK_MSG(written + lost == lines, "%llu written + %llu lost != %u", (unsigned long long)written,
                  (unsigned long long)lost, lines);
        CHECK(atomic_load(&st.lost[ZCP_SINK_LOSS_QUEUE_FULL]) > 0);
        CHECK(atomic_load(&st.queued) == 0);
        text = slurp_fd(rfd, &len);
        close(rfd);
        /* What the FIFO holds is whole lines in order, exactly the written ones (oldest queued dropped). */
        CHECK_MSG(check_lines(text, len) == written, "the FIFO holds %zu bytes, %llu written", len,
                  (unsigned long long)written);
        printf("sink: %llu written, %llu queue_full, %llu write_error\n", (unsigned long long)written,
               (unsigned long long)atomic_load(&st.lost[ZCP_SINK_LOSS_QUEUE_FULL]),
               (unsigned long long)atomic_load(&st.lost[ZCP_SINK_LOSS_WRITE_ERROR]));
        free(text);
}

static void cleanup(void)
{
        char cmd[256];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "cannot remove %s\n", dir);
}

int main(void)
{
        CHECK(mkdtemp(dir));
        test_file();
        test_stopped_fifo();
        cleanup();
        printf("sink: ok\n");
        return 0;
}
