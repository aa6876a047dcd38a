/* SPDX-License-Identifier: MIT */
/*
 * zcp-keys: the configuration schema (zcp_config_keys_foreach, the parser's
 * own key tables) turned into documentation at build time, so that the man
 * page cannot drift from the parser.
 *
 *   zcp-keys man TEMPLATE OUTPUT VERSION
 *       man/zcpipe.yaml.5.in -> zcpipe.yaml.5: each line `.\" key: PATH`
 *       becomes the entry of that key (its name, type, values, default and
 *       the source types it applies to, from the table); the template's own
 *       text after it describes the key. Every key of the schema must have
 *       exactly one such line and every such line must name a key: otherwise
 *       it says which and exits 1 (the build fails). @VERSION@ is replaced.
 *   zcp-keys list
 *       one key a line: path, type, default, source types, values, tab-separated
 *       (tests/unit/check_man.py reads it).
 *
 * A build tool, not installed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

#define MAX_KEYS 256
#define KEY_MARK ".\\\" key: "

static struct zcp_config_key keys[MAX_KEYS];
static size_t key_count;
static unsigned used[MAX_KEYS];

static void collect(const struct zcp_config_key *k, void *userdata)
{
        (void)userdata;
        if (key_count == MAX_KEYS) {
                fprintf(stderr, "zcp-keys: more than %d keys\n", MAX_KEYS);
                exit(1);
        }
        keys[key_count++] = *k;
}

static bool is_leaf(const struct zcp_config_key *k)
{
        return strcmp(k->type, "section") != 0 && strcmp(k->type, "streams") != 0;
}

static bool is_source_key(const struct zcp_config_key *k)
{
        return strncmp(k->path, "streams.source.", 15) == 0;
}

/* "v4l2, file" or "every source type" */
static void sources_text(const struct zcp_config_key *k, char *buf, size_t size)
{
        size_t n = 0;

        if (k->sources == (1u << ZCP_SOURCE_TYPE_COUNT) - 1) {
                snprintf(buf, size, "every source type");
                return;
        }
        buf[0] = '\0';
        for (int t = 0; t < ZCP_SOURCE_TYPE_COUNT && n < size; t++)
                if (k->sources & (1u << t))
                        n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", zcp_source_type_names[t]);
}

/* Text for roff: backslashes and minus signs escaped. */
static void put_roff(FILE *out, const char *s)
{
        for (; *s; s++) {
                if (*s == '\\')
                        fputs("\\e", out);
                else if (*s == '-')
                        fputs("\\-", out);
                else
                        fputc(*s, out);
        }
}

static void put_entry(FILE *out, const struct zcp_config_key *k)
{
        char src[96];

        /* the name as the error messages say it: source.fps, metrics.http.port, log.level */
        fputs(".TP\n.B ", out);
        put_roff(out, strncmp(k->path, "streams.", 8) == 0 ? k->path + 8 : k->path);
        fputs("\n\\fI", out);
        put_roff(out, k->type);
        fputs("\\fR", out);
        if (k->range[0]) {
                fputc(' ', out);
                put_roff(out, k->range);
        }
        if (k->required) {
                fputs("; required", out);
        } else {
                fputs("; default \\fB", out);
                if (k->def[0])
                        put_roff(out, k->def);
                else
                        fputs("\\(dq\\(dq", out);
                fputs("\\fR", out);
        }
        if (is_source_key(k)) {
                sources_text(k, src, sizeof(src));
                fputs(k->sources == (1u << ZCP_SOURCE_TYPE_COUNT) - 1 ? "; for " : "; for source types ", out);
                put_roff(out, src);
        }
        if (k->reads_file)
                fputs("; zcpipe \\-\\-check reads the file", out);
        fputs(".\n.br\n", out);
}

static int find_key(const char *path)
{
        for (size_t i = 0; i < key_count; i++)
                if (strcmp(keys[i].path, path) == 0)
                        return (int)i;
        return -1;
}

static int man(const char *template, const char *output, const char *version)
{
        char line[4096];
        FILE *in = fopen(template, "re"), *out;
        unsigned lineno = 0, errors = 0;

        if (!in) {
                perror(template);
                return 1;
        }
        out = fopen(output, "we");
        if (!out) {
                perror(output);
                fclose(in);
                return 1;
        }
        while (fgets(line, sizeof(line), in)) {
                char *at, *p;

                lineno++;
                if (strncmp(line, KEY_MARK, strlen(KEY_MARK)) == 0) {
                        char *path = line + strlen(KEY_MARK);
                        int i;

                        path[strcspn(path, " \t\n")] = '\0';
                        i = find_key(path);
                        if (i < 0 || !is_leaf(&keys[i])) {
                                fprintf(stderr, "%s:%u: '%s' is not a key of the configuration schema\n", template,
                                        lineno, path);
                                errors++;
                                continue;
                        }
                        if (used[i]++) {
                                fprintf(stderr, "%s:%u: key %s described twice\n", template, lineno, path);
                                errors++;
                        }
                        put_entry(out, &keys[i]);
                        continue;
                }
                p = line;
                while ((at = strstr(p, "@VERSION@")) != NULL) {
                        fwrite(p, 1, (size_t)(at - p), out);
                        fputs(version, out);
                        p = at + strlen("@VERSION@");
                }
                fputs(p, out);
        }
        fclose(in);
        for (size_t i = 0; i < key_count; i++) {
                if (is_leaf(&keys[i]) && !used[i]) {
                        fprintf(stderr, "%s: key %s is not described: add a line '" KEY_MARK "%s' and its text\n",
                                template, keys[i].path, keys[i].path);
                        errors++;
                }
        }
        if (fclose(out) != 0) {
                perror(output);
                errors++;
        }
        if (errors) {
                remove(output);
                return 1;
        }
        return 0;
}

static void list(void)
{
        char src[96];

        for (size_t i = 0; i < key_count; i++) {
                const struct zcp_config_key *k = &keys[i];

                if (!is_leaf(k))
                        continue;
                sources_text(k, src, sizeof(src));
                printf("%s\t%s\t%s\t%s\t%s\n", k->path, k->type, k->required ? "(required)" : k->def,
                       is_source_key(k) ? src : "-", k->range);
        }
}

int main(int argc, char **argv)
{
        zcp_config_keys_foreach(collect, NULL);
        if (argc == 2 && strcmp(argv[1], "list") == 0) {
                list();
                return 0;
        }
        if (argc == 5 && strcmp(argv[1], "man") == 0)
                return man(argv[2], argv[3], argv[4]);
        fprintf(stderr, "usage: zcp-keys man TEMPLATE OUTPUT VERSION | zcp-keys list\n");
        return 2;
}
