/*
 * Unit tests for reconciler_table (the provider's per-machine tables: allocate_tried,
 * node_done, released, ...): a hashed index over a dense array. Random puts and deletes
 * checked after every step against a plain reference, with enough keys to wrap the probe
 * sequences and grow the index several times; and iteration over items[0..n) while
 * deleting, as note_released does.
 */
#include <stdio.h>

#include "../../../reconcile/reconciler.h"
#include "reconcile_world.h"

#define KEYS 3000

static void key_of(unsigned i, char *buf, size_t len)
{
        (void)snprintf(buf, len, "ns1/machine-%u", i);
}

static void check_all(struct reconciler_table *t, const bool *in, const int64_t *val)
{
        char key[32];
        size_t n = 0;

        for (unsigned i = 0; i < KEYS; i++) {
                struct reconciler_entry *e;

                key_of(i, key, sizeof(key));
                e = reconciler_table_get(t, key);
                if (in[i]) {
                        assert_non_null(e);
                        assert_string_equal(e->key, key);
                        assert_int_equal(e->a, val[i]);
                        n++;
                } else {
                        assert_null(e);
                }
        }
        assert_int_equal(t->n, n);
}

static void test_table__random_puts_and_deletes_agree_with_a_reference(void **state)
{
        struct reconciler_table t = { 0 };
        static bool in[KEYS];
        static int64_t val[KEYS];
        unsigned seed = 12345;
        char key[32];

        (void)state;
        assert_null(reconciler_table_get(&t, "absent"));
        reconciler_table_del(&t, "absent"); /* on an empty table: nothing */
        for (unsigned step = 0; step < 40000; step++) {
                unsigned i;

                seed = seed * 1103515245u + 12345u;
                i = (seed >> 8) % KEYS;
                key_of(i, key, sizeof(key));
                if ((seed >> 4) % 3 != 0) { /* puts outnumber deletes: the table grows */
                        reconciler_table_put(&t, key)->a = (int64_t)step;
                        in[i] = true;
                        val[i] = (int64_t)step;
                } else {
                        reconciler_table_del(&t, key);
                        in[i] = false;
                }
                if (step % 4000 == 0)
                        check_all(&t, in, val);
        }
        check_all(&t, in, val);
        reconciler_table_release(&t);
        assert_int_equal(t.n, 0);
        assert_null(reconciler_table_get(&t, "ns1/machine-1"));
}

static void test_table__deleting_while_iterating_backwards(void **state)
{
        struct reconciler_table t = { 0 };
        char key[32];

        (void)state;
        for (unsigned i = 0; i < 500; i++) {
                key_of(i, key, sizeof(key));
                reconciler_table_put(&t, key)->a = i % 2;
        }
        for (size_t i = t.n; i-- > 0;)
                if (t.items[i].a == 1)
                        reconciler_table_del(&t, t.items[i].key);
        assert_int_equal(t.n, 250);
        for (unsigned i = 0; i < 500; i++) {
                key_of(i, key, sizeof(key));
                if (i % 2)
                        assert_null(reconciler_table_get(&t, key));
                else
                        assert_non_null(reconciler_table_get(&t, key));
        }
        reconciler_table_release(&t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table__random_puts_and_deletes_agree_with_a_reference),
                cmocka_unit_test(test_table__deleting_while_iterating_backwards),
        };

        return cmocka_run_group_tests_name("table", tests, NULL, NULL);
}
