/* SPDX-License-Identifier: MIT */
/*
 * Histograms: every value lands in a bucket whose midpoint is within 1 %
 * (1/256 by construction) of it across 1 us .. 10 s; quantiles match the
 * exact order statistics of the recorded values within that error.
 */
#include <math.h>
#include <stdlib.h>

#include "common.h"
#include "core/metrics.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void)
{
        uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static void test_bucket_bounds(void)
{
        uint32_t prev = 0;

        /* Monotonic, contiguous, and the error bound at many points. */
        for (uint64_t v = 1000; v <= 10000000000ull; v += v / 97 + 1) {
                uint32_t b = zcp_hist_bucket_of(v);
                uint64_t lo = zcp_hist_bucket_low(b), hi = zcp_hist_bucket_high(b);
                double mid = (double)(lo + hi) / 2.0;

                CHECK(b >= prev);
                prev = b;
                CHECK_MSG(lo <= v && v < hi, "v=%llu b=%u [%llu,%llu)", (unsigned long long)v, b,
                          (unsigned long long)lo, (unsigned long long)hi);
                CHECK_MSG(fabs(mid - (double)v) / (double)v <= 0.01, "v=%llu mid=%f", (unsigned long long)v, mid);
        }
        for (uint32_t b = 0; b + 1 < ZCP_HIST_BUCKETS; b++)
                CHECK(zcp_hist_bucket_high(b) == zcp_hist_bucket_low(b + 1));
        CHECK(zcp_hist_bucket_of(0) == 0);
        CHECK(zcp_hist_bucket_of(UINT64_MAX / 2) == ZCP_HIST_BUCKETS - 1);
}

static void test_quantiles(void)
{
        static struct zcp_hist h;
        static struct zcp_hist_snapshot s;
        enum { N = 100000 };
        uint64_t *v = malloc(N * sizeof(*v));
        const double qs[] = { 0.5, 0.9, 0.99, 0.999 };

        CHECK(v);
        zcp_hist_init(&h);
        zcp_hist_snapshot(&h, &s);
        CHECK(s.count == 0 && zcp_hist_quantile(&s, 0.5) == 0);
        for (int i = 0; i < N; i++) {
                /* Log-uniform over 2 us .. 2 s. */
                double e = (double)(next_u64() >> 11) / 9007199254740992.0;
                v[i] = (uint64_t)(2000.0 * pow(1e6, e));
                zcp_hist_record(&h, v[i]);
        }
        qsort(v, N, sizeof(*v), cmp_u64);
        zcp_hist_snapshot(&h, &s);
        CHECK(s.count == N);
        CHECK(s.max_ns == v[N - 1] && s.min_ns == v[0]);
        for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
                size_t rank = (size_t)ceil(qs[i] * N);
                double exact = (double)v[rank - 1], got = (double)zcp_hist_quantile(&s, qs[i]);

                CHECK_MSG(fabs(got - exact) / exact <= 0.01, "q=%g exact=%f got=%f", qs[i], exact, got);
        }
        CHECK(zcp_hist_quantile(&s, 1.0) == v[N - 1]);
        free(v);
}

int main(void)
{
        test_bucket_bounds();
        test_quantiles();
        printf("hist: ok\n");
        return 0;
}
