/* SPDX-License-Identifier: MIT */
/*
 * Files: decoders that write into ring slots (gst_pool.h). The lender owns
 * its state; the sources reach it only through gst_pool.h.
 *
 * A decoder allocates its output frames from the buffer pool the ALLOCATION
 * query downstream offers. For a file, the appsink's pad answers it (a probe)
 * with a pool whose buffers are ring slots when
 *   - start() bound a ring (not while opening: the preroll frames are copied),
 *   - the caps are the ring's geometry and format, progressive, and GStreamer's
 *     own layout of them is the slot's tight one (pixfmt.h: no padded rows),
 *   - the element that will fill the buffers is on the allowlist below.
 * The frame then lands in the slot: next() recognises the sample's buffer as
 * a slot's and submits that slot without copying (stats->slot_direct; copies
 * + slot_direct = the frames that reached the ring).
 *
 * The allowlist: convert works on the slot in place (NV12 in the same
 * memory) and the next frame is written into it again, so the producer must
 * keep nothing in its output buffers once it has pushed them. openh264dec
 * copies each picture out of the library's own buffers (its references stay
 * there); jpegdec and pngdec decode every frame on its own; videoconvert
 * (when it converts) writes every pixel of each frame; videotestsrc draws
 * each frame whole. Not on it: avdec_* (libav decodes into the pool's
 * buffers and keeps them as reference pictures for later frames), the
 * H.264/H.265/VP8/VP9 decoders that do the same, and anything unknown. A raw
 * stream out of a demuxer has no producer that asks for a pool: it is copied.
 * On top of the list, a buffer is taken as the slot only when nothing else
 * holds it or its memory (refcounts 1: the sample's); else it is copied into
 * another slot (a preroll after a seek, when appsink keeps a second ref).
 *
 * Ownership: the pool takes free slots from the ring (FREE -> SOURCE ->
 * DRIVER, the state the v4l2 USERPTR path uses for slots queued in a
 * driver), at most ring slots - 1 at once so that a frame to copy always
 * finds one. The free queue then has two consumers, the source thread and
 * the decoder's streaming thread: pop_lock makes them take turns. A buffer
 * that comes back to the pool unpublished (flushed by the loop's seek,
 * dropped, copied instead) keeps its slot DRIVER on the `back` stack, given
 * out again first (and to the copy path); a published one's slot went
 * DRIVER -> SOURCE -> the stages. appsink keeps the last sample it handed
 * out until the next pull, so each slot has two buffers: the one still held
 * and one to fill. stop() (every stage and streaming thread gone) gives the
 * slots on the back stack, and any still held by GStreamer, back to the
 * free queue; after it the pool hands out nothing (start() binds again).
 * A pool of an older binding still in a decoder's hands (a geometry change
 * went by) hands out plain memory, copied like any other.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/gst_pool.h"
#include "capture/gst_layout.h"
#include "core/clock.h"
#include "core/log.h"

static const char *const direct_producers[] = { "openh264dec", "jpegdec", "pngdec", "videoconvert", "videotestsrc" };

#define NO_SLOT UINT32_MAX
#define LEND_WAIT_NS   (10 * ZCP_NSEC_PER_MSEC)   /* a decoder waiting for a free slot looks at flushing this often */
#define DIRECT_WAIT_NS (2 * ZCP_NSEC_PER_MSEC)    /* a decoder's last ref to a pushed frame goes within this */

struct wrap {                     /* a GstBuffer over one slot's frame memory */
        GstBuffer *buf;           /* the lender's ref while idle, GStreamer's while out */
        GstMemory *mem;           /* the buffer's one memory (its ref): recognises it */
        uint8_t *data;
        size_t cap;
        uint32_t slot;
        bool out;                 /* handed to GStreamer */
        bool published;           /* its slot went to the ring with the frame in it */
};

