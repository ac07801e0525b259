#pragma once
/*
 * utf8_oracle: an independent check that a NUL-terminated string is valid UTF-8 (RFC 3629:
 * shortest form, no surrogates, nothing past U+10FFFF), for tests and fuzz drivers that
 * judge what the code under test lets through. Header-only so the fuzz drivers, which do
 * not link the test support, share it.
 */
#include <stdbool.h>

static inline bool utf8_oracle_valid(const unsigned char *s)
{
        while (*s) {
                unsigned c = *s, n = c < 0x80 ? 0 : c < 0xC2 ? 9 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
                unsigned cp = n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;

                if (n == 9 || c > 0xF4)
                        return false;
                s++;
                for (unsigned i = 0; i < n; i++, s++) {
                        if ((*s & 0xC0) != 0x80)
                                return false;
                        cp = cp << 6 | (*s & 0x3F);
                }
                if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
                    (cp >= 0xD800 && cp < 0xE000))
                        return false;
        }
        return true;
}
