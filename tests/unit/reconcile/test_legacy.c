/*
 * Unit tests for reconcile/legacy.h's name check: the reference provider's endpoint record
 * names "<cluster>-<6 lowercase hex>.<dnsDomain>" are recognised for their own cluster and
 * domain only, so a MaasCluster that lost its status still adopts the reference's record
 * while a host a user set is left alone.
 */
#include "../../../reconcile/legacy.h"
#include "reconcile_world.h"

static void test_legacy__reference_record_names(void **state)
{
        (void)state;
        /* the reference's unit test: dns-test-xxxxxx.maas.com, 24 characters */
        assert_true(
                legacy_reference_record_name("dns-test-9e41c7.maas.com", "dns-test", "maas.com"));
        assert_true(legacy_reference_record_name("legacy-000000.maas", "legacy", "maas"));
        /* another cluster's, another domain's, or not six lowercase hex digits */
        assert_false(legacy_reference_record_name("other-9e41c7.maas", "legacy", "maas"));
        assert_false(legacy_reference_record_name("legacy-9e41c7.lab", "legacy", "maas"));
        assert_false(legacy_reference_record_name("legacy-9E41C7.maas", "legacy", "maas"));
        assert_false(legacy_reference_record_name("legacy-9e41c.maas", "legacy", "maas"));
        assert_false(legacy_reference_record_name("legacy-9e41c7x.maas", "legacy", "maas"));
        assert_false(legacy_reference_record_name("legacy-9e41g7.maas", "legacy", "maas"));
        assert_false(legacy_reference_record_name("legacy_9e41c7.maas", "legacy", "maas"));
        assert_false(legacy_reference_record_name("legacy-9e41c7.maas.", "legacy", "maas"));
        /* a user's endpoint: an IP or a load balancer */
        assert_false(legacy_reference_record_name("10.0.0.10", "legacy", "maas"));
        assert_false(legacy_reference_record_name("api.example.com", "legacy", "maas"));
        assert_false(legacy_reference_record_name(NULL, "legacy", "maas"));
        assert_false(legacy_reference_record_name("legacy-9e41c7.maas", NULL, "maas"));
        assert_false(legacy_reference_record_name("-9e41c7.maas", "", "maas"));
        assert_false(legacy_reference_record_name("legacy-9e41c7.", "legacy", ""));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_legacy__reference_record_names),
        };

        return cmocka_run_group_tests_name("legacy", tests, NULL, NULL);
}
