/* SPDX-License-Identifier: MIT */
/*
 * Configuration loader (src/core/config.c): walking the parser's own key
 * table, every key's default is what omitting it gives, source keys are
 * refused for the source types they do not apply to, and config/camera.yaml
 * documents every key with its real default; the shipped configs and good
 * fixtures load with the right values; every class of bad input
 * fails with -errno and a line "FILE:LINE:COL: message" at the right place;
 * one load reports every error of a file (up to the limit), in the file's
 * order; --check's reading of every file a key names; numeric limits; size
 * cap; odd paths; and a byte-mutation loop that must never crash or leak.
 * Fixtures: tests/data/config/.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "core/config.h"

#ifndef ZCP_DATADIR
#define ZCP_DATADIR "/usr/local/share/zcpipe"
#endif

/* The default model (config.c): $ZCP_MODELDIR's (meson test sets it), else the installed one. */
static const char *default_weights(void)
{
        static char path[PATH_MAX];
        const char *dir = getenv("ZCP_MODELDIR");

        if (dir && dir[0]) {
                snprintf(path, sizeof(path), "%s/centernet/model.json", dir);
                return path;
        }
        return ZCP_DATADIR "/centernet/model.json";
}
#ifndef HAVE_HTTP
#define HAVE_HTTP 0
#endif

static char fixture_dir[PATH_MAX];   /* tests/data/config, canonical */
static char root_dir[PATH_MAX];      /* the source tree, canonical */

static const char *fixture(const char *name)
{
        static char path[PATH_MAX + 64];
        snprintf(path, sizeof(path), "%s/%s", fixture_dir, name);
        return path;
}

static bool feq(float a, float b)
{
        return a == b;
}

/* Every line of err is "NAME:..." without control characters; the lines are the errors the loader found. */
static unsigned check_lines(const char *err, const char *name)
{
        unsigned lines = 0;

        for (const char *l = err; *l; lines++) {
                size_t n = strcspn(l, "\n");

                CHECK_MSG(strncmp(l, name, strlen(name)) == 0, "error '%.*s' does not start with '%s'", (int)n, l,
                          name);
                CHECK_MSG(l[strlen(name)] == ':', "error '%.*s' lacks ':' after the name", (int)n, l);
                for (const char *p = l; p < l + n; p++)
                        CHECK_MSG((unsigned char)*p >= 0x20 && *p != 0x7f, "control character in '%s'", err);
                l += n;
                if (*l == '\n') {
                        l++;
                        CHECK_MSG(*l, "error text ends with a newline: '%s'", err);
                }
        }
        if (getenv("ZCP_TEST_SHOW_ERRORS") && lines > 1)
                fprintf(stderr, "%u errors:\n%s\n", lines, err);
        return lines;
}

/*
 * Asserts that the first error is "NAME:LINE:COL: ..." (or "NAME: ..." when line is 0) containing
 * `phrase`; the others (errors the walk found after it) are well-formed too.
 */
static void check_error(const char *err, const char *name, unsigned line, unsigned col, const char *phrase)
{
        char prefix[PATH_MAX + 64];
        size_t first = strcspn(err, "\n");

        check_lines(err, name);
        if (line)
                snprintf(prefix, sizeof(prefix), "%s:%u:%u: ", name, line, col);
        else
                snprintf(prefix, sizeof(prefix), "%s: ", name);
        CHECK_MSG(strncmp(err, prefix, strlen(prefix)) == 0, "error '%s' does not start with '%s'", err, prefix);
        CHECK_MSG(strstr(err, phrase) && (size_t)(strstr(err, phrase) - err) < first,
                  "first error '%.*s' does not contain '%s'", (int)first, err, phrase);
}

static void expect_load_error(const char *name, int err, unsigned line, unsigned col, const char *phrase)
{
        struct zcp_config *cfg = NULL;
        char buf[512];
        const char *path = fixture(name);
        int r;

        memset(buf, 'x', sizeof(buf));
        r = zcp_config_load(path, &cfg, buf, sizeof(buf));
        CHECK_MSG(r == err, "%s: got %d (%s), want %d", name, r, r < 0 ? buf : "ok", err);
        CHECK(cfg == NULL);
        check_error(buf, path, line, col, phrase);
}

static void expect_parse_error(const char *text, unsigned line, unsigned col, const char *phrase)
{
        struct zcp_config *cfg = NULL;
        char buf[512];
        int r;

        r = zcp_config_parse("inline.yaml", text, strlen(text), &cfg, buf, sizeof(buf));
        CHECK_MSG(r == -EINVAL, "got %d (%s) for:\n%s", r, r < 0 ? buf : "ok", text);
        CHECK(cfg == NULL);
        check_error(buf, "inline.yaml", line, col, phrase);
}

/* Same, at the first occurrence of `at` in `text` (columns count UTF-8 characters, as libyaml does). */
static void expect_parse_error_at(const char *text, const char *at, const char *phrase)
{
        const char *hit = strstr(text, at), *p = text;
        unsigned line = 1, col = 1;

        CHECK_MSG(hit, "'%s' not in the test text", at);
        if (strncmp(p, "\xef\xbb\xbf", 3) == 0)
                p += 3;
        for (; p < hit; p++) {
                if (*p == '\n') {
                        line++;
                        col = 1;
                } else if (((unsigned char)*p & 0xc0) != 0x80) {
                        col++;
                }
        }
        expect_parse_error(text, line, col, phrase);
}

static struct zcp_config *parse_ok(const char *text)
{
        struct zcp_config *cfg = NULL;
        char buf[512] = "";
        int r = zcp_config_parse("inline.yaml", text, strlen(text), &cfg, buf, sizeof(buf));

        CHECK_MSG(r == 0, "parse failed (%d): %s\n%s", r, buf, text);
        CHECK(cfg);
        return cfg;
}

static struct zcp_config *load_ok(const char *path)
{
        struct zcp_config *cfg = NULL;
        char buf[512] = "";
        int r = zcp_config_load(path, &cfg, buf, sizeof(buf));

        CHECK_MSG(r == 0, "load %s failed (%d): %s", path, r, buf);
        CHECK(cfg);
        return cfg;
}

/* ---- the schema, walked from the parser's own table --------------------------- */

#define MAX_KEYS 256
static struct zcp_config_key keys[MAX_KEYS];
static size_t key_count;

static void collect_key(const struct zcp_config_key *k, void *userdata)
{
        CHECK(key_count < MAX_KEYS);
        keys[key_count++] = *k;
}

static const struct zcp_config_key *find_key(const char *path)
{
        for (size_t i = 0; i < key_count; i++)
                if (strcmp(keys[i].path, path) == 0)
                        return &keys[i];
        return NULL;
}

static bool is_leaf(const struct zcp_config_key *k)
{
        return strcmp(k->type, "section") != 0 && strcmp(k->type, "streams") != 0;
}

static bool is_stream_key(const struct zcp_config_key *k)
{
        return strncmp(k->path, "streams.", 8) == 0;
}

/* The first source type a key applies to. */
static const char *source_type_for(const struct zcp_config_key *k)
{
        for (int t = 0; t < ZCP_SOURCE_TYPE_COUNT; t++)
                if (k->sources & (1u << t))
                        return zcp_source_type_names[t];
        return NULL;
}

/*
 * A config with key k set to `value` (YAML text), in a stream of source type
 * `type` (stream keys) or beside one synthetic stream (global keys).
 */
static void config_with(const struct zcp_config_key *k, const char *type, const char *value, char *text, size_t size)
{
        char sect[128], *dot;
        const char *rel = is_stream_key(k) ? k->path + 8 : k->path;
        int n;

        snprintf(sect, sizeof(sect), "%s", rel);
        dot = strrchr(sect, '.');
        if (dot)
                *dot = '\0';
        if (!is_stream_key(k) && !dot)
                n = snprintf(text, size, "streams:\n  - source:\n      type: synthetic\n%s: %s\n", k->name, value);
        else if (!is_stream_key(k) && strchr(sect, '.'))   /* metrics.http.port */
                n = snprintf(text, size, "streams:\n  - source:\n      type: synthetic\n%.*s:\n  %s:\n    %s: %s\n",
                             (int)(strchr(sect, '.') - sect), sect, strchr(sect, '.') + 1, k->name, value);
        else if (!is_stream_key(k))
                n = snprintf(text, size, "streams:\n  - source:\n      type: synthetic\n%s:\n  %s: %s\n", sect, k->name,
                             value);
        else if (!dot)                                      /* streams.name */
                n = snprintf(text, size, "streams:\n  - source:\n      type: %s\n    %s: %s\n", type, k->name, value);
        else if (strcmp(sect, "source") == 0)
                n = snprintf(text, size, "streams:\n  - source:\n      type: %s\n      path: x.mp4\n      %s: %s\n",
                             type, k->name, value);
        else if (strcmp(sect, "output") == 0 && strcmp(k->name, "type") != 0 && strcmp(k->name, "path") != 0)
                /* The other output keys are mqtt's (an error under any other output type). */
                n = snprintf(text, size,
                             "streams:\n  - source:\n      type: %s\n      path: x.mp4\n    %s:\n      type: mqtt\n"
                             "      %s: %s\n",
                             type, sect, k->name, value);
        else
                n = snprintf(text, size, "streams:\n  - source:\n      type: %s\n      path: x.mp4\n    %s:\n      %s: %s\n",
                             type, sect, k->name, value);
        CHECK(n > 0 && (size_t)n < size);
        /* path: x.mp4 only where it applies (file and network sources, which require it). */
        if ((strcmp(type, "file") != 0 && strcmp(type, "network") != 0) || strcmp(k->path, "streams.source.path") == 0) {
                char *p = strstr(text, "      path: x.mp4\n");

                if (p)
                        memmove(p, p + 18, strlen(p + 18) + 1);
        }
        /* A network stream's path is a URL. */
        if (strcmp(type, "network") == 0) {
                char *p = strstr(text, "path: x.mp4\n");

                if (p && (size_t)n + 16 < size) {
                        memmove(p + 6 + 16, p + 6 + 5, strlen(p + 6 + 5) + 1);
                        memcpy(p + 6, "rtsp://127.0.0.1", 16);
                }
        }
}

/* The YAML text of a key's default. */
static void default_yaml(const struct zcp_config_key *k, char *buf, size_t size)
{
        if (strcmp(k->type, "string") == 0 || strcmp(k->type, "path") == 0)
                snprintf(buf, size, "\"%s\"", k->def);
        else
                snprintf(buf, size, "%s", k->def);
}

/*
 * Every key's default, as the table states it, is what a config that omits
 * the key holds: writing `key: <default>` explicitly changes nothing.
 */
