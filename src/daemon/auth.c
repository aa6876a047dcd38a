/* SPDX-License-Identifier: MIT */
/*
 * The live page's credential (auth.h): a file read once, a header checked
 * per request. Nothing here logs; callers decide what to say.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base64.h"
#include "daemon/auth.h"

int zcp_auth_load(const char *path, struct zcp_auth *ret_auth, char *msg, size_t size)
{
        char buf[ZCP_AUTH_SECRET_MAX + 3];
        struct stat st;
        ssize_t n;
        size_t len;
        int fd, r = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                r = -errno;
                snprintf(msg, size, "metrics.http.auth_file %s: %s", path, strerror(errno));
                return r;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                snprintf(msg, size, "metrics.http.auth_file %s is not a regular file", path);
                r = -EINVAL;
                goto out;
        }
        if (st.st_mode & (S_IRWXG | S_IRWXO)) {
                snprintf(msg, size,
                         "metrics.http.auth_file %s is open to group or others (mode %04o); chmod 600 it "
                         "(only its owner, the user zcpipe runs as, may read it)",
                         path, (unsigned)(st.st_mode & 07777));
                r = -EPERM;
                goto out;
        }
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0) {
                r = -errno;
                snprintf(msg, size, "metrics.http.auth_file %s: %s", path, strerror(errno));
                goto out;
        }
        buf[n] = '\0';
        len = strcspn(buf, "\n");
        if (len > 0 && buf[len - 1] == '\r')
                len--;
        if (len == 0) {
                snprintf(msg, size, "metrics.http.auth_file %s holds no secret (its first line is empty)", path);
                r = -EINVAL;
                goto out;
        }
        if (len > ZCP_AUTH_SECRET_MAX) {
                snprintf(msg, size, "metrics.http.auth_file %s: the secret is longer than %u bytes", path,
                         ZCP_AUTH_SECRET_MAX);
                r = -EINVAL;
                goto out;
        }
        memset(ret_auth, 0, sizeof(*ret_auth));
        memcpy(ret_auth->secret, buf, len);
        ret_auth->len = len;
out:
        memset(buf, 0, sizeof(buf));
        close(fd);
        return r;
}

/* Equal in time independent of the first difference (the lengths may differ: the secret's is not secret). */
static bool same(const char *a, size_t alen, const char *b, size_t blen)
{
        unsigned char diff = alen != blen;

        for (size_t i = 0; i < blen; i++)
                diff |= (unsigned char)(i < alen ? a[i] : 0) ^ (unsigned char)b[i];
        return diff == 0;
}

bool zcp_auth_check(const struct zcp_auth *auth, const char *authorization)
{
        char plain[2 * ZCP_AUTH_SECRET_MAX + 64];
        const char *colon;
        long n;
        bool ok;

        if (!authorization)
                return false;
        if (strncasecmp(authorization, "Bearer ", 7) == 0) {
                const char *t = authorization + 7;

                while (*t == ' ')
                        t++;
                return same(t, strlen(t), auth->secret, auth->len);
        }
        if (strncasecmp(authorization, "Basic ", 6) != 0)
                return false;
        authorization += 6;
        while (*authorization == ' ')
                authorization++;
        n = zcp_base64_decode(authorization, plain, sizeof(plain) - 1, false);
        if (n < 0)
                return false;
        plain[n] = '\0';
        colon = memchr(plain, ':', (size_t)n);
        ok = colon && same(colon + 1, (size_t)(plain + n - (colon + 1)), auth->secret, auth->len);
        memset(plain, 0, sizeof(plain));
        return ok;
}