struct zcp_gst_lender {
        atomic_uint refs;         /* the source and each pool */
        pthread_mutex_t lock;     /* all below */
        pthread_cond_t returned;  /* a buffer came back */
        pthread_mutex_t pop_lock; /* the free queue's two consumers take turns; taken before lock */
        struct zcp_ring *ring;    /* bound by start(); NULL: nothing lent */
        uint32_t gen;             /* bindings so far: a pool serves the one it was made for */
        bool closing;             /* stop(): every wait says flushing */
        GstVideoInfo vinfo;       /* the ring's geometry as GStreamer lays it out */
        size_t bytes;             /* frame bytes in a slot */
        uint32_t limit, taken;    /* slots GStreamer may hold / holds (DRIVER) */
        uint32_t nwraps;          /* 2 per slot */
        struct wrap *wraps;
        uint32_t *back, nback;    /* DRIVER slots back unused, given out first */
        uint32_t said_gen;        /* the binding whose producer was said */
        GstPad *sinkpad;          /* appsink's (ref): flushing there ends a wait */
};

typedef struct {
        GstBufferPool parent;
        struct zcp_gst_lender *l;
        uint32_t gen;
} ZcpSlotPool;

typedef struct {
        GstBufferPoolClass parent_class;
} ZcpSlotPoolClass;

GType zcp_slot_pool_get_type(void);
G_DEFINE_TYPE(ZcpSlotPool, zcp_slot_pool, GST_TYPE_BUFFER_POOL)

struct zcp_gst_lender *zcp_gst_lender_new(GstPad *sinkpad)
{
        struct zcp_gst_lender *l = calloc(1, sizeof(*l));
        pthread_condattr_t ca;

        if (!l)
                return NULL;
        atomic_init(&l->refs, 1);
        pthread_mutex_init(&l->lock, NULL);
        pthread_mutex_init(&l->pop_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&l->returned, &ca);
        pthread_condattr_destroy(&ca);
        l->sinkpad = gst_object_ref(sinkpad);
        return l;
}

static struct zcp_gst_lender *lender_ref(struct zcp_gst_lender *l)
{
        atomic_fetch_add(&l->refs, 1);
        return l;
}

/* The last ref: nothing is bound any more (unbind ran). */
void zcp_gst_lender_unref(struct zcp_gst_lender *l)
{
        if (!l || atomic_fetch_sub(&l->refs, 1) != 1)
                return;
        free(l->wraps);
        free(l->back);
        gst_object_unref(l->sinkpad);
        pthread_cond_destroy(&l->returned);
        pthread_mutex_destroy(&l->pop_lock);
        pthread_mutex_destroy(&l->lock);
        free(l);
}

static struct wrap *wrap_of(struct zcp_gst_lender *l, GstBuffer *buf)
{
        for (uint32_t i = 0; i < l->nwraps; i++)
                if (l->wraps[i].buf == buf)
                        return &l->wraps[i];
        return NULL;
}

/* An idle buffer over slot `idx`, or NULL when both are out. Lock held. */
static struct wrap *idle_wrap(struct zcp_gst_lender *l, uint32_t idx)
{
        for (uint32_t i = 2 * idx; i < 2 * idx + 2; i++)
                if (!l->wraps[i].out)
                        return &l->wraps[i];
        return NULL;
}

/* Plain memory from a pool that cannot lend (another binding, none): copied like any frame. */
static GstFlowReturn plain_buffer(size_t bytes, GstBuffer **ret)
{
        *ret = gst_buffer_new_allocate(NULL, bytes, NULL);
        return *ret ? GST_FLOW_OK : GST_FLOW_ERROR;
}

