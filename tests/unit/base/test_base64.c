/* base64: RFC 4648 vectors both ways, and strict rejection of malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base64.h"

static const char *const vectors[][2] = {
        { "", "" },
        { "f", "Zg==" },
        { "fo", "Zm8=" },
        { "foo", "Zm9v" },
        { "foob", "Zm9vYg==" },
        { "fooba", "Zm9vYmE=" },
        { "foobar", "Zm9vYmFy" },
};

static void test_base64__rfc4648_vectors_round_trip(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
                char *enc = base64_encode(vectors[i][0], strlen(vectors[i][0]));
                unsigned char *dec = NULL;
                size_t n = 0;

                assert_string_equal(enc, vectors[i][1]);
                assert_int_equal(base64_decode(enc, strlen(enc), &dec, &n), 0);
                assert_int_equal(n, strlen(vectors[i][0]));
                assert_memory_equal(dec, vectors[i][0], n);
                free(enc);
                free(dec);
        }
}

static void test_base64__binary_bytes_round_trip(void **state)
{
        unsigned char bytes[256];
        unsigned char *dec = NULL;
        size_t n = 0;
        char *enc;

        (void)state;
        for (int i = 0; i < 256; i++)
                bytes[i] = (unsigned char)i;
        enc = base64_encode(bytes, sizeof(bytes));
        assert_int_equal(base64_decode(enc, strlen(enc), &dec, &n), 0);
        assert_int_equal(n, sizeof(bytes));
        assert_memory_equal(dec, bytes, n);
        free(enc);
        free(dec);
}

static void test_base64__malformed_input_rejected(void **state)
{
        static const char *const bad[] = { "Zg=",  "Z===", "Zm9v!", "Zg==Zg==",
                                           "=Zg=", "Zm 9", "Zm9v\n" };
        unsigned char *dec = NULL;
        size_t n = 0;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_not_equal(base64_decode(bad[i], strlen(bad[i]), &dec, &n), 0);
        assert_null(dec);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_base64__rfc4648_vectors_round_trip),
                cmocka_unit_test(test_base64__binary_bytes_round_trip),
                cmocka_unit_test(test_base64__malformed_input_rejected),
        };

        return cmocka_run_group_tests_name("base64", tests, NULL, NULL);
}
