/* SPDX-License-Identifier: MIT */
/*
 * A PNG line plot with no library (plot.h). The raster is plain RGB; lines
 * are Bresenham with a square pen and an optional on/off dash; text is a 5x7
 * column font (bit 0 the top row). The PNG is signature, IHDR, one IDAT and
 * IEND; the IDAT holds a zlib stream (header 78 01) of one deflate block
 * with the fixed Huffman codes (RFC 1951 3.2.6), then the Adler-32 of the raw
 * rows (each a filter byte 0, then its pixels). The matches are searched at
 * three distances only, greedily: the byte before (runs of one byte, as in
 * a white background), the pixel before (a run of one colour) and the row
 * above (what repeats from row to row): a 1000x620 plot takes about 15 KB
 * instead of the 1.8 MB of stored blocks this writer used to make.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

/* ASCII 32..126, five columns each, bit 0 the top row of seven. */
static const uint8_t font5x7[95][5] = {
        { 0x00, 0x00, 0x00, 0x00, 0x00 }, { 0x00, 0x00, 0x5F, 0x00, 0x00 }, { 0x00, 0x07, 0x00, 0x07, 0x00 },
        { 0x14, 0x7F, 0x14, 0x7F, 0x14 }, { 0x24, 0x2A, 0x7F, 0x2A, 0x12 }, { 0x23, 0x13, 0x08, 0x64, 0x62 },
        { 0x36, 0x49, 0x55, 0x22, 0x50 }, { 0x00, 0x05, 0x03, 0x00, 0x00 }, { 0x00, 0x1C, 0x22, 0x41, 0x00 },
        { 0x00, 0x41, 0x22, 0x1C, 0x00 }, { 0x08, 0x2A, 0x1C, 0x2A, 0x08 }, { 0x08, 0x08, 0x3E, 0x08, 0x08 },
        { 0x00, 0x50, 0x30, 0x00, 0x00 }, { 0x08, 0x08, 0x08, 0x08, 0x08 }, { 0x00, 0x60, 0x60, 0x00, 0x00 },
        { 0x20, 0x10, 0x08, 0x04, 0x02 }, { 0x3E, 0x51, 0x49, 0x45, 0x3E }, { 0x00, 0x42, 0x7F, 0x40, 0x00 },
        { 0x42, 0x61, 0x51, 0x49, 0x46 }, { 0x21, 0x41, 0x45, 0x4B, 0x31 }, { 0x18, 0x14, 0x12, 0x7F, 0x10 },
        { 0x27, 0x45, 0x45, 0x45, 0x39 }, { 0x3C, 0x4A, 0x49, 0x49, 0x30 }, { 0x01, 0x71, 0x09, 0x05, 0x03 },
        { 0x36, 0x49, 0x49, 0x49, 0x36 }, { 0x06, 0x49, 0x49, 0x29, 0x1E }, { 0x00, 0x36, 0x36, 0x00, 0x00 },
        { 0x00, 0x56, 0x36, 0x00, 0x00 }, { 0x08, 0x14, 0x22, 0x41, 0x00 }, { 0x14, 0x14, 0x14, 0x14, 0x14 },
        { 0x00, 0x41, 0x22, 0x14, 0x08 }, { 0x02, 0x01, 0x51, 0x09, 0x06 }, { 0x32, 0x49, 0x79, 0x41, 0x3E },
        { 0x7E, 0x11, 0x11, 0x11, 0x7E }, { 0x7F, 0x49, 0x49, 0x49, 0x36 }, { 0x3E, 0x41, 0x41, 0x41, 0x22 },
        { 0x7F, 0x41, 0x41, 0x22, 0x1C }, { 0x7F, 0x49, 0x49, 0x49, 0x41 }, { 0x7F, 0x09, 0x09, 0x01, 0x01 },
        { 0x3E, 0x41, 0x41, 0x51, 0x32 }, { 0x7F, 0x08, 0x08, 0x08, 0x7F }, { 0x00, 0x41, 0x7F, 0x41, 0x00 },
        { 0x20, 0x40, 0x41, 0x3F, 0x01 }, { 0x7F, 0x08, 0x14, 0x22, 0x41 }, { 0x7F, 0x40, 0x40, 0x40, 0x40 },
        { 0x7F, 0x02, 0x04, 0x02, 0x7F }, { 0x7F, 0x04, 0x08, 0x10, 0x7F }, { 0x3E, 0x41, 0x41, 0x41, 0x3E },
        { 0x7F, 0x09, 0x09, 0x09, 0x06 }, { 0x3E, 0x41, 0x51, 0x21, 0x5E }, { 0x7F, 0x09, 0x19, 0x29, 0x46 },
        { 0x46, 0x49, 0x49, 0x49, 0x31 }, { 0x01, 0x01, 0x7F, 0x01, 0x01 }, { 0x3F, 0x40, 0x40, 0x40, 0x3F },
        { 0x1F, 0x20, 0x40, 0x20, 0x1F }, { 0x7F, 0x20, 0x18, 0x20, 0x7F }, { 0x63, 0x14, 0x08, 0x14, 0x63 },
        { 0x03, 0x04, 0x78, 0x04, 0x03 }, { 0x61, 0x51, 0x49, 0x45, 0x43 }, { 0x00, 0x7F, 0x41, 0x41, 0x00 },
        { 0x02, 0x04, 0x08, 0x10, 0x20 }, { 0x00, 0x41, 0x41, 0x7F, 0x00 }, { 0x04, 0x02, 0x01, 0x02, 0x04 },
        { 0x40, 0x40, 0x40, 0x40, 0x40 }, { 0x00, 0x01, 0x02, 0x04, 0x00 }, { 0x20, 0x54, 0x54, 0x54, 0x78 },
        { 0x7F, 0x48, 0x44, 0x44, 0x38 }, { 0x38, 0x44, 0x44, 0x44, 0x20 }, { 0x38, 0x44, 0x44, 0x48, 0x7F },
        { 0x38, 0x54, 0x54, 0x54, 0x18 }, { 0x08, 0x7E, 0x09, 0x01, 0x02 }, { 0x0C, 0x52, 0x52, 0x52, 0x3E },
        { 0x7F, 0x08, 0x04, 0x04, 0x78 }, { 0x00, 0x44, 0x7D, 0x40, 0x00 }, { 0x20, 0x40, 0x44, 0x3D, 0x00 },
        { 0x7F, 0x10, 0x28, 0x44, 0x00 }, { 0x00, 0x41, 0x7F, 0x40, 0x00 }, { 0x7C, 0x04, 0x18, 0x04, 0x78 },
        { 0x7C, 0x08, 0x04, 0x04, 0x78 }, { 0x38, 0x44, 0x44, 0x44, 0x38 }, { 0x7C, 0x14, 0x14, 0x14, 0x08 },
        { 0x08, 0x14, 0x14, 0x18, 0x7C }, { 0x7C, 0x08, 0x04, 0x04, 0x08 }, { 0x48, 0x54, 0x54, 0x54, 0x20 },
        { 0x04, 0x3F, 0x44, 0x40, 0x20 }, { 0x3C, 0x40, 0x40, 0x20, 0x7C }, { 0x1C, 0x20, 0x40, 0x20, 0x1C },
        { 0x3C, 0x40, 0x30, 0x40, 0x3C }, { 0x44, 0x28, 0x10, 0x28, 0x44 }, { 0x0C, 0x50, 0x50, 0x50, 0x3C },
        { 0x44, 0x64, 0x54, 0x4C, 0x44 }, { 0x00, 0x08, 0x36, 0x41, 0x00 }, { 0x00, 0x00, 0x7F, 0x00, 0x00 },
        { 0x00, 0x41, 0x36, 0x08, 0x00 }, { 0x08, 0x04, 0x08, 0x10, 0x08 },
};

