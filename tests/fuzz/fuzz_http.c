/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the metrics endpoint's request handling (daemon/http.c,
 * libmicrohttpd underneath) driven for real: the HTTP server runs on
 * 127.0.0.1 (a free port) with a registry holding one synthetic stream, and
 * each input is sent as the bytes of one connection (then the write side is
 * shut). Whatever comes back must be an HTTP response; the server must keep
 * answering (a GET /healthz after every input), and ASan/UBSan watch its
 * threads.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "daemon/http.h"
#include "daemon/registry.h"
#include "fuzz.h"
#include "pipeline.h"

static unsigned port;

static void setup(void)
{
        static const char text[] = "streams:\n  - name: fuzz\n    source: {type: synthetic, width: 64, height: 48}\n"
                                   "    gpu: {backend: cpu}\n    model: {enabled: false}\n    output: {type: none}\n"
                                   "metrics:\n  http: {enabled: true, port: 1}\n";
        static struct zcp_registry *registry;
        static struct zcp_http *http;
        static struct zcp_stream *stream;
        struct zcp_config *cfg = NULL;
        struct zcp_http_config hc;
        char err[512];

        zcp_log_set_level(ZCP_LOG_ERROR);
        FUZZ_CHECK(zcp_config_parse("fuzz-http.yaml", text, sizeof(text) - 1, &cfg, err, sizeof(err)) == 0);
        FUZZ_CHECK(zcp_stream_new(&cfg->streams[0], 0, -1, &stream) == 0);
        FUZZ_CHECK(zcp_registry_new(&registry) == 0);
        zcp_registry_set(registry, &stream, 1);
        hc = cfg->metrics.http;
        hc.port = 0;   /* a free port */
        FUZZ_CHECK(zcp_http_start(&hc, registry, &http) == 0 && http);
        port = zcp_http_port(http);
        FUZZ_CHECK(port != 0);
        zcp_config_free(cfg);
}

/* Sends `len` bytes as one connection; returns the bytes of the answer read (at most `cap`). */
static size_t exchange(const uint8_t *data, size_t len, char *answer, size_t cap, int first_ms)
{
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        size_t got = 0, sent = 0;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        FUZZ_CHECK(fd >= 0);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        FUZZ_CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
        while (sent < len) {
                ssize_t n = send(fd, data + sent, len - sent, MSG_NOSIGNAL);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;   /* the server closed early: fine */
                sent += (size_t)n;
        }
        shutdown(fd, SHUT_WR);
        /*
         * Until the server closes, or goes quiet for 20 ms once it has
         * answered (a kept-alive connection); at most first_ms for a first byte.
         */
        for (int waited = 0; waited < first_ms && got < cap;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int ms = got ? 20 : 100;
                ssize_t n;

                if (poll(&p, 1, ms) <= 0) {
                        if (got)
                                break;
                        waited += ms;
                        continue;
                }
                n = recv(fd, answer + got, cap - got, 0);
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        close(fd);
        return got;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char probe[] = "GET /healthz HTTP/1.0\r\n\r\n";
        static char answer[1 << 16];
        size_t n;

        if (!port)
                setup();
        n = exchange(data, size, answer, sizeof(answer), 2000);
        if (n > 0)
                FUZZ_CHECK(n >= 8 && memcmp(answer, "HTTP/1.", 7) == 0);
        /*
         * Still serving: a well-formed request on a fresh connection is answered (however slow a
         * loaded machine under the sanitizers makes it: 5 s for a first byte). The probe closes its
         * side after the request, as every input's connection does; when the fuzzer outruns
         * max_requests_per_s such a request used to be suspended for its turn and then dropped by
         * libmicrohttpd unanswered (now 429: daemon/http.c park()).
         */
        n = exchange((const uint8_t *)probe, sizeof(probe) - 1, answer, sizeof(answer), 5000);
        FUZZ_CHECK(n >= 12 && memcmp(answer, "HTTP/1.", 7) == 0);
        return 0;
}
