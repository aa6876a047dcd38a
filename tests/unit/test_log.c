/* SPDX-License-Identifier: MIT */
/*
 * The two forms of a log line (core/log.h), read back from a file that fd 2
 * points at:
 *   - JOURNAL_STREAM naming that file's dev:ino: "<N>" syslog priorities
 *     (3 error, 4 warn, 6 info, 7 debug), the message, nothing else;
 *   - JOURNAL_STREAM unset, naming another file, or malformed: local time to
 *     the microsecond, the thread's name (main and a named thread), then
 *     "zcpipe: LEVEL: message";
 *   - zcp_log_line(): the message alone (with the priority in the journal);
 *   - a level that is off writes nothing and evaluates no argument; a long
 *     message is cut at the line buffer and still ends with one newline.
 */
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "core/log.h"

static int evaluated;

static int count_eval(void)
{
        return ++evaluated;
}

/* Points fd 2 at a fresh temporary file; returns the saved fd 2. */
static int capture(FILE **ret_file)
{
        FILE *f = tmpfile();
        int saved = dup(STDERR_FILENO);

        CHECK(f && saved >= 0);
        CHECK(dup2(fileno(f), STDERR_FILENO) == STDERR_FILENO);
        *ret_file = f;
        return saved;
}

/* Restores fd 2 and returns what was written (caller frees). */
static char *release(FILE *f, int saved)
{
        long len;
        char *text;

        CHECK(dup2(saved, STDERR_FILENO) == STDERR_FILENO);
        close(saved);
        CHECK(fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0);
        rewind(f);
        text = calloc(1, (size_t)len + 1);
        CHECK(text && fread(text, 1, (size_t)len, f) == (size_t)len);
        fclose(f);
        return text;
}

static void journal_stream_for(FILE *f, long ino_delta)
{
        struct stat st;
        char v[64];

        CHECK(fstat(fileno(f), &st) == 0);
        snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino + (unsigned long long)ino_delta);
        CHECK(setenv("JOURNAL_STREAM", v, 1) == 0);
}

static void match_lines(const char *text, const char *const *patterns, int count)
{
        const char *p = text;

        for (int i = 0; i < count; i++) {
                const char *nl = strchr(p, '\n');
                regex_t re;
                char *line;

                CHECK_MSG(nl, "line %d missing in:\n%s", i + 1, text);
                line = strndup(p, (size_t)(nl - p));
                CHECK(regcomp(&re, patterns[i], REG_EXTENDED | REG_NOSUB) == 0);
                CHECK_MSG(regexec(&re, line, 0, NULL, 0) == 0, "line %d \"%s\" does not match %s", i + 1, line,
                          patterns[i]);
                regfree(&re);
                free(line);
                p = nl + 1;
        }
        CHECK_MSG(*p == '\0', "more lines than expected: %s", p);
}

static void *named_thread(void *arg)
{
        (void)arg;
        pthread_setname_np(pthread_self(), "zcp-inf-cam0");
        zcp_warn("from a thread %d", 7);
        return NULL;
}

static void log_all(void)
{
        zcp_log_set_level(ZCP_LOG_INFO);
        evaluated = 0;
        zcp_err("disk %s", "full");
        zcp_warn("warned %d", 2);
        zcp_info("told");
        zcp_debug("hidden %d", count_eval());   /* off: not formatted, not even evaluated */
        CHECK(evaluated == 0);
        ZCP_LOG_RATELIMITED(ZCP_LOG_DEBUG, 1000000000ull, "hidden too %d", count_eval());
        CHECK(evaluated == 0);
        zcp_log_set_level(ZCP_LOG_DEBUG);
        zcp_debug("shown %d", count_eval());
        CHECK(evaluated == 1);
        zcp_log_line(ZCP_LOG_ERROR, "%s:%d:%d: %s", "camera.yaml", 5, 7, "unknown key 'slotz'");
        zcp_log_set_level(ZCP_LOG_INFO);
}

static void test_journal(void)
{
        FILE *f;
        int saved = capture(&f);
        static const char *const want[] = {
                "^<3>zcpipe: error: disk full$",
                "^<4>zcpipe: warn: warned 2$",
                "^<6>zcpipe: info: told$",
                "^<7>zcpipe: debug: shown 1$",
                "^<3>camera\\.yaml:5:7: unknown key 'slotz'$",
        };
        char *text;

        journal_stream_for(f, 0);
        CHECK(zcp_log_init());
        log_all();
        text = release(f, saved);
        match_lines(text, want, 5);
        free(text);
}

static void test_plain(void)
{
        static const char *const want[] = {
                "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} \\[test_log\\] zcpipe: error: disk full$",
                "^[0-9-]{10}T[0-9:]{8}\\.[0-9]{6} \\[test_log\\] zcpipe: warn: warned 2$",
                "^[0-9-]{10}T[0-9:]{8}\\.[0-9]{6} \\[test_log\\] zcpipe: info: told$",
                "^[0-9-]{10}T[0-9:]{8}\\.[0-9]{6} \\[test_log\\] zcpipe: debug: shown 1$",
                "^camera\\.yaml:5:7: unknown key 'slotz'$",
                "^[0-9-]{10}T[0-9:]{8}\\.[0-9]{6} \\[zcp-inf-cam0\\] zcpipe: warn: from a thread 7$",
        };
        /* Not the journal: unset, another file's inode, garbage. */
        for (int mode = 0; mode < 3; mode++) {
                FILE *f;
                int saved = capture(&f);
                pthread_t t;
                char *text;

                if (mode == 0)
                        CHECK(unsetenv("JOURNAL_STREAM") == 0);
                else if (mode == 1)
                        journal_stream_for(f, 1);
                else
                        CHECK(setenv("JOURNAL_STREAM", "12:34:56x", 1) == 0);
                CHECK(!zcp_log_init());
                log_all();
                CHECK(pthread_create(&t, NULL, named_thread, NULL) == 0);
                CHECK(pthread_join(t, NULL) == 0);
                text = release(f, saved);
                match_lines(text, want, 6);
                free(text);
        }
}

static void test_long_line(void)
{
        static char big[4000];
        FILE *f;
        int saved = capture(&f);
        char *text;

        memset(big, 'x', sizeof(big) - 1);
        journal_stream_for(f, 0);
        CHECK(zcp_log_init());
        zcp_err("%s", big);
        zcp_info("after");
        text = release(f, saved);
        CHECK(strncmp(text, "<3>zcpipe: error: xxx", 21) == 0);
        CHECK(strlen(text) == 1023 + strlen("<6>zcpipe: info: after\n"));
        CHECK(text[1022] == '\n' && strcmp(text + 1023, "<6>zcpipe: info: after\n") == 0);
        free(text);
}

int main(void)
{
        pthread_setname_np(pthread_self(), "test_log");
        test_journal();
        test_plain();
        test_long_line();
        unsetenv("JOURNAL_STREAM");
        zcp_log_init();
        printf("log: ok\n");
        return 0;
}