int zcp_image_init(struct zcp_image *im, int w, int h)
{
        im->w = im->h = 0;
        im->px = NULL;
        if (w < 1 || h < 1 || w > 32768 || h > 32768)
                return -EINVAL;
        im->px = malloc((size_t)w * (size_t)h * 3);
        if (!im->px)
                return -ENOMEM;
        memset(im->px, 0xff, (size_t)w * (size_t)h * 3);
        im->w = w;
        im->h = h;
        return 0;
}

void zcp_image_done(struct zcp_image *im)
{
        free(im->px);
        im->px = NULL;
        im->w = im->h = 0;
}

void zcp_image_pixel(struct zcp_image *im, int x, int y, struct zcp_rgb c)
{
        uint8_t *p;

        if (x < 0 || y < 0 || x >= im->w || y >= im->h)
                return;
        p = im->px + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
        p[0] = c.r;
        p[1] = c.g;
        p[2] = c.b;
}

void zcp_image_rect(struct zcp_image *im, int x0, int y0, int x1, int y1, struct zcp_rgb c)
{
        int t;

        if (x0 > x1) {
                t = x0;
                x0 = x1;
                x1 = t;
        }
        if (y0 > y1) {
                t = y0;
                y0 = y1;
                y1 = t;
        }
        if (x0 < 0)
                x0 = 0;
        if (y0 < 0)
                y0 = 0;
        if (x1 >= im->w)
                x1 = im->w - 1;
        if (y1 >= im->h)
                y1 = im->h - 1;
        for (int y = y0; y <= y1; y++)
                for (int x = x0; x <= x1; x++)
                        zcp_image_pixel(im, x, y, c);
}