static void test_schema_defaults(void)
{
        uint32_t checked = 0;

        CHECK(key_count > 40);
        for (size_t i = 0; i < key_count; i++) {
                const struct zcp_config_key *k = &keys[i];
                const char *type = is_stream_key(k) ? source_type_for(k) : "synthetic";
                char text[1024], value[160], base_text[1024];
                struct zcp_config *with, *without;

                if (!is_leaf(k) || k->required)
                        continue;
                /* "model": the model's own value, which no value written in the config stands for. */
                if (strcmp(k->def, "model") == 0)
                        continue;
                /* Empty names and file paths are refused when written: their default is "not given". */
                if (strcmp(k->path, "streams.name") == 0 || strcmp(k->path, "streams.source.path") == 0)
                        continue;
                /* Likewise the optional strings that must not be empty when given (mqtt's client_id...). */
                if ((strcmp(k->type, "string") == 0 || strcmp(k->type, "path") == 0) && k->def[0] == '\0' &&
                    strncmp(k->path, "streams.output.", 15) == 0 && strcmp(k->name, "path") != 0)
                        continue;
                CHECK_MSG(type, "%s applies to no source type", k->path);
                default_yaml(k, value, sizeof(value));
                config_with(k, type, value, text, sizeof(text));
                /* The same config without the key (a key that no stream section holds: just the type). */
                config_with(k, type, value, base_text, sizeof(base_text));
                *strrchr(base_text, '\n') = '\0';
                *(strrchr(base_text, '\n') + 1) = '\0';
                with = parse_ok(text);
                without = parse_ok(base_text);
                CHECK_MSG(!zcp_stream_config_changed(&with->streams[0], &without->streams[0]) &&
                                  memcmp(&with->metrics, &without->metrics, sizeof(with->metrics)) == 0 &&
                                  memcmp(&with->log, &without->log, sizeof(with->log)) == 0,
                          "%s: writing its default %s changes the config:\n%s", k->path, value, text);
                zcp_config_free(with);
                zcp_config_free(without);
                checked++;
        }
        CHECK(checked > 40);
}

/* A source key is accepted for the source types it applies to, and an error (at the key) for the others. */
static void test_schema_source_types(void)
{
        uint32_t refused = 0;

        for (size_t i = 0; i < key_count; i++) {
                const struct zcp_config_key *k = &keys[i];
                char text[1024], value[160];

                if (strncmp(k->path, "streams.source.", 15) != 0 || k->required)
                        continue;
                if (strcmp(k->path, "streams.source.path") == 0)
                        snprintf(value, sizeof(value), "x.mp4");
                else
                        default_yaml(k, value, sizeof(value));
                for (int t = 0; t < ZCP_SOURCE_TYPE_COUNT; t++) {
                        config_with(k, zcp_source_type_names[t], value, text, sizeof(text));
                        if (k->sources & (1u << t)) {
                                zcp_config_free(parse_ok(text));
                                continue;
                        }
                        char phrase[160];
                        snprintf(phrase, sizeof(phrase), "source.%s does not apply to source.type %s", k->name,
                                 zcp_source_type_names[t]);
                        expect_parse_error_at(text, strrchr(text, '\n') == text + strlen(text) - 1
                                                            ? strstr(text, k->name) : k->name, phrase);
                        refused++;
                }
        }
        /* device, format, fps, io, timeout_ms, backoff_max_ms, path, pace, loop, frames, box_size, speed. */
        CHECK(refused >= 12);
        CHECK(find_key("streams.source.device")->sources == 1u << ZCP_SOURCE_V4L2);
        CHECK(find_key("streams.source.width")->sources == (1u << ZCP_SOURCE_TYPE_COUNT) - 1);
        CHECK(find_key("streams.ring.slots")->sources == (1u << ZCP_SOURCE_TYPE_COUNT) - 1);
}

/*
 * config/camera.yaml documents every key, with its real default: each key of
 * the table appears in its section (keys of other source types commented
 * out), and each leaf's line says "default <value>" with the table's value.
 */
/*
 * The source types a group header of camera.yaml's source section names: "# --- v4l2 and network ---",
 * "# --- file, synthetic and network (errors for v4l2) ---", "# --- every source type ---".
 */
static unsigned group_sources(const char *header)
{
        char text[128];
        unsigned mask = 0;
        char *tok, *save = NULL;

        snprintf(text, sizeof(text), "%s", header);
        text[strcspn(text, "(")] = '\0';
        if (strstr(text, "every source type"))
                return (1u << ZCP_SOURCE_TYPE_COUNT) - 1;
        for (tok = strtok_r(text, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
                int t = zcp_enum_from_name(zcp_source_type_names, ZCP_SOURCE_TYPE_COUNT, tok);

                if (t >= 0)
                        mask |= 1u << t;
                else
                        CHECK_MSG(strcmp(tok, "and") == 0 || strcmp(tok, "---") == 0,
                                  "camera.yaml: '%s' in the group header '%s' is no source type", tok, header);
        }
        CHECK_MSG(mask, "camera.yaml: the group header '%s' names no source type", header);
        return mask;
}

/*
 * config/camera.yaml documents every key of the table: its path, its default ("default X" in its
 * comment) and, for source keys, the source types it applies to: the keys of the source section
 * stand in groups under headers "# --- TYPES ---" that name exactly the types of each of their keys
 * (before the first header: every type).
 */
static void test_camera_yaml_documents(const char *path)
{
        static char text[1 << 16];
        struct { unsigned indent; char name[64]; } stack[8];
        size_t depth = 0, n;
        FILE *f = fopen(path, "re");
        char *line, *save = NULL;
        static struct { char path[128]; char def[128]; bool has_def; unsigned sources; } doc[MAX_KEYS];
        size_t ndoc = 0;
        unsigned group = (1u << ZCP_SOURCE_TYPE_COUNT) - 1;

        CHECK(f);
        n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                unsigned indent = 0;
                char *p = line, *def;
                size_t len;

                while (*p == ' ')
                        p++, indent++;
                if (strncmp(p, "# --- ", 6) == 0) {
                        if (depth >= 2 && strcmp(stack[1].name, "source") == 0)
                                group = group_sources(p + 6);
                        continue;
                }
                if (p[0] == '#' && p[1] == ' ')
                        p += 2;   /* a commented-out key keeps the indentation of its '#' */
                if (p[0] == '-' && p[1] == ' ') {
                        p += 2;
                        indent += 2;
                }
                len = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
                if (len == 0 || p[len] != ':' || (p[len + 1] != ' ' && p[len + 1] != '\0'))
                        continue;
                while (depth > 0 && stack[depth - 1].indent >= indent)
                        depth--;
                CHECK(depth < 8 && len < sizeof(stack[0].name));
                stack[depth].indent = indent;
                snprintf(stack[depth].name, sizeof(stack[depth].name), "%.*s", (int)len, p);
                depth++;
                CHECK(ndoc < MAX_KEYS);
                doc[ndoc].path[0] = '\0';
                for (size_t d = 0; d < depth; d++)
                        snprintf(doc[ndoc].path + strlen(doc[ndoc].path), sizeof(doc[ndoc].path) - strlen(doc[ndoc].path),
                                 "%s%s", d ? "." : "", stack[d].name);
                if (strcmp(doc[ndoc].path, "streams.source") == 0)
                        group = (1u << ZCP_SOURCE_TYPE_COUNT) - 1;   /* a new source section */
                doc[ndoc].sources = group;
                def = strstr(p + len, "default ");
                doc[ndoc].has_def = def != NULL;
                if (def) {
                        def += 8;
                        len = def[0] == '[' ? strcspn(def, "]") + 1 : strcspn(def, " ;,)");
                        snprintf(doc[ndoc].def, sizeof(doc[ndoc].def), "%.*s", (int)len, def);
                }
                ndoc++;
        }

        for (size_t i = 0; i < key_count; i++) {
                const struct zcp_config_key *k = &keys[i];
                size_t j;

                for (j = 0; j < ndoc && strcmp(doc[j].path, k->path) != 0; j++)
                        ;
                CHECK_MSG(j < ndoc, "camera.yaml does not document %s", k->path);
                if (strncmp(k->path, "streams.source.", 15) == 0)
                        CHECK_MSG(doc[j].sources == k->sources,
                                  "camera.yaml: %s stands under a header of source types 0x%x, the parser's are 0x%x "
                                  "(bit 1 << zcp_source_type)", k->path, doc[j].sources, k->sources);
                if (!is_leaf(k) || k->required)
                        continue;
                CHECK_MSG(doc[j].has_def, "camera.yaml: %s does not say its default", k->path);
                const char *want = k->def, *got = doc[j].def;
                char unq[128];

                if (got[0] == '"') {
                        snprintf(unq, sizeof(unq), "%.*s", (int)strcspn(got + 1, "\""), got + 1);
                        got = unq;
                }
                /* The documented default of metrics.http.enabled is that of a build with HTTP. */
                if (strcmp(k->path, "metrics.http.enabled") == 0)
                        want = "true";
                if (strcmp(k->type, "uint") == 0 || strcmp(k->type, "float") == 0)
                        CHECK_MSG(strtod(got, NULL) == strtod(want, NULL) && got[0],
                                  "camera.yaml: %s default %s, the parser's is %s", k->path, got, want);
                else
                        CHECK_MSG(strcmp(got, want) == 0, "camera.yaml: %s default '%s', the parser's is '%s'", k->path,
                                  got, want);
        }
}

static void test_minimal(void)
{
        struct zcp_config *cfg = load_ok(fixture("good-minimal.yaml"));

        CHECK(strcmp(cfg->source_path, fixture("good-minimal.yaml")) == 0);
        CHECK(cfg->stream_count == 1);
        CHECK(strcmp(cfg->streams[0].name, "stream0") == 0);
        CHECK(cfg->streams[0].source.type == ZCP_SOURCE_SYNTHETIC);
        zcp_config_free(cfg);
}

static void test_camera_yaml(void)
{
        char path[PATH_MAX + 64];
        struct zcp_config *cfg, *again;

        snprintf(path, sizeof(path), "%s/config/camera.yaml", root_dir);
        cfg = load_ok(path);
        CHECK(cfg->stream_count == 1);
        const struct zcp_stream_config *s = &cfg->streams[0];
        CHECK(strcmp(s->name, "camera0") == 0);
        CHECK(s->source.type == ZCP_SOURCE_V4L2);
        CHECK(s->source.width == 1280 && s->source.height == 720);
        CHECK(s->source.fps == 30);
        /* The service writes where it may (StateDirectory=), not 30 lines a second into the journal. */
        CHECK(s->output.type == ZCP_OUTPUT_FILE);
        CHECK(strcmp(s->output.path, "/var/lib/zcpipe/camera0.jsonl") == 0);
        CHECK(cfg->metrics.http.enabled);
        CHECK(strcmp(cfg->metrics.http.listen, "127.0.0.1") == 0);
        CHECK(cfg->metrics.http.port == 9464);
        test_camera_yaml_documents(path);

        again = load_ok(path);
        CHECK(!zcp_stream_config_changed(&cfg->streams[0], &again->streams[0]));
        again->streams[0].motion.alpha = 0.5f;
        CHECK(zcp_stream_config_changed(&cfg->streams[0], &again->streams[0]));
        zcp_config_free(again);
        zcp_config_free(cfg);
}

static void test_sample_yaml(void)
{
        char path[PATH_MAX + 64], want[PATH_MAX + 64];
        struct zcp_config *cfg;

        snprintf(path, sizeof(path), "%s/config/sample.yaml", root_dir);
        cfg = load_ok(path);
        CHECK(cfg->stream_count == 1);
        const struct zcp_stream_config *s = &cfg->streams[0];
        CHECK(strcmp(s->name, "sample") == 0);
        CHECK(s->source.type == ZCP_SOURCE_FILE);
        snprintf(want, sizeof(want), "%s/samples/vtest-h264.mp4", root_dir);
        CHECK_MSG(strcmp(s->source.path, want) == 0, "%s != %s", s->source.path, want);
        CHECK(access(s->source.path, R_OK) == 0);
        CHECK(s->source.pace == ZCP_PACE_REALTIME);
        CHECK(s->source.loop);   /* it keeps playing for the live page */
        /* the default model, so that the installed example runs with the installed model */
        CHECK_MSG(strcmp(s->model.path, default_weights()) == 0, "%s != %s", s->model.path, default_weights());
        CHECK(s->output.type == ZCP_OUTPUT_FILE);
        CHECK(strcmp(s->output.path, "/tmp/zcpipe-sample.jsonl") == 0);
        zcp_config_free(cfg);
}