/* Decoder's streaming thread: a slot to decode into, waiting (LEND_WAIT_NS at a time) while none is free. */
static GstFlowReturn pool_acquire(GstBufferPool *bp, GstBuffer **ret, GstBufferPoolAcquireParams *params)
{
        ZcpSlotPool *p = (ZcpSlotPool *)bp;
        struct zcp_gst_lender *l = p->l;

        for (;;) {
                uint32_t idx = NO_SLOT;
                bool reserved = false, stale;
                struct wrap *w = NULL;
                int r;

                pthread_mutex_lock(&l->pop_lock);
                pthread_mutex_lock(&l->lock);
                if (l->closing) {
                        pthread_mutex_unlock(&l->lock);
                        pthread_mutex_unlock(&l->pop_lock);
                        return GST_FLOW_FLUSHING;
                }
                stale = !l->ring || l->gen != p->gen;
                if (!stale && l->nback)
                        idx = l->back[--l->nback];
                else if (!stale && l->taken < l->limit)
                        reserved = true, l->taken++;
                pthread_mutex_unlock(&l->lock);
                if (stale) {
                        pthread_mutex_unlock(&l->pop_lock);
                        return plain_buffer(l->bytes, ret);
                }
                if (reserved) {
                        /* l->ring stays: unbinding takes pop_lock first */
                        r = zcp_ring_acquire(l->ring, LEND_WAIT_NS, &idx);
                        if (r == 0)
                                zcp_ring_move(l->ring, idx, ZCP_SLOT_SOURCE, ZCP_SLOT_DRIVER);
                        pthread_mutex_lock(&l->lock);
                        if (r < 0)
                                l->taken--;
                        pthread_mutex_unlock(&l->lock);
                        if (r == -EPIPE) {
                                pthread_mutex_unlock(&l->pop_lock);
                                return GST_FLOW_FLUSHING;
                        }
                }
                if (idx != NO_SLOT) {
                        pthread_mutex_lock(&l->lock);
                        w = idle_wrap(l, idx);
                        if (w) {
                                w->out = true;
                                w->published = false;
                                *ret = w->buf;
                        } else {
                                l->back[l->nback++] = idx;   /* both held (not expected): kept, plain memory instead */
                        }
                        pthread_mutex_unlock(&l->lock);
                }
                pthread_mutex_unlock(&l->pop_lock);
                if (w)
                        return GST_FLOW_OK;
                if (idx != NO_SLOT)
                        return plain_buffer(l->bytes, ret);
                if (!reserved) {
                        /* GStreamer holds `limit` slots: wait for one to come back */
                        struct timespec ts;
                        uint64_t until = zcp_now_ns() + LEND_WAIT_NS;

                        ts.tv_sec = (time_t)(until / ZCP_NSEC_PER_SEC);
                        ts.tv_nsec = (long)(until % ZCP_NSEC_PER_SEC);
                        pthread_mutex_lock(&l->lock);
                        if (!l->closing && !l->nback && l->taken >= l->limit)
                                pthread_cond_timedwait(&l->returned, &l->lock, &ts);
                        pthread_mutex_unlock(&l->lock);
                }
                if (GST_BUFFER_POOL_IS_FLUSHING(bp) || GST_PAD_IS_FLUSHING(l->sinkpad))
                        return GST_FLOW_FLUSHING;
                if (params && (params->flags & GST_BUFFER_POOL_ACQUIRE_FLAG_DONTWAIT))
                        return GST_FLOW_EOS;
        }
}

/* The buffer's last ref went (any thread): idle again; unpublished, its slot is given out again first. */
static void pool_release(GstBufferPool *bp, GstBuffer *buf)
{
        struct zcp_gst_lender *l = ((ZcpSlotPool *)bp)->l;
        struct wrap *w;

        pthread_mutex_lock(&l->lock);
        w = wrap_of(l, buf);
        if (w) {
                gsize off = 0;

                /* an element that replaced or trimmed the memory: the slot's, whole, again */
                if (gst_buffer_n_memory(buf) != 1 || gst_buffer_peek_memory(buf, 0) != w->mem ||
                    gst_memory_get_sizes(w->mem, &off, NULL) != l->bytes || off != 0) {
                        gst_buffer_remove_all_memory(buf);
                        w->mem = gst_memory_new_wrapped(0, w->data, w->cap, 0, l->bytes, NULL, NULL);
                        gst_buffer_append_memory(buf, w->mem);
                }
                GST_BUFFER_FLAG_UNSET(buf, GST_BUFFER_FLAG_TAG_MEMORY);
                if (!w->published)
                        l->back[l->nback++] = w->slot;
                w->out = false;
                w->published = false;
                pthread_cond_broadcast(&l->returned);
        }
        pthread_mutex_unlock(&l->lock);
        if (!w)
                gst_buffer_unref(buf);   /* plain memory, or a buffer of an older binding */
}