void zcp_image_line(struct zcp_image *im, int x0, int y0, int x1, int y1, struct zcp_rgb c, int width,
                    int dash)
{
        const int dx = abs(x1 - x0), dy = -abs(y1 - y0);
        const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
        const int pen = width < 1 ? 1 : width;
        const int lo = -(pen - 1) / 2, hi = lo + pen - 1;      /* the square pen around each point */
        int err = dx + dy, step = 0;

        for (;;) {
                if (dash <= 0 || (step / dash) % 2 == 0)
                        zcp_image_rect(im, x0 + lo, y0 + lo, x0 + hi, y0 + hi, c);
                step++;
                if (x0 == x1 && y0 == y1)
                        break;
                const int e2 = 2 * err;
                if (e2 >= dy) {
                        err += dy;
                        x0 += sx;
                }
                if (e2 <= dx) {
                        err += dx;
                        y0 += sy;
                }
        }
}

int zcp_text_width(const char *s, int scale)
{
        const size_t n = strlen(s);

        return n ? (int)(n * 6 - 1) * scale : 0;
}

int zcp_image_text(struct zcp_image *im, int x, int y, const char *s, struct zcp_rgb c, int scale)
{
        static const uint8_t box[5] = { 0x7F, 0x41, 0x41, 0x41, 0x7F };
        const int x_start = x;

        if (scale < 1)
                scale = 1;
        for (; *s; s++, x += 6 * scale) {
                const unsigned char ch = (unsigned char)*s;
                const uint8_t *g = ch >= 32 && ch <= 126 ? font5x7[ch - 32] : box;

                for (int col = 0; col < 5; col++)
                        for (int row = 0; row < 7; row++)
                                if (g[col] >> row & 1)
                                        zcp_image_rect(im, x + col * scale, y + row * scale,
                                                       x + col * scale + scale - 1, y + row * scale + scale - 1, c);
        }
        return x - x_start > 0 ? x - x_start - scale : 0;
}

uint32_t zcp_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
        static uint32_t table[256];
        static int ready;

        if (!ready) {
                for (uint32_t i = 0; i < 256; i++) {
                        uint32_t v = i;
                        for (int k = 0; k < 8; k++)
                                v = v & 1 ? 0xEDB88320u ^ (v >> 1) : v >> 1;
                        table[i] = v;
                }
                ready = 1;
        }
        crc = ~crc;
        while (n--)
                crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
        return ~crc;
}

uint32_t zcp_adler32(uint32_t adler, const uint8_t *p, size_t n)
{
        uint32_t a = adler & 0xffff, b = adler >> 16;

        while (n) {
                /* 5552: the most bytes before b can overflow 32 bits (zlib's NMAX). */
                size_t k = n < 5552 ? n : 5552;
                n -= k;
                while (k--) {
                        a += *p++;
                        b += a;
                }
                a %= 65521;
                b %= 65521;
        }
        return b << 16 | a;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
        return p + 4;
}

