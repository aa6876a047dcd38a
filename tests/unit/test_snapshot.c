/* SPDX-License-Identifier: MIT */
/*
 * Snapshots for the live page (output/snapshot.h), driven as the publish
 * thread and the HTTP thread drive them, with frame times chosen by the test:
 *  - nothing is taken before anyone watches, nor after the watch expired;
 *  - while watched, at most `fps` frames a second (a due frame every
 *    1/fps, never two within it), frames of another geometry skipped and
 *    counted;
 *  - the JPEG decodes (libturbojpeg, independently) to the RGB the frame's
 *    limited-range BT.601 NV12 stands for: PSNR above 35 dB, and the JSON
 *    names the same frame with its result line and labels;
 *  - the JSON's moving mask is that frame's (copied when the frame is
 *    taken, kept with its JPEG), hex as documented (bit i % 8 of byte i / 8)
 *    with its popcount; null for a frame without one or of another grid;
 *  - encoded once per frame taken however often it is asked for;
 *  - with a reader encoding in a loop on another thread, every due frame
 *    the publisher offers is either taken or counted as skipped (busy), and
 *    the publisher never waits;
 *  - references: the last unref frees (ASan checks).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/clock.h"
#include "core/config.h"
#include "output/snapshot.h"

#if HAVE_SNAPSHOT
#include <turbojpeg.h>

#define W 320
#define H 240

#define CELL  16
#define GW    (W / CELL)
#define GH    (H / CELL)
#define WORDS ((GW * GH + 31) / 32)

static uint8_t frame_data[W * H * 3 / 2];
static struct zcp_result result;
static uint32_t mask_data[WORDS];
static struct zcp_slot slot = { .data = frame_data, .cap = sizeof(frame_data), .result = &result,
                                .mask = mask_data, .mask_words = WORDS };

/* A scene with edges and colour: luma gradient with a bright square, chroma ramps. */
static void make_frame(uint32_t shift)
{
        uint8_t *y = frame_data, *uv = frame_data + W * H;

        for (uint32_t r = 0; r < H; r++)
                for (uint32_t c = 0; c < W; c++) {
                        bool box = c >= 100 + shift && c < 180 + shift && r >= 60 && r < 140;
                        y[r * W + c] = box ? 220 : (uint8_t)(16 + (c * 200) / W);
                }
        for (uint32_t r = 0; r < H / 2; r++)
                for (uint32_t c = 0; c < W / 2; c++) {
                        uv[r * W + 2 * c] = (uint8_t)(64 + (c * 128) / (W / 2));     /* U */
                        uv[r * W + 2 * c + 1] = (uint8_t)(192 - (r * 128) / (H / 2)); /* V */
                }
}

static void set_frame(uint64_t seq, uint64_t t_ns, uint32_t w, uint32_t h)
{
        struct zcp_frame *f = &slot.frame;

        memset(f, 0, sizeof(*f));
        f->seq = seq;
        f->width = w;
        f->height = h;
        f->stride = w;
        f->fmt = ZCP_PIX_NV12;
        f->bytes = (uint64_t)w * h * 3 / 2;
        f->t[ZCP_TS_CAPTURE] = t_ns - 2 * ZCP_NSEC_PER_MSEC;
        f->t[ZCP_TS_PUBLISH_END] = t_ns;
        memset(&result, 0, sizeof(result));
        result.valid = 1;
        result.moving_cells = 30;
        result.total_cells = 300;
        result.moving_fraction = 0.1f;
        result.bbox[0] = 96;
        result.bbox[1] = 48;
        result.bbox[2] = 192;
        result.bbox[3] = 144;
        result.topk_count = 2;
        result.topk_class[0] = 1;
        result.topk_prob[0] = 0.75f;
        result.topk_class[1] = 0;
        result.topk_prob[1] = 0.25f;
        result.grid_w = GW;
        result.grid_h = GH;
        result.mask_words = 0;   /* set_mask() gives it one */
}

/*
 * A mask for the result: the cells of the bbox (96,48)-(192,144), cells
 * 6..11 x 3..8, but the `skip` of them counted from the top left after the
 * first (the corners stay, so the bbox is theirs); moving_cells its count.
 */