static gboolean pool_set_config(GstBufferPool *bp, GstStructure *config)
{
        struct zcp_gst_lender *l = ((ZcpSlotPool *)bp)->l;
        GstCaps *caps = NULL;
        GstVideoInfo vi;
        guint size = 0;
        bool ok;

        if (!gst_buffer_pool_config_get_params(config, &caps, &size, NULL, NULL) || !caps ||
            !gst_video_info_from_caps(&vi, caps))
                return FALSE;
        pthread_mutex_lock(&l->lock);
        ok = l->ring && zcp_gst_same_geometry(&vi, &l->vinfo) && zcp_gst_layout_tight(&vi) && size <= l->bytes;
        pthread_mutex_unlock(&l->lock);
        return ok && GST_BUFFER_POOL_CLASS(zcp_slot_pool_parent_class)->set_config(bp, config);
}

/* Nothing is allocated ahead: slots are taken as frames are decoded. */
static gboolean pool_start(GstBufferPool *bp)
{
        (void)bp;
        return TRUE;
}

static gboolean pool_stop(GstBufferPool *bp)
{
        (void)bp;
        return TRUE;
}

static void pool_finalize(GObject *obj)
{
        zcp_gst_lender_unref(((ZcpSlotPool *)obj)->l);
        G_OBJECT_CLASS(zcp_slot_pool_parent_class)->finalize(obj);
}

static void zcp_slot_pool_class_init(ZcpSlotPoolClass *klass)
{
        GstBufferPoolClass *pc = GST_BUFFER_POOL_CLASS(klass);

        G_OBJECT_CLASS(klass)->finalize = pool_finalize;
        pc->start = pool_start;
        pc->stop = pool_stop;
        pc->set_config = pool_set_config;
        pc->acquire_buffer = pool_acquire;
        pc->release_buffer = pool_release;
}

static void zcp_slot_pool_init(ZcpSlotPool *p)
{
        p->l = NULL;
}

/* The element that fills the buffers of an ALLOCATION query reaching the appsink: its factory's name. */

/* The ALLOCATION query at the appsink (streaming thread): ring slots as the pool where it is safe. */
bool zcp_gst_lender_answer(struct zcp_gst_lender *l, GstQuery *q, const char *producer, const char *kind,
                           const char *path)
{
        const char *why = NULL;
        GstCaps *caps = NULL;
        GstStructure *config;
        GstVideoInfo vi;
        ZcpSlotPool *pool;
        uint32_t gen, limit;
        guint bytes;
        bool say;

        gst_query_parse_allocation(q, &caps, NULL);
        pthread_mutex_lock(&l->lock);
        if (!l->ring)
                why = "no ring yet (opening)";
        else if (!caps || !gst_video_info_from_caps(&vi, caps) || !zcp_gst_same_geometry(&vi, &l->vinfo))
                why = "not the ring's geometry and format";
        else if (!zcp_gst_layout_tight(&vi))
                why = "GStreamer pads its rows";
        for (size_t i = 0; !why && i < G_N_ELEMENTS(direct_producers); i++)
                if (strcmp(producer, direct_producers[i]) == 0)
                        break;
                else if (i + 1 == G_N_ELEMENTS(direct_producers))
                        why = "not known to leave its output buffers alone (reference frames)";
        gen = l->gen;
        limit = l->limit;
        bytes = (guint)l->bytes;
        say = l->ring && l->said_gen != gen;
        if (say)
                l->said_gen = gen;
        pthread_mutex_unlock(&l->lock);
        if (why) {
                zcp_log(say ? ZCP_LOG_INFO : ZCP_LOG_DEBUG, "%s %s: %s decodes into its own buffers, copied into the slots: %s",
                        kind, path, producer[0] ? producer : "the producer", why);
                return false;   /* the appsink answers as it always does */
        }
        pool = g_object_new(zcp_slot_pool_get_type(), NULL);
        gst_object_ref_sink(pool);
        pool->l = lender_ref(l);
        pool->gen = gen;
        config = gst_buffer_pool_get_config(GST_BUFFER_POOL(pool));
        gst_buffer_pool_config_set_params(config, caps, bytes, 0, limit);
        gst_buffer_pool_set_config(GST_BUFFER_POOL(pool), config);
        gst_query_add_allocation_pool(q, GST_BUFFER_POOL(pool), bytes, 0, limit);
        gst_object_unref(pool);
        zcp_log(say ? ZCP_LOG_INFO : ZCP_LOG_DEBUG,
                "%s %s: %s decodes straight into the ring's slots (at most %u at a time; counted in slot_direct)",
                kind, path, producer, limit);
        return true;
}

