/*
 * The hostname of a MaasMachine's VM (maasmachine_compose.c): how the VM is found again
 * after a crash, so it must be a valid MAAS hostname (lowercase letters, digits, inner
 * hyphens, one label), stable for the same MaasMachine and different for another one (its
 * UID), whatever the MaasMachine's name holds (dots, capitals, a length near 253).
 */
#include <stdio.h>
#include <string.h>

#include "../../../reconcile/maasmachine_steps.h"
#include "reconcile_world.h"

static bool valid_label(const char *h)
{
        size_t n = strlen(h);

        if (n == 0 || n > 63 || h[0] == '-' || h[n - 1] == '-')
                return false;
        for (const char *s = h; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-'))
                        return false;
        return true;
}

static void test_vm_hostname__valid_stable_and_unique(void **state)
{
        static const char *const names[] = { "demo-md-0-abcde", "Demo.MD.0", "a..b--c.", "-x-", "",
                                             "0123456789" };
        char long_name[260];

        (void)state;
        memset(long_name, 'q', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = '\0';
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                char *h = maasmachine_vm_hostname(names[i], "5f3c9a1e-0b7d-4e21-9c55-1a2b3c4d5e6f");
                char *again =
                        maasmachine_vm_hostname(names[i], "5f3c9a1e-0b7d-4e21-9c55-1a2b3c4d5e6f");
                char *other =
                        maasmachine_vm_hostname(names[i], "77aa0000-0b7d-4e21-9c55-1a2b3c4d5e6f");

                assert_true(valid_label(h));
                assert_string_equal(h, again);
                assert_string_not_equal(h, other);
                free(h);
                free(again);
                free(other);
        }
        {
                char *h = maasmachine_vm_hostname("Demo.MD.0", "5f3c9a1e-0b7d");

                assert_string_equal(h, "demo-md-0-5f3c9a1e0b7d");
                free(h);
                h = maasmachine_vm_hostname(long_name, "5f3c9a1e-0b7d-4e21-9c55-1a2b3c4d5e6f");
                assert_true(valid_label(h));
                free(h);
                h = maasmachine_vm_hostname("x", NULL); /* no UID yet: still a label */
                assert_true(valid_label(h));
                free(h);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_vm_hostname__valid_stable_and_unique),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