static void set_mask(uint32_t skip)
{
        uint32_t n = 0, seen = 0;

        memset(mask_data, 0, sizeof(mask_data));
        for (uint32_t gy = 3; gy <= 8; gy++)
                for (uint32_t gx = 6; gx <= 11; gx++, seen++) {
                        const uint32_t i = gy * GW + gx;
                        if (seen >= 1 && seen <= skip && gy != 8)
                                continue;
                        mask_data[i / 32] |= 1u << (i % 32);
                        n++;
                }
        result.moving_cells = n;
        result.mask_words = WORDS;
}

/* The JSON's "mask" member as the documentation spells it, from mask_data. */
static void want_mask_json(char *buf, size_t cap)
{
        size_t len = (size_t)snprintf(buf, cap, "\"mask\":{\"grid_w\":%u,\"grid_h\":%u,\"moving\":%u,\"hex\":\"", GW,
                                      GH, result.moving_cells);

        for (uint32_t byte = 0; byte < (GW * GH + 7) / 8; byte++) {
                uint32_t v = 0;
                for (uint32_t b = 0; b < 8; b++) {
                        const uint32_t i = byte * 8 + b;
                        if (i < GW * GH && ((mask_data[i / 32] >> (i % 32)) & 1u))
                                v |= 1u << b;
                }
                len += (size_t)snprintf(buf + len, cap - len, "%02x", v);
        }
        snprintf(buf + len, cap - len, "\"},");
}

static double clamp255(double v)
{
        return v < 0 ? 0 : v > 255 ? 255 : v;
}

/* PSNR of the decoded RGB against the frame's RGB by DESIGN.md §4's formulas (plain per-pixel loop). */
static double psnr_vs_frame(const uint8_t *rgb)
{
        const uint8_t *y = frame_data, *uv = frame_data + W * H;
        double se = 0;

        for (uint32_t r = 0; r < H; r++)
                for (uint32_t c = 0; c < W; c++) {
                        double Y = y[r * W + c], U = uv[(r / 2) * W + 2 * (c / 2)], V = uv[(r / 2) * W + 2 * (c / 2) + 1];
                        double ref[3] = {
                                clamp255(1.164 * (Y - 16) + 1.596 * (V - 128)),
                                clamp255(1.164 * (Y - 16) - 0.392 * (U - 128) - 0.813 * (V - 128)),
                                clamp255(1.164 * (Y - 16) + 2.017 * (U - 128)),
                        };
                        for (int k = 0; k < 3; k++) {
                                double d = ref[k] - rgb[(r * W + c) * 3 + k];
                                se += d * d;
                        }
                }
        return 10 * log10(255.0 * 255.0 / (se / (W * H * 3)));
}

static struct zcp_stream_config make_cfg(void)
{
        struct zcp_stream_config cfg;

        memset(&cfg, 0, sizeof(cfg));
        snprintf(cfg.name, sizeof(cfg.name), "cam.1");
        cfg.motion.enabled = true;
        cfg.motion.cell = CELL;
        cfg.motion.threshold = 12;
        return cfg;
}