/*
 * start(): lends slots of `ring` from now on (files whose ring layout
 * GStreamer shares), and asks upstream to negotiate its allocation again.
 * Main thread, no streaming thread in the pool (open prerolled without it).
 */
void zcp_gst_lender_bind(struct zcp_gst_lender *l, struct zcp_ring *ring, const struct zcp_source_info *info,
                         const char *kind, const char *path)
{
        GstVideoFormat gf = zcp_gst_format(info->fmt);
        GstVideoInfo vi;
        bool ok;

        if (!l || l->ring == ring)
                return;
        pthread_mutex_lock(&l->lock);
        l->closing = false;   /* a stop before: pools of that binding hand out plain memory, not "flushing" */
        pthread_mutex_unlock(&l->lock);
        gst_video_info_init(&vi);
        ok = gf != GST_VIDEO_FORMAT_UNKNOWN && gst_video_info_set_format(&vi, gf, info->width, info->height) &&
             zcp_gst_layout_tight(&vi) && ring->slot_size >= info->frame_bytes;
        if (!ok) {
                zcp_debug("%s %s: %ux%u %s: GStreamer's layout is not the slot's: every frame is copied", kind,
                          path, info->width, info->height, zcp_pixfmt_name(info->fmt));
                return;
        }
        pthread_mutex_lock(&l->pop_lock);
        pthread_mutex_lock(&l->lock);
        l->wraps = calloc(2 * (size_t)ring->count, sizeof(*l->wraps));
        l->back = calloc(ring->count, sizeof(*l->back));
        if (!l->wraps || !l->back) {
                free(l->wraps);
                free(l->back);
                l->wraps = NULL;
                l->back = NULL;
                goto out;
        }
        l->nwraps = 2 * ring->count;
        for (uint32_t i = 0; i < l->nwraps; i++) {
                struct wrap *w = &l->wraps[i];
                struct zcp_slot *s = zcp_ring_slot(ring, i / 2);

                *w = (struct wrap){ .buf = gst_buffer_new(), .data = s->data, .cap = s->cap, .slot = i / 2 };
                w->mem = gst_memory_new_wrapped(0, s->data, s->cap, 0, info->frame_bytes, NULL, NULL);
                gst_buffer_append_memory(w->buf, w->mem);
        }
        l->vinfo = vi;
        l->bytes = info->frame_bytes;
        l->limit = ring->count > 1 ? ring->count - 1 : 1;
        l->taken = 0;
        l->nback = 0;
        l->closing = false;
        l->gen++;
        l->ring = ring;
out:
        pthread_mutex_unlock(&l->lock);
        pthread_mutex_unlock(&l->pop_lock);
        if (l->ring == ring)
                gst_pad_push_event(l->sinkpad, gst_event_new_reconfigure());
}

/*
 * Every slot GStreamer or the back stack holds goes back to the free queue
 * (no stage runs: the queue has no other producer now) and the buffers not
 * out are freed; those still out are freed when GStreamer lets them go.
 * Main thread, after the streaming threads stopped (stop) or with none in
 * the pool (a geometry change: the decoder renegotiated away from it).
 */
void zcp_gst_lender_unbind(struct zcp_gst_lender *l, const char *kind, const char *path)
{
        uint32_t held = 0;

        if (!l || !l->ring)
                return;
        pthread_mutex_lock(&l->pop_lock);
        pthread_mutex_lock(&l->lock);
        for (uint32_t i = 0; i < l->nwraps; i++) {
                struct wrap *w = &l->wraps[i];

                if (!w->out) {
                        gst_buffer_unref(w->buf);
                        continue;
                }
                if (!w->published) {
                        /* held by GStreamer (appsink's last sample): nobody writes it any more */
                        l->back[l->nback++] = w->slot;
                        held++;
                }
        }
        for (uint32_t i = 0; i < l->nback; i++) {
                zcp_ring_move(l->ring, l->back[i], ZCP_SLOT_DRIVER, ZCP_SLOT_FREE);
                zcp_spsc_push(&l->ring->q[ZCP_Q_FREE], l->back[i]);
        }
        if (l->nback != l->taken)
                zcp_err("%s %s: slot accounting: %u slots lent to GStreamer, %u came back", kind, path,
                        l->taken, l->nback);
        if (held)
                zcp_debug("%s %s: %u slots still in GStreamer's hands at stop: back to the ring", kind, path,
                          held);
        free(l->wraps);
        free(l->back);
        l->wraps = NULL;
        l->back = NULL;
        l->nwraps = 0;
        l->nback = 0;
        l->taken = 0;
        l->ring = NULL;
        pthread_mutex_unlock(&l->lock);
        pthread_mutex_unlock(&l->pop_lock);
}