static void test_two_streams(void)
{
        char want[PATH_MAX + 64];
        struct zcp_config *cfg = load_ok(fixture("good-two-streams.yaml"));
        const struct zcp_stream_config *a = &cfg->streams[0], *b = &cfg->streams[1];

        CHECK(cfg->stream_count == 3);
        CHECK(cfg->log.level == ZCP_LOG_DEBUG);
        CHECK(cfg->log.summary_interval_s == 0);
        CHECK(!cfg->metrics.http.enabled);
        CHECK(strcmp(cfg->metrics.http.listen, "::1") == 0);
        CHECK(cfg->metrics.http.port == 19464);
        CHECK(cfg->metrics.http.max_connections == 1024);
        CHECK(cfg->metrics.http.timeout_s == 3600);
        snprintf(want, sizeof(want), "%s/logs/frames.jsonl", fixture_dir);
        CHECK(strcmp(cfg->metrics.frame_log.path, want) == 0);
        CHECK(cfg->metrics.frame_log.max_bytes == 4096);
        CHECK(cfg->metrics.frame_log.keep == 100);

        CHECK(strcmp(a->name, "cam-1.left_A") == 0);
        CHECK(a->source.type == ZCP_SOURCE_V4L2);
        snprintf(want, sizeof(want), "%s/video7", fixture_dir);
        CHECK(strcmp(a->source.device, want) == 0);
        CHECK(a->source.width == 8192 && a->source.height == 16);
        CHECK(a->source.format == ZCP_PIX_MJPEG);
        CHECK(a->source.fps == 1000);
        CHECK(a->source.io == ZCP_IO_MMAP);
        CHECK(a->source.timeout_ms == 10 && a->source.backoff_max_ms == 600000);
        CHECK(a->ring.slots == 256 && a->ring.drop == ZCP_DROP_POLICY_NEWEST);
        CHECK(a->gpu.backend == ZCP_BACKEND_CPU && a->gpu.device == 63);
        CHECK(a->gpu.transfer == ZCP_TRANSFER_ZERO_COPY && a->gpu.sync == ZCP_SYNC_SPIN);
        CHECK(strcmp(a->model.path, "/opt/w.safetensors") == 0);
        snprintf(want, sizeof(want), "%s/labels.txt", fixture_dir);
        CHECK(strcmp(a->model.labels, want) == 0);
        CHECK(a->model.input_width == 8 && a->model.input_height == 4096);
        CHECK(feq(a->model.mean[0], 0.0f) && feq(a->model.mean[1], -1.5f) && feq(a->model.mean[2], 1000.0f));
        CHECK(feq(a->model.std[0], 1.0f) && feq(a->model.std[1], 0.5f) && feq(a->model.std[2], 2e-3f));
        CHECK(a->model.top_k == 16 && !a->model.enabled);
        CHECK(!a->motion.enabled && a->motion.cell == 2);
        CHECK(feq(a->motion.threshold, 255.0f) && feq(a->motion.alpha, 1.0f));
        CHECK(a->output.type == ZCP_OUTPUT_UNIX);
        /* "../run/zcp.sock" folds into the parent of the fixture directory. */
        snprintf(want, sizeof(want), "%s", fixture_dir);
        *strrchr(want, '/') = '\0';
        strcat(want, "/run/zcp.sock");
        CHECK_MSG(strcmp(a->output.path, want) == 0, "%s != %s", a->output.path, want);

        CHECK(strcmp(b->name, "stream1") == 0);
        CHECK(b->source.type == ZCP_SOURCE_FILE);   /* quoted names are fine for enums */
        CHECK(strcmp(b->source.path, "file:///srv/recordings/stream1.mp4") == 0);
        CHECK(b->source.pace == ZCP_PACE_FAST && b->source.loop);
        CHECK(b->ring.slots == 2 && b->ring.drop == ZCP_DROP_POLICY_BLOCK);
        CHECK(b->output.type == ZCP_OUTPUT_NONE);
        CHECK(zcp_stream_config_changed(a, b));
        /* The synthetic source's own keys live in a third stream: on a file source they are errors. */
        const struct zcp_stream_config *c = &cfg->streams[2];
        CHECK(c->source.type == ZCP_SOURCE_SYNTHETIC && strcmp(c->name, "stream2") == 0);
        CHECK(c->source.frames == 1ull << 40);
        CHECK(c->source.box_size == 1024 && c->source.speed == 0);
        CHECK(c->source.pace == ZCP_PACE_FAST && c->source.fps == 1);
        /* one stream of the three decodes with GStreamer: decoder_threads auto divides by 1 */
        CHECK(b->source.decoder_threads == 0 && a->source.gst_streams == 1 && b->source.gst_streams == 1 &&
              c->source.gst_streams == 1);
        zcp_config_free(cfg);

        cfg = load_ok(fixture("good-listen-allowed.yaml"));
        CHECK(strcmp(cfg->metrics.http.listen, "0.0.0.0") == 0 && cfg->metrics.http.allow_non_loopback);
        zcp_config_free(cfg);
}