/* A chunk's length, type and data are in place at c (data of n bytes): appends its CRC. */
static uint8_t *close_chunk(uint8_t *c, size_t n)
{
        return put32(c + 8 + n, zcp_crc32(0, c + 4, n + 4));
}

/* Deflate's bit stream: least significant bit first; Huffman codes go most significant bit first. */
struct bitw {
        uint8_t *p;
        uint64_t acc;
        unsigned n;
};

static void put_bits(struct bitw *b, uint32_t v, unsigned n)
{
        b->acc |= (uint64_t)v << b->n;
        b->n += n;
        while (b->n >= 8) {
                *b->p++ = (uint8_t)b->acc;
                b->acc >>= 8;
                b->n -= 8;
        }
}

static void put_code(struct bitw *b, uint32_t code, unsigned len)
{
        uint32_t r = 0;

        for (unsigned i = 0; i < len; i++)
                r |= ((code >> i) & 1u) << (len - 1 - i);
        put_bits(b, r, len);
}

/* A literal/length symbol in the fixed code. */
static void put_litlen(struct bitw *b, unsigned sym)
{
        if (sym < 144)
                put_code(b, 0x30 + sym, 8);
        else if (sym < 256)
                put_code(b, 0x190 + sym - 144, 9);
        else if (sym < 280)
                put_code(b, sym - 256, 7);
        else
                put_code(b, 0xc0 + sym - 280, 8);
}

static const uint16_t len_base[29] = { 3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                       31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258 };
static const uint8_t len_extra[29] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                       2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0 };
static const uint16_t dist_base[30] = { 1,   2,   3,   4,    5,    7,    9,    13,   17,    25,
                                        33,  49,  65,  97,   129,  193,  257,  385,  513,   769,
                                        1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577 };
static const uint8_t dist_extra[30] = { 0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                        6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13 };

/* A match: `len` (3..258) bytes copied from `dist` (1..32768) bytes back. */
static void put_match(struct bitw *b, unsigned len, unsigned dist)
{
        unsigned i = 28, j = 29;

        while (len_base[i] > len)
                i--;
        put_litlen(b, 257 + i);
        put_bits(b, len - len_base[i], len_extra[i]);
        while (dist_base[j] > dist)
                j--;
        put_code(b, j, 5);
        put_bits(b, dist - dist_base[j], dist_extra[j]);
}

/* The zlib stream of raw[0..n): header, one fixed-code block, Adler-32. Returns the bytes written at out. */
static size_t zlib_fixed(const uint8_t *raw, size_t n, size_t row, uint8_t *out)
{
        const size_t dists[3] = { 1, 3, row };
        struct bitw b = { .p = out + 2 };

        out[0] = 0x78;  /* deflate, 32 KiB window */
        out[1] = 0x01;  /* (0x78 * 256 + 0x01) % 31 == 0, no dictionary */
        put_bits(&b, 1, 1);     /* BFINAL */
        put_bits(&b, 1, 2);     /* BTYPE 01: fixed codes */
        for (size_t pos = 0; pos < n;) {
                size_t best = 0, best_d = 0;

                for (int k = 0; k < 3; k++) {
                        const size_t d = dists[k];
                        size_t l = 0;

                        if (d > pos || d > 32768)
                                continue;
                        while (l < 258 && pos + l < n && raw[pos + l] == raw[pos + l - d])
                                l++;
                        if (l > best) {
                                best = l;
                                best_d = d;
                        }
                }
                if (best >= 3) {
                        put_match(&b, (unsigned)best, (unsigned)best_d);
                        pos += best;
                } else {
                        put_litlen(&b, raw[pos++]);
                }
        }
        put_litlen(&b, 256);    /* end of block */
        if (b.n)
                put_bits(&b, 0, 8 - b.n);
        b.p = put32(b.p, zcp_adler32(1, raw, n));
        return (size_t)(b.p - out);
}

