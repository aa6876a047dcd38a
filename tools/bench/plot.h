/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * A line plot written as a PNG with no library: an RGB raster with lines,
 * rectangles and a 5x7 bitmap font, encoded as PNG with zlib "stored"
 * (uncompressed) deflate blocks, so neither zlib nor libpng is needed.
 * Used by zcpipe-bench (tools/bench/zcpipe-bench.c); tests/unit/test_plot.c.
 *
 * Ownership: an image owns its pixels (zcb_image_init/zcb_image_done);
 * zcb_png_encode returns a malloc'd buffer the caller frees. Single thread
 * per image; nothing here keeps global state.
 */
#include <stddef.h>
#include <stdint.h>

struct zcp_rgb {
        uint8_t r, g, b;
};

struct zcp_image {
        int w, h;
        uint8_t *px;            /* w * h * 3 bytes, rows top to bottom, R G B */
};

/* A white image of w x h (1..32768 each). 0, -EINVAL or -ENOMEM. */
int zcp_image_init(struct zcp_image *im, int w, int h);
/* Frees the pixels; safe on a zeroed or already done image. */
void zcp_image_done(struct zcp_image *im);

/* Drawing; everything is clipped to the image. Coordinates are pixels, y down. */
void zcp_image_pixel(struct zcp_image *im, int x, int y, struct zcp_rgb c);
/* The filled rectangle between two corners, both included. */
void zcp_image_rect(struct zcp_image *im, int x0, int y0, int x1, int y1, struct zcp_rgb c);
/* A line, both ends included; dash > 0: dash pixels on, dash pixels off; width 1 or more. */
void zcp_image_line(struct zcp_image *im, int x0, int y0, int x1, int y1, struct zcp_rgb c, int width,
                    int dash);
/* Text in the 5x7 font (printable ASCII; anything else a box), each dot scale x scale pixels,
 * top-left at (x, y); characters advance 6 * scale. Returns the width drawn. */
int zcp_image_text(struct zcp_image *im, int x, int y, const char *s, struct zcp_rgb c, int scale);
int zcp_text_width(const char *s, int scale);

/*
 * The image as a PNG (8-bit RGB, filter 0 on each row, one IDAT of stored
 * deflate blocks). On success *ret_buf (malloc'd) and *ret_len; 0 or -ENOMEM.
 */
int zcp_png_encode(const struct zcp_image *im, uint8_t **ret_buf, size_t *ret_len);
/* zcp_png_encode to a file (created or truncated). 0 or a negative errno. */
int zcp_png_write(const struct zcp_image *im, const char *path);

/* CRC-32 (ISO-HDLC, as PNG and zlib use it) and Adler-32 (zlib), continued from crc / adler. */
uint32_t zcp_crc32(uint32_t crc, const uint8_t *p, size_t n);
uint32_t zcp_adler32(uint32_t adler, const uint8_t *p, size_t n);

/* One line of a plot: n points (x[i], y[i]); points with y <= 0 or not finite are skipped. */
struct zcp_series {
        const char *name;       /* legend text */
        struct zcp_rgb color;
        int dashed;             /* 0 solid, else dashed */
        int n;
        const double *x, *y;
};

/*
 * Draws a plot of the series into im (already initialised; its size is the
 * plot's): x linear from 0, y logarithmic (decades), grid, axis labels,
 * title and a legend on the right. Returns 0, or -EINVAL when no series has
 * a point to draw or the image is too small (under 400 x 240).
 */
int zcp_plot_draw(struct zcp_image *im, const char *title, const char *xlabel, const char *ylabel,
                  const struct zcp_series *s, int ns);