static void test_bad_fixtures(void)
{
        static const struct {
                const char *file;
                int err;
                unsigned line, col;
                const char *phrase;
        } cases[] = {
                { "bad-syntax.yaml", -EINVAL, 5, 8, "syntax error: did not find expected ',' or ']' (while parsing a flow sequence at line 4, column 11)" },
                { "bad-syntax-indent.yaml", -EINVAL, 4, 6, "syntax error" },
                { "bad-unknown-key.yaml", -EINVAL, 5, 7, "unknown key 'slotz' in ring (did you mean 'slots'?)" },
                { "bad-unknown-key-far.yaml", -EINVAL, 3, 3, "unknown key 'colour' in log" },
                { "bad-duplicate-key.yaml", -EINVAL, 7, 7, "duplicate key 'slots' in ring (first at line 5)" },
                { "bad-type-string.yaml", -EINVAL, 4, 12, "source.fps: expected an unsigned integer, got a scalar 'thirty'" },
                { "bad-type-mapping.yaml", -EINVAL, 5, 9, "source.fps: expected an unsigned integer, got a mapping" },
                { "bad-type-quoted.yaml", -EINVAL, 4, 12, "expected an unsigned integer, got a quoted string '30'" },
                { "bad-range.yaml", -EINVAL, 5, 14, "ring.slots: 257 is out of range (2..256)" },
                { "bad-overflow.yaml", -EINVAL, 4, 15, "source.frames: 18446744073709551616 is out of range (0 or 1..1099511627776)" },
                { "bad-trailing-junk.yaml", -EINVAL, 5, 14, "ring.slots: expected an unsigned integer, got a scalar '12abc'" },
                { "bad-negative.yaml", -EINVAL, 5, 15, "gpu.device: -1 is out of range (auto or 0..63)" },
                { "bad-float-overflow.yaml", -EINVAL, 5, 14, "motion.alpha: 1e400 is out of range (0, 1]" },
                { "bad-nan.yaml", -EINVAL, 5, 18, "motion.threshold: expected a number, got a scalar 'nan'" },
                { "bad-inf.yaml", -EINVAL, 5, 18, "expected a number, got a scalar '.inf'" },
                { "bad-enum.yaml", -EINVAL, 5, 13, "ring.drop: bad value 'oldest' (valid: auto, newest, block)" },
                { "bad-bool.yaml", -EINVAL, 5, 13, "source.loop: expected a boolean (true/false, yes/no, on/off), got a scalar 'True'" },
                { "bad-alias.yaml", -EINVAL, 4, 11, "aliases are not allowed" },
                { "bad-alias-only.yaml", -EINVAL, 4, 11, "alias '*missing' is not allowed" },
                { "bad-anchor.yaml", -EINVAL, 2, 5, "anchor '&first' is not allowed (anchors and aliases are not allowed)" },
                { "bad-tag.yaml", -EINVAL, 5, 14, "tag 'tag:yaml.org,2002:int' is not allowed" },
                { "bad-empty.yaml", -EINVAL, 1, 1, "empty configuration" },
                { "bad-comments-only.yaml", -EINVAL, 2, 1, "empty configuration" },
                { "bad-empty-document.yaml", -EINVAL, 2, 1, "empty document" },
                { "bad-multi-document.yaml", -EINVAL, 3, 1, "multiple YAML documents are not allowed" },
                { "bad-top-sequence.yaml", -EINVAL, 1, 1, "the top level must be a mapping, got a sequence" },
                { "bad-no-streams.yaml", -EINVAL, 1, 1, "missing required key 'streams'" },
                { "bad-streams-empty.yaml", -EINVAL, 3, 1, "streams must list at least one stream" },
                { "bad-too-many-streams.yaml", -EINVAL, 18, 5, "too many streams (17, at most 16)" },
                { "bad-no-source.yaml", -EINVAL, 3, 5, "stream 1: missing required section 'source'" },
                { "bad-no-source-type.yaml", -EINVAL, 3, 5, "source.type is required" },
                { "bad-file-no-path.yaml", -EINVAL, 4, 7, "source.type file requires source.path" },
                { "bad-output-no-path.yaml", -EINVAL, 4, 7, "output.type unix requires output.path" },
                { "bad-odd-width.yaml", -EINVAL, 4, 7, "source.width must be even (got 641)" },
                { "bad-stream-name-dup.yaml", -EINVAL, 4, 11, "duplicate stream name 'cam' (stream 0 at line 2 has it too)" },
                { "bad-stream-name-default-dup.yaml", -EINVAL, 4, 5, "duplicate stream name 'stream1', the default name of this stream (stream 0 at line 2" },
                { "bad-stream-name-chars.yaml", -EINVAL, 2, 11, "name: 'front door' may contain only A-Z a-z 0-9 _ . -" },
                { "bad-mean-count.yaml", -EINVAL, 4, 13, "model.mean: expected exactly 3 numbers, got 2" },
                { "bad-std-zero.yaml", -EINVAL, 4, 18, "model.std: 0 is out of range (0, 1e+06]" },
                /* > 0 in double, 0 (or denormal) in float: refused, not divided by. */
                { "bad-std-underflow.yaml", -EINVAL, 4, 18, "model.std: 1e-50 is too small for single precision" },
                { "bad-std-denormal.yaml", -EINVAL, 4, 18, "model.std: 1e-40 is too small for single precision" },
                { "bad-alpha-underflow.yaml", -EINVAL, 5, 14, "motion.alpha: 1e-50 is too small for single precision" },
                { "bad-listen.yaml", -EINVAL, 6, 5, "metrics.http.listen '0.0.0.0' is not a loopback address" },
                { "does-not-exist.yaml", -ENOENT, 0, 0, "No such file or directory" },
                { "", -EISDIR, 0, 0, "Is a directory" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                expect_load_error(cases[i].file, cases[i].err, cases[i].line, cases[i].col, cases[i].phrase);
}

/* Which of the head's keys a model section gave (the warning of zcp_model_unused_keys), not their values. */
static void test_head_keys(void)
{
        struct zcp_config *cfg = parse_ok("streams:\n  - source: {type: synthetic}\n"
                                          "  - source: {type: synthetic}\n    model: {top_k: 5, classes: [car]}\n"
                                          "  - source: {type: synthetic}\n    model: {min_score: 0.3, nms_iou: 0.5, "
                                          "max_detections: 20, resize: letterbox}\n");

        CHECK(cfg->streams[0].model.head_keys == 0);
        CHECK(cfg->streams[1].model.head_keys == (ZCP_MKEY_TOP_K | ZCP_MKEY_CLASSES));
        CHECK(cfg->streams[2].model.head_keys == (ZCP_MKEY_MIN_SCORE | ZCP_MKEY_NMS_IOU | ZCP_MKEY_MAX_DETECTIONS));
        /* a default spelled out is the same setting: top_k 5 given or not */
        CHECK(cfg->streams[1].model.top_k == cfg->streams[0].model.top_k);
        zcp_config_free(cfg);
}

static void test_inline(void)
{
        struct zcp_config *cfg;
        char cwd[PATH_MAX], want[PATH_MAX + 64], buf[64];

        /* Scalar styles: quoted values are strings; enums and strings accept them. */
        /* Each case names the text the error must point at (its first occurrence). */
        static const struct {
                const char *text, *at, *phrase;
        } cases[] = {
                /* Scalar styles: quoted values are strings; enums and strings accept them. */
                { "streams:\n  - source: {type: file, path: a, loop: \"true\"}\n", "\"true\"",
                  "source.loop: expected a boolean (true/false, yes/no, on/off), got a quoted string 'true'" },
                { "streams:\n  - source: {type: synthetic, speed: '4'}\n", "'4'",
                  "source.speed: expected an unsigned integer, got a quoted string '4'" },
                { "streams:\n  - source: {type: synthetic}\n    motion: {alpha: \"0.5\"}\n", "\"0.5\"",
                  "motion.alpha: expected a number, got a quoted string '0.5'" },
                { "streams:\n  - source: {type: synthetic}\n    motion: {enabled: Yes}\n", "Yes",
                  "motion.enabled: expected a boolean" },
                { "streams:\n  - ring: {slots: }\n    source: {type: synthetic}\n", "}\n",
                  "ring.slots: expected an unsigned integer, got an empty value" },
                { "streams:\n  - source: {type: Synthetic}\n", "Synthetic",
                  "source.type: bad value 'Synthetic' (valid: v4l2, file, synthetic, network)" },
                /* network: its own keys, only there; a network URL is not a file */
                { "streams:\n  - source: {type: file, path: a.mp4, latency_ms: 100}\n", "latency_ms",
                  "source.latency_ms does not apply to source.type file (only to: network)" },
                { "streams:\n  - source: {type: v4l2, protocol: tcp}\n", "protocol", "source.protocol does not apply to source.type v4l2 (only to: network)" },
                { "streams:\n  - source: {type: synthetic, connect_timeout_ms: 500}\n", "connect_timeout_ms",
                  "source.connect_timeout_ms does not apply to source.type synthetic (only to: network)" },
                { "streams:\n  - source: {type: file, path: \"rtsp://cam/s\"}\n", "\"rtsp",
                  "source.path 'rtsp://cam/s' is a URL, and type file reads local files (and file:// URIs): "
                  "use type: network, which reconnects after an outage and counts it" },
                /* a web server's restart is not a missing file: URLs are the network source's */
                { "streams:\n  - source: {type: file, path: \"http://nvr/rec/1.mp4\", loop: true}\n", "\"http",
                  "source.path 'http://nvr/rec/1.mp4' is a URL, and type file reads local files" },
                { "streams:\n  - source: {type: file, path: \"HTTPS://nvr/1.mp4\"}\n", "\"HTTPS",
                  "use type: network" },
                { "streams:\n  - source: {type: network, path: \"rtsp://cam/s\", loop: true}\n", "loop",
                  "source.loop does not apply to source.type network (only to: file)" },
                { "streams:\n  - source: {type: network, path: \"rtsp://cam/s\", pace: fast}\n", "pace",
                  "source.pace does not apply to source.type network (only to: file, synthetic)" },
                { "streams:\n  - source: {type: network, path: /tmp/x}\n", "/tmp",
                  "source.path of type network is a URL" },
                { "streams:\n  - source: {type: network}\n", "type", "source.type network requires source.path" },
                { "streams:\n  - source: {type: network, path: \"udp://0:5000\", protocol: tcp}\n", "tcp",
                  "source.protocol applies to rtsp:// URLs only" },
                { "streams:\n  - source: {type: network, path: \"rtsp://c/s\", latency_ms: 60001}\n", "60001",
                  "source.latency_ms: 60001 is out of range (0..60000)" },
                { "streams:\n  - source: {type: synthetic, format: NV12}\n", "NV12",
                  "source.format: bad value 'NV12' (valid: auto, yuyv, uyvy," },
                { "streams:\n  - source: {type: synthetic, path: [a]}\n", "[a]",
                  "source.path: expected a path or URI, got a sequence" },
                { "streams:\n  - source: {type: synthetic}\n    ring: 4\n", "4\n",
                  "ring: expected a mapping, got a scalar '4'" },
                { "streams: {a: 1}\n", "{a", "streams: expected a sequence of streams, got a mapping" },
                { "streams: -1\n", "-1", "streams: expected a sequence of streams, got a scalar '-1'" },
                { "streams:\n  - source: {type: synthetic}\n    ? [a]\n    : 1\n", "[a]",
                  "keys must be plain names, got a sequence in stream" },
                { "streams:\n  - source: {type: synthetic}\n    model: {mean: 0.5}\n", "0.5",
                  "model.mean: expected a sequence of 3 numbers, got a scalar '0.5'" },
                { "streams:\n  - source: {type: synthetic}\n    model: {mean: [1, x, 2]}\n", "x,",
                  "model.mean: expected a number, got a scalar 'x'" },
                { "streams:\n  - source: {type: synthetic}\n    model: {mean: [1, 2, 3, 4]}\n", "[1",
                  "model.mean: expected exactly 3 numbers, got 4" },
                { "streams:\n  - source: {type: synthetic}\n    model: {std: [1, 1, -0.5]}\n", "-0.5",
                  "model.std: -0.5 is out of range (0, 1e+06]" },
                { "streams:\n  - source: {type: synthetic}\n    model: {std: [1, 1, {a: 1}]}\n", "{a",
                  "model.std: expected a number, got a mapping" },
                { "streams:\n  - source: {type: synthetic, device: \"a\\0b\"}\n", "\"a",
                  "source.device: contains a NUL character" },
                { "streams:\n  - source: {type: synthetic, device: ''}\n", "''", "source.device must not be empty" },
                { "streams:\n  - name: \"\"\n    source: {type: synthetic}\n", "\"\"", "name must not be empty" },
                { "streams:\n  - name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
                  "    source: {type: synthetic}\n", "aaa", "name: too long (at most 63 characters)" },
                { "streams:\n  - name: a/b\n    source: {type: synthetic}\n", "a/b",
                  "name: 'a/b' may contain only A-Z a-z 0-9 _ . -" },
                { "streams:\n  - source: {type: synthetic, box_size: 0x10}\n", "0x10",
                  "expected an unsigned integer, got a scalar '0x10'" },
                { "streams:\n  - source: {type: synthetic, box_size: +16}\n", "+16", "expected an unsigned integer" },
                { "streams:\n  - source: {type: synthetic, box_size: 1.5}\n", "1.5", "expected an unsigned integer" },
                { "streams:\n  - source: {type: synthetic, box_size: 1_000}\n", "1_000", "expected an unsigned integer" },
                { "streams:\n  - source: {type: synthetic, box_size: --1}\n", "--1", "expected an unsigned integer" },
                { "streams:\n  - source: {type: synthetic}\n    motion: {threshold: 0x1p3}\n", "0x1p3",
                  "expected a number, got a scalar '0x1p3'" },
                { "streams:\n  - source: {type: synthetic}\n    motion: {threshold: 1e-400}\n", "1e-400",
                  "motion.threshold: 1e-400 is out of range [0, 255]" },
                { "streams:\n  - source: {type: synthetic}\n    motion: {threshold: -1e-3}\n", "-1e-3",
                  "out of range [0, 255]" },
                { "streams:\n  - source: {type: synthetic}\nmetrics:\n  http: {listen: 10.1.2.3}\n", "listen",
                  "'10.1.2.3' is not a loopback address" },
                { "streams:\n  - source: {type: synthetic}\nmetrics:\n  http: {listen: '::'}\n", "listen",
                  "is not a loopback address" },
                { "streams:\n  - source: {type: synthetic}\nmetrics:\n  http: {listen: localhost.evil}\n", "listen",
                  "is not a loopback address" },
                { "streams:\n  - source: {type: synthetic}\nmetrics:\n  htp: {}\n", "htp",
                  "unknown key 'htp' in metrics (did you mean 'http'?)" },
                { "streams:\n  - sorce: {type: synthetic}\n", "sorce",
                  "unknown key 'sorce' in stream (did you mean 'source'?)" },
                { "stream:\n  - source: {type: synthetic}\n", "stream",
                  "unknown key 'stream' in the top level (did you mean 'streams'?)" },
                { "streams:\n  - source: {type: synthetic}\n  - ~\n", "~", "stream 1: missing required section 'source'" },
                { "streams:\n  - source: {type: synthetic}\n  - 5\n", "5", "stream: expected a mapping, got a scalar '5'" },
                { "streams:\n  - source:\n", "source", "source.type is required" },
                { "streams:\n", "streams", "streams must list at least one stream" },
                { "streams: ~\n", "streams", "streams must list at least one stream" },
                { "streams:\n  - source: {type: synthetic, \"ty\\0pe\": v4l2}\n", "\"ty",
                  "unknown key 'ty\\x00pe' in source" },
                { "streams:\n  - source: {type: synthetic}\n    ring: {\"sl\\nots\": 4}\n", "\"sl",
                  "unknown key 'sl\\x0aots' in ring" },
                { "streams:\n  - source: {type: synthetic}\n    \"ring\": {slots: 3, \"slots\": 4}\n", "\"slots",
                  "duplicate key 'slots' in ring (first at line 3)" },
                { "\xef\xbb\xbfstreams: [\xff]\n", "\xff", "syntax error: invalid leading UTF-8 octet" },
                { "streams:\n  - name: \xc3\xa9t\xc3\xa9\n    source: {type: synthetic}\n    x\xff: 1\n", "\xff",
                  "syntax error" },
                { "streams:\n  - name: \xc3\xa9t\xc3\xa9\n    source: {type: synthetic}\n", "\xc3",
                  "name: '\xc3\xa9t\xc3\xa9' may contain only" },
                { "streams:\n  - source: {type: synthetic}\n\x01\n", "\x01", "syntax error" },
                { "streams:\n  - source: {type: synthetic}\n    ring: {slots: 4}]\n", "]", "syntax error" },
                { "42\n", "42", "the top level must be a mapping, got a scalar" },
                { "'streams'\n", "'", "the top level must be a mapping, got a quoted string" },
                { "~\n", "~", "empty document" },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                expect_parse_error_at(cases[i].text, cases[i].at, cases[i].phrase);
        expect_parse_error("", 1, 1, "empty configuration");

        /* Deep nesting is refused, not recursed into. */
        {
                char deep[400];
                size_t o = 0;
                for (int i = 0; i < 100; i++)
                        deep[o++] = '[';
                for (int i = 0; i < 100; i++)
                        deep[o++] = ']';
                deep[o] = '\0';
                expect_parse_error(deep, 1, 65, "nesting deeper than 64 levels");
        }

        /* A network stream: its keys, their defaults otherwise. */
        cfg = parse_ok("streams:\n  - source: {type: network, path: 'rtsp://cam/s', protocol: tcp, latency_ms: 0,"
                       " connect_timeout_ms: 700, timeout_ms: 900}\n"
                       "  - source: {type: network, path: 'udp://127.0.0.1:5000'}\n");
        CHECK(cfg->streams[0].source.type == ZCP_SOURCE_NETWORK && cfg->streams[0].source.protocol == ZCP_NET_TCP);
        CHECK(cfg->streams[0].source.latency_ms == 0 && cfg->streams[0].source.connect_timeout_ms == 700);
        CHECK(cfg->streams[0].source.timeout_ms == 900);
        CHECK(cfg->streams[1].source.protocol == ZCP_NET_AUTO && cfg->streams[1].source.latency_ms == 200);
        CHECK(cfg->streams[1].source.connect_timeout_ms == 5000);
        CHECK(strcmp(cfg->streams[1].source.path, "udp://127.0.0.1:5000") == 0);
        zcp_config_free(cfg);

        /* Relative paths from memory resolve against the current directory; URIs stay. */
        CHECK(getcwd(cwd, sizeof(cwd)));
        cfg = parse_ok("streams:\n  - source: {type: file, path: clip.mp4}\n"
                       "  - source: {type: file, path: 'file:///x/clip.mp4'}\n"
                       "  - source: {type: file, path: /abs/clip.mp4}\n"
                       "    model: {weights: \"\"}\n");
        snprintf(want, sizeof(want), "%s/clip.mp4", cwd);
        CHECK(strcmp(cfg->streams[0].source.path, want) == 0);
        CHECK(strcmp(cfg->streams[1].source.path, "file:///x/clip.mp4") == 0);
        CHECK(strcmp(cfg->streams[2].source.path, "/abs/clip.mp4") == 0);
        CHECK(strcmp(cfg->streams[2].model.path, default_weights()) == 0);
        CHECK(strcmp(cfg->streams[2].name, "stream2") == 0);
        CHECK(cfg->stream_count == 3);
        zcp_config_free(cfg);

        /* A URI scheme is only kept for source.path. */
        cfg = parse_ok("streams:\n  - source: {type: synthetic}\n    output: {type: file, path: 'x://y'}\n");
        snprintf(want, sizeof(want), "%s/x://y", cwd);
        CHECK_MSG(strcmp(cfg->streams[0].output.path, want) == 0, "%s", cfg->streams[0].output.path);
        zcp_config_free(cfg);

        /* Loopback spellings, booleans and flow style all accepted. */
        static const char *const loopbacks[] = { "localhost", "127.0.0.1", "127.255.1.2", "'::1'", "'::ffff:127.0.0.1'" };
        for (size_t i = 0; i < sizeof(loopbacks) / sizeof(loopbacks[0]); i++) {
                char text[256];
                snprintf(text, sizeof(text),
                         "streams: [{source: {type: synthetic}}]\nmetrics: {http: {listen: %s, enabled: on}}\n",
                         loopbacks[i]);
                cfg = parse_ok(text);
                CHECK(cfg->metrics.http.enabled);
                zcp_config_free(cfg);
        }

        /* Sixteen streams is the maximum. */
        {
                char text[1024];
                size_t o = (size_t)snprintf(text, sizeof(text), "streams:\n");
                for (int i = 0; i < ZCP_CONFIG_MAX_STREAMS; i++)
                        o += (size_t)snprintf(text + o, sizeof(text) - o, "  - source: {type: synthetic}\n");
                cfg = parse_ok(text);
                CHECK(cfg->stream_count == ZCP_CONFIG_MAX_STREAMS);
                CHECK(strcmp(cfg->streams[15].name, "stream15") == 0);
                zcp_config_free(cfg);
        }

        /* Tiny and absent error buffers are fine; the result is still an error. */
        CHECK(zcp_config_parse("inline.yaml", "x: 1\n", 5, &cfg, buf, 8) == -EINVAL);
        CHECK(strlen(buf) == 7 && strncmp(buf, "inline.", 7) == 0);
        CHECK(zcp_config_parse("inline.yaml", "x: 1\n", 5, &cfg, NULL, 0) == -EINVAL);
        CHECK(zcp_config_load(fixture("nope.yaml"), &cfg, NULL, 0) == -ENOENT);
}

/* One key set to one value; `phrase` NULL = must load. */
struct limit_case {
        const char *section;   /* "ring", "metrics.http", "log" ... */
        const char *key;
        const char *value;
        const char *phrase;
        bool at_key;           /* the error points at the key, not the value */
};

/* decoder_threads: its value, and the count of GStreamer streams its auto divides the CPUs by. */
static void test_decoder_threads(void)
{
        struct zcp_config *cfg = parse_ok("streams:\n"
                                          "  - source: {type: file, path: a.mp4, decoder_threads: 3}\n"
                                          "  - source: {type: file, path: b.mp4}\n"
                                          "  - source: {type: synthetic}\n"
                                          "  - source: {type: network, path: \"rtsp://cam/s\"}\n");

        CHECK(cfg->stream_count == 4);
        CHECK(cfg->streams[0].source.decoder_threads == 3 && cfg->streams[1].source.decoder_threads == 0);
        for (uint32_t i = 0; i < cfg->stream_count; i++)
                CHECK_MSG(cfg->streams[i].source.gst_streams == 3, "stream %u: gst_streams %u", i,
                          cfg->streams[i].source.gst_streams);
        zcp_config_free(cfg);
        cfg = parse_ok("streams:\n  - source: {type: synthetic}\n");
        CHECK(cfg->streams[0].source.gst_streams == 1);   /* never 0: auto divides by it */
        zcp_config_free(cfg);
        expect_parse_error_at("streams:\n  - source: {type: v4l2, decoder_threads: 2}\n", "decoder_threads",
                              "source.decoder_threads does not apply to source.type v4l2");
        cfg = parse_ok("streams:\n  - source: {type: network, path: \"rtsp://c/s\", decoder_threads: 64}\n");
        CHECK(cfg->streams[0].source.decoder_threads == 64 && cfg->streams[0].source.gst_streams == 1);
        zcp_config_free(cfg);
        expect_parse_error_at("streams:\n  - source: {type: file, path: a.mp4, decoder_threads: 65}\n", "65",
                              "source.decoder_threads: 65 is out of range (0 or 1..64)");
}

static void test_limits(void)
{
        static const struct limit_case cases[] = {
                { "ring", "slots", "2", NULL, false },
                { "ring", "slots", "256", NULL, false },
                { "ring", "slots", "1", "ring.slots: 1 is out of range (2..256)", false },
                { "ring", "slots", "0", "out of range (2..256)", false },
                { "ring", "slots", "-0", "out of range", false },
                { "ring", "slots", "00000000000000000000000000008", NULL, false },
                { "source", "fps", "1", NULL, false },
                { "source", "fps", "1000", NULL, false },
                { "source", "fps", "1001", "source.fps: 1001 is out of range (1..1000)", false },
                { "source", "fps", "4294967296", "out of range (1..1000)", false },
                { "source", "fps", "18446744073709551615", "out of range", false },
                { "source", "fps", "99999999999999999999999999", "out of range", false },
                { "source", "width", "0", NULL, false },
                { "source", "width", "16", NULL, false },
                { "source", "width", "8192", NULL, false },
                { "source", "width", "14", "source.width: 14 is out of range (0 or 16..8192)", false },
                { "source", "width", "8194", "out of range (0 or 16..8192)", false },
                { "source", "height", "17", "source.height must be even (got 17)", true },
                { "source", "timeout_ms", "9", "out of range (10..600000)", false },
                { "source", "timeout_ms", "600000", NULL, false },
                { "source", "backoff_max_ms", "600001", "out of range (10..600000)", false },
                { "source", "frames", "0", NULL, false },
                { "source", "frames", "1099511627776", NULL, false },
                { "source", "frames", "1099511627777", "out of range (0 or 1..1099511627776)", false },
                { "source", "box_size", "7", "out of range (8..1024)", false },
                { "source", "box_size", "1025", "out of range (8..1024)", false },
                { "source", "speed", "257", "out of range (0..256)", false },
                { "gpu", "device", "64", "gpu.device: 64 is out of range (auto or 0..63)", false },
                { "gpu", "transfer", "zero_copy", "bad value 'zero_copy' (valid: auto, zero-copy, copy)", false },
                { "gpu", "sync", "yield", NULL, false },
                { "model", "input_width", "7", "out of range (0 or 8..4096)", false },
                { "model", "input_height", "4097", "out of range (0 or 8..4096)", false },
                { "model", "top_k", "0", "out of range (1..16)", false },
                { "model", "top_k", "17", "out of range (1..16)", false },
                { "model", "top_k", "16", NULL, false },
                { "model", "threads", "0", NULL, false },
                { "model", "threads", "64", NULL, false },
                { "model", "threads", "65", "model.threads: 65 is out of range (0 or 1..64)", false },
                { "convert", "threads", "4", NULL, false },
                { "convert", "threads", "65", "convert.threads: 65 is out of range (0 or 1..64)", false },
                { "motion", "cell", "1", "out of range (2..256)", false },
                { "motion", "cell", "257", "out of range (2..256)", false },
                { "motion", "threshold", "0", NULL, false },
                { "motion", "threshold", "255.0", NULL, false },
                { "motion", "threshold", "255.0001", "out of range [0, 255]", false },
                { "motion", "alpha", "0", "motion.alpha: 0 is out of range (0, 1]", false },
                { "motion", "alpha", "1e-30", NULL, false },
                { "motion", "alpha", "1.0", NULL, false },
                { "motion", "alpha", "1.000001", "out of range (0, 1]", false },
                { "motion", "alpha", "nan", "expected a number", false },
                { "motion", "alpha", "-inf", "expected a number", false },
                { "motion", "alpha", ".5", NULL, false },
                { "motion", "alpha", "5e-1", NULL, false },
                { "motion", "alpha", "+", "expected a number", false },
                { "motion", "alpha", "1e+", "expected a number", false },
                { "motion", "alpha", "0.5.5", "expected a number", false },
                { "motion", "alpha", "1e", "expected a number", false },
                { "output", "type", "stderr", "bad value 'stderr' (valid: stdout, file, unix, none, mqtt)", false },
                { "metrics.http", "port", "0", "metrics.http.port: 0 is out of range (1..65535)", false },
                { "metrics.http", "port", "65535", NULL, false },
                { "metrics.http", "port", "65536", "out of range (1..65535)", false },
                { "metrics.http", "max_connections", "1025", "out of range (1..1024)", false },
                { "metrics.http", "timeout_s", "0", "out of range (1..3600)", false },
                { "metrics.http", "timeout_s", "3601", "out of range (1..3600)", false },
                { "metrics.http", "snapshot_fps", "0", NULL, false },
                { "metrics.http", "snapshot_fps", "30", NULL, false },
                { "metrics.http", "snapshot_fps", "31", "out of range (0..30)", false },
                { "metrics.http", "listen", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                  "too long (at most 63 characters)", false },
                { "metrics.frame_log", "max_bytes", "4095", "out of range (4096..1099511627776)", false },
                { "metrics.frame_log", "max_bytes", "1099511627776", NULL, false },
                { "metrics.frame_log", "max_bytes", "1099511627777", "out of range", false },
                { "metrics.frame_log", "keep", "0", "out of range (1..100)", false },
                { "metrics.frame_log", "keep", "101", "out of range (1..100)", false },
                { "log", "summary_interval_s", "0", NULL, false },
                { "log", "summary_interval_s", "86400", NULL, false },
                { "log", "summary_interval_s", "86401", "out of range (0..86400)", false },
                { "log", "level", "warn", NULL, false },
                { "log", "level", "warning", "log.level: bad value 'warning' (valid: error, warn, info, debug)", false },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct limit_case *lc = &cases[i];
                bool in_stream = !strchr(lc->section, '.') && strcmp(lc->section, "log") != 0;
                unsigned indent = in_stream ? 6 : (strchr(lc->section, '.') ? 4 : 2);
                char text[1024];
                int n;

                if (in_stream && strcmp(lc->section, "source") == 0) {
                        char kp[128];

                        snprintf(kp, sizeof(kp), "streams.source.%s", lc->key);
                        CHECK(find_key(kp));
                        n = snprintf(text, sizeof(text), "streams:\n  - source:\n      type: %s\n      %s: %s\n",
                                     source_type_for(find_key(kp)), lc->key, lc->value);
                } else if (in_stream && strcmp(lc->section, "source") == 0)
                        n = 0;
                else if (in_stream)
                        n = snprintf(text, sizeof(text),
                                     "streams:\n  - source:\n      type: synthetic\n    %s:\n      %s: %s\n",
                                     lc->section, lc->key, lc->value);
                else if (strchr(lc->section, '.'))
                        n = snprintf(text, sizeof(text), "streams:\n  - source:\n      type: synthetic\nmetrics:\n  %s:\n    %s: %s\n",
                                     strchr(lc->section, '.') + 1, lc->key, lc->value);
                else
                        n = snprintf(text, sizeof(text), "streams:\n  - source:\n      type: synthetic\n%s:\n  %s: %s\n",
                                     lc->section, lc->key, lc->value);
                CHECK(n > 0 && (size_t)n < sizeof(text));
                if (!lc->phrase) {
                        zcp_config_free(parse_ok(text));
                        continue;
                }
                /* The key is on the last line. */
                unsigned line = 0;
                for (const char *p = text; *p; p++)
                        line += *p == '\n';
                expect_parse_error(text, line, lc->at_key ? indent + 1 : indent + (unsigned)strlen(lc->key) + 3,
                                   lc->phrase);
        }
}

static int write_file(const char *path, const void *data, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, data, len);
        close(fd);
        return n == (ssize_t)len ? 0 : -EIO;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
        /* xorshift64*: deterministic across runs and platforms. */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dull;
}

static void test_files(const char *tmp)
{
        char path[PATH_MAX + 64], buf[512];
        struct zcp_config *cfg = NULL;
        const char *head = "streams:\n  - source: {type: synthetic}\n";
        size_t max = ZCP_CONFIG_MAX_BYTES;
        char *big = malloc(max + 2);
        int r;

        CHECK(big);
        /* Exactly at the cap: loads (comments fill it). */
        memset(big, '#', max);
        memcpy(big, head, strlen(head));
        for (size_t i = strlen(head) + 100; i < max; i += 100)
                big[i] = '\n';
        big[max - 1] = '\n';
        snprintf(path, sizeof(path), "%s/at-cap.yaml", tmp);
        CHECK(write_file(path, big, max) == 0);
        cfg = load_ok(path);
        CHECK(cfg->stream_count == 1);
        zcp_config_free(cfg);
        cfg = NULL;
        CHECK(zcp_config_parse("mem.yaml", big, max, &cfg, buf, sizeof(buf)) == 0);
        zcp_config_free(cfg);
        cfg = NULL;

        /* One byte over: refused, at the line and column where the limit is passed. */
        big[max] = '\n';
        unsigned over_line = 1, over_col = 1;
        for (size_t i = 0; i < max; i++) {
                over_col++;
                if (big[i] == '\n') {
                        over_line++;
                        over_col = 1;
                }
        }
        CHECK(over_line > 1000);
        snprintf(path, sizeof(path), "%s/over-cap.yaml", tmp);
        CHECK(write_file(path, big, max + 1) == 0);
        r = zcp_config_load(path, &cfg, buf, sizeof(buf));
        CHECK_MSG(r == -EFBIG, "%d %s", r, buf);
        CHECK(cfg == NULL);
        check_error(buf, path, over_line, over_col, "file too large (1048577 bytes, at most 1048576)");
        r = zcp_config_parse("mem.yaml", big, max + 1, &cfg, buf, sizeof(buf));
        CHECK(r == -EFBIG && cfg == NULL);
        check_error(buf, "mem.yaml", over_line, over_col, "too large");
        CHECK(unlink(path) == 0);
        snprintf(path, sizeof(path), "%s/at-cap.yaml", tmp);
        CHECK(unlink(path) == 0);
        free(big);

        /* Random bytes: an error naming the file, never a crash. */
        for (int round = 0; round < 4; round++) {
                unsigned char junk[4096];
                for (size_t i = 0; i < sizeof(junk); i++)
                        junk[i] = (unsigned char)rng();
                snprintf(path, sizeof(path), "%s/junk%d.yaml", tmp, round);
                CHECK(write_file(path, junk, sizeof(junk)) == 0);
                r = zcp_config_load(path, &cfg, buf, sizeof(buf));
                CHECK_MSG(r == -EINVAL, "%d %s", r, buf);
                CHECK(cfg == NULL);
                check_lines(buf, path);
                CHECK(strstr(buf, "syntax error"));
                CHECK(unlink(path) == 0);
        }

        /* A directory, a FIFO, an unreadable file. */
        r = zcp_config_load(tmp, &cfg, buf, sizeof(buf));
        CHECK(r == -EISDIR && cfg == NULL);
        check_error(buf, tmp, 0, 0, "Is a directory");

        snprintf(path, sizeof(path), "%s/fifo.yaml", tmp);
        CHECK(mkfifo(path, 0600) == 0);
        r = zcp_config_load(path, &cfg, buf, sizeof(buf));
        CHECK(r == -EINVAL && cfg == NULL);
        check_error(buf, path, 0, 0, "not a regular file");
        CHECK(unlink(path) == 0);

        snprintf(path, sizeof(path), "%s/secret.yaml", tmp);
        CHECK(write_file(path, head, strlen(head)) == 0);
        CHECK(chmod(path, 0) == 0);
        if (geteuid() != 0) {
                r = zcp_config_load(path, &cfg, buf, sizeof(buf));
                CHECK(r == -EACCES && cfg == NULL);
                check_error(buf, path, 0, 0, "Permission denied");
        } else {
                /* root reads anything: check as an unprivileged user in a child. */
                pid_t pid = fork();
                int status = 0;
                CHECK(pid >= 0);
                if (pid == 0) {
                        if (setgid(65534) != 0 || setuid(65534) != 0)
                                _exit(3);
                        r = zcp_config_load(path, &cfg, buf, sizeof(buf));
                        if (r != -EACCES || cfg != NULL)
                                _exit(1);
                        check_error(buf, path, 0, 0, "Permission denied");
                        _exit(0);
                }
                CHECK(waitpid(pid, &status, 0) == pid);
                CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
        }
        CHECK(unlink(path) == 0);

        /* Relative config path: relative paths inside resolve against its directory. */
        snprintf(path, sizeof(path), "%s/rel.yaml", tmp);
        static const char rel[] = "streams: [{source: {type: file, path: ../v.mp4}}]\n";
        CHECK(write_file(path, rel, strlen(rel)) == 0);
        char cwd[PATH_MAX], want[PATH_MAX + 64];
        CHECK(getcwd(cwd, sizeof(cwd)));
        CHECK(chdir(tmp) == 0);
        cfg = load_ok("rel.yaml");
        snprintf(want, sizeof(want), "%s", tmp);
        *strrchr(want, '/') = '\0';
        strcat(want, "/v.mp4");
        CHECK_MSG(strcmp(cfg->streams[0].source.path, want) == 0, "%s != %s", cfg->streams[0].source.path, want);
        CHECK(strcmp(cfg->source_path, "rel.yaml") == 0);
        zcp_config_free(cfg);
        CHECK(chdir(cwd) == 0);
        CHECK(unlink(path) == 0);
}

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Byte-wise mutations of a good file: every outcome is success or one good error line. */
static void test_mutations(const char *tmp)
{
        static const char specials[] = ":-[]{}&*!|>'\"#%@`,? \t\n\\0123456789.~";
        char path[PATH_MAX + 64], mpath[PATH_MAX + 64], buf[512];
        unsigned ok = 0, bad = 0, iters = 0;
        double start = now_s();
        char *orig, *mut;
        size_t len;
        FILE *f;

        snprintf(path, sizeof(path), "%s/good-two-streams.yaml", fixture_dir);
        f = fopen(path, "rbe");
        CHECK(f);
        orig = malloc(1 << 16);
        mut = malloc((1 << 16) + 64);
        CHECK(orig && mut);
        len = fread(orig, 1, 1 << 16, f);
        fclose(f);
        CHECK(len > 100 && len < (1 << 16));
        snprintf(mpath, sizeof(mpath), "%s/mutant.yaml", tmp);

        for (iters = 0; iters < 3000 && now_s() - start < 3.0; iters++) {
                size_t mlen = len;
                unsigned edits = 1 + (unsigned)(rng() % 4);
                struct zcp_config *cfg = NULL;
                int r;

                memcpy(mut, orig, len);
                for (unsigned e = 0; e < edits; e++) {
                        size_t at = (size_t)(rng() % mlen);
                        unsigned op = (unsigned)(rng() % 4);
                        char ch = (rng() & 1) ? specials[rng() % (sizeof(specials) - 1)] : (char)rng();
                        if (op == 0 || op == 1) {
                                mut[at] = ch;
                        } else if (op == 2 && mlen > 1) {
                                memmove(mut + at, mut + at + 1, mlen - at - 1);
                                mlen--;
                        } else if (mlen < len + 32) {
                                memmove(mut + at + 1, mut + at, mlen - at);
                                mut[at] = ch;
                                mlen++;
                        }
                }
                memset(buf, 0, sizeof(buf));
                if (iters % 8 == 0) {
                        CHECK(write_file(mpath, mut, mlen) == 0);
                        r = zcp_config_load(mpath, &cfg, buf, sizeof(buf));
                        if (r < 0)
                                check_lines(buf, mpath);
                } else {
                        r = zcp_config_parse(path, mut, mlen, &cfg, buf, sizeof(buf));
                        if (r < 0)
                                check_lines(buf, path);
                }
                if (r == 0) {
                        CHECK(cfg && cfg->stream_count >= 1 && cfg->stream_count <= ZCP_CONFIG_MAX_STREAMS);
                        for (uint32_t i = 0; i < cfg->stream_count; i++) {
                                CHECK(memchr(cfg->streams[i].name, '\0', ZCP_NAME_MAX));
                                CHECK(cfg->streams[i].name[0] != '\0');
                                CHECK(cfg->streams[i].source.type < ZCP_SOURCE_TYPE_COUNT);
                        }
                        zcp_config_free(cfg);
                        ok++;
                } else {
                        CHECK_MSG(r == -EINVAL, "r=%d %s", r, buf);
                        CHECK(cfg == NULL);
                        bad++;
                }
        }
        unlink(mpath);
        printf("mutations: %u (%u loaded, %u refused) in %.2f s\n", iters, ok, bad, now_s() - start);
        CHECK(iters >= 500);
        CHECK(ok > 0 && bad > 0);
        free(orig);
        free(mut);
}

/* output type mqtt: defaults, every key, and keys that only mqtt takes. */
static void test_mqtt(void)
{
        static const char base[] = "streams:\n  - source: {type: synthetic}\n    output: ";
        static const struct {
                const char *output, *at, *phrase;
        } bad[] = {
                { "{type: file, path: x, qos: 1}", "qos", "output.qos applies only to output.type mqtt, not file" },
                { "{type: stdout, broker: b}", "broker", "output.broker applies only to output.type mqtt, not stdout" },
                { "{type: none, password_file: p}", "password_file", "output.password_file applies only to" },
                { "{type: mqtt, path: x}", "path", "output.path does not apply to output.type mqtt" },
                { "{type: mqtt, qos: 2}", "2}", "output.qos: 2 is out of range (0..1)" },
                { "{type: mqtt, queue: 0}", "0}", "output.queue: 0 is out of range (1..1000000)" },
                { "{type: mqtt, host_name: a/b}", "a/b", "host_name" },
                { "{type: mqtt, topic: 'a/+/b'}", "output", "output.topic 'a/+/b' must not contain the MQTT wildcards" },
                { "{type: mqtt, availability_topic: 'a/#'}", "output", "must not contain the MQTT wildcards" },
                { "{type: mqtt, topic: 'a/<cam>'}", "output", "may hold only the placeholders <host> and <stream>" },
                { "{type: mqtt, ca_file: ca, cert_file: c}", "cert_file", "output.cert_file and output.key_file go together" },
                { "{type: mqtt, cert_file: c, key_file: k}", "cert_file", "output.cert_file needs output.ca_file" },
                { "{type: mqtt, password_file: p}", "password_file", "output.password_file needs output.username" },
                { "{type: mqtt, brokr: x}", "brokr", "unknown key 'brokr' in output (did you mean 'broker'?)" },
        };
        struct zcp_config *cfg;
        const struct zcp_mqtt_config *m;
        char text[512], cwd[PATH_MAX], want[PATH_MAX + 16];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(text, sizeof(text), "%s%s\n", base, bad[i].output);
                expect_parse_error_at(text, bad[i].at, bad[i].phrase);
        }

        cfg = parse_ok("streams:\n  - source: {type: synthetic}\n    output: {type: mqtt}\n");
        m = &cfg->streams[0].output.mqtt;
        CHECK(cfg->streams[0].output.type == ZCP_OUTPUT_MQTT);
        CHECK(strcmp(m->broker, "127.0.0.1") == 0 && m->port == 1883 && m->qos == 1 && m->keepalive_s == 30);
        CHECK(m->queue == 1000 && m->backoff_max_ms == 10000);
        CHECK(strcmp(m->topic, "zcpipe/<host>/<stream>/results") == 0);
        CHECK(strcmp(m->availability_topic, "zcpipe/<host>/<stream>/status") == 0);
        CHECK(!m->client_id[0] && !m->host_name[0] && !m->ca_file[0] && !m->username[0] && !m->password_file[0]);
        zcp_config_free(cfg);

        cfg = parse_ok("streams:\n  - source: {type: synthetic}\n    output:\n      type: mqtt\n"
                       "      broker: mqtt.example\n      port: 8883\n      client_id: cam-1\n"
                       "      host_name: gpu-07.rack2\n      topic: site/<host>/<stream>\n"
                       "      availability_topic: site/<host>/up\n      qos: 0\n      keepalive_s: 5\n"
                       "      queue: 1000000\n      backoff_max_ms: 100\n      ca_file: ca.pem\n"
                       "      cert_file: /etc/c.pem\n      key_file: k.pem\n      username: zcp\n"
                       "      password_file: secret\n");
        m = &cfg->streams[0].output.mqtt;
        CHECK(getcwd(cwd, sizeof(cwd)));
        CHECK(strcmp(m->broker, "mqtt.example") == 0 && m->port == 8883 && m->qos == 0 && m->keepalive_s == 5);
        CHECK(strcmp(m->client_id, "cam-1") == 0 && strcmp(m->host_name, "gpu-07.rack2") == 0);
        CHECK(strcmp(m->topic, "site/<host>/<stream>") == 0 && strcmp(m->availability_topic, "site/<host>/up") == 0);
        CHECK(m->queue == 1000000 && m->backoff_max_ms == 100);
        snprintf(want, sizeof(want), "%s/ca.pem", cwd);
        CHECK_MSG(strcmp(m->ca_file, want) == 0, "%s", m->ca_file);
        CHECK(strcmp(m->cert_file, "/etc/c.pem") == 0 && strcmp(m->username, "zcp") == 0);
        snprintf(want, sizeof(want), "%s/secret", cwd);
        CHECK(strcmp(m->password_file, want) == 0);
        zcp_config_free(cfg);
}

/* The supervisor's keys and the pinned budget: values, suffixes, ranges. */
static void test_supervisor_keys(void)
{
        static const struct { const char *text; uint64_t bytes; } sizes[] = {
                { "1048576", 1048576 }, { "512M", 512ull << 20 }, { "4G", 4ull << 30 }, { "4GiB", 4ull << 30 },
                { "2048k", 2ull << 20 }, { "1T", 1ull << 40 }, { "0", 0 },
        };
        static const char *const bad[] = { "1.5G", "12X", "G", "4 G", "-1M", "4GG" };
        const char *s1 = "streams:\n  - source:\n      type: synthetic\n";
        struct zcp_config *cfg;
        char text[512];

        cfg = parse_ok(s1);
        CHECK(cfg->pinned_budget == 0);
        CHECK(cfg->streams[0].restart == ZCP_RESTART_ON_FAILURE);
        CHECK(cfg->streams[0].restart_backoff_max_ms == 30000);
        CHECK(cfg->metrics.http.healthz == ZCP_HEALTHZ_ANY_DOWN);
        zcp_config_free(cfg);

        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                snprintf(text, sizeof(text), "pinned_budget: %s\n%s", sizes[i].text, s1);
                cfg = parse_ok(text);
                CHECK_MSG(cfg->pinned_budget == sizes[i].bytes, "%s: %llu", sizes[i].text,
                          (unsigned long long)cfg->pinned_budget);
                zcp_config_free(cfg);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(text, sizeof(text), "pinned_budget: %s\n%s", bad[i], s1);
                expect_parse_error_at(text, bad[i], "pinned_budget");
        }
        /* Below 1 MiB (but not 0), and past 2^50: out of range. */
        expect_parse_error_at("pinned_budget: 4096\nstreams:\n  - source:\n      type: synthetic\n", "4096",
                              "pinned_budget");
        expect_parse_error_at("pinned_budget: 4096T\nstreams:\n  - source:\n      type: synthetic\n", "4096T",
                              "pinned_budget");

        cfg = parse_ok("metrics:\n  http:\n    healthz: all-down\nstreams:\n  - source:\n      type: synthetic\n"
                       "    restart: never\n    restart_backoff_max_ms: 1000\n");
        CHECK(cfg->metrics.http.healthz == ZCP_HEALTHZ_ALL_DOWN);
        CHECK(cfg->streams[0].restart == ZCP_RESTART_NEVER);
        CHECK(cfg->streams[0].restart_backoff_max_ms == 1000);
        zcp_config_free(cfg);
        expect_parse_error_at("streams:\n  - source:\n      type: synthetic\n    restart: sometimes\n", "sometimes",
                              "restart");
        expect_parse_error_at("streams:\n  - source:\n      type: synthetic\n    restart_backoff_max_ms: 10\n", "10",
                              "restart_backoff_max_ms");
}

