/* SPDX-License-Identifier: MIT */
/*
 * The fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput() once on
 * every file named on the command line (directories: every file in them),
 * so the seed corpora and every regression input in tests/fuzz/corpus/ run
 * in every build, gcc included. Exits 0 when every input passed.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
        FILE *f = fopen(path, "rbe");
        uint8_t *buf;
        long len;

        FUZZ_CHECK(f);
        FUZZ_CHECK(fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0);
        buf = malloc((size_t)len + 1);
        FUZZ_CHECK(buf && fread(buf, 1, (size_t)len, f) == (size_t)len);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, (size_t)len);
        free(buf);
        return 1;
}

int main(int argc, char **argv)
{
        int n = 0;

        for (int i = 1; i < argc; i++) {
                struct stat st;
                DIR *d;
                struct dirent *e;

                FUZZ_CHECK(stat(argv[i], &st) == 0);
                if (!S_ISDIR(st.st_mode)) {
                        n += run_file(argv[i]);
                        continue;
                }
                d = opendir(argv[i]);
                FUZZ_CHECK(d);
                while ((e = readdir(d))) {
                        char path[4096];

                        if (e->d_name[0] == '.')
                                continue;
                        snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                        n += run_file(path);
                }
                closedir(d);
        }
        FUZZ_CHECK(n > 0);
        printf("%s: %d inputs passed\n", argv[0], n);
        return 0;
}