int zcp_png_encode(const struct zcp_image *im, uint8_t **ret_buf, size_t *ret_len)
{
        static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
        const size_t row = 1 + (size_t)im->w * 3, raw_len = row * (size_t)im->h;
        /* Worst case: 9 bits a byte (literals 144-255; a match of 3 bytes or more costs less), and a margin. */
        const size_t idat_max = 2 + raw_len / 8 * 10 + 16 + 4;
        uint8_t *buf, *raw, *p, *c;
        size_t idat, len;

        if (idat_max > 0x7fffffffu)
                return -EINVAL;
        raw = malloc(raw_len ? raw_len : 1);
        buf = malloc(8 + (12 + 13) + (12 + idat_max) + 12);
        if (!raw || !buf) {
                free(raw);
                free(buf);
                return -ENOMEM;
        }
        /* The raw rows: each a filter byte 0 (none), then the row's pixels. */
        for (int y = 0; y < im->h; y++) {
                raw[(size_t)y * row] = 0;
                memcpy(raw + (size_t)y * row + 1, im->px + (size_t)y * im->w * 3, row - 1);
        }
        memcpy(buf, sig, 8);
        c = buf + 8;
        p = put32(c, 13);
        memcpy(p, "IHDR", 4);
        p = put32(p + 4, (uint32_t)im->w);
        p = put32(p, (uint32_t)im->h);
        p[0] = 8;       /* bit depth */
        p[1] = 2;       /* colour type: RGB */
        p[2] = 0;       /* deflate */
        p[3] = 0;       /* adaptive filtering, each row's filter byte 0 (none) */
        p[4] = 0;       /* no interlace */
        c = close_chunk(c, 13);
        idat = zlib_fixed(raw, raw_len, row, c + 8);
        free(raw);
        put32(c, (uint32_t)idat);
        memcpy(c + 4, "IDAT", 4);
        c = close_chunk(c, idat);
        put32(c, 0);
        memcpy(c + 4, "IEND", 4);
        c = close_chunk(c, 0);
        len = (size_t)(c - buf);
        *ret_buf = buf;
        *ret_len = len;
        return 0;
}

int zcp_png_write(const struct zcp_image *im, const char *path)
{
        uint8_t *buf = NULL;
        size_t len = 0;
        FILE *f;
        int r;

        r = zcp_png_encode(im, &buf, &len);
        if (r < 0)
                return r;
        f = fopen(path, "wbe");
        if (!f) {
                r = -errno;
                goto out;
        }
        if (fwrite(buf, 1, len, f) != len)
                r = -EIO;
        if (fclose(f) != 0 && r == 0)
                r = -errno;
out:
        free(buf);
        return r;
}

/* ------------------------------------------------------------------ the plot */

static const struct zcp_rgb black = { 0, 0, 0 }, grid = { 0xdd, 0xdd, 0xdd }, dark = { 0x55, 0x55, 0x55 };

static int usable(double y)
{
        return isfinite(y) && y > 0;
}

/* x axis ticks: a step of 1, 2 or 5 times a power of ten giving 4 to 8 ticks up to xmax. */
static double nice_step(double xmax)
{
        const double raw = xmax / 7, p = pow(10, floor(log10(raw)));

        return raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
}

static void fmt_num(char *buf, size_t size, double v)
{
        if (v >= 1 && v == floor(v))
                snprintf(buf, size, "%.0f", v);
        else
                snprintf(buf, size, "%g", v);
}

