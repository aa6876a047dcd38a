/* SPDX-License-Identifier: MIT */
/* Reading model files (model/files.h). */
#include "model/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"

void zcp_set_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
        va_list ap;

        if (!errbuf || errlen == 0)
                return;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
        for (char *c = errbuf; *c; c++)
                if (*c == '\n' || *c == '\r')
                        *c = ' ';
}

int zcp_read_full(int fd, void *buf, size_t len)
{
        uint8_t *p = buf;

        while (len > 0) {
                ssize_t n = read(fd, p, len > (1u << 30) ? (1u << 30) : len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int zcp_open_regular(const char *path, uint64_t *ret_size, char *errbuf, size_t errlen)
{
        struct stat st;
        int fd, r;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                zcp_set_err(errbuf, errlen, "%s: cannot open: %s", path, zcp_strerror(r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                zcp_set_err(errbuf, errlen, "%s: cannot stat: %s", path, zcp_strerror(r));
                close(fd);
                return r;
        }
        if (S_ISDIR(st.st_mode)) {
                zcp_set_err(errbuf, errlen, "%s: is a directory", path);
                close(fd);
                return -EISDIR;
        }
        if (!S_ISREG(st.st_mode)) {
                zcp_set_err(errbuf, errlen, "%s: not a regular file", path);
                close(fd);
                return -EINVAL;
        }
        *ret_size = (uint64_t)st.st_size;
        return fd;
}
