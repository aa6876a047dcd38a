/* SPDX-License-Identifier: MIT */
#pragma once
/* Process exit codes (documented in README.md and zcpipe --help). */
enum zcp_exit {
        ZCP_EXIT_OK         = 0,   /* done: file ended, or stopped by SIGTERM/SIGINT */
        ZCP_EXIT_FAILURE    = 1,   /* a stream failed at run time (see the log) */
        ZCP_EXIT_USAGE      = 64,  /* bad command line */
        ZCP_EXIT_NOINPUT    = 66,  /* an input file is missing, unreadable or not a video */
        ZCP_EXIT_NO_DEVICE  = 69,  /* backend: cuda asked for and no usable GPU */
        ZCP_EXIT_INTERNAL   = 70,  /* internal error (a bug): please report */
        ZCP_EXIT_CONFIG     = 78,  /* bad configuration or weights: systemd does not restart */
        ZCP_EXIT_GPU_FATAL  = 86,  /* sticky GPU error: the process must restart */
};
