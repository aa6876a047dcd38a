/* SPDX-License-Identifier: MIT */
#pragma once
/* Reading model files: helpers private to src/model/. Main thread. */
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"

/* A one-line message into errbuf (newlines in names become spaces). */
void zcp_set_err(char *errbuf, size_t errlen, const char *fmt, ...) ZCP_PRINTF(3, 4);
/* Exactly len bytes, or -EIO when the file ends first, or -errno. */
int zcp_read_full(int fd, void *buf, size_t len);
/* Opens a regular file (O_CLOEXEC): the fd and its size, or -errno with a message in errbuf. */
int zcp_open_regular(const char *path, uint64_t *ret_size, char *errbuf, size_t errlen);
