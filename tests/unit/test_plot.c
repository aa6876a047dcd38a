/* SPDX-License-Identifier: MIT */
/*
 * zcpipe-bench's PNG plot (tools/bench/plot.c), without a GPU: the checksums
 * against their published check values; PNG files decoded here by an
 * independent reader (chunk CRCs by a bitwise CRC, an inflater of stored and fixed-code blocks,
 * Adler-32, the rows' filter bytes) and compared pixel for pixel with the
 * image; a plot drawn with its series' colours where the points are.
 *
 *   test_plot [OUT.png]   also writes a sample plot to OUT.png (check_png.py
 *                         decodes it with Python's zlib)
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "plot.h"

static uint32_t get32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A CRC-32 written differently from plot.c's (bit by bit, no table). */
static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
        uint32_t c = 0xffffffffu;

        for (size_t i = 0; i < n; i++) {
                c ^= p[i];
                for (int k = 0; k < 8; k++)
                        c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        }
        return ~c;
}

/* Inflate (RFC 1951) of stored and fixed-code blocks, written from the RFC apart from plot.c. */
struct inb {
        const uint8_t *d;
        size_t n;
        size_t bit;
};

static unsigned in_bits(struct inb *b, unsigned n)   /* least significant bit first */
{
        unsigned v = 0;

        for (unsigned i = 0; i < n; i++, b->bit++) {
                CHECK(b->bit / 8 < b->n);
                v |= (unsigned)(b->d[b->bit / 8] >> (b->bit % 8) & 1) << i;
        }
        return v;
}

static unsigned in_huff(struct inb *b, unsigned n, unsigned v)   /* n more code bits, most significant first */
{
        while (n--)
                v = v << 1 | in_bits(b, 1);
        return v;
}

static unsigned fixed_litlen(struct inb *b)
{
        unsigned v = in_huff(b, 7, 0);

        if (v <= 0x17)
                return 256 + v;
        v = in_huff(b, 1, v);
        if (v >= 0x30 && v <= 0xbf)
                return v - 0x30;
        if (v >= 0xc0 && v <= 0xc7)
                return 280 + v - 0xc0;
        v = in_huff(b, 1, v);
        CHECK(v >= 0x190 && v <= 0x1ff);
        return 144 + v - 0x190;
}

/* Inflates the deflate data at d[0..n) into out (at most cap bytes); returns the bytes read. */
static size_t inflate_to(const uint8_t *d, size_t n, uint8_t *out, size_t cap, size_t *ret_got)
{
        static const unsigned lbase[29] = { 3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                            31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258 };
        static const unsigned lext[29] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                           2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0 };
        struct inb b = { d, n, 0 };
        size_t got = 0;
        unsigned final;

        do {
                final = in_bits(&b, 1);
                const unsigned type = in_bits(&b, 2);

                CHECK_MSG(type == 0 || type == 1, "deflate block type %u", type);
                if (type == 0) {
                        b.bit = (b.bit + 7) / 8 * 8;
                        const unsigned bl = in_bits(&b, 16), nl = in_bits(&b, 16);

                        CHECK((bl ^ 0xffffu) == nl && b.bit / 8 + bl <= n && got + bl <= cap);
                        memcpy(out + got, d + b.bit / 8, bl);
                        got += bl;
                        b.bit += 8 * (size_t)bl;
                        continue;
                }
                for (;;) {
                        const unsigned sym = fixed_litlen(&b);

                        if (sym < 256) {
                                CHECK(got < cap);
                                out[got++] = (uint8_t)sym;
                                continue;
                        }
                        if (sym == 256)
                                break;
                        CHECK(sym <= 285);
                        const unsigned len = lbase[sym - 257] + in_bits(&b, lext[sym - 257]);
                        const unsigned dc = in_huff(&b, 5, 0);
                        CHECK(dc < 30);
                        /* Distance code dc: base 1, 2, 3, 4, then two codes per doubling, dc / 2 - 1 extra bits. */
                        const unsigned ext = dc < 4 ? 0 : dc / 2 - 1;
                        const unsigned base = dc < 4 ? dc + 1 : (2u + (dc & 1)) << ext | 1u;
                        const unsigned dist = base + in_bits(&b, ext);
                        CHECK(dist <= got && got + len <= cap);
                        for (unsigned i = 0; i < len; i++, got++)
                                out[got] = out[got - dist];
                }
        } while (!final);
        *ret_got = got;
        return (b.bit + 7) / 8;
}

