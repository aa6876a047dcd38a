/* SPDX-License-Identifier: MIT */
/*
 * Summaries of a stream's statistics: the table printed at exit and the one
 * line used by the periodic log summary and systemd's STATUS=. Read-only on
 * the stats (snapshots), so any thread may call them while the stream runs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "daemon/summary.h"

static double ms(uint64_t ns)
{
        return (double)ns / 1e6;
}

static double stream_fps(const struct zcp_stream_stats *s, uint64_t frames)
{
        uint64_t first = atomic_load(&s->first_capture_ns), last = atomic_load(&s->last_publish_ns);

        if (frames < 2 || last <= first)
                return 0.0;
        return (double)(frames - 1) * 1e9 / (double)(last - first);
}

static void row(FILE *out, const char *name, const struct zcp_hist *h)
{
        static _Thread_local struct zcp_hist_snapshot snap;

        zcp_hist_snapshot(h, &snap);
        fprintf(out, "  %-16s %8" PRIu64 " %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, snap.count,
                ms(zcp_hist_quantile(&snap, 0.50)), ms(zcp_hist_quantile(&snap, 0.90)),
                ms(zcp_hist_quantile(&snap, 0.99)), ms(zcp_hist_quantile(&snap, 0.999)), ms(snap.max_ns));
}

void zcp_summary_print(FILE *out, const char *stream, const struct zcp_stream_stats *s)
{
        uint64_t published = atomic_load(&s->published), captured = atomic_load(&s->captured);
        char name[64];

        fprintf(out, "\nstream %s: %" PRIu64 " frames captured, %" PRIu64 " published, %.2f fps, %" PRIu64
                     " dropped, %" PRIu64 " decode gaps, %" PRIu64 " copies, %" PRIu64 " reconnects\n",
                stream, captured, published, stream_fps(s, published), zcp_stats_dropped_total(s),
                (uint64_t)atomic_load(&s->decode_gaps), (uint64_t)atomic_load(&s->copies),
                (uint64_t)atomic_load(&s->reconnects));
        if (atomic_load(&s->slot_direct))
                fprintf(out, "  source: %" PRIu64 " frames decoded straight into their slot (slot_direct), %" PRIu64
                             " copied\n",
                        (uint64_t)atomic_load(&s->slot_direct), (uint64_t)atomic_load(&s->copies));
        if (atomic_load(&s->conversions) || atomic_load(&s->pts_repeats) || atomic_load(&s->file_frames_expected) ||
            atomic_load(&s->outage_ns))
                fprintf(out, "  source: %" PRIu64 " conversions, %" PRIu64 " pts repeats, file frames %" PRIu64
                             " expected / %" PRIu64 " delivered, outages %.3f s (%" PRIu64 " frames)\n",
                        (uint64_t)atomic_load(&s->conversions), (uint64_t)atomic_load(&s->pts_repeats),
                        (uint64_t)atomic_load(&s->file_frames_expected), (uint64_t)atomic_load(&s->file_frames_delivered),
                        (double)atomic_load(&s->outage_ns) / 1e9, (uint64_t)atomic_load(&s->outage_frames));
        for (int i = 0; i < ZCP_DROP_REASON_COUNT; i++) {
                uint64_t n = atomic_load(&s->dropped[i]);
                if (n)
                        fprintf(out, "  dropped %-12s %" PRIu64 "\n", zcp_drop_reason_names[i], n);
        }
        fprintf(out, "  output: %" PRIu64 " lines written, %" PRIu64 " lost", (uint64_t)atomic_load(&s->sink.written),
                zcp_sink_stats_lost_total(&s->sink));
        for (int i = 0; i < ZCP_SINK_LOSS_COUNT; i++) {
                uint64_t n = atomic_load(&s->sink.lost[i]);
                if (n)
                        fprintf(out, ", %" PRIu64 " %s", n, zcp_sink_loss_names[i]);
        }
        if (atomic_load(&s->sink.reconnects))
                fprintf(out, ", %" PRIu64 " reconnects", (uint64_t)atomic_load(&s->sink.reconnects));
        fputc('\n', out);
        fprintf(out, "  %-16s %8s %9s %9s %9s %9s %9s\n", "latency (ms)", "count", "p50", "p90", "p99", "p99.9",
                "max");
        for (int i = 0; i < ZCP_STAGE_COUNT; i++) {
                snprintf(name, sizeof(name), "%s wait", zcp_stage_names[i]);
                row(out, name, &s->wait[i]);
                snprintf(name, sizeof(name), "%s busy", zcp_stage_names[i]);
                row(out, name, &s->busy[i]);
        }
        row(out, "end-to-end", &s->e2e);
        fflush(out);
}

int zcp_summary_counts(char *buf, size_t size, const struct zcp_stream_stats *s, double fps)
{
        static _Thread_local struct zcp_hist_snapshot snap;

        zcp_hist_snapshot(&s->e2e, &snap);
        return snprintf(buf, size, "%" PRIu64 " frames, %.1f fps now, e2e p50 %.2f ms p99 %.2f ms, %" PRIu64 " dropped",
                        (uint64_t)atomic_load(&s->published), fps, ms(zcp_hist_quantile(&snap, 0.5)),
                        ms(zcp_hist_quantile(&snap, 0.99)), zcp_stats_dropped_total(s));
}

int zcp_summary_line(char *buf, size_t size, const char *stream, const struct zcp_stream_stats *s, double fps)
{
        uint64_t restarts = atomic_load(&s->restarts);
        uint32_t state = atomic_load(&s->stream_state), source = atomic_load(&s->source_state);
        char extra[64] = "", counts[160];

        /* "up" alone when stream and source are up; the source's own state while it re-connects. */
        if (state == ZCP_STREAM_UP && source != ZCP_SOURCE_UP)
                snprintf(extra, sizeof(extra), " (source %s)", zcp_source_state_names[source % ZCP_SOURCE_STATE_COUNT]);
        if (restarts)
                snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), ", %" PRIu64 " restart%s", restarts,
                         restarts == 1 ? "" : "s");
        zcp_summary_counts(counts, sizeof(counts), s, fps);
        return snprintf(buf, size, "%s: %s%s, %s", stream, zcp_stream_state_names[state % ZCP_STREAM_STATE_COUNT],
                        extra, counts);
}
