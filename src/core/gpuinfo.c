/* SPDX-License-Identifier: MIT */
/* The table of GPUs in use (gpuinfo.h). */
#include <pthread.h>
#include <stdio.h>

#include "core/gpuinfo.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct zcp_gpu_info table[ZCP_GPU_INFO_MAX];
static uint32_t count;

const char *zcp_cuda_version_str(int v, char *buf, unsigned size)
{
        snprintf(buf, size, "%d.%d", v / 1000, (v % 1000) / 10);
        return buf;
}

void zcp_gpu_info_set(const struct zcp_gpu_info *info)
{
        uint32_t i;

        pthread_mutex_lock(&lock);
        for (i = 0; i < count && table[i].device != info->device; i++)
                ;
        if (i < count) {
                table[i] = *info;
        } else if (count < ZCP_GPU_INFO_MAX) {
                /* Kept sorted by device, so exports list them in a stable order. */
                for (i = count; i > 0 && table[i - 1].device > info->device; i--)
                        table[i] = table[i - 1];
                table[i] = *info;
                count++;
        }
        pthread_mutex_unlock(&lock);
}

void zcp_gpu_info_mark_sticky(uint32_t device)
{
        pthread_mutex_lock(&lock);
        for (uint32_t i = 0; i < count; i++)
                if (table[i].device == device)
                        table[i].sticky = true;
        pthread_mutex_unlock(&lock);
}

uint32_t zcp_gpu_info_list(struct zcp_gpu_info *ret, uint32_t max)
{
        uint32_t n;

        pthread_mutex_lock(&lock);
        n = count < max ? count : max;
        for (uint32_t i = 0; i < n; i++)
                ret[i] = table[i];
        pthread_mutex_unlock(&lock);
        return n;
}

void zcp_gpu_info_reset(void)
{
        pthread_mutex_lock(&lock);
        count = 0;
        pthread_mutex_unlock(&lock);
}