/* Decodes a PNG that zcp_png_encode wrote and checks every byte of it against im. */
static void check_decodes_to(const uint8_t *png, size_t len, const struct zcp_image *im)
{
        static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
        const size_t row = 1 + (size_t)im->w * 3, raw_len = row * (size_t)im->h;
        uint8_t *raw = malloc(raw_len);
        size_t pos = 8, got = 0;
        int seen_ihdr = 0, seen_idat = 0, seen_iend = 0;

        CHECK(raw);
        CHECK(len > 8 && memcmp(png, sig, 8) == 0);
        while (pos < len) {
                CHECK(pos + 12 <= len);
                const uint32_t n = get32(png + pos);
                const uint8_t *type = png + pos + 4, *data = png + pos + 8;

                CHECK(pos + 12 + n <= len);
                CHECK_MSG(get32(data + n) == crc_bitwise(type, n + 4), "chunk %.4s: bad CRC", (const char *)type);
                if (memcmp(type, "IHDR", 4) == 0) {
                        CHECK(!seen_ihdr && pos == 8 && n == 13);
                        CHECK(get32(data) == (uint32_t)im->w && get32(data + 4) == (uint32_t)im->h);
                        CHECK(data[8] == 8 && data[9] == 2 && data[10] == 0 && data[11] == 0 && data[12] == 0);
                        seen_ihdr = 1;
                } else if (memcmp(type, "IDAT", 4) == 0) {
                        size_t q;
                        uint32_t a = 1, b = 0;

                        CHECK(seen_ihdr && !seen_idat);
                        CHECK(n >= 6 && (data[0] * 256u + data[1]) % 31 == 0 && (data[0] & 0x0f) == 8);
                        CHECK((data[1] & 0x20) == 0);   /* no preset dictionary */
                        q = 2 + inflate_to(data + 2, n - 6, raw, raw_len, &got);
                        CHECK(q == n - 4 && got == raw_len);
                        for (size_t i = 0; i < raw_len; i++) {
                                a = (a + raw[i]) % 65521;
                                b = (b + a) % 65521;
                        }
                        CHECK(get32(data + q) == (b << 16 | a));
                        seen_idat = 1;
                } else if (memcmp(type, "IEND", 4) == 0) {
                        CHECK(seen_idat && n == 0 && pos + 12 == len);
                        seen_iend = 1;
                } else {
                        CHECK_MSG(0, "unexpected chunk %.4s", (const char *)type);
                }
                pos += 12 + n;
        }
        CHECK(seen_iend);
        for (int y = 0; y < im->h; y++) {
                CHECK(raw[(size_t)y * row] == 0);       /* filter: none */
                CHECK(memcmp(raw + (size_t)y * row + 1, im->px + (size_t)y * im->w * 3, (size_t)im->w * 3) == 0);
        }
        free(raw);
}

static void encode_and_check(const struct zcp_image *im)
{
        uint8_t *png = NULL;
        size_t len = 0;

        CHECK(zcp_png_encode(im, &png, &len) == 0);
        check_decodes_to(png, len, im);
        free(png);
}

static void test_checksums(void)
{
        const uint8_t *s = (const uint8_t *)"123456789";

        CHECK(zcp_crc32(0, s, 9) == 0xCBF43926u);              /* CRC-32/ISO-HDLC check value */
        CHECK(zcp_crc32(zcp_crc32(0, s, 4), s + 4, 5) == 0xCBF43926u);
        CHECK(zcp_adler32(1, (const uint8_t *)"Wikipedia", 9) == 0x11E60398u);
        CHECK(zcp_adler32(1, s, 0) == 1);
        /* Long runs of 0xff: the modulo must be taken before b overflows. */
        {
                static uint8_t ff[100000];
                uint32_t a = 1, b = 0;

                memset(ff, 0xff, sizeof(ff));
                for (size_t i = 0; i < sizeof(ff); i++) {
                        a = (a + 0xff) % 65521;
                        b = (b + a) % 65521;
                }
                CHECK(zcp_adler32(1, ff, sizeof(ff)) == (b << 16 | a));
                CHECK(zcp_crc32(0, ff, sizeof(ff)) == crc_bitwise(ff, sizeof(ff)));
        }
}

static void test_small_images(void)
{
        struct zcp_image im;
        uint32_t x = 12345;

        CHECK(zcp_image_init(&im, 0, 5) == -EINVAL);
        CHECK(im.px == NULL);
        zcp_image_done(&im);
        /* 1x1, 3x2, noise (all literals: the worst case for the output's size), a row longer than deflate's
         * 32 KiB window (no row-above matches), and sizes around a 65535-byte stored block. */
        static const int dims[][2] = { { 1, 1 }, { 3, 2 }, { 21845, 1 }, { 2, 10923 }, { 300, 300 } };
        for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
                const int w = dims[d][0], h = dims[d][1];

                CHECK(zcp_image_init(&im, w, h) == 0);
                for (size_t i = 0; i < (size_t)w * h * 3; i++) {
                        CHECK(im.px[i] == 0xff);
                        x = x * 1103515245u + 12345u;
                        im.px[i] = (uint8_t)(x >> 16);
                }
                encode_and_check(&im);
                zcp_image_done(&im);
                zcp_image_done(&im);    /* twice: safe */
        }
        /* 65535 raw bytes exactly, one full block: 15 rows of 1 + 3 * 1456 bytes. */
        CHECK(zcp_image_init(&im, 1456, 15) == 0);
        encode_and_check(&im);
        zcp_image_done(&im);
}