/* The whole error text of parsing `text`: every error, in order. */
static void expect_errors(const char *text, const char *want)
{
        struct zcp_config *cfg = NULL;
        static char buf[ZCP_CONFIG_ERRBUF];
        int r;

        r = zcp_config_parse("inline.yaml", text, strlen(text), &cfg, buf, sizeof(buf));
        CHECK_MSG(r == -EINVAL && !cfg, "got %d for:\n%s", r, text);
        check_lines(buf, "inline.yaml");
        CHECK_MSG(strcmp(buf, want) == 0, "errors:\n%s\n--- want:\n%s", buf, want);
}

/* One load reports every error of the file, each at its place, up to ZCP_CONFIG_MAX_ERRORS. */
static void test_all_errors(const char *tmp)
{
        static char text[8192], want[ZCP_CONFIG_ERRBUF], buf[ZCP_CONFIG_ERRBUF];
        struct zcp_config *cfg = NULL;
        char path[PATH_MAX + 64], camera[PATH_MAX + 64], *body, *at;
        size_t o = 0, w = 0;
        FILE *f;
        int r;

        /* A camera's config switched to a file: every key of the camera at once, and the missing path. */
        expect_errors("streams:\n"
                      "  - source:\n"
                      "      type: file\n"
                      "      device: /dev/video0\n"
                      "      width: 1280\n"
                      "      format: auto\n"
                      "      fps: 30\n"
                      "      io: auto\n"
                      "      timeout_ms: 2000\n"
                      "    output:\n"
                      "      type: file\n"
                      "      broker: b\n",
                      "inline.yaml:3:7: source.type file requires source.path\n"
                      "inline.yaml:4:7: source.device does not apply to source.type file (only to: v4l2)\n"
                      "inline.yaml:6:7: source.format does not apply to source.type file (only to: v4l2)\n"
                      "inline.yaml:7:7: source.fps does not apply to source.type file (only to: v4l2, synthetic)\n"
                      "inline.yaml:8:7: source.io does not apply to source.type file (only to: v4l2)\n"
                      "inline.yaml:9:7: source.timeout_ms does not apply to source.type file (only to: v4l2, network)\n"
                      "inline.yaml:11:7: output.type file requires output.path\n"
                      "inline.yaml:12:7: output.broker applies only to output.type mqtt, not file");

        /* Errors of every kind in several sections and streams; a section with a bad key skips its cross-key
         * check (no "requires source.path" for a source whose type is misspelled); said in the order of the
         * file, though found section by section (the duplicate name after the first stream's errors). */
        expect_errors("log: {level: loud, summary: 3}\n"
                      "streams:\n"
                      "  - name: a\n"
                      "    source: {type: fil, path: x.mp4}\n"
                      "    ring: {slots: 1, slots: 2}\n"
                      "  - name: a\n"
                      "    source: {type: synthetic}\n"
                      "    motion: {alpha: 0, cell: x}\n"
                      "metrics: {http: {port: 0}}\n",
                      "inline.yaml:1:14: log.level: bad value 'loud' (valid: error, warn, info, debug)\n"
                      "inline.yaml:1:20: unknown key 'summary' in log\n"
                      "inline.yaml:4:20: source.type: bad value 'fil' (valid: v4l2, file, synthetic, network)\n"
                      "inline.yaml:5:19: ring.slots: 1 is out of range (2..256)\n"
                      "inline.yaml:5:22: duplicate key 'slots' in ring (first at line 5)\n"
                      "inline.yaml:6:11: duplicate stream name 'a' (stream 0 at line 3 has it too)\n"
                      "inline.yaml:8:21: motion.alpha: 0 is out of range (0, 1]\n"
                      "inline.yaml:8:30: motion.cell: expected an unsigned integer, got a scalar 'x'\n"
                      "inline.yaml:9:24: metrics.http.port: 0 is out of range (1..65535)");

        /* The limit: 25 unknown keys give 20 errors and a last line that says it stopped. */
        o = (size_t)snprintf(text, sizeof(text), "streams:\n  - source: {type: synthetic}\n    ring:\n");
        for (int i = 0; i < 25; i++) {
                o += (size_t)snprintf(text + o, sizeof(text) - o, "      bogus%02d: 1\n", i);
                if (i < ZCP_CONFIG_MAX_ERRORS)
                        w += (size_t)snprintf(want + w, sizeof(want) - w, "inline.yaml:%d:7: unknown key 'bogus%02d' in ring\n",
                                              4 + i, i);
        }
        snprintf(want + w, sizeof(want) - w, "inline.yaml: stopped after %d errors; fix these and check again",
                 ZCP_CONFIG_MAX_ERRORS);
        expect_errors(text, want);

        /* A small errbuf: whole lines only, the first always. */
        r = zcp_config_parse("inline.yaml", text, strlen(text), &cfg, buf, 60);
        CHECK(r == -EINVAL && strcmp(buf, "inline.yaml:4:7: unknown key 'bogus00' in ring") == 0);
        r = zcp_config_parse("inline.yaml", text, strlen(text), &cfg, buf, 20);
        CHECK(r == -EINVAL && strcmp(buf, "inline.yaml:4:7: un") == 0);

        /* The shipped camera.yaml turned into a file source (the seven rounds of issue 39): one load. */
        snprintf(camera, sizeof(camera), "%s/config/camera.yaml", root_dir);
        f = fopen(camera, "re");
        CHECK(f);
        o = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[o] = '\0';
        body = strstr(text, "      type: v4l2 ");
        CHECK(body);
        memcpy(body, "      type: file ", 17);
        snprintf(path, sizeof(path), "%s/to-file.yaml", tmp);
        CHECK(write_file(path, text, strlen(text)) == 0);
        r = zcp_config_load(path, &cfg, buf, sizeof(buf));
        CHECK(r == -EINVAL && !cfg);
        CHECK(check_lines(buf, path) == 7);
        for (const char *key = "requires source.path\0source.device \0source.format \0source.fps \0source.io \0"
                               "source.timeout_ms \0source.backoff_max_ms \0"; *key; key += strlen(key) + 1) {
                at = strstr(buf, key);
                CHECK_MSG(at, "no error about %s in:\n%s", key, buf);
        }
        CHECK(unlink(path) == 0);
}

