/* SPDX-License-Identifier: MIT */
/*
 * mdwe_exec COMMAND [ARG...]: runs COMMAND under the seccomp filter systemd
 * (252, x86-64) installs for MemoryDenyWriteExecute=yes, so the unit's
 * setting is tested without systemd (tests/integration/test_service.py):
 *
 *   mmap() with PROT_WRITE and PROT_EXEC both set      -> EPERM
 *   mprotect() / pkey_mprotect() adding PROT_EXEC      -> EPERM
 *   shmat() with SHM_EXEC                              -> EPERM
 *
 * Exits 77 (skip) where it cannot install the filter (other architecture,
 * seccomp off), 126 if the filter does not refuse a W+X mapping, else execs.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARG(n) (offsetof(struct seccomp_data, args[n]))

int main(int argc, char **argv)
{
#if defined(__x86_64__)
        struct sock_filter insns[] = {
                /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
                /* 2 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                /* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                /* 4 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 3),
                /* 5 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG(2)),
                /* 6 */ BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_WRITE | PROT_EXEC),
                /* 7 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_WRITE | PROT_EXEC, 8, 9),
                /* 8 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 2, 0),
                /* 9 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pkey_mprotect, 1, 0),
                /* 10 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_shmat, 3, 6),
                /* 11 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG(2)),
                /* 12 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 3, 4),
                /* 13 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                /* 14 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG(2)),
                /* 15 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SHM_EXEC, 0, 1),
                /* 16 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
                /* 17 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };
        void *p;

        if (argc < 2) {
                fprintf(stderr, "usage: mdwe_exec COMMAND [ARG...]\n");
                return 64;
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
                printf("mdwe_exec: cannot install the seccomp filter: %s\n", strerror(errno));
                return 77;
        }
        /* The filter must bite, or the test proves nothing. */
        p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
                fprintf(stderr, "mdwe_exec: a writable+executable mapping was allowed\n");
                return 126;
        }
        p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED || mprotect(p, 4096, PROT_READ | PROT_EXEC) == 0) {
                fprintf(stderr, "mdwe_exec: mprotect(PROT_EXEC) was allowed\n");
                return 126;
        }
        munmap(p, 4096);
        execvp(argv[1], argv + 1);
        fprintf(stderr, "mdwe_exec: %s: %s\n", argv[1], strerror(errno));
        return 127;
#else
        (void)argc;
        (void)argv;
        printf("mdwe_exec: the filter is written for x86-64 only\n");
        return 77;
#endif
}