static void test_rate_and_watch(void)
{
        struct zcp_stream_config cfg = make_cfg();
        struct zcp_snapshot_counters c;
        struct zcp_snapshot *s;
        uint64_t t = zcp_now_ns(), seq = 0;
        void *jpeg;
        size_t len;

        CHECK(zcp_snapshot_new(&cfg, &s) == 0);
        make_frame(0);
        /* Nobody watches: offered frames are ignored, nothing to hand out. */
        for (int i = 0; i < 5; i++) {
                set_frame(seq++, t + (uint64_t)i * 100 * ZCP_NSEC_PER_MSEC, W, H);
                zcp_snapshot_offer(s, &slot, NULL, slot.frame.t[ZCP_TS_PUBLISH_END]);
        }
        zcp_snapshot_counters(s, &c);
        CHECK(c.taken == 0 && c.skipped_busy == 0 && c.skipped_size == 0);
        CHECK(zcp_snapshot_jpeg(s, &jpeg, &len, &seq) == -EAGAIN);

        /* Watched at 2 a second: of 10 frames 100 ms apart, the 1st and 6th are taken. */
        t = zcp_now_ns();
        CHECK(zcp_snapshot_watch(s, W, H, 2) == 0);
        for (int i = 0; i < 10; i++) {
                set_frame(100 + (uint64_t)i, t + (uint64_t)i * 100 * ZCP_NSEC_PER_MSEC, W, H);
                zcp_snapshot_offer(s, &slot, NULL, slot.frame.t[ZCP_TS_PUBLISH_END]);
        }
        zcp_snapshot_counters(s, &c);
        CHECK_MSG(c.taken == 2, "taken %llu", (unsigned long long)c.taken);
        CHECK(zcp_snapshot_jpeg(s, &jpeg, &len, &seq) == 0);
        CHECK(seq == 105);
        free(jpeg);

        /* Another geometry: due but skipped, counted. */
        set_frame(200, t + 1500 * ZCP_NSEC_PER_MSEC, W / 2, H / 2);
        zcp_snapshot_offer(s, &slot, NULL, slot.frame.t[ZCP_TS_PUBLISH_END]);
        zcp_snapshot_counters(s, &c);
        CHECK(c.taken == 2 && c.skipped_size == 1);

        /* The watch lasts ZCP_SNAPSHOT_WATCH_NS: a frame after it is not taken. */
        set_frame(300, t + ZCP_SNAPSHOT_WATCH_NS + 500 * ZCP_NSEC_PER_MSEC, W, H);
        zcp_snapshot_offer(s, &slot, NULL, slot.frame.t[ZCP_TS_PUBLISH_END]);
        zcp_snapshot_counters(s, &c);
        CHECK(c.taken == 2 && c.skipped_size == 1 && c.skipped_busy == 0);
        CHECK(c.requests == 1);

        /* A bad geometry is refused by the reader's side too. */
        CHECK(zcp_snapshot_watch(s, 0, H, 2) == -EINVAL);
        CHECK(zcp_snapshot_watch(NULL, W, H, 2) == -ENOENT);
        zcp_snapshot_unref(s);
        printf("rate and watch: ok\n");
}