int zcp_plot_draw(struct zcp_image *im, const char *title, const char *xlabel, const char *ylabel,
                  const struct zcp_series *s, int ns)
{
        double xmax = 0, ymin = INFINITY, ymax = 0, step, lo, hi;
        int any = 0;
        char num[32];

        if (im->w < 400 || im->h < 240)
                return -EINVAL;
        for (int i = 0; i < ns; i++)
                for (int k = 0; k < s[i].n; k++) {
                        if (!usable(s[i].y[k]) || !isfinite(s[i].x[k]))
                                continue;
                        any = 1;
                        xmax = fmax(xmax, s[i].x[k]);
                        ymin = fmin(ymin, s[i].y[k]);
                        ymax = fmax(ymax, s[i].y[k]);
                }
        if (!any)
                return -EINVAL;
        if (xmax <= 0)
                xmax = 1;
        step = nice_step(xmax);
        xmax = ceil(xmax / step) * step;
        lo = floor(log10(ymin));
        hi = ceil(log10(ymax));
        if (hi <= lo)
                hi = lo + 1;

        /* The frame: left margin for the y labels, right for the legend. */
        const int L = 80, R = im->w - 230, T = 44, B = im->h - 55;
        const int legend_x = R + 20;
#define PX(v) (L + (int)lround(((v) / xmax) * (R - L)))
#define PY(v) (B - (int)lround(((log10(v) - lo) / (hi - lo)) * (B - T)))

        zcp_image_text(im, L, 6, title, black, 2);
        /* y: decades, with faint lines at 2 and 5 of each. */
        for (double d = lo; d <= hi + 1e-9; d++) {
                const double v = pow(10, d);
                const int y = PY(v);

                zcp_image_line(im, L, y, R, y, grid, 1, 0);
                zcp_image_line(im, L - 5, y, L, y, black, 1, 0);
                fmt_num(num, sizeof(num), v);
                zcp_image_text(im, L - 8 - zcp_text_width(num, 1), y - 3, num, black, 1);
                for (int m = 2; m <= 5 && d < hi - 1e-9; m += 3) {
                        const int ym = PY(v * m);
                        zcp_image_line(im, L, ym, R, ym, grid, 1, 4);
                        zcp_image_line(im, L - 3, ym, L, ym, black, 1, 0);
                }
        }
        for (double x = 0; x <= xmax + step / 2; x += step) {
                const int px = PX(x);

                zcp_image_line(im, px, T, px, B, grid, 1, 0);
                zcp_image_line(im, px, B, px, B + 5, black, 1, 0);
                fmt_num(num, sizeof(num), x);
                zcp_image_text(im, px - zcp_text_width(num, 1) / 2, B + 9, num, black, 1);
        }
        zcp_image_line(im, L, T, L, B, black, 1, 0);
        zcp_image_line(im, L, B, R, B, black, 1, 0);
        zcp_image_line(im, R, T, R, B, black, 1, 0);
        zcp_image_line(im, L, T, R, T, black, 1, 0);
        zcp_image_text(im, (L + R - zcp_text_width(xlabel, 1)) / 2, B + 28, xlabel, dark, 1);
        zcp_image_text(im, 8, T - 13, ylabel, dark, 1);

        for (int i = 0; i < ns; i++) {
                int px = 0, py = 0, have = 0;

                for (int k = 0; k < s[i].n; k++) {
                        if (!usable(s[i].y[k]) || !isfinite(s[i].x[k]))
                                continue;
                        const int x = PX(s[i].x[k]), y = PY(s[i].y[k]);
                        if (have)
                                zcp_image_line(im, px, py, x, y, s[i].color, 2, s[i].dashed ? 6 : 0);
                        /* Markers: filled square (solid lines), hollow (dashed). */
                        zcp_image_rect(im, x - 3, y - 3, x + 3, y + 3, s[i].color);
                        if (s[i].dashed)
                                zcp_image_rect(im, x - 1, y - 1, x + 1, y + 1, (struct zcp_rgb){ 255, 255, 255 });
                        px = x;
                        py = y;
                        have = 1;
                }
                /* The legend entry: a sample of the line and marker, then the name. */
                const int ly = T + 8 + i * 18;
                zcp_image_line(im, legend_x, ly, legend_x + 36, ly, s[i].color, 2, s[i].dashed ? 6 : 0);
                zcp_image_rect(im, legend_x + 15, ly - 3, legend_x + 21, ly + 3, s[i].color);
                if (s[i].dashed)
                        zcp_image_rect(im, legend_x + 17, ly - 1, legend_x + 19, ly + 1,
                                       (struct zcp_rgb){ 255, 255, 255 });
                zcp_image_text(im, legend_x + 44, ly - 3, s[i].name, black, 1);
        }
#undef PX
#undef PY
        return 0;
}
