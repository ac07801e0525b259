/* base64: encoder and strict decoder (no whitespace, padding required). */
#include "base64.h"

#include <stdint.h>
#include <stdlib.h>

#include "err.h"
#include "xalloc.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const void *data, size_t n)
{
        const unsigned char *in = data;
        char *out = xmalloc((n + 2) / 3 * 4 + 1);
        size_t o = 0;

        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t)in[i] << 16;

                if (i + 1 < n)
                        v |= (uint32_t)in[i + 1] << 8;
                if (i + 2 < n)
                        v |= in[i + 2];
                out[o++] = alphabet[(v >> 18) & 63];
                out[o++] = alphabet[(v >> 12) & 63];
                out[o++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
                out[o++] = i + 2 < n ? alphabet[v & 63] : '=';
        }
        out[o] = '\0';
        return out;
}

static int sextet(char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

/* Decodes one 4-character group; returns the number of bytes produced or -1. */
static int decode_group(const char *s, bool last, unsigned char *out)
{
        int a = sextet(s[0]);
        int b = sextet(s[1]);
        int c = s[2] == '=' && last ? 0 : sextet(s[2]);
        int d = s[3] == '=' && last ? 0 : sextet(s[3]);
        uint32_t v;

        if (a < 0 || b < 0 || c < 0 || d < 0 || (s[2] == '=' && s[3] != '='))
                return -1;
        v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        out[0] = (unsigned char)(v >> 16);
        out[1] = (unsigned char)(v >> 8);
        out[2] = (unsigned char)v;
        return s[2] == '=' ? 1 : s[3] == '=' ? 2 : 3;
}

int base64_decode(const char *s, size_t n, unsigned char **ret, size_t *ret_len)
{
        unsigned char *out;
        size_t o = 0;

        if (n % 4 != 0)
                return CM_EPARSE;
        out = xmalloc(n / 4 * 3 + 1);
        for (size_t i = 0; i < n; i += 4) {
                int k = decode_group(s + i, i + 4 == n, out + o);

                if (k < 0) {
                        free(out);
                        return CM_EPARSE;
                }
                o += (size_t)k;
        }
        out[o] = '\0';
        *ret = out;
        *ret_len = o;
        return CM_OK;
}