static void test_jpeg_and_json(void)
{
        static char *labels_[] = { "background", "a \"quoted\" <label>" };
        /* A classifier of two classes with labels: what the result line names (publish.h). */
        struct zcp_plan model = { .labels = labels_, .head = { .kind = ZCP_HEAD_CLASSIFY, .classes = 2 } };
        const struct zcp_plan *labels = &model;
        static uint8_t rgb[W * H * 3];
        struct zcp_stream_config cfg = make_cfg();
        struct zcp_snapshot_counters c;
        struct zcp_snapshot *s;
        tjhandle tj;
        void *jpeg, *again;
        size_t len, len2;
        uint64_t seq, seq2;
        char *json;
        size_t jlen;
        int w = 0, h = 0, sub = 0, cs = 0;
        double psnr;

        CHECK(zcp_snapshot_new(&cfg, &s) == 0);
        CHECK(zcp_snapshot_json(s, zcp_now_ns(), &json, &jlen) == 0);
        CHECK_MSG(strstr(json, "\"seq\":null") && strstr(json, "\"mask\":null") && strstr(json, "\"result\":null"),
                  "%s", json);
        free(json);

        make_frame(20);
        CHECK(zcp_snapshot_watch(s, W, H, 5) == 0);
        set_frame(42, zcp_now_ns(), W, H);
        zcp_snapshot_offer(s, &slot, labels, slot.frame.t[ZCP_TS_PUBLISH_END]);
        CHECK(zcp_snapshot_jpeg(s, &jpeg, &len, &seq) == 0);
        CHECK(seq == 42 && len > 100);
        CHECK(zcp_snapshot_jpeg(s, &again, &len2, &seq2) == 0);
        CHECK(seq2 == 42 && len2 == len && memcmp(jpeg, again, len) == 0);
        free(again);
        zcp_snapshot_counters(s, &c);
        CHECK_MSG(c.encoded == 1, "encoded %llu times", (unsigned long long)c.encoded);

        tj = tjInitDecompress();
        CHECK(tj);
        CHECK(tjDecompressHeader3(tj, jpeg, (unsigned long)len, &w, &h, &sub, &cs) == 0);
        CHECK(w == W && h == H && sub == TJSAMP_420 && cs == TJCS_YCbCr);
        CHECK(tjDecompress2(tj, jpeg, (unsigned long)len, rgb, W, 0, H, TJPF_RGB, TJFLAG_ACCURATEDCT) == 0);
        tjDestroy(tj);
        free(jpeg);
        psnr = psnr_vs_frame(rgb);
        CHECK_MSG(psnr > 35.0, "PSNR %.2f dB", psnr);

        CHECK(zcp_snapshot_json(s, slot.frame.t[ZCP_TS_PUBLISH_END] + 250 * ZCP_NSEC_PER_MSEC, &json, &jlen) == 0);
        CHECK(jlen == strlen(json) && json[jlen - 1] == '\n');
        CHECK_MSG(strstr(json, "\"mask\":null,\"result\":{"), "a frame without a mask: %s", json);
        CHECK_MSG(strstr(json, "\"stream\":\"cam.1\"") && strstr(json, "\"seq\":42,") &&
                          strstr(json, "\"cell\":16") && strstr(json, "\"age_ms\":250.0") &&
                          strstr(json, "\"e2e_ms\":2.000") && strstr(json, "\"width\":320,\"height\":240") &&
                          strstr(json, "\"bbox\":[96,48,192,144]") &&
                          strstr(json, "\"label\":\"a \\\"quoted\\\" <label>\"") && strstr(json, "\"fps\":5"),
                  "%s", json);
        free(json);

        /* Frames with masks: the JSON carries the one of the JPEG's frame, copied when it was taken. */
        for (uint32_t k = 0; k < 3; k++) {
                char want[256];
                uint32_t pop = 0;

                set_frame(50 + k, zcp_now_ns() + (uint64_t)(k + 1) * 250 * ZCP_NSEC_PER_MSEC, W, H);
                set_mask(k * 7);
                want_mask_json(want, sizeof(want));
                for (uint32_t wd = 0; wd < WORDS; wd++)
                        for (uint32_t b = 0; b < 32; b++)
                                pop += (mask_data[wd] >> b) & 1u;
                CHECK(pop == result.moving_cells && pop == 36 - k * 7);
                zcp_snapshot_offer(s, &slot, labels, slot.frame.t[ZCP_TS_PUBLISH_END]);
                memset(mask_data, 0xFF, sizeof(mask_data));   /* the slot goes back to the ring */
                CHECK(zcp_snapshot_jpeg(s, &jpeg, &len, &seq) == 0 && seq == 50 + k);
                free(jpeg);
                CHECK(zcp_snapshot_json(s, zcp_now_ns(), &json, &jlen) == 0);
                CHECK_MSG(strstr(json, want), "frame %u: want %s in %s", 50 + k, want,
                          json);
                {
                        char seqs[32], moving[40];
                        snprintf(seqs, sizeof(seqs), "\"seq\":%u,", 50 + k);
                        snprintf(moving, sizeof(moving), "\"moving_cells\":%u", 36 - k * 7);
                        CHECK_MSG(strstr(json, seqs) && strstr(json, moving), "frame %u: %s", 50 + k, json);
                }
                free(json);
        }
        /* A mask of another grid (or none) is not this stream's: null. */
        set_frame(60, zcp_now_ns() + 1000 * ZCP_NSEC_PER_MSEC, W, H);
        set_mask(0);
        result.grid_w = GW + 1;
        zcp_snapshot_offer(s, &slot, labels, slot.frame.t[ZCP_TS_PUBLISH_END]);
        CHECK(zcp_snapshot_json(s, zcp_now_ns(), &json, &jlen) == 0);
        CHECK_MSG(strstr(json, "\"seq\":60,") && strstr(json, "\"mask\":null,"), "%s", json);
        free(json);
        zcp_snapshot_unref(s);

        /* Motion off: no mask buffers, every frame's mask null. */
        cfg.motion.enabled = false;
        CHECK(zcp_snapshot_new(&cfg, &s) == 0);
        CHECK(zcp_snapshot_watch(s, W, H, 5) == 0);
        set_frame(70, zcp_now_ns(), W, H);
        set_mask(0);
        zcp_snapshot_offer(s, &slot, labels, slot.frame.t[ZCP_TS_PUBLISH_END]);
        CHECK(zcp_snapshot_json(s, zcp_now_ns(), &json, &jlen) == 0);
        CHECK_MSG(strstr(json, "\"seq\":70,") && strstr(json, "\"cell\":0,") && strstr(json, "\"mask\":null,"),
                  "%s", json);
        free(json);
        zcp_snapshot_unref(s);
        printf("jpeg and json: ok, PSNR %.1f dB, %zu bytes; masks of the JPEG's frame\n", psnr, len);
}