static void test_drawing(void)
{
        const struct zcp_rgb red = { 255, 0, 0 }, blue = { 0, 0, 255 };
        struct zcp_image im;
        int n = 0;

        CHECK(zcp_image_init(&im, 40, 20) == 0);
        zcp_image_rect(&im, 30, 15, 50, 40, red);       /* clipped */
        CHECK(im.px[(19 * 40 + 39) * 3] == 255 && im.px[(19 * 40 + 39) * 3 + 1] == 0);
        CHECK(im.px[(14 * 40 + 30) * 3 + 1] == 255);    /* just above: still white */
        zcp_image_line(&im, 0, 0, 9, 9, blue, 1, 0);    /* the diagonal, both ends */
        for (int i = 0; i < 10; i++)
                CHECK(im.px[(i * 40 + i) * 3 + 2] == 255 && im.px[(i * 40 + i) * 3] == 0);
        zcp_image_line(&im, -100, -100, 1000, 500, blue, 3, 4);   /* far outside: clipped, no crash */
        /* "I" at scale 1: its middle column (0x7F) is 7 pixels tall at x + 2. */
        CHECK(zcp_text_width("II", 1) == 11 && zcp_text_width("", 3) == 0);
        CHECK(zcp_image_text(&im, 20, 0, "I", red, 1) == 5);
        for (int y = 0; y < 7; y++)
                if (im.px[(y * 40 + 22) * 3 + 1] == 0)
                        n++;
        CHECK(n == 7);
        encode_and_check(&im);
        zcp_image_done(&im);
}

static int count_color(const struct zcp_image *im, struct zcp_rgb c)
{
        int n = 0;

        for (size_t i = 0; i < (size_t)im->w * im->h; i++)
                n += im->px[i * 3] == c.r && im->px[i * 3 + 1] == c.g && im->px[i * 3 + 2] == c.b;
        return n;
}

static void test_plot(const char *out)
{
        const double x[4] = { 0.46, 1.38, 3.11, 12.44 };
        const double a[4] = { 9.5, 21, 44, 170 }, b[4] = { 30, 60, 120, 400 };
        const double bad[2] = { 0, NAN };
        const struct zcp_series s[3] = {
                { "read1 copy", { 31, 119, 180 }, 0, 4, x, b },
                { "read1 zero-copy", { 255, 127, 14 }, 1, 4, x, a },
                { "nothing to draw", { 44, 160, 44 }, 0, 2, x, bad },
        };
        struct zcp_image im;

        CHECK(zcp_image_init(&im, 399, 300) == 0);
        CHECK(zcp_plot_draw(&im, "t", "x", "y", s, 3) == -EINVAL);   /* too small */
        zcp_image_done(&im);
        CHECK(zcp_image_init(&im, 1000, 620) == 0);
        CHECK(zcp_plot_draw(&im, "t", "x", "y", s + 2, 1) == -EINVAL);   /* no point to draw */
        CHECK(zcp_plot_draw(&im, "copy vs zero-copy: test", "NV12 frame, MB", "us per iteration, p50 (log)", s, 3) == 0);
        /* Each series' colour: its line, markers and legend entry; the third only in the legend. */
        CHECK(count_color(&im, s[0].color) > 500);
        CHECK(count_color(&im, s[1].color) > 300);
        CHECK(count_color(&im, s[2].color) > 0 && count_color(&im, s[2].color) < 200);
        /* The plot area: left 80, right 770, top 44, bottom 565; y decades 1..1000. The first
         * point of series 0 (x 0.46 of 14 MB, y 30 us) lies at its marker's centre. */
        {
                const int px = 80 + (int)lround(0.46 / 14 * (770 - 80));
                const int py = 565 - (int)lround((log10(30) - 0) / 3 * (565 - 44));
                const uint8_t *p = im.px + ((size_t)py * im.w + px) * 3;

                CHECK_MSG(p[0] == 31 && p[1] == 119 && p[2] == 180, "pixel at %d,%d is %d %d %d", px, py, p[0],
                          p[1], p[2]);
        }
        encode_and_check(&im);
        if (out)
                CHECK(zcp_png_write(&im, out) == 0);
        CHECK(zcp_png_write(&im, "/nonexistent-dir/x.png") == -ENOENT);
        zcp_image_done(&im);
}

int main(int argc, char **argv)
{
        test_checksums();
        test_small_images();
        test_drawing();
        test_plot(argc > 1 ? argv[1] : NULL);
        printf("plot: checksums, PNG encoding (decoded and compared), drawing and the plot: ok\n");
        return 0;
}