/*
 * ZCP_CONFIG_READ_FILES (zcpipe --check): every file a key names is opened and read; the errors come with
 * the others, at the key; a secret open to group or others is refused; without the flag nothing is read.
 */
static void test_read_files(const char *tmp)
{
        static char buf[ZCP_CONFIG_ERRBUF], text[4 * PATH_MAX];
        static char path[PATH_MAX + 64], secret[PATH_MAX + 64], ca[PATH_MAX + 64], want[3 * PATH_MAX];
        struct zcp_config *cfg = NULL;
        int r;

        snprintf(secret, sizeof(secret), "%s/password", tmp);
        snprintf(ca, sizeof(ca), "%s/ca.crt", tmp);
        CHECK(write_file(secret, "s3cret\n", 7) == 0 && chmod(secret, 0640) == 0);
        CHECK(write_file(ca, "-----BEGIN CERTIFICATE-----\n", 28) == 0);
        snprintf(text, sizeof(text),
                 "streams:\n"
                 "  - source: {type: file, path: missing.mp4}\n"
                 "    model: {path: %s, labels: %s/no-labels.txt}\n"
                 "    output:\n"
                 "      type: mqtt\n"
                 "      ca_file: ca.crt\n"
                 "      cert_file: .\n"
                 "      key_file: %s\n"
                 "      username: u\n"
                 "      password_file: password\n",
                 zcp_test_default_weights(), tmp, secret);
        snprintf(path, sizeof(path), "%s/files.yaml", tmp);
        CHECK(write_file(path, text, strlen(text)) == 0);

        /* Parsing alone reads none of them. */
        cfg = load_ok(path);
        zcp_config_free(cfg);
        cfg = NULL;

        r = zcp_config_load_flags(path, ZCP_CONFIG_READ_FILES, &cfg, buf, sizeof(buf));
        CHECK_MSG(r == -ENOENT && !cfg, "%d: %s", r, buf);
        CHECK_MSG(check_lines(buf, path) == 4, "%s", buf);
        snprintf(want, sizeof(want), "%s:2:32: source.path: cannot open %s/missing.mp4", path, tmp);
        CHECK_MSG(strncmp(buf, want, strlen(want)) == 0 && strstr(buf, "No such file"), "%s", buf);
        snprintf(want, sizeof(want), "%s:3:%zu: model.labels: cannot open %s/no-labels.txt", path,
                 strlen("    model: {path: , labels: ") + strlen(zcp_test_default_weights()) + 1, tmp);
        CHECK_MSG(strstr(buf, want), "%s\n--- lacks:\n%s", buf, want);
        snprintf(want, sizeof(want), "%s:7:18: output.cert_file: cannot read %s", path, tmp);
        CHECK_MSG(strstr(buf, want) && strstr(buf, "Is a directory"), "%s\n--- lacks:\n%s", buf, want);
        snprintf(want, sizeof(want), "%s:10:22: output.password_file: %s is open to group or others (mode 0640): chmod 600 it",
                 path, secret);
        CHECK_MSG(strstr(buf, want), "%s\n--- lacks:\n%s", buf, want);

        /* Put right, it passes; an error in the file itself makes the load -EINVAL, files or not. */
        CHECK(chmod(secret, 0600) == 0);
        snprintf(text, sizeof(text),
                 "streams:\n"
                 "  - source: {type: synthetic}\n"
                 "    model: {path: %s}\n"
                 "    output: {type: mqtt, ca_file: ca.crt, username: u, password_file: password}\n",
                 zcp_test_default_weights());
        CHECK(write_file(path, text, strlen(text)) == 0);
        r = zcp_config_load_flags(path, ZCP_CONFIG_READ_FILES, &cfg, buf, sizeof(buf));
        CHECK_MSG(r == 0 && cfg, "%s", buf);
        zcp_config_free(cfg);
        cfg = NULL;
        strcat(text, "    ring: {slots: 1}\n  - source: {type: file, path: nothere.mp4}\n");
        CHECK(write_file(path, text, strlen(text)) == 0);
        r = zcp_config_load_flags(path, ZCP_CONFIG_READ_FILES, &cfg, buf, sizeof(buf));
        CHECK_MSG(r == -EINVAL && check_lines(buf, path) == 2 && strstr(buf, "nothere.mp4"), "%d: %s", r, buf);

        /* As another user (the service's): a root-owned 0600 secret cannot be read, and says as whom. */
        if (geteuid() == 0) {
                pid_t pid;
                int status;

                CHECK(chmod(tmp, 0755) == 0 && chmod(path, 0644) == 0 && chmod(ca, 0644) == 0);
                snprintf(text, sizeof(text),
                         "streams:\n"
                         "  - source: {type: synthetic}\n"
                         "    model: {enabled: false}\n"
                         "    output: {type: mqtt, ca_file: ca.crt, username: u, password_file: password}\n");
                CHECK(write_file(path, text, strlen(text)) == 0);
                pid = fork();
                CHECK(pid >= 0);
                if (pid == 0) {
                        if (setgid(65534) < 0 || setuid(65534) < 0)
                                _exit(2);
                        r = zcp_config_load_flags(path, ZCP_CONFIG_READ_FILES, &cfg, buf, sizeof(buf));
                        snprintf(want, sizeof(want), "%s:4:71: output.password_file: cannot open %s as uid 65534: "
                                 "Permission denied", path, secret);
                        if (r != -EACCES || strcmp(buf, want) != 0) {
                                fprintf(stderr, "as uid 65534: %d: %s\n--- want:\n%s\n", r, buf, want);
                                _exit(1);
                        }
                        _exit(0);
                }
                CHECK(waitpid(pid, &status, 0) == pid);
                CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the unprivileged check failed");
        }
        CHECK(unlink(path) == 0 && unlink(secret) == 0 && unlink(ca) == 0);
}