bool zcp_gst_lender_lent(const struct zcp_gst_lender *l, const GstBuffer *buf)
{
        return l && l->ring && buf && buf->pool && G_OBJECT_TYPE(buf->pool) == zcp_slot_pool_get_type();
}

bool zcp_gst_lender_claim(struct zcp_gst_lender *l, struct zcp_ring *ring, GstBuffer *buf, const GstVideoInfo *vinfo,
                          uint32_t *ret_idx, uint64_t *refused)
{
        struct wrap *w;
        bool ok = false;

        /*
         * A GstVideoDecoder subclass may hold the frame (and through it the
         * output buffer) a moment after pushing it, until its handle_frame
         * returns (openh264dec does): up to DIRECT_WAIT_NS for that ref to go.
         */
        for (uint64_t t0 = 0; GST_MINI_OBJECT_REFCOUNT_VALUE(buf) > 1;) {
                struct timespec ts = { 0, 20 * 1000 };

                if (!t0)
                        t0 = zcp_now_ns();
                else if (zcp_now_ns() - t0 > DIRECT_WAIT_NS)
                        break;
                nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&l->lock);
        w = l->ring == ring ? wrap_of(l, buf) : NULL;
        if (w && w->out && !w->published) {
                GstMemory *mem = gst_buffer_n_memory(buf) == 1 ? gst_buffer_peek_memory(buf, 0) : NULL;
                gsize off = 1;

                ok = mem == w->mem && GST_MINI_OBJECT_REFCOUNT_VALUE(buf) == 1 &&
                     GST_MINI_OBJECT_REFCOUNT_VALUE(mem) == 1 && gst_memory_get_sizes(mem, &off, NULL) == l->bytes &&
                     off == 0 && vinfo && zcp_gst_same_geometry(vinfo, &l->vinfo) &&
                     zcp_gst_layout_tight(vinfo);
                if (ok) {
                        w->published = true;
                        l->taken--;
                }
        }
        pthread_mutex_unlock(&l->lock);
        if (!ok) {
                if (w)
                        (*refused)++;
                return false;
        }
        zcp_ring_move(ring, w->slot, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
        memset(&zcp_ring_slot(ring, w->slot)->frame, 0, sizeof(struct zcp_frame));
        *ret_idx = w->slot;
        return true;
}

int zcp_gst_lender_take(struct zcp_gst_lender *l, struct zcp_ring *ring, int64_t timeout_ns, uint32_t *ret_idx)
{
        uint32_t idx = NO_SLOT;
        int r;

        if (!l || l->ring != ring)
                return zcp_ring_acquire(ring, timeout_ns, ret_idx);
        pthread_mutex_lock(&l->lock);
        if (l->nback) {
                idx = l->back[--l->nback];
                l->taken--;
        }
        pthread_mutex_unlock(&l->lock);
        if (idx != NO_SLOT) {
                zcp_ring_move(ring, idx, ZCP_SLOT_DRIVER, ZCP_SLOT_SOURCE);
                memset(&zcp_ring_slot(ring, idx)->frame, 0, sizeof(struct zcp_frame));
                *ret_idx = idx;
                return 0;
        }
        pthread_mutex_lock(&l->pop_lock);
        r = zcp_ring_acquire(ring, timeout_ns, ret_idx);
        pthread_mutex_unlock(&l->pop_lock);
        return r;
}

void zcp_gst_lender_close(struct zcp_gst_lender *l)
{
        if (!l)
                return;
        pthread_mutex_lock(&l->lock);
        l->closing = true;
        pthread_cond_broadcast(&l->returned);
        pthread_mutex_unlock(&l->lock);
}

bool zcp_gst_lender_bound(const struct zcp_gst_lender *l)
{
        return l && l->ring;
}
