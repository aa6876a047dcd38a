/* SPDX-License-Identifier: MIT */
#pragma once
/*
 * Errors: functions that can fail return >= 0 on success, a negative errno,
 * or one of the project's own codes below. The codes sit outside errno's
 * range (the kernel reserves -1 .. -4095, MAX_ERRNO, for errno values), so
 * they never collide with one; strerror() knows none of them: log any of
 * these values with zcp_strerror(), never strerror(-err). Each is
 * -(ZCP_ERR_BASE + the exit code main.c maps it to, core/exitcode.h), to be
 * readable in a log.
 */
#define ZCP_ERR_BASE 100000

/* The source could not be opened (missing or bad file, not a video): exit 66. */
#define ZCP_ERR_INPUT      (-(ZCP_ERR_BASE + 66))
/* The configuration asks for what the device or file cannot do: exit 78. */
#define ZCP_ERR_CONFIG     (-(ZCP_ERR_BASE + 78))
/* Sticky GPU error (illegal address and its kin): the process must restart, exit 86. */
#define ZCP_ERR_GPU_STICKY (-(ZCP_ERR_BASE + 86))

/*
 * A message for err: a negative errno (strerror's text) or a ZCP_ERR_* code.
 * A positive errno is accepted as its negative. Never NULL; the string is
 * static (any thread).
 */
const char *zcp_strerror(int err);