static void test_names(void)
{
        CHECK(zcp_enum_from_name(zcp_source_type_names, ZCP_SOURCE_TYPE_COUNT, "file") == ZCP_SOURCE_FILE);
        CHECK(zcp_enum_from_name(zcp_source_type_names, ZCP_SOURCE_TYPE_COUNT, "File") == -1);
        CHECK(zcp_enum_from_name(zcp_transfer_names, ZCP_TRANSFER_COUNT, "zero-copy") == ZCP_TRANSFER_ZERO_COPY);
        CHECK(zcp_enum_from_name(zcp_output_type_names, ZCP_OUTPUT_TYPE_COUNT, "none") == ZCP_OUTPUT_NONE);
        CHECK(zcp_enum_from_name(zcp_sync_names, ZCP_SYNC_COUNT, "") == -1);
        CHECK(strcmp(zcp_pace_names[ZCP_PACE_FAST], "fast") == 0);
        CHECK(strcmp(zcp_v4l2_io_names[ZCP_IO_USERPTR], "userptr") == 0);
        CHECK(strcmp(zcp_drop_policy_names[ZCP_DROP_POLICY_BLOCK], "block") == 0);
        CHECK(strcmp(zcp_backend_kind_names[ZCP_BACKEND_CUDA], "cuda") == 0);
        zcp_config_free(NULL);
}

