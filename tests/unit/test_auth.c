/* SPDX-License-Identifier: MIT */
/*
 * The live page's credential (src/daemon/auth.c): the secret file's rules
 * (private, a regular file, a non-empty first line, "\r\n" ends it), and the
 * Authorization header checked against it: a bearer token, or basic auth
 * with any user and the secret as the password, nothing else; and the base64
 * decoder it shares with the TF.js loader (src/core/base64.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "core/base64.h"
#include "daemon/auth.h"

static char dir[] = "/tmp/zcp-auth-XXXXXX";

static const char *file(const char *name, const char *text, mode_t mode)
{
        static char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "w");
        CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
        CHECK(chmod(path, mode) == 0);
        return path;
}

static void test_load(void)
{
        struct zcp_auth a;
        char msg[512];

        CHECK(mkdtemp(dir));
        CHECK(zcp_auth_load(file("ok", "s3cret\r\nignored\n", 0600), &a, msg, sizeof(msg)) == 0);
        CHECK(a.len == 6 && strcmp(a.secret, "s3cret") == 0);
        CHECK(zcp_auth_load(file("ro", "s3cret", 0400), &a, msg, sizeof(msg)) == 0 && a.len == 6);
        CHECK(zcp_auth_load(file("lax", "s3cret\n", 0640), &a, msg, sizeof(msg)) == -EPERM);
        CHECK_MSG(strstr(msg, "open to group or others (mode 0640); chmod 600"), "%s", msg);
        CHECK(zcp_auth_load(file("empty", "\nsecond\n", 0600), &a, msg, sizeof(msg)) == -EINVAL);
        CHECK(strstr(msg, "holds no secret"));
        {
                char big[ZCP_AUTH_SECRET_MAX + 3];

                memset(big, 'x', sizeof(big) - 1);
                big[sizeof(big) - 1] = '\0';
                CHECK(zcp_auth_load(file("long", big, 0600), &a, msg, sizeof(msg)) == -EINVAL);
                CHECK(strstr(msg, "longer than"));
        }
        CHECK(zcp_auth_load(dir, &a, msg, sizeof(msg)) == -EINVAL && strstr(msg, "not a regular file"));
        snprintf(msg, sizeof(msg), "%s/none", dir);
        CHECK(zcp_auth_load(msg, &a, msg, sizeof(msg)) == -ENOENT);
}

static void test_check(void)
{
        struct zcp_auth a = { .secret = "s3cret", .len = 6 };

        CHECK(zcp_auth_check(&a, "Bearer s3cret"));
        CHECK(zcp_auth_check(&a, "bearer  s3cret"));              /* the scheme in any case */
        CHECK(!zcp_auth_check(&a, "Bearer s3cre"));
        CHECK(!zcp_auth_check(&a, "Bearer s3crett"));
        CHECK(!zcp_auth_check(&a, "Bearer "));
        CHECK(!zcp_auth_check(&a, NULL));
        CHECK(!zcp_auth_check(&a, "s3cret"));
        CHECK(zcp_auth_check(&a, "Basic YW55b25lOnMzY3JldA=="));  /* anyone:s3cret */
        CHECK(zcp_auth_check(&a, "Basic OnMzY3JldA=="));          /* :s3cret (no user) */
        CHECK(zcp_auth_check(&a, "Basic dTp2OnMzY3JldA==") == false);   /* u:v:s3cret: the password is v:s3cret */
        CHECK(!zcp_auth_check(&a, "Basic YW55b25lOm5vcGU="));     /* anyone:nope */
        CHECK(!zcp_auth_check(&a, "Basic czNjcmV0"));             /* s3cret without a colon */
        CHECK(!zcp_auth_check(&a, "Basic YW55b25lOnMzY3JldA=*")); /* not base64 */
        CHECK(!zcp_auth_check(&a, "Digest s3cret"));
}

static void test_base64(void)
{
        char out[16];

        CHECK(zcp_base64_decode("", out, sizeof(out), false) == 0);
        CHECK(zcp_base64_decode("TWFu", out, sizeof(out), false) == 3 && memcmp(out, "Man", 3) == 0);
        CHECK(zcp_base64_decode("TWE=", out, sizeof(out), false) == 2 && memcmp(out, "Ma", 2) == 0);
        CHECK(zcp_base64_decode("TQ==", out, sizeof(out), false) == 1 && out[0] == 'M');
        CHECK(zcp_base64_decode("TQ", out, sizeof(out), false) == 1 && out[0] == 'M');   /* padding optional */
        CHECK(zcp_base64_decode("+/8=", out, sizeof(out), false) == 2 && (unsigned char)out[0] == 0xfb &&
              (unsigned char)out[1] == 0xff);
        CHECK(zcp_base64_decode("-_8=", out, sizeof(out), false) == -1);                  /* URL-safe: refused */
        CHECK(zcp_base64_decode("-_8=", out, sizeof(out), true) == 2 && (unsigned char)out[0] == 0xfb);
        CHECK(zcp_base64_decode("TQ==x", out, sizeof(out), false) == -1);                 /* after the padding */
        CHECK(zcp_base64_decode("T Q==", out, sizeof(out), false) == -1);
        CHECK(zcp_base64_decode("TWFu", out, 2, false) == -1);                            /* out too small */
        CHECK(zcp_base64_decode("TWFu", out, 3, false) == 3);
}

int main(void)
{
        static const char *const names[] = { "ok", "ro", "lax", "empty", "long" };
        char path[256];

        test_base64();
        test_load();
        test_check();
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                unlink(path);
        }
        rmdir(dir);
        printf("auth: all checks passed\n");
        return 0;
}
