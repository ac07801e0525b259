#pragma once
/*
 * compiler: attributes and tiny helpers shared by every module. Attributes only; this is
 * not a "common.h" and must never include another project header.
 */

#include <stddef.h>

#define MUST_CHECK                    __attribute__((warn_unused_result))
#define PRINTF_LIKE(f, a)             __attribute__((format(printf, f, a)))
#define UNUSED                        __attribute__((unused))
#define NORETURN                      __attribute__((noreturn))
#define ARRAY_SIZE(a)                 (sizeof(a) / sizeof((a)[0]))
#define container_of(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))
/* container_of for a pointer to const: container_of_const(p, struct x, member). */
#define container_of_const(p, type, member) \
        ((const type *)(const void *)((const char *)(p)-offsetof(type, member)))

/* Banned functions (non-reentrant or unbounded: strcpy strcat strtok sprintf gmtime localtime
 * atoi atol, c-style.md 6.18) are enforced by scripts/lint, which scripts/test runs. */
