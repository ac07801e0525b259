/*
 * maas_decode: machine lists read element by element agree with the whole-tree decoder;
 * a malformed element fails the whole list (nothing half-decoded is returned); numbers
 * MAAS should never send (8e192 MiB of memory, negative CPUs) decode as "unknown" instead of
 * reaching an out-of-range conversion.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "json.h"
#include "maas_client.h"
#include "maas_decode.h"

static const char machines[] =
        "[{\"system_id\":\"abc123\",\"hostname\":\"node-1\",\"status\":6,\"status_name\":"
        "\"Deployed\",\"architecture\":\"arm64/"
        "generic\",\"cpu_count\":8,\"memory\":16384,\"swap_size\":0,\"zone\":{\"name\":"
        "\"az1\"},\"pool\":{\"name\":\"capi\"},\"tag_names\":[\"gpu\",\"ssd\"],"
        "\"ip_addresses\":[\"10.0.0.5\"],\"owner_data\":{\"k\":\"v\"}},\n"
        " {\"system_id\":\"def456\",\"hostname\":\"node-2\",\"status\":4,\"cpu_count\":4,"
        "\"memory\":8192,\"zone\":{\"name\":\"az2\"},\"pool\":{\"name\":\"capi\"},"
        "\"tag_names\":[],\"interface_set\":[{\"name\":\"eth0\",\"links\":[{\"subnet\":"
        "{\"cidr\":\"10.0.0.0/24\"}}]}]}]";

static void test_maas_decode__text_list_equals_tree_list(void **state)
{
        struct maas_node_list a = { 0 }, b = { 0 };
        cJSON *tree = NULL;

        (void)state;
        assert_int_equal(maas_node_list_from_text(machines, strlen(machines), &a), 0);
        assert_int_equal(json_parse(machines, strlen(machines), &tree), 0);
        assert_int_equal(maas_node_list_from_json(tree, &b), 0);
        assert_int_equal(a.n, 2);
        assert_int_equal(b.n, 2);
        for (size_t i = 0; i < a.n; i++) {
                assert_string_equal(a.items[i].system_id, b.items[i].system_id);
                assert_string_equal(a.items[i].hostname, b.items[i].hostname);
                assert_string_equal(a.items[i].zone, b.items[i].zone);
                assert_int_equal(a.items[i].cpu_count, b.items[i].cpu_count);
                assert_int_equal(a.items[i].memory_mib, b.items[i].memory_mib);
                assert_int_equal(a.items[i].tags.n, b.items[i].tags.n);
        }
        assert_string_equal(a.items[0].tags.v[1], "ssd");
        assert_string_equal(a.items[0].architecture, "arm64/generic");
        assert_string_equal(a.items[1].architecture, ""); /* MAAS named none */
        assert_string_equal(a.items[0].ip_addresses.v[0], "10.0.0.5");
        cJSON_Delete(tree);
        maas_node_list_release(&a);
        maas_node_list_release(&b);
}

static void test_maas_decode__a_bad_element_fails_the_list(void **state)
{
        static const char *const bad[] = {
                "[{\"system_id\":\"a\"},{\"hostname\":\"no id\"}]",
                "[{\"system_id\":\"a\"},{\"system_id\":\"b\",}]",
                "[{\"system_id\":\"a\"},42]",
                "{\"system_id\":\"a\"}",
                "",
        };
        struct maas_node_list l = { .n = 99 };

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(maas_node_list_from_text(bad[i], strlen(bad[i]), &l), CM_EPARSE);
                assert_int_equal(l.n, 99); /* untouched */
        }
        assert_int_equal(maas_node_list_from_text("[]", 2, &l), 0);
        assert_int_equal(l.n, 0);
}

static void test_maas_decode__absurd_numbers_decode_as_unknown(void **state)
{
        static const char text[] =
                "[{\"system_id\":\"x\",\"status\":1e300,\"cpu_count\":-5,\"memory\":8e192,"
                "\"swap_size\":-1e300},{\"system_id\":\"y\",\"cpu_count\":2.5,\"memory\":"
                "9007199254740991}]";
        struct maas_node_list l = { 0 };

        (void)state;
        assert_int_equal(maas_node_list_from_text(text, strlen(text), &l), 0);
        assert_int_equal(l.items[0].status, -1);
        assert_int_equal(l.items[0].cpu_count, 0);
        assert_int_equal(l.items[0].memory_mib, 0);
        assert_int_equal(l.items[0].swap_size, -1);
        assert_int_equal(l.items[1].cpu_count, 2);
        assert_int_equal(l.items[1].memory_mib, 9007199254740991LL);
        maas_node_list_release(&l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_maas_decode__text_list_equals_tree_list),
                cmocka_unit_test(test_maas_decode__a_bad_element_fails_the_list),
                cmocka_unit_test(test_maas_decode__absurd_numbers_decode_as_unknown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