/* ZCP_MODELDIR names the default model's folder, over both the build tree's and the installed one. */
static void test_modeldir_env(void)
{
        static const char text[] = "streams:\n  - source:\n      type: synthetic\n";
        struct zcp_config *cfg;

        const char *was = getenv("ZCP_MODELDIR");
        char saved[PATH_MAX];

        snprintf(saved, sizeof(saved), "%s", was ? was : "");
        CHECK(setenv("ZCP_MODELDIR", "/opt/models", 1) == 0);
        cfg = parse_ok(text);
        CHECK_MSG(strcmp(cfg->streams[0].model.path, "/opt/models/centernet/model.json") == 0, "weights %s",
                  cfg->streams[0].model.path);
        zcp_config_free(cfg);
        /* Not build/zcpipe, no variable: the installed model, never the source tree's. */
        CHECK(unsetenv("ZCP_MODELDIR") == 0);
        cfg = parse_ok(text);
        CHECK(strcmp(cfg->streams[0].model.path, ZCP_DATADIR "/centernet/model.json") == 0);
        zcp_config_free(cfg);
        if (saved[0])
                CHECK(setenv("ZCP_MODELDIR", saved, 1) == 0);
}

int main(void)
{
        char tmp[] = "/tmp/zcp-test-config-XXXXXX";
        char path[PATH_MAX + 64];

        snprintf(path, sizeof(path), "%s/tests/data/config", zcp_test_src_root());
        if (!realpath(path, fixture_dir)) {
                fprintf(stderr, "fixtures not found at %s (set ZCP_SOURCE_ROOT)\n", path);
                return 1;
        }
        CHECK(realpath(zcp_test_src_root(), root_dir));
        CHECK(mkdtemp(tmp));
        test_modeldir_env();

        test_mqtt();
        zcp_config_keys_foreach(collect_key, NULL);
        test_names();
        test_head_keys();
        test_supervisor_keys();
        test_schema_defaults();
        test_schema_source_types();
        test_minimal();
        test_camera_yaml();
        test_sample_yaml();
        test_two_streams();
        test_bad_fixtures();
        test_inline();
        test_limits();
        test_decoder_threads();
        test_files(tmp);
        test_all_errors(tmp);
        test_read_files(tmp);
        test_mutations(tmp);

        CHECK(rmdir(tmp) == 0);
        printf("config: all checks passed\n");
        return 0;
}