struct reader {
        struct zcp_snapshot *s;
        _Atomic bool stop;
        uint64_t jpegs;
};

static void *reader_thread(void *arg)
{
        struct reader *rd = arg;

        while (!atomic_load(&rd->stop)) {
                void *jpeg;
                size_t len;
                uint64_t seq;

                if (zcp_snapshot_jpeg(rd->s, &jpeg, &len, &seq) == 0) {
                        free(jpeg);
                        rd->jpegs++;
                }
                zcp_snapshot_watch(rd->s, W, H, 30);   /* locks too: allocation check */
        }
        return NULL;
}

static void test_busy_reader(void)
{
        enum { ROUNDS = 40, FRAMES = 80 };
        const uint64_t period = 34 * ZCP_NSEC_PER_MSEC;   /* longer than 1/30 s: every frame is due */
        uint64_t taken = 0, busy = 0, jpegs = 0;

        CHECK(FRAMES * period < ZCP_SNAPSHOT_WATCH_NS);
        make_frame(40);
        for (int round = 0; round < ROUNDS; round++) {
                struct zcp_stream_config cfg = make_cfg();
                struct zcp_snapshot_counters c;
                struct reader rd = { 0 };
                pthread_t th;
                uint64_t t;

                CHECK(zcp_snapshot_new(&cfg, &rd.s) == 0);
                CHECK(zcp_snapshot_watch(rd.s, W, H, 30) == 0);
                t = zcp_now_ns();
                CHECK(pthread_create(&th, NULL, reader_thread, &rd) == 0);
                for (int i = 0; i < FRAMES; i++) {
                        set_frame((uint64_t)i, t + (uint64_t)i * period, W, H);
                        zcp_snapshot_offer(rd.s, &slot, NULL, slot.frame.t[ZCP_TS_PUBLISH_END]);
                }
                atomic_store(&rd.stop, true);
                pthread_join(th, NULL);
                zcp_snapshot_counters(rd.s, &c);
                /* A frame skipped while the reader held the buffer leaves the next one due: all add up. */
                CHECK_MSG(c.taken + c.skipped_busy == FRAMES && c.skipped_size == 0,
                          "round %d: %llu taken + %llu busy != %d", round, (unsigned long long)c.taken,
                          (unsigned long long)c.skipped_busy, FRAMES);
                CHECK(c.encoded <= c.taken);
                taken += c.taken;
                busy += c.skipped_busy;
                jpegs += rd.jpegs;
                zcp_snapshot_unref(rd.s);
        }
        printf("busy reader: %d offered, %llu taken, %llu skipped while the reader held it, %llu JPEGs handed out\n",
               ROUNDS * FRAMES, (unsigned long long)taken, (unsigned long long)busy, (unsigned long long)jpegs);
}

static void test_refs(void)
{
        struct zcp_stream_config cfg = make_cfg();
        struct zcp_snapshot *s;

        CHECK(zcp_snapshot_new(&cfg, &s) == 0);
        CHECK(zcp_snapshot_ref(s) == s);
        CHECK(zcp_snapshot_watch(s, W, H, 2) == 0);
        zcp_snapshot_unref(s);   /* the stream's: the reader's reference keeps it */
        set_frame(1, zcp_now_ns(), W, H);
        zcp_snapshot_offer(s, &slot, NULL, slot.frame.t[ZCP_TS_PUBLISH_END]);
        zcp_snapshot_unref(s);   /* the last: freed (ASan reports a leak or a use after free otherwise) */
        zcp_snapshot_unref(NULL);
        zcp_snapshot_offer(NULL, &slot, NULL, slot.frame.t[ZCP_TS_PUBLISH_END]);
        CHECK(zcp_snapshot_ref(NULL) == NULL);
        printf("references: ok\n");
}

int main(void)
{
        test_rate_and_watch();
        test_jpeg_and_json();
        test_busy_reader();
        test_refs();
        return 0;
}
#else
int main(void)
{
        printf("SKIP: built without snapshots (HTTP or libturbojpeg missing)\n");
        return ZCP_TEST_SKIP;
}
#endif
