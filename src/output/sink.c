/* SPDX-License-Identifier: MIT */
/*
 * Results sinks (sink.h). stdout and file write whole lines with write(2)
 * (retrying short writes and EINTR); unix listens on a SOCK_STREAM socket,
 * accepts clients without blocking and sends every line to each; a client
 * whose socket buffer is full is disconnected (a slow reader never stalls
 * the pipeline), and so is one that went away.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/log.h"
#include "output/sink.h"

#define UNIX_MAX_CLIENTS 16

struct zcp_sink_ctx {
        int fd;             /* stdout/file: where lines go; unix: the listening socket */
        bool own_fd;
        int clients[UNIX_MAX_CLIENTS];
        struct zcp_sink_stats *stats;
        char path[ZCP_PATH_MAX];
};

static int write_all(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, p, len);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

static int fd_sink_write(struct zcp_sink_ctx *c, const char *line, size_t len)
{
        int r = write_all(c->fd, line, len);

        if (r < 0)
                zcp_sink_stats_lose(c->stats, ZCP_SINK_LOSS_WRITE_ERROR);
        else
                atomic_fetch_add_explicit(&c->stats->written, 1, memory_order_relaxed);
        return r;
}

static void sink_close(struct zcp_sink_ctx *c)
{
        if (!c)
                return;
        for (int i = 0; i < UNIX_MAX_CLIENTS; i++)
                if (c->clients[i] >= 0)
                        close(c->clients[i]);
        if (c->own_fd && c->fd >= 0)
                close(c->fd);
        if (c->path[0])
                unlink(c->path);
        free(c);
}

static struct zcp_sink_ctx *sink_alloc(struct zcp_sink_stats *stats)
{
        struct zcp_sink_ctx *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->stats = stats;
        c->fd = -1;
        for (int i = 0; i < UNIX_MAX_CLIENTS; i++)
                c->clients[i] = -1;
        return c;
}

static int stdout_open(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats,
                       struct zcp_sink_ctx **ret_ctx)
{
        struct zcp_sink_ctx *c = sink_alloc(stats);

        if (!c)
                return -ENOMEM;
        c->fd = STDOUT_FILENO;
        *ret_ctx = c;
        return 0;
}

static int file_open(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats,
                       struct zcp_sink_ctx **ret_ctx)
{
        struct zcp_sink_ctx *c = sink_alloc(stats);

        if (!c)
                return -ENOMEM;
        c->fd = open(cfg->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (c->fd < 0) {
                int r = -errno;
                zcp_err("output: cannot open %s: %s", cfg->path, strerror(errno));
                free(c);
                return r;
        }
        c->own_fd = true;
        *ret_ctx = c;
        return 0;
}

static int unix_open(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats,
                       struct zcp_sink_ctx **ret_ctx)
{
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        struct zcp_sink_ctx *c;
        struct stat st;
        int r;

        if (strlen(cfg->path) >= sizeof(addr.sun_path)) {
                zcp_err("output: unix socket path too long (max %zu): %s", sizeof(addr.sun_path) - 1, cfg->path);
                return -ENAMETOOLONG;
        }
        c = sink_alloc(stats);
        if (!c)
                return -ENOMEM;
        strcpy(addr.sun_path, cfg->path);
        /* A stale socket from a previous run is replaced; anything else is not touched. */
        if (lstat(cfg->path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode)) {
                        zcp_err("output: %s exists and is not a socket", cfg->path);
                        free(c);
                        return -EEXIST;
                }
                unlink(cfg->path);
        }
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0 || bind(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(c->fd, 8) < 0) {
                r = -errno;
                zcp_err("output: cannot listen on unix socket %s: %s", cfg->path, strerror(errno));
                if (c->fd >= 0)
                        close(c->fd);
                free(c);
                return r;
        }
        c->own_fd = true;
        snprintf(c->path, sizeof(c->path), "%s", cfg->path);
        *ret_ctx = c;
        return 0;
}

static void unix_accept(struct zcp_sink_ctx *c)
{
        for (;;) {
                int fd = accept4(c->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                int i;

                if (fd < 0)
                        return;
                for (i = 0; i < UNIX_MAX_CLIENTS && c->clients[i] >= 0; i++)
                        ;
                if (i == UNIX_MAX_CLIENTS) {
                        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * 1000000000ull,
                                            "output: %s has %d clients already, refusing one", c->path,
                                            UNIX_MAX_CLIENTS);
                        close(fd);
                        continue;
                }
                c->clients[i] = fd;
        }
}

static int unix_write(struct zcp_sink_ctx *c, const char *line, size_t len)
{
        unix_accept(c);
        for (int i = 0; i < UNIX_MAX_CLIENTS; i++) {
                ssize_t n;

                if (c->clients[i] < 0)
                        continue;
                do
                        n = send(c->clients[i], line, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                while (n < 0 && errno == EINTR);
                if (n != (ssize_t)len) {
                        /* Gone, or too slow to take a whole line: never wait for a reader. */
                        ZCP_LOG_RATELIMITED(ZCP_LOG_WARN, 10 * 1000000000ull,
                                            "output: dropping a unix socket client of %s (%s)", c->path,
                                            n < 0 ? strerror(errno) : "too slow");
                        close(c->clients[i]);
                        c->clients[i] = -1;
                }
        }
        atomic_fetch_add_explicit(&c->stats->written, 1, memory_order_relaxed);
        return 0;
}

static int none_open(const struct zcp_output_config *cfg, struct zcp_sink_stats *stats,
                       struct zcp_sink_ctx **ret_ctx)
{
        struct zcp_sink_ctx *c = sink_alloc(stats);

        if (!c)
                return -ENOMEM;
        *ret_ctx = c;
        return 0;
}

static int none_write(struct zcp_sink_ctx *c, const char *line, size_t len)
{
        atomic_fetch_add_explicit(&c->stats->written, 1, memory_order_relaxed);
        return 0;
}

static const struct zcp_sink_ops sink_stdout = { "stdout", stdout_open, fd_sink_write, sink_close };
static const struct zcp_sink_ops sink_file = { "file", file_open, fd_sink_write, sink_close };
static const struct zcp_sink_ops sink_unix = { "unix", unix_open, unix_write, sink_close };
static const struct zcp_sink_ops sink_none = { "none", none_open, none_write, sink_close };

static const struct zcp_sink_ops *const sinks[ZCP_OUTPUT_TYPE_COUNT] = {
        [ZCP_OUTPUT_STDOUT] = &sink_stdout,
        [ZCP_OUTPUT_FILE] = &sink_file,
        [ZCP_OUTPUT_UNIX] = &sink_unix,
        [ZCP_OUTPUT_NONE] = &sink_none,
};

const struct zcp_sink_ops *zcp_sink_find(enum zcp_output_type type)
{
        return (unsigned)type < ZCP_OUTPUT_TYPE_COUNT ? sinks[type] : NULL;
}
